"""The configurations of a model and of a training run, and the named model sizes, without torch.

:class:`ModelConfig` (the Transformer++ shape), the size ladders (``SIZE_LADDERS``, :func:`get_size`)
and :class:`TrainConfig` (one training run) live here so that reading or checking a configuration,
or printing ``python -m bitlaws train --help``, imports neither torch nor transformers.
:mod:`bitlaws.model` and :mod:`bitlaws.train` re-export every name; use them from there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

__all__ = ["ModelConfig", "LADDER", "SMOKE_LADDER", "COMPUTE_MATCHED", "GPU_LADDER", "GPU_COMPUTE_MATCHED",
           "SIZE_LADDERS", "get_size", "TrainConfig", "peak_lr_rule", "DEVICES", "SCHEDULES"]


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a Transformer++ model.

    Args:
        d_model: residual width C.
        n_layers: number of blocks.
        n_heads: attention heads nh; head size hs = d_model / n_heads.
        d_ff: SwiGLU hidden width.
        vocab_size: 256 for byte-level corpora.
        max_seq_len: longest context T the rotary tables cover.
        rope_theta: rotary base.
        norm_eps: RMSNorm epsilon.
        init_std: std of the normal initialisation of every matrix (transformers' initializer_range).

    Raises:
        ValueError: a non-positive size, or d_model not divisible by n_heads, or an odd head size
            (rotary embeddings rotate pairs of dimensions).
    """

    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 192
    vocab_size: int = 256
    max_seq_len: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for f in ("d_model", "n_layers", "n_heads", "d_ff", "vocab_size", "max_seq_len"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"ModelConfig.{f} must be a positive int, got {v!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} must be divisible by ModelConfig.n_heads={self.n_heads}"
            )
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"ModelConfig.d_model/n_heads = {self.d_model}/{self.n_heads} = {self.d_model // self.n_heads} "
                "(the head size) must be even for rotary embeddings"
            )
        for f in ("init_std", "norm_eps", "rope_theta"):
            if not getattr(self, f) > 0:
                raise ValueError(f"ModelConfig.{f} must be positive, got {getattr(self, f)!r}")

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_heads

    def to_llama(self) -> LlamaConfig:
        """The equivalent transformers ``LlamaConfig`` (untied embeddings, no biases, SDPA attention)."""
        from transformers import LlamaConfig  # here, so that the configs import without torch

        return LlamaConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.d_model,
            intermediate_size=self.d_ff,
            num_hidden_layers=self.n_layers,
            num_attention_heads=self.n_heads,
            num_key_value_heads=self.n_heads,
            head_dim=self.head_size,
            hidden_act="silu",
            max_position_embeddings=self.max_seq_len,
            rms_norm_eps=self.norm_eps,
            rope_theta=self.rope_theta,
            initializer_range=self.init_std,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            use_cache=False,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


# The `cpu` profile's size ladder: widths 32–128, head size 16, d_ff = 8/3·C rounded up to a
# multiple of 32 (Llama's SwiGLU rule).
# Names give N (non-embedding parameters), rounded: n27k has N = 26,784, n1.2m has N = 1,205,888.
LADDER: dict[str, ModelConfig] = {
    "n27k": ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=96),
    "n83k": ModelConfig(d_model=48, n_layers=3, n_heads=3, d_ff=128),
    "n214k": ModelConfig(d_model=64, n_layers=4, n_heads=4, d_ff=192),
    "n554k": ModelConfig(d_model=96, n_layers=5, n_heads=6, d_ff=256),
    "n1.2m": ModelConfig(d_model=128, n_layers=6, n_heads=8, d_ff=352),
}

# Micro models for the `smoke` profile and the tests.
SMOKE_LADDER: dict[str, ModelConfig] = {
    "n3k": ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=48, max_seq_len=64),
    "n14k": ModelConfig(d_model=24, n_layers=2, n_heads=2, d_ff=64, max_seq_len=64),
}


# The compute-matched suite (Kumar et al. Fig. 1 right, at our scale): N·P ≈ 3.42M bit-parameters with
# n214k at 16 bits, so N ≈ 3.42M / P at P = 12, 8, 6, 4. d_ff is tuned (not the 8/3 rule) to bring
# each N·P within 1% of n214k's: n282k 282,304 × 12, n425k 424,800 × 8, n566k 565,536 × 6,
# n851k 850,920 × 4.
COMPUTE_MATCHED: dict[str, ModelConfig] = {
    "n282k": ModelConfig(d_model=64, n_layers=5, n_heads=4, d_ff=208),
    "n425k": ModelConfig(d_model=96, n_layers=4, n_heads=6, d_ff=240),
    "n566k": ModelConfig(d_model=96, n_layers=5, n_heads=6, d_ff=264),
    "n851k": ModelConfig(d_model=120, n_layers=5, n_heads=6, d_ff=312),
}


# The `gpu` profile's ladder: N ≈ 1M–100M in half-decades, head size 64, d_ff = 8/3·C rounded up
# to a multiple of 64, a BPE vocabulary (8192, the `gpu` corpus's; the sweep sets the profile's
# own) and contexts of 512. N: g1.1m 1,066,368; g3.1m 3,099,456; g10m 10,163,520;
# g32m 32,123,392; g99m 99,112,704.
_GPU = dict(vocab_size=8192, max_seq_len=512)
GPU_LADDER: dict[str, ModelConfig] = {
    "g1.1m": ModelConfig(d_model=128, n_layers=5, n_heads=2, d_ff=384, **_GPU),
    "g3.1m": ModelConfig(d_model=192, n_layers=7, n_heads=3, d_ff=512, **_GPU),
    "g10m": ModelConfig(d_model=320, n_layers=8, n_heads=5, d_ff=896, **_GPU),
    "g32m": ModelConfig(d_model=512, n_layers=10, n_heads=8, d_ff=1408, **_GPU),
    "g99m": ModelConfig(d_model=768, n_layers=14, n_heads=12, d_ff=2048, **_GPU),
}

# The `gpu` profile's compute-matched suites, one per compute level: N·P within 1% of N_ref·16
# for the references g1.1m, g3.1m and g10m, at P = 4, 6, 8, 12 (names give N to three digits;
# d_ff tuned in steps of 16, head size 64).
GPU_COMPUTE_MATCHED: dict[str, ModelConfig] = {
    # level of g1.1m (N_ref·16 = 17.06M bit-parameters)
    "g4.23m": ModelConfig(d_model=192, n_layers=9, n_heads=3, d_ff=560, **_GPU),
    "g2.82m": ModelConfig(d_model=192, n_layers=6, n_heads=3, d_ff=560, **_GPU),
    "g2.12m": ModelConfig(d_model=192, n_layers=5, n_heads=3, d_ff=480, **_GPU),
    "g1.41m": ModelConfig(d_model=192, n_layers=3, n_heads=3, d_ff=560, **_GPU),
    # level of g3.1m (49.59M)
    "g12.4m": ModelConfig(d_model=384, n_layers=7, n_heads=6, d_ff=1024, **_GPU),
    "g8.25m": ModelConfig(d_model=320, n_layers=7, n_heads=5, d_ff=800, **_GPU),
    "g6.20m": ModelConfig(d_model=320, n_layers=5, n_heads=5, d_ff=864, **_GPU),
    "g4.15m": ModelConfig(d_model=192, n_layers=9, n_heads=3, d_ff=544, **_GPU),
    # level of g10m (162.6M)
    "g40.8m": ModelConfig(d_model=512, n_layers=13, n_heads=8, d_ff=1360, **_GPU),
    "g27.1m": ModelConfig(d_model=384, n_layers=15, n_heads=6, d_ff=1056, **_GPU),
    "g20.3m": ModelConfig(d_model=320, n_layers=16, n_heads=5, d_ff=896, **_GPU),
    "g13.5m": ModelConfig(d_model=320, n_layers=11, n_heads=5, d_ff=848, **_GPU),
}


# Every named size, by ladder: what `get_size` accepts and `python -m bitlaws train --help` lists.
SIZE_LADDERS: dict[str, dict[str, ModelConfig]] = {
    "cpu": LADDER,
    "smoke": SMOKE_LADDER,
    "cpu compute-matched": COMPUTE_MATCHED,
    "gpu": GPU_LADDER,
    "gpu compute-matched": GPU_COMPUTE_MATCHED,
}


def get_size(name: str) -> ModelConfig:
    """A model size by name, from any ladder of ``SIZE_LADDERS`` (``LADDER``, ``SMOKE_LADDER``,
    ``COMPUTE_MATCHED``, ``GPU_LADDER``, ``GPU_COMPUTE_MATCHED``).

    Raises:
        ValueError: unknown name; the message lists the allowed ones ladder by ladder, in the
            order of ``SIZE_LADDERS`` (as ``python -m bitlaws train --help`` does).
    """
    for ladder in SIZE_LADDERS.values():
        if name in ladder:
            return ladder[name]
    by_ladder = "; ".join(f"{ladder}: {', '.join(map(repr, sizes))}" for ladder, sizes in SIZE_LADDERS.items())
    raise ValueError(f"unknown model size {name!r}; allowed, by ladder: {by_ladder}")


DEVICES = ("cpu", "cuda", "auto")
SCHEDULES = ("cosine", "constant", "wsd")


def peak_lr_rule(d_model: int) -> float:
    """Peak learning rate for width `d_model`: ``3e-3 · (64 / d_model) ** 0.5`` (why: the book's
    methods page, section "The training loop")."""
    return 3e-3 * (64.0 / d_model) ** 0.5


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Args:
        n_tokens: training tokens D (bytes, byte-level), counting repeats; rounded down to whole
            steps of ``batch_size · seq_len``.
        batch_size: sequences per step B.
        seq_len: tokens per sequence T (≤ the model's max_seq_len).
        lr: peak learning rate; None applies :func:`peak_lr_rule`.
        warmup_frac: fraction of steps in the linear warmup.
        min_lr_frac: the cosine ends at this fraction of the peak.
        weight_decay, beta1, beta2, eps, grad_clip: AdamW and clipping.
        seed: initialisation and data order.
        threads: torch CPU threads (results are reproducible for a fixed count).
        eval_tokens: held-out validation tokens per evaluation.
        eval_batch_size: sequences per evaluation forward.
        corpus: corpus name (see :mod:`bitlaws.corpus`).
        max_epochs: refuse budgets past this many passes over the training split.
        log_every: steps between loss-curve points.
        ckpt_every: steps between resumable checkpoints (0: never).
        device: ``"cpu"`` (fp32), ``"cuda"`` (bf16 autocast over fp32 master weights, fused AdamW)
            or ``"auto"`` (CUDA when available). See the book's methods page, "The training loop".
        grad_accum: micro-batches per optimizer step; must divide ``batch_size``.
        compile: run the training forward through ``torch.compile``.
        schedule: the learning-rate schedule after the warmup: ``"cosine"`` (to ``min_lr_frac``
            of the peak at the last step; every committed run), ``"constant"`` (the peak to the
            end) or ``"wsd"`` (warmup-stable-decay: the peak, then a linear decay to
            ``min_lr_frac`` of it over the last ``decay_tokens``). See :func:`bitlaws.train.schedule_lr`.
        warmup_steps: the warmup in steps (None: ``warmup_frac`` of the run's steps). Give it for
            runs of several lengths that must share their first steps (constant and WSD runs).
        decay_tokens: the WSD decay length [tokens] (whole steps); must be ≤ ``n_tokens``.
        train_fraction: train on the first ``train_fraction`` of the training split's tokens only
            (the repetition control: 0.5 doubles the passes over the data at a given D).

    Raises:
        ValueError: a non-positive size or rate, a non-finite number, fractions or betas outside
            [0, 1), a negative seed or ``ckpt_every``, too few tokens for one step, a device not in
            ``DEVICES``, a ``grad_accum`` that does not divide ``batch_size``, a non-bool ``compile``.
    """

    n_tokens: int = 1_000_000
    batch_size: int = 16
    seq_len: int = 256
    lr: float | None = None
    warmup_frac: float = 0.1
    min_lr_frac: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-15
    grad_clip: float = 1.0
    seed: int = 0
    threads: int = 1
    eval_tokens: int = 131_072
    eval_batch_size: int = 32
    corpus: str = "shakespeare"
    max_epochs: float = 4.0
    log_every: int = 10
    ckpt_every: int = 200
    device: str = "cpu"
    grad_accum: int = 1
    compile: bool = False
    schedule: str = "cosine"
    warmup_steps: int | None = None
    decay_tokens: int = 0
    train_fraction: float = 1.0

    def __post_init__(self) -> None:
        for f in ("n_tokens", "batch_size", "seq_len", "threads", "eval_tokens", "eval_batch_size", "log_every",
                  "grad_accum"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"TrainConfig.{f} must be a positive int, got {v!r}")
        if self.n_tokens < self.batch_size * self.seq_len:
            raise ValueError(
                f"TrainConfig.n_tokens={self.n_tokens} is less than one step "
                f"(batch_size·seq_len = {self.batch_size * self.seq_len})"
            )
        if self.lr is not None and not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"TrainConfig.lr must be positive and finite (or None for the rule), got {self.lr!r}")
        for f in ("warmup_frac", "min_lr_frac", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "max_epochs"):
            v = getattr(self, f)  # NaN passes every `<` test, so finiteness is checked first
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"TrainConfig.{f} must be a finite number, got {v!r}")
        for f in ("warmup_frac", "min_lr_frac"):
            v = getattr(self, f)
            if not 0 <= v < 1:
                raise ValueError(f"TrainConfig.{f} must be in [0, 1), got {v!r}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError(f"TrainConfig.beta1/beta2 must be in [0, 1), got {self.beta1}, {self.beta2}")
        if self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be ≥ 0, got {self.weight_decay!r}")
        for f in ("grad_clip", "eps", "max_epochs"):
            if getattr(self, f) <= 0:
                raise ValueError(f"TrainConfig.{f} must be > 0, got {getattr(self, f)!r}")
        for f in ("seed", "ckpt_every"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"TrainConfig.{f} must be an int ≥ 0, got {v!r}")
        if self.device not in DEVICES:
            raise ValueError(f"TrainConfig.device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"TrainConfig.grad_accum={self.grad_accum} must divide batch_size={self.batch_size} "
                             "(equal micro-batches)")
        if not isinstance(self.compile, bool):
            raise ValueError(f"TrainConfig.compile must be True or False, got {self.compile!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"TrainConfig.schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.warmup_steps is not None and (isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int)
                                              or not 0 <= self.warmup_steps <= self.steps):
            raise ValueError(f"TrainConfig.warmup_steps must be None or an int in [0, steps={self.steps}], "
                             f"got {self.warmup_steps!r}")
        if isinstance(self.decay_tokens, bool) or not isinstance(self.decay_tokens, int) or not (
                0 <= self.decay_tokens <= self.n_tokens):
            raise ValueError(f"TrainConfig.decay_tokens must be an int in [0, n_tokens={self.n_tokens}], "
                             f"got {self.decay_tokens!r}")
        if (self.schedule == "wsd") != (self.decay_tokens > 0):
            raise ValueError(f"TrainConfig.decay_tokens={self.decay_tokens} with schedule={self.schedule!r}: the "
                             "decay length is given for, and only for, the 'wsd' schedule")
        f = self.train_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (0 < f <= 1):
            raise ValueError(f"TrainConfig.train_fraction must be in (0, 1], got {f!r}")

    @property
    def steps(self) -> int:
        return self.n_tokens // (self.batch_size * self.seq_len)

    @property
    def tokens_trained(self) -> int:
        """D actually trained: whole steps only."""
        return self.steps * self.batch_size * self.seq_len

    def peak_lr(self, model_cfg: ModelConfig) -> float:
        return self.lr if self.lr is not None else peak_lr_rule(model_cfg.d_model)

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

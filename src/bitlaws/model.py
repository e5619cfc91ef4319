"""Transformer++ language models: transformers' ``LlamaForCausalLM`` built from a ``LlamaConfig``.

Transformer++ (RMSNorm, SwiGLU MLP, rotary position embeddings, no biases) is what Kumar et al.
train ("OLMo-style"); Llama is the same block, so we use transformers' implementation rather than
a fork. Embeddings are untied (the lm_head is its own matrix), so the non-embedding count N is
clean.

**N** (``n_params``) counts every weight inside the blocks plus the final norm: per layer
``4·C²`` (q, k, v, o; as many K/V heads as query heads) ``+ 3·C·d_ff`` (gate, up, down)
``+ 2·C`` (two RMSNorm gains), then ``+ C`` for the final norm. The token embedding and the
lm_head are excluded (bitlaws DESIGN, "Definitions").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

__all__ = ["ModelConfig", "LADDER", "SMOKE_LADDER", "COMPUTE_MATCHED", "GPU_LADDER", "GPU_COMPUTE_MATCHED", "SIZE_LADDERS", "build_model", "count_n_params", "hand_count_n_params", "get_size"]


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
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"head size d_model/n_heads = {self.d_model // self.n_heads} must be even for rotary embeddings"
            )
        if not self.init_std > 0 or not self.norm_eps > 0 or not self.rope_theta > 0:
            raise ValueError("ModelConfig.init_std, norm_eps and rope_theta must be positive")

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_heads

    def to_llama(self) -> LlamaConfig:
        """The equivalent transformers ``LlamaConfig`` (untied embeddings, no biases, SDPA attention)."""
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


def hand_count_n_params(cfg: ModelConfig) -> int:
    """N from the closed form in the module docstring (no model built)."""
    c, f = cfg.d_model, cfg.d_ff
    return cfg.n_layers * (4 * c * c + 3 * c * f + 2 * c) + c


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
        ValueError: unknown name; the message lists the allowed ones.
    """
    sizes = {k: cfg for ladder in SIZE_LADDERS.values() for k, cfg in ladder.items()}
    if name not in sizes:
        raise ValueError(f"unknown model size {name!r}; allowed: {sorted(sizes)}")
    return sizes[name]


def build_model(cfg: ModelConfig, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised fp32 ``LlamaForCausalLM`` for `cfg`, seeded.

    Args:
        cfg: model shape.
        seed: seeds torch's global generator before initialisation (same seed, same weights).

    Returns:
        The model in train mode; ``model(input_ids=(B, T) int64).logits`` is ``(B, T, vocab)`` float32.
    """
    torch.manual_seed(seed)
    llama = cfg.to_llama()
    llama._attn_implementation = "sdpa"
    model = LlamaForCausalLM(llama)
    return model.float()


def count_n_params(model: nn.Module) -> int:
    """N: parameters of the transformer blocks plus the final norm (not embeddings, not lm_head).

    Works on any transformers decoder whose backbone exposes ``.layers`` and ``.norm``
    (Llama, Mistral, Qwen2, ...).

    Raises:
        ValueError: if the model has no ``model.layers``/``model.norm``.
    """
    backbone = getattr(model, "model", None)
    if backbone is None or not hasattr(backbone, "layers") or not hasattr(backbone, "norm"):
        raise ValueError(f"{type(model).__name__} has no .model.layers/.model.norm to count N over")
    return sum(p.numel() for p in backbone.layers.parameters()) + sum(p.numel() for p in backbone.norm.parameters())

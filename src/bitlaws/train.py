"""The training loop: AdamW, cosine schedule with warmup, evaluation, resumable checkpoints.

:func:`train` trains a model from scratch with the recipe of Kumar et al. 2024 (§3), scaled down:
AdamW (β = (0.9, 0.95), ε = 1e-15, weight decay 0.1 on matrices), a linear warmup over 10% of the
steps, a cosine decay to 10% of the peak, clipping at 1.0, and the peak learning rate
``3e-3 · (64 / d_model) ** 0.5`` (:func:`peak_lr_rule`). The data order is a pure function of
(seed, step) (:func:`batch_at`), so a run resumed from its checkpoint ends bit-identical to an
unbroken one. :func:`evaluate` gives the mean cross-entropy in nats per token on the windows that
:func:`eval_windows` lays out (``"first"`` or ``"spread"`` over the validation split). Runs are
fp32 on the CPU by default, bit-reproducible for a fixed seed and thread count; ``device="cuda"``
trains under bf16 autocast over fp32 master weights.

Every choice (the learning-rate rule and why, the data order, the evaluation layouts and units,
determinism, the devices, and the execution fields kept out of run ids) is written out in the
book's methods page, section "The training loop".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

# TrainConfig and its rules live in the torch-free `configs`; they are this module's names too.
from .configs import DEVICES, SCHEDULES, TrainConfig, peak_lr_rule
from .model import ModelConfig, build_model, count_n_params

__all__ = [
    "TrainConfig",
    "TrainResult",
    "peak_lr_rule",
    "lr_at",
    "schedule_lr",
    "SCHEDULES",
    "batch_at",
    "EVAL_LAYOUTS",
    "eval_windows",
    "evaluate",
    "train",
    "DivergedError",
    "resolve_device",
    "DEVICES",
    "move_aside",
]

# Execution fields: how a run is computed, not what it computes. At these defaults they are left
# out of config_dict (and so of run ids), which keeps every committed run_id unchanged.
_EXECUTION_DEFAULTS = {"device": "cpu", "grad_accum": 1, "compile": False}
# Fields added after runs were committed that change what a run computes: left out of config_dict
# at these defaults too (the committed runs used them), present in the id when they differ.
_ADDED_DEFAULTS = {"schedule": "cosine", "warmup_steps": None, "decay_tokens": 0, "train_fraction": 1.0}


def resolve_device(device: str) -> torch.device:
    """The torch device a ``TrainConfig.device`` names on this machine.

    ``auto`` is CUDA when torch sees a GPU, else the CPU.

    Raises:
        ValueError: ``cuda`` on a machine where torch sees no GPU (the message says why), or a
            name not in ``DEVICES``.
    """
    if device not in DEVICES:
        raise ValueError(f"TrainConfig.device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        why = ("this torch is a CPU-only build" if torch.version.cuda is None
               else "torch sees no GPU (no driver or no device)")
        raise ValueError(f"TrainConfig.device='cuda' but CUDA is not available here: {why} "
                         f"(torch {torch.__version__}); use device 'cpu', or 'auto' to take a GPU only when there is one")
    return torch.device(device)


def _autocast(device: torch.device):
    """bf16 autocast on CUDA; nothing on the CPU (fp32 there, as every committed run)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class DivergedError(RuntimeError):
    """The training loss became NaN or Inf."""


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (eval mode).
        status: ``"ok"`` or ``"diverged"`` (``"interrupted"`` after :func:`train`'s `stop_after`).
        loss_val: validation loss [nats/token] (NaN if diverged).
        loss_train: mean training loss over the last ``log_every`` steps [nats/token].
        n_params: N. n_tokens: D trained. steps: optimizer steps (for a run that diverged in
            training, those completed before the non-finite loss, and their tokens).
        wall_s: seconds spent training (not evaluating). curve: one dict per logged step.
    """

    model: torch.nn.Module
    status: str
    loss_val: float
    loss_train: float
    n_params: int
    n_tokens: int
    steps: int
    wall_s: float
    curve: list[dict[str, Any]] = field(default_factory=list)


def schedule_lr(step: int, cfg: "TrainConfig", peak: float) -> float:
    """Learning rate at optimizer step `step` (0-based) of a run with config `cfg`.

    Warmup: linear over ``cfg.warmup_steps`` (or ``warmup_frac`` of the steps) to `peak`. Then
    ``cosine``: :func:`lr_at` (the committed runs, to the bit); ``constant``: `peak`; ``wsd``:
    `peak` until the last ``decay_steps = decay_tokens // (B·T)`` steps, then linearly to
    ``min_lr_frac·peak`` at the last step. Constant and WSD runs with the same ``warmup_steps``
    share their learning rate at every step before the decay, so a WSD run of length D + C is a
    cooldown of C tokens branched from the constant run at D (Hägele et al. 2024, WSD).
    """
    total = cfg.steps
    if cfg.schedule == "cosine" and cfg.warmup_steps is None:
        return lr_at(step, total, peak, cfg.warmup_frac, cfg.min_lr_frac)
    warmup = cfg.warmup_steps if cfg.warmup_steps is not None else (
        max(1, int(round(cfg.warmup_frac * total))) if cfg.warmup_frac > 0 else 0)
    if step < warmup:
        return peak * (step + 1) / warmup
    if cfg.schedule == "cosine":
        progress = (step - warmup) / max(1, total - warmup)
        return peak * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))
    if cfg.schedule == "constant":
        return peak
    decay = max(1, cfg.decay_tokens // (cfg.batch_size * cfg.seq_len))
    start = total - decay
    if step < start:
        return peak
    frac = (step - start + 1) / decay  # reaches 1 at the last step
    return peak * (1 - (1 - cfg.min_lr_frac) * frac)


def lr_at(step: int, total_steps: int, peak: float, warmup_frac: float = 0.1, min_lr_frac: float = 0.1) -> float:
    """Learning rate at optimizer step `step` (0-based): linear warmup, then cosine to ``min_lr_frac·peak``."""
    warmup = max(1, int(round(warmup_frac * total_steps))) if warmup_frac > 0 else 0
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return peak * (min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def batch_at(tokens: np.ndarray, step: int, seed: int, batch_size: int, seq_len: int) -> torch.Tensor:
    """The training batch of optimizer step `step`, a pure function of its arguments.

    Args:
        tokens: (n,) uint8/uint16 — the training split.
        step: 0-based optimizer step. seed: run seed. batch_size: B. seq_len: T.

    Returns:
        (B, T + 1) int64 — inputs are ``[:, :-1]``, targets ``[:, 1:]``.

    Raises:
        ValueError: if the split holds fewer than two windows, 2·(T + 1) tokens.
    """
    win = seq_len + 1
    if len(tokens) < 2 * win:
        raise ValueError(f"training split has {len(tokens)} tokens, fewer than two windows of {win}")
    # Windows per pass, leaving room for a random start offset < seq_len.
    n_win = (len(tokens) - seq_len) // win
    first = step * batch_size
    rows = []
    for i in range(first, first + batch_size):
        epoch, j = divmod(i, n_win)
        offset, perm = _pass_order(seed, epoch, n_win, seq_len)
        start = offset + int(perm[j]) * win
        rows.append(np.asarray(tokens[start : start + win], dtype=np.int64))
    return torch.from_numpy(np.stack(rows))


@functools.lru_cache(maxsize=8)
def _pass_order(seed: int, epoch: int, n_win: int, seq_len: int) -> tuple[int, np.ndarray]:
    """Start offset and window permutation of one pass over the training split."""
    rng = np.random.default_rng([seed, epoch])
    return int(rng.integers(0, seq_len)), rng.permutation(n_win)


EVAL_LAYOUTS = ("first", "spread")


def eval_windows(n_tokens: int, seq_len: int, eval_tokens: int, layout: str = "first") -> np.ndarray:
    """Start offsets of the evaluation windows in a validation split of `n_tokens` tokens.

    The budget is ``n_win = eval_tokens // (T+1)`` non-overlapping windows of T + 1 tokens.
    ``"first"``: window i starts at i·(T+1) (the first ``n_win·(T+1)`` tokens). ``"spread"``:
    window i starts at ``i·(n_tokens − (T+1)) // (n_win − 1)`` — evenly spaced from the first
    token to the last full window, in exact integer arithmetic (the same windows on every machine),
    never overlapping because the split holds at least ``n_win·(T+1)`` tokens.

    Args:
        n_tokens: length of the split. seq_len: T. eval_tokens: the budget in tokens.
        layout: one of :data:`EVAL_LAYOUTS`.

    Returns:
        (n_win,) int64 — increasing start offsets.

    Raises:
        ValueError: an unknown layout, a budget under one window, or one longer than the split.
    """
    if layout not in EVAL_LAYOUTS:
        raise ValueError(f"unknown evaluation layout {layout!r}; allowed: {list(EVAL_LAYOUTS)}")
    win = seq_len + 1
    n_win = eval_tokens // win
    if n_win < 1:
        raise ValueError(f"eval_tokens={eval_tokens} is shorter than one window of {win} tokens")
    if n_win * win > n_tokens:
        raise ValueError(f"eval_tokens={eval_tokens} exceeds the validation split ({n_tokens} tokens)")
    i = np.arange(n_win, dtype=np.int64)
    if layout == "first" or n_win == 1:
        return i * win
    return (i * (n_tokens - win)) // (n_win - 1)


@torch.no_grad()
def evaluate(model: torch.nn.Module, tokens: np.ndarray, seq_len: int, eval_tokens: int, batch_size: int = 32,
             autocast: bool | None = None, layout: str = "first") -> float:
    """Mean cross-entropy [nats/token] of `model` on ``eval_tokens // (T+1)`` validation windows.

    Args:
        model: causal LM; ``model(input_ids=(B, T)).logits`` is ``(B, T, V)``. The windows go to
            the device of its parameters.
        tokens: (n,) integer token ids — the validation split.
        seq_len: T. eval_tokens: budget, cut into ``eval_tokens // (T+1)`` windows of T + 1.
        batch_size: windows per forward.
        autocast: bf16 autocast for the forward; None (default): on CUDA, as :func:`train` runs
            there, and never on the CPU. The loss itself is always summed in fp32.
        layout: where the windows lie (:func:`eval_windows`): ``"first"`` or ``"spread"``.

    Raises:
        ValueError: if the split is shorter than the budget, the budget is under one window, or
            the layout is unknown.
    """
    win = seq_len + 1
    starts = eval_windows(len(tokens), seq_len, eval_tokens, layout)
    n_win = len(starts)
    was_training = model.training
    model.eval()
    param = next(itertools.chain(model.parameters(), model.buffers()), None)
    device = param.device if param is not None else torch.device("cpu")
    use_amp = device.type == "cuda" if autocast is None else bool(autocast)
    idx = starts[:, None] + np.arange(win, dtype=np.int64)[None, :]
    data = torch.from_numpy(np.asarray(tokens[: int(starts[-1]) + win])[idx].astype(np.int64))
    if device.type != "cpu":
        data = data.to(device)
    total, count = 0.0, 0
    for i in range(0, n_win, batch_size):
        chunk = data[i : i + batch_size]
        with torch.autocast(device.type, dtype=torch.bfloat16) if use_amp else contextlib.nullcontext():
            logits = model(input_ids=chunk[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), chunk[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _atomic_torch_save(obj: Any, path: Path) -> None:
    """Save through ``<path>.tmp``: written, fsynced, renamed over `path` (a kill leaves the old file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def move_aside(path: Path, reason: BaseException | str) -> Path:
    """Rename an unreadable checkpoint file to ``<name>.corrupt[.N]`` with a warning, so the run
    can start again without losing the evidence. Returns the new path."""
    import warnings

    dest = path.with_name(path.name + ".corrupt")
    n = 1
    while dest.exists():
        dest = path.with_name(f"{path.name}.corrupt.{n}")
        n += 1
    os.replace(path, dest)
    warnings.warn(f"{path} cannot be read ({str(reason)[:200]}); moved it to {dest.name} and starting again",
                  RuntimeWarning, stacklevel=2)
    return dest


def _load_state(state_path: Path, device: torch.device | str = "cpu") -> dict | None:
    """The resumable state at `state_path`, or None when it is absent or unreadable (moved aside)."""
    (state_path.with_suffix(state_path.suffix + ".tmp")).unlink(missing_ok=True)  # a killed save's orphan
    if not state_path.exists():
        return None
    try:
        state = torch.load(state_path, weights_only=False, map_location=device)
        if not isinstance(state, dict) or not {"model", "optimizer", "step", "curve", "recent", "wall_s"} <= set(state):
            raise ValueError("not a bitlaws training state")
        return state
    except Exception as exc:  # a truncated or garbage file: any unpickling error
        move_aside(state_path, exc)
        return None


def train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    corpus=None,
    run_dir: str | os.PathLike | None = None,
    progress: bool = True,
    stop_after: int | None = None,
    precision=None,
) -> TrainResult:
    """Train a Transformer++ model from scratch and evaluate it.

    Args:
        model_cfg: model shape. train_cfg: budget, optimiser, seed.
        corpus: a :class:`bitlaws.corpus.Corpus`; None loads ``train_cfg.corpus``.
        run_dir: where the resumable checkpoint (``state.pt``) lives; if one is there, training
            resumes from it and ends bit-identical to an unbroken run. None: no checkpoints.
        progress: show a tqdm bar.
        stop_after: stop after this many steps (to simulate an interruption in tests), without
            evaluating; the returned status is ``"interrupted"``.
        precision: a :class:`bitlaws.precision.TrainPrecision` (None: high precision). Its fake
            quantizers are installed before the first step; at the end the weights are baked to
            Q_w(W) and the model is evaluated (and returned) with its activation and KV quantizers
            still installed, i.e. as it trained.

    Returns:
        A :class:`TrainResult`. A NaN/Inf training loss ends the run with status ``"diverged"``
        (its curve kept), never an exception.

    Raises:
        ValueError: `seq_len` past the model's context, a model vocabulary smaller than the
            corpus's, a budget past ``max_epochs`` passes over the training split, an eval budget
            under one window of T + 1 tokens or past the validation split, or ``device="cuda"``
            where torch sees no GPU.
    """
    if corpus is None:
        from .corpus import load_corpus

        corpus = load_corpus(train_cfg.corpus)
    if train_cfg.seq_len > model_cfg.max_seq_len:
        raise ValueError(f"TrainConfig.seq_len={train_cfg.seq_len} exceeds ModelConfig.max_seq_len={model_cfg.max_seq_len}")
    if model_cfg.vocab_size < corpus.vocab_size:
        raise ValueError(f"ModelConfig.vocab_size={model_cfg.vocab_size} < corpus vocabulary {corpus.vocab_size}")
    # The repetition control trains on a leading part of the split (whole works first, in order).
    train_tokens = corpus.train[: int(len(corpus.train) * train_cfg.train_fraction)]
    if len(train_tokens) < train_cfg.seq_len + 1:
        raise ValueError(f"TrainConfig.train_fraction={train_cfg.train_fraction} leaves {len(train_tokens)} training "
                         f"tokens, fewer than one window of seq_len + 1 = {train_cfg.seq_len + 1}")
    limit = train_cfg.max_epochs * len(train_tokens)
    if train_cfg.tokens_trained > limit:
        raise ValueError(
            f"data budget D={train_cfg.tokens_trained:,} tokens exceeds {train_cfg.max_epochs:g} passes over the "
            f"{corpus.name!r} training split ({len(train_tokens):,} tokens, limit {int(limit):,}); "
            "choose a smaller n_tokens or a larger corpus"
        )
    if train_cfg.eval_tokens < train_cfg.seq_len + 1:
        raise ValueError(f"TrainConfig.eval_tokens={train_cfg.eval_tokens} is shorter than one evaluation window "
                         f"of seq_len + 1 = {train_cfg.seq_len + 1} tokens")
    if train_cfg.eval_tokens > len(corpus.val):
        raise ValueError(f"TrainConfig.eval_tokens={train_cfg.eval_tokens} exceeds the validation split ({len(corpus.val)})")

    device = resolve_device(train_cfg.device)  # before any work: a clear error where CUDA is missing
    torch.set_num_threads(train_cfg.threads)
    model = build_model(model_cfg, seed=train_cfg.seed)  # initialised on the CPU, the same weights everywhere
    on_cuda = device.type == "cuda"
    if on_cuda:
        model = model.to(device)
    handle = None
    if precision is not None and not (precision.is_high_precision and not precision.extra_norm):
        from .precision import apply_precision_

        handle = apply_precision_(model, precision)
    model.train()
    peak = train_cfg.peak_lr(model_cfg)
    opt = torch.optim.AdamW(
        _param_groups(model, train_cfg.weight_decay),
        lr=peak,
        betas=(train_cfg.beta1, train_cfg.beta2),
        eps=train_cfg.eps,
        **({"fused": True} if on_cuda else {}),  # the CPU keeps the optimizer its committed runs used
    )
    forward = torch.compile(model) if train_cfg.compile else model
    accum = train_cfg.grad_accum
    total = train_cfg.steps
    start, curve, recent, wall = 0, [], [], 0.0
    state_path = Path(run_dir) / "state.pt" if run_dir is not None else None
    state = _load_state(state_path, device) if state_path is not None else None
    if state is not None:
        try:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            start, curve, recent, wall = state["step"], state["curve"], state["recent"], state["wall_s"]
        except Exception as exc:  # a state of another shape: start again from the same initialisation
            # nothing trained yet: the same call, now without the state (moved aside)
            move_aside(state_path, exc)
            return train(model_cfg, train_cfg, corpus, run_dir, progress, stop_after, precision)

    status, interrupted, reached = "ok", False, total
    # disable=None leaves tqdm's own default, so TQDM_DISABLE=1 in the environment silences it.
    bar = tqdm(total=total, initial=start, desc=f"train N={count_n_params(model):,} D={train_cfg.tokens_trained:,}",
               disable=None if progress else True, leave=False, unit="step")
    t0 = time.perf_counter()
    step = start
    for step in range(start, total):
        if stop_after is not None and step >= stop_after:
            interrupted = True
            break
        lr = schedule_lr(step, train_cfg, peak)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = batch_at(train_tokens, step, train_cfg.seed, train_cfg.batch_size, train_cfg.seq_len)
        if on_cuda:
            batch = batch.to(device, non_blocking=True)
        if accum == 1:
            with _autocast(device):
                logits = forward(input_ids=batch[:, :-1]).logits
            if on_cuda:
                logits = logits.float()
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
            loss_value = loss.item()
        else:
            loss_value = _accumulate(forward, batch, accum, device, opt)
        if not math.isfinite(loss_value):
            status, reached = "diverged", step  # the steps completed before the loss broke
            curve.append({"step": step, "n_tokens_seen": step * train_cfg.batch_size * train_cfg.seq_len,
                          "loss_train": loss_value, "lr": lr})
            break
        if accum == 1:
            opt.zero_grad(set_to_none=True)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
        opt.step()
        recent = (recent + [loss_value])[-train_cfg.log_every :]
        done = step + 1
        if done % train_cfg.log_every == 0 or done == total:
            curve.append({"step": done, "n_tokens_seen": done * train_cfg.batch_size * train_cfg.seq_len,
                          "loss_train": float(np.mean(recent)), "lr": lr})
            bar.set_postfix(loss=f"{np.mean(recent):.3f}")
        bar.update(1)
        if state_path is not None and train_cfg.ckpt_every and done % train_cfg.ckpt_every == 0 and done < total:
            state_path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_torch_save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": done,
                                "curve": curve, "recent": recent, "wall_s": wall + time.perf_counter() - t0},
                               state_path)
    bar.close()
    wall += time.perf_counter() - t0
    n_params = count_n_params(model)
    if interrupted:
        return TrainResult(model, "interrupted", math.nan, math.nan, n_params, train_cfg.tokens_trained,
                           stop_after, wall, curve)
    if handle is not None:
        handle.bake_weights()
    model.eval()
    loss_train = float(np.mean(recent)) if recent else math.nan
    if status == "diverged":
        loss_val = math.nan
    else:
        loss_val = evaluate(model, corpus.val, train_cfg.seq_len, train_cfg.eval_tokens, train_cfg.eval_batch_size)
        if not math.isfinite(loss_val):
            status = "diverged"
    if state_path is not None and state_path.exists():
        state_path.unlink()
    # A diverged run reports the steps and tokens it reached, not those planned.
    tokens = reached * train_cfg.batch_size * train_cfg.seq_len
    return TrainResult(model, status, loss_val, loss_train, n_params, tokens, reached, wall, curve)


def _accumulate(forward, batch: torch.Tensor, accum: int, device: torch.device, opt) -> float:
    """Forward and backward of one step as `accum` equal micro-batches; gradients summed, each
    micro-batch's mean loss weighted 1/accum. Returns the step's mean loss, or the first non-finite
    micro-batch loss (then no gradient of that micro-batch is kept and the caller stops)."""
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for micro in batch.chunk(accum, dim=0):
        with _autocast(device):
            logits = forward(input_ids=micro[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), micro[:, 1:].reshape(-1))
        value = loss.item()
        if not math.isfinite(value):
            return value
        (loss / accum).backward()
        total += value / accum
    return total


def config_dict(model_cfg: ModelConfig, train_cfg: TrainConfig, precision=None) -> dict[str, Any]:
    """The resolved configuration of a run (peak lr filled in, training precision), JSON-serialisable.

    The execution fields ``device``, ``grad_accum`` and ``compile``, and the fields added after runs
    were committed (``schedule``, ``warmup_steps``, ``decay_tokens``, ``train_fraction``), appear
    only where they differ from their defaults, so adding them left every existing ``run_id`` unchanged.
    """
    d = {"model": dataclasses.asdict(model_cfg), "train": dataclasses.asdict(train_cfg)}
    for f, default in {**_EXECUTION_DEFAULTS, **_ADDED_DEFAULTS}.items():
        if d["train"][f] == default:
            del d["train"][f]
    d["train"]["lr"] = train_cfg.peak_lr(model_cfg)
    d["precision"] = precision.id_dict() if precision is not None else {"w": None, "a": None, "kv": None}
    return json.loads(json.dumps(d))

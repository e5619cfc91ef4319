"""GPTQ: post-training weight quantization with second-order error feedback.

For one linear layer ``y = W x`` the goal is ``argmin_Ŵ ||W X − Ŵ X||_F²`` with every row of Ŵ on
a fixed quantization grid. Rows are independent and share the Hessian ``H = 2/n Σ_tokens x xᵀ``
``(in, in)``. GPTQ quantizes the input columns one at a time in one fixed order for all rows and,
after each column, moves the rounding error onto the not-yet-quantized columns with the Optimal
Brain Surgeon update, read off a Cholesky factor of ``H⁻¹`` (Frantar et al. 2022, Algorithm 1).

Choices, after the reference code (IST-DASLab/gptq, ``gptq.py`` and ``quant.py``) unless noted:

* **Grid.** Exactly :mod:`bitlaws.quant`'s, so GPTQ and RTN share it: asymmetric min-max per
  output channel with the range widened to include 0 (default), or symmetric absmax. Scales of
  the whole row (``group_size = 0``) or of each static group are fitted once, before permuting,
  on the base columns of ``W`` after the dead columns are zeroed; with ``mse=True`` each fit
  searches shrunken ranges ``p·[min, max]``, ``p = 1 − i/grid`` for ``i < maxshrink·grid``, and
  keeps, per row, the lowest ``Σ |x̂ − x|^norm`` (reference ``Quantizer.find_params``).
* **Dead inputs** (``H_ii == 0``): ``H_ii = 1`` and ``W[:, i] = 0``. A layer whose quantized
  columns are *all* dead (an all-zero H) is refused with a ``ValueError``, not returned zeroed.
* **Damping.** ``H + λ I`` with ``λ = damp · mean(diag H)``. If a Cholesky factorisation fails the
  damp is doubled (capped at ``max_damp``) and tried again *from the original H*. If every damp
  fails, the same schedule runs once more on ``H / mean(diag H)`` (GPTQ's weights do not depend
  on H's scale; this rescues float32 Hessians whose entries approach 1e38 or underflow, where the
  factorisation over/underflows); past that a ``ValueError`` is raised — never a silent fall back
  to RTN. The damp used is reported. (The reference has no retry; GPTQModel retries with a
  growing damp.) A float32 solve warns (:class:`GPTQPrecisionWarning`) where it is likely to
  differ from float64: λ under 16 float32 eps of the largest ``H_jj``, or ``U_jj²`` spanning more
  than 1e6 (measured: damp 1e-6 on an H of condition 1e10 changes 45% of the weights).
* **Cholesky form.** ``U = chol(H⁻¹)`` upper; ``U`` is never updated. For column ``j``:
  ``q = quant(w_j)``, ``err = (w_j − q) / U_jj``, ``W[:, j:] −= err ⊗ U[j, j:]``, loss
  ``+= (w_j − q)² / U_jj² / 2``. Lazy batches: inside a block of ``block_size`` columns the update
  is immediate; the later columns get the block's errors in one GEMM ``W[:, i2:] −= E U[i1:i2, i2:]``.
  The update inside a block is a product then a subtraction (two roundings), as the reference's,
  on a row-major copy of U's diagonal block: our weights equal the reference's to the bit, and the
  solve is as fast (``bench/gptq_speed.py`` times both in one run).
* **act-order**: process columns by descending ``diag H`` (stable sort), un-permute at the end.
* **Groups.** *Static*: one quantizer per contiguous original-order group, fitted before
  permuting, so no ``g_idx`` is needed at inference. *Dynamic* (reference default): a group is
  fitted when processing reaches its first column, on the current, error-updated weights of the
  next ``group_size`` columns in processing order; ``g_idx`` maps each original column to its
  group. Unlike the reference (which reads stale, not-yet-updated weights when a group starts in
  the middle of a block), we fit on the exactly updated weights, so the result does not depend
  on ``block_size``.
* **Kept columns** (``n_keep_last = k``): the last k input columns — where QUIK permutes its
  outlier features — are never quantized. They receive the error updates of every earlier column
  (they absorb the error, QUIK §3.2) and come out as those updated values; scales are fitted on
  the base columns only; act-order permutes among the base columns only.

Model-level driver :func:`gptq_quantize_` works block by block and "true-sequential": inside each
decoder layer the groups ``[q, k, v] → [o] → [gate, up] → [down]`` are calibrated one after the
other, each on inputs computed with the already quantized earlier groups (and blocks); the
quantized block's outputs are then the next block's inputs. Layers whose linears are not all
Llama-named are calibrated all at once from the block input (the reference's OPT way).

The Hessian is a running mean over calibration *tokens* (the reference counts sequences; the
scale is irrelevant to the algorithm since damping is relative), so ``n_tokens/2 · tr(ΔW H ΔWᵀ)``
is exactly the summed output error ``||W X − Ŵ X||_F²`` over the calibration tokens.

References:
    Frantar, Ashkboos, Hoefler, Alistarh 2022, "GPTQ" (arXiv 2210.17323), Algorithm 1 and §4;
    IST-DASLab/gptq (act-order, static groups, true-sequential, MSE grid);
    Ashkboos et al. 2023, "QUIK" (arXiv 2310.09259), §3.2 (outlier columns kept last).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
from torch import nn

from ..quant import PerChannel, choose_qparams, dequantize, quantize
from . import _check_finite, block_linears

__all__ = [
    "GPTQConfig",
    "GPTQInfo",
    "HessianAccumulator",
    "capture_hessians",
    "gptq_weight",
    "rtn_weight",
    "output_error",
    "calibration_batch",
    "gptq_quantize_",
    "TRUE_SEQUENTIAL_ORDER",
    "GPTQPrecisionWarning",
]

DAMP_GROWTH = 2.0  # factor applied to the relative damp after a failed Cholesky


class GPTQPrecisionWarning(RuntimeWarning):
    """A float32 GPTQ solve on an ill-conditioned, barely damped H (see ``gptq_weight``)."""


# Llama's sub-groups of a block in calibration order ("true-sequential", reference --true-sequential).
TRUE_SEQUENTIAL_ORDER: tuple[tuple[str, ...], ...] = (
    ("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",),
)


def _is_int(v, lo: int, hi: float = math.inf) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and lo <= v <= hi


@dataclass(frozen=True)
class GPTQConfig:
    """GPTQ weight quantization.

    Args:
        bits: weight bits P_post, 2 to 16.
        symmetric: absmax without zero point (True) or min-max with zero point (False, default;
            the same grid as ``RTNConfig``).
        group_size: 0 for one scale per output channel, else the size of input-column groups.
        act_order: process columns by descending ``diag H``. Default False, as the reference and
            the paper's Algorithm 1; it usually helps (reference README, LLaMA).
        static_groups: fit every group before permuting (needs ``group_size > 0``).
        damp: relative damping ``λ / mean(diag H)`` (reference ``--percdamp .01``).
        max_damp: the largest relative damp tried; after a failed Cholesky the damp is doubled
            (``DAMP_GROWTH``), the last try being ``max_damp`` itself.
        block_size: columns per lazy batch B (128 as the reference).
        mse: search shrunken ranges for the lowest ``Σ |x̂ − x|^mse_norm`` (weight clipping).
        mse_grid, mse_maxshrink, mse_norm: that search: ``p = 1 − i/grid``, ``i < maxshrink·grid``
            (reference 100, 0.8, 2.4).
        n_calib: calibration sequences (reference 128).
        calib_seq_len: tokens per calibration sequence; None means the training ``seq_len``.
        seed: seed of the calibration windows.
        calib_batch_size: sequences per forward during calibration (memory only, not the result).
        true_sequential: calibrate q/k/v, o, gate/up, down one after the other within a block
            (True) or all linears of a block from the block input at once (False).
        hessian_dtype: ``"float32"`` (reference) or ``"float64"`` for H and the solve.

    The driver :func:`gptq_quantize_` takes the calibration tokens ready-made: draw them with
    :func:`calibration_batch` (n_calib, calib_seq_len, seed) from the training split.

    Raises:
        ValueError: a field out of range, naming it.
    """

    bits: int = 4
    symmetric: bool = False
    group_size: int = 0
    act_order: bool = False
    static_groups: bool = False
    damp: float = 0.01
    max_damp: float = 1.0
    block_size: int = 128
    mse: bool = False
    mse_grid: int = 100
    mse_maxshrink: float = 0.8
    mse_norm: float = 2.4
    n_calib: int = 128
    calib_seq_len: int | None = None
    seed: int = 0
    calib_batch_size: int = 16
    true_sequential: bool = True
    hessian_dtype: str = "float32"

    def __post_init__(self) -> None:
        if not _is_int(self.bits, 2, 16):
            raise ValueError(f"GPTQConfig.bits must be an int in [2, 16], got {self.bits!r}")
        for f in ("symmetric", "act_order", "static_groups", "mse", "true_sequential"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"GPTQConfig.{f} must be a bool, got {getattr(self, f)!r}")
        if not _is_int(self.group_size, 0):
            raise ValueError(f"GPTQConfig.group_size must be 0 (per channel) or a positive int, got {self.group_size!r}")
        if self.static_groups and not self.group_size:
            raise ValueError("GPTQConfig.static_groups needs group_size > 0 (per-channel scales are always static)")
        if not (isinstance(self.damp, (int, float)) and not isinstance(self.damp, bool)
                and math.isfinite(self.damp) and self.damp > 0):
            raise ValueError(f"GPTQConfig.damp must be a positive finite number, got {self.damp!r}")
        if not (isinstance(self.max_damp, (int, float)) and math.isfinite(self.max_damp) and self.max_damp >= self.damp):
            raise ValueError(f"GPTQConfig.max_damp must be finite and ≥ damp ({self.damp}), got {self.max_damp!r}")
        for f in ("block_size", "mse_grid", "n_calib", "calib_batch_size"):
            if not _is_int(getattr(self, f), 1):
                raise ValueError(f"GPTQConfig.{f} must be a positive int, got {getattr(self, f)!r}")
        if not (0 < self.mse_maxshrink <= 1):
            raise ValueError(f"GPTQConfig.mse_maxshrink must be in (0, 1], got {self.mse_maxshrink!r}")
        if not (self.mse_norm > 0 and math.isfinite(self.mse_norm)):
            raise ValueError(f"GPTQConfig.mse_norm must be positive and finite, got {self.mse_norm!r}")
        if self.calib_seq_len is not None and not _is_int(self.calib_seq_len, 1):
            raise ValueError(f"GPTQConfig.calib_seq_len must be None or a positive int, got {self.calib_seq_len!r}")
        if not _is_int(self.seed, 0):
            raise ValueError(f"GPTQConfig.seed must be a non-negative int, got {self.seed!r}")
        if self.hessian_dtype not in ("float32", "float64"):
            raise ValueError(f"GPTQConfig.hessian_dtype must be 'float32' or 'float64', got {self.hessian_dtype!r}")

    @property
    def method(self) -> str:
        """The results' ``ptq_method`` column."""
        return "gptq"

    @property
    def quant_scheme(self) -> str:
        """The results' ``quant_scheme``: RTN's name (``asym_per_channel``, ``sym_group128``) plus
        ``_actorder``, ``_static`` and ``_mse`` suffixes for the options that are on."""
        kind = "sym" if self.symmetric else "asym"
        gran = f"group{self.group_size}" if self.group_size else "per_channel"
        suffix = "_actorder" * self.act_order + "_static" * self.static_groups + "_mse" * self.mse
        return f"{kind}_{gran}{suffix}"

    @property
    def torch_hessian_dtype(self) -> torch.dtype:
        return torch.float64 if self.hessian_dtype == "float64" else torch.float32


@dataclass(frozen=True)
class GPTQInfo:
    """What :func:`gptq_weight` did to one layer.

    Attributes:
        damp: relative damp used (``λ / mean(diag H)``). damp_tries: Cholesky attempts (1 = no retry).
        n_dead: dead input columns (``H_ii == 0``), zeroed.
        gptq_loss: Σ over columns of ``(w − q)² / U_jj² / 2`` — equals ``½ tr(ΔW (H + λI) ΔWᵀ)``.
        perm: (in,) int64 processing order (act-order), or None.
        g_idx: (in,) int64 group of each original column (−1 for kept columns), or None per channel.
        scale, zero_point: (out, n_groups) float32 quantizer parameters (n_groups = 1 per channel),
            indexed by ``g_idx``.
        n_keep_last: kept (unquantized) trailing columns.
    """

    damp: float
    damp_tries: int
    n_dead: int
    gptq_loss: float
    perm: torch.Tensor | None
    g_idx: torch.Tensor | None
    scale: torch.Tensor
    zero_point: torch.Tensor
    n_keep_last: int = 0


# ---------------------------------------------------------------------------------------------
# the grid (bitlaws.quant's formulas)


def _qrange(bits: int, symmetric: bool) -> tuple[int, int]:
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if symmetric else (0, 2**bits - 1)


def _fit(x: torch.Tensor, cfg: GPTQConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (scale, zero_point), each (out, 1) float32, for the columns `x` (out, k)."""
    fmt = f"int{cfg.bits}"
    if not cfg.mse:
        return choose_qparams(x, fmt, PerChannel(0), cfg.symmetric)
    q_min, q_max = _qrange(cfg.bits, cfg.symmetric)
    xf = x.detach().float()
    if cfg.symmetric:
        hi0 = xf.abs().amax(dim=1, keepdim=True)
        lo0 = torch.zeros_like(hi0)
    else:
        lo0 = xf.amin(dim=1, keepdim=True).clamp(max=0)
        hi0 = xf.amax(dim=1, keepdim=True).clamp(min=0)
    best = torch.full_like(hi0, math.inf)
    best_scale, best_zero = torch.ones_like(hi0), torch.zeros_like(hi0)
    for i in range(int(cfg.mse_maxshrink * cfg.mse_grid)):
        p = 1 - i / cfg.mse_grid
        lo, hi = p * lo0, p * hi0
        if cfg.symmetric:
            scale = hi / torch.full_like(hi, q_max)
            scale = torch.where(scale == 0, torch.ones_like(scale), scale)
            zero = torch.zeros_like(scale)
        else:
            span = hi - lo
            scale = span / torch.full_like(span, q_max - q_min)
            scale = torch.where(scale == 0, torch.ones_like(scale), scale)
            zero = torch.round(-lo / scale).clamp(q_min, q_max)
        err = (_fake(xf, scale, zero, cfg) - xf).abs().pow(cfg.mse_norm).sum(dim=1, keepdim=True)
        better = err < best
        best = torch.where(better, err, best)
        best_scale = torch.where(better, scale, best_scale)
        best_zero = torch.where(better, zero, best_zero)
    return best_scale, best_zero


def _fake(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, cfg: GPTQConfig) -> torch.Tensor:
    """``dequantize(quantize(x))`` on the per-row grid, float32, x: (out, k)."""
    fmt = f"int{cfg.bits}"
    return dequantize(quantize(x, scale, zero, fmt, cfg.symmetric), scale, zero)


def _fake_column(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, q_min: int, q_max: int) -> torch.Tensor:
    """One column on its grid: :func:`_fake` of ``w[:, None]``, to the bit, without its overhead.

    ``w``: (out,) float32/float64; ``scale``, ``zero``: (out,) float32. The same operations as
    ``dequantize(quantize(...))`` in the same order: ``clamp(round(w / scale) + zero)`` in w's
    dtype, then ``(q − zero) · scale`` in float32 (the int32 round trip of :func:`quantize` is
    exact for these integer values, so it is skipped), returned in w's dtype. ``w`` must be finite.
    """
    t = torch.div(w, scale)
    t.round_().add_(zero).clamp_(q_min, q_max)
    if t.dtype == torch.float32:  # (a no-op .float()/.to() costs as much as an op on 4096 values)
        return t.sub_(zero).mul_(scale)
    return t.float().sub_(zero).mul_(scale).to(w.dtype)


# ---------------------------------------------------------------------------------------------
# the per-layer algorithm


def _check_layer(W: torch.Tensor, H: torch.Tensor, n_keep_last: int, cfg: GPTQConfig, name: str) -> None:
    if not isinstance(W, torch.Tensor) or W.dim() != 2 or not torch.is_floating_point(W):
        raise ValueError(f"{name}: W must be a 2-D floating tensor (out, in), got "
                         f"{getattr(W, 'shape', type(W).__name__)} {getattr(W, 'dtype', '')}")
    n_in = W.shape[1]
    if not isinstance(H, torch.Tensor) or tuple(H.shape) != (n_in, n_in) or not torch.is_floating_point(H):
        raise ValueError(f"{name}: H must be a floating tensor of shape (in, in) = ({n_in}, {n_in}), "
                         f"got {getattr(H, 'shape', type(H).__name__)}")
    if W.numel() == 0:
        raise ValueError(f"{name}: W is empty {tuple(W.shape)}")
    if not _all_finite(W):
        raise ValueError(f"{name}: weight contains NaN or Inf; refusing to quantize it")
    if not _all_finite(H):
        raise ValueError(f"{name}: Hessian contains NaN or Inf (non-finite calibration inputs?)")
    if (H.diagonal() < 0).any():
        raise ValueError(f"{name}: Hessian has a negative diagonal entry; it is not a Gram matrix Σ x xᵀ")
    if not _is_int(n_keep_last, 0, n_in - 1):
        raise ValueError(f"{name}: n_keep_last must be an int in [0, in - 1 = {n_in - 1}], got {n_keep_last!r}")
    n_base = n_in - n_keep_last
    if bool((H.diagonal()[:n_base] == 0).all()):
        raise ValueError(f"{name}: every one of the {n_base} quantized input columns is dead (H_jj == 0: the layer "
                         "saw only zeros there, or H is all zero), so there is nothing to calibrate and GPTQ would "
                         "return a zeroed layer; check the calibration data or the hooks that filled H")
    if cfg.group_size and n_base % cfg.group_size:
        raise ValueError(f"{name}: the {n_base} quantized input columns are not a multiple of group_size {cfg.group_size}")


def _all_finite(t: torch.Tensor) -> bool:
    """``isfinite(t).all()`` at the cost of one sum: a finite sum has no NaN or Inf in it, and a
    sum that is not finite (NaN/Inf in `t`, or finite values whose sum overflows) is settled by the
    elementwise test. (The elementwise test alone costs ~20x a sum: it writes a bool per entry.)"""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


def _try_damps(H: torch.Tensor, cfg: GPTQConfig) -> tuple[torch.Tensor | None, float, int, list[float]]:
    """The damp schedule on one H: (U or None, damp of the success, tries, damps tried)."""
    diag_mean = H.diagonal().mean()
    damp, tries, tried = float(cfg.damp), 0, []
    while True:
        tries += 1
        tried.append(damp)
        Hd = H.clone()
        Hd.diagonal().add_(damp * diag_mean)
        L, info = torch.linalg.cholesky_ex(Hd)
        if int(info) == 0:
            U, info = torch.linalg.cholesky_ex(torch.cholesky_inverse(L), upper=True)
            if int(info) == 0 and _all_finite(U):
                return U, damp, tries, tried
        if damp >= cfg.max_damp:
            return None, damp, tries, tried
        damp = min(damp * DAMP_GROWTH, float(cfg.max_damp))


def _inverse_cholesky_upper(H: torch.Tensor, cfg: GPTQConfig, name: str) -> tuple[torch.Tensor, float, int, float]:
    """``U = chol((H + λI)⁻¹)`` upper, retrying from the original H with a growing damp.

    Returns (U, relative damp used, tries, c): with ``c = 1`` U is the factor of H itself. If every
    damp fails on H (in float32 that happens when H's entries are so large or small that the
    factorisation or the inverse over/underflows, e.g. entries near 1e38), the schedule is run
    again on ``H / c``, ``c = mean(diag H)`` (computed in float64): GPTQ's updates do not depend on
    H's scale, ``U = U_c / sqrt(c)``, so the loop runs on ``U_c`` and the loss is multiplied by c.
    """
    U, damp, tries, tried = _try_damps(H, cfg)
    if U is not None:
        return U, damp, tries, 1.0
    c = float(H.diagonal().double().mean())
    if c != 1.0 and 0 < c < math.inf:
        U, damp, tries_c, tried_c = _try_damps((H.double() / c).to(H.dtype), cfg)
        tries += tries_c
        if U is not None:
            return U, damp, tries, c
        tried += [f"{d:g} on H / mean(diag H)" for d in tried_c]
    raise ValueError(
        f"{name}: Cholesky of the damped Hessian failed for every relative damp tried "
        f"{[d if isinstance(d, str) else f'{d:g}' for d in tried]} up to max_damp={cfg.max_damp:g}; H is not "
        f"positive definite (GPTQ does not fall back to RTN; raise GPTQConfig.max_damp or check the calibration data)")


def _check_precision(hdiag: torch.Tensor, U: torch.Tensor, damp: float, name: str) -> None:
    """Warn where a float32 solve is likely to differ from a float64 one (ill-conditioned H).

    Two signs, either one enough: the damp ``λ = damp·mean(diag H)`` is under 16 float32 eps of
    the largest ``H_jj`` (it barely changes that entry, so it does not bound the condition
    number), or the squared diagonal of U spans more than 1e6 (``U_jj²`` is column j's variance
    given the later columns under ``(H + λI)⁻¹``; its spread is a lower bound on the condition
    number). Measured here: damp 1e-6 on an H of condition 1e8–1e10 trips the first (λ ≈ 4 eps;
    the float32 solve differs from float64 in 30–45% of the weights, with 3–6% more error); damp
    0.01 on the committed checkpoints' layers and on the benchmark's layers gives λ ≥ 670 eps and
    a span ≤ 7e3.
    """
    eps = torch.finfo(torch.float32).eps
    hdiag = hdiag.double()
    lam = damp * float(hdiag.mean())
    lam_eps = lam / (eps * float(hdiag.max()))
    u2 = U.diagonal().double() ** 2
    span = float(u2.max() / u2.min())
    if lam_eps < 16 or span > 1e6:
        warnings.warn(
            f"{name}: the float32 GPTQ solve is likely inaccurate: the damp λ = {damp:g}·mean(diag H) is "
            f"{lam_eps:.3g} float32 eps of the largest H_jj (warned under 16) and U_jj² spans {span:.3g} "
            f"(warned over 1e6); use GPTQConfig(hessian_dtype='float64') or a larger damp",
            GPTQPrecisionWarning, stacklevel=3)


@torch.no_grad()
def gptq_weight(W: torch.Tensor, H: torch.Tensor, cfg: GPTQConfig, n_keep_last: int = 0,
                name: str = "weight") -> tuple[torch.Tensor, GPTQInfo]:
    """GPTQ of one weight matrix (Frantar et al. 2022, Algorithm 1; choices in the module docstring).

    Args:
        W: (out, in) float — the layer's weight, ``nn.Linear`` layout; not modified.
        H: (in, in) float32/float64 — ``2/n Σ x xᵀ`` of the layer's inputs (any positive scale).
            The solve runs in float64 if W or H is float64, else float32.
        cfg: grid, groups, order, damping, block size.
        n_keep_last: the last k input columns are not quantized (QUIK's outliers, permuted last
            by the caller): they absorb the error updates and come back updated, not original.
        name: used in error messages.

    Returns:
        W_hat: (out, in) in W's dtype — base columns on the grid, kept columns updated.
        info: :class:`GPTQInfo` (damp used, permutation, g_idx, scales, GPTQ loss).

    Raises:
        ValueError: wrong shapes, NaN/Inf in W or H, a negative diagonal in H, every quantized
            column dead (``H_jj == 0``), n_keep_last out of range, a group size not dividing the
            base columns, or a Hessian that is not positive definite even at ``cfg.max_damp``
            (at H's scale and at unit scale). Every message starts with `name`.

    Warns:
        GPTQPrecisionWarning: a float32 solve on an ill-conditioned, barely damped H (module
            docstring); the result is returned unchanged — use ``hessian_dtype="float64"`` or a
            larger damp.
    """
    _check_layer(W, H, n_keep_last, cfg, name)
    dtype = torch.float64 if torch.float64 in (W.dtype, H.dtype) else torch.float32
    out_dtype = W.dtype
    W = W.detach().to(dtype).clone()
    H = H.detach().to(dtype)  # the caller's H where no dead column needs writing: never modified
    n_out, n_in = W.shape
    n_base = n_in - n_keep_last
    g = cfg.group_size

    dead = H.diagonal() == 0
    if bool(dead.any()):
        H = H.clone()
        H.diagonal()[dead] = 1
        W[:, dead] = 0

    static: list[tuple[torch.Tensor, torch.Tensor]] = []
    if not g:
        static = [_fit(W[:, :n_base], cfg)]
    elif cfg.static_groups:
        static = [_fit(W[:, s:s + g], cfg) for s in range(0, n_base, g)]

    perm = None
    if cfg.act_order:
        order = torch.argsort(H.diagonal()[:n_base], descending=True, stable=True)
        perm = torch.cat([order, torch.arange(n_base, n_in, device=order.device)])
        W, H = W[:, perm], H[perm][:, perm]

    U, damp, tries, h_scale = _inverse_cholesky_upper(H, cfg, name)
    if dtype == torch.float32:
        _check_precision(H.diagonal().double() / h_scale, U, damp, name)

    Q = torch.empty_like(W)
    dynamic: list[tuple[torch.Tensor, torch.Tensor]] = []
    loss = torch.zeros((), dtype=dtype, device=W.device)
    scale, zero = static[0] if static else (None, None)
    s1, z1 = (scale.squeeze(1), zero.squeeze(1)) if static else (None, None)  # (out,) views
    q_min, q_max = _qrange(cfg.bits, cfg.symmetric)
    B = cfg.block_size
    for i1 in range(0, n_base, B):
        i2 = min(i1 + B, n_base)
        W1 = W[:, i1:i2].clone()
        E1 = torch.zeros_like(W1)
        Q1 = torch.empty_like(W1)  # a column of the block stays in cache; one of Q would not
        # cholesky_ex(upper=True) returns U column-major, so U[i, i:] is a strided vector and an
        # outer-product update with it costs ~8x a contiguous one: copy the diagonal block
        # row-major once per block. The update is a product then a subtraction, two roundings, as
        # the reference's (and as addr_ with a strided vector; addr_ with a contiguous one fuses
        # them into an FMA, which changes the last bits).
        U1 = U[i1:i2, i1:i2].contiguous()
        for i in range(i2 - i1):
            j = i1 + i
            if g and cfg.static_groups:
                scale, zero = static[int(perm[j] if perm is not None else j) // g]
                s1, z1 = scale.squeeze(1), zero.squeeze(1)
            elif g and j % g == 0:
                cur = W1[:, i:i + g]
                if j + g > i2:  # the group runs past this block: add the block's pending updates
                    rest = W[:, i2:j + g] - E1[:, :i] @ U[i1:j, i2:j + g]
                    cur = torch.cat([cur, rest], dim=1)
                scale, zero = _fit(cur, cfg)
                dynamic.append((scale, zero))
                s1, z1 = scale.squeeze(1), zero.squeeze(1)
            w = W1[:, i]
            q = _fake_column(w, s1, z1, q_min, q_max)
            d = U1[i, i]
            err = (w - q) / d
            loss += (err * err).sum() / 2
            W1[:, i:] -= err[:, None] * U1[i, i:][None, :]
            E1[:, i] = err
            Q1[:, i] = q
        Q[:, i1:i2] = Q1
        W[:, i2:] -= E1 @ U[i1:i2, i2:]
    Q[:, n_base:] = W[:, n_base:]

    g_idx = None
    if g:
        proc_group = torch.arange(n_base, device=W.device) // g
        g_idx = torch.full((n_in,), -1, dtype=torch.int64, device=W.device)
        if cfg.static_groups or perm is None:
            g_idx[:n_base] = torch.arange(n_base, device=W.device) // g
        else:
            g_idx[perm[:n_base]] = proc_group
    params = static if (not g or cfg.static_groups) else dynamic
    if perm is not None:
        Q = Q[:, torch.argsort(perm)]
    info = GPTQInfo(
        damp=damp, damp_tries=tries, n_dead=int(dead.sum()), gptq_loss=float(loss) * h_scale,
        perm=perm, g_idx=g_idx,
        scale=torch.cat([s for s, _ in params], dim=1), zero_point=torch.cat([z for _, z in params], dim=1),
        n_keep_last=n_keep_last,
    )
    return Q.to(out_dtype), info


@torch.no_grad()
def rtn_weight(W: torch.Tensor, cfg: GPTQConfig, n_keep_last: int = 0) -> torch.Tensor:
    """Round-to-nearest on GPTQ's grid, without error feedback (the reference's ``--nearest``).

    Per channel or per contiguous group, fitted on the base columns of `W` (MSE search if
    ``cfg.mse``); the last `n_keep_last` columns are returned unchanged. With ``mse=False`` this is
    exactly :func:`bitlaws.ptq.rtn.rtn_quantize_`'s grid.

    Args:
        W: (out, in) float. cfg: grid. n_keep_last: trailing columns left alone.

    Returns:
        (out, in) float32.

    Raises:
        ValueError: NaN/Inf in W, a group size not dividing the base columns.
    """
    n_base = W.shape[1] - n_keep_last
    if not _all_finite(W):
        raise ValueError("weight contains NaN or Inf; refusing to quantize it")
    g = cfg.group_size or n_base
    if n_base % g:
        raise ValueError(f"{n_base} quantized input columns are not a multiple of group_size {g}")
    out = W.detach().float().clone()
    for s in range(0, n_base, g):
        scale, zero = _fit(out[:, s:s + g], cfg)
        out[:, s:s + g] = _fake(out[:, s:s + g], scale, zero, cfg)
    return out


@torch.no_grad()
def output_error(W: torch.Tensor, W_hat: torch.Tensor, H: torch.Tensor, n_tokens: int) -> float:
    """``||W X − Ŵ X||_F²`` summed over the n calibration tokens, from ``H = 2/n Σ x xᵀ``.

    Equals ``n/2 · tr(ΔW H ΔWᵀ)`` (computed in float64).

    Args:
        W, W_hat: (out, in) float. H: (in, in) float — the undamped running-mean Hessian.
        n_tokens: n, the tokens H averages over.
    """
    dW = (W.double() - W_hat.double())
    return float(n_tokens / 2 * ((dW @ H.double()) * dW).sum())


# ---------------------------------------------------------------------------------------------
# Hessians from forward hooks


class HessianAccumulator:
    """Running ``H = 2/n Σ x xᵀ`` over the n input tokens of one linear layer, and ``max |x|``.

    Update for m new tokens (as the reference, counting tokens): ``H ← H·n/(n+m)``,
    ``x ← sqrt(2/(n+m))·x``, ``H += xᵀ x``. One pass over the inputs besides the GEMM and the
    scaling: ``max |x|`` per feature (as ``max(max x, −min x)``, no temporary), whose finiteness
    is the inputs' (NaN and ±Inf propagate through both reductions).

    Args:
        n_features: in, the layer's input features.
        dtype: H's dtype, ``torch.float32`` (the reference's) or ``torch.float64``. Half
            precision is refused: ``x xᵀ`` overflows float16 at inputs of about 256.
        device: H's device. name: the module's name, for errors.

    Attributes:
        H: (in, in) float32/float64. n_tokens: tokens seen.
        absmax: (in,) float32 — per input channel max |x| (QUIK's outlier statistic).
        name: the module's name, for errors.

    Raises:
        ValueError: `dtype` is not float32 or float64; `n_features` not a positive int.
    """

    def __init__(self, n_features: int, dtype: torch.dtype = torch.float32, device=None, name: str = "") -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{name or 'HessianAccumulator'}: H's dtype must be torch.float32 or torch.float64, "
                             f"got {dtype} (half precision overflows: x·xᵀ passes 65504 at |x| ≈ 256)")
        if not _is_int(n_features, 1):
            raise ValueError(f"{name or 'HessianAccumulator'}: n_features must be a positive int, got {n_features!r}")
        self.name = name
        self.H = torch.zeros(n_features, n_features, dtype=dtype, device=device)
        self.absmax = torch.zeros(n_features, dtype=torch.float32, device=device)
        self.n_tokens = 0

    @torch.no_grad()
    def add(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Add the tokens of `x`: (..., in) float; `mask`: bool of ``x.shape[:-1]`` (True = real token).

        `x` is not modified.

        Raises:
            ValueError: wrong feature size or mask shape, or NaN/Inf in the kept tokens.
        """
        n_feat = self.H.shape[0]
        if x.shape[-1] != n_feat:
            raise ValueError(f"{self.name}: input has {x.shape[-1]} features, expected {n_feat}")
        x = x.detach()
        owned = False  # whether x is a copy of ours, which may be scaled in place
        if mask is not None:
            if tuple(mask.shape) != tuple(x.shape[:-1]):
                raise ValueError(f"{self.name}: attention mask {tuple(mask.shape)} does not match the input "
                                 f"tokens {tuple(x.shape[:-1])}")
            x, owned = x[mask.bool()], True
        x = x.reshape(-1, n_feat)
        m = x.shape[0]
        if m == 0:
            return
        absmax = torch.maximum(x.amax(dim=0), x.amin(dim=0).neg_())  # = |x|.amax(0), exactly
        if not torch.isfinite(absmax).all():
            raise ValueError(f"{self.name}: calibration inputs contain NaN or Inf")
        self.absmax = torch.maximum(self.absmax, absmax.float())
        if x.dtype != self.H.dtype:
            x, owned = x.to(self.H.dtype), True
        self.H.mul_(self.n_tokens / (self.n_tokens + m))
        self.n_tokens += m
        scale = math.sqrt(2 / self.n_tokens)
        x = x.mul_(scale) if owned else x * scale
        self.H.addmm_(x.T, x)


class capture_hessians:
    """Context manager: forward hooks accumulating one :class:`HessianAccumulator` per linear.

    Usage::

        with capture_hessians({"q": lin}, torch.float32) as cap:
            cap.mask = attention_mask_chunk      # optional, bool (B, T); None = every token
            block(x)
        cap.hessians["q"].H

    Args:
        modules: name -> ``nn.Linear``. dtype: H's dtype.
    """

    def __init__(self, modules: dict[str, nn.Linear], dtype: torch.dtype = torch.float32) -> None:
        self.modules = modules
        self.mask: torch.Tensor | None = None
        self.hessians = {
            n: HessianAccumulator(m.in_features, dtype, m.weight.device, name=n) for n, m in modules.items()
        }
        self._handles: list = []

    def __enter__(self) -> "capture_hessians":
        for n, m in self.modules.items():
            acc = self.hessians[n]
            self._handles.append(m.register_forward_hook(
                lambda _mod, inp, _out, acc=acc: acc.add(inp[0], self.mask)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


# ---------------------------------------------------------------------------------------------
# calibration data and the model-level driver


def calibration_batch(tokens: np.ndarray, n_seq: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """`n_seq` random windows of `seq_len` tokens, deterministic in `seed` (reference: random
    2048-token segments of the C4 *train* split, seed 0).

    Args:
        tokens: (n,) integer token ids — the TRAINING split (never validation).
        n_seq, seq_len: how many windows, and their length T.
        seed: numpy Generator seed; windows start uniformly in ``[0, n − T]`` (with replacement).

    Returns:
        (n_seq, seq_len) int64.

    Raises:
        ValueError: non-positive sizes, `tokens` not 1-D, or shorter than `seq_len`.
    """
    if not _is_int(n_seq, 1) or not _is_int(seq_len, 1):
        raise ValueError(f"n_seq and seq_len must be positive ints, got {n_seq!r}, {seq_len!r}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be 1-D, got shape {tokens.shape}")
    if len(tokens) < seq_len:
        raise ValueError(f"the calibration split has {len(tokens)} tokens, fewer than seq_len={seq_len}")
    starts = np.random.default_rng(seed).integers(0, len(tokens) - seq_len + 1, size=n_seq)
    return torch.from_numpy(np.stack([np.asarray(tokens[s:s + seq_len], dtype=np.int64) for s in starts]))


class _Captured(Exception):
    def __init__(self, args, kwargs):
        super().__init__()
        self.args_, self.kwargs_ = args, kwargs


def _decoder_layers(model: nn.Module) -> nn.ModuleList:
    for path in ("model.layers", "model.decoder.layers", "transformer.h"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, nn.ModuleList) and len(obj):
            return obj
    raise ValueError(f"{type(model).__name__} has no decoder layers (model.layers) to quantize block by block")


def _groups(linears: dict[str, nn.Linear], true_sequential: bool) -> list[list[str]]:
    """The block's linears in calibration order (see the module docstring)."""
    rank = {s: k for k, grp in enumerate(TRUE_SEQUENTIAL_ORDER) for s in grp}
    short = {n: n.rsplit(".", 1)[-1] for n in linears}
    if not true_sequential or not all(s in rank for s in short.values()):
        return [list(linears)]
    return [[n for n in linears if rank[short[n]] == k] for k in range(len(TRUE_SEQUENTIAL_ORDER))
            if any(rank[short[n]] == k for n in linears)]


def _run_layer(layer: nn.Module, h: torch.Tensor, args: tuple, kwargs: dict) -> torch.Tensor:
    out = layer(h, *args, **kwargs)
    return out[0] if isinstance(out, (tuple, list)) else out


@torch.no_grad()
def gptq_quantize_(
    model: nn.Module,
    calib: torch.Tensor,
    cfg: GPTQConfig,
    progress: bool = True,
    attention_mask: torch.Tensor | None = None,
    layer_fn: Callable[[str, torch.Tensor, HessianAccumulator], tuple[torch.Tensor, GPTQInfo]] | None = None,
) -> dict[str, dict[str, float]]:
    """GPTQ every linear inside the blocks of a transformers causal LM, in place.

    Block by block and true-sequential (module docstring): the inputs of the first decoder layer,
    with the keyword arguments the model passes it (rotary ``position_embeddings``,
    ``position_ids``, causal mask), are captured by a pre-hook that stops the forward; every
    later input is computed by the already quantized layers. Embeddings, norms and lm_head stay.

    Args:
        model: e.g. ``LlamaForCausalLM`` from :func:`bitlaws.model.build_model`; any dtype/device.
        calib: (n_seq, T) int64 token ids from the TRAINING split (:func:`calibration_batch`).
        cfg: the quantizer; ``cfg.calib_batch_size`` sequences go through each forward.
        progress: show a tqdm bar over blocks.
        attention_mask: optional (n_seq, T) 0/1 — padding (0) is left out of every Hessian.
        layer_fn: optional replacement of the per-layer step, ``(name, W, hessian) -> (W_hat, info)``
            (the hook for QUIK); default ``gptq_weight(W, hessian.H, cfg, name=name)``.

    Returns:
        Per block linear (exactly :func:`bitlaws.ptq.block_linears`' names): ``damp`` (relative
        damp used), ``damp_tries``, ``n_tokens`` (calibration tokens seen), ``out_err`` =
        ``||W X − Ŵ X||_F²`` over those tokens, ``out_err_rtn`` (the same for RTN on the same grid
        and inputs), ``out_norm`` = ``||W X||_F²``, ``gptq_loss``, ``seconds`` (the solve).

    Raises:
        ValueError: calib empty, not 2-D or not integer; an attention mask of another shape; NaN or
            Inf in a weight or in a module's inputs; a module that saw no tokens; a linear outside
            the decoder layers; a failed Cholesky past ``cfg.max_damp``. Messages name the module.
            On any error the weights are restored, so the model is left as it was.
    """
    if not isinstance(calib, torch.Tensor) or calib.dim() != 2 or torch.is_floating_point(calib) or calib.dtype == torch.bool:
        raise ValueError(f"calib must be an integer tensor (n_seq, T) of token ids, got "
                         f"{getattr(calib, 'shape', type(calib).__name__)} {getattr(calib, 'dtype', '')}")
    if calib.numel() == 0:
        raise ValueError(f"empty calibration set: calib has shape {tuple(calib.shape)}")
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(calib.shape):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must have calib's shape {tuple(calib.shape)}")
    linears = block_linears(model)
    for name, lin in linears.items():
        _check_finite(name, lin.weight)
    layers = _decoder_layers(model)
    owner: dict[int, tuple[int, str]] = {}
    per_layer: list[dict[str, nn.Linear]] = [{} for _ in layers]
    by_id = {id(m): n for n, m in linears.items()}
    for li, layer in enumerate(layers):
        for m in layer.modules():
            if id(m) in by_id:
                per_layer[li][by_id[id(m)]] = m
                owner[id(m)] = (li, by_id[id(m)])
    outside = [n for n, m in linears.items() if id(m) not in owner]
    if outside:
        raise ValueError(f"linears outside the decoder layers cannot be calibrated block by block: {outside}")
    if layer_fn is None:
        def layer_fn(name, W, acc):
            return gptq_weight(W, acc.H, cfg, name=name)

    device = next(model.parameters()).device
    hdtype = cfg.torch_hessian_dtype
    originals = {n: m.weight.detach().clone() for n, m in linears.items()}
    was_training = model.training
    model.eval()
    report: dict[str, dict[str, float]] = {}
    try:
        # 1. the inputs of layer 0, per chunk of sequences, with the kwargs the model passes it
        def catch(_mod, args, kwargs):
            raise _Captured(args, kwargs)

        chunks = []
        handle = layers[0].register_forward_pre_hook(catch, with_kwargs=True)
        try:
            for s in range(0, calib.shape[0], cfg.calib_batch_size):
                ids = calib[s:s + cfg.calib_batch_size].to(device=device, dtype=torch.int64)
                am = None if attention_mask is None else attention_mask[s:s + cfg.calib_batch_size].to(device)
                try:
                    model(input_ids=ids, attention_mask=am, use_cache=False)
                except _Captured as c:
                    args, kwargs = tuple(c.args_), dict(c.kwargs_)
                    h = args[0] if args else kwargs.pop("hidden_states")
                    if not torch.isfinite(h).all():
                        raise ValueError("inputs of the first decoder layer (the embeddings) contain NaN or Inf") from None
                    chunks.append([h, args[1:], kwargs, None if am is None else am.bool()])
                else:
                    raise RuntimeError("the model never called its first decoder layer")
        finally:
            handle.remove()

        # 2. block by block, group by group
        layer_iter: Iterator = range(len(layers))
        if progress:
            from tqdm.auto import tqdm
            layer_iter = tqdm(layer_iter, desc=f"gptq w{cfg.bits}", unit="block")
        for li in layer_iter:
            layer = layers[li]
            for group in _groups(per_layer[li], cfg.true_sequential):
                mods = {n: per_layer[li][n] for n in group}
                with capture_hessians(mods, hdtype) as cap:
                    for h, args, kwargs, am in chunks:
                        cap.mask = am
                        _run_layer(layer, h, args, kwargs)
                for n in group:
                    acc = cap.hessians[n]
                    if acc.n_tokens == 0:
                        raise ValueError(f"{n}: saw no calibration tokens (never called, or every token masked)")
                    lin = mods[n]
                    W = lin.weight.detach()
                    t0 = time.perf_counter()
                    W_hat, info = layer_fn(n, W, acc)
                    seconds = time.perf_counter() - t0
                    if tuple(W_hat.shape) != tuple(W.shape) or not _all_finite(W_hat):
                        raise ValueError(f"{n}: quantized weight has shape {tuple(W_hat.shape)} or non-finite values")
                    report[n] = {
                        "damp": info.damp, "damp_tries": info.damp_tries, "n_tokens": acc.n_tokens,
                        "out_err": output_error(W, W_hat, acc.H, acc.n_tokens),
                        "out_err_rtn": output_error(W, rtn_weight(W, cfg, info.n_keep_last), acc.H, acc.n_tokens),
                        "out_norm": output_error(W, torch.zeros_like(W), acc.H, acc.n_tokens),
                        "gptq_loss": info.gptq_loss, "seconds": seconds,
                    }
                    lin.weight.copy_(W_hat.to(lin.weight.dtype))
            for c in chunks:
                c[0] = _run_layer(layer, c[0], c[1], c[2])
    except BaseException:
        for n, m in linears.items():
            m.weight.copy_(originals[n])
        raise
    finally:
        model.train(was_training)
    return report

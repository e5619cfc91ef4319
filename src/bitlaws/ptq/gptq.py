"""GPTQ for one linear layer: Frantar et al. 2022, Algorithm 1, with its usual options.

``gptq_weight(W, H, cfg)`` minimises ``||W X − Ŵ X||_F²`` over Ŵ on a fixed grid, given the
Hessian ``H = 2/n Σ x xᵀ`` of the layer's inputs: columns are quantized one at a time in one order
for every row, and each column's rounding error is moved onto the columns not yet quantized with
the Optimal Brain Surgeon update read off the upper Cholesky factor of ``H⁻¹`` (lazy batches of
``block_size`` columns). Options as in the reference (IST-DASLab/gptq): act-order, static or
dynamic groups, symmetric or asymmetric grids (:mod:`bitlaws.quant`'s, shared with RTN), an MSE
grid search, relative damping with retries, and ``n_keep_last`` columns kept unquantized for QUIK
(Ashkboos et al. 2023, §3.2). Our weights equal the reference's to the bit (``bench/gptq_speed.py``).

Every choice (dead inputs, the damping schedule, the Cholesky form, groups, kept columns) is
written out in the book's methods page, section "GPTQ". The calibration driver (Hessians from a
model's forward, block by block, true-sequential) is :mod:`bitlaws.ptq.calibration`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from ..quant import PerChannel, choose_qparams, dequantize, quantize
from . import _all_finite, _is_int

__all__ = [
    "GPTQConfig",
    "GPTQInfo",
    "fit_grid",
    "gptq_weight",
    "rtn_weight",
    "output_error",
    "GPTQPrecisionWarning",
]

DAMP_GROWTH = 2.0  # factor applied to the relative damp after a failed Cholesky


class GPTQPrecisionWarning(RuntimeWarning):
    """A float32 GPTQ solve on an ill-conditioned, barely damped H (see ``gptq_weight``)."""


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


def fit_grid(x: torch.Tensor, cfg: GPTQConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The grid of `cfg` fitted per row: (scale, zero_point), each (out, 1) float32, for the columns
    `x` (out, k) — :func:`bitlaws.quant.choose_qparams` per output channel, or with ``cfg.mse`` the
    reference's shrink search over ``p·[min, max]`` keeping, per row, the lowest ``Σ |x̂ − x|^norm``."""
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
    """GPTQ of one weight matrix (Frantar et al. 2022, Algorithm 1; every choice on the book's methods page, "GPTQ").

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
        static = [fit_grid(W[:, :n_base], cfg)]
    elif cfg.static_groups:
        static = [fit_grid(W[:, s:s + g], cfg) for s in range(0, n_base, g)]

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
                scale, zero = fit_grid(cur, cfg)
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
        scale, zero = fit_grid(out[:, s:s + g], cfg)
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

"""QUIK's fused activation split and quantization: one kernel, three passes over each token row.

For each token row of ``x`` (Ashkboos et al. 2023, §3.3 and Algorithm 1;
``book/papers/quik-gptq.md`` §A1.5, §A2.1): (1) min/max over the base features (those that are not
outliers); (2) the base features quantized asymmetrically per token to 8 or 4 bits and written as
signed codes ``q - 2^(bits-1)`` (int8, or two per byte at 4 bits: `pack_int4`); (3) the outlier
features copied, unquantized, into a dense ``(M, k)`` buffer for the 16-bit GEMM. The quantizer is
the package's own (``bitlaws.quant``, asymmetric, ``PerToken``), the one the simulation uses, and
the Triton kernel reproduces it bit for bit; `quik_act_ref` is its pure-torch twin.

The quantizer's formulas, and how they depart from QUIK's CUDA kernel, are written out in the book's
methods page, section "QUIK kernels".

Public names: ``QuantizedAct``, ``quik_act``, ``quik_act_ref``, ``pack_int4``, ``unpack_int4``,
``benchmark_quik_act``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..quant import PerToken, choose_qparams, quantize
from ._triton import HAS_TRITON, autotune, check_device, configs, nonempty, require_triton, tl, triton

__all__ = ["QuantizedAct", "quik_act", "quik_act_ref", "pack_int4", "unpack_int4", "benchmark_quik_act"]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_INDEX_DTYPES = (torch.int32, torch.int64)


class QuantizedAct(NamedTuple):
    """The three outputs of the activation pass, for ``M`` token rows.

    Attributes:
        codes: (M, K_b) int8 at 8 bits — signed codes ``q - 128``, row-major; or
            (M, ceil(K_b / 2)) uint8 at 4 bits — signed codes ``q - 8`` packed two per uint8
            along K, little nibble first (`pack_int4`).
        scale: (M,) float32 — the step size s_t of each token row.
        zero: (M,) float32 — the integer-valued zero point z_t in [0, 2^bits - 1].
        x_outlier: (M, k) in the input's dtype — the outlier features, in the order of
            ``outlier_idx``.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    x_outlier: torch.Tensor


# --------------------------------------------------------------------------- int4 packing


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack signed 4-bit codes two per byte along the last axis, little nibble first.

    ``byte[j] = (q[2j] & 0xF) | ((q[2j+1] & 0xF) << 4)`` (two's complement nibbles; QUIK's
    ``pack_to_i4`` and CUTLASS ``int4b_t`` use the same order, ``book/papers/quik-gptq.md`` §A2.3). An odd length is
    padded with a zero code, which adds nothing to a dot product.

    Args:
        q: (..., K) integer tensor with values in [-8, 7].

    Returns:
        (..., ceil(K / 2)) uint8.

    Raises:
        TypeError: `q` is not an integer tensor. ValueError: a value outside [-8, 7].
    """
    if not isinstance(q, torch.Tensor) or q.dtype.is_floating_point or q.dtype == torch.bool:
        raise TypeError(f"pack_int4: q must be an integer tensor, got {getattr(q, 'dtype', type(q))}")
    if q.numel() and (int(q.min()) < -8 or int(q.max()) > 7):
        raise ValueError(f"pack_int4: q must lie in [-8, 7], got [{int(q.min())}, {int(q.max())}]")
    q = q.to(torch.int32)
    if q.shape[-1] % 2:
        q = torch.nn.functional.pad(q, (0, 1))
    lo, hi = q[..., 0::2], q[..., 1::2]
    return ((lo & 0xF) | ((hi & 0xF) << 4)).to(torch.uint8)


def unpack_int4(packed: torch.Tensor, k: int) -> torch.Tensor:
    """Inverse of `pack_int4`: (..., ceil(k / 2)) uint8 -> (..., k) int8 codes in [-8, 7].

    Raises:
        TypeError: `packed` is not uint8. ValueError: its last axis does not hold `k` codes.
    """
    if packed.dtype != torch.uint8:
        raise TypeError(f"unpack_int4: packed must be uint8, got {packed.dtype}")
    if packed.shape[-1] != (k + 1) // 2:
        raise ValueError(f"unpack_int4: packed has {packed.shape[-1]} bytes on its last axis, "
                         f"k = {k} codes need {(k + 1) // 2}")
    p = packed.to(torch.int32)
    lo = ((p & 0xF) ^ 8) - 8  # sign-extend a 4-bit two's complement nibble
    hi = (((p >> 4) & 0xF) ^ 8) - 8
    return torch.stack([lo, hi], dim=-1).flatten(-2)[..., :k].to(torch.int8)


# --------------------------------------------------------------------------- checks


def _check_args(x, base_idx, outlier_idx, bits) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (M tokens, K features), got shape {tuple(x.shape)}")
    for name, idx in (("base_idx", base_idx), ("outlier_idx", outlier_idx)):
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(idx).__name__}")
        if idx.dtype not in _INDEX_DTYPES:
            raise TypeError(f"{name} must be int32 or int64, got {idx.dtype}")
        if idx.dim() != 1:
            raise ValueError(f"{name} must be 1-D, got shape {tuple(idx.shape)}")
        if idx.device != x.device:
            raise ValueError(f"{name} is on {idx.device} but x is on {x.device}")
    if base_idx.numel() + outlier_idx.numel() != x.shape[1]:
        raise ValueError(f"base_idx ({base_idx.numel()}) and outlier_idx ({outlier_idx.numel()}) must "
                         f"split the {x.shape[1]} features of x between them")
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")


def _empty_outputs(x, k_base, k_out, bits):
    m = x.shape[0]
    width = (k_base + 1) // 2 if bits == 4 else k_base
    return QuantizedAct(
        codes=torch.empty(m, width, dtype=torch.uint8 if bits == 4 else torch.int8, device=x.device),
        scale=torch.empty(m, dtype=torch.float32, device=x.device),
        zero=torch.empty(m, dtype=torch.float32, device=x.device),
        x_outlier=torch.empty(m, k_out, dtype=x.dtype, device=x.device),
    )


# --------------------------------------------------------------------------- reference


def quik_act_ref(x: torch.Tensor, base_idx: torch.Tensor, outlier_idx: torch.Tensor, bits: int) -> QuantizedAct:
    """Pure-torch twin of `quik_act`: ``bitlaws.quant`` applied per token to the base features.

    Args, returns and errors as `quik_act`, on any device. An all-zero base row (zero range)
    gets scale 1 and zero point 0, and every code is then ``-h`` (the value 0).
    """
    _check_args(x, base_idx, outlier_idx, bits)
    out = _empty_outputs(x, base_idx.numel(), outlier_idx.numel(), bits)
    if x.shape[0] == 0:
        return out
    x_base = x[:, base_idx.long()].float()
    h = 2 ** (bits - 1)
    if x_base.shape[1] == 0:  # every feature is an outlier: nothing to quantize
        scale = torch.ones(x.shape[0], 1, device=x.device)
        zero = torch.zeros_like(scale)
        codes = x_base.to(torch.int32)
    else:
        if not torch.isfinite(x_base).all():
            raise ValueError("x has NaN or Inf among its base features; the per-token range is undefined")
        scale, zero = choose_qparams(x_base, f"int{bits}", PerToken(), symmetric=False)
        codes = quantize(x_base, scale, zero, f"int{bits}", symmetric=False) - h
    codes = pack_int4(codes) if bits == 4 else codes.to(torch.int8)
    return QuantizedAct(codes=codes, scale=scale.reshape(-1), zero=zero.reshape(-1),
                        x_outlier=x[:, outlier_idx.long()].contiguous())


# --------------------------------------------------------------------------- Triton kernel

if HAS_TRITON:
    # Autotune configs (compiled kernel): rows per program and features per step; the
    # interpreter uses the small one so that tests cross block boundaries.
    _CONFIGS = [
        triton.Config({"BLOCK_M": 1, "BLOCK_K": 1024}, num_warps=4),
        triton.Config({"BLOCK_M": 4, "BLOCK_K": 512}, num_warps=4),
        triton.Config({"BLOCK_M": 8, "BLOCK_K": 256}, num_warps=8),
    ]
    _INTERPRET_CONFIG = triton.Config({"BLOCK_M": 4, "BLOCK_K": 16})

    @autotune(configs(_CONFIGS, _INTERPRET_CONFIG), key=["K_BASE", "K_OUT", "BITS"])
    @triton.jit
    def _quik_act_kernel(
        x_ptr, base_idx_ptr, outlier_idx_ptr,  # inputs: (M, K) activations, feature indices
        codes_ptr, scale_ptr, zero_ptr, xo_ptr,  # outputs, as QuantizedAct
        M, K_BASE, K_OUT, K_CODES,  # K_CODES: codes per row in bytes (K_BASE or ceil(K_BASE / 2))
        stride_xm, stride_xk, stride_cm, stride_om,
        BITS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
    ):
        # One program = BLOCK_M token rows. PACK neighbouring base features share one output byte.
        PACK: tl.constexpr = 2 if BITS == 4 else 1
        Q_MAX: tl.constexpr = (1 << BITS) - 1
        HALF: tl.constexpr = 1 << (BITS - 1)
        pid = tl.program_id(0)
        rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rm < M
        x_rows = x_ptr + rm.to(tl.int64) * stride_xm  # (BLOCK_M,) row starts

        # Pass 1: the range of the base features, widened to include 0 (masked lanes load 0).
        # Element-wise running min/max over the tiles, reduced once after the loop: the same
        # numbers as reducing each tile, and it avoids a loop-carried reduction, which Triton 3.6's
        # TritonGPUOptimizeThreadLocality pass fails to compile for float32 input on sm_90.
        lo2 = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
        hi2 = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
        for k0 in range(0, K_BASE, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            cols = tl.load(base_idx_ptr + rk, mask=rk < K_BASE, other=0)
            x = tl.load(x_rows[:, None] + cols[None, :] * stride_xk,
                        mask=row_ok[:, None] & (rk < K_BASE)[None, :], other=0.0).to(tl.float32)
            lo2 = tl.minimum(lo2, x)
            hi2 = tl.maximum(hi2, x)
        lo = tl.min(lo2, axis=1)
        hi = tl.max(hi2, axis=1)
        scale = tl.math.div_rn(hi - lo, tl.full((BLOCK_M,), Q_MAX, tl.float32))
        scale = tl.where(scale == 0.0, 1.0, scale)
        # zero = round_half_even(-lo / scale), written out with floor (no rint in the interpreter)
        z_t = tl.math.div_rn(-lo, scale)
        z_f = tl.floor(z_t)
        z_odd = (z_f * 0.5 - tl.floor(z_f * 0.5)) != 0.0
        zero = z_f + tl.where(((z_t - z_f) > 0.5) | (((z_t - z_f) == 0.5) & z_odd), 1.0, 0.0)
        zero = tl.minimum(tl.maximum(zero, 0.0), Q_MAX * 1.0)
        tl.store(scale_ptr + rm, scale, mask=row_ok)
        tl.store(zero_ptr + rm, zero, mask=row_ok)

        # Pass 2: codes. A (BLOCK_M, BLOCK_K, PACK) tile: output byte j holds features PACK*j + p.
        sub = tl.arange(0, PACK)
        for j0 in range(0, K_CODES, BLOCK_K):
            rj = j0 + tl.arange(0, BLOCK_K)
            kk = rj[:, None] * PACK + sub[None, :]  # (BLOCK_K, PACK) positions among base features
            kk_ok = kk < K_BASE
            cols3 = tl.load(base_idx_ptr + kk, mask=kk_ok, other=0)
            x3 = tl.load(x_rows[:, None, None] + cols3[None, :, :] * stride_xk,
                         mask=row_ok[:, None, None] & kk_ok[None, :, :], other=0.0).to(tl.float32)
            # round_half_even(x / scale), as for the zero point
            t = tl.math.div_rn(x3, scale[:, None, None])
            f = tl.floor(t)
            f_odd = (f * 0.5 - tl.floor(f * 0.5)) != 0.0
            r = f + tl.where(((t - f) > 0.5) | (((t - f) == 0.5) & f_odd), 1.0, 0.0)
            q = tl.minimum(tl.maximum(r + zero[:, None, None], 0.0), Q_MAX * 1.0).to(tl.int32) - HALF
            q = tl.where(kk_ok[None, :, :], q, 0)  # the pad of an odd K_BASE is the code 0
            if PACK == 2:
                q_even, q_odd = tl.split(q)
                byte = (q_even & 0xF) | ((q_odd & 0xF) << 4)
            else:
                byte = tl.reshape(q, (BLOCK_M, BLOCK_K))
            tl.store(codes_ptr + rm[:, None].to(tl.int64) * stride_cm + rj[None, :],
                     byte.to(codes_ptr.dtype.element_ty),
                     mask=row_ok[:, None] & (rj < K_CODES)[None, :])

        # Pass 3: the outlier features, copied in the input's dtype.
        for o0 in range(0, K_OUT, BLOCK_K):
            ro = o0 + tl.arange(0, BLOCK_K)
            cols_o = tl.load(outlier_idx_ptr + ro, mask=ro < K_OUT, other=0)
            ok = row_ok[:, None] & (ro < K_OUT)[None, :]
            v = tl.load(x_rows[:, None] + cols_o[None, :] * stride_xk, mask=ok, other=0.0)
            tl.store(xo_ptr + rm[:, None].to(tl.int64) * stride_om + ro[None, :], v, mask=ok)


def quik_act(x: torch.Tensor, base_idx: torch.Tensor, outlier_idx: torch.Tensor, bits: int) -> QuantizedAct:
    """Split `x` into quantized base features and 16-bit outlier features (Triton kernel).

    Args:
        x: (M, K) float16, bfloat16 or float32, contiguous — M token rows of K input features.
        base_idx: (K_b,) int32 or int64, contiguous — the base features, each in [0, K).
        outlier_idx: (k,) int32 or int64, contiguous — the outlier features; together with
            `base_idx` a partition of range(K) (not checked here: `QuikLinear` checks it once).
        bits: 8 or 4.

    Returns:
        QuantizedAct: codes (M, K_b) int8, or (M, ceil(K_b / 2)) uint8 with int4 packed two per
        uint8 along K, little nibble first; scale (M,) fp32; zero (M,) fp32; x_outlier (M, k) in
        x's dtype. Bit-identical to `quik_act_ref`.

    Raises:
        TypeError: a tensor argument of the wrong dtype. ValueError: wrong rank, sizes that do not
        add up to K, bits not 4 or 8, a non-contiguous tensor, tensors on different devices, or
        CPU tensors without the interpreter.
        ModuleNotFoundError: Triton is not installed.

    Tensors must be on CUDA, or anywhere under Triton's interpreter (``TRITON_INTERPRET=1``; slow,
    for tests). NaN or Inf in x is not detected here (the reference raises).
    """
    require_triton()
    _check_args(x, base_idx, outlier_idx, bits)
    check_device("x", x)
    for name, t in (("x", x), ("base_idx", base_idx), ("outlier_idx", outlier_idx)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    k_base, k_out = base_idx.numel(), outlier_idx.numel()
    out = _empty_outputs(x, k_base, k_out, bits)
    m = x.shape[0]
    if m == 0:
        return out
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]),)  # noqa: E731
    # With no base or no outlier features some buffers are empty: `nonempty` hands the kernel a
    # valid pointer that it will not touch.
    _quik_act_kernel[grid](x, nonempty(base_idx), nonempty(outlier_idx),
                           nonempty(out.codes), out.scale, out.zero, nonempty(out.x_outlier),
                           m, k_base, k_out, out.codes.shape[1],
                           x.stride(0), x.stride(1), max(out.codes.stride(0), 1), max(out.x_outlier.stride(0), 1),
                           BITS=bits)
    return out


# --------------------------------------------------------------------------- benchmark


def benchmark_quik_act(tokens, k: int, n_outliers: int, bits: int, *, device: str = "cpu",
                       dtype: torch.dtype = torch.float32, reps: int = 20) -> list[dict]:
    """Time the activation pass (Triton on CUDA, the reference elsewhere) at each token count: tidy rows.

    Args:
        tokens: token counts M to time. k: input features. n_outliers: features kept in 16 bits.
        bits: 8 or 4. device, dtype, reps: where, which activation dtype, how many timed calls.

    Returns:
        One dict per M with ``part = "act_quant"``, ``impl``, ``m_tokens``, ``k_in``, ``n_outliers``,
        ``bits`` and ``latency_ms`` (median of `reps` calls).
    """
    from .timing import time_ms

    torch.manual_seed(0)
    perm = torch.randperm(k)
    outlier_idx = perm[:n_outliers].sort().values.to(device=device, dtype=torch.int32)
    base_idx = perm[n_outliers:].sort().values.to(device=device, dtype=torch.int32)
    use_triton = torch.device(device).type == "cuda" and HAS_TRITON
    fn = quik_act if use_triton else quik_act_ref
    rows = []
    for m in tokens:
        x = torch.randn(m, k, device=device, dtype=dtype)
        ms = time_ms(lambda: fn(x, base_idx, outlier_idx, bits), device=device, reps=reps)
        rows.append({"part": "act_quant", "impl": "triton" if use_triton else "ref", "m_tokens": m, "k_in": k,
                     "n_outliers": n_outliers, "bits": bits, "latency_ms": ms})
    return rows

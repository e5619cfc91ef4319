"""Integer GEMM with int32 accumulation and QUIK's fused dequantization epilogue (int8 and int4).

`int_gemm_dequant` is QUIK's base-feature product (Ashkboos et al. 2023, §3.3;
``book/papers/quik-gptq.md`` §A2.2): ``A = a @ w^T`` of signed activation codes (from
:func:`bitlaws.kernels.quik_act.quik_act`) and symmetric weight codes, accumulated in int32, then
in fp32 ``y[t, n] = s_t * sigma_n * A[t, n] + s_t * (h - z_t) * R_n + Y[t, n]``, with
``h = 2^(bits-1)``, ``R_n = sigma_n * sum_k w[n, k]`` over the base columns and ``Y`` the outlier
GEMM plus the bias; this equals ``x_hat @ W_hat^T + Y`` up to fp32 rounding. At 4 bits the codes are
packed two per uint8 and unpacked in registers into two int8 dots. K_b < 2^17 at 8 bits.

The derivation, where it departs from QUIK's fp16 epilogue, the int4 layout and the limits are
written out in the book's methods page, section "QUIK kernels".

Public names: ``int_gemm``, ``int_gemm_ref``, ``int_gemm_dequant``, ``int_gemm_dequant_ref``,
``benchmark_int_gemm``.
"""

from __future__ import annotations

import torch

from ._triton import HAS_TRITON, autotune, check_device, configs, nonempty, require_triton, tl, triton
from .quik_act import unpack_int4

__all__ = ["int_gemm", "int_gemm_ref", "int_gemm_dequant", "int_gemm_dequant_ref", "benchmark_int_gemm"]

_OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAX_K_INT8 = 2**17


# --------------------------------------------------------------------------- checks


def _check_codes(a, w, bits, k_base=None) -> None:
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    want = torch.uint8 if bits == 4 else torch.int8
    layout = "int4 packed two per uint8 along K" if bits == 4 else "int8"
    for name, t in (("a", a), ("w", w)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != want:
            raise TypeError(f"{name} must be {want} ({layout}) at bits={bits}, got {t.dtype}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if a.shape[1] != w.shape[1]:
        raise ValueError(f"a has {a.shape[1]} codes per row but w has {w.shape[1]}: they must share K")
    if w.device != a.device:
        raise ValueError(f"w is on {w.device} but a is on {a.device}")
    if bits == 8 and a.shape[1] >= _MAX_K_INT8:
        raise ValueError(f"K = {a.shape[1]} is too large for an int32 accumulator at 8 bits (limit {_MAX_K_INT8 - 1})")


def _check_epilogue(a, w, act_scale, act_zero, w_scale, w_rowsum, y, bias, out_dtype) -> None:
    m, n = a.shape[0], w.shape[0]
    for name, t, size in (("act_scale", act_scale, m), ("act_zero", act_zero, m),
                          ("w_scale", w_scale, n), ("w_rowsum", w_rowsum, n)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name} must be float32, got {t.dtype}")
        if tuple(t.shape) != (size,):
            raise ValueError(f"{name} must have shape ({size},), got {tuple(t.shape)}")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}")
    for name, t, shape in (("y", y, (m, n)), ("bias", bias, (n,))):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
        if t.dtype not in _OUT_DTYPES:
            raise TypeError(f"{name} must be float16, bfloat16 or float32, got {t.dtype}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}")
    if out_dtype not in _OUT_DTYPES:
        raise TypeError(f"out_dtype must be float16, bfloat16 or float32, got {out_dtype}")


def _check_contiguous(**tensors) -> None:
    for name, t in tensors.items():
        if t is not None and not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")


# --------------------------------------------------------------------------- references


def int_gemm_ref(a: torch.Tensor, w: torch.Tensor, bits: int) -> torch.Tensor:
    """Pure-torch twin of `int_gemm`: ``A = a @ w^T`` in int32.

    On the CPU the product is ``torch._int_mm`` (int8 x int8 -> int32); elsewhere it is computed
    in float64, which is exact for these sizes (|A| < 2^53). int4 codes are unpacked first.
    """
    _check_codes(a, w, bits)
    if bits == 4:
        k = 2 * a.shape[1]  # the pad nibble, if any, is 0 in both operands
        a, w = unpack_int4(a, k), unpack_int4(w, k)
    if a.shape[1] == 0:
        return torch.zeros(a.shape[0], w.shape[0], dtype=torch.int32, device=a.device)
    if a.device.type == "cpu":
        return torch._int_mm(a, w.t())
    return (a.double() @ w.double().t()).to(torch.int32)


def int_gemm_dequant_ref(a, w, act_scale, act_zero, w_scale, w_rowsum, *, bits, y=None, bias=None,
                         out_dtype=torch.float32) -> torch.Tensor:
    """Pure-torch twin of `int_gemm_dequant`: `int_gemm_ref`, then the same fp32 epilogue."""
    _check_codes(a, w, bits)
    _check_epilogue(a, w, act_scale, act_zero, w_scale, w_rowsum, y, bias, out_dtype)
    acc = int_gemm_ref(a, w, bits).float()
    h = 2.0 ** (bits - 1)
    out = (act_scale[:, None] * w_scale[None, :]) * acc + (act_scale * (h - act_zero))[:, None] * w_rowsum[None, :]
    if y is not None:
        out = out + y.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


# --------------------------------------------------------------------------- Triton kernel

if HAS_TRITON:
    # Autotune configs (compiled kernel), kept small: a decode tile for a few tokens, two prefill
    # tiles. BLOCK_K counts stored bytes (two features each at 4 bits).
    _CONFIGS = [
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        # two large-K tiles for Hopper's int8 wgmma (48 KiB of codes per stage)
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
    ]
    _INTERPRET_CONFIG = triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2})

    @autotune(configs(_CONFIGS, _INTERPRET_CONFIG), key=["M_BUCKET", "N", "KC", "BITS", "DEQUANT"])
    @triton.jit
    def _int_gemm_kernel(
        a_ptr, w_ptr, out_ptr,  # a: (M, KC) codes, w: (N, KC) codes, out: (M, N)
        a_scale_ptr, a_zero_ptr, w_scale_ptr, w_rowsum_ptr, y_ptr, bias_ptr,  # epilogue operands
        M, N, KC, M_BUCKET,  # KC: codes per row in bytes; M_BUCKET only keys the autotuner
        stride_am, stride_ak, stride_wn, stride_wk, stride_om, stride_on, stride_ym, stride_yn,
        BITS: tl.constexpr, DEQUANT: tl.constexpr, HAS_Y: tl.constexpr, HAS_BIAS: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ):
        # Program id -> output tile, in groups of GROUP_M row tiles so that W tiles stay in L2.
        pid = tl.program_id(0)
        n_tiles_m = tl.cdiv(M, BLOCK_M)
        n_tiles_n = tl.cdiv(N, BLOCK_N)
        group = pid // (GROUP_M * n_tiles_n)
        first_m = group * GROUP_M
        group_size = min(n_tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group_size)
        pid_n = (pid % (GROUP_M * n_tiles_n)) // group_size

        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
        w_ptrs = w_ptr + rn[None, :] * stride_wn + rk[:, None] * stride_wk  # (BLOCK_K, BLOCK_N) = w^T tile
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k0 in range(0, KC, BLOCK_K):
            k_ok = (k0 + rk) < KC
            a = tl.load(a_ptrs, mask=(rm < M)[:, None] & k_ok[None, :], other=0)
            w = tl.load(w_ptrs, mask=k_ok[:, None] & (rn < N)[None, :], other=0)
            if BITS == 4:
                # Unpack in registers: low nibble = even feature, high nibble = odd feature,
                # each sign-extended from 4 bits; then two int8 dots over the same bytes.
                a32 = a.to(tl.int32)
                w32 = w.to(tl.int32)
                a_even = (((a32 & 0xF) ^ 8) - 8).to(tl.int8)
                a_odd = ((((a32 >> 4) & 0xF) ^ 8) - 8).to(tl.int8)
                w_even = (((w32 & 0xF) ^ 8) - 8).to(tl.int8)
                w_odd = ((((w32 >> 4) & 0xF) ^ 8) - 8).to(tl.int8)
                acc = tl.dot(a_even, w_even, acc, out_dtype=tl.int32)
                acc = tl.dot(a_odd, w_odd, acc, out_dtype=tl.int32)
            else:
                acc = tl.dot(a, w, acc, out_dtype=tl.int32)
            a_ptrs += BLOCK_K * stride_ak
            w_ptrs += BLOCK_K * stride_wk

        out_ptrs = out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on
        ok = (rm < M)[:, None] & (rn < N)[None, :]
        if DEQUANT:
            # y = s_t sigma_n A + s_t (h - z_t) R_n (+ Y + bias), in fp32 from the int32 accumulator.
            s = tl.load(a_scale_ptr + rm, mask=rm < M, other=0.0)
            z = tl.load(a_zero_ptr + rm, mask=rm < M, other=0.0)
            sigma = tl.load(w_scale_ptr + rn, mask=rn < N, other=0.0)
            r = tl.load(w_rowsum_ptr + rn, mask=rn < N, other=0.0)
            half: tl.constexpr = 1 << (BITS - 1)
            out = (s[:, None] * sigma[None, :]) * acc.to(tl.float32) + (s * (half - z))[:, None] * r[None, :]
            if HAS_Y:
                y = tl.load(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, mask=ok, other=0.0)
                out += y.to(tl.float32)
            if HAS_BIAS:
                out += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
            tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=ok)
        else:
            tl.store(out_ptrs, acc, mask=ok)


def _launch(a, w, out, epilogue, bits, y=None, bias=None):
    m, n, kc = a.shape[0], w.shape[0], a.shape[1]
    if m == 0 or n == 0:
        return out
    m_bucket = min(triton.next_power_of_2(m), 4096)
    dummy = out  # any valid pointer for operands the constexpr flags switch off
    s, z, sigma, r = epilogue if epilogue is not None else (dummy,) * 4
    y_t = y if y is not None else dummy
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    # With K = 0 the code buffers are empty: `nonempty` hands the kernel a pointer it will not read.
    _int_gemm_kernel[grid](nonempty(a), nonempty(w), out, s, z, sigma, r, y_t, bias if bias is not None else dummy,
                           m, n, kc, m_bucket,
                           a.stride(0), a.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
                           y_t.stride(0), y_t.stride(1),
                           BITS=bits, DEQUANT=epilogue is not None, HAS_Y=y is not None, HAS_BIAS=bias is not None)
    return out


def int_gemm(a: torch.Tensor, w: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer GEMM ``A = a @ w^T`` with int32 accumulation (Triton kernel), bit-exact.

    Args:
        a: (M, K) int8 codes at 8 bits; (M, ceil(K / 2)) uint8 at 4 bits, int4 packed two per uint8
            along K, little nibble first. Row-major, contiguous.
        w: (N, K) int8 or (N, ceil(K / 2)) uint8, the same layout (K-major: row n is output n).
        bits: 8 or 4.

    Returns:
        A: (M, N) int32.

    Raises:
        TypeError: wrong dtype for `bits`. ValueError: shapes that do not share K, K too large for
        int32 at 8 bits, a non-contiguous operand, operands on different devices, or CPU tensors
        without Triton's interpreter (``TRITON_INTERPRET=1``).
        ModuleNotFoundError: Triton is not installed.
    """
    require_triton()
    _check_codes(a, w, bits)
    check_device("a", a)
    _check_contiguous(a=a, w=w)
    out = torch.empty(a.shape[0], w.shape[0], dtype=torch.int32, device=a.device)
    return _launch(a, w, out, None, bits)


def int_gemm_dequant(a: torch.Tensor, w: torch.Tensor, act_scale: torch.Tensor, act_zero: torch.Tensor,
                     w_scale: torch.Tensor, w_rowsum: torch.Tensor, *, bits: int,
                     y: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                     out_dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """QUIK's base-feature GEMM with the fused dequantization epilogue (Triton kernel).

    ``out = s_t sigma_n A + s_t (h - z_t) R_n + Y + bias`` with ``A = a @ w^T`` in int32 and the
    epilogue in fp32 (module docstring).

    Args:
        a: (M, K_b) int8, or (M, ceil(K_b / 2)) uint8 with int4 packed two per uint8 along K,
            little nibble first — activation codes from `quik_act`, contiguous.
        w: (N, K_b) int8 or (N, ceil(K_b / 2)) uint8 — symmetric weight codes, same layout.
        act_scale: (M,) fp32 — s_t. act_zero: (M,) fp32 — integer-valued z_t.
        w_scale: (N,) fp32 — sigma_n. w_rowsum: (N,) fp32 — R_n = sigma_n * sum_k w[n, k].
        bits: 8 or 4.
        y: (M, N) float16/bfloat16/float32 or None — the outlier GEMM, added in the epilogue.
        bias: (N,) float16/bfloat16/float32 or None.
        out_dtype: float16 (default), bfloat16 or float32.

    Returns:
        (M, N) tensor of `out_dtype`.

    Raises:
        TypeError, ValueError: as `int_gemm`, and for an epilogue operand of the wrong dtype, shape,
        device or layout; each message names the argument.
    """
    require_triton()
    _check_codes(a, w, bits)
    _check_epilogue(a, w, act_scale, act_zero, w_scale, w_rowsum, y, bias, out_dtype)
    check_device("a", a)
    _check_contiguous(a=a, w=w, act_scale=act_scale, act_zero=act_zero, w_scale=w_scale,
                      w_rowsum=w_rowsum, y=y, bias=bias)
    out = torch.empty(a.shape[0], w.shape[0], dtype=out_dtype, device=a.device)
    return _launch(a, w, out, (act_scale, act_zero, w_scale, w_rowsum), bits, y=y, bias=bias)


# --------------------------------------------------------------------------- benchmark


def benchmark_int_gemm(tokens, n: int, k: int, bits: int, *, device: str = "cpu", reps: int = 20) -> list[dict]:
    """Time the integer GEMM with its epilogue (Triton on CUDA, the reference elsewhere): tidy rows.

    Args:
        tokens: token counts M to time. n, k: output and (base) input features. bits: 8 or 4.
        device, reps: where, how many timed calls.

    Returns:
        One dict per M with ``part = "int_gemm"``, ``impl``, ``m_tokens``, ``n_out``, ``k_in``,
        ``bits`` and ``latency_ms`` (median of `reps` calls).
    """
    from .timing import time_ms
    from .quik_act import pack_int4

    torch.manual_seed(0)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1)

    def codes(rows: int) -> torch.Tensor:
        q = torch.randint(lo, hi, (rows, k), device=device, dtype=torch.int8)
        return pack_int4(q) if bits == 4 else q

    w = codes(n)
    f32 = dict(dtype=torch.float32, device=device)
    sigma, rowsum = torch.rand(n, **f32), torch.rand(n, **f32)
    use_triton = torch.device(device).type == "cuda" and HAS_TRITON
    out_dtype = torch.bfloat16 if use_triton else torch.float32
    fn = int_gemm_dequant if use_triton else int_gemm_dequant_ref
    rows = []
    for m in tokens:
        args = (codes(m), w, torch.rand(m, **f32), torch.zeros(m, **f32), sigma, rowsum)
        ms = time_ms(lambda: fn(*args, bits=bits, out_dtype=out_dtype), device=device, reps=reps)
        rows.append({"part": "int_gemm", "impl": "triton" if use_triton else "ref", "m_tokens": m, "n_out": n,
                     "k_in": k, "bits": bits, "latency_ms": ms})
    return rows

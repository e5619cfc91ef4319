"""`QuikLinear`: a linear layer stored and run the QUIK way (Ashkboos et al. 2023, §3, Algorithm 1).

A layer ``y = x W^T + b`` with ``W: (N, K)`` is split along its input features: ``k`` outlier
features (chosen offline from calibration activations) keep their weight columns in 16 bits and
meet the unquantized activations in a 16-bit GEMM; the other ``K_b = K - k`` base features have
their weights quantized symmetrically per output channel, their activations quantized per token at
run time (`quik_act`), and an integer GEMM whose epilogue dequantizes and adds the outlier part
(`int_gemm_dequant`). On CUDA with Triton installed the forward runs the Triton kernels, elsewhere
their pure-torch twins; both give ``x_hat @ W_hat^T + Y`` up to fp32 rounding.

The split, the weight grid and the two paths are written out in the book's methods page, section
"QUIK kernels".

Public names: ``QuikLinear``, ``benchmark_quik_linear``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..quant import PerChannel, choose_qparams, quantize
from ._triton import HAS_TRITON
from .int_gemm import int_gemm_dequant, int_gemm_dequant_ref
from .quik_act import pack_int4, quik_act, quik_act_ref, unpack_int4

__all__ = ["QuikLinear", "benchmark_quik_linear"]

_STORE_DTYPES = (torch.float16, torch.bfloat16)
_IMPLS = ("auto", "triton", "ref")


class QuikLinear(nn.Module):
    """A QUIK linear layer: int8/int4 base features, 16-bit outlier features.

    Build one with :meth:`from_linear`. Buffers (all moved by ``.to(device)``):

    * ``w_codes``: (N, K_b) int8 at 8 bits, or (N, ceil(K_b / 2)) uint8 at 4 bits with int4 packed
      two per uint8 along K, little nibble first — symmetric weight codes of the base columns;
    * ``w_scale``: (N,) fp32 — sigma_n, one per output channel;
    * ``w_rowsum``: (N,) fp32 — R_n = sigma_n * sum_k w[n, k] over the base columns;
    * ``base_idx``: (K_b,) int32 and ``outlier_idx``: (k,) int32 — ascending, a partition of range(K);
    * ``w_outlier``: (N, k) fp16 or bf16 — the outlier columns of W, unquantized;
    * ``bias``: (N,) fp16 or bf16, or None.

    Attributes:
        in_features, out_features, bits, n_outliers: the layer's sizes.
        impl: ``"auto"`` (Triton on CUDA when installed, the reference elsewhere), ``"triton"``
            (also on the CPU, through Triton's interpreter: slow, for tests and demos) or ``"ref"``.
    """

    def __init__(self, in_features: int, out_features: int, outlier_idx: torch.Tensor, bits: int,
                 dtype: torch.dtype = torch.float16, bias: bool = True) -> None:
        super().__init__()
        if bits not in (4, 8):
            raise ValueError(f"bits must be 4 or 8, got {bits!r}")
        if dtype not in _STORE_DTYPES:
            raise TypeError(f"dtype (of the outlier weights and bias) must be float16 or bfloat16, got {dtype}")
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        outlier_idx = _check_outliers(outlier_idx, in_features)
        keep = torch.ones(in_features, dtype=torch.bool)
        keep[outlier_idx] = False
        base_idx = torch.nonzero(keep).flatten()
        self.in_features, self.out_features, self.bits = in_features, out_features, bits
        self.impl = "auto"
        k_b, k = base_idx.numel(), outlier_idx.numel()
        width = (k_b + 1) // 2 if bits == 4 else k_b
        self.register_buffer("w_codes", torch.zeros(out_features, width,
                                                     dtype=torch.uint8 if bits == 4 else torch.int8))
        self.register_buffer("w_scale", torch.ones(out_features))
        self.register_buffer("w_rowsum", torch.zeros(out_features))
        self.register_buffer("base_idx", base_idx.to(torch.int32))
        self.register_buffer("outlier_idx", outlier_idx.to(torch.int32))
        self.register_buffer("w_outlier", torch.zeros(out_features, k, dtype=dtype))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype) if bias else None)

    @property
    def n_outliers(self) -> int:
        return self.outlier_idx.numel()

    @classmethod
    def from_linear(cls, linear: nn.Linear, outlier_idx: torch.Tensor, bits: int, *,
                    dtype: torch.dtype = torch.float16, weight_scale: torch.Tensor | None = None) -> "QuikLinear":
        """Quantize an ``nn.Linear`` the QUIK way (round to nearest; GPTQ comes from ``bitlaws.ptq``).

        Args:
            linear: the layer, weight ``(N, K)``.
            outlier_idx: (k,) integer tensor — input features kept in 16 bits; distinct, in
                [0, K); stored ascending. k = 0 (no outliers) and k = K (all outliers) are allowed.
            bits: 8 or 4 — the base weights and activations.
            dtype: float16 (QUIK's) or bfloat16 — storage of the outlier weights and the bias.
            weight_scale: (N,) float — sigma_n to use instead of absmax / (2^(bits-1) - 1) of the
                base columns (for weights already on a grid, e.g. after GPTQ). Codes are
                ``clamp(round(W / sigma), -2^(bits-1), 2^(bits-1) - 1)``.

        Returns:
            A QuikLinear on the linear's device.

        Raises:
            TypeError: `linear` is not an ``nn.Linear``, or a dtype is wrong. ValueError: NaN or
            Inf in the weight or bias (integer codes cannot hold them), bad `outlier_idx` (not 1-D,
            repeated or out of range), bits not 4 or 8, or a `weight_scale` of the wrong shape,
            not positive or not finite.
        """
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be an nn.Linear, got {type(linear).__name__}")
        for what, t in (("weight", linear.weight), ("bias", linear.bias)):
            if t is not None and not bool(torch.isfinite(t.detach()).all()):
                bad = (~torch.isfinite(t.detach())).nonzero()[0].tolist()
                raise ValueError(f"QuikLinear.from_linear: the linear's {what} has NaN or Inf (first at index "
                                 f"{bad}); refusing to quantize it (an integer code has no NaN)")
        n, k_in = linear.weight.shape
        layer = cls(k_in, n, outlier_idx, bits, dtype=dtype, bias=linear.bias is not None)
        device = linear.weight.device
        W = linear.weight.detach().float()
        base, outl = layer.base_idx.long().to(device), layer.outlier_idx.long().to(device)
        fmt = f"int{bits}"
        W_base = W[:, base]
        if weight_scale is not None:
            if not isinstance(weight_scale, torch.Tensor) or not weight_scale.dtype.is_floating_point:
                raise TypeError("weight_scale must be a floating-point torch.Tensor")
            if tuple(weight_scale.shape) != (n,):
                raise ValueError(f"weight_scale must have shape ({n},), got {tuple(weight_scale.shape)}")
            if not bool((weight_scale > 0).all()) or not bool(torch.isfinite(weight_scale).all()):
                raise ValueError("weight_scale must be positive and finite")
            sigma = weight_scale.detach().float().to(device).reshape(n, 1)
        elif W_base.shape[1]:
            sigma, _ = choose_qparams(W_base, fmt, PerChannel(0), symmetric=True)
        else:
            sigma = torch.ones(n, 1, device=device)
        codes = quantize(W_base, sigma, torch.zeros_like(sigma), fmt, symmetric=True)
        layer = layer.to(device)
        layer.w_codes.copy_(pack_int4(codes) if bits == 4 else codes.to(torch.int8))
        layer.w_scale.copy_(sigma.reshape(n))
        layer.w_rowsum.copy_((codes.sum(dim=1).double() * sigma.reshape(n).double()).float())
        layer.w_outlier.copy_(W[:, outl].to(dtype))
        if linear.bias is not None:
            layer.bias.copy_(linear.bias.detach().to(dtype))
        return layer

    def weight_codes(self) -> torch.Tensor:
        """(N, K_b) int8: the base weight codes, unpacked at 4 bits."""
        if self.bits == 4:
            return unpack_int4(self.w_codes, self.base_idx.numel())
        return self.w_codes

    def dequantized_weight(self) -> torch.Tensor:
        """(N, K) float32: W_hat on the base columns, the stored 16-bit values on the outlier ones."""
        W = torch.empty(self.out_features, self.in_features, device=self.w_scale.device)
        W[:, self.base_idx.long()] = self.weight_codes().float() * self.w_scale[:, None]
        W[:, self.outlier_idx.long()] = self.w_outlier.float()
        return W

    def weight_bytes(self) -> int:
        """Bytes of every buffer the layer keeps (codes, scales, row sums, indices, outliers, bias)."""
        return sum(b.numel() * b.element_size() for b in self.buffers())

    def _use_triton(self, x: torch.Tensor) -> bool:
        if self.impl not in _IMPLS:
            raise ValueError(f"impl must be one of {_IMPLS}, got {self.impl!r}")
        if self.impl == "auto":
            return x.is_cuda and HAS_TRITON
        return self.impl == "triton"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``y = x_hat @ W_hat^T + x_outlier @ W_outlier^T + b``.

        Args:
            x: (..., K) float16, bfloat16 or float32 on the layer's device (any leading shape:
                batch and tokens are flattened into M rows).

        Returns:
            (..., N) in x's dtype.

        Raises:
            TypeError: x is not a float tensor. ValueError: its last axis is not K, or it is on
            another device than the layer.
        """
        if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"x must be a float16, bfloat16 or float32 tensor, got {getattr(x, 'dtype', type(x))}")
        if x.dim() < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"x must have {self.in_features} features on its last axis, got shape {tuple(x.shape)}")
        if x.device != self.w_scale.device:
            raise ValueError(f"x is on {x.device} but the layer is on {self.w_scale.device}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features).contiguous()
        if self._use_triton(x):
            act = quik_act(x2, self.base_idx, self.outlier_idx, self.bits)
            y = act.x_outlier @ self.w_outlier.to(x.dtype).t() if self.n_outliers else None
            out = int_gemm_dequant(act.codes, self.w_codes, act.scale, act.zero, self.w_scale, self.w_rowsum,
                                   bits=self.bits, y=y, bias=self.bias, out_dtype=x.dtype)
        else:
            act = quik_act_ref(x2, self.base_idx, self.outlier_idx, self.bits)
            # The 16-bit outlier GEMM in fp32 here: fp16 matmul on the CPU is very slow.
            y = act.x_outlier.float() @ self.w_outlier.float().t() if self.n_outliers else None
            out = int_gemm_dequant_ref(act.codes, self.w_codes, act.scale, act.zero, self.w_scale, self.w_rowsum,
                                       bits=self.bits, y=y, bias=self.bias, out_dtype=x.dtype)
        return out.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}, "
                f"n_outliers={self.n_outliers}, outlier_dtype={self.w_outlier.dtype}, impl={self.impl!r}")


def _check_outliers(outlier_idx, k_in: int) -> torch.Tensor:
    if not isinstance(outlier_idx, torch.Tensor):
        outlier_idx = torch.as_tensor(outlier_idx, dtype=torch.long)
    if outlier_idx.dtype.is_floating_point or outlier_idx.dtype == torch.bool:
        raise TypeError(f"outlier_idx must be an integer tensor, got {outlier_idx.dtype}")
    if outlier_idx.dim() != 1:
        raise ValueError(f"outlier_idx must be 1-D, got shape {tuple(outlier_idx.shape)}")
    idx = outlier_idx.detach().cpu().long()
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= k_in):
        raise ValueError(f"outlier_idx must lie in [0, {k_in}), got [{int(idx.min())}, {int(idx.max())}]")
    if idx.unique().numel() != idx.numel():
        raise ValueError("outlier_idx must not repeat a feature")
    return idx.sort().values


def benchmark_quik_linear(n_out: int, k_in: int, tokens=(1, 16, 256, 2048), variants=((8, 0), (4, 256)), *,
                          device: str = "cpu", dtype: torch.dtype = torch.float32, reps: int = 20) -> list[dict]:
    """Time QuikLinear forwards and the dense layer they replace, in the same run: tidy rows.

    The layers are built once (on `device`) and timed at every token count. The dense baseline is
    ``torch.nn.functional.linear`` in `dtype` (bf16 on CUDA, fp32 on the CPU), timed before and
    after the QUIK variants (its latency is the mean of the two medians, which evens out drift on a
    shared machine). On CUDA, peak memory of each forward is measured.

    Args:
        n_out, k_in: the layer's shape. tokens: token counts M per forward.
        variants: (bits, n_outliers) pairs, one QuikLinear each (outliers drawn at random).
        device, dtype, reps: where, in which activation dtype, how many timed calls.

    Returns:
        Per M, one dict for ``method = dense`` and one per variant (``quik_w{bits}a{bits}``), with
        ``latency_ms``, ``speedup`` (dense / this), ``weight_bytes`` and ``peak_mem_bytes`` (NaN
        off CUDA).
    """
    from .timing import peak_mem_bytes, time_ms

    torch.manual_seed(0)
    dense = nn.Linear(k_in, n_out, bias=False, device=device)
    with torch.no_grad():
        dense.weight.normal_(0.0, k_in**-0.5)
    store = torch.bfloat16 if dtype == torch.bfloat16 else torch.float16
    layers = [(bits, k, QuikLinear.from_linear(dense, torch.randperm(k_in)[:k], bits, dtype=store))
              for bits, k in variants]
    dense = dense.to(dtype)
    dense_bytes = sum(p.numel() * p.element_size() for p in dense.parameters())
    dtype_name = str(dtype).removeprefix("torch.")
    rows = []
    for m in tokens:
        x = torch.randn(m, k_in, device=device, dtype=dtype)
        with torch.no_grad():
            t_first = time_ms(lambda: dense(x), device=device, reps=reps)
            timed = [(bits, k, q, time_ms(lambda: q(x), device=device, reps=reps),
                      peak_mem_bytes(lambda: q(x), device=device)) for bits, k, q in layers]
            t_dense = 0.5 * (t_first + time_ms(lambda: dense(x), device=device, reps=reps))
            mem_dense = peak_mem_bytes(lambda: dense(x), device=device)
        common = {"part": "layer", "m_tokens": m, "n_out": n_out, "k_in": k_in, "dtype": dtype_name}
        rows.append({**common, "method": "dense", "impl": "torch", "bits": 16, "n_outliers": 0,
                     "latency_ms": t_dense, "speedup": 1.0, "weight_bytes": dense_bytes, "peak_mem_bytes": mem_dense})
        for bits, k, q, ms, mem in timed:
            rows.append({**common, "method": f"quik_w{bits}a{bits}", "impl": "triton" if q._use_triton(x) else "ref",
                         "bits": bits, "n_outliers": k, "latency_ms": ms, "speedup": t_dense / ms,
                         "weight_bytes": q.weight_bytes(), "peak_mem_bytes": mem})
    return rows

"""Quantizers: `choose_qparams`, `quantize`, `dequantize`, `fake_quantize`, `cast_to_format`, one `round_ste`.

Names follow torchao; formats are named as in ml_dtypes (see :mod:`bitlaws.formats`). One affine
convention for integer and floating-point formats alike: x is stored as
``q = clamp(round(x / scale) + zero_point, q_min, q_max)`` and read back as
``x_hat = (q - zero_point) * scale`` (`scale`: the float32 step size, > 0). Symmetric: absmax, no
zero point, signed codes (Kumar et al. 2024, App. D). Asymmetric: min-max over a range widened to
include 0, with a zero point, unsigned codes (GPTQ's default). Floating-point formats: symmetric
only, ``scale = max|x| / fmt.max``, cast to the format's grid (App. D.2). Rounding is half to even;
gradients pass straight through the rounding and are zero where a value is clipped.

Shapes: activations ``(B, T, C)``; weights ``W`` are ``(out, in)`` as in ``nn.Linear``; ``G``
groups of ``group_size`` along the last axis. The formulas, the zero-scale fallback, the
floating-point path and the gradients are written out in the book's methods page, section
"Quantizers".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

import torch

from .formats import FloatFormat, IntFormat, parse_format

__all__ = [
    "PerTensor",
    "PerChannel",
    "PerGroup",
    "PerToken",
    "Granularity",
    "QuantSpec",
    "round_ste",
    "cast_to_format",
    "choose_qparams",
    "quantize",
    "dequantize",
    "fake_quantize",
]


@dataclass(frozen=True)
class PerTensor:
    """One scale for the whole tensor."""


@dataclass(frozen=True)
class PerChannel:
    """One scale per index of `axis` (axis 0 of a weight ``(out, in)`` = per output channel).

    `axis` counts from the end when negative, as in torch; a tensor of d dimensions allows
    ``-d <= axis < d`` (checked by :func:`choose_qparams`, which knows d).

    Raises:
        ValueError: `axis` is not an int.
    """

    axis: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.axis, bool) or not isinstance(self.axis, int):
            raise ValueError(f"PerChannel.axis must be an int, got {self.axis!r}")


@dataclass(frozen=True)
class PerGroup:
    """One scale per contiguous group of `group_size` elements along the last axis, per row."""

    group_size: int

    def __post_init__(self) -> None:
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 1:
            raise ValueError(f"PerGroup.group_size must be a positive int, got {self.group_size!r}")


@dataclass(frozen=True)
class PerToken:
    """One scale per token: reduce over the last (feature) axis only, for activations ``(B, T, C)``."""


Granularity = Union[PerTensor, PerChannel, PerGroup, PerToken]


@dataclass(frozen=True)
class QuantSpec:
    """What `fake_quantize` does to a tensor.

    Args:
        fmt: a format name (``"int4"``, ``"fp4_e2m1fn"``) or spec.
        granularity: one of PerTensor(), PerChannel(axis), PerGroup(size), PerToken().
        symmetric: absmax without zero point (True) or min-max with zero point (False).

    Raises:
        ValueError: unknown format or granularity; a floating-point format with symmetric=False.
    """

    fmt: str | IntFormat | FloatFormat = "int8"
    granularity: Granularity = PerChannel(0)
    symmetric: bool = True

    def __post_init__(self) -> None:
        f = parse_format(self.fmt)
        if isinstance(f, FloatFormat) and not self.symmetric:
            raise ValueError(
                f"QuantSpec.symmetric must be True for the floating-point format {f.name} "
                "(FP formats quantize with a symmetric absmax scale only)"
            )
        if not isinstance(self.granularity, (PerTensor, PerChannel, PerGroup, PerToken)):
            raise ValueError(
                f"QuantSpec.granularity must be PerTensor(), PerChannel(axis), PerGroup(size) or PerToken(), "
                f"got {self.granularity!r}"
            )

    @property
    def bits(self) -> int:
        return parse_format(self.fmt).bits


def round_ste(x: torch.Tensor, fmt: str | FloatFormat | None = None) -> torch.Tensor:
    """Round in the forward pass, identity in the backward (straight-through estimator).

    The package's one STE: the floating-point quantizers round through it, and the integer path of
    :func:`fake_quantize` is the same computation fused into one autograd node (bit-identical in
    values and gradients; the tests keep the composition with `round_ste` as its oracle).

    Args:
        x: (any shape) float.
        fmt: None rounds half to even to the integers (``torch.round``). A floating-point format
            rounds to the nearest value of its significand grid, ties to the even code, **without
            saturating** (the grid's binades go on past ``fmt.max`` as the integers go on past
            ``q_max``); the caller clamps afterwards so that clipped values get zero gradient.
            `x` must be finite for a format; the result is float32 there (as the cast).

    Returns:
        tensor like `x` (float32 for a format), gradient 1 everywhere.
    """
    if fmt is None:
        return x + (torch.round(x) - x).detach()
    spec = parse_format(fmt)
    if not isinstance(spec, FloatFormat):
        raise ValueError(f"round_ste: fmt must be a floating-point format or None, got {spec.name}")
    x32 = x.float()
    return x32 + (_round_fp32(x32.detach(), spec, saturate=False) - x32).detach()


# ----------------------------------------------------------------------------- floating-point cast

_F32_MAGNITUDE = 0x7FFFFFFF  # every bit of a float32 but its sign


def _mul_pow2_(a: torch.Tensor, k: int) -> torch.Tensor:
    """``a *= 2^k`` in place, exact where the result is a float32 normal, in steps float32 can hold."""
    while k != 0:
        step = max(-126, min(127, k))
        a.mul_(2.0**step)
        k -= step
    return a


def _round_fp32(y: torch.Tensor, fmt: FloatFormat, saturate: bool) -> torch.Tensor:
    """Round float32 `y` to `fmt`'s grid: nearest, ties to the even code; optional saturation.

    Normal range (``|y| >= min_normal``): integer arithmetic on float32's bits. Adding
    ``2^(s-1) - 1 + lsb`` (``s = 23 - M`` dropped bits, ``lsb`` the last kept bit) and clearing the
    dropped bits rounds the significand to M bits, half to even; a carry moves into the exponent as
    it should, never into the sign bit (the largest finite magnitude plus 2^22 stays below 2^31),
    so it works on the signed bits directly. For M = 0 the last kept bit is the exponent's, so ties
    go to the even exponent field (float32's bias 127 and the format's 2^(E-1) - 1 are both odd for
    E >= 2, so the parities agree; E = 1, M = 0 has a single normal value and no tie between
    normals).
    Subnormal range: a fixed step ``min_subnormal`` (``min_normal`` when M = 0), ``torch.round``
    on ``y / step`` (exact: the step is a power of two; the sign, and -0, are kept). The two
    results are merged with an integer mask (``torch.where`` is several times slower on the CPU).

    Without `saturate`, `y` must be finite and the grid goes on past ``fmt.max``. With it, `y` is
    first clamped to ``±fmt.max`` (on the grid, so rounding never passes it; Inf becomes max) and
    NaN is carried through by adding ``y_clamped * 0`` (exact, keeps the sign of zero).
    """
    # In-place steps on a few fresh buffers: besides saving memory traffic, this avoids glibc
    # returning and re-faulting freed megabyte temporaries, which made a chain of out-of-place
    # ops several times slower on the CPU.
    yc = torch.clamp(y, -fmt.max, fmt.max) if saturate else y
    b = yc.view(torch.int32)
    shift = 23 - fmt.man_bits
    if shift > 0:
        r = torch.bitwise_right_shift(b, shift).bitwise_and_(1)
        r.add_(b).add_((1 << (shift - 1)) - 1).bitwise_and_(~((1 << shift) - 1))
    else:
        r = b.clone()
    # Subnormals of the format: step 2^(1 - bias - M); |y| / step < 2^M there, so both scalings are exact.
    k = fmt.bias - 1 + fmt.man_bits
    b_sub = _mul_pow2_(_mul_pow2_(yc.clone(), k).round_(), -k).view(torch.int32)
    # sub = -1 (all bits set) where |y| < min_normal, else 0: arithmetic shift of a negative difference.
    min_normal_bits = struct.unpack("<i", struct.pack("<f", fmt.min_normal))[0]
    sub = torch.bitwise_and(b, _F32_MAGNITUDE).sub_(min_normal_bits).bitwise_right_shift_(31)
    # r = sub ? b_sub : r, as r ^ ((r ^ b_sub) & sub)
    r.bitwise_xor_(b_sub.bitwise_xor_(r).bitwise_and_(sub))
    r = r.view(torch.float32)
    if saturate:
        r.add_(torch.mul(yc, 0.0, out=sub.view(torch.float32)))  # NaN in, NaN out
    return r


def cast_to_format(y: torch.Tensor, fmt: str | FloatFormat) -> torch.Tensor:
    """Cast to a floating-point format (no scaling): round to nearest, ties to even, saturate.

    Args:
        y: (any shape) float16/bfloat16/float32/float64 — values in the format's own units.
        fmt: a floating-point format name or :class:`~bitlaws.formats.FloatFormat`.

    Returns:
        tensor like `y` (same dtype) holding the format's values: the nearest one to each element
        (a tie goes to the even code: half to even on the significand, the even exponent field when
        M = 0); magnitudes beyond ``fmt.max``, Inf included, become ``±fmt.max`` (saturation, for
        every family — ml_dtypes gives NaN or Inf there instead); NaN stays NaN; the sign of zero is
        kept. Computed in float32, then converted to `y`'s dtype (exact when the format's values
        fit that dtype, e.g. any format with M <= 7 in bfloat16); float64 input is first rounded to
        float32 (a double rounding only for float64 inputs within half a float32 ulp of a tie).

    Raises:
        TypeError: `y` is not a floating-point tensor.
        ValueError: `fmt` is not a floating-point format.

    References:
        OCP 8-bit Floating Point Specification (2023), saturating conversion; ml_dtypes' casts.
    """
    if not isinstance(y, torch.Tensor) or not torch.is_floating_point(y):
        raise TypeError(f"cast_to_format takes a floating-point tensor, got {getattr(y, 'dtype', type(y).__name__)}")
    spec = parse_format(fmt)
    if not isinstance(spec, FloatFormat):
        raise ValueError(f"cast_to_format: {spec.name} is not a floating-point format")
    return _round_fp32(y.float().contiguous(), spec, saturate=True).to(y.dtype)


def _check_input(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"quantizers take floating-point tensors, got dtype {x.dtype}")
    if x.numel() == 0:
        raise ValueError("cannot choose quantization parameters for an empty tensor")


def _check_finite(*stats: torch.Tensor) -> None:
    """Raise if a slice statistic (absmax, min, max) is NaN or Inf.

    amax/amin propagate NaN and Inf, so this is the same test as ``isfinite(x).all()`` on the
    input (also catching float64 values that overflow float32), at the cost of the scales only.
    """
    for t in stats:
        if not bool(torch.isfinite(t).all()):
            raise ValueError("tensor contains NaN or Inf; quantization parameters would be undefined")


def _check_granularity(x: torch.Tensor, granularity: Granularity) -> None:
    """Raise a ValueError naming what is allowed where `granularity` does not fit `x`'s shape."""
    if isinstance(granularity, PerTensor):
        return
    if x.dim() == 0:
        raise ValueError(f"{granularity!r} needs a tensor with at least one dimension, got a 0-d tensor; "
                         "use PerTensor() for a scalar")
    if isinstance(granularity, PerChannel) and not -x.dim() <= granularity.axis < x.dim():
        raise ValueError(f"PerChannel(axis={granularity.axis}) is out of range for a {x.dim()}-D tensor of shape "
                         f"{tuple(x.shape)}: allowed axes are {-x.dim()} to {x.dim() - 1}")


def _grouped(x: torch.Tensor, granularity: Granularity) -> torch.Tensor:
    """View `x` so that one reduction over the returned `dims` gives one scale per slice."""
    if isinstance(granularity, PerGroup):
        g = granularity.group_size
        if x.shape[-1] % g:
            raise ValueError(f"last dimension {x.shape[-1]} is not a multiple of group_size {g}")
        return x.reshape(*x.shape[:-1], x.shape[-1] // g, g)
    return x


def _reduce_dims(x: torch.Tensor, granularity: Granularity) -> tuple[int, ...]:
    if isinstance(granularity, PerTensor):
        return tuple(range(x.dim()))
    if isinstance(granularity, PerChannel):
        axis = granularity.axis % x.dim()
        return tuple(d for d in range(x.dim()) if d != axis)
    # PerToken and PerGroup (on the grouped view) both reduce the last axis only.
    return (x.dim() - 1,)


def choose_qparams(
    x: torch.Tensor,
    fmt: str | IntFormat | FloatFormat,
    granularity: Granularity = PerTensor(),
    symmetric: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point for `x` (formulas: the book's methods page, section "Quantizers").

    Args:
        x: (any shape) float — the tensor to be quantized.
        fmt: format name or spec: ``"int2"`` ... ``"int16"``, or a floating-point format
            (``"fp4_e2m1fn"``, ...), for which ``scale = absmax / fmt.max`` and the zero point is 0.
        granularity: how many scales: PerTensor, PerChannel(axis), PerGroup(size), PerToken.
        symmetric: absmax (True) or asymmetric min-max with zero point (False).

    Returns:
        scale: float32 step size, broadcastable to `x` (for PerGroup: to `x` viewed as
            ``(..., G, group_size)``); zero_point: float32 of the same shape (integer-valued).

    Raises:
        TypeError: `x` is not a floating-point tensor.
        ValueError: empty `x`, NaN/Inf in `x`, unknown `fmt`, a granularity that does not fit
            `x` (a PerChannel axis outside ``[-x.dim(), x.dim())``, or anything but PerTensor on a
            0-d tensor), a group size that does not divide the last dimension, or a
            floating-point format with ``symmetric=False``.
    """
    _check_input(x)
    _check_granularity(x, granularity)
    spec = parse_format(fmt)
    q_min, q_max = spec.qrange(symmetric)  # FloatFormat: (-max, max); raises if asymmetric
    xg = _grouped(x.detach().float(), granularity)
    dims = _reduce_dims(xg, granularity)
    if symmetric:
        # max(-min, max) is max|x| exactly, without the copy that x.abs() would allocate
        # (NaN and Inf propagate through amin/amax alike).
        absmax = torch.maximum(-xg.amin(dim=dims, keepdim=True), xg.amax(dim=dims, keepdim=True))
        _check_finite(absmax)
        # Divide by a tensor, not a Python number: CUDA turns the latter into a multiply by the
        # reciprocal, which can differ by one rounding step from the kernels' exact division.
        scale = absmax / torch.full_like(absmax, q_max)
        scale = torch.where(scale == 0, torch.ones_like(scale), scale)
        zero_point = torch.zeros_like(scale)
    else:
        x_min = xg.amin(dim=dims, keepdim=True).clamp(max=0)
        x_max = xg.amax(dim=dims, keepdim=True).clamp(min=0)
        _check_finite(x_min, x_max)
        span = x_max - x_min
        scale = span / torch.full_like(span, q_max - q_min)
        scale = torch.where(scale == 0, torch.ones_like(scale), scale)
        zero_point = torch.round(-x_min / scale).clamp(q_min, q_max)
    return scale, zero_point


def _view_like(t: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`x` viewed as grouped when `scale` carries a group axis (PerGroup), else `x` unchanged."""
    if scale.dim() == t.dim() + 1:
        g = t.shape[-1] // scale.shape[-2]
        return t.reshape(*t.shape[:-1], scale.shape[-2], g)
    return t


def quantize(
    x: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor,
    fmt: str | IntFormat | FloatFormat,
    symmetric: bool = True,
) -> torch.Tensor:
    """Integer codes ``clamp(round(x / scale) + zero_point, q_min, q_max)``, or FP-grid values.

    Args:
        x: (any shape) float.
        scale, zero_point: from :func:`choose_qparams` for the same granularity.
        fmt: integer or floating-point format. symmetric: which code range (signed or unsigned);
            must be True for a floating-point format.

    Returns:
        q: int32 codes of `x`'s shape for an integer format; for a floating-point format,
        float32 values ``cast_to_format(x / scale, fmt)`` (numbers on the format's grid, not bit
        codes; NaN stays NaN and ±Inf saturates, as the cast).

    Raises:
        ValueError: a floating-point format with ``symmetric=False``; for an integer format, NaN
            or Inf in ``x / scale + zero_point`` (an integer code has no NaN: the int32 cast would
            make it −2³¹, and Inf would be clipped silently to the range's end).
    """
    spec = parse_format(fmt)
    q_min, q_max = spec.qrange(symmetric)
    xv = _view_like(x, x, scale)
    if isinstance(spec, FloatFormat):
        return _round_fp32((xv.float() / scale).contiguous(), spec, saturate=True).reshape(x.shape)
    q = torch.round(xv / scale) + zero_point
    # a finite sum has no NaN/Inf in it; only when it is not is the elementwise test needed
    if not (bool(torch.isfinite(q.sum())) or bool(torch.isfinite(q).all())):
        raise ValueError(f"quantize: NaN or Inf in the input (or its scale) for the integer format {spec.name}; "
                         "integer codes cannot represent it")
    q = torch.clamp(q, q_min, q_max)
    return q.reshape(x.shape).to(torch.int32)


def dequantize(q: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
    """Real values ``(q - zero_point) * scale`` as float32, of `q`'s shape.

    `q` is what :func:`quantize` returned: integer codes, or FP-grid values (zero point 0).
    """
    qv = _view_like(q, q, scale).float()
    return ((qv - zero_point) * scale).reshape(q.shape)


def fake_quantize(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """``dequantize(quantize(x))`` in `x`'s dtype, differentiable through the rounding (`round_ste`;
    for integer formats its fused, bit-identical form `_FakeQuantInt`).

    The scale is computed afresh from `x` (detached: no gradient flows into the scale).

    Args:
        x: (any shape) float — weights ``(out, in)`` or activations ``(B, T, C)``.
        spec: format (integer or floating point), granularity and symmetry.

    Returns:
        x_hat: tensor like `x`, every element on the grid of its slice's scale: for an integer
        format ``(q - zero_point) * scale``, for a floating-point one ``cast(x / scale) * scale``.

    Raises:
        TypeError, ValueError: as :func:`choose_qparams`.

    References:
        Kumar et al. 2024, App. D (forward-only fake quantization, symmetric absmax) and App. D.2
        (floating-point formats).
    """
    scale, zero_point = choose_qparams(x, spec.fmt, spec.granularity, spec.symmetric)
    fmt = parse_format(spec.fmt)
    q_min, q_max = fmt.qrange(spec.symmetric)
    xv = _view_like(x, x, scale)
    if isinstance(fmt, FloatFormat):
        y = round_ste(xv.float() / scale, fmt)
        return (torch.clamp(y, q_min, q_max) * scale).reshape(x.shape).to(x.dtype)
    return _FakeQuantInt.apply(xv.float(), scale, zero_point, q_min, q_max).reshape(x.shape).to(x.dtype)


class _FakeQuantInt(torch.autograd.Function):
    """``(clamp(round_ste(x / scale) + zero_point, q_min, q_max) - zero_point) * scale``, fused.

    The same operations in the same order as that composition of differentiable ops (which
    `tests/test_quant.py` keeps as the oracle), on one buffer in place, and one backward that
    replays the composition's chain rule: ``where(q_min <= v <= q_max, (g · scale) / scale, 0)``
    with ``v = round(x / scale) + zero_point`` (the gradient of ``torch.clamp``), so values and
    gradients are bit-identical to the unfused form while the forward allocates one tensor instead
    of seven and autograd records one node instead of seven. `scale` and `zero_point` get no
    gradient (they are computed from a detached copy of `x`).

    x: float32 (any shape, already grouped for PerGroup); scale, zero_point: float32,
    broadcastable to `x`. Returns float32 like `x`.
    """

    @staticmethod
    def forward(ctx, x, scale, zero_point, q_min, q_max):  # noqa: D102 - documented on the class
        t = torch.div(x, scale)
        # round, then + zero_point: a rounded -0 becomes +0 here exactly as in the STE's
        # x + (round(x) - x), so even the sign bits of zeros match the unfused form.
        t.round_().add_(zero_point)
        lo, hi = torch.aminmax(t)
        inside = None  # the usual case with absmax / min-max scales: nothing is clipped
        if bool(lo < q_min) or bool(hi > q_max):
            inside = (t >= q_min) & (t <= q_max)
            t.clamp_(q_min, q_max)
        t.sub_(zero_point).mul_(scale)
        ctx.save_for_backward(scale, inside if inside is not None else scale.new_empty(0))
        ctx.clipped = inside is not None
        return t

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        scale, inside = ctx.saved_tensors
        g = grad.mul(scale)
        if ctx.clipped:
            g.masked_fill_(~inside, 0.0)
        return g.div_(scale), None, None, None, None

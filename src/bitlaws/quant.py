"""Quantizers: `choose_qparams`, `quantize`, `dequantize`, `fake_quantize`, one `round_ste`.

Names follow torchao; formats are named as in ml_dtypes (see :mod:`bitlaws.formats`).

Convention (affine, as torchao and GPTQ): a real value x is represented by an integer code
``q = clamp(round(x / scale) + zero_point, q_min, q_max)`` and read back as
``x_hat = (q - zero_point) * scale``. `scale` is the step size (float32, > 0).

* **Symmetric** (absmax, no zero point; the paper's training-time scheme, Kumar et al. App. D):
  ``scale = max|x| / (2^(b-1) - 1)``, ``zero_point = 0``, codes in ``[-2^(b-1), 2^(b-1) - 1]``.
* **Asymmetric** (min-max with zero point; GPTQ's default for post-training quantization):
  the range is widened to include 0 (``x_min = min(min x, 0)``, ``x_max = max(max x, 0)``, as in
  GPTQ's reference quantizer), ``scale = (x_max - x_min) / (2^b - 1)``,
  ``zero_point = round(-x_min / scale)``, codes in ``[0, 2^b - 1]``.
* A slice whose scale would be zero (all zeros, or values so tiny that ``range / steps``
  underflows float32) gets ``scale = 1`` so nothing divides by zero; its values then round to 0
  (exactly, for an all-zero slice).

Rounding is round-half-to-even (``torch.round``). Gradients: `round_ste` passes the gradient
straight through the rounding; values clipped at the range ends get **zero** gradient (the
gradient of ``torch.clamp``). With absmax/min-max scales nothing is clipped except by the
rounding of the zero point, so in practice every element passes its gradient.

Glossary for shapes: activations ``(B, T, C)``; weights ``W`` are ``(out, in)`` as in
``nn.Linear``; ``G`` groups of ``group_size`` along the last axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from .formats import IntFormat, parse_format

__all__ = [
    "PerTensor",
    "PerChannel",
    "PerGroup",
    "PerToken",
    "Granularity",
    "QuantSpec",
    "round_ste",
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
    """One scale per index of `axis` (axis 0 of a weight ``(out, in)`` = per output channel)."""

    axis: int = 0


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
        fmt: a format name (``"int4"``) or spec.
        granularity: one of PerTensor(), PerChannel(axis), PerGroup(size), PerToken().
        symmetric: absmax without zero point (True) or min-max with zero point (False).

    Raises:
        ValueError: unknown format or granularity.
    """

    fmt: str = "int8"
    granularity: Granularity = PerChannel(0)
    symmetric: bool = True

    def __post_init__(self) -> None:
        parse_format(self.fmt)
        if not isinstance(self.granularity, (PerTensor, PerChannel, PerGroup, PerToken)):
            raise ValueError(
                f"QuantSpec.granularity must be PerTensor(), PerChannel(axis), PerGroup(size) or PerToken(), "
                f"got {self.granularity!r}"
            )

    @property
    def bits(self) -> int:
        return parse_format(self.fmt).bits


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """Round half to even in the forward pass, identity in the backward (straight-through estimator).

    The only STE in the package: every quantizer rounds through it.
    """
    return x + (torch.round(x) - x).detach()


def _check_input(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"quantizers take floating-point tensors, got dtype {x.dtype}")
    if x.numel() == 0:
        raise ValueError("cannot choose quantization parameters for an empty tensor")
    if not torch.isfinite(x).all():
        raise ValueError("tensor contains NaN or Inf; quantization parameters would be undefined")


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
    fmt: str | IntFormat,
    granularity: Granularity = PerTensor(),
    symmetric: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point for `x` (see the module docstring for the formulas).

    Args:
        x: (any shape) float — the tensor to be quantized.
        fmt: integer format name or spec, ``"int2"`` ... ``"int16"``.
        granularity: how many scales: PerTensor, PerChannel(axis), PerGroup(size), PerToken.
        symmetric: absmax (True) or asymmetric min-max with zero point (False).

    Returns:
        scale: float32 step size, broadcastable to `x` (for PerGroup: to `x` viewed as
            ``(..., G, group_size)``); zero_point: float32 of the same shape (integer-valued).

    Raises:
        TypeError: `x` is not a floating-point tensor.
        ValueError: empty `x`, NaN/Inf in `x`, unknown `fmt`, or a group size that does not divide
            the last dimension.
    """
    _check_input(x)
    spec = parse_format(fmt)
    q_min, q_max = spec.qrange(symmetric)
    xg = _grouped(x.detach().float(), granularity)
    dims = _reduce_dims(xg, granularity)
    if symmetric:
        absmax = xg.abs().amax(dim=dims, keepdim=True)
        # Divide by a tensor, not a Python number: CUDA turns the latter into a multiply by the
        # reciprocal, which can differ by one rounding step from the kernels' exact division.
        scale = absmax / torch.full_like(absmax, q_max)
        scale = torch.where(scale == 0, torch.ones_like(scale), scale)
        zero_point = torch.zeros_like(scale)
    else:
        x_min = xg.amin(dim=dims, keepdim=True).clamp(max=0)
        x_max = xg.amax(dim=dims, keepdim=True).clamp(min=0)
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
    x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, fmt: str | IntFormat, symmetric: bool = True
) -> torch.Tensor:
    """Integer codes ``clamp(round(x / scale) + zero_point, q_min, q_max)``.

    Args:
        x: (any shape) float.
        scale, zero_point: from :func:`choose_qparams` for the same granularity.
        fmt: integer format. symmetric: which code range (signed or unsigned).

    Returns:
        q: int32 tensor of `x`'s shape.
    """
    spec = parse_format(fmt)
    q_min, q_max = spec.qrange(symmetric)
    xv = _view_like(x, x, scale)
    q = torch.clamp(torch.round(xv / scale) + zero_point, q_min, q_max)
    return q.reshape(x.shape).to(torch.int32)


def dequantize(q: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
    """Real values ``(q - zero_point) * scale`` as float32, of `q`'s shape."""
    qv = _view_like(q, q, scale).float()
    return ((qv - zero_point) * scale).reshape(q.shape)


def fake_quantize(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """``dequantize(quantize(x))`` in `x`'s dtype, differentiable through `round_ste`.

    The scale is computed afresh from `x` (detached: no gradient flows into the scale).

    Args:
        x: (any shape) float — weights ``(out, in)`` or activations ``(B, T, C)``.
        spec: format, granularity and symmetry.

    Returns:
        x_hat: tensor like `x`, every element on the grid of its slice's scale.

    Raises:
        TypeError, ValueError: as :func:`choose_qparams`.

    References:
        Kumar et al. 2024, App. D (forward-only fake quantization, symmetric absmax).
    """
    scale, zero_point = choose_qparams(x, spec.fmt, spec.granularity, spec.symmetric)
    q_min, q_max = parse_format(spec.fmt).qrange(spec.symmetric)
    xv = _view_like(x, x, scale)
    q = torch.clamp(round_ste(xv.float() / scale) + zero_point, q_min, q_max)
    return ((q - zero_point) * scale).reshape(x.shape).to(x.dtype)

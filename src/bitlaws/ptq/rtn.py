"""Round-to-nearest (RTN) post-training quantization of weights.

Each linear weight ``W: (out, in)`` inside the blocks is replaced, in place, by its fake-quantized
copy ``dequantize(quantize(W))`` on a per-output-channel grid (one scale per row). The default is
asymmetric min-max with a zero point, GPTQ's default quantizer, so RTN and GPTQ share a grid
(the book's methods page, "Post-training quantization"). Embeddings and lm_head stay in high precision.

References:
    Kumar et al. 2024, App. F (RTN reproduces the δ_PTQ trend of GPTQ); Frantar et al. 2022
    (GPTQ's quantizer: min-max range widened to include zero).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..quant import PerChannel, PerGroup, QuantSpec, fake_quantize
from . import _check_finite, block_linears

__all__ = ["RTNConfig", "rtn_quantize_"]


@dataclass(frozen=True)
class RTNConfig:
    """Round-to-nearest weight quantization.

    Args:
        bits: weight bits P_post, 2 to 16.
        symmetric: absmax without zero point (True) or min-max with zero point (False, default).
        group_size: 0 for one scale per output channel, else a group size along the input axis.

    Raises:
        ValueError: bits out of range, negative group size.
    """

    bits: int = 4
    symmetric: bool = False
    group_size: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 2 <= self.bits <= 16:
            raise ValueError(f"RTNConfig.bits must be an int in [2, 16], got {self.bits!r}")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 0:
            raise ValueError(f"RTNConfig.group_size must be 0 (per channel) or a positive int, got {self.group_size!r}")

    @property
    def method(self) -> str:
        """The results' ``ptq_method`` column."""
        return "rtn"

    @property
    def quant_scheme(self) -> str:
        """Short name for the results' ``quant_scheme`` column, e.g. ``asym_per_channel``."""
        kind = "sym" if self.symmetric else "asym"
        gran = f"group{self.group_size}" if self.group_size else "per_channel"
        return f"{kind}_{gran}"

    def spec(self) -> QuantSpec:
        gran = PerGroup(self.group_size) if self.group_size else PerChannel(0)
        return QuantSpec(fmt=f"int{self.bits}", granularity=gran, symmetric=self.symmetric)


@torch.no_grad()
def rtn_quantize_(model: nn.Module, cfg: RTNConfig) -> dict[str, float]:
    """Quantize every linear weight inside the blocks of `model` in place.

    Args:
        model: any transformers causal LM (or module with ``nn.Linear`` layers).
        cfg: bits, symmetry and grouping.

    Returns:
        Relative weight error ``||W - W_hat||_F / ||W||_F`` per layer name (for diagnostics).

    Raises:
        ValueError: a weight with NaN/Inf, a group size not dividing in_features, no linears.
    """
    spec = cfg.spec()
    errors: dict[str, float] = {}
    linears = block_linears(model)
    for name, lin in linears.items():  # validate every layer first: an error leaves `model` untouched
        _check_finite(name, lin.weight)
        if cfg.group_size and lin.in_features % cfg.group_size:
            raise ValueError(f"{name}: in_features {lin.in_features} is not a multiple of group_size {cfg.group_size}")
    for name, lin in linears.items():
        w = lin.weight
        w_hat = fake_quantize(w.float(), spec)
        norm = w.float().norm().item()
        errors[name] = (w.float() - w_hat).norm().item() / norm if norm > 0 else 0.0
        w.copy_(w_hat.to(w.dtype))
    return errors

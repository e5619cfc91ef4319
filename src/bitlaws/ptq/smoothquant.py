"""SmoothQuant (Xiao et al. 2023): migrate activation outliers into the weights, then W8A8 / W4A4.

For a linear ``y = x Wᵀ`` whose input ``x`` is produced by a layer we can rescale per channel,
``s_j = max|x_j|^α / max|W_{:,j}|^(1−α)`` (α = migration strength) divides channel j of the input
(folded into the producer) and multiplies column j of W: the product is unchanged in exact
arithmetic, and the activations' per-channel range is flattened. :func:`smooth_` folds the scales
into a Llama model (the norms before q/k/v and gate/up; ``up_proj`` before ``down_proj``);
:func:`smoothquant_quantize_` then quantizes every block linear as the RTN baselines, with
:mod:`bitlaws.ptq.quik`'s quantizers and no outliers.

The statistics, the folds, the floors on the scales, and why activations stay asymmetric per token
(QUIK's quantizer, not SmoothQuant's symmetric one) are written out in the book's methods page,
section "SmoothQuant".

Public names: ``SmoothQuantConfig``, ``smooth_``, ``smoothquant_quantize_``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .calibration import decoder_layers
from .quik import QuikConfig, quik_quantize_

__all__ = ["SmoothQuantConfig", "smooth_", "smoothquant_quantize_"]


@dataclass(frozen=True)
class SmoothQuantConfig:
    """SmoothQuant then RTN.

    Args:
        alpha: migration strength α in [0, 1] (0: nothing moves; 1: all of the activation range).
        bits: weight and activation bits of every block linear, 4 or 8.
        smooth_down: also smooth ``down_proj`` through ``up_proj`` (default True).
        min_scale: lower bound on ``s_j`` (and on the maxima it is computed from).

    Raises:
        ValueError: a field out of range, naming it.
    """

    alpha: float = 0.5
    bits: int = 8
    smooth_down: bool = True
    min_scale: float = 1e-5

    def __post_init__(self) -> None:
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 <= self.alpha <= 1:
            raise ValueError(f"SmoothQuantConfig.alpha must be in [0, 1], got {self.alpha!r}")
        if isinstance(self.bits, bool) or self.bits not in (4, 8):
            raise ValueError(f"SmoothQuantConfig.bits must be 4 or 8, got {self.bits!r}")
        if not isinstance(self.smooth_down, bool):
            raise ValueError(f"SmoothQuantConfig.smooth_down must be a bool, got {self.smooth_down!r}")
        if not (isinstance(self.min_scale, float) and math.isfinite(self.min_scale) and self.min_scale > 0):
            raise ValueError(f"SmoothQuantConfig.min_scale must be a positive float, got {self.min_scale!r}")

    def as_dict(self) -> dict:
        return asdict(self)

    def quik_config(self) -> QuikConfig:
        """The quantization after smoothing: RTN, no outliers, every linear at ``bits``."""
        return QuikConfig(bits_w=self.bits, bits_a=self.bits, n_outliers=0, n_outliers_down=0,
                          bits_down=self.bits, clip=False, weight_method="rtn")


def _scales(act: torch.Tensor, weights: list[torch.Tensor], cfg: SmoothQuantConfig) -> torch.Tensor:
    """(in,) float32 ``s_j = max|x_j|^α / max|W_{:,j}|^(1−α)``, both maxima and s floored at
    ``min_scale``; ``s_j = 1`` where ``max|x_j| = 0``: a channel that never fires has no range to
    migrate, and its floored scale (``min_scale`` at α = 1) would multiply the producer's weight by
    1/min_scale = 1e5, past float16's largest value."""
    w_max = torch.stack([w.detach().float().abs().amax(dim=0) for w in weights]).amax(dim=0)
    act = act.float().to(w_max.device)  # statistics live on the CPU
    a = act.clamp(min=cfg.min_scale)
    w_max = w_max.clamp(min=cfg.min_scale)
    s = (a.pow(cfg.alpha) / w_max.pow(1 - cfg.alpha)).clamp(min=cfg.min_scale)
    return torch.where(act == 0, torch.ones_like(s), s)


@torch.no_grad()
def smooth_(model: nn.Module, absmax: dict[str, torch.Tensor], cfg: SmoothQuantConfig) -> dict[str, torch.Tensor]:
    """Apply SmoothQuant's migration to a Llama model in place (the folds: the book's methods page,
    section "SmoothQuant").

    Args:
        model: a ``LlamaForCausalLM`` (decoder layers with ``self_attn.{q,k,v}_proj``,
            ``mlp.{gate,up,down}_proj``, ``input_layernorm``, ``post_attention_layernorm``).
        absmax: qualified linear name -> (in,) ``max |x|`` measured on the unsmoothed model
            (:func:`bitlaws.ptq.quik.activation_absmax`).
        cfg: α and options.

    Returns:
        Name of the first consumer of each smoothed input -> (in,) the scales s used.

    Raises:
        ValueError: the model is not Llama-shaped, a statistic is missing or has NaN/Inf, or a
            folded weight would not be finite in its dtype (e.g. float16 past 65504); the
            module's weights are checked before any of them is written.
    """
    layers = decoder_layers(model)
    prefix = {id(m): n for n, m in model.named_modules()}
    used: dict[str, torch.Tensor] = {}
    written: list[tuple[torch.Tensor, torch.Tensor]] = []  # (tensor, its value before) for a rollback
    try:
        for layer in layers:
            try:
                attn, mlp = layer.self_attn, layer.mlp
                q, k, v = attn.q_proj, attn.k_proj, attn.v_proj
                gate, up, down = mlp.gate_proj, mlp.up_proj, mlp.down_proj
                ln1, ln2 = layer.input_layernorm, layer.post_attention_layernorm
            except AttributeError as exc:
                raise ValueError(f"SmoothQuant here needs Llama-named modules: {exc}") from None
            pairs = [(ln1.weight, None, [q, k, v]), (ln2.weight, None, [gate, up])]
            if cfg.smooth_down:
                pairs.append((None, up, [down]))
            for norm_w, producer, consumers in pairs:
                name = prefix[id(consumers[0])]
                if name not in absmax:
                    raise ValueError(f"no activation statistic for {name}")
                if not bool(torch.isfinite(absmax[name]).all()):
                    raise ValueError(f"{name}: the activation statistic max|x| has NaN or Inf")
                s = _scales(absmax[name], [c.weight for c in consumers], cfg).to(consumers[0].weight.device)
                # the folded tensors (the same ops as in place), each checked before it is written
                if norm_w is not None:
                    folded = [(norm_w, norm_w / s.to(norm_w.dtype), f"the norm before {name}")]
                else:
                    pname = prefix[id(producer)]
                    folded = [(producer.weight, producer.weight / s[:, None].to(producer.weight.dtype), pname)]
                    if producer.bias is not None:
                        folded.append((producer.bias, producer.bias / s.to(producer.bias.dtype), f"{pname}.bias"))
                folded += [(c.weight, c.weight * s[None, :].to(c.weight.dtype), prefix[id(c)]) for c in consumers]
                for _, new, who in folded:
                    if not bool(torch.isfinite(new).all()):
                        raise ValueError(f"{who}: smoothing (alpha={cfg.alpha}) makes a weight non-finite in "
                                         f"{new.dtype} (scales in [{float(s.min()):.3g}, {float(s.max()):.3g}]); "
                                         "use a smaller alpha or a wider dtype")
                for dest, new, _ in folded:
                    written.append((dest, dest.clone()))
                    dest.copy_(new)
                used[name] = s
    except BaseException:
        for dest, before in reversed(written):
            dest.copy_(before)
        raise
    return used


def smoothquant_quantize_(model: nn.Module, calib: torch.Tensor, cfg: SmoothQuantConfig, modules: str = "kernel",
                          absmax: dict[str, torch.Tensor] | None = None) -> dict[str, dict]:
    """Smooth (:func:`smooth_`, statistics from `calib`, TRAINING split) then quantize every block
    linear to W{bits}A{bits} with no outliers (:func:`bitlaws.ptq.quik.quik_quantize_`, RTN).

    Returns:
        :func:`~bitlaws.ptq.quik.quik_quantize_`'s report, with ``"_smooth_scales"`` added.

    Raises:
        ValueError: as :func:`smooth_` and :func:`~bitlaws.ptq.quik.quik_quantize_`.
    """
    scales: dict[str, torch.Tensor] = {}

    def pre(m, stats):
        scales.update(smooth_(m, stats, cfg))

    report = quik_quantize_(model, calib, cfg.quik_config(), modules=modules, absmax=absmax, pre_quant=pre)
    report["_smooth_scales"] = scales
    return report

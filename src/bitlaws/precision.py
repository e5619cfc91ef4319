"""Training precision: forward-only fake quantization of weights, activations and the KV cache.

Kumar et al. (2024, §3 and App. D) train with weights, activations and the KV cache quantized to
P_w, P_a, P_kv bits in the forward pass only; the backward pass is high precision, so the gradient
goes straight through the rounding (:func:`bitlaws.quant.round_ste`). :class:`TrainPrecision` says
what is quantized and how; :func:`apply_precision_` installs it on a transformers decoder, in place
and without forking the model::

    prec = TrainPrecision.of(w=4, a=8, kv=None)
    handle = apply_precision_(model, prec)   # in place; returns a handle
    ...train...
    handle.remove(bake_weights=True)         # weights become Q_w(W); hooks removed

The parts and their granularities, how the quantizers are installed (parametrization, pre-hooks,
an attention function) and the extra norm: book/methods.md, "Fake quantization in training".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from .formats import parse_format
from .quant import PerChannel, PerTensor, QuantSpec, fake_quantize

__all__ = ["TrainPrecision", "PrecisionHandle", "apply_precision_", "spec_id", "ATTN_IMPLEMENTATION", "KV_PARTS",
           "LINEAR_KINDS"]

ATTN_IMPLEMENTATION = "bitlaws_fq_sdpa"
KV_PARTS = ("kv", "k", "v")
# The block linears of a Llama-style decoder by kind (the last part of the module name).
LINEAR_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _default_spec(part: str, value: int | str | QuantSpec | None) -> QuantSpec | None:
    if value is None or isinstance(value, QuantSpec):
        return value
    if isinstance(value, bool):
        raise ValueError(f"TrainPrecision.{part} must be bits (int), a format name, a QuantSpec or None, got {value!r}")
    fmt = f"int{value}" if isinstance(value, int) else str(value)
    try:
        parse_format(fmt)
    except ValueError as e:  # name the part; the format's message lists what is allowed
        raise ValueError(f"TrainPrecision.{part}={value!r}: {e}") from None
    gran = PerChannel(0) if part == "w" else PerTensor()
    return QuantSpec(fmt=fmt, granularity=gran, symmetric=True)


def spec_id(spec: QuantSpec | None) -> dict[str, Any] | None:
    """A JSON-able description of `spec` (for run ids and run_config.json); None stays None."""
    if spec is None:
        return None
    gran = spec.granularity
    return {"fmt": parse_format(spec.fmt).name, "granularity": type(gran).__name__,
            **{k: v for k, v in dataclasses.asdict(gran).items()}, "symmetric": spec.symmetric}


@dataclass(frozen=True)
class TrainPrecision:
    """The training precision of a run: a :class:`QuantSpec` (or None = high precision) per part.

    Args:
        w: weights of the block linears (default granularity per output channel, symmetric).
        a: inputs of the block linears (per tensor, symmetric).
        kv: K after RoPE and V as attention reads them (per tensor, symmetric).
        extra_norm: RMS-normalise (no gain) each quantized linear's input first (paper §3, BitNet).
        quantize_q: also fake-quantize Q with the `kv` spec (the paper's §4.3 quantizes the whole
            attention computation; footnote 1: negligible difference).
        kv_parts: which of K and V the `kv` spec quantizes: ``"kv"`` (both; the paper's setting and
            the default), ``"k"`` or ``"v"`` alone. An ablation of P5's mechanism, not a paper setting.
        a_skip: block-linear kinds (the last part of the module name, e.g. ``("o_proj",)``) whose
            input the `a` spec leaves in high precision. An ablation of P5's mechanism; default none.

    Build one from bit widths or format names with :meth:`of`.

    Raises:
        ValueError: a part that is not a QuantSpec or None; ``quantize_q`` without ``kv``;
            ``kv_parts`` other than ``"kv"``, ``"k"``, ``"v"`` (or not ``"kv"`` without ``kv``);
            ``a_skip`` that is not a tuple of names among :data:`LINEAR_KINDS` (or set without ``a``).
    """

    w: QuantSpec | None = None
    a: QuantSpec | None = None
    kv: QuantSpec | None = None
    extra_norm: bool = False
    quantize_q: bool = False
    kv_parts: str = "kv"
    a_skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for part in ("w", "a", "kv"):
            v = getattr(self, part)
            if v is not None and not isinstance(v, QuantSpec):
                raise ValueError(f"TrainPrecision.{part} must be a QuantSpec or None (use TrainPrecision.of for "
                                 f"bits or format names), got {v!r}")
        if self.quantize_q and self.kv is None:
            raise ValueError("TrainPrecision.quantize_q needs a kv spec to quantize Q with")
        if self.kv_parts not in KV_PARTS:
            raise ValueError(f"TrainPrecision.kv_parts must be one of {list(KV_PARTS)}, got {self.kv_parts!r}")
        if self.kv_parts != "kv" and self.kv is None:
            raise ValueError(f"TrainPrecision.kv_parts={self.kv_parts!r} needs a kv spec (K and V are high "
                             "precision without one)")
        if not isinstance(self.a_skip, tuple) or any(k not in LINEAR_KINDS for k in self.a_skip):
            raise ValueError(f"TrainPrecision.a_skip must be a tuple of names among {list(LINEAR_KINDS)}, "
                             f"got {self.a_skip!r}")
        if self.a_skip and self.a is None:
            raise ValueError("TrainPrecision.a_skip needs an `a` spec (no input is quantized without one)")

    @classmethod
    def of(cls, w: int | str | QuantSpec | None = None, a: int | str | QuantSpec | None = None,
           kv: int | str | QuantSpec | None = None, **flags: bool) -> "TrainPrecision":
        """From bits (``4`` → ``int4``), format names (``"fp4_e2m1fn"``) or specs, with the paper's
        granularities (App. D): weights per output channel, activations and K/V per tensor.

        Raises:
            ValueError: an unknown format name or bit width (the message lists the allowed ones).
        """
        return cls(_default_spec("w", w), _default_spec("a", a), _default_spec("kv", kv), **flags)

    def __repr__(self) -> str:
        # The ablation fields appear only where set, as in ``id_dict``: the repr of every run the paper's
        # setting trains is the one it had before they existed (P5's freeze hashes the factorial's specs).
        parts = [f"w={self.w!r}", f"a={self.a!r}", f"kv={self.kv!r}", f"extra_norm={self.extra_norm!r}",
                 f"quantize_q={self.quantize_q!r}"]
        if self.kv_parts != "kv":
            parts.append(f"kv_parts={self.kv_parts!r}")
        if self.a_skip:
            parts.append(f"a_skip={self.a_skip!r}")
        return f"TrainPrecision({', '.join(parts)})"

    @property
    def is_high_precision(self) -> bool:
        return self.w is None and self.a is None and self.kv is None

    def id_dict(self) -> dict[str, Any]:
        """What enters a run's ``run_id``: the three specs, plus the flags only where set."""
        d: dict[str, Any] = {"w": spec_id(self.w), "a": spec_id(self.a), "kv": spec_id(self.kv)}
        if self.extra_norm:
            d["extra_norm"] = True
        if self.quantize_q:
            d["quantize_q"] = True
        if self.kv_parts != "kv":
            d["kv_parts"] = self.kv_parts
        if self.a_skip:
            d["a_skip"] = list(self.a_skip)
        return d

    @property
    def variant(self) -> str:
        """The ablation flags as text (``kv_parts=v;a_skip=o_proj``), or ``""`` for the paper's setting."""
        out = [f"kv_parts={self.kv_parts}"] if self.kv_parts != "kv" else []
        out += [f"a_skip={'+'.join(self.a_skip)}"] if self.a_skip else []
        return ";".join(out)

    def fmt(self, part: str) -> str:
        """The format name of `part` (``w``, ``a``, ``kv``), or ``none``."""
        spec = getattr(self, part)
        return "none" if spec is None else parse_format(spec.fmt).name

    def bits(self, part: str) -> int:
        """Bits of `part`; 16 (high precision) where it is not quantized."""
        spec = getattr(self, part)
        return 16 if spec is None else parse_format(spec.fmt).bits

    def label(self) -> str:
        """Short label, e.g. ``W4 A16 KV16`` (formats other than int are named)."""
        out = []
        for part, tag in (("w", "W"), ("a", "A"), ("kv", "KV")):
            name = self.fmt(part)
            if part == "kv" and self.kv_parts != "kv":
                tag = self.kv_parts.upper()
            out.append(f"{tag}{self.bits(part)}" if name in ("none", f"int{self.bits(part)}") else f"{tag}:{name}")
            if part == "a" and self.a_skip:
                out[-1] += f"(not {'+'.join(self.a_skip)})"
        return " ".join(out)


class _FakeQuantWeight(nn.Module):
    """Parametrization: the latent weight ``(out, in)`` → its fake-quantized copy (STE backward)."""

    def __init__(self, spec: QuantSpec):
        super().__init__()
        self.spec = spec

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return fake_quantize(w, self.spec)


def _rms(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


def _input_hook(spec: QuantSpec | None, extra_norm: bool):
    def hook(module: nn.Module, args: tuple) -> tuple:
        x = args[0]
        if extra_norm:
            x = _rms(x)
        if spec is not None:
            x = fake_quantize(x, spec)
        return (x, *args[1:])

    return hook


def _fq_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args, **kwargs):
    """SDPA with K and V (and optionally Q) fake-quantized as attention reads them.

    query/key/value: (B, heads, T, head_size) float, K after RoPE. The spec lives on the attention
    module (``module._bitlaws_kv``), set by :func:`apply_precision_`.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    spec: QuantSpec | None = getattr(module, "_bitlaws_kv", None)
    if spec is not None:
        parts = getattr(module, "_bitlaws_kv_parts", "kv")
        if "k" in parts:
            key = fake_quantize(key, spec)
        if "v" in parts:
            value = fake_quantize(value, spec)
        if getattr(module, "_bitlaws_q", False):
            query = fake_quantize(query, spec)
    return sdpa_attention_forward(module, query, key, value, *args, **kwargs)


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_IMPLEMENTATION, _fq_attention)


class PrecisionHandle:
    """What :func:`apply_precision_` returns: the installed hooks, removable."""

    def __init__(self, model: nn.Module, precision: TrainPrecision, linears: dict[str, nn.Linear],
                 hooks: list, attn_modules: list[nn.Module], old_attn: str | None):
        self.model, self.precision, self.linears = model, precision, linears
        self._hooks, self._attn_modules, self._old_attn = hooks, attn_modules, old_attn
        self.removed = False

    def bake_weights(self) -> None:
        """Replace each latent weight by its fake-quantized copy Q_w(W) and drop the weight
        parametrization (input and KV quantizers stay). The forward is unchanged by this."""
        for lin in self.linears.values():
            if parametrize.is_parametrized(lin, "weight"):
                parametrize.remove_parametrizations(lin, "weight", leave_parametrized=True)

    def remove(self, bake_weights: bool = True) -> None:
        """Uninstall every hook.

        Args:
            bake_weights: keep the fake-quantized weights Q_w(W) (the model as it ran; default),
                or restore the latent high-precision weights (False).
        """
        if self.removed:
            return
        for h in self._hooks:
            h.remove()
        for lin in self.linears.values():
            if parametrize.is_parametrized(lin, "weight"):
                parametrize.remove_parametrizations(lin, "weight", leave_parametrized=bake_weights)
        for m in self._attn_modules:
            for attr in ("_bitlaws_kv", "_bitlaws_q", "_bitlaws_kv_parts"):
                if hasattr(m, attr):
                    delattr(m, attr)
        if self._old_attn is not None:
            self.model.set_attn_implementation(self._old_attn)
        self.removed = True


def apply_precision_(model: nn.Module, precision: TrainPrecision) -> PrecisionHandle:
    """Install `precision`'s fake quantizers on `model`, in place.

    Args:
        model: a transformers causal LM (Llama-style: block linears, attention modules with a
            ``layer_idx``, dispatching through ``AttentionInterface``).
        precision: what to quantize. All None without ``extra_norm`` installs nothing (the model
            is untouched, so training is bit-identical to the plain model).

    Returns:
        A :class:`PrecisionHandle`; ``handle.remove()`` uninstalls (baking the quantized weights).

    Raises:
        ValueError: a model with no block linears, or KV quantization asked of a model whose
            attention modules cannot be found.

    References:
        Kumar et al. 2024, §3 and App. D (forward-only fake quantization, STE backward).
    """
    from .ptq import block_linears

    linears = block_linears(model)
    hooks: list = []
    if precision.is_high_precision and not precision.extra_norm:
        return PrecisionHandle(model, precision, {}, hooks, [], None)
    for name, lin in linears.items():
        if precision.w is not None:
            parametrize.register_parametrization(lin, "weight", _FakeQuantWeight(precision.w))
        a = None if name.rsplit(".", 1)[-1] in precision.a_skip else precision.a
        if a is not None or precision.extra_norm:
            hooks.append(lin.register_forward_pre_hook(_input_hook(a, precision.extra_norm)))
    attn_modules: list[nn.Module] = []
    old_attn = None
    if precision.kv is not None:
        attn_modules = [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "k_proj")]
        if not attn_modules:
            raise ValueError(f"{type(model).__name__}: no attention modules (with k_proj and layer_idx) to quantize "
                             "the KV cache in")
        for m in attn_modules:
            m._bitlaws_kv = precision.kv
            m._bitlaws_q = precision.quantize_q
            m._bitlaws_kv_parts = precision.kv_parts
        _register_attention()
        old_attn = model.config._attn_implementation
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
    return PrecisionHandle(model, precision, linears, hooks, attn_modules, old_attn)

"""QUIK: W4A4 / W8A8 post-training quantization with 16-bit outlier features (Ashkboos et al. 2023).

For every linear layer inside the transformer blocks (book/papers/quik-gptq.md, Part A1): the k
input features with the largest calibration ``max |x|`` (TRAINING split, unquantized model; one
set per group of layers that read the same input) stay in 16 bits; GPTQ quantizes the weights
with those columns permuted last, kept unquantized and absorbing the error (symmetric per output
channel, optional MSE clipping; ``weight_method = "rtn"`` for the baselines); the base features
of the activations are quantized asymmetrically per token at run time
(:func:`bitlaws.kernels.quik_act.quik_act_ref`); ``down_proj`` runs at ``bits_down`` (8 by
default); embeddings, norms, ``lm_head``, the attention products and the KV cache stay 16-bit
(``POLICY_16BIT``). A quantized layer becomes a :class:`bitlaws.kernels.QuikLinear`
(``modules="kernel"``) or a :class:`QuikSimLinear` (``"sim"``, also for ``bits_w != bits_a``).
Driver :func:`quik_quantize_`, per-layer core :func:`quik_weight`; the choices step by step:
book/methods.md, "QUIK". References: Ashkboos et al. 2023, "QUIK" (arXiv 2310.09259), §3 and App.
(Tables 4, 7, 11); IST-DASLab/QUIK ``experiments/fake_quant/quik_utils.py``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
from torch import nn

from ..kernels.quik_act import quik_act_ref, unpack_int4
from ..kernels.quik_linear import QuikLinear
from . import _check_finite, block_linears
from .calibration import decoder_layers, gptq_quantize_
from .gptq import GPTQConfig, GPTQInfo, fit_grid, gptq_weight, output_error, rtn_weight

__all__ = [
    "QuikConfig",
    "build_quik_linear",
    "QuikSimLinear",
    "POLICY_16BIT",
    "DOWN_NAMES",
    "activation_absmax",
    "input_groups",
    "select_outliers",
    "quik_weight",
    "quik_quantize_",
    "quik_linears",
    "layer_index",
    "is_down",
    "replace_module",
]

# QUIK's policy of what stays in 16 bits (book/papers/quik-gptq.md A1.1, A1.6): never quantized by this module.
POLICY_16BIT: tuple[str, ...] = ("embeddings", "norms", "lm_head", "attention_products", "kv_cache")
# Linears whose input is the MLP's wide hidden (Llama: the product of the gated branches; OPT's
# ``fc2`` and Falcon's ``dense_4h_to_h``: the activation of the up projection).
DOWN_NAMES: tuple[str, ...] = ("down_proj", "fc2", "dense_4h_to_h")
# Linears that read the same input (QUIK's SharedQuantizedInput): Llama's and OPT's q/k/v, Llama's
# gate/up. Falcon fuses q/k/v into one ``query_key_value``; its ``dense_h_to_4h`` reads the same
# LayerNorm output only in the parallel-attention variants, so it is not grouped by name.
_SHARED_INPUT: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
_MODULES = ("kernel", "sim")
_WEIGHT_METHODS = ("gptq", "rtn")


def _count_ok(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0
    if isinstance(v, float):
        return math.isfinite(v) and 0.0 <= v < 1.0
    return False


@dataclass(frozen=True)
class QuikConfig:
    """QUIK post-training quantization of the linears inside the blocks.

    Args:
        bits_w: base weight bits, 4 or 8 (symmetric per output channel).
        bits_a: base activation bits, 4 or 8 (asymmetric per token, at run time).
        n_outliers: outlier input features kept in 16 bits per layer: an int count (QUIK: 256)
            or a float fraction of ``in_features`` in [0, 1) (rounded to the nearest count).
        n_outliers_down: the same for ``down_proj``; None (default) scales ``n_outliers`` by
            ``in_features / hidden_size`` (the same fraction of the wider input, QUIK's ≈3.5×).
        bits_down: bits of ``down_proj``'s base weights and activations: 4, 8 (default, QUIK's
            INT8 down_proj) or 16 (left as an ``nn.Linear``).
        clip: weight clipping — per-row search for the shrunken range with the lowest
            ``Σ|ŵ − w|^2.4`` (QUIK ``--w_clip``; GPTQ's MSE grid).
        weight_method: ``"gptq"`` (QUIK) or ``"rtn"`` (round to nearest on the same grid; baselines).
        fp_layers: extra linear short names (e.g. ``("o_proj",)``) kept whole in 16 bits.
        damp, block_size: GPTQ's relative damping and lazy-batch size.
        calib_batch_size: sequences per forward during calibration (memory only).

    Attributes:
        policy: ``POLICY_16BIT`` — what QUIK never quantizes (fixed, recorded for the results).

    Raises:
        ValueError: a field out of range, naming it and what is allowed.
    """

    bits_w: int = 4
    bits_a: int = 4
    n_outliers: int | float = 1 / 16
    n_outliers_down: int | float | None = None
    bits_down: int = 8
    clip: bool = True
    weight_method: str = "gptq"
    fp_layers: tuple[str, ...] = ()
    damp: float = 0.01
    block_size: int = 128
    calib_batch_size: int = 16

    def __post_init__(self) -> None:
        for f in ("bits_w", "bits_a"):
            v = getattr(self, f)
            if isinstance(v, bool) or v not in (4, 8):
                raise ValueError(f"QuikConfig.{f} must be 4 or 8, got {v!r}")
        if isinstance(self.bits_down, bool) or self.bits_down not in (4, 8, 16):
            raise ValueError(f"QuikConfig.bits_down must be 4, 8 or 16, got {self.bits_down!r}")
        if not _count_ok(self.n_outliers):
            raise ValueError(f"QuikConfig.n_outliers must be an int ≥ 0 or a float fraction in [0, 1), "
                             f"got {self.n_outliers!r}")
        if self.n_outliers_down is not None and not _count_ok(self.n_outliers_down):
            raise ValueError(f"QuikConfig.n_outliers_down must be None, an int ≥ 0 or a float fraction in [0, 1), "
                             f"got {self.n_outliers_down!r}")
        if not isinstance(self.clip, bool):
            raise ValueError(f"QuikConfig.clip must be a bool, got {self.clip!r}")
        if self.weight_method not in _WEIGHT_METHODS:
            raise ValueError(f"QuikConfig.weight_method must be one of {_WEIGHT_METHODS}, got {self.weight_method!r}")
        if not isinstance(self.fp_layers, tuple) or not all(isinstance(s, str) and s for s in self.fp_layers):
            raise ValueError(f"QuikConfig.fp_layers must be a tuple of linear short names, got {self.fp_layers!r}")
        if not (isinstance(self.damp, (int, float)) and not isinstance(self.damp, bool)
                and math.isfinite(self.damp) and self.damp > 0):
            raise ValueError(f"QuikConfig.damp must be a positive finite number, got {self.damp!r}")
        for f in ("block_size", "calib_batch_size"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"QuikConfig.{f} must be a positive int, got {v!r}")

    @property
    def policy(self) -> tuple[str, ...]:
        return POLICY_16BIT

    def as_dict(self) -> dict:
        """Every field (for hashing into ``obs_id`` and for the run's JSON)."""
        d = asdict(self)
        d["fp_layers"] = list(self.fp_layers)
        return d

    def gptq_config(self, bits: int) -> GPTQConfig:
        """The symmetric GPTQ grid of a layer with `bits`."""
        return GPTQConfig(bits=bits, symmetric=True, mse=self.clip, damp=self.damp, block_size=self.block_size,
                          calib_batch_size=self.calib_batch_size)

    def layer_bits(self, name: str) -> tuple[int, int]:
        """(bits_w, bits_a) of the linear `name` (qualified); (16, 16) where it stays high precision."""
        short = name.rsplit(".", 1)[-1]
        if short in self.fp_layers:
            return 16, 16
        if short in DOWN_NAMES:
            return self.bits_down, self.bits_down
        return self.bits_w, self.bits_a

    def layer_outliers(self, name: str, in_features: int, hidden_size: int) -> int:
        """k of the linear `name` with `in_features` inputs in a model of width `hidden_size`."""
        short = name.rsplit(".", 1)[-1]
        spec = self.n_outliers
        if short in DOWN_NAMES:
            if self.n_outliers_down is not None:
                spec = self.n_outliers_down
            elif isinstance(spec, int):
                spec = int(round(spec * in_features / hidden_size))
        k = int(round(spec * in_features)) if isinstance(spec, float) else int(spec)
        if k >= in_features:
            raise ValueError(f"{name}: {k} outliers leave no base feature of its {in_features} inputs")
        return k


# ---------------------------------------------------------------------------------------------
# which linears: Llama, OPT, Falcon module names

# Containers of the numbered blocks: Llama ``model.layers.i``, OPT ``model.decoder.layers.i``,
# Falcon ``transformer.h.i``, BERT ``encoder.layer.i``, GPT-style ``blocks.i``.
_BLOCK_CONTAINERS = ("layers", "h", "layer", "blocks")


def layer_index(name: str) -> int:
    """The block index in a qualified linear name (``model.decoder.layers.3.fc2`` -> 3), or -1."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].isdigit() and parts[i - 1] in _BLOCK_CONTAINERS:
            return int(parts[i])
    return -1


def is_down(name: str) -> bool:
    """Whether the linear `name` (qualified or short) reads the MLP's wide hidden (``DOWN_NAMES``)."""
    return name.rsplit(".", 1)[-1] in DOWN_NAMES


def quik_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The linears QUIK quantizes: :func:`bitlaws.ptq.block_linears` inside the decoder layers.

    Llama: q/k/v/o_proj, gate/up/down_proj. OPT: q/k/v_proj, out_proj, fc1, fc2. Falcon:
    query_key_value, dense, dense_h_to_4h, dense_4h_to_h. Linears outside the numbered blocks
    (``lm_head``; OPT-350m's ``project_in`` / ``project_out`` embedding projections) stay in 16
    bits, like the embeddings they belong to.

    Raises:
        ValueError: no decoder layers (``model.layers``, ``model.decoder.layers``,
            ``transformer.h``), or no linear inside them.
    """

    linears = block_linears(model)
    inside = {id(m) for layer in decoder_layers(model) for m in layer.modules()}
    found = {n: m for n, m in linears.items() if id(m) in inside}
    if not found:
        raise ValueError(f"{type(model).__name__} has no nn.Linear inside its decoder layers")
    return found


class _Hidden16(nn.Module):
    """Stand-in that runs a 16-bit linear without exposing it as an ``nn.Linear`` submodule, so
    the GPTQ driver (which calibrates every ``nn.Linear`` but ``lm_head``) leaves it alone."""

    def __init__(self, lin: nn.Linear) -> None:
        super().__init__()
        object.__setattr__(self, "_lin", lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._lin(x)


# ---------------------------------------------------------------------------------------------
# outlier statistics and selection


@torch.no_grad()
def activation_absmax(model: nn.Module, calib: torch.Tensor, batch_size: int = 16) -> dict[str, torch.Tensor]:
    """Per input channel ``max |x|`` of every block linear over the calibration tokens.

    Measured on `model` as it is (call it on the unquantized model, as QUIK does).

    Args:
        model: a transformers causal LM. calib: (n_seq, T) int64 token ids (TRAINING split).
        batch_size: sequences per forward.

    Returns:
        name -> (in_features,) float32.

    Raises:
        ValueError: calib not a 2-D integer tensor, or NaN/Inf among the inputs of a linear.
    """
    if not isinstance(calib, torch.Tensor) or calib.dim() != 2 or calib.dtype.is_floating_point or calib.numel() == 0:
        raise ValueError(f"calib must be a non-empty integer tensor (n_seq, T), got "
                         f"{getattr(calib, 'shape', type(calib).__name__)}")
    linears = block_linears(model)
    stats = {n: torch.zeros(m.in_features) for n, m in linears.items()}

    def hook(name):
        def fn(_mod, inp, _out):
            x = inp[0].detach().reshape(-1, inp[0].shape[-1]).float()
            if not torch.isfinite(x).all():
                raise ValueError(f"{name}: calibration inputs contain NaN or Inf")
            stats[name] = torch.maximum(stats[name], x.abs().amax(dim=0).cpu())
        return fn

    handles = [m.register_forward_hook(hook(n)) for n, m in linears.items()]
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        for s in range(0, calib.shape[0], batch_size):
            model(input_ids=calib[s:s + batch_size].to(device=device, dtype=torch.int64), use_cache=False)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return stats


def input_groups(names) -> list[list[str]]:
    """The linears that read one input: q/k/v and gate/up of each block together, others alone."""
    out: dict[tuple, list[str]] = {}
    for n in names:
        prefix, short = n.rsplit(".", 1) if "." in n else ("", n)
        key: tuple = (n,)
        for gi, grp in enumerate(_SHARED_INPUT):
            if short in grp:
                key = (prefix, gi)
        out.setdefault(key, []).append(n)
    return list(out.values())


def select_outliers(absmax: dict[str, torch.Tensor], counts: dict[str, int]) -> dict[str, torch.Tensor]:
    """Top-k channels by ``max |x|``, one set per input group (:func:`input_groups`).

    Ties are broken by channel index (a stable ascending sort; the last k are taken).

    Args:
        absmax: name -> (in,) statistic. counts: name -> k (members of a group must agree).

    Returns:
        name -> (k,) int64, ascending.

    Raises:
        ValueError: members of one input group with different widths or k.
    """
    out: dict[str, torch.Tensor] = {}
    for grp in input_groups(list(absmax)):
        ks = {counts[n] for n in grp}
        widths = {absmax[n].numel() for n in grp}
        if len(ks) != 1 or len(widths) != 1:
            raise ValueError(f"layers sharing one input must have the same width and k: {grp}")
        stat = torch.stack([absmax[n].float() for n in grp]).amax(dim=0)
        k = ks.pop()
        idx = _order(stat)[stat.numel() - k:].sort().values
        for n in grp:
            out[n] = idx.clone()
    return out


def _order(stat: torch.Tensor) -> torch.Tensor:
    return torch.sort(stat.float(), stable=True).indices


# ---------------------------------------------------------------------------------------------
# one layer


def quik_weight(W: torch.Tensor, H: torch.Tensor | None, act_scale: torch.Tensor, outlier_idx: torch.Tensor,
                bits: int, cfg: QuikConfig, name: str = "weight") -> tuple[torch.Tensor, GPTQInfo]:
    """QUIK's weight step for one layer: columns sorted by ascending ``act_scale`` with the outliers
    last, GPTQ (or RTN) on the base columns, outlier columns kept in high precision.

    Args:
        W: (out, in) float — the weight; not modified.
        H: (in, in) float — ``2/n Σ x xᵀ`` of the layer's inputs (ignored, may be None, for RTN).
        act_scale: (in,) — per channel ``max |x|``; orders the base columns (ascending).
        outlier_idx: (k,) int — the outlier features, kept unquantized (k may be 0).
        bits: 4 or 8. cfg: the grid (symmetric, clip) and GPTQ settings.
        name: used in error messages.

    Returns:
        W_hat: (out, in) float32 in the original column order — base columns on the symmetric grid
            (``info.scale`` per row), outlier columns error-absorbing (GPTQ) or unchanged (RTN).
        info: :class:`bitlaws.ptq.gptq.GPTQInfo`, its ``perm`` the column order used.

    Raises:
        ValueError: shapes that do not match, repeated or out-of-range outliers, k ≥ in.
    """
    n_out, n_in = W.shape
    outlier_idx = torch.as_tensor(outlier_idx, dtype=torch.long).flatten().cpu()
    k = outlier_idx.numel()
    if act_scale.numel() != n_in:
        raise ValueError(f"{name}: act_scale has {act_scale.numel()} channels, the weight {n_in} inputs")
    if k and (int(outlier_idx.min()) < 0 or int(outlier_idx.max()) >= n_in or outlier_idx.unique().numel() != k):
        raise ValueError(f"{name}: outlier_idx must be distinct features in [0, {n_in})")
    if k >= n_in:
        raise ValueError(f"{name}: {k} outliers leave no base feature of {n_in}")
    is_out = torch.zeros(n_in, dtype=torch.bool)
    is_out[outlier_idx] = True
    order = _order(act_scale.cpu())
    perm = torch.cat([order[~is_out[order]], order[is_out[order]]]).to(W.device)
    inv = torch.argsort(perm)
    gcfg = cfg.gptq_config(bits)
    Wp = W.detach().float()[:, perm]
    if cfg.weight_method == "rtn":
        W_hat_p = rtn_weight(Wp, gcfg, n_keep_last=k)
        scale, zero = fit_grid(Wp[:, :n_in - k], gcfg)
        info = GPTQInfo(damp=0.0, damp_tries=0, n_dead=0, gptq_loss=float("nan"), perm=perm, g_idx=None,
                        scale=scale, zero_point=zero, n_keep_last=k)
    else:
        if H is None:
            raise ValueError(f"{name}: GPTQ needs the Hessian H")
        Hp = H[perm][:, perm]
        W_hat_p, g_info = gptq_weight(Wp, Hp, gcfg, n_keep_last=k, name=name)
        info = GPTQInfo(damp=g_info.damp, damp_tries=g_info.damp_tries, n_dead=g_info.n_dead,
                        gptq_loss=g_info.gptq_loss, perm=perm, g_idx=None, scale=g_info.scale,
                        zero_point=g_info.zero_point, n_keep_last=k)
    return W_hat_p[:, inv].float(), info


# ---------------------------------------------------------------------------------------------
# the simulated layer


class QuikSimLinear(nn.Module):
    """Simulated QUIK layer: ``y = x̂ Ŵᵀ + b`` in fp32.

    ``x̂`` is the input with its base features replaced by their per-token quantized values — the
    codes of :func:`bitlaws.kernels.quik_act.quik_act_ref` (the kernel layer's quantizer),
    dequantized as ``s_t · (code + h − z_t)`` — and its outlier features unchanged. ``Ŵ``: (out,
    in) float32, the dequantized weight (base columns on the grid, outlier columns as stored).

    Args:
        weight: (out, in) float — Ŵ. outlier_idx: (k,) int. bits_a: 4 or 8.
        bias: (out,) or None.
    """

    def __init__(self, weight: torch.Tensor, outlier_idx: torch.Tensor, bits_a: int,
                 bias: torch.Tensor | None = None) -> None:
        super().__init__()
        if bits_a not in (4, 8):
            raise ValueError(f"bits_a must be 4 or 8, got {bits_a!r}")
        n_out, n_in = weight.shape
        outlier_idx = torch.as_tensor(outlier_idx, dtype=torch.long).flatten().cpu().sort().values
        keep = torch.ones(n_in, dtype=torch.bool)
        keep[outlier_idx] = False
        self.in_features, self.out_features, self.bits_a = n_in, n_out, bits_a
        self.register_buffer("weight", weight.detach().float().clone())
        self.register_buffer("base_idx", torch.nonzero(keep).flatten().to(torch.int32).to(weight.device))
        self.register_buffer("outlier_idx", outlier_idx.to(torch.int32).to(weight.device))
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    @property
    def n_outliers(self) -> int:
        return self.outlier_idx.numel()

    def quantize_input(self, x2: torch.Tensor) -> torch.Tensor:
        """(M, in) float -> x̂ (M, in) float32."""
        act = quik_act_ref(x2, self.base_idx, self.outlier_idx, self.bits_a)
        k_b = self.base_idx.numel()
        codes = unpack_int4(act.codes, k_b) if self.bits_a == 4 else act.codes
        h = 2.0 ** (self.bits_a - 1)
        x_hat = x2.float().clone()
        x_hat[:, self.base_idx.long()] = act.scale[:, None] * (codes.float() + (h - act.zero[:, None]))
        return x_hat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x_hat = self.quantize_input(x.reshape(-1, self.in_features))
        y = torch.nn.functional.linear(x_hat, self.weight, self.bias)
        return y.to(x.dtype).reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bits_a={self.bits_a}, "
                f"n_outliers={self.n_outliers}")


def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Set the submodule at dotted `name` of `model` to `new`."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def build_quik_linear(lin: nn.Linear, W_hat: torch.Tensor, outlier_idx: torch.Tensor, scale: torch.Tensor,
                      bits_w: int, bits_a: int, modules: str) -> nn.Module:
    """The QUIK replacement of `lin`, whose quantized weight is `W_hat`.

    Args:
        lin: the fp ``nn.Linear`` (its bias is kept). W_hat: (out, in) float — the quantized weight
            (outlier columns in full precision). outlier_idx: (k,) int64 — the outlier input features.
        scale: (out, 1) float32 — per-row weight scales of the base columns.
        bits_w, bits_a: weight / activation bits of the base part.
        modules: ``"kernel"`` (a :class:`QuikLinear`, integer GEMM) or ``"sim"`` (a
            :class:`QuikSimLinear` on the same dequantized Ŵ, fake-quantized activations).
    """
    tmp = nn.Linear(lin.in_features, lin.out_features, bias=lin.bias is not None, device=W_hat.device)
    with torch.no_grad():
        tmp.weight.copy_(W_hat)
        if lin.bias is not None:
            tmp.bias.copy_(lin.bias.detach().float())
    # The kernel layer stores what QUIK stores (weight codes, fp16 outlier columns); the simulation
    # reads its dequantized weight, so both use the very same Ŵ.
    ql = QuikLinear.from_linear(tmp, outlier_idx, bits_w, dtype=torch.float16, weight_scale=scale.reshape(-1))
    if modules == "kernel":
        return ql
    return QuikSimLinear(ql.dequantized_weight(), outlier_idx, bits_a, None if lin.bias is None else lin.bias)


# ---------------------------------------------------------------------------------------------
# the whole model


def _hidden_size(model: nn.Module, linears: dict[str, nn.Linear]) -> int:
    cfg = getattr(model, "config", None)
    h = getattr(cfg, "hidden_size", None)
    if isinstance(h, int) and h > 0:
        return h
    return min(m.in_features for m in linears.values())


@torch.no_grad()
def quik_quantize_(model: nn.Module, calib: torch.Tensor, cfg: QuikConfig, modules: str = "kernel",
                   progress: bool = False, absmax: dict[str, torch.Tensor] | None = None,
                   pre_quant: Callable[[nn.Module, dict[str, torch.Tensor]], None] | None = None) -> dict[str, dict]:
    """QUIK-quantize every linear inside the blocks of a transformers causal LM, in place.

    Steps: (1) ``max |x|`` per input channel on the model as given (:func:`activation_absmax`),
    (2) outliers per input group (:func:`select_outliers`), (3) per layer :func:`quik_weight` —
    through :func:`bitlaws.ptq.calibration.gptq_quantize_`'s block-by-block, true-sequential driver for
    GPTQ, directly for RTN — and (4) each quantized ``nn.Linear`` replaced by a ``QuikLinear``
    (``modules="kernel"``, needs equal weight and activation bits) or a :class:`QuikSimLinear`
    (``"sim"``). 16-bit layers (``bits_down = 16``, ``fp_layers``) stay ``nn.Linear``, and so do
    the linears outside the decoder layers (``lm_head``; OPT-350m's ``project_in``/``project_out``).

    Llama, OPT and Falcon module names are understood (:func:`quik_linears`): the "down" layer that
    gets ``bits_down`` and the larger k is ``down_proj`` / ``fc2`` / ``dense_4h_to_h``. Layers of
    other names are quantized all at once per block (not true-sequentially) at ``bits_w``/``bits_a``.

    Args:
        model: a transformers causal LM — ``LlamaForCausalLM``, ``OPTForCausalLM``,
            ``FalconForCausalLM`` (e.g. from :func:`bitlaws.study.quik_realmodel.load_causal_lm`);
            float32 on the CPU (any device works).
        calib: (n_seq, T) int64 token ids from the TRAINING split
            (:func:`bitlaws.ptq.calibration.calibration_batch`; the experiments use 128 × 256).
        cfg: the configuration. modules: ``"kernel"`` or ``"sim"``.
        progress: tqdm over blocks. absmax: precomputed statistics (name -> (in,)), else measured.
        pre_quant: optional ``fn(model, absmax)`` run after the statistics and before any weight is
            quantized (SmoothQuant's migration uses it).

    Returns:
        Per block linear: ``bits_w``, ``bits_a``, ``n_outliers``, ``absmax_max``, ``absmax_median``,
        and for quantized layers ``out_err`` (``||W X − Ŵ X||_F²`` on the calibration inputs, GPTQ
        only, NaN for RTN), ``out_norm``, ``seconds``; plus ``"_outliers"``: name -> (k,) indices.

    Raises:
        ValueError: bad `modules`, ``"kernel"`` with ``bits_w != bits_a``, a bad calibration set,
            a non-finite weight, k ≥ in_features. The model is left unchanged on an error raised
            before step (4).
    """
    if modules not in _MODULES:
        raise ValueError(f"modules must be one of {_MODULES}, got {modules!r}")
    if not isinstance(cfg, QuikConfig):
        raise ValueError(f"cfg must be a QuikConfig, got {type(cfg).__name__}")
    linears = quik_linears(model)
    outside = {n: m for n, m in block_linears(model).items() if n not in linears}
    for name, lin in linears.items():
        _check_finite(name, lin.weight)
        bw, ba = cfg.layer_bits(name)
        if modules == "kernel" and bw != ba:
            raise ValueError(f"{name}: modules='kernel' needs equal weight and activation bits, got W{bw}A{ba}; "
                             f"use modules='sim'")
    hidden = _hidden_size(model, linears)
    counts = {n: cfg.layer_outliers(n, m.in_features, hidden) for n, m in linears.items()}
    if absmax is None:
        absmax = activation_absmax(model, calib, cfg.calib_batch_size)
    missing = [n for n in linears if n not in absmax]
    if missing:
        raise ValueError(f"absmax has no statistic for {missing}")
    absmax = {n: absmax[n] for n in linears}
    outliers = select_outliers(absmax, counts)
    if pre_quant is not None:
        pre_quant(model, absmax)
    quant = {n for n in linears if cfg.layer_bits(n)[0] < 16}
    results: dict[str, tuple[torch.Tensor, GPTQInfo]] = {}
    report: dict[str, dict] = {}
    if cfg.weight_method == "gptq":
        def layer_fn(name, W, acc):
            if name not in quant:
                results[name] = None
                return W.clone(), GPTQInfo(0.0, 0, 0, 0.0, None, None, torch.ones(W.shape[0], 1, device=W.device),
                                           torch.zeros(W.shape[0], 1, device=W.device), 0)
            t0 = time.perf_counter()
            W_hat, info = quik_weight(W, acc.H, absmax[name], outliers[name], cfg.layer_bits(name)[0], cfg, name)
            results[name] = (W_hat, info)
            report[name] = {"out_err": output_error(W, W_hat, acc.H, acc.n_tokens),
                            "out_norm": output_error(W, torch.zeros_like(W), acc.H, acc.n_tokens),
                            "seconds": time.perf_counter() - t0}
            return W_hat, info

        gcfg = GPTQConfig(bits=4, symmetric=True, damp=cfg.damp, block_size=cfg.block_size,
                          calib_batch_size=cfg.calib_batch_size)
        for name, lin in outside.items():  # 16-bit linears outside the blocks: hidden from the driver
            replace_module(model, name, _Hidden16(lin))
        try:
            gptq_quantize_(model, calib, gcfg, progress=progress, layer_fn=layer_fn)
        finally:
            for name, lin in outside.items():
                replace_module(model, name, lin)
    else:
        for name in quant:
            W = linears[name].weight.detach()
            t0 = time.perf_counter()
            results[name] = quik_weight(W, None, absmax[name], outliers[name], cfg.layer_bits(name)[0], cfg, name)
            report[name] = {"out_err": float("nan"), "out_norm": float("nan"), "seconds": time.perf_counter() - t0}
    for name, lin in linears.items():
        bw, ba = cfg.layer_bits(name)
        stat = absmax[name].float()
        rec = report.setdefault(name, {})
        rec.update({"bits_w": bw, "bits_a": ba, "in_features": lin.in_features, "n_outliers": counts[name] if bw < 16 else lin.in_features,
                    "absmax_max": float(stat.max()), "absmax_median": float(stat.median())})
        if bw < 16:
            W_hat, info = results[name]
            replace_module(model, name, build_quik_linear(lin, W_hat, outliers[name], info.scale, bw, ba, modules))
    report["_outliers"] = outliers
    return report

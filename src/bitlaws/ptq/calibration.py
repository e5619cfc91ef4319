"""The GPTQ calibration driver: Hessians from a model's forward, block by block, true-sequential.

``gptq_quantize_(model, calib, cfg)`` captures the inputs of the first decoder layer, then for
each block calibrates its linears in the groups ``[q, k, v] → [o] → [gate, up] → [down]``, each
on inputs computed with the already quantized earlier groups and blocks (the reference's
``--true-sequential``), solving each layer with :func:`bitlaws.ptq.gptq.gptq_weight` (or a
``layer_fn``, QUIK's hook). Layers whose linears are not all Llama-named are calibrated at once
from the block input (the reference's OPT way). The Hessian is a running mean over calibration
*tokens*, so ``n_tokens/2 · tr(ΔW H ΔWᵀ)`` is the summed output error over those tokens.

Calibration windows come from the TRAINING split (:func:`calibration_batch`), never validation.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterator

import numpy as np
import torch
from torch import nn

from . import _all_finite, _check_finite, _is_int, block_linears
from .gptq import GPTQConfig, GPTQInfo, gptq_weight, output_error, rtn_weight

__all__ = [
    "HessianAccumulator",
    "capture_hessians",
    "calibration_batch",
    "decoder_layers",
    "gptq_quantize_",
    "TRUE_SEQUENTIAL_ORDER",
]

# Llama's sub-groups of a block in calibration order ("true-sequential", reference --true-sequential).
TRUE_SEQUENTIAL_ORDER: tuple[tuple[str, ...], ...] = (
    ("q_proj", "k_proj", "v_proj"), ("o_proj",), ("gate_proj", "up_proj"), ("down_proj",),
)


# ---------------------------------------------------------------------------------------------
# Hessians from forward hooks


class HessianAccumulator:
    """Running ``H = 2/n Σ x xᵀ`` over the n input tokens of one linear layer, and ``max |x|``.

    Update for m new tokens (as the reference, counting tokens): ``H ← H·n/(n+m)``,
    ``x ← sqrt(2/(n+m))·x``, ``H += xᵀ x``. One pass over the inputs besides the GEMM and the
    scaling: ``max |x|`` per feature (as ``max(max x, −min x)``, no temporary), whose finiteness
    is the inputs' (NaN and ±Inf propagate through both reductions).

    Args:
        n_features: in, the layer's input features.
        dtype: H's dtype, ``torch.float32`` (the reference's) or ``torch.float64``. Half
            precision is refused: ``x xᵀ`` overflows float16 at inputs of about 256.
        device: H's device. name: the module's name, for errors.

    Attributes:
        H: (in, in) float32/float64. n_tokens: tokens seen.
        absmax: (in,) float32 — per input channel max |x| (QUIK's outlier statistic).
        name: the module's name, for errors.

    Raises:
        ValueError: `dtype` is not float32 or float64; `n_features` not a positive int.
    """

    def __init__(self, n_features: int, dtype: torch.dtype = torch.float32, device=None, name: str = "") -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{name or 'HessianAccumulator'}: H's dtype must be torch.float32 or torch.float64, "
                             f"got {dtype} (half precision overflows: x·xᵀ passes 65504 at |x| ≈ 256)")
        if not _is_int(n_features, 1):
            raise ValueError(f"{name or 'HessianAccumulator'}: n_features must be a positive int, got {n_features!r}")
        self.name = name
        self.H = torch.zeros(n_features, n_features, dtype=dtype, device=device)
        self.absmax = torch.zeros(n_features, dtype=torch.float32, device=device)
        self.n_tokens = 0

    @torch.no_grad()
    def add(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Add the tokens of `x`: (..., in) float; `mask`: bool of ``x.shape[:-1]`` (True = real token).

        `x` is not modified.

        Raises:
            ValueError: wrong feature size or mask shape, or NaN/Inf in the kept tokens.
        """
        n_feat = self.H.shape[0]
        if x.shape[-1] != n_feat:
            raise ValueError(f"{self.name}: input has {x.shape[-1]} features, expected {n_feat}")
        x = x.detach()
        owned = False  # whether x is a copy of ours, which may be scaled in place
        if mask is not None:
            if tuple(mask.shape) != tuple(x.shape[:-1]):
                raise ValueError(f"{self.name}: attention mask {tuple(mask.shape)} does not match the input "
                                 f"tokens {tuple(x.shape[:-1])}")
            x, owned = x[mask.bool()], True
        x = x.reshape(-1, n_feat)
        m = x.shape[0]
        if m == 0:
            return
        absmax = torch.maximum(x.amax(dim=0), x.amin(dim=0).neg_())  # = |x|.amax(0), exactly
        if not torch.isfinite(absmax).all():
            raise ValueError(f"{self.name}: calibration inputs contain NaN or Inf")
        self.absmax = torch.maximum(self.absmax, absmax.float())
        if x.dtype != self.H.dtype:
            x, owned = x.to(self.H.dtype), True
        self.H.mul_(self.n_tokens / (self.n_tokens + m))
        self.n_tokens += m
        scale = math.sqrt(2 / self.n_tokens)
        x = x.mul_(scale) if owned else x * scale
        self.H.addmm_(x.T, x)


class capture_hessians:
    """Context manager: forward hooks accumulating one :class:`HessianAccumulator` per linear.

    Usage::

        with capture_hessians({"q": lin}, torch.float32) as cap:
            cap.mask = attention_mask_chunk      # optional, bool (B, T); None = every token
            block(x)
        cap.hessians["q"].H

    Args:
        modules: name -> ``nn.Linear``. dtype: H's dtype.
    """

    def __init__(self, modules: dict[str, nn.Linear], dtype: torch.dtype = torch.float32) -> None:
        self.modules = modules
        self.mask: torch.Tensor | None = None
        self.hessians = {
            n: HessianAccumulator(m.in_features, dtype, m.weight.device, name=n) for n, m in modules.items()
        }
        self._handles: list = []

    def __enter__(self) -> "capture_hessians":
        for n, m in self.modules.items():
            acc = self.hessians[n]
            self._handles.append(m.register_forward_hook(
                lambda _mod, inp, _out, acc=acc: acc.add(inp[0], self.mask)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


# ---------------------------------------------------------------------------------------------
# calibration data and the model-level driver


def calibration_batch(tokens: np.ndarray, n_seq: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """`n_seq` random windows of `seq_len` tokens, deterministic in `seed` (reference: random
    2048-token segments of the C4 *train* split, seed 0).

    Args:
        tokens: (n,) integer token ids — the TRAINING split (never validation).
        n_seq, seq_len: how many windows, and their length T.
        seed: numpy Generator seed; windows start uniformly in ``[0, n − T]`` (with replacement).

    Returns:
        (n_seq, seq_len) int64.

    Raises:
        ValueError: non-positive sizes, `tokens` not 1-D, or shorter than `seq_len`.
    """
    if not _is_int(n_seq, 1) or not _is_int(seq_len, 1):
        raise ValueError(f"n_seq and seq_len must be positive ints, got {n_seq!r}, {seq_len!r}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be 1-D, got shape {tokens.shape}")
    if len(tokens) < seq_len:
        raise ValueError(f"the calibration split has {len(tokens)} tokens, fewer than seq_len={seq_len}")
    starts = np.random.default_rng(seed).integers(0, len(tokens) - seq_len + 1, size=n_seq)
    return torch.from_numpy(np.stack([np.asarray(tokens[s:s + seq_len], dtype=np.int64) for s in starts]))


class _Captured(Exception):
    def __init__(self, args, kwargs):
        super().__init__()
        self.args_, self.kwargs_ = args, kwargs


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder blocks of a causal LM (``model.layers``, ``model.decoder.layers`` or ``transformer.h``).

    Raises:
        ValueError: `model` has none.
    """
    for path in ("model.layers", "model.decoder.layers", "transformer.h"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, nn.ModuleList) and len(obj):
            return obj
    raise ValueError(f"{type(model).__name__} has no decoder layers (model.layers) to quantize block by block")


def _groups(linears: dict[str, nn.Linear], true_sequential: bool) -> list[list[str]]:
    """The block's linears in calibration order (see the module docstring)."""
    rank = {s: k for k, grp in enumerate(TRUE_SEQUENTIAL_ORDER) for s in grp}
    short = {n: n.rsplit(".", 1)[-1] for n in linears}
    if not true_sequential or not all(s in rank for s in short.values()):
        return [list(linears)]
    return [[n for n in linears if rank[short[n]] == k] for k in range(len(TRUE_SEQUENTIAL_ORDER))
            if any(rank[short[n]] == k for n in linears)]


def _run_layer(layer: nn.Module, h: torch.Tensor, args: tuple, kwargs: dict) -> torch.Tensor:
    out = layer(h, *args, **kwargs)
    return out[0] if isinstance(out, (tuple, list)) else out


@torch.no_grad()
def gptq_quantize_(
    model: nn.Module,
    calib: torch.Tensor,
    cfg: GPTQConfig,
    progress: bool = True,
    attention_mask: torch.Tensor | None = None,
    layer_fn: Callable[[str, torch.Tensor, HessianAccumulator], tuple[torch.Tensor, GPTQInfo]] | None = None,
) -> dict[str, dict[str, float]]:
    """GPTQ every linear inside the blocks of a transformers causal LM, in place.

    Block by block and true-sequential (module docstring): the inputs of the first decoder layer,
    with the keyword arguments the model passes it (rotary ``position_embeddings``,
    ``position_ids``, causal mask), are captured by a pre-hook that stops the forward; every
    later input is computed by the already quantized layers. Embeddings, norms and lm_head stay.

    Args:
        model: e.g. ``LlamaForCausalLM`` from :func:`bitlaws.model.build_model`; any dtype/device.
        calib: (n_seq, T) int64 token ids from the TRAINING split (:func:`calibration_batch`).
        cfg: the quantizer; ``cfg.calib_batch_size`` sequences go through each forward.
        progress: show a tqdm bar over blocks.
        attention_mask: optional (n_seq, T) 0/1 — padding (0) is left out of every Hessian.
        layer_fn: optional replacement of the per-layer step, ``(name, W, hessian) -> (W_hat, info)``
            (the hook for QUIK); default ``gptq_weight(W, hessian.H, cfg, name=name)``.

    Returns:
        Per block linear (exactly :func:`bitlaws.ptq.block_linears`' names): ``damp`` (relative
        damp used), ``damp_tries``, ``n_tokens`` (calibration tokens seen), ``out_err`` =
        ``||W X − Ŵ X||_F²`` over those tokens, ``out_err_rtn`` (the same for RTN on the same grid
        and inputs), ``out_norm`` = ``||W X||_F²``, ``gptq_loss``, ``seconds`` (the solve).

    Raises:
        ValueError: calib empty, not 2-D or not integer; an attention mask of another shape; NaN or
            Inf in a weight or in a module's inputs; a module that saw no tokens; a linear outside
            the decoder layers; a failed Cholesky past ``cfg.max_damp``. Messages name the module.
            On any error the weights are restored, so the model is left as it was.
    """
    if not isinstance(calib, torch.Tensor) or calib.dim() != 2 or torch.is_floating_point(calib) or calib.dtype == torch.bool:
        raise ValueError(f"calib must be an integer tensor (n_seq, T) of token ids, got "
                         f"{getattr(calib, 'shape', type(calib).__name__)} {getattr(calib, 'dtype', '')}")
    if calib.numel() == 0:
        raise ValueError(f"empty calibration set: calib has shape {tuple(calib.shape)}")
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(calib.shape):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must have calib's shape {tuple(calib.shape)}")
    linears = block_linears(model)
    for name, lin in linears.items():
        _check_finite(name, lin.weight)
    layers = decoder_layers(model)
    owner: dict[int, tuple[int, str]] = {}
    per_layer: list[dict[str, nn.Linear]] = [{} for _ in layers]
    by_id = {id(m): n for n, m in linears.items()}
    for li, layer in enumerate(layers):
        for m in layer.modules():
            if id(m) in by_id:
                per_layer[li][by_id[id(m)]] = m
                owner[id(m)] = (li, by_id[id(m)])
    outside = [n for n, m in linears.items() if id(m) not in owner]
    if outside:
        raise ValueError(f"linears outside the decoder layers cannot be calibrated block by block: {outside}")
    if layer_fn is None:
        def layer_fn(name, W, acc):
            return gptq_weight(W, acc.H, cfg, name=name)

    device = next(model.parameters()).device
    hdtype = cfg.torch_hessian_dtype
    originals = {n: m.weight.detach().clone() for n, m in linears.items()}
    was_training = model.training
    model.eval()
    report: dict[str, dict[str, float]] = {}
    try:
        # 1. the inputs of layer 0, per chunk of sequences, with the kwargs the model passes it
        def catch(_mod, args, kwargs):
            raise _Captured(args, kwargs)

        chunks = []
        handle = layers[0].register_forward_pre_hook(catch, with_kwargs=True)
        try:
            for s in range(0, calib.shape[0], cfg.calib_batch_size):
                ids = calib[s:s + cfg.calib_batch_size].to(device=device, dtype=torch.int64)
                am = None if attention_mask is None else attention_mask[s:s + cfg.calib_batch_size].to(device)
                try:
                    model(input_ids=ids, attention_mask=am, use_cache=False)
                except _Captured as c:
                    args, kwargs = tuple(c.args_), dict(c.kwargs_)
                    h = args[0] if args else kwargs.pop("hidden_states")
                    if not torch.isfinite(h).all():
                        raise ValueError("inputs of the first decoder layer (the embeddings) contain NaN or Inf") from None
                    chunks.append([h, args[1:], kwargs, None if am is None else am.bool()])
                else:
                    raise RuntimeError("the model never called its first decoder layer")
        finally:
            handle.remove()

        # 2. block by block, group by group
        layer_iter: Iterator = range(len(layers))
        if progress:
            from tqdm.auto import tqdm
            layer_iter = tqdm(layer_iter, desc=f"gptq w{cfg.bits}", unit="block")
        for li in layer_iter:
            layer = layers[li]
            for group in _groups(per_layer[li], cfg.true_sequential):
                mods = {n: per_layer[li][n] for n in group}
                with capture_hessians(mods, hdtype) as cap:
                    for h, args, kwargs, am in chunks:
                        cap.mask = am
                        _run_layer(layer, h, args, kwargs)
                for n in group:
                    acc = cap.hessians[n]
                    if acc.n_tokens == 0:
                        raise ValueError(f"{n}: saw no calibration tokens (never called, or every token masked)")
                    lin = mods[n]
                    W = lin.weight.detach()
                    t0 = time.perf_counter()
                    W_hat, info = layer_fn(n, W, acc)
                    seconds = time.perf_counter() - t0
                    if tuple(W_hat.shape) != tuple(W.shape) or not _all_finite(W_hat):
                        raise ValueError(f"{n}: quantized weight has shape {tuple(W_hat.shape)} or non-finite values")
                    report[n] = {
                        "damp": info.damp, "damp_tries": info.damp_tries, "n_tokens": acc.n_tokens,
                        "out_err": output_error(W, W_hat, acc.H, acc.n_tokens),
                        "out_err_rtn": output_error(W, rtn_weight(W, cfg, info.n_keep_last), acc.H, acc.n_tokens),
                        "out_norm": output_error(W, torch.zeros_like(W), acc.H, acc.n_tokens),
                        "gptq_loss": info.gptq_loss, "seconds": seconds,
                    }
                    lin.weight.copy_(W_hat.to(lin.weight.dtype))
            for c in chunks:
                c[0] = _run_layer(layer, c[0], c[1], c[2])
    except BaseException:
        for n, m in linears.items():
            m.weight.copy_(originals[n])
        raise
    finally:
        model.train(was_training)
    return report

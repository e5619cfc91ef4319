"""Post-training quantizers over any transformers causal LM.

* :mod:`bitlaws.ptq.rtn` — round to nearest (``RTNConfig``, ``rtn_quantize_``);
* :mod:`bitlaws.ptq.gptq` — GPTQ for one layer, Algorithm 1 (``GPTQConfig``, ``gptq_weight``; it
  keeps the last ``n_keep_last`` columns unquantized for QUIK);
* :mod:`bitlaws.ptq.calibration` — the model-level driver: Hessians from training-split
  calibration tokens, block by block and true-sequential (``calibration_batch``, ``gptq_quantize_``);
* :mod:`bitlaws.ptq.quik` — QUIK (W4A4 with fp16 outliers), :mod:`bitlaws.ptq.smoothquant`.

Both quantizers share one grid (:mod:`bitlaws.quant`, asymmetric min-max per output channel by
default) and touch exactly :func:`block_linears`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["block_linears"]


def block_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The linear layers inside the transformer blocks, by qualified name.

    Every ``nn.Linear`` of `model` except the output embedding (``lm_head``): for Llama these are
    q/k/v/o_proj and gate/up/down_proj of each layer. Embeddings are not linears and stay too.

    Raises:
        ValueError: if `model` has no such linear layer.
    """
    out_emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    found = {
        name: m for name, m in model.named_modules() if isinstance(m, nn.Linear) and m is not out_emb
    }
    if not found:
        raise ValueError(f"{type(model).__name__} has no nn.Linear inside its blocks to quantize")
    return found


@torch.no_grad()
def _check_finite(name: str, w: torch.Tensor) -> None:
    if not torch.isfinite(w).all():
        raise ValueError(f"weight of {name} contains NaN or Inf; refusing to quantize it")


def _is_int(v, lo: int, hi: float = math.inf) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and lo <= v <= hi


def _all_finite(t: torch.Tensor) -> bool:
    """``isfinite(t).all()`` at the cost of one sum: a finite sum has no NaN or Inf in it, and a
    sum that is not finite (NaN/Inf in `t`, or finite values whose sum overflows) is settled by the
    elementwise test. (The elementwise test alone costs ~20x a sum: it writes a bool per entry.)"""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())

"""Transformer++ language models: transformers' ``LlamaForCausalLM`` built from a ``LlamaConfig``.

Transformer++ (RMSNorm, SwiGLU MLP, rotary position embeddings, no biases) is what Kumar et al.
train ("OLMo-style"); Llama is the same block, so we use transformers' implementation rather than
a fork. Embeddings are untied (the lm_head is its own matrix), so the non-embedding count N is
clean.

**N** (``n_params``) counts every weight inside the blocks plus the final norm: per layer
``4·C²`` (q, k, v, o; as many K/V heads as query heads) ``+ 3·C·d_ff`` (gate, up, down)
``+ 2·C`` (two RMSNorm gains), then ``+ C`` for the final norm. The token embedding and the
lm_head are excluded (the book's methods page, "The model").
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaForCausalLM

# The configuration and the named sizes live in the torch-free `configs`; they are this module's names too.
from .configs import (COMPUTE_MATCHED, GPU_COMPUTE_MATCHED, GPU_LADDER, LADDER, SIZE_LADDERS, SMOKE_LADDER,
                      ModelConfig, get_size)

__all__ = ["ModelConfig", "LADDER", "SMOKE_LADDER", "COMPUTE_MATCHED", "GPU_LADDER", "GPU_COMPUTE_MATCHED", "SIZE_LADDERS", "build_model", "count_n_params", "hand_count_n_params", "get_size"]


def hand_count_n_params(cfg: ModelConfig) -> int:
    """N from the closed form in the module docstring (no model built)."""
    c, f = cfg.d_model, cfg.d_ff
    return cfg.n_layers * (4 * c * c + 3 * c * f + 2 * c) + c


def build_model(cfg: ModelConfig, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised fp32 ``LlamaForCausalLM`` for `cfg`, seeded.

    Args:
        cfg: model shape.
        seed: seeds torch's global generator before initialisation (same seed, same weights).

    Returns:
        The model in train mode; ``model(input_ids=(B, T) int64).logits`` is ``(B, T, vocab)`` float32.
    """
    torch.manual_seed(seed)
    llama = cfg.to_llama()
    llama._attn_implementation = "sdpa"
    model = LlamaForCausalLM(llama)
    return model.float()


def count_n_params(model: nn.Module) -> int:
    """N: parameters of the transformer blocks plus the final norm (not embeddings, not lm_head).

    Works on any transformers decoder whose backbone exposes ``.layers`` and ``.norm``
    (Llama, Mistral, Qwen2, ...).

    Raises:
        ValueError: if the model has no ``model.layers``/``model.norm``.
    """
    backbone = getattr(model, "model", None)
    if backbone is None or not hasattr(backbone, "layers") or not hasattr(backbone, "norm"):
        raise ValueError(f"{type(model).__name__} has no .model.layers/.model.norm to count N over")
    return sum(p.numel() for p in backbone.layers.parameters()) + sum(p.numel() for p in backbone.norm.parameters())

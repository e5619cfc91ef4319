"""Watch it talk: sample text from a committed checkpoint before and after post-training quantization.

A live demonstration for readers and teachers (book/talk.md): ``sample_text`` draws bytes from a
byte-level model with transformers' ``generate``, seeded so that a rerun gives the same text;
``talk_before_after`` loads one of ``data/checkpoints/<profile>/`` and samples it as trained and
after round-to-nearest weight quantization (``bitlaws.ptq.rtn``) with the same seed, so the two
texts differ only by what the quantization did to the model.
"""

from __future__ import annotations

import copy
import os

import torch

from ..ptq.rtn import RTNConfig, rtn_quantize_
from .checkpoints import load_checkpoint

__all__ = ["sample_text", "talk_before_after"]


def sample_text(model: torch.nn.Module, prompt: str, n_bytes: int = 200, *, temperature: float = 0.8,
                top_k: int = 0, seed: int = 0) -> str:
    """Continue ``prompt`` by ``n_bytes`` bytes sampled from a byte-level causal LM.

    Args:
        model: a transformers causal LM over bytes (``vocab_size`` 256), e.g. from
            ``bitlaws.study.checkpoints.load_checkpoint``.
        prompt: the text to continue; its UTF-8 bytes are the first token ids.
        n_bytes: bytes to generate, ≥ 1; prompt plus continuation must fit the model's context
            (``config.max_position_embeddings``).
        temperature: softmax temperature, ≥ 0; 0 is greedy (the most likely byte at each step).
        top_k: sample among the k most likely bytes only (0: all 256).
        seed: the generator's seed; the global torch RNG is left as it was.

    Returns:
        The continuation only (not the prompt), decoded as UTF-8 (a cut multi-byte character
        becomes U+FFFD).

    Raises:
        ValueError: an empty prompt, ``n_bytes`` < 1, a negative temperature or top_k, a model that is
            not byte-level, or a prompt plus continuation longer than the model's context.
    """
    ids = list(prompt.encode("utf-8"))
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    if not ids:
        raise ValueError("prompt must be a non-empty string")
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 1:
        raise ValueError(f"n_bytes must be an int ≥ 1, got {n_bytes!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be ≥ 0 (0 = greedy), got {temperature!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an int ≥ 0 (0 = all bytes), got {top_k!r}")
    if getattr(model.config, "vocab_size", None) != 256:
        raise ValueError(f"the model must be byte-level (vocab_size 256), got {model.config.vocab_size}")
    if context and len(ids) + n_bytes > context:
        raise ValueError(f"prompt ({len(ids)} bytes) + n_bytes ({n_bytes}) must fit the model's context of "
                         f"{context} tokens")
    greedy = temperature == 0
    threads = torch.get_num_threads()
    # One sequence through a tiny model, token by token: more threads only contend (on a busy
    # 2-core machine, the book's two 240-byte samples took 8.7 minutes with 2 threads and 52 s with one).
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=n_bytes, min_new_tokens=n_bytes, do_sample=not greedy,
                                 temperature=None if greedy else float(temperature),
                                 top_k=top_k if not greedy else None, top_p=None, pad_token_id=0, eos_token_id=None)
    finally:
        torch.set_num_threads(threads)
    return bytes(out[0, len(ids):].tolist()).decode("utf-8", errors="replace")


def talk_before_after(checkpoint: str | os.PathLike, prompt: str = "ROMEO:\n", *, bits: int = 3,
                      n_bytes: int = 200, temperature: float = 0.8, seed: int = 0) -> dict[str, str]:
    """Sample one committed checkpoint as trained and after RTN to ``bits`` bits, with the same seed.

    Args:
        checkpoint: a file of ``data/checkpoints/<profile>/`` (``load_checkpoint``).
        prompt, n_bytes, temperature, seed: as ``sample_text``.
        bits: RTN weight bits P_post (per output channel, asymmetric min-max: ``RTNConfig``).

    Returns:
        ``{"as trained": text, "RTN INT<bits>": text}``.

    Raises:
        FileNotFoundError: no such checkpoint. ValueError: as ``sample_text`` and ``RTNConfig``.
    """
    model, _ = load_checkpoint(checkpoint)
    quantized = copy.deepcopy(model)
    rtn_quantize_(quantized, RTNConfig(bits=bits))
    kw = dict(n_bytes=n_bytes, temperature=temperature, seed=seed)
    return {"as trained": sample_text(model, prompt, **kw), f"RTN INT{bits}": sample_text(quantized, prompt, **kw)}

"""Triton, if installed, and how a kernel is launched: compiled for CUDA tensors, interpreted otherwise.

The kernel bodies are plain functions; `build` turns one into a launchable, autotuned kernel the
first time it is needed:

* CUDA tensors (and ``TRITON_INTERPRET`` unset): ``triton.jit`` plus ``triton.autotune`` over the
  family's configs;
* CPU tensors, or ``TRITON_INTERPRET=1``: Triton's interpreter (numpy on the host) with one small
  config, so no autotuning runs there.

Deciding at the call rather than at import means a CPU test never depends on whether
``TRITON_INTERPRET`` was set before some other module imported the kernels.

Public names (package-internal): ``HAS_TRITON``, ``triton``, ``tl``, ``require_triton``,
``interpreting``, ``build``.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

import torch

try:  # the kernels are optional: every *_ref twin works without Triton
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised on machines without triton
    triton = None
    tl = None
    HAS_TRITON = False

__all__ = ["HAS_TRITON", "triton", "tl", "require_triton", "interpreting", "build"]

_BUILT: dict[tuple[Callable, bool], object] = {}


def require_triton() -> None:
    """Raise a clear error when Triton is missing.

    Raises:
        ModuleNotFoundError: Triton is not installed; the message says how to get it.
    """
    if not HAS_TRITON:
        raise ModuleNotFoundError(
            "the Triton kernels need the `triton` package (pip install 'bitlaws[gpu]'); "
            "the *_ref functions and QuikLinear's reference path work without it"
        )


def interpreting(device: torch.device) -> bool:
    """Whether a launch on `device` runs in Triton's interpreter (CPU tensors, or TRITON_INTERPRET=1)."""
    return device.type != "cuda" or os.environ.get("TRITON_INTERPRET", "0") == "1"


def build(fn: Callable, configs: Sequence, interpret_config, key: Sequence[str], interpret: bool):
    """The launchable kernel for `fn`, built once per mode.

    Args:
        fn: the kernel body (a plain function written in ``triton.language``).
        configs: ``triton.Config`` list for the compiled kernel (autotuned over `key`).
        interpret_config: the one config used in the interpreter.
        key: argument names whose values select an autotuning entry.
        interpret: build for the interpreter (True) or compile with ``triton.jit`` (False).
    """
    require_triton()
    cached = _BUILT.get((fn, interpret))
    if cached is None:
        if interpret:
            from triton.runtime.interpreter import InterpretedFunction

            cached = triton.autotune(configs=[interpret_config], key=list(key))(InterpretedFunction(fn))
        else:
            cached = triton.autotune(configs=list(configs), key=list(key))(triton.jit(fn))
        _BUILT[(fn, interpret)] = cached
    return cached

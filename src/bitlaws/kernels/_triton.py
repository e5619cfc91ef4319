"""Triton, if installed, and whether its kernels run compiled or in its interpreter.

Triton decides once, when it is first imported: with ``TRITON_INTERPRET=1`` every ``@triton.jit``
function (its own standard library included) runs in the interpreter, on the host, with numpy;
otherwise kernels compile for the GPU and need CUDA tensors. So on a machine without a GPU, set
``TRITON_INTERPRET=1`` before anything imports ``triton`` (the kernel tests and the kernels chapter
do). In the interpreter only one small autotuning config is used, so nothing is benchmarked there.

Package-internal names: ``HAS_TRITON``, ``INTERPRET``, ``MIXED``, ``triton``, ``tl``, ``configs``,
``autotune``, ``require_triton``, ``check_device``, ``nonempty``.
"""

from __future__ import annotations

import os

import torch

try:  # the kernels are optional: every *_ref twin works without Triton
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised on machines without triton
    triton = None
    tl = None
    HAS_TRITON = False

__all__ = ["HAS_TRITON", "INTERPRET", "MIXED", "triton", "tl", "configs", "autotune", "require_triton", "check_device",
           "nonempty"]


def _interpret_knob() -> bool:
    if not HAS_TRITON:
        return False
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


# Our kernels are decorated now, under the current setting; Triton's own standard library
# (tl.zeros, tl.max, ...) was decorated when triton was first imported. The interpreter works only
# if both happened with TRITON_INTERPRET=1; MIXED means it was set after triton's import.
_KNOB = _interpret_knob()
_STDLIB_INTERPRETED = HAS_TRITON and type(tl.zeros).__name__ == "InterpretedFunction"
INTERPRET = _KNOB and _STDLIB_INTERPRETED
MIXED = HAS_TRITON and _KNOB != _STDLIB_INTERPRETED


def configs(compiled: list, interpreted) -> list:
    """The autotuning configs: `compiled` on a GPU, the single `interpreted` one in the interpreter."""
    return [interpreted] if INTERPRET else compiled


def autotune(configs: list, key: list):
    """``triton.autotune`` with a short benchmark per config (5 ms warm-up, 25 ms of timed calls),
    so that tuning every Llama-2 shape stays well inside one device call; Triton's defaults are
    25 and 100 ms. Older Triton without the ``do_bench`` argument gets its defaults."""
    import inspect

    kwargs = {}
    if "do_bench" in inspect.signature(triton.autotune).parameters:
        def do_bench(fn, quantiles):
            from triton.testing import do_bench as bench

            return bench(fn, warmup=5, rep=25, quantiles=quantiles)

        kwargs["do_bench"] = do_bench
    return triton.autotune(configs=configs, key=key, **kwargs)


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


def check_device(name: str, t: torch.Tensor) -> None:
    """A Triton kernel's operand must be a CUDA tensor, unless the interpreter is on.

    Raises:
        ValueError: `t` is not on CUDA and ``TRITON_INTERPRET=1`` was not set before triton was
            imported, or the setting changed after triton was imported.
    """
    if MIXED:
        raise ValueError(
            "TRITON_INTERPRET was set or cleared after triton was first imported in this process, so Triton's "
            "interpreter is half on and no kernel can run; set it before anything imports triton"
        )
    if t.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"{name} is on {t.device}: the Triton kernels need CUDA tensors, or Triton's interpreter "
            "(set TRITON_INTERPRET=1 before triton is first imported); on the CPU use the *_ref functions"
        )


def nonempty(t: torch.Tensor) -> torch.Tensor:
    """`t`, or a one-element tensor of its dtype and device when `t` is empty.

    An empty CUDA tensor has a null data pointer, which a kernel launch refuses; the kernels never
    read or write past a zero length, so any valid pointer will do.
    """
    return t if t.numel() else torch.zeros(1, dtype=t.dtype, device=t.device)

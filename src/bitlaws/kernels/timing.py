"""Timing and memory of one kernel call: medians of wall time (CUDA events or Triton's
``do_bench`` on a GPU, ``time.perf_counter`` on the CPU) and the peak of new CUDA allocations.

Public names: ``time_ms``, ``peak_mem_bytes``.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

__all__ = ["time_ms", "peak_mem_bytes"]


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], object], *, device: str = "cpu", reps: int = 20, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in milliseconds.

    CUDA: ``triton.testing.do_bench`` when Triton is installed (it flushes the L2 cache between
    calls; its budgets are milliseconds: 10 ms of warm-up, then max(`reps`, 20) ms of timed calls,
    so `reps` bounds the time, not the count), CUDA events over `reps` calls otherwise. CPU: ``time.perf_counter`` around each call, after `warmup` calls.
    """
    if torch.device(device).type == "cuda":
        try:
            import triton.testing

            return float(triton.testing.do_bench(fn, warmup=10, rep=max(reps, 20), return_mode="median"))
        except ImportError:
            pass
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return float(statistics.median(times))
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def peak_mem_bytes(fn: Callable[[], object], *, device: str = "cpu") -> float:
    """Bytes newly allocated at the peak of one ``fn()`` call on CUDA (outputs and workspaces;
    what was allocated before the call, such as weights and inputs, is not counted); NaN elsewhere."""
    if torch.device(device).type != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    del out
    return float(peak)

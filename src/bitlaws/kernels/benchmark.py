"""The QUIK kernel benchmark: Llama-2 layer shapes, timings and tidy CSV rows.

Shared by ``bench/quik_kernels.py`` (which writes the CSVs), ``bench/device_check.py`` (the
lent-device check) and the kernels chapter (whose ``RECOMPUTE`` path reruns the small CPU
benchmark). For each linear shape ``(n_out, k_in)`` and number of tokens ``m`` it times, in the
same run, the dense layer and `QuikLinear` (``quik_w8a8`` without outliers, ``quik_w4a4`` with
the setting's outlier count), and the three stages of a QUIK forward alone. Making and writing the
rows needs torch (and triton on CUDA) only; reading them back and judging Q4 is the study's
(``bitlaws.study.quik_kernels``). What each row measures is written out in the book's methods page,
section "QUIK kernels".

Public names: ``LLAMA2_SHAPES``, ``SMOLLM2_SHAPES``, ``SETTINGS``, ``BenchSettings``, ``COLUMNS``, ``time_ms``,
``peak_mem_bytes`` (from ``timing``), ``environment``, ``run_benchmark``, ``benchmark_layer``,
``tidy_rows``, ``write_csv``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import math
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch

from .._io import git_sha, write_atomic
from .timing import peak_mem_bytes, time_ms

__all__ = ["LLAMA2_SHAPES", "SMOLLM2_SHAPES", "SETTINGS", "COLUMNS", "time_ms", "peak_mem_bytes", "environment",
           "run_benchmark", "benchmark_layer", "tidy_rows", "BenchSettings", "write_csv"]

# The linear layers of one Llama-2 block (Touvron et al. 2023): (layer, n_out, k_in); layers that
# share a shape are listed once. 70B uses grouped-query attention (8 KV heads of 128).
LLAMA2_SHAPES: dict[str, list[tuple[str, int, int]]] = {
    "llama2-7b": [("q/k/v/o_proj", 4096, 4096), ("gate/up_proj", 11008, 4096), ("down_proj", 4096, 11008)],
    "llama2-13b": [("q/k/v/o_proj", 5120, 5120), ("gate/up_proj", 13824, 5120), ("down_proj", 5120, 13824)],
    "llama2-70b": [("q/o_proj", 8192, 8192), ("k/v_proj", 1024, 8192), ("gate/up_proj", 28672, 8192),
                   ("down_proj", 8192, 28672)],
}

# SmolLM2-135M (Llama architecture; 9 query heads and 3 KV heads of 64): the real model of chapter 5.
SMOLLM2_SHAPES: dict[str, list[tuple[str, int, int]]] = {
    "smollm2-135m": [("q/o_proj", 576, 576), ("k/v_proj", 192, 576), ("gate/up_proj", 1536, 576),
                     ("down_proj", 576, 1536)],
}
_SHAPES = {**LLAMA2_SHAPES, **SMOLLM2_SHAPES}


@dataclass(frozen=True)
class BenchSettings:
    """One benchmark setting: which shapes, how many tokens, how many outliers, how many repeats.

    ``scale`` divides every Llama-2 dimension (:meth:`shapes`; the CPU settings run Llama-2-7B's
    block at 1/8 and 1/32 width, the GPU one at full size). ``n_outliers`` is given as is: the
    settings use QUIK's 256 divided by the same scale.
    """

    models: tuple[str, ...]
    scale: int
    tokens: tuple[int, ...]
    n_outliers: int
    reps: int

    def shapes(self) -> list[tuple[str, str, int, int]]:
        """(model, layer, n_out, k_in) at this setting's scale."""
        suffix = f"/{self.scale}" if self.scale > 1 else ""
        return [(model + suffix, layer, n // self.scale, k // self.scale)
                for model in self.models for layer, n, k in _SHAPES[model]]


SETTINGS: dict[str, BenchSettings] = {
    "smoke": BenchSettings(models=("llama2-7b",), scale=32, tokens=(1, 16), n_outliers=8, reps=3),
    "cpu": BenchSettings(models=("llama2-7b",), scale=8, tokens=(1, 16, 256, 2048), n_outliers=32, reps=20),
    "gpu": BenchSettings(models=("llama2-7b", "llama2-13b", "llama2-70b"), scale=1, tokens=(1, 16, 256, 2048),
                         n_outliers=256, reps=50),
    # SmolLM2-135M's own shapes with its chapter-5 outlier count (k = 32 of 576), on the CPU
    "smollm": BenchSettings(models=("smollm2-135m",), scale=1, tokens=(1, 16, 256), n_outliers=32, reps=5),
}

COLUMNS = [
    # identifiers
    "experiment", "profile", "model", "layer", "n_out", "k_in", "m_tokens", "method", "part", "impl",
    "bits", "n_outliers", "dtype",
    # measures
    "latency_ms", "speedup", "weight_bytes", "peak_mem_bytes", "reps",
    # provenance
    "threads", "device", "driver", "torch_version", "triton_version", "git_sha", "timestamp",
]


def environment(device: str, threads: int) -> dict[str, object]:
    """The provenance columns: device name, driver, library versions, code version, UTC time."""
    if torch.device(device).type == "cuda":
        name = "cuda:" + torch.cuda.get_device_name(0)
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = "unknown"
        driver = f"{driver} (cuda {torch.version.cuda})"
    else:
        name, driver = f"cpu:{platform.machine()}", "none"
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    return {"threads": threads, "device": name, "driver": driver, "torch_version": torch.__version__,
            "triton_version": triton_version, "git_sha": git_sha(),
            "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def run_benchmark(profile: str = "cpu", *, device: str | None = None, threads: int = 1,
                  progress: Callable[[str], None] | None = None) -> list[dict]:
    """Run the benchmark of one setting of ``SETTINGS`` and return its tidy rows.

    Args:
        profile: ``smoke``, ``cpu`` or ``gpu`` (a key of ``SETTINGS``).
        device: ``cuda`` or ``cpu``; default: CUDA if available.
        threads: torch CPU threads for the run (recorded in the rows).
        progress: called with one line per shape (e.g. ``print``).

    Returns:
        Tidy rows: one dict per observation, with every key of ``COLUMNS``.

    Raises:
        ValueError: unknown profile, or the ``gpu`` setting without CUDA.
    """
    if profile not in SETTINGS:
        raise ValueError(f"profile must be one of {sorted(SETTINGS)}, got {profile!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if profile == "gpu" and torch.device(device).type != "cuda":
        raise ValueError("the gpu setting times full-size Llama-2 layers and needs CUDA")
    s = SETTINGS[profile]
    on_cuda = torch.device(device).type == "cuda"
    dtype = torch.bfloat16 if on_cuda else torch.float32
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    rows: list[dict] = []
    try:
        for model, layer, n, k in s.shapes():
            rows += benchmark_layer(model, layer, n, k, s, device=device, dtype=dtype, progress=progress)
    finally:
        torch.set_num_threads(old_threads)
    return tidy_rows(rows, profile, s.reps, environment(device, threads))


def benchmark_layer(model: str, layer: str, n: int, k: int, s: BenchSettings, *, device: str, dtype: torch.dtype,
                    progress: Callable[[str], None] | None = None) -> list[dict]:
    """The rows of one linear shape ``(n, k)`` of :func:`run_benchmark` (before :func:`tidy_rows`):
    the layer timings (dense, W8A8 without outliers, W4A4 with ``s.n_outliers``) and the stages."""
    from .int_gemm import benchmark_int_gemm
    from .quik_act import benchmark_quik_act
    from .quik_linear import benchmark_quik_linear

    rows: list[dict] = []
    ident = {"model": model, "layer": layer}
    variants = ((8, 0), (4, s.n_outliers))
    layer_rows = benchmark_quik_linear(n, k, s.tokens, variants, device=device, dtype=dtype, reps=s.reps)
    rows += [{**ident, **r} for r in layer_rows]
    for bits, n_out in variants:
        parts = benchmark_quik_act(s.tokens, k, n_out, bits, device=device, dtype=dtype, reps=s.reps)
        parts += benchmark_int_gemm(s.tokens, n, k - n_out, bits, device=device, reps=s.reps)
        if n_out:
            parts += _outlier_gemm(s.tokens, n, n_out, device, dtype, s.reps)
        if bits == 8 and torch.device(device).type == "cuda":
            parts += _int8_cublas(s.tokens, n, k - n_out, device, s.reps)
        for r in parts:
            rows.append({**ident, **r, "method": f"quik_w{bits}a{bits}", "n_out": n, "k_in": k,
                         "n_outliers": n_out, "dtype": str(dtype).removeprefix("torch."),
                         "bits": 16 if r["part"] == "outlier_gemm" else bits})
    if progress:
        for m in s.tokens:
            progress(f"{model:>14} {layer:>13} {n:>6}x{k:<6} m={m:<5} " + "  ".join(
                f"{r['method']} {r['latency_ms']:.3f} ms (x{r['speedup']:.2f})"
                for r in layer_rows if r["m_tokens"] == m))
    return rows


def tidy_rows(rows: Iterable[dict], profile: str, reps: int, env: dict) -> list[dict]:
    """Rows with every key of ``COLUMNS`` (NaN where a row has no value), the identifiers and `env`."""
    return [{c: {**r, "experiment": "quik_kernels", "profile": profile, "reps": reps, **env}.get(c, math.nan)
             for c in COLUMNS} for r in rows]


def _outlier_gemm(tokens, n: int, k: int, device: str, dtype: torch.dtype, reps: int) -> list[dict]:
    torch.manual_seed(1)
    w = torch.randn(n, k, device=device, dtype=dtype)
    rows = []
    for m in tokens:
        x = torch.randn(m, k, device=device, dtype=dtype)
        ms = time_ms(lambda: torch.nn.functional.linear(x, w), device=device, reps=reps)
        rows.append({"part": "outlier_gemm", "impl": "torch", "m_tokens": m, "latency_ms": ms})
    return rows


def _int8_cublas(tokens, n: int, k: int, device: str, reps: int) -> list[dict]:
    """The GPU library's int8 GEMM: ``torch._int_mm`` (cuBLASLt, int8 x int8 -> int32, no epilogue)
    on the base-feature shape, beside our Triton ``int_gemm`` (``impl = cublas``): a reference, not
    a hardware ceiling (ours was faster on the H200). cuBLASLt's int8 path
    needs more than 16 rows and K, N multiples of 8: other shapes get no row."""
    if n % 8 or k % 8:
        return []
    gen = torch.Generator(device=device).manual_seed(2)
    w = torch.randint(-128, 128, (n, k), device=device, dtype=torch.int8, generator=gen)
    rows = []
    for m in tokens:
        if m <= 16:
            continue
        a = torch.randint(-128, 128, (m, k), device=device, dtype=torch.int8, generator=gen)
        try:
            ms = time_ms(lambda: torch._int_mm(a, w.t()), device=device, reps=reps)
        except RuntimeError:  # a build without the cuBLASLt int8 path: no row
            continue
        rows.append({"part": "int_gemm", "impl": "cublas", "m_tokens": m, "latency_ms": ms})
    return rows


def write_csv(rows: Iterable[dict], path: str | os.PathLike, columns: list[str] | None = None,
              extra: str = "raise") -> None:
    """Write benchmark rows (dicts, or a DataFrame) to `path` atomically, replacing it.

    Args:
        rows: the rows.
        path: the CSV; its folder is created.
        columns: the columns, in order (default ``COLUMNS``).
        extra: a key outside ``columns`` is an error (``"raise"``) or left out (``"ignore"``).

    Floats are written with 6 significant digits, NaN and None as an empty cell.
    """
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    columns = COLUMNS if columns is None else columns
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction=extra, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: _cell(r.get(c)) for c in columns})
    write_atomic(path, text.getvalue(), mode=0o644)  # a committed CSV is world-readable


def _cell(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v

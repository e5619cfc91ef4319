"""The QUIK kernel benchmark: Llama-2 layer shapes, timings, tidy CSV rows, and the Q4 verdict.

Shared by ``bench/quik_kernels.py`` (which writes the CSVs) and the kernels chapter (whose
``RECOMPUTE`` path reruns the small CPU benchmark). What is timed, for each linear shape
``(n_out, k_in)`` and number of tokens ``m``:

* ``part = layer``: one forward of the dense layer (``method = dense``: ``torch.nn.functional.linear``
  in bf16 on CUDA, fp32 on the CPU) and of `QuikLinear` (``quik_w8a8`` without outliers, as
  QUIK's Fig. 6 runs QUIK-8B, and ``quik_w4a4`` with the profile's outlier count), all in the same
  run, so ``speedup = latency(dense) / latency(method)`` compares like with like;
* ``part = act_quant | int_gemm | outlier_gemm``: the three stages of a QUIK forward, alone.

On CUDA the QUIK stages are the Triton kernels; elsewhere they are the pure-torch references
(``torch._int_mm`` for the integer GEMM), so CPU rows say nothing about GPU speed: they show what
the reference path costs. Making the rows needs torch (and triton on CUDA) only; reading them
back (`load_benchmark`) and judging them (`verdict_q4`) need pandas.

Public names: ``LLAMA2_SHAPES``, ``SETTINGS``, ``BenchSettings``, ``COLUMNS``, ``time_ms``,
``peak_mem_bytes``, ``environment``, ``run_benchmark``, ``benchmark_layer``, ``tidy_rows``,
``csv_path``, ``write_csv``, ``load_benchmark``, ``verdict_q4``. ``bench/device_check.py`` (the
lent-device check) runs `benchmark_layer` shape by shape under a time budget and adds an fp16
dense baseline (``method = dense_fp16``; its ``speedup`` is latency(bf16 dense) / latency(fp16)).
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
import os
import platform
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import torch

if TYPE_CHECKING:  # pandas is needed to read and judge the CSVs, not to make them (the GPU
    import pandas as pd  # machine runs this module with its own torch and triton only)

__all__ = ["LLAMA2_SHAPES", "SETTINGS", "COLUMNS", "time_ms", "peak_mem_bytes", "environment",
           "run_benchmark", "benchmark_layer", "tidy_rows", "BenchSettings", "csv_path", "write_csv",
           "load_benchmark", "verdict_q4"]

# The linear layers of one Llama-2 block (Touvron et al. 2023): (layer, n_out, k_in); layers that
# share a shape are listed once. 70B uses grouped-query attention (8 KV heads of 128).
LLAMA2_SHAPES: dict[str, list[tuple[str, int, int]]] = {
    "llama2-7b": [("q/k/v/o_proj", 4096, 4096), ("gate/up_proj", 11008, 4096), ("down_proj", 4096, 11008)],
    "llama2-13b": [("q/k/v/o_proj", 5120, 5120), ("gate/up_proj", 13824, 5120), ("down_proj", 5120, 13824)],
    "llama2-70b": [("q/o_proj", 8192, 8192), ("k/v_proj", 1024, 8192), ("gate/up_proj", 28672, 8192),
                   ("down_proj", 8192, 28672)],
}


@dataclass(frozen=True)
class BenchSettings:
    """One benchmark setting: which shapes, how many tokens, how many outliers, how many repeats.

    ``scale`` divides every Llama-2 dimension and the outlier count (the CPU settings run
    Llama-2-7B's block at 1/8 and 1/32 width; the GPU one at full size).
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
                for model in self.models for layer, n, k in LLAMA2_SHAPES[model]]


SETTINGS: dict[str, BenchSettings] = {
    "smoke": BenchSettings(models=("llama2-7b",), scale=32, tokens=(1, 16), n_outliers=8, reps=3),
    "cpu": BenchSettings(models=("llama2-7b",), scale=8, tokens=(1, 16, 256, 2048), n_outliers=32, reps=20),
    "gpu": BenchSettings(models=("llama2-7b", "llama2-13b", "llama2-70b"), scale=1, tokens=(1, 16, 256, 2048),
                         n_outliers=256, reps=50),
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


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], object], *, device: str = "cpu", reps: int = 20, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in milliseconds.

    CUDA: ``triton.testing.do_bench`` when Triton is installed (it flushes the L2 cache between
    calls), CUDA events otherwise. CPU: ``time.perf_counter`` around each call, after `warmup` calls.
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
            "triton_version": triton_version, "git_sha": _git_sha(),
            "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _git_sha() -> str:
    """The commit of this checkout (12 hex, ``-dirty`` if ``src/`` has uncommitted changes), or ``unknown``
    (as :mod:`bitlaws.results` records it; repeated here so that making rows needs no pandas)."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/src"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha[:12] + ("-dirty" if dirty else "") if len(sha) == 40 else "unknown"


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


def csv_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    """``data/runs/<profile>/quik_kernels_<cpu|gpu>.csv`` (``root``: a ``data/`` folder; default
    :func:`bitlaws.results.data_dir`)."""
    if root is None:
        from ..verdicts import repo_root

        # bitlaws.results.data_dir's rule, without importing pandas
        root = os.environ.get("BITLAWS_DATA") or repo_root() / "data"
    kind = "gpu" if profile == "gpu" else "cpu"
    return Path(root) / "runs" / profile / f"quik_kernels_{kind}.csv"


def write_csv(rows: Iterable[dict], path: str | os.PathLike) -> None:
    """Write benchmark rows (dicts, or a DataFrame) to `path` atomically, replacing it.

    Columns in the order of ``COLUMNS``; floats with 6 significant digits; NaN as an empty cell.
    """
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes the file private; a committed CSV is world-readable
        with os.fdopen(fd, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="raise", lineterminator="\n")
            writer.writeheader()
            for r in rows:
                writer.writerow({c: _cell(r.get(c)) for c in COLUMNS})
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _cell(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def load_benchmark(profile: str, root: str | os.PathLike | None = None) -> "pd.DataFrame | None":
    """The benchmark CSV of `profile` as a pandas frame, or None if it does not exist."""
    import pandas as pd

    path = csv_path(profile, root)
    return pd.read_csv(path) if path.exists() else None


# Q4's rule, provisional until the first GPU CSV exists: "large layers" are those with
# n_out * k_in >= LARGE_LAYER (Llama-2-70B's q/o, gate/up, down); speed-ups are taken at the
# largest token count measured (2048 in the gpu setting, as QUIK's Fig. 6).
LARGE_LAYER = 8192 * 8192
Q4_REPRODUCED_8BIT = 1.6  # at least this over bf16 at 8 bits counts as "about 2x"
Q4_PARTLY = 1.2


def verdict_q4(gpu: "pd.DataFrame | None", inputs_sha256: str = ""):
    """Verdict on Q4 (QUIK kernels' layer-wise speed-up) from GPU rows of the benchmark.

    Pending when there are no rows timed on a CUDA device. Otherwise, at the largest token count
    and on the large layers: reproduced when the best 8-bit speed-up over bf16 is at least
    ``Q4_REPRODUCED_8BIT`` (the Hopper form of the claim: int8 near 2x, no int4 tensor cores, so
    4 bits is not expected to reach QUIK's 4x); partly when either bit width reaches
    ``Q4_PARTLY``; not reproduced otherwise.

    Returns:
        A :class:`bitlaws.verdicts.Verdict`.
    """
    from ..verdicts import CLAIMS, Verdict, pending_verdict

    rows = None if gpu is None else gpu[(gpu["part"] == "layer") & gpu["device"].astype(str).str.startswith("cuda")]
    if rows is None or rows.empty:
        v = pending_verdict("Q4")
        return Verdict("Q4", "pending", v.paper, "H200: not measured yet",
                       "no benchmark rows from a CUDA device (data/runs/gpu/quik_kernels_gpu.csv does not exist "
                       "yet); the CPU rows time the torch reference path, which the claim is not about",
                       "", inputs_sha256)
    m = int(rows["m_tokens"].max())
    big = rows[(rows["m_tokens"] == m) & (rows["n_out"] * rows["k_in"] >= LARGE_LAYER)]
    if big.empty:
        big = rows[rows["m_tokens"] == m]
    s8 = float(big.loc[big["method"] == "quik_w8a8", "speedup"].max())
    s4 = float(big.loc[big["method"] == "quik_w4a4", "speedup"].max())
    if s8 >= Q4_REPRODUCED_8BIT:
        verdict = "reproduced"
    elif max(s8, s4) >= Q4_PARTLY:
        verdict = "partly"
    else:
        verdict = "not reproduced"
    device = ", ".join(sorted(rows["device"].astype(str).unique()))
    ours = (f"{device}, {m} tokens, large Llama-2 layers: up to {s8:.2f}x over bf16 at W8A8 (no outliers), "
            f"{s4:.2f}x at W4A4 with {int(big['n_outliers'].max())} fp16 outliers")
    reason = ("Triton kernels on Hopper against torch's bf16 matmul; Hopper has int8 but no int4 tensor cores, "
              "so int4 codes are unpacked to int8 in registers; QUIK's figures are CUTLASS on an RTX 3090 against fp16")
    return Verdict("Q4", verdict, CLAIMS["Q4"]["paper"], ours, reason, "gpu", inputs_sha256,
                   {"speedup_w8a8": s8, "speedup_w4a4": s4, "m_tokens": float(m)})

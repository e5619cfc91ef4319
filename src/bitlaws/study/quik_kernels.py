"""The kernels chapter's data and claim Q4: the benchmark CSVs of a profile and their verdict.

The rows are made by ``bitlaws.kernels.benchmark`` (``bench/quik_kernels.py``,
``bench/device_check.py``); here they are found (``csv_path``), read (``load_benchmark``) and
judged (``verdict_q4``: the best layer-wise speed-up over bf16 on a CUDA device).

Public names: ``csv_path``, ``load_benchmark``, ``verdict_q4``, ``LARGE_LAYER``,
``Q4_REPRODUCED_8BIT``, ``Q4_PARTLY``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .claims import CLAIMS, Verdict, inputs_identity, pending_verdict
from .store import data_dir

__all__ = ["csv_path", "load_benchmark", "verdict_q4", "LARGE_LAYER", "Q4_REPRODUCED_8BIT", "Q4_PARTLY"]


def csv_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    """``data/runs/<profile>/quik_kernels_<cpu|gpu>.csv`` (``root``: a ``data/`` folder; default
    :func:`bitlaws.study.store.data_dir`)."""
    root = data_dir() if root is None else root
    kind = "gpu" if profile == "gpu" else "cpu"
    return Path(root) / "runs" / profile / f"quik_kernels_{kind}.csv"


def load_benchmark(profile: str, root: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """The benchmark CSV of `profile` as a pandas frame, or None if it does not exist."""
    path = csv_path(profile, root)
    return pd.read_csv(path) if path.exists() else None


# Q4's rule, provisional until the first GPU CSV exists: "large layers" are those with
# n_out * k_in >= LARGE_LAYER (Llama-2-70B's q/o, gate/up, down); speed-ups are taken at the
# largest token count measured (2048 in the gpu setting, as QUIK's Fig. 6).
LARGE_LAYER = 8192 * 8192
Q4_REPRODUCED_8BIT = 1.6  # at least this over bf16 at 8 bits counts as "about 2x"
Q4_PARTLY = 1.2


def verdict_q4(gpu: pd.DataFrame | None) -> Verdict:
    """Verdict on Q4 (QUIK kernels' layer-wise speed-up) from GPU rows of the benchmark.

    Pending when there are no rows timed on a CUDA device. Otherwise, at the largest token count
    and on the large layers: reproduced when the best 8-bit speed-up over bf16 is at least
    ``Q4_REPRODUCED_8BIT`` (the Hopper form of the claim: int8 near 2x, no int4 tensor cores, so
    4 bits is not expected to reach QUIK's 4x); partly when either bit width reaches
    ``Q4_PARTLY``; not reproduced otherwise.

    Args:
        gpu: the benchmark rows (``load_benchmark("gpu")``), or None.

    Returns:
        A :class:`bitlaws.study.claims.Verdict` whose identity hashes the rows read.
    """
    inputs_sha256 = inputs_identity("Q4", "gpu", frames={} if gpu is None else {"rows": gpu})
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

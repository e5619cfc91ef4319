"""Every verdict of a profile at once: recompute from the committed data, check against the store.

``compute_verdicts`` runs each chapter's verdict functions (P1–P2, P3, P5 and P9, P4 and P10,
P6–P8, Q1–Q3) on ``data/runs/<profile>`` and ``data/fits``, and Q4 on ``data/runs/gpu``'s benchmark
rows where they exist, without writing anything; ``check_verdicts``
sets the result against ``data/verdicts.json`` with ``bitlaws.study.claims.verdict_differences``
(grades and identities exactly, numbers within ``DETAIL_RTOL``), which is what a reader's machine
must reproduce. Nothing here writes: ``python -m bitlaws verdicts`` stores them (``claims.store_verdicts``)
after checking that no table they read is stale (``cascade``). Without GPU benchmark rows Q4 is left as stored (pending).
"""

from __future__ import annotations

import os

from .claims import Verdict, load_verdicts, verdict_differences
from .compute_optimal import optimal_verdicts
from .law_fits import current_fits, law_verdicts
from .low_precision_training import qat_verdicts
from .ptq_degradation import ptq_verdicts
from .quik_accuracy import refresh_quik_verdicts
from .quik_kernels import load_benchmark, load_replicates, verdict_q4

__all__ = ["compute_verdicts", "check_verdicts"]


def compute_verdicts(profile: str = "cpu", refit: bool = True) -> dict[str, Verdict]:
    """Recompute every data-backed verdict of ``profile``; nothing is written.

    Args:
        profile: ``smoke`` or ``cpu`` (``data/runs/<profile>``).
        refit: refit in memory any law fit whose input rows changed (else use the stored fits).

    Returns:
        claim id -> verdict for P1–P10, Q1–Q3 when the QUIK rows exist, Q4 when the GPU benchmark's do.

    Raises:
        FileNotFoundError: no training rows for ``profile``.
    """
    out: dict[str, Verdict] = {}
    out.update(ptq_verdicts(profile))
    df, fits = current_fits(profile, refit=refit)  # the training rows and fits, read once
    out.update(law_verdicts(fits, df, profile))
    out.update(optimal_verdicts(fits, df, profile))
    out.update(qat_verdicts(fits, df, profile))
    try:
        out.update(refresh_quik_verdicts(profile=profile, write=False))
    except FileNotFoundError:
        pass
    gpu = load_benchmark("gpu")  # Q4: the GPU benchmark rows, whatever the profile (none: left as stored)
    if gpu is not None:
        out["Q4"] = verdict_q4(gpu, load_replicates("gpu"))
    return out


def check_verdicts(profile: str = "cpu", path: str | os.PathLike[str] | None = None,
                   verdicts: dict[str, Verdict] | None = None) -> list[str]:
    """Differences between the stored verdicts and those recomputed from the data; empty if none.

    Args:
        profile: the profile to recompute (the store holds the book's, ``cpu``).
        path: the store (default ``data/verdicts.json``).
        verdicts: already recomputed verdicts (default: ``compute_verdicts(profile)``).

    Returns:
        One line per difference (``bitlaws.study.claims.verdict_differences``).
    """
    new = compute_verdicts(profile) if verdicts is None else verdicts
    stored = load_verdicts(path)
    out = []
    for claim_id, verdict in new.items():
        out.extend(verdict_differences(stored[claim_id], verdict))
    return out

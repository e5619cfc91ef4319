"""The seed-noise floor of the run store: how much a measure moves between training seeds.

One function for every chapter: ``noise_floor`` takes the base grid's cells that were trained
with several seeds and returns, per measure, the largest seed standard deviation over them (a
conservative σ of one run). A trend counts only where it exceeds it (DESIGN.md, "Noise floor").
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["noise_floor", "pooled_seed_variance"]


def noise_floor(df: pd.DataFrame, method: str = "rtn") -> dict[str, float]:
    """Seed spread of the measures, the largest over cells with ≥ 2 seeds.

    Returns:
        ``{"loss": σ of the pre-PTQ loss, "delta_<b>": σ of δ_PTQ at P_post = b (each b),
        "loss_post_<b>": σ of the post-PTQ loss at b, "n_cells": cells with seeds}``, in nats.
        NaN entries where no cell has several seeds.
    """
    ok = df[df["status"] == "ok"]
    out: dict[str, float] = {}
    base = ok[ok["ptq_method"] == "none"]
    per_cell = base.groupby(["n_params", "n_tokens"])
    seeded = [k for k, g in per_cell if g["seed"].nunique() >= 2]
    out["n_cells"] = float(len(seeded))
    out["loss"] = max((per_cell.get_group(k)["loss_val"].std() for k in seeded), default=math.nan)
    q = ok[ok["ptq_method"] == method]
    for b in sorted(q["bits_post"].unique()):
        qb = q[q["bits_post"] == b].groupby(["n_params", "n_tokens"])
        out[f"delta_{int(b)}"] = max((qb.get_group(k)["delta_ptq"].std() for k in seeded if k in qb.groups),
                                     default=math.nan)
        out[f"loss_post_{int(b)}"] = max((qb.get_group(k)["loss_val"].std() for k in seeded if k in qb.groups),
                                         default=math.nan)
    return out


def pooled_seed_variance(df: pd.DataFrame) -> tuple[float, int]:
    """The pooled seed variance of the pre-PTQ loss over the cells trained with several seeds.

    Σ_i (k_i − 1)·s_i² / Σ_i (k_i − 1) over cells (N, D) with k_i ≥ 2 seeds: the estimate an F-test
    against the seed noise needs, with its degrees of freedom (``noise_floor`` takes the largest
    cell's σ instead, a conservative single number).

    Returns:
        (variance [nats²], degrees of freedom); (NaN, 0) without seeded cells.
    """
    ok = df[(df["status"] == "ok") & (df["ptq_method"] == "none")]
    ss, dof = 0.0, 0
    for _, g in ok.groupby(["n_params", "n_tokens"]):
        if g["seed"].nunique() >= 2:
            ss += float(((g["loss_val"] - g["loss_val"].mean()) ** 2).sum())
            dof += len(g) - 1
    return (ss / dof if dof else math.nan), dof

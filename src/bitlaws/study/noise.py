"""The seed-noise floor of the run store: how much a measure moves between training seeds.

One function for every chapter: ``noise_floor`` takes the base grid's cells that were trained
with several seeds and returns, per measure, the largest seed standard deviation over them (a
conservative σ of one run). A trend counts only where it exceeds it (book/methods.md, "The noise floor").
``noise_model`` is what the rules read (issue 14): pooled σ with their real degrees of freedom,
δ_PTQ's noise as an absolute plus a relative part, and ``t_quantile`` for thresholds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["noise_floor", "pooled_seed_variance", "seed_block_anova", "NoiseModel", "noise_model", "t_quantile"]


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


def seed_block_anova(hp: pd.DataFrame) -> dict[str, float]:
    """σ_seed: the part of the seed noise that runs of one model size and seed share (the same
    initialisation and data order), and σ_e, the part each run has alone, from high-precision runs.

    At each size with ≥ 2 (N, D) cells trained with the same ≥ 2 seeds, a two-way analysis of
    variance of the loss on D cell × seed (no interaction; the seeds common to those cells): the
    seed mean square MS_s over the residual MS_e gives σ_seed² = (MS_s − MS_e)/C (C cells; 0 if
    negative), and the F-test of the seed effect. Mean squares are pooled over such sizes. The
    95 % interval is the exact one for σ_seed²/σ_e² (F = MS_s/MS_e ~ (1 + C·ρ)·F(S − 1, (C − 1)(S − 1))),
    times MS_e. ``cross_size_corr`` is the mean correlation of seed deviations (a run's loss minus its
    cell's mean) between seeded cells of different sizes, over their common seeds: the part shared
    through the data order alone, which the simulations leave out when it is not positive.

    Args:
        hp: high-precision runs (``n_params``, ``n_tokens``, ``seed``, ``loss_val``), e.g. the Chinchilla
            stage's frame (``qat_design.seed_block_sd`` reads it from training rows).

    Returns:
        ``sd`` (σ_seed [nats]), ``lo``, ``hi`` (its 95 % interval), ``resid_sd`` (σ_e = √MS_e [nats], the
        noise left within a size and seed: what a comparison centred on (N, D, seed) faces), ``f``, ``p``,
        ``dof_seed``, ``dof_resid``, ``n_cells``, ``n_sizes``, ``cross_size_corr``; NaN (``n_sizes`` 0)
        where no size has two seeded cells.
    """
    from scipy import stats

    nan = math.nan
    out = {"sd": nan, "lo": nan, "hi": nan, "resid_sd": nan, "f": nan, "p": nan, "dof_seed": 0.0, "dof_resid": 0.0,
           "n_cells": 0.0, "n_sizes": 0.0, "cross_size_corr": nan}
    if hp.empty:
        return out
    tab = hp.pivot_table(index=["n_params", "n_tokens"], columns="seed", values="loss_val", aggfunc="mean")
    tab = tab[tab.notna().sum(axis=1) >= 2]
    ss_s = ss_e = df_s = df_e = c_w = 0.0
    n_cells = n_sizes = 0
    for _, t in tab.groupby(level="n_params"):
        t = t.dropna(axis=1)
        if t.shape[0] < 2 or t.shape[1] < 2:
            continue
        y = t.to_numpy(float)
        cc, ss = y.shape
        r = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
        ss_s += cc * float(((y.mean(0) - y.mean()) ** 2).sum())
        ss_e += float((r ** 2).sum())
        df_s, df_e = df_s + ss - 1, df_e + (cc - 1) * (ss - 1)
        c_w += cc * (ss - 1)
        n_cells, n_sizes = n_cells + cc, n_sizes + 1
    dev = tab.sub(tab.mean(axis=1), axis=0)
    corr = [dev.iloc[i].corr(dev.iloc[j]) for i in range(len(dev)) for j in range(i + 1, len(dev))
            if dev.index[i][0] != dev.index[j][0] and (dev.iloc[i].notna() & dev.iloc[j].notna()).sum() >= 3]
    out["cross_size_corr"] = float(np.nanmean(corr)) if corr else nan
    if not n_sizes or df_e <= 0:
        return out
    c = c_w / df_s  # cells per seed degree of freedom (C at a single size)
    ms_s, ms_e = ss_s / df_s, ss_e / df_e
    f = ms_s / ms_e
    rho_lo = (f / stats.f.ppf(0.975, df_s, df_e) - 1) / c
    rho_hi = (f / stats.f.ppf(0.025, df_s, df_e) - 1) / c
    return {**out, "sd": math.sqrt(max(0.0, (ms_s - ms_e) / c)), "lo": math.sqrt(max(0.0, rho_lo * ms_e)),
            "hi": math.sqrt(max(0.0, rho_hi * ms_e)), "resid_sd": math.sqrt(ms_e), "f": f,
            "p": float(stats.f.sf(f, df_s, df_e)), "dof_seed": df_s, "dof_resid": df_e, "n_cells": float(n_cells),
            "n_sizes": float(n_sizes)}


# --- The noise model of the rules (issue 14): pooled, with its degrees of freedom ------------------

@dataclass(frozen=True)
class NoiseModel:
    """Seed noise of one PTQ method's measures, pooled over every cell trained with ≥ 2 seeds.

    Attributes:
        loss_sd: σ of one run's pre-PTQ loss [nats], pooled; ``loss_dof`` its degrees of freedom.
        post_sd: σ of one run's post-PTQ loss [nats], pooled over the cells and P_post; ``post_dof``.
        delta_abs: σ₀, the absolute part of δ_PTQ's seed noise [nats].
        delta_rel: σ_rel, its relative part (σ of ln δ where δ ≫ σ₀), dimensionless.
        delta_dof: degrees of freedom of the δ model (groups' k − 1, summed, less its 2 constants).
            The groups of one model at several P_post share its seed, so the rules' t-quantiles use
            ``loss_dof``, the degrees of freedom of the independent runs, not this.
        n_cells: (N, D) cells with ≥ 2 seeds; ``n_groups``: (cell, P_post) groups behind δ's model.

    One run's δ has σ(δ) = sqrt(σ₀² + (σ_rel·δ)²) (``delta_sd``): constant noise near zero,
    proportional where δ is large (the seeds show both: ~5–10 % at INT3, ~1e-4 nats at INT8).
    """
    loss_sd: float
    loss_dof: int
    post_sd: float
    post_dof: int
    delta_abs: float
    delta_rel: float
    delta_dof: int
    n_cells: int
    n_groups: int

    def delta_sd(self, delta) -> np.ndarray:
        """(shape of ``delta``) σ of one run's δ_PTQ [nats] at the true value ``delta``."""
        d = np.maximum(np.asarray(delta, dtype=float), 0.0)
        return np.sqrt(self.delta_abs ** 2 + (self.delta_rel * d) ** 2)


def t_quantile(dof: int | float, level: float = 0.95) -> float:
    """Two-sided Student-t quantile: t_{(1+level)/2, dof} (2.78 at 4 dof, → 1.96 as dof → ∞).

    Returns:
        The quantile; NaN when ``dof`` < 1 (no seeds: no threshold).

    Raises:
        ValueError: if ``level`` is not in (0, 1).
    """
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(stats.t.ppf(0.5 + level / 2, dof)) if dof >= 1 else math.nan


def _pooled(groups) -> tuple[float, int]:
    ss, dof = 0.0, 0
    for y in groups:
        y = np.asarray(y, dtype=float)
        if len(y) >= 2:
            ss += float(((y - y.mean()) ** 2).sum())
            dof += len(y) - 1
    return (math.sqrt(ss / dof) if dof else math.nan), dof


def _delta_noise(groups: list[np.ndarray]) -> tuple[float, float, int]:
    """Maximum likelihood (σ₀, σ_rel) from groups of seeds: (k−1)s²/v ~ χ²(k−1), v = σ₀² + σ_rel²·δ̄²."""
    from scipy.optimize import minimize

    k1 = np.array([len(g) - 1 for g in groups], dtype=float)
    s2 = np.array([np.var(g, ddof=1) for g in groups])
    m2 = np.array([np.mean(g) ** 2 for g in groups])
    floor = max(float(np.min(s2[s2 > 0])) if np.any(s2 > 0) else 1e-12, 1e-16)

    def nll(theta):
        v = np.exp(2 * theta[0]) + np.exp(2 * theta[1]) * m2 + 1e-3 * floor
        return float(np.sum(k1 * (np.log(v) + s2 / v)))

    start = np.array([0.5 * math.log(floor * 4), math.log(0.1)])
    res = minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-10, "maxiter": 4000})
    return float(np.exp(res.x[0])), float(np.exp(res.x[1])), int(k1.sum()) - 2


def noise_model(df: pd.DataFrame, method: str = "rtn", bits: tuple[int, ...] | None = None) -> NoiseModel:
    """The seed-noise model of one PTQ method from every cell with ≥ 2 seeds (any number of them).

    Cells are (N, D) of high-precision training; rows added later with more seeds or cells are
    picked up as they are. The pre- and post-PTQ loss σ are pooled, Σ(k_i − 1)s_i² / Σ(k_i − 1).
    δ's two parts are a maximum-likelihood fit over every (cell, P_post) group (``_delta_noise``).

    Args:
        df: observation rows (``status``, ``ptq_method``, ``n_params``, ``n_tokens``, ``seed``,
            ``bits_post``, ``loss_val``, ``delta_ptq``); only high-precision training rows are used.
        method: ``ptq_method`` of the δ rows.
        bits: the P_post whose groups enter (default: all).

    Returns:
        A ``NoiseModel``; NaN σ and 0 dof where no cell has several seeds.
    """
    ok = df[df["status"] == "ok"]
    for c in ("bits_w", "bits_a", "bits_kv"):
        if c in ok:
            ok = ok[pd.to_numeric(ok[c], errors="coerce").fillna(16) >= 16]
    base = ok[ok["ptq_method"] == "none"]
    by_cell = base.groupby(["n_params", "n_tokens"])
    cells = [k for k, g in by_cell if g["seed"].nunique() >= 2]
    loss_sd, loss_dof = _pooled(by_cell.get_group(k)["loss_val"] for k in cells)
    q = ok[ok["ptq_method"] == method]
    if bits is not None:
        q = q[q["bits_post"].isin(bits)]
    q = q[pd.MultiIndex.from_frame(q[["n_params", "n_tokens"]]).isin(cells)] if len(q) else q
    groups = [g for _, g in q.groupby(["n_params", "n_tokens", "bits_post"]) if len(g) >= 2]
    post_sd, post_dof = _pooled(g["loss_val"] for g in groups)
    if len(groups) >= 2:
        s0, sr, d_dof = _delta_noise([g["delta_ptq"].to_numpy(float) for g in groups])
    else:
        s0, sr, d_dof = math.nan, math.nan, 0
    return NoiseModel(loss_sd, loss_dof, post_sd, post_dof, s0, sr, max(d_dof, 0), len(cells), len(groups))

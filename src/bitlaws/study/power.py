"""The statistics the rules read, and their power on our design by simulation (issue 14).

For each claim: a function that computes the rule's statistics from the rows, and a ``*_power``
that draws datasets on our exact design (the same N, D, P and seed counts) from the paper's
constants and from a null with the effect removed, adds our measured seed noise
(``bitlaws.study.noise.noise_model``) and grades each with the same rule of
``bitlaws.study.claims``. Power is the share of paper-constant datasets graded *reproduced*;
the false-positive rate the share of null datasets graded so. Simulations are seeded.

"Paper constants" are the paper's exponents and precision constants; the one scale constant that
does not carry across tokenizers (C_T of Eq. 2) is set so the simulated δ_PTQ has the geometric
mean of ours on the same cells. Each function's docstring says which constants it draws from.
P4's simulation runs on the N_eff fits' own rows (``p4_design``: every row, none chosen by a
hypothesis); where a hypothesis's law is undefined it generates from ``extended_factor``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..laws import forms
from .claims import mc_interval, rule_p1, rule_p2, rule_p9
from .noise import NoiseModel, t_quantile

__all__ = [
    "N_SIM",
    "p9_cells",
    "p9_statistics",
    "p9_power",
    "p1_statistics",
    "p1_power",
    "p2_statistics",
    "p2_power",
    "p5_design",
    "p5_statistics",
    "p5_power",
    "p5_covariance",
    "P4_HYPOTHESES",
    "P4_NULLS",
    "P4_HYPOTHESIS_TEXT",
    "P4_BITS",
    "p4_truth",
    "p4_facts",
    "NEFF_F_FLOOR",
    "extended_factor",
    "paper_undefined",
    "p4_design",
    "p4_power",
    "mc_interval",
]

# Simulated datasets per hypothesis in the verdicts (the tests use fewer).
N_SIM = 200
# P1's log-linear stand-in for γ_D's interval (simulations) reads cells this many noise floors up.
WELL_RESOLVED = 5.0
_HIGH = forms.HIGH_PRECISION_BITS


def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").fillna(_HIGH)


# --- P9: robustness of low-precision-trained models to PTQ ----------------------------------------

def p9_cells(unified: pd.DataFrame, ptq: pd.DataFrame) -> pd.DataFrame:
    """The QAT→PTQ cells of P9: each (N, D, P_post, P_w) with P_w > P_post (only the weights trained
    in low precision) beside the high-precision model of the same (N, D, P_post).

    Args:
        unified: the ``unified`` stage's rows (``bitlaws.study.law_fits.stage_frames``).
        ptq: the ``ptq`` stage's rows (high-precision models, the same PTQ method).

    Returns:
        Columns ``n_params, n_tokens, bits_post, bits_w, delta_low, k_low`` (mean δ_PTQ of the
        low-precision-trained model and its seeds), ``delta_hp, k_hp`` (of the high-precision
        model), ``closest`` (True for the P_w nearest P_post in its (N, D, P_post)).
    """
    cols = ["n_params", "n_tokens", "bits_post", "bits_w", "delta_low", "k_low", "delta_hp", "k_hp", "closest"]
    if unified.empty or ptq.empty:
        return pd.DataFrame(columns=cols)
    u = unified.assign(bits_w=_num(unified["bits_w"]), bits_a=_num(unified.get("bits_a", pd.Series(_HIGH, unified.index))),
                       bits_kv=_num(unified.get("bits_kv", pd.Series(_HIGH, unified.index))))
    u = u[(u["bits_a"] >= _HIGH) & (u["bits_kv"] >= _HIGH) & (u["bits_w"] > u["bits_post"])]
    key = ["n_params", "n_tokens", "bits_post"]
    low = u.groupby(key + ["bits_w"])["delta_ptq"].agg(delta_low="mean", k_low="count").reset_index()
    hp = ptq.groupby(key)["delta_ptq"].agg(delta_hp="mean", k_hp="count").reset_index()
    out = low.merge(hp, on=key, how="inner")
    out["closest"] = out["bits_w"] == out.groupby(key)["bits_w"].transform("min")
    return out[cols].reset_index(drop=True)


def _bracket(gap: np.ndarray, c_w: float) -> np.ndarray:
    return 1.0 - np.exp(-c_w * gap)


def _robustness_f(delta_low: np.ndarray, base: np.ndarray, gap: np.ndarray, noise: NoiseModel) -> dict[str, float]:
    """Extra-sum-of-squares F of Eq. 9's bracket [1 − e^(−C_w·(P_w − P_post))] over Eq. 2 with N_eff
    (``base``, the prediction without it), weighted by the seed noise of δ at the base prediction."""
    from scipy import optimize, stats

    w = 1.0 / np.maximum(noise.delta_sd(base), 1e-12) ** 2
    ss0 = float(np.sum(w * (delta_low - base) ** 2))

    def ss(log_c):
        return float(np.sum(w * (delta_low - base * _bracket(gap, math.exp(log_c))) ** 2))

    res = optimize.minimize_scalar(ss, bounds=(-6.0, 6.0), method="bounded", options={"xatol": 1e-4})
    ss1 = min(float(res.fun), ss0)
    n = len(delta_low)
    mean_w = float(np.sum(w * delta_low) / np.sum(w))
    sst = float(np.sum(w * (delta_low - mean_w) ** 2))
    f = (ss0 - ss1) / (ss1 / (n - 1)) if n > 1 and ss1 > 0 else math.nan
    return {"c_w": math.exp(float(res.x)), "f_robustness": f,
            "p_robustness": float(stats.f.sf(f, 1, n - 1)) if math.isfinite(f) else math.nan,
            "r2_without": 1.0 - ss0 / sst if sst > 0 else math.nan, "r2_with": 1.0 - ss1 / sst if sst > 0 else math.nan}


def _eq2_neff(cells: pd.DataFrame, consts: Mapping[str, float]) -> np.ndarray:
    neff = forms.n_eff(cells["n_params"].to_numpy(float), cells["bits_w"].to_numpy(float), _HIGH, _HIGH,
                       {"gamma_w": consts["gamma_w"], "n_w": consts["n_w"]})
    with np.errstate(invalid="ignore"):
        return forms.delta_ptq(neff, cells["n_tokens"].to_numpy(float), cells["bits_post"].to_numpy(float), consts)


def p9_statistics(cells: pd.DataFrame, consts: Mapping[str, float], noise: NoiseModel) -> dict[str, float]:
    """The statistics of P9's rule (``bitlaws.study.claims.rule_p9``) on ``p9_cells``.

    (a) The sign test: among the cells whose P_w is nearest P_post ("as P_train approaches P_post")
    and whose high-precision δ is measurable (δ_hp > t_{0.975, ν}·σ₀/√k_hp, ν the seed degrees of
    freedom), how many have δ_low < δ_hp. (b) The robustness term: on every cell, Eq. 2 with N_eff
    and no bracket (from ``consts``: C_T, γ_D, γ_N, γ_post, γ_w, n_w, held fixed) against Eq. 9's
    bracket with C_w fitted (``_robustness_f``), and the R² of δ each gives (weighted by the noise).

    Returns:
        ``n_measurable``, ``n_less``, ``p_sign``, ``c_w``, ``f_robustness``, ``p_robustness``,
        ``r2_without``, ``r2_with``, ``r2_gain``, ``n_cells``, ``threshold_t``, ``grade``.
    """
    t = t_quantile(noise.loss_dof)
    out = {"n_cells": float(len(cells)), "threshold_t": t}
    if cells.empty or not math.isfinite(t):
        return {**out, "n_measurable": 0.0, "n_less": 0.0, "p_sign": math.nan, "c_w": math.nan,
                "f_robustness": math.nan, "p_robustness": math.nan, "r2_without": math.nan,
                "r2_with": math.nan, "r2_gain": math.nan, "grade": "not reproduced"}
    meas = cells["closest"] & (cells["delta_hp"] > t * noise.delta_abs / np.sqrt(cells["k_hp"]))
    n_meas = int(meas.sum())
    n_less = int((cells.loc[meas, "delta_low"] < cells.loc[meas, "delta_hp"]).sum())
    from .claims import sign_test_p

    base = _eq2_neff(cells, consts)
    gap = (cells["bits_w"] - cells["bits_post"]).to_numpy(float)
    rob = _robustness_f(cells["delta_low"].to_numpy(float), base, gap, noise)
    return {**out, "n_measurable": float(n_meas), "n_less": float(n_less), "p_sign": sign_test_p(n_less, n_meas),
            **rob, "r2_gain": rob["r2_with"] - rob["r2_without"],
            "grade": rule_p9(n_less, n_meas, rob["p_robustness"])}


def _calibrated_c_t(cells: pd.DataFrame, consts: Mapping[str, float], observed: np.ndarray) -> float:
    """C_T that gives Eq. 2 with ``consts``' exponents the geometric mean of ``observed`` (> 0) on ``cells``."""
    pos = observed > 0
    shape = forms.delta_ptq(cells["n_params"].to_numpy(float), cells["n_tokens"].to_numpy(float),
                            cells["bits_post"].to_numpy(float), {**consts, "C_T": 1.0})
    return float(np.exp(np.mean(np.log(observed[pos]) - np.log(shape[pos])))) if pos.any() else math.nan


def p9_power(cells: pd.DataFrame, scale: Mapping[str, float], noise: NoiseModel, n_sim: int = N_SIM,
             seed: int = 0, c_w: float = 1.0) -> dict[str, float]:
    """Power and false-positive rate of P9's rule on the design of ``cells``, by simulation.

    Paper data: δ_hp from Eq. 2 with the paper's γ_D, γ_N, γ_post (C_T calibrated to our high-precision
    δ, ``_calibrated_c_t``); δ_low from Eq. 9 with the paper's γ_w, n_w (Table 2) and ``c_w`` (default
    1: the paper prints no C_w; Eq. 10 is its C_w = 1 case; our fitted C_w gives the power if that
    bracket were true). Null: δ_low from Eq. 2 with the same N_eff and
    no robustness bracket. Each cell's mean gets the seed noise of ``noise`` over its seed count;
    the rule reads the generating constants as its fixed upstream stage. ``scale`` is unused except
    as a fallback C_T where no δ_hp is positive.

    Returns:
        ``power`` (share graded reproduced, paper data), ``power_partly`` (partly or better),
        ``false_positive`` (reproduced, null), ``false_partly``, ``n_sim``.
    """
    p = forms.PAPER_CONSTANTS
    consts = {k: p[k] for k in ("gamma_D", "gamma_N", "gamma_post", "gamma_w", "n_w")}
    c_t = _calibrated_c_t(cells, consts, cells["delta_hp"].to_numpy(float))
    consts["C_T"] = c_t if math.isfinite(c_t) else scale["C_T"]
    hp_true = forms.delta_ptq(cells["n_params"].to_numpy(float), cells["n_tokens"].to_numpy(float),
                              cells["bits_post"].to_numpy(float), consts)
    base = _eq2_neff(cells, consts)
    gap = (cells["bits_w"] - cells["bits_post"]).to_numpy(float)
    rng = np.random.default_rng(seed)
    out = {"n_sim": float(n_sim)}
    k_hp, k_low = cells["k_hp"].to_numpy(float), cells["k_low"].to_numpy(float)
    if not (math.isfinite(c_w) and c_w > 0):
        raise ValueError(f"p9_power: c_w must be a finite positive number; got {c_w!r}")
    for label, low_true in (("power", base * _bracket(gap, c_w)), ("false", base)):
        grades = []
        for _ in range(n_sim):
            sim = cells.copy()
            sim["delta_hp"] = hp_true + noise.delta_sd(hp_true) / np.sqrt(k_hp) * rng.standard_normal(len(sim))
            sim["delta_low"] = low_true + noise.delta_sd(low_true) / np.sqrt(k_low) * rng.standard_normal(len(sim))
            grades.append(p9_statistics(sim, consts, noise)["grade"])
        g = np.array(grades)
        out["power" if label == "power" else "false_positive"] = float(np.mean(g == "reproduced"))
        out[f"{label}_partly"] = float(np.mean(g != "not reproduced"))
    return out


# --- P1: the trends of δ_PTQ in D, N and P_post -------------------------------------------------

def _p1_design(tab: pd.DataFrame, bits: tuple[int, ...]) -> dict:
    """Row indices of each series of ``tab`` (sorted along its axis), the regression's design, once."""
    tab = tab.reset_index(drop=True)
    sub = tab["bits_post"].isin(bits).to_numpy()

    def groups(by, along, rows):
        f = tab[rows]
        return [g.sort_values(along).index.to_numpy() for _, g in f.groupby(by)]

    x = np.column_stack([np.ones(len(tab)), np.log(tab["n_tokens"].to_numpy(float)),
                         np.log(tab["n_params"].to_numpy(float)), tab["bits_post"].to_numpy(float)])
    return {"with_d": (groups(["n_params", "bits_post"], "n_tokens", sub), +1),
            "with_n": (groups(["n_tokens", "bits_post"], "n_params", sub), -1),
            "with_bits": (groups(["n_params", "n_tokens"], "bits_post", np.ones(len(tab), bool)), -1),
            "x": x, "sub": sub, "k": tab["n_seeds"].to_numpy(float)}


def _p1_eval(delta: np.ndarray, design: dict, noise: NoiseModel, t: float) -> tuple[dict, np.ndarray]:
    """The three series counts on one vector of cell means ``delta`` (the rows of ``_p1_design``)."""
    k = design["k"]
    resolved = delta > t * noise.delta_abs / np.sqrt(k) if math.isfinite(t) else delta > 0
    sd = noise.delta_sd(delta)
    out = {}
    for name in ("with_d", "with_n", "with_bits"):
        groups, sign = design[name]
        n = agree = against = unresolved = 0
        for idx in groups:
            idx = idx[resolved[idx]]
            if len(idx) < 2:
                unresolved += 1
                continue
            i0, i1 = idx[0], idx[-1]
            change = sign * (delta[i1] - delta[i0])
            thr = t * math.sqrt(sd[i0] ** 2 / k[i0] + sd[i1] ** 2 / k[i1])
            if abs(change) <= thr:  # a change within the noise: the series is unresolved, not a failure
                unresolved += 1
                continue
            n += 1
            agree += bool(change > 0)
            against += bool(change < 0)
        out[name] = {"resolved": n, "agree": agree, "against": against, "unresolved": unresolved}
    return out, resolved


def _loglinear_gamma_d(x: np.ndarray, delta: np.ndarray) -> tuple[float, float, float]:
    """γ_D of ln δ = c + γ_D·ln D − γ_N·ln N − P/γ_post by least squares (rows of ``x``), with its 95 % t-interval."""
    from scipy import stats

    if len(delta) < 6 or np.linalg.matrix_rank(x) < x.shape[1]:
        return math.nan, math.nan, math.nan
    y = np.log(delta)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(y) - x.shape[1]
    s2 = float(((y - x @ coef) ** 2).sum()) / dof
    se = math.sqrt(s2 * np.linalg.inv(x.T @ x)[1, 1])
    q = float(stats.t.ppf(0.975, dof))
    return float(coef[1]), float(coef[1] - q * se), float(coef[1] + q * se)


def p1_statistics(tab: pd.DataFrame, noise: NoiseModel, gamma_d_ci: tuple[float, float] | None = None,
                  bits: tuple[int, ...] = (3, 4, 5)) -> dict:
    """The statistics of P1's rule (``bitlaws.study.claims.rule_p1``) on one method's ``ptq_table``.

    A cell is resolved when its mean δ clears t_{0.975, ν}·σ₀/√k (ν the seed degrees of freedom);
    only resolved cells enter the series. Directions: δ rises from the first to the last resolved D
    at fixed (N, P_post), falls from the first to the last resolved N at fixed (D, P_post) (both at
    P_post in ``bits``), is larger at the lowest than at the highest resolved P_post at fixed (N, D)
    — each beyond t·σ of the difference (``NoiseModel.delta_sd``). The paper's γ_D = 0.51 is checked
    against ``gamma_d_ci`` (the Eq. 2 fit's bootstrap interval), or, without one, against the 95 %
    t-interval of a log-linear regression on the resolved cells (what the simulations use).

    Returns:
        ``with_d``, ``with_n``, ``with_bits`` (dicts: ``resolved, agree, against, unresolved``),
        ``fracs`` (agree / resolved per direction, NaN with none resolved), ``gamma_d``,
        ``gamma_d_lo``, ``gamma_d_hi``, ``ci_source``, ``paper_inside``, ``grade``.
    """
    return _p1_stats(tab["delta_ptq"].to_numpy(float), _p1_design(tab, bits), noise, gamma_d_ci)


def _p1_stats(delta: np.ndarray, design: dict, noise: NoiseModel, gamma_d_ci=None) -> dict:
    t = t_quantile(noise.loss_dof)
    out, resolved = _p1_eval(delta, design, noise, t)
    fracs = {k: (v["agree"] / v["resolved"] if v["resolved"] else math.nan) for k, v in out.items()}
    counts = {k: v["resolved"] for k, v in out.items()}
    # the regression reads cells well above the floor, where selecting on δ does not bias the slope
    use = (delta > WELL_RESOLVED * t * noise.delta_abs / np.sqrt(design["k"])) & design["sub"]
    g, lo, hi = _loglinear_gamma_d(design["x"][use], delta[use])
    source = "log-linear regression on the resolved cells (t-interval)"
    if gamma_d_ci is not None and all(math.isfinite(v) for v in gamma_d_ci):
        lo, hi = gamma_d_ci
        source = "the Eq. 2 fit's bootstrap over training runs"
    paper = forms.PAPER_CONSTANTS["gamma_D"]
    inside = bool(math.isfinite(lo) and lo <= paper <= hi)
    return {**out, "fracs": fracs, "gamma_d": g, "gamma_d_lo": lo, "gamma_d_hi": hi, "ci_source": source,
            "paper_inside": inside, "grade": rule_p1(fracs, counts, inside), "threshold_t": t}


def p1_power(tab: pd.DataFrame, noise: NoiseModel, n_sim: int = N_SIM, seed: int = 0,
             bits: tuple[int, ...] = (3, 4, 5)) -> dict[str, float]:
    """Power and false-positive rate of P1's rule on the design of ``tab`` (its N, D, P_post, seeds).

    Paper data: δ from Eq. 2 with the paper's γ_D, γ_N, γ_post, C_T calibrated to our δ on the same
    cells. Null: γ_D = γ_N = 0 (δ independent of D and N; the P_post trend kept, recalibrated). Seed
    noise ``noise`` over each cell's seeds; γ_D's interval from the log-linear regression (a
    bootstrap inside each simulated dataset would cost 200× more).

    Returns:
        ``power``, ``power_partly``, ``false_positive``, ``false_partly``, ``n_sim``.
    """
    p = forms.PAPER_CONSTANTS
    paper = {k: p[k] for k in ("gamma_D", "gamma_N", "gamma_post")}
    null = {**paper, "gamma_D": 0.0, "gamma_N": 0.0}
    observed = tab["delta_ptq"].to_numpy(float)
    n, d, b = (tab[c].to_numpy(float) for c in ("n_params", "n_tokens", "bits_post"))
    k = tab["n_seeds"].to_numpy(float)
    design = _p1_design(tab, bits)
    rng = np.random.default_rng(seed)
    out = {"n_sim": float(n_sim)}
    for label, consts in (("power", paper), ("false", null)):
        consts = {**consts, "C_T": _calibrated_c_t(tab, consts, observed)}
        true = forms.delta_ptq(n, d, b, consts)
        sd = noise.delta_sd(true) / np.sqrt(k)
        grades = [_p1_stats(true + sd * rng.standard_normal(len(tab)), design, noise)["grade"] for _ in range(n_sim)]
        g = np.array(grades)
        out["power" if label == "power" else "false_positive"] = float(np.mean(g == "reproduced"))
        out[f"{label}_partly"] = float(np.mean(g != "not reproduced"))
    return out


# --- P2: the post-PTQ loss turns upward past a critical D ---------------------------------------

def _p2_design(tab: pd.DataFrame) -> dict:
    tab = tab.reset_index(drop=True)
    groups = [(int(n), int(b), g.sort_values("n_tokens").index.to_numpy()) for (n, b), g in
              tab.groupby(["n_params", "bits_post"])]
    return {"groups": groups, "k": tab["n_seeds"].to_numpy(float), "n_min": int(tab["n_params"].min()),
            "d": tab["n_tokens"].to_numpy(float)}


def _p2_stats(loss_post: np.ndarray, design: dict, noise: NoiseModel) -> dict:
    t = t_quantile(noise.loss_dof)
    k = design["k"]
    series = []
    for n, b, idx in design["groups"]:
        y = loss_post[idx]
        i = int(np.argmin(y))
        last = len(idx) - 1
        rise = float(y[last] - y[i])
        thr = t * noise.post_sd * math.sqrt(1 / k[idx[i]] + 1 / k[idx[last]]) if math.isfinite(t) else math.inf
        series.append({"n_params": n, "bits_post": b, "d_best": float(design["d"][idx[i]]),
                       "d_max": float(design["d"][idx[last]]), "rise": rise, "threshold": thr,
                       "k_best": float(k[idx[i]]), "k_max": float(k[idx[last]]),
                       "rising": bool(i < last and rise > thr)})
    rising = [s for s in series if s["rising"]]
    small = [s for s in rising if s["n_params"] == design["n_min"]]
    return {"series": series, "n_series": len(series), "n_rising": len(rising), "n_rising_smallest": len(small),
            "threshold_t": t, "grade": rule_p2(len(small), len(rising))}


def p2_statistics(tab: pd.DataFrame, noise: NoiseModel) -> dict:
    """The statistics of P2's rule (``bitlaws.study.claims.rule_p2``) on one method's ``ptq_table``.

    Per (N, P_post) series: the D of its lowest mean post-PTQ loss, the rise from there to the
    largest D, and the threshold t_{0.975, ν}·σ_post·sqrt(1/k_best + 1/k_max) (pooled seed σ of the
    post-PTQ loss, ν the seed degrees of freedom, k the seeds at each end point).

    Returns:
        ``series`` (a list of dicts: ``n_params, bits_post, d_best, d_max, rise, threshold, k_best,
        k_max, rising``), ``n_series``, ``n_rising``, ``n_rising_smallest``, ``threshold_t``, ``grade``.
    """
    return _p2_stats(tab["loss_post"].to_numpy(float), _p2_design(tab), noise)


def p2_power(tab: pd.DataFrame, chinchilla: Mapping[str, float], noise: NoiseModel, n_sim: int = N_SIM,
             seed: int = 0, effect: Mapping[str, float] | None = None) -> dict[str, float]:
    """Power and false-positive rate of P2's rule on the design of ``tab`` (its N, D, P_post, seeds).

    Paper data: the post-PTQ loss = our Chinchilla law (``chinchilla``: A, B, E, α, β fitted on the
    same models) + Eq. 2 with the paper's γ_D, γ_N, γ_post (C_T calibrated to our δ). Null: γ_D = 0
    (δ does not grow with D, so the loss never turns up). Each point gets the pooled seed σ of the
    post-PTQ loss over its seed count. ``effect`` (C_T, γ_D, γ_N, γ_post, e.g. our own Eq. 2 fit)
    replaces the paper's Eq. 2 in the paper data: the power if that law were true.

    Returns:
        ``power``, ``power_partly``, ``false_positive``, ``false_partly``, ``n_sim``; NaN without a
        finite Chinchilla fit.
    """
    out = {"n_sim": float(n_sim)}
    if not all(math.isfinite(float(chinchilla.get(k, math.nan))) for k in ("A", "B", "E", "alpha")):
        return {**out, "power": math.nan, "power_partly": math.nan, "false_positive": math.nan,
                "false_partly": math.nan}
    p = forms.PAPER_CONSTANTS
    paper = {k: p[k] for k in ("gamma_D", "gamma_N", "gamma_post")}
    n, d, b = (tab[c].to_numpy(float) for c in ("n_params", "n_tokens", "bits_post"))
    base = forms.chinchilla_loss(n, d, chinchilla)
    design = _p2_design(tab)
    sd = noise.post_sd / np.sqrt(design["k"])
    rng = np.random.default_rng(seed)
    if effect is not None:
        paper = {k: float(effect[k]) for k in ("C_T", "gamma_D", "gamma_N", "gamma_post")}
    for label, consts in (("power", paper), ("false", {**paper, "gamma_D": 0.0})):
        if effect is None or label == "false":
            consts = {**consts, "C_T": _calibrated_c_t(tab, consts, tab["delta_ptq"].to_numpy(float))}
        true = base + forms.delta_ptq(n, d, b, consts)
        g = np.array([_p2_stats(true + sd * rng.standard_normal(len(tab)), design, noise)["grade"]
                      for _ in range(n_sim)])
        out["power" if label == "power" else "false_positive"] = float(np.mean(g == "reproduced"))
        out[f"{label}_partly"] = float(np.mean(g != "not reproduced"))
    return out


# --- P5: independent effects that multiply ------------------------------------------------------
_PARTS = ("w", "a", "kv")


def p5_design(df: pd.DataFrame) -> pd.DataFrame:
    """Each mixed-precision run (≥ 2 parts below 16 bits) beside the measured marginal runs of its
    parts (one part at that width, the same N and D) and the high-precision model of its (N, D).

    Args:
        df: training rows (``ptq_method`` ``none``, status ok, bit columns ``bits_w/a/kv``).

    Returns:
        One row per mixed run with every marginal present: ``n_params, n_tokens, bits_w, bits_a,
        bits_kv, loss_mix``, ``loss_hp`` and ``k_hp`` (mean over the high-precision seeds),
        ``loss_w, loss_a, loss_kv`` (the marginal's loss averaged over its seeds, or ``loss_hp`` for
        an unquantized part), ``k_w, k_a, k_kv`` (the seeds in that mean; 0 for an unquantized part),
        ``n_low`` (parts quantized). Mixed runs of one (N, D) share its marginal runs and its
        high-precision mean, so their residuals are correlated (``p5_covariance``).
    """
    ok = df[(df["status"] == "ok") & (df["ptq_method"] == "none")]
    ok = ok.assign(**{f"bits_{p}": _num(ok[f"bits_{p}"]) for p in _PARTS})
    low = sum((ok[f"bits_{p}"] < _HIGH).astype(int) for p in _PARTS)
    hp = ok[low == 0].groupby(["n_params", "n_tokens"])["loss_val"].agg(loss_hp="mean", k_hp="count")
    marg = {p: ok[(low == 1) & (ok[f"bits_{p}"] < _HIGH)].groupby(["n_params", "n_tokens", f"bits_{p}"])["loss_val"]
            .agg(["mean", "count"]) for p in _PARTS}
    rows = []
    for r in ok[low >= 2].itertuples():
        key = (r.n_params, r.n_tokens)
        if key not in hp.index:
            continue
        row = {"n_params": r.n_params, "n_tokens": r.n_tokens, "loss_mix": r.loss_val,
               "loss_hp": hp.loc[key, "loss_hp"], "k_hp": float(hp.loc[key, "k_hp"])}
        for p in _PARTS:
            b = getattr(r, f"bits_{p}")
            row[f"bits_{p}"] = b
            if b >= _HIGH:
                row[f"loss_{p}"], row[f"k_{p}"] = row["loss_hp"], 0.0
            elif (*key, b) in marg[p].index:
                row[f"loss_{p}"] = float(marg[p].loc[(*key, b), "mean"])
                row[f"k_{p}"] = float(marg[p].loc[(*key, b), "count"])
            else:
                break
        else:
            row["n_low"] = float(sum(row[f"bits_{p}"] < _HIGH for p in _PARTS))
            rows.append(row)
    return pd.DataFrame(rows)


def _p5_predictions(d: pd.DataFrame, chinchilla: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-sample predictions of the mixed runs from the measured marginals (nothing fitted on them):
    additive L_hp + Σ ΔL_x, and the product of marginals: with T = A·N^(−α) the law's N term, each
    marginal gives f_x^(−α) = 1 + ΔL_x/T, and N_eff = N·Π f_x gives L_hp + T·(Π(1 + ΔL_x/T) − 1)."""
    hp = d["loss_hp"].to_numpy(float)
    dl = np.column_stack([d[f"loss_{p}"].to_numpy(float) - hp for p in _PARTS])
    term = float(chinchilla["A"]) * d["n_params"].to_numpy(float) ** -float(chinchilla["alpha"])
    add = hp + dl.sum(axis=1)
    mult = hp + term * (np.prod(1.0 + dl / term[:, None], axis=1) - 1.0)
    return add, mult


def _p5_sources(d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The independent noise sources behind ``p5_design``'s rows: each mixed run, each marginal run
    mean (one per (N, D, part, P), shared by every mixed run at that width) and each (N, D)'s
    high-precision mean. Returns ``(marg_index, hp_index, marg_var, hp_var)``: per row and part the
    column of its marginal source (−1 for an unquantized part), per row its high-precision source,
    and each source's variance in units of σ² (1/k for a mean of k seeds)."""
    cells = list(zip(d["n_params"].to_numpy(float), d["n_tokens"].to_numpy(float)))
    hp_keys = list(dict.fromkeys(cells))
    hp_index = np.array([hp_keys.index(c) for c in cells])
    k_hp = d["k_hp"].to_numpy(float)
    hp_var = np.array([1.0 / k_hp[hp_index == j][0] for j in range(len(hp_keys))])
    marg_keys: list = []
    marg_index = np.full((len(d), len(_PARTS)), -1)
    marg_var: list[float] = []
    for j, x in enumerate(_PARTS):
        bits = d[f"bits_{x}"].to_numpy(float)
        k = d[f"k_{x}"].to_numpy(float) if f"k_{x}" in d else np.ones(len(d))
        for i, (c, b) in enumerate(zip(cells, bits)):
            if b >= _HIGH:
                continue
            key = (*c, x, b)
            if key not in marg_keys:
                marg_keys.append(key)
                marg_var.append(1.0 / max(k[i], 1.0))
            marg_index[i, j] = marg_keys.index(key)
    return marg_index, hp_index, np.array(marg_var), hp_var


def p5_covariance(d: pd.DataFrame, weights: np.ndarray | None = None) -> np.ndarray:
    """Covariance of the residuals of ``p5_design``'s mixed runs, in units of σ² (the seed variance of
    one run's loss), from the runs they share.

    A residual y − ŷ with ŷ = L_hp + Σ_x g_x·ΔL_x (``weights`` g, one per row and part; the additive
    prediction has every g_x = 1) carries the mixed run's own noise, −g_x times its marginal x's mean
    noise and −(1 − Σ_x g_x) times its (N, D)'s high-precision mean noise (linear in the noise; for
    the product of marginals g_x is its derivative, ``_p5_weights``). So
    V_ij = δ_ij + Σ_x [i, j share marginal x] g_ix·g_jx/k_x + [same (N, D)] (1 − G_i)(1 − G_j)/k_hp.

    Args:
        d: ``p5_design`` rows (``k_x`` columns absent: one seed per marginal).
        weights: (n, 3) array of g_x for the parts w, a, kv; None for the additive prediction.

    Returns:
        (n, n) float64 array, symmetric positive definite.
    """
    marg_index, hp_index, marg_var, hp_var = _p5_sources(d)
    n = len(d)
    low = marg_index >= 0
    g = np.where(low, 1.0 if weights is None else np.asarray(weights, float), 0.0)
    load = np.zeros((n, n + len(marg_var) + len(hp_var)))
    load[np.arange(n), np.arange(n)] = 1.0
    for j in range(len(_PARTS)):
        rows = np.flatnonzero(low[:, j])
        load[rows, n + marg_index[rows, j]] = -g[rows, j]
    load[np.arange(n), n + len(marg_var) + hp_index] = g.sum(axis=1) - 1.0
    var = np.concatenate([np.ones(n), marg_var, hp_var])
    return (load * var) @ load.T


def _p5_weights(d: pd.DataFrame, chinchilla: Mapping[str, float]) -> np.ndarray:
    """g_x = ∂ŷ/∂L_x of the product of marginals (``_p5_predictions``): Π over the other quantized
    parts y of (1 + ΔL_y/T), at the measured marginals."""
    hp = d["loss_hp"].to_numpy(float)
    term = float(chinchilla["A"]) * d["n_params"].to_numpy(float) ** -float(chinchilla["alpha"])
    fac = np.column_stack([np.where(d[f"bits_{x}"].to_numpy(float) < _HIGH,
                                    1.0 + (d[f"loss_{x}"].to_numpy(float) - hp) / term, 1.0) for x in _PARTS])
    return np.column_stack([np.prod(np.delete(fac, j, axis=1), axis=1) for j in range(len(_PARTS))])


def _quad(r: np.ndarray, v: np.ndarray) -> float:
    return float(r @ np.linalg.solve(v, r))


def _p5_stats(d: pd.DataFrame, add: np.ndarray, mult: np.ndarray, noise: NoiseModel,
              v_add: np.ndarray, v_mult: np.ndarray) -> dict:
    from scipy import stats

    from .claims import rule_p5

    y = d["loss_mix"].to_numpy(float)
    s2 = noise.loss_sd ** 2
    n = len(y)
    sst = float(((y - y.mean()) ** 2).sum())
    r_add, r_mult = y - add, y - mult
    chi_add, chi_mult = _quad(r_add, v_add) / s2, _quad(r_mult, v_mult) / s2
    f = chi_mult / n
    p_int = float(stats.f.sf(f, n, noise.loss_dof)) if noise.loss_dof > 0 else math.nan
    # λ: how far apart the two predictions are in the noise (the non-centrality either χ² gains when
    # the other form is true); Δχ² = χ²_add − χ²_mult is ≈ N(−λ, 4λ) if the effects add
    # (both χ² of Δχ² on the additive covariance: then Δχ² = 2·δᵀV⁻¹r − λ exactly, δ = mult − add)
    lam = _quad(mult - add, v_add) / s2
    dchi = chi_add - _quad(r_mult, v_add) / s2
    p_mult = float(stats.norm.sf((dchi + lam) / (2 * math.sqrt(lam)))) if lam > 0 else math.nan
    p_add = float(stats.norm.cdf((dchi - lam) / (2 * math.sqrt(lam)))) if lam > 0 else math.nan  # against multiply
    check = float(stats.chi2.cdf(min(chi_add, chi_mult), n))
    return {"n_runs": float(n), "r2_add": 1 - float((r_add ** 2).sum()) / sst if sst > 0 else math.nan,
            "r2_mult": 1 - float((r_mult ** 2).sum()) / sst if sst > 0 else math.nan,
            "rmse_add": math.sqrt(float((r_add ** 2).mean())), "rmse_mult": math.sqrt(float((r_mult ** 2).mean())),
            "chi2_add": chi_add, "chi2_mult": chi_mult, "f_interaction": f, "p_interaction": p_int,
            "separation_chi2": lam, "delta_chi2": dchi, "p_multiply": p_mult, "p_against_multiply": p_add,
            "noise_check": check,
            "mult_better": float(dchi > 0), "grade": rule_p5(p_int, p_mult, check)}


def p5_statistics(d: pd.DataFrame, chinchilla: Mapping[str, float], noise: NoiseModel) -> dict:
    """The statistics of P5's rule (``bitlaws.study.claims.rule_p5``, version 3) on ``p5_design``.

    Both predictions are out of sample (``_p5_predictions``), and every χ² = rᵀV⁻¹r/σ² uses the
    residuals' covariance from the runs they share (``p5_covariance``), so the true form's χ² is
    χ²(n) under the noise model. Three statistics: the **interaction test** (the product's χ²/n, F
    on (n, ν), ν the seeds' degrees of freedom); **multiply against add**, two simple hypotheses
    with no constant fitted: Δχ² = χ²_add − χ²_mult (both on the additive covariance) is
    N(−λ, 4λ) if the effects add and N(+λ, 4λ) if they multiply, λ the predictions' separation in
    the noise (exact for a fixed separation; the marginals' noise moves it little), so ``p_multiply`` =
    P(Δχ² ≥ observed | add) (its power grows with λ, so with runs); and the **noise check**, the
    lower tail of min(χ²_add, χ²_mult) on n (under either form the smaller χ² is at most central
    χ²(n); a small value says the residuals are tighter than the noise model allows, e.g. runs
    sharing a seed, and the two tests above are not calibrated).

    Returns:
        ``n_runs``, ``r2_add``, ``r2_mult`` (out of sample, on the mixed runs), ``rmse_add``,
        ``rmse_mult``, ``chi2_add``, ``chi2_mult``, ``f_interaction``, ``p_interaction``,
        ``separation_chi2`` (λ), ``delta_chi2``, ``p_multiply``, ``p_against_multiply`` (the reverse
        test, P(Δχ² ≤ observed | multiply): reported, not graded), ``noise_check``, ``mult_better``
        (1.0/0.0: Δχ² > 0), ``grade``.
    """
    add, mult = _p5_predictions(d, chinchilla)
    return _p5_stats(d, add, mult, noise, p5_covariance(d), p5_covariance(d, _p5_weights(d, chinchilla)))


def p5_power(d: pd.DataFrame, chinchilla: Mapping[str, float], noise: NoiseModel, n_sim: int = N_SIM,
             seed: int = 0) -> dict[str, float]:
    """Power and false-positive rate of P5's rule on the design of ``d`` (its N, D, bit widths, seeds).

    Paper data: every run's loss from our Chinchilla law with N_eff = N·Π f_x(P_x) and the paper's
    γ_x, n_x (Table 2): the effects multiply. Null: the same marginal effects, added (L_hp + Σ ΔL_x),
    so "multiply" is removed. Noise as the runs are shared: one draw per mixed run (σ), one per
    marginal run mean (σ/√k_x, shared by every mixed run that uses it) and one per (N, D)'s
    high-precision mean (σ/√k_hp).

    Returns:
        ``power``, ``power_partly``, ``false_positive``, ``false_partly``, ``n_sim``.
    """
    p = forms.PAPER_CONSTANTS
    n, dd = d["n_params"].to_numpy(float), d["n_tokens"].to_numpy(float)
    bits = {x: d[f"bits_{x}"].to_numpy(float) for x in _PARTS}
    hp = forms.chinchilla_loss(n, dd, chinchilla)
    marg = {x: forms.qat_loss(n, dd, *(bits[y] if y == x else _HIGH for y in _PARTS), {**p, **chinchilla})
            for x in _PARTS}
    truth = {"power": forms.qat_loss(n, dd, bits["w"], bits["a"], bits["kv"], {**p, **chinchilla}),
             "false": hp + sum(marg[x] - hp for x in _PARTS)}
    marg_index, hp_index, marg_var, hp_var = _p5_sources(d)
    s = noise.loss_sd
    rng = np.random.default_rng(seed)
    out = {"n_sim": float(n_sim)}
    for label, mix in truth.items():
        grades = []
        for _ in range(n_sim):
            e_marg = s * np.sqrt(marg_var) * rng.standard_normal(len(marg_var))
            loss_hp = hp + (s * np.sqrt(hp_var) * rng.standard_normal(len(hp_var)))[hp_index]
            sim = d.assign(loss_mix=mix + s * rng.standard_normal(len(d)), loss_hp=loss_hp,
                           **{f"loss_{x}": np.where(marg_index[:, j] >= 0, marg[x] + e_marg[marg_index[:, j]], loss_hp)
                              for j, x in enumerate(_PARTS)})
            grades.append(p5_statistics(sim, chinchilla, noise)["grade"])
        g = np.array(grades)
        out["power" if label == "power" else "false_positive"] = float(np.mean(g == "reproduced"))
        out[f"{label}_partly"] = float(np.mean((g == "reproduced") | (g == "partly")))
    return out


# --- P4: the sensitivity order of weights, activations and KV cache --------------------------------

# P4's hypotheses: which of the paper's Table 2 curves f(P) = 1 − e^(−P/γ + n) (those of w, a or kv)
# each part is given. "paper" is the claim; every other is a null on which the order f_a < f_w < f_kv
# is false. The order is the intersection of two inequalities, so the least favourable nulls lie on
# its boundary: one inequality an equality (the same curve on both parts, so equal exactly) while
# the other holds strongly; the reversed ones make the remaining part the most or least sensitive.
# Only the w and kv curves serve where a part is measured at 3 bits (the a curve is undefined there).
P4_HYPOTHESES: dict[str, dict[str, str]] = {
    "paper": {"a": "a", "w": "w", "kv": "kv"},
    "all_equal": {"a": "w", "w": "w", "kv": "w"},        # f_a = f_w = f_kv
    "a_eq_w": {"a": "w", "w": "w", "kv": "kv"},          # f_a = f_w < f_kv
    "w_eq_kv": {"a": "a", "w": "w", "kv": "w"},          # f_a < f_w = f_kv (activations still most sensitive)
    "a_eq_kv": {"a": "w", "w": "kv", "kv": "w"},         # f_a = f_kv < f_w
    "a_eq_w_kv_most": {"a": "kv", "w": "kv", "kv": "w"},  # f_kv < f_a = f_w (reversed)
    "w_eq_kv_a_least": {"a": "kv", "w": "w", "kv": "w"},  # f_w = f_kv < f_a (reversed)
}
P4_NULLS = tuple(k for k in P4_HYPOTHESES if k != "paper")
# Each hypothesis in symbols, for the verdict's text.
P4_HYPOTHESIS_TEXT = {"paper": "f_a < f_w < f_kv", "all_equal": "f_a = f_w = f_kv", "a_eq_w": "f_a = f_w < f_kv",
                      "w_eq_kv": "f_a < f_w = f_kv", "a_eq_kv": "f_a = f_kv < f_w", "a_eq_w_kv_most": "f_kv < f_a = f_w",
                      "w_eq_kv_a_least": "f_w = f_kv < f_a"}
P4_BITS = (4, 5, 6, 7, 8)


def p4_truth(hypothesis: str, bits=P4_BITS) -> dict[str, np.ndarray]:
    """The generating f_x(P) of one of ``P4_HYPOTHESES`` at ``bits``: part -> (b,) array.

    Raises:
        ValueError: an unknown hypothesis (the message lists them).
    """
    if hypothesis not in P4_HYPOTHESES:
        raise ValueError(f"P4 hypothesis must be one of {', '.join(P4_HYPOTHESES)}; got {hypothesis!r}")
    p = forms.PAPER_CONSTANTS
    b = np.asarray(bits, float)
    return {x: forms.precision_factor(b, p[f"gamma_{c}"], p[f"n_{c}"]) for x, c in P4_HYPOTHESES[hypothesis].items()}


def p4_facts(hypothesis: str, bits=P4_BITS) -> dict[str, bool]:
    """Whether the paper's order (``order``: f_a < f_w < f_kv at every width) and activations the
    most sensitive (``a_most``: f_a below both at every width) are true under ``hypothesis``."""
    f = p4_truth(hypothesis, bits)
    return {"order": bool(np.all((f["a"] < f["w"]) & (f["w"] < f["kv"]))),
            "a_most": bool(np.all((f["a"] < f["w"]) & (f["a"] < f["kv"])))}


# The floor of ``extended_factor``: where a Table 2 curve gives f_x(P) below it (at or below zero
# included), the simulation generates as if 5 % of the parameters were effective.
NEFF_F_FLOOR = 0.05


def extended_factor(bits, gamma: float, offset: float, floor: float = NEFF_F_FLOOR) -> np.ndarray:
    """f_x(P) = 1 − e^(−P/γ_x + n_x) clipped below at ``floor``: the defined extension of Eqs. 3–4 that
    P4's simulation generates from (``p4_power``).

    The paper's law is undefined where f_x(P) ≤ 0 (N_eff ≤ 0): with Table 2's activation constants
    at P_a = 3 bits (γ_a·n_a = 3.11 bits, f_a(3) = −0.05), rows our N_eff fits keep. The extension
    keeps the paper's value wherever it is at least ``floor`` (every row but those: f_w(3) = 0.56,
    f_kv(3) = 0.51, f_a(4) = 0.33), is continuous and non-decreasing in P, as the law is, and reads
    the paper's "no effective parameters left" as a model with 5 % of them: finite, and far worse
    than at 4 bits. It uses only typed constants, not our losses, so the simulated world stays the
    paper's. (The alternative, drawing those rows from our own fitted law, would put our data into
    the paper's hypothesis.)

    Args:
        bits: (...) float — P_x; ≥ 16 is unquantized (f = 1).
        gamma: γ_x [bits], > 0. offset: n_x. floor: the floor, in (0, 1).

    Returns:
        (...) max(f_x(P), floor).

    Raises:
        ValueError: ``floor`` outside (0, 1).
    """
    if not 0.0 < floor < 1.0:
        raise ValueError(f"extended_factor: floor must lie in (0, 1); got {floor!r}")
    return np.maximum(np.asarray(forms.precision_factor(bits, gamma, offset), dtype=float), floor)


def paper_undefined(frame: pd.DataFrame) -> np.ndarray:
    """(n,) bool: the rows of ``frame`` where the paper's N_eff (Table 2's γ_x, n_x) is undefined, some
    quantized part's f_x(P_x) ≤ 0 (``bits_*`` missing or NaN: 16, unquantized). Reported, never
    used to choose rows: the fits and the simulation keep them (``p4_design``)."""
    c = forms.PAPER_CONSTANTS
    bad = np.zeros(len(frame), dtype=bool)
    for x in forms.COMPONENTS:
        bits = _num(frame[f"bits_{x}"]).to_numpy(float) if f"bits_{x}" in frame else np.full(len(frame), _HIGH)
        bad |= np.asarray(forms.precision_factor(bits, c[f"gamma_{x}"], c[f"n_{x}"])) <= 0  # unquantized: f = 1
    return bad


def p4_design(frames: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """P4's simulated design: each part's ``neff_*`` frame as it is, the very rows the real N_eff fits
    use (``law_fits.stage_frames``), P_a = 3 included. No row is chosen by a hypothesis: where one
    is undefined the simulation generates from ``extended_factor``."""
    return {x: frames[f"neff_{x}"] for x in _PARTS}


def _shift_bootstrap(theta: Mapping[str, np.ndarray], bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P4's bootstrap probabilities for each simulated dataset, with the simulation's own sampling
    deviations standing in for its bootstrap: the draws of dataset s are θ_s + (θ_j − mean θ) over
    every dataset j (s's own deviation included; the same j for every part, so a Chinchilla refit
    shared by the parts of dataset j moves them together, as in the pipeline bootstrap).

    Args:
        theta: part -> (n_sim, 2) fitted (γ_x, n_x) of each simulated dataset (NaN rows: failed fits).
        bits: (b,) the widths at which the order must hold.

    Returns:
        ``p_order`` and ``p_a_most``, each (n_sim,): the share of dataset s's draws with
        f_a < f_w < f_kv, and with f_a the smallest, at every width (NaN for a failed dataset).
    """
    good = np.all([np.isfinite(theta[x]).all(axis=1) for x in _PARTS], axis=0)
    dev = {x: theta[x][good] - theta[x][good].mean(axis=0) for x in _PARTS}
    n = len(good)
    p_order, p_a = np.full(n, np.nan), np.full(n, np.nan)
    for s in np.flatnonzero(good):
        f = {}
        for x in _PARTS:
            draws = theta[x][s] + dev[x]  # (m, 2); the m draws include s's own zero-ish deviation
            with np.errstate(invalid="ignore", over="ignore"):
                f[x] = forms.precision_factor(bits[None, :], draws[:, [0]], draws[:, [1]])
        ok = np.all([np.isfinite(f[x]).all(axis=1) & (f[x] > 0).all(axis=1) for x in _PARTS], axis=0)
        if not ok.any():
            continue
        order = np.all((f["a"] < f["w"]) & (f["w"] < f["kv"]), axis=1)[ok]
        a_most = np.all((f["a"] < f["w"]) & (f["a"] < f["kv"]), axis=1)[ok]
        p_order[s], p_a[s] = order.mean(), a_most.mean()
    return p_order, p_a


def _p4_chinchillas(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], noise: NoiseModel,
                    n_sim: int, rng: np.random.Generator, refit: bool) -> list[dict | None]:
    """The Chinchilla constants each simulated dataset's N_eff fits hold: refitted on its own simulated
    high-precision runs (the ``chinchilla`` frame's N, D, seeds; loss from ``chinchilla`` plus seed
    noise; L-BFGS-B from the best grid point), as the pipeline bootstrap refits Chinchilla per
    resample; or ``chinchilla`` itself when ``refit`` is off or there is no such frame. None: a
    failed refit (that dataset counts as failed for every part)."""
    from ..laws import fit as lfit

    hp = frames.get("chinchilla")
    if not refit or hp is None or len(hp) == 0:
        return [dict(chinchilla)] * n_sim
    stage = lfit.STAGES["chinchilla"]
    true = forms.chinchilla_loss(hp["n_params"].to_numpy(float), hp["n_tokens"].to_numpy(float), chinchilla)
    out: list[dict | None] = []
    for _ in range(n_sim):
        sim = hp.assign(loss_val=true + noise.loss_sd * rng.standard_normal(len(hp)))
        try:
            res = lfit.fit_stage(stage, sim, n_refine=1)
        except ValueError:
            out.append(None)
            continue
        ok = math.isfinite(res.objective) and all(math.isfinite(v) for v in res.params.values())
        out.append(dict(res.params) if ok else None)
    return out


def p4_power(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], noise: NoiseModel,
             n_sim: int = N_SIM, seed: int = 0, bits: tuple[int, ...] = P4_BITS,
             refit_chinchilla: bool = True) -> dict[str, float | str]:
    """Power and size of P4's rule (``bitlaws.study.claims.rule_p4``) on our design, by simulation.

    Design: each part's rows of ``frames`` (``p4_design``), the very rows the real N_eff fits use,
    every one of them. Every hypothesis of ``P4_HYPOTHESES`` gives each part one of the paper's
    Table 2 curves; its losses are Eqs. 3–4 with our Chinchilla constants (``chinchilla``: A, B, E,
    α, β), N_eff = N·``extended_factor`` (the curve clipped at ``NEFF_F_FLOOR``: the paper's law
    wherever it gives f ≥ 0.05, 5 % of the parameters below, as where the activation curve gives
    f ≤ 0 at P_a = 3), plus the seed σ of one run's loss (``noise.loss_sd``). Each dataset refits its
    three N_eff stages on Chinchilla constants refitted on its own simulated high-precision runs
    (``_p4_chinchillas``; held at ``chinchilla`` without a ``chinchilla`` frame or with
    ``refit_chinchilla`` off), L-BFGS-B started from the generating constants and the stage's best
    grid point. A part given the same curve under two hypotheses reuses the same datasets. The
    rule reads probabilities from a bootstrap of every stage; here dataset s's draws are θ_s plus
    the other datasets' deviations from the mean (``_shift_bootstrap``). Power: the share of
    paper datasets graded reproduced. Size: the largest share graded reproduced over the nulls
    (``P4_NULLS``: the order false, most on its boundary), and, for partly, the largest share graded
    partly or better over the nulls where activations are not the most sensitive (``p4_facts``).

    Args:
        frames: ``bitlaws.study.law_fits.stage_frames(df)`` (the three ``neff_*`` frames; its
            ``chinchilla`` frame, if present, for the refits).
        chinchilla: the generating Chinchilla constants. noise: ``bitlaws.study.noise.noise_model``.
        n_sim: simulated datasets per hypothesis. seed: the generator's seed. bits: the rule's widths.
        refit_chinchilla: refit Chinchilla per dataset (default) or hold it at ``chinchilla``.

    Returns:
        ``power``, ``power_partly`` (paper data: reproduced; reproduced or partly); per null ``fp_<name>``
        (reproduced) and ``fp_partly_<name>`` (partly or better, only where activations are not
        the most sensitive); ``false_positive`` and ``false_partly`` (the size: the largest of
        those), ``size_null`` and ``size_partly_null`` (which null); ``fp_all_equal`` is the one
        null of earlier versions; ``n_sim``, ``rows_w``, ``rows_a``, ``rows_kv`` (the design: every
        row of the frames), ``rows_extended`` (its rows where the paper's own curves fall below
        ``NEFF_F_FLOOR``, generated from the extension), ``chinchilla_refit`` (1.0 or 0.0),
        ``n_failed`` (datasets whose Chinchilla refit failed). Power and rates NaN without three
        non-empty frames or a finite σ.

    Raises:
        ValueError: a row of a part's frame with another part quantized (the design is the marginal
            sweeps).
    """
    from ..laws import fit as lfit
    from .claims import rule_p4

    design = p4_design(frames) if all(f"neff_{x}" in frames for x in _PARTS) else {}
    out: dict[str, float | str] = {"n_sim": float(n_sim)}
    out.update({f"rows_{x}": float(len(design.get(x, ()))) for x in _PARTS})
    for x, fr in design.items():
        others = [y for y in _PARTS if y != x and f"bits_{y}" in fr and (_num(fr[f"bits_{y}"]) < _HIGH).any()]
        if others:
            raise ValueError(f"p4_power: the {x} rows must have only {x} quantized (a marginal sweep); some have "
                             f"bits_{others[0]} < {_HIGH}")
    p = forms.PAPER_CONSTANTS
    out["rows_extended"] = float(sum(int(np.sum(forms.precision_factor(_num(fr[f"bits_{x}"]).to_numpy(float),
                                                                       p[f"gamma_{x}"], p[f"n_{x}"]) < NEFF_F_FLOOR))
                                     for x, fr in design.items()))
    rates = ["power", "power_partly", "false_positive", "false_partly"]
    if not (math.isfinite(noise.loss_sd) and design and all(len(design[x]) for x in _PARTS)):
        return {**out, **{k: math.nan for k in rates}}
    curves = {c: (p[f"gamma_{c}"], p[f"n_{c}"]) for c in _PARTS}
    b = np.asarray(bits, float)
    rng = np.random.default_rng(seed)
    chins = _p4_chinchillas(frames, chinchilla, noise, n_sim, rng, refit_chinchilla)
    out["chinchilla_refit"] = float(refit_chinchilla and len(frames.get("chinchilla", ())) > 0)
    out["n_failed"] = float(sum(c is None for c in chins))
    cache: dict[tuple[str, str], np.ndarray] = {}

    def theta_of(x: str, c: str) -> np.ndarray:
        if (x, c) in cache:
            return cache[(x, c)]
        stage, fr = lfit.STAGES[f"neff_{x}"], design[x]
        g, n = curves[c]
        f = extended_factor(_num(fr[f"bits_{x}"]).to_numpy(float), g, n)
        true = forms.chinchilla_loss(fr["n_params"].to_numpy(float) * f, fr["n_tokens"].to_numpy(float), chinchilla)
        theta = np.full((n_sim, 2), np.nan)
        for s in range(n_sim):
            sim = fr.assign(loss_val=true + noise.loss_sd * rng.standard_normal(len(fr)))
            if chins[s] is None:
                continue
            try:
                res = lfit.fit_stage(stage, sim, chins[s], n_refine=1, extra_starts=np.array([[g, n]]))
            except ValueError:
                continue
            theta[s] = [res.params[f"gamma_{x}"], res.params[f"n_{x}"]]
        cache[(x, c)] = theta
        return theta

    for name, assign in P4_HYPOTHESES.items():
        p_order, p_a = _shift_bootstrap({x: theta_of(x, assign[x]) for x in _PARTS}, b)
        grades = np.array([rule_p4(o, a) if np.isfinite(o) else "inconclusive" for o, a in zip(p_order, p_a)])
        rep = float(np.mean(grades == "reproduced"))
        partly = float(np.isin(grades, ("reproduced", "partly")).mean())
        if name == "paper":
            out["power"], out["power_partly"] = rep, partly
            continue
        out[f"fp_{name}"] = rep
        if not p4_facts(name, bits)["a_most"]:
            out[f"fp_partly_{name}"] = partly
    fp = {k: out[f"fp_{k}"] for k in P4_NULLS}
    fpp = {k: out[f"fp_partly_{k}"] for k in P4_NULLS if f"fp_partly_{k}" in out}
    out["size_null"] = max(fp, key=fp.get)
    out["false_positive"] = fp[out["size_null"]]
    out["size_partly_null"] = max(fpp, key=fpp.get)
    out["false_partly"] = fpp[out["size_partly_null"]]
    return out

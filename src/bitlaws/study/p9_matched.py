"""P9's matched test (rule version 5): does a model whose weights were trained at P_w degrade less
under post-training quantization to P_post = P_w − 1 than its high-precision twin of the same (N, D)?

Reads the ``qat_matched`` sweep (``bitlaws.study.sweep.qat_matched``) at evaluation version 2. Per unit
(N, D, P_w, grid) the statistic is r = ln(δ_low / δ_hp); the paper's law (Kumar et al. 2024, §5, Eqs. 8–10
with Table 2's γ_N, γ_w, n_w) predicts r = γ_N·ln(N/N_eff(P_w)) + ln(1 − e^(−C_w)) whatever N, D and P_post,
and C_w is not printed, so the prediction is a range over C_w (``P9_C_W_RANGE``). Versions 3, 4 and 5 were
registered on 2026-12-05 with 37–41 of the grid's 50 runs committed and none of their comparisons read (4 and 5
after blind referees' readings). Frozen by tests/test_p9_freeze.py; the rule is ``claims.rule_p9_matched``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..laws import forms
from .noise import NoiseModel, t_quantile

__all__ = ["P9_EVAL_VERSION", "P9_GRID", "P9_SECONDARY_GRID", "P9_GRADED_BITS", "P9_REPORTED_BITS", "P9_C_W_LOW",
           "P9_C_W_RANGE", "P9_C_W_SENSITIVITY", "P9_C_W_POWER", "P9_MIN_CLUSTERS", "P9_SCENARIOS", "P9_N_SIM",
           "paper_r", "c_w_max", "detection_floor", "matched_units", "matched_statistics", "matched_design",
           "profile_design", "matched_power", "load_matched", "matched_complete"]

# The evaluation version the test reads (windows spread over the whole validation split).
P9_EVAL_VERSION = 2
# The graded grid is training's own (symmetric absmax, per output channel); the asymmetric min-max grid is
# reported beside it, not graded.
P9_GRID = "sym_per_channel"
P9_SECONDARY_GRID = "asym_per_channel"
# The graded P_w (P_post = P_w − 1 ≥ 3, the paper's INT3–6 and our Eq. 2 fit's range). P_w = 3 → P_post = 2 is
# reported apart: on the symmetric grid INT2 is ternary ({−1, 0, 1}·absmax), its step 3× training's, not 2×.
P9_GRADED_BITS = (4, 5, 6)
P9_REPORTED_BITS = (3,)
# The strongest robustification of the range: Eq. 10's C_w = 1, halved.
P9_C_W_LOW = 0.5


def c_w_max(bits) -> float:
    """The largest C_w at which the paper's law still has robustification win (r ≤ 0) at every P_w of
    ``bits`` (P_post = P_w − 1): 1 − e^(−C) = f_w(P_w)^γ_N at the lowest P_w, from Table 2 alone.

    Raises:
        ValueError: no bits, or f_w ≤ 0 at one of them.
    """
    b = min(bits) if len(bits) else None
    if b is None:
        raise ValueError("c_w_max: no bits given")
    p = forms.PAPER_CONSTANTS
    f = 1.0 - math.exp(-b / p["gamma_w"] + p["n_w"])
    if f <= 0:
        raise ValueError(f"c_w_max: f_w({b}) ≤ 0 (N_eff undefined)")
    return -math.log(1.0 - f ** p["gamma_N"])


# The paper's prediction is the law's r over this C_w range: from Eq. 10's C_w = 1 halved up to the weakest
# robustification that still wins at every graded P_w (the claim's own content; 2.15 with Table 2).
P9_C_W_RANGE = (P9_C_W_LOW, c_w_max(P9_GRADED_BITS))
# Other ranges, whose grades are reported beside the registered one (not graded): v3's [0.5, 1.5] was chosen
# with our v2 fit's C_w = 1.26 known.
P9_C_W_SENSITIVITY = ((0.5, 1.0), (0.5, 1.5))
# The C_w at which the rule's grade rates are simulated.
P9_C_W_POWER = (0.5, 1.0, 1.5, 2.0)
# The fewest model sizes (the replicates: every run of one N shares its seed, data order and, across D, its
# initial weights) with an included unit for the interval to be read.
P9_MIN_CLUSTERS = 3
# Simulated noise structures (κ: share of one run's δ noise common to every unit of one N; ρ: common to one
# (N, D) cell; τ: sd of a per-cell shift of the true r; rel: σ_rel's multiple; ω: common to every unit of the
# grid, drawn apart for the low-precision models and the twins, as a shared data order and evaluation set
# could make it); the rates reported are the unfavourable ends over them. The interval assumes ω = 0 (the
# sizes independent); the last scenario shows what a fifth of the noise shared across sizes costs.
P9_SCENARIOS = ((0.0, 0.0, 0.0, 1.0, 0.0), (0.0, 0.5, 0.0, 1.0, 0.0), (0.0, 0.9, 0.0, 1.0, 0.0),
                (0.5, 0.0, 0.0, 1.0, 0.0), (0.5, 0.4, 0.0, 1.0, 0.0), (0.0, 0.5, 0.2, 1.0, 0.0),
                (0.0, 0.5, 0.0, 1.5, 0.0), (0.0, 0.5, 0.0, 1.0, 0.2))
# Simulated datasets per scenario and hypothesis.
P9_N_SIM = 1000


def paper_r(bits_w, c_w: float, bits_post=None) -> np.ndarray:
    """The paper's ln(δ_low/δ_hp) for weights trained at ``bits_w`` and quantized to ``bits_post``
    (default P_w − 1), at the same (N, D): γ_N·ln(1/f_w(P_w)) + ln(1 − e^(−C_w·(P_w − P_post))).

    Eq. 9 over Eq. 2 with Table 2's γ_N, γ_w, n_w (Kumar et al. 2024); C_T, D and N cancel. ``c_w`` = inf
    drops the robustness bracket (Eq. 2 with N_eff alone). Returns a float array of ``bits_w``'s shape.

    Raises:
        ValueError: ``c_w`` not > 0, or a P_w where f_w ≤ 0 (N_eff undefined).
    """
    if not c_w > 0:
        raise ValueError(f"paper_r: C_w must be > 0 (inf for no bracket); got {c_w!r}")
    p = forms.PAPER_CONSTANTS
    b = np.asarray(bits_w, dtype=float)
    gap = 1.0 if bits_post is None else b - np.asarray(bits_post, dtype=float)
    f = 1.0 - np.exp(-b / p["gamma_w"] + p["n_w"])
    if np.any(f <= 0):
        raise ValueError(f"paper_r: f_w(P_w) ≤ 0 (N_eff undefined) at P_w = {b[f <= 0]}")
    bracket = 0.0 if math.isinf(c_w) else np.log1p(-np.exp(-c_w * gap))
    return p["gamma_N"] * -np.log(f) + bracket


def detection_floor(noise: NoiseModel) -> float:
    """t_{0.975, ν}·σ₀: the δ a single run must exceed to be told from zero (ν the degrees of freedom of the
    independent runs, σ₀ the absolute part of δ's noise; ``bitlaws.study.noise``), nats."""
    return t_quantile(noise.loss_dof) * noise.delta_abs


def matched_units(rows: pd.DataFrame, floor: float, grid: str = P9_GRID) -> pd.DataFrame:
    """The units of the matched test on one grid: each weights-only model trained at P_w < 16 and
    RTN-quantized to P_post = P_w − 1, beside the high-precision model of the same (N, D, seed)
    quantized to the same P_post on the same grid.

    Args:
        rows: ``qat_matched`` observation rows (one evaluation version), columns ``n_params, n_tokens, seed,
            bits_w, bits_a, bits_kv, bits_post, ptq_method, quant_scheme, delta_ptq, status``.
        floor: the detection floor (``detection_floor``), nats, ≥ 0.
        grid: ``quant_scheme`` to read.

    Returns:
        One row per low-precision unit: ``n_params, n_tokens, seed, bits_w, bits_post, delta_low, delta_hp``
        (nats; NaN where the run failed or the twin has no row), ``drop`` (why a unit is left out: ``""``,
        ``"not finite"`` — either run not ok or its δ not finite —, ``"no twin"``, ``"twin below floor"``),
        ``included`` (``drop`` empty), ``censored`` (δ_low at or below ``floor``, read as ``floor``) and
        ``r`` = ln(max(δ_low, floor)/δ_hp), NaN where not included.

    Raises:
        ValueError: a negative floor, a missing column, or two rows for one unit or one twin.
    """
    if not floor >= 0:
        raise ValueError(f"matched_units: floor must be ≥ 0; got {floor!r}")
    need = ["n_params", "n_tokens", "seed", "bits_w", "bits_a", "bits_kv", "bits_post", "ptq_method",
            "quant_scheme", "delta_ptq", "status"]
    missing = [c for c in need if c not in rows]
    if missing:
        raise ValueError(f"matched_units: rows lack columns {missing}")
    num = {c: pd.to_numeric(rows[c], errors="coerce").fillna(forms.HIGH_PRECISION_BITS)
           for c in ("bits_w", "bits_a", "bits_kv", "bits_post")}
    hi = forms.HIGH_PRECISION_BITS
    sel = ((rows["ptq_method"] == "rtn") & (rows["quant_scheme"] == grid) & (num["bits_a"] >= hi) & (num["bits_kv"] >= hi))
    f = rows.assign(**num)[sel]
    f = f.assign(delta_ptq=pd.to_numeric(f["delta_ptq"], errors="coerce").where(f["status"] == "ok"))
    key = ["n_params", "n_tokens", "seed", "bits_post"]
    low = f[(f["bits_w"] < hi) & (f["bits_post"] == f["bits_w"] - 1)][key + ["bits_w", "delta_ptq"]]
    hp = f[f["bits_w"] >= hi][key + ["delta_ptq"]]
    for name, part, k in (("unit", low, key + ["bits_w"]), ("high-precision twin", hp, key)):
        dup = part.duplicated(k, keep=False)
        if dup.any():
            raise ValueError(f"matched_units: two rows for one {name}: {part.loc[dup, k].drop_duplicates().to_dict('records')}")
    out = low.rename(columns={"delta_ptq": "delta_low"}).merge(
        hp.rename(columns={"delta_ptq": "delta_hp"}).assign(_twin=True), on=key, how="left")
    dl, dh = out["delta_low"].to_numpy(float), out["delta_hp"].to_numpy(float)
    twin = out["_twin"].eq(True).to_numpy()
    out["drop"] = np.select([~twin, ~np.isfinite(dl) | ~np.isfinite(dh), dh <= floor],
                            ["no twin", "not finite", "twin below floor"], "")
    out["included"] = out["drop"] == ""
    out["censored"] = out["included"] & (out["delta_low"] <= floor)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.log(np.maximum(dl, floor) / dh)
    out["r"] = np.where(out["included"], r, np.nan)
    cols = ["n_params", "n_tokens", "seed", "bits_w", "bits_post", "delta_low", "delta_hp", "drop", "included",
            "censored", "r"]
    return out[cols].sort_values(["n_params", "n_tokens", "seed", "bits_w"]).reset_index(drop=True)


def _interval(cell_r: np.ndarray) -> tuple[float, float, float, float]:
    """Mean of the cluster means (last axis), its standard error and 95 % t-interval; NaN where < 2."""
    from scipy import stats

    n = np.sum(np.isfinite(cell_r), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a dataset with no cluster: NaN, graded inconclusive
        mean = np.nanmean(cell_r, axis=-1) if cell_r.size else np.nan
        sd = np.sqrt(np.nansum((cell_r - np.expand_dims(mean, -1)) ** 2, axis=-1) / (n - 1))
        se = sd / np.sqrt(n)
        q = stats.t.ppf(0.975, np.maximum(n - 1, 1))
    return mean, se, mean - q * se, mean + q * se


def matched_statistics(units: pd.DataFrame, c_w_range: tuple[float, float] = P9_C_W_RANGE,
                       bits: tuple[int, ...] = P9_GRADED_BITS) -> dict:
    """The statistics of rule v5 (``bitlaws.study.claims.rule_p9_matched``) on one grid's ``matched_units``.

    Only units with P_w in ``bits``. Each model size N is one replicate (its runs share seed 0, so the data
    order, and across D the initial weights; a cell's units share their twin): its r is the mean of its
    included units' r; r̄ is the mean over sizes with an included unit, its 95 % interval a t-interval on
    the sizes' spread (n_clusters − 1 degrees of freedom). The paper's range is the same average of
    ``paper_r`` over the same units at the two ends of ``c_w_range``.

    Returns:
        ``r_mean``, ``r_se``, ``r_lo``, ``r_hi``, ``paper_lo`` (the strongest robustification, C_w at the
        range's low end), ``paper_hi``, ``paper_c1`` (C_w = 1), ``n_clusters``, ``n_units``, the units left
        out (``n_excluded``: twin's δ below the floor; ``n_no_twin``; ``n_not_finite``: a run not ok or a δ
        not finite), ``n_censored``, ``grade``.
    """
    from .claims import rule_p9_matched

    sub = units[units["bits_w"].isin(bits)]
    inc = sub[sub["included"]]
    clus = inc.assign(p_lo=paper_r(inc["bits_w"], c_w_range[0]), p_hi=paper_r(inc["bits_w"], c_w_range[1]),
                      p_1=paper_r(inc["bits_w"], 1.0)).groupby("n_params")[["r", "p_lo", "p_hi", "p_1"]].mean()
    out = {"n_clusters": float(len(clus)), "n_units": float(len(inc)),
           "n_excluded": float((sub["drop"] == "twin below floor").sum()),
           "n_no_twin": float((sub["drop"] == "no twin").sum()), "n_not_finite": float((sub["drop"] == "not finite").sum()),
           "n_censored": float((inc["censored"]).sum())}
    if len(clus) < max(P9_MIN_CLUSTERS, 2):
        return {**out, **dict.fromkeys(("r_mean", "r_se", "r_lo", "r_hi", "paper_lo", "paper_hi", "paper_c1"), math.nan),
                "grade": "inconclusive"}
    mean, se, lo, hi = (float(v) for v in _interval(clus["r"].to_numpy(float)))
    out.update(r_mean=mean, r_se=se, r_lo=lo, r_hi=hi, paper_lo=float(clus["p_lo"].mean()),
               paper_hi=float(clus["p_hi"].mean()), paper_c1=float(clus["p_1"].mean()))
    out["grade"] = rule_p9_matched(lo, hi, out["paper_lo"], out["paper_hi"])
    return out


def matched_design(sizes: Mapping[str, int], budgets, bits, eq2: Mapping[str, float]) -> pd.DataFrame:
    """The matched grid's units for simulation: every (N, D, P_w) with P_post = P_w − 1 and δ_hp from
    Eq. 2 with ``eq2`` (C_T, γ_D, γ_N, γ_post; our RTN fit, asymmetric grid). The seed noise of δ is
    mostly relative (``NoiseModel.delta_rel``), so the simulated power barely depends on this scale.

    Args:
        sizes: size name -> N (parameters).
        budgets: D values (tokens).
        bits: the P_w values.
        eq2: Eq. 2's constants.
    """
    rows = [{"n_params": float(n), "n_tokens": float(d), "bits_w": float(b), "bits_post": float(b - 1),
             "delta_hp_true": float(forms.delta_ptq(float(n), float(d), float(b - 1), eq2))}
            for n in sizes.values() for d in budgets for b in bits]
    return pd.DataFrame(rows)


def profile_design(profile: str, eq2: Mapping[str, float]) -> pd.DataFrame:
    """``matched_design`` of ``profile``'s declared ``qat_matched`` grid (``PowerPlan.matched_*``), its graded
    P_w only (``P9_GRADED_BITS``); empty if none.

    Raises:
        ValueError: unknown profile.
    """
    from ..model import get_size, hand_count_n_params
    from .sweep import _profile

    pp = _profile(profile).power_design
    if pp is None:
        return pd.DataFrame(columns=["n_params", "n_tokens", "bits_w", "bits_post", "delta_hp_true"])
    sizes = {z: hand_count_n_params(get_size(z)) for z in pp.matched_sizes}
    return matched_design(sizes, pp.matched_budgets, [b for b in pp.matched_bits if b in P9_GRADED_BITS], eq2)


def _groups_of(design: pd.DataFrame, by) -> np.ndarray:
    """The index of each unit's group (``by`` columns), in ``groupby``'s order."""
    groups = design.groupby(by).indices
    out = np.empty(len(design), dtype=int)
    for j, idx in enumerate(groups.values()):
        out[idx] = j
    return out


def _draw(design: pd.DataFrame, r_true: np.ndarray, noise: NoiseModel, n_sim: int, rng: np.random.Generator,
          scenario: tuple[float, float, float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(δ_hp, δ_low), each (n_sim, units): δ_hp, and δ_low = δ_hp·e^(r_true + cell shift), each with one run's
    seed noise (``NoiseModel.delta_sd``, its relative part × rel), of whose variance a share κ is common to
    the units of one N and ρ to those of one (N, D) cell; the cell shift ~ N(0, τ²) per cell and dataset;
    and ω to every unit of the grid; the twins' and the low-precision models' draws independent of each other
    (``scenario`` = (κ, ρ, τ, rel, ω))."""
    kappa, rho, tau, rel, omega = scenario
    nm = NoiseModel(noise.loss_sd, noise.loss_dof, noise.post_sd, noise.post_dof, noise.delta_abs,
                    noise.delta_rel * rel, noise.delta_dof, noise.n_cells, noise.n_groups)
    cell_of, size_of = _groups_of(design, ["n_params", "n_tokens"]), _groups_of(design, ["n_params"])
    shape = (n_sim, len(design))

    def common(of):
        return rng.standard_normal((n_sim, int(of.max()) + 1))[:, of]

    def z():
        return (math.sqrt(omega) * common(np.zeros(len(design), dtype=int)) + math.sqrt(kappa) * common(size_of)
                + math.sqrt(rho) * common(cell_of) + math.sqrt(1.0 - omega - kappa - rho) * rng.standard_normal(shape))

    hp_true = design["delta_hp_true"].to_numpy(float)
    low_true = hp_true * np.exp(r_true + tau * common(cell_of))
    hp = hp_true + nm.delta_sd(hp_true) * z()
    return hp, low_true + nm.delta_sd(low_true) * z()


def _grades(design: pd.DataFrame, hp: np.ndarray, low: np.ndarray, floor: float,
            c_w_range: tuple[float, float]) -> np.ndarray:
    """Rule v5's grade of each simulated dataset (rows of ``hp``, ``low``), computed as
    ``matched_units`` and ``matched_statistics`` compute it (a test checks they agree)."""
    from .claims import rule_p9_matched

    inc = hp > floor
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(inc, np.log(np.maximum(low, floor) / np.where(inc, hp, 1.0)), np.nan)
    size_of = _groups_of(design, ["n_params"])
    bw = design["bits_w"].to_numpy(float)
    p_lo, p_hi = paper_r(bw, c_w_range[0]), paper_r(bw, c_w_range[1])
    n_groups = int(size_of.max()) + 1 if len(design) else 0
    clus_r = np.full((len(hp), n_groups), np.nan)
    clus_lo, clus_hi = np.full_like(clus_r, np.nan), np.full_like(clus_r, np.nan)
    for j in range(n_groups):
        idx = np.flatnonzero(size_of == j)
        m = inc[:, idx]
        k = m.sum(axis=1)
        has = k > 0
        clus_r[has, j] = np.nansum(r[:, idx], axis=1)[has] / k[has]
        clus_lo[has, j] = (m * p_lo[idx]).sum(axis=1)[has] / k[has]
        clus_hi[has, j] = (m * p_hi[idx]).sum(axis=1)[has] / k[has]
    _, _, lo, hi = _interval(clus_r)
    n_ok = np.sum(np.isfinite(clus_r), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a dataset with no cluster: NaN, graded inconclusive
        plo, phi = np.nanmean(clus_lo, axis=1), np.nanmean(clus_hi, axis=1)
    return np.array([rule_p9_matched(float(a), float(b), float(c), float(d)) if n >= max(P9_MIN_CLUSTERS, 2)
                     else "inconclusive" for a, b, c, d, n in zip(lo, hi, plo, phi, n_ok)])


def matched_power(design: pd.DataFrame, noise: NoiseModel, n_sim: int = P9_N_SIM, seed: int = 0,
                  c_w_range: tuple[float, float] = P9_C_W_RANGE, c_w_power: tuple[float, ...] = P9_C_W_POWER,
                  scenarios: tuple[tuple[float, float, float, float, float], ...] = P9_SCENARIOS) -> dict[str, float]:
    """Grade rates of rule v5 on ``design`` (``matched_design``), by simulation.

    Hypotheses: the paper's law at each C_w of ``c_w_power`` and at the range's weakest end (r =
    ``paper_r``); *no bracket* (Eq. 2 with N_eff alone: training at P_w only shrinks N_eff, so δ grows);
    *no effect* (r = 0). Each under every noise structure of ``scenarios`` (``_draw``), each with its own
    ``n_sim`` draws from one generator seeded by ``seed``. The noise model is
    the high-precision models' δ noise on the asymmetric grid; that QAT models and the symmetric grid share
    it is an assumption (the scenario with rel = 1.5 shows what a larger σ_rel costs). The grade itself reads
    the data's own spread, not this model.

    Returns:
        ``rate__s<i>__<hypothesis>__<grade>`` for every scenario i, hypothesis (``paper_c<C_w>``,
        ``paper_cmax``, ``no_bracket``, ``no_effect``) and grade; the unfavourable ends over the scenarios
        with the sizes independent (ω = 0, what the interval assumes):
        ``power`` (the least P(reproduced) under the paper's law at Eq. 10's C_w = 1), ``power_c<C_w>``
        (likewise at each C_w of ``c_w_power``), ``false_no_effect`` (the most P(reproduced | no effect)),
        ``false_positive`` (the most P(reproduced | no bracket)), ``power_not_reproduced`` (the least
        P(not reproduced | no bracket)), ``no_effect_not_reproduced`` (the least P(not reproduced | no
        effect)), ``size_not_reproduced`` (the most P(not reproduced) under the paper's law at the range's
        weakest C_w); over the scenarios with ω > 0, ``false_no_effect_shared`` and
        ``size_not_reproduced_shared`` (NaN without one); ``n_sim`` (datasets per scenario and hypothesis).

    Raises:
        ValueError: ``n_sim`` < 1, or a scenario with κ, ρ or ω < 0, κ + ρ + ω ≥ 1, τ < 0 or rel ≤ 0.
    """
    if n_sim < 1:
        raise ValueError(f"matched_power: n_sim must be ≥ 1; got {n_sim}")
    for sc in scenarios:
        kappa, rho, tau, rel, omega = sc
        if not (kappa >= 0 and rho >= 0 and omega >= 0 and kappa + rho + omega < 1 and tau >= 0 and rel > 0):
            raise ValueError("matched_power: a scenario (κ, ρ, τ, rel, ω) needs κ, ρ, ω ≥ 0, κ + ρ + ω < 1, τ ≥ 0, "
                             f"rel > 0; got {sc}")
    floor = detection_floor(noise)
    rng = np.random.default_rng(seed)
    bw = design["bits_w"].to_numpy(float)
    hyps = {**{f"paper_c{c:g}": paper_r(bw, c) for c in c_w_power}, "paper_cmax": paper_r(bw, c_w_range[1]),
            "no_bracket": paper_r(bw, math.inf), "no_effect": np.zeros(len(design))}
    out: dict[str, float] = {"n_sim": float(n_sim)}
    for i, sc in enumerate(scenarios):
        for name, r_true in hyps.items():
            g = _grades(design, *_draw(design, r_true, noise, n_sim, rng, sc), floor, c_w_range)
            for grade in ("reproduced", "partly", "not reproduced", "inconclusive"):
                out[f"rate__s{i}__{name}__{grade}"] = float(np.mean(g == grade))

    independent = [i for i, sc in enumerate(scenarios) if sc[4] == 0]
    shared = [i for i, sc in enumerate(scenarios) if sc[4] > 0]

    def worst(hyp, grade, fn, which=independent):
        return fn(out[f"rate__s{i}__{hyp}__{grade}"] for i in which) if which else math.nan

    for c in c_w_power:
        out[f"power_c{c:g}"] = worst(f"paper_c{c:g}", "reproduced", min)
    out["power"] = worst("paper_c1", "reproduced", min) if 1.0 in c_w_power else math.nan
    out["false_no_effect"] = worst("no_effect", "reproduced", max)
    out["false_positive"] = worst("no_bracket", "reproduced", max)
    out["power_not_reproduced"] = worst("no_bracket", "not reproduced", min)
    out["no_effect_not_reproduced"] = worst("no_effect", "not reproduced", min)
    out["size_not_reproduced"] = worst("paper_cmax", "not reproduced", max)
    out["false_no_effect_shared"] = worst("no_effect", "reproduced", max, shared)
    out["size_not_reproduced_shared"] = worst("paper_cmax", "not reproduced", max, shared)
    return out


def load_matched(profile: str) -> pd.DataFrame:
    """The ``qat_matched`` rows rule v5 reads (evaluation version ``P9_EVAL_VERSION``); empty if none."""
    from .store import load_runs

    try:
        return load_runs(profile, experiment="qat_matched", eval_version=P9_EVAL_VERSION)
    except FileNotFoundError:
        return pd.DataFrame()


def matched_complete(profile: str, rows: pd.DataFrame) -> tuple[int, int]:
    """(runs of the declared ``qat_matched`` grid with every observation the test reads — each PTQ at
    ``P9_EVAL_VERSION`` — in ``rows``, whatever its status; runs declared). The test is read only when the
    two are equal and nonzero (``sweep.plan``; only observation ids are looked at). A run that failed
    counts as done: its units are then left out as ``not finite`` and counted in the verdict."""
    from .sweep import plan

    have = set(rows["obs_id"]) if "obs_id" in rows else set()
    specs = plan(profile, "qat_matched")
    done = sum(bool(ids) and all(i in have for i in ids)
               for ids in ([s.obs_id(p, e) for p in s.ptq for e in s.evals if e.version == P9_EVAL_VERSION]
                           for s in specs))
    return done, len(specs)

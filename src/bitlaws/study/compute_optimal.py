"""The compute-optimal chapter: Eq. 7's P*, N*, D* and D_crit on the paper's constants and ours,
and the verdicts P6, P7 and P8.

``paper_analysis`` evaluates the analysis on the paper's Table 2 constants, ``ours_analysis`` on
our fitted ones (``bitlaws.study.law_fits``), ``optimal_draws`` on every resample of the pipeline
bootstrap (``law_fits.pipeline_bootstrap``), whose percentiles give the intervals; ``verdict_p6``
also reads the compute-matched suite (``low_precision_training.compute_matched_summary``).
Rules (each verdict's docstring has the full text and its history):

* P6 — our P* with its 95 % interval: inside [6, 9] bits with the suite resolving its minimum to
  6–8 bits, reproduced; one of the two, partly; outside the band (or a suite minimum elsewhere),
  not reproduced; straddling it with no resolving suite, inconclusive. "Independent of C" is
  derived from the form.
* P7 — derived: N*(4)/N*(P*) with its interval and the share of resamples where N* rises and D*
  falls below P*.
* P8 — derived: the slope of P* in ln(D/N) at fixed N with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..laws import forms, optimal
from .claims import CLAIMS, Verdict, finite_or_na, inputs_identity, store_verdicts
from .law_fits import PIPELINE_STAGES, current_fits, params_of, pipeline_boot_is_current
from .low_precision_training import compute_matched_summary
from .store import data_dir

__all__ = ["BRUTE_FORCE_RESOLUTION_BITS", "paper_analysis", "ours_analysis", "ours_constants", "optimal_draws",
           "interval", "verdict_p6",
           "verdict_p7", "verdict_p8", "optimal_verdicts", "refresh_optimal_verdicts"]

_COMPUTES = (1e19, 1e21, 1e23, 1e25)
# The brute-force P* (nested bounded searches over a loss that is flat at its minimum) is determined
# to ~1e-4 bits; a spread of P* over C below 1e-3 bits is not resolved.
BRUTE_FORCE_RESOLUTION_BITS = 1e-3
_DN_RANGE = (10.0, 1e5)
_FIXED_N = 1e9


def _p_star_vs_dn(params, n=_FIXED_N, dn=_DN_RANGE, k=25):
    ratios = np.geomspace(*dn, k)
    ps = np.array([optimal.optimal_precision_fixed_n(n, n * r, params) for r in ratios])
    slope, icept = np.polyfit(np.log(ratios), ps, 1)
    fitted = slope * np.log(ratios) + icept
    r2 = 1 - np.sum((ps - fitted) ** 2) / np.sum((ps - ps.mean()) ** 2)
    return ratios, ps, float(slope), float(r2)


def _analysis(params: Mapping[str, float], with_brute: bool = True) -> dict[str, float]:
    """The P6–P8 numbers for one set of constants (Chinchilla + γ's + offsets)."""
    out: dict[str, float] = {}
    p_star = optimal.optimal_precision(params)
    out["p_star"] = p_star
    out["p_star_no_offsets"] = optimal.optimal_precision(params, offsets=False)
    if with_brute:
        bf = [optimal.brute_force_optimum(c, params)["bits"] for c in _COMPUTES]
        out["p_star_brute_min"], out["p_star_brute_max"] = min(bf), max(bf)
        out["p_star_spread_over_c"] = max(bf) - min(bf)
        # What the search can resolve: an upper bound at BRUTE_FORCE_RESOLUTION_BITS, so that a spread
        # that is numerical noise (1e-7 on one machine, 1e-4 on another) is stored as the same bound.
        out["p_star_spread_bound"] = max(BRUTE_FORCE_RESOLUTION_BITS, math.ceil(
            out["p_star_spread_over_c"] / BRUTE_FORCE_RESOLUTION_BITS) * BRUTE_FORCE_RESOLUTION_BITS)
    # P7: N*, D* as P falls from P* to 4 bits, at a fixed C
    c = 1e21
    ps = np.linspace(p_star, max(4.0, optimal.precision_lower_bound(params) + 0.05), 30)
    n_star, d_star = optimal.optimal_n_d(ps, c, params)
    out["n_rises_below_p_star"] = float(np.all(np.diff(n_star) > 0))
    out["d_falls_below_p_star"] = float(np.all(np.diff(d_star) < 0))
    n4, _ = optimal.optimal_n_d(np.array([4.0, 16.0, p_star]), c, params)
    out["n_star_4_over_p_star"] = float(n4[0] / n4[2])
    out["n_star_4_over_16"] = float(n4[0] / n4[1])
    # P8: fixed N
    _, _, slope, r2 = _p_star_vs_dn(params)
    out["fixed_n_slope_per_ln_dn"] = slope
    out["fixed_n_linear_r2"] = r2
    out["fixed_n_asymptotic_slope"] = optimal.fixed_n_asymptotic_slope(params)
    return out


def paper_analysis() -> dict[str, float]:
    """The compute-optimal analysis on the paper's Table 2 constants (``forms.PAPER_CONSTANTS``).

    Returns:
        ``p_star`` (7.0), ``p_star_no_offsets`` (3.5), the brute-force P* range over C ∈ 10^19–10^25,
        the P7 monotonicity flags and ratios, the P8 slope/R² of P* in ln(D/N) at N = 10⁹ and
        P* at the Llama-3 markers (``p_star_llama3_8b`` …), D_crit at N = 30M for INT3/INT4.
    """
    params = forms.PAPER_CONSTANTS
    out = _analysis(params)
    gbar = np.mean([params[f"gamma_{x}"] for x in forms.COMPONENTS])
    out["p_star_mean_gamma_no_offsets"] = optimal.optimal_precision_single_gamma(float(gbar))
    for name, (n, d) in optimal.LLAMA3_MARKERS.items():
        key = "p_star_" + name.lower().replace("-", "").replace(" ", "_")
        out[key] = optimal.optimal_precision_fixed_n(n, d, params)
    out["d_crit_30m_int3"] = float(optimal.critical_data_size(30e6, 3, params))
    out["d_crit_30m_int4"] = float(optimal.critical_data_size(30e6, 4, params))
    return out


def _ours_params(fits: Mapping[str, dict]) -> tuple[dict | None, list[str]]:
    missing = [s for s in ("chinchilla", "neff_w", "neff_a", "neff_kv") if params_of(fits.get(s)) is None]
    if missing:
        return None, missing
    merged = {}
    for s in ("chinchilla", "neff_w", "neff_a", "neff_kv"):
        merged.update(params_of(fits[s]))
    return merged, []


def ours_constants(fits: Mapping[str, dict]) -> dict[str, float] | None:
    """Our constants in the form of ``forms.PAPER_CONSTANTS``: the Chinchilla fit (A, B, E, α, β)
    with the marginal γ_x, n_x of ``neff_w``, ``neff_a``, ``neff_kv``; None while any is missing."""
    return _ours_params(fits)[0]


def ours_analysis(fits: Mapping[str, dict]) -> tuple[dict[str, float] | None, list[str]]:
    """The same analysis on our fitted constants, or (None, the stages still missing)."""
    params, missing = _ours_params(fits)
    if params is None:
        return None, missing
    return _analysis(params), []


_QAT_MISSING = ("our γ_w, γ_a, γ_kv need the P_w/P_a/P_kv training sweeps, which are not run yet "
                "(missing fits: {missing})")


# The fit records the compute-optimal analysis reads (P6–P8): our constants come from these stages.
_OPTIMAL_STAGES = ("chinchilla", "neff_w", "neff_a", "neff_kv", "pipeline_boot")


def _optimal_inputs(claim_id: str, fits: Mapping[str, dict], profile: str, rows: pd.DataFrame | None = None) -> str:
    """P6–P8's identity: the fit records' input hashes (the rows they were fitted on, not their
    fitted numbers; the pipeline bootstrap's included), the paper's typed Table 2 constants, and for
    P6 the rows of the suite."""
    return inputs_identity(claim_id, profile, records={s: fits.get(s) for s in _OPTIMAL_STAGES},
                           frames={} if rows is None else {"rows": rows},
                           constants=dict(forms.PAPER_CONSTANTS))


def optimal_draws(fits: Mapping[str, dict], df: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The compute-optimal analysis on every resample of the pipeline bootstrap.

    Args:
        fits: the profile's fit records (``law_fits.load_fits``), with ``pipeline_boot``.
        df: the rows it must have been made from (``pipeline_boot_is_current``); None skips the check.

    Returns:
        One row per resample whose constants give a defined analysis (columns as ``_analysis``
        without the brute-force search; ``attrs["dropped"]`` counts the others, ``attrs["n_boot"]``
        all), or None without a current, successful record.
    """
    rec = fits.get("pipeline_boot")
    if not rec or rec.get("status") != "ok" or (df is not None and not pipeline_boot_is_current(rec, df)):
        return None
    if set(rec.get("stages", ())) != set(PIPELINE_STAGES):  # the analysis needs every part's γ and n
        return None
    rows, dropped = [], 0
    for draw in rec["draws"]:
        try:
            rows.append(_analysis(draw, with_brute=False))
        except (ValueError, ZeroDivisionError, FloatingPointError):  # constants with no interior optimum
            dropped += 1
    if not rows:
        return None
    out = pd.DataFrame(rows)
    out.attrs["dropped"] = dropped  # resamples whose analysis is undefined: reported beside every interval
    out.attrs["n_boot"] = len(rec["draws"])
    return out


def interval(values) -> tuple[float, float]:
    """The 95 % percentile interval of the finite ``values`` (NaN, NaN when fewer than two)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return math.nan, math.nan
    lo, hi = np.percentile(x, [2.5, 97.5])
    return float(lo), float(hi)


def _ci_txt(ci: tuple[float, float], fmt: str = ".2f") -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if all(math.isfinite(c) for c in ci) else "[no interval]"


def verdict_p6(fits: Mapping[str, dict], profile: str, paper: Mapping[str, float] | None = None,
               suite: Mapping | None = None, rows: pd.DataFrame | None = None,
               draws: pd.DataFrame | None = None) -> Verdict:
    """P6: compute-optimal precision ≈ 7–8 bits, independent of compute (rule in the module docstring).

    `suite` (``bitlaws.study.low_precision_training.compute_matched_summary``) adds the empirical side. When the
    compute-matched suite is complete, its minimum is read against its seed noise: the suite
    *resolves* the paper's FP6–FP8 minimum if its lowest mean loss is at 6 or 8 bits and every
    member within two standard errors of it (``near_best``) is at 6 or 8 bits; it is *consistent*
    with it if 6 or 8 bits is among ``near_best``.

    Rule (version 3): our P* is read with its 95 % interval from the pipeline bootstrap
    (``draws``: every stage refitted per resample of runs). **Not reproduced** if the interval
    lies outside [6, 9] bits or the suite's noise-resolved minimum lies outside 6–8 bits;
    **reproduced** if the interval lies inside [6, 9] and the suite resolves its minimum to 6–8;
    **partly** if one of those two holds and nothing contradicts the claim; **inconclusive** if
    the interval straddles the band and no suite resolves the minimum (our design cannot tell).
    Without draws the point estimate stands for the interval. "The same for every C" is a
    consequence of the form (``p_star_spread_bound``), derived, not tested: one compute budget
    was run.

    (Version 1, written before the suite ran, asked only for the lowest loss at 6 or 8 bits. With
    one seed per member the lowest was at 12 bits, with three at 8 bits, inside the noise both
    times, so version 2 read the noise-resolved minimum. Version 3 replaces the point P* by its
    interval, once the pipeline bootstrap existed (a change after the data: a referee had measured
    it at [4.6, 7.2]), and grades an interval that straddles the band inconclusive rather than
    partly, as a second referee asked.)
    """
    paper = dict(paper or paper_analysis())
    ours, missing = ours_analysis(fits)
    det = {"paper_p_star": paper["p_star"], "paper_p_star_no_offsets": paper["p_star_no_offsets"],
           "paper_p_star_spread_bound": paper["p_star_spread_bound"]}
    suite_txt, suite_ok = "no compute-matched suite yet", None
    suite_consistent = None
    if suite and suite.get("complete"):
        best = float(suite["best_bits"])
        near_set = {float(b) for b in (suite.get("near_best") or [best])}
        suite_ok = best in (6.0, 8.0) and near_set <= {6.0, 8.0}
        suite_consistent = bool(near_set & {6.0, 8.0})
        det["suite_best_bits"] = best
        seeds = suite.get("seeds") or {}
        suite_txt = ("compute-matched suite (N·P constant, one D): lowest mean loss at P = "
                     + f"{best:g} bits (" + ", ".join(
                         f"{b:g}: {v:.4f}" + (f" ×{seeds[b]}" if seeds.get(b, 1) > 1 else "")
                         for b, v in sorted(suite["losses"].items()))
                     + " nats/byte; ×k = mean of k seeds)")
        sigma, near = suite.get("sigma", math.nan), suite.get("near_best") or []
        if math.isfinite(sigma) and near:
            src = ("the suite's own seeds" if suite.get("sigma_source") == "suite" else "the base grid's seeds")
            suite_txt += (f"; within two standard errors of the lowest (σ = {sigma:.4f} from {src}): "
                          f"P ∈ {{{', '.join(f'{b:g}' for b in near)}}}")
    elif suite and suite.get("losses"):
        n_in = sum((suite.get("seeds") or {}).values()) or len(suite["losses"])
        suite_txt = f"compute-matched suite incomplete ({n_in} of {suite.get('planned')} runs); not used"
    paper_txt = (f"from Table 2: P* = {paper['p_star']:.2f} bits (argmax of N_eff/(N·P)), the same "
                 f"within {paper['p_star_spread_bound']:.0e} bits (the search's resolution) for C = 10^19–10^25; "
                 f"{paper['p_star_no_offsets']:.2f} "
                 "bits without the offsets n_x")
    inputs = _optimal_inputs("P6", fits, profile, rows)
    if ours is None:
        return Verdict("P6", "pending", CLAIMS["P6"]["paper"],
                       f"pending; the paper's own constants are consistent with its claim ({paper_txt})",
                       _QAT_MISSING.format(missing=", ".join(missing)) + f"; {suite_txt}",
                       profile, inputs, finite_or_na(det))
    p = ours["p_star"]
    ci = interval(draws["p_star"]) if draws is not None else (math.nan, math.nan)
    lo, hi = (ci if all(math.isfinite(c) for c in ci) else (p, p))
    inside, disjoint = 6.0 <= lo and hi <= 9.0, hi < 6.0 or lo > 9.0
    against = suite_ok is False and not suite_consistent  # the suite's resolved minimum is elsewhere
    if disjoint or against:
        verdict = "not reproduced"
    elif inside and suite_ok:
        verdict = "reproduced"
    elif inside or suite_ok:
        verdict = "partly"
    else:  # the interval straddles the band and no suite resolves the minimum
        verdict = "inconclusive"
    det.update({"ours_p_star": p, "ours_p_star_spread_bound": ours["p_star_spread_bound"]})
    if draws is not None:
        det.update({"ours_p_star_lo": ci[0], "ours_p_star_hi": ci[1], "boot_draws": float(len(draws)),
                    "boot_dropped": float(draws.attrs.get("dropped", 0)),
                    "boot_share_in_band": float(((draws["p_star"] >= 6) & (draws["p_star"] <= 9)).mean())})
    where = ("lies inside" if inside else "lies outside" if disjoint else "straddles")
    legs = (f"graded {verdict}: our P* interval {where} 6–9 bits"
            + ("; the suite is not complete" if suite_ok is None else
               "; the suite resolves its minimum to 6–8 bits" if suite_ok else
               "; the suite is consistent with a 6–8-bit minimum but does not resolve it from the members "
               "outside that range" if suite_consistent else
               "; the suite's noise-resolved minimum lies outside 6–8 bits"))
    return Verdict("P6", verdict, CLAIMS["P6"]["paper"],
                   f"P* = {p:.2f} {_ci_txt(ci)} bits from our γ's"
                   + (f" (95 % interval over {len(draws)} resamples of the whole fitted pipeline"
                      + (f", {draws.attrs['dropped']} more without a defined optimum left out"
                         if draws.attrs.get("dropped") else "") + "; "
                      f"{det['boot_share_in_band']:.0%} of them in 6–9 bits)" if draws is not None else
                      " (no pipeline bootstrap: no interval)")
                   + f"; the same within {ours['p_star_spread_bound']:.0e} bits for every C (derived from the form); "
                   f"{suite_txt}",
                   f"{legs}. {paper_txt[0].upper() + paper_txt[1:]}; γ and n are in bits, so ours and the paper's can "
                   "be set side by side (whether they agree is what the comparison tests)",
                   profile, inputs, finite_or_na(det))


def verdict_p7(fits: Mapping[str, dict], profile: str, paper: Mapping[str, float] | None = None,
               draws: pd.DataFrame | None = None) -> Verdict:
    """P7: at a fixed low precision, spend compute on parameters before data — **derived**.

    With Eq. 6's form, N* rises and D* falls below P* for every constant set with P* above 4 bits,
    so the direction is a consequence of the fitted form, not a test (version 2; version 1 graded
    it reproduced). Reported: N*(4 bits)/N*(P*) with its 95 % interval from the pipeline bootstrap
    beside the paper's, and the share of resamples in which the direction holds.
    """
    paper = dict(paper or paper_analysis())
    ours, missing = ours_analysis(fits)
    det = {"paper_n_rises": paper["n_rises_below_p_star"], "paper_d_falls": paper["d_falls_below_p_star"],
           "paper_n_star_4_over_p_star": paper["n_star_4_over_p_star"], "paper_n_star_4_over_16": paper["n_star_4_over_16"]}
    paper_txt = (f"from Table 2, as P falls from P* to 4 bits N* {'rises' if paper['n_rises_below_p_star'] else 'does not rise'} "
                 f"and D* {'falls' if paper['d_falls_below_p_star'] else 'does not fall'} at every step; "
                 f"N*(4 bits) = {paper['n_star_4_over_p_star']:.2f}× N*(P*)")
    if ours is None:
        return Verdict("P7", "pending", CLAIMS["P7"]["paper"], f"pending; {paper_txt}",
                       _QAT_MISSING.format(missing=", ".join(missing)), profile, _optimal_inputs("P7", fits, profile),
                       finite_or_na(det))
    ci = interval(draws["n_star_4_over_p_star"]) if draws is not None else (math.nan, math.nan)
    det.update({"ours_n_rises": ours["n_rises_below_p_star"], "ours_d_falls": ours["d_falls_below_p_star"],
                "ours_n_star_4_over_p_star": ours["n_star_4_over_p_star"]})
    share = ""
    if draws is not None:
        both = float(((draws["n_rises_below_p_star"] > 0) & (draws["d_falls_below_p_star"] > 0)).mean())
        det.update({"ours_n_star_4_over_p_star_lo": ci[0], "ours_n_star_4_over_p_star_hi": ci[1],
                    "boot_share_direction": both, "boot_draws": float(len(draws))})
        share = f"; the direction holds in {both:.0%} of {len(draws)} resamples of the fitted pipeline"
    return Verdict("P7", "derived", CLAIMS["P7"]["paper"],
                   f"with our constants N* {'rises' if ours['n_rises_below_p_star'] else 'does not rise'} and D* "
                   f"{'falls' if ours['d_falls_below_p_star'] else 'does not fall'} below P*; N*(4) = "
                   f"{ours['n_star_4_over_p_star']:.2f} {_ci_txt(ci)}× N*(P*) (paper {paper['n_star_4_over_p_star']:.2f}×)"
                   + share,
                   f"derived, not tested: Eq. 6's form gives this direction for any constants with P* above 4 bits; "
                   f"{paper_txt}", profile, _optimal_inputs("P7", fits, profile), finite_or_na(det))


def verdict_p8(fits: Mapping[str, dict], profile: str, paper: Mapping[str, float] | None = None,
               draws: pd.DataFrame | None = None) -> Verdict:
    """P8: at fixed N, the optimal precision grows like log(D/N) — **derived**.

    The growth in ln(D/N) follows from the fitted form for most constant sets, so it is reported
    as a consequence, not tested (version 2; version 1 graded it reproduced): the slope of P* in
    ln(D/N) at N = 10⁹ over D/N ∈ [10, 10⁵] with its 95 % interval from the pipeline bootstrap,
    beside the paper's.
    """
    paper = dict(paper or paper_analysis())
    ours, missing = ours_analysis(fits)
    det = {"paper_slope_per_ln_dn": paper["fixed_n_slope_per_ln_dn"], "paper_linear_r2": paper["fixed_n_linear_r2"],
           "paper_asymptotic_slope": paper["fixed_n_asymptotic_slope"]}
    paper_txt = (f"from Table 2 at N = 10⁹: P* rises by {paper['fixed_n_slope_per_ln_dn']:.2f} bits per e-fold of D/N "
                 f"over D/N = 10–10⁵, linear in ln(D/N) with R² = {paper['fixed_n_linear_r2']:.3f} "
                 f"(asymptotically β·γ_w = {paper['fixed_n_asymptotic_slope']:.2f})")
    if ours is None:
        return Verdict("P8", "pending", CLAIMS["P8"]["paper"], f"pending; {paper_txt}",
                       _QAT_MISSING.format(missing=", ".join(missing)), profile, _optimal_inputs("P8", fits, profile),
                       finite_or_na(det))
    ci = interval(draws["fixed_n_slope_per_ln_dn"]) if draws is not None else (math.nan, math.nan)
    det.update({"ours_slope_per_ln_dn": ours["fixed_n_slope_per_ln_dn"], "ours_linear_r2": ours["fixed_n_linear_r2"]})
    if draws is not None:
        det.update({"ours_slope_lo": ci[0], "ours_slope_hi": ci[1], "boot_draws": float(len(draws))})
    return Verdict("P8", "derived", CLAIMS["P8"]["paper"],
                   f"with our constants P* rises by {ours['fixed_n_slope_per_ln_dn']:.2f} {_ci_txt(ci)} bits per e-fold "
                   f"of D/N (paper {paper['fixed_n_slope_per_ln_dn']:.2f}; R² of the linear fit "
                   f"{ours['fixed_n_linear_r2']:.3f})",
                   f"derived, not tested: the growth in ln(D/N) follows from the fitted form; {paper_txt}", profile,
                   _optimal_inputs("P8", fits, profile), finite_or_na(det))


def optimal_verdicts(fits: Mapping[str, dict], df: pd.DataFrame, profile: str) -> dict[str, Verdict]:
    """P6, P7 and P8 from a profile's fits and rows (the rows give P6's compute-matched suite)."""
    paper = paper_analysis()
    try:
        suite = compute_matched_summary(df, profile)
    except KeyError:  # a profile without a declared suite
        suite = None
    draws = optimal_draws(fits, df)
    return {"P6": verdict_p6(fits, profile, paper, suite, df, draws), "P7": verdict_p7(fits, profile, paper, draws),
            "P8": verdict_p8(fits, profile, paper, draws)}


def refresh_optimal_verdicts(profile: str = "cpu", write: bool = True, refit: bool = True) -> dict[str, Verdict]:
    """Recompute P6–P8 from the committed rows and fits (refitting stale fits in memory with
    ``refit``); with ``write``, merge them into ``data/verdicts.json`` and the README's ledger
    (``bitlaws.study.claims.store_verdicts``; only the book's profile should be written).

    Raises:
        FileNotFoundError: no observations for ``profile``.
    """
    df, fits = current_fits(profile, write, refit)
    new = optimal_verdicts(fits, df, profile)
    if write:
        store_verdicts(new, data_dir())
    return new

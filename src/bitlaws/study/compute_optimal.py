"""The compute-optimal chapter: Eq. 7's P*, N*, D* and D_crit on the paper's constants and ours,
and the verdicts P6, P7 and P8.

``paper_analysis`` evaluates the analysis on the paper's Table 2 constants, ``ours_analysis`` on
our fitted ones (``bitlaws.study.law_fits``), ``optimal_draws`` on every resample of the pipeline
bootstrap (``law_fits.pipeline_bootstrap``), whose percentiles give the intervals; ``verdict_p6``
also reads the compute-matched suite (``low_precision_training.compute_matched_summary``).
Rules (each verdict's docstring has the full text and its history):

* P6 — our P*'s 95 % interval inside [6, 9] bits and the suite resolving its minimum to 6–8 bits:
  reproduced; one of the two: partly; outside the band (or a suite minimum elsewhere): not
  reproduced; straddling it with no resolving suite: inconclusive. "Independent of C" is derived.
* P7 — derived: N*(4)/N*(P*) with its interval, and the share of resamples where N* rises and D*
  falls below P*. P8 — derived: the slope of P* in ln(D/N) at fixed N with its interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..laws import forms, optimal
from .claims import CLAIMS, Verdict, finite_or_na, inputs_identity
from .figures.style import human
from .law_fits import PIPELINE_STAGES, current_fits, params_of, pipeline_boot_is_current
from .low_precision_training import compute_matched_summary, compute_matched_table
from .store import data_dir
from .sweep import PROFILES

__all__ = ["BRUTE_FORCE_RESOLUTION_BITS", "paper_analysis", "ours_analysis", "ours_constants", "optimal_draws",
           "interval", "verdict_p6",
           "verdict_p7", "verdict_p8", "optimal_verdicts",
           # the chapter's tables and sentences
           "P_STAR_COMPUTES", "PAPER_SUITE", "constants_note", "brute_force_p_star", "p_star_table", "n_d_star_curves",
           "growth_exponent_table", "fixed_n_curves", "D_CRIT_COLUMNS", "critical_data_table",
           "critical_data_style", "inference_cost_curves",
           "inference_slopes", "paper_suite_table", "Suite", "compute_matched_suite", "suite_table", "suite_note",
           "verdicts_markdown"]

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


def _sentence(text: str) -> str:
    """`text` as a sentence: its first letter a capital, one full stop at its end."""
    return text[:1].upper() + text[1:].rstrip(". ") + "."


def _ci_txt(ci: tuple[float, float], fmt: str = ".2f") -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if all(math.isfinite(c) for c in ci) else "[no interval]"


# P6's P* leg's power (``boot_check.p6_pstar_rows``: simulated datasets graded by the verdict's own pipeline
# bootstrap), one row per dataset in ``data/checks/<profile>/``: read only for the rows it was made from.
P6_PSTAR_CSV = "p6_pstar_power.csv"


def _p6_pstar_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    return (Path(root) if root is not None else data_dir()) / "checks" / profile / P6_PSTAR_CSV


def stage_residual_sd(df: pd.DataFrame, fits: Mapping[str, dict]) -> dict[str, float]:
    """The RMS residual [nats] of our point fits on each frame P6's P* leg simulates (``chinchilla`` and the
    three marginal ``neff_x`` stages: Eqs. 3–4 at our Chinchilla and N_eff constants against each run's
    loss): the scatter our runs show about the fitted law, misfit included, beside one run's seed σ.

    Raises:
        ValueError: the Chinchilla or a marginal N_eff fit missing.
    """
    from .law_fits import _bits, stage_frames

    ours, missing = _ours_params(fits)
    if ours is None:
        raise ValueError(f"stage_residual_sd needs the chinchilla and marginal N_eff fits (missing: {missing})")
    frames, out = stage_frames(df), {}
    for name in ("chinchilla", "neff_w", "neff_a", "neff_kv"):
        f = frames[name]
        bits = [_bits(f, c).to_numpy(float) for c in ("bits_w", "bits_a", "bits_kv")]
        pred = forms.qat_loss(f["n_params"].to_numpy(float), f["n_tokens"].to_numpy(float), *bits, ours)
        out[name] = float(np.sqrt(np.nanmean((f["loss_val"].to_numpy(float) - pred) ** 2)))
    return out


P6_PSTAR_NOISES = ("seed", "seed_upper", "residual")


def simulation_design(profile: str, root: str | os.PathLike | None, caller: str, noise: str,
                      needs: Sequence[str] = ()) -> dict[str, Any]:
    """What a power simulation on the profile's committed design reads (P3's and P6's writers): the training
    rows the freeze admits, their fits, checked present and current, and the noise inputs.

    Args:
        profile: a declared profile. root: a ``data/`` folder. caller: the writer's name, for the errors.
        noise: ``residual`` adds each stage's residual σ (:func:`stage_residual_sd`); any other, None.
        needs: fits needed beside ``chinchilla`` (``neff_w`` …).

    Returns:
        ``df`` (the rows), ``fits``, ``chin`` (the Chinchilla constants), ``inputs`` (``qat_design._p4_sim_inputs``),
        ``stage_sd`` (or None), ``frames`` (``law_fits.stage_frames``) and ``read`` (the rows' SHA-256, named in
        every simulated row's key).

    Raises:
        ValueError: a needed fit missing, or the fits made from other training rows than the freeze reads
            (both: run ``python -m bitlaws fit``).
    """
    from .. import _io
    from . import law_fits as la
    from . import qat_design, store

    df = store.load_runs(profile, experiment=la.TRAINING_EXPERIMENTS, root=root)
    fits = la.load_fits(profile, root)
    missing = [s for s in ("chinchilla", *needs) if la.params_of(fits.get(s)) is None]
    if missing:
        raise ValueError(f"{caller} needs the {', '.join(missing)} fit(s) of {profile!r}; run "
                         f"`python -m bitlaws fit --profile {profile}`")
    if not la.fits_are_current(fits, df):  # the rows' key names the training rows, not the fits: they must agree
        raise ValueError(f"the fits of {profile!r} were made from other training rows than the freeze reads now; "
                         f"run `python -m bitlaws fit --profile {profile}` first (the simulation draws from them)")
    return {"df": df, "fits": fits, "chin": la.params_of(fits["chinchilla"]), "inputs": qat_design._p4_sim_inputs(df),
            "stage_sd": stage_residual_sd(df, fits) if noise == "residual" else None,
            "frames": la.stage_frames(df), "read": _io.frame_sha256(df)}


def p6_seed_sd(inputs: tuple, noise: str) -> float:
    """σ_seed [nats] the P* leg simulates under ``noise`` when no ``seed_sd`` is given, from
    ``qat_design._p4_sim_inputs``' tuple: ``seed`` the point estimate; ``seed_upper`` its 95 % upper end
    capped at one run's σ (that run's σ where the end is not estimable); ``residual`` 0 (no seed block)."""
    seed_noise, block, point_sd = inputs[:3]
    if noise == "residual":
        return 0.0
    if noise == "seed_upper":
        return min(block["hi"], seed_noise.loss_sd) if math.isfinite(block["hi"]) else seed_noise.loss_sd
    return point_sd


def write_p6_pstar_power(profile: str = "cpu", worlds=None, datasets=range(40), n_boot: int = 100, seed: int = 0,
                         seed_sd: float | None = None, root: str | os.PathLike | None = None,
                         progress: bool = False, noise: str = "seed", floor: float | None = None) -> Path:
    """Simulate P6's P* leg on the profile's committed design and append one row per dataset to
    ``<root>/checks/<profile>/p6_pstar_power.csv`` as each finishes (``store.append_rows``, keyed by
    ``sim_id``: a rerun skips the datasets already there, so a killed run resumes and two processes on
    different worlds may write at once). Before it simulates any, it records every dataset it was asked for
    in :func:`p6_pstar_plan_path` (same key), so the cascade sees a killed call's unfinished datasets.

    Args:
        profile: a declared profile with its Chinchilla and marginal N_eff fits.
        worlds: names of ``power.P6_PSTAR_WORLDS`` (default all three; one name alone is one world).
            datasets: dataset indices.
        n_boot: pipeline resamples per dataset. seed: the generator's seed.
        seed_sd: σ_seed [nats]; None: the point estimate P4's simulation reads (``qat_design._p4_sim_inputs``).
        root: a ``data/`` folder. progress: a progress bar.
        noise: ``seed`` (one run's seed σ, σ_seed of it shared per (N, seed)), ``seed_upper`` (the same with
            σ_seed at the upper end of its 95 % interval, capped at one run's σ: the sensitivity variant P4's
            ``power_seed_hi`` also reads) or ``residual`` (each frame's runs at the RMS residual of our own
            fit on it, :func:`stage_residual_sd`; σ_seed 0).
        floor: the floor the paper's clipped f_x are generated at (``power.extended_factor``; default
            ``power.NEFF_F_FLOOR``, the one the verdict's rows use; 0.02 and 0.2 are P4's variants). Rows at
            another floor, or with ``seed_upper``, are read by :func:`p6_pstar_sensitivity`, not the verdict.

    Raises:
        ValueError: an unknown world or noise, a floor outside (0, 1), ``seed_sd`` given with ``seed_upper``
            or ``residual``, or the fits missing or made from other rows (run ``python -m bitlaws fit``).
    """
    if noise not in P6_PSTAR_NOISES:
        raise ValueError(f"unknown noise {noise!r}; allowed: {', '.join(map(repr, P6_PSTAR_NOISES))}")
    if noise != "seed" and seed_sd is not None and seed_sd != 0:
        raise ValueError(f"seed_sd {seed_sd!r} with noise {noise!r}: that noise sets σ_seed itself "
                         "(leave seed_sd None)")
    if floor is not None and not (isinstance(floor, (int, float)) and 0 < float(floor) < 1):
        raise ValueError(f"floor must be a number in (0, 1), got {floor!r}")
    if isinstance(worlds, str):
        worlds = [worlds]
    import datetime as dt

    from .boot_check import P6_PSTAR_COLUMNS, P6_PSTAR_PLAN_COLUMNS, p6_pstar_identity, p6_pstar_rows
    from .power import NEFF_F_FLOOR, P6_PSTAR_WORLDS, p6_pstar_worlds
    from .store import append_rows, read_rows

    worlds = list(P6_PSTAR_WORLDS if worlds is None else worlds)
    bad = [w for w in worlds if w not in P6_PSTAR_WORLDS]
    if bad:
        raise ValueError(f"unknown world(s) {bad}; allowed: {list(P6_PSTAR_WORLDS)}")
    design = simulation_design(profile, root, "write_p6_pstar_power", noise, ("neff_w", "neff_a", "neff_kv"))
    chin, inputs, stage_sd = design["chin"], design["inputs"], design["stage_sd"]
    ours = _ours_params(design["fits"])[0]
    seed_noise = inputs[0]
    seed_sd = p6_seed_sd(inputs, noise) if noise != "seed" or seed_sd is None else float(seed_sd)
    floor = NEFF_F_FLOOR if floor is None else float(floor)
    path = _p6_pstar_path(profile, root)
    have = set(read_rows(path, P6_PSTAR_COLUMNS, "sim_id").get("sim_id", [])) if path.exists() else set()
    every = p6_pstar_worlds(ours)
    frames, read = design["frames"], design["read"]
    # the plan first: every dataset asked for, so a call killed part-way leaves what it did not finish on record
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    planned = [{**p6_pstar_identity(w, k, seed=seed, seed_sd=seed_sd, floor=floor, n_boot=n_boot,
                                    residual=stage_sd is not None, noise_label="seed" if noise == "residual" else noise,
                                    inputs_sha256=read), "timestamp": stamp} for w in worlds for k in datasets]
    append_rows(p6_pstar_plan_path(profile, root), planned, P6_PSTAR_PLAN_COLUMNS, "sim_id")
    for w in worlds:
        left = [r["dataset"] for r in planned if r["world"] == w and r["sim_id"] not in have]
        for row in p6_pstar_rows(frames, chin, seed_noise, {w: every[w]}, left, n_boot=n_boot, seed=seed,
                                 seed_sd=seed_sd, floor=floor, inputs_sha256=read, progress=progress,
                                 stage_sd=stage_sd, noise_label="seed" if noise == "residual" else noise):
            append_rows(path, [row], P6_PSTAR_COLUMNS, "sim_id")
    return path


def p6_pstar_plan_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    """``<root>/checks/<profile>/p6_pstar_power_plan.csv``: the datasets each :func:`write_p6_pstar_power` call
    was asked for (``boot_check.P6_PSTAR_PLAN_COLUMNS``), beside the table of those it finished."""
    return _p6_pstar_path(profile, root).with_name("p6_pstar_power_plan.csv")


def load_p6_pstar_power(profile: str, df: pd.DataFrame, root: str | os.PathLike | None = None,
                        variants: bool = False) -> tuple[pd.DataFrame | None, str]:
    """The stored P* leg's datasets for the training rows ``df`` (:func:`write_p6_pstar_power`), or (None, why
    not): absent, by another simulation version (``power.P6_PSTAR_SIM_VERSION``), or made from other rows
    (``inputs_sha256`` ≠ ``df``'s hash). The verdict's rows only (noise ``seed`` or ``residual`` at
    ``power.NEFF_F_FLOOR``); ``variants=True``: every row, the sensitivity variants (other floors,
    ``seed_upper``) included."""
    from .._io import frame_sha256
    from .boot_check import P6_PSTAR_COLUMNS
    from .power import NEFF_F_FLOOR, P6_PSTAR_SIM_VERSION
    from .store import read_current_rows

    path = _p6_pstar_path(profile, root)
    tab, why = read_current_rows(path, P6_PSTAR_COLUMNS, "sim_id", P6_PSTAR_SIM_VERSION,
                                 frame_sha256(df), f"bitlaws.study.compute_optimal.write_p6_pstar_power('{profile}')")
    if tab is None:
        return None, why
    if not variants:  # the floor the simulation version names, and σ_seed as estimated
        tab = tab[(tab["floor"].astype(float) == NEFF_F_FLOOR) & tab["noise"].astype(str).isin(["seed", "residual"])]
        n_sd = tab[tab["noise"].astype(str) == "seed"].groupby("world")["seed_sd"].nunique()
        if (n_sd > 1).any():
            raise ValueError(f"{path}: the seed-noise rows of world(s) {sorted(n_sd.index[n_sd > 1])} hold more than one "
                             "σ_seed (a write with an explicit seed_sd); the verdict reads one simulation per world")
    return tab.reset_index(drop=True), ""


def p6_pstar_power_summary(tab: pd.DataFrame, our_width: float = math.nan) -> dict:
    """Per noise (``seed``, ``residual``) and world of :func:`load_p6_pstar_power`'s rows: ``n`` (datasets), the
    shares graded ``inside``, ``outside``, ``straddles`` and ``none``, ``width`` (median interval width, bits),
    ``wider`` (share of intervals at least ``our_width`` wide), ``p_star_true``, ``p_star_point`` (median fitted
    P*) and ``kept`` (median share of resamples with an interior optimum), keyed ``[noise][world]``; plus
    ``power`` and ``false_positive`` (paper / no_offsets inside at seed noise), ``power_residual`` (paper
    inside at the residual scatter; NaN without such rows) and ``our_width``. Rows without a ``noise``
    column are seed noise.

    Raises:
        ValueError: no seed-noise row of the ``paper`` or ``no_offsets`` world.
    """
    out: dict = {"our_width": float(our_width)}
    noise = tab["noise"].astype(str) if "noise" in tab else pd.Series("seed", index=tab.index)
    for (nz, w), g in tab.groupby([noise, tab["world"]], sort=False):
        grades, width = g["grade"].astype(str), g["width"].to_numpy(float)
        fin = width[np.isfinite(width)]
        out.setdefault(nz, {})[w] = {
            "n": float(len(g)), **{k: float((grades == k).mean()) for k in ("inside", "outside", "straddles", "none")},
            "width": float(np.median(fin)) if len(fin) else math.nan,
            "wider": float(np.mean(fin >= our_width)) if math.isfinite(our_width) and len(fin) else math.nan,
            "p_star_true": float(g["p_star_true"].iloc[0]), "p_star_point": float(g["p_star_point"].median()),
            "kept": float((g["n_p_star"].astype(float) / g["n_boot"].astype(float)).median()),
            "n_boot": float(g["n_boot"].astype(float).median())}
    seed = out.get("seed", {})
    missing = [w for w in ("paper", "no_offsets") if w not in seed]
    if missing:
        raise ValueError(f"p6_pstar_power_summary: no seed-noise rows of world(s) {missing}")
    out["power"], out["false_positive"] = seed["paper"]["inside"], seed["no_offsets"]["inside"]
    out["power_residual"] = out.get("residual", {}).get("paper", {}).get("inside", math.nan)
    return out


def p6_pstar_power_details(summary: Mapping, residual_sd: Mapping[str, float] | None = None,
                           seed_sd: float = math.nan) -> dict[str, float]:
    """Every number :func:`p6_pstar_power_text` prints, as verdict details (so ``verdicts --check`` compares
    them; prose numbers it masks): per noise ``nz`` (seed, residual) and world ``w`` (paper, no_offsets,
    ours), ``pstar_<nz>_<w>_<inside|straddles|outside>`` (shares of ``pstar_<nz>_<w>_n`` datasets),
    ``_width`` (median interval width, bits), ``_p_star_true`` (bits); ``pstar_seed_<w>_wider`` (the share of
    intervals at least as wide as ours); ``pstar_n_boot`` (resamples per simulated dataset);
    ``residual_over_seed_<stage>`` (a stage's RMS residual over one run's seed σ) and ``seed_sd_one_run``
    [nats/byte]."""
    from .power import P6_PSTAR_WORLDS

    out: dict[str, float] = {}
    for nz in ("seed", "residual"):
        for w in P6_PSTAR_WORLDS:
            r = summary.get(nz, {}).get(w)
            if r is None:
                continue
            for k in ("inside", "straddles", "outside", "width", "n", "p_star_true"):
                out[f"pstar_{nz}_{w}_{k}"] = float(r[k])
            if nz == "seed":
                out[f"pstar_seed_{w}_wider"] = float(r["wider"])
    if "paper" in summary.get("seed", {}):
        out["pstar_n_boot"] = float(summary["seed"]["paper"]["n_boot"])
    if residual_sd and math.isfinite(seed_sd) and seed_sd > 0:
        out.update({f"residual_over_seed_{k}": float(v / seed_sd) for k, v in residual_sd.items()})
        out["seed_sd_one_run"] = float(seed_sd)
    return out


def p6_pstar_power_text(summary: Mapping, residual_sd: Mapping[str, float] | None = None,
                        seed_sd: float = math.nan) -> str:
    """The P* leg's power, size and widths from :func:`p6_pstar_power_summary`, per noise (Wilson intervals on
    each world's inside share: the datasets are independent); with ``residual_sd`` (:func:`stage_residual_sd`)
    and one run's ``seed_sd`` [nats], their ratio per stage. One sentence per line (the chapter lists them;
    the ledger runs them together): seed noise, with the width of ours among its intervals; the residual
    scatter, with the verdict on the design where its power is below ``claims.POWER_MIN``."""
    from .claims import POWER_MIN, mc_interval
    from .power import P6_PSTAR_BAND, P6_PSTAR_WORLDS

    lo_b, hi_b = P6_PSTAR_BAND
    names = {"paper": "the paper's law", "no_offsets": "without its offsets", "ours": "at our own fitted constants"}

    def worlds(nz: str) -> str:
        rows = {w: summary[nz][w] for w in P6_PSTAR_WORLDS if w in summary[nz]}
        same_n = len({r["n"] for r in rows.values()}) == 1
        out = []
        for w, r in rows.items():
            a, b = mc_interval(r["inside"], r["n"])
            out.append(f"{names[w]} (P* = {r['p_star_true']:.1f}) {r['inside']:.0%} [{a:.0%}, {b:.0%}] inside, "
                       f"{r['straddles']:.0%} straddling, {r['outside']:.0%} outside, median width {r['width']:.1f} bits"
                       + ("" if same_n else f", {int(r['n'])} datasets"))
        n_txt = f"; {int(next(iter(rows.values()))['n'])} datasets each" if same_n else ""
        return f"{n_txt}): " + "; ".join(out)  # closes the parenthesis that names the noise

    seed = (f"The P* leg's power (`boot_check.p6_pstar_rows`: datasets simulated on our design, each interval graded "
            f"against {lo_b:g}–{hi_b:g} bits by our pipeline bootstrap with {int(summary['seed']['paper']['n_boot'])} "
            f"resamples against our 2000), at seed noise (one run's σ{worlds('seed')}")
    if math.isfinite(summary["our_width"]):
        wider = ", ".join(f"{summary['seed'][w]['wider']:.0%}" for w in P6_PSTAR_WORLDS if w in summary["seed"])
        seed += (f"; our interval is {summary['our_width']:.1f} bits wide, as wide as {wider} of the seed-noise "
                 "intervals (paper, no offsets, ours)")
    lines = [seed + "."]
    if "residual" in summary:
        rms = ""
        if residual_sd and math.isfinite(seed_sd) and seed_sd > 0:
            rms = (": " + ", ".join(f"{k.replace('neff_', 'N_eff ')} {v / seed_sd:.1f}×" for k, v in residual_sd.items())
                   + f" one run's seed σ of {seed_sd:.4f} nats")
        line = f"At our fits' residual scatter (each stage's RMS, misfit included{rms}" + worlds("residual")
        pr = summary["power_residual"]
        if math.isfinite(pr) and pr < POWER_MIN:
            hi = mc_interval(pr, summary["residual"]["paper"]["n"])[1]
            line += (f"; the leg's power is {pr:.0%}"
                     + (f", below {POWER_MIN:.0%} even at its interval's upper end ({hi:.0%})" if hi < POWER_MIN else "")
                     + ": through data that scatter like ours, this design cannot resolve the paper's P*")
        lines.append(line + ".")
    return "\n".join(lines)


# A variant is reported only on at least this many datasets shared with the verdict's rows.
P6_SENSITIVITY_MIN_N = 10


def p6_pstar_sensitivity(tab: pd.DataFrame, loss_sd: float = math.nan, seed_sd_hi: float = math.nan) -> pd.DataFrame:
    """The seed-noise P* leg under each simulation variant (:func:`load_p6_pstar_power` with ``variants=True``),
    paired with the verdict's own rows (floor ``power.NEFF_F_FLOOR``, noise ``seed``) on the same datasets:
    dataset k draws the same noise in every variant, so a variant is read by the grades it changes, not by
    a share over another set of datasets. Variants: the paper's clipped f_x generated at another floor, and
    noise ``seed_upper`` (σ_seed at its interval's upper end, capped at one run's σ).

    Args:
        tab: the table's rows for the current training rows, variants included.
        loss_sd: one run's seed σ [nats] and seed_sd_hi: σ_seed's 95 % upper end (``qat_design.seed_block_sd``),
            to say whether the ``seed_upper`` rows sit at the cap (all of a run's σ shared); NaN: not said.

    Returns:
        One row per (variant, world) with at least :data:`P6_SENSITIVITY_MIN_N` datasets shared with the
        verdict's rows: ``variant`` (words), ``noise``, ``floor``, ``seed_sd`` [nats], ``world``, ``n`` (shared
        datasets), ``inside`` and ``inside_graded`` (the shares inside the band on them, variant and verdict's),
        ``inside_lo``, ``inside_hi`` (Wilson, the variant's), ``changed`` (datasets whose grade differs),
        ``dp_star`` (mean change of the fitted P* [bits]); empty where there is none.
    """
    from .claims import mc_interval
    from .power import NEFF_F_FLOOR, P6_PSTAR_WORLDS

    cols = ["variant", "noise", "floor", "seed_sd", "world", "n", "inside", "inside_graded", "inside_lo", "inside_hi",
            "changed", "dp_star"]
    nz, fl = tab["noise"].astype(str), tab["floor"].astype(float)
    base = tab[(nz == "seed") & (fl == NEFF_F_FLOOR)]
    var = tab[nz.isin(["seed", "seed_upper"]) & ~((nz == "seed") & (fl == NEFF_F_FLOOR))]
    out = []
    for (noise, floor, sd, w), g in var.groupby([var["noise"].astype(str), var["floor"].astype(float),
                                                 var["seed_sd"].astype(float).round(8), var["world"].astype(str)]):
        pair = g.merge(base[base["world"].astype(str) == w], on="dataset", suffixes=("", "_graded"))
        if len(pair) < P6_SENSITIVITY_MIN_N:
            continue
        if noise == "seed":
            what = f"floor {floor:g}"
        elif math.isfinite(loss_sd) and abs(sd - loss_sd) <= 1e-7:  # at the cap (sd is rounded to 8 decimals)
            hi = f"; its 95 % upper end, {seed_sd_hi:.3f}, exceeds it" if math.isfinite(seed_sd_hi) else ""
            what = f"σ_seed = one run's σ, {sd:.4f} (all of it shared{hi})"
        else:
            what = f"σ_seed at its 95 % upper end, {sd:.4f}"
        if noise != "seed" and floor != NEFF_F_FLOOR:
            what += f", floor {floor:g}"
        g_in, b_in = pair["grade"].astype(str) == "inside", pair["grade_graded"].astype(str) == "inside"
        lo, hi = mc_interval(float(g_in.mean()), len(pair))
        out.append({"variant": what, "noise": noise, "floor": floor, "seed_sd": sd, "world": w, "n": len(pair),
                    "inside": float(g_in.mean()), "inside_graded": float(b_in.mean()), "inside_lo": lo,
                    "inside_hi": hi, "changed": int((pair["grade"].astype(str) != pair["grade_graded"].astype(str)).sum()),
                    "dp_star": float((pair["p_star_point"].astype(float) - pair["p_star_point_graded"].astype(float)).mean())})
    res = pd.DataFrame(out, columns=cols)
    if res.empty:
        return res
    order = {w: i for i, w in enumerate(P6_PSTAR_WORLDS)}
    return res.assign(_w=res["world"].map(order)).sort_values(["noise", "floor", "_w"]).drop(columns="_w") \
        .reset_index(drop=True)


def p6_pstar_sensitivity_text(sens: pd.DataFrame) -> str:
    """:func:`p6_pstar_sensitivity` in words: per variant and world, on the datasets it shares with the verdict's
    rows, the share inside the band beside the verdict's share on the same datasets, and how many grades
    change; a clause explains each kind of variant present. "" where there is no variant."""
    from .power import P6_PSTAR_BAND

    if sens is None or sens.empty:
        return ""
    lo_b, hi_b = P6_PSTAR_BAND
    names = {"paper": "the paper's law", "no_offsets": "the law without its offsets", "ours": "our constants"}
    parts = [f"{names.get(r.world, r.world)}, {r.variant}: {r.inside:.0%} [{r.inside_lo:.0%}, {r.inside_hi:.0%}] "
             f"inside {lo_b:g}–{hi_b:g} bits against {r.inside_graded:.0%} as graded on the same {int(r.n)} datasets, "
             f"{int(r.changed)} grade{'' if r.changed == 1 else 's'} changed, fitted P* moved {r.dp_star:+.2f} bits "
             "on average" for r in sens.itertuples()]
    why = []
    if (sens["noise"] == "seed").any():
        why.append("A floor is where the paper's own f_a(3), which is negative, is clipped when the data are "
                   "generated; no other f_x of the design falls below 0.2, and without offsets none is clipped.")
    if (sens["noise"] == "seed_upper").any():
        why.append("The σ_seed variant shares more of each run's seed noise among the runs of one (N, seed).")
    return ("Each simulation choice against the verdict's own datasets, with the same noise draws: "
            + "; ".join(parts) + ". " + " ".join(why) + " No grade reads these rows.")


def p6_variants_text(profile: str, df: pd.DataFrame, root: str | os.PathLike | None = None) -> str:
    """Chapter 04's sentence on the P* leg's simulation variants for the training rows ``df``
    (:func:`p6_pstar_sensitivity_text` at the σ's the writer reads), or why there is none."""
    from .qat_design import _p4_sim_inputs

    tab, why = load_p6_pstar_power(profile, df, root, variants=True)
    if tab is None:
        return f"No simulated variants: {why}."
    noise, block, *_ = _p4_sim_inputs(df)
    return p6_pstar_sensitivity_text(p6_pstar_sensitivity(tab, noise.loss_sd, block["hi"])) or (
        f"No variant is simulated on {P6_SENSITIVITY_MIN_N} or more of the verdict's datasets for these training "
        "rows yet (`compute_optimal.write_p6_pstar_power` with `floor=` or `noise=\"seed_upper\"`).")


def verdict_p6(fits: Mapping[str, dict], profile: str, paper: Mapping[str, float] | None = None,
               suite: Mapping | None = None, rows: pd.DataFrame | None = None,
               draws: pd.DataFrame | None = None,
               pstar: tuple[pd.DataFrame | None, str] | None = None) -> Verdict:
    """P6: compute-optimal precision ≈ 7–8 bits, independent of compute (rule in the module docstring).

    `suite` (``bitlaws.study.low_precision_training.compute_matched_summary``) adds the empirical side. When the
    compute-matched suite is complete, its minimum is read against its seed noise: the suite
    *resolves* the paper's FP6–FP8 minimum if its lowest mean loss is at 6 or 8 bits and every
    member not detectably worse than it (``near_best``: within q standard errors of the difference,
    q the t quantile on the suite's pooled seed degrees of freedom with Bonferroni's correction over
    the comparisons with the best, ``power.p6_critical``) is at 6 or 8 bits; it is *consistent* with
    it if 6 or 8 bits is among ``near_best``.

    Rule (version 4; version 3's with q = 2 and no power gate): our P* is read with its 95 % interval from the pipeline bootstrap
    (``draws``: every stage refitted per resample of runs). **Not reproduced** if the interval
    lies outside [6, 9] bits or the suite's noise-resolved minimum lies outside 6–8 bits;
    **reproduced** if the interval lies inside [6, 9] and the suite resolves its minimum to 6–8;
    **partly** if one of those two holds and nothing contradicts the claim; **inconclusive** if
    the interval straddles the band and no suite resolves the minimum (our design cannot tell). The
    suite leg, either way, is graded only where its power (``power.p6_suite_power``: the share of
    suites simulated from the paper's law that resolve 6–8 bits) reaches ``claims.POWER_MIN``; below
    that, what the suite shows is reported, not graded. Version 5 (2026-12-07, after the data, with every
    gated rule) reads that power at the lower end of its Monte Carlo 95 % interval (``claims.gate_value``)
    and grades no suite whose power is not simulated (version 4 graded it); no grade moved.
    Without draws the point estimate stands for the interval. "The same for every C" is a
    consequence of the form (``p_star_spread_bound``), derived, not tested: one compute budget
    was run. The suite leg's power (``power.p6_suite_power``: how often the paper's law resolves
    6–8 bits on the suite's design, and how often a law with P* ≈ 3.5 bits does) is reported beside
    it; the P* leg's (``pstar``: :func:`load_p6_pstar_power`'s table and why it is absent;
    ``boot_check.p6_pstar_rows``: how often the paper's law puts the interval inside 6–9 bits on our
    design, how often a law with P* ≈ 3.5 does, at seed noise and at our fits' residual scatter) too.
    Neither power changes the P* leg's grading.

    (Version 1, written before the suite ran, asked only for the lowest loss at 6 or 8 bits. With
    one seed per member the lowest was at 12 bits, with three at 8 bits, inside the noise both
    times, so version 2 read the noise-resolved minimum. Version 3 replaces the point P* by its
    interval, once the pipeline bootstrap existed (a change after the data: a referee had measured
    it at [4.6, 7.2]), and grades an interval that straddles the band inconclusive rather than
    partly, as a second referee asked. Version 4, written on 2026-12-06 after the suite's
    evaluation-v2 rows (a retrained, so new, draw of its QAT members) had moved the grade from
    inconclusive to partly, replaces q = 2 by the t quantile with Bonferroni's correction, as a
    referee asked, and gates the suite leg with its simulated power (4 % on those rows), which turns
    that partly back into inconclusive.)
    """
    paper = dict(paper or paper_analysis())
    ours, missing = ours_analysis(fits)
    det = {"paper_p_star": paper["p_star"], "paper_p_star_no_offsets": paper["p_star_no_offsets"],
           "paper_p_star_spread_bound": paper["p_star_spread_bound"]}
    suite_txt, suite_ok = "no compute-matched suite yet", None
    suite_consistent, suite_power_txt, flips = None, "", {}
    if suite and suite.get("complete"):
        best = float(suite["best_bits"])
        near_set = {float(b) for b in (suite.get("near_best") or [best])}
        suite_ok = best in (6.0, 8.0) and near_set <= {6.0, 8.0}
        suite_consistent = bool(near_set & {6.0, 8.0})
        det["suite_best_bits"] = best
        seeds = suite.get("seeds") or {}
        # every number the suite's sentence prints, so a recomputation checks it (verdicts --check)
        det.update({f"suite_loss_{b:g}": float(v) for b, v in suite["losses"].items()})
        det.update({f"suite_seeds_{b:g}": float(seeds.get(b, 1)) for b in suite["losses"]})
        det.update({f"suite_welch_p_{b:g}": float(p) for b, p in (suite.get("welch_p") or {}).items()})
        det.update({k2: float(suite[k]) for k, k2 in (("sigma", "suite_sigma"), ("critical", "suite_critical"),
                                                       ("sigma_dof", "suite_sigma_dof")) if k in suite})
        suite_txt = ("the compute-matched suite (N·P constant, one D): lowest mean loss at P = "
                     + f"{best:g} bits (" + ", ".join(
                         f"{b:g}: {v:.4f}" + (f" ×{seeds[b]}" if seeds.get(b, 1) > 1 else "")
                         for b, v in sorted(suite["losses"].items()))
                     + " nats/byte; ×k = mean of k seeds)")
        sigma, near = suite.get("sigma", math.nan), suite.get("near_best") or []
        if math.isfinite(sigma) and near:
            src = ("the suite's own seeds" if suite.get("sigma_source") == "suite" else "the base grid's seeds")
            q, sdof = suite.get("critical", 2.0), suite.get("sigma_dof", 0.0)
            suite_txt += (f"; within {q:.2f} standard errors of the lowest (σ = {sigma:.4f} from {src}"
                          + (f", t on {sdof:g} degrees of freedom, Bonferroni over the "
                             f"{len(suite['losses']) - 1} comparisons with the best" if sdof else "")
                          + f"): P ∈ {{{', '.join(f'{b:g}' for b in near)}}}")
            welch = suite.get("welch_p") or {}
            flips = {b: p for b, p in welch.items() if b not in near and p >= 0.05}
            if welch:
                suite_txt += (f"; with Welch's per-member variances instead (against {best:g} bits): "
                              + ", ".join(f"{b:g} bits p = {p:.2g}" for b, p in sorted(welch.items()))
                              + (f", so {', '.join(f'{b:g}' for b in sorted(flips))} bits would not be resolved "
                                 "from the best at 5 % that way" if flips else ""))
        chin = params_of(fits.get("chinchilla"))
        if chin is not None and math.isfinite(sigma) and sigma > 0 and suite.get("n_params"):
            from .claims import mc_interval
            from .power import p6_suite_power

            sp = p6_suite_power(suite["n_params"], seeds or {b: 1 for b in suite["n_params"]},
                                float(suite["n_tokens"]), chin, float(sigma))
            det.update({"suite_power": sp["power"], "suite_against": sp["against"],
                        "suite_false_positive": sp["false_positive"], "suite_n_sim": sp["n_sim"]})
            iv = lambda x: "[{:.0%}, {:.0%}]".format(*mc_interval(x, sp["n_sim"]))  # noqa: E731
            suite_power_txt = (f"the suite leg's power ({int(sp['n_sim'])} suites simulated on its design, σ as "
                               f"measured and re-estimated in each): the paper's law (Table 2's γ_x, n_x on our "
                               f"Chinchilla constants) resolves 6–8 bits in {sp['power']:.0%} {iv(sp['power'])} and "
                               f"puts the minimum elsewhere in {sp['against']:.0%}; a law with P* ≈ 3.5 bits (no "
                               f"offsets) resolves 6–8 bits in {sp['false_positive']:.0%} "
                               f"{iv(sp['false_positive'])}")
    elif suite and suite.get("losses"):
        n_in = sum((suite.get("seeds") or {}).values()) or len(suite["losses"])
        suite_txt = f"the compute-matched suite is incomplete ({n_in} of {suite.get('planned')} runs), so not used"
    paper_body = (f"P* = {paper['p_star']:.2f} bits, the argmax of N_eff/(N·P), the same "
                  f"within {paper['p_star_spread_bound']:.0e} bits (the search's resolution) for C = 10^19–10^25; "
                  f"{paper['p_star_no_offsets']:.2f} bits without the offsets n_x")
    paper_txt = f"from Table 2: {paper_body}"
    tab, why = pstar if pstar is not None else (None, "not read")
    inputs = _optimal_inputs("P6", fits, profile, rows)
    if tab is not None:  # what was read: the table's identifying columns, not its simulated numbers
        inputs = inputs_identity("P6", profile, frames={"inputs": pd.DataFrame({"id": [inputs]}),
                                                        "pstar": tab[["sim_id", "sim_version", "inputs_sha256"]]})
    if ours is None:
        return Verdict("P6", "pending", CLAIMS["P6"]["paper"],
                       f"pending; the paper's own constants are consistent with its claim ({paper_txt})",
                       _QAT_MISSING.format(missing=", ".join(missing)) + f"; {suite_txt}"
                       + (f"; {suite_power_txt}" if suite_power_txt else ""),
                       profile, inputs, finite_or_na(det))
    p = ours["p_star"]
    ci = interval(draws["p_star"]) if draws is not None else (math.nan, math.nan)
    lo, hi = (ci if all(math.isfinite(c) for c in ci) else (p, p))
    inside, disjoint = 6.0 <= lo and hi <= 9.0, hi < 6.0 or lo > 9.0
    # rule v4: the suite leg is graded only where its simulated power reaches POWER_MIN; below it, what the
    # suite shows is reported, not graded (a resolution the paper's law rarely produces is no evidence for it);
    # rule v5: at the lower end of the power's Monte Carlo interval, and a power not simulated grades nothing
    from .claims import POWER_MIN, gate_value

    suite_power = det.get("suite_power", math.nan)
    suite_graded = suite_ok is not None and gate_value(suite_power, det.get("suite_n_sim", math.nan)) >= POWER_MIN
    shown_ok, shown_consistent = suite_ok, suite_consistent
    if not suite_graded:
        suite_ok, suite_consistent = None, None
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
    pstar_txt, pstar_leg = f"The P* leg's power: {why}.", ""
    if tab is not None:
        ps = p6_pstar_power_summary(tab, ci[1] - ci[0] if draws is not None else math.nan)
        det.update({"pstar_power": ps["power"], "pstar_false_positive": ps["false_positive"],
                    "pstar_power_residual": ps["power_residual"], "pstar_n_sim": ps["seed"]["paper"]["n"],
                    "pstar_width_paper": ps["seed"]["paper"]["width"]})
        resid, seed_sd = None, math.nan
        if rows is not None and "residual" in ps:
            from .noise import noise_model

            resid, seed_sd = stage_residual_sd(rows, fits), noise_model(rows, "rtn").loss_sd
        pstar_txt = p6_pstar_power_text(ps, resid, seed_sd)
        det.update(p6_pstar_power_details(ps, resid, seed_sd))
        pr = ps["power_residual"]
        pstar_leg = (f" (the leg's power under the paper's law: {ps['power']:.0%} at seed noise"
                     + (f", {pr:.0%} at our fits' residual scatter" if math.isfinite(pr) else "") + ")")
    if draws is not None:
        det.update({"ours_p_star_lo": ci[0], "ours_p_star_hi": ci[1], "boot_draws": float(len(draws)),
                    "boot_dropped": float(draws.attrs.get("dropped", 0)),
                    "boot_share_in_band": float(((draws["p_star"] >= 6) & (draws["p_star"] <= 9)).mean())})
    where = ("lies inside" if inside else "lies outside" if disjoint else "straddles")
    shown = ("the suite resolves its minimum to 6–8 bits"
             + (f" (with one σ pooled over its members; Welch's per-member variances would not resolve "
                f"{', '.join(f'{b:g}' for b in sorted(flips))} bits from the best at 5 %)" if flips else "")
             if shown_ok else
             "the suite is consistent with a 6–8-bit minimum but does not resolve it from the members "
             "outside that range" if shown_consistent else "the suite's noise-resolved minimum lies outside 6–8 bits")
    legs = (f"Our P* interval {where} 6–9 bits{pstar_leg}"
            + ("; the suite is not complete" if shown_ok is None else
               f"; {shown}" if suite_graded else
               f"; {shown}, but the suite leg's power ({suite_power:.0%}, the lower end of its Monte Carlo interval "
               f"{gate_value(suite_power, det['suite_n_sim']):.0%}) is below {POWER_MIN:.0%}, so the suite is "
               "reported, not graded" if math.isfinite(suite_power) else
               f"; {shown}, but the suite leg's power is not simulated (no Chinchilla fit or seed σ), so the suite "
               "is reported, not graded"))
    det["suite_graded"] = float(suite_graded)
    # one sentence a line: the chapter shows the reason's first as the lead and the rest as a list; the
    # ledger and the summary box run them together (summary.markdown_text puts a text on one line)
    ours_txt = "\n".join([
        f"P* = {p:.2f} {_ci_txt(ci)} bits from our γ's"
        + (f" (95 % interval over {len(draws)} resamples of the whole fitted pipeline"
           + (f", {draws.attrs['dropped']} more without an optimum left out"
              if draws.attrs.get("dropped") else "") + "; "
           f"{det['boot_share_in_band']:.0%} of them in 6–9 bits)" if draws is not None else
           " (no pipeline bootstrap: no interval)")
        + f", the same within {ours['p_star_spread_bound']:.0e} bits for every C (derived from the form).",
        pstar_txt, *(_sentence(x) for x in (suite_txt, suite_power_txt) if x)])
    return Verdict("P6", verdict, CLAIMS["P6"]["paper"], ours_txt,
                   f"{legs}.\nFrom Table 2 (its γ and n in bits, as ours): {paper_body}.",
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
    pstar = load_p6_pstar_power(profile, df)
    return {"P6": verdict_p6(fits, profile, paper, suite, df, draws, pstar), "P7": verdict_p7(fits, profile, paper, draws),
            "P8": verdict_p8(fits, profile, paper, draws)}


# ---------------------------------------------------------------------------------------------
# The chapter's tables and sentences (notebooks/04-compute-optimal.md draws them; figures.compute plots them)

# The compute budgets of the chapter's P*-against-C figure [FLOPs]
P_STAR_COMPUTES = tuple(float(c) for c in np.geomspace(1e18, 1e26, 9))
# Fig. 1 (right): 440M parameters at 16 bits trained on 16B tokens, N·P held fixed
PAPER_SUITE = {"bits": (4, 6, 8, 16, 32), "bits_params": 440e6 * 16, "n_tokens": 16e9}


def constants_note(profile: str, fits: Mapping[str, dict], missing: list[str]) -> str:
    """The chapter's sentence on whose constants stand beside the paper's (Markdown).

    Args:
        profile: the profile read. fits: its fit records (``law_fits.load_fits``). missing: the
            stages :func:`ours_analysis` found missing (empty when every stage is fitted).
    """
    # the paper cited as the chapter's prose cites it (book/references.bib), its Table 2 as forms.PAPER_SOURCE reads it
    head = ("**Constants.** The paper's: Table 2 of Kumar et al. {cite}`kumar2024precision` (Appendix K; subscripts "
            "lost in the text conversions are restored from context: γ_i read as γ_a, the unlabelled 0.5907 as "
            f"γ_post). Ours (`{profile}` profile): ")
    if not missing:
        return head + "every stage needed here is fitted."
    chin, ptq = params_of(fits.get("chinchilla")), params_of(fits.get("ptq"))
    return (head + f"the Chinchilla stage is {'fitted' if chin else 'not fitted'}, Eq. 2 is "
            f"{'fitted' if ptq else 'not fitted'}; the stages {', '.join(f'`{m}`' for m in missing)} are not "
            "(they need training runs in low precision), so every number below that depends on the γ's is the "
            "paper's alone.")


def brute_force_p_star(params: Mapping[str, float], computes=P_STAR_COMPUTES) -> pd.DataFrame:
    """P* by brute-force minimisation of the loss over (N, P) at each compute budget, with and
    without the offsets n_x (``optimal.brute_force_optimum``; no closed form used).

    Returns:
        One row per budget: ``compute`` [FLOPs], ``bits``, ``bits_no_offsets`` [bits].
    """
    return pd.DataFrame({"compute": list(computes),
                         "bits": [optimal.brute_force_optimum(c, params)["bits"] for c in computes],
                         "bits_no_offsets": [optimal.brute_force_optimum(c, params, offsets=False)["bits"]
                                             for c in computes]})


def p_star_table(paper: Mapping[str, float], ours: Mapping[str, float] | None, brute: pd.DataFrame,
                 params: Mapping[str, float] = forms.PAPER_CONSTANTS) -> pd.DataFrame:
    """The P* table: closed form, brute-force range over C, without offsets, and Eq. 7's one-mean-γ
    form, from the paper's constants and ours ("pending" without our fits); strings, 3 decimals."""
    gbar = np.mean([params[f"gamma_{x}"] for x in forms.COMPONENTS])
    bf = brute["bits"]
    return pd.DataFrame({
        "paper's constants": [f"{paper['p_star']:.3f}", f"{min(bf):.3f} – {max(bf):.3f}",
                              f"{paper['p_star_no_offsets']:.3f}",
                              f"{optimal.optimal_precision_single_gamma(gbar):.3f}"],
        "ours": ([f"{ours['p_star']:.3f}", f"{ours['p_star_brute_min']:.3f} – {ours['p_star_brute_max']:.3f}",
                  f"{ours['p_star_no_offsets']:.3f}", "—"] if ours else ["pending"] * 4),
    }, index=["P* = argmax g(P)/P [bits]", "P* by brute force, C = 1e18–1e26", "P* without the offsets n_x",
              "1.904·γ̄, one mean γ and no offsets (e^x − 1 = 3x)"])


def n_d_star_curves(params: Mapping[str, float], compute: float = 1e21,
                    check_bits=(4.0, 6.0, 8.0, 12.0)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """N* and D* at a fixed precision P and compute C, relative to their values at 16 bits (§4.3.1):
    the closed form (``optimal.optimal_n_d``) for P in 3.6–16 bits, and a brute-force minimisation
    over N at ``check_bits`` (no closed form used).

    Returns:
        (curves, checks), each with columns ``bits``, ``n_rel``, ``d_rel``.
    """
    from scipy.optimize import minimize_scalar

    pp = np.linspace(3.6, 16.0, 300)
    n_star, d_star = optimal.optimal_n_d(pp, compute, params)
    n16, d16 = optimal.optimal_n_d(16.0, compute, params)
    rows = []
    for pb in check_bits:
        r = minimize_scalar(lambda ln: float(optimal.loss_at_compute(np.exp(ln), pb, compute, params)),
                            bounds=(0, np.log(compute)), method="bounded", options={"xatol": 1e-10})
        nb = np.exp(r.x)
        rows.append({"bits": pb, "n_rel": nb / n16, "d_rel": compute / (optimal.COST_FACTOR * nb * pb) / d16})
    return pd.DataFrame({"bits": pp, "n_rel": n_star / n16, "d_rel": d_star / d16}), pd.DataFrame(rows)


def growth_exponent_table(fits: Mapping[str, dict]) -> pd.DataFrame:
    """The exponent a of N* ∝ C^a, a = β/(α+β): the paper's constants, our tied and free Chinchilla
    fits (NaN where not fitted) and two published Chinchilla fits (``forms.REFERENCE_FITS``)."""
    def share(p):
        return p["beta"] / (p["alpha"] + p["beta"]) if p else np.nan

    chin, chin_free = params_of(fits.get("chinchilla")), params_of(fits.get("chinchilla_free"))
    ref = forms.REFERENCE_FITS
    return pd.DataFrame({"N* ∝ C^a, a = β/(α+β)": [share(forms.PAPER_CONSTANTS), share(chin), share(chin_free),
                                                     share(ref["hoffmann"]), share(ref["epoch"])]},
                        index=["Kumar et al. (tied)", "ours, tied", "ours, free", "Hoffmann et al.",
                               "Besiroglu et al."])


def fixed_n_curves(params: Mapping[str, float], d_grid=None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """P* of a fixed-size model against its training tokens D (the paper's Fig. 6, right), for the
    three Llama-3 sizes (``optimal.LLAMA3_MARKERS``): the closed form over D = 10¹⁰–10¹⁵, at the
    markers, and brute-force minimisations over P at fixed N and C (C of D = 10¹¹ and 10¹³ at 8 bits).

    Returns:
        (curves, markers, checks), each with columns ``name``, ``n_params``, ``n_tokens``, ``bits``.
    """
    d_grid = np.geomspace(1e10, 1e15, 60) if d_grid is None else d_grid
    curves, markers, checks = [], [], []
    for name, (n, d) in optimal.LLAMA3_MARKERS.items():
        curves += [{"name": name, "n_params": n, "n_tokens": dd, "bits": optimal.optimal_precision_fixed_n(n, dd, params)}
                   for dd in d_grid]
        markers.append({"name": name, "n_params": n, "n_tokens": d, "bits": optimal.optimal_precision_fixed_n(n, d, params)})
        for c in (optimal.compute_cost(n, 1e11, 8), optimal.compute_cost(n, 1e13, 8)):
            b = optimal.brute_force_fixed_n(n, c, params)
            checks.append({"name": name, "n_params": n, "n_tokens": b["n_tokens"], "bits": b["bits"]})
    return pd.DataFrame(curves), pd.DataFrame(markers), pd.DataFrame(checks)


def _count(x: float) -> str:
    """A count in short form with three significant digits, trailing zeros kept: 26,784 → ``26.8K``,
    2.89e7 → ``28.9M``, 5.6e7 → ``56.0M``, 2.2e8 → ``220M``; from 10¹⁵ on, whole thousands of T."""
    x = float(f"{float(x):.3g}")  # rounded first, so 999,960 reads 1.00M, not 1000K
    div, suffix = next(((d, u) for d, u in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")) if abs(x) >= d),
                       (1.0, ""))
    v = x / div
    if abs(v) >= 1000:
        return f"{v:,.0f}{suffix}"
    decimals = max(0, 2 - math.floor(math.log10(abs(v)))) if v else 2
    return f"{v:.{decimals}f}{suffix}"


# The D_crit table's columns: one unit each (the paper counts BPE tokens, our byte-level models bytes), so the
# ratio D_crit / N has a column per unit too
D_CRIT_COLUMNS = ("D_crit [tokens]", "D_crit [bytes]", "D_crit / N [tokens/param]", "D_crit / N [bytes/param]",
                  "largest D / N trained [bytes/param]")


def critical_data_table(fits: Mapping[str, dict], df: pd.DataFrame,
                        params: Mapping[str, float] = forms.PAPER_CONSTANTS) -> tuple[pd.DataFrame, str]:
    """D_crit (Eq. 13) from the paper's constants at N = 30M and 220M, P_post = 3–6 bits, and from
    ours (our Chinchilla B, β with our Eq. 2 fit, in bytes) for each base-grid size at INT3/INT4,
    beside the largest D the grid trained that size on: one block per PTQ method whose Eq. 2 is
    fitted (``ours (GPTQ)`` from the ``ptq_gptq`` record, the one P2's verdict reads first, then
    ``ours (RTN)`` from ``ptq``).

    Args:
        fits: the profile's fit records. df: its training rows (``experiment``, ``status``,
            ``ptq_method``, ``n_params``, ``n_tokens``).

    Returns:
        (table, note). The table is indexed by ``constants`` (the block), ``N [params]`` and
        ``P_post [bits]``, with the float columns of :data:`D_CRIT_COLUMNS`, NaN where a column does
        not apply (the paper's D and D/N in tokens, ours in bytes; the paper's grid, about 10³ tokens per
        parameter, is not tabulated per size); :func:`critical_data_style` shows it. The note (Markdown) says, per
        method, which sizes the grid trains past D_crit, or that our stages are pending.
    """
    tokens, nbytes, ratio_t, ratio_b, trained = D_CRIT_COLUMNS
    rows = []
    for n in (30e6, 220e6):
        for b in (3, 4, 5, 6):
            dc = float(optimal.critical_data_size(n, b, params))
            rows.append({"constants": "paper (GPTQ)", "N [params]": n, "P_post [bits]": b, tokens: dc,
                         nbytes: math.nan, ratio_t: dc / n, ratio_b: math.nan, trained: math.nan})
    chin = params_of(fits.get("chinchilla"))
    methods = [(label, params_of(fits.get(stage))) for label, stage in (("GPTQ", "ptq_gptq"), ("RTN", "ptq"))]
    methods = [(label, ptq) for label, ptq in methods if ptq]
    notes = []
    if chin and methods:
        base = df[(df["status"] == "ok") & (df["ptq_method"] == "none") & (df["experiment"] == "base_grid")]
        for label, ptq in methods:
            ours_c, past = {**chin, **ptq}, []
            for n in sorted(base["n_params"].unique()):
                dmax = base.loc[base["n_params"] == n, "n_tokens"].max()
                for b in (3, 4):
                    dc = float(optimal.critical_data_size(n, b, ours_c))
                    rows.append({"constants": f"ours ({label})", "N [params]": float(n), "P_post [bits]": b,
                                 tokens: math.nan, nbytes: dc, ratio_t: math.nan, ratio_b: dc / n,
                                 trained: float(dmax / n)})
                    if dmax > dc:
                        past.append(f"N = {_count(n)} at INT{b}")
            notes.append(f"with {label}'s Eq. 2 for " + (", ".join(past) if past else "no size"))
        note = ("By our own fits, the grid trains past D_crit " + "; ".join(notes)
                + "; chapter 1 checks whether the measured post-PTQ loss turns upward there (claim P2). "
                "The paper's block uses its Table 2, fitted on GPTQ; its grid reaches about 10³ tokens per parameter "
                "(D/N in tokens; ours are bytes per parameter).")
    else:
        note = "*Ours:* pending — the Chinchilla stage or the Eq. 2 stage is not fitted for this profile."
    return pd.DataFrame(rows).set_index(["constants", "N [params]", "P_post [bits]"]), note


def critical_data_style(table: pd.DataFrame):
    """:func:`critical_data_table`'s table for the chapter: counts in short form with three significant
    digits (``28.9M``; N too), ratios as whole numbers, "—" where a column does not apply, and each
    block's label at the top of its rows. Returns a pandas ``Styler``."""
    tokens, nbytes, ratio_t, ratio_b, trained = D_CRIT_COLUMNS
    return (table.style
            .format({tokens: _count, nbytes: _count, ratio_t: "{:,.0f}", ratio_b: "{:,.0f}", trained: "{:,.0f}"},
                    na_rep="—")
            .format_index(_count, level="N [params]")
            # the book's stylesheet puts header cells at the bottom; a block's label belongs at its top
            .set_table_styles([{"selector": "tbody th", "props": "vertical-align: top; text-align: left;"}]))


def suite_argmin_history(profile: str, root: str | os.PathLike | None = None) -> str:
    """Where the compute-matched suite's lowest loss sits at each evaluation version with suite rows:
    on seed 0 alone and on the mean over seeds (P6 rule v2 was written when these differed at
    version 1). One clause per version, e.g. ``"at evaluation version 1, 12 bits on seed 0 alone and 8
    on the mean of each member's seeds (3 per low-precision member)"``; "" where the profile has no suite rows.

    Args:
        profile: a declared profile. root: a ``data/`` folder other than the repository's.
    """
    from .low_precision_training import compute_matched_table
    from .store import EVAL_VERSIONS, load_runs

    parts = []
    for version in sorted(EVAL_VERSIONS):
        try:
            df = load_runs(profile, ("base_grid", "compute_matched"), root, eval_version=version)
        except FileNotFoundError:
            continue
        t = compute_matched_table(df, profile)
        ok = t[(t["status"] == "ok") & t["loss_val"].notna()]
        if not (ok["bits"] != forms.HIGH_PRECISION_BITS).any() or not (ok["seed"] == 0).any():
            continue
        seed0 = ok[ok["seed"] == 0].set_index("bits")["loss_val"]
        mean = ok.groupby("bits")["loss_val"].mean()
        seeds = int(ok.loc[ok["bits"] != forms.HIGH_PRECISION_BITS].groupby("bits")["seed"].nunique().max())
        parts.append(f"at evaluation version {version}, {seed0.idxmin():g} bits on seed 0 alone and "
                     f"{mean.idxmin():g} on the mean of each member's seeds ({seeds} per low-precision member)")
    return "; ".join(parts)


def inference_cost_curves(params: Mapping[str, float], computes=None,
                          check_at=(1e9, 1e11, 1e13)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The inference-cost optimum of Appendix E.3 (the paper's Fig. 9) against the serving budget
    C = N·P_post [parameter-bits]: with D = D_crit (``optimal.inference_optimum``, C = 10⁸–10¹⁴) and
    by a brute-force grid over (P, log D) at ``check_at`` (``optimal.brute_force_inference_optimum``).

    Returns:
        (optimum, checks), each with columns ``compute``, ``bits``, ``n_params``, ``n_tokens``, ``loss``.
    """
    computes = np.geomspace(1e8, 1e14, 25) if computes is None else computes
    opt = pd.DataFrame([optimal.inference_optimum(c, params) for c in computes])
    checks = pd.DataFrame([optimal.brute_force_inference_optimum(c, params) for c in check_at])
    return opt.assign(compute=np.asarray(computes, float)), checks.assign(compute=np.asarray(check_at, float))


def inference_slopes(opt: pd.DataFrame) -> dict[str, float]:
    """Least-squares slopes of the inference-cost optimum in ln C: ``n`` (N* ∝ C^n), ``d`` (D* ∝ C^d)
    and ``bits`` (bits of P* per e-fold of C). Args: opt, the first table of :func:`inference_cost_curves`."""
    lc = np.log(opt["compute"].to_numpy(float))
    return {"n": float(np.polyfit(lc, np.log(opt["n_params"]), 1)[0]),
            "d": float(np.polyfit(lc, np.log(opt["n_tokens"]), 1)[0]),
            "bits": float(np.polyfit(lc, opt["bits"], 1)[0])}


def paper_suite_table(params: Mapping[str, float] = forms.PAPER_CONSTANTS) -> pd.DataFrame:
    """The loss the paper's law predicts for its compute-matched suite (Fig. 1, right: N·P of 440M
    parameters at 16 bits, D = 16B tokens), indexed by P [bits], with N in millions."""
    bits = np.array(PAPER_SUITE["bits"])
    pred = optimal.compute_matched_losses(bits, PAPER_SUITE["bits_params"], PAPER_SUITE["n_tokens"], params)
    return pd.DataFrame({"N": [f"{PAPER_SUITE['bits_params'] / b / 1e6:,.0f}M" for b in bits],
                         "predicted loss (paper's law)": pred}, index=pd.Index(bits, name="P [bits]"))


@dataclass(frozen=True)
class Suite:
    """Our compute-matched suite as the chapter reads it.

    Attributes:
        members: one row per precision (index ``bits``): ``loss`` (mean validation loss over seeds,
            nats/byte), ``std`` (seed s.d.), ``n`` (seeds), ``n_params``, ``se`` (σ/√n, NaN without a
            σ), ``law`` (our fitted law at the member, NaN without our γ's).
        law_curve: our law along N = N·P/P for P in 3.5–16 bits (``bits``, ``loss``), or None.
        summary: ``low_precision_training.compute_matched_summary``. n_runs: the suite's runs, any status.
    """

    members: pd.DataFrame
    law_curve: pd.DataFrame | None
    summary: dict
    n_runs: int


def compute_matched_suite(df: pd.DataFrame, profile: str, fits: Mapping[str, dict]) -> Suite:
    """Our compute-matched suite (chapter 2's ``compute_matched``) with our fitted law beside it
    (``forms.qat_loss`` on :func:`ours_constants`, at the suite's D)."""
    cm = compute_matched_table(df, profile)
    okc = cm[cm["status"] == "ok"]
    cms = compute_matched_summary(df, profile)
    oc = ours_constants(fits)
    per = okc.groupby("bits").agg(loss=("loss_val", "mean"), std=("loss_val", "std"), n=("loss_val", "size"),
                                  n_params=("n_params", "first"))
    per["se"] = cms["sigma"] / np.sqrt(per["n"].to_numpy()) if np.isfinite(cms["sigma"]) else np.nan
    per["law"] = np.nan
    curve = None
    if len(per) and oc:
        d_suite = float(PROFILES[profile].qat.cm_budget)
        b_m, n_m = per.index.to_numpy(float), per["n_params"].to_numpy(float)
        per["law"] = forms.qat_loss(n_m, d_suite, b_m, b_m, b_m, oc)
        pb = np.linspace(3.5, 16, 200)
        np_ref = float(np.median(n_m * b_m))
        curve = pd.DataFrame({"bits": pb, "loss": forms.qat_loss(np_ref / pb, d_suite, pb, pb, pb, oc, cutoff=False)})
    return Suite(per, curve, cms, len(cm))


def suite_table(suite: Suite) -> pd.DataFrame:
    """The suite's members for display: N, N·P relative to the highest precision's, seeds, mean and
    s.d. of the measured loss, our law (NaN without our γ's); indexed by P [bits]."""
    m = suite.members
    b_m, n_m = m.index.to_numpy(float), m["n_params"].to_numpy(float)
    return pd.DataFrame({"N": [human(n) for n in n_m], f"N·P / N·P at {b_m[-1]:g} bits": n_m * b_m / (n_m * b_m)[-1],
                         "seeds": m["n"].to_numpy(), "measured loss (mean)": m["loss"].to_numpy(),
                         "seed s.d.": m["std"].to_numpy(), "our law": m["law"].to_numpy()},
                        index=pd.Index(b_m.astype(int), name="P [bits]"))


def suite_note(suite: Suite) -> str:
    """The chapter's sentence on our suite (Markdown): its best precision against the noise (or that
    it is incomplete), and where our law misses most, with the sign of the miss (under- or
    over-predicting the loss of training every part at that precision)."""
    m, cms = suite.members, suite.summary
    b_m = m.index.to_numpy(float)
    law_m = m["law"].to_numpy(float)
    if np.isfinite(law_m).any():
        miss = m["loss"].to_numpy() - law_m
        worst = int(np.nanargmax(np.abs(miss)))
        law_txt = (f" Our law puts its minimum at P = {b_m[int(np.nanargmin(law_m))]:g} bits among the members; its "
                   f"largest miss is at P = {b_m[worst]:g} bits (measured − law {miss[worst]:+.3f} nats/byte): the "
                   f"product of the marginal γ's (claim P5) {'under' if miss[worst] > 0 else 'over'}-predicts the "
                   "loss of training every part at that precision.")
    else:
        law_txt = " Our γ's are not fitted for this profile, so there is no law line."
    src = "the suite's own seeds" if cms["sigma_source"] == "suite" else "the base grid's seeds"
    return (f"*Ours:* lowest mean loss at **P = {cms['best_bits']:g} bits**"
            + (f", {cms['margin']:.4f} nats/byte below the next; within {cms.get('critical', 2.0):.2f} standard errors "
               f"of it (P6 rule v4's threshold; σ = {cms['sigma']:.4f} from {src}): P ∈ {{" + ", ".join(f"{b:g}" for b in cms["near_best"]) + "}." if cms["complete"] else
               f" — the suite is incomplete ({suite.n_runs} of {cms['planned']} runs).")
            + law_txt)


def verdicts_markdown(verdicts: Mapping[str, Verdict], claim_ids=("P6", "P7", "P8")) -> str:
    """The chapter's verdicts: :func:`bitlaws.study.summary.chapter_verdicts_markdown` for P6–P8."""
    from .summary import chapter_verdicts_markdown

    return chapter_verdicts_markdown(verdicts, claim_ids)
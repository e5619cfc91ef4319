"""The pipeline bootstrap's fast starts checked against a reference on shared resamples (issue 14).

``law_fits.pipeline_bootstrap`` starts each resample's fits at the full-sample optimum and the best
``PIPELINE_REFINE`` screened grid points (the *fast* path). ``boot_check`` refits the same resamples
(draw i seeded by ``[BOOT_SEED, i]``) with every stage's own starts (the *full* multi-start) and takes,
per stage, the better objective of the two (the *reference*), keeping both objectives, the constants
and their on-bound flags in ``data/fits/<profile>_pipeline_boot_check.csv``; ``check_summary`` compares
the numbers the verdicts read (P3's f_w(4), P4's order shares, P6's P* interval) between the paths
within their Monte Carlo error. ``fast_coverage`` runs the fast path on synthetic data with known
constants (``law_fits.pipeline_bound_shares`` counts the pipeline draws with a constant on a bound).
Run: ``python -m bitlaws.study.boot_check --profile cpu [--n 200] [--coverage DATASETS RESAMPLES]``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..laws import fit as lf
from ..laws import forms
from . import law_fits as la
from .store import data_dir, load_runs

__all__ = ["CHECK_N", "OBJ_RTOL", "PATHS", "check_path", "check_draw", "boot_check", "load_check",
           "better_fit", "check_summary", "percentile_diff_se", "synthetic_truth", "fast_coverage",
           "coverage_summary", "coverage_path", "load_coverage", "check_table", "check_text", "coverage_text"]

# Resamples the check refits per profile (the first draws of the pipeline bootstrap).
CHECK_N = {"smoke": 3, "cpu": 200, "gpu": 200}
# A fit is worse than another when its objective exceeds the other's by more than this, relative.
OBJ_RTOL = 1e-6
# The rows' paths: the pipeline's fast fit (on its own upstream Chinchilla); the full multi-start and
# the better of fast and full (the reference), both on the reference's upstream; the fast fit refitted
# from every start only where it lands a constant on a bound (``bound_refit``, on its own upstream).
PATHS = ("fast", "full", "reference", "bound_refit")
_COLUMNS = ["draw", "stage", "path", "upstream", "objective", "constant", "value", "on_bound"]


def check_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    """``data/fits/<profile>_pipeline_boot_check.csv`` under ``root`` (default ``data_dir()``)."""
    return Path(root or data_dir()) / "fits" / f"{profile}_pipeline_boot_check.csv"


def better_fit(a: lf.FitResult, b: lf.FitResult, rtol: float = OBJ_RTOL) -> lf.FitResult:
    """The fit with the lower objective; ``a`` unless ``b`` is lower by more than ``rtol`` (relative)."""
    return b if b.objective < a.objective - rtol * abs(a.objective) else a


def _fit(stage: str, frame: pd.DataFrame, picks: np.ndarray, fixed, starts: np.ndarray | None) -> lf.FitResult:
    """The stage on the drawn runs ``picks``: fast (``starts`` + the best ``PIPELINE_REFINE`` grid points)
    or, with ``starts`` None, the stage's own starts (the full multi-start)."""
    sub = frame.iloc[la._rows_of(frame, picks)].reset_index(drop=True)
    kw = {} if starts is None else {"n_refine": la.PIPELINE_REFINE, "extra_starts": starts}
    return lf.fit_stage(lf.STAGES[stage], sub, fixed, **kw)


def check_draw(frames: Mapping[str, pd.DataFrame], stages: Sequence[str], paired: Sequence[str],
               picks: Mapping[str, np.ndarray], starts: Mapping[str, np.ndarray]) -> tuple[list[dict], float]:
    """One resample by every path of ``PATHS``.

    Chinchilla is fitted fast and full; the reference Chinchilla is the better. Each later stage
    (``stages[1:]``, then ``paired``) is fitted fast and full on the reference Chinchilla, the
    reference being the better; the fast path's fit is the fast fit on the fast Chinchilla (the same
    fit where the two Chinchillas are one); ``bound_refit`` is the fast fit, replaced by the better of
    it and the full multi-start (on the same upstream) where it has a constant on a bound.

    Returns:
        (rows of ``_COLUMNS`` without ``draw``: one per stage, path and constant; ``upstream`` is
        ``fast`` or ``reference``), the CPU seconds the bound refits took (the cost of ``bound_refit``).
    """
    rows: list[dict] = []

    def add(stage, path, upstream, res):
        for k, v in res.params.items():
            rows.append({"stage": stage, "path": path, "upstream": upstream, "objective": float(res.objective),
                         "constant": k, "value": float(v), "on_bound": k in res.on_bound})

    def timed(*args):  # CPU seconds of this process (not wall time: the machine may be shared)
        t0 = time.process_time()
        res = _fit(*args)
        return res, time.process_time() - t0

    chin_fast = _fit("chinchilla", frames["chinchilla"], picks["chinchilla"], None, starts["chinchilla"])
    chin_full, t_bound = timed("chinchilla", frames["chinchilla"], picks["chinchilla"], None, None)
    chin_ref = better_fit(chin_fast, chin_full)
    if chin_fast.on_bound:
        chin_bound = chin_ref
    else:
        chin_bound, t_bound = chin_fast, 0.0
    for path, res in (("fast", chin_fast), ("full", chin_full), ("reference", chin_ref), ("bound_refit", chin_bound)):
        add("chinchilla", path, "fast" if path in ("fast", "bound_refit") else "reference", res)
    same = chin_ref is chin_fast
    for s in [*stages[1:], *paired]:
        pick = picks[la.PAIRED_STAGES.get(s, s)]
        try:
            fast_ref = _fit(s, frames[s], pick, dict(chin_ref.params), starts[s])
            full_ref, t_full = timed(s, frames[s], pick, dict(chin_ref.params), None)
        except ValueError:  # a paired stage with too few paired rows in this resample (as the pipeline skips it)
            continue
        fast = fast_ref if same else _fit(s, frames[s], pick, dict(chin_fast.params), starts[s])
        # the bound-refit path: its fast fit on its own Chinchilla, refitted from every start if on a bound
        own_fast = fast_ref if chin_bound is chin_ref else fast
        if own_fast.on_bound:
            if chin_bound is chin_ref:
                own_full = full_ref
            else:
                own_full, t_full = timed(s, frames[s], pick, dict(chin_bound.params), None)
            bound = better_fit(own_fast, own_full)
            t_bound += t_full
        else:
            bound = own_fast
        add(s, "fast", "fast", fast)
        add(s, "full", "reference", full_ref)
        add(s, "reference", "reference", better_fit(fast_ref, full_ref))
        add(s, "bound_refit", "fast" if chin_bound is chin_fast else "reference", bound)
    return rows, t_bound


def load_check(profile: str = "cpu", root: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """The committed check table (``boot_check``), or None where it is not there."""
    path = check_path(profile, root)
    if not path.is_file():
        return None
    out = pd.read_csv(path)
    out["on_bound"] = out["on_bound"].astype(bool)
    return out


def boot_check(profile: str = "cpu", n: int | None = None, *, draws: Sequence[int] | None = None,
               root: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
               frame: pd.DataFrame | None = None, paired: bool = False, write: bool = True,
               progress: bool = False) -> pd.DataFrame:
    """Refit draws of the pipeline bootstrap by every path of ``PATHS`` (``check_draw``); resumable.

    Args:
        profile: ``smoke``, ``cpu`` or ``gpu``.
        n: draws ``0 … n − 1`` (default ``CHECK_N[profile]``), an int ≥ 1; ignored with ``draws``.
        draws: the draw indices to refit instead (to split the work between processes).
        root: a ``data/`` folder (default ``data_dir()``).
        out: the CSV to write (default ``check_path(profile, root)``); draws already in it are kept
            and not refitted, so a rerun computes only the missing ones.
        frame: use these rows instead of the profile's training sweeps (tests).
        paired: also the paired-difference stages (``PAIRED_STAGES``; no verdict reads their draws, and
            they double the N_eff refits); the stages before them do not depend on them.
        write: write the CSV.
        progress: a progress bar.

    Returns:
        The long table (``_COLUMNS``, sorted by draw): for each draw, stage (Chinchilla, the N_eff
        stages and the paired ones), path, the summed Huber objective, and each fitted constant with
        its on-bound flag. ``attrs["bound_refit_s"]`` sums the CPU seconds of the bound refits computed
        here, ``attrs["n_computed"]`` counts the draws computed here, ``attrs["cpu_s"]`` their CPU seconds.

    Raises:
        ValueError: ``n`` not an int ≥ 1, or a negative draw index.
    """
    from tqdm.auto import tqdm

    if draws is None:
        n = CHECK_N.get(profile, 200) if n is None else n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be an int ≥ 1 (draws to refit), got {n!r}")
        draws = range(int(n))
    draws = [int(i) for i in draws]
    if any(i < 0 for i in draws):
        raise ValueError(f"draw indices must be ≥ 0, got {min(draws)}")
    df = frame if frame is not None else load_runs(profile, experiment=la.TRAINING_EXPERIMENTS, root=root)
    frames = la.stage_frames(df)
    stages = [s for s in la.PIPELINE_STAGES if frames[s]["run_id"].nunique() >= lf.STAGES[s].n_params_fitted + 1]
    paired = [p for p, m in la.PAIRED_STAGES.items() if paired and m in stages[1:]
              and frames[p]["run_id"].nunique() >= lf.STAGES[p].n_params_fitted + 1]
    path = Path(out) if out is not None else check_path(profile, root)
    old = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=_COLUMNS)
    have = set(old["draw"].astype(int))
    starts = la._full_sample_starts(frames, [*stages, *paired])
    new, t_bound, n_new, cpu0 = [], 0.0, 0, time.process_time()
    for i in tqdm([i for i in draws if i not in have], desc=f"boot check ({profile})", disable=not progress):
        rows, t = check_draw(frames, stages, paired, la._draw_picks(frames, stages, la.BOOT_SEED, i), starts)
        new.extend({"draw": i, **r} for r in rows)
        t_bound += t
        n_new += 1
        if write and len(new) and (i % 5 == 4):  # keep the work done so far
            _write(path, old, new)
    table = _write(path, old, new) if write else pd.concat([old, pd.DataFrame(new, columns=_COLUMNS)])
    table = table[table["draw"].astype(int).isin(draws)].reset_index(drop=True)
    table["on_bound"] = table["on_bound"].astype(bool)
    table.attrs.update(bound_refit_s=t_bound, n_computed=n_new, cpu_s=time.process_time() - cpu0)
    return table


def _write(path: Path, old: pd.DataFrame, new: list[dict]) -> pd.DataFrame:
    table = pd.concat([old, pd.DataFrame(new, columns=_COLUMNS)], ignore_index=True)
    table = table.sort_values(["draw", "stage", "path", "constant"], kind="stable").reset_index(drop=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    table.to_csv(tmp, index=False, float_format="%.10g")
    os.replace(tmp, path)
    return table


# --- the numbers the verdicts read, by path --------------------------------------------------------

def _wide(table: pd.DataFrame, path: str) -> pd.DataFrame:
    """draw x constant (paired stages' constants suffixed ``_paired``) of one path."""
    t = table[table["path"] == path]
    key = t["constant"] + np.where(t["stage"].str.endswith("_paired"), "_paired", "")
    return t.assign(key=key).pivot_table(index="draw", columns="key", values="value", aggfunc="first")


def _p_star(d: Mapping[str, float]) -> float:
    from ..laws import optimal

    try:
        return float(optimal.optimal_precision(d))
    except (ValueError, ZeroDivisionError, FloatingPointError):  # no interior optimum (P6 drops such draws)
        return math.nan


def _read_numbers(wide: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per draw: f_w(4) (P3), P4's three order indicators (1/0, NaN where an f_x is undefined), P* (P6)."""
    from .low_precision_training import order_indicators

    draws = wide.to_dict("records")
    ind = order_indicators(draws)
    out = {"f_w(4)": np.asarray(forms.precision_factor(4.0, wide["gamma_w"].to_numpy(), wide["n_w"].to_numpy()),
                                dtype=float)}
    for k in ("p_order", "p_a_most", "p_kv_below_w"):
        out[k] = np.where(ind["finite"], ind[k].astype(float), math.nan)
    out["P*"] = np.array([_p_star(d) for d in draws])
    return out


def percentile_diff_se(a: np.ndarray, b: np.ndarray, q: Sequence[float], n_resample: int = 1000,
                       seed: int = 0) -> np.ndarray:
    """Monte Carlo standard error of percentile(a) − percentile(b) for two paths on the same draws.

    The draws are resampled with replacement, the same indices for both (they share resamples, so
    the difference's error is far below either percentile's own); NaN draws are left out of each
    path's percentile (as the verdicts drop undefined draws).

    Args:
        a, b: (k,) one number per draw by each path, aligned. q: percentiles in [0, 100].
        n_resample: bootstrap replicates of the draws. seed: NumPy's generator seed.

    Returns:
        (len(q),) the standard deviation of the difference over the replicates.

    Raises:
        ValueError: ``a`` and ``b`` of different lengths, or fewer than two draws.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(f"a and b must be aligned 1-d arrays of ≥ 2 draws, got shapes {a.shape} and {b.shape}")
    idx = np.random.default_rng(seed).integers(0, len(a), size=(n_resample, len(a)))
    with np.errstate(all="ignore"):
        d = np.nanpercentile(a[idx], q, axis=1) - np.nanpercentile(b[idx], q, axis=1)
    return np.nanstd(d, axis=1, ddof=1)


def _agree(diff: float, se: float) -> bool:
    """Within Monte Carlo error: |diff| ≤ 2 se (a zero difference agrees whatever its error)."""
    return bool(diff == 0 or abs(diff) <= 2 * se)


def check_summary(table: pd.DataFrame, rtol: float = OBJ_RTOL) -> dict:
    """What the check found, from its table (``boot_check``).

    Per stage: ``n_draws``; ``fast_worse``, draws whose fast fit ends above the full multi-start's
    objective by more than ``rtol`` (relative) on the same upstream Chinchilla (draws where the two
    paths' Chinchillas differ are counted in ``upstream_differs``); ``max_gap``, the largest relative
    excess; ``fast_on_bound``, draws whose fast fit has a constant on a bound; ``worse_not_on_bound``,
    the worse draws that the bound refit would not touch; ``bound_fixed``, draws whose bound refit
    lowered the objective. Per number a verdict reads (P3's f_w(4) interval ends, P4's three order
    shares, P6's P* interval ends), by the ``fast``, ``reference`` and ``bound_refit`` paths: the
    value, fast − reference and bound_refit − reference with their Monte Carlo errors (interval ends:
    ``percentile_diff_se``; shares: the standard error of the mean paired difference of the per-draw
    indicators), and whether each difference lies within 2 errors.

    Returns:
        {``n_draws``, ``max_draw`` (the largest draw index), ``stages``: {stage: counts}, ``numbers``:
        {name: {...}}}.
    """
    obj = table.groupby(["draw", "stage", "path"])["objective"].first().unstack("path")
    bound = table[table["path"] == "fast"].groupby(["draw", "stage"])["on_bound"].any()
    chin_same = (obj.xs("chinchilla", level="stage")["reference"] >= obj.xs("chinchilla", level="stage")["fast"])
    stages = {}
    for s, o in obj.groupby(level="stage", sort=False):
        o = o.droplevel("stage")
        same = chin_same.reindex(o.index).fillna(False).to_numpy() if s != "chinchilla" else np.ones(len(o), bool)
        gap = ((o["fast"] - o["reference"]) / o["reference"].abs()).to_numpy()
        worse = same & (gap > rtol)
        on_b = bound.xs(s, level="stage").reindex(o.index).fillna(False).to_numpy()
        fixed = ((o["fast"] - o["bound_refit"]) / o["fast"].abs()).to_numpy() > rtol
        stages[s] = {"n_draws": int(len(o)), "fast_worse": int(worse.sum()),
                     "max_gap": float(np.max(np.where(same, gap, 0.0), initial=0.0)),
                     "upstream_differs": int((~same).sum()), "fast_on_bound": int(on_b.sum()),
                     "worse_not_on_bound": int((worse & ~on_b).sum()), "bound_fixed": int(fixed.sum()),
                     "worse_draws": [int(i) for i in o.index[worse]]}
    wide = {p: _wide(table, p) for p in ("fast", "reference", "bound_refit")}
    need = {f"{g}_{x}" for x in forms.COMPONENTS for g in ("gamma", "n")}
    nums = {p: _read_numbers(w) for p, w in wide.items()} if need <= set(wide["fast"].columns) else {}
    numbers = {}
    for name in nums.get("fast", {}):
        ref = nums["reference"][name]
        if name in ("f_w(4)", "P*"):
            for q, end in ((2.5, "low"), (97.5, "high")):
                rec = {"reference": float(np.nanpercentile(ref, q))}
                for p in ("fast", "bound_refit"):
                    v = float(np.nanpercentile(nums[p][name], q))
                    se = float(percentile_diff_se(nums[p][name], ref, [q])[0])
                    rec.update({p: v, f"{p}_diff": v - rec["reference"], f"{p}_se": se,
                                f"{p}_agrees": _agree(v - rec["reference"], se)})
                rec["reference_mc_se"] = float(la._percentile_mc_se(ref[np.isfinite(ref)], (q,))[0])
                numbers[f"{name} {end}"] = rec
        else:
            rec = {"reference": float(np.nanmean(ref))}
            for p in ("fast", "bound_refit"):
                d = nums[p][name] - ref
                d = d[np.isfinite(d)]
                diff, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d)))
                rec.update({p: float(np.nanmean(nums[p][name])), f"{p}_diff": diff, f"{p}_se": se,
                            f"{p}_agrees": _agree(diff, se)})
            fin = ref[np.isfinite(ref)]
            rec["reference_mc_se"] = float(fin.std(ddof=1) / math.sqrt(len(fin)))
            numbers[name] = rec
    return {"n_draws": int(table["draw"].nunique()), "max_draw": int(table["draw"].max()), "stages": stages,
            "numbers": numbers}


# --- coverage of the fast path on data with known constants ------------------------------------------

_COVER_KEYS = ("alpha", "E", "gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv")


def synthetic_truth(frames: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Known constants for the coverage check, each fitted on our runs (all of them identified there): the
    full-sample Chinchilla (tied α = β), γ_w, n_w and γ_a, n_a of the absolute-loss stages on it, and
    γ_kv, n_kv of the paired-difference stage (the absolute-loss stage puts n_kv on its bound; the
    paper's Table 2 constants make N_eff ≤ 0 at our 2–3-bit activation runs, Eq. 4 undefined)."""
    chin = dict(lf.fit_stage(lf.STAGES["chinchilla"], frames["chinchilla"]).params)
    out = dict(chin)
    for s in ("neff_w", "neff_a", "neff_kv_paired"):
        out.update(lf.fit_stage(lf.STAGES[s], frames[s], chin).params)
    return out


def fast_coverage(n_datasets: int = 10, n_boot: int = 100, *, profile: str = "cpu", noise: float | None = None,
                  seed: int = 0, frame: pd.DataFrame | None = None, root: str | os.PathLike | None = None,
                  progress: bool = False) -> pd.DataFrame:
    """Coverage of the fast pipeline bootstrap's 95 % intervals on synthetic runs with known constants.

    Each dataset keeps our design (every run of the Chinchilla and the three N_eff stages: the same
    N, D, bits and runs) and replaces each loss by Eqs. 3–4 at ``synthetic_truth`` times
    exp(σ·z), z standard normal per row (NumPy ``default_rng([seed, k])`` for dataset k); the fast path
    (``law_fits._refit_draw`` from that dataset's full-sample optima) is run on ``n_boot`` resamples,
    and each constant's and f_x(4 bits)'s percentile interval is checked against the truth.

    Args:
        n_datasets, n_boot: ints ≥ 1 (datasets; resamples per dataset).
        profile: whose runs give the design. noise: σ of ln L (default: the base grid's pooled seed σ
            of the loss over its mean loss, ``noise.noise_model``). seed: the generator's seed.
        frame: use these rows instead of the profile's training sweeps (tests). root: a ``data/`` folder.
        progress: a progress bar.

    Returns:
        One row per dataset and quantity: ``dataset``, ``quantity``, ``truth``, ``low``, ``high``,
        ``covered`` (low ≤ truth ≤ high), ``n_ok`` (resamples that fitted); ``attrs["noise"]``.

    Raises:
        ValueError: ``n_datasets`` or ``n_boot`` not an int ≥ 1, or a negative ``noise``.
    """
    from tqdm.auto import tqdm

    from .noise import noise_model

    for name, v in (("n_datasets", n_datasets), ("n_boot", n_boot)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    df = frame if frame is not None else load_runs(profile, experiment=la.TRAINING_EXPERIMENTS, root=root)
    frames = la.stage_frames(df)
    stages = list(la.PIPELINE_STAGES)
    if noise is None:
        nm = noise_model(df)
        noise = float(nm.loss_sd / frames["chinchilla"]["loss_val"].mean())
    if not noise >= 0:
        raise ValueError(f"noise is a standard deviation of ln L and must be ≥ 0, got {noise!r}")
    truth = synthetic_truth(frames)
    f4 = {f"f_{x}(4)": float(forms.precision_factor(4.0, truth[f"gamma_{x}"], truth[f"n_{x}"]))
          for x in forms.COMPONENTS}
    rows = []
    for k in tqdm(range(n_datasets), desc="fast coverage", disable=not progress):
        rng = np.random.default_rng([seed, k])
        syn = {}
        for s in stages:
            f = frames[s].copy()
            mean = forms.qat_loss(f["n_params"].to_numpy(float), f["n_tokens"].to_numpy(float),
                                  *(pd.to_numeric(f[c], errors="coerce").fillna(16).to_numpy(float)
                                    for c in ("bits_w", "bits_a", "bits_kv")), truth)
            f["loss_val"] = np.asarray(mean, dtype=float) * np.exp(noise * rng.standard_normal(len(f)))
            syn[s] = f
        starts = la._full_sample_starts(syn, stages)
        draws = [la._refit_draw(syn, stages, [], la._draw_picks(syn, stages, la.BOOT_SEED, i), starts)[0]
                 for i in range(n_boot)]
        draws = [d for d in draws if d is not None]
        vals = {q: np.array([d[q] for d in draws], dtype=float) for q in _COVER_KEYS}
        vals.update({f"f_{x}(4)": np.asarray(forms.precision_factor(4.0, vals[f"gamma_{x}"], vals[f"n_{x}"]),
                                             dtype=float) for x in forms.COMPONENTS})
        for q, v in vals.items():
            v = v[np.isfinite(v)]
            lo, hi = np.percentile(v, [2.5, 97.5]) if len(v) >= 2 else (math.nan, math.nan)
            t = f4[q] if q in f4 else float(truth[q])
            rows.append({"dataset": k, "quantity": q, "truth": t, "low": float(lo), "high": float(hi),
                         "covered": bool(lo <= t <= hi), "n_ok": len(draws)})
    out = pd.DataFrame(rows)
    out.attrs["noise"] = noise
    return out


def coverage_summary(cov: pd.DataFrame) -> pd.DataFrame:
    """Per quantity: datasets covered of ``n`` and the Clopper–Pearson 95 % interval on the coverage
    (``scipy.stats.binomtest``). Index: quantity."""
    from scipy.stats import binomtest

    rows = []
    for q, g in cov.groupby("quantity", sort=False):
        k, n = int(g["covered"].sum()), int(len(g))
        ci = binomtest(k, n).proportion_ci(0.95, method="exact")
        rows.append({"quantity": q, "covered": k, "n": n, "coverage": k / n, "low": ci.low, "high": ci.high})
    return pd.DataFrame(rows).set_index("quantity")


# --- the chapter's text ---------------------------------------------------------------------------

def coverage_path(profile: str, root: str | os.PathLike | None = None) -> Path:
    """``data/fits/<profile>_pipeline_boot_coverage.csv`` under ``root`` (default ``data_dir()``)."""
    return Path(root or data_dir()) / "fits" / f"{profile}_pipeline_boot_coverage.csv"


def load_coverage(profile: str = "cpu", root: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """The committed coverage table (``fast_coverage``), or None where it is not there."""
    path = coverage_path(profile, root)
    return pd.read_csv(path) if path.is_file() else None


_NUMBER_LABELS = {"f_w(4) low": "P3: f_w(4), 2.5 %", "f_w(4) high": "P3: f_w(4), 97.5 %",
                  "p_order": "P4: p_order", "p_a_most": "P4: p_a_most", "p_kv_below_w": "P4: p_kv_below_w",
                  "P* low": "P6: P*, 2.5 %", "P* high": "P6: P*, 97.5 %"}


def check_table(summary: Mapping) -> pd.DataFrame:
    """The numbers the verdicts read, by path (``check_summary``'s ``numbers``): reference, fast,
    fast − reference with its Monte Carlo error (one standard error, paired), the reference's own
    Monte Carlo error, and the bound refit's difference. Index: the number (claim: what)."""
    rows = []
    for key, label in _NUMBER_LABELS.items():
        r = summary["numbers"].get(key)
        if r is None:
            continue
        rows.append({"number": label, "reference": r["reference"], "fast": r["fast"],
                     "fast − reference": r["fast_diff"], "MC error (fast − reference)": r["fast_se"],
                     "within 2 errors": "yes" if r["fast_agrees"] else "no",
                     "bound refit − reference": r["bound_refit_diff"],
                     "MC error (bound refit − reference)": r["bound_refit_se"],
                     "MC error (reference)": r["reference_mc_se"]})
    return pd.DataFrame(rows).set_index("number")


def check_text(summary: Mapping, n_boot: int | None = None) -> str:
    """A paragraph on the check (``check_summary``): how many draws, where the fast fit ends worse and
    by how much, how many of those the bound refit catches, and whether the verdicts' numbers agree."""
    st = summary["stages"]
    n = summary["n_draws"]
    worse = "; ".join(f"`{s}` {v['fast_worse']}" + (f" (at most {v['max_gap']:.1%} above)" if v["fast_worse"] else "")
                      for s, v in st.items())
    n_worse = sum(v["fast_worse"] for v in st.values())
    caught = sum(v["fast_worse"] - v["worse_not_on_bound"] for v in st.values())
    on_b = ", ".join(f"{v['fast_on_bound']} of `{s}`" for s, v in st.items() if v["fast_on_bound"])
    fixed = sum(v["bound_fixed"] for v in st.values())
    ups = st.get("chinchilla", {}).get("fast_worse", 0)
    agree = [k for k, r in summary["numbers"].items() if not r["fast_agrees"]]
    of = f" of the pipeline bootstrap's {n_boot}" if n_boot else ""
    which = f"the first {n}{of} resamples" if summary["max_draw"] == n - 1 else \
        f"{n} of the first {summary['max_draw'] + 1}{of} resamples (draws picked by index, not by outcome)"
    return (f"On {which}, every stage was refitted with its own full multi-start "
            f"(`bitlaws.study.boot_check`), and the better of the two objectives per stage taken as the reference. "
            f"Draws whose fast fit ends above the full multi-start's objective by more than {OBJ_RTOL:g} (relative), "
            f"per stage: {worse}. "
            + (f"In {ups} the fast Chinchilla was the worse, so the later stages of the fast path rest on other "
               "constants than the reference's. " if ups else "")
            + f"{caught} of the {n_worse} worse fits had a constant on a bound, so refitting only the fits that land on "
            f"a bound would catch them. The fast fit had a constant on a bound in {on_b or 'no draw'}"
            f"{' draws' if on_b else ''}; refitting those from every start lowered the objective in {fixed}. "
            + ("Every number the verdicts read agrees between the fast path and the reference within two Monte "
               "Carlo errors (paired: the same resamples, so the error of a difference is that of the draws that "
               "move)." if not agree else
               "Outside two Monte Carlo errors: " + ", ".join(_NUMBER_LABELS.get(k, k) for k in agree) + "."))


def coverage_text(cov: pd.DataFrame) -> str:
    """A sentence on ``fast_coverage``: datasets, resamples, and the pooled share covered with its
    Clopper–Pearson interval (pooled over quantities, which are not independent)."""
    from scipy.stats import binomtest

    k, n = int(cov["covered"].sum()), int(len(cov))
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    lo, hi = int(cov["n_ok"].min()), int(cov["n_ok"].max())
    return (f"On {cov['dataset'].nunique()} synthetic datasets on our design with known constants "
            f"({lo if lo == hi else f'{lo}–{hi}'} resamples each), the fast path's 95 % intervals covered "
            f"the truth in {k} of {n} (dataset, quantity) cases ({k / n:.0%}, exact 95 % interval {ci.low:.0%}–"
            f"{ci.high:.0%}, the quantities of one dataset not independent); per quantity below.")


def _main(argv=None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(description="The pipeline bootstrap's fast starts against a reference "
                                 "(writes data/fits/<profile>_pipeline_boot_check.csv, and with --coverage "
                                 "<profile>_pipeline_boot_coverage.csv).")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--n", type=int, default=None, help="draws 0 … n − 1 (default CHECK_N[profile])")
    ap.add_argument("--coverage", type=int, nargs=2, metavar=("DATASETS", "RESAMPLES"), default=None)
    args = ap.parse_args(argv)
    if args.coverage:
        cov = fast_coverage(*args.coverage, profile=args.profile, progress=True)
        path = coverage_path(args.profile)
        cov.to_csv(path, index=False, float_format="%.10g")
        print(f"wrote {path}; noise σ of ln L {cov.attrs['noise']:.4g}")
    else:
        table = boot_check(args.profile, args.n, progress=True)
        print(json.dumps({k: v for k, v in table.attrs.items()}, indent=1))
        print(json.dumps(check_summary(table)["stages"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())


# --- P6's P* leg, by simulation through the verdict's own instrument -------------------------------

# The columns of ``checks/<profile>/p6_pstar_power.csv``, one row per simulated dataset (data/README.md).
P6_PSTAR_COLUMNS = ["sim_id", "world", "noise", "rng", "dataset", "seed_sd", "floor", "n_boot", "p_star_true",
                    "p_star_point",
                    "low", "high", "width", "grade", "n_ok", "n_p_star", "sim_version", "inputs_sha256", "git_sha",
                    "timestamp"]


# The columns of ``checks/<profile>/p6_pstar_power_plan.csv``: the identity of every dataset a writer's call was
# asked for, written before it simulates any, so a killed call leaves its unfinished datasets on record and the
# cascade (``bitlaws.study.cascade``) resumes them (data/README.md).
P6_PSTAR_PLAN_COLUMNS = ["sim_id", "world", "noise", "rng", "dataset", "seed_sd", "floor", "n_boot", "sim_version",
                         "inputs_sha256", "timestamp"]


def p6_pstar_identity(world: str, dataset: int, *, seed: int, seed_sd: float, floor: float, n_boot: int,
                      residual: bool, noise_label: str = "seed", inputs_sha256: str = "") -> dict:
    """The identifying columns of dataset ``dataset`` of world ``world`` in P6's table (:data:`P6_PSTAR_COLUMNS`
    and :data:`P6_PSTAR_PLAN_COLUMNS` share them): ``sim_id`` (:func:`p6_pstar_sim_id`), ``world``, ``noise``
    (``residual`` where ``residual``, else ``noise_label``), ``rng``, ``dataset``, ``seed_sd`` [nats], ``floor``,
    ``n_boot``, ``sim_version`` (``power.P6_PSTAR_SIM_VERSION``) and ``inputs_sha256``. :func:`p6_pstar_rows`
    writes these for each dataset it simulates, and ``compute_optimal.write_p6_pstar_power`` records them for
    each dataset it is asked for before it simulates any."""
    from .power import P6_PSTAR_SIM_VERSION

    label = "residual" if residual else noise_label
    return {"sim_id": p6_pstar_sim_id(world, seed, dataset, seed_sd, floor, n_boot, residual, label, inputs_sha256),
            "world": world, "noise": label, "rng": int(seed), "dataset": int(dataset), "seed_sd": float(seed_sd),
            "floor": float(floor), "n_boot": int(n_boot), "sim_version": P6_PSTAR_SIM_VERSION,
            "inputs_sha256": inputs_sha256}


def p6_pstar_sim_id(world: str, seed: int, dataset: int, seed_sd: float, floor: float, n_boot: int,
                    residual: bool, noise: str = "seed", inputs_sha256: str = "") -> str:
    """The key of one row of ``p6_pstar_power.csv``: ``world:rng:dataset:seed_sd:floor:n_boot``, with
    ``:residual`` appended for residual-noise rows and ``:<noise>`` for another seed-noise variant
    (``seed_upper``), then ``@`` and the first 12 hex digits of the training rows' hash: the same dataset
    simulated from other rows (after the data freeze moves) is another row, so nothing is overwritten or
    skipped (:func:`migrate_p6_sim_ids` gave the rows written before the hash was in the key theirs)."""
    tail = ":residual" if residual else "" if noise == "seed" else f":{noise}"
    sha = f"@{inputs_sha256[:12]}" if inputs_sha256 else ""
    return f"{world}:{seed}:{dataset}:{seed_sd:.6g}:{floor:g}:{n_boot}" + tail + sha


def migrate_p6_sim_ids(path: str | os.PathLike) -> int:
    """Append ``@<inputs_sha256[:12]>`` to each ``sim_id`` of a P6 table that lacks it (rows written before
    :func:`p6_pstar_sim_id` named the training rows), through ``store.rewrite_rows`` (under the file's lock;
    no other cell changes, no row added or dropped). Idempotent; returns the number of keys changed."""
    from .store import rewrite_rows

    changed = []

    def rewrite(header, rows):
        out = []
        for r in rows:
            if "@" not in r["sim_id"] and r.get("inputs_sha256"):
                r = {**r, "sim_id": f"{r['sim_id']}@{r['inputs_sha256'][:12]}"}
                changed.append(r["sim_id"])
            out.append(r)
        return (header, out, {"sim_id"}) if changed else None

    rewrite_rows(path, rewrite, key="sim_id")
    return len(changed)


def full_sample_fits(frames: Mapping[str, pd.DataFrame], stages: Sequence[str]) -> tuple[dict, dict]:
    """Each stage of ``stages`` (Chinchilla first) fitted on every run, as ``law_fits._full_sample_starts``
    fits them: (the N_eff stages' constants, stage -> (1, p) starts, the very starts the pipeline
    bootstrap begins each resample from)."""
    chin = lf.fit_stage(lf.STAGES["chinchilla"], frames["chinchilla"])
    point, starts = {}, {"chinchilla": np.asarray(chin.theta, dtype=float)[None, :]}
    for s in stages[1:]:
        res = lf.fit_stage(lf.STAGES[s], frames[s], dict(chin.params))
        point.update(res.params)
        starts[s] = np.asarray(res.theta, dtype=float)[None, :]
    return point, starts


def p6_pstar_rows(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], noise, worlds: Mapping,
                  datasets: Sequence[int], *, n_boot: int = 100, seed: int = 0, seed_sd: float = 0.0,
                  floor: float | None = None, inputs_sha256: str = "", progress: bool = False,
                  stage_sd: Mapping[str, float] | None = None, noise_label: str = "seed"):
    """P6's P* leg graded on simulated datasets by the pipeline bootstrap the verdict reads (yielded one
    row per dataset, so a caller can store each as it finishes).

    Dataset k of world w (``power.p6_pstar_dataset``, generator ``default_rng([seed, k])``: every world
    reads the same noise for the same k) is fitted on every run (Chinchilla, then each N_eff stage on it:
    the point P*) and bootstrapped as ``law_fits.pipeline_bootstrap`` does (``n_boot`` resamples of
    runs, draw i from ``default_rng([BOOT_SEED, i])``, every stage refitted from the full-sample optimum
    and the best screened grid points); P* per draw (``optimal.optimal_precision``; draws without an
    interior optimum left out, as the verdict leaves them out) and its 2.5–97.5 % percentile interval,
    graded by ``power.p6_pstar_grade``.

    Args:
        frames: ``law_fits.stage_frames(df)`` of our rows (the design). chinchilla: the generating constants.
        noise: ``noise.noise_model``. worlds: ``power.p6_pstar_worlds``' mapping (or a sub-mapping).
        datasets: dataset indices k. n_boot: resamples per dataset (≥ 2). seed: the generator's seed.
        seed_sd: σ_seed [nats]. floor: ``extended_factor``'s floor (default ``power.NEFF_F_FLOOR``).
        inputs_sha256: the rows' hash, stored in each row. progress: a progress bar.
        stage_sd: per-frame σ [nats] instead of the seed noise (``power.p6_pstar_dataset``); the rows'
            ``noise`` is then ``residual`` (else ``noise_label``) and their ``sim_id`` ends in ``:residual``.
        noise_label: the ``noise`` of seed-noise rows: ``seed`` (σ_seed as estimated) or ``seed_upper``
            (``compute_optimal.write_p6_pstar_power``'s variant at σ_seed's upper end), named in ``sim_id``.

    Yields:
        dicts with the columns of :data:`P6_PSTAR_COLUMNS` (``sim_id`` their key; ``git_sha``,
        ``timestamp`` the writer's), ``grade`` one of inside / outside / straddles / none.

    Raises:
        ValueError: ``n_boot`` < 2, or ``power.p6_pstar_dataset``'s errors.
    """
    import datetime as dt

    from tqdm.auto import tqdm

    from .._io import git_sha
    from .power import NEFF_F_FLOOR, p6_pstar_dataset, p6_pstar_grade

    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an int ≥ 2, got {n_boot!r}")
    floor = NEFF_F_FLOOR if floor is None else float(floor)
    stages = list(la.PIPELINE_STAGES)
    todo = [(w, int(k)) for k in datasets for w in worlds]
    for w, k in tqdm(todo, desc="P6 P* leg", disable=not progress):
        curves = worlds[w]
        truth = {f"{n}_{x}": v for x, (g, o) in curves.items() for n, v in (("gamma", g), ("n", o))}
        syn = p6_pstar_dataset(frames, chinchilla, curves, noise, np.random.default_rng([seed, k]), seed_sd, floor,
                               stage_sd)
        point, starts = full_sample_fits(syn, stages)
        draws = [la._refit_draw(syn, stages, [], la._draw_picks(syn, stages, la.BOOT_SEED, i), starts)[0]
                 for i in range(n_boot)]
        draws = [d for d in draws if d is not None]
        ps = np.array([_p_star(d) for d in draws])
        ps = ps[np.isfinite(ps)]
        lo, hi = (float(v) for v in np.percentile(ps, [2.5, 97.5])) if len(ps) >= 2 else (math.nan, math.nan)
        yield {**p6_pstar_identity(w, k, seed=seed, seed_sd=seed_sd, floor=floor, n_boot=n_boot,
                                   residual=stage_sd is not None, noise_label=noise_label, inputs_sha256=inputs_sha256),
               "p_star_true": _p_star(truth),
               "p_star_point": _p_star(point), "low": lo, "high": hi, "width": hi - lo,
               "grade": p6_pstar_grade(lo, hi), "n_ok": len(draws), "n_p_star": int(len(ps)),
               "git_sha": git_sha(), "timestamp": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}

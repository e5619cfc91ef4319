"""The post-training-quantization study: δ_PTQ tables, the seed-noise floor, verdicts on P1 and P2.

Claims (Kumar et al. 2024, Eq. 2, Fig. 1 left, Fig. 2):

* **P1** — δ_PTQ grows with D at fixed N, shrinks with N at fixed D, and grows exponentially as
  P_post falls.
* **P2** — past a critical data size D_crit, more pretraining makes the *quantized* model worse:
  the post-PTQ loss L(N, D) + δ_PTQ turns upward in D.

A trend counts only where it exceeds the **noise floor**: the standard deviation across seeds of
the same cell (same N, D, P_post), taken as the largest over the seed cells. A change must be larger
than ``NOISE_K`` times that floor. Everything here takes a results frame (see
:mod:`bitlaws.results`) and returns plain numbers, so the chapter, the tests and
``python -m bitlaws verdicts`` compute the same verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .laws.forms import PAPER_CONSTANTS
from .laws.optimal import critical_data_size
from .verdicts import CLAIMS, Verdict, load_verdicts, save_verdicts, update_readme

__all__ = [
    "NOISE_K",
    "PAPER_EQ2",
    "P1_BITS",
    "ptq_table",
    "noise_floor",
    "TrendCount",
    "trend_with_d",
    "trend_with_n",
    "trend_with_bits",
    "fit_gamma_post",
    "fit_eq2_loglinear",
    "post_ptq_rise",
    "verdict_p1",
    "verdict_p2",
    "refresh_verdicts",
]

NOISE_K = 2.0
# Eq. 2's exponents as Kumar et al. fit them (Table 2, GPTQ, INT3–6) and the fit's R² (Fig. 2).
PAPER_EQ2 = {"gamma_d": PAPER_CONSTANTS["gamma_D"], "gamma_n": PAPER_CONSTANTS["gamma_N"],
             "gamma_post": PAPER_CONSTANTS["gamma_post"], "r2": 0.97}
# The profile whose verdicts the book, the README and data/verdicts.json carry.
BOOK_PROFILE = "cpu"
# P_post values whose δ_PTQ is large enough to carry a trend at our scale (INT7/8 sit at the floor).
P1_BITS = (3, 4, 5)


def ptq_table(df: pd.DataFrame, method: str = "rtn") -> pd.DataFrame:
    """Seed-averaged δ_PTQ and post-PTQ loss per (N, D, P_post) for one PTQ method.

    Args:
        df: observation rows (``base_grid`` experiment), with ``status``, ``ptq_method``,
            ``n_params``, ``n_tokens``, ``bits_post``, ``loss_val``, ``delta_ptq``, ``seed``.
        method: ``ptq_method`` to keep (``"rtn"``).

    Returns:
        Columns ``n_params, n_tokens, bits_post, delta_ptq, delta_std, loss_post, loss_base,
        n_seeds`` (``loss_post`` = loss after PTQ, ``loss_base`` = before), one row per cell.

    Raises:
        ValueError: no ok rows for `method`.
    """
    ok = df[df["status"] == "ok"]
    q = ok[ok["ptq_method"] == method]
    if q.empty:
        raise ValueError(f"no rows with status ok and ptq_method={method!r}")
    base = ok[ok["ptq_method"] == "none"][["run_id", "loss_val"]].rename(columns={"loss_val": "loss_base"})
    q = q.merge(base, on="run_id", how="left")
    g = q.groupby(["n_params", "n_tokens", "bits_post"])
    out = g.agg(delta_ptq=("delta_ptq", "mean"), delta_std=("delta_ptq", "std"), loss_post=("loss_val", "mean"),
                loss_base=("loss_base", "mean"), n_seeds=("seed", "nunique")).reset_index()
    return out


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


@dataclass(frozen=True)
class TrendCount:
    """How many series show a trend in the expected direction beyond the noise floor."""

    n_series: int
    n_agree: int        # expected sign of the end-to-end change, beyond NOISE_K·floor
    n_monotone: int     # expected sign at every step (ignoring steps within the floor)

    @property
    def frac(self) -> float:
        return self.n_agree / self.n_series if self.n_series else math.nan


def _trend(tab: pd.DataFrame, by: str, along: str, sign: int, floor: dict[str, float],
           bits: tuple[int, ...]) -> TrendCount:
    n = agree = mono = 0
    for (b, _), s in tab[tab["bits_post"].isin(bits)].groupby(["bits_post", by]):
        s = s.sort_values(along)
        if len(s) < 2:
            continue
        thr = NOISE_K * floor.get(f"delta_{int(b)}", math.nan)
        thr = 0.0 if not math.isfinite(thr) else thr
        y = s["delta_ptq"].to_numpy()
        n += 1
        agree += bool(sign * (y[-1] - y[0]) > thr)
        steps = sign * np.diff(y)
        mono += bool(np.all(steps > -thr))
    return TrendCount(n, agree, mono)


def trend_with_d(tab: pd.DataFrame, floor: dict[str, float], bits: tuple[int, ...] = P1_BITS) -> TrendCount:
    """Series over D at fixed (N, P_post): does δ_PTQ rise from the smallest to the largest D?"""
    return _trend(tab, "n_params", "n_tokens", +1, floor, bits)


def trend_with_n(tab: pd.DataFrame, floor: dict[str, float], bits: tuple[int, ...] = P1_BITS) -> TrendCount:
    """Series over N at fixed (D, P_post): does δ_PTQ fall from the smallest to the largest N?"""
    return _trend(tab, "n_tokens", "n_params", -1, floor, bits)


def trend_with_bits(tab: pd.DataFrame, floor: dict[str, float]) -> TrendCount:
    """Series over P_post at fixed (N, D): is δ_PTQ larger at every lower bit width (beyond the floor)?"""
    n = agree = mono = 0
    for _, s in tab.groupby(["n_params", "n_tokens"]):
        s = s.sort_values("bits_post")
        y = s["delta_ptq"].to_numpy()
        thr = np.array([NOISE_K * floor.get(f"delta_{int(b)}", 0.0) for b in s["bits_post"]])
        thr = np.nan_to_num(thr)
        n += 1
        agree += bool(y[0] - y[-1] > thr[0])
        mono += bool(np.all(-np.diff(y) > -thr[:-1]))
    return TrendCount(n, agree, mono)


def fit_gamma_post(tab: pd.DataFrame, floor: dict[str, float]) -> tuple[float, float, int]:
    """γ_post from the slope of ln δ_PTQ against P_post, over cells where δ exceeds the floor.

    A common slope with one intercept per (N, D) (a fixed-effects least squares), since Eq. 2 is
    ``δ = C_T·D^γ_D/N^γ_N·exp(−P_post/γ_post)``: ``ln δ = const(N, D) − P_post/γ_post``.

    Returns:
        (γ_post [bits], R² of the within-cell fit, number of points used). NaN if < 3 points.
    """
    rows = []
    for key, s in tab.groupby(["n_params", "n_tokens"]):
        for _, r in s.iterrows():
            thr = NOISE_K * floor.get(f"delta_{int(r.bits_post)}", 0.0)
            if r.delta_ptq > max(thr if math.isfinite(thr) else 0.0, 1e-12):
                rows.append((key, r.bits_post, math.log(r.delta_ptq)))
    if len(rows) < 3:
        return math.nan, math.nan, len(rows)
    f = pd.DataFrame(rows, columns=["cell", "p", "ly"])
    f = f[f.groupby("cell")["p"].transform("count") >= 2]
    if len(f) < 3:
        return math.nan, math.nan, len(f)
    xc = f["p"] - f.groupby("cell")["p"].transform("mean")
    yc = f["ly"] - f.groupby("cell")["ly"].transform("mean")
    slope = float((xc * yc).sum() / (xc * xc).sum())
    resid = yc - slope * xc
    r2 = 1.0 - float((resid**2).sum() / (yc**2).sum())
    return (-1.0 / slope if slope < 0 else math.inf), r2, len(f)


def fit_eq2_loglinear(tab: pd.DataFrame, floor: dict[str, float]) -> dict[str, float]:
    """Eq. 2 as a linear regression of ln δ_PTQ on (1, ln D, ln N, P_post), over cells above the floor.

    ``ln δ = ln C_T + γ_D·ln D − γ_N·ln N − P_post/γ_post``. Least squares on the log scale, so only
    cells whose δ exceeds NOISE_K × the seed spread at that P_post enter (a censored sample: the
    exponents are those of the measurable part of the grid). The paper fits the same form with its
    own constants (Table 2); the full Huber fit with bootstrap intervals is in :mod:`bitlaws.laws`.

    Returns:
        ``gamma_d, gamma_n, gamma_post`` (bits), ``c_t`` (nats, D and N in raw units), ``r2`` (on
        ln δ), ``n_points``; NaN when fewer than 6 points qualify.
    """
    keep = []
    for _, r in tab.iterrows():
        thr = NOISE_K * floor.get(f"delta_{int(r.bits_post)}", math.nan)
        if math.isfinite(thr) and r.delta_ptq > thr:
            keep.append((math.log(r.n_tokens), math.log(r.n_params), r.bits_post, math.log(r.delta_ptq)))
    out = {"gamma_d": math.nan, "gamma_n": math.nan, "gamma_post": math.nan, "c_t": math.nan, "r2": math.nan,
           "n_points": float(len(keep))}
    if len(keep) < 6:
        return out
    a = np.array(keep)
    x = np.column_stack([np.ones(len(a)), a[:, 0], a[:, 1], a[:, 2]])
    coef, *_ = np.linalg.lstsq(x, a[:, 3], rcond=None)
    resid = a[:, 3] - x @ coef
    out.update(gamma_d=float(coef[1]), gamma_n=float(-coef[2]),
               gamma_post=float(-1.0 / coef[3]) if coef[3] < 0 else math.inf, c_t=float(math.exp(coef[0])),
               r2=float(1 - (resid**2).sum() / ((a[:, 3] - a[:, 3].mean()) ** 2).sum()))
    return out


def post_ptq_rise(tab: pd.DataFrame, floor: dict[str, float]) -> pd.DataFrame:
    """For each (N, P_post), where the post-PTQ loss is lowest in D and how much it rises after.

    Returns:
        Columns ``n_params, bits_post, d_best`` (D at the minimum post-PTQ loss), ``d_max``,
        ``rise`` (loss at the largest D minus the minimum, nats), ``threshold``
        (NOISE_K × the seed spread of the post-PTQ loss), ``significant`` (rise > threshold).
    """
    out = []
    for (n, b), s in tab.groupby(["n_params", "bits_post"]):
        s = s.sort_values("n_tokens")
        i = int(np.argmin(s["loss_post"].to_numpy()))
        rise = float(s["loss_post"].iloc[-1] - s["loss_post"].iloc[i])
        thr = NOISE_K * floor.get(f"loss_post_{int(b)}", math.nan)
        thr = thr if math.isfinite(thr) else 0.0
        out.append({"n_params": n, "bits_post": b, "d_best": int(s["n_tokens"].iloc[i]),
                    "d_max": int(s["n_tokens"].iloc[-1]), "rise": rise, "threshold": thr,
                    "significant": bool(rise > thr and i < len(s) - 1)})
    return pd.DataFrame(out)


def _required_floor(df: pd.DataFrame) -> dict[str, float]:
    floor = noise_floor(df)
    if not floor["n_cells"]:
        raise ValueError("no cell has ≥ 2 seeds, so there is no noise floor to judge trends against; "
                         "run the profile's seed cells first")
    return floor


def _finite_or_na(details: dict[str, float]) -> dict[str, float | str]:
    """The verdict store keeps finite numbers only; a number we could not measure is stored as "n/a"."""
    return {k: (float(v) if math.isfinite(float(v)) else "n/a") for k, v in details.items()}


def _grade(fracs: list[float]) -> str:
    if all(f >= 0.75 for f in fracs):
        return "reproduced"
    if any(f >= 0.5 for f in fracs):
        return "partly"
    return "not reproduced"


def verdict_p1(df: pd.DataFrame, profile: str, inputs_sha256: str = "") -> Verdict:
    """Verdict on P1 from the base-grid rows (see the module docstring for the rule).

    Reproduced when ≥ 75% of the series agree beyond the noise floor in all three directions
    (with D, against N, against P_post); partly when any direction reaches 50%.
    """
    tab = ptq_table(df)
    floor = _required_floor(df)
    d, n, b = trend_with_d(tab, floor), trend_with_n(tab, floor), trend_with_bits(tab, floor)
    gamma, r2, npts = fit_gamma_post(tab, floor)
    eq2 = fit_eq2_loglinear(tab, floor)
    verdict = _grade([d.frac, n.frac, b.frac])
    bits_used = sorted(int(x) for x in set(P1_BITS) & set(tab["bits_post"]))
    ours = (f"δ_PTQ rises with D in {d.n_agree}/{d.n_series} (N, P_post) series and falls with N in "
            f"{n.n_agree}/{n.n_series} (D, P_post) series at P_post ∈ {{{', '.join(map(str, bits_used))}}}, beyond "
            f"{NOISE_K:g}σ of seeds; larger at lower P_post in {b.n_agree}/{b.n_series} (N, D) cells; "
            f"γ_post ≈ {gamma:.2f} bits (R² {r2:.2f}); Eq. 2 log-linear fit over {int(eq2['n_points'])} cells "
            f"above the floor: γ_D ≈ {eq2['gamma_d']:.2f}, γ_N ≈ {eq2['gamma_n']:.2f}, γ_post ≈ {eq2['gamma_post']:.2f} "
            f"(R² {eq2['r2']:.2f})")
    reason = ("RTN per-channel on byte-level Shakespeare, N ≤ "
              f"{int(tab['n_params'].max()):,}, D ≤ {int(tab['n_tokens'].max()):,} bytes; the paper used GPTQ at "
              "N ≥ 30M, D ≥ 1.5B tokens. γ_post is per bit of P_post and comparable across scales.")
    return Verdict("P1", verdict, CLAIMS["P1"]["paper"], ours, reason, profile, inputs_sha256,
                   _finite_or_na({"frac_with_d": d.frac, "frac_with_n": n.frac, "frac_with_bits": b.frac,
                    "gamma_post": gamma, "gamma_post_r2": r2, "gamma_post_points": float(npts),
                    "eq2_gamma_d": eq2["gamma_d"], "eq2_gamma_n": eq2["gamma_n"], "eq2_gamma_post": eq2["gamma_post"],
                    "eq2_r2": eq2["r2"], "eq2_points": eq2["n_points"],
                    "noise_floor_loss": floor["loss"], "noise_cells": floor["n_cells"]}))


def verdict_p2(df: pd.DataFrame, profile: str, inputs_sha256: str = "") -> Verdict:
    """Verdict on P2: does the post-PTQ loss rise with D past a minimum, beyond the noise floor?

    Reproduced if some (N, P_post) series turns upward significantly at the smallest N; partly if
    it happens only at other N; not reproduced otherwise (the loss keeps falling at our D/N).
    """
    tab = ptq_table(df)
    floor = _required_floor(df)
    rise = post_ptq_rise(tab, floor)
    sig = rise[rise["significant"]]
    n_min = tab["n_params"].min()
    dn_max = float((tab["n_tokens"] / tab["n_params"]).max())
    if len(sig) and (sig["n_params"] == n_min).any():
        verdict = "reproduced"
    elif len(sig):
        verdict = "partly"
    else:
        verdict = "not reproduced"
    if len(sig):
        first = sig.sort_values(["n_params", "bits_post"]).iloc[0]
        ours = (f"post-PTQ loss turns upward in {len(sig)}/{len(rise)} (N, P_post) series; e.g. N = "
                f"{int(first.n_params):,} at INT{int(first.bits_post)}: lowest at D = {int(first.d_best):,}, "
                f"+{first.rise:.3f} nats by D = {int(first.d_max):,}")
    else:
        ours = f"post-PTQ loss keeps falling with D in all {len(rise)} (N, P_post) series up to D/N ≈ {dn_max:.0f}"
    d_crit = float(critical_data_size(30e6, 3, PAPER_CONSTANTS))
    reason = (f"our largest D/N is ≈ {dn_max:.0f} bytes per parameter (the paper counts BPE tokens, several "
              "bytes each); with Table 2's constants (Eq. 13) the paper's INT3 turn-up for N = 30M comes at "
              f"D_crit ≈ {d_crit / 1e9:.1f}B tokens, D/N ≈ {d_crit / 30e6:.0f}, and later for larger N or more bits")
    return Verdict("P2", verdict, CLAIMS["P2"]["paper"], ours, reason, profile, inputs_sha256,
                   _finite_or_na({"series_rising": float(len(sig)), "series": float(len(rise)),
                                  "max_d_over_n": dn_max}))


def refresh_verdicts(profile: str = BOOK_PROFILE, write: bool = True) -> dict[str, Verdict]:
    """Recompute P1 and P2 from ``data/runs/<profile>``; with `write`, store them in ``data/verdicts.json``
    and the README's ledger (only the book's profile should be written).

    Raises:
        FileNotFoundError: no results for `profile`.
    """
    from .results import data_dir, frame_sha256, load_runs
    from .verdicts import repo_root

    df = load_runs(profile, experiment="base_grid")
    sha = frame_sha256(df)
    verdicts = load_verdicts(data_dir() / "verdicts.json")
    verdicts["P1"] = verdict_p1(df, profile, sha)
    verdicts["P2"] = verdict_p2(df, profile, sha)
    if write:
        save_verdicts(verdicts, data_dir() / "verdicts.json")
        update_readme(repo_root() / "README.md", verdicts)
    return {k: verdicts[k] for k in ("P1", "P2")}

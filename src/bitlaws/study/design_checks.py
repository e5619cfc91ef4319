"""The design checks of issue 15: the learning-rate rule, the schedule and the repetition confounds.

Three questions a referee asks before trusting any trend in δ_PTQ with D:

* ``lr_rule_check`` — is the peak-LR rule within the seed noise of the best of the tried rates?
* ``schedule_table`` — does δ_PTQ grow with D under a constant LR (the tokens), or only after a
  decay (Catalan-Tatjer et al. 2025: the low-LR phase and cumulative weight decay)? Constant-LR
  runs against their WSD cooldowns, and both against the cosine base grid, by log-log slope.
* ``repetition_table`` — does P2's turn-up follow the passes over the data? The same (N, D) on the
  whole, half and quarter training split.

Each reads only committed rows (``load_runs``); the seed noise is the base grid's pooled variance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from .noise import pooled_seed_variance

__all__ = ["lr_rule_check", "schedule_table", "schedule_slopes", "repetition_table"]


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def lr_rule_check(base: pd.DataFrame, lr_runs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The rule's pre-PTQ loss against the best tried peak learning rate, per size.

    Args:
        base: base-grid rows (the rule's runs, and the seeded cells for the noise).
        lr_runs: ``lr_peak`` rows (the same sizes and D at other peak rates).
        alpha: two-sided level of the test "the rule is worse than the best rate".

    Returns:
        One row per size: ``size``, ``n_tokens``, ``loss_rule``, ``lr_rule``, ``loss_best``,
        ``lr_best``, ``gap`` (rule − best, nats, ≥ 0), ``se`` (√(2σ²) of a difference of two
        single-seed runs, σ² the pooled seed variance), ``dof``, ``t_crit``, and ``within_noise``
        (gap ≤ t_crit·se: the rule is not detectably worse than the best tried rate).

    Raises:
        ValueError: no ``lr_peak`` rows, or a size whose rule run is missing from `base`.
    """
    lr_ok = _ok(lr_runs)
    lr_ok = lr_ok[lr_ok["ptq_method"] == "none"]
    if lr_ok.empty:
        raise ValueError("no lr_peak rows; run `python -m bitlaws sweep --experiments lr_peak`")
    var, dof = pooled_seed_variance(base)
    se = math.sqrt(2 * var) if dof else math.nan
    t_crit = float(stats.t.ppf(1 - alpha / 2, dof)) if dof else math.nan
    hp = _ok(base)
    hp = hp[(hp["ptq_method"] == "none") & (hp["seed"] == 0)]
    out = []
    for (size, d), g in lr_ok.groupby(["size", "n_tokens"]):
        rule = hp[(hp["size"] == size) & (hp["n_tokens"] == d)]
        if rule.empty:
            raise ValueError(f"no base-grid run of {size} at D={d} to compare the learning rates with")
        cand = pd.concat([rule[["lr_peak", "loss_val"]], g[g["seed"] == 0][["lr_peak", "loss_val"]]])
        best = cand.loc[cand["loss_val"].idxmin()]
        loss_rule = float(rule["loss_val"].iloc[0])
        gap = loss_rule - float(best["loss_val"])
        out.append({"size": size, "n_tokens": int(d), "loss_rule": loss_rule, "lr_rule": float(rule["lr_peak"].iloc[0]),
                    "loss_best": float(best["loss_val"]), "lr_best": float(best["lr_peak"]), "gap": gap, "se": se,
                    "dof": dof, "t_crit": t_crit, "within_noise": bool(gap <= t_crit * se) if dof else False})
    return pd.DataFrame(out)


def schedule_table(sched: pd.DataFrame, base: pd.DataFrame | None = None, method: str = "gptq") -> pd.DataFrame:
    """δ_PTQ and the pre-PTQ loss per (size, D, bits) for the constant-LR runs, their WSD cooldowns
    and (when `base` is given) the cosine base grid at the same D.

    Args:
        sched: ``lr_schedule`` rows. base: base-grid rows (optional). method: ``rtn`` or ``gptq``.

    Returns:
        Long frame: ``size``, ``n_params``, ``schedule`` (``constant`` | ``wsd`` | ``cosine``),
        ``d_branch`` (D of the constant run a WSD run branches from; D itself otherwise),
        ``n_tokens``, ``bits_post``, ``loss_pre``, ``delta_ptq``.
    """
    frames = []
    s = _ok(sched)
    if len(s):
        pre = s[s["ptq_method"] == "none"][["run_id", "loss_val"]].rename(columns={"loss_val": "loss_pre"})
        q = s[s["ptq_method"] == method].merge(pre, on="run_id")
        # A WSD run is D + C tokens; its branch point is the constant run of the same size with the
        # largest D below it (the sweep declares them in pairs).
        lengths = {size: sorted(g["n_tokens"].unique()) for size, g in q.groupby("size")}
        sched_kind = np.where(q["run_id"].isin(_wsd_runs(s)), "wsd", "constant")
        q = q.assign(schedule=sched_kind)
        q["d_branch"] = [int(max([d for d in lengths[z] if d < n] or [n])) if k == "wsd" else int(n)
                         for z, n, k in zip(q["size"], q["n_tokens"], q["schedule"])]
        frames.append(q)
    if base is not None:
        b = _ok(base)
        b = b[b["seed"] == 0]
        pre = b[b["ptq_method"] == "none"][["run_id", "loss_val"]].rename(columns={"loss_val": "loss_pre"})
        q = b[(b["ptq_method"] == method) & b["size"].isin(set(sched["size"]))].merge(pre, on="run_id")
        frames.append(q.assign(schedule="cosine", d_branch=q["n_tokens"].astype(int)))
    cols = ["size", "n_params", "schedule", "d_branch", "n_tokens", "bits_post", "loss_pre", "delta_ptq"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols].sort_values(["size", "schedule", "bits_post", "n_tokens"]
                                                                  ).reset_index(drop=True)


def _wsd_runs(rows: pd.DataFrame) -> set:
    """run_ids of the WSD runs among ``lr_schedule`` rows: within a size, a run whose D is a constant
    run's D plus the declared cooldown (read from the sweep declaration of the row's profile)."""
    from .sweep import plan

    ids = set()
    for profile in rows["profile"].unique():
        ids |= {s.run_id for s in plan(profile, "lr_schedule") if s.train.schedule == "wsd"}
    return ids


def schedule_slopes(table: pd.DataFrame) -> pd.DataFrame:
    """The log-log slope of δ_PTQ in D per (size, schedule, bits): d log δ / d log D by least squares
    over the D where δ > 0, with its standard error. A constant-LR slope near the cosine one says
    the tokens drive δ's growth; a constant-LR slope near 0 with a large WSD jump says the decay does.

    Returns:
        ``size``, ``schedule``, ``bits_post``, ``slope``, ``slope_se``, ``n`` (NaN with < 3 points).
    """
    out = []
    for (size, sch, b), g in table.groupby(["size", "schedule", "bits_post"]):
        g = g[g["delta_ptq"] > 0]
        x, y = np.log(g["d_branch"].to_numpy(float)), np.log(g["delta_ptq"].to_numpy(float))
        if len(g) >= 3 and np.ptp(x) > 0:
            fit = stats.linregress(x, y)
            slope, se = float(fit.slope), float(fit.stderr)
        else:
            slope = se = math.nan
        out.append({"size": size, "schedule": sch, "bits_post": int(b), "slope": slope, "slope_se": se, "n": len(g)})
    return pd.DataFrame(out)


def repetition_table(base: pd.DataFrame, rep: pd.DataFrame, method: str = "gptq") -> pd.DataFrame:
    """The same (N, D) trained on the whole, half and quarter of the training split.

    Args:
        base: base-grid rows (the whole split, seed 0). rep: ``repetition`` rows. method: PTQ method.

    Returns:
        ``size``, ``n_tokens``, ``train_fraction``, ``passes`` (D / tokens trained on),
        ``bits_post``, ``loss_pre``, ``loss_post``, ``delta_ptq``.
    """
    from ..corpus import load_corpus

    fractions = _fractions(rep)
    rows = []
    for frame, is_rep in ((base, False), (rep, True)):
        f = _ok(frame)
        f = f[f["seed"] == 0] if not is_rep else f
        pre = f[f["ptq_method"] == "none"][["run_id", "loss_val"]].rename(columns={"loss_val": "loss_pre"})
        q = f[f["ptq_method"] == method].merge(pre, on="run_id")
        q = q.assign(train_fraction=q["run_id"].map(fractions).fillna(1.0) if is_rep else 1.0)
        rows.append(q)
    q = pd.concat(rows, ignore_index=True)
    cells = set(zip(rep["size"], rep["n_tokens"]))
    q = q[[c in cells for c in zip(q["size"], q["n_tokens"])]]
    n_train = {name: len(load_corpus(name).train) for name in q["corpus"].unique()}
    q = q.assign(passes=q["n_tokens"] / (q["corpus"].map(n_train) * q["train_fraction"]),
                 loss_post=q["loss_val"])
    return q[["size", "n_tokens", "train_fraction", "passes", "bits_post", "loss_pre", "loss_post", "delta_ptq"]
             ].sort_values(["size", "n_tokens", "bits_post", "train_fraction"], ascending=[True, True, True, False]
                           ).reset_index(drop=True)


def _fractions(rows: pd.DataFrame) -> dict[str, float]:
    from .sweep import plan

    out = {}
    for profile in rows["profile"].unique():
        out |= {s.run_id: s.train.train_fraction for s in plan(profile, "repetition")}
    return out

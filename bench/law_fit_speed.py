"""Seconds to fit each stage of the law-fitting pipeline, and to bootstrap the Chinchilla stage.

Two data sets: the committed runs of a profile (the stages that have data: ``chinchilla``,
``chinchilla_free``, ``ptq``, and any low-precision stage whose sweep exists), and 1,000
synthetic points per stage drawn from the paper's Table 2 law (0.3% noise), so every stage is
timed even before its sweep exists. For each: one fit (grid screening + L-BFGS-B from the best
starts, as ``bitlaws.laws.fit.fit_stage``), and for ``chinchilla`` also 200 bootstrap resamples
(``bitlaws.laws.fit.bootstrap``). Each line says what it fits: how many constants, which, and how
many are held fixed at the truth (the pipeline's stages fit a few constants with the earlier
stages' held fixed: ``unified`` fits only C_w, C_a, C_kv of Eq. 9, with the other 14 fixed).
The last line, ``unified_joint``, is a fit of the whole unified law (Eq. 9 with Eqs. 3–4: all 17
constants at once, α = β) on 1,000 synthetic points mixing high- and low-precision training with
and without post-training quantization, by the library's recipe (``fit_stage``: L-BFGS-B, Huber
δ = 1e-3) from two starts 10% off the truth; it prints its objective against the objective at the
true constants, so a stop short of the optimum shows. (Measured: L-BFGS-B stops on its
relative-reduction test at ~1.8x the truth's objective, and started *at* the truth it runs to its
5,000-iteration cap in ~30 s: the joint form has sloppy directions, A–α and C_T–γ_N.) The run
ends with the total seconds.

The fits hold BLAS at one thread (``bitlaws.laws.fit``): run it beside a sweep to see that they
stay fast on a busy machine.

Usage: ``python bench/law_fit_speed.py [--profile cpu] [--points 1000] [--boot 200]``. Writes
nothing. Timings on a shared machine are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from bitlaws.laws import fit as lf
from bitlaws.laws import forms

PC = forms.PAPER_CONSTANTS
CHIN = {k: PC[k] for k in ("A", "B", "E", "alpha", "beta")}


def synthetic(stage: str, points: int, seed: int = 0) -> tuple[pd.DataFrame, dict | None]:
    """About `points` rows for `stage`, drawn from Table 2's law; returns (frame, fixed constants)."""
    rng = np.random.default_rng(seed)
    n = rng.uniform(np.log(3e7), np.log(4e8), points)
    d = rng.uniform(np.log(1e9), np.log(3e10), points)
    df = pd.DataFrame({"n_params": np.exp(n), "n_tokens": np.exp(d), "run_id": [f"r{i}" for i in range(points)]})
    fixed = None
    bits = rng.integers(3, 9, points).astype(float)
    if stage.startswith("chinchilla"):
        loss = forms.chinchilla_loss(df["n_params"], df["n_tokens"], CHIN)
    elif stage in ("neff_w", "neff_a", "neff_kv"):
        x = stage.split("_")[1]
        df[f"bits_{x}"] = np.maximum(bits, 4.0) if x == "a" else bits
        loss = forms.qat_loss(df["n_params"], df["n_tokens"], df.get("bits_w", 16), df.get("bits_a", 16),
                              df.get("bits_kv", 16), PC)
        fixed = CHIN
    elif stage == "neff_joint":
        for x in ("w", "a", "kv"):
            df[f"bits_{x}"] = rng.integers(4, 9, points).astype(float)
        loss = forms.qat_loss(df["n_params"], df["n_tokens"], df["bits_w"], df["bits_a"], df["bits_kv"], PC)
        fixed = CHIN
    elif stage in ("ptq", "ptq_linear"):
        df["bits_post"] = rng.integers(3, 7, points).astype(float)
        df["loss_base"] = forms.chinchilla_loss(df["n_params"], df["n_tokens"], CHIN)
        loss = df["loss_base"] + forms.delta_ptq(df["n_params"], df["n_tokens"], df["bits_post"], PC)
    elif stage == "unified":
        params = {**PC, "C_w": 0.8, "C_a": 1.2, "C_kv": 0.5}
        for x in ("w", "a", "kv"):
            df[f"bits_{x}"] = rng.integers(5, 9, points).astype(float)
        df["bits_post"] = rng.integers(3, 5, points).astype(float)
        df["loss_base"] = forms.qat_loss(df["n_params"], df["n_tokens"], df["bits_w"], df["bits_a"], df["bits_kv"],
                                         params)
        loss = df["loss_base"] + forms.unified_delta_ptq(df["n_params"], df["n_tokens"], df["bits_w"], df["bits_a"],
                                                         df["bits_kv"], df["bits_post"], params)
        fixed = PC
    else:
        raise ValueError(stage)
    df["loss_val"] = np.asarray(loss) * np.exp(0.003 * rng.standard_normal(points))
    if "loss_base" in df:
        df["loss_val"] = np.maximum(df["loss_val"], 1e-6)
    return df, fixed


_JOINT = ("log_A", "log_B", "log_E", "alpha", "gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv",
          "log_C_T", "gamma_D", "gamma_N", "gamma_post", "log_C_w", "log_C_a", "log_C_kv")
_TRUE_C = {"C_w": 0.8, "C_a": 1.2, "C_kv": 0.5}


def _joint_natural(theta):
    t = np.atleast_2d(theta)
    out = {}
    for i, k in enumerate(_JOINT):
        out[k[4:] if k.startswith("log_") else k] = np.exp(t[:, [i]]) if k.startswith("log_") else t[:, [i]]
    out["beta"] = out["alpha"]
    return out


def unified_joint_stage() -> lf.Stage:
    """Eq. 9 with Eqs. 3–4, every constant fitted (17, α = β), from two starts off the truth."""
    truth = {**PC, **_TRUE_C}
    start = np.array([np.log(truth[k[4:]]) if k.startswith("log_") else truth[k] for k in _JOINT])
    lo = {"log_A": -20.0, "log_B": -20.0, "log_E": -10.0, "alpha": 0.0, "log_C_T": -60.0, "gamma_D": 0.0,
          "gamma_N": 0.0, "gamma_post": 0.05, "log_C_w": -12.0, "log_C_a": -12.0, "log_C_kv": -12.0}
    hi = {"log_A": 80.0, "log_B": 80.0, "log_E": 5.0, "alpha": 4.0, "log_C_T": 60.0, "gamma_D": 4.0,
          "gamma_N": 4.0, "gamma_post": 10.0, "log_C_w": 8.0, "log_C_a": 8.0, "log_C_kv": 8.0}
    bounds = {k: (lo.get(k, 0.05 if k.startswith("gamma") else -5.0), hi.get(k, 20.0 if k.startswith("gamma") else 10.0))
              for k in _JOINT}
    # starts: 10% off every constant (logs shifted by 0.1), once up and once down
    grid = {k: sorted({float(v + 0.1 * abs(v) + 0.1), float(v - 0.1 * abs(v) - 0.1)}) if k == "alpha" else [float(v * 1.1 + 0.05)]
            for k, v in zip(_JOINT, start)}

    def loss(data, c):
        return forms.unified_loss(data["n_params"], data["n_tokens"], data["bits_w"], data["bits_a"], data["bits_kv"],
                                  data["bits_post"], c)

    return lf.Stage(name="unified_joint", equation="Eq. 9 with Eqs. 3-4, all 17 constants jointly (alpha = beta)",
                    param_names=_JOINT, grid=grid, bounds=bounds, natural=_joint_natural, loss=loss,
                    needs=("bits_w", "bits_a", "bits_kv", "bits_post"), n_refine=None,
                    cell=("n_params", "n_tokens", "bits_w", "bits_a", "bits_kv", "bits_post"))


def synthetic_joint(points: int, seed: int = 0) -> pd.DataFrame:
    """`points` rows of the unified law: 30% trained in high precision, 40% not quantized after."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"n_params": np.exp(rng.uniform(np.log(3e7), np.log(4e8), points)),
                       "n_tokens": np.exp(rng.uniform(np.log(1e9), np.log(3e10), points)),
                       "run_id": [f"r{i}" for i in range(points)]})
    high = rng.random(points) < 0.3
    for x in ("w", "a", "kv"):
        df[f"bits_{x}"] = np.where(high, 16.0, rng.integers(5, 9, points).astype(float))
    df["bits_post"] = np.where(rng.random(points) < 0.4, 16.0, rng.integers(3, 5, points).astype(float))
    loss = forms.unified_loss(df["n_params"], df["n_tokens"], df["bits_w"], df["bits_a"], df["bits_kv"],
                              df["bits_post"], {**PC, **_TRUE_C})
    df["loss_val"] = np.asarray(loss) * np.exp(0.003 * rng.standard_normal(points))
    return df


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def bench(label: str, stage, frame: pd.DataFrame, fixed: dict | None, boot: int) -> None:
    st = lf.STAGES[stage] if isinstance(stage, str) else stage
    res, secs = timed(lf.fit_stage, st, frame, fixed)
    shown = ", ".join(k[4:] if k.startswith("log_") else k for k in st.param_names)
    if len(st.param_names) > 6:
        shown = shown[:40] + ", ..."
    what = f"fits {len(st.param_names):>2} ({shown}), {len(fixed or {}):>2} fixed"
    line = (f"{label:<10} {st.name:<16} rows {len(frame):>5}  starts {res.n_starts:>5} → L-BFGS-B {res.n_refined:>3}  "
            f"fit {secs:7.3f} s  {what}")
    if st.name == "unified_joint":
        truth = {**PC, **_TRUE_C}
        theta = np.array([[np.log(truth[k[4:]]) if k.startswith("log_") else truth[k] for k in _JOINT]])
        at_truth = float(lf._objective_many(st, lf.prepare(st, frame), theta, lf.HUBER_DELTA)[0])
        worst = max(abs(res.params[k] - truth[k]) / abs(truth[k]) for k in res.params if k in truth)
        line += (f"\n{'':<27} objective {res.objective:.3g} = {res.objective / at_truth:.2f}x its value at the true "
                 f"constants; worst constant {worst:.0%} off; L-BFGS-B success {res.converged}")
    if st.name == "chinchilla" and boot:
        _, bsecs = timed(lf.bootstrap, st, frame, res, n_boot=boot, fixed=fixed)
        line += f"\n{'':<27} bootstrap ×{boot} {bsecs:7.3f} s ({bsecs / boot / secs:.3f} of a fit per resample)"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--boot", type=int, default=200)
    args = ap.parse_args()
    t_start = time.perf_counter()

    try:
        from bitlaws.study.law_fits import FIT_ORDER, stage_frames
        from bitlaws.study.store import load_runs

        frames = stage_frames(load_runs(args.profile))
        chin = None
        for stage in FIT_ORDER:
            frame = frames[stage]
            if len(frame) == 0:
                print(f"{'committed':<10} {stage:<16} no rows in data/runs/{args.profile}")
                continue
            fixed = chin if stage.startswith("neff_") else None
            if stage == "unified" or (stage.startswith("neff_") and fixed is None):
                print(f"{'committed':<10} {stage:<16} needs the earlier stages' fits: timed on synthetic data below")
                continue
            bench("committed", stage, frame, fixed, args.boot)
            if stage == "chinchilla":
                chin = lf.fit_stage(stage, frame).params
    except FileNotFoundError as exc:
        print(f"committed data: {exc}")
    for stage in ("chinchilla", "chinchilla_free", "ptq", "ptq_linear", "neff_w", "neff_a", "neff_kv", "neff_joint",
                  "unified"):
        frame, fixed = synthetic(stage, args.points)
        bench("synthetic", stage, frame, fixed, args.boot)
    bench("synthetic", unified_joint_stage(), synthetic_joint(args.points), None, 0)
    print(f"total {time.perf_counter() - t_start:.1f} s (every stage above, the bootstraps included)")


if __name__ == "__main__":
    main()

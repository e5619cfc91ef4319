"""Seconds to fit each stage of the law-fitting pipeline, and to bootstrap the Chinchilla stage.

Two data sets: the committed runs of a profile (the stages that have data: ``chinchilla``,
``chinchilla_free``, ``ptq``, and any low-precision stage whose sweep exists), and 1,000
synthetic points per stage drawn from the paper's Table 2 law (0.3% noise), so every stage is
timed even before its sweep exists. For each: one fit (grid screening + L-BFGS-B from the best
starts, as ``bitlaws.laws.fit.fit_stage``), and for ``chinchilla`` also 200 bootstrap resamples
(``bitlaws.laws.fit.bootstrap``). Printed as one line per (data, stage) with the per-resample
cost relative to a full fit.

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


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def bench(label: str, stage: str, frame: pd.DataFrame, fixed: dict | None, boot: int) -> None:
    res, secs = timed(lf.fit_stage, stage, frame, fixed)
    line = (f"{label:<10} {stage:<16} rows {len(frame):>5}  starts {res.n_starts:>5} → L-BFGS-B {res.n_refined:>3}  "
            f"fit {secs:7.3f} s")
    if stage == "chinchilla" and boot:
        _, bsecs = timed(lf.bootstrap, stage, frame, res, n_boot=boot, fixed=fixed)
        line += f"  bootstrap ×{boot} {bsecs:7.3f} s ({bsecs / boot / secs:.3f} of a fit per resample)"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--boot", type=int, default=200)
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()

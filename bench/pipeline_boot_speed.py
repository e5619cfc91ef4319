"""The pipeline bootstrap's fast starts against the full multi-start, on the same resamples.

``bitlaws.study.law_fits.pipeline_bootstrap`` refits Chinchilla and every N_eff stage (and the
paired-difference stages) in each resample of runs. The old path started every fit from the stage's
own starts (the best 16 of Chinchilla's 900 grid points, every one of an N_eff stage's 49); the fast
path starts each from the stage's full-sample optimum and the best ``PIPELINE_REFINE`` screened grid
points. For draws ``0 … n − 1`` (draw i resampled by ``default_rng([0, i])``, the same for both)
this prints the seconds of each path and their ratio, how many draws agree on every constant within
``--rtol`` (relative), the draws that do not (which constants, both values, both objectives are not
kept: rerun a draw with ``_refit_draw`` to see them), and the 95 % interval of f_x(4 bits) of each
part by both paths with the Monte Carlo error of its ends (``_percentile_mc_se``).

Usage: ``python bench/pipeline_boot_speed.py [--profile cpu] [--draws 20] [--rtol 1e-3]``. Writes
nothing. Timings on a shared machine are noisy: read the ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bitlaws.laws import forms
from bitlaws.study import law_fits as la
from bitlaws.study.store import load_runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--rtol", type=float, default=1e-3)
    args = ap.parse_args(argv)
    frames = la.stage_frames(load_runs(args.profile, experiment=la.TRAINING_EXPERIMENTS))
    stages = [s for s in la.PIPELINE_STAGES if frames[s]["run_id"].nunique() >= 3]
    paired = [p for p, m in la.PAIRED_STAGES.items() if m in stages[1:] and frames[p]["run_id"].nunique() >= 3]
    t0 = time.perf_counter()
    starts = la._full_sample_starts(frames, stages + paired)
    t_starts = time.perf_counter() - t0
    draws = {"old": [], "fast": []}
    secs = {"old": 0.0, "fast": 0.0}
    for i in range(args.draws):
        picks = la._draw_picks(frames, stages, la.BOOT_SEED, i)
        for path, s in (("old", None), ("fast", starts)):
            t = time.perf_counter()
            d, p = la._refit_draw(frames, stages, paired, picks, s)
            secs[path] += time.perf_counter() - t
            draws[path].append(None if d is None else {**d, **p})
    agree, differ = 0, []
    for i, (a, b) in enumerate(zip(draws["old"], draws["fast"])):
        if a is None or b is None:
            differ.append((i, "failed" if a is None else "fast failed", {}))
            continue
        bad = {k: (a[k], b.get(k, np.nan)) for k in a if not abs(b.get(k, np.nan) - a[k]) <= args.rtol * abs(a[k])}
        if bad:
            differ.append((i, "differs", bad))
        else:
            agree += 1
    print(f"{args.profile}: {args.draws} draws, stages {stages + paired}")
    print(f"old (the stages' own starts): {secs['old']:.1f} s; fast (full-sample optimum + best "
          f"{la.PIPELINE_REFINE} grid points): {secs['fast']:.1f} s (+ {t_starts:.1f} s once for the full-sample "
          f"fits); ratio {secs['old'] / secs['fast']:.1f}x")
    print(f"draws agreeing on every constant within {args.rtol:g} (relative): {agree} of {args.draws}")
    for i, why, bad in differ:
        print(f"  draw {i}: {why} " + ", ".join(f"{k} {x:.4g} vs {y:.4g}" for k, (x, y) in bad.items()))
    for x in forms.COMPONENTS:
        for suffix in ("", "_paired"):
            g, n = f"gamma_{x}{suffix}", f"n_{x}{suffix}"
            line = []
            for path in ("old", "fast"):
                f4 = np.array([forms.precision_factor(4.0, d[g], d[n]) for d in draws[path] if d and g in d], float)
                f4 = f4[np.isfinite(f4)]
                if len(f4) < 2:
                    continue
                lo, hi = np.percentile(f4, [2.5, 97.5])
                se = la._percentile_mc_se(f4, (2.5, 97.5))
                line.append(f"{path} [{lo:.3f} ± {se[0]:.3f}, {hi:.3f} ± {se[1]:.3f}]")
            if line:
                print(f"f_{x}{suffix}(4): " + "; ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

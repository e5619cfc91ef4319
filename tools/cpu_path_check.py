"""Retrain one QAT run and one high-precision run under each of ATen's CPU instruction paths and add this
machine's rows to data/checks/<profile>/cpu_path_check.csv (``bitlaws.study.design_checks.cpu_path_check``;
other machines' rows are kept, this machine's replaced): how far a rerun on another CPU reproduces a run.
About 8 CPU-minutes for the defaults (6 trainings at one thread).

    python tools/cpu_path_check.py [--profile cpu] [--run EXPERIMENT:RUN_ID ...]
"""

from __future__ import annotations

import argparse

from bitlaws.study import design_checks as dc

# A 4-bit weights-and-activations qat_joint run (n83k, D = 2.1M) and a base-grid run without fake quantization.
DEFAULT_RUNS = ("qat_joint:21454627cbd22e86", "base_grid:a18e57c2e387dac1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--profile", default="cpu", help="the sweep profile that declares the runs (default cpu)")
    ap.add_argument("--run", action="append", help="EXPERIMENT:RUN_ID (repeatable; default: one QAT, one high precision)")
    args = ap.parse_args()
    runs = []
    for r in args.run or DEFAULT_RUNS:
        if r.count(":") != 1:
            ap.error(f"--run must be EXPERIMENT:RUN_ID; got {r!r}")
        runs.append(tuple(r.split(":")))
    try:
        table = dc.cpu_path_check(args.profile, runs)
    except ValueError as e:
        ap.error(str(e))
    print(f"wrote {dc.write_cpu_path_check(table, args.profile)}")


if __name__ == "__main__":
    main()

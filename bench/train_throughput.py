"""Training throughput over the model ladder, as ratios against baselines measured in the same run.

For each size: tokens/s of the real training step (forward, backward, AdamW) on byte-level
Shakespeare, and the model FLOP rate 6·N_all·tokens/s (N_all = every parameter, embeddings
included, since the lm_head matmul is real work here). Printed ratios:

* ``vs_smallest`` — tokens/s relative to the smallest size (how cost grows with N);
* ``mfu_vs_matmul`` — model FLOP rate over the fp32 matmul rate of this machine, measured first
  with a square matmul of the same width class (a utilisation that does not depend on the machine).

Usage: ``python bench/train_throughput.py [--steps 30] [--threads 2] [--sizes n27k,n83k,...]``.
Writes nothing; prints one line per size. Timings on shared machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import time

import torch

from bitlaws.corpus import load_corpus
from bitlaws.model import LADDER, build_model
from bitlaws.train import TrainConfig, train


def matmul_flops(n: int = 512, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default=",".join(LADDER))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    corpus = load_corpus("shakespeare")
    peak = matmul_flops()
    print(f"fp32 matmul 512x512, {args.threads} threads: {peak / 1e9:.1f} GFLOP/s (baseline)")
    print(f"{'size':>7} {'N':>10} {'N_all':>10} {'tokens/s':>10} {'vs_smallest':>12} {'mfu_vs_matmul':>14}")
    first = None
    for name in args.sizes.split(","):
        cfg = LADDER[name]
        tc = TrainConfig(n_tokens=args.steps * 16 * 256, threads=args.threads, eval_tokens=257 * 8)
        res = train(cfg, tc, corpus=corpus, progress=False)
        tps = res.n_tokens / res.wall_s
        n_all = sum(p.numel() for p in build_model(cfg).parameters())
        first = first or tps
        print(f"{name:>7} {res.n_params:>10,} {n_all:>10,} {tps:>10,.0f} {tps / first:>12.3f} "
              f"{6 * n_all * tps / peak:>14.3f}")


if __name__ == "__main__":
    main()

"""GPTQ vs RTN on single linear layers: seconds and output error, as ratios measured in the same run.

For each square layer size: synthetic calibration inputs (n_seq × seq_len tokens, streamed in
chunks of one sequence; correlated Gaussian: a rank-64 shared factor plus isotropic noise, with 1%
of the features scaled ×10 like an LLM's outlier channels), a Gaussian weight ``W ~ N(0, 1/in)``.
Timed separately:

* ``hessian_s`` — accumulating ``H = 2/n Σ x xᵀ`` over all tokens (:class:`HessianAccumulator`);
* ``gptq_s`` — :func:`gptq_weight` (damping, Cholesky, the blocked column loop), per bit width;
* ``rtn_s`` — :func:`rtn_weight` (the same grid, no error feedback).

The output errors ``||W X − Ŵ X||_F²`` over all calibration tokens come from the exact identity
``n/2 · tr(ΔW H ΔWᵀ)`` (:func:`output_error`). Printed ratios: ``gptq_s / rtn_s``,
``(hessian_s + gptq_s) / rtn_s`` and ``err_gptq / err_rtn`` (below 1: GPTQ is better).

Usage: ``python bench/gptq_speed.py [--quick] [--threads 1] [--sizes 4096,1024] [--bits 4,3]``.
The default is the paper's calibration (128 × 2048 tokens) on a 4096² and a 1024² layer: about
9 TFLOP for the 4096² Hessian, minutes on two cores. ``--quick``: 32 × 512 tokens on 1024² and
256² layers, seconds. Writes nothing. Timings on shared machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from bitlaws.ptq.gptq import GPTQConfig, HessianAccumulator, gptq_weight, output_error, rtn_weight


def calibration_stream(n_in: int, n_seq: int, seq_len: int, seed: int = 0):
    """Yield `n_seq` chunks (seq_len, n_in) float32 of correlated Gaussian inputs."""
    g = torch.Generator().manual_seed(seed)
    rank = 64
    factor = torch.randn(rank, n_in, generator=g) / math.sqrt(rank)
    gain = torch.ones(n_in)
    gain[torch.randperm(n_in, generator=g)[: max(1, n_in // 100)]] = 10.0
    for _ in range(n_seq):
        z = torch.randn(seq_len, rank, generator=g)
        yield (z @ factor + 0.5 * torch.randn(seq_len, n_in, generator=g)) * gain


def bench_size(n: int, n_seq: int, seq_len: int, bits: list[int]) -> list[tuple]:
    torch.manual_seed(n)
    W = torch.randn(n, n) / math.sqrt(n)
    acc = HessianAccumulator(n, torch.float32)
    t0 = time.perf_counter()
    for x in calibration_stream(n, n_seq, seq_len):
        acc.add(x)
    hessian_s = time.perf_counter() - t0
    rows = []
    for b in bits:
        cfg = GPTQConfig(bits=b)
        rtn_weight(W, cfg)  # warm-up: RTN takes milliseconds, so first-call costs would dominate it
        t0 = time.perf_counter()
        W_rtn = rtn_weight(W, cfg)
        rtn_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        W_gptq, info = gptq_weight(W, acc.H, cfg, name=f"linear{n}")
        gptq_s = time.perf_counter() - t0
        err_rtn = output_error(W, W_rtn, acc.H, acc.n_tokens)
        err_gptq = output_error(W, W_gptq, acc.H, acc.n_tokens)
        rows.append((n, b, acc.n_tokens, hessian_s, gptq_s, rtn_s, err_gptq, err_rtn, info.damp))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="32 x 512 tokens on 1024^2 and 256^2 layers")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default=None, help="comma-separated square layer sizes")
    ap.add_argument("--bits", default="4,3")
    ap.add_argument("--n-seq", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sizes = args.sizes or ("1024,256" if args.quick else "4096,1024")
    n_seq = args.n_seq or (32 if args.quick else 128)
    seq_len = args.seq_len or (512 if args.quick else 2048)
    bits = [int(b) for b in args.bits.split(",")]
    print(f"GPTQ vs RTN, asym per channel, block 128, damp 0.01, fp32; {n_seq} x {seq_len} calibration tokens, "
          f"{args.threads} thread(s)")
    print(f"{'layer':>11} {'bits':>4} {'hessian_s':>9} {'gptq_s':>8} {'rtn_s':>8} {'gptq/rtn_s':>10} "
          f"{'(H+gptq)/rtn_s':>14} {'err_gptq':>10} {'err_rtn':>10} {'err_gptq/rtn':>12}")
    for n in (int(s) for s in sizes.split(",")):
        for n_, b, _, hs, gs, rs, eg, er, _ in bench_size(n, n_seq, seq_len, bits):
            print(f"{f'{n_}x{n_}':>11} {b:>4} {hs:>9.2f} {gs:>8.3f} {rs:>8.4f} {gs / rs:>10.0f} "
                  f"{(hs + gs) / rs:>14.0f} {eg:>10.4g} {er:>10.4g} {eg / er:>12.3f}")


if __name__ == "__main__":
    main()

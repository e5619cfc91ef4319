"""Cost of training in low precision: the step time with W, A and KV fake-quantized over the plain step.

For the smallest and the largest `cpu` size (or ``--sizes``), one training step (forward, backward,
AdamW) on a fixed byte-level Shakespeare batch is timed for

* the plain model (the baseline, measured in the same run, interleaved),
* W4 A4 KV4 (every part at int4: weights per output channel, activations and K/V per tensor),
* each part alone at int4, and W4 at ``fp4_e2m1fn`` (the floating-point cast),

and the ratio of medians over the plain step is printed. Goal (issue 3): ≤ 1.3 for W4 A4 KV4 at the
largest size. Timings on shared machines are noisy: the plain and quantized steps alternate, so
load drifts hit both.

Usage: ``python bench/fake_quant_overhead.py [--steps 20] [--threads 1] [--sizes n27k,n1.2m]``.
Writes nothing; prints one line per (size, precision).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from bitlaws.corpus import load_corpus
from bitlaws.model import get_size, build_model
from bitlaws.precision import TrainPrecision, apply_precision_
from bitlaws.train import batch_at

PRECISIONS = {
    "W4 A4 KV4": TrainPrecision.of(w=4, a=4, kv=4),
    "W4": TrainPrecision.of(w=4),
    "A4": TrainPrecision.of(a=4),
    "KV4": TrainPrecision.of(kv=4),
    "W:fp4_e2m1fn": TrainPrecision.of(w="fp4_e2m1fn"),
}


def _stepper(cfg, precision, batch):
    model = build_model(cfg, seed=0)
    if precision is not None:
        apply_precision_(model, precision)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = batch[:, :-1], batch[:, 1:]

    def step() -> float:
        t0 = time.perf_counter()
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per variant (after 3 warm-up steps)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default="n27k,n1.2m")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    corpus = load_corpus("shakespeare")
    batch = batch_at(corpus.train, 0, 0, args.batch, args.seq_len)
    print(f"one AdamW step on {args.batch}x{args.seq_len} tokens, {args.threads} thread(s); "
          f"median of {args.steps} steps; baseline = the plain step, interleaved")
    print(f"{'size':>7} {'precision':>14} {'plain_ms':>9} {'quant_ms':>9} {'ratio':>6}")
    for name in args.sizes.split(","):
        cfg = get_size(name).replace(max_seq_len=max(get_size(name).max_seq_len, args.seq_len))
        for label, prec in PRECISIONS.items():
            plain, quant = _stepper(cfg, None, batch), _stepper(cfg, prec, batch)
            for _ in range(3):
                plain(), quant()
            tp, tq = [], []
            for _ in range(args.steps):
                tp.append(plain())
                tq.append(quant())
            mp, mq = statistics.median(tp), statistics.median(tq)
            print(f"{name:>7} {label:>14} {1e3 * mp:>9.1f} {1e3 * mq:>9.1f} {mq / mp:>6.2f}", flush=True)


if __name__ == "__main__":
    main()

"""GPTQ against the reference GPTQ on single linear layers: seconds as ratios measured in the same run.

The baseline is the reference implementation's algorithm (IST-DASLab/gptq, ``gptq.py``), written
here from its public description (Frantar et al. 2022, Algorithm 1 and §4; the loop of
``GPTQ.fasterquant`` and the update of ``GPTQ.add_batch``), not imported:

* **Hessian** (:func:`reference_hessian`): per sequence of ``seq_len`` tokens, ``H ← H·n/(n+1)``,
  ``n += 1``, ``x ← sqrt(2/n)·x.float()``, ``H += x xᵀ`` as a matmul of the transposed input and
  an addition (the reference counts sequences, we count tokens: H differs by a constant factor,
  which GPTQ does not see; the seconds are what is compared);
* **solve** (:func:`reference_gptq`): per-channel asymmetric min-max grid on the whole row, dead
  columns zeroed, ``λ = 0.01·mean(diag H)``, ``U = chol(chol⁻¹(H + λI))`` upper, blocks of 128
  columns with immediate updates inside a block (``W1[:, i:] −= err ⊗ U1[i, i:]`` as a matmul of
  a column by a row) and one GEMM ``W[:, i2:] −= E1 U[i1:i2, i2:]`` after it; no groups, no
  act-order (the reference's defaults).

Both solves get the same H (ours, :class:`HessianAccumulator`), so their weights must agree to the
bit: the run checks ``torch.equal`` and stops if they do not. For each square layer size, on
synthetic calibration inputs (``n_seq`` chunks of ``seq_len`` tokens; correlated Gaussian: a
rank-64 shared factor plus isotropic noise, 1% of the features scaled ×10 like an LLM's outlier
channels) and a Gaussian weight ``W ~ N(0, 1/in)``, the run times, alternating ours and the
reference's and keeping the fastest of ``--repeat`` tries of each:

* ``hessian`` — accumulating H over every token (ours: :meth:`HessianAccumulator.add`);
* ``solve`` — :func:`gptq_weight` (damping, Cholesky, the blocked column loop), per bit width;

and prints ``ours/ref`` for each (below 1: ours is faster), whether the weights are bit-equal, and
the output-error ratio ``err_gptq / err_rtn`` against round-to-nearest on the same grid (below 1:
GPTQ helps), from the identity ``||W X − Ŵ X||_F² = n/2 · tr(ΔW H ΔWᵀ)``.

Usage: ``python bench/gptq_speed.py [--quick] [--threads 1] [--sizes 4096,2048] [--bits 4]
[--n-seq 128] [--seq-len 2048] [--repeat 2]``. The default is the paper's calibration (128 × 2048
tokens) on a 4096² and a 2048² layer: about 9 TFLOP for the 4096² Hessian, many minutes on one
core (``--n-seq 8`` keeps the ratio and takes a sixteenth of the time). ``--quick``: 8 × 512
tokens on 1024² and 512² layers, seconds. Writes nothing. Timings on a shared machine are noisy:
read the ratios, which alternate the two codes so both see the same load.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from bitlaws.ptq.calibration import HessianAccumulator
from bitlaws.ptq.gptq import GPTQConfig, gptq_weight, output_error, rtn_weight


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


def reference_hessian(chunks: list[torch.Tensor]) -> torch.Tensor:
    """The reference's running Hessian over sequences (module docstring): (in, in) float32."""
    n_in = chunks[0].shape[-1]
    H = torch.zeros(n_in, n_in)
    n = 0
    for x in chunks:
        inp = x.reshape(-1, n_in).t()
        H *= n / (n + 1)
        n += 1
        inp = math.sqrt(2 / n) * inp.float()
        H += inp.matmul(inp.t())
    return H


def reference_gptq(W: torch.Tensor, H: torch.Tensor, bits: int, blocksize: int = 128,
                   percdamp: float = 0.01) -> tuple[torch.Tensor, float]:
    """The reference's blocked GPTQ (module docstring): (Q (out, in) float32, Σ losses).

    Like the reference (which consumes ``self.H``), it damps `H` in place: pass a copy.
    """
    W = W.clone().float()
    n_cols = W.shape[1]
    maxq = 2**bits - 1
    xmin = torch.minimum(W.min(1).values, torch.zeros(W.shape[0]))
    xmax = torch.maximum(W.max(1).values, torch.zeros(W.shape[0]))
    both0 = (xmin == 0) & (xmax == 0)
    xmin[both0], xmax[both0] = -1, 1
    scale = ((xmax - xmin) / maxq).unsqueeze(1)
    zero = torch.round(-xmin.unsqueeze(1) / scale)

    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    damp = percdamp * torch.mean(torch.diag(H))
    idx = torch.arange(n_cols)
    H[idx, idx] += damp
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)

    Q = torch.zeros_like(W)
    losses = torch.zeros_like(W)
    for i1 in range(0, n_cols, blocksize):
        i2 = min(i1 + blocksize, n_cols)
        W1 = W[:, i1:i2].clone()
        Q1, Err1, Losses1 = torch.zeros_like(W1), torch.zeros_like(W1), torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            w, d = W1[:, i], Hinv1[i, i]
            q = torch.clamp(torch.round(w.unsqueeze(1) / scale) + zero, 0, maxq)
            q = (scale * (q - zero)).flatten()
            Q1[:, i] = q
            Losses1[:, i] = (w - q) ** 2 / d**2
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        Q[:, i1:i2] = Q1
        losses[:, i1:i2] = Losses1 / 2
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    return Q, float(losses.sum())


def _best_of(repeat: int, *fns):
    """Run the functions alternately `repeat` times; (fastest seconds of each, last outputs).

    Each entry is ``fn`` or ``(prepare, fn)``: ``fn(prepare())``, with ``prepare`` untimed.
    """
    best = [math.inf] * len(fns)
    outs = [None] * len(fns)
    for _ in range(repeat):
        for k, entry in enumerate(fns):
            prepare, fn = entry if isinstance(entry, tuple) else (None, entry)
            args = () if prepare is None else (prepare(),)
            t0 = time.perf_counter()
            outs[k] = fn(*args)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best, outs


def bench_size(n: int, n_seq: int, seq_len: int, bits: list[int], repeat: int) -> list[dict]:
    torch.manual_seed(n)
    W = torch.randn(n, n) / math.sqrt(n)
    chunks = list(calibration_stream(n, n_seq, seq_len))

    def ours_h():
        acc = HessianAccumulator(n, torch.float32)
        for x in chunks:
            acc.add(x)
        return acc

    (h_ours, h_ref), (acc, H_ref) = _best_of(repeat, ours_h, lambda: reference_hessian(chunks))
    # the same matrix up to the constant factor n_tokens / n_seq (and rounding)
    h_rel = float((H_ref / seq_len - acc.H).abs().max() / acc.H.abs().max())
    rows = []
    for b in bits:
        cfg = GPTQConfig(bits=b)
        (s_ours, s_ref), ((Q, info), (Q_ref, loss_ref)) = _best_of(
            repeat, lambda: gptq_weight(W, acc.H, cfg, name=f"linear{n}"),
            (acc.H.clone, lambda H: reference_gptq(W, H, b)))
        equal = torch.equal(Q, Q_ref)
        if not equal:
            raise SystemExit(f"{n}x{n} {b} bits: our GPTQ and the reference's differ in "
                             f"{int((Q != Q_ref).sum())} of {Q.numel()} weights; the timing compares different things")
        err_gptq = output_error(W, Q, acc.H, acc.n_tokens)
        err_rtn = output_error(W, rtn_weight(W, cfg), acc.H, acc.n_tokens)
        rows.append(dict(n=n, bits=b, tokens=acc.n_tokens, h_ours=h_ours, h_ref=h_ref, h_rel=h_rel, s_ours=s_ours,
                         s_ref=s_ref, equal=equal, loss_rel=abs(info.gptq_loss - loss_ref) / loss_ref,
                         err_ratio=err_gptq / err_rtn))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 x 512 tokens on 1024^2 and 512^2 layers")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default=None, help="comma-separated square layer sizes")
    ap.add_argument("--bits", default="4")
    ap.add_argument("--n-seq", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2, help="tries of each code; the fastest counts")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sizes = args.sizes or ("1024,512" if args.quick else "4096,2048")
    n_seq = args.n_seq or (8 if args.quick else 128)
    seq_len = args.seq_len or (512 if args.quick else 2048)
    bits = [int(b) for b in args.bits.split(",")]
    print(f"GPTQ (ours) vs the reference's algorithm, asym per channel, block 128, damp 0.01, fp32, same H; "
          f"{n_seq} x {seq_len} calibration tokens, {args.threads} thread(s), best of {args.repeat}")
    print(f"{'layer':>11} {'bits':>4} {'H ours_s':>9} {'H ref_s':>9} {'H ours/ref':>10} {'solve ours_s':>12} "
          f"{'solve ref_s':>11} {'solve ours/ref':>14} {'bit-equal':>9} {'err_gptq/rtn':>12}")
    for n in (int(s) for s in sizes.split(",")):
        for r in bench_size(n, n_seq, seq_len, bits, args.repeat):
            print(f"{f'{n}x{n}':>11} {r['bits']:>4} {r['h_ours']:>9.3f} {r['h_ref']:>9.3f} "
                  f"{r['h_ours'] / r['h_ref']:>10.3f} {r['s_ours']:>12.3f} {r['s_ref']:>11.3f} "
                  f"{r['s_ours'] / r['s_ref']:>14.3f} {str(r['equal']):>9} {r['err_ratio']:>12.3f}", flush=True)


if __name__ == "__main__":
    main()

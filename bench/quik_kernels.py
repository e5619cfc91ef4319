"""QUIK layer benchmark: QuikLinear against the dense layer it replaces, on Llama-2 linear shapes.

On CUDA (``--profile gpu``): the Triton kernels against torch's bf16 matmul for every linear
shape of Llama-2 7B, 13B and 70B at 1, 16, 256 and 2048 tokens; W8A8 without outliers (QUIK's
Fig. 6 runs QUIK-8B so) and W4A4 with 256 fp16 outliers; the stages alone (activation
quantization, integer GEMM with epilogue, outlier GEMM); weight bytes and peak memory. A short
correctness check against the reference path runs first.

On the CPU (``--profile cpu``, or ``smoke`` for a few seconds): the pure-torch reference path
(``torch._int_mm`` for the integer GEMM) against fp32 matmul, on Llama-2-7B's block at 1/8 width
(1/32 for smoke). These ratios describe the reference code on this CPU, not the kernels.

``--profile smollm`` times SmolLM2-135M's own linear shapes (chapter 5's real model: 576 → 576,
576 → 192, 576 → 1536, 1536 → 576; W4A4 with its 32 outliers) on the CPU, after a correctness
check at those shapes: QuikLinear against the exact product of its dequantized operands (float64)
and against the fp32 layer; rows to ``data/runs/cpu/quik_kernels_smollm.csv``.

Every ratio printed is measured in the same run as its baseline. Rows go to
``data/runs/<profile>/quik_kernels_<cpu|gpu>.csv`` (columns: data/README.md), replacing the file.

Usage::

    python bench/quik_kernels.py                      # gpu if CUDA is there, else cpu
    python bench/quik_kernels.py --profile smoke --no-write
    PYTHONPATH=src python bench/quik_kernels.py --profile gpu --out /tmp/quik_kernels_gpu.csv
"""

from __future__ import annotations

import argparse
import sys

import torch

from bitlaws.kernels import QuikLinear
from bitlaws.kernels import benchmark as kb
from bitlaws.study import quik_kernels as qk


def check_cuda() -> None:
    """The Triton path against the reference on one small layer, before any timing."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 256)
    x = torch.randn(64, 512)
    for bits, n_out in ((8, 0), (4, 32)):
        q = QuikLinear.from_linear(lin, torch.randperm(512)[:n_out], bits, dtype=torch.bfloat16)
        ref = q(x)
        got = q.to("cuda")(x.cuda()).float().cpu()
        err = ((got - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-4:
            sys.exit(f"correctness check failed at {bits} bits: max relative error {err:.2e}")
    print("correctness check (Triton vs reference, W8A8 and W4A4): ok")


@torch.no_grad()
def check_real_shapes(s) -> None:
    """QuikLinear at the setting's shapes (CPU reference path) against (a) the exact product of its
    dequantized operands, x̂ Ŵᵀ + b in float64 — the kernel's own arithmetic, to fp32 rounding — and
    (b) the fp32 layer (the quantization error itself, for scale). Exits if (a) exceeds 1e-5."""
    from bitlaws.kernels.quik_act import quik_act_ref, unpack_int4

    torch.manual_seed(0)
    for _, layer, n, k in s.shapes():
        lin = torch.nn.Linear(k, n)
        x = torch.randn(256, k)
        x[:, :4] *= 20  # a few outlier channels, as in the real model
        for bits, n_out in ((8, 0), (4, s.n_outliers)):
            q = QuikLinear.from_linear(lin, torch.arange(n_out), bits, dtype=torch.float16)
            got = q(x).double()
            act = quik_act_ref(x, q.base_idx, q.outlier_idx, bits)
            codes = unpack_int4(act.codes, q.base_idx.numel()) if bits == 4 else act.codes
            x_hat = x.double().clone()
            x_hat[:, q.base_idx.long()] = act.scale.double()[:, None] * (codes.double() + 2.0 ** (bits - 1)
                                                                          - act.zero.double()[:, None])
            exact = x_hat @ q.dequantized_weight().double().T + q.bias.double()
            dense = lin(x).double()
            err = float((got - exact).abs().max() / exact.abs().max())
            qerr = float((got - dense).norm() / dense.norm())
            print(f"correctness {layer:<13} {n}x{k} W{bits}A{bits} k={n_out:<3}: max |QuikLinear − x̂Ŵᵀ| / max = "
                  f"{err:.1e}; ‖QuikLinear − fp32‖ / ‖fp32‖ = {qerr:.2e}")
            if not err < 1e-5:
                sys.exit(f"correctness check failed at {layer} W{bits}A{bits}: {err:.2e}")


def summary(rows: list[dict]) -> None:
    """Print the speed-up and memory ratios of the layer rows, and where QUIK's time goes (needs pandas;
    without it the per-shape lines printed during the run carry the ratios)."""
    try:
        import pandas as pd
    except ImportError:
        print("(pandas is not installed: no summary tables; the lines above carry the ratios)")
        return
    frame = pd.DataFrame(rows)
    layer = frame[frame["part"] == "layer"]
    print("\nspeed-up over the dense layer (same run), by tokens:")
    table = layer[layer["method"] != "dense"].pivot_table(index=["model", "layer", "n_out", "k_in"],
                                                          columns=["method", "m_tokens"], values="speedup")
    print(table.round(2).to_string())
    dense = layer[layer["method"] == "dense"].groupby(["n_out", "k_in"])["weight_bytes"].first()
    print("\nweight bytes relative to the dense layer:")
    for method, g in layer[layer["method"] != "dense"].groupby("method"):
        ratio = g.groupby(["n_out", "k_in"])["weight_bytes"].first() / dense
        print(f"  {method}: {ratio.min():.3f} – {ratio.max():.3f}")
    parts = frame[frame["part"] != "layer"]
    share = parts.pivot_table(index=["method", "m_tokens"], columns="part", values="latency_ms", aggfunc="sum")
    print("\nstage latency summed over shapes [ms]:")
    print(share.round(3).to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(kb.SETTINGS), default=None,
                    help="benchmark setting (default: gpu with CUDA, else cpu)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--out", default=None, help="CSV path (default data/runs/<profile>/quik_kernels_<cpu|gpu>.csv)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    profile = args.profile or ("gpu" if device == "cuda" else "cpu")
    if device == "cuda":
        check_cuda()
    if profile == "smollm":
        check_real_shapes(kb.SETTINGS["smollm"])
    env = kb.environment(device, args.threads)
    print(f"{profile} setting on {env['device']} (driver {env['driver']}), torch {env['torch_version']}, "
          f"triton {env['triton_version']}, {args.threads} thread(s)")
    rows = kb.run_benchmark(profile, device=device, threads=args.threads, progress=print)
    summary(rows)
    if not args.no_write:
        path = args.out or (qk.csv_path("cpu").with_name("quik_kernels_smollm.csv") if profile == "smollm"
                            else qk.csv_path(profile))
        kb.write_csv(rows, path)
        print(f"\nwrote {len(rows)} rows to {path}")


if __name__ == "__main__":
    main()

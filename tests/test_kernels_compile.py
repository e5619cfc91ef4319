"""The Triton kernels compile for Hopper (sm_90) and Ampere (sm_80) without a GPU.

Triton's interpreter runs a kernel as numpy code and so accepts programs that the compiler
rejects (for example a loop variable whose shape changes). Here every kernel is compiled ahead of
time, down to a cubin with the ``ptxas`` that ships in the triton wheel, for both bit widths and
the smallest and largest autotuning configs (the smallest only for sm_80). The compile runs in a subprocess, because kernels
decorated under ``TRITON_INTERPRET=1`` (as the other kernel tests need) cannot be compiled.
Also checked in the PTX: the integer GEMM uses int8 tensor-core instructions, and the activation
quantizer divides with IEEE rounding (``div.rn.f32``), which its bit-exactness relies on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

# As in every kernel test module: the interpreter on before triton is first imported (the compile
# below runs in a subprocess without it).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton")

SCRIPT = r"""
import importlib, json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

qa = importlib.import_module("bitlaws.kernels.quik_act")
ig = importlib.import_module("bitlaws.kernels.int_gemm")
act, gemm = qa._quik_act_kernel.fn, ig._int_gemm_kernel.fn


def compile_(fn, types, consts, cfg, arch):
    consts = {**consts, **cfg.kwargs}
    sig = {n: "constexpr" if n in consts else types[n] for n in fn.arg_names}
    return triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", arch, 32),
                          options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))


out = {}
for arch in (80, 90):
    for bits in (8, 4):
        code = "*i8" if bits == 8 else "*u8"
        def act_types(xt):
            return dict(x_ptr=xt, base_idx_ptr="*i32", outlier_idx_ptr="*i32", codes_ptr=code,
                        scale_ptr="*fp32", zero_ptr="*fp32", xo_ptr=xt, M="i32", K_BASE="i32",
                        K_OUT="i32", K_CODES="i32", stride_xm="i32", stride_xk="i32", stride_cm="i32",
                        stride_om="i32")
        gemm_types = dict(a_ptr=code, w_ptr=code, out_ptr="*bf16", a_scale_ptr="*fp32", a_zero_ptr="*fp32",
                          w_scale_ptr="*fp32", w_rowsum_ptr="*fp32", y_ptr="*bf16", bias_ptr="*bf16",
                          M="i32", N="i32", KC="i32", M_BUCKET="i32", stride_am="i32", stride_ak="i32",
                          stride_wn="i32", stride_wk="i32", stride_om="i32", stride_on="i32",
                          stride_ym="i32", stride_yn="i32")
        # every config on Hopper, the smallest (decode) ones on Ampere
        # bf16 at both ends of the configs; on Hopper also fp16 and fp32 input (Triton 3.6 once
        # failed to compile the fp32 variant there: the device check of 2026-12-04)
        cases = [("*bf16", c) for c in (qa._CONFIGS[0], qa._CONFIGS[-1])[: 2 if arch == 90 else 1]]
        cases += [(xt, qa._CONFIGS[0]) for xt in ("*fp16", "*fp32")] if arch == 90 else []
        for xt, cfg in cases:
            k = compile_(act, act_types(xt), dict(BITS=bits), cfg, arch)
            out[f"act{bits}_{xt[1:]}_sm{arch}_{cfg.kwargs['BLOCK_M']}"] = sorted(set(re.findall(r"div\.[a-z.]*f32", k.asm["ptx"])))
        for cfg in (ig._CONFIGS[0], ig._CONFIGS[-1])[: 2 if arch == 90 else 1]:
            k = compile_(gemm, gemm_types, dict(BITS=bits, DEQUANT=True, HAS_Y=True, HAS_BIAS=True), cfg, arch)
            out[f"gemm{bits}_sm{arch}_{cfg.kwargs['BLOCK_M']}"] = bool(re.search(r"mma[.a-z0-9_]*\.s8\.s8", k.asm["ptx"]))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_kernels_compile_for_sm80_and_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # never the user's ~/.triton
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # Triton 3.9's default, stated to silence its warning
    # BITLAWS_TRITON_SITE=DIR: compile with the triton installed in DIR (say the lent GPU's 3.6,
    # `pip install --target DIR triton==3.6.0`), to catch its compiler's failures before device time
    if os.environ.get("BITLAWS_TRITON_SITE"):
        env["PYTHONPATH"] = os.pathsep.join([os.environ["BITLAWS_TRITON_SITE"], env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(result) == 16
    for name, value in result.items():
        if name.startswith("act"):
            assert value == ["div.rn.f32"], (name, value)
        else:
            assert value is True, f"{name}: no int8 tensor-core MMA in the PTX"

"""bench/device_check.py, the lent-device check, through its CPU fallback: every part runs, writes
the columns it declares, and the benchmark CSV is the one `verdict_q4` reads."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from bitlaws.kernels import benchmark as kb
from bitlaws.study import quik_kernels as qk

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "device_check.py"

pytest.importorskip("triton")


def _module():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fallback(tmp_path_factory):
    if torch.cuda.is_available():
        pytest.skip("the CPU fallback runs where there is no CUDA")
    out = tmp_path_factory.mktemp("device_check")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "src"), "TQDM_DISABLE": "1"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--budget-s", "300", "--no-compile"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return out, run


def test_fallback_runs_every_part(fallback):
    out, run = fallback
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / "device_check.json").read_text())
    assert {p: i["status"] for p, i in report["parts"].items()} == {
        "checks": "ok", "bench": "ok", "train": "ok", "pytest": "skipped"}
    assert report["interpreter"] is True and report["device"].startswith("cpu")
    names = {p.name for p in out.iterdir()}
    assert {"kernel_checks.csv", "quik_kernels_cpu_fallback.csv", "train_throughput.csv", "device_check.json",
            "device_check.log"} <= names and len(names) <= 8  # the device tool returns at most 8 files


def test_fallback_csv_columns_and_checks(fallback):
    out, _ = fallback
    mod = _module()
    checks = pd.read_csv(out / "kernel_checks.csv")
    assert list(checks.columns) == mod.CHECK_COLUMNS
    assert set(checks["check"]) == {"quik_act", "int_gemm", "int_gemm_dequant", "quik_linear"}
    assert checks["passed"].all(), checks[~checks["passed"]].to_string()
    assert set(checks.loc[checks["check"] == "int_gemm", "reference"]) == {"int64"}
    train = pd.read_csv(out / "train_throughput.csv")
    assert list(train.columns) == mod.TRAIN_COLUMNS
    assert (train["status"] == "ok").all() and (train["tokens_per_s"] > 0).all()
    assert set(train["grad_accum"]) == {1, 2} and train["precision"].str.contains("W8 A8 KV8").any()
    bench = pd.read_csv(out / "quik_kernels_cpu_fallback.csv")
    assert list(bench.columns) == kb.COLUMNS
    layer = bench[bench["part"] == "layer"]
    assert set(layer["method"]) == {"dense", "dense_fp16", "quik_w8a8", "quik_w4a4"}
    assert set(bench["part"]) == {"layer", "act_quant", "int_gemm", "outlier_gemm"}


def test_q4_verdict_reads_the_script_csv(fallback, tmp_path):
    """The CPU rows leave Q4 pending; the same file as a CUDA device would write it, committed where
    the book reads it (data/runs/gpu/quik_kernels_gpu.csv), is graded."""
    out, _ = fallback
    bench = pd.read_csv(out / "quik_kernels_cpu_fallback.csv")
    assert qk.verdict_q4(bench).verdict == "pending"
    gpu = bench.assign(device="cuda:NVIDIA H200", profile="gpu", git_sha="0" * 12)
    path = qk.csv_path("gpu", tmp_path)
    assert path == tmp_path / "runs" / "gpu" / "quik_kernels_gpu.csv"
    kb.write_csv(gpu, path)
    v = qk.verdict_q4(qk.load_benchmark("gpu", tmp_path))
    assert v.verdict == "inconclusive"  # rule 3: one run of the graded code
    assert {"speedup_w8a8", "speedup_w4a4"} <= set(v.details)
    kb.write_csv(gpu, path.with_name("quik_kernels_gpu_r1.csv"))  # a second run of the same code
    v = qk.verdict_q4(qk.load_benchmark("gpu", tmp_path), qk.load_replicates("gpu", tmp_path))
    assert v.verdict in ("reproduced", "partly", "not reproduced") and v.details["n_runs_graded_code"] == 2


def test_clock_and_cells():
    mod = _module()
    c = mod.Clock(100.0)
    assert 0 <= c.elapsed() < 5 and 95 < c.left() <= 100 and 45 < c.until(0.5) <= 50
    assert kb._cell(float("nan")) == "" and kb._cell(1 / 3) == "0.333333" and kb._cell("x") == "x"


def test_estimate_reads_the_script_throughput(fallback):
    """bitlaws.study.budget reads train_throughput.csv as the script writes it: at a measured size the
    estimate's tokens/s is the measured one, and fake quantization's slowdown comes from its own row."""
    from bitlaws.model import SMOKE_LADDER
    from bitlaws.study import budget

    out, _ = fallback
    train = pd.read_csv(out / "train_throughput.csv")
    tp = budget.throughput_from_csv(out / "train_throughput.csv")
    plain = train[(train["grad_accum"] == 1) & (train["precision"] == "W16 A16 KV16") & ~train["compile"].astype(bool)]
    for size, rows in plain.groupby("size"):
        seq = int(rows["seq_len"].iloc[0])
        assert tp.tokens_per_s(SMOKE_LADDER[size], seq) == pytest.approx(rows["tokens_per_s"].median(), rel=1e-9)
    assert 0 < tp.qat_factor <= 1


def test_throughput_summary_reads_the_committed_columns(tmp_path):
    """The GPU page's throughput paragraph: the smallest and largest plain bf16 sizes, the fake-quantized
    run as a share of its size's tokens/s, torch.compile's gain; nothing without a file."""
    from bitlaws.study import budget

    rows = [dict(size="s", n_params=1e6, precision="W16 A16 KV16", compile=False, grad_accum=1, tokens_per_s=8e5,
                 model_tflops=10.0, status="ok"),
            dict(size="l", n_params=1e8, precision="W16 A16 KV16", compile=False, grad_accum=1, tokens_per_s=2e5,
                 model_tflops=140.0, status="ok"),
            dict(size="l", n_params=1e8, precision="W16 A16 KV16", compile=False, grad_accum=2, tokens_per_s=1e5,
                 model_tflops=70.0, status="ok"),
            dict(size="s", n_params=1e6, precision="W8 A8 KV8", compile=False, grad_accum=1, tokens_per_s=2e5,
                 model_tflops=2.5, status="ok"),
            dict(size="s", n_params=1e6, precision="W16 A16 KV16", compile=True, grad_accum=1, tokens_per_s=1.6e6,
                 model_tflops=20.0, status="ok")]
    path = tmp_path / "train_throughput.csv"
    pd.DataFrame([{**r, "device": "cuda:X", "torch_version": "2.11", "timestamp": "2026-12-04T00:00:00Z"}
                  for r in rows]).to_csv(path, index=False)
    text = budget.throughput_summary_markdown(path)
    assert text.startswith("Measured on cuda:X (torch 2.11, 2026-12-04): 0.80 M tokens/s at `s` (10 TFLOP/s) and "
                           "0.20 M tokens/s at `l` (140 TFLOP/s)")
    assert "W8 A8 KV8 fake quantization `s` runs at 0.25× its tokens/s" in text
    assert "`torch.compile` gives `s` 2.00× its tokens/s" in text
    assert budget.throughput_summary_markdown(tmp_path / "none.csv") == ""
    pd.DataFrame(rows).drop(columns="model_tflops").to_csv(path, index=False)
    with pytest.raises(ValueError, match="missing \\['model_tflops'\\]"):
        budget.throughput_summary_markdown(path)

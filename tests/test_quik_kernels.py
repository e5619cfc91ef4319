"""Chapter 06's study code (bitlaws.study.quik_kernels): the profile switch, the coverage line, the
memory and paper-comparison numbers on constructed benchmark rows whose answers are known, and the
one-layer correctness demonstration (reference path) against its float64 oracle."""

from __future__ import annotations

import os

import torch

# Without CUDA, Triton's kernels run only in its interpreter, which must be on before triton is first
# imported in this process (bitlaws.kernels imports it).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from bitlaws.study import quik_kernels as qk  # noqa: E402


def test_bench_profile_maps_gpu_to_the_cpu_setting_and_names_the_profiles():
    assert qk.bench_profile("gpu") == "cpu"
    assert qk.bench_profile("smoke") == "smoke" and qk.bench_profile("cpu") == "cpu"
    with pytest.raises(ValueError, match="smoke, cpu, gpu"):
        qk.bench_profile("laptop")


def _rows():
    """Two shapes x two token counts: dense 10 ms; W8A8 20 ms (int GEMM stage 4 ms); W4A4 12.5 ms."""
    rows = []
    for n, k in ((64, 32), (32, 64)):
        for m in (1, 16):
            for method, ms, wbytes in (("dense", 10.0, 2 * n * k), ("quik_w8a8", 20.0, n * k),
                                       ("quik_w4a4", 12.5, n * k // 4)):
                rows.append({"part": "layer", "layer": f"l{n}", "n_out": n, "k_in": k, "m_tokens": m,
                             "method": method, "latency_ms": ms, "speedup": 10.0 / ms, "weight_bytes": wbytes,
                             "device": "cpu:x86_64", "torch_version": "2.x", "threads": 1})
            rows.append({"part": "int_gemm", "n_out": n, "k_in": k, "m_tokens": m, "method": "quik_w8a8",
                         "latency_ms": 4.0 if m == 16 else 8.0, "device": "cpu:x86_64", "torch_version": "2.x",
                         "threads": 1})
    return pd.DataFrame(rows)


def test_coverage_markdown_counts_shapes_tokens_and_rows_and_says_whether_gpu_rows_exist():
    cpu = _rows()
    text = qk.coverage_markdown(cpu, None, "cpu")
    assert "2 layer shapes × tokens {1, 16}" in text and f"{len(cpu)} rows" in text
    assert "cpu:x86_64 with torch 2.x, 1 thread(s)" in text and "**GPU benchmark: none yet**" in text
    gpu = pd.DataFrame({"device": ["cuda:NVIDIA H200"] * 3})
    assert qk.coverage_markdown(cpu, gpu, "cpu").endswith("GPU benchmark: 3 rows on cuda:NVIDIA H200.")


def test_memory_table_and_paper_comparison_on_constructed_rows():
    cpu = _rows()
    mem = qk.memory_table(cpu[cpu["part"] == "layer"])
    assert len(mem) == 4  # two methods x two shapes, one row each whatever the token count
    assert set(mem.groupby("method")["vs bf16 layer"].mean().round(12).items()) == {("quik_w8a8", 0.5),
                                                                                    ("quik_w4a4", 0.125)}
    cmp = qk.paper_comparison(cpu)
    assert cmp["cmp_tokens"] == 16
    assert cmp["cmp_best_w8a8"] == pytest.approx(0.5) and cmp["cmp_best_w4a4"] == pytest.approx(0.8)
    assert cmp["cmp_gemm_ratio"] == pytest.approx(10.0 / 4.0)  # dense layer over the int GEMM stage at 16 tokens
    assert cmp["cmp_mem_w8a8"] == pytest.approx(2.0) and cmp["cmp_mem_w4a4"] == pytest.approx(8.0)


def test_correctness_demo_reference_path_is_exact_and_within_tolerance():
    demo = qk.correctness_demo(triton=False)
    assert list(demo.index) == ["W8A8, 0 outliers", "W4A4, 0 outliers", f"W4A4, {len(qk.DEMO_OUTLIERS)} outliers"]
    assert demo["A_ref == int64"].all()
    assert (demo["ref: max |y − oracle| / tol"] <= 1).all() and (demo["ref: max |y − oracle| / tol"] > 0).all()
    assert "A_kernel == int64" not in demo  # the kernel columns only with triton=True
    v = qk.demo_prose_values(demo)
    # 8 bits is closer than 4; keeping the planted outlier columns in 16 bits more than halves W4A4's error
    assert v["demo_err_w8"] < v["demo_err_w4"] and v["demo_err_w4_outliers"] < 0.5 * v["demo_err_w4"]
    assert v["demo_n_outliers"] == 4

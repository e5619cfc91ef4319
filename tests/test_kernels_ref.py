"""The pure-torch QUIK path: int4 packing, the activation quantizer (against the simulation's
`bitlaws.quant`), the integer GEMM (against int64), the dequantization epilogue (against float64
from the same quantized operands), `QuikLinear` on the CPU, and the benchmark helpers.

These run everywhere, with or without Triton.
"""

from __future__ import annotations

import math
import os

import torch

# Without CUDA, Triton's kernels run only in its interpreter, which must be on before triton is first
# imported in this process (bitlaws.kernels imports it): every kernel test module says so first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from torch import nn  # noqa: E402

from bitlaws.kernels import (QuikLinear, int_gemm_dequant_ref, int_gemm_ref, pack_int4, quik_act_ref,  # noqa: E402
                             unpack_int4)
from bitlaws.kernels import benchmark as kb
from bitlaws.study import quik_kernels as qk  # noqa: E402
from bitlaws.quant import PerChannel, PerToken, QuantSpec, fake_quantize  # noqa: E402
from test_kernels_oracles import codes_int, dequant_oracle, int64_gemm, output_rounding  # noqa: E402


def _split(k: int, n_out: int, seed: int = 0):
    perm = torch.randperm(k, generator=torch.Generator().manual_seed(seed))
    return perm[n_out:].sort().values.to(torch.int32), perm[:n_out].sort().values.to(torch.int32)


def _activations(m: int, k: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(seed))
    if m >= 4:
        x[1] = 0.0  # zero range: scale 1, every code the value 0
        x[2] = 3.0  # a constant row: the range widened to [0, 3]
        x[3] = x[3].abs()  # all positive: zero point 0
    return x


# --------------------------------------------------------------------------- int4 packing


def test_pack_int4_nibble_order_and_twos_complement():
    # byte = (q[2j] & 0xF) | (q[2j+1] & 0xF) << 4: element 0 in the low nibble.
    assert pack_int4(torch.tensor([1, -2])).tolist() == [0xE1]
    assert pack_int4(torch.tensor([-8, 7, 0, -1])).tolist() == [0x78, 0xF0]
    assert pack_int4(torch.tensor([5])).tolist() == [0x05]  # odd length: a zero pad nibble


@pytest.mark.parametrize("k", [1, 2, 7, 96])
def test_pack_unpack_roundtrip_over_the_whole_range(k):
    q = torch.randint(-8, 8, (3, k), generator=torch.Generator().manual_seed(k))
    q[0, 0], q[-1, -1] = -8, 7
    packed = pack_int4(q)
    assert packed.dtype == torch.uint8 and packed.shape == (3, (k + 1) // 2)
    assert torch.equal(unpack_int4(packed, k), q.to(torch.int8))


def test_pack_int4_errors():
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        pack_int4(torch.tensor([8]))
    with pytest.raises(TypeError, match="integer"):
        pack_int4(torch.tensor([1.0]))
    with pytest.raises(TypeError, match="uint8"):
        unpack_int4(torch.tensor([1], dtype=torch.int8), 2)
    with pytest.raises(ValueError, match="k = 5"):
        unpack_int4(torch.zeros(2, dtype=torch.uint8), 5)


# --------------------------------------------------------------------------- activation quantizer


@pytest.mark.parametrize("bits", [8, 4])
def test_quik_act_ref_is_the_simulation_quantizer(bits):
    """Dequantized codes equal bitlaws.quant's asymmetric per-token fake quantization, exactly."""
    x = _activations(6, 45)
    base, outl = _split(45, 5)
    act = quik_act_ref(x, base, outl, bits)
    h = 2 ** (bits - 1)
    q = codes_int(act.codes, base.numel(), bits)
    x_hat = (q + h - act.zero[:, None]) * act.scale[:, None]
    sim = fake_quantize(x[:, base.long()], QuantSpec(f"int{bits}", PerToken(), symmetric=False))
    assert torch.equal(x_hat, sim)
    assert torch.equal(act.x_outlier, x[:, outl.long()])
    assert q.min() >= -h and q.max() <= h - 1
    assert act.scale.dtype == act.zero.dtype == torch.float32
    assert torch.equal(act.zero, act.zero.round())


@pytest.mark.parametrize("bits", [8, 4])
def test_quik_act_ref_zero_and_constant_rows(bits):
    x = _activations(4, 17)
    base, outl = _split(17, 0)
    act = quik_act_ref(x, base, outl, bits)
    h = 2 ** (bits - 1)
    q = codes_int(act.codes, 17, bits)
    assert act.scale[1] == 1.0 and act.zero[1] == 0.0 and (q[1] == -h).all()  # the value 0
    # the constant row 3.0: range [0, 3], zero point 0, every value on the top code
    assert act.zero[2] == 0.0 and (q[2] == h - 1).all()
    assert torch.allclose((q[2] + h) * act.scale[2], torch.full((17,), 3.0))


def test_quik_act_ref_no_and_all_outliers():
    x = _activations(5, 12)
    base, outl = _split(12, 0)
    act = quik_act_ref(x, base, outl, 4)
    assert act.codes.shape == (5, 6) and act.x_outlier.shape == (5, 0)
    base, outl = _split(12, 12)
    act = quik_act_ref(x, base, outl, 8)
    assert act.codes.shape == (5, 0) and torch.equal(act.x_outlier, x[:, outl.long()])
    assert torch.equal(act.scale, torch.ones(5)) and torch.equal(act.zero, torch.zeros(5))


def test_quik_act_ref_errors():
    x = torch.randn(3, 8)
    base, outl = _split(8, 2)
    with pytest.raises(TypeError, match="x must be"):
        quik_act_ref(x.int(), base, outl, 8)
    with pytest.raises(ValueError, match="x must be 2-D"):
        quik_act_ref(x[None], base, outl, 8)
    with pytest.raises(ValueError, match="split the 8 features"):
        quik_act_ref(x, base[1:], outl, 8)
    with pytest.raises(TypeError, match="outlier_idx must be int32 or int64"):
        quik_act_ref(x, base, outl.float(), 8)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        quik_act_ref(x, base, outl, 3)
    x[0, base[0]] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        quik_act_ref(x, base, outl, 8)


# --------------------------------------------------------------------------- integer GEMM and epilogue


def _codes(m, n, k, bits, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1)
    a, w = torch.randint(lo, hi, (m, k), generator=gen), torch.randint(lo, hi, (n, k), generator=gen)
    a[0, 0], w[0, 0] = lo, lo  # the range ends
    a[-1, -1], w[-1, -1] = hi - 1, lo
    return a, w


def _stored(t, bits):
    return pack_int4(t) if bits == 4 else t.to(torch.int8)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (5, 33, 77), (16, 64, 95)])
def test_int_gemm_ref_bit_exact_against_int64(bits, m, n, k):
    a, w = _codes(m, n, k, bits)
    got = int_gemm_ref(_stored(a, bits), _stored(w, bits), bits)
    assert got.dtype == torch.int32
    assert torch.equal(got.long(), int64_gemm(a, w))


def test_int_gemm_ref_empty_k():
    a, w = torch.zeros(3, 0, dtype=torch.int8), torch.zeros(4, 0, dtype=torch.int8)
    assert torch.equal(int_gemm_ref(a, w, 8), torch.zeros(3, 4, dtype=torch.int32))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("with_y", [False, True])
def test_int_gemm_dequant_ref_against_float64(bits, with_y):
    m, n, k = 7, 19, 61
    a, w = _codes(m, n, k, bits, seed=1)
    gen = torch.Generator().manual_seed(2)
    s = torch.rand(m, generator=gen) * 0.1 + 1e-3
    z = torch.randint(0, 2**bits, (m,), generator=gen).float()
    sigma = torch.rand(n, generator=gen) * 0.05 + 1e-3
    R = (sigma.double() * w.double().sum(1)).float()
    y = torch.randn(m, n, generator=gen) if with_y else None
    bias = torch.randn(n, generator=gen) if with_y else None
    got = int_gemm_dequant_ref(_stored(a, bits), _stored(w, bits), s, z, sigma, R, bits=bits, y=y, bias=bias)
    ref, tol = dequant_oracle(a, w, s, z, sigma, bits, y=y, bias=bias)
    assert ((got.double() - ref).abs() <= tol).all()


def test_int_gemm_dequant_ref_accumulator_past_fp16_range():
    m, n, k = 2, 3, 95
    a = torch.full((m, k), -128)
    w = torch.full((n, k), -128)  # A = 128 * 128 * 95 = 1,556,480 > 65,504
    s, z = torch.full((m,), 1e-4), torch.full((m,), 128.0)  # h - z = 0: the zero-point term vanishes
    sigma, R = torch.full((n,), 1e-3), torch.full((n,), -128 * 95 * 1e-3)
    assert int64_gemm(a, w)[0, 0] > torch.finfo(torch.float16).max
    got = int_gemm_dequant_ref(a.to(torch.int8), w.to(torch.int8), s, z, sigma, R, bits=8, out_dtype=torch.float16)
    ref, tol = dequant_oracle(a, w, s, z, sigma, 8)
    assert torch.isfinite(got).all()
    assert ((got.double() - ref).abs() <= tol + output_rounding(ref, torch.float16)).all()


def test_int_gemm_ref_errors():
    a, w = torch.zeros(2, 4, dtype=torch.int8), torch.zeros(3, 4, dtype=torch.int8)
    with pytest.raises(TypeError, match=r"a must be torch.uint8 \(int4 packed"):
        int_gemm_ref(a, w, 4)
    with pytest.raises(ValueError, match="share K"):
        int_gemm_ref(a, w[:, :3], 8)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        int_gemm_ref(a, w, 2)
    f = torch.ones(2)
    with pytest.raises(ValueError, match=r"w_scale must have shape \(3,\)"):
        int_gemm_dequant_ref(a, w, f, f, f, torch.ones(3), bits=8)
    with pytest.raises(TypeError, match="act_scale must be float32"):
        int_gemm_dequant_ref(a, w, f.half(), f, torch.ones(3), torch.ones(3), bits=8)
    with pytest.raises(ValueError, match=r"y must have shape \(2, 3\)"):
        int_gemm_dequant_ref(a, w, f, f, torch.ones(3), torch.ones(3), bits=8, y=torch.ones(3, 2))


# --------------------------------------------------------------------------- QuikLinear, reference path


def _linear(k=40, n=24, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(k, n, bias=bias)


@pytest.mark.parametrize("bits", [8, 4])
def test_quik_linear_buffers_and_weights(bits):
    lin = _linear()
    outl = torch.tensor([31, 3, 17])
    q = QuikLinear.from_linear(lin, outl, bits)
    k_b = 37
    assert q.outlier_idx.tolist() == [3, 17, 31] and q.base_idx.numel() == k_b
    assert q.w_codes.shape == ((24, (k_b + 1) // 2) if bits == 4 else (24, k_b))
    assert q.w_codes.dtype == (torch.uint8 if bits == 4 else torch.int8)
    assert q.w_scale.dtype == q.w_rowsum.dtype == torch.float32 and q.w_outlier.dtype == torch.float16
    # Base columns: the symmetric per-channel RTN of bitlaws.quant, scale from the base columns only.
    W_base = lin.weight.detach()[:, q.base_idx.long()]
    sim = fake_quantize(W_base, QuantSpec(f"int{bits}", PerChannel(0), symmetric=True))
    W_hat = q.dequantized_weight()
    assert torch.equal(W_hat[:, q.base_idx.long()], sim)
    assert torch.equal(W_hat[:, q.outlier_idx.long()], lin.weight.detach()[:, outl.sort().values].half().float())
    assert torch.allclose(q.w_rowsum, sim.sum(1), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("n_out", [0, 5, 40])
def test_quik_linear_ref_forward_against_float64(bits, n_out):
    """Batch > 1, no outliers, some, all: the output is x_hat W_hat^T + x_o W_o^T + b (float64)."""
    lin = _linear()
    base, outl = _split(40, n_out, seed=3)
    q = QuikLinear.from_linear(lin, outl, bits)
    x = torch.randn(2, 3, 40, generator=torch.Generator().manual_seed(4))
    y = q(x)
    assert y.shape == (2, 3, 24) and y.dtype == torch.float32
    x2 = x.reshape(6, 40)
    act = quik_act_ref(x2, q.base_idx, q.outlier_idx, bits)
    Y = x2[:, q.outlier_idx.long()].double() @ q.w_outlier.double().t()
    ref, tol = dequant_oracle(codes_int(act.codes, q.base_idx.numel(), bits), q.weight_codes(), act.scale, act.zero,
                              q.w_scale, bits, y=Y, bias=q.bias)
    # plus the fp32 outlier GEMM's own rounding: n_out products and sums
    tol = tol + (n_out + 2) * 2.0**-24 * (x2[:, q.outlier_idx.long()].double().abs() @ q.w_outlier.double().abs().t())
    assert ((y.reshape(6, 24).double() - ref).abs() <= tol).all()


def test_quik_linear_accuracy_against_the_unquantized_layer():
    """Reported, not exact: error against x W^T + b, with and without outliers on planted outlier features."""
    lin = _linear(k=64, n=32, seed=5)
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(6))
    hot = torch.tensor([2, 9, 40, 51])
    x[:, hot] *= 40.0  # a few feature columns with large activations, as in LLMs
    exact = lin(x).detach()

    def rel(q):
        return ((q(x) - exact).norm() / exact.norm()).item()

    e8 = rel(QuikLinear.from_linear(lin, torch.tensor([], dtype=torch.long), 8))
    e4_plain = rel(QuikLinear.from_linear(lin, torch.tensor([], dtype=torch.long), 4))
    e4_quik = rel(QuikLinear.from_linear(lin, hot, 4))
    assert e8 < 0.02
    assert e4_quik < 0.5 * e4_plain


def test_quik_linear_all_outliers_is_the_16_bit_layer():
    lin = _linear()
    q = QuikLinear.from_linear(lin, torch.arange(40), 4)
    x = torch.randn(5, 40)
    ref = x @ lin.weight.detach().half().float().t() + lin.bias.detach().half().float()
    assert torch.allclose(q(x), ref, rtol=1e-5, atol=1e-5)


def test_quik_linear_options():
    lin = _linear(bias=False)
    q = QuikLinear.from_linear(lin, torch.tensor([0, 1]), 8, dtype=torch.bfloat16)
    assert q.bias is None and q.w_outlier.dtype == torch.bfloat16
    assert q(torch.randn(3, 40).half()).dtype == torch.float16
    # A given weight scale (e.g. from GPTQ) is used as is.
    sigma = torch.full((24,), 0.01)
    q = QuikLinear.from_linear(lin, torch.tensor([0]), 4, weight_scale=sigma)
    assert torch.equal(q.w_scale, sigma)
    assert torch.equal(q.weight_codes(), (lin.weight.detach()[:, 1:] / 0.01).round().clamp(-8, 7).to(torch.int8))
    # state_dict round trip into a fresh layer of the same configuration
    fresh = QuikLinear(40, 24, torch.tensor([0]), 4, bias=False)
    fresh.load_state_dict(q.state_dict())
    x = torch.randn(2, 40)
    assert torch.equal(fresh(x), q(x))
    assert "bits=4" in repr(q)


def test_quik_linear_weight_memory():
    lin = nn.Linear(512, 256)
    q4 = QuikLinear.from_linear(lin, torch.arange(32), 4)
    q8 = QuikLinear.from_linear(lin, torch.arange(32), 8)
    dense_bf16 = 512 * 256 * 2 + 256 * 2
    assert q4.weight_bytes() < 0.45 * dense_bf16 and q8.weight_bytes() < 0.65 * dense_bf16


def test_quik_linear_errors():
    lin = _linear()
    with pytest.raises(ValueError, match="repeat"):
        QuikLinear.from_linear(lin, torch.tensor([1, 1]), 4)
    with pytest.raises(ValueError, match=r"outlier_idx must lie in \[0, 40\)"):
        QuikLinear.from_linear(lin, torch.tensor([40]), 4)
    with pytest.raises(ValueError, match="outlier_idx must be 1-D"):
        QuikLinear.from_linear(lin, torch.tensor([[1]]), 4)
    with pytest.raises(TypeError, match="outlier_idx must be an integer tensor"):
        QuikLinear.from_linear(lin, torch.tensor([1.0]), 4)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        QuikLinear.from_linear(lin, torch.tensor([1]), 6)
    with pytest.raises(TypeError, match="dtype"):
        QuikLinear.from_linear(lin, torch.tensor([1]), 4, dtype=torch.float32)
    with pytest.raises(TypeError, match="nn.Linear"):
        QuikLinear.from_linear(nn.Conv1d(2, 2, 1), torch.tensor([1]), 4)
    with pytest.raises(ValueError, match=r"weight_scale must have shape \(24,\)"):
        QuikLinear.from_linear(lin, torch.tensor([1]), 4, weight_scale=torch.ones(3))
    q = QuikLinear.from_linear(lin, torch.tensor([1]), 4)
    with pytest.raises(ValueError, match="40 features"):
        q(torch.randn(2, 39))
    with pytest.raises(TypeError, match="x must be a float16, bfloat16 or float32"):
        q(torch.ones(2, 40, dtype=torch.int64))
    q.impl = "fast"
    with pytest.raises(ValueError, match="impl must be one of"):
        q(torch.randn(2, 40))


# --------------------------------------------------------------------------- benchmark and verdict


def test_benchmark_smoke_rows(tmp_path):
    rows = kb.run_benchmark("smoke", device="cpu")
    frame = pd.DataFrame(rows)
    s = kb.SETTINGS["smoke"]
    assert list(frame.columns) == kb.COLUMNS
    layer = frame[frame["part"] == "layer"]
    assert len(layer) == len(s.shapes()) * len(s.tokens) * 3  # dense, w8a8, w4a4
    assert (layer.loc[layer["method"] == "dense", "speedup"] == 1.0).all()
    assert (frame["latency_ms"] > 0).all() and frame["latency_ms"].map(math.isfinite).all()
    assert set(frame["part"]) == {"layer", "act_quant", "int_gemm", "outlier_gemm"}
    assert (frame["impl"].isin(["torch", "ref"])).all() and (frame["device"].str.startswith("cpu")).all()
    path = qk.csv_path("smoke", tmp_path)
    kb.write_csv(rows, path)
    back = qk.load_benchmark("smoke", tmp_path)
    assert len(back) == len(frame) and list(back.columns) == kb.COLUMNS
    assert back["latency_ms"].notna().all() and back.loc[back["part"] != "layer", "weight_bytes"].isna().all()
    assert qk.load_benchmark("gpu", tmp_path) is None


def test_verdict_q4_pending_without_gpu_rows():
    v = qk.verdict_q4(None)
    assert v.verdict == "pending" and "not measured" in v.ours
    cpu_rows = pd.DataFrame({"part": ["layer"], "device": ["cpu:x86_64"], "method": ["quik_w8a8"]})
    assert qk.verdict_q4(cpu_rows).verdict == "pending"


@pytest.mark.parametrize("s8,s4,verdict", [(1.9, 1.7, "reproduced"), (1.3, 1.1, "partly"), (0.9, 0.8, "not reproduced")])
def test_verdict_q4_rule_on_synthetic_gpu_rows(s8, s4, verdict):
    """Rule 3 grades two runs of one code; one run alone is inconclusive, whatever it gives."""
    v = qk.verdict_q4(_q4_rows(1.0, s8, s4), [_q4_rows(1.0, s8, s4)])
    assert v.verdict == verdict and v.details["speedup_w8a8"] == pytest.approx(s8, rel=1e-12)
    assert v.details["n_runs_graded_code"] == 2 and v.details["quik_w8a8_spread_graded_code"] == 0
    alone = qk.verdict_q4(_q4_rows(1.0, s8, s4))
    assert alone.verdict == "inconclusive" and alone.details["speedup_w8a8"] == pytest.approx(s8, rel=1e-12)


def _q4_rows(dense_ms, s8, s4, sha="0" * 40):
    """One large layer at 2048 tokens: the dense bf16 layer and the QUIK layers at the given speed-ups
    (QUIK latencies 1/s8 and 1/s4 ms, so the speed-up over this run's dense layer is dense_ms·s8)."""
    return pd.DataFrame([{"part": "layer", "device": "cuda:NVIDIA H200", "model": "llama2-70b", "layer": "q/o_proj",
                          "git_sha": sha, "m_tokens": 2048, "n_out": 8192,
                          "k_in": 8192, "method": m, "latency_ms": ms, "speedup": dense_ms / ms, "n_outliers": o}
                         for m, ms, o in (("dense", dense_ms, 0), ("quik_w8a8", 1.0 / s8, 0),
                                          ("quik_w4a4", 1.0 / s4, 256))])


def test_verdict_q4_reads_every_runs_baseline():
    """Rule 3 (as rule 2): a replicate run whose bf16 layer is slower moves the speed-up; the grade
    stands only when every pairing gives it (1.3 partly either way), else it is inconclusive (1.55 / 1.65)."""
    main = _q4_rows(1.0, 1.3, 0.5)
    v = qk.verdict_q4(main, [_q4_rows(1.05, 1.3, 0.5)])
    assert v.verdict == "partly" and v.details["n_runs"] == 2
    assert v.details["speedup_w8a8_lo"] == pytest.approx(1.3) and v.details["speedup_w8a8_hi"] == pytest.approx(1.365)
    v = qk.verdict_q4(_q4_rows(1.0, 1.55, 0.5), [_q4_rows(1.0 * 1.65 / 1.55, 1.55, 0.5)])
    assert v.verdict == "inconclusive"
    v = qk.verdict_q4(_q4_rows(1.0, 1.7, 0.5), [_q4_rows(0.98, 1.7, 0.5)])
    assert v.verdict == "reproduced"
    other = _q4_rows(1.05, 1.3, 0.5, sha="1" * 40)  # another code: its bf16 timing counts, its QUIK timing does not
    assert f"own QUIK and bf16 timings, gives {1.05 * 1.3:.2f}×" in qk.verdict_q4(main, [other]).reason
    cpu_replicate = _q4_rows(0.5, 1.0, 1.0).assign(device="cpu:x86_64")  # a CPU run is no baseline
    v = qk.verdict_q4(main, [cpu_replicate])
    assert v.details["n_runs"] == 1 and v.verdict == "inconclusive"


def test_verdict_q4_rule3_needs_two_runs_of_the_graded_code():
    """Rule 3 on synthetic frames: one run of the graded code is inconclusive (other code's runs only
    lend their bf16 timing) and the reason says what settles it; two runs of the same code agreeing
    at ≥ 1.2× grade partly; two disagreeing are inconclusive; the QUIK side's spread is reported."""
    main = _q4_rows(1.0, 1.3, 0.5, sha="a" * 40)
    v = qk.verdict_q4(main, [_q4_rows(1.0, 1.3, 0.5, sha="b" * 40)])
    assert v.verdict == "inconclusive" and v.details["n_runs"] == 2 and v.details["n_runs_graded_code"] == 1
    assert "What settles it: a second device run of the same code" in v.reason
    assert "bench/device_check.py --parts bench" in v.reason and "spread is unmeasured" in v.reason
    v = qk.verdict_q4(main, [_q4_rows(1.0, 1.25, 0.5, sha="a" * 40)])
    assert v.verdict == "partly" and v.details["n_runs_graded_code"] == 2
    assert v.details["quik_w8a8_spread_graded_code"] == pytest.approx(1.3 / 1.25 - 1)
    assert v.details["speedup_w8a8_lo"] == pytest.approx(1.25) and v.details["speedup_w8a8_hi"] == pytest.approx(1.3)
    assert "spread over the runs of the graded code 4.0%" in v.reason
    v = qk.verdict_q4(main, [_q4_rows(1.0, 1.1, 0.5, sha="a" * 40)])
    assert v.verdict == "inconclusive" and "disagree" in v.reason
    # a third run of other code: its QUIK timing (not reproduced alone) does not enter, its bf16 timing does
    v = qk.verdict_q4(main, [_q4_rows(1.0, 1.25, 0.5, sha="a" * 40), _q4_rows(1.0, 1.0, 0.5, sha="c" * 40)])
    assert v.verdict == "partly" and v.details["n_runs"] == 3 and v.details["n_runs_graded_code"] == 2
    # a dirty or unknown git_sha names no code: never the same as another run, even an identical one
    dirty = _q4_rows(1.0, 1.3, 0.5, sha="abcdef123456-dirty")
    assert qk.verdict_q4(dirty, [dirty.copy()]).verdict == "inconclusive"


def test_kernel_code_keys_commits_by_their_kernel_tree():
    trees = {"aaaaaaa": "t1", "bbbbbbb": "t1", "ccccccc": "t2"}
    key = lambda s: qk.kernel_code(s, tree_of=trees.get)  # noqa: E731
    assert key("aaaaaaa") == key("bbbbbbb") == "tree:t1" and key("ccccccc") == "tree:t2"
    assert key("ddddddd") == "commit:ddddddd" != key("eeeeeee")  # git does not know it: the string decides
    assert key("aaaaaaa+fix") == "label:aaaaaaa+fix" != key("aaaaaaa")  # uncommitted changes, named
    assert [key(s) for s in ("aaaaaaa-dirty", "unknown", "", None, float("nan"))] == [None] * 5


def test_kernel_code_reads_this_repository():
    """fe1c0de added two autotune tiles to 2ee528d's int8 GEMM; a2c1b92 (the grading commit) left the
    kernels as fe1c0de had them. Skipped where git or this history is not at hand."""
    if qk.kernel_code("fe1c0de").startswith("commit:"):
        pytest.skip("no git history of this repository here")
    assert qk.kernel_code("fe1c0de") == qk.kernel_code("a2c1b92") != qk.kernel_code("2ee528d")
    assert qk.kernel_code("2ee528d114dcf6489b5cfa56d2633e0d5c7b5c67+fp32fix").startswith("label:")

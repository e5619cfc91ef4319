"""The Triton kernels against their references: bit-exact where the operation is exact.

Without a GPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set here before
triton is imported) on small shapes: M <= 16, N <= 64, K <= 96 with K odd and not a multiple of
any block. With CUDA they run compiled, on the same shapes, and the tests marked ``gpu`` add
Llama-sized ones. References run on CPU copies (torch's CPU division by a scalar is IEEE-exact,
as the kernel's ``div_rn``; its CUDA division by a scalar multiplies by the reciprocal).
Skipped when triton is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

# As in every kernel test module: the interpreter on before triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from bitlaws.kernels import (QuikLinear, int_gemm, int_gemm_dequant, int_gemm_dequant_ref, pack_int4,  # noqa: E402
                             quik_act, quik_act_ref)
from bitlaws.kernels import _triton  # noqa: E402
from test_kernels_oracles import codes_int, dequant_oracle, int64_gemm, output_rounding  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() and not _triton.INTERPRET else "cpu"
# Triton reads TRITON_INTERPRET once, when it is first imported. If another test module imported it
# earlier in this process (transformers' Llama does, through torch), the interpreter is off (or half
# on) and, without CUDA, the kernels cannot run here: then this module reruns itself in a subprocess with
# the interpreter on (`test_kernels_in_an_interpreter_subprocess`) and skips its tests in this one.
IN_PROCESS = _triton.INTERPRET or (DEVICE == "cuda" and not _triton.MIXED)
SUBPROCESS_TEST = "test_kernels_in_an_interpreter_subprocess"


@pytest.fixture(autouse=True)
def _where_the_kernels_run(request):
    if not IN_PROCESS and request.node.originalname != SUBPROCESS_TEST:
        pytest.skip(f"triton was imported before TRITON_INTERPRET=1 in this process; run by {SUBPROCESS_TEST}")


@pytest.mark.skipif(IN_PROCESS, reason="the kernel tests run in this process")
def test_kernels_in_an_interpreter_subprocess():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(__file__)],
                         cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.strip().splitlines()[-1], run.stdout[-1000:]

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
# Triton's interpreter converts fp32 to bf16 by truncation (measured with triton 3.9); the GPU rounds
# to nearest even. The tolerance of a bf16 output allows a whole ulp there.
_BF16_TRUNCATES = _triton.INTERPRET


def _split(k: int, n_out: int, seed: int = 0):
    perm = torch.randperm(k, generator=torch.Generator().manual_seed(seed))
    return perm[n_out:].sort().values.to(torch.int32), perm[:n_out].sort().values.to(torch.int32)


def _activations(m: int, k: int, bits: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(seed)) * 2
    x[1] = 0.0  # zero range
    x[2] = -1.5  # a constant row
    # a row with range [0, 2^b - 1]: scale exactly 1, so x.5 values are ties (half to even)
    top = 2**bits - 1
    x[3] = torch.arange(k) % (top + 1) * 1.0
    x[3, 0], x[3, 1], x[3, 2:6] = 0.0, float(top), torch.tensor([0.5, 1.5, 2.5, 3.5])
    return x


def _dev(*ts):
    return [t.to(DEVICE) for t in ts]


def _cpu(t):
    return t.cpu()


# --------------------------------------------------------------------------- activation kernel


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: str(d).removeprefix("torch."))
def test_quik_act_bit_exact(bits, dtype):
    m, k, n_out = 9, 77, 6  # 9 rows: more than one row block; K_b = 71: odd, padded at 4 bits
    x = _activations(m, k, bits).to(dtype)
    base, outl = _split(k, n_out)
    got = quik_act(*_dev(x, base, outl), bits)
    ref = quik_act_ref(x, base, outl, bits)
    for name, g, r in zip(ref._fields, got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape, name
        assert torch.equal(_cpu(g), r), name
    if bits == 4:
        assert (ref.codes[:, -1] >> 4 == 0).all()  # the pad nibble of K_b = 71 is the code 0
    # The tie row: scale 1 and zero 0, so codes are round-half-even(x) - h: 0.5, 1.5, 2.5, 3.5 -> 0, 2, 2, 4.
    h = 2 ** (bits - 1)
    x3 = x[3, base.long()].float()
    assert ref.scale[3] == 1.0 and ref.zero[3] == 0.0 and (x3 % 1 == 0.5).sum() >= 2
    assert torch.equal(codes_int(_cpu(got.codes), 71, bits)[3], torch.round(x3).long() - h)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("n_out", [0, 40])
def test_quik_act_no_and_all_outliers(bits, n_out):
    x = _activations(5, 40, bits, seed=1)
    base, outl = _split(40, n_out)
    got = quik_act(*_dev(x, base, outl), bits)
    ref = quik_act_ref(x, base, outl, bits)
    for name, g, r in zip(ref._fields, got, ref):
        assert torch.equal(_cpu(g), r), name


def test_quik_act_errors():
    x, base, outl = _dev(torch.randn(4, 10), *_split(10, 2))
    with pytest.raises(ValueError, match="x must be contiguous"):
        quik_act(x.t().contiguous().t(), base, outl, 8)
    with pytest.raises(TypeError, match="x must be float16, bfloat16 or float32"):
        quik_act(x.double(), base, outl, 8)
    with pytest.raises(TypeError, match="base_idx must be int32 or int64"):
        quik_act(x, base.short(), outl, 8)
    with pytest.raises(ValueError, match="split the 10 features"):
        quik_act(x, base, outl[:1], 8)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        quik_act(x, base, outl, 2)


# --------------------------------------------------------------------------- integer GEMM


def _codes(m, n, k, bits, seed=0, ends=True):
    gen = torch.Generator().manual_seed(seed)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1)
    a, w = torch.randint(lo, hi, (m, k), generator=gen), torch.randint(lo, hi, (n, k), generator=gen)
    if ends:  # every pairing of the range ends
        a[0, :4], w[0, :4] = torch.tensor([lo, lo, hi - 1, hi - 1]), torch.tensor([lo, hi - 1, lo, hi - 1])
    return a, w


def _stored(t, bits):
    return pack_int4(t) if bits == 4 else t.to(torch.int8)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("m,n,k", [(1, 16, 1), (5, 33, 77), (16, 64, 95), (3, 17, 33)])
def test_int_gemm_bit_exact_against_int64(bits, m, n, k):
    a, w = _codes(m, n, k, bits) if k >= 4 else _codes(m, n, k, bits, ends=False)
    got = int_gemm(*_dev(_stored(a, bits), _stored(w, bits)), bits)
    assert got.dtype == torch.int32 and got.shape == (m, n)
    assert torch.equal(_cpu(got).long(), int64_gemm(a, w))


def test_int4_range_ends():
    """All of -8 x -8, -8 x 7, 7 x 7 over an odd K: extremes of the int4 product and its packing."""
    k = 61
    for va, vw in ((-8, -8), (-8, 7), (7, 7)):
        a, w = torch.full((2, k), va), torch.full((3, k), vw)
        got = int_gemm(*_dev(pack_int4(a), pack_int4(w)), 4)
        assert (_cpu(got) == va * vw * k).all()


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("with_y", [False, True])
@pytest.mark.parametrize("out_dtype", FLOATS, ids=lambda d: str(d).removeprefix("torch."))
def test_int_gemm_dequant_against_float64(bits, with_y, out_dtype):
    """The fused epilogue against x_hat W_hat^T (+ Y + b) in float64 from the same quantized operands,
    within 8 fp32 roundings of the terms' magnitudes plus one rounding to the output dtype."""
    m, n, k = 7, 40, 83
    a, w = _codes(m, n, k, bits, seed=2)
    gen = torch.Generator().manual_seed(3)
    s = torch.rand(m, generator=gen) * 0.1 + 1e-3
    z = torch.randint(0, 2**bits, (m,), generator=gen).float()
    sigma = torch.rand(n, generator=gen) * 0.05 + 1e-3
    R = (sigma.double() * w.double().sum(1)).float()
    y = torch.randn(m, n, generator=gen).to(out_dtype) if with_y else None
    bias = torch.randn(n, generator=gen).to(out_dtype) if with_y else None
    args = (_stored(a, bits), _stored(w, bits), s, z, sigma, R)
    got = int_gemm_dequant(*_dev(*args), bits=bits, y=y if y is None else y.to(DEVICE),
                           bias=bias if bias is None else bias.to(DEVICE), out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == (m, n)
    ref, tol = dequant_oracle(a, w, s, z, sigma, bits, y=y, bias=bias)
    tol = tol + output_rounding(ref, out_dtype, truncating=_BF16_TRUNCATES and out_dtype == torch.bfloat16)
    assert ((_cpu(got).double() - ref).abs() <= tol).all()
    # and the reference twin agrees within the same bound
    twin = int_gemm_dequant_ref(*args, bits=bits, y=y, bias=bias, out_dtype=out_dtype)
    assert ((twin.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize("bits", [8, 4])
def test_accumulator_past_fp16_range(bits):
    """|A| > 65504: exact in int32, and the fp32 epilogue keeps the fp16 output finite and right."""
    k = 95
    lo = -(2 ** (bits - 1))
    a, w = torch.full((3, k), lo), torch.full((5, k), lo)
    h = 2 ** (bits - 1)
    A = lo * lo * k
    assert bits == 4 or A > torch.finfo(torch.float16).max
    s, z = torch.full((3,), 1e-4), torch.full((3,), float(h))
    sigma = torch.full((5,), 1e-3)
    R = (sigma.double() * w.double().sum(1)).float()
    a_s, w_s = _dev(_stored(a, bits), _stored(w, bits))
    assert (_cpu(int_gemm(a_s, w_s, bits)) == A).all()
    got = int_gemm_dequant(a_s, w_s, *_dev(s, z, sigma, R), bits=bits, out_dtype=torch.float16)
    ref, tol = dequant_oracle(a, w, s, z, sigma, bits)
    assert torch.isfinite(_cpu(got)).all()
    assert ((_cpu(got).double() - ref).abs() <= tol + output_rounding(ref, torch.float16)).all()


def test_int_gemm_errors():
    a, w = _dev(torch.zeros(2, 4, dtype=torch.int8), torch.zeros(3, 4, dtype=torch.int8))
    with pytest.raises(TypeError, match=r"w must be torch.uint8 \(int4 packed two per uint8 along K\)"):
        int_gemm(a.view(torch.uint8), w, 4)
    with pytest.raises(ValueError, match="share K"):
        int_gemm(a, w[:, :2].contiguous(), 8)
    with pytest.raises(ValueError, match="w must be contiguous"):
        int_gemm(a, torch.zeros(4, 3, dtype=torch.int8, device=DEVICE).t(), 8)
    f2, f3 = _dev(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match=r"act_zero must have shape \(2,\)"):
        int_gemm_dequant(a, w, f2, f3, f3, f3, bits=8)
    with pytest.raises(TypeError, match="out_dtype"):
        int_gemm_dequant(a, w, f2, f2, f3, f3, bits=8, out_dtype=torch.int32)
    with pytest.raises(TypeError, match="bias must be float16, bfloat16 or float32"):
        int_gemm_dequant(a, w, f2, f2, f3, f3, bits=8, bias=torch.ones(3, dtype=torch.int32, device=DEVICE))


# --------------------------------------------------------------------------- QuikLinear through the kernels


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("n_out", [0, 6, 48])
def test_quik_linear_triton_matches_ref(bits, n_out):
    """Batch > 1 through both paths: the same quantized operands, so equal up to fp32 rounding."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(48, 20)
    _, outl = _split(48, n_out, seed=5)
    q = QuikLinear.from_linear(lin, outl, bits)
    x = torch.randn(2, 4, 48)
    q.impl = "ref"
    ref = q(x)
    q.to(DEVICE).impl = "triton"
    got = _cpu(q(x.to(DEVICE)))
    assert got.shape == (2, 4, 20)
    scale = ref.abs().max().item() + 1.0
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-5 * scale)


# --------------------------------------------------------------------------- GPU only


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA (compiled Triton kernels)")
@pytest.mark.parametrize("bits", [8, 4])
def test_cuda_llama_shape(bits):
    """A Llama-2-7B q_proj at 256 tokens in bf16: kernels bit-exact where exact, close to the reference."""
    torch.manual_seed(0)
    m, k, n, n_out = 256, 4096, 4096, 256
    x = torch.randn(m, k, dtype=torch.bfloat16)
    base, outl = _split(k, n_out)
    got = quik_act(*_dev(x, base, outl), bits)
    ref = quik_act_ref(x, base, outl, bits)
    for name, g, r in zip(ref._fields, got, ref):
        assert torch.equal(_cpu(g), r), name
    a, w = _codes(m, n, k - n_out, bits)
    assert torch.equal(_cpu(int_gemm(*_dev(_stored(a, bits), _stored(w, bits)), bits)).long(), int64_gemm(a, w))
    lin = torch.nn.Linear(k, n, dtype=torch.float32)
    q = QuikLinear.from_linear(lin, outl, bits, dtype=torch.bfloat16)
    ref_y = q(x.float())
    y = q.to("cuda")(x.cuda())
    assert y.dtype == torch.bfloat16
    assert torch.allclose(_cpu(y).float(), ref_y, rtol=2e-2, atol=2e-2 * ref_y.abs().max().item())

"""Tests for the number formats and the floating-point fake quantizer.

Oracles: ml_dtypes' casts for the formats it has (OCP FP8/FP6/FP4 and the IEEE-like E4M3/E3M4),
torch's own float16/bfloat16 casts for two wide IEEE-like formats, and, for the paper's
finite-only ExMy formats that ml_dtypes lacks, an enumerated-value oracle written here: list
every code's value from its bit fields, take the nearest, break ties towards the even code.
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bitlaws.formats import (
    OCP_FP_FORMATS,
    PAPER_FP_FORMATS,
    FloatFormat,
    IntFormat,
    parse_format,
)
from bitlaws.quant import (
    PerChannel,
    PerGroup,
    PerTensor,
    PerToken,
    QuantSpec,
    cast_to_format,
    choose_qparams,
    dequantize,
    fake_quantize,
    quantize,
    round_ste,
)

torch.set_num_threads(1)

# name -> (ml_dtypes type, number of bit patterns it has)
ML_DTYPES = {
    "fp8_e4m3fn": (ml_dtypes.float8_e4m3fn, 256),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 256),
    "fp6_e2m3fn": (ml_dtypes.float6_e2m3fn, 64),
    "fp6_e3m2fn": (ml_dtypes.float6_e3m2fn, 64),
    "fp4_e2m1fn": (ml_dtypes.float4_e2m1fn, 16),
    "fp8_e4m3": (ml_dtypes.float8_e4m3, 256),  # IEEE-like, max 240
    "fp8_e3m4": (ml_dtypes.float8_e3m4, 256),  # IEEE-like, max 15.5
}
# finite-only formats without an ml_dtypes type: the paper's sweep and a few corner cases
# (E = 1; M = 0 with E = 1..4; a wide exponent E = 7).
ENUM_ONLY = ["fp3_e2m0fn", "fp4_e3m0fn", "fp5_e3m1fn", "fp7_e4m2fn", "fp12_e5m6fn",
             "fp2_e1m0fn", "fp4_e1m2fn", "fp5_e4m0fn", "fp9_e7m1fn", "fp5_e2m2fn"]
ALL_FP = list(ML_DTYPES) + ENUM_ONLY


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.int32)


def assert_bit_equal(got, want, x=None):
    """Equal as float32 bit patterns (so -0 differs from +0), NaN only where NaN is expected."""
    got, want = np.asarray(got, np.float32).ravel(), np.asarray(want, np.float32).ravel()
    x = None if x is None else np.asarray(x).ravel()
    both_nan = np.isnan(got) & np.isnan(want)
    bad = (_bits(got) != _bits(want)) & ~both_nan
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        raise AssertionError(f"{bad.sum()} mismatches; x={None if x is None else x[i]}, "
                             f"got={got[i]}, want={want[i]}")


# ----------------------------------------------------------------- oracles


def ml_cast(y: np.ndarray, name: str) -> np.ndarray:
    """ml_dtypes' cast of float32 `y` to the format and back to float32."""
    return np.asarray(y, np.float32).astype(ML_DTYPES[name][0]).astype(np.float32)


def code_magnitudes(exp_bits: int, man_bits: int, kind: str) -> np.ndarray:
    """Positive magnitudes in code order (code = e·2^M + m), from the bit fields; NaN/Inf dropped.

    kind: "fn" (every code finite), "ocp_e4m3" (all-ones code NaN) or "ieee" (top exponent field
    Inf/NaN). Written independently of bitlaws.formats.
    """
    bias = 2 ** (exp_bits - 1) - 1
    out = []
    for e in range(2**exp_bits):
        for m in range(2**man_bits):
            if kind == "ieee" and e == 2**exp_bits - 1:
                continue
            if kind == "ocp_e4m3" and e == 2**exp_bits - 1 and m == 2**man_bits - 1:
                continue
            if e == 0:
                out.append(m * 2.0 ** (1 - bias - man_bits))
            else:
                out.append((2**man_bits + m) * 2.0 ** (e - bias - man_bits))
    return np.array(out)


def _kind(f: FloatFormat) -> str:
    if not f.finite_only:
        return "ieee"
    return "ocp_e4m3" if (f.exp_bits, f.man_bits) == (4, 3) else "fn"


def enum_oracle(y: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Nearest value to each finite float32 `y`; a tie goes to the even code; beyond max: ±max."""
    mags = code_magnitudes(f.exp_bits, f.man_bits, _kind(f))
    assert np.all(np.diff(mags) > 0)  # code order is value order, so the index is the code
    a = np.abs(np.asarray(y, np.float64))
    hi = np.clip(np.searchsorted(mags, a, side="left"), 0, len(mags) - 1)
    lo = np.clip(hi - 1, 0, None)
    d_lo, d_hi = a - mags[lo], mags[hi] - a
    pick = np.where(d_lo < d_hi, lo, hi)
    tie = d_lo == d_hi
    pick = np.where(tie, np.where(lo % 2 == 0, lo, hi), pick)
    r = np.where(a >= mags[-1], mags[-1], mags[pick])
    return np.copysign(r, y).astype(np.float32)


def probe_values(f: FloatFormat, n_random: int = 4000, seed: int = 0) -> np.ndarray:
    """Every value, every midpoint between neighbours and one float32 ulp either side of it,
    subnormals, values around min_normal and max, random uniform and log-uniform values in range,
    all with both signs. float32."""
    rng = np.random.default_rng(seed)
    v = code_magnitudes(f.exp_bits, f.man_bits, _kind(f)).astype(np.float32)
    mids = ((v[1:].astype(np.float64) + v[:-1]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (v[1:].astype(np.float64) + v[:-1]) / 2)  # exact ties
    near = np.concatenate([np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    edges = np.array([f.min_normal, f.max], np.float32)
    edges = np.concatenate([edges, np.nextafter(edges, np.float32(0)), np.nextafter(edges, np.float32(np.inf))])
    sub = rng.uniform(0, f.min_normal, n_random // 4).astype(np.float32)
    uni = rng.uniform(0, f.max, n_random).astype(np.float32)
    logu = np.exp(rng.uniform(np.log(f.min_normal) - 3, np.log(f.max), n_random)).astype(np.float32)
    tiny = np.array([0.0, 1e-45, 1e-40, 1e-30], np.float32)
    pos = np.concatenate([v, mids, near, edges, sub, uni, logu, tiny])
    pos = pos[pos <= f.max]  # in range: overflow is tested separately
    return np.concatenate([pos, -pos])


# ----------------------------------------------------------------- format specs


@pytest.mark.parametrize("name", list(ML_DTYPES))
def test_named_format_constants_match_ml_dtypes(name):
    t, n_codes = ML_DTYPES[name]
    f = parse_format(name)
    fi = ml_dtypes.finfo(t)
    assert f.max == float(fi.max)
    assert f.min_normal == float(fi.smallest_normal)
    assert f.min_subnormal == float(fi.smallest_subnormal)
    assert f.bits == {256: 8, 64: 6, 16: 4}[n_codes]
    allv = np.arange(n_codes, dtype=np.uint8).view(t).astype(np.float64)
    want = np.unique(allv[np.isfinite(allv)])  # -0 and +0 collapse into one 0
    np.testing.assert_array_equal(f.values(), want)
    np.testing.assert_array_equal(f.values(positive=True), want[want >= 0])


def test_ocp_formats_and_generic_rule():
    assert parse_format("fp8_e4m3fn").max == 448 and parse_format("fp8_e4m3fn").nan_all_ones
    assert parse_format("fp8_e5m2").max == 57344 and not parse_format("fp8_e5m2").finite_only
    assert [parse_format(n).max for n in ("fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn")] == [7.5, 28, 6]
    # the OCP FP6/FP4 formats are the generic finite-only ones
    assert OCP_FP_FORMATS["fp6_e3m2fn"] == FloatFormat(3, 2)
    assert OCP_FP_FORMATS["fp6_e2m3fn"] == FloatFormat(2, 3)
    assert OCP_FP_FORMATS["fp4_e2m1fn"] == FloatFormat(2, 1)
    for name, f in OCP_FP_FORMATS.items():
        assert f.name == name and parse_format(name) == f
    # the all-finite rule: 2^(E+M) magnitudes, so 2·2^(E+M) - 1 values with one zero
    for E, M in [(2, 0), (3, 0), (3, 1), (4, 2), (1, 2), (5, 3)]:
        assert len(FloatFormat(E, M).values()) == 2 * 2 ** (E + M) - 1
        assert FloatFormat(E, M).max == (2 - 2.0**-M) * 2.0 ** (2**E - 1 - (2 ** (E - 1) - 1))


@pytest.mark.parametrize(
    "name, bias, vmax, min_normal, min_sub",
    [
        ("fp3_e2m0fn", 1, 4.0, 1.0, None),
        ("fp4_e3m0fn", 3, 16.0, 0.25, None),
        ("fp5_e3m1fn", 3, 24.0, 0.25, 0.125),
        ("fp6_e3m2fn", 3, 28.0, 0.25, 0.0625),
        ("fp7_e4m2fn", 7, 448.0, 2.0**-6, 2.0**-8),
        ("fp12_e5m6fn", 15, (2 - 2.0**-6) * 2.0**16, 2.0**-14, 2.0**-20),
        ("fp2_e1m0fn", 0, 2.0, 2.0, None),
    ],
)
def test_finite_only_constants_by_hand(name, bias, vmax, min_normal, min_sub):
    f = parse_format(name)
    assert (f.bias, f.max, f.min_normal, f.min_subnormal) == (bias, vmax, min_normal, min_sub)
    assert f.name == name and f.bits == 1 + f.exp_bits + f.man_bits


def test_small_grids_by_hand():
    np.testing.assert_array_equal(parse_format("fp3_e2m0fn").values(), [-4, -2, -1, 0, 1, 2, 4])
    np.testing.assert_array_equal(parse_format("fp4_e2m1fn").values(positive=True), [0, 0.5, 1, 1.5, 2, 3, 4, 6])
    np.testing.assert_array_equal(parse_format("fp4_e3m0fn").values(positive=True),
                                  [0, 0.25, 0.5, 1, 2, 4, 8, 16])


def test_paper_fp_formats():
    assert sorted(PAPER_FP_FORMATS) == [3, 4, 5, 6, 7, 8, 12]
    for bits, name in PAPER_FP_FORMATS.items():
        f = parse_format(name)
        assert isinstance(f, FloatFormat) and f.bits == bits and f.name == name
    got = {b: (parse_format(n).exp_bits, parse_format(n).man_bits) for b, n in PAPER_FP_FORMATS.items()}
    assert got == {3: (2, 0), 4: (3, 0), 5: (3, 1), 6: (3, 2), 7: (4, 2), 8: (5, 2), 12: (5, 6)}
    assert PAPER_FP_FORMATS[8] == "fp8_e5m2"  # OCP / Micikevicius et al. 2022


@pytest.mark.parametrize("E", range(1, 9))
@pytest.mark.parametrize("M", [0, 1, 3, 7, 23])
def test_name_round_trip(E, M):
    for finite_only in (True, False):
        try:
            f = FloatFormat(E, M, finite_only)
        except ValueError:
            assert (E == 8 and finite_only) or (E == 1 and not finite_only)
            continue
        if finite_only or f.name in ("fp8_e5m2", "fp8_e4m3", "fp8_e3m4"):
            assert parse_format(f.name) == f
        assert 0 < f.min_normal <= f.max <= float(np.finfo(np.float32).max)


def test_parse_passes_specs_through():
    f, i = FloatFormat(3, 1), IntFormat(4)
    assert parse_format(f) is f and parse_format(i) is i
    assert parse_format("int4") == IntFormat(4)


@pytest.mark.parametrize(
    "name, match",
    [
        ("fp4", r"allowed: 'int2' \.\.\. 'int16'; 'fp8_e4m3fn'"),
        ("float8_e4m3fn", "allowed"),
        ("fp4_e2m1", r"did you mean 'fp4_e2m1fn'"),  # bare ExMy names are not IEEE-like by accident
        ("fp4_e3m0", r"did you mean 'fp4_e3m0fn'"),
        ("fp5_e4m1fn", r"5 bits but 1 \+ E \+ M = 6"),  # the paper's E4M1 is not 5 bits
        ("fp10_e9m0fn", r"exp_bits must be an int in \[1, 8\]"),
        ("fp9_e8m0fn", "overflows float32"),
        ("fp26_e1m24fn", r"man_bits must be an int in \[0, 23\]"),
    ],
)
def test_parse_errors(name, match):
    with pytest.raises(ValueError, match=match):
        parse_format(name)


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 2), "exp_bits"),
        ((9, 2), "exp_bits"),
        ((2, -1), "man_bits"),
        ((2, 24), "man_bits"),
        ((2.0, 1), "exp_bits"),
        ((True, 1), "exp_bits"),
        ((2, 1, 1), "finite_only must be a bool"),
        ((1, 2, False), "exp_bits must be >= 2"),
    ],
)
def test_floatformat_validation(args, match):
    with pytest.raises(ValueError, match=match):
        FloatFormat(*args)


def test_values_refuses_huge_formats():
    with pytest.raises(ValueError, match="too many"):
        FloatFormat(8, 10, finite_only=False).values()


# ----------------------------------------------------------------- the cast, bit-exact


@pytest.mark.parametrize("name", list(ML_DTYPES))
def test_cast_bit_exact_against_ml_dtypes(name):
    f = parse_format(name)
    y = probe_values(f)
    got = cast_to_format(torch.from_numpy(y), name).numpy()
    assert_bit_equal(got, ml_cast(y, name), y)
    # the enumerated oracle agrees with ml_dtypes too (a check on the oracle)
    assert_bit_equal(enum_oracle(y, f), ml_cast(y, name), y)


@pytest.mark.parametrize("name", ENUM_ONLY)
def test_cast_bit_exact_against_enumerated_oracle(name):
    f = parse_format(name)
    y = probe_values(f)
    got = cast_to_format(torch.from_numpy(y), name).numpy()
    assert_bit_equal(got, enum_oracle(y, f), y)


@pytest.mark.parametrize("fmt, dtype", [(FloatFormat(5, 10, finite_only=False), torch.float16),
                                        (FloatFormat(8, 7, finite_only=False), torch.bfloat16)])
def test_cast_matches_torch_half_casts(fmt, dtype):
    # E5M10 and E8M7 IEEE-like are float16 and bfloat16; torch's float32 casts round half to even.
    rng = np.random.default_rng(1)
    fi = torch.finfo(dtype)
    mag = np.exp(rng.uniform(np.log(float(fi.smallest_normal)) - 12, np.log(float(fi.max)), 200_000))
    y = torch.from_numpy((mag * rng.choice([-1, 1], mag.size)).astype(np.float32))
    y = y[y.abs() <= fi.max]
    assert fmt.max == float(fi.max) and fmt.min_normal == float(fi.smallest_normal)
    assert_bit_equal(cast_to_format(y, fmt).numpy(), y.to(dtype).float().numpy(), y.numpy())


def test_ties_go_to_even_code_by_hand():
    f4 = "fp4_e2m1fn"  # 0 .5 1 1.5 2 3 4 6
    y = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, -0.25])
    assert cast_to_format(y, f4).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -4.0, -0.0]
    f3 = "fp3_e2m0fn"  # 0 1 2 4, exponent fields 0 1 2 3: ties to fields 0 and 2
    assert cast_to_format(torch.tensor([0.5, 1.5, 3.0, 2.9, 3.1]), f3).tolist() == [0.0, 2.0, 2.0, 2.0, 4.0]
    f = "fp4_e3m0fn"  # 0 .25 .5 1 2 4 8 16, fields 0..7: the even field wins each tie
    y = torch.tensor([0.125, 0.375, 0.75, 1.5, 3.0, 6.0, 12.0])
    assert cast_to_format(y, f).tolist() == [0.0, 0.5, 0.5, 2.0, 2.0, 8.0, 8.0]


@pytest.mark.parametrize("name", ALL_FP)
def test_saturation_and_specials(name):
    f = parse_format(name)
    big = np.array([f.max * 1.0001, f.max * 1.5, f.max * 4, 3e38, np.inf], np.float32)
    y = torch.from_numpy(np.concatenate([big, -big, [np.nan, -0.0, 0.0]]).astype(np.float32))
    got = cast_to_format(y, name).numpy()
    k = len(big)
    assert np.all(got[:k] == f.max) and np.all(got[k:2 * k] == -f.max)
    assert np.isnan(got[2 * k])
    assert_bit_equal(got[2 * k + 1:], np.array([-0.0, 0.0], np.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_cast_keeps_dtype_and_agrees_with_float32(dtype):
    y = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(dtype) * 4
    got = cast_to_format(y, "fp4_e2m1fn")
    assert got.dtype == dtype
    assert torch.equal(got.float(), cast_to_format(y.float(), "fp4_e2m1fn"))


def test_cast_bad_input():
    with pytest.raises(TypeError, match="floating-point"):
        cast_to_format(torch.ones(3, dtype=torch.int32), "fp4_e2m1fn")
    with pytest.raises(ValueError, match="not a floating-point format"):
        cast_to_format(torch.ones(3), "int4")
    assert cast_to_format(torch.zeros(0, 5), "fp8_e4m3fn").shape == (0, 5)
    # non-contiguous input
    y = torch.randn(8, 6).t()
    assert torch.equal(cast_to_format(y, "fp6_e3m2fn"), cast_to_format(y.contiguous(), "fp6_e3m2fn"))


# ----------------------------------------------------------------- scaled fake quantization

GRANULARITIES = [PerTensor(), PerChannel(0), PerChannel(1), PerToken(), PerGroup(16)]


def _data(shape, seed=0):
    """float32 normals with a few outliers and uneven row scales."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] *= np.float32(6.0)
    x *= np.exp(rng.uniform(-3, 3, (shape[0],) + (1,) * (len(shape) - 1))).astype(np.float32)
    return x


def _shape_for(gran):
    return (3, 5, 64) if isinstance(gran, PerToken) else (12, 64)


@pytest.mark.parametrize("gran", GRANULARITIES, ids=lambda g: f"{type(g).__name__}{getattr(g, 'axis', '')}")
@pytest.mark.parametrize("name", ALL_FP)
def test_fake_quantize_fp_bit_exact(name, gran):
    f = parse_format(name)
    x = torch.from_numpy(_data(_shape_for(gran), seed=len(name)))
    x[0, 1] = 0.0
    spec = QuantSpec(name, gran)
    scale, zero = choose_qparams(x, name, gran)
    assert torch.equal(zero, torch.zeros_like(zero)) and scale.dtype == torch.float32
    # scale = absmax / max in float32 (an all-zero slice would get 1)
    xs = x.reshape(*x.shape[:-1], -1, 16) if isinstance(gran, PerGroup) else x
    dims = {PerTensor: tuple(range(xs.dim())), PerToken: (xs.dim() - 1,), PerGroup: (xs.dim() - 1,)}.get(
        type(gran), tuple(d for d in range(xs.dim()) if d != getattr(gran, "axis", 0)))
    absmax = xs.abs().numpy().max(axis=dims, keepdims=True)
    np.testing.assert_array_equal(scale.numpy(), np.where(absmax == 0, np.float32(1), absmax / np.float32(f.max)))
    # the same scaled input, cast by the oracle, times the scale
    y = (xs / scale).numpy()
    want_cast = ml_cast(y, name) if name in ML_DTYPES else enum_oracle(y, f)
    want = torch.from_numpy(want_cast) * scale
    got = fake_quantize(x, spec)
    assert got.dtype == torch.float32
    # equal values; the STE's x + (r - x) turns a -0 result into +0, hence not bit-for-bit
    np.testing.assert_array_equal(got.numpy(), want.reshape(x.shape).numpy())
    # quantize returns the cast values (on the format's grid), dequantize multiplies back
    q = quantize(x, scale, zero, name)
    assert q.dtype == torch.float32 and q.shape == x.shape
    assert_bit_equal(q.numpy(), want_cast.reshape(x.shape))
    if f.exp_bits + f.man_bits <= 16:
        assert np.isin(q.numpy(), f.values()).all()
    q_max = np.abs(q.numpy().reshape(xs.shape)).max(axis=dims, keepdims=True)
    np.testing.assert_array_equal(q_max, np.where(absmax == 0, 0, f.max))  # each slice's absmax lands on max
    assert torch.equal(dequantize(q, scale, zero), got)


def test_fake_quantize_fp_keeps_dtype():
    x = torch.from_numpy(_data((8, 32))).to(torch.bfloat16)
    y = fake_quantize(x, QuantSpec("fp8_e4m3fn", PerChannel(0)))
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, fake_quantize(x.float(), QuantSpec("fp8_e4m3fn", PerChannel(0))).to(torch.bfloat16))


@pytest.mark.parametrize("gran", [PerTensor(), PerChannel(0), PerChannel(1)], ids=lambda g: type(g).__name__)
def test_fp_non_contiguous_input(gran):
    w = torch.from_numpy(_data((16, 48))).t()  # a transposed weight, as (in, out) views give
    spec = QuantSpec("fp6_e3m2fn", gran)
    assert torch.equal(fake_quantize(w, spec), fake_quantize(w.contiguous(), spec))


def test_fp_format_spec_objects_work():
    x = torch.from_numpy(_data((8, 32)))
    a = fake_quantize(x, QuantSpec(FloatFormat(3, 1), PerChannel(0)))
    b = fake_quantize(x, QuantSpec("fp5_e3m1fn", PerChannel(0)))
    assert torch.equal(a, b)
    assert QuantSpec("fp12_e5m6fn").bits == 12 and QuantSpec(FloatFormat(2, 1)).bits == 4


def test_asymmetric_fp_raises():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="symmetric"):
        QuantSpec("fp4_e2m1fn", PerTensor(), symmetric=False)
    with pytest.raises(ValueError, match="symmetric"):
        choose_qparams(x, "fp4_e2m1fn", PerTensor(), symmetric=False)
    s, z = choose_qparams(x, "fp4_e2m1fn")
    with pytest.raises(ValueError, match="symmetric"):
        quantize(x, s, z, "fp4_e2m1fn", symmetric=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_fp_nonfinite_input_raises(bad):
    x = torch.zeros(4, 8)
    x[2, 3] = bad
    with pytest.raises(ValueError, match="NaN or Inf"):
        fake_quantize(x, QuantSpec("fp8_e4m3fn", PerChannel(0)))


def test_fp_float64_overflowing_float32_raises():
    x = torch.tensor([1.0, 1e300], dtype=torch.float64)
    with pytest.raises(ValueError, match="NaN or Inf"):
        fake_quantize(x, QuantSpec("fp8_e5m2", PerTensor()))
    with pytest.raises(ValueError, match="NaN or Inf"):
        fake_quantize(x, QuantSpec("int8", PerTensor()))


def test_fp_empty_and_integer_dtype():
    with pytest.raises(ValueError, match="empty"):
        fake_quantize(torch.zeros(0, 4), QuantSpec("fp4_e2m1fn", PerTensor()))
    with pytest.raises(TypeError, match="floating-point"):
        fake_quantize(torch.ones(2, 4, dtype=torch.int64), QuantSpec("fp4_e2m1fn", PerTensor()))


@pytest.mark.parametrize("gran", [PerTensor(), PerChannel(0), PerGroup(8)], ids=lambda g: type(g).__name__)
def test_fp_all_zero_slices(gran):
    x = torch.zeros(4, 16)
    x[1] = torch.linspace(-1, 1, 16)
    scale, _ = choose_qparams(x, "fp6_e2m3fn", gran)
    y = fake_quantize(x, QuantSpec("fp6_e2m3fn", gran))
    assert torch.equal(y[0], torch.zeros(16)) and torch.isfinite(scale).all() and (scale > 0).all()
    if not isinstance(gran, PerTensor):
        assert torch.equal(scale[0], torch.ones_like(scale[0]))


# ----------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", ["fp4_e2m1fn", "fp3_e2m0fn", "fp8_e5m2", "fp12_e5m6fn"])
@pytest.mark.parametrize("gran", [PerTensor(), PerChannel(0)], ids=lambda g: type(g).__name__)
def test_fp_fake_quantize_gradient_is_identity(name, gran):
    x = torch.from_numpy(_data((6, 32), seed=3)).requires_grad_(True)
    y = fake_quantize(x, QuantSpec(name, gran))
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, torch.ones_like(x))


def test_round_ste_fp_forward_and_gradient():
    x = torch.tensor([0.3, 1.25, 2.5, 5.0, -5.0, 7.0, 13.0], requires_grad=True)
    y = round_ste(x, "fp4_e2m1fn")
    # in range as the cast; past max the grid goes on (binade [4, 8) has step 2, [8, 16) step 4)
    assert y.tolist() == [0.5, 1.0, 2.0, 4.0, -4.0, 8.0, 12.0]
    assert torch.equal(y[:5].detach(), cast_to_format(x[:5].detach(), "fp4_e2m1fn"))
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, torch.ones_like(x))
    # clamping after it, as fake_quantize does, gives clipped values zero gradient
    x.grad = None
    torch.clamp(round_ste(x, "fp4_e2m1fn"), -6.0, 6.0).sum().backward()
    assert x.grad.tolist() == [1, 1, 1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="floating-point format or None"):
        round_ste(x, "int4")


# ----------------------------------------------------------------- properties (hypothesis)

_ELEM = st.one_of(
    st.just(0.0),
    st.floats(2**-20, 1e4, width=32),
    st.floats(-1e4, -(2**-20), width=32),
)
_ARR = hnp.arrays(np.float32, st.integers(1, 64), elements=_ELEM)
_FMT = st.sampled_from(ALL_FP)
PROPS = settings(max_examples=60, deadline=None)


@PROPS
@given(x=_ARR, name=_FMT)
def test_fp_idempotent(x, name):
    spec = QuantSpec(name, PerTensor())
    y = fake_quantize(torch.from_numpy(x), spec)
    assert torch.equal(fake_quantize(y, spec), y)


@PROPS
@given(y=hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(-1e5, 1e5, width=32)), name=_FMT)
def test_cast_error_within_half_gap(y, name):
    f = parse_format(name)
    y = np.clip(y, -f.max, f.max)
    mags = code_magnitudes(f.exp_bits, f.man_bits, _kind(f))
    a = np.abs(y.astype(np.float64))
    hi = np.clip(np.searchsorted(mags, a), 1, len(mags) - 1)
    half_gap = (mags[hi] - mags[hi - 1]) / 2
    got = cast_to_format(torch.from_numpy(y), name).numpy().astype(np.float64)
    assert np.all(np.abs(got - y) <= half_gap)
    assert np.all(np.isin(np.abs(got), mags))


@PROPS
@given(x=_ARR, name=_FMT)
def test_fp_error_within_half_step_scaled(x, name):
    f = parse_format(name)
    t = torch.from_numpy(x)
    scale = float(choose_qparams(t, name, PerTensor())[0])
    got = fake_quantize(t, QuantSpec(name, PerTensor())).numpy().astype(np.float64)
    a = np.abs(x.astype(np.float64)) / scale
    # the gap of the binade |x|/scale sits in (subnormals share the lowest)
    e = np.floor(np.log2(np.maximum(a, f.min_normal)))
    half_step = 2.0 ** (e - f.man_bits) / 2 * scale
    slack = 2.0**-22 * (np.abs(x) + half_step)  # the float32 division and multiplication
    assert np.all(np.abs(x - got) <= half_step + slack)


@PROPS
@given(x=_ARR, name=_FMT)
def test_fp_monotone(x, name):
    y = fake_quantize(torch.from_numpy(np.sort(x)), QuantSpec(name, PerTensor())).numpy()
    assert np.all(np.diff(y) >= 0)


@PROPS
@given(x=_ARR, name=_FMT)
def test_fp_sign_symmetric(x, name):
    spec = QuantSpec(name, PerTensor())
    t = torch.from_numpy(x)
    assert torch.equal(fake_quantize(-t, spec), -fake_quantize(t, spec))


@PROPS
@given(y=hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(-1e6, 1e6, width=32)), name=_FMT)
def test_cast_properties(y, name):
    """Idempotent, monotone and odd, on the unscaled cast (saturation included)."""
    t = torch.from_numpy(np.sort(y))
    c = cast_to_format(t, name)
    assert torch.equal(cast_to_format(c, name), c)
    assert bool((c[1:] >= c[:-1]).all())
    assert torch.equal(cast_to_format(-t, name), -c)


@PROPS
@given(x=_ARR, bits=st.integers(2, 16))
def test_int_matches_clip_rint(x, bits):
    """The integer path against clip(rint(x / scale)) with its own scale, per tensor."""
    t = torch.from_numpy(x)
    scale = choose_qparams(t, f"int{bits}", PerTensor())[0].numpy()
    qmax = 2 ** (bits - 1) - 1
    want = (np.clip(np.rint(x / scale), -qmax - 1, qmax) * scale).astype(np.float32)
    np.testing.assert_array_equal(fake_quantize(t, QuantSpec(f"int{bits}", PerTensor())).numpy(), want)

"""Tests for bitlaws.quant: integer fake quantization against numpy oracles, properties, errors."""

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bitlaws.formats import parse_format
from bitlaws.quant import (
    PerChannel,
    PerGroup,
    PerTensor,
    PerToken,
    QuantSpec,
    choose_qparams,
    dequantize,
    fake_quantize,
    quantize,
    round_ste,
)

torch.set_num_threads(1)

GRANULARITIES = [PerTensor(), PerChannel(0), PerToken(), PerGroup(16)]
BITS = range(2, 9)


def _data(shape, seed=0):
    """float32 normals with a few outliers, so scales differ between slices."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:: 7] *= np.float32(6.0)
    return x


def _slices(x: np.ndarray, gran) -> tuple[np.ndarray, tuple[int, ...]]:
    """`x` reshaped so that reducing over the returned axes gives one scale per slice."""
    if isinstance(gran, PerTensor):
        return x, tuple(range(x.ndim))
    if isinstance(gran, PerChannel):
        return x, tuple(d for d in range(x.ndim) if d != gran.axis % x.ndim)
    if isinstance(gran, PerToken):
        return x, (x.ndim - 1,)
    g = gran.group_size
    return x.reshape(*x.shape[:-1], x.shape[-1] // g, g), (x.ndim,)


def sym_oracle(x: np.ndarray, bits: int, gran) -> tuple[np.ndarray, np.ndarray]:
    """clip(rint(x/scale), -2^(b-1), 2^(b-1)-1)·scale, scale = absmax/(2^(b-1)-1) in float64 → float32."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    xs, axes = _slices(x, gran)
    absmax = np.abs(xs.astype(np.float64)).max(axis=axes, keepdims=True)
    scale = (absmax / hi).astype(np.float32)
    q = np.clip(np.rint(xs / scale), lo, hi)
    return (q * scale).astype(np.float32).reshape(x.shape), scale


def gptq_oracle(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPTQ's reference quantizer (Frantar et al., quant.py), per row of a 2-D float32 array."""
    maxq = np.float32(2**bits - 1)
    xmin = np.minimum(x.min(axis=1, keepdims=True), np.float32(0))
    xmax = np.maximum(x.max(axis=1, keepdims=True), np.float32(0))
    scale = (xmax - xmin) / maxq
    zero = np.rint(-xmin / scale)
    q = np.clip(np.rint(x / scale) + zero, np.float32(0), maxq)
    return (scale * (q - zero)).astype(np.float32), scale, zero


def _shape_for(gran):
    return (2, 5, 64) if isinstance(gran, PerToken) else (12, 64)


# ----------------------------------------------------------------- oracles


@pytest.mark.parametrize("gran", GRANULARITIES, ids=lambda g: type(g).__name__)
@pytest.mark.parametrize("bits", BITS)
def test_symmetric_matches_oracle_bit_exact(bits, gran):
    x = _data(_shape_for(gran), seed=bits)
    want, want_scale = sym_oracle(x, bits, gran)
    got = fake_quantize(torch.from_numpy(x), QuantSpec(f"int{bits}", gran, symmetric=True))
    assert got.dtype == torch.float32
    assert torch.equal(got, torch.from_numpy(want))
    scale, zero = choose_qparams(torch.from_numpy(x), f"int{bits}", gran, symmetric=True)
    assert torch.equal(scale, torch.from_numpy(want_scale))
    assert torch.equal(zero, torch.zeros_like(zero))


@pytest.mark.parametrize("bits", BITS)
def test_asymmetric_matches_gptq_reference(bits):
    x = _data((16, 512), seed=100 + bits)
    x[0] = np.abs(x[0])  # a row with min > 0: the range must be widened to include 0
    x[1] = -np.abs(x[1])  # and one with max < 0
    want, scale, zero = gptq_oracle(x, bits)
    got = fake_quantize(torch.from_numpy(x), QuantSpec(f"int{bits}", PerChannel(0), symmetric=False))
    assert torch.equal(got, torch.from_numpy(want))
    s, z = choose_qparams(torch.from_numpy(x), f"int{bits}", PerChannel(0), symmetric=False)
    assert torch.equal(s, torch.from_numpy(scale)) and torch.equal(z, torch.from_numpy(zero))
    assert z[0].item() == 0 and z[1].item() == 2**bits - 1  # widened ranges put 0 at an end

    g = got.numpy()
    for r in range(x.shape[0]):
        assert len(np.unique(g[r])) <= 2**bits
        half = scale[r, 0] / 2 * (1 + 2**-20)
        i_min, i_max = x[r].argmin(), x[r].argmax()
        assert abs(g[r, i_min] - x[r, i_min]) <= half
        assert abs(g[r, i_max] - x[r, i_max]) <= half
        assert np.abs(g[r] - x[r]).max() <= half  # nothing is clipped by more than half a step


def test_asymmetric_zero_point_tie_by_hand():
    # x = [-3.5, 3.5] at 3 bits: scale = 7/7 = 1, zero = round(3.5) = 4 (half to even);
    # -3.5 -> round(-3.5) + 4 = 0 -> -4; 3.5 -> round(3.5) + 4 = 8, clamped to 7 -> 3.
    x = torch.tensor([-3.5, 3.5])
    scale, zero = choose_qparams(x, "int3", PerTensor(), symmetric=False)
    assert (float(scale), float(zero)) == (1.0, 4.0)
    assert quantize(x, scale, zero, "int3", symmetric=False).tolist() == [0, 7]
    assert fake_quantize(x, QuantSpec("int3", PerTensor(), symmetric=False)).tolist() == [-4.0, 3.0]
    # and symmetric int3 on the same x: scale = 3.5/3, codes -3 and 3, exact
    assert fake_quantize(x, QuantSpec("int3", PerTensor(), symmetric=True)).tolist() == [-3.5, 3.5]


@pytest.mark.parametrize("gran", GRANULARITIES, ids=lambda g: type(g).__name__)
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_quantize_dequantize_equals_fake_quantize(bits, symmetric, gran):
    x = torch.from_numpy(_data(_shape_for(gran), seed=bits))
    fmt = f"int{bits}"
    scale, zero = choose_qparams(x, fmt, gran, symmetric)
    q = quantize(x, scale, zero, fmt, symmetric)
    assert q.dtype == torch.int32 and q.shape == x.shape
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if symmetric else (0, 2**bits - 1)
    assert int(q.min()) >= lo and int(q.max()) <= hi
    if symmetric:  # absmax maps to ±(2^(b-1) - 1); the code -2^(b-1) is never used
        assert int(q.abs().max()) == hi and int(q.min()) >= lo + 1
    else:  # min-max: the range's ends map to the ends of the code range
        assert int(q.min()) == 0 and int(q.max()) == hi
    assert torch.equal(dequantize(q, scale, zero), fake_quantize(x, QuantSpec(fmt, gran, symmetric)))


def test_formats_qrange():
    assert parse_format("int4").qrange(True) == (-8, 7)
    assert parse_format("int4").qrange(False) == (0, 15)
    assert parse_format("int16").qrange(True) == (-32768, 32767)


# ----------------------------------------------------------------- properties

_ELEM = st.one_of(
    st.just(0.0),
    st.floats(2**-20, 1e4, width=32),
    st.floats(-1e4, -(2**-20), width=32),
)
_ARR = hnp.arrays(np.float32, st.integers(1, 64), elements=_ELEM)
_BITS = st.integers(2, 16)
PROPS = settings(max_examples=50, deadline=None)


@PROPS
@given(x=_ARR, bits=_BITS, symmetric=st.booleans())
def test_idempotent(x, bits, symmetric):
    spec = QuantSpec(f"int{bits}", PerTensor(), symmetric)
    t = torch.from_numpy(x)
    y = fake_quantize(t, spec)
    z = fake_quantize(y, spec)
    if symmetric:
        assert torch.equal(z, y)
        return
    # Asymmetric (GPTQ's min-max): the bottom of the range always lands on code 0
    # (round(-z) + round(z) = 0), but when the zero point -x_min/scale is a tie (k + 1/2) the top
    # lands one code short of 2^b - 1, so x_hat spans one step less and a second pass re-derives a
    # different grid. Otherwise x_hat spans exactly (2^b - 1)·scale: the codes are the same, and the
    # values agree to float32 rounding (the re-derived scale can differ in its last bit).
    qmax = 2**bits - 1
    s1, z1 = choose_qparams(t, spec.fmt, PerTensor(), False)
    q1 = quantize(t, s1, z1, spec.fmt, False)
    span = max(int(q1.max()), int(z1)) - min(int(q1.min()), int(z1))
    if span == qmax or not bool(t.any()):  # (an all-zero x keeps scale 1)
        s2, z2 = choose_qparams(y, spec.fmt, PerTensor(), False)
        assert torch.equal(q1, quantize(y, s2, z2, spec.fmt, False))
        torch.testing.assert_close(z, y, rtol=2**-21, atol=float(s1) * 2**-20)
    else:
        assert span == qmax - 1 and int(q1.min()) == 0 < int(z1)
        assert abs(float(-t.min() / s1) % 1 - 0.5) < 1e-3  # the zero point was a tie


@PROPS
@given(x=_ARR, bits=_BITS, symmetric=st.booleans())
def test_error_within_half_step(x, bits, symmetric):
    t = torch.from_numpy(x)
    scale, _ = choose_qparams(t, f"int{bits}", PerTensor(), symmetric)
    y = fake_quantize(t, QuantSpec(f"int{bits}", PerTensor(), symmetric)).numpy().astype(np.float64)
    s = float(scale)
    bound = s / 2 * (1 + 2**-20) + np.spacing(np.abs(x)).astype(np.float64)
    assert np.all(np.abs(x.astype(np.float64) - y) <= bound)


@PROPS
@given(x=_ARR, bits=_BITS, symmetric=st.booleans())
def test_monotone(x, bits, symmetric):
    xs = np.sort(x)
    y = fake_quantize(torch.from_numpy(xs), QuantSpec(f"int{bits}", PerTensor(), symmetric)).numpy()
    assert np.all(np.diff(y) >= 0)


@PROPS
@given(x=_ARR, bits=_BITS)
def test_sign_symmetric(x, bits):
    spec = QuantSpec(f"int{bits}", PerTensor(), True)
    t = torch.from_numpy(x)
    assert torch.equal(fake_quantize(-t, spec), -fake_quantize(t, spec))


# ----------------------------------------------------------------- gradients


def test_round_ste_forward_half_to_even_and_unit_gradient():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 2.51, -3.7], requires_grad=True)
    y = round_ste(x)
    assert y.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 3.0, -4.0]
    assert torch.equal(y.detach(), torch.round(x.detach()))
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, torch.ones_like(x))


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_fake_quantize_gradient_is_identity_per_tensor_absmax(bits):
    x = torch.from_numpy(_data((6, 32), seed=bits)).requires_grad_(True)
    y = fake_quantize(x, QuantSpec(f"int{bits}", PerTensor(), symmetric=True))
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def _unfused_fake_quantize(x, spec):
    """The integer fake quantizer as a composition of differentiable torch ops (the oracle for the
    fused autograd function): ``(clamp(round_ste(x/scale) + zp, q_min, q_max) - zp) * scale``."""
    from bitlaws.quant import _view_like

    scale, zp = choose_qparams(x, spec.fmt, spec.granularity, spec.symmetric)
    q_min, q_max = parse_format(spec.fmt).qrange(spec.symmetric)
    xv = _view_like(x, x, scale)
    q = torch.clamp(round_ste(xv.float() / scale) + zp, q_min, q_max)
    return ((q - zp) * scale).reshape(x.shape).to(x.dtype)


def _bit_equal(a, b):
    """Equal as bit patterns: values, NaN-free, and the sign bit of every zero."""
    return torch.equal(a, b) and torch.equal(torch.signbit(a), torch.signbit(b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("gran", GRANULARITIES, ids=repr)
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_fused_fake_quantize_is_bit_identical_to_the_op_composition(bits, gran, symmetric, dtype):
    spec = QuantSpec(f"int{bits}", gran, symmetric=symmetric)
    base = torch.from_numpy(_data((4, 6, 32), seed=bits)).to(dtype)
    base[0, 0, :5] = torch.tensor([0.0, -0.0, 1e-9, -1e-9, -0.0]).to(dtype)  # zeros of both signs
    upstream = torch.from_numpy(_data((4, 6, 32), seed=99)).to(dtype)
    x1, x2 = base.clone().requires_grad_(True), base.clone().requires_grad_(True)
    y1, y2 = fake_quantize(x1, spec), _unfused_fake_quantize(x2, spec)
    assert y1.dtype == y2.dtype == dtype
    assert _bit_equal(y1.detach(), y2.detach())
    y1.backward(upstream)
    y2.backward(upstream)
    assert _bit_equal(x1.grad, x2.grad)


def test_fused_fake_quantize_clipped_values_get_zero_gradient_like_clamp():
    # A scale too small for the data clips most values: the fused backward must mask them exactly
    # as torch.clamp's gradient does, and pass the rest as (g·s)/s.
    from bitlaws.quant import _FakeQuantInt

    x = torch.from_numpy(_data((8, 16), seed=3))
    scale = torch.full((8, 1), 0.05)
    zp = torch.tensor([[0.0], [1.0], [3.0], [7.0], [0.0], [2.0], [5.0], [15.0]])
    g = torch.from_numpy(_data((8, 16), seed=4))
    a = x.clone().requires_grad_(True)
    ya = _FakeQuantInt.apply(a, scale, zp, 0, 15)
    ya.backward(g)
    b = x.clone().requires_grad_(True)
    yb = (torch.clamp(round_ste(b / scale) + zp, 0, 15) - zp) * scale
    yb.backward(g)
    assert _bit_equal(ya.detach(), yb.detach()) and _bit_equal(a.grad, b.grad)
    clipped = (torch.round(x / scale) + zp < 0) | (torch.round(x / scale) + zp > 15)
    assert 0 < int(clipped.sum()) < x.numel()
    assert torch.all(a.grad[clipped] == 0) and torch.all(a.grad[~clipped] != 0)


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_raises(bad):
    x = torch.zeros(4, 8)
    x[1, 2] = bad
    with pytest.raises(ValueError, match="NaN or Inf"):
        fake_quantize(x, QuantSpec("int4", PerChannel(0)))
    with pytest.raises(ValueError, match="NaN or Inf"):
        choose_qparams(x, "int4")


def test_empty_raises():
    with pytest.raises(ValueError, match="empty"):
        fake_quantize(torch.zeros(0, 8), QuantSpec("int4", PerTensor()))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_integer_dtype_raises_type_error(dtype):
    with pytest.raises(TypeError, match="floating-point"):
        fake_quantize(torch.ones(3, 4, dtype=dtype), QuantSpec("int4", PerTensor()))


@pytest.mark.parametrize("fmt", ["int1", "int17", "int99"])
def test_bits_out_of_range(fmt):
    with pytest.raises(ValueError, match=r"\[2, 16\]"):
        QuantSpec(fmt)
    with pytest.raises(ValueError, match=r"\[2, 16\]"):
        choose_qparams(torch.ones(3), fmt)


@pytest.mark.parametrize("fmt", ["fp3", "int", "int4x", ""])
def test_unknown_format_names_allowed(fmt):
    with pytest.raises(ValueError, match=r"allowed: 'int2' \.\.\. 'int16'"):
        QuantSpec(fmt)


def test_group_size_must_divide():
    with pytest.raises(ValueError, match="group_size 16"):
        fake_quantize(torch.ones(4, 20), QuantSpec("int4", PerGroup(16)))
    with pytest.raises(ValueError, match="group_size"):
        PerGroup(0)
    with pytest.raises(ValueError, match="granularity"):
        QuantSpec("int4", granularity="per_channel")


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("gran", GRANULARITIES, ids=lambda g: type(g).__name__)
def test_all_zero_gives_zeros_and_unit_scale(gran, symmetric):
    x = torch.zeros(_shape_for(gran))
    scale, zero = choose_qparams(x, "int4", gran, symmetric)
    assert torch.equal(scale, torch.ones_like(scale))
    assert torch.equal(zero, torch.zeros_like(zero))
    y = fake_quantize(x, QuantSpec("int4", gran, symmetric))
    assert torch.equal(y, x)


@pytest.mark.parametrize("symmetric", [True, False])
def test_underflowing_scale_stays_finite(symmetric):
    # absmax / 127 underflows float32 to 0: the scale falls back to 1, values round to 0
    x = torch.tensor([1e-45, 0.0, -1e-45])
    scale, _ = choose_qparams(x, "int8", PerTensor(), symmetric)
    assert float(scale) == 1.0
    assert torch.equal(fake_quantize(x, QuantSpec("int8", PerTensor(), symmetric)), torch.zeros(3))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_quantize_refuses_nonfinite_input_for_integer_formats(bad):
    # main turned NaN into the int32 code -2^31 (dequantized -6.4e8 at scale 0.3) and clipped ±Inf
    # silently to the end of the range
    x = torch.tensor([[0.5, bad, -1.0]])
    scale, zero = torch.tensor([[0.3]]), torch.tensor([[0.0]])
    for symmetric in (True, False):
        with pytest.raises(ValueError, match="quantize: NaN or Inf in the input .* integer format int4"):
            quantize(x, scale, zero, "int4", symmetric)
    with pytest.raises(ValueError, match="NaN or Inf"):  # a scale of 0 makes x / scale infinite
        quantize(torch.tensor([0.5]), torch.tensor([0.0]), torch.tensor([0.0]), "int8")
    # the finite entries are unaffected by the check; floating-point formats carry NaN, saturate Inf
    assert quantize(torch.tensor([[0.5, 0.61, -1.0]]), scale, zero, "int4").tolist() == [[2, 2, -3]]
    q = quantize(x, scale, zero, "fp4_e2m1fn")
    assert math.isnan(float(q[0, 1])) if math.isnan(bad) else float(q[0, 1]) == math.copysign(6.0, bad)


@pytest.mark.parametrize("axis", [2, 5, -3])
def test_per_channel_axis_outside_the_tensor_raises(axis):
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=rf"PerChannel\(axis={axis}\) is out of range for a 2-D tensor .* "
                                         r"allowed axes are -2 to 1"):
        choose_qparams(x, "int4", PerChannel(axis))
    with pytest.raises(ValueError, match="allowed axes are -2 to 1"):
        fake_quantize(x, QuantSpec("int4", PerChannel(axis)))


def test_per_channel_negative_axis_counts_from_the_end():
    x = torch.randn(3, 4, 5)
    for neg, pos in ((-1, 2), (-2, 1), (-3, 0)):
        a, b = choose_qparams(x, "int4", PerChannel(neg)), choose_qparams(x, "int4", PerChannel(pos))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="PerChannel.axis must be an int"):
        PerChannel(1.0)
    with pytest.raises(ValueError, match="PerChannel.axis must be an int"):
        PerChannel(True)


@pytest.mark.parametrize("gran", [PerChannel(0), PerToken(), PerGroup(1)], ids=lambda g: type(g).__name__)
def test_zero_dim_tensor_needs_per_tensor(gran):
    # main: ZeroDivisionError (PerChannel), IndexError (PerGroup), a silent per-tensor scale (PerToken)
    x = torch.tensor(1.5)
    with pytest.raises(ValueError, match=r"needs a tensor with at least one dimension, got a 0-d tensor; "
                                         r"use PerTensor\(\)"):
        choose_qparams(x, "int4", gran)
    scale, zero = choose_qparams(x, "int4", PerTensor())
    assert float(scale) == pytest.approx(1.5 / 7) and float(zero) == 0.0
    assert float(fake_quantize(x, QuantSpec("int4", PerTensor()))) == pytest.approx(1.5)

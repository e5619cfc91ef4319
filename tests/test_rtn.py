"""Tests for bitlaws.ptq.rtn on a tiny Llama: what is touched, the grid, errors, bad input."""

import copy
import math

import numpy as np
import pytest
import torch

from bitlaws.model import SMOKE_LADDER, build_model
from bitlaws.ptq import block_linears
from bitlaws.ptq.rtn import RTNConfig, rtn_quantize_

torch.set_num_threads(1)

CFG = SMOKE_LADDER["n3k"]


def expected_linears(cfg) -> set[str]:
    """The block linears of a Llama, named from the config alone."""
    names = set()
    for i in range(cfg.n_layers):
        names |= {f"model.layers.{i}.self_attn.{p}_proj" for p in ("q", "k", "v", "o")}
        names |= {f"model.layers.{i}.mlp.{p}_proj" for p in ("gate", "up", "down")}
    return names


def gptq_rows(w: np.ndarray, bits: int) -> np.ndarray:
    """GPTQ's reference min-max quantizer (range widened to include 0), one scale per row, float32."""
    maxq = np.float32(2**bits - 1)
    xmin = np.minimum(w.min(axis=1, keepdims=True), np.float32(0))
    xmax = np.maximum(w.max(axis=1, keepdims=True), np.float32(0))
    scale = (xmax - xmin) / maxq
    zero = np.rint(-xmin / scale)
    q = np.clip(np.rint(w / scale) + zero, np.float32(0), maxq)
    return (scale * (q - zero)).astype(np.float32)


@pytest.fixture(scope="module")
def base():
    return build_model(CFG, seed=0)


@pytest.mark.parametrize("size", ["n3k", "n14k"])
def test_touches_exactly_the_block_linears(size):
    cfg = SMOKE_LADDER[size]
    model = build_model(cfg, seed=1)
    want = expected_linears(cfg)
    assert len(want) == 7 * cfg.n_layers
    assert set(block_linears(model)) == want

    before = {k: v.clone() for k, v in model.state_dict().items()}
    errors = rtn_quantize_(model, RTNConfig(bits=3))
    assert set(errors) == want
    after = model.state_dict()
    assert set(after) == set(before)
    quantized = {f"{n}.weight" for n in want}
    untouched = set(before) - quantized
    # embeddings, lm_head and every norm gain (2 per layer + the final one)
    assert untouched == {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"} | {
        f"model.layers.{i}.{n}.weight" for i in range(cfg.n_layers)
        for n in ("input_layernorm", "post_attention_layernorm")
    }
    for k in untouched:
        assert torch.equal(after[k], before[k]), k
    for k in quantized:
        assert not torch.equal(after[k], before[k]), k  # 3 bits moves every layer


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_rows_on_gptq_grid(base, bits):
    model = copy.deepcopy(base)
    orig = {n: m.weight.detach().clone() for n, m in block_linears(model).items()}
    errors = rtn_quantize_(model, RTNConfig(bits=bits))
    for name, lin in block_linears(model).items():
        w_hat = lin.weight.detach()
        assert w_hat.dtype == torch.float32
        assert torch.equal(w_hat, torch.from_numpy(gptq_rows(orig[name].numpy(), bits))), name
        for row in w_hat:
            assert len(torch.unique(row)) <= 2**bits
        w = orig[name].double()
        assert errors[name] == pytest.approx(((w - w_hat.double()).norm() / w.norm()).item(), rel=1e-5)


def test_error_3_bits_above_8_bits(base):
    e3 = rtn_quantize_(copy.deepcopy(base), RTNConfig(bits=3))
    e8 = rtn_quantize_(copy.deepcopy(base), RTNConfig(bits=8))
    assert set(e3) == set(e8) == expected_linears(CFG)
    for name in e3:
        assert e3[name] > e8[name] > 0, name
        # each bit halves the step: 5 bits should cut the error by far more than 4x
        assert e3[name] > 4 * e8[name], name


def test_16_bits_within_half_a_step(base):
    model = copy.deepcopy(base)
    orig = {n: m.weight.detach().clone() for n, m in block_linears(model).items()}
    rtn_quantize_(model, RTNConfig(bits=16))
    for name, lin in block_linears(model).items():
        w, w_hat = orig[name], lin.weight.detach()
        span = w.clamp(min=0).amax(dim=1) - w.clamp(max=0).amin(dim=1)  # range widened to include 0
        step = span / 65535
        # Half a step, plus float32's rounding of w / scale: that quotient reaches 2^16, where a
        # float32 ulp is 2^-8 (of a step), so rounding it (and the clamp at the top) adds < 2^-7 step.
        slack = 0.5 + 2**-7
        torch.testing.assert_close(w_hat, w, atol=float(step.max()) * slack, rtol=0)
        # and per row, against that row's own step
        err = (w_hat - w).abs().amax(dim=1)
        assert torch.all(err <= step * slack), name
        assert float(err.max()) > float(step.min()) / 4  # the weights did move onto a grid


def test_group_quantization(base):
    model = copy.deepcopy(base)
    rtn_quantize_(model, RTNConfig(bits=2, symmetric=True, group_size=8))
    for name, lin in block_linears(model).items():
        w = lin.weight.detach()
        groups = w.reshape(w.shape[0], -1, 8)
        for g in groups.reshape(-1, 8):
            # symmetric 2-bit absmax: codes -1, 0, 1 (the code -2 is never reached)
            assert len(torch.unique(g)) <= 3, name


def test_nan_weight_raises_naming_module_and_leaves_model_untouched(base):
    model = copy.deepcopy(base)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight[3, 5] = math.nan
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.down_proj"):
        rtn_quantize_(model, RTNConfig(bits=4))
    for k, v in model.state_dict().items():
        assert torch.equal(torch.nan_to_num(v), torch.nan_to_num(before[k])), k


def test_group_size_not_dividing_raises_and_leaves_model_untouched(base):
    model = copy.deepcopy(base)
    with pytest.raises(ValueError, match="group_size 32"):
        rtn_quantize_(model, RTNConfig(bits=4, group_size=32))  # 48 divides, 16 does not
    for k, v in model.state_dict().items():
        assert torch.equal(v, base.state_dict()[k]), k


@pytest.mark.parametrize("kwargs, field", [
    ({"bits": 1}, "bits"), ({"bits": 17}, "bits"), ({"bits": 4.0}, "bits"),
    ({"group_size": -1}, "group_size"), ({"group_size": True}, "group_size"),
])
def test_config_validation(kwargs, field):
    with pytest.raises(ValueError, match=f"RTNConfig.{field}"):
        RTNConfig(**kwargs)


def test_quant_scheme_strings():
    assert RTNConfig().quant_scheme == "asym_per_channel"
    assert RTNConfig(bits=3, symmetric=True).quant_scheme == "sym_per_channel"
    assert RTNConfig(bits=4, group_size=128).quant_scheme == "asym_group128"
    assert RTNConfig(bits=4, symmetric=True, group_size=16).quant_scheme == "sym_group16"

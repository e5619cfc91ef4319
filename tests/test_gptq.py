"""Tests for bitlaws.ptq.gptq against slow oracles written here from the paper's equations.

Oracles: a column-by-column GPTQ (OBS update with an explicit inverse Hessian, downdated by
Gaussian elimination after each column; no Cholesky, no lazy batches); the Hessian as an explicit
``2/n XᵀX``; the grid of bitlaws.quant (RTN); a hand-written sequential driver that runs the
whole model for every calibration step; RTN on a trained checkpoint.
"""

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from bitlaws.model import SMOKE_LADDER, build_model
from bitlaws.ptq import block_linears
from bitlaws.ptq.calibration import HessianAccumulator, calibration_batch, capture_hessians, gptq_quantize_
from bitlaws.ptq.gptq import GPTQConfig, gptq_weight, output_error, rtn_weight
from bitlaws.ptq.rtn import RTNConfig, rtn_quantize_
from bitlaws.quant import PerChannel, PerGroup, choose_qparams, dequantize, quantize

torch.set_num_threads(1)

CHECKPOINT = Path(__file__).resolve().parents[1] / "data/checkpoints/cpu/n27k_D16777216_s0.safetensors"


# ----------------------------------------------------------------------------------------------
# synthetic layers


def correlated_inputs(n_in: int, n_tok: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    """(n_tok, n_in) correlated Gaussian inputs with a few large-scale (outlier) features."""
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(n_in, n_in, generator=g, dtype=dtype) / math.sqrt(n_in)
    mix += torch.eye(n_in, dtype=dtype)
    x = torch.randn(n_tok, n_in, generator=g, dtype=dtype) @ mix
    x[:, :: max(1, n_in // 5)] *= 4.0
    return x


def layer(n_out=12, n_in=40, n_tok=400, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed + 100)
    W = torch.randn(n_out, n_in, generator=g, dtype=dtype) * 0.1
    X = correlated_inputs(n_in, n_tok, seed, dtype)
    H = 2 / n_tok * X.T @ X
    return W, H, X


def fake(x, scale, zero, bits, symmetric):
    return dequantize(quantize(x, scale, zero, f"int{bits}", symmetric), scale, zero)


def fit(x, bits, symmetric):
    return choose_qparams(x, f"int{bits}", PerChannel(0), symmetric)


def obs_gptq(W, H, bits, symmetric=False, group_size=0, act_order=False, static_groups=False, damp=0.01,
             n_keep_last=0):
    """GPTQ one column at a time, straight from the equations (Frantar et al. 2022, eqs. 2-3).

    For the current column j and the inverse Hessian Hinv of the not-yet-quantized columns:
    ``δ = −(w_j − q_j) / Hinv_jj · Hinv_{j,:}`` on the remaining columns, then j is removed from
    the inverse by Gaussian elimination ``Hinv ← Hinv − Hinv_{:,j} Hinv_{j,:} / Hinv_jj``.
    """
    W, H = W.double().clone(), H.double().clone()
    n_in = W.shape[1]
    n_base = n_in - n_keep_last
    dead = H.diagonal() == 0
    H.diagonal()[dead] = 1
    W[:, dead] = 0
    if act_order:
        order = torch.argsort(H.diagonal()[:n_base], descending=True, stable=True).tolist()
    else:
        order = list(range(n_base))
    g = group_size
    row_scale = fit(W[:, :n_base], bits, symmetric) if not g else None
    groups = [fit(W[:, s:s + g], bits, symmetric) for s in range(0, n_base, g)] if g and static_groups else None
    H = H + damp * H.diagonal().mean() * torch.eye(n_in, dtype=H.dtype)
    Hinv = torch.linalg.inv(H)
    remaining = torch.ones(n_in, dtype=torch.bool)
    scale, zero = row_scale if row_scale else (None, None)
    for t, j in enumerate(order):
        if g and static_groups:
            scale, zero = groups[j // g]
        elif g and t % g == 0:
            scale, zero = fit(W[:, order[t:t + g]], bits, symmetric)
        q = fake(W[:, j:j + 1], scale, zero, bits, symmetric)[:, 0].double()
        err = (W[:, j] - q) / Hinv[j, j]
        remaining[j] = False
        W[:, remaining] -= err[:, None] * Hinv[j, remaining][None, :]
        W[:, j] = q
        Hinv = Hinv - Hinv[:, j:j + 1] @ Hinv[j:j + 1, :] / Hinv[j, j]
    return W


CASES = {
    "plain": dict(),
    "symmetric": dict(symmetric=True),
    "act_order": dict(act_order=True),
    "static_groups": dict(group_size=8, static_groups=True),
    "act_order_static": dict(group_size=8, static_groups=True, act_order=True),
    "dynamic_groups": dict(group_size=8),
    "act_order_dynamic": dict(group_size=8, act_order=True),
    "dynamic_groups_unaligned": dict(group_size=4, block_size=6),  # groups start mid-block and span two
    "keep_last": dict(n_keep_last=8, act_order=True),
    "keep_last_groups": dict(n_keep_last=8, group_size=8, act_order=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_blocked_equals_column_by_column_oracle(case):
    kw = dict(CASES[case])
    n_keep = kw.pop("n_keep_last", 0)
    block_size = kw.pop("block_size", 4)
    W, H, _ = layer(seed=len(case))
    H[3, :] = H[:, 3] = 0  # one dead input
    W_orig = W.clone()
    cfg = GPTQConfig(bits=3, block_size=block_size, **kw)
    W_hat, info = gptq_weight(W, H, cfg, n_keep_last=n_keep)
    assert torch.equal(W, W_orig)  # the input is not modified
    want = obs_gptq(W, H, 3, n_keep_last=n_keep, **kw)
    torch.testing.assert_close(W_hat, want, rtol=0, atol=1e-9)
    assert info.n_dead == 1 and torch.all(W_hat[:, 3] == 0)
    # the summed OBS losses are exactly the final error on the damped Hessian
    W0 = W.clone()
    W0[:, 3] = 0
    Hd = H.clone()
    Hd.diagonal()[3] = 1
    Hd.diagonal().add_(cfg.damp * Hd.diagonal().mean())
    dW = W0 - W_hat
    assert info.gptq_loss == pytest.approx(0.5 * float(((dW @ Hd) * dW).sum()), rel=1e-9)
    # several blocks were exercised, and the block size does not change the result
    assert W.shape[1] > 3 * block_size
    W_big, _ = gptq_weight(W, H, GPTQConfig(bits=3, block_size=128, **kw), n_keep_last=n_keep)
    torch.testing.assert_close(W_big, W_hat, rtol=0, atol=1e-9)


def test_act_order_static_groups_stay_on_original_group_grid():
    W, H, _ = layer(n_out=16, n_in=48, dtype=torch.float32, seed=3)
    g = 16
    cfg = GPTQConfig(bits=3, group_size=g, static_groups=True, act_order=True, block_size=8)
    W_hat, info = gptq_weight(W, H, cfg)
    assert info.perm is not None and not torch.equal(info.perm, torch.arange(48))  # really permuted
    scale, zero = choose_qparams(W, "int3", PerGroup(g), symmetric=False)  # from the unpermuted W
    on_grid = dequantize(quantize(W_hat, scale, zero, "int3", False), scale, zero)
    assert torch.equal(on_grid, W_hat)
    assert torch.equal(info.g_idx, torch.arange(48) // g)
    torch.testing.assert_close(info.scale, scale.squeeze(-1), rtol=0, atol=0)
    for k in range(3):  # at most 2^3 levels per row and group
        assert all(len(torch.unique(r)) <= 8 for r in W_hat[:, k * g:(k + 1) * g])


def test_dynamic_groups_g_idx_names_each_columns_grid():
    W, H, _ = layer(n_out=10, n_in=32, dtype=torch.float32, seed=4)
    W_hat, info = gptq_weight(W, H, GPTQConfig(bits=2, group_size=8, act_order=True, block_size=4))
    assert sorted(torch.bincount(info.g_idx).tolist()) == [8, 8, 8, 8]
    assert not torch.equal(info.g_idx, torch.arange(32) // 8)  # act-order scatters the groups
    for k in range(4):
        cols = W_hat[:, info.g_idx == k]
        s, z = info.scale[:, k:k + 1], info.zero_point[:, k:k + 1]
        assert torch.equal(fake(cols, s, z, 2, False), cols)


def test_per_channel_gptq_uses_rtns_grid():
    W, H, _ = layer(n_out=16, n_in=32, dtype=torch.float32, seed=5)
    W_hat, info = gptq_weight(W, H, GPTQConfig(bits=4))
    scale, zero = fit(W, 4, False)
    assert torch.equal(fake(W_hat, scale, zero, 4, False), W_hat)
    assert torch.equal(info.scale, scale) and info.g_idx is None
    # rtn_weight is exactly rtn_quantize_'s grid
    lin = nn.Linear(32, 16, bias=False)
    lin.weight.data.copy_(W)
    rtn_quantize_(nn.Sequential(lin), RTNConfig(bits=4))
    assert torch.equal(rtn_weight(W, GPTQConfig(bits=4)), lin.weight.data)


def test_keep_last_columns_absorb_the_error():
    W, H, X = layer(n_out=16, n_in=40, seed=6)
    k = 8
    W[:, -k:] *= 20  # outlier weights: must not set the base columns' scale
    W_hat, info = gptq_weight(W, H, GPTQConfig(bits=3), n_keep_last=k)
    torch.testing.assert_close(info.scale, fit(W[:, :-k], 3, False)[0], rtol=0, atol=0)
    base = W_hat[:, :-k]
    assert torch.equal(fake(base, *fit(W[:, :-k], 3, False), 3, False), base)
    assert not torch.allclose(W_hat[:, -k:], W[:, -k:])  # updated, not the originals
    copied = W_hat.clone()
    copied[:, -k:] = W[:, -k:]
    n = X.shape[0]
    assert output_error(W, W_hat, H, n) < 0.9 * output_error(W, copied, H, n)
    # k = 0 is plain GPTQ
    torch.testing.assert_close(gptq_weight(W, H, GPTQConfig(bits=3), n_keep_last=0)[0],
                               gptq_weight(W, H, GPTQConfig(bits=3))[0], rtol=0, atol=0)


def test_output_error_is_the_summed_squared_output_error():
    W, H, X = layer(seed=7)
    W_hat = rtn_weight(W, GPTQConfig(bits=3)).double()
    want = float(((X @ (W - W_hat).T) ** 2).sum())
    assert output_error(W, W_hat, H, X.shape[0]) == pytest.approx(want, rel=1e-10)


def test_16_bits_reproduces_the_layer():
    W, H, X = layer(n_out=16, n_in=48, dtype=torch.float32, seed=8)
    W_hat, _ = gptq_weight(W, H, GPTQConfig(bits=16))
    step = float((W.amax(1).clamp(min=0) - W.amin(1).clamp(max=0)).max() / 65535)
    torch.testing.assert_close(W_hat, W, rtol=0, atol=4 * step)
    n = X.shape[0]
    assert output_error(W, W_hat, H, n) < 1e-8 * output_error(W, torch.zeros_like(W), H, n)


def test_dead_columns_are_zeroed_without_nan():
    W, _, X = layer(n_out=8, n_in=24, seed=9)
    X[:, [0, 5, 23]] = 0
    H = 2 / X.shape[0] * X.T @ X
    for cfg in (GPTQConfig(bits=3), GPTQConfig(bits=3, act_order=True, group_size=8, static_groups=True)):
        W_hat, info = gptq_weight(W, H, cfg)
        assert torch.isfinite(W_hat).all() and info.n_dead == 3
        assert torch.all(W_hat[:, [0, 5, 23]] == 0)



def test_an_all_dead_hessian_is_refused_not_zeroed():
    W, _, _ = layer(n_out=8, n_in=24, seed=9)
    H0 = torch.zeros(24, 24, dtype=torch.float64)  # every input dead: nothing to calibrate
    with pytest.raises(ValueError, match=r"^blk\.up: every one of the 24 quantized input columns is dead"):
        gptq_weight(W, H0, GPTQConfig(bits=3), name="blk.up")
    # dead everywhere but in the kept (outlier) columns: the quantized part is still all dead
    H0[20:, 20:] = torch.eye(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="every one of the 20 quantized input columns is dead"):
        gptq_weight(W, H0, GPTQConfig(bits=3), n_keep_last=4)


def test_a_hessian_near_float32s_largest_value_is_factored_at_unit_scale():
    """GPTQ does not see H's scale: H·2^121 (entries up to ~1e38, finite in float32) gives the
    weights of H / mean(diag H) to the bit, and the loss scaled back; on main it was 'not positive
    definite' at every damp."""
    W, H64, _ = layer(n_out=12, n_in=40, seed=21)
    H = H64.float()
    big = H * 2.0**121  # a power of two: exact
    assert torch.isfinite(big).all() and 1e37 < float(big.max()) < 3.4e38
    assert not torch.isfinite(big.diagonal().sum())  # float32's mean of the diagonal overflows
    W32 = W.float()
    cfg = GPTQConfig(bits=4)
    W_hat, info = gptq_weight(W32, big, cfg, name="blk.q")
    c = float(big.diagonal().double().mean())
    want, want_info = gptq_weight(W32, (big.double() / c).float(), cfg)
    assert torch.equal(W_hat, want) and info.damp == pytest.approx(0.01)
    assert info.gptq_loss == pytest.approx(want_info.gptq_loss * c, rel=1e-12)
    # and it is (up to float32 rounding of H / c) the solve of the unscaled H
    plain, _ = gptq_weight(W32, H, cfg)
    assert float((W_hat != plain).float().mean()) < 0.02
    n = 400
    assert output_error(W, W_hat, H64, n) == pytest.approx(output_error(W, plain, H64, n), rel=1e-3)
    # a Hessian that is not positive definite still fails, at either scale
    H_bad, _ = non_pd_hessian()
    with pytest.raises(ValueError, match="not positive definite"):
        gptq_weight(torch.ones(3, 16), (H_bad * 1e30).float(), GPTQConfig(bits=4, max_damp=0.04))


def ill_conditioned(n=256, cond=1e10, seed=0):
    """(W, H) float64: H = Q diag(λ) Qᵀ with λ log-spaced from 1 to 1/cond, a random rotation Q."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    H = Q @ torch.diag(torch.logspace(0, -math.log10(cond), n, dtype=torch.float64)) @ Q.T
    W = torch.randn(64, n, generator=g, dtype=torch.float64) / 16
    return W, (H + H.T) / 2


def test_a_barely_damped_ill_conditioned_float32_solve_warns():
    W, H = ill_conditioned()
    cfg = GPTQConfig(bits=4, damp=1e-6)
    with pytest.warns(RuntimeWarning, match=r"^blk\.v: the float32 GPTQ solve is likely inaccurate.*float64") as rec:
        W32, _ = gptq_weight(W.float(), H.float(), cfg, name="blk.v")
    assert [w.category.__name__ for w in rec] == ["GPTQPrecisionWarning"]
    # what the warning is about: float32 and float64 disagree on a large share of the weights,
    # and float32's output error is worse
    W64, _ = gptq_weight(W, H, cfg)
    assert float((W32.double() != W64).float().mean()) > 0.3
    assert output_error(W, W32, H, 1) > 1.03 * output_error(W, W64, H, 1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gptq_weight(W, H, cfg)  # float64: no warning
        gptq_weight(W.float(), H.float(), GPTQConfig(bits=4))  # the default damp 0.01: none
        W2, H2, _ = layer(n_out=16, n_in=64, seed=3, dtype=torch.float32)
        gptq_weight(W2, H2, GPTQConfig(bits=4, act_order=True))


def test_blocked_loop_is_the_references_to_the_bit():
    """Our float32 loop against a transcription of the reference's (IST-DASLab/gptq
    ``fasterquant``: a column times a row, then subtracted; one GEMM after each block): the
    same weights to the bit. (The results committed in data/ rely on this rounding.)"""
    W, H64, _ = layer(n_out=24, n_in=96, seed=13)
    W, H = W.float(), H64.float()
    bits, B = 4, 32
    maxq = 2**bits - 1
    Wr = W.clone()
    xmin, xmax = Wr.min(1).values.clamp(max=0), Wr.max(1).values.clamp(min=0)
    scale = ((xmax - xmin) / maxq).unsqueeze(1)
    zero = torch.round(-xmin.unsqueeze(1) / scale)
    Hd = H.clone()
    Hd.diagonal().add_(0.01 * Hd.diagonal().mean())
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(Hd)), upper=True)
    Q = torch.zeros_like(Wr)
    for i1 in range(0, 96, B):
        i2 = i1 + B
        W1, Err1, Hinv1 = Wr[:, i1:i2].clone(), torch.zeros(24, B), Hinv[i1:i2, i1:i2]
        for i in range(B):
            w, d = W1[:, i], Hinv1[i, i]
            q = (scale * (torch.clamp(torch.round(w.unsqueeze(1) / scale) + zero, 0, maxq) - zero)).flatten()
            Q[:, i1 + i] = q
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        Wr[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    W_hat, _ = gptq_weight(W, H, GPTQConfig(bits=bits, block_size=B))
    assert torch.equal(W_hat, Q)


def non_pd_hessian(n=16, frac=-0.05):
    """Symmetric H with positive diagonal and one eigenvalue ``frac · mean(eigenvalues)`` < 0."""
    g = torch.Generator().manual_seed(10)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    lam = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    lam[0] = frac * lam[1:].sum() / (n - frac)  # so that lam[0] / mean(lam) == frac
    H = Q @ torch.diag(lam) @ Q.T
    return (H + H.T) / 2, float(lam[0] / lam.mean())


def test_cholesky_failure_retries_from_the_original_hessian():
    H, frac = non_pd_hessian()
    assert -0.08 < frac < -0.04  # fails at damp 0.01, 0.02, 0.04; 0.08 works
    assert torch.all(H.diagonal() > 0)
    W = torch.randn(6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    W_hat, info = gptq_weight(W, H, GPTQConfig(bits=4, damp=0.01), name="blk.q_proj")
    assert info.damp == pytest.approx(0.08) and info.damp_tries == 4
    assert torch.isfinite(W_hat).all()
    # the retry dampens the ORIGINAL H once (not cumulatively): same as asking for 0.08 directly
    direct, info8 = gptq_weight(W, H, GPTQConfig(bits=4, damp=0.08))
    assert info8.damp_tries == 1
    torch.testing.assert_close(W_hat, direct, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"blk\.q_proj.*max_damp=0\.04"):
        gptq_weight(W, H, GPTQConfig(bits=4, damp=0.01, max_damp=0.04), name="blk.q_proj")


@pytest.mark.parametrize("what", ["nan_w", "inf_h", "w_1d", "h_shape", "neg_diag", "keep", "group"])
def test_layer_errors_name_the_module(what):
    W, H, _ = layer(n_out=4, n_in=16, n_tok=64)
    cfg = GPTQConfig(bits=4)
    keep = 0
    if what == "nan_w":
        W[1, 2] = math.nan
    elif what == "inf_h":
        H[0, 0] = math.inf
    elif what == "w_1d":
        W = W[0]
    elif what == "h_shape":
        H = H[:8, :8]
    elif what == "neg_diag":
        H[2, 2] = -1
    elif what == "keep":
        keep = 16
    elif what == "group":
        cfg = GPTQConfig(bits=4, group_size=8)
        keep = 4
    with pytest.raises(ValueError, match=r"^mylayer: "):
        gptq_weight(W, H, cfg, n_keep_last=keep, name="mylayer")


def test_mse_search_never_worse_than_min_max():
    W, H, _ = layer(n_out=16, n_in=32, dtype=torch.float32, seed=11)
    W[:, 0] *= 10  # a weight outlier makes clipping worthwhile
    plain = rtn_weight(W, GPTQConfig(bits=3))
    clipped = rtn_weight(W, GPTQConfig(bits=3, mse=True))
    e_plain = (plain - W).abs().pow(2.4).sum(1)
    e_clip = (clipped - W).abs().pow(2.4).sum(1)
    assert torch.all(e_clip <= e_plain) and torch.any(e_clip < 0.9 * e_plain)
    W_hat, info = gptq_weight(W, H, GPTQConfig(bits=3, mse=True, symmetric=True))
    assert torch.equal(fake(W_hat, info.scale, info.zero_point, 3, True), W_hat)


# ----------------------------------------------------------------------------------------------
# Hessians and calibration data


def test_hessian_accumulator_streams_the_mean_with_padding_masked():
    g = torch.Generator().manual_seed(12)
    xs = [torch.randn(b, 7, 5, generator=g) for b in (3, 1, 4)]
    masks = [torch.rand(b, 7, generator=g) > 0.3 for b in (3, 1, 4)]
    acc = HessianAccumulator(5, torch.float64)
    for x, m in zip(xs, masks):
        acc.add(x, m)
    X = torch.cat([x[m] for x, m in zip(xs, masks)]).double()
    assert acc.n_tokens == X.shape[0] == sum(int(m.sum()) for m in masks)
    torch.testing.assert_close(acc.H, 2 / X.shape[0] * X.T @ X, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(acc.absmax, X.abs().amax(0).float())
    with pytest.raises(ValueError, match="lin7: calibration inputs contain NaN"):
        bad = HessianAccumulator(5, name="lin7")
        bad.add(torch.full((2, 5), math.nan))
    for value in (math.inf, -math.inf, math.nan):  # one bad entry among finite ones, any sign
        bad = HessianAccumulator(5, name="lin8")
        x = torch.randn(3, 4, 5, generator=g)
        x[2, 1, 3] = value
        with pytest.raises(ValueError, match="lin8: calibration inputs contain NaN or Inf"):
            bad.add(x)
        assert bad.n_tokens == 0 and torch.all(bad.H == 0)  # nothing was added
        bad.add(x, torch.ones(3, 4, dtype=torch.bool).index_put_((torch.tensor(2), torch.tensor(1)),
                                                                  torch.tensor(False)))  # masked out: fine
        assert bad.n_tokens == 11


def test_hessian_accumulator_refuses_half_precision_and_keeps_the_inputs():
    with pytest.raises(ValueError, match=r"lin: H's dtype must be torch.float32 or torch.float64, got torch.float16"):
        HessianAccumulator(4, torch.float16, name="lin")
    with pytest.raises(ValueError, match="float32 or torch.float64"):
        HessianAccumulator(4, torch.bfloat16)
    # why: inputs of 300 overflow a float16 x·xᵀ; float32 H from float16 inputs is exact here
    x = torch.full((2, 4), 300.0, dtype=torch.float16)
    assert not torch.isfinite(x.T @ x).all()
    acc = HessianAccumulator(4)
    acc.add(x)
    assert torch.equal(acc.H, torch.full((4, 4), 2 * 300.0**2))  # 2/n · Σ x xᵀ, n = 2 tokens
    assert torch.equal(acc.absmax, torch.full((4,), 300.0))
    x32 = torch.randn(6, 4)
    before = x32.clone()
    acc.add(x32)
    assert torch.equal(x32, before)  # the caller's inputs are not scaled in place


def test_calibration_batch_is_deterministic_windows_of_the_split():
    tokens = np.arange(1000, dtype=np.uint16)  # distinct ids: a row's first id gives its start
    a = calibration_batch(tokens, 8, 32, seed=3)
    assert a.shape == (8, 32) and a.dtype == torch.int64
    assert torch.equal(a, calibration_batch(tokens, 8, 32, seed=3))
    assert not torch.equal(a, calibration_batch(tokens, 8, 32, seed=4))
    for row in a.numpy():  # each row is a contiguous window of the split
        assert np.array_equal(tokens[row[0]:row[0] + 32], row)
    with pytest.raises(ValueError, match="fewer than seq_len"):
        calibration_batch(tokens[:10], 2, 32)
    with pytest.raises(ValueError, match="positive"):
        calibration_batch(tokens, 0, 32)


# ----------------------------------------------------------------------------------------------
# whole models


def _layer_hessians(model, calib):
    with capture_hessians(block_linears(model), torch.float64) as cap:
        model(input_ids=calib)
    return cap.hessians


@pytest.fixture(scope="module")
def trained(corpus):
    """A committed bf16 checkpoint of the `cpu` grid (read as fp32) and training-split calibration."""
    from bitlaws.study.checkpoints import load_checkpoint

    if not CHECKPOINT.exists():
        pytest.skip(f"no committed checkpoint at {CHECKPOINT}")
    model, meta = load_checkpoint(CHECKPOINT)
    seq_len = json.loads(meta["train_config"])["seq_len"]
    return model, calibration_batch(corpus.train, 32, seq_len, seed=0), seq_len


@pytest.mark.parametrize("bits", [3, 4])
def test_trained_model_gptq_beats_rtn_on_output_error(trained, bits):
    model, calib, _ = trained
    hess = _layer_hessians(model, calib)
    cfg = GPTQConfig(bits=bits)
    e_gptq = e_rtn = 0.0
    for name, lin in block_linears(model).items():
        W, acc = lin.weight.detach(), hess[name]
        assert acc.n_tokens == calib.numel()
        W_hat, _ = gptq_weight(W, acc.H, cfg, name=name)
        e_gptq += output_error(W, W_hat, acc.H, acc.n_tokens)
        e_rtn += output_error(W, rtn_weight(W, cfg), acc.H, acc.n_tokens)
    assert e_gptq < 0.85 * e_rtn


def test_trained_model_gptq_beats_rtn_on_validation_loss(trained, corpus):
    from bitlaws.train import evaluate

    model, calib, seq_len = trained
    g, r = copy.deepcopy(model), copy.deepcopy(model)
    report = gptq_quantize_(g, calib, GPTQConfig(bits=3), progress=False)
    rtn_quantize_(r, RTNConfig(bits=3))
    budget = (seq_len + 1) * 16
    base, l_gptq, l_rtn = (evaluate(m, corpus.val, seq_len, budget) for m in (model, g, r))
    assert base < l_gptq < l_rtn
    assert (l_gptq - base) < 0.8 * (l_rtn - base)
    assert sum(v["out_err"] for v in report.values()) < 0.85 * sum(v["out_err_rtn"] for v in report.values())


def manual_true_sequential(model, calib, cfg):
    """The sequential pass written the slow way: a full model forward for every calibration step."""
    groups = [("self_attn", ("q", "k", "v")), ("self_attn", ("o",)), ("mlp", ("gate", "up")), ("mlp", ("down",))]
    for i, blk in enumerate(model.model.layers):
        for sub, projs in groups:
            mods = {f"model.layers.{i}.{sub}.{p}_proj": getattr(getattr(blk, sub), f"{p}_proj") for p in projs}
            with capture_hessians(mods, cfg.torch_hessian_dtype) as cap:
                for chunk in calib.split(cfg.calib_batch_size):
                    model(input_ids=chunk)
            for n, lin in mods.items():
                W_hat, _ = gptq_weight(lin.weight.detach(), cap.hessians[n].H, cfg, name=n)
                lin.weight.data.copy_(W_hat)


@pytest.fixture(scope="module")
def smoke():
    return build_model(SMOKE_LADDER["n14k"], seed=0).eval()


def smoke_calib(n=12, t=32, seed=0):
    return torch.randint(0, 256, (n, t), generator=torch.Generator().manual_seed(seed))


def test_gptq_quantize_matches_the_slow_sequential_driver(smoke):
    calib = smoke_calib()
    cfg = GPTQConfig(bits=3, calib_batch_size=5, act_order=True)
    fast, slow = copy.deepcopy(smoke), copy.deepcopy(smoke)
    report = gptq_quantize_(fast, calib, cfg, progress=False)
    with torch.no_grad():
        manual_true_sequential(slow, calib, cfg)
    assert set(report) == set(block_linears(smoke))
    for (n, a), (_, b) in zip(fast.state_dict().items(), slow.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=n)


def test_gptq_quantize_report_and_grid_on_smoke_model(smoke):
    model = copy.deepcopy(smoke)
    calib = smoke_calib()
    orig = {n: m.weight.detach().clone() for n, m in block_linears(model).items()}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = gptq_quantize_(model, calib, GPTQConfig(bits=3), progress=False)
    assert set(report) == set(block_linears(model))
    for n, r in report.items():
        assert r["n_tokens"] == calib.numel() and r["damp"] == 0.01 and r["damp_tries"] == 1
        assert 0 < r["out_err"] < r["out_norm"] and r["seconds"] >= 0
        w_hat = block_linears(model)[n].weight.detach()
        assert torch.equal(fake(w_hat, *fit(orig[n], 3, False), 3, False), w_hat), n  # RTN's grid
    # an untrained model has near-isotropic inputs, so the gain is small here (large when trained, above)
    assert sum(r["out_err"] for r in report.values()) < 0.98 * sum(r["out_err_rtn"] for r in report.values())
    quantized = {f"{n}.weight" for n in report}
    for k, v in model.state_dict().items():  # embeddings, norms and lm_head untouched
        if k not in quantized:
            assert torch.equal(v, before[k]), k

    model.train()  # the mode is restored (calibration itself runs in eval mode)
    gptq_quantize_(model, calib, GPTQConfig(bits=8), progress=False)
    assert model.training


def test_padding_is_left_out_of_the_hessians(smoke):
    calib = smoke_calib(n=6, t=20)
    mask = torch.ones_like(calib)
    mask[0, 15:] = 0
    mask[3, 10:] = 0
    report = gptq_quantize_(copy.deepcopy(smoke), calib, GPTQConfig(bits=4), progress=False, attention_mask=mask)
    assert {r["n_tokens"] for r in report.values()} == {int(mask.sum())}


def _unchanged(model, ref):
    return all(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
               for a, b in zip(model.state_dict().values(), ref.state_dict().values()))


def test_model_errors_name_the_module_and_leave_the_model_untouched(smoke):
    calib = smoke_calib(n=4, t=16)
    cfg = GPTQConfig(bits=4)

    m = copy.deepcopy(smoke)
    with torch.no_grad():
        m.model.layers[1].mlp.up_proj.weight[0, 0] = math.inf
    ref = copy.deepcopy(m)
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj"):
        gptq_quantize_(m, calib, cfg, progress=False)
    assert _unchanged(m, ref)

    m = copy.deepcopy(smoke)  # NaN reaches the inputs of layer 1 after layer 0 was quantized
    with torch.no_grad():
        m.model.layers[1].input_layernorm.weight[2] = math.nan
    ref = copy.deepcopy(m)
    with pytest.raises(ValueError, match=r"model\.layers\.1\.self_attn\.[qkv]_proj: calibration inputs contain NaN"):
        gptq_quantize_(m, calib, cfg, progress=False)
    assert _unchanged(m, ref)

    m = copy.deepcopy(smoke)  # a linear inside a block that the forward never calls
    m.model.layers[0].mlp.unused = nn.Linear(24, 24, bias=False)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.unused: saw no calibration tokens"):
        gptq_quantize_(m, calib, cfg, progress=False)

    m = copy.deepcopy(smoke)
    with pytest.raises(ValueError, match="empty calibration set"):
        gptq_quantize_(m, calib[:0], cfg, progress=False)
    with pytest.raises(ValueError, match="integer tensor"):
        gptq_quantize_(m, calib.float(), cfg, progress=False)
    with pytest.raises(ValueError, match="integer tensor"):
        gptq_quantize_(m, calib[0], cfg, progress=False)
    with pytest.raises(ValueError, match="attention_mask"):
        gptq_quantize_(m, calib, cfg, progress=False, attention_mask=torch.ones(4, 15))
    assert _unchanged(m, smoke)


# ----------------------------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize("kwargs, field", [
    ({"bits": 1}, "bits"), ({"bits": 17}, "bits"), ({"bits": 4.0}, "bits"),
    ({"group_size": -1}, "group_size"), ({"static_groups": True}, "static_groups"),
    ({"damp": 0}, "damp"), ({"damp": math.nan}, "damp"), ({"max_damp": 0.001}, "max_damp"),
    ({"block_size": 0}, "block_size"), ({"mse_maxshrink": 1.5}, "mse_maxshrink"),
    ({"mse_norm": 0}, "mse_norm"), ({"n_calib": 0}, "n_calib"), ({"calib_seq_len": 0}, "calib_seq_len"),
    ({"act_order": 1}, "act_order"), ({"hessian_dtype": "bf16"}, "hessian_dtype"), ({"seed": -1}, "seed"),
])
def test_config_validation(kwargs, field):
    with pytest.raises(ValueError, match=f"GPTQConfig.{field}"):
        GPTQConfig(**kwargs)


def test_method_and_quant_scheme_strings():
    assert GPTQConfig().method == "gptq" and RTNConfig().method == "rtn"
    assert GPTQConfig().quant_scheme == RTNConfig().quant_scheme == "asym_per_channel"
    assert GPTQConfig(symmetric=True, group_size=128).quant_scheme == "sym_group128"
    assert GPTQConfig(group_size=64, act_order=True, static_groups=True, mse=True).quant_scheme == \
        "asym_group64_actorder_static_mse"

"""The pipeline bootstrap's check against a reference (``bitlaws.study.boot_check``, issue 14): on an
objective with two basins where the fast start sits in the worse one, the reference and the bound
refit take the better; the share of draws on a bound per stage and constant; the paired Monte Carlo
error of a percentile difference; P4's per-draw order indicators."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from bitlaws.laws import fit as lf
from bitlaws.laws import forms
from bitlaws.laws.forms import PAPER_CONSTANTS as PC
from bitlaws.study import boot_check as bc
from bitlaws.study import law_fits as la
from bitlaws.study.low_precision_training import order_indicators


def _runs() -> pd.DataFrame:
    """Twelve runs on a 4 x 3 (N, D) grid, loss 2 + N/1e9."""
    grid = list(itertools.product((30e6, 60e6, 110e6, 220e6), (1.5e9, 3e9, 6e9)))
    return pd.DataFrame({"run_id": [f"run-{n:g}-{d:g}" for n, d in grid], "n_params": [n for n, _ in grid],
                         "n_tokens": [d for _, d in grid], "loss_val": [2 + n / 1e9 for n, _ in grid]})


def _level() -> lf.Stage:
    """A one-constant upstream stage in Chinchilla's place (the loss's level E), so the test is quick."""
    return lf.Stage(name="chinchilla", equation="L = E", param_names=("E",), grid={"E": [1.0, 3.0]},
                    bounds={"E": (0.0, 10.0)}, natural=lambda th: {"E": th[:, 0:1]},
                    loss=lambda data, c: c["E"] + 0 * data["n_params"], scale="linear")


def _two_basins(low: float) -> lf.Stage:
    """One constant θ in [low, 3]; every row's residual is 1e-4·((θ² − 4)² + (θ − 2)²): a global minimum
    0 at θ = 2 and a worse local one at θ = −1 − 1/√2 ≈ −1.707 (on the lower bound when low > −1.707)."""
    def natural(theta):
        return {"theta": theta[:, 0:1]}

    def loss(data, c):
        t = c["theta"]
        return 1e-4 * ((t**2 - 4) ** 2 + (t - 2) ** 2) + 0 * data["n_params"]

    return lf.Stage(name="two_basins", equation="a constructed double well", param_names=("theta",),
                    grid={"theta": [-1.5, 2.5]}, bounds={"theta": (low, 3.0)}, natural=natural, loss=loss,
                    scale="linear", n_refine=None)


@pytest.mark.parametrize("low", [-3.0, -1.5])
def test_reference_takes_the_better_basin_when_the_fast_start_sits_in_the_worse(monkeypatch, low):
    """The fast fit, started at θ = −1.5 alone (PIPELINE_REFINE = 0), stays in the worse basin; the full
    multi-start (every grid point) reaches θ = 2; the reference takes it. The bound refit takes it
    only where the worse basin's optimum is on the box's bound (low = −1.5), else keeps the fast fit."""
    monkeypatch.setitem(lf.STAGES, "chinchilla", _level())
    monkeypatch.setitem(lf.STAGES, "two_basins", _two_basins(low))
    monkeypatch.setattr(la, "PIPELINE_REFINE", 0)
    runs = _runs()
    frames = {"chinchilla": runs, "two_basins": runs.assign(loss_val=0.0)}
    stages = ["chinchilla", "two_basins"]
    starts = {"chinchilla": np.array([[2.0]]), "two_basins": np.array([[-1.5]])}
    picks = {s: np.unique(frames[s]["run_id"]) for s in stages}
    rows, _ = bc.check_draw(frames, stages, [], picks, starts)
    t = pd.DataFrame(rows)
    got = t[t["stage"] == "two_basins"].set_index("path")
    assert got.loc["fast", "value"] == pytest.approx(-1.707 if low < -1.707 else low, abs=1e-3)
    assert got.loc["full", "value"] == pytest.approx(2.0, abs=1e-2)
    assert got.loc["reference", "value"] == got.loc["full", "value"]
    assert got.loc["reference", "objective"] < 1e-3 * got.loc["fast", "objective"]
    on_bound = low == -1.5
    assert bool(got.loc["fast", "on_bound"]) is on_bound
    assert got.loc["bound_refit", "value"] == got.loc["full" if on_bound else "fast", "value"]
    # the pipeline's own option does the same
    fast, _ = la._refit_draw(frames, stages, [], picks, starts)
    refit, _ = la._refit_draw(frames, stages, [], picks, starts, bound_refit=True)
    assert fast["theta"] == got.loc["fast", "value"]
    assert refit["theta"] == pytest.approx(2.0 if on_bound else fast["theta"], abs=1e-2)
    summary = bc.check_summary(t.assign(draw=0))["stages"]
    assert summary["two_basins"]["fast_worse"] == 1 and summary["chinchilla"]["fast_worse"] == 0
    assert summary["two_basins"]["bound_fixed"] == int(on_bound)
    assert summary["two_basins"]["worse_not_on_bound"] == int(not on_bound)


def test_bound_shares_count_the_draws_on_each_bound():
    """n_kv at its upper bound (10) in 1 of 4 draws, γ_kv at its lower bound (0.05) in 2 of 4; the
    paired stage's n_w at −5 in 1 of 2 paired draws; Chinchilla's constants inside in every draw."""
    chin = {"A": 100.0, "B": 1000.0, "E": 1.5, "alpha": 0.5, "beta": 0.5}
    kv = [(0.05, 1.0), (0.05, 10.0), (1.0, 2.0), (2.0, 3.0)]
    rec = {"status": "ok", "stages": ["chinchilla", "neff_kv"], "paired_stages": ["neff_w_paired"],
           "draws": [{**chin, "gamma_kv": g, "n_kv": n} for g, n in kv],
           "paired_draws": [{"gamma_w_paired": 1.0, "n_w_paired": -5.0}, {"gamma_w_paired": 1.0, "n_w_paired": 1.0},
                            {}, {}]}
    shares = la.pipeline_bound_shares(rec)
    assert shares["neff_kv"] == {"gamma_kv": 0.5, "n_kv": 0.25}
    assert shares["neff_w_paired"] == {"gamma_w": 0.0, "n_w": 0.5}
    assert shares["chinchilla"] == {"A": 0.0, "B": 0.0, "E": 0.0, "alpha": 0.0}
    assert la.pipeline_bound_shares({"status": "skipped"}) == {}
    # the stage table says it beside identified / not identified
    fits = {"pipeline_boot": rec, "neff_kv": {"status": "ok", "n_points": 3, "n_cells": 3, "n_groups": 3,
                                              "params": {"gamma_kv": 1.0, "n_kv": 2.0}, "identified": True}}
    md = la.stages_markdown(fits, {s: pd.DataFrame({"x": range(3)}) for s in la.FIT_ORDER}, True, "cpu")
    assert "`neff_kv` identified at its point fit; on a bound in 50% (γ_kv), 25% (n_kv) of the pipeline " \
           "bootstrap's 4 draws" in md


def test_percentile_difference_error_is_paired():
    """Identical paths: difference and error exactly 0. Paths that differ in one draw of 200: an error
    far below the percentile's own (``_percentile_mc_se``)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(200)
    assert bc.percentile_diff_se(a, a.copy(), [2.5, 97.5]).tolist() == [0.0, 0.0]
    b = a.copy()
    b[np.argmax(a)] += 5.0
    se = bc.percentile_diff_se(b, a, [97.5])[0]
    assert 0 < se < 0.5 * la._percentile_mc_se(a, (97.5,))[0]
    with pytest.raises(ValueError, match="aligned"):
        bc.percentile_diff_se(a, a[:5], [50])


def test_order_indicators_per_draw():
    """Table 2's constants give f_a < f_w < f_kv at 4–8 bits; swapping the w and KV constants keeps
    activations the most sensitive but puts f_kv below f_w; an undefined f (γ NaN) is flagged."""
    paper = {k: PC[k] for k in ("gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv")}
    swapped = {**paper, "gamma_w": PC["gamma_kv"], "n_w": PC["n_kv"], "gamma_kv": PC["gamma_w"], "n_kv": PC["n_w"]}
    ind = order_indicators([paper, swapped, {**paper, "gamma_w": float("nan")}])
    assert ind["p_order"][:2].tolist() == [True, False]
    assert ind["p_a_most"][:2].tolist() == [True, True]
    assert ind["p_kv_below_w"][:2].tolist() == [False, True]
    assert ind["finite"].tolist() == [True, True, False]


def test_coverage_summary_interval_and_bad_input():
    """5 of 5 datasets covered: Clopper–Pearson's lower end is 0.025^(1/5); 0 of 5: upper 1 − 0.025^(1/5)."""
    cov = pd.DataFrame({"dataset": list(range(5)) * 2, "quantity": ["x"] * 5 + ["y"] * 5,
                        "covered": [True] * 5 + [False] * 5})
    s = bc.coverage_summary(cov)
    assert s.loc["x", "coverage"] == 1.0 and s.loc["x", "low"] == pytest.approx(0.025 ** 0.2, rel=1e-9)
    assert s.loc["y", "high"] == pytest.approx(1 - 0.025 ** 0.2, rel=1e-9)
    with pytest.raises(ValueError, match="n_boot must be an int"):
        bc.fast_coverage(1, 0)
    with pytest.raises(ValueError, match="n must be an int"):
        bc.boot_check("cpu", 0)

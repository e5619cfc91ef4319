"""Held-out scores that refit the upstream stages per fold, and N_eff on paired differences
(``bitlaws.study.law_fits``: ``PipelineFolds``, ``paired_rows``, the records ``run_fits`` writes, P3)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from bitlaws.laws import fit as lf
from bitlaws.laws import forms
from bitlaws.laws.forms import PAPER_CONSTANTS as PC
from bitlaws.study import law_fits as la

SIZES = (30e6, 60e6, 110e6, 220e6)
BUDGETS = (1.5e9, 3e9, 6e9)
BITS_W = (16, 3, 4, 6, 8)


def _sweep(shift: float = 1.0, noise: float = 0.002, seed: int = 3) -> pd.DataFrame:
    """High-precision runs and P_w sweeps from the paper's constants; every loss of the largest size
    (high-precision and low-precision alike) multiplied by ``shift``; the same noise draws for any shift."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, d, bw in itertools.product(SIZES, BUDGETS, BITS_W):
        loss = float(forms.qat_loss(n, d, bw, 16, 16, PC)) * np.exp(noise * rng.standard_normal())
        run = f"run-{n:g}-{d:g}-{bw}"
        rows.append(dict(run_id=run, obs_id=run + "-none", experiment="base_grid" if bw == 16 else "qat_marginal",
                         status="ok", n_params=n, n_tokens=d, bits_w=bw, bits_a=16, bits_kv=16, seed=0,
                         ptq_method="none", bits_post=16, delta_ptq=0.0,
                         loss_val=loss * (shift if n == SIZES[-1] else 1.0)))
    return pd.DataFrame(rows)


def _held_out_predictions(df: pd.DataFrame, pipeline: bool) -> np.ndarray:
    """neff_w's prediction of the largest size's rows, fitted on the others."""
    frames = la.stage_frames(df)
    fixed = (la.PipelineFolds(frames).fold_constants(la.UPSTREAM["neff_w"], "n_params") if pipeline
             else lf.fit_stage("chinchilla", frames["chinchilla"]).params)
    rows, skipped = lf.holdout_predictions("neff_w", frames["neff_w"], "n_params", fixed=fixed, which="largest")
    assert skipped == 0 and set(rows["fold"]) == {SIZES[-1]}
    return rows["pred"].to_numpy()


def test_pipeline_holdout_does_not_see_the_held_out_size_but_the_fixed_one_does():
    """Shift every loss of the largest model size by 4 %: refitting Chinchilla inside the fold, the
    prediction of that size depends only on the other sizes and stays bit for bit the same (the same
    rows in, the same fit out); holding Chinchilla at its fit to every size, the shift leaks into the
    prediction of the very rows it is scored on."""
    base, shifted = _sweep(1.0), _sweep(1.04)
    clean_a, clean_b = _held_out_predictions(base, True), _held_out_predictions(shifted, True)
    np.testing.assert_array_equal(clean_a, clean_b)
    leaky_a, leaky_b = _held_out_predictions(base, False), _held_out_predictions(shifted, False)
    assert np.max(np.abs(leaky_b / leaky_a - 1)) > 0.005  # the leaky prediction follows the shift
    # without the shift both predict the truth of the held-out size to about the noise
    truth = np.asarray(forms.qat_loss(SIZES[-1], np.repeat(BUDGETS, 4), np.tile(BITS_W[1:], 3), 16, 16, PC))
    assert np.max(np.abs(clean_a / truth - 1)) < 0.02 and np.max(np.abs(leaky_a / truth - 1)) < 0.02


def test_pipeline_folds_refit_each_upstream_stage_without_the_value_and_cache_it():
    frames = la.stage_frames(_sweep())
    folds = la.PipelineFolds(frames)
    consts = folds.constants(("chinchilla",), "n_params", SIZES[0])
    direct = lf.fit_stage("chinchilla", frames["chinchilla"][frames["chinchilla"]["n_params"] != SIZES[0]]).params
    assert consts == direct
    assert folds.constants(("chinchilla",), "n_params", SIZES[0]) is not consts  # a fresh dict, cached fit
    assert len(folds._cache) == 1
    tiny = la.PipelineFolds({"chinchilla": frames["chinchilla"][frames["chinchilla"]["n_params"] <= SIZES[1]]})
    with pytest.raises(ValueError, match="upstream stage 'chinchilla' has 3 distinct design points"):
        tiny.constants(("chinchilla",), "n_params", SIZES[0])


def test_paired_rows_match_n_d_and_seed_and_name_the_rows_dropped():
    df = _sweep()
    frames = la.stage_frames(df)
    hp, lp = frames["chinchilla"], frames["neff_w"]
    paired, dropped = la.paired_rows(lp, hp)
    assert len(paired) == len(lp) and dropped == []
    np.testing.assert_array_equal(paired["loss_base"].to_numpy(),
                                  paired.merge(hp, left_on="hp_run_id", right_on="run_id")["loss_val_y"].to_numpy())
    one = hp.iloc[[0]]
    twice = pd.concat([hp, one.assign(run_id="dup", obs_id="dup-none")])  # two partners: ambiguous
    without = hp.drop(index=hp.index[1])
    for partners, cell in ((twice, one.iloc[0]), (without, hp.iloc[1])):
        paired, dropped = la.paired_rows(lp, partners)
        gone = lp[(lp["n_params"] == cell["n_params"]) & (lp["n_tokens"] == cell["n_tokens"])]["obs_id"]
        assert sorted(dropped) == sorted(gone) and len(paired) == len(lp) - len(gone) == len(lp) - 4
    other_seed = lp.assign(seed=1)
    assert la.paired_rows(other_seed, hp)[0].empty
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['seed'\]"):
        la.paired_rows(lp.drop(columns="seed"), hp)


@pytest.mark.slow
def test_run_fits_writes_both_held_out_scores_and_the_paired_fit(tmp_path):
    df = _sweep()
    df = df[~((df["n_params"] == SIZES[0]) & (df["n_tokens"] == BUDGETS[0]) & (df["bits_w"] == 16))]
    recs = la.run_fits("smoke", n_boot=8, root=tmp_path, frame=df)
    w, p = recs["neff_w"], recs["neff_w_paired"]
    assert w["holdout_pipeline"]["n_params"]["upstream"] == ["chinchilla"]
    assert w["holdout_pipeline"]["n_params"]["r2"] != w["holdout"]["n_params"]["r2"]
    assert recs["chinchilla"]["holdout_pipeline"]["n_params"]["r2"] == recs["chinchilla"]["holdout"]["n_params"]["r2"]
    assert p["status"] == "ok" and p["pairing"]["n_rows"] == 48 and p["pairing"]["n_paired"] == 44
    assert sorted(p["pairing"]["unpaired_obs_ids"]) == sorted(f"run-{SIZES[0]:g}-{BUDGETS[0]:g}-{b}-none"
                                                              for b in BITS_W[1:])
    for rec in (w, p):  # both recover the paper's weight constants; f_w(4) is the form at the fit
        assert abs(rec["params"]["gamma_w"] - PC["gamma_w"]) < 0.4
        f4 = rec["f_4bits"]
        assert f4["value"] == pytest.approx(float(forms.precision_factor(4, rec["params"]["gamma_w"],
                                                                         rec["params"]["n_w"])))
        assert f4["ci95"][0] <= f4["value"] <= f4["ci95"][1]
    v = la.verdict_p3(recs, "smoke", df)
    assert v.details["holdout_r2"] == pytest.approx(w["holdout_pipeline"]["n_params"]["r2"])
    assert v.details["holdout_r2_fixed_upstream"] == pytest.approx(w["holdout"]["n_params"]["r2"])
    assert v.details["gamma_w_paired"] == pytest.approx(p["params"]["gamma_w"])
    assert v.details["f_w_4_paired_lo"] == pytest.approx(p["f_4bits"]["ci95"][0]) and v.details["n_paired"] == 44
    assert "44 of 48 rows paired" in v.ours and "absolute losses" in v.reason
    table = la.holdout_table(recs)
    assert table.loc[("neff_w", "one size"), "R², refitted per fold"] == pytest.approx(
        w["holdout_pipeline"]["n_params"]["r2"])
    assert table.loc[("neff_w", "one size"), "earlier stages"] == "chinchilla"
    pt = la.paired_table(recs)
    assert pt.loc["γ_w [bits]", "paired differences"].startswith(f"{p['params']['gamma_w']:.3g} [")
    assert pt.loc["γ_a [bits]", "paired differences"] == "—"
    assert "44 of 48 rows paired" in la.pairing_text(recs)

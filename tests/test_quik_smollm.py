"""QUIK on SmolLM2-135M (bitlaws.study.quik_smollm): the window bootstrap, the Q1–Q3 rules on
synthetic windows from known worlds (each rule comes out both ways), and the committed rows.

Nothing here needs the optional model package: the rules read window rows, which the tests draw
from stated worlds, and the committed CSVs are checked for their own identities.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import quik_smollm as qs

QUIET = {"fp_loss": 4.0, "between_sd": 0.3, "s0": 0.002, "s1": 0.05, "n_windows": 24, "tokens": 128.0}


def _grade(claim, effects, noise=QUIET, seed=0):
    win = qs.synthetic_windows(effects, noise, seed=seed)
    return qs._GRADERS[claim](qs.bootstrap_losses(win, 400, seed=seed))


def test_bootstrap_row0_is_the_pooled_per_token_loss_and_resamples_are_paired():
    win = qs.synthetic_windows({"a": 0.1, "b": 0.5}, QUIET, seed=3)
    b = qs.bootstrap_losses(win, 300, seed=1)
    for m in ("fp", "a", "b"):
        g = win[win["method"] == m]
        assert b[m].iloc[0] == pytest.approx(g["nll_sum"].sum() / g["n_tokens"].sum(), rel=1e-12)
    # a method equal to fp plus a constant per token: every paired resample shows exactly that constant
    shifted = win[win["method"] == "fp"].assign(method="c", nll_sum=lambda d: d["nll_sum"] + 0.25 * d["n_tokens"])
    b2 = qs.bootstrap_losses(pd.concat([win, shifted]), 300, seed=1)
    assert np.allclose(b2["c"] - b2["fp"], 0.25, atol=1e-12)
    # unpaired noise between windows: the fp interval is wide, the paired difference narrow
    assert (b["fp"].quantile(0.975) - b["fp"].quantile(0.025)) > 5 * ((b["a"] - b["fp"]).quantile(0.975)
                                                                    - (b["a"] - b["fp"]).quantile(0.025))


def test_window_matrix_refuses_methods_on_different_windows():
    win = qs.synthetic_windows({"a": 0.1}, QUIET)
    with pytest.raises(ValueError, match="lack some evaluation windows"):
        qs.window_matrix(win[~((win["method"] == "a") & (win["window"] == 0))])


@pytest.mark.parametrize("claim", ["Q1", "Q2", "Q3"])
def test_each_rule_passes_in_the_papers_world_and_fails_in_the_null(claim):
    assert _grade(claim, qs.WORLDS[claim]["paper"])[0] == "reproduced"
    assert _grade(claim, qs.WORLDS[claim]["null"])[0] == "not reproduced"


def test_q1_partly_when_quik_is_resolvably_worse_than_a_simple_baseline_and_inconclusive_when_noisy():
    eff = {"quik_w8a8": 0.006, "rtn_w8a8": 0.001, "smoothquant_w8a8": 0.004}
    grade, s = _grade("Q1", eff)
    assert grade == "partly" and s["best_baseline"] == "rtn_w8a8" and s["quik_minus_baseline"][1] > 0
    noisy = {**QUIET, "s0": 0.08}  # the interval of +1 % straddles the 1 % line
    assert _grade("Q1", {"quik_w8a8": 0.01, "rtn_w8a8": 0.02, "smoothquant_w8a8": 0.02}, noisy)[0] == "inconclusive"


def test_q2_partly_without_collapse_or_when_random_columns_do_as_well():
    paper = qs.WORLDS["Q2"]["paper"]
    no_collapse = {**paper, "rtn_w4a4": 0.5, "rtn_w4a4_down8": 0.4, "smoothquant_w4a4": 0.45, "quik_w4a4_k0": 0.2,
                   "random_w4a4_k32": 0.2}
    grade, s = _grade("Q2", no_collapse)
    assert grade == "partly" and "c fail" in s["legs"]
    random_ok = {**paper, "random_w4a4_k32": paper["quik_w4a4"]}
    grade, s = _grade("Q2", random_ok)
    assert grade == "partly" and "d pass" not in s["legs"]


def test_q3_partly_when_only_one_leg_holds():
    paper = qs.WORLDS["Q3"]["paper"]
    grade, s = _grade("Q3", {**paper, "quik_w4a4_down4": paper["quik_w4a4"] + 0.001})
    assert grade == "partly" and s["legs"] == "a pass, b fail"


def test_power_is_high_on_the_papers_effect_and_false_positives_low_on_quiet_data():
    for claim in ("Q1", "Q2", "Q3"):
        p = qs.q_power(claim, QUIET, n_sim=20, n_boot=200)
        assert p["power"] >= 0.9 and p["false_positive"] <= 0.1, (claim, p)


def test_noise_model_recovers_the_simulated_noise():
    noise = {**QUIET, "n_windows": 400}
    win = qs.synthetic_windows({f"m{i}": mu for i, mu in enumerate((0.05, 0.2, 0.5, 1.0, 2.0))}, noise, seed=5)
    got = qs.noise_model(win)
    assert got["s1"] == pytest.approx(noise["s1"], abs=0.01)
    assert got["fp_loss"] == pytest.approx(noise["fp_loss"], abs=0.05)


def test_committed_rows_are_consistent_with_their_windows():
    try:
        rows, win, stats = qs.load_smollm_rows()
    except FileNotFoundError:
        pytest.skip("no committed SmolLM2 rows")
    assert rows["obs_id"].is_unique and set(rows["method"]) == set(win["method"])
    names, nll, tok = qs.window_matrix(win)  # every method on the same windows
    for _, r in rows.iterrows():
        i = names.index(r["method"])
        assert r["loss_val"] == pytest.approx(nll[i].sum() / tok.sum(), rel=1e-12)
        assert r["eval_tokens"] == tok.sum() and r["ppl"] == pytest.approx(math.exp(r["loss_val"]), rel=1e-12)
    fp = float(rows.loc[rows["method"] == "fp", "loss_val"].iloc[0])
    assert np.allclose(rows["delta_loss"], rows["loss_val"] - fp, atol=1e-12)
    assert (rows["weights_origin"] == "Q4_1-dequantized").all()
    if len(stats):
        assert (stats["absmax_ratio"] >= 1).all() and stats["stat_id"].is_unique


def test_chapter_comparison_sets_the_papers_delta_beside_ours():
    t = pd.DataFrame({"method": ["fp", "quik_w4a4", "rtn_w4a4"], "delta_loss": [0.0, 0.05, 0.9],
                      "delta_lo": [0.0, 0.04, 0.8], "delta_hi": [0.0, 0.06, 1.0],
                      "delta_nats_per_byte": [0.0, 0.05 / 3.5, 0.9 / 3.5]})
    cmp = qs.paper_comparison(t)
    assert list(cmp.index) == ["quik_w4a4", "rtn_w4a4"]  # the paper's pairs that were run, in order
    assert cmp.loc["quik_w4a4", "paper Δ [nats/LLaMA token]"] == pytest.approx(math.log(5.84 / 5.47))
    assert cmp.loc["rtn_w4a4", "paper Δ [nats/LLaMA token]"] == pytest.approx(math.log(1.0e4 / 9.34))
    assert cmp.loc["rtn_w4a4", "ours Δ [nats/token]"] == 0.9 and cmp.loc["rtn_w4a4", "hi"] == 1.0
    assert dict(qs.PAPER_PAIRS)["smoothquant_w4a4"] == pytest.approx(math.log(83.12 / 5.47))


def test_quik_verdict_tables_fold_each_reason_under_the_table():
    from bitlaws.study import quik_accuracy, quik_smollm
    from bitlaws.study.claims import Verdict

    v = {"Q1": Verdict("Q1", "reproduced", "W8A8 lossless", "+0.03 %", "the rule's reason. ", "cpu", "", {})}
    for text in (quik_accuracy.verdicts_markdown(v), quik_smollm.verdicts_markdown(v, {"Q1": "partly"})):
        table, fold = text.split("\n\n", 1)
        assert "**reproduced**" in table and "reason" not in table  # the table stays short
        assert fold == "```{dropdown} Why each grade (the rule's own words)\n*Q1.* the rule's reason.\n```"

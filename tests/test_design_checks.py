"""The design checks' decisions (bitlaws.study.design_checks) on constructed rows whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bitlaws.study.design_checks import (cooldown_jump, delta_at_equal_loss, lr_rule_check, repetition_effect,
                                         schedule_decision)

D = np.array([2.0 ** k for k in range(19, 24)])  # 0.5M ... 8.4M
WIGGLE = np.array([0.03, -0.05, 0.02, 0.04, -0.04])  # fixed residuals in log δ: slopes get a finite SE


def _series(schedule, slope, size="n27k", bits=3, d=D, wiggle=WIGGLE, level=1e-3):
    delta = level * (d / d[0]) ** slope * np.exp(wiggle[: len(d)])
    return pd.DataFrame({"size": size, "schedule": schedule, "d_branch": d.astype(int), "n_tokens": d.astype(int),
                         "bits_post": bits, "delta_ptq": delta, "loss_pre": 2.5 - 0.1 * np.log2(d / d[0])})


def test_schedule_decision_names_each_explanation_and_its_slopes():
    cases = {"tokens": (1.0, 1.0), "decay": (0.0, 1.0), "both": (0.5, 1.5)}
    for want, (s_const, s_cos) in cases.items():
        t = pd.concat([_series("constant", s_const), _series("cosine", s_cos)])
        row = schedule_decision(t).iloc[0]
        assert row["answer"] == want, (want, row.to_dict())
        x, y = np.log(D), np.log(t[t["schedule"] == "constant"]["delta_ptq"].to_numpy())
        assert row["slope_constant"] == pytest.approx(stats.linregress(x, y).slope, rel=1e-12)
        assert row["slope_constant"] == pytest.approx(s_const, abs=0.03)  # the wiggle moves it a little
        assert (row["d_lo"], row["d_hi"], row["n_constant"]) == (int(D[0]), int(D[-1]), 5)


def test_schedule_decision_cuts_the_cosine_to_the_constant_span_and_needs_three_points():
    long = np.array([2.0 ** k for k in range(19, 26)])
    cos = _series("cosine", 1.0, d=long, wiggle=np.r_[WIGGLE, 0.0, 0.0])
    cos.loc[cos["d_branch"] > D[-1], "delta_ptq"] = 10.0  # beyond the span: must not be read
    row = schedule_decision(pd.concat([_series("constant", 1.0), cos])).iloc[0]
    assert row["n_cosine"] == 5 and row["slope_cosine"] == pytest.approx(1.0, abs=0.03)
    short = schedule_decision(pd.concat([_series("constant", 1.0, d=D[:2]), cos])).iloc[0]
    assert short["answer"] == "cannot tell" and not short["grows"]
    with pytest.raises(ValueError, match="missing"):
        schedule_decision(cos.drop(columns="d_branch"))


def test_cooldown_jump_is_the_geometric_mean_ratio_with_a_t_interval():
    c = _series("constant", 1.0)
    w = c.assign(schedule="wsd", n_tokens=c["n_tokens"] + 262_144,
                 delta_ptq=2.0 * c["delta_ptq"] * np.exp(WIGGLE / 10))
    row = cooldown_jump(pd.concat([c, w])).iloc[0]
    r = np.log(2.0) + WIGGLE / 10
    half = stats.t.ppf(0.975, 4) * r.std(ddof=1) / math.sqrt(5)
    assert row["k"] == 5 and row["ratio"] == pytest.approx(math.exp(r.mean()), rel=1e-12)
    assert row["ratio_lo"] == pytest.approx(math.exp(r.mean() - half), rel=1e-12) and row["raises"]
    flat = w.assign(delta_ptq=c["delta_ptq"].to_numpy() * np.exp([0.5, -0.5, 0.3, -0.3, 0.0]))
    row = cooldown_jump(pd.concat([c, flat])).iloc[0]
    assert row["ratio"] == pytest.approx(1.0, abs=1e-12) and not row["raises"]


def test_delta_at_equal_loss_interpolates_log_delta_exactly_when_it_is_linear_in_the_loss():
    frames = []
    for s, a, losses in (("constant", -9.0, [2.4, 2.2, 2.0]), ("cosine", -8.0, [2.5, 2.1, 1.8]),
                         ("wsd", -8.5, [2.3, 2.1, 1.95])):
        loss = np.array(losses)
        frames.append(pd.DataFrame({"size": "n27k", "bits_post": 3, "schedule": s, "loss_pre": loss,
                                    "delta_ptq": np.exp(a - 3.0 * (loss - 2.0)), "d_branch": 1, "n_tokens": 1}))
    out = delta_at_equal_loss(pd.concat(frames)).set_index("schedule")
    target = 0.5 * (2.0 + 2.3)  # the overlap of [2.0, 2.4], [1.8, 2.5], [1.95, 2.3]
    assert out["loss_target"].tolist() == pytest.approx([target] * 3, rel=1e-12)
    for s, a in (("constant", -9.0), ("cosine", -8.0), ("wsd", -8.5)):
        assert out.loc[s, "delta_ptq"] == pytest.approx(math.exp(a - 3.0 * (target - 2.0)), rel=1e-12)
    apart = pd.concat([frames[0], frames[1].assign(loss_pre=frames[1]["loss_pre"] - 1.0)])
    assert delta_at_equal_loss(apart, ("constant", "cosine")).empty  # the losses never meet


def test_repetition_effect_compares_each_fraction_with_the_whole_split_against_the_noise():
    rows = pd.DataFrame({"size": "n27k", "n_tokens": 8_388_608, "bits_post": 3,
                         "train_fraction": [1.0, 0.5, 0.25], "passes": [1.8, 3.6, 7.2],
                         "loss_pre": 1.8, "loss_post": [1.90, 1.91, 2.00], "delta_ptq": [0.10, 0.1005, 0.20]})
    out = repetition_effect(rows, lambda d: 0.01, post_sd=0.01, dof=1000).set_index("train_fraction")
    t = stats.t.ppf(0.975, 1000)
    assert out.loc[0.5, "d_delta"] == pytest.approx(0.0005) and out.loc[0.5, "answer"] == "no effect"
    assert out.loc[0.25, "answer"] == "raises" and out.loc[0.25, "loss_answer"] == "raises"
    assert out.loc[0.25, "sd_delta"] == pytest.approx(math.sqrt(2) * 0.01, rel=1e-12)
    assert 0.1 > t * math.sqrt(2) * 0.01  # the rule's threshold, as the answers above read it
    low = rows.assign(delta_ptq=[0.10, 0.10, 0.02])
    assert repetition_effect(low, lambda d: 0.01, 0.01, 1000)["answer"].tolist() == ["no effect", "lowers"]
    with pytest.raises(ValueError, match="degrees of freedom"):
        repetition_effect(rows, lambda d: 0.01, 0.01, 0)


def _runs(size, d, lr, loss, seed=0, n=26_784):
    return {"status": "ok", "ptq_method": "none", "size": size, "n_params": n, "n_tokens": d, "seed": seed,
            "lr_peak": lr, "loss_val": loss}


def test_lr_rule_check_is_within_noise_only_when_the_gap_is_under_t_times_the_pair_sd():
    seeds = [_runs("n27k", 1_000, 3e-3, 2.0 + e, seed=i) for i, e in enumerate([-0.01, 0.0, 0.01])]
    seeds += [_runs("n27k", 2_000, 3e-3, 1.5 + e, seed=i) for i, e in enumerate([-0.02, 0.02])]
    base = pd.DataFrame(seeds)
    var = (0.01 ** 2 * 2 + 0.02 ** 2 * 2) / 3  # pooled: 2 + 1 degrees of freedom
    limit = stats.t.ppf(0.975, 3) * math.sqrt(2 * var)
    for gap, within in ((0.5 * limit, True), (1.5 * limit, False)):
        lr = pd.DataFrame([_runs("n27k", 1_000, 1.5e-3, 2.1), _runs("n27k", 1_000, 6e-3, 1.99 - gap)])
        row = lr_rule_check(base, lr).iloc[0]
        assert row["gap"] == pytest.approx(gap, rel=1e-9) and row["lr_best"] == 6e-3
        assert row["se"] == pytest.approx(math.sqrt(2 * var), rel=1e-12) and row["dof"] == 3
        assert bool(row["within_noise"]) is within
        # tried 1.5e-3, 3e-3 (the rule) and 6e-3: the best at the highest, so the optimum is not bracketed
        assert (row["lr_min"], row["lr_max"], row["edge"]) == (1.5e-3, 6e-3, "high")
    lr = pd.DataFrame([_runs("n27k", 1_000, 1.5e-3, 2.1), _runs("n27k", 1_000, 6e-3, 2.05)])
    assert lr_rule_check(base, lr).iloc[0]["edge"] == ""  # the rule's 3e-3 (loss 2.0 at seed 0) is the best
    lr = pd.DataFrame([_runs("n27k", 1_000, 1.5e-3, 1.9), _runs("n27k", 1_000, 6e-3, 2.05)])
    assert lr_rule_check(base, lr).iloc[0]["edge"] == "low"


def test_what_the_chapter_reads_when_a_sweep_has_no_rows(tmp_path):
    from bitlaws.study.design_checks import confound_coverage, confound_rows, repetition_plan
    from bitlaws.study.sweep import plan

    cov = confound_coverage("smoke", 2, root=tmp_path).set_index("experiment")
    for e in ("lr_peak", "lr_schedule", "repetition"):
        assert cov.loc[e, "runs_planned"] == len(plan("smoke", e)) > 0
        assert cov.loc[e, "runs_done"] == 0 and cov.loc[e, "missing"] == cov.loc[e, "runs_planned"]
        assert confound_rows("smoke", e, 2, root=tmp_path) is None
    with pytest.raises(ValueError, match="one of lr_peak"):
        confound_rows("smoke", "base_grid")
    rp = repetition_plan("cpu")
    assert set(map(tuple, rp[["size", "n_tokens"]].drop_duplicates().to_numpy())) == {
        ("n27k", 8_388_608), ("n27k", 16_777_216), ("n83k", 8_388_608)}
    for _, cell in rp.groupby(["size", "n_tokens"]):
        whole = cell[cell["train_fraction"] == 1.0]["passes"].iloc[0]
        assert cell.set_index("train_fraction")["passes"].to_dict() == pytest.approx(
            {1.0: whole, 0.5: 2 * whole, 0.25: 4 * whole}, rel=1e-12)
    assert rp[(rp["n_tokens"] == 8_388_608) & (rp["train_fraction"] == 1.0)]["passes"].iloc[0] == pytest.approx(1.82, abs=0.01)
    assert repetition_plan("gpu").empty


def test_equal_passes_effect_pairs_runs_with_the_same_passes():
    from bitlaws.study.design_checks import equal_passes_effect

    table = pd.DataFrame({"size": ["n27k"] * 4, "n_tokens": [8, 8, 16, 16], "train_fraction": [1.0, 0.5, 1.0, 0.5],
                          "passes": [1.0, 2.0, 2.0, 4.0], "bits_post": [3] * 4, "delta_ptq": [0.10, 0.15, 0.25, 0.26],
                          "loss_post": [2.0, 2.0, 2.05, 2.0]})
    out = equal_passes_effect(table, lambda d: 0.01 + 0 * d, dof=10**6, post_sd=0.02)
    # only (8, half) and (16, whole) share 2 passes; δ 0.15 → 0.25 against t·√2·0.01 = 0.0277
    assert len(out) == 1
    r = out.iloc[0]
    assert (r.d_small, r.d_large, r.answer) == (8, 16, "raises")
    assert r.d_delta == pytest.approx(0.10) and r.sd_delta == pytest.approx(0.01 * 2 ** 0.5)
    # the post-PTQ loss: +0.05 against t·√2·0.02 = 0.0554: no effect; without post_sd, none either
    assert r.d_loss_post == pytest.approx(0.05) and r.loss_answer == "no effect"
    assert equal_passes_effect(table.assign(loss_post=[2.0, 2.0, 2.06, 2.0]), lambda d: 0.01 + 0 * d, dof=10**6,
                               post_sd=0.02).iloc[0].loss_answer == "raises"
    quiet = equal_passes_effect(table.assign(delta_ptq=[0.10, 0.15, 0.16, 0.26]), lambda d: 0.01 + 0 * d, dof=10**6)
    assert quiet.iloc[0].answer == "no effect"  # 0.01 < 0.0277
    with pytest.raises(ValueError, match="degrees of freedom"):
        equal_passes_effect(table, lambda d: 0.01, dof=0)


def test_schedule_decision_needs_equivalence_for_tokens_and_drops_undetectable_delta():
    # the same slopes, but a constant-LR series too short and noisy to show equivalence: cannot tell
    noisy = pd.concat([_series("constant", 1.0, d=D[:3], wiggle=np.array([0.5, -0.6, 0.4])), _series("cosine", 1.0)])
    row = schedule_decision(noisy).iloc[0]
    assert not row["differs"] and not row["equivalent"] and row["answer"] == "cannot tell"
    # a δ at the floor is not a point: with it left out only 4 of 5 remain in each series
    t = pd.concat([_series("constant", 1.0), _series("cosine", 1.0)])
    row = schedule_decision(t, floor=float(t["delta_ptq"].min()) * 1.0001).iloc[0]
    assert row["n_constant"] == 4 and row["n_cosine"] == 4


def test_schedule_decision_keeps_its_columns_when_nothing_is_left():
    t = pd.concat([_series("constant", 1.0), _series("cosine", 1.0)])
    empty = schedule_decision(t, floor=1.0)  # every δ below the floor: no series
    assert empty.empty and {"answer", "slope_constant", "n_cosine"} <= set(empty.columns)
    assert len(schedule_decision(t, floor=float("nan"))) == 1  # no noise measured: nothing left out


def test_chapter_sentences_count_what_their_tables_hold():
    from bitlaws.study import design_checks as dc

    rep = pd.DataFrame({"answer": ["raises", "no effect", "no effect", "lowers"],
                        "loss_answer": ["raises", "no effect", "raises", "no effect"]})
    assert dc.repetition_summary(rep, 2, 6) == (
        "Of 4 (cell, fraction, method, P_post) comparisons, δ rises beyond the seed noise in 1, falls in 1, and "
        "stays within it in 2; the post-PTQ loss rises beyond it in 2 (2 of 6 runs still to make).")
    assert dc.repetition_summary(None, 6, 6).startswith("No rows yet (6 of 6 runs to make)")
    dec = pd.DataFrame({"method": ["gptq", "rtn"], "size": ["n27k", "n27k"], "bits_post": [3, 3],
                        "answer": ["tokens", "cannot tell"]})
    jumps = pd.DataFrame({"k": [3, 1], "raises": [True, False]})
    assert dc.schedule_short(dec, jumps) == (
        "1 of 2 (method, size, P_post) series give an answer (GPTQ INT3 at n27k: *tokens*), the rest *cannot tell* "
        "yet; a WSD cooldown raises δ beyond the scatter in 1 of the 1 series with two or more branch points.")
    # no series told: said in words, never "0 of 2 … give an answer (none)"
    assert dc.schedule_short(dec.assign(answer="cannot tell"), jumps).startswith(
        "None of the 2 (method, size, P_post) series gives an answer yet (each *cannot tell*); a WSD cooldown")
    assert dc.schedule_short(dec.assign(answer="tokens"), jumps).startswith(
        "All 2 (method, size, P_post) series give an answer (GPTQ INT3 at n27k: *tokens*, RTN INT3 at n27k: *tokens*);")
    lr = pd.DataFrame({"size": ["n27k"], "n_tokens": [2_097_152], "lr_rule": [4.2e-3], "lr_best": [8.4e-3],
                       "gap": [0.02], "se": [0.01], "t_crit": [2.09], "dof": [19], "within_noise": [True]})
    text = dc.lr_summary(lr, ["n1.2m"])
    assert text.startswith("At n27k (D = 2.1M) the rule's rate 0.0042 is within the seed noise of the best tried "
                           "rate 0.0084: gap 0.020 nats against a threshold of 0.021") and text.endswith(
        "Still missing: n1.2m.")
    both = pd.concat([lr, lr.assign(size="n1.2m", lr_rule=2.1e-3, lr_best=4.2e-3)], ignore_index=True)
    text = dc.lr_summary(both.assign(edge="high"), [])
    assert text.endswith("At every size checked the best rate is the highest tried, so the tried rates do not "
                         "bracket the optimum: the loss may fall further beyond them, and the gap is a lower bound "
                         "on what the rule leaves; every one is on the high side, a sign that the rule sits on one "
                         "side of the optimum across sizes, which the per-size test does not examine."), text
    assert "bracket" not in dc.lr_summary(both.assign(edge=""), [])
    assert dc.lr_summary(both.assign(edge=["high", ""]), []).endswith(
        "At n27k the best rate is the highest tried, so the tried rates do not bracket the optimum: the loss may "
        "fall further beyond them, and the gap is a lower bound on what the rule leaves.")


def test_retrain_agreement_compares_only_retrained_runs(monkeypatch):
    from bitlaws.study import design_checks as dc
    from bitlaws.study import store, sweep

    def row(run, v, lt, ts, bits=(4, 16, 16), ptq="none", when="2026-11-29T19:00:00Z"):
        return {"run_id": run, "eval_version": v, "loss_train": lt, "train_s": ts, "ptq_method": ptq,
                "bits_w": bits[0], "bits_a": bits[1], "bits_kv": bits[2], "timestamp": when}

    rows = pd.DataFrame([
        row("q1", 1, 2.00, 240.0), row("q1", 2, 2.03, 55.0, when="2026-12-05T16:15:22Z"),   # QAT, retrained: +0.03
        row("q1", 1, 9.99, 240.0, ptq="rtn"),                                    # a PTQ row: not read
        row("q2", 1, 2.10, 250.0), row("q2", 2, 2.09, 56.0, when="2026-12-05T16:16:00Z"),   # QAT, retrained: −0.01
        # QAT, retrained to its recorded loss (a row of five decimals against the exact number): reproduced
        row("q3", 1, 2.24933, 19.0), row("q3", 2, 2.2493303775787354, 15.0, when="2026-12-06T01:59:55Z"),
        row("q4", 1, 2.17144, 80.0), row("q4", 2, 2.171439, 70.0, when="2026-12-06T02:56:25Z"),
        row("h1", 1, 1.90, 100.0, (16, 16, 16)), row("h1", 2, 1.90 + 1e-6, 40.0, (16, 16, 16)),
        row("s1", 1, 1.80, 70.0), row("s1", 2, 1.80, 70.0),                      # one training: not compared
        row("v1", 1, 1.70, 70.0)])                                               # no version 2 yet
    monkeypatch.setattr(sweep, "declared_experiments", lambda profile: ["qat_joint"])
    monkeypatch.setattr(store, "load_runs", lambda profile, experiment, eval_version, root=None: rows)
    t = dc.retrain_agreement("cpu").set_index(["kind", "outcome"])
    assert t.loc[("qat", "differs"), "runs"] == 2 and t.loc[("qat", "differs"), "mean"] == pytest.approx(0.01)
    assert t.loc[("qat", "differs"), "sd"] == pytest.approx(np.std([0.03, -0.01], ddof=1))
    assert t.loc[("qat", "differs"), "max_abs"] == pytest.approx(0.03)
    assert t.loc[("qat", "differs"), "retrained"] == "2026-12-05"              # the date of the retraining
    assert t.loc[("qat", "reproduced"), "runs"] == 2 and t.loc[("qat", "reproduced"), "max_abs"] < 5e-6
    assert t.loc[("qat", "reproduced"), "retrained"] == "2026-12-06"
    assert t.loc[("high precision", "reproduced"), "runs"] == 1
    assert t.loc[("high precision", "reproduced"), "max_abs"] == pytest.approx(1e-6)
    assert math.isnan(t.loc[("high precision", "reproduced"), "sd"]) and len(t) == 3
    # what the chapter says of them: the text's count is the table's total, split by outcome
    f = dc.rerun_facts(None, t.reset_index())
    assert (f["retrain_runs"], f["retrain_same"], f["retrain_diff"]) == ("4", "2", "2")
    assert (f["retrain_same_on"], f["retrain_diff_on"]) == ("2026-12-06", "2026-12-05")
    assert f["retrain_same_max"] == "1.0e-06"
    assert f["retrain_sd"] == f"{np.std([0.03, -0.01], ddof=1):.3f}" and f["retrain_max"] == "0.030"  # the differing
    assert f["retrain_same_sweeps"] == f["retrain_diff_sweeps"] == "`qat_joint`"
    assert f["hp_says"] == "All 1 retrained high-precision runs gave their recorded training loss back."
    moved = pd.concat([t.reset_index(), pd.DataFrame([{"kind": "high precision", "outcome": "differs", "runs": 3,
                                                        "max_abs": 8e-4, "experiment": "base_grid"}])])
    assert dc.rerun_facts(None, moved, seed_sd=0.016)["hp_says"] == (
        "Of the 4 retrained high-precision runs, 1 gave their recorded training loss back and 3 moved, by at most "
        "8.0e-04 nats/byte, 20× below one run's seed sd: high-precision runs are reproduced to well within the "
        "seed noise, though not always to the last digit.")


def test_cpu_path_check_is_exact_on_one_path_and_refuses_an_unknown_run():
    from bitlaws.study import design_checks as dc
    from bitlaws.study.sweep import plan

    spec = plan("smoke")[0]
    # the same path twice, each in a fresh process: a run is a pure function of its configuration
    t = dc.cpu_path_check("smoke", [(spec.experiment, spec.run_id)], paths=("", ""), progress=False)
    assert len(t) == 2 and t["loss_val"].iloc[0] == t["loss_val"].iloc[1]
    assert list(t["step_apart"]) == [-1, -1] and list(t["aten_capability"]) == ["native", "native"]
    with pytest.raises(ValueError, match="declares no run 'nosuch'"):
        dc.cpu_path_check("smoke", [(spec.experiment, "nosuch")], progress=False)


def test_cpu_path_view_and_rerun_facts_read_shifts_from_each_runs_native_path():
    from bitlaws.study import design_checks as dc

    def row(run, kind, path, loss, apart):
        return {"run_id": run, "kind": kind, "aten_capability": path, "cpu_capability": path.upper(),
                "loss_val": loss, "recorded_loss_val": 2.0 if kind == "qat" else 1.9, "step_apart": apart}

    t = pd.DataFrame([row("aaaaaaaaaaaa", "qat", "native", 2.10, -1), row("aaaaaaaaaaaa", "qat", "avx2", 2.08, 40),
                      row("aaaaaaaaaaaa", "qat", "default", 2.13, 60),
                      row("bbbbbbbbbbbb", "high precision", "native", 1.90, -1),
                      row("bbbbbbbbbbbb", "high precision", "avx2", 1.90 + 3e-7, -1)])
    v = dc.cpu_path_view(t)
    assert list(v["run"]) == ["aaaaaaaa"] * 3 + ["bbbbbbbb"] * 2 and list(v["isa"])[:2] == ["NATIVE", "AVX2"]
    assert v["shift"].tolist() == pytest.approx([0.0, -0.02, 0.03, 0.0, 3e-7], abs=1e-12)
    retrained = pd.DataFrame({"experiment": ["a", "b", "d", "c"], "kind": ["qat", "qat", "qat", "high precision"],
                              "outcome": ["differs", "differs", "reproduced", "reproduced"],
                              "runs": [3, 5, 6, 4], "retrained": ["2026-12-05", "2026-12-05", "2026-12-06", ""],
                              "sd": [0.01, 0.02, 3e-6, 1e-6], "max_abs": [0.02, 0.05, 5e-6, 3e-6]})
    f = dc.rerun_facts(t, retrained, seed_sd=0.0162)
    assert (f["path_qat"], f["path_hp"], f["path_step"]) == ("0.030", "3e-07", "40–60")
    assert (f["native_isa"], f["seed_sd"]) == ("NATIVE", "0.016")
    assert "lies 0.100 nats/byte from it on a machine of unrecorded model" in f["record_says"]  # |2.10 − 2.00|
    pooled = math.sqrt((2 * 0.01 ** 2 + 4 * 0.02 ** 2) / 6)                    # weights runs − 1, runs that differ
    assert (f["retrain_runs"], f["retrain_sd"], f["retrain_max"]) == ("14", f"{pooled:.3f}", "0.050")
    assert f["retrain_sd_run"] == f"{pooled / math.sqrt(2):.3f}"               # Δ of two trainings: √2 × one
    assert (f["retrain_same"], f["retrain_diff"], f["retrain_diff_sweeps"]) == ("6", "8", "`a` and `b`")
    assert dc.rerun_facts(t, retrained.drop(columns=["outcome", "retrained"]))["retrain_sd"] == \
        f"{math.sqrt((2 * 0.01 ** 2 + 4 * 0.02 ** 2 + 5 * 3e-6 ** 2) / 11):.3f}"  # a table without outcomes: all differ
    assert dc.cpu_path_view(t.drop(columns="cpu_capability"))["isa"].eq("—").all()  # a table made before the column
    none = dc.rerun_facts(None, retrained.iloc[:0])
    assert none == {"path_qat": "n/a", "path_hp": "n/a", "path_step": "n/a", "native_isa": "n/a",
                    "record_says": "The check has no QAT run with a native rerun and a recorded loss to compare.",
                    "machine_says": "Nor can the CPU-path check, which has no QAT run with a recorded loss.",
                    "retrain_runs": "no", "retrain_same": "no", "retrain_diff": "no", "retrain_same_sweeps": "",
                    "retrain_diff_sweeps": "", "retrain_same_on": "", "retrain_diff_on": "", "retrain_same_max": "n/a",
                    "retrain_sd": "n/a", "retrain_sd_run": "n/a", "retrain_max": "n/a", "seed_sd": "n/a",
                    "hp_says": "No high-precision run was retrained."}


# --- how chapter 07 shows its tables, figure caption and coverage sentences --------------------------------

def test_table_view_writes_every_cell_for_a_reader():
    from bitlaws.study import design_checks as dc

    assert [dc.tokens_text(x) for x in (8_388_608, 16_777_216, 2_097_152, 524_288, 512, float("nan"))] == \
        ["8.4M", "16.8M", "2.1M", "524k", "512", "—"]
    assert [dc.tokens_text(x) for x in (math.inf, -math.inf, None)] == ["∞", "—", "—"]  # D_crit never reached
    assert [dc.signed_text(x) for x in (0.0, -0.0163, 1.6e-7, float("nan"))] == ["0", "-1.6e-02", "+1.6e-07", "—"]
    df = pd.DataFrame({"method": ["gptq", "rtn"], "n_tokens": [8_388_608, 2_097_152], "bits_post": [3, 4],
                       "gap": [-0.00001, 0.0254], "within_noise": [True, False], "shift": [0.0, -0.0163],
                       "runs": [1234, 5], "se": [float("nan"), 0.5]})
    sty = dc.table_view(df, ["method", "n_tokens", "bits_post", "gap", "within_noise", "shift", "runs", "se"])
    v = sty.data
    assert list(v.columns) == ["method", "D", "P_post", "gap [nats]", "within noise", "shift", "runs", "se"]
    assert v.iloc[0].tolist() == ["GPTQ", "8.4M", "3", "0.000", "yes", "0", "1,234", "—"]   # no "-0.000", no +0.0e+00
    assert v.iloc[1].tolist() == ["RTN", "2.1M", "4", "0.025", "no", "-1.6e-02", "5", "0.500"]
    assert "8388608" not in sty.to_html() and "row_heading" not in sty.to_html()               # no pandas index column
    # a caller's format and header win over the defaults
    own = dc.table_view(df, ["n_tokens", "gap"], formats={"n_tokens": "{:,}"}, headers={"gap": "Δ"}).data
    assert list(own.columns) == ["D", "Δ"] and own.iloc[0, 0] == "8,388,608"
    with pytest.raises(KeyError, match="nosuch"):
        dc.table_view(df, ["nosuch"])


def test_repetition_and_equal_passes_views_keep_the_numbers_in_fewer_columns():
    from bitlaws.study import design_checks as dc

    eff = pd.DataFrame({"method": ["gptq"], "size": ["n27k"], "n_tokens": [8_388_608], "bits_post": [3],
                        "train_fraction": [0.5], "passes": [3.6472], "passes_whole": [1.8236], "delta_whole": [0.1251],
                        "delta_frac": [0.1503], "d_delta": [0.0252], "sd_delta": [0.02], "d_loss_post": [0.0491],
                        "sd_loss_post": [0.03], "answer": ["no effect"], "loss_answer": ["raises"]})
    v = dc.repetition_view(eff)
    assert v.iloc[0].tolist() == ["n27k at 8.4M", "GPTQ INT3", "1.82 → 3.65", "0.125 → 0.150", "no effect", "+0.049",
                                  "raises"]
    assert len(v.columns) == 7 and not any("_" in c and c != "δ_PTQ" for c in v.columns)  # no raw column names
    tok = pd.DataFrame({"method": ["rtn"], "size": ["n27k"], "bits_post": [4], "passes": [3.6472],
                        "d_small": [8_388_608], "d_large": [16_777_216], "delta_small": [0.0643],
                        "delta_large": [0.0631], "answer": ["no effect"], "d_loss_post": [-0.0605],
                        "loss_answer": ["lowers"]})
    assert dc.equal_passes_view(tok).iloc[0].tolist() == ["n27k", "RTN INT4", "3.65", "8.4M → 16.8M", "0.064 → 0.063",
                                                          "no effect", "-0.060", "lowers"]


def test_repetition_caption_says_no_lines_only_without_rows():
    from bitlaws.study import design_checks as dc

    empty = pd.DataFrame(columns=["size", "n_tokens", "bits_post", "passes", "delta_ptq", "loss_post"])
    for none in (None, {}, {"gptq": empty, "rtn": empty}):
        assert dc.repetition_caption(none) == "no lines, as the repetition sweep has no rows yet."
    rows = empty.iloc[:0].reindex(range(2)).assign(bits_post=[3, 4])
    text = dc.repetition_caption({"gptq": rows, "rtn": rows}, bits=(3, 4))
    assert "no lines" not in text and "(GPTQ and RTN)" in text and "(INT3 and INT4)" in text
    only = dc.repetition_caption({"gptq": rows.iloc[:1], "rtn": empty}, bits=(3, 4))   # what has rows, nothing else
    assert "(GPTQ)" in only and "(INT3)" in only and "RTN" not in only


def test_repetition_figure_puts_its_legend_below_the_axes():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bitlaws.study.figures.confounds import repetition_figure

    def table(level):
        return pd.DataFrame([{"size": z, "n_tokens": d, "bits_post": b, "passes": p * d / 8_388_608,
                              "delta_ptq": level * b * p, "loss_post": 2.0 + 0.01 * p}
                             for z, d in (("n27k", 8_388_608), ("n83k", 8_388_608)) for b in (3, 4)
                             for p in (1.82, 3.65, 7.29)])

    fig = repetition_figure({"gptq": table(0.01), "rtn": table(0.02)}, bits=(3, 4))
    fig.canvas.draw()
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    leg = fig.legends[0].get_window_extent()
    assert all(not leg.overlaps(ax.get_window_extent()) for ax in fig.axes)   # it covers no line
    assert leg.y1 <= min(ax.get_window_extent().y0 for ax in fig.axes)         # below every axes
    assert [t.get_text() for t in fig.legends[0].get_texts()][:1] == ["GPTQ n27k, D=8.4M"]
    # every series reads without colour: no two share a (marker, line style) pair, in the axes and
    # in the legend, whose text is no smaller than the tick labels
    for ax in fig.axes:
        styles = [(ln.get_marker(), ln.get_linestyle()) for ln in ax.get_lines()]
        assert len(styles) == 4 and len(set(styles)) == len(styles)
    handles = fig.legends[0].legend_handles
    assert len({(h.get_marker(), h.get_linestyle()) for h in handles}) == len(handles) == 4
    tick = fig.axes[0].get_yticklabels()[0].get_fontsize()
    assert all(t.get_fontsize() >= tick for t in fig.legends[0].get_texts())
    plt.close(fig)
    empty = repetition_figure({}, bits=(3,))
    assert not empty.legends
    plt.close(empty)


def test_coverage_and_cannot_tell_sentences_follow_what_is_missing():
    from bitlaws.study import design_checks as dc

    cov = pd.DataFrame({"experiment": ["lr_peak", "lr_schedule"], "runs_planned": [4, 30], "runs_done": [4, 30],
                        "missing": [0, 0]})
    assert dc.coverage_sentence(cov, 2) == ("`lr_peak` 4 of 4; `lr_schedule` 30 of 30 (evaluation version 2): every "
                                            "declared run is in; the chapter reads whatever rows exist.")
    part = dc.coverage_sentence(cov.assign(runs_done=[4, 27], missing=[0, 3]), 2)
    assert "3 declared runs are still missing, listed under each section" in part and "every declared" not in part
    done = dc.cannot_tell_sentence(0, 30)
    assert done.startswith("Every declared schedule run is in (30 of 30)") and "listed above" not in done
    short = dc.cannot_tell_sentence(4, 30)
    assert "4 of the 30 declared schedule runs are still missing, listed above" in short and "Every" not in short


def test_cpu_model_reads_the_model_name_and_falls_back(monkeypatch):
    import platform

    from bitlaws.study import design_checks as dc

    import hashlib

    fake = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
            "model name\t: AMD EPYC  9654 96-Core Processor\nstepping\t: 1\nflags\t\t: fpu  avx512f\n\n"
            "processor\t: 1\ncpu family\t: 26\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu\n")
    h = hashlib.sha256(b"fpu avx512f").hexdigest()[:8]                  # the first block's flags, spaces collapsed
    assert dc.cpu_model(fake) == f"AMD EPYC 9654 96-Core Processor (family 25, model 17, stepping 1; flags {h})"
    # two hosts behind one generic hypervisor name but with other CPUs get other keys
    generic = "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n"
    a, b = dc.cpu_model(generic + "flags\t\t: fpu avx512f\n"), dc.cpu_model(generic + "flags\t\t: fpu avx2\n")
    assert a.startswith("AMD EPYC (family 25, model 17, stepping 1; flags ") and a != b
    assert dc.cpu_model(generic.replace("stepping\t: 1", "stepping\t: 2") + "flags\t\t: fpu avx512f\n") != a
    assert dc.cpu_model("model name\t: AMD EPYC\n") == "AMD EPYC"        # nothing else there: the bare name
    assert dc.cpu_model("model name\t: X\nflags\t: fpu\n") == f"X (flags {hashlib.sha256(b'fpu').hexdigest()[:8]})"
    monkeypatch.setattr(platform, "processor", lambda: "x86_64")
    assert dc.cpu_model("processor\t: 0\nmodel\t: 85\n") == "x86_64"     # no model name line: platform's
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert dc.cpu_model("") == "unknown"
    assert isinstance(dc.cpu_model(), str) and dc.cpu_model()             # this machine, whatever it is


def _path_rows(machine, qat_native, recorded=2.0, isa="AVX512", when="2026-12-07T10:00:00Z"):
    """A two-run, two-path cpu_path_check table of one machine (None: a file made before cpu_model)."""
    rows = []
    for run, kind, native, rec in (("aaaaaaaaaaaa", "qat", qat_native, recorded),
                                   ("bbbbbbbbbbbb", "high precision", 1.9, 1.9)):
        for path, cap, shift in (("native", isa, 0.0), ("avx2", "AVX2", 0.01 if kind == "qat" else 2e-7)):
            rows.append({"run_id": run, "experiment": "qat_joint" if kind == "qat" else "base_grid", "kind": kind,
                         "aten_capability": path, "cpu_capability": cap, "loss_val": native + shift,
                         "recorded_loss_val": rec, "step_apart": 40 if shift > 1e-3 else -1, "timestamp": when,
                         **({} if machine is None else {"cpu_model": machine})})
    return pd.DataFrame(rows)


def test_write_cpu_path_check_keeps_other_machines_and_replaces_its_own(tmp_path):
    from bitlaws.study import design_checks as dc

    dc.write_cpu_path_check(_path_rows(None, 2.03, when="2026-12-05T21:54:19Z"), "cpu", root=tmp_path)
    old = "not recorded (2026-12-05 machine)"
    assert set(dc.load_cpu_path_check("cpu", root=tmp_path)["cpu_model"]) == {old}  # named by its rows' date
    (tmp_path / "checks/cpu/cpu_path_check.csv").write_text(  # a file written before the column
        _path_rows(None, 2.03, when="2026-12-05T21:54:19Z").to_csv(index=False))
    assert set(dc.load_cpu_path_check("cpu", root=tmp_path)["cpu_model"]) == {old}
    dc.write_cpu_path_check(_path_rows("AMD EPYC", 2.0), "cpu", root=tmp_path)
    t = dc.load_cpu_path_check("cpu", root=tmp_path)
    assert len(t) == 8 and t["cpu_model"].value_counts().to_dict() == {old: 4, "AMD EPYC": 4}
    assert list(t.columns[:len(dc.CPU_PATH_COLUMNS)]) == [c for c in dc.CPU_PATH_COLUMNS if c in t]
    dc.write_cpu_path_check(_path_rows("AMD EPYC", 2.0000001), "cpu", root=tmp_path)  # a rerun on the same machine
    t = dc.load_cpu_path_check("cpu", root=tmp_path)
    assert len(t) == 8 and (t[t["cpu_model"] == "AMD EPYC"]["loss_val"] == 2.0000001).sum() == 1
    assert (t[t["cpu_model"] == old]["loss_val"] == 2.03).sum() == 1                # the old machine's rows kept
    v = dc.cpu_path_view(t)                                                      # shifts within each machine
    assert list(v["machine"]) == [old] * 4 + ["AMD EPYC"] * 4
    assert v["shift"].tolist() == pytest.approx([0, 0.01, 0, 2e-7] * 2, abs=1e-12)


def test_path_sentences_say_which_machine_gives_the_record_back():
    from bitlaws.study import design_checks as dc

    old = _path_rows(None, 2.03, when="2026-12-05T21:54:19Z")          # today's file: one machine, off its record
    assert dc.path_record_sentence(old) == (
        "No path reproduces the QAT run's recorded loss: its native rerun lies 0.030 nats/byte from it on the "
        "2026-12-05 machine, more than any path there moves it, so its first training ran on other arithmetic "
        "than any path of that machine.")
    assert dc.path_machine_sentence(old) == "Nor can the CPU-path check until it holds a second machine."
    near = _path_rows(None, 2.005, when="2026-12-05T21:54:19Z")
    assert "no more than a path there moves it (0.010)" in dc.path_record_sentence(near)
    # a second machine with the same native ISA gives the record back: more than the ISA sets the arithmetic,
    # and a joint run can reproduce; neither machine fully identified, so the check cannot say what differs
    two = pd.concat([old, _path_rows("AMD EPYC", 2.000002)], ignore_index=True)
    assert dc.path_record_sentence(two) == (
        "The QAT run's native rerun gives its recorded loss back on the AMD EPYC (|Δ| ≤ 2e-06 nats/byte), but "
        "lies 0.030 nats/byte from it on the 2026-12-05 machine, more than any path there moves it. Both ran "
        "ATen's AVX512 path natively, so the arithmetic depends on more than the instruction path; the check "
        "cannot say on what, since the 2026-12-05 machine's model is not recorded and “AMD EPYC” is a bare model "
        "name that different CPUs can share.")
    full = "AMD EPYC (family 25, model 17, stepping 1; flags 3f9a1c2e)"
    assert dc.path_record_sentence(pd.concat([_path_rows("AMD EPYC (family 25, model 1, stepping 0; flags 0a)",
                                                         2.03), _path_rows(full, 2.0)], ignore_index=True)).endswith(
        "Both ran ATen's AVX512 path natively, so the arithmetic depends on more than the instruction path.")
    machine = ("The CPU-path check does not settle it: its one `qat_joint` run gives its recorded loss back on the "
               "AMD EPYC and not on the 2026-12-05 machine, which shows only that being a `qat_joint` run does not "
               "by itself prevent reproduction.")
    assert dc.path_machine_sentence(two) == machine
    assert "decides" not in dc.path_machine_sentence(two, "108", "41")
    assert dc.path_machine_sentence(two, "108", "41") == machine + (
        " Which machine retrained the store's runs is unrecorded, so the split of its retrained QAT runs, 108 "
        "reproduced against 41 that differ, is consistent with a machine effect, not shown to be one.")
    no_retrained = pd.DataFrame(columns=["experiment", "kind", "runs"])
    assert dc.rerun_facts(two, no_retrained)["machine_says"] == machine                  # no split to speak of
    retrained = pd.DataFrame({"experiment": ["qat_marginal", "qat_joint"], "kind": "qat", "runs": [108, 41],
                              "outcome": list(dc.RETRAIN_OUTCOMES), "sd": [3e-6, 0.02], "max_abs": [5e-6, 0.047],
                              "retrained": ["2026-12-06", "2026-12-05"]})
    assert dc.rerun_facts(two, retrained)["machine_says"] == dc.path_machine_sentence(two, "108", "41")
    other_isa = pd.concat([old, _path_rows("Intel Xeon", 2.0, isa="AVX2")], ignore_index=True)
    assert dc.path_record_sentence(other_isa).endswith(
        "Their native paths differ (AVX512 on the 2026-12-05 machine and AVX2 on the Intel Xeon).")
    # a second machine that is off its record too, and machines that all give it back
    off = pd.concat([old, _path_rows("AMD EPYC", 2.02)], ignore_index=True)
    assert dc.path_record_sentence(off).startswith("No machine reproduces the QAT run's recorded loss: its native "
                                                   "rerun lies 0.030 nats/byte from it on the 2026-12-05 machine")
    assert dc.path_machine_sentence(off) == ("Nor can the CPU-path check: its QAT run gives its recorded loss back "
                                             "on none of its machines.")
    same = pd.concat([_path_rows("A", 2.0), _path_rows("B", 2.0)], ignore_index=True)
    assert dc.path_record_sentence(same) == ("The QAT run's native rerun gives its recorded loss back on the A and "
                                             "the B (|Δ| ≤ 0 nats/byte).")
    assert dc.path_machine_sentence(same).endswith("back on every machine.")

"""The PTQ chapter's analysis (``bitlaws.study.ptq_degradation``) on synthetic frames with known answers:
the critical-data-size brackets, Eq. 13, the per-method Eq. 2 fit, and the P1/P2 rules with GPTQ
carrying the verdict and RTN replicating. No numbers from our runs appear here.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import ptq_degradation as pa
from bitlaws.study.ptq_degradation import ARGMIN_LEVEL
from bitlaws.laws.forms import PAPER_CONSTANTS
from bitlaws.laws.optimal import brute_force_critical_data_size

PAPER_GAMMA_D = PAPER_CONSTANTS["gamma_D"]

NS = (10_000, 30_000, 100_000)
DS = (1_000_000, 2_000_000, 4_000_000, 8_000_000)
SEED_CELL = (10_000, 2_000_000)
CHIN = {"A": 50.0, "B": 500.0, "E": 1.0, "alpha": 0.45, "beta": 0.45}
EQ2 = {"C_T": 1e-4, "gamma_D": 0.9, "gamma_N": 0.3, "gamma_post": 0.6}


def base_loss(n, d):
    return CHIN["E"] + CHIN["A"] * n ** -CHIN["alpha"] + CHIN["B"] * d ** -CHIN["beta"]


def eq2_delta(params):
    return lambda n, d, b: params["C_T"] * d ** params["gamma_D"] * n ** -params["gamma_N"] * math.exp(
        -b / params["gamma_post"])


def make_frame(deltas: dict, bits=(3, 4, 5, 6), seed_jitter: float = 1e-5) -> pd.DataFrame:
    """Base-grid rows: every (N, D) at seed 0 plus seeds 1, 2 at SEED_CELL; ``deltas`` maps a PTQ
    method to δ(N, D, P_post). Seed s shifts every loss of its run by s·seed_jitter and each δ by
    s·seed_jitter/10, so the noise floor is known exactly."""
    rows = []
    cells = [(n, d, 0) for n in NS for d in DS] + [(*SEED_CELL, s) for s in (1, 2)]
    for n, d, s in cells:
        run = f"r{n}_{d}_{s}"
        lb = base_loss(n, d) + s * seed_jitter
        common = {"run_id": run, "experiment": "base_grid", "status": "ok", "seed": s, "n_params": n,
                  "n_tokens": d, "bits_w": 16, "bits_a": 16, "bits_kv": 16, "fmt_w": "none", "fmt_a": "none",
                  "fmt_kv": "none"}
        rows.append({**common, "obs_id": f"{run}_none", "ptq_method": "none", "quant_scheme": "none",
                     "bits_post": 16, "loss_val": lb, "delta_ptq": 0.0})
        for m, f in deltas.items():
            for b in bits:
                dl = f(n, d, b) + s * seed_jitter / 10
                rows.append({**common, "obs_id": f"{run}_{m}{b}", "ptq_method": m, "quant_scheme": f"q_{m}",
                             "bits_post": b, "loss_val": lb + dl, "delta_ptq": dl})
    return pd.DataFrame(rows)


# --- post_ptq_rise ---------------------------------------------------------------------------------

def _tab(series: dict[tuple[int, int], list[float]], ds=(1, 2, 4, 8), seeds=(1, 1, 1, 1)) -> pd.DataFrame:
    rows = [{"n_params": n, "bits_post": b, "n_tokens": d, "loss_post": y, "n_seeds": k}
            for (n, b), ys in series.items() for d, y, k in zip(ds, ys, seeds)]
    return pd.DataFrame(rows)


def _noise(post_sd: float, dof: int):
    from bitlaws.study.noise import NoiseModel

    return NoiseModel(loss_sd=post_sd, loss_dof=dof, post_sd=post_sd, post_dof=dof, delta_abs=1e-4, delta_rel=0.05,
                      delta_dof=dof, n_cells=2, n_groups=4)


def test_post_ptq_rise_brackets_the_minimum():
    from scipy import stats

    tab = _tab({(1, 3): [3.0, 2.0, 1.5, 1.7],     # minimum at D = 4, rise 0.2: D_crit in (2, 8)
                (1, 4): [1.0, 1.2, 1.3, 1.4],     # minimum at the smallest D: D_crit in (0, 2)
                (1, 5): [3.0, 2.0, 1.5, 1.2],     # still falling: no turn-up up to 8
                (2, 3): [3.0, 2.0, 1.5, 1.505]})  # a rise of 0.005, below the threshold t·0.01·√2
    out = pa.post_ptq_rise(tab, _noise(0.01, 4)).set_index(["n_params", "bits_post"])
    thr = stats.t.ppf(0.975, 4) * 0.01 * math.sqrt(2)  # 0.0393: P2's threshold, one seed at each end
    r = out.loc[(1, 3)]
    assert (r.d_best, r.d_max, r.significant, r.d_crit_lo, r.d_crit_hi) == (4, 8, True, 2.0, 8.0)
    assert r.rise == pytest.approx(0.2) and r.threshold == pytest.approx(thr, rel=1e-9)
    r = out.loc[(1, 4)]
    assert (r.d_best, r.significant, r.d_crit_lo, r.d_crit_hi) == (1, True, 0.0, 2.0)
    assert r.rise == pytest.approx(0.4)
    r = out.loc[(1, 5)]
    assert (r.d_best, r.significant, r.d_crit_lo) == (8, False, 8.0) and r.d_crit_hi == math.inf
    r = out.loc[(2, 3)]
    assert not r.significant and r.rise == pytest.approx(0.005) and (r.d_crit_lo, r.d_crit_hi) == (8.0, math.inf)
    # a rise of 0.03 is significant with 5 seeds at both ends (threshold 0.0393/√5 = 0.0176), not with 1
    rise = _tab({(1, 3): [3.0, 2.0, 1.5, 1.53]})
    assert not pa.post_ptq_rise(rise, _noise(0.01, 4))["significant"].iloc[0]
    five = _tab({(1, 3): [3.0, 2.0, 1.5, 1.53]}, seeds=(1, 1, 5, 5))
    assert pa.post_ptq_rise(five, _noise(0.01, 4))["significant"].iloc[0]


def test_critical_data_sizes_bracket_agrees_with_p2s_grade(known_fits):
    """One rule decides both P2's grade and the D_crit bracket of the ledger (a referee found them apart)."""
    from bitlaws.study.noise import noise_model
    from bitlaws.study.power import p2_statistics

    df = make_frame({"gptq": _turn_up({NS[0]}), "rtn": _turn_up(set())})
    for m in ("gptq", "rtn"):
        crit = pa.critical_data_sizes(df, m)
        st = p2_statistics(pa.ptq_table(df, m), noise_model(df, m))
        assert int(crit["significant"].sum()) == st["n_rising"]
        assert np.isfinite(crit.loc[crit["significant"], "d_crit_hi"]).all()
        assert np.isinf(crit.loc[~crit["significant"], "d_crit_hi"]).all()
    assert pa.critical_data_sizes(df, "gptq")["significant"].sum() >= 1


def test_trend_counts_on_a_hand_table():
    # two sizes × two budgets × INT3/INT4; floor 0.01 at both → threshold 0.02
    rows = [(1, 1, 3, 0.10), (1, 2, 3, 0.30), (2, 1, 3, 0.05), (2, 2, 3, 0.31),
            (1, 1, 4, 0.05), (1, 2, 4, 0.06), (2, 1, 4, 0.09), (2, 2, 4, 0.02)]
    tab = pd.DataFrame(rows, columns=["n_params", "n_tokens", "bits_post", "delta_ptq"])
    floor = {"delta_3": 0.01, "delta_4": 0.01}
    # with D: N=1 INT3 +0.20 agree, N=2 INT3 +0.26 agree, N=1 INT4 +0.01 within, N=2 INT4 −0.07 against
    assert pa.trend_with_d(tab, floor, bits=(3, 4)) == pa.TrendCount(4, 2, 3, 1)
    # against N: D=1 INT3 −0.05 agree, D=2 INT3 +0.01 within, D=1 INT4 +0.04 against, D=2 INT4 −0.04 agree
    assert pa.trend_with_n(tab, floor, bits=(3, 4)) == pa.TrendCount(4, 2, 3, 1)
    # against P_post: (1,1) 0.05 agree, (1,2) 0.24 agree, (2,1) −0.04 against, (2,2) 0.29 agree
    assert pa.trend_with_bits(tab, floor) == pa.TrendCount(4, 3, 3, 1)


# --- methods ---------------------------------------------------------------------------------------

def test_verdict_method_prefers_gptq():
    both = make_frame({"rtn": eq2_delta(EQ2), "gptq": eq2_delta(EQ2)})
    assert pa.methods_present(both) == ("gptq", "rtn") and pa.verdict_method(both) == "gptq"
    rtn = both[both["ptq_method"] != "gptq"]
    assert pa.methods_present(rtn) == ("rtn",) and pa.verdict_method(rtn) == "rtn"
    with pytest.raises(ValueError, match="no ok rows"):
        pa.verdict_method(both[both["ptq_method"] == "none"])


def test_noise_floor_is_per_method():
    df = make_frame({"rtn": eq2_delta(EQ2), "gptq": lambda n, d, b: 2 * eq2_delta(EQ2)(n, d, b)},
                    seed_jitter=3e-4)
    for m in ("rtn", "gptq"):
        f = pa.noise_floor(df, m)
        # seeds 0, 1, 2 shift the loss by 0, 3e-4, 6e-4 (σ = 3e-4) and δ by a tenth of that
        assert f["n_cells"] == 1.0 and f["loss"] == pytest.approx(3e-4, rel=1e-6)
        assert f["delta_3"] == pytest.approx(3e-5, rel=1e-6) and f["loss_post_3"] == pytest.approx(3.3e-4, rel=1e-6)


# --- Eq. 13 and the fits ---------------------------------------------------------------------------

def test_d_crit_eq13_closed_form_and_brute_force():
    n, b = 3e4, 3.0
    got = float(pa.d_crit_eq13(n, b, CHIN, EQ2))
    beta = CHIN["beta"]
    by_hand = (beta * CHIN["B"] * n ** EQ2["gamma_N"] * math.exp(b / EQ2["gamma_post"])
               / (EQ2["gamma_D"] * EQ2["C_T"])) ** (1 / (EQ2["gamma_D"] + beta))
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == pytest.approx(brute_force_critical_data_size(n, b, {**CHIN, **EQ2}), rel=1e-6)
    arr = pa.d_crit_eq13(np.array([1e4, 1e5]), np.array([3.0, 4.0]), CHIN, EQ2)
    assert arr.shape == (2,) and arr[1] > arr[0]
    assert np.isnan(pa.d_crit_eq13(n, b, {"B": math.nan, "beta": 0.4}, EQ2))
    assert np.isnan(pa.d_crit_eq13(n, b, CHIN, {**EQ2, "gamma_D": 0.0}))


def test_eq2_and_chinchilla_fits_recover_known_constants():
    df = make_frame({"gptq": eq2_delta(EQ2), "rtn": eq2_delta({**EQ2, "gamma_post": 0.8})}, seed_jitter=0.0)
    g, r = pa.eq2_fit(df, "gptq"), pa.eq2_fit(df, "rtn")
    for k in ("gamma_D", "gamma_N", "gamma_post"):
        assert g[k] == pytest.approx(EQ2[k], rel=1e-3), k
    assert r["gamma_post"] == pytest.approx(0.8, rel=1e-3)
    assert g["C_T"] == pytest.approx(EQ2["C_T"], rel=2e-2) and g["r2"] == pytest.approx(1.0, abs=1e-6)
    # rows: every run at P_post ∈ 3–6
    assert g["n_points"] == (len(NS) * len(DS) + 2) * 4
    c = pa.chinchilla_fit(df)
    for k in ("B", "beta", "E"):
        assert c[k] == pytest.approx(CHIN[k], rel=2e-2), k
    crit = pa.critical_data_sizes(df, "gptq")
    assert list(crit["method"].unique()) == ["gptq"] and len(crit) == len(NS) * 4
    want = pa.d_crit_eq13(crit["n_params"].to_numpy(float), crit["bits_post"].to_numpy(float), c, g)
    assert np.allclose(crit["d_crit_eq13"], want, rtol=1e-12)
    assert np.allclose(crit["d_crit_eq13_over_n"], want / crit["n_params"], rtol=1e-12)


def test_eq2_fit_too_few_points_is_nan():
    df = make_frame({"gptq": eq2_delta(EQ2)}, bits=(3,))
    small = df[(df["n_params"] == NS[0]) & df["n_tokens"].isin(DS[:2])]
    out = pa.eq2_fit(small, "gptq")
    assert all(math.isnan(out[k]) for k in ("C_T", "gamma_D", "gamma_N", "gamma_post", "r2"))


# --- the verdict rules -----------------------------------------------------------------------------

@pytest.fixture
def known_fits(monkeypatch):
    """The rules do not depend on the law fits (those are only reported): stand in known constants
    for them, so these tests do not spend seconds fitting."""
    monkeypatch.setattr(pa, "eq2_fit", lambda df, method: {**EQ2, "r2": 1.0, "n_points": 1.0, "n_cells": 1.0})
    monkeypatch.setattr(pa, "chinchilla_fit", lambda df: {**CHIN, "r2": 1.0, "n_points": 1.0, "n_cells": 1.0})


def test_p1_is_judged_on_gptq_with_rtn_as_replication(known_fits):
    paper = {**EQ2, "gamma_D": PAPER_GAMMA_D}
    good, flat_in_n = eq2_delta(paper), eq2_delta({**paper, "gamma_N": 0.0})
    v = pa.verdict_p1(make_frame({"gptq": good, "rtn": flat_in_n}), "test", n_sim=10)
    assert v.verdict == "reproduced" and v.details["method"] == "gptq"
    assert v.details["gptq_frac_with_d"] == v.details["gptq_frac_with_n"] == v.details["gptq_frac_with_bits"] == 1.0
    # a flat N series is unresolved (its change is within the noise), not a failure; but with no
    # resolved series the direction does not hold
    assert v.details["rtn_resolved_n"] == 0.0 and v.details["rtn_against_n"] == 0.0
    assert v.details["rtn_frac_with_n"] == "n/a" and v.details["rtn_grade"] == "partly"
    assert v.ours.startswith("GPTQ:") and "RTN (replication" in v.ours
    assert v.details["gptq_power"] >= 0.9 and v.details["gptq_false_positive"] <= 0.1

    v = pa.verdict_p1(make_frame({"gptq": flat_in_n, "rtn": good}), "test", n_sim=10)
    assert v.verdict == "partly" and v.details["rtn_grade"] == "reproduced"
    assert v.details["gptq_resolved_n"] == 0.0

    # the directions hold but γ_D = 0.9 excludes the paper's 0.51: partly, and the reason says so
    v = pa.verdict_p1(make_frame({"gptq": eq2_delta(EQ2)}), "test", n_sim=10)
    assert v.verdict == "partly" and v.details["gptq_grade"] == "partly"
    assert v.details["gptq_gamma_d_lo"] > PAPER_GAMMA_D and "excludes the paper's" in v.reason
    # profile "test" has no committed Eq. 2 fit, so the interval is the log-linear regression's: its own point
    # stands beside it, named, never the Huber fit's point beside another estimator's interval
    import re

    lo, hi = v.details["gptq_gamma_d_lo"], v.details["gptq_gamma_d_hi"]
    m = re.search(r"\(no current bootstrap of this fit; the log-linear regression on the resolved cells "
                  r"\(t-interval\): ([0-9.]+) \[([0-9.]+), ([0-9.]+)\]\)", v.ours)
    assert m and (m.group(2), m.group(3)) == (f"{lo:.2f}", f"{hi:.2f}"), v.ours
    # the ledger's point is that estimator's too (not the Huber fit's beside the regression's interval)
    assert f"{v.details['gptq_gamma_d_point']:.2f}" == m.group(1) and lo <= v.details["gptq_gamma_d_point"] <= hi
    assert lo <= float(m.group(1)) <= hi  # a t-interval holds its own point

    v = pa.verdict_p1(make_frame({"rtn": good}), "test", n_sim=10)
    assert v.verdict == "reproduced" and v.details["method"] == "rtn" and "no GPTQ rows" in v.reason
    assert not any(k.startswith("gptq_") for k in v.details)


def _turn_up(at: set[int], size: float = 0.05):
    """δ that rises steeply between the two largest D for the sizes in ``at`` (at INT3 only), so that
    the post-PTQ loss turns upward there; a small, falling-loss δ elsewhere."""
    def f(n, d, b):
        small = 1e-4 * math.exp(-(b - 3))
        return small + (size * (d / DS[-2]) ** 3 if n in at and b == 3 and d >= DS[-2] else 0.0)
    return f


def test_p2_rule(known_fits):
    from bitlaws.study.claims import POWER_MIN, power_gate

    none = _turn_up(set())
    cases = [({"gptq": _turn_up({NS[0]}), "rtn": none}, "reproduced", "not reproduced"),
             ({"gptq": _turn_up({NS[1]}), "rtn": none}, "partly", "not reproduced"),
             ({"gptq": none, "rtn": _turn_up({NS[0]})}, "not reproduced", "reproduced"),
             ({"gptq": none, "rtn": none}, "not reproduced", "not reproduced")]
    for deltas, want, want_rtn in cases:
        df = make_frame(deltas)
        v = pa.verdict_p2(df, "test", n_sim=10)
        assert (v.details["gptq_grade"], v.details["rtn_grade"]) == (want, want_rtn), (deltas, v.ours)
        # rule v3: inconclusive wherever the power with the paper's exponents is below POWER_MIN, a pass too
        pw = v.details["gptq_power"]
        assert v.verdict == ("inconclusive" if pw < POWER_MIN else power_gate(want, pw))
        rising = {m: int(pa.critical_data_sizes(df, m)["significant"].sum()) for m in deltas}
        assert v.details["gptq_series_rising"] == rising["gptq"] and v.details["rtn_series_rising"] == rising["rtn"]
    df = make_frame({"gptq": _turn_up({NS[0]}), "rtn": none})
    v = pa.verdict_p2(df, "test", n_sim=10)
    # the INT3 minimum of the smallest model is at the second-largest D: D_crit between its neighbours
    assert (v.details["gptq_int3_d_crit_lo"], v.details["gptq_int3_d_crit_hi"]) == (DS[-3], DS[-1])
    assert v.details["gptq_smallest_n_rising"] == 1.0 and v.details["rtn_int3_d_crit_hi"] == "n/a"
    assert v.details["gptq_int3_rise"] > v.details["gptq_int3_threshold"] > 0
    assert v.details["gptq_int3_d_crit_eq13"] == pytest.approx(float(pa.d_crit_eq13(NS[0], 3, CHIN, EQ2)), rel=1e-12)
    # the named series' 95 % set: where it holds the series' largest D, that D prints as the grid's edge and
    # the smallest model's bracket is flagged open above (the README's headline reads the flag)
    set_d = [int(x) for x in v.details["gptq_argmin_set"].split(", ")]
    at_edge = max(set_d) == DS[-1]
    assert v.details["gptq_argmin_at_edge"] == float(at_edge)
    assert v.details["gptq_int3_d_crit_open"] == float(at_edge)
    assert (f"for GPTQ (N = {NS[0]:,}, INT3; the set reaches the largest D trained" in v.reason) == at_edge
    # RTN has no turn-up here: its loss still falls at the largest D, which its set holds, printed as the edge
    assert v.details["rtn_argmin_at_edge"] == 1.0 and f"≥ {pa.tokens_text(DS[-1])} (the grid's edge)" in v.reason
    assert "Eq. 13 with our fitted constants" in v.ours and "(no interval: no draws stored" in v.ours


def test_argmin_set_text_marks_the_grids_edge():
    assert pa.argmin_set_text([8388608, 16777216], 16777216.0) == "{8.4M, ≥ 16.8M (the grid's edge)}"
    assert pa.argmin_set_text([4194304, 8388608], 16777216.0) == "{4.2M, 8.4M}"
    assert pa.argmin_set_text([16777216]) == "{16.8M}" and pa.argmin_set_text([], 1.0) == "{}"


def test_d_crit_interval_reads_eq13_per_paired_draw():
    # γ_D = β = 0.5 and γ_N = 1, P_post = 0: Eq. 13 reduces to D_crit = β·B·N/(γ_D·C_T) = B·N/C_T, so with
    # N = 10 and C_T = 1 each draw's D_crit is 10·B, whatever the draw's γ_post
    draws = pd.DataFrame({"B": np.arange(1.0, 41.0), "beta": 0.5, "C_T": 1.0, "gamma_D": 0.5, "gamma_N": 1.0,
                          "gamma_post": 0.6})
    v = pa.d_crit_draws(draws, 10.0, 0.0)
    assert np.allclose(v, 10.0 * np.arange(1.0, 41.0))
    out = pa.d_crit_interval(draws, 10.0, 0.0)
    # 40 draws: the 2.5 % order statistic rounded down is the 1st (index 0.975 → 0), the 97.5 % one rounded up
    # the 40th (index 38.025 → 39), the median rounded down the 20th (index 19.5 → 19)
    assert (out["lo"], out["median"], out["hi"]) == pytest.approx((10.0, 200.0, 400.0))
    assert out["n_draws"] == out["n_used"] == 40.0 and out["share_no_turn_up"] == 0.0
    # one draw with no turn-up (γ_D ≤ 0) counts as D_crit = inf, one without a constant is left out, and a draw
    # carrying the tied exponent as α reads it as β; P_post enters as e^(P/γ_post)
    rows = [{"B": 1.0, "alpha": 0.5, "C_T": 1.0, "gamma_D": 0.5, "gamma_N": 1.0, "gamma_post": 2.0},
            {"B": 1.0, "beta": 0.5, "C_T": 1.0, "gamma_D": -0.1, "gamma_N": 1.0, "gamma_post": 2.0},
            {"B": 1.0, "beta": 0.5, "gamma_D": 0.5, "gamma_N": 1.0, "gamma_post": 2.0}]
    v = pa.d_crit_draws(rows, 10.0, 2.0)
    assert v[0] == pytest.approx(10.0 * math.e) and v[1] == math.inf and math.isnan(v[2])
    out = pa.d_crit_interval(rows, 10.0, 2.0)
    assert out["n_used"] == 2.0 and out["share_no_turn_up"] == 0.5 and out["hi"] == math.inf
    assert math.isnan(pa.d_crit_interval(rows[2:], 10.0, 2.0)["lo"])
    with pytest.raises(ValueError, match="level"):
        pa.d_crit_interval(rows, 10.0, 2.0, level=1.0)
    # the committed constants' own Eq. 13, one draw: the point D_crit the verdict prints
    one = {**CHIN, **EQ2}
    assert pa.d_crit_draws([one], NS[0], 3)[0] == pytest.approx(float(pa.d_crit_eq13(NS[0], 3, CHIN, EQ2)))


def test_d_crit_shape_is_eq13s_n_exponent_and_factor_per_bit_free_of_units():
    # Eq. 13: D_crit = [β·B·N^γ_N·e^(P/γ_post)/(γ_D·C_T)]^(1/(γ_D+β)), so ∂log D_crit/∂log N = γ_N/(γ_D+β) and
    # D_crit(P+1)/D_crit(P) = e^(1/(γ_post·(γ_D+β))); with γ_D = β = 0.5, γ_N = 0.5, γ_post = 0.5: 0.5 and e²
    c = {"B": 3.0, "beta": 0.5, "C_T": 0.2, "gamma_D": 0.5, "gamma_N": 0.5, "gamma_post": 0.5}
    s = pa.d_crit_shape(c)
    assert s["n_exponent"] == pytest.approx(0.5) and s["per_bit"] == pytest.approx(math.e ** 2)
    # the same numbers from Eq. 13 itself, and unchanged when N and D change units (B and C_T absorb them)
    d = lambda n, p, cc: float(pa.d_crit_draws([cc], n, p)[0])  # noqa: E731
    assert math.log(d(2e5, 3, c) / d(1e5, 3, c)) / math.log(2) == pytest.approx(s["n_exponent"], rel=1e-9)
    assert d(1e5, 4, c) / d(1e5, 3, c) == pytest.approx(s["per_bit"], rel=1e-9)
    # the paper's Table 2: 0.3439/(0.5068 + 0.4965) and e^(1/(0.5907·1.0033))
    paper = pa.d_crit_shape(PAPER_CONSTANTS)
    assert paper["n_exponent"] == pytest.approx(0.3439 / 1.0033) and paper["per_bit"] == pytest.approx(
        math.exp(1 / (0.5907 * 1.0033)))
    assert math.isnan(pa.d_crit_shape({**c, "gamma_D": -0.6})["n_exponent"])  # γ_D + β ≤ 0: no finite D_crit
    assert pa.d_crit_shape({k: v for k, v in c.items() if k != "beta"} | {"alpha": 0.5}) == s  # tied exponent
    # over draws: percentile ends as order statistics (γ_N = 0.01·i over 40 draws, γ_D + β = 1)
    draws = pd.DataFrame({**c, "gamma_N": 0.01 * np.arange(1.0, 41.0)})
    iv = pa.d_crit_shape_interval(draws)
    assert (iv["n_exponent_lo"], iv["n_exponent_hi"], iv["n_used"]) == pytest.approx((0.01, 0.40, 40.0))
    assert iv["per_bit_lo"] == iv["per_bit_hi"] == pytest.approx(math.e ** 2)
    assert math.isnan(pa.d_crit_shape_interval(draws.iloc[:1])["per_bit_lo"])
    with pytest.raises(ValueError, match="level"):
        pa.d_crit_shape_interval(draws, level=0.0)


def test_d_crit_bootstrap_refits_both_laws_on_the_same_drawn_runs():
    # rows made from known Chinchilla and Eq. 2 constants (seed jitter 1e-5): every paired draw recovers them,
    # so D_crit's interval is tight around Eq. 13 on the generating constants
    df = make_frame({"gptq": eq2_delta(EQ2)})
    draws = pa.d_crit_bootstrap(df, "gptq", n_boot=3)
    assert list(draws["draw"]) == [0.0, 1.0, 2.0] and draws[list(pa.D_CRIT_DRAW_KEYS)].notna().all().all()
    for k, v in {**{k: CHIN[k] for k in ("B", "beta")}, **EQ2}.items():
        assert draws[k].to_numpy() == pytest.approx(v, rel=2e-3), k
    out = pa.d_crit_interval(draws, NS[0], 3)
    assert out["lo"] <= out["hi"] and out["lo"] == pytest.approx(float(pa.d_crit_eq13(NS[0], 3, CHIN, EQ2)), rel=1e-3)
    with pytest.raises(ValueError, match="n_boot"):
        pa.d_crit_bootstrap(df, "gptq", n_boot=0)


def test_d_crit_draws_are_stored_resumed_keyed_by_the_rows_and_read_by_p2(tmp_path, monkeypatch):
    """write_d_crit_boot stores one row per (method, draw) keyed by the rows resampled; a killed run resumes with
    the draws it lacks (draw i is the same whichever others are made); load_d_crit_boot reads only complete sets
    made from the rows given; P2 prints Eq. 13's interval from them."""
    from bitlaws.study.store import read_rows

    df = make_frame({"gptq": eq2_delta(EQ2), "rtn": eq2_delta(EQ2)})
    monkeypatch.setattr(pa, "load_runs", lambda profile, experiment=None, root=None: df)
    monkeypatch.setattr(pa, "D_CRIT_N_BOOT", 3)
    real, made = pa._d_crit_draw_rows, []

    def killed(df_, method, draws, seed, progress, resample="runs"):  # dies after its first draw of GPTQ
        for row in real(df_, method, draws, seed, progress, resample):
            made.append((method, row["draw"]))
            yield row
            if method == "gptq":
                raise KeyboardInterrupt

    monkeypatch.setattr(pa, "_d_crit_draw_rows", killed)
    with pytest.raises(KeyboardInterrupt):
        pa.write_d_crit_boot("test", root=tmp_path)
    assert pa.load_d_crit_boot("test", df, "gptq", tmp_path)[1].startswith("1 of 3 draws made (a killed run")
    monkeypatch.setattr(pa, "_d_crit_draw_rows", lambda *a: (made.append((a[1], r["draw"])) or r for r in real(*a)))
    path = pa.write_d_crit_boot("test", root=tmp_path)
    assert path == tmp_path / "checks" / "test" / "d_crit_boot.csv"
    assert made == [("gptq", 0.0), ("gptq", 1.0), ("gptq", 2.0), ("rtn", 0.0), ("rtn", 1.0), ("rtn", 2.0)]
    pa.write_d_crit_boot("test", root=tmp_path)  # complete: nothing made again
    assert len(made) == 6
    tab = read_rows(path, pa.D_CRIT_BOOT_COLUMNS, "boot_id")
    sha = pa.d_crit_rows_sha(df, "gptq")
    assert len(tab) == 6 and f"gptq:0:1:3:v{pa.D_CRIT_BOOT_VERSION}@{sha[:12]}" in set(tab["boot_id"])
    boot, why = pa.load_d_crit_boot("test", df, "gptq", tmp_path)
    fresh = pa.d_crit_bootstrap(df, "gptq", n_boot=3)
    assert why == "" and np.allclose(boot[list(pa.D_CRIT_DRAW_KEYS)].to_numpy(float),
                                     fresh[list(pa.D_CRIT_DRAW_KEYS)].to_numpy(float), rtol=1e-12)
    # other rows: not read; the hash ignores columns other experiments add beside the rows
    moved = df.assign(loss_val=df["loss_val"] + np.where(df["obs_id"] == df["obs_id"].iloc[0], 1e-3, 0.0))
    assert pa.load_d_crit_boot("test", moved, "gptq", tmp_path) == (None, "draws made from other training rows; not "
                                                                          "read")
    assert pa.d_crit_rows_sha(df.assign(fmt_post="x", bits_post=df["bits_post"].astype(float)), "gptq") == sha
    # the cascade's check wants the wild cluster draws too (a fit killed between the two kinds is not current)
    ok, why = pa.d_crit_boot_is_current("test", df, tmp_path)
    assert not ok and why.startswith("gptq wild (no gptq draws stored)")
    assert not pa.d_crit_boot_is_current("test", moved, tmp_path)[0]
    # every method from one read of the table: the same draws as one method at a time, the reason per method
    both = pa.load_d_crit_boots("test", moved.assign(loss_val=df["loss_val"]), tmp_path)
    assert sorted(both) == ["gptq", "rtn"] and both["gptq"][0].equals(boot) and both["rtn"][1] == ""
    assert pa.load_d_crit_boots("test", df, tmp_path / "elsewhere")["gptq"][1].startswith("no draws stored")
    with pytest.raises(ValueError, match="n_boot must be an int ≥ 2"):
        pa.write_d_crit_boot("test", n_boot=1, root=tmp_path)
    # the wild cluster draws are other rows of the same table, keyed and read apart; P2's draws are unchanged
    pa.write_d_crit_boot("test", root=tmp_path, resample="wild")
    cboot, cwhy = pa.load_d_crit_boots("test", df, tmp_path, ["gptq"], resample="wild")["gptq"]
    assert cwhy == "" and len(read_rows(path, pa.D_CRIT_BOOT_COLUMNS, "boot_id")) == 12
    assert set(cboot["boot_version"]) == {pa.D_CRIT_VERSIONS["wild"]}
    assert pa.d_crit_boot_is_current("test", df, tmp_path)[1].startswith("gptq wild_runs (no")
    pa.write_d_crit_boot("test", root=tmp_path, resample="wild_runs")  # the like-for-like comparison's draws
    assert pa.d_crit_boot_is_current("test", df, tmp_path) == (True, "")
    rboot = pa.load_d_crit_boots("test", df, tmp_path, ["gptq"], resample="wild_runs")["gptq"][0]
    again = pa.load_d_crit_boot("test", df, "gptq", tmp_path)[0]
    assert list(again["boot_id"]) == list(boot["boot_id"])
    assert np.array_equal(again[list(pa.D_CRIT_DRAW_KEYS)].to_numpy(float), boot[list(pa.D_CRIT_DRAW_KEYS)].to_numpy(float))
    # P2 reads them: Eq. 13's point with its interval over the draws, in the text and the details
    monkeypatch.setenv("BITLAWS_DATA", str(tmp_path))
    v = pa.verdict_p2(df, "test", n_sim=10)
    iv = pa.d_crit_interval(boot, NS[0], 3)
    assert v.details["gptq_int3_d_crit_eq13_lo"] == pytest.approx(iv["lo"], rel=1e-12)
    assert v.details["gptq_int3_d_crit_eq13_lo"] <= v.details["gptq_int3_d_crit_eq13"] * (1 + 1e-3)
    assert f"[{pa.tokens_text(iv['lo'])}, {pa.tokens_text(iv['hi'])}]" in v.ours
    assert "95 % over 3 paired bootstrap draws" in v.ours and "no interval" not in v.ours
    civ = pa.d_crit_interval(cboot, NS[0], 3)
    assert v.details["gptq_int3_d_crit_eq13_wild_lo"] == pytest.approx(civ["lo"], rel=1e-12)
    riv = pa.d_crit_interval(rboot, NS[0], 3)
    assert v.details["gptq_int3_d_crit_eq13_wild_runs_hi"] == pytest.approx(riv["hi"], rel=1e-12)
    assert "a wild bootstrap that keeps the design" in v.ours and "with one per run" in v.ours
    table = pa.d_crit_table({m: pa.critical_data_sizes(df, m) for m in ("gptq", "rtn")}, boot=pa.d_crit_boots("test", df))
    assert (table["Eq. 13, 95 %"] != "n/a").all()
    # the generating constants put D_crit at 17M (INT3) and 59M (INT4), past this grid's 8M: flagged, not read as
    # a check the rows could make
    assert "INT3 and INT4's interval lies wholly beyond the largest D trained (8.0M): an extrapolation" in v.ours
    assert table["Eq. 13, 95 %"].str.endswith("(beyond the grid)").all()  # D_crit grows with N: every size's too
    # the unit-free shape: the point from the fitted constants, its ends over the same draws, the paper's beside
    shape, ends = pa.d_crit_shape({**CHIN, **EQ2}), pa.d_crit_shape_interval(boot)
    assert v.details["gptq_d_crit_per_bit_lo"] == pytest.approx(ends["per_bit_lo"], rel=1e-12)
    assert v.details["paper_d_crit_n_exponent"] == pytest.approx(pa.d_crit_shape(PAPER_CONSTANTS)["n_exponent"])
    assert v.details["gptq_d_crit_n_exponent_median"] == pytest.approx(ends["n_exponent_median"], rel=1e-12)
    assert (f"D_crit ∝ N^{shape['n_exponent']:.2f} [{ends['n_exponent_lo']:.2f}, {ends['n_exponent_hi']:.2f}; "
            f"the draws' median {ends['n_exponent_median']:.2f}] (the paper's GPTQ constants, Table 2: 0.34)") in v.ours
    assert "per bit of P_post (paper ×5.4, from its γ_post, b aside; derived)" in v.ours
    # the paper's law at our smallest N, beside its 30M figure (D_crit/N falls with N)
    n0 = min(NS)
    assert f"at our smallest N = {n0:,.0f} at {float(pa.critical_data_size(n0, 3, PAPER_CONSTANTS)):.3g} tokens" \
        in v.reason


def test_p2_without_a_chinchilla_fit_says_its_power_was_not_computed(monkeypatch):
    # too few (N, D) points for the Chinchilla law (the smoke profile): P2's power simulation has no
    # law to start from; the text says so instead of "power nan%"
    monkeypatch.setattr(pa, "eq2_fit", lambda df, method: {**EQ2, "r2": 1.0, "n_points": 1.0, "n_cells": 1.0})
    monkeypatch.setattr(pa, "chinchilla_fit", lambda df: {**{k: math.nan for k in CHIN}, "r2": math.nan,
                                                          "n_points": 4.0, "n_cells": math.nan})
    v = pa.verdict_p2(make_frame({"gptq": _turn_up({NS[0]}), "rtn": _turn_up(set())}), "test", n_sim=10)
    assert v.verdict == "inconclusive" and v.details["gptq_power"] == "n/a"
    assert v.ours.count("power not computed: its simulation starts from our Chinchilla fit") == 2  # GPTQ, RTN
    assert "Its power was not computed" in v.reason and "the rule's own grade: reproduced" in v.reason
    assert not re.search(r"\bnan\b", v.ours + v.reason, flags=re.IGNORECASE), v.ours + v.reason


# --- P2's minimum with its 95 % set, and D/N in BPE tokens (reported beside the grade) --------------

def test_argmin_shares_a_clear_minimum_is_a_set_of_one():
    # one-seed cells 100 σ apart: every draw's minimum is the middle cell
    shares = pa.argmin_shares([[1.0], [0.0], [1.0]], sigma=0.01, n_boot=500)
    assert shares.tolist() == [0.0, 1.0, 0.0]
    assert pa.argmin_set(shares).tolist() == [1]


def test_argmin_shares_two_equal_means_are_both_in_the_set():
    # σ = 0: every draw ties between the equal cells, and a tie is split exactly
    shares = pa.argmin_shares([[1.0], [1.0], [2.0]], sigma=0.0, n_boot=100)
    assert shares.tolist() == [0.5, 0.5, 0.0] and pa.argmin_set(shares).tolist() == [0, 1]
    # with noise: equal means share the draws (binomial 4σ band), both in the set, the others out
    n = 4000
    shares = pa.argmin_shares([[0.5], [0.0], [0.0], [0.5]], sigma=0.01, n_boot=n)
    assert shares[0] == shares[3] == 0.0 and abs(shares[1] - 0.5) < 4 * math.sqrt(0.25 / n)
    assert pa.argmin_set(shares).tolist() == [1, 2]
    # equal seeds in two cells: resampled means tie whenever the same seeds are drawn; both in the set
    seeds = np.array([0.0, 0.1, 0.2])
    shares = pa.argmin_shares([seeds, seeds.copy(), [1.0]], sigma=0.01, n_boot=n)
    assert shares.sum() == pytest.approx(1.0, abs=1e-12) and shares[2] == 0.0
    assert abs(shares[0] - 0.5) < 4 * math.sqrt(0.25 / n) and pa.argmin_set(shares).tolist() == [0, 1]


def test_argmin_shares_draw_as_documented():
    from scipy import stats

    n = 20000
    band = lambda p: 4 * math.sqrt(p * (1 - p) / n)  # noqa: E731 — four binomial standard errors
    # a one-seed cell is drawn as its value + σ·z: P(0.9 + 0.1·z < 1.0) = Φ(1); a constant seeded cell never moves
    p = float(stats.norm.cdf(1.0))
    shares = pa.argmin_shares([np.array([1.0, 1.0, 1.0]), [0.9]], sigma=0.1, n_boot=n, seed=3)
    assert abs(shares[1] - p) < band(p)
    # a seeded cell resamples k of its k seeds with replacement: mean of two draws from {0, 1} is
    # below 0.6 unless both are 1, so it wins with probability 3/4
    shares = pa.argmin_shares([np.array([0.0, 1.0]), np.array([0.6, 0.6])], sigma=math.nan, n_boot=n, seed=4)
    assert abs(shares[0] - 0.75) < band(0.75)


def test_argmin_set_is_the_smallest_cover_and_bad_input_is_named():
    assert pa.argmin_set([0.50, 0.46, 0.04]).tolist() == [0, 1]
    assert pa.argmin_set([0.04, 0.96]).tolist() == [1]
    assert pa.argmin_set([0.2] * 5).tolist() == [0, 1, 2, 3, 4]
    assert pa.argmin_set([0.25] * 4, level=0.5).tolist() == [0, 1]  # equal shares: the earlier cells first
    with pytest.raises(ValueError, match="level"):
        pa.argmin_set([1.0], level=0.0)
    with pytest.raises(ValueError, match="shares"):
        pa.argmin_set([0.5, -0.1])
    with pytest.raises(ValueError, match="sigma"):
        pa.argmin_shares([[1.0], [2.0]], sigma=math.nan)
    with pytest.raises(ValueError, match="cell 1"):
        pa.argmin_shares([[1.0], []], sigma=0.1)
    with pytest.raises(ValueError, match="at least one cell"):
        pa.argmin_shares([], sigma=0.1)


def test_joint_draw_of_seeds_perfectly_correlated_across_d_gives_a_tighter_set():
    # every run of seed i is offset by s_i at every D (shared initialisation and data order): the
    # cells' differences (0.02, 0.01) are far below the seed spread (0.05) but exact within a seed
    offsets = np.array([-0.08, -0.03, 0.0, 0.04, 0.07])
    mu = [0.00, -0.02, 0.01]
    cells = [m + offsets for m in mu]
    labels = [np.arange(5)] * 3
    n = 4000
    indep = pa.argmin_shares(cells, sigma=math.nan, n_boot=n, seed=1)
    joint = pa.argmin_shares(cells, sigma=math.nan, n_boot=n, seed=1, seeds=labels)
    assert joint.tolist() == [0.0, 1.0, 0.0]  # every draw shares its seeds, so cell 1 is always lowest
    assert pa.argmin_set(joint).tolist() == [1]
    assert len(pa.argmin_set(indep)) >= 2 and 1 in pa.argmin_set(indep).tolist() and indep[1] < 0.9
    # the small-k correction scales each cell's deviations alike, so a shared offset still cancels
    corrected = pa.argmin_shares(cells, sigma=math.nan, n_boot=n, seed=1, seeds=labels, correct=True)
    assert corrected.tolist() == [0.0, 1.0, 0.0]
    # seeds listed in another order per cell are matched by label, not by position
    perm = np.array([3, 0, 4, 1, 2])
    shuffled = pa.argmin_shares([cells[0][perm], cells[1], cells[2]], sigma=math.nan, n_boot=n, seed=1,
                                seeds=[perm, labels[1], labels[2]])
    assert shuffled.tolist() == [0.0, 1.0, 0.0]


def test_small_k_correction_widens_the_spread_by_the_stated_factor():
    from scipy import stats

    z = stats.norm.ppf(0.975)
    oracle = lambda k: math.sqrt(k / (k - 1)) * stats.t.ppf(0.975, k - 1) / z  # noqa: E731 — as documented
    assert pa.small_k_factor(2) == pytest.approx(9.1685, abs=1e-3)  # sqrt(2)·12.706/1.960
    assert pa.small_k_factor(20) == pytest.approx(1.0956, abs=1e-3)  # sqrt(20/19)·2.093/1.960
    rng = np.random.default_rng(7)
    spread = {}
    for k in (2, 20):
        y = rng.normal(1.0, 0.1, size=k)
        for correct in (False, True):
            means, fb = pa.bootstrap_cell_means([y], sigma=math.nan, n_boot=20000, seed=5, seeds=[np.arange(k)],
                                                correct=correct)
            assert fb == 0 and means.shape == (20000, 1)
            spread[k, correct] = float(means[:, 0].std())
        # the same draws, scaled: the widening is the factor itself
        assert spread[k, True] / spread[k, False] == pytest.approx(oracle(k), rel=1e-9)
        # and the corrected spread is t/z times the unbiased standard error s/√k (Monte Carlo: 3 %)
        assert spread[k, True] == pytest.approx(stats.t.ppf(0.975, k - 1) / z * y.std(ddof=1) / math.sqrt(k),
                                                rel=0.03)
    ratio = (spread[2, True] / spread[2, False]) / (spread[20, True] / spread[20, False])
    assert ratio == pytest.approx(oracle(2) / oracle(20), rel=1e-9) and ratio == pytest.approx(8.368, abs=0.01)
    # a one-seed cell's σ is scaled by t_ν/z: P(0.9 + c·0.1·z < 1.0) = Φ(1/c), at ν = 4
    n, c = 20000, stats.t.ppf(0.975, 4) / z
    shares = pa.argmin_shares([np.array([1.0, 1.0, 1.0]), [0.9]], sigma=0.1, n_boot=n, seed=3, correct=True, dof=4)
    p = float(stats.norm.cdf(1 / c))
    assert abs(shares[1] - p) < 4 * math.sqrt(p * (1 - p) / n)
    with pytest.raises(ValueError, match="k ≥ 2"):
        pa.small_k_factor(1)


def test_joint_draw_falls_back_where_no_drawn_seed_reaches_a_cell_and_bad_seeds_are_named():
    # cell 0 has seeds {0, 1}, cell 1 seeds {2, 3}: a draw of 4 labels misses a cell with probability 1/16
    n = 16000
    means, fb = pa.bootstrap_cell_means([[0.0, 1.0], [0.0, 1.0]], sigma=math.nan, n_boot=n, seed=2,
                                        seeds=[[0, 1], [2, 3]])
    expect = 2 * n / 16
    assert abs(fb - expect) < 4 * math.sqrt(2 * n * (1 / 16) * (15 / 16)) and np.isfinite(means).all()
    # a one-seed cell never joins the joint draw: it is parametric, and has no fallbacks
    means, fb = pa.bootstrap_cell_means([[0.0, 1.0], [5.0]], sigma=0.0, n_boot=100, seed=2, seeds=[[0, 1], [0]])
    assert fb == 0 and (means[:, 1] == 5.0).all()
    with pytest.raises(ValueError, match="one label per value"):
        pa.bootstrap_cell_means([[0.0, 1.0]], sigma=math.nan, seeds=[[0]])
    with pytest.raises(ValueError, match="seed twice"):
        pa.bootstrap_cell_means([[0.0, 1.0]], sigma=math.nan, seeds=[[3, 3]])
    with pytest.raises(ValueError, match="dof"):
        pa.bootstrap_cell_means([[0.0]], sigma=0.1, dof=0)


def test_bytes_per_token_interval_holds_the_point_and_shrinks_with_more_windows():
    rng = np.random.default_rng(11)
    small = rng.integers(300, 500, size=24)
    large = rng.integers(300, 500, size=240)
    a = pa.bytes_per_token_interval(np.full(24, 128), small)
    b = pa.bytes_per_token_interval(np.full(240, 128), large)
    for ci, byt in ((a, small), (b, large)):
        assert ci["bytes_per_token"] == pytest.approx(byt.sum() / (128 * len(byt)), rel=1e-12)
        assert ci["lo"] < ci["bytes_per_token"] < ci["hi"]
        # equal-token windows: the ratio is a mean, so the interval's half-width is ≈ 1.96·σ/(128·√w)
        half = 1.96 * byt.std() / (128 * math.sqrt(len(byt)))
        assert (ci["hi"] - ci["lo"]) / 2 == pytest.approx(half, rel=0.15)
    assert (b["hi"] - b["lo"]) < 0.5 * (a["hi"] - a["lo"])  # √10 narrower, less Monte Carlo error
    # constant windows leave no spread
    c = pa.bytes_per_token_interval([100, 100, 100], [300, 300, 300])
    assert c["lo"] == c["hi"] == c["bytes_per_token"] == 3.0
    with pytest.raises(ValueError, match="≥ 2 windows"):
        pa.bytes_per_token_interval([128], [300])
    with pytest.raises(ValueError, match="> 0 tokens"):
        pa.bytes_per_token_interval([128, 0], [300, 10])
    with pytest.raises(ValueError, match="level"):
        pa.bytes_per_token_interval([128, 128], [300, 10], level=1.0)


def test_argmin_coverage_is_95_percent_where_the_normal_is_exact_and_short_with_few_seeds():
    # two D values a hair apart (the first is the minimum): with many seeds and σ known, each D's
    # bootstrap mean is normal, the share of the minimum is uniform, and the 95 % set misses it in
    # 5 % of datasets; with 3 seeds the plug-in spread is too small and it misses far more often
    n = 400
    band = 4 * math.sqrt(0.95 * 0.05 / n)  # four Monte Carlo standard errors
    truth = [0.0, 1e-9]
    many = pa.argmin_ahead(truth, [np.arange(100)] * 2, sigma=0.1, n_datasets=n, n_boot=1000, seed=3)
    assert many["true_index"] == 0 and many["n_datasets"] == n
    for key in ("ahead", "ahead_corrected"):  # the small-k factor at k = 100 is 1.01: both ≈ 95 %
        cov = pa.argmin_coverage(many[key])
        assert abs(cov["coverage"] - 0.95) < band, (key, cov)
        assert cov["lo"] < cov["coverage"] < cov["hi"] and cov["n_sim"] == n
    few = pa.argmin_ahead(truth, [np.arange(3)] * 2, sigma=0.1, n_datasets=n, n_boot=1000, seed=3)
    assert pa.argmin_coverage(few["ahead"])["coverage"] < 0.95 - band
    # a minimum far below its neighbours is always in the set
    far = pa.argmin_ahead([0.0, 1.0, 1.0], [np.arange(3)] * 3, sigma=0.01, n_datasets=50, n_boot=200, seed=4)
    assert pa.argmin_coverage(far["ahead"])["coverage"] == 1.0
    with pytest.raises(ValueError, match="sigma"):
        pa.argmin_ahead(truth, [np.arange(3)] * 2, sigma=0.0)
    with pytest.raises(ValueError, match="one finite mean"):
        pa.argmin_ahead(truth, [np.arange(3)], sigma=0.1)


def test_calibrated_level_is_the_quantile_of_the_share_ahead():
    ahead = np.array([0.0, 0.5, 0.9, 0.96, 0.99])
    level = pa.calibrated_level(ahead, target=0.8, floor=0.5)
    assert level == pytest.approx(0.96, abs=1e-8) and level > 0.96  # just above the 4th smallest
    assert pa.argmin_coverage(ahead, level)["coverage"] == 0.8  # 4 of 5 datasets
    assert pa.argmin_coverage(ahead, 0.96)["coverage"] == 0.6  # at 0.96 itself the 4th is left out
    assert pa.calibrated_level(ahead, target=0.4, floor=0.95) == 0.95  # never below the floor
    # a true minimum that wins no draw in 2 of 5 datasets: no level below 1 reaches 80 %
    short = np.array([0.0, 0.1, 0.2, 1.0, 1.0])
    assert pa.calibrated_level(short, target=0.8) == 1.0
    assert pa.argmin_coverage(short, 1.0)["coverage"] == 0.6
    with pytest.raises(ValueError, match="target"):
        pa.calibrated_level(ahead, target=0.0)
    with pytest.raises(ValueError, match="level"):
        pa.argmin_coverage(ahead, 1.5)


def test_p2_argmin_truths_keep_the_fitted_minimum_and_flatten_its_bottom():
    d = np.array(DS, dtype=float)
    t = pa.p2_argmin_truths(NS[0], 3, d, CHIN, EQ2, flat=0.1)
    fit = base_loss(NS[0], d) + np.array([eq2_delta(EQ2)(NS[0], x, 3) for x in d])
    assert t["fitted"] == pytest.approx(fit, rel=1e-12)
    assert int(np.argmin(t["flat"])) == int(np.argmin(fit))
    assert t["flat"] - t["flat"].min() == pytest.approx(0.1 * (fit - fit.min()), rel=1e-9, abs=1e-15)
    assert np.isnan(pa.p2_argmin_truths(NS[0], 3, d, {**CHIN, "B": math.nan}, EQ2)["fitted"]).all()


def test_p2_argmin_set_on_a_turn_up_and_in_the_verdict(known_fits):
    df = make_frame({"gptq": _turn_up({NS[0]}), "rtn": _turn_up(set())})
    a = pa.p2_argmin_set(df, "gptq", NS[0], 3)
    tab = pa.ptq_table(df, "gptq")
    series = tab[(tab["n_params"] == NS[0]) & (tab["bits_post"] == 3)].sort_values("n_tokens")
    assert a["n_tokens"].tolist() == list(DS) and a["loss_post"].tolist() == pytest.approx(series["loss_post"].tolist())
    # seeds 0–2 at SEED_CELL are resampled; every other cell has one seed and is drawn from σ_post
    assert a["draw"].tolist() == ["seeds" if (NS[0], d) == SEED_CELL else "parametric" for d in DS]
    assert a["n_seeds"].tolist() == [3 if (NS[0], d) == SEED_CELL else 1 for d in DS]
    assert a["seeds"].tolist() == ["0;1;2" if (NS[0], d) == SEED_CELL else "0" for d in DS]
    # the minimum at the second-largest D is far beyond the 1e-5 seed noise: a set of one, under every draw
    for tail in ("", "_joint", "_independent"):
        assert a.loc[a[f"in_set{tail}"], "n_tokens"].tolist() == [DS[-2]], tail
        assert a[f"share{tail}"].tolist() == [0.0, 0.0, 1.0, 0.0], tail
    assert a.attrs["fallbacks"] == 0
    v = pa.verdict_p2(df, "test", n_sim=10)
    assert (v.details["gptq_argmin_n_params"], v.details["gptq_argmin_bits_post"]) == (NS[0], 3.0)
    assert v.details["gptq_argmin_set"] == str(DS[-2]) and v.details["gptq_argmin_set_size"] == 1.0
    assert v.details[f"gptq_argmin_share_d{DS[-2]}"] == 1.0 and "at 95% coverage the minimum" in v.reason
    assert v.details["gptq_argmin_set_joint"] == v.details["gptq_argmin_set_independent"] == str(DS[-2])
    assert "resamples seeds jointly across D" in v.reason and "uncorrected, as before, {" in v.reason
    # the set's coverage, simulated on this series' design (10 datasets at n_sim = 10): its level is a
    # level, the coverages are rates out of 10 with their intervals, and the reason says so
    level = v.details["gptq_argmin_level"]
    assert ARGMIN_LEVEL <= level <= 1.0 and v.details["argmin_cal_n_sim"] == 10.0
    for t in pa.ARGMIN_TRUTHS:
        for d in ("joint", "smallk", "calibrated"):
            c = v.details[f"gptq_argmin_cov_{t}_{d}"]
            assert round(10 * c) == pytest.approx(10 * c, abs=1e-9)
            assert v.details[f"gptq_argmin_cov_{t}_{d}_lo"] <= c <= v.details[f"gptq_argmin_cov_{t}_{d}_hi"]
    assert "datasets simulated on this series' design with a flat bottom" in v.reason
    assert f"calibrated level {level:.2%}" in v.reason
    # a calibrated level widens the reported set and leaves the nominal one as it was
    wide = pa.p2_argmin_set(df, "gptq", NS[0], 3, calibrated=1.0)
    assert wide["in_set_nominal"].tolist() == a["in_set"].tolist()
    assert wide["in_set"].tolist() == (wide["share"] > 0).tolist()
    with pytest.raises(ValueError, match="calibrated"):
        pa.p2_argmin_set(df, "gptq", NS[0], 3, calibrated=0.5)
    with pytest.raises(ValueError, match="n_params=7"):
        pa.p2_argmin_set(df, "gptq", 7, 3)


def test_bpe_conversion_reads_the_committed_csv_and_its_windows_sum_to_it():
    conv = pa.bpe_conversion()
    from bitlaws.study.claims import repo_root

    runs = repo_root() / "data" / "runs" / "cpu"
    rows = pd.read_csv(runs / "quik_smollm.csv")
    assert set(rows["bytes_per_token"]) == {conv["bytes_per_token"]}
    assert conv["tokenizer"] in rows["model"].iloc[0] and conv["corpus"] == "shakespeare"
    win = pd.read_csv(runs / "quik_smollm_windows.csv")
    for _, w in win.groupby("obs_id"):  # every method's windows: the same text, summed exactly
        assert (int(w["n_bytes"].sum()), int(w["n_tokens"].sum())) == (conv["eval_bytes"], conv["eval_tokens"])
    assert conv["bytes_per_token"] == pytest.approx(conv["eval_bytes"] / conv["eval_tokens"], rel=1e-12)
    # its intervals: the cluster bootstrap over the works of the committed works file, and the
    # window bootstrap beside it, both around the point value
    one = win.drop_duplicates("window").sort_values("window")
    assert conv["n_windows"] == len(one) == win["window"].nunique()
    works = pd.read_csv(runs / pa.WORKS_CSV).set_index("window").loc[one["window"], "work"]
    assert conv["n_works"] == works.nunique() and conv["windows"]["work"].tolist() == works.tolist()
    ci = pa.bytes_per_token_interval(one["n_tokens"], one["n_bytes"], groups=works.to_numpy())
    iid = pa.bytes_per_token_interval(one["n_tokens"], one["n_bytes"])
    assert (conv["bytes_per_token_lo"], conv["bytes_per_token_hi"]) == pytest.approx((ci["lo"], ci["hi"]), rel=1e-12)
    assert (conv["bytes_per_token_window_lo"], conv["bytes_per_token_window_hi"]) == pytest.approx(
        (iid["lo"], iid["hi"]), rel=1e-12)
    for lo, hi in (("lo", "hi"), ("window_lo", "window_hi")):
        assert conv[f"bytes_per_token_{lo}"] < conv["bytes_per_token"] < conv[f"bytes_per_token_{hi}"]


def test_cluster_bootstrap_is_wider_with_a_work_effect_and_equal_without():
    # 40 works of 10 windows of 128 tokens; bytes per token = 3 + work effect + window noise
    rng = np.random.default_rng(21)
    works = np.repeat(np.arange(40), 10)
    tok = np.full(400, 128)

    def widths(effect_sd: float) -> np.ndarray:
        out = []
        for _ in range(20):
            rate = 3.0 + effect_sd * rng.standard_normal(40)[works] + 0.3 * rng.standard_normal(400)
            byt = np.rint(128 * rate)
            c = pa.bytes_per_token_interval(tok, byt, groups=works, seed=int(rng.integers(1000)))
            w = pa.bytes_per_token_interval(tok, byt, seed=int(rng.integers(1000)))
            assert c["n_groups"] == 40 and math.isnan(w["n_groups"]) and c["bytes_per_token"] == w["bytes_per_token"]
            out.append((c["hi"] - c["lo"]) / (w["hi"] - w["lo"]))
        return np.array(out)

    # a work effect as large as the window noise: the design effect 1 + 9·0.5 widens it ≈ √5.5 = 2.3×
    assert widths(0.3).mean() == pytest.approx(math.sqrt(5.5), rel=0.2)
    # none: the same width on average (each ratio's spread ≈ 1/√78 from 39 degrees of freedom: 20 of
    # them average to ±0.03; ±0.1 is three of those)
    assert widths(0.0).mean() == pytest.approx(1.0, abs=0.1)
    # one window per work is the window bootstrap itself, draw for draw
    byt = np.rint(128 * (3 + 0.3 * rng.standard_normal(400)))
    assert pa.bytes_per_token_interval(tok, byt, groups=np.arange(400)) == {
        **pa.bytes_per_token_interval(tok, byt), "n_groups": 400.0}
    with pytest.raises(ValueError, match="one label per window"):
        pa.bytes_per_token_interval(tok, byt, groups=works[:10])
    with pytest.raises(ValueError, match="≥ 2 groups"):
        pa.bytes_per_token_interval(tok, byt, groups=np.zeros(400))


def test_window_works_are_where_the_windows_read(corpus):
    from bitlaws.corpus import SEPARATOR, shakespeare_doc_spans
    from bitlaws.study.claims import repo_root
    from bitlaws.study.quik_realmodel import text_window_spans, text_windows
    from bitlaws.study.quik_smollm import SMOL_SETTING

    val = np.asarray(corpus.val).tobytes()
    spans = shakespeare_doc_spans("val")
    # the works tile the split, joined by the separator, in the corpus's order
    assert [n for n, _, _ in spans] == list(corpus.val_docs) and spans[0][1] == 0 and spans[-1][2] == len(val)
    for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
        assert val[end:start] == SEPARATOR.encode("utf-8")
    # the spans are text_windows' windows, byte for byte
    cut = text_window_spans(corpus.val, 6, 512, None)
    assert [val[a:b].decode("utf-8", errors="replace") for a, b in cut] == text_windows(corpus.val, 6, 512, None)
    # the committed file is what the corpus gives, and each window's predicted bytes lie in its work
    ww = pa.window_works(corpus)
    committed = pd.read_csv(repo_root() / "data" / "runs" / "cpu" / pa.WORKS_CSV)
    cols = ["window", "start_byte", "end_byte", "work", "work_end_byte", "corpus_sha256"]
    assert committed[cols].to_dict("list") == ww[cols].to_dict("list")
    assert len(ww) == SMOL_SETTING.n_eval and ww["work"].nunique() == len(corpus.val_docs)
    win = pd.read_csv(repo_root() / "data" / "runs" / "cpu" / "quik_smollm_windows.csv").drop_duplicates("window")
    start = {n: a for n, a, _ in spans}
    both = ww.merge(win[["window", "n_bytes"]], on="window")
    assert ((both["start_byte"] >= both["work"].map(start))
            & (both["start_byte"] + both["n_bytes"] < both["work_end_byte"])).all()
    with pytest.raises(ValueError, match="split"):
        shakespeare_doc_spans("test")


def test_p2_reports_d_over_n_in_bpe_tokens_only_for_the_same_text(known_fits):
    conv = pa.bpe_conversion()
    df = make_frame({"gptq": _turn_up({NS[0]})})
    v = pa.verdict_p2(df.assign(corpus=conv["corpus"]), "test", n_sim=10)
    assert v.details["max_d_over_n_bpe"] == pytest.approx(v.details["max_d_over_n"] / conv["bytes_per_token"],
                                                          rel=1e-12)
    assert v.details["bpe_tokenizer"] == conv["tokenizer"] and "not a claim that our models saw tokens" in v.reason
    dn = v.details["max_d_over_n"]
    assert (v.details["max_d_over_n_bpe_lo"], v.details["max_d_over_n_bpe_hi"]) == pytest.approx(
        (dn / conv["bytes_per_token_hi"], dn / conv["bytes_per_token_lo"]), rel=1e-12)
    assert f"{dn / conv['bytes_per_token_hi']:.0f}, {dn / conv['bytes_per_token_lo']:.0f}] tokens per" in v.reason
    v = pa.verdict_p2(df.assign(corpus="tinystories"), "test", n_sim=10)  # another text: no conversion
    assert v.details["max_d_over_n_bpe"] == "n/a" and "several bytes each" in v.reason


# --- the GPTQ fit file -----------------------------------------------------------------------------

def test_fit_ptq_method_writes_its_own_file(tmp_path, monkeypatch):
    from bitlaws.study.law_fits import fit_ptq_method, ptq_fit_is_current, ptq_fit_path
    from bitlaws.laws import fit as lf

    # the held-out refits are the fitter's business (tests/test_laws_fit.py); here only the file matters
    monkeypatch.setattr(lf, "holdout", lambda *a, **k: {"r2": 1.0, "mse": 0.0, "n_folds": 0})
    df = make_frame({"gptq": eq2_delta(EQ2), "rtn": eq2_delta(EQ2)})
    assert ptq_fit_path("x", "rtn", tmp_path) == tmp_path / "fits" / "x_ptq.json"
    assert ptq_fit_path("x", "gptq", tmp_path) == tmp_path / "fits" / "x_ptq_gptq.json"
    rec = fit_ptq_method("x", "gptq", n_boot=2, root=tmp_path, frame=df)
    written = json.loads((tmp_path / "fits" / "x_ptq_gptq.json").read_text())
    assert not (tmp_path / "fits" / "x_ptq.json").exists()
    assert written["status"] == "ok" and written["method"] == "gptq" and written["n_boot"] == 2
    assert set(written["holdout"]) == {"n_params", "n_tokens"} and written["input_sha256"] == rec["input_sha256"]
    assert "ptq_method gptq" in written["rows"]
    assert written["params"]["gamma_post"] == pytest.approx(pa.eq2_fit(df, "gptq")["gamma_post"], rel=1e-9)
    assert ptq_fit_is_current(rec, df, "gptq") and not ptq_fit_is_current(rec, df[df["seed"] == 0], "gptq")
    assert not ptq_fit_is_current(None, df, "gptq")
    # another experiment's rows with columns of their own (a benchmark file) widen the frame, not the fit
    other = pd.DataFrame({"experiment": ["bench"], "obs_id": ["b0"], "latency_ms": [1.0], "steps": [np.nan]})
    assert ptq_fit_is_current(rec, pd.concat([df, other], ignore_index=True), "gptq")
    changed = df.copy()
    changed.loc[changed["ptq_method"] == "gptq", "loss_val"] += 1e-9
    assert not ptq_fit_is_current(rec, changed, "gptq")
    skipped = fit_ptq_method("x", "awq", n_boot=2, root=tmp_path, frame=df, write=False)
    assert skipped["status"] == "skipped" and "awq" in skipped["reason"]


def test_p1_on_the_committed_rows_sets_both_gamma_d_estimators_side_by_side():
    # the committed GPTQ Eq. 2 fit is current (fit writes it), so the rule reads its bootstrap interval;
    # the log-linear regression stands beside it with its own point inside its own t-interval
    import re

    from bitlaws.study.law_fits import TRAINING_EXPERIMENTS
    from bitlaws.study.store import load_runs

    df = load_runs("cpu", experiment=TRAINING_EXPERIMENTS)
    v = pa.verdict_p1(df, "cpu", n_sim=5)
    m = re.search(r"GPTQ: .*?γ_D = ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \(the log-linear regression on the resolved "
                  r"cells, reported beside it: ([0-9.]+) \[([0-9.]+), ([0-9.]+)\]\)", v.ours)
    assert m, v.ours
    huber, lo, hi, ll, ll_lo, ll_hi = map(float, m.groups())
    assert (f"{lo:.2f}", f"{hi:.2f}") == (f"{v.details['gptq_gamma_d_lo']:.2f}", f"{v.details['gptq_gamma_d_hi']:.2f}")
    assert ll_lo <= ll <= ll_hi and f"{huber:.2f}" == f"{v.details['gptq_eq2_gamma_d']:.2f}"
    assert v.details["gptq_gamma_d_point"] == v.details["gptq_eq2_gamma_d"]  # the bootstrap is current: Huber's
    # γ_N and γ_post carry their intervals from the committed fits' bootstrap (read here from the records
    # themselves), and a γ_post interval that excludes the paper's 0.59 is named in the reason
    import json

    from bitlaws.study.law_fits import ptq_fit_path

    paper = pa.PAPER_EQ2["gamma_post"]
    out = []
    for m, label in (("gptq", "GPTQ"), ("rtn", "RTN")):
        ci = json.loads(ptq_fit_path("cpu", m).read_text(encoding="utf-8"))["ci95"]
        for key, name in (("gamma_N", "γ_N"), ("gamma_post", "γ_post")):
            lo, hi = ci[key]
            assert f"{name} = {v.details[f'{m}_eq2_{key.lower()}']:.2f} [{lo:.2f}, {hi:.2f}]" in v.ours
            assert v.details[f"{m}_{key.lower()}_lo"] == pytest.approx(lo)
        if not ci["gamma_post"][0] <= paper <= ci["gamma_post"][1]:
            out.append(f"{label} [{ci['gamma_post'][0]:.2f}, {ci['gamma_post'][1]:.2f}]")
    if out:
        assert "γ_post's 95 % interval, " + " and ".join(out) in v.reason and f"excludes the paper's {paper:.2f}" \
            in v.reason


# --- the estimates of Eq. 2's exponents (chapter 01's "Which γ_D is which", chapter 03's cross-check) ----

def _with_qat_rows(df: pd.DataFrame, method: str = "rtn") -> pd.DataFrame:
    """`df` plus a run trained with INT4 weights at every (N, D) of seed 0 (the QAT sweep), whose δ grows
    with D ** 0.3 at three times the size: rows a PTQ table must not pool with the high-precision runs'."""
    hp = df[(df["seed"] == 0) & df["ptq_method"].isin(["none", method])]
    q = hp.assign(run_id="q" + hp["run_id"], obs_id="q" + hp["obs_id"], experiment="qat_marginal", bits_w=4,
                  fmt_w="int4")
    lift = q["n_tokens"] ** 0.3 * 1e-3 * np.exp(-q["bits_post"] / 0.6)
    q.loc[q["ptq_method"] == method, "delta_ptq"] = lift
    q["loss_val"] = q["loss_val"] + 0.01 + np.where(q["ptq_method"] == method, lift, 0.0)
    return pd.concat([df, q], ignore_index=True)


def test_exponent_estimates_name_each_estimate_and_recover_eq2():
    df = make_frame({"rtn": eq2_delta(EQ2)})
    est = pa.exponent_estimates(df, "rtn", "no-such-profile")  # no committed fit: the Huber fit has no interval
    assert list(est) == list(pa.EXPONENT_ESTIMATES) and [e["name"] for e in est.values()] == \
        list(pa.EXPONENT_ESTIMATES.values())
    # δ is Eq. 2 to within the seed offsets: every estimate of γ_D (and γ_post) finds it
    for key in ("fit", "floor", "p1"):
        assert est[key]["gamma_d"] == pytest.approx(EQ2["gamma_D"], abs=0.01), key
    for key in ("fit", "floor", "slope"):
        assert est[key]["gamma_post"] == pytest.approx(EQ2["gamma_post"], abs=0.01), key
    assert math.isnan(est["fit"]["gamma_d_lo"]) and math.isnan(est["slope"]["gamma_d"])
    assert est["p1"]["gamma_d_lo"] < EQ2["gamma_D"] < est["p1"]["gamma_d_hi"]
    # what each reads: 4 bits × 12 runs of rows; 12 cells × INT3–6 above the floor; INT3–5 for P1's
    assert (est["fit"]["n_points"], est["fit"]["unit"]) == (4 * 14, "rows")
    assert (est["floor"]["n_points"], est["p1"]["n_points"], est["slope"]["n_points"]) == (48, 36, 48)
    assert est["p1"]["d_min"] == min(DS) and est["fit"]["d_max"] == max(DS)


def test_exponent_estimates_leave_out_models_trained_in_low_precision():
    # chapter 03 reads every training sweep: pooled into the cells, QAT models' RTN rows moved its
    # cross-check away from chapter 01's; the estimates read the high-precision runs only
    clean = make_frame({"rtn": eq2_delta(EQ2)})
    mixed = _with_qat_rows(clean)
    assert len(pa.high_precision_rows(mixed)) == len(clean)
    naive = pa.fit_eq2_loglinear(pa.ptq_table(mixed, "rtn"), pa.noise_floor(mixed, "rtn"))
    assert abs(naive["gamma_d"] - EQ2["gamma_D"]) > 0.05  # what pooling did
    a, b = (pa.exponent_estimates(f, "rtn", "no-such-profile") for f in (clean, mixed))
    for key in a:  # equal, NaN where NaN
        assert pd.Series(a[key]).equals(pd.Series(b[key])), (key, a[key], b[key])
    assert b["floor"]["gamma_d"] == pytest.approx(EQ2["gamma_D"], abs=0.01)


def test_local_d_slopes_of_a_power_law_are_its_exponent():
    df = make_frame({"rtn": eq2_delta(EQ2)})
    tab = pa.ptq_table(df, "rtn")
    steps = pa.local_d_slopes(tab, pa.noise_model(df, "rtn"))
    assert list(zip(steps["d_from"], steps["d_to"])) == list(zip(DS[:-1], DS[1:]))
    assert np.allclose(steps["slope"], EQ2["gamma_D"], atol=0.01) and (steps["series"] == 9).all()  # 3 N × INT3–5
    facts = pa.exponent_facts(df)
    assert facts["gd_local_rtn"] == "1.0M→2.0M 0.90, 2.0M→4.0M 0.90, 4.0M→8.0M 0.90"


def test_chapters_01_and_03_quote_the_same_estimates_on_the_committed_rows():
    from bitlaws.study import law_fits as lfs
    from bitlaws.study.claims import load_verdicts
    from bitlaws.study.noise import noise_model
    from bitlaws.study.power import p1_statistics
    from bitlaws.study.store import load_runs

    ch01 = load_runs("cpu", experiment="base_grid")
    ch03 = load_runs("cpu", experiment=lfs.TRAINING_EXPERIMENTS)
    assert set(ch03["experiment"]) > {"base_grid"}  # chapter 03 reads the QAT sweeps too
    rtn01, rtn03 = pa.exponent_estimates(ch01, "rtn", "cpu"), pa.exponent_estimates(ch03, "rtn", "cpu")
    assert rtn01 == rtn03
    text = lfs.ptq_crosscheck_markdown(rtn03)
    assert f"γ_D = **{rtn01['floor']['gamma_d']:.2f}**" in text and f"{int(rtn01['floor']['n_points'])} cells" in text
    assert "*above-floor regression*" in text and "*per-cell slope*" in text
    # chapter 01's Eq. 2 table prints the same above-floor regression
    eq2 = {m: pa.eq2_fit(ch01, m) for m in ("rtn",)}
    floor_row = f"{pa.EXPONENT_ESTIMATES['floor']}: γ_D / γ_N / γ_post"
    row = pa.eq2_table(ch01, eq2, {"rtn": None}).loc[floor_row, "here, RTN"]
    assert row.startswith(f"{rtn01['floor']['gamma_d']:.2f} / ")
    # P1's regression is the rule's own, on the cells `well_resolved` names; the fit carries the verdict's interval
    gptq = pa.exponent_estimates(ch01, "gptq", "cpu")
    tab, noise = pa.ptq_table(ch01, "gptq"), noise_model(ch01, "gptq")
    st = p1_statistics(tab, noise, None, pa.P1_BITS)
    assert (gptq["p1"]["gamma_d"], gptq["p1"]["gamma_d_lo"]) == (st["gamma_d"], st["gamma_d_ll_lo"])
    from bitlaws.study.power import _loglinear_gamma_d

    x = np.column_stack([np.ones(len(tab)), np.log(tab["n_tokens"]), np.log(tab["n_params"]), tab["bits_post"]])
    use = pa.well_resolved(tab, noise)
    assert _loglinear_gamma_d(x[use], tab["delta_ptq"].to_numpy()[use])[0] == pytest.approx(st["gamma_d"], rel=1e-12)
    stored = load_verdicts()["P1"].details
    assert [f"{gptq['fit'][k]:.2f}" for k in ("gamma_d", "gamma_d_lo", "gamma_d_hi")] == \
        [f"{stored[k]:.2f}" for k in ("gptq_eq2_gamma_d", "gptq_gamma_d_lo", "gptq_gamma_d_hi")]


def test_d_crit_wild_draws_keep_the_design_and_flip_each_clusters_residuals_together():
    # 2 sizes × 2 seeds × 2 D, a post-PTQ row at INT3 and INT4 per run; fitted values known
    rows = []
    for n in (1e4, 4e4):
        for s in (0, 1):
            for d in (1e6, 2e6):
                rows.append({"run_id": f"{n:g}-{s}-{d:g}", "n_params": n, "seed": s, "n_tokens": d})
    chin_f = pd.DataFrame(rows).assign(loss_val=lambda f: 2.0 + 0.01 * np.arange(len(f)))
    hat = chin_f["loss_val"].to_numpy() * np.exp(-0.005 * (1 + np.arange(len(chin_f)) % 3))
    ptq_f = pd.concat([chin_f.assign(bits_post=b) for b in (3, 4)], ignore_index=True)
    ptq_f = ptq_f.assign(loss_base=ptq_f["loss_val"], loss_val=ptq_f["loss_val"] + 0.05)
    delta = np.full(len(ptq_f), 0.04)
    for i in range(6):
        out = pa._d_crit_wild_frames(chin_f, ptq_f, {"chinchilla": hat, "delta": delta}, np.random.default_rng([0, i]))
        c, q = out["chinchilla"], out["ptq"]
        # the design is unchanged: same rows, same N, D, P_post, seeds
        assert c[["run_id", "n_params", "seed", "n_tokens"]].equals(chin_f[["run_id", "n_params", "seed", "n_tokens"]])
        assert q[["run_id", "bits_post"]].equals(ptq_f[["run_id", "bits_post"]])
        # each run's log residual is ± its own, one sign per (N, seed) cluster
        e = np.log(chin_f["loss_val"] / hat)
        sign = np.round(np.log(c["loss_val"] / hat) / e, 12)
        assert set(sign) <= {-1.0, 1.0}
        assert (chin_f.assign(s=sign).groupby(["n_params", "seed"])["s"].nunique() == 1).all()
        # a post-PTQ row: its run's new high-precision loss as L_before, its own residual with the run's sign
        base = q["run_id"].map(dict(zip(c["run_id"], c["loss_val"])))
        assert np.allclose(q["loss_base"], base, rtol=0, atol=1e-15)
        e_post = np.log(ptq_f["loss_val"] / (ptq_f["loss_base"] + delta))
        s_post = q["run_id"].map(dict(zip(c["run_id"], sign)))
        assert np.allclose(np.log(q["loss_val"] / (base + delta)), s_post * e_post, rtol=0, atol=1e-12)
    # one sign per run: every run its own sign, its post-PTQ rows with it
    out = pa._d_crit_wild_frames(chin_f, ptq_f, {"chinchilla": hat, "delta": delta}, np.random.default_rng([0, 1]),
                                 per="run")
    e = np.log(chin_f["loss_val"] / hat)
    sign = np.round(np.log(out["chinchilla"]["loss_val"] / hat) / e, 12)
    assert set(sign) <= {-1.0, 1.0}
    e_post = np.log(ptq_f["loss_val"] / (ptq_f["loss_base"] + delta))
    base = out["ptq"]["run_id"].map(dict(zip(out["chinchilla"]["run_id"], out["chinchilla"]["loss_val"])))
    s_post = out["ptq"]["run_id"].map(dict(zip(chin_f["run_id"], sign)))
    assert np.allclose(np.log(out["ptq"]["loss_val"] / (base + delta)), s_post * e_post, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="resample must be one of 'runs', 'wild', 'wild_runs'; got 'seeds'"):
        pa.d_crit_bootstrap(make_frame({"gptq": eq2_delta(EQ2)}), "gptq", n_boot=2, resample="seeds")

"""The QAT design sized for power (issue 15, item 6): the declared runs are the design the issue
asks for, and the candidate designs the power table simulates are the ones it names.

Oracles: run counts from the declaration's own arithmetic, Eq. 2 in closed form, the sweep
estimator's hours for the same runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bitlaws.laws import forms
from bitlaws.model import get_size, hand_count_n_params
from bitlaws.study import qat_design as qd
from bitlaws.study.sweep import PROFILES, PowerPlan, qat_factorial, qat_matched, qat_seeds


def _profile(**plan):
    base = dict(marginal_seeds=(1, 2), matched_sizes=("n27k", "n83k"), matched_budgets=(1_048_576,),
                matched_bits=(3, 4), factorial_cell=("n27k", 1_048_576), factorial_bits=(4, 8, 16),
                factorial_seeds=(0, 1))
    return dataclasses.replace(PROFILES["cpu"], power_design=PowerPlan(**{**base, **plan}))


def test_power_plan_refuses_seed_zero_and_p_post_below_two():
    with pytest.raises(ValueError, match="seeds beyond 0"):
        _profile(marginal_seeds=(0, 1))
    with pytest.raises(ValueError, match="P_post = P_w − 1 ≥ 2"):
        _profile(matched_bits=(2, 3))


def test_matched_runs_quantize_to_one_bit_below_on_both_grids():
    specs = qat_matched(_profile())
    hp = [s for s in specs if s.precision.is_high_precision]
    low = [s for s in specs if not s.precision.is_high_precision]
    assert len(hp) == 2 and len(low) == 4  # 2 sizes × 1 budget; × P_w ∈ {3, 4}
    for s in low:
        bw = int(s.precision.w.fmt.removeprefix("int"))
        assert {(c.bits, c.symmetric) for c in s.ptq} == {(bw - 1, False), (bw - 1, True)}
        assert s.precision.a is None and s.precision.kv is None and s.train.seed == 0
    for s in hp:  # the twin is quantized to every P_post of its (N, D), on both grids
        assert {(c.bits, c.symmetric) for c in s.ptq} == {(b, sym) for b in (2, 3) for sym in (False, True)}


def test_factorial_is_every_combination_but_all_sixteen():
    specs = qat_factorial(_profile())
    assert len(specs) == (27 - 1) * 2
    combos = {(s.train.seed, s.precision.w and s.precision.w.fmt, s.precision.a and s.precision.a.fmt,
               s.precision.kv and s.precision.kv.fmt) for s in specs}
    assert len(combos) == len(specs)  # no duplicate
    assert not any(s.precision.is_high_precision for s in specs)


def test_qat_seeds_repeat_the_marginal_sweeps_without_ptq():
    prof = _profile()
    q = prof.qat
    specs = qat_seeds(prof)
    per_seed = len(q.marginal_sizes) * len(q.marginal_budgets) * len(q.marginal_bits) * 3
    assert len(specs) == 2 * per_seed and {s.train.seed for s in specs} == {1, 2}
    assert all(not s.ptq for s in specs) and len({s.run_id for s in specs}) == len(specs)


def test_candidates_build_the_design_they_name():
    c = qd.Candidate("P4", "t", ("n27k", "n83k"), (1_048_576,), (3, 4), seeds=2)
    frames = qd.candidate_frames(c)
    for x in ("w", "a", "kv"):
        f = frames[f"neff_{x}"]
        assert len(f) == 2 * 1 * 2 * 2 and f["run_id"].is_unique
        others = [y for y in ("w", "a", "kv") if y != x]
        assert set(f[f"bits_{x}"]) == {3, 4} and all((f[f"bits_{y}"] == 16).all() for y in others)
    assert c.qat_runs == 3 * 2 * 1 * 2 * 2
    eq2 = {"C_T": 0.005, "gamma_D": 0.7, "gamma_N": 0.3, "gamma_post": 0.65}
    p9 = qd.Candidate("P9", "t", ("n27k",), (1_048_576, 2_097_152), (3, 5), seeds=1)
    cells = qd.candidate_cells(p9, eq2)
    assert list(cells["bits_post"]) == [2, 4, 2, 4] and (cells["bits_w"] - cells["bits_post"] == 1).all()
    n = hand_count_n_params(get_size("n27k"))
    want = eq2["C_T"] * np.exp(-2 / eq2["gamma_post"]) * 1_048_576 ** eq2["gamma_D"] / n ** eq2["gamma_N"]
    assert cells["delta_hp"].iloc[0] == pytest.approx(want, rel=1e-12)
    assert float(forms.delta_ptq(n, 2_097_152, 4, eq2)) == pytest.approx(cells["delta_hp"].iloc[3], rel=1e-12)
    with pytest.raises(ValueError, match="P9 needs P_w ≥ 3"):
        qd.Candidate("P9", "bad", ("n27k",), (1,), (2,), 1)
    with pytest.raises(ValueError, match="'P4', 'P5' or 'P9'"):
        qd.Candidate("P7", "bad", ("n27k",), (1,), (4,), 1)


def test_candidate_hours_agree_with_the_sweep_estimator():
    """The marginal sweeps as run cost what `python -m bitlaws estimate` says they cost (the same
    throughput; evaluation counted alike up to the PTQ evaluations of the weight-only runs)."""
    from bitlaws.study.budget import default_throughput, estimate

    tp = default_throughput("cpu")
    as_run = next(c for c in qd.CANDIDATES if c.claim == "P4" and c.seeds == 1 and "as run" in c.name)
    est = estimate("cpu", tp, ["qat_marginal"]).set_index("experiment").loc["qat_marginal", "hours"]
    assert qd.candidate_hours(as_run, "cpu", tp) == pytest.approx(est, rel=0.05)


def test_design_power_reads_and_writes_under_its_data_root(tmp_path, capsys):
    from bitlaws import cli

    # an empty data root: the rows are read from there (none), so it fails at once and names the folder
    assert cli.main(["design-power", "--profile", "cpu", "--data-root", str(tmp_path), "--n-sim", "2"]) == 2
    assert str(tmp_path) in capsys.readouterr().err


# --- Monte Carlo intervals on simulated power (power.mc_interval) and the seed choice -----------------

def test_mc_interval_is_wilsons_score_interval():
    from bitlaws.study.power import mc_interval

    z = 1.959963984540054  # the normal 97.5 % quantile
    # zero successes: Wilson's upper end is z² / (n + z²) exactly
    lo, hi = mc_interval(0.0, 100)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(z * z / (100 + z * z), rel=1e-9)
    # the closed form at k = 24 of 100
    p, n = 0.24, 100
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert mc_interval(p, n) == pytest.approx((centre - half, centre + half), rel=1e-9)
    assert np.isnan(mc_interval(float("nan"), 100)).all()
    for bad in ((1.2, 100), (0.5, 0), (0.5, 10.5), (0.123, 100)):
        with pytest.raises(ValueError):
            mc_interval(*bad)


def _design_rows(powers: dict[int, float], n_sim=100):
    import pandas as pd

    return pd.DataFrame([{"claim": "P4", "design": f"marginal sweeps as run, {k} seeds", "seeds": k, "qat_runs": 108 * k,
                          "cpu_hours": 5.0 * k, "power": p, "power_partly": p, "false_positive": 0.0, "n_sim": n_sim}
                         for k, p in powers.items()])


def test_seed_choice_reads_the_interval_not_only_the_point():
    # 3 seeds reach 0.8 as a point (0.82) but its interval does not clear 0.8; 5 seeds do (0.95)
    tab = _design_rows({1: 0.2, 3: 0.82, 5: 0.95})
    c = qd.seed_choice(tab, target=0.8)
    assert c["simulated"] == [1, 3, 5] and c["by_point"] == 3 and c["by_interval"] == 5
    text = qd.seed_choice_sentence(c, declared_seeds=5)
    assert "is 5 (0.95" in text and "2, 4 not simulated" in text and "declares 5" in text
    none = qd.seed_choice(_design_rows({1: 0.1, 2: 0.3}))
    assert none["by_point"] is None and "No simulated seed count" in qd.seed_choice_sentence(none, 2)


def test_as_run_agreement_z_is_the_two_sample_binomial_z():
    tab = _design_rows({1: 0.24})
    a = qd.as_run_agreement(tab, {"power": 0.16, "n_sim": 200.0})
    se = np.sqrt(0.24 * 0.76 / 100 + 0.16 * 0.84 / 200)
    assert a["z"] == pytest.approx((0.24 - 0.16) / se, rel=1e-12)
    assert "agree within Monte Carlo error" in qd.agreement_sentence(a)
    far = qd.as_run_agreement(tab, {"power": 0.02, "n_sim": 200.0})
    assert far["z"] > 1.96 and "differ beyond" in qd.agreement_sentence(far)
    assert np.isnan(qd.as_run_agreement(tab, None)["z"])
    view = qd.design_power_view(tab)
    assert list(view["power [95% MC]"]) == ["0.24 [0.17, 0.33]"]


def test_p5_factorial_candidate_counts_and_its_design():
    c = qd.Candidate("P5", "factorial", ("n83k",), (2_097_152,), (4, 8, 16), 2)
    assert c.qat_runs == 2 * (27 - 1)  # every (w, a, kv) in {4, 8, 16}³ but all-16, at 2 seeds
    d = qd.candidate_p5_design(c, hp_seeds=5)
    # mixed runs: 2 parts low (3 pairs × 2² widths = 12) or 3 (2³ = 8), at each seed
    assert len(d) == 2 * (12 + 8) and set(d["n_low"]) == {2.0, 3.0} and set(d["k_hp"]) == {5.0}
    low = d[["bits_w", "bits_a", "bits_kv"]].to_numpy() < 16
    assert ((d[["k_w", "k_a", "k_kv"]].to_numpy() == 2.0) == low).all()
    with pytest.raises(ValueError, match="'P4', 'P5' or 'P9'"):
        qd.Candidate("P6", "x", ("n27k",), (1,), (4,), 1)


def test_run_seconds_trains_at_the_fake_quant_rate_and_evaluates_at_the_plain_rate():
    from bitlaws.study.budget import assumed_throughput, flops_per_token, run_seconds

    m, t = get_size("n27k"), 256
    plain = assumed_throughput(1e-6)  # 10^6 FLOP/s at every size
    slow = dataclasses.replace(plain, qat_factor=0.25)
    tps = 1e6 / flops_per_token(m, t)  # tokens/s
    assert run_seconds(plain, m, t, 3000, 600, quantized=False) == pytest.approx(3000 / tps + 200 / tps, rel=1e-12)
    assert run_seconds(slow, m, t, 3000, 600, quantized=True) == pytest.approx(12000 / tps + 200 / tps, rel=1e-12)
    assert run_seconds(slow, m, t, 3000, 600, quantized=False) == run_seconds(plain, m, t, 3000, 600, quantized=True)


def test_candidate_hours_are_run_seconds_summed_over_the_design():
    from bitlaws.study.budget import assumed_throughput, run_seconds
    from bitlaws.study.sweep import _model

    tp = dataclasses.replace(assumed_throughput(1e-6), qat_factor=0.5)
    c = qd.Candidate("P4", "two seeds", ("n27k", "n83k"), (1_048_576,), (4, 8), 2)
    prof = PROFILES["cpu"]
    e = 2 * prof.train.eval_tokens
    want = sum(3 * 2 * 2 * run_seconds(tp, _model(z, prof), prof.train.seq_len, 1_048_576, e, quantized=True)
               + 1 * run_seconds(tp, _model(z, prof), prof.train.seq_len, 1_048_576, e, quantized=False)
               for z in c.sizes)  # per size: 3 parts × 2 bits × 2 seeds fake-quantized, 1 twin beyond seed 0
    assert qd.candidate_hours(c, "cpu", tp) == pytest.approx(want / 3600, rel=1e-12)


def test_rate_text_prints_the_monte_carlo_interval():
    from bitlaws.study.claims import rate_text
    from bitlaws.study.power import mc_interval

    lo, hi = mc_interval(0.28, 200)
    assert rate_text({"power": 0.28, "n_sim": 200.0}) == f"28% [{100 * lo:.0f}, {100 * hi:.0f}]" == "28% [22, 35]"
    assert rate_text({"false_positive": 0.0, "n_sim": 100.0}, "false_positive") == "0% [0, 4]"
    assert rate_text({"power": 0.283, "n_sim": 200.0}) == "28%"  # not a count out of n_sim: no interval
    assert rate_text({"power": float("nan"), "n_sim": 200.0}) == "n/a"

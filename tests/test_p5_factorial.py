"""P5's rule v5 on the seeded factorial (issue 14): the seed-blocked statistics against synthetic
factorials with known constants, the within-seed σ, the size of the whole procedure, its power. v5's statistics
stay in rule v6 (tests/test_p5_v6.py), which adds the paper's κ, the pair contrasts and the homogeneity check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import claims, law_fits, power
from bitlaws.study.sweep import PROFILES

# our Chinchilla fit's scale at the factorial's cell (A, α set T = A·N^(−α) ≈ 0.163 at N = 83,280)
CHIN = {"A": 84.27, "B": 1564.5, "E": 1.258, "alpha": 0.5515, "beta": 0.5515}
N, D = 83_280.0, 2_097_152.0
COMBOS = np.array(list(itertools.product((4.0, 8.0, 16.0), repeat=3)))
SEEDS = (101, 102, 103)


def _table(form: str, sigma_w: float, sigma_seed: float, seed: int, interaction: float = power.P5_INTERACTION):
    """A factorial from ``form``'s combination means (``power._p5_truths``) plus a seed block of SD
    ``sigma_seed`` shared by each seed's runs and within-seed noise ``sigma_w``."""
    rng = np.random.default_rng(seed)
    mu = power._p5_truths(N, D, CHIN, COMBOS, interaction)[form]
    y = mu[:, None] + sigma_seed * rng.standard_normal((1, len(SEEDS))) + sigma_w * rng.standard_normal((27, 3))
    return {"y": y, "combos": COMBOS}


def _rows(y: np.ndarray, status=None) -> pd.DataFrame:
    rows = []
    for j, s in enumerate(SEEDS):
        for i, c in enumerate(COMBOS):
            rows.append({"run_id": f"r{s}-{i}", "seed": s, "bits_w": c[0], "bits_a": c[1], "bits_kv": c[2],
                         "status": "ok", "ptq_method": "none", "n_params": N, "n_tokens": D, "loss_val": y[i, j],
                         **{f"fmt_{x}": "none" if b == 16 else f"int{int(b)}" for x, b in zip(("w", "a", "kv"), c)}})
    return pd.DataFrame(rows)


def test_rule_p5_v5_decisions():
    v5 = dict((v, when) for v, when, _ in claims.RULE_HISTORY["P5"])["5"]
    assert "before the first qat_factorial row" in v5
    assert claims.rule_p5_v5(3, 0.5, 0.01) == "reproduced"
    assert claims.rule_p5_v5(3, 0.5, 0.30) == "partly"
    assert claims.rule_p5_v5(3, 0.01, 0.01) == "not reproduced"  # an interaction the κ form cannot carry
    assert claims.rule_p5_v5(3, 0.5, 0.97) == "not reproduced"  # the effects compound less than they add
    assert claims.rule_p5_v5(1, 0.5, 0.01) == "inconclusive"  # one complete seed: no within-seed σ
    assert claims.rule_p5_v5(3, math.nan, 0.01) == "inconclusive"


def test_v5_grades_the_three_laws_apart_with_seed_blocks():
    # σ_w = 0.003 nats, a seed block 3× larger: the blocked analysis removes it
    mult = power.p5_factorial_statistics(_table("mult", 0.003, 0.01, 0), CHIN, N)
    assert mult["grade"] == "reproduced" and mult["p_multiply"] < 1e-6 and mult["p_interaction"] >= 0.05
    # T fitted free: its interval holds our Chinchilla T, which generated the data
    assert mult["t_lo"] <= mult["t_chinchilla"] <= mult["t_hi"]
    assert mult["t_chinchilla"] == pytest.approx(84.27 * N ** -0.5515, rel=1e-12)
    add = power.p5_factorial_statistics(_table("add", 0.003, 0.01, 0), CHIN, N)
    assert add["grade"] != "reproduced" and add["p_multiply"] >= 0.05 and add["kappa_lo"] <= 0 <= add["kappa_hi"]
    inter = power.p5_factorial_statistics(_table("interaction", 0.003, 0.01, 0), CHIN, N)
    assert inter["grade"] == "not reproduced" and inter["p_interaction"] < 0.05


def test_the_blocked_statistics_ignore_a_seed_effect_exactly():
    t = _table("mult", 0.004, 0.0, 3)
    shifted = {**t, "y": t["y"] + np.array([[0.05, -0.02, 0.11]])}
    a, b = power.p5_factorial_statistics(t, CHIN, N), power.p5_factorial_statistics(shifted, CHIN, N)
    for k in ("sigma_w", "f_add", "f_interaction", "t_multiply", "p_multiply", "p_interaction", "kappa"):
        assert b[k] == pytest.approx(a[k], rel=1e-6, abs=1e-12), k
    assert b["sigma_seed"] > 10 * a["sigma_seed"]  # the seed effect is seen, and set aside


def test_within_seed_sigma_is_recovered_within_its_chi2_interval():
    # a known σ_w = 0.005 under a seed block of 0.02: σ̂_w's 95 % χ² interval covers it; the
    # across-seed spread of the all-16 runs (v4's σ) counts the block and overstates it
    st = power.p5_factorial_statistics(_table("add", 0.005, 0.02, 7), CHIN, N)
    assert st["nu"] == 52 and st["sigma_w_lo"] <= 0.005 <= st["sigma_w_hi"]
    assert st["sigma_w_hi"] / st["sigma_w_lo"] == pytest.approx(
        math.sqrt(power_chi2(0.975) / power_chi2(0.025)), rel=1e-9)
    # coverage over 400 datasets: within the Monte Carlo interval of 95 %
    rng = np.random.default_rng(11)
    mu = power._p5_truths(N, D, CHIN, COMBOS, 0.0)["mult"]
    y = mu[None, :, None] + 0.02 * rng.standard_normal((400, 1, 3)) + 0.005 * rng.standard_normal((400, 27, 3))
    s = power._p5_v5_batch(y, COMBOS)["sigma_w"]
    lo, hi = s * math.sqrt(52 / power_chi2(0.975)), s * math.sqrt(52 / power_chi2(0.025))
    cover = float(np.mean((lo <= 0.005) & (0.005 <= hi)))
    mc_lo, mc_hi = claims.mc_interval(cover, 400, level=0.999)
    assert mc_lo <= 0.95 <= mc_hi


def power_chi2(q: float) -> float:
    from scipy import stats

    return float(stats.chi2.ppf(q, 52))


def test_the_whole_procedure_has_its_nominal_size_on_a_null():
    # every check dataset refitted from scratch (both forms, σ̂_w, p-values): each size's 95 % MC
    # interval from 1000 datasets holds the nominal 5 %
    truth = power._p5_truths(N, D, CHIN, COMBOS, 0.0)
    sz = power.p5_factorial_sizes(truth["add"], truth["mult"], 0.008, 3, n_check=1000, seed=0)
    assert sz["size_n_sim"] == 1000
    for k in ("size_multiply", "size_interaction_add", "size_interaction_mult"):
        assert sz[f"{k}_lo"] <= 0.05 <= sz[f"{k}_hi"], (k, sz[k])
    assert sz["size_reverse"] <= 0.01  # the paper's law, multiplying, is almost never read as "less than add"


def test_v5_power_comes_out_both_ways_and_rises_with_the_seed_share():
    pw = power.p5_factorial_power(N, D, CHIN, 0.004, 3, n_sim=60, seed=1)
    assert pw["power"] >= 0.85 and pw["false_positive"] <= 0.15 and pw["power_interaction"] >= 0.6
    assert set(pw) >= {f"power_rho{r:g}" for r in power.P5_RHOS} and pw["rho_worst"] in power.P5_RHOS
    assert pw["power"] == min(pw[f"power_rho{r:g}"] for r in power.P5_RHOS)
    # at a large σ and ρ = 0 the interaction alternative is rarely detected; a seed share leaves less
    # within-seed noise for the blocked analysis (same draws), so it is detected more often
    loud = power.p5_factorial_power(N, D, CHIN, 0.03, 3, rhos=(0.0, 0.7), n_sim=60, seed=1)
    assert loud["power_interaction_rho0.7"] > loud["power_interaction_rho0"]
    assert power.p5_factorial_power(N, D, CHIN, 0.004, 1, n_sim=10)["power"] == 0.0  # no within-seed σ
    with pytest.raises(ValueError, match="ρ"):
        power.p5_factorial_power(N, D, CHIN, 0.004, 3, rhos=(1.0,))


def test_factorial_table_drops_a_seed_with_a_diverged_or_missing_run():
    y = _table("mult", 0.003, 0.0, 0)["y"]
    rows = _rows(y)
    rows.loc[(rows["seed"] == 102) & (rows["bits_a"] == 4) & (rows["bits_w"] == 4) & (rows["bits_kv"] == 4),
             "status"] = "diverged"
    rows = rows[~((rows["seed"] == 103) & (rows["bits_w"] == 8) & (rows["bits_a"] == 16) & (rows["bits_kv"] == 16))]
    tab = power.p5_factorial_table(rows, seeds=SEEDS)
    assert tab["seeds"] == (101,) and set(tab["dropped"]) == {102, 103}
    assert "diverged" in tab["dropped"][102] and "missing" in tab["dropped"][103]
    assert np.allclose(tab["y"][:, 0], y[:, 0])
    with pytest.raises(ValueError, match="several rows"):
        power.p5_factorial_table(pd.concat([_rows(y), _rows(y).iloc[:1]]))
    with pytest.raises(ValueError, match="include 16"):
        power.p5_factorial_table(_rows(y), bits=(4, 8))


def test_p5_rows_reads_the_factorial_only_once_every_run_has_a_row():
    plan = PROFILES["cpu"].power_design
    assert tuple(plan.factorial_seeds) == SEEDS and tuple(plan.factorial_bits) == (4, 8, 16)
    hp = pd.DataFrame([{"run_id": "hp0", "seed": 0, "bits_w": 16, "bits_a": 16, "bits_kv": 16, "status": "ok",
                        "ptq_method": "none", "n_params": N, "n_tokens": D, "loss_val": 2.0, "experiment": "base_grid",
                        "fmt_w": "none", "fmt_a": "none", "fmt_kv": "none"}])
    full = _rows(_table("mult", 0.003, 0.0, 0)["y"]).assign(experiment="qat_factorial")
    full.loc[0, "status"] = "diverged"  # a diverged run still has its row: the factorial is read
    rows, which = law_fits.p5_rows(hp, full, plan)
    assert which == "qat_factorial" and len(rows) == 81 and set(rows["seed"]) == set(SEEDS)
    rows, which = law_fits.p5_rows(hp, full.iloc[1:], plan)  # a run without a row: not yet
    assert which == "qat_joint"


def test_verdict_p5_reads_the_joint_sweep_until_the_factorial_is_complete():
    # rule v8 grades the factorial (tests/test_p5_v8.py); until every factorial run has a row the joint sweep
    # is read as exploratory and the grade is inconclusive, with v7's pre-registered power reported
    from bitlaws.study.store import load_runs

    df = load_runs("cpu", experiment=law_fits.TRAINING_EXPERIMENTS)
    fits = {"chinchilla": {"status": "ok", "params": CHIN}}
    fac = _rows(_table("mult", 0.003, 0.01, 2)["y"]).assign(experiment="qat_factorial")
    two = fac[~((fac["seed"] == 103) & (fac.index % 27 == 5))].copy()  # seed 103 loses a run: a missing row
    v = law_fits.verdict_p5(fits, "cpu", df, n_sim=40, factorial=two)
    assert v.details.get("design") != "qat_factorial" and v.verdict == "inconclusive"
    assert "rule v8" in v.reason and "Pre-registered (rule v8" in v.reason
    assert 0.0 <= v.details["factorial_power"] <= 1.0 and "factorial_power_interaction" in v.details

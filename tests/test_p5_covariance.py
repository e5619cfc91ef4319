"""P5's residual covariance: mixed runs of one (N, D) share their marginal runs and baseline (the
seed-paired high-precision run, or the seeds' mean), and ``power.p5_covariance`` must be the
covariance that sharing implies; rule v4's fitted "add" lack of fit must equal rᵀV⁻¹r/σ² with it.

Oracle: ``p5_design`` is linear in the runs' losses, so bumping one run's loss by 1 gives one column
of the map M from run noise to residuals; with independent run noise of variance σ² the residuals'
covariance is exactly σ²·M·Mᵀ, computed here without the covariance code's own bookkeeping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bitlaws.laws import forms
from bitlaws.study import power

CHIN = {"A": 40.0, "B": 300.0, "E": 1.2, "alpha": 0.3, "beta": 0.3}
COMBOS = ((4, 4, 16), (4, 8, 8), (8, 4, 8), (4, 4, 4), (8, 8, 4), (16, 4, 4), (4, 4, 4))  # (4,4,4) twice: 2 seeds


def _rows(paired: bool = False) -> pd.DataFrame:
    """Two (N, D) cells: 3 and 2 high-precision seeds, marginals at 4 and 8 bits (the 4-bit weight
    marginal with 2 seeds at the first cell), the mixed runs of COMBOS at each: of seeds 0, 1, ...
    or (``paired``) all of seed 0, so they pair with the seed-0 runs."""
    rows = []
    for n, d, k_hp in ((83e3, 2 ** 21, 3), (27e3, 2 ** 20, 2)):
        rows += [{"n_params": n, "n_tokens": d, "bits_w": 16, "bits_a": 16, "bits_kv": 16, "seed": s} for s in range(k_hp)]
        for x in ("w", "a", "kv"):
            for b in (4, 8):
                seeds = (0, 1) if (x, b, n) == ("w", 4, 83e3) else (0,)
                rows += [{"n_params": n, "n_tokens": d, "bits_w": 16, "bits_a": 16, "bits_kv": 16, f"bits_{x}": b,
                          "seed": s} for s in seeds]
        rows += [{"n_params": n, "n_tokens": d, "bits_w": c[0], "bits_a": c[1], "bits_kv": c[2], "seed": 0 if paired else i}
                 for i, c in enumerate(COMBOS)]
    f = pd.DataFrame(rows).assign(status="ok", ptq_method="none")
    consts = {**forms.PAPER_CONSTANTS, **CHIN}
    loss = forms.qat_loss(f["n_params"].to_numpy(float), f["n_tokens"].to_numpy(float), f["bits_w"].to_numpy(float),
                          f["bits_a"].to_numpy(float), f["bits_kv"].to_numpy(float), consts)
    return f.assign(loss_val=np.asarray(loss, float))


def test_paired_baseline_is_the_seed_0_run():
    rows = _rows(paired=True)
    hp = (rows["bits_w"] == 16) & (rows["bits_a"] == 16) & (rows["bits_kv"] == 16)
    rows.loc[hp, "loss_val"] += 0.01 * rows.loc[hp, "seed"]  # seeds 0, 1, 2 differ: their mean is not seed 0's
    d = power.p5_design(rows)
    seed0 = rows[hp & (rows["seed"] == 0)].set_index("n_params")["loss_val"]
    assert (d["paired_hp"] == 1.0).all() and (d["k_hp"] == 1.0).all()
    np.testing.assert_array_equal(d["loss_hp"].to_numpy(), seed0.loc[d["n_params"]].to_numpy())
    w4 = rows[(rows["bits_w"] == 4) & (rows["bits_a"] == 16) & (rows["bits_kv"] == 16) & (rows["seed"] == 0)]
    first = d[(d["n_params"] == 83e3) & (d["bits_w"] == 4)]
    assert (first["k_w"] == 1.0).all() and (first["loss_w"] == float(w4[w4["n_params"] == 83e3]["loss_val"].iloc[0])).all()
    # one mixed run of another seed without its own high-precision run: its whole cell uses the means
    rows.loc[rows.index[-1], "seed"] = 7
    d2 = power.p5_design(rows)
    assert set(d2[d2["n_params"] == 27e3]["k_hp"]) == {2.0} and (d2[d2["n_params"] == 83e3]["paired_hp"] == 1).all()


def test_paired_covariance_is_exactly_what_the_shared_runs_imply():
    rows = _rows(paired=True)
    d = power.p5_design(rows)
    m = _residual_map(rows, "add", 1.0)
    np.testing.assert_allclose(power.p5_covariance(d), m @ m.T, rtol=0, atol=1e-9)


def _residual_map(rows: pd.DataFrame, form: str, bump: float) -> np.ndarray:
    """Columns: d(residual of each mixed run)/d(loss of run j), by bumping run j's loss."""
    def residual(f):
        d = power.p5_design(f)
        add, mult = power._p5_predictions(d, CHIN)
        return d["loss_mix"].to_numpy(float) - (add if form == "add" else mult)

    base = residual(rows)
    cols = []
    for j in range(len(rows)):
        f = rows.copy()
        f.loc[f.index[j], "loss_val"] += bump
        cols.append((residual(f) - base) / bump)
    return np.column_stack(cols)


def test_additive_covariance_is_exactly_what_the_shared_runs_imply():
    rows = _rows()
    d = power.p5_design(rows)
    # mixed runs of seeds 3–6 have no high-precision run of their seed: the cells use the seeds' means
    assert len(d) == 2 * len(COMBOS) and d["k_w"].max() == 2.0 and set(d["k_hp"]) == {3.0, 2.0}
    assert d["paired_hp"].sum() == 0
    m = _residual_map(rows, "add", 1.0)
    v = power.p5_covariance(d)
    np.testing.assert_allclose(v, m @ m.T, rtol=0, atol=1e-9)
    # off the diagonal: runs of different cells share nothing, runs of one cell share the hp mean
    assert v[0, len(COMBOS)] == 0.0 and np.all(v[:len(COMBOS), :len(COMBOS)] != 0.0)


def test_product_covariance_is_its_linearisation():
    rows = _rows()
    d = power.p5_design(rows)
    m = _residual_map(rows, "mult", 1e-6)
    v = power.p5_covariance(d, power._p5_weights(d, CHIN))
    np.testing.assert_allclose(v, m @ m.T, rtol=1e-4, atol=1e-6)
    assert not np.allclose(v, power.p5_covariance(d), atol=1e-3)  # the product's weights are not all 1


def test_chi2_of_independent_noise_has_mean_n():
    # with run noise as the model assumes, χ² = rᵀV⁻¹r/σ² is χ²(n): its mean over draws is n
    rows, sigma = _rows(), 0.01
    d0 = power.p5_design(rows)
    m = _residual_map(rows, "add", 1.0)
    v = power.p5_covariance(d0)
    rng = np.random.default_rng(0)
    r = m @ (sigma * rng.standard_normal((m.shape[1], 4000)))
    chi2 = np.einsum("ij,ij->j", r, np.linalg.solve(v, r)) / sigma ** 2
    n = len(d0)
    assert chi2.mean() == pytest.approx(n, abs=4 * np.sqrt(2 * n / 4000))
    naive = (r ** 2 / np.diag(v)[:, None]).sum(axis=0) / sigma ** 2  # v2's independent residuals: same mean ...
    assert naive.var() > 1.3 * chi2.var()  # ... but a wider spread, so v2's F-test was miscalibrated


def test_rule_p5_v4_grades_and_the_noise_check():
    # version 4, kept for the joint sweep's exploratory reading (rule v5: tests/test_p5_factorial.py)
    from bitlaws.study import claims

    assert claims.rule_p5_v4(0.5, 0.01, 0.5) == "reproduced"
    assert claims.rule_p5_v4(0.5, 0.20, 0.5) == "partly"
    assert claims.rule_p5_v4(0.01, 0.01, 0.5) == "not reproduced"
    assert claims.rule_p5_v4(0.5, 0.01, 0.01) == "inconclusive"  # residuals tighter than the noise allows
    assert claims.rule_p5_v4(0.5, 0.01, float("nan")) == "inconclusive"


NM = dict(loss_dof=30, post_sd=0.015, post_dof=30, delta_abs=2e-4, delta_rel=0.07, delta_dof=30, n_cells=4,
          n_groups=12)


def test_fitted_additive_lack_of_fit_is_the_shared_runs_quadratic_form():
    # the "add" form fitted to every run leaves RSS = rᵀV⁻¹r of the measured marginals' sum (V from
    # the shared runs): an exact identity of least squares, here with seed-paired and mean baselines
    from bitlaws.study.noise import NoiseModel

    rows = _rows()
    rows = rows.assign(loss_val=rows["loss_val"] + 0.01 * np.random.default_rng(4).standard_normal(len(rows)))
    d = power.p5_design(rows)
    st = power.p5_statistics(d, CHIN, NoiseModel(loss_sd=0.01, **NM), n_sim=20, n_check=20)
    add, _ = power._p5_predictions(d, CHIN)
    r = d["loss_mix"].to_numpy(float) - add
    assert st["chi2_add"] == pytest.approx(r @ np.linalg.solve(power.p5_covariance(d), r) / 0.01 ** 2, rel=1e-9)
    assert st["dof"] == len(d)  # one parameter per baseline and marginal: the mixed runs are the surplus


def test_product_fit_reaches_scipys_optimum():
    from scipy import optimize

    rows = _rows()
    rows = rows.assign(loss_val=rows["loss_val"] + 0.01 * np.random.default_rng(5).standard_normal(len(rows)))
    m = power._P5Model(power.p5_design(rows), CHIN)
    ours = m.fit(m.z)["rss_mult"]
    ref = optimize.least_squares(lambda th: m.sw * (m._mult(th)[0] - m.z), m.pinv @ (m.sw * m.z), method="lm",
                                 xtol=1e-15, ftol=1e-15)
    assert ours == pytest.approx(float(np.sum(ref.fun ** 2)), rel=1e-8)
    assert ours < m.fit(m.z)["rss_add"] * 10  # a finite optimum, not a diverged one


def test_statistics_scale_as_one_over_sigma_squared_and_the_noise_check():
    from bitlaws.study.noise import NoiseModel

    rows = _rows()
    quiet = rows.assign(loss_val=rows["loss_val"] + 0.001 * np.random.default_rng(3).standard_normal(len(rows)))
    d = power.p5_design(quiet)
    honest = power.p5_statistics(d, CHIN, NoiseModel(loss_sd=0.001, **NM), n_sim=100, n_check=20)
    inflated = power.p5_statistics(d, CHIN, NoiseModel(loss_sd=0.015, **NM), n_sim=100, n_check=20)
    assert honest["noise_check"] >= 0.05 and honest["grade"] != "inconclusive"
    assert inflated["noise_check"] < 0.02 and inflated["grade"] == "inconclusive"
    assert inflated["chi2_add"] == pytest.approx(honest["chi2_add"] / 225, rel=1e-9)


def test_p_values_integrate_sigma_hat_exactly():
    # P(R/V ≥ x), V = χ²_4/4, for positive, negative and mixed R: against brute-force draws of V
    rng = np.random.default_rng(6)
    null = np.array([-3.0, -0.5, 0.0, 0.7, 2.0, 9.0])
    v = rng.chisquare(4, 400_000) / 4
    for x in (-2.0, -0.1, 0.5, 3.0):
        brute = np.mean((null[:, None] / v[None, :]) >= x, axis=1).sum()
        assert power._p_upper(x, null, 4)[0] == pytest.approx((1 + brute) / 7, abs=2e-3)
        assert power._p_lower(x, null, 4)[0] == pytest.approx((1 + len(null) - brute) / 7, abs=2e-3)
    assert power._p_upper(0.5, null, 0)[0] == pytest.approx((1 + 3) / 7)  # σ̂ exact: a plain count


def _factorial_frames():
    """Training rows at one cell (5 high-precision seeds, a joint sweep of seed 0) and the seeded
    factorial's rows: every (P_w, P_a, P_kv) in {4, 8, 16}³, all-16 included, at seeds 101, 102, 103
    (seeds no other sweep trains, as the cpu PowerPlan declares)."""
    import itertools

    n, d = 83280.0, 2097152.0
    base = [{"experiment": "base_grid", "bits_w": 16, "bits_a": 16, "bits_kv": 16, "seed": s} for s in range(5)]
    base += [{"experiment": "qat_marginal", "bits_w": 16, "bits_a": 16, "bits_kv": 16, f"bits_{x}": 4, "seed": 0}
             for x in ("w", "a", "kv")]
    base += [{"experiment": "qat_joint", "bits_w": 4, "bits_a": 4, "bits_kv": 4, "seed": 0}]
    fact = [{"experiment": "qat_factorial", "bits_w": c[0], "bits_a": c[1], "bits_kv": c[2], "seed": s}
            for s in (101, 102, 103) for c in itertools.product((4, 8, 16), repeat=3)]

    def frame(rows, tag):
        f = pd.DataFrame(rows).assign(n_params=n, n_tokens=d, status="ok", ptq_method="none")
        f["run_id"] = [f"{tag}{i}" for i in range(len(f))]
        f["obs_id"] = f["run_id"]
        consts = {**forms.PAPER_CONSTANTS, **CHIN}
        return f.assign(loss_val=np.asarray(forms.qat_loss(n, d, f["bits_w"].to_numpy(float), f["bits_a"].to_numpy(float),
                                                           f["bits_kv"].to_numpy(float), consts), float) + 1e-3 * f["seed"])
    return frame(base, "b"), frame(fact, "f")


def test_p5_reads_the_seeded_factorial_once_complete():
    from bitlaws.study import law_fits
    from bitlaws.study.sweep import PowerPlan

    df, fact = _factorial_frames()
    plan = PowerPlan(marginal_seeds=(), matched_sizes=(), matched_budgets=(), matched_bits=(),
                     factorial_cell=("n83k", 2097152), factorial_seeds=(101, 102, 103))
    rows, which = law_fits.p5_rows(df, fact, plan)
    d = power.p5_design(rows)
    # rule v5 reads the factorial's rows alone (a seed block: other seeds' base-grid runs carry nothing)
    assert which == "qat_factorial" and set(rows["experiment"]) == {"qat_factorial"}
    assert len(d) == 3 * 20 and (d["paired_hp"] == 1).all()  # 20 mixed combos per seed, each beside its own seed
    assert set(d["seed"]) == {101.0, 102.0, 103.0}  # paired with the factorial's own all-16 runs
    # without its all-16 baselines the factorial is incomplete: P5 stays on the joint sweep
    hp16 = (fact["bits_w"] == 16) & (fact["bits_a"] == 16) & (fact["bits_kv"] == 16)
    assert law_fits.p5_rows(df, fact[~hp16], plan)[1] == "qat_joint"
    np.testing.assert_allclose(d["loss_hp"] - d["seed"] * 1e-3, d["loss_hp"].iloc[0] - d["seed"].iloc[0] * 1e-3)
    # one run short of the declared factorial, or none of it: the joint sweep
    rows2, which2 = law_fits.p5_rows(df, fact.iloc[1:], plan)
    assert which2 == "qat_joint" and "qat_factorial" not in set(rows2["experiment"])
    assert law_fits.p5_rows(df, None, plan)[1] == "qat_joint" and len(power.p5_design(rows2)) == 1

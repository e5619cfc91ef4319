"""P5's mechanism pilot (bitlaws.study.p5_mechanism): contrasts recovered exactly from losses built
from known effects, the factorial's within-seed σ as the additive model's residual, bad flags refused."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import p5_mechanism as pm
from bitlaws.study.sweep import MECHANISM_VARIANTS

# known effects [nats/byte]: main effects of K4, V4, A4 on o_proj's input and elsewhere, and two interactions
EFF = {"k": 0.01, "v": 0.03, "a_o": 0.05, "a_rest": 0.12, "ao_v": -0.02, "arest_k": -0.004}


def _loss(seed: int, a: int, kv: int, parts: str, skip: str, w: int = 16) -> float:
    k = kv == 4 and "k" in parts
    v = kv == 4 and "v" in parts
    ao = a == 4 and skip != "o_proj"
    ar = a == 4
    return (2.0 + 0.01 * seed + 0.3 * (w == 4) + EFF["k"] * k + EFF["v"] * v + EFF["a_o"] * ao + EFF["a_rest"] * ar
            + EFF["ao_v"] * (ao and v) + EFF["arest_k"] * (ar and k))


def _frames(seeds=(1, 2, 3), drop=None):
    fac = [{"bits_w": w, "bits_a": a, "bits_kv": kv, "seed": s, "ptq_method": "none", "status": "ok",
            "loss_val": _loss(s, a, kv, "kv", "", w)}
           for s in seeds for w, a, kv in itertools.product((4, 8, 16), repeat=3)]
    mech = [{"bits_a": a, "bits_kv": kv, "seed": s, "ptq_method": "none", "status": "ok",
             "train_variant": ";".join(([f"kv_parts={p}"] if p != "kv" else []) + ([f"a_skip={sk[0]}"] if sk else [])),
             "loss_val": _loss(s, a, kv, p, sk[0] if sk else "")}
            for s in seeds for a, kv, p, sk in MECHANISM_VARIANTS]
    mech = pd.DataFrame(mech)
    if drop is not None:
        mech = mech.drop(index=drop)
    return pd.DataFrame(fac), mech


def test_contrasts_recover_the_known_effects_exactly():
    fac, mech = _frames()
    tab = pm.mechanism_table(fac, mech).set_index("contrast")
    want = {
        "K4": EFF["k"], "V4": EFF["v"], "KV4": EFF["k"] + EFF["v"], "A4": EFF["a_o"] + EFF["a_rest"],
        "A4 not o_proj": EFF["a_rest"],
        "A4 x KV4": EFF["ao_v"] + EFF["arest_k"], "A4 x K4": EFF["arest_k"], "A4 x V4": EFF["ao_v"],
        "A4 not o_proj x KV4": EFF["arest_k"],
        "(A4 x V4) - (A4 x K4)": EFF["ao_v"] - EFF["arest_k"],
        "(A4 x KV4) - (A4 not o_proj x KV4)": EFF["ao_v"],
        "A4 - (A4 not o_proj)": EFF["a_o"],
    }
    assert set(tab.index) == set(want)
    for name, v in want.items():
        assert tab.loc[name, "estimate"] == pytest.approx(v, abs=1e-12), name
        assert tab.loc[name, "n_seeds"] == 3
    # the synthetic factorial is exactly additive in the seed and in W, A, KV except A4KV4: σ_w from it alone
    sigma, df = pm.within_seed_sigma(fac)
    assert df == 26 * 2
    y = fac.pivot_table(index=["bits_w", "bits_a", "bits_kv"], columns="seed", values="loss_val").to_numpy()
    assert sigma == pytest.approx(0.0, abs=1e-12) and np.allclose(y - y[:, :1], y[0] - y[0, 0])


def test_standard_error_is_sigma_times_root_sum_of_squared_coefficients_over_seeds():
    fac, mech = _frames()
    rng = np.random.default_rng(0)
    fac = fac.assign(loss_val=fac["loss_val"] + rng.normal(0, 0.01, len(fac)))
    sigma, df = pm.within_seed_sigma(fac)
    assert 0.005 < sigma < 0.02 and df == 52
    tab = pm.mechanism_table(fac, mech).set_index("contrast")
    assert tab.loc["K4", "se"] == pytest.approx(sigma * math.sqrt(2 / 3))
    assert tab.loc["A4 x K4", "se"] == pytest.approx(sigma * math.sqrt(4 / 3))
    # (A4 x V4) - (A4 x K4): the shared A4 and all-16 runs cancel, four runs remain
    assert tab.loc["(A4 x V4) - (A4 x K4)", "se"] == pytest.approx(sigma * math.sqrt(4 / 3))
    from scipy import stats
    t = stats.t.ppf(0.975, 52)
    assert tab.loc["K4", "hi"] - tab.loc["K4", "estimate"] == pytest.approx(t * tab.loc["K4", "se"])


def test_a_seed_missing_a_run_leaves_only_the_contrasts_that_need_it():
    fac, mech = _frames()
    i = mech.index[(mech["seed"] == 2) & (mech["train_variant"] == "kv_parts=v")][0]  # A16 V4 at seed 2
    fac2, mech2 = _frames(drop=[i])
    tab = pm.mechanism_table(fac2, mech2).set_index("contrast")
    assert tab.loc["V4", "n_seeds"] == 2 and tab.loc["A4 x V4", "n_seeds"] == 2 and tab.loc["K4", "n_seeds"] == 3
    assert tab.loc["A4 x V4", "estimate"] == pytest.approx(EFF["ao_v"])
    assert sorted(tab.loc["V4", "per_seed"]) == [1, 3]


def test_unreadable_variant_and_duplicates_are_refused():
    fac, mech = _frames()
    with pytest.raises(ValueError, match="train_variant 'kv_part=v' has 'kv_part=v'; allowed"):
        pm.mechanism_table(fac, mech.assign(train_variant="kv_part=v"))
    with pytest.raises(ValueError, match="several rows of one configuration"):
        pm.mechanism_table(fac, pd.concat([mech, mech.iloc[:1]]))


def test_mechanism_figure_draws_each_contrast_at_its_estimate():
    from bitlaws.study import figures

    fac, mech = _frames()
    tab = pm.mechanism_table(fac, mech)
    fig = figures.laws.p5_mechanism_figure(tab)
    left, right = fig.axes
    xs = sorted(round(float(line.get_xdata()[0]), 9) for ax in (left, right) for line in ax.lines
                if line.get_marker() == "o")
    assert xs == sorted(round(float(v), 9) for v in tab["estimate"])
    assert [t.get_text() for t in right.get_yticklabels()][-1] == "A4 × KV4"
    # with no mechanism rows only the factorial's contrasts are drawn, the others named
    fig2 = figures.laws.p5_mechanism_figure(pm.mechanism_table(fac, mech.iloc[:0]))
    assert sum("no runs yet" in t.get_text() for ax in fig2.axes for t in ax.texts) == len(pm.CONTRASTS) - 3


def test_reading_applies_the_fixed_rule_to_each_prediction():
    fac, mech = _frames()
    rng = np.random.default_rng(1)
    fac = fac.assign(loss_val=fac["loss_val"] + rng.normal(0, 0.002, len(fac)))  # σ_w > 0, intervals narrow
    text = pm.reading(pm.mechanism_table(fac, mech))
    # the synthetic truth: V with o_proj's input carries a -0.02 interaction, K a -0.004 one
    assert "(i) more of the shortfall with V than with K: **supported**" in text
    assert "(ii) less of the shortfall without o_proj's input quantized: **supported**" in text
    # swap the roles of K and V: (i) is contradicted
    EFF["ao_v"], EFF["arest_k"] = 0.02, -0.004
    try:
        fac2, mech2 = _frames()
        text2 = pm.reading(pm.mechanism_table(fac2.assign(loss_val=fac2["loss_val"] + rng.normal(0, 0.002, len(fac2))),
                                              mech2))
    finally:
        EFF["ao_v"], EFF["arest_k"] = -0.02, -0.004
    assert "(i) more of the shortfall with V than with K: **contradicted**" in text2
    # no mechanism rows: only the factorial's contrast
    text3 = pm.reading(pm.mechanism_table(fac, mech.iloc[:0]))
    assert text3.count("not yet testable") == 2 and "A4 × KV4 = " in text3
    # wide intervals: not resolved
    noisy = fac.assign(loss_val=fac["loss_val"] + rng.normal(0, 0.2, len(fac)))
    assert pm.reading(pm.mechanism_table(noisy, mech)).count("**not resolved**") == 2


def test_power_is_the_size_at_zero_and_grows_with_the_effect():
    assert pm.power(0.0122, 52, 0.0) == pytest.approx(0.05, abs=1e-9)
    p = [pm.power(0.0122, 52, e) for e in (0.005, 0.0103, 0.02, 0.034)]
    assert p == sorted(p) and p[1] == pytest.approx(0.13, abs=0.01) and p[3] == pytest.approx(0.78, abs=0.02)
    assert pm.power(0.0122, 52, -0.0103) == pytest.approx(p[1])
    with pytest.raises(ValueError, match="se must be positive"):
        pm.power(0.0, 52, 0.01)


def test_minimum_effect_inverts_power():
    e = pm.minimum_effect(52)
    assert 2.8 < e < 2.9 and pm.power(1.0, 52, e) == pytest.approx(0.8, abs=1e-8)
    with pytest.raises(ValueError, match="target must lie in"):
        pm.minimum_effect(52, target=0.01)


def test_seeds_needed_reaches_the_target_power_and_one_fewer_does_not():
    se, n, df, effect = 0.0123, 3, 52, -0.0103
    s = pm.seeds_needed(se, n, df, effect)
    assert pm.power(se * math.sqrt(n / s), df, effect) >= 0.8 - 1e-9
    assert pm.power(se * math.sqrt(n / (s - 1)), df, effect) < 0.8
    # an effect already resolvable at 3 seeds needs no more; bad input is refused
    assert pm.seeds_needed(0.001, 3, 52, 0.05) == 1
    with pytest.raises(ValueError, match="effect"):
        pm.seeds_needed(se, n, df, 0.0)


def test_w16_sigma_is_the_additive_residual_over_the_configurations_the_contrasts_read():
    fac, mech = _frames()
    # the synthetic losses are additive in configuration and seed: no residual, on (15 - 1)(3 - 1) df
    sigma, df = pm.w16_sigma(fac, mech)
    assert df == 28 and sigma == pytest.approx(0.0, abs=1e-12)
    # one run off by e: the residual sum of squares is e²·(C-1)(S-1)/(C·S), so σ = e/√(C·S) on 28 df
    e = 0.03
    bumped = mech.copy()
    bumped.loc[0, "loss_val"] += e
    sigma, df = pm.w16_sigma(fac, bumped)
    assert sigma == pytest.approx(e / np.sqrt(15 * 3), rel=1e-9)
    tab = pm.mechanism_table(fac, bumped, sigma="w16").set_index("contrast")
    assert tab.loc["K4", "sigma_w"] == pytest.approx(sigma, rel=1e-12) and tab.loc["K4", "df"] == 28
    with pytest.raises(ValueError, match="sigma must be 'factorial' or 'w16'"):
        pm.mechanism_table(fac, mech, sigma="pooled")


def test_ablation_sigma_reads_the_ablation_runs_alone_against_the_factorials():
    from scipy import stats

    fac, mech = _frames()
    n_var = len(MECHANISM_VARIANTS)
    out = pm.ablation_sigma(fac, mech)
    # the ablation's synthetic losses are additive: no residual, on (C - 1)(S - 1) df
    assert out["df"] == (n_var - 1) * 2 and out["sigma"] == pytest.approx(0.0, abs=1e-12)
    e = 0.03
    bumped = mech.copy()
    bumped.loc[0, "loss_val"] += e
    out = pm.ablation_sigma(fac, bumped)
    assert out["sigma"] == pytest.approx(e / np.sqrt(n_var * 3), rel=1e-9)
    sw, dfw = pm.within_seed_sigma(fac)
    assert (out["sigma_w"], out["df_w"]) == (pytest.approx(sw), dfw)
    f = out["sigma"] ** 2 / sw ** 2
    assert out["f"] == pytest.approx(f)
    assert out["p"] == pytest.approx(2 * min(stats.f.sf(f, out["df"], dfw), stats.f.cdf(f, out["df"], dfw)))
    # a bumped factorial run leaves the ablation's own σ alone
    fac2 = fac.copy()
    fac2.loc[(fac2["bits_w"] == 16) & (fac2["bits_a"] == 16) & (fac2["bits_kv"] == 16) & (fac2["seed"] == 1),
             "loss_val"] += e
    assert pm.ablation_sigma(fac2, bumped)["sigma"] == pytest.approx(out["sigma"], rel=1e-12)

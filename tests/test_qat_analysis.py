"""bitlaws.study.low_precision_training on synthetic frames: baselines, the P4 and P10 rules, the compute-matched suite."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import low_precision_training as qa
from bitlaws.laws import forms

BASE = {"profile": "cpu", "status": "ok", "ptq_method": "none", "seed": 0, "bits_post": 16,
        "fmt_w": "none", "fmt_a": "none", "fmt_kv": "none", "bits_w": 16, "bits_a": 16, "bits_kv": 16}


def row(experiment, size, n, d, loss, **kw):
    r = {**BASE, "experiment": experiment, "size": size, "n_params": n, "n_tokens": d, "loss_val": loss, **kw}
    r["run_id"] = f"{experiment}-{size}-{d}-{r['bits_w']}-{r['bits_a']}-{r['bits_kv']}-{r['fmt_w']}-{r['seed']}"
    r["obs_id"] = r["run_id"] + f"-{r['ptq_method']}-{r['bits_post']}"
    return r


def frame():
    rows = [row("base_grid", "s", 1000, 10_000, 2.0), row("base_grid", "m", 3000, 10_000, 1.8)]
    for size, n, hp in (("s", 1000, 2.0), ("m", 3000, 1.8)):
        for b in (4, 8):
            rows.append(row("qat_marginal", size, n, 10_000, hp + 0.30 / b, bits_w=b, fmt_w=f"int{b}"))
            rows.append(row("qat_marginal", size, n, 10_000, hp + 0.80 / b, bits_a=b, fmt_a=f"int{b}"))
            rows.append(row("qat_marginal", size, n, 10_000, hp + 0.10 / b, bits_kv=b, fmt_kv=f"int{b}"))
        # a QAT→PTQ row must not enter the training tables
        rows.append(row("qat_marginal", size, n, 10_000, hp + 0.5, bits_w=8, fmt_w="int3", ptq_method="rtn",
                        bits_post=3))
    rows.append(row("qat_joint", "m", 3000, 10_000, 2.5, bits_w=4, bits_a=4, fmt_w="int4", fmt_a="int4"))
    return pd.DataFrame(rows)


def test_training_rows_label_the_part_and_bits():
    t = qa.training_rows(frame())
    assert (t["ptq_method"] == "none").all()
    assert dict(t["part"].value_counts()) == {"w": 4, "a": 4, "kv": 4, "hp": 2, "joint": 1}
    j = t[t["part"] == "joint"].iloc[0]
    assert j["bits"] == 4


def test_marginal_table_measures_against_the_same_cells_baseline():
    m = qa.marginal_table(frame())
    assert len(m) == 12 and m["loss_hp"].notna().all()
    for _, r in m.iterrows():
        scale = {"w": 0.30, "a": 0.80, "kv": 0.10}[r["part"]]
        assert r["delta_train"] == pytest.approx(scale / r["bits"], abs=1e-12)
        assert r["loss_hp"] == {"s": 2.0, "m": 1.8}[r["size"]]
    emp = qa.empirical_order(m, bits=(4, 8))
    assert emp.loc[4, "a"] == pytest.approx(0.2) and emp.loc[4, "w"] == pytest.approx(0.075)
    assert emp.loc[8, "kv"] == pytest.approx(0.0125)
    # the chapter's table: the same numbers under the parts' names, one header row (bits names the columns' axis)
    styled = qa.empirical_order_table(m.assign(seed=0))
    assert styled.data.loc[4, "activations"] == pytest.approx(0.2) and list(styled.data.columns) == [
        "weights", "activations", "KV cache"]
    assert styled.data.columns.name == "bits" and styled.data.index.name is None
    assert styled.to_html().split("<thead>")[1].split("</thead>")[0].count("<tr>") == 1


def test_seeded_marginal_table_averages_each_seeds_delta_against_its_own_twin():
    # seed 0 in qat_marginal against the base grid; seeds 1 and 2 in qat_seeds, seed 1's twin in the base
    # grid and seed 2's in qat_seeds (each high-precision loss differs, so a wrong twin shows)
    hp = {0: 2.0, 1: 2.1, 2: 1.9}
    shift = {0: 0.010, 1: 0.014, 2: 0.018}  # δ_train of the weights at 4 bits, per seed: mean 0.014, sd 0.004
    rows = [row("base_grid", "s", 1000, 10_000, hp[0]), row("base_grid", "s", 1000, 10_000, hp[1], seed=1),
            row("qat_seeds", "s", 1000, 10_000, hp[2], seed=2),
            row("qat_marginal", "s", 1000, 10_000, hp[0] + shift[0], bits_w=4, fmt_w="int4"),
            row("qat_marginal", "s", 1000, 10_000, hp[0] + 0.2, bits_a=4, fmt_a="int4")]  # one seed: left out
    rows += [row("qat_seeds", "s", 1000, 10_000, hp[k] + shift[k], bits_w=4, fmt_w="int4", seed=k) for k in (1, 2)]
    t = qa.seeded_marginal_table(pd.DataFrame(rows))
    assert len(t) == 1 and (t.loc[0, "part"], t.loc[0, "bits"], t.loc[0, "seeds"]) == ("w", 4, 3)
    assert t.loc[0, "delta_mean"] == pytest.approx(0.014, abs=1e-12)
    assert t.loc[0, "delta_sd"] == pytest.approx(0.004, abs=1e-12)
    assert t.loc[0, "delta_half"] == pytest.approx(4.302653 * 0.004 / 3 ** 0.5, rel=1e-6)  # t_{0.975, 2} · sd/√3
    assert qa.seeded_marginal_table(frame()).empty  # one seed everywhere: no seeded cell
    f = qa.seeded_facts(t)  # mean 0.014 over sd 0.004/√3: t = 6.06 > t_{0.975, 2} = 4.30, resolved
    assert (f["seeded_sizes"], f["seeded_budgets"], f["seeded_seeds"], f["seeded_rows"], f["seeded_resolved"]) == \
        ("s", "{10,000}", "3", 1, 1)
    assert f["seeded_sd_median"] == pytest.approx(0.004) and f["seeded_mean_median"] == pytest.approx(0.014)
    assert f["seeded_reach"] == "the weights up to 4 bits"
    f = qa.seeded_facts(t.assign(delta_sd=0.006))  # t = 4.04 < 4.30: not resolved
    assert f["seeded_resolved"] == 0 and f["seeded_reach"] == "the weights at no P"
    # one-sided: a resolved gain (a negative mean) is not a cost; the reach runs from the lowest P up
    three = pd.concat([t.assign(bits=b, delta_mean=m) for b, m in ((3, 0.02), (4, -0.014), (5, 0.014))],
                      ignore_index=True)
    f = qa.seeded_facts(three)
    assert f["seeded_resolved"] == 2 and f["seeded_reach"] == "the weights up to 3 bits"
    assert qa.seeded_facts(three.assign(seeds=[2, 3, 3]))["seeded_seeds"] == "2–3"
    with pytest.raises(ValueError, match="two or more seeds"):
        qa.seeded_facts(t.iloc[:0])
    text = qa.seeded_markdown(t, "cpu")
    assert "mean of 3 seeds" in text and "the seeds resolve the weights up to 4 bits" in text
    assert "No seeded cell is among the `cpu` rows" in qa.seeded_markdown(t.iloc[:0], "cpu")


def test_part_gap_pairs_parts_within_a_seed_and_reads_cells_as_the_sample():
    # two cells × two seeds; each seed's high-precision twin differs (it cancels in δ_kv − δ_w); the gaps per
    # (cell, seed): cell s 0.010, 0.020 (mean 0.015, var 5e-5), cell m 0.030, 0.050 (mean 0.040, var 2e-4): gap
    # 0.0275; seed level σ_w² = (5e-5 + 2e-4)/2 on 2 dof, se = σ_w·√(1/2 + 1/2)/2 = 0.0055902, t_{0.975, 2} = 4.3027;
    # over the cells' means sd 0.017678, se 0.0125 on 1 dof, t_{0.975, 1} = 12.706
    hp = {("s", 0): 2.0, ("s", 1): 2.1, ("m", 0): 1.8, ("m", 1): 1.7}
    gaps = {("s", 0): 0.010, ("s", 1): 0.020, ("m", 0): 0.030, ("m", 1): 0.050}
    rows = []
    for (size, seed), h in hp.items():
        n = {"s": 1000, "m": 3000}[size]
        exp = "qat_marginal" if seed == 0 else "qat_seeds"
        rows.append(row("base_grid" if seed == 0 else "qat_seeds", size, n, 10_000, h, seed=seed))
        rows.append(row(exp, size, n, 10_000, h + 0.05, bits_w=4, fmt_w="int4", seed=seed))
        rows.append(row(exp, size, n, 10_000, h + 0.05 + gaps[(size, seed)], bits_kv=4, fmt_kv="int4", seed=seed))
    runs = qa.marginal_seed_runs(pd.DataFrame(rows))
    assert len(runs) == 8 and runs["delta_train"].min() == pytest.approx(0.05)  # each against its own twin
    g = qa.part_gap(runs, "kv", "w", 4)
    assert g["gap"] == pytest.approx(0.0275, abs=1e-12) and g["se_cells"] == pytest.approx(0.0125, abs=1e-12)
    assert g["se"] == pytest.approx(0.000125 ** 0.5 / 2, rel=1e-12) and g["sigma_w"] == pytest.approx(0.000125 ** 0.5)
    assert (g["dof"], g["dof_cells"], g["cells"], g["seeds_min"], g["seeds_max"]) == (2, 1, 2, 2, 2)
    assert g["hi"] - g["gap"] == pytest.approx(4.3026527 * 0.000125 ** 0.5 / 2, rel=1e-7)
    assert g["hi_cells"] - g["gap"] == pytest.approx(12.7062047 * 0.0125, rel=1e-7)
    # per N, on the pooled σ_w: cell s alone, se = σ_w·√(1/2)
    m, lo, hi = g["by_n"][1000.0]
    assert m == pytest.approx(0.015) and hi - m == pytest.approx(4.3026527 * (0.000125 / 2) ** 0.5, rel=1e-7)
    # each part's mean, with the same seed-level interval: δ_w is 0.05 in every run (no spread)
    means = qa.part_means(runs.assign(part=runs["part"].replace({"kv": "a"})).pipe(
        lambda r: pd.concat([r, r[r["part"] == "w"].assign(part="kv")], ignore_index=True)), 4)
    assert means["w"]["mean"] == pytest.approx(0.05) and means["w"]["hi"] == pytest.approx(0.05)
    assert means["a"]["mean"] == pytest.approx(0.05 + 0.0275) and means["a"]["dof"] == 2
    assert qa.part_gap(runs, "w", "kv", 4)["gap"] == pytest.approx(-0.0275, abs=1e-12)  # antisymmetric
    assert qa.part_gap(runs, "kv", "w", 8) is None  # no run at 8 bits
    assert qa.part_gap(runs[runs["size"] == "s"], "kv", "w", 4) is None  # one cell: no interval
    with pytest.raises(ValueError, match="parts must be among"):
        qa.part_gap(runs, "kv", "weights", 4)


def test_seeded_facts_pool_the_seed_noise_within_each_p_and_say_both_counts():
    # at 4 bits two cells of 3 seeds at sd 0.003 and 0.009: σ_4² = (2·0.003² + 2·0.009²)/4 = 4.5e-5, σ_4 = 0.006708
    # on 4 degrees of freedom (t_{0.975, 4} = 2.776), a pooled half-width 2.776·0.006708/√3 = 0.01075; at 8 bits one
    # cell at sd 0.001, its own σ
    t = pd.DataFrame({"size": ["s", "s", "s"], "n_params": [1000] * 3, "n_tokens": [10_000, 20_000, 10_000],
                      "part": ["w"] * 3, "bits": [4, 4, 8], "seeds": [3, 3, 3], "delta_mean": [0.012, 0.011, 0.0005],
                      "delta_sd": [0.003, 0.009, 0.001]})
    f = qa.seeded_facts(t)
    assert f["seeded_pooled_hi"] == pytest.approx(0.0045 ** 0.5 / 10, rel=1e-12) and f["seeded_pooled_hi_bits"] == 4
    assert (f["seeded_pooled_lo"], f["seeded_pooled_lo_bits"], f["seeded_pooled_dof"]) == (pytest.approx(0.001), 8, 2)
    # own sd: 0.012 > 4.303·0.003/√3 = 0.00745 (resolved), 0.011 < 4.303·0.009/√3 = 0.02236 (not); half the cells at
    # 4 bits is enough for the reach; 8 bits: 0.0005 < 4.303·0.001/√3
    assert (f["seeded_resolved"], f["seeded_reach"]) == (1, "the weights up to 4 bits")
    # pooled within 4 bits: both means clear 0.01075
    assert (f["seeded_resolved_pooled"], f["seeded_reach_pooled"]) == (2, "the weights up to 4 bits")
    text = qa.seeded_markdown(t, "cpu")
    assert "σ_P runs from 0.0067 nats/byte at 4 bits to 0.0010 at 8, on at least 2 degrees of freedom" in text
    assert "2 points are resolved" in text


def _fits(gw, nw, ga, na, gkv, nkv):
    return {"neff_w": {"status": "ok", "params": {"gamma_w": gw, "n_w": nw}},
            "neff_a": {"status": "ok", "params": {"gamma_a": ga, "n_a": na}},
            "neff_kv": {"status": "ok", "params": {"gamma_kv": gkv, "n_kv": nkv}}}


def test_factors_match_the_closed_form_and_the_paper():
    c = forms.PAPER_CONSTANTS
    pf = qa.paper_factors((4, 8))
    assert pf.loc[4, "a"] == pytest.approx(1 - np.exp(-4 / c["gamma_a"] + c["n_a"]))
    assert pf.loc[4, "a"] == pytest.approx(0.331, abs=1e-3) and pf.loc[4, "kv"] == pytest.approx(0.828, abs=1e-3)
    f = qa.fitted_factors(_fits(1.0, 0.5, 2.0, 1.0, 0.5, 2.0), (6,))
    assert f.loc[6, "w"] == pytest.approx(1 - np.exp(-6 + 0.5))
    assert qa.fitted_factors({"neff_w": {"status": "skipped"}}) is None


def test_p4_rule():
    df = frame()
    # the paper's own constants give a < w < kv at 4–8 bits: reproduced
    c = forms.PAPER_CONSTANTS
    paper = _fits(c["gamma_w"], c["n_w"], c["gamma_a"], c["n_a"], c["gamma_kv"], c["n_kv"])
    assert qa.verdict_p4(paper, df, "cpu").verdict == "reproduced"
    # weights less sensitive than the KV cache everywhere, activations still the most: partly
    swapped = _fits(c["gamma_kv"], c["n_kv"], c["gamma_a"], c["n_a"], c["gamma_w"], c["n_w"])
    v = qa.verdict_p4(swapped, df, "cpu")
    assert v.verdict == "partly" and "below the weights' at every width from 4 to 8 bits" in v.reason
    # the measured gap, over the frame's two cells of one seed: δ_kv − δ_w = 0.10/4 − 0.30/4 in both, no spread
    assert "δ_kv − δ_w at 4 bits is -0.050 [-0.050, -0.050] nats/byte (2 (N, D) cells of 1 seed; 95 % t over the " \
        "cells' means, 1 degrees of freedom)" in v.reason
    assert "the weights cost more" in v.reason
    assert "4: f_a < f_w < f_kv" not in v.ours and "f_a < f_kv < f_w" in v.ours
    # the weights' curve crossing the KV cache's inside 4–8 bits is named as a crossing
    crossing = _fits(0.6, 6.58, 3.0, 1.3, 2.0, -1.0)  # f_w and f_kv meet near 6.5 bits; f_a lowest throughout
    f = qa.fitted_factors(crossing)
    kv_below = [b for b in f.index if f.loc[b, "kv"] < f.loc[b, "w"]]
    assert 0 < len(kv_below) < len(f.index)
    vc = qa.verdict_p4(crossing, df, "cpu")
    assert vc.verdict == "partly" and "curves cross: f_kv < f_w at " + ", ".join(map(str, kv_below)) in vc.reason
    # activations the least sensitive: not reproduced
    a_least = _fits(c["gamma_a"], c["n_a"], 0.3, 0.0, c["gamma_kv"], c["n_kv"])
    assert qa.verdict_p4(a_least, df, "cpu").verdict == "not reproduced"
    assert qa.verdict_p4({}, df, "cpu").verdict == "pending"


def _formats_frame(deltas):
    df = frame()
    extra = []
    for (size, n, hp), (fmt, d) in zip((("s", 1000, 2.0), ("m", 3000, 1.8), ("s", 1000, 2.0)), deltas):
        b = int(fmt[2])
        extra.append(row("qat_formats", size, n, 10_000, hp + 0.30 / b + d, bits_w=b, fmt_w=fmt))
    return pd.concat([df, pd.DataFrame(extra)], ignore_index=True)


def test_p10_rule():
    better = _formats_frame([("fp4_e2m1fn", -0.01), ("fp4_e2m1fn", -0.02), ("fp8_e5m2", -0.001)])
    t = qa.formats_table(better)
    assert len(t) == 3 and np.allclose(t["delta"], [-0.01, -0.02, -0.001])
    assert qa.verdict_p10(better, "cpu").verdict == "reproduced"
    worse = _formats_frame([("fp4_e2m1fn", 0.01), ("fp4_e2m1fn", 0.02), ("fp8_e4m3fn", 0.001)])
    assert qa.verdict_p10(worse, "cpu").verdict == "not reproduced"
    # the paper's 8-bit format (E5M2) wins while the others lose: partly
    mixed = _formats_frame([("fp4_e2m1fn", 0.01), ("fp4_e2m1fn", 0.02), ("fp8_e5m2", -0.001)])
    assert qa.verdict_p10(mixed, "cpu").verdict == "partly"
    assert qa.verdict_p10(frame(), "cpu").verdict == "pending"


# Seeds 1–4 of the base grid's cell (s, 10,000) beside seed 0's 2.00: P10 reads their pooled σ on 4 degrees of freedom
_SEED_LOSSES = (2.02, 1.98, 2.01, 1.99)


def _seeded(deltas, cells=(("s", 1000, _SEED_LOSSES),)):
    df = _formats_frame(deltas)
    extra = [row("base_grid", size, n, 10_000, loss, seed=k + 1) for size, n, losses in cells
             for k, loss in enumerate(losses)]
    return pd.concat([df, pd.DataFrame(extra)], ignore_index=True)


def _oracle_sigma(*groups):
    """The pooled σ and its degrees of freedom of seed groups, by hand."""
    ss = sum(float(((np.asarray(g) - np.mean(g)) ** 2).sum()) for g in groups)
    dof = sum(len(g) - 1 for g in groups)
    return math.sqrt(ss / dof), dof


def test_p10_reads_the_mean_difference_against_the_seed_noise():
    from scipy import stats

    sigma, dof = _oracle_sigma((2.00, *_SEED_LOSSES))
    t = float(stats.t.ppf(0.975, dof))
    se = sigma * math.sqrt(3 + 3) / 3  # three pairs, three distinct integer twins
    clear = qa.verdict_p10(_seeded([("fp4_e2m1fn", -0.05), ("fp4_e2m1fn", -0.06), ("fp8_e5m2", -0.04)]), "cpu")
    assert -0.05 < -t * se  # the oracle's own reading: beyond t standard errors
    assert clear.verdict == "reproduced" and clear.details["mean_delta_se"] == pytest.approx(se)
    assert clear.details["sigma"] == pytest.approx(sigma) and clear.details["sigma_dof"] == dof
    assert clear.details["mean_delta_t"] == pytest.approx(t)
    # FP ahead in 2 of 3 pairs by a hair: inside the noise, and the share of pairs is not graded (rule v3)
    hair = qa.verdict_p10(_seeded([("fp4_e2m1fn", -0.003), ("fp4_e2m1fn", 0.002), ("fp8_e5m2", -0.001)]), "cpu")
    assert hair.verdict == "not reproduced" and f"inside {t:.2f} standard errors" in hair.ours
    # a null result with FP behind in most pairs is not a reproduction, whatever the sign of one format
    null = qa.verdict_p10(_seeded([("fp4_e2m1fn", 0.003), ("fp4_e2m1fn", 0.002), ("fp8_e5m2", -0.001)]), "cpu")
    assert null.verdict == "not reproduced" and "no format's mean is beyond" in null.ours


def test_p10_reads_the_pooled_seed_sigma_not_the_largest_cell():
    # rule v4: two seeded cells, one noisy (σ 0.045) and one quiet (σ 0.004); P10 reads their pooled σ on 4 + 4
    # degrees of freedom, as P1 does (noise.noise_model), not the noisy cell's σ (noise.noise_floor, rule v3's)
    noisy, quiet = (2.04, 1.96, 2.05, 1.95), (1.805, 1.795, 1.802, 1.798)
    df = _seeded([("fp4_e2m1fn", -0.05), ("fp4_e2m1fn", -0.06), ("fp8_e5m2", -0.04)],
                 cells=(("s", 1000, noisy), ("m", 3000, quiet)))
    sigma, dof = _oracle_sigma((2.00, *noisy), (1.80, *quiet))
    v = qa.verdict_p10(df, "cpu")
    assert v.details["sigma"] == pytest.approx(sigma) and v.details["sigma_dof"] == dof == 8
    largest = float(np.std((2.00, *noisy), ddof=1))
    assert largest > 1.3 * sigma and v.details["noise_floor"] == pytest.approx(largest)  # reported, not read
    assert v.details["mean_delta_se"] == pytest.approx(sigma * math.sqrt(6) / 3)
    assert f"on {dof} degrees of freedom" in v.ours


def test_compute_matched_summary_reads_the_mean_over_seeds_against_the_seed_noise():
    from bitlaws.model import get_size, hand_count_n_params
    from bitlaws.study.sweep import PROFILES

    q = PROFILES["cpu"].qat
    assert q.cm_seeds == (0, 1, 2)
    n_of = {s: hand_count_n_params(get_size(s)) for s, _ in q.cm_cells}
    ref = row("base_grid", q.cm_reference, hand_count_n_params(get_size(q.cm_reference)), q.cm_budget, 1.90)

    def member(size, bits, loss, seed):
        return row("compute_matched", size, n_of[size], q.cm_budget, loss, seed=seed, bits_w=bits, bits_a=bits,
                   bits_kv=bits, fmt_w=f"int{bits}", fmt_a=f"int{bits}", fmt_kv=f"int{bits}")

    means = dict(zip(q.cm_cells, (1.95, 1.85, 1.86, 1.895)))  # P = 4, 6, 8, 12
    full = [ref] + [member(s, b, m + off, seed) for (s, b), m in means.items()
                    for seed, off in zip(q.cm_seeds, (-0.01, 0.0, 0.01))]
    s = qa.compute_matched_summary(pd.DataFrame(full), "cpu")
    assert s["complete"] and s["planned"] == len(q.cm_cells) * 3 + 1 == len(full)
    assert s["best_bits"] == 6.0 and s["losses"][6.0] == pytest.approx(1.85) and s["seeds"] == {
        4.0: 3, 6.0: 3, 8.0: 3, 12.0: 3, 16.0: 1}
    assert s["margin"] == pytest.approx(0.01) and s["spread"] < 1.02
    # σ pooled over the members: every member's seeds are ±0.01 around its mean, so σ = 0.01 on 8 degrees of
    # freedom; P6 rule v4's q = t(1 − 0.05/8, 8) = 3.206 (Bonferroni over the 4 comparisons with the best;
    # tables: t(0.99375, 8) ≈ 3.21); three seeds against three: q·σ·sqrt(2/3) = 0.0262 admits 8 bits (+0.01)
    # but not 12 (+0.045); the single 16-bit run: q·σ·sqrt(4/3) = 0.037 < 0.05
    assert s["sigma_source"] == "suite" and s["sigma"] == pytest.approx(0.01) and s["sigma_dof"] == 8.0
    assert s["critical"] == pytest.approx(3.206, abs=5e-4)
    assert s["near_best"] == [6.0, 8.0]
    # Welch against the best (6 bits, seeds 1.84, 1.85, 1.86): 8 bits' seeds are the same shifted by 0.01, so
    # t = 0.01/sqrt(2·0.0001/3) = 1.2247 on 4 degrees of freedom, two-sided p = 0.2879
    assert s["welch_p"][8.0] == pytest.approx(0.2879, abs=5e-4) and 16.0 not in s["welch_p"]
    # only seed 0 in: incomplete, and σ falls back to the base grid's (none here: every member is near)
    first = [ref] + [member(s_, b, m, 0) for (s_, b), m in means.items()]
    s1 = qa.compute_matched_summary(pd.DataFrame(first), "cpu")
    assert not s1["complete"] and s1["sigma_source"] == "base_grid" and math.isnan(s1["sigma"])
    assert s1["near_best"] == [4.0, 6.0, 8.0, 12.0, 16.0]
    # a second seed of the reference cell gives the base grid's σ = σ(1.90, 1.92) = 0.01414: single
    # seeds against single seeds, 2√2σ = 0.04 around 1.85 admits 1.86 but not 1.895 or 1.90
    seeded = first + [row("base_grid", q.cm_reference, ref["n_params"], q.cm_budget, 1.92, seed=1)]
    s2 = qa.compute_matched_summary(pd.DataFrame(seeded), "cpu")
    assert s2["sigma_source"] == "base_grid" and s2["sigma"] == pytest.approx(0.02 / math.sqrt(2))
    assert s2["near_best"] == [6.0, 8.0]


def _chinchilla_fits(a=3.0, alpha=0.46):
    return {"chinchilla": {"status": "ok", "params": {"A": a, "B": 400.0, "E": 1.7, "alpha": alpha, "beta": alpha}}}


def test_p10_is_inconclusive_where_our_design_cannot_detect_the_papers_effect():
    from scipy import stats

    # three pairs and a pooled seed σ of 0.016 on 4 degrees of freedom: the paper's ~0.002 nats is far inside
    # t standard errors
    df = _seeded([("fp4_e2m1fn", -0.05), ("fp4_e2m1fn", -0.06), ("fp8_e5m2", -0.04)])
    v = qa.verdict_p10(df, "cpu", _chinchilla_fits())
    pred = qa.paper_fp_int_effect(qa.formats_table(df).dropna(subset=["delta"]), _chinchilla_fits()["chinchilla"]["params"])
    assert (pred < 0).all()  # the paper's FP fit is ahead of its INT fit at every width
    sigma, dof = _oracle_sigma((2.00, *_SEED_LOSSES))
    t, se = float(stats.t.ppf(0.975, dof)), sigma * math.sqrt(6) / 3
    assert abs(pred.mean()) < t * se
    assert v.verdict == "inconclusive" and "would read reproduced" in v.reason  # mean −0.05 < −t s.e.
    assert 0 <= v.details["power"] < 0.5
    # pairs for 80 % power, checked against scipy's noncentral t: at n pairs (per-pair variance σ²·(n + Σm²)/n,
    # here 2σ²) the rule's power reaches 80 %, at n − 1 it does not
    n = v.details["pairs_for_80pct_power"]
    power_at = lambda k: stats.nct.sf(t, dof, abs(pred.mean()) / math.sqrt(2 * sigma ** 2 / k))  # noqa: E731
    assert n > 3 and power_at(n) >= 0.8 > power_at(n - 1)


def test_p10_pairs_for_power_matches_the_normal_formula_with_sigma_known():
    from scipy import stats

    n = qa.p10_pairs_for_power(2 * 0.02 ** 2, -0.004, math.inf)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert n == math.ceil(2 * 0.02 ** 2 * z ** 2 / 0.004 ** 2)
    assert qa.p10_pairs_for_power(1.0, 0.0, 10) == math.inf
    assert qa.p10_pairs_for_power(2 * 0.02 ** 2, -0.004, 5) > n  # σ̂ on few degrees of freedom asks for more


def test_p10_power_draws_sigma_hat_on_its_degrees_of_freedom():
    from scipy import stats

    # 60 pairs of one non-paper format, each with its own integer twin: the rule is a one-sided t-test at 2.5 %
    n, sigma, dof = 60, 0.02, 4
    t = pd.DataFrame({"size": "s", "n_tokens": 10_000, "seed": np.arange(n), "bits": 4, "fmt": "fp4_e2m1fn",
                      "n_params": 1000})
    null = qa.p10_power(t, np.zeros(n), sigma, n_sim=4000, dof=dof)
    assert null["false_positive"] == pytest.approx(0.025, abs=0.008)
    se = sigma * math.sqrt(2 / n)
    out = qa.p10_power(t, np.full(n, -2.5 * se), sigma, n_sim=4000, dof=dof)
    assert out["power"] == pytest.approx(stats.nct.sf(stats.t.ppf(0.975, dof), dof, 2.5), abs=0.025)


def _boot(df, draws):
    from bitlaws.study.law_fits import PIPELINE_STAGES, _sha, stage_frames

    frames = stage_frames(df)
    return {"status": "ok", "stages": list(PIPELINE_STAGES), "draws": draws,
            "input_sha256": {s: _sha(frames[s]) for s in PIPELINE_STAGES}}


def _v6(df, boot, power=0.9, drop_draws=None, joint=None, **extra):
    """``boot`` with a rule v6 record: every variant's power ``power`` (``extra`` overrides keys), and
    the activation draws without P_a ≤ 3 those of ``boot`` (or of ``drop_draws``)."""
    from bitlaws._io import frame_sha256
    from bitlaws.study.claims import P4_VARIANTS
    from bitlaws.study.law_fits import stage_frames
    from bitlaws.study.power import P4_SIM_VERSION, p4_kept

    fr = stage_frames(df)["neff_a"]
    ids = list(range(len(boot["draws"])))
    src = boot["draws"] if drop_draws is None else drop_draws
    nd = {"version": qa.P4_DROPPED_VERSION, "input_sha256": frame_sha256(fr[p4_kept(fr, True)].reset_index(drop=True)),
          "draw_ids": ids, "gamma_a": [d["gamma_a"] for d in src], "n_a": [d["n_a"] for d in src]}
    rec = {"power": power, "power_partly": power, "false_positive": 0.0, "false_partly": 0.0, "n_sim": 50.0,
           "sim_version": P4_SIM_VERSION, "rows_a": 36.0, "rows_a_no_pa3": 30.0, "power_floor": "floor_0.02",
           **{f"power_{v}": power for v in P4_VARIANTS}, **extra}
    if joint is not None:  # the conjunction's own power (rule v7's gate), else the variants' common one
        rec["power"] = joint
    return {**boot, "draw_ids": ids, "p4_power": rec, "p4_no_pa3": nd}


def test_p4_rule_v2_reads_the_order_probability_over_the_bootstrap():
    df = frame()
    c = forms.PAPER_CONSTANTS
    rng = np.random.default_rng(0)
    keys = ("gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv")

    def draws(centre, spread, k=200):
        return [{kk: centre[kk] * (1 + spread * rng.standard_normal()) for kk in keys} for _ in range(k)]

    paper = _fits(*(c[k] for k in keys))
    tight = {**paper, "pipeline_boot": _v6(df, _boot(df, draws(c, 0.01)))}
    v = qa.verdict_p4(tight, df, "cpu")
    assert v.verdict == "reproduced" and v.details["p_order"] == 1.0 and v.details["n_draws"] == 200.0
    assert v.details["p_order_no_pa3"] == 1.0 and v.details["grade_no_pa3"] == "reproduced"
    swapped_c = {**c, "gamma_w": c["gamma_kv"], "n_w": c["n_kv"], "gamma_kv": c["gamma_w"], "n_kv": c["n_w"]}
    sw = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, _boot(df, draws(swapped_c, 0.01)))}, df, "cpu")
    assert sw.verdict == "partly" and sw.details["p_kv_below_w"] == 1.0 and sw.details["p_order"] == 0.0
    # draws that cannot tell the parts apart: neither the order nor its reverse is resolved
    mixed = draws(c, 0.01, 100) + draws(swapped_c, 0.01, 100)
    a_least = {**swapped_c, "gamma_a": 0.3, "n_a": 0.0}
    unresolved = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, _boot(df, draws(c, 0.01, 60)
                                                                        + draws(a_least, 0.01, 140)))}, df, "cpu")
    assert unresolved.verdict == "inconclusive" and 0.05 < unresolved.details["p_order"] < 0.95
    assert qa.verdict_p4({**paper, "pipeline_boot": _v6(df, _boot(df, mixed))}, df, "cpu").verdict == "partly"
    excluded = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, _boot(df, draws(a_least, 0.01)))}, df, "cpu")
    assert excluded.verdict == "not reproduced"
    # the power gate: a partly or not reproduced from an underpowered design is inconclusive; a pass stands
    boot = _boot(df, mixed)
    gated = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, 0.2)}, df, "cpu")
    assert gated.verdict == "inconclusive" and gated.details["power"] == 0.2
    assert "the rule's own power, a pass in the fits with and without those runs" in gated.reason
    assert "are 20% [11, 33] (inconclusive), 20% [11, 33] (inconclusive), 20% [11, 33] (inconclusive)" in gated.reason
    assert qa.verdict_p4({**tight, "pipeline_boot": _v6(df, tight["pipeline_boot"], 0.2)}, df,
                         "cpu").verdict == "reproduced"
    # rule v6: a pass in three variants and a fail in the fourth is no pass (the draws without P_a ≤ 3
    # put activations least sensitive); one variant underpowered makes a partly inconclusive
    split = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, tight["pipeline_boot"],
                                                         drop_draws=draws(a_least, 0.01))}, df, "cpu")
    assert split.verdict == "inconclusive"
    assert [split.details[f"grade_{v}"] for v in ("floor_0.02", "floor_0.05", "floor_0.2", "no_pa3")] == \
        ["reproduced", "reproduced", "reproduced", "not reproduced"]
    assert "of the draws (activations the most sensitive in 0%)" in split.reason
    # (a consistent record: the conjunction's power is at most each variant's)
    one_weak = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, 0.9, **{"power_floor_0.2": 0.3}, joint=0.3)},
                             df, "cpu")
    assert one_weak.verdict == "inconclusive" and one_weak.details["grade_floor_0.2"] == "inconclusive"
    assert one_weak.details["grade_floor_0.05"] == "partly" and one_weak.details["power_floor_0.2"] == 0.3
    # rule v7: every variant powered, the conjunction not — v6 would have said partly, v7 says inconclusive
    joint_weak = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, 0.9, joint=0.4)}, df, "cpu")
    assert joint_weak.verdict == "inconclusive" and joint_weak.details["grade_floor_0.05"] == "partly"
    # rule v8: the gate reads the conjunction's power at its Monte Carlo lower end: 56 % of 50 datasets is [42, 69],
    # so a partly is inconclusive; the same 56 % over 5000 datasets ([55, 57]) lets it stand
    near = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, 0.9, joint=0.56)}, df, "cpu")
    assert near.verdict == "inconclusive" and near.details["grade_floor_0.05"] == "partly"
    assert qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, 0.9, joint=0.56, n_sim=5000.0)}, df,
                         "cpu").verdict == "partly"
    # a record of rule v5 (no variants, no draws without P_a ≤ 3) cannot give v6 a grade
    v5 = {"power": 0.9, "power_partly": 0.9, "false_positive": 0.0, "false_partly": 0.0, "n_sim": 50.0}
    old = qa.verdict_p4({**tight, "pipeline_boot": {**tight["pipeline_boot"], "p4_power": v5}}, df, "cpu")
    assert old.verdict == "inconclusive" and "rule v8 needs the power of each of its four variants" in old.reason
    # the size over the boundary nulls is stated, and flagged where it exceeds 5 %
    sized = dict(fp_all_equal=0.0, fp_a_eq_w=0.02, fp_w_eq_kv=0.03, fp_partly_a_eq_w=0.04, false_positive=0.03,
                 size_null="w_eq_kv", false_partly=0.04, size_partly_null="a_eq_w", chinchilla_refit=1.0,
                 rows_extended=6.0)
    ok = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, **sized)}, df, "cpu")
    assert ok.verdict == "partly" and "is 3% (at f_a < f_w = f_kv)" in ok.reason and "within 5 %" in ok.reason
    assert "exceeds" not in ok.reason and "refits Chinchilla" in ok.reason
    assert ok.details["fp_a_eq_w"] == 0.02 and ok.details["size_null"] == "w_eq_kv" and ok.details["rows_a"] == 36.0
    big = qa.verdict_p4({**paper, "pipeline_boot": _v6(df, boot, **{**sized, "false_positive": 0.08})}, df, "cpu")
    assert "that exceeds the 5 %" in big.reason and big.details["false_positive"] == 0.08
    # a record made from other rows is not read: the point fits' order is graded, and the reason says so
    stale = {**paper, "pipeline_boot": {**_boot(df, draws(a_least, 0.01)), "input_sha256": {}}}
    assert qa.verdict_p4(stale, df, "cpu").verdict == "reproduced"


# --- what chapter 02 says in words, and its figures ---------------------------------------------

def test_sweep_facts_quote_the_cpu_design_and_count_diverged_rows():
    df = frame()
    df.loc[df.index[3], "status"] = "diverged"  # a low-precision row
    df.loc[0, "status"] = "diverged"  # a base-grid row: not a low-precision sweep, not counted
    facts = qa.sweep_facts("cpu", df)
    assert facts == {"qat_sizes": "n27k, n83k, n214k", "qat_budgets": "{1,048,576, 2,097,152}",
                     "qat_bits": "{3, 4, 5, 6, 8, 12}", "qat_diverged": 1}
    with pytest.raises(ValueError, match="unknown profile 'laptop'; known: smoke, cpu, gpu"):
        qa.sweep_facts("laptop", df)


def test_sweep_facts_refuse_a_profile_without_low_precision_sweeps(monkeypatch):
    import dataclasses

    from bitlaws.study import sweep

    monkeypatch.setitem(sweep.PROFILES, "smoke", dataclasses.replace(sweep.PROFILES["smoke"], qat=None))
    with pytest.raises(ValueError, match="'smoke' declares no low-precision sweeps"):
        qa.sweep_facts("smoke", frame())


def test_coverage_markdown_lists_each_sweep():
    covs = {"qat_marginal": {"runs_done": 50, "runs_planned": 54, "obs_done": 51, "obs_planned": 55}}
    text = qa.coverage_markdown("cpu", covs)
    assert text.startswith("**Coverage** of the `cpu` low-precision sweeps")
    assert text.endswith("\n\n- `qat_marginal`: 50 of 54 runs, 51 of 55 observations")


def _summary(**kw):
    s = {"complete": True, "planned": 13, "sigma_source": "suite", "spread": 1.004, "best_bits": 6.0,
         "margin": 0.0123, "sigma": 0.0101, "near_best": [6.0, 8.0]}
    return {**s, **kw}


def test_compute_matched_text_reads_the_minimum_against_the_noise():
    two = qa.compute_matched_text(_summary(), "cpu", 13)
    assert two.startswith("All 13 runs are in (4 members × 3 seeds, and the 16-bit reference from the base grid; "
                          "N·P spread 1.004×). The lowest mean loss is at **P = 6 bits**, 0.0123 nats/byte")
    assert "σ = 0.0101 nats/byte (the pooled spread of the suite's own seeds)" in two
    assert "P ∈ {6, 8}: the suite does not single out one minimum among them." in two
    one = qa.compute_matched_text(_summary(near_best=[6.0], sigma_source="base_grid"), "cpu", 13)
    assert "P ∈ {6}: the minimum stands clear of the noise." in one and "the base grid's seed spread" in one
    part = qa.compute_matched_text(_summary(complete=False), "cpu", 5)
    assert part.startswith("**Incomplete:** 5 of 13 runs (the 16-bit reference included) are in")
    assert all(t.endswith("sets the suite beside our fitted law.") for t in (two, one, part))


def test_paper_vs_here_sets_the_fitted_factors_beside_table_2():
    c = forms.PAPER_CONSTANTS
    t = qa.paper_vs_here(_fits(2.0, 0.5, 2.0, 1.0, 1.0, 2.0))
    assert list(t.index) == ["w", "a", "kv"]
    assert t.loc["w", "γ paper [bits]"] == c["gamma_w"] and t.loc["w", "γ ours [bits]"] == 2.0
    assert t.loc["w", "f(4) paper"] == pytest.approx(0.696, abs=1e-3)
    assert t.loc["w", "f(4) ours"] == pytest.approx(1 - np.exp(-2 + 0.5))
    assert t.loc["kv", "f(8) ours"] == pytest.approx(1 - np.exp(-8 + 2.0))
    assert (t["ours on bound"] == "—").all()
    box = {"bounds": {"gamma_kv": [0.05, 20.0], "n_kv": [-5.0, 10.0]}}
    bounded = _fits(2.0, 0.5, 2.0, 1.0, 0.25, 10.0)
    bounded["neff_kv"].update(box)
    assert qa.paper_vs_here(bounded).loc["kv", "ours on bound"] == "n_kv"
    missing = qa.paper_vs_here({})
    assert missing[["γ ours [bits]", "n ours", "f(4) ours", "f(8) ours"]].isna().all().all()
    assert missing.loc["a", "f(8) paper"] == pytest.approx(t.loc["a", "f(8) paper"])


def test_verdict_lines_quote_grade_ours_and_reason():
    from bitlaws.study.claims import Verdict

    v = Verdict("P4", "partly", "activations most sensitive", "f_a < f_kv < f_w", "the order holds in 90 %", "cpu",
                "", {"f_a_4": 0.53, "f_a_4_lo": 0.33, "f_a_4_hi": 0.72, "paper_f_a_4": 0.33,
                     "power_gate_value": 0.48})
    lead, folded = qa.verdict_markdown(v).split("\n\n", 1)
    # one sentence: the grade, the key number against the paper's, how sure; the verdict's own words folded (their
    # plain subscripts set as the lead sets them)
    assert lead == ("**P4, partly.** f<sub>a</sub>(4) (the most sensitive): ours 0.53 [0.33, 0.72], the paper's "
                    "0.33. The rule met some of its tests and not others; this grade's own power on our design: 48 %.")
    assert folded == ("```{dropdown} P4 in full: what we measured, and why this grade\n"
                      "*Here:* f<sub>a</sub> \\< f<sub>kv</sub> \\< f<sub>w</sub>.\n\n*Why:* the order holds in 90 %.\n```")
    empty = Verdict("P10", "pending", "FP beats INT", "", "no runs yet", "", "", {})
    assert qa.verdict_markdown(empty).startswith("**P10, pending.** ")
    assert "*Why:* no runs yet." in qa.verdict_markdown(empty)
    assert qa.claims_markdown({"P4": v, "P10": empty}) == (
        "- **P4** (partly): paper — activations most sensitive; here — f<sub>a</sub>(4) (the most sensitive) 0.53 "
        "[0.33, 0.72] "
        "(the paper's 0.33; the verdict above has the rest)\n"
        "- **P10** (pending): paper — FP beats INT; here — no runs yet")


def test_marginal_figure_draws_each_parts_loss_increase():
    import matplotlib

    matplotlib.use("agg")
    from bitlaws.study import figures

    m = qa.marginal_table(frame())
    fig = figures.training.marginal_figure(m, (4, 8))
    axes = fig.axes
    assert [a.get_xlabel() for a in axes] == ["$P_\\mathrm{w}$ [bits] (weights)", "$P_\\mathrm{a}$ [bits] "
                                              "(activations)", "$P_\\mathrm{kv}$ [bits] (KV cache)"]
    # the activations panel: one line per size (then the zero line), y = 0.80 / P
    lines = axes[1].get_lines()
    assert np.allclose(lines[0].get_xdata(), [4, 8]) and np.allclose(lines[0].get_ydata(), [0.2, 0.1])
    assert [ln.get_label() for ln in lines[:2]] == ["N = 1K", "N = 3K"]
    # the legend: a size's entry is its colour (no line style), D's two styles have entries of their own
    legend = axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["N = 1K", "N = 3K"]
    assert all(h.get_linestyle() == "None" for h in legend.legend_handles)
    longer = m.assign(n_tokens=20_000, delta_train=m["delta_train"] / 2)
    fig = figures.training.marginal_figure(pd.concat([m, longer], ignore_index=True), (4, 8))
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["N = 1K", "N = 3K", "D = 20,000 bytes", "D = 10,000 bytes"]
    assert [h.get_linestyle() for h in legend.legend_handles] == ["None", "None", "-", "--"]
    solid = [ln for ln in fig.axes[1].get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) == 2]
    assert len(solid) == 2 and np.allclose(solid[0].get_ydata(), [0.1, 0.05])  # the larger D drawn solid


def test_seeded_marginal_figure_draws_each_cells_seed_mean_with_its_t_interval():
    import matplotlib

    matplotlib.use("agg")
    from bitlaws.study import figures

    seeded = pd.DataFrame({"size": ["s", "s"], "n_params": [1000, 1000], "n_tokens": [10_000, 10_000],
                           "part": ["w", "w"], "bits": [4, 8], "seeds": [3, 3], "delta_mean": [0.014, 0.002],
                           "delta_sd": [0.004, 0.001], "delta_half": [0.006, 0.0015]})
    fig = figures.training.seeded_marginal_figure(seeded, (4, 8))
    bars = fig.axes[0].containers  # the weights' panel: one error-bar series, its means and t half-widths
    assert len(bars) == 1 and np.allclose(bars[0].lines[0].get_ydata(), [0.014, 0.002])
    segments = bars[0].lines[2][0].get_segments()
    assert np.allclose([seg[:, 1] for seg in segments], [[0.008, 0.020], [0.0005, 0.0035]])
    assert bars[0].get_label() == "N = 1K (3 seeds)" and not fig.axes[1].containers
    empty = figures.training.seeded_marginal_figure(seeded.iloc[:0], (4, 8))  # says so, draws no point
    assert [t.get_text() for t in empty.axes[0].texts] == ["no seeded cell among\nthe rows read"]
    assert not any(ax.containers or ax.get_lines() for ax in empty.axes)


def test_compute_matched_figure_draws_seed_means_with_their_standard_errors():
    import matplotlib

    matplotlib.use("agg")
    from bitlaws.study import figures

    t = pd.DataFrame({"status": "ok", "bits": [4, 4, 8, 8], "loss_val": [2.0, 2.2, 1.9, 1.9],
                      "n_params": [4000, 4000, 2000, 2000]})
    fig = figures.training.compute_matched_figure(t, {"sigma": 0.1})
    ax = fig.axes[0]
    mean = ax.get_lines()[1]
    assert np.allclose(mean.get_xdata(), [4, 8]) and np.allclose(mean.get_ydata(), [2.1, 1.9])
    (bars,) = [c for c in ax.collections]
    half = [abs(seg[1, 1] - seg[0, 1]) / 2 for seg in bars.get_segments()]
    assert np.allclose(half, 0.1 / np.sqrt(2))
    assert [a.get_text() for a in ax.texts] == ["N = 4K", "N = 2K"]


def test_formats_figure_names_each_format_as_the_chapters_prose_does():
    import re

    import matplotlib

    matplotlib.use("agg")
    from bitlaws.study import figures
    from bitlaws.study.sweep import PROFILES

    t = pd.DataFrame({"fmt": ["fp8_e5m2", "fp4_e2m1fn", "fp4_e3m0fn"], "bits": [8, 4, 4], "n_params": 1000,
                      "delta": [0.01, -0.02, 0.0]})
    fig = figures.training.formats_figure(t, [1000], ["fp4_e3m0fn", "fp8_e5m2"])
    assert [x.get_text() for x in fig.axes[0].get_xticklabels()] == ["FP4 E2M1", "FP4 E3M0", "FP8 E5M2"]
    # the chapter's paragraph on the formats names every format of the cpu sweep by the figure's name
    text = (Path(__file__).resolve().parents[1] / "notebooks" / "02-low-precision-training.md").read_text()
    para = text.split("## Floating point against integer (claim P10)", 1)[1].split("```", 1)[0]
    for name in PROFILES["cpu"].qat.formats:
        assert figures.training.format_label(name) in " ".join(para.split()), name
    assert not re.search(r"\\mathrm\{fp", para)  # no format named in math type


def test_factor_intervals_are_percentiles_of_each_draws_factor():
    # 101 draws of γ_w with n_w = 0: f_w(4) = 1 − e^(−4/γ) per draw; the interval is their 2.5 and 97.5 percentiles
    gammas = np.linspace(1.0, 3.0, 101)
    draws = [{"gamma_w": g, "n_w": 0.0, "gamma_a": 2.0, "n_a": 1.0, "gamma_kv": 1.0, "n_kv": 0.5} for g in gammas]
    out = qa.factor_intervals({"draws": draws}, (4,))
    f = 1 - np.exp(-4 / gammas)
    assert out[("w", 4)] == pytest.approx(tuple(np.percentile(f, [2.5, 97.5])))
    assert out[("a", 4)] == pytest.approx((1 - math.exp(-2 + 1.0),) * 2)
    assert qa.factor_intervals(None) == {} and qa.factor_intervals({"draws": draws[:1]}) == {}


def _factorial(effects, seed_shift, noise):
    """P5's cpu factorial (its declared bits, seeds and cell): loss = 2 + Σ_x effects[x][P_x] + seed_shift[s]
    + noise[(combo index, seed index)], combinations in the product order of (P_w, P_a, P_kv)."""
    import itertools

    from bitlaws.study.power import P5_EVAL_VERSION
    from bitlaws.study.sweep import PROFILES

    plan = PROFILES["cpu"].power_design
    size, d = plan.factorial_cell
    rows = []
    for c, (bw, ba, bkv) in enumerate(itertools.product(plan.factorial_bits, repeat=3)):
        for j, s in enumerate(plan.factorial_seeds):
            loss = 2.0 + effects["w"][bw] + effects["a"][ba] + effects["kv"][bkv] + seed_shift[j] + noise[c, j]
            rows.append(row("qat_factorial", size, 83_280, d, loss, seed=s, bits_w=bw, bits_a=ba, bits_kv=bkv,
                            fmt_w=f"int{bw}" if bw < 16 else "none", fmt_a=f"int{ba}" if ba < 16 else "none",
                            fmt_kv=f"int{bkv}" if bkv < 16 else "none", eval_version=P5_EVAL_VERSION))
    return pd.DataFrame(rows)


def test_factorial_effects_read_p5s_factorial_beside_p4():
    import itertools

    effects = {"w": {4: 0.01, 8: 0.002, 16: 0.0}, "a": {4: 0.17, 8: 0.01, 16: 0.0}, "kv": {4: 0.035, 8: 0.003, 16: 0.0}}
    rng = np.random.default_rng(3)
    noise = rng.normal(0.0, 0.01, (27, 3))
    fac = qa.factorial_effects(_factorial(effects, (0.0, 0.02, -0.01), noise), "cpu")
    assert fac is not None and fac["n_seeds"] == 3.0 and fac["dof"] == 26 * 2
    # the within-seed σ: the residual of combination and seed effects, by least squares on their indicators
    x = np.column_stack([np.kron(np.eye(27), np.ones((3, 1))), np.kron(np.ones((27, 1)), np.eye(3))[:, 1:]])
    y = np.array([2.0 + effects["w"][bw] + effects["a"][ba] + effects["kv"][bkv] + sh + noise[c, j]
                  for c, (bw, ba, bkv) in enumerate(itertools.product((4, 8, 16), repeat=3))
                  for j, sh in enumerate((0.0, 0.02, -0.01))])
    rss = float(((y - x @ np.linalg.lstsq(x, y, rcond=None)[0]) ** 2).sum())
    assert fac["sigma_w"] == pytest.approx(math.sqrt(rss / 52))
    # each simple effect is the part alone at 4 bits minus all-16, per seed, averaged: the generating effect plus
    # the mean of the two cells' noise over the seeds
    idx = {c: i for i, c in enumerate(itertools.product((4, 8, 16), repeat=3))}
    for x_, combo in (("w", (4, 16, 16)), ("a", (16, 4, 16)), ("kv", (16, 16, 4))):
        want = effects[x_][4] + (noise[idx[combo]] - noise[idx[(16, 16, 16)]]).mean()
        assert fac[f"simple_{x_}"] == pytest.approx(want)
    diff = fac["simple_kv"] - fac["simple_w"]
    assert fac["kv_minus_w"] == pytest.approx(diff)
    from scipy import stats

    se = fac["sigma_w"] * math.sqrt(2 / 3)
    assert fac["kv_minus_w_se"] == pytest.approx(se)
    assert fac["kv_minus_w_lo"] == pytest.approx(diff - stats.t.ppf(0.975, 52) * se)
    # the rows of another design (no complete factorial): nothing to report
    assert qa.factorial_effects(_factorial(effects, (0.0, 0.0, 0.0), noise).iloc[:-1], "cpu") is None
    assert qa.factorial_effects(pd.DataFrame(), "cpu") is None


def test_p4_reports_the_factorial_and_marks_the_point_order_as_the_point_fits():
    df = frame()
    c = forms.PAPER_CONSTANTS
    fits = _fits(c["gamma_w"], c["n_w"], c["gamma_a"], c["n_a"], c["gamma_kv"], c["n_kv"])
    effects = {"w": {4: 0.01, 8: 0.0, 16: 0.0}, "a": {4: 0.17, 8: 0.0, 16: 0.0}, "kv": {4: 0.05, 8: 0.0, 16: 0.0}}
    noise = np.random.default_rng(0).normal(0.0, 0.005, (27, 3))
    fac_rows = _factorial(effects, (0.0, 0.0, 0.0), noise)
    v = qa.verdict_p4(fits, df, "cpu", factorial=fac_rows)
    fac = qa.factorial_effects(fac_rows, "cpu")
    assert v.verdict == "reproduced"  # the grade is the point fits' here (no bootstrap): the factorial is not read
    assert "the point fits' order (smallest f, most sensitive, first; not graded)" in v.ours
    assert f"KV4 − W4 = {fac['kv_minus_w']:+.3f} [{fac['kv_minus_w_lo']:+.3f}, {fac['kv_minus_w_hi']:+.3f}]" in v.ours
    assert "the KV cache costs more than the weights here, the reverse of the paper's" in v.ours
    assert v.details["factorial_kv_minus_w"] == pytest.approx(fac["kv_minus_w"])
    assert v.inputs_sha256 != qa.verdict_p4(fits, df, "cpu").inputs_sha256  # what was read enters the identity
    # a constant on its fit's bound is named beside the factor and in the order's caption
    bounded = {**fits, "neff_kv": {**fits["neff_kv"], "params": {"gamma_kv": 0.26, "n_kv": 10.0},
                                   "bounds": {"gamma_kv": [0.05, 20.0], "n_kv": [-5.0, 10.0]}, "on_bound": ["n_kv"]}}
    vb = qa.verdict_p4(bounded, df, "cpu")
    assert "(n_kv = 10 on its fit's bound: the point value is the bound's)" in vb.ours
    assert "f_kv's place in it is set by n_kv = 10 on its bound" in vb.ours

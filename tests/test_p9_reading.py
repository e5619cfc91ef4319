"""P9's reading after the data (``law_fits.p9_matched_reading``), chapter 03's paragraph
(``law_fits.p9_matched_markdown``) and figure (``figures.laws.p9_matched_figure``), checked against the
paper's law by hand and against rule v5's own statistic on synthetic units. None of these grades anything."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import law_fits as lfs
from bitlaws.study import p9_matched as m
from bitlaws.study.claims import Verdict


def _units(r_by_size: dict[int, dict[int, float]]) -> pd.DataFrame:
    """matched_units-shaped rows: size -> {P_w: r}, all included, one D."""
    rows = [{"n_params": n, "n_tokens": 2_097_152, "seed": 0, "bits_w": bw, "bits_post": bw - 1,
             "delta_low": 0.01 * math.exp(r), "delta_hp": 0.01, "drop": "", "included": True, "censored": False, "r": r}
            for n, per in r_by_size.items() for bw, r in per.items()]
    return pd.DataFrame(rows)


def test_reading_solves_the_paper_law_for_the_interval_ends():
    u = _units({10_000: {4: 0.0}, 20_000: {4: 0.1}, 30_000: {4: -0.1}})
    no_bracket = float(m.paper_r(4, math.inf))
    lo, hi = -0.5, no_bracket - 0.05
    got = lfs.p9_matched_reading(u, lo, hi, bits=(4,))
    # at P_w = 4 alone the law's r̄ is paper_r(4, C_w): the solutions must reproduce the ends exactly
    assert float(m.paper_r(4, got["c_w_lo"])) == pytest.approx(lo, abs=1e-8)
    assert float(m.paper_r(4, got["c_w_hi"])) == pytest.approx(hi, abs=1e-8)
    assert got["c_w_lo"] < got["c_w_hi"] and got["no_bracket"] == pytest.approx(no_bracket, rel=1e-12)
    assert float(m.paper_r(4, got["c_w_zero"])) == pytest.approx(0.0, abs=1e-8)  # where robustification just wins
    assert got["c_w_zero"] == pytest.approx(m.c_w_max((4,)), rel=1e-6)
    # an interval reaching above the no-bracket value admits every larger C_w; one above it admits none
    assert math.isinf(lfs.p9_matched_reading(u, lo, no_bracket + 0.1, bits=(4,))["c_w_hi"])
    assert math.isinf(lfs.p9_matched_reading(u, no_bracket + 0.01, no_bracket + 0.1, bits=(4,))["c_w_lo"])


def test_reading_weights_units_as_the_rule_does():
    # size 1 has P_w 4 and 6, size 2 only P_w 4: the law's r̄ is the mean over sizes of each size's mean
    u = _units({10_000: {4: 0.0, 6: 0.0}, 20_000: {4: 0.0}})
    got = lfs.p9_matched_reading(u, -0.4, 0.05, bits=(4, 6))
    c = got["c_w_lo"]
    law = 0.5 * (0.5 * (m.paper_r(4, c) + m.paper_r(6, c)) + m.paper_r(4, c))
    assert float(law) == pytest.approx(-0.4, abs=1e-8)


def test_reading_rejects_bad_input():
    u = _units({10_000: {4: 0.0}})
    with pytest.raises(ValueError, match="r_lo ≤ r_hi"):
        lfs.p9_matched_reading(u, 0.2, -0.2)
    with pytest.raises(ValueError, match="finite interval"):
        lfs.p9_matched_reading(u, math.nan, 0.1)
    with pytest.raises(ValueError, match="no included unit"):
        lfs.p9_matched_reading(u, -0.1, 0.1, bits=(5,))


def _verdict(grade: str, **details) -> Verdict:
    return Verdict("P9", grade, "paper", "", "reason", "cpu", "0" * 64, details)


def test_markdown_says_coverage_until_the_grid_is_complete():
    assert lfs.p9_matched_markdown(_verdict("not reproduced", unified_r2=0.7), None, 44, 50) == (
        "The grid has 44 of its 50 runs with every row, and P9 keeps version 2's grade until it has all of them.")
    assert "declares no matched grid" in lfs.p9_matched_markdown(_verdict("pending"), None, 0, 0)


_D = dict(r_mean=-0.2, r_lo=-0.35, r_hi=-0.05, n_clusters=5.0, paper_c1=-0.37, paper_lo=-0.85, paper_hi=-0.04,
          asym_r_mean=0.1, asym_r_lo=0.02, asym_r_hi=0.2, int2_r_mean=-0.3, int2_r_lo=-0.5, int2_r_hi=-0.1)


def test_markdown_reads_every_number_from_the_verdict_and_the_facts():
    facts = {"p_c1": 0.031, "c1_in_99": 1.0, "loo_holds_c1": 2.0, "loo_n": 5.0, "c_w_lo": 0.9, "c_w_hi": 1.8,
             "c_w_zero": 2.5, "no_bracket": 0.086, "unit_min": -0.5, "unit_max": 0.4, "unit_sd": 0.3, "size_sd": 0.1,
             "asym_c_w_lo": 1.7, "int2_asym_mean": 0.5, "int2_asym_lo": -0.2, "int2_asym_hi": 1.2,
             "int2_hp_min": 0.7, "int2_hp_max": 2.6, "int2_rho": 1.0, "int2_first": -0.44, "int2_last": -0.15,
             "sens_lo_1": -0.85, "sens_hi_1": -0.37, "sens_lo_1.5": -0.85, "sens_hi_1.5": -0.17}
    text = lfs.p9_matched_markdown(_verdict("reproduced", **_D), facts, 50, 50)
    result, readings = text.split("*Read after the data, not by the rule:*")
    assert "−0.200 [−0.350, −0.050] over 5 sizes" in result
    lo, hi = (100 * math.exp(x) for x in (-0.35, -0.05))
    assert f"lose {100 * math.exp(-0.2):.0f} % [{lo:.0f}, {hi:.0f}] as much" in result
    assert "lies below 0 and meets the range, so the grade is **reproduced**" in result
    # −0.37 lies outside [−0.35, −0.05]; every reading is in the list, none in the result
    assert "lies outside our 95 % interval (a t-test of $\\bar r$ against it: p = 0.03 on 4 df)" in readings
    assert "the 99 % interval holds it" in readings and "in 2 of 5 cases" in readings
    # under C_w ∈ [0.5, 1] the range is [−0.85, −0.37]: [−0.35, −0.05] lies below 0 but above it; [0.5, 1.5] meets it
    assert ("the rule would read *partly* under $C_w \\in [0.5, 1]$ (weak end −0.370), and *reproduced* under "
            "$C_w \\in [0.5, 1.5]$ (weak end −0.170): sensitivity readings, not the grade.") in readings
    assert "for $C_w$ from 0.90 to 1.80." in readings  # the interval's top end is below the no-bracket law
    assert "0.100 [0.020, 0.200]: the interval excludes 0 and excludes the law for $C_w$ below 1.70." in readings
    assert "but 0.500 [−0.200, 1.200] on the asymmetric one" in readings and "0.70 to 2.60 nats/byte" in readings
    # with the interval reaching over the law without its bracket, it says so
    wide = lfs.p9_matched_markdown(_verdict("inconclusive", **{**_D, "r_hi": 0.2}),
                                   {**facts, "c_w_hi": math.inf}, 50, 50)
    assert "holds the law for every $C_w$ from 0.90 up" in wide and "is 0 at $C_w$ = 2.50 and +0.086 without" in wide
    assert "reaches both 0 and the range, so the grade is **inconclusive**" in wide
    assert "the rule would read *not reproduced* under $C_w \\in [0.5, 1]$" in wide  # above −0.37 and reaching 0
    # without facts: the result alone
    assert "Read after" not in lfs.p9_matched_markdown(_verdict("reproduced", **{k: v for k, v in _D.items()
                                                                                 if not k.startswith(("asym", "int2"))}),
                                                       None, 50, 50)


def test_facts_by_hand():
    sizes = (10_000, 20_000, 40_000, 80_000, 160_000)
    per = {n: {4: r, 5: r + 0.1, 6: r - 0.1, 3: -0.1 * i} for i, (n, r) in enumerate(zip(sizes, (-0.3, -0.1, 0.0, 0.2, 0.1)))}
    sym, asym = _units(per), _units({n: {b: 0.05 for b in (3, 4, 5, 6)} for n in sizes})
    asym["r"] += np.tile([0.0, 0.01, -0.01, 0.02], 5)  # not degenerate
    f = lfs.p9_matched_facts({m.P9_GRID: sym, m.P9_SECONDARY_GRID: asym}, c1=-0.373)
    means = np.array([-0.3, -0.1, 0.0, 0.2, 0.1])  # each size's mean over P_w 4-6
    t = (means.mean() + 0.373) / (means.std(ddof=1) / math.sqrt(5))
    from scipy import stats

    assert f["p_c1"] == pytest.approx(2 * stats.t.sf(abs(t), 4), rel=1e-10)
    assert f["size_sd"] == pytest.approx(means.std(ddof=1), rel=1e-12)
    # every size has P_w 4-6: the law's r̄ at the sensitivity ranges' ends is the mean of paper_r over them
    for c in (1.0, 1.5):
        assert f[f"sens_hi_{c:g}"] == pytest.approx(np.mean([float(m.paper_r(b, c)) for b in (4, 5, 6)]), rel=1e-12)
        assert f[f"sens_lo_{c:g}"] == pytest.approx(np.mean([float(m.paper_r(b, 0.5)) for b in (4, 5, 6)]), rel=1e-12)
    graded = sym[sym["bits_w"] >= 4]["r"]
    assert (f["unit_min"], f["unit_max"]) == (pytest.approx(graded.min()), pytest.approx(graded.max()))
    assert f["int2_rho"] == pytest.approx(-1.0) and f["int2_first"] == pytest.approx(0.0)
    assert f["int2_hp_min"] == f["int2_hp_max"] == pytest.approx(0.01)  # _units' twins all at δ = 0.01
    loo = [np.delete(means, k) for k in range(5)]
    holds = sum(abs(x.mean() + 0.373) <= stats.t.ppf(0.975, 3) * x.std(ddof=1) / 2 for x in loo)
    assert (f["loo_holds_c1"], f["loo_n"]) == (holds, 5.0)


def test_figure_draws_the_rules_statistic():
    import matplotlib

    matplotlib.use("agg")
    from bitlaws.study import figures

    rng = np.random.default_rng(3)
    sizes = (10_000, 20_000, 40_000, 80_000, 160_000)
    sym = _units({n: {b: float(rng.normal(-0.1, 0.2)) for b in (3, 4, 5, 6)} for n in sizes})
    asym = _units({n: {b: float(rng.normal(0.1, 0.2)) for b in (3, 4, 5, 6)} for n in sizes})
    fig = figures.laws.p9_matched_figure({m.P9_GRID: sym, m.P9_SECONDARY_GRID: asym}, m.P9_C_W_RANGE)
    for ax, units in zip(fig.axes, (sym, asym)):
        want = m.matched_statistics(units)
        pooled = [c for c in ax.containers if hasattr(c, "lines") and c.lines[0].get_marker() == "D"]
        assert len(pooled) == 1
        assert float(pooled[0].lines[0].get_ydata()[0]) == pytest.approx(want["r_mean"], rel=1e-12)
        ends = np.sort(np.concatenate([np.asarray(s.get_segments()[0])[:, 1] for s in pooled[0].lines[2]]))
        assert ends == pytest.approx([want["r_lo"], want["r_hi"]], rel=1e-12)
        bars = [ln for ln in ax.get_lines() if ln.get_linewidth() == 5]  # the law's C_w range, one per P_w and pooled
        assert len(bars) == 5
        assert sorted(np.asarray(bars[-1].get_ydata(), float)) == pytest.approx([want["paper_lo"], want["paper_hi"]])
    empty = figures.laws.p9_matched_figure({m.P9_GRID: sym.iloc[:0]}, m.P9_C_W_RANGE)
    assert [t.get_text() for t in empty.axes[0].texts] == ["no matched units for this profile"]


def test_design_sentence_sets_the_table_beside_the_grading_rule():
    from bitlaws.study import qat_design

    tab = pd.DataFrame({"claim": ["P4", "P9", "P9"], "seeds": [1, 1, 2], "power": [0.3, 0.97, 1.0],
                        "n_sim": [100, 100, 100]})
    rates = {f"rate__s{i}__paper_c1__reproduced": x for i, x in enumerate((0.99, 0.86, 0.73, 0.64, 0.61, 0.7, 0.512, 0.2))}
    power = {**rates, "power_c1": 0.512, "n_sim": 1000.0}
    text = qat_design.p9_design_sentence(tab, power)
    assert text.startswith("The table gave it power 97% [92, 99] (100 datasets) under P9's rule version 2")
    # the independent scenario (s0) and the least over the sizes-independent ones (s6, not s7 which shares noise)
    assert "gives 99% [98, 99] against the paper's law at C_w = 1 with every run independent" in text
    assert "and 51% [48, 54] at the least favourable of its noise structures (a cell share ρ = 0.5, 1.5× the " \
           "relative noise)" in text
    assert qat_design.p9_design_sentence(tab, None) == "" and qat_design.p9_design_sentence(None, power) == ""
    assert qat_design.p9_design_sentence(tab[tab["claim"] == "P4"], power) == ""

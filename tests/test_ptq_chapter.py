"""Chapter 01's prose and tables (the chapter block of ``bitlaws.study.ptq_degradation``) on synthetic
frames whose answers are known: δ_PTQ follows Eq. 2 exactly, GPTQ's δ is half of RTN's in every
row, and one cell has three seeds with known offsets. No numbers from our runs appear here."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bitlaws.laws.forms import PAPER_CONSTANTS
from bitlaws.study import ptq_degradation as pa
from bitlaws.study.sweep import PROFILES

NS = (10_000, 30_000, 100_000)
DS = (1_000_000, 2_000_000, 4_000_000, 8_000_000)
SEED_CELL = (10_000, 2_000_000)
EQ2 = {"C_T": 1e-4, "gamma_D": 0.9, "gamma_N": 0.3, "gamma_post": 0.6}
JITTER = 1e-5  # seed s shifts every loss of its run by s·JITTER, RTN's δ by s·JITTER/10, GPTQ's by half that


def delta_rtn(n, d, b):
    return EQ2["C_T"] * d ** EQ2["gamma_D"] * n ** -EQ2["gamma_N"] * math.exp(-b / EQ2["gamma_post"])


def make_frame(bits=(3, 4, 5, 6), diverged: int = 0) -> pd.DataFrame:
    rows = []
    cells = [(n, d, 0) for n in NS for d in DS] + [(*SEED_CELL, s) for s in (1, 2)]
    for n, d, s in cells:
        run = f"r{n}_{d}_{s}"
        lb = 1.0 + 50.0 * n ** -0.45 + 500.0 * d ** -0.45 + s * JITTER
        common = {"run_id": run, "experiment": "base_grid", "status": "ok", "seed": s, "n_params": n,
                  "n_tokens": d, "train_s": 1800.0, "threads": 2, "device": "cpu"}
        rows.append({**common, "obs_id": f"{run}_none", "ptq_method": "none", "bits_post": 16, "loss_val": lb,
                     "delta_ptq": 0.0})
        for m, scale in (("rtn", 1.0), ("gptq", 0.5)):
            for b in bits:
                dl = scale * (delta_rtn(n, d, b) + s * JITTER / 10)
                rows.append({**common, "obs_id": f"{run}_{m}{b}", "ptq_method": m, "bits_post": b,
                             "loss_val": lb + dl, "delta_ptq": dl})
    for i in range(diverged):
        rows.append({**rows[0], "run_id": f"bad{i}", "obs_id": f"bad{i}", "status": "diverged",
                     "loss_val": math.nan})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frame():
    return make_frame(diverged=1)


def _eq13_oracle(n, p, c):
    """Eq. 13 written out (Kumar et al., App. E.1), independent of ``bitlaws.laws.optimal``."""
    return (c["beta"] * c["B"] * n ** c["gamma_N"] * math.exp(p / c["gamma_post"])
            / (c["gamma_D"] * c["C_T"])) ** (1 / (c["gamma_D"] + c["beta"]))


def test_coverage_facts_on_a_known_grid(frame):
    cov = {"runs_planned": 20, "runs_done_by_eval_version": {1: 14, 2: 3}}
    f = pa.coverage_facts(frame, "smoke", 1, cov)
    assert (f["cov_profile"], f["cov_eval_version"], f["cov_runs_done"], f["cov_runs_planned"], f["cov_runs_v2"]) \
        == ("smoke", 1, 14, 20, 3)
    assert f["cov_n"] == "{10,000, 30,000, 100,000}"
    assert f["cov_d"] == "{1,000,000, 2,000,000, 4,000,000, 8,000,000}"
    assert f["cov_dn_min"] == pytest.approx(10.0) and f["cov_dn_max"] == pytest.approx(800.0)
    assert f["cov_diverged"] == 1
    assert f["cov_rtn_rows"] == f["cov_gptq_rows"] == 14 * 4
    assert f["cov_rtn_bits"] == "{" + ", ".join(map(str, PROFILES["smoke"].bits_post)) + "}"
    assert f["cov_gptq_setup"] == pa.gptq_setup("smoke")
    # one seeded cell, three seeds, the pre-PTQ losses offset by 0, 1, 2 × JITTER: σ = JITTER
    assert (f["cov_floor_cells"], f["cov_seeds_min"], f["cov_seeds_max"]) == (1, 3, 3)
    assert f["cov_floor_loss"] == pytest.approx(JITTER, rel=1e-6)
    # the pooled σ the verdicts read: with one seeded cell it is that cell's, on k − 1 = 2 degrees of freedom
    assert f["cov_pooled_loss"] == pytest.approx(JITTER, rel=1e-6) and f["cov_pooled_dof"] == 2
    assert f["cov_floor_delta3"] == "GPTQ 0.0000, RTN 0.0000"
    # glue stores what it is given: Python scalars only, never NumPy's (their repr is not a number)
    assert all(type(v) in (int, float, str) for v in f.values())


def test_coverage_facts_without_seed_cells_says_na():
    df = make_frame()
    f = pa.coverage_facts(df[df["seed"] == 0], "smoke", 1, {"runs_planned": 12, "runs_done_by_eval_version": {1: 12}})
    assert (f["cov_floor_cells"], f["cov_seeds_min"], f["cov_seeds_max"], f["cov_runs_v2"]) == (0, "n/a", "n/a", 0)


def test_gptq_rtn_ratio_is_the_constructed_half(frame):
    tabs = {m: pa.ptq_table(frame, m) for m in ("gptq", "rtn")}
    floors = {m: pa.noise_floor(frame, m) for m in ("gptq", "rtn")}
    out = pa.gptq_rtn_ratio_table(tabs, floors)
    assert list(out["P_post"]) == [3, 4, 5, 6]
    assert (out["cells"] == 12).all()  # every δ_RTN clears 2 × its floor (1e-6 nats)
    assert np.allclose(out[["median δ_GPTQ/δ_RTN", "min", "max"]].to_numpy(), 0.5)
    # a floor above every δ at INT6 leaves no INT6 cell
    high = {**floors["rtn"], "delta_6": 1.0}
    assert 6 not in set(pa.gptq_rtn_ratio_table(tabs, {**floors, "rtn": high})["P_post"])
    with pytest.raises(ValueError, match="gptq and rtn"):
        pa.gptq_rtn_ratio_table({"rtn": tabs["rtn"]}, floors)


def test_eq2_table_recovers_the_exponents_and_shows_intervals(frame):
    eq2 = {"gptq": {**EQ2, "r2": 0.9876, "n_points": 168.0}, "rtn": {**EQ2, "r2": 0.5, "n_points": 10.0}}
    records = {"gptq": {"ci95": {"gamma_D": [0.8, 1.0]}, "holdout": {"n_params": {"r2": 0.91234}}}, "rtn": None}
    t = pa.eq2_table(frame, eq2, records)
    g, r = t["here, GPTQ"], t["here, RTN"]
    assert g["γ_D (D exponent)"] == "0.900 [0.80, 1.00]" and g["γ_N (N exponent)"] == "0.300"
    assert r["γ_D (D exponent)"] == "0.900"
    assert (g["R² (of δ_PTQ, in-sample)"], g["held-out R² (leave one N out)"], g["rows fitted"]) == \
        ("0.988", "0.912", "168")
    assert r["held-out R² (leave one N out)"] == "n/a (fit file stale)"
    # δ is Eq. 2 to within the seed offsets, so the log-linear regression recovers its exponents
    floor = pa.EXPONENT_ESTIMATES["floor"]  # the rows carry the estimate's one name
    assert g[f"{floor}: γ_D / γ_N / γ_post"] == r[f"{floor}: γ_D / γ_N / γ_post"] == "0.90 / 0.30 / 0.60"
    assert g[f"{floor}: R² (of ln δ)"] == "1.000 (48 cells)"
    assert t.loc["γ_D (D exponent)", "paper (Kumar et al., Table 2)"] == f"{PAPER_CONSTANTS['gamma_D']:.3f}"


def _crit(method: str) -> pd.DataFrame:
    return pd.DataFrame([
        {"method": method, "n_params": 30_000, "bits_post": 3, "d_best": 4_000_000, "d_max": 8_000_000, "rise": 0.2,
         "threshold": 0.02, "significant": True, "d_crit_lo": 2e6, "d_crit_hi": 8e6, "d_crit_eq13": 6e6,
         "d_crit_eq13_over_n": 200.0},
        {"method": method, "n_params": 10_000, "bits_post": 3, "d_best": 2_000_000, "d_max": 8_000_000, "rise": 0.1,
         "threshold": 0.02, "significant": True, "d_crit_lo": 1e6, "d_crit_hi": 4e6, "d_crit_eq13": 2.5e6,
         "d_crit_eq13_over_n": 250.0},
        {"method": method, "n_params": 10_000, "bits_post": 4, "d_best": 8_400_000, "d_max": 8_400_000, "rise": 0.0,
         "threshold": 0.02, "significant": False, "d_crit_lo": 8.4e6, "d_crit_hi": math.inf,
         "d_crit_eq13": math.nan, "d_crit_eq13_over_n": math.nan},
        {"method": method, "n_params": 10_000, "bits_post": 5, "d_best": 8_000_000, "d_max": 8_000_000, "rise": 0.0,
         "threshold": 0.0, "significant": False, "d_crit_lo": 8e6, "d_crit_hi": math.inf, "d_crit_eq13": 9e9,
         "d_crit_eq13_over_n": 9e5}])


def test_d_crit_table_brackets_and_eq13():
    t = pa.d_crit_table({"rtn": _crit("rtn"), "gptq": _crit("gptq")})
    assert list(t["method"]) == ["GPTQ"] * 3 + ["RTN"] * 3  # INT5 left out; sorted by method, P_post, N
    g = t[t["method"] == "GPTQ"].reset_index(drop=True)
    assert list(zip(g["bits_post"], g["n_params"])) == [(3, 10_000), (3, 30_000), (4, 10_000)]
    assert list(g["D_crit from the rows"]) == ["1.0M – 4.0M", "2.0M – 8.0M", "> 8.4M (no turn-up)"]
    assert list(g["D_crit, Eq. 13 (ours)"]) == ["2.5M", "6.0M", "n/a"]
    assert set(pa.D_CRIT_FORMATS) <= set(t.columns)


def test_d_crit_facts_are_eq13_with_the_papers_constants():
    f = pa.d_crit_facts({"beta": 0.3, "B": 123.456, "r2": 0.98765, "n_points": 46.0})
    assert f["dcrit_chinchilla"] == "Chinchilla fit on our 46 high-precision runs: β = 0.300, B = 123.5 (R² 0.988)."
    for b in (3, 4):
        d = _eq13_oracle(30e6, b, PAPER_CONSTANTS)
        assert f[f"dcrit_paper{b}_b"] == pytest.approx(d / 1e9, rel=1e-9)
        assert f[f"dcrit_paper{b}_dn"] == pytest.approx(d / 30e6, rel=1e-9)
    assert f"{f['dcrit_paper3_b']:.1f}" == "16.4"  # the README's paper value for P2
    none = pa.chinchilla_sentence({"beta": math.nan, "B": math.nan, "r2": math.nan, "n_points": math.nan})
    assert none.startswith("No Chinchilla fit: the 0 high-precision runs") and "n/a above" in none


def _verdict(cid, grade, reason="because"):
    return SimpleNamespace(claim_id=cid, paper=f"paper {cid}", ours=f"ours {cid}", verdict=grade, reason=reason)


def test_verdict_table_markdown():
    md = pa.verdict_table_markdown(_verdict("P1", "partly", "r1."), _verdict("P2", "inconclusive", "r2"))
    assert md.splitlines() == ["| claim | the paper | key number: paper / ours | verdict |", "|---|---|---|---|",
                               "| P1 | paper P1 | — | **partly** |",
                               "| P2 | paper P2 | — | **inconclusive** |", "",
                               "**P1, partly.** *Here:*", "", "ours P1", "", "*Why P1 is partly:*", "", "r1.", "",
                               "**P2, inconclusive.** *Here:*", "", "ours P2", "", "*Why P2 is inconclusive:*", "",
                               "r2"]


# A verdict text shaped like P2's reason: a lead, "; "-parts, a long parenthesis with its own parts.
_LONG_REASON = ("It rests on few series: the rises sit at D ≥ 8.4M; at 95% coverage the minimum lies at D ∈ {8.4M} "
                "for GPTQ (N = 26,784, INT3; seeds 0–4 at 4.2M, 8.4M; " + "word " * 30 + "end; at the nominal "
                "95 % {8.4M}), by a seed bootstrap of 2000 draws, " + "more " * 25 + "reported, not graded; the "
                "seed noise has 19 degrees of freedom (5 seeded cells; t = 2.09). With the paper's exponents (Eq. 2, "
                "App. F) our design would see a turn-up in 0% of datasets. Short one; two.")


def _words(md: str) -> list[str]:
    """The words of a text or of its Markdown, sorted (a pulled-out parenthesis moves), less the list marks,
    the letters that stand for a parenthesis, emphasis and punctuation."""
    text = re.sub(r"^\s*- \([a-z]\) [^:]*:$", "", md, flags=re.M)  # "(a) for GPTQ:" repeats words before it
    text = re.sub(r"^\s*- (\([a-z]\) )?", "", text, flags=re.M)
    text = re.sub(r" \([a-z]\)", "", text).replace("*", "")
    return sorted(w for w in re.split(r"[\s;,.:()]+", text) if w)


def test_verdict_text_markdown_breaks_a_long_text_into_lists_and_keeps_every_word():
    md = pa.verdict_text_markdown(_LONG_REASON)
    lines = md.splitlines()
    # the long sentence: its lead as a label, then one bullet per "; "-part
    assert lines[0] == "*It rests on few series:*"
    bullets = [x for x in lines if x.startswith("- ")]
    assert bullets[0] == "- the rises sit at D ≥ 8.4M"
    assert bullets[1].startswith("- at 95% coverage the minimum lies at D ∈ {8.4M} for GPTQ (a), by a seed bootstrap")
    assert bullets[2] == "- the seed noise has 19 degrees of freedom (5 seeded cells; t = 2.09)."
    # the long parenthesis moved below its part, lettered under what it belongs to, split at its own "; "
    sub = [x for x in lines if x.startswith("  - ")]
    assert sub == ["  - (a) for GPTQ:"]
    nested = [x for x in lines if x.startswith("    - ")]
    assert nested[:2] == ["    - N = 26,784, INT3", "    - seeds 0–4 at 4.2M, 8.4M"]
    assert "    - at the nominal 95 % {8.4M}" in lines
    # short sentences stay whole paragraphs: "Eq. 2" and "App. F" are not sentence ends, "; " not a break
    assert "With the paper's exponents (Eq. 2, App. F) our design would see a turn-up in 0% of datasets." in lines
    assert lines[-1] == "Short one; two."
    # nothing lost or added: the words, less the list marks, are the text's
    assert _words(md) == _words(_LONG_REASON)
    # a short text is one paragraph, as it was
    assert pa.verdict_text_markdown("Judged where δ clears the floor (t = 2.09). The gap; is small.") == \
        "Judged where δ clears the floor (t = 2.09).\n\nThe gap; is small."
    # unbalanced brackets: no cut at all rather than a wrong one
    assert pa.verdict_text_markdown("a (b; c. D " + "x " * 60) == "a (b; c. D " + " ".join(["x"] * 60)


def test_the_committed_p2_verdict_is_shown_in_parts():
    from bitlaws.study.claims import load_verdicts
    from bitlaws.study.summary import markdown_text

    v = load_verdicts()
    md = pa.verdict_table_markdown(v["P1"], v["P2"])
    why = md.split(f"*Why P2 is {v['P2'].verdict}:*", 1)[1]
    paragraphs = [p for p in why.split("\n\n") if p.strip()]
    # the reason that rendered as one paragraph of several hundred words is now many short pieces
    assert len(v["P2"].reason.split()) > 300
    pieces = [x for p in paragraphs for x in p.splitlines() if x.strip()]
    assert len(pieces) >= 10 and max(len(x.split()) for x in pieces) < len(v["P2"].reason.split()) / 3
    assert _words(why) == _words(markdown_text(v["P2"].reason))  # the record's words (escaped as before), unchanged


def test_log_ticks_give_round_values_on_any_range():
    assert pa.log_ticks(19.6, 626.4) == [20.0, 50.0, 100.0, 200.0, 500.0]  # the D/N axis of the Fig. 1 panel
    assert pa.log_ticks(0.5, 5000) == [1.0, 10.0, 100.0, 1000.0]  # wide: one per decade
    assert pa.log_ticks(19.6, 40) == [20.0, 30.0, 40.0]
    narrow = pa.log_ticks(1.0, 1.2)
    assert len(narrow) == 3 and all(1.0 <= t <= 1.2 for t in narrow) and narrow == sorted(set(narrow))
    with pytest.raises(ValueError, match="0 < lo < hi"):
        pa.log_ticks(5, 5)


def test_the_d_over_n_axis_of_the_fig1_panel_has_three_ticks_or_more(frame):
    import matplotlib

    matplotlib.use("Agg")
    from bitlaws.study import figures

    tabs = {m: pa.ptq_table(frame, m) for m in ("gptq", "rtn")}
    crit = {m: pa.critical_data_sizes(frame, m) for m in tabs}
    fig = figures.ptq.ptq_vs_d_smallest_figure(tabs, crit, "gptq")
    ticks = pa.tick_d_over_n_axis(fig, tabs)
    fig.canvas.draw()
    top = fig.axes[0].child_axes[0]
    lo, hi = sorted(top.get_xlim())
    shown = [t for t in top.xaxis.get_majorticklocs() if lo <= t <= hi]
    assert len(ticks) >= 3 and shown == ticks
    labels = [x.get_text() for x in top.xaxis.get_majorticklabels() if x.get_text()]
    assert labels == [f"{t:g}" for t in ticks]  # plain numbers, not 10^x


def test_paper_vs_here_table(frame):
    eq2 = {"gptq": {**EQ2, "r2": 0.97}, "rtn": {**EQ2, "gamma_D": 0.8, "r2": 0.9}}
    t = pa.paper_vs_here_table(frame, "smoke", eq2, {"gptq": _crit("gptq"), "rtn": _crit("rtn")},
                               _verdict("P1", "partly"), _verdict("P2", "inconclusive"))
    here = t["here"]
    assert here["PTQ method"] == "GPTQ, RTN (verdicts on GPTQ)"
    assert (here["N (non-embedding)"], here["D"], here["largest D/N"]) == ("10,000–100,000", "1.00M–8.0M bytes", "800")
    assert here["Eq. 2 fit: γ_D / γ_N / γ_post"] == "GPTQ 0.90 / 0.30 / 0.60 · RTN 0.80 / 0.30 / 0.60"
    # every cell whole in what the chapter shows (a Styler): the frame's repr cut long cells with "..."
    html = t.style.to_html()
    assert all(v in html for v in here) and "..." not in html
    assert here["D_crit, INT3, smallest model (Eq. 13)"] == \
        "GPTQ 2.5M bytes (D/N ≈ 250) · RTN 2.5M bytes (D/N ≈ 250)"
    assert (here["P1 verdict"], here["P2 verdict"]) == ("partly", "inconclusive")
    d = _eq13_oracle(30e6, 3, PAPER_CONSTANTS)
    assert t.loc["D_crit, INT3, smallest model (Eq. 13)", "the paper"] == \
        f"{d / 1e9:.1f}B tokens at N = 30M (D/N ≈ {d / 30e6:.0f})"


def test_training_time_counts_each_run_once(frame):
    t = pa.training_time(frame)  # 15 runs of 1800 s (the diverged one trained too), 9 rows per run
    assert t == {"train_runs": 15, "train_took": "7.50 h", "train_threads": "2", "train_devices": "cpu"}
    short = frame.assign(train_s=10.0, threads=frame["seed"] % 2 + 1)
    assert pa.training_time(short)["train_took"] == "150 s"  # under 360 s: seconds (the smoke profile)
    assert pa.training_time(short)["train_threads"] == "1, 2"


def test_committed_fits_keep_only_current_records(frame, tmp_path, monkeypatch):
    from bitlaws.study import law_fits

    data = tmp_path / "data"
    monkeypatch.setenv("BITLAWS_DATA", str(data))
    (data / "fits").mkdir(parents=True)
    rows = law_fits.stage_frames(frame, "gptq")["ptq"]
    current = {"method": "gptq", "status": "ok", "input_sha256": law_fits._ptq_rows_sha(rows)}
    (data / "fits" / "cpu_ptq_gptq.json").write_text(json.dumps(current))
    (data / "fits" / "cpu_ptq.json").write_text(json.dumps({"status": "ok", "input_sha256": "0" * 64}))
    recs = pa.committed_fits("cpu", frame, ("gptq", "rtn"))
    assert recs == {"gptq": current, "rtn": None}
    md = pa.fit_status_markdown("cpu", recs).splitlines()
    assert md == ["- GPTQ: `data/fits/cpu_ptq_gptq.json` is current (fitted on exactly these rows).",
                  "- RTN: `data/fits/cpu_ptq.json` **is missing or older than the rows**; the constants below are "
                  "refitted here without intervals (`python -m bitlaws fit --profile cpu` rewrites it)."]
    # a current hash with a failed fit is not used either
    (data / "fits" / "cpu_ptq_gptq.json").write_text(json.dumps({**current, "status": "failed"}))
    assert pa.committed_fits("cpu", frame, ("gptq",)) == {"gptq": None}

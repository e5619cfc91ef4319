"""The one-screen verdict summary and the chapters' summary boxes (bitlaws.study.summary)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bitlaws.study.claims import CLAIMS, Verdict, load_verdicts, pending_verdict
from bitlaws.study.summary import (
    CHAPTERS,
    HEADLINES,
    chapter_claims,
    chapter_summary_markdown,
    chapter_verdicts_markdown,
    how_sure,
    key_number,
    ledger_details_markdown,
    markdown_text,
    quantity_text,
    with_subscripts,
    readme_block,
    summary_markdown,
    verdict_markdown,
)

REPO = Path(__file__).resolve().parents[1]


def _verdict(claim_id: str, details: dict, verdict: str = "partly", **kw) -> Verdict:
    fields = dict(claim_id=claim_id, verdict=verdict, paper="p", ours="o", reason="r", profile="cpu",
                  inputs_sha256="ab" * 32, details=details)
    fields.update(kw)
    return Verdict(**fields)


def _full(some: dict) -> dict:
    return {c: some.get(c) or pending_verdict(c) for c in CLAIMS}


def test_a_partial_set_of_verdicts_is_refused():
    with pytest.raises(ValueError, match="every claim of the ledger"):
        summary_markdown({"P1": pending_verdict("P1")}, CLAIMS)


def _unescaped_pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def test_key_number_reads_value_interval_and_paper_from_the_details(monkeypatch):
    v = _verdict("P6", {"ours_p_star": 6.2266, "ours_p_star_lo": 4.4107, "ours_p_star_hi": 8.3789,
                        "paper_p_star": 7.0021})
    assert key_number(v) == ("7.0", "6.2 [4.4, 8.4]")
    # ± two standard errors, minus signs as typeset
    v = _verdict("P10", {"mean_delta": -0.0019, "mean_delta_se": 0.0084, "paper_mean_delta": -0.0022})
    assert key_number(v) == ("−0.0022", "−0.0019 ± 0.0168")
    # bytes in millions, tokens in billions; P2's interval is Eq. 13's own (its bootstrap draws), not the grid's
    # (the paper's side is Table 2's Eq. 13 at our smallest N, not its 30M model's)
    v = _verdict("P2", {"gptq_int3_d_crit_eq13": 9.45e6, "paper_d_crit_30m_int3": 1.64e10,
                        "paper_d_crit_n_min_int3": 1.48e9,
                        "gptq_int3_d_crit_eq13_lo": 7.81e6, "gptq_int3_d_crit_eq13_hi": 1.079e7,
                        "gptq_int3_d_crit_lo": 4194304.0, "gptq_int3_d_crit_hi": "n/a"})
    assert key_number(v) == ("1.5B", "9.4M [7.8M, 10.8M]")
    # P10 rule v4: ± t standard errors where the verdict stores its t (2.09 · 0.0074 = 0.0155)
    v = _verdict("P10", {"mean_delta": -0.0041, "mean_delta_se": 0.0074, "mean_delta_t": 2.093,
                         "paper_mean_delta": -0.0026})
    assert key_number(v) == ("−0.0026", "−0.0041 ± 0.0155")
    # a grid interval whose top is the largest D trained, where the minimum's 95 % set reaches it (a headline
    # reading the grid step, as P2's did before it read Eq. 13's own interval)
    grid_headline = dataclasses.replace(HEADLINES["P2"], lo="gptq_int3_d_crit_lo", hi="gptq_int3_d_crit_hi",
                                        interval="grid", hi_open="gptq_int3_d_crit_open")
    monkeypatch.setitem(HEADLINES, "P2", grid_headline)
    grid = {"gptq_int3_d_crit_eq13": 9.47e6, "paper_d_crit_n_min_int3": 1.48e9, "gptq_int3_d_crit_lo": 4194304.0,
            "gptq_int3_d_crit_hi": 16777216.0}
    assert key_number(_verdict("P2", {**grid, "gptq_int3_d_crit_open": 1.0}))[1] == \
        "9.5M [4.2M, ≥ 16.8M (the grid's edge)]"
    assert key_number(_verdict("P2", {**grid, "gptq_int3_d_crit_open": 0.0}))[1] == "9.5M [4.2M, 16.8M]"
    monkeypatch.undo()
    # a paper constant typed from the paper, percentages with a sign
    # a paper range from two keys (P5: κ = 1/T over T's interval), ours with its interval
    assert key_number(_verdict("P5", {"kappa": -1.88, "kappa_lo": -3.24, "kappa_hi": -0.52, "kappa_paper_lo": 5.08,
                                      "kappa_paper_hi": 7.74})) == ("5.08–7.74", "−1.88 [−3.24, −0.52]")
    # the paper's anchored value first, its range in brackets (P9: the law at C_w = 1, then over C_w's range)
    assert key_number(_verdict("P9", {"r_mean": -0.038, "r_lo": -0.291, "r_hi": 0.214, "paper_lo": -0.847,
                                      "paper_hi": -0.038, "paper_c1": -0.373})) == (
        "−0.373 [−0.847, −0.038]", "−0.038 [−0.291, 0.214]")
    assert key_number(_verdict("P9", {"r_mean": -0.038, "paper_c1": -0.373}))[0] == "−0.373"  # no range stored
    assert key_number(_verdict("Q1", {"rel_ppl": 0.00132, "rel_ppl_lo": -0.00155, "rel_ppl_hi": 0.00418})) == (
        "+0.18 %", "+0.13 % [−0.15 %, +0.42 %]")


def test_key_number_says_what_is_missing():
    assert key_number(pending_verdict("Q4")) == ("ideal int8 matmul > 2× (Fig. 9)", "—")
    assert key_number(_verdict("P6", {"suite_best_bits": 8.0})) == ("—", "—")
    with pytest.raises(ValueError, match="HEADLINES"):
        key_number(SimpleNamespace(claim_id="X9", details={}))  # a claim the ledger does not have


def test_every_stored_verdict_with_data_has_its_key_number():
    # A rule that renames the detail its headline reads must update HEADLINES with it.
    for claim_id, verdict in load_verdicts().items():
        paper, ours = key_number(verdict)
        if verdict.verdict != "pending":
            assert ours != "—", f"{claim_id}: HEADLINES[{claim_id!r}].ours is not in its stored details"
            assert paper != "—", f"{claim_id}: HEADLINES[{claim_id!r}].paper is not in its stored details"


def test_summary_has_one_short_row_per_claim_with_its_chapter():
    verdicts = _full({"P6": _verdict("P6", {"ours_p_star": 6.2}, verdict="inconclusive", ours="a | b")})
    table = summary_markdown(verdicts, CLAIMS).split("\n\n")[0]
    rows = table.splitlines()[2:]
    assert set(HEADLINES) == set(CLAIMS) and len(rows) == len(CLAIMS)
    for claim_id, row in zip(CLAIMS, rows):
        assert row.startswith(f"| **{claim_id}** |")
        assert _unescaped_pipes(row) == 8  # seven cells
        assert len(row) < 220  # one line on a screen, not a paragraph per cell
    p6 = rows[list(CLAIMS).index("P6")]
    assert "P\\* (bits)" in p6 and "**inconclusive**" in p6 and "[04](notebooks/04-compute-optimal.md)" in p6
    assert "**pending**" in rows[0]  # a claim missing from the store


def test_chapter_verdicts_lead_in_one_sentence_and_fold_the_full_text():
    one = _verdict("P7", {}, verdict="derived", ours="ours, one line", reason="why, one line.")
    text = chapter_verdicts_markdown({"P7": one}, ["P7"])
    assert text.endswith("**P7, derived.** A consequence of the fitted form, not a test: read its interval.\n\n"
                         "```{dropdown} P7 in full: what we measured, and why this grade\n"
                         "*Here:* ours, one line.\n\n*Why:* why, one line.\n```")
    lines = _verdict("P6", {"power": 0.04}, verdict="inconclusive", ours="First P*.\nSecond (x)",
                     reason="The lead.\nThe paper's side.")
    text = chapter_verdicts_markdown({"P6": lines}, ["P6"])
    assert "**P6, inconclusive.** The data do not decide" in text and "on our design: 4 %.\n\n```{dropdown}" in text
    assert text.endswith("this grade\nThe lead.\n\n- First P\\*.\n- Second (x).\n- The paper's side.\n```")
    # the how-sure sentence is the book's own Markdown: P9's C_w a subscript, as the leads write every symbol's
    p9 = _verdict("P9", {"power": 0.62}, verdict="inconclusive", ours="o", reason="r")
    assert "against the law at C<sub>w</sub> = 1" in chapter_verdicts_markdown({"P9": p9}, ["P9"]).split("```")[0]


def test_readme_block_folds_the_long_text():
    verdicts = _full({"P1": _verdict("P1", {}, ours="δ rises | with D", reason="a reason")})
    block = readme_block(verdicts, CLAIMS)
    head, folded = block.split("<details>")
    assert "δ rises" not in head and "δ rises \\| with D" in folded and "a reason" in folded
    assert folded.rstrip().endswith("</details>")
    assert ledger_details_markdown(verdicts, CLAIMS).count("*Why this grade:*") == len(CLAIMS)


def test_chapters_cover_every_claim_once():
    graded = [c for chapter in CHAPTERS for c in chapter_claims(chapter, CLAIMS)]
    assert sorted(graded) == sorted(CLAIMS)
    assert chapter_claims("00-number-formats", CLAIMS) == []
    for stem in CHAPTERS:
        assert (REPO / "notebooks" / f"{stem}.md").exists()
    with pytest.raises(ValueError, match="chapter must be one of"):
        chapter_claims("07-nothing", CLAIMS)


def test_chapter_box_holds_its_claims_grades_and_reasons():
    verdicts = load_verdicts()
    box = chapter_summary_markdown("04-compute-optimal", verdicts, CLAIMS)
    assert box.startswith("````{admonition}") and box.rstrip().endswith("````")
    for claim_id in ("P6", "P7", "P8"):
        assert f"| **{claim_id}** |" in box and f"**{verdicts[claim_id].verdict}**" in box
    # the verdicts' own words are in the chapter's verdict section, once a page: the box points there
    assert "P1" not in box and "```{dropdown}" not in box and "the chapter's verdicts below" in box
    assert verdicts["P6"].reason[:80] not in box
    box = chapter_summary_markdown("00-number-formats", verdicts, CLAIMS)
    assert "grades no claim" in box and f"graded *{verdicts['P10'].verdict}*" in box


def test_inline_code_in_the_store_renders_as_one_code_span():
    # rst's ``x`` and Markdown's `x` -> `x`, untouched inside; a stray backtick and the rest escaped
    text = "σ from ``design_checks.repetition_evidence`` and `a|b` at p < 0.05 * 2, a stray ` tick"
    assert markdown_text(text) == ("σ from `design_checks.repetition_evidence` and `a|b` at p \\< 0.05 \\* 2, "
                                   "a stray \\` tick")
    assert markdown_text(text, table=True).count("`a\\|b`") == 1  # GitHub's tables need the pipe escaped
    # a subscript in plain text renders as one (its content escaped); inside a code span it stays as written
    assert markdown_text("± t_{0.975, ν}·σ and `f_{x}` and z_{a*b}") == \
        "± t<sub>0.975, ν</sub>·σ and `f_{x}` and z<sub>a\\*b</sub>"
    verdicts = _full({"P2": _verdict("P2", {}, reason=text)})
    details = ledger_details_markdown(verdicts, CLAIMS)
    assert "`design_checks.repetition_evidence`" in details and "``" not in details.replace("`" * 3, "")
    assert "\\`\\`" not in details


def test_the_committed_readme_ledger_has_no_escaped_or_doubled_backticks():
    from bitlaws.study.claims import repo_root

    text = (repo_root() / "README.md").read_text(encoding="utf-8")
    ledger = text.split("<!-- ledger:start -->", 1)[1].split("<!-- ledger:end -->", 1)[0]
    assert "\\`" not in ledger and "``" not in ledger, [line[:80] for line in ledger.splitlines()
                                                       if "\\`" in line or "``" in line]


def test_chapter_box_legend_names_each_claims_own_interval():
    # P5's t-interval is on the factorial's within-seed σ̂, P9's over the model sizes: one legend entry each
    box = chapter_summary_markdown("03-law-fitting", load_verdicts(), CLAIMS)
    legend = box.split("**What we found**", 1)[1].split("\n", 1)[0]
    assert "P5's: a 95 % t-interval on the within-seed σ̂" in legend
    assert "P9's: a 95 % t-interval over the model sizes" in legend
    assert legend.count("within-seed") == 1
    # an inconclusive claim's power says what it is the power against (P9: one point of the paper's range)
    sure = box.split("**How sure.**", 1)[1]
    assert "the rule's power against the law at C<sub>w</sub> = 1, at the least favourable noise structure" in sure
    # a failure without a gate value of its own gives the rule's power (P3), one with it that (P5)
    # each with its Monte Carlo interval (P3's power is a share of its residual-scatter datasets, the gate's lower end)
    from bitlaws.study.claims import mc_interval

    p3 = load_verdicts()["P3"].details
    lo, hi = mc_interval(p3["power"], p3["n_sim_residual"])
    assert f"**P3** *not reproduced*: the rule came out against the paper; the rule's power against the paper's " \
           f"effect on our design: {100 * p3['power']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]." in sure
    assert f"this grade's own power on our design: {100 * load_verdicts()['P5'].details['power_gate_value']:.0f} %" in sure
    # P1, P2: the graded method's power
    p2 = _verdict("P2", {"method": "gptq", "gptq_power": 0.42, "rtn_power": 0.9}, verdict="inconclusive")
    assert how_sure(p2).endswith("on our design: 42 %.")  # no n_sim: the point alone
    p2.details["n_sim"] = 50.0
    assert how_sure(p2).endswith(f"on our design: 42 % [{100 * mc_interval(0.42, 50)[0]:.0f}, "
                                 f"{100 * mc_interval(0.42, 50)[1]:.0f}].")


def test_quantity_text_fills_counts_from_the_details():
    # P2's N is the smallest size the verdict read (26,784 parameters on cpu), printed compactly
    text = quantity_text("P2", {"n_min": 26784.0})
    assert "D_crit at N = 26.8k" in text and "{" not in text
    assert "D_crit at N = —" in quantity_text("P2", None)  # a pending claim stores no N
    assert quantity_text("P6", {}) == HEADLINES["P6"].quantity  # no placeholder: as typed
    with pytest.raises(ValueError, match="no HEADLINES entry for 'P99'"):
        quantity_text("P99", {})


def test_hand_written_markdown_keeps_its_emphasis_and_gains_subscripts():
    text = "**reproduced** when ± t_{0.975, ν}·σ₀ clears it; ``x_{y}`` stays, p < 0.05"
    assert with_subscripts(text) == "**reproduced** when ± t<sub>0.975, ν</sub>·σ₀ clears it; ``x_{y}`` stays, p < 0.05"


def test_the_leads_and_boxes_set_symbols_subscripts_as_html_and_leave_the_store_as_it_is():
    # a lead stands beside the chapter's MathJax: f_w(4), γ_w, D_crit render as subscripts (<sub>, which the book,
    # Jupyter and GitHub all render), never as plain "f_w(4)"; the store's texts and the README's ledger keep theirs
    verdicts = load_verdicts()
    p3 = verdicts["P3"]
    paper, ours = key_number(p3)
    box = chapter_summary_markdown("03-law-fitting", verdicts, CLAIMS)
    assert (f"| f<sub>w</sub>(4) = N<sub>eff</sub>/N with 4-bit weights (leg b; leg a, the N<sub>eff</sub> form's "
            f"lack of fit, in why) | {paper} | {ours} |") in box
    table = chapter_verdicts_markdown(verdicts, ["P3"]).split("```")[0]
    assert "γ<sub>w</sub> = 2.67" in table and "n<sub>w</sub> = 0.30" in table  # the paper's side, from the store
    assert "γ_w = 2.67" in p3.paper and "n_w = 0.30" in p3.paper  # the stored text itself is unchanged
    p4 = verdicts["P4"]
    lead = verdict_markdown(p4).split("\n\n", 1)[0]
    assert lead.startswith(f"**P4, {p4.verdict}.** f<sub>a</sub>(4) (the most sensitive): ours {key_number(p4)[1]}, ")
    box = chapter_summary_markdown("01-ptq-degradation", verdicts, CLAIMS)
    assert "the bits P<sub>post</sub> vary" in box and "Eq. 13 D<sub>crit</sub> at N = " in box
    assert "P10's: ± t<sub>0.975</sub> standard errors" in chapter_summary_markdown("02-low-precision-training",
                                                                                  verdicts, CLAIMS)
    # every lead and box holds no plain subscript outside code spans
    texts = [chapter_summary_markdown(ch, verdicts, CLAIMS) for ch in CHAPTERS]
    texts += [verdict_markdown(v).split("\n\n", 1)[0] for v in verdicts.values() if v.claim_id in HEADLINES]
    texts.append(chapter_verdicts_markdown(verdicts, list(verdicts)).split("```")[0])
    plain = re.compile(r"(?<![\w`])[^\W\d_]_[^\W_]+(?![\w`])")
    assert not [m.group(0) for t in texts for m in plain.finditer(re.sub(r"`[^`]*`", "", t))]
    assert "down_proj's bits" in chapter_summary_markdown("05-quik-accuracy", verdicts, CLAIMS)  # a name, not a symbol
    assert "f_w(4) = N_eff/N" in summary_markdown(verdicts, CLAIMS)  # the README's ledger: the store's plain text
    intro = summary_markdown(verdicts, CLAIMS, subscripts=True)  # the book's introduction, as the chapters' boxes
    assert "| f<sub>w</sub>(4) = N<sub>eff</sub>/N with 4-bit weights" in intro and "C<sub>w</sub> = 1" in intro
    # identifiers, code spans and TeX-like x_{…} as before; a decimal subscript whole
    assert markdown_text("down_proj's n_params_w, `f_w`, t_0.975 and D_crit < 1, z_{a}", subscripts=True) == \
        "down_proj's n_params_w, `f_w`, t<sub>0.975</sub> and D<sub>crit</sub> \\< 1, z<sub>a</sub>"
    assert markdown_text("D_crit", subscripts=False) == "D_crit"


def test_the_narrow_screen_cards_name_the_summarys_columns():
    # on a phone the book's stylesheet lays each row out as a card, each value after its column's name, typed
    # in the CSS: they must be the summary's columns, in order (the claim and its few words go unnamed)
    css = (REPO / "book" / "_static" / "bitlaws.css").read_text(encoding="utf-8")
    labels = {int(k): v for k, v in re.findall(r'td:nth-child\((\d+)\)::before \{ content: "([^"]+): "; \}', css)}
    verdicts = load_verdicts()
    names = [c.strip() for c in summary_markdown(verdicts, CLAIMS).splitlines()[0].strip("|").split("|")]
    assert labels == {i: name for i, name in enumerate(names, start=1) if i > 2}
    box = chapter_summary_markdown("04-compute-optimal", verdicts, CLAIMS)
    assert ":class: tip bitlaws-summary\n" in box  # the chapter boxes wear the same cards
    table = [line for line in box.splitlines() if line.startswith("| claim |")][0]
    assert [c.strip() for c in table.strip("|").split("|")] == names[:-1]


def test_the_leads_monte_carlo_interval_is_claims_wilson_interval():
    from bitlaws.study.claims import mc_interval
    from bitlaws.study.summary import _rate_with_interval

    for rate, n in ((0.545, 200), (0.0, 40), (1.0, 100), (52 / 60, 60), (0.567, 1000)):
        lo, hi = mc_interval(rate, n)
        assert _rate_with_interval(rate, {"n_sim": float(n)}) == f"{100 * rate:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"
    assert _rate_with_interval(0.8667, {"n_sim": 40.0}) == "87 %"  # not a share of 40 datasets: the point alone

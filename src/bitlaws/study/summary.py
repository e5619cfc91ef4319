"""The verdicts at a glance: a one-screen summary table and each chapter's summary box.

Everything here is rendered from ``data/verdicts.json`` (``bitlaws.study.claims.load_verdicts``) and
the ledger ``bitlaws.study.claims.CLAIMS``, both passed in (``claims`` renders the README with it):
``HEADLINES`` says, per claim, which stored detail is its key number and which is the paper's;
``summary_markdown`` sets them side by side with their intervals and grades (the README and the
book's introduction), ``ledger_details_markdown`` gives the long text (paper, ours, why) folded,
and ``chapter_summary_markdown`` opens each chapter with its claims. The paper's numbers that the
store does not hold are the paper's own constants, cited where they are typed.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path

from typing import Any

__all__ = ["Headline", "HEADLINES", "CHAPTERS", "key_number", "quantity_text", "with_subscripts", "summary_markdown", "ledger_details_markdown",
           "readme_block", "chapter_summary_markdown", "chapter_claims", "chapter_verdicts_markdown",
           "how_sure", "verdict_markdown"]


@dataclasses.dataclass(frozen=True)
class Headline:
    """Which number carries a claim, and where to read it.

    Args:
        short: the claim in a few words.
        quantity: what the number is (symbol, unit); ``{key}`` names a count in ``details`` (a number of
            parameters), printed compactly (``26.8k``) by :func:`quantity_text`.
        ours: the key in the verdict's ``details`` that holds our value.
        paper: the key in ``details`` that holds the paper's value, or a float: the paper's own
            constant (cited in the comment where it is typed), or a string shown as is.
        lo, hi: keys of the interval's ends in ``details`` (a 95 % bootstrap interval unless
            ``interval`` says otherwise), or None.
        se: a key holding a standard error; the interval is then ±2 standard errors (±``se_mult``'s value
            where that key is stored).
        se_mult: with ``se``, the key of the multiplier the rule uses (P10: t_{0.975, ν} on the pooled seed σ's
            degrees of freedom), or None (2).
        hi_open: the key of a flag (1.0) saying the interval's upper end is the largest D trained, which a set
            reaching it does not exclude being passed (P2): the end then reads ``≥ hi (the grid's edge)``.
        interval: what the interval is: "95 %" (the legend's default, each claim's own interval), else a key of
            ``_INTERVALS`` for the chapter box's legend ("grid", "2 SE", "runs", "t seeds": a t-interval on a
            within-seed σ̂, "t sizes": one over model sizes).
        paper_hi: with ``paper`` a key, the key of the upper end where the paper's value is a range
            (printed "lo–hi").
        paper_range: with ``paper`` a key, the keys of a range printed after the paper's value in brackets,
            "value [lo, hi]" (P9: the law at C_w = 1, then over C_w's range).
        power_against: what the verdict's ``power`` detail is the power against, where it is one point of a
            range (P9: the law at C_w = 1); printed in the chapter box's "how sure" line.
        fmt: how to print the numbers: a format spec (``".2f"``), ``"%"`` (a fraction as a
            percentage with a sign), ``"pct"`` (a share as a percentage) or ``"M"`` (bytes in
            millions, tokens in billions if above 1e9).
    """

    short: str
    quantity: str
    ours: str
    paper: str | float | None = None
    lo: str | None = None
    hi: str | None = None
    se: str | None = None
    interval: str = "95 %"
    fmt: str = ".2f"
    paper_hi: str | None = None
    paper_range: tuple[str, str] | None = None
    power_against: str | None = None
    se_mult: str | None = None
    hi_open: str | None = None


# The paper's constants typed below come from Kumar et al. (Table 2, §3, Fig. 5 and 7) as quoted in
# CLAIMS; every one of ours is read from the stored verdict.
HEADLINES: dict[str, Headline] = {
    # P1: the point of the estimator whose interval the rule read (Eq. 2's Huber fit with its bootstrap; where that
    # bootstrap is not current, the log-linear regression's, which the verdict's text names)
    "P1": Headline("PTQ hurts more with more data", "γ_D of Eq. 2 (GPTQ)", "gptq_gamma_d_point",
                   paper=0.51, lo="gptq_gamma_d_lo", hi="gptq_gamma_d_hi"),  # Kumar et al. Eq. 2 fit
    # P2: Eq. 13 on our fitted constants with its own 95 % interval (paired bootstrap draws of the Chinchilla and
    # Eq. 2 constants, ptq_degradation.write_d_crit_boot); the grid step of the observed turn-up is in the text.
    # Each side is its own study's Eq. 13 at its own smallest N, in its own units: derived, not compared.
    "P2": Headline("Overtraining makes the quantized model worse",
                   "Eq. 13 D_crit at N = {n_min}, GPTQ INT3, derived (ours: bytes; paper: Table 2, tokens)",
                   "gptq_int3_d_crit_eq13", paper="paper_d_crit_n_min_int3", lo="gptq_int3_d_crit_eq13_lo",
                   hi="gptq_int3_d_crit_eq13_hi", fmt="M"),
    # P3: the grade reads two legs, (a) the N_eff form's lack of fit at fixed (N, D) against pure error and (b) f_w(4)
    # against the paper's; an unresolved leg counts as not met (law_fits.p3_decision). The row shows leg (b), f_w(4)
    # with its interval against the paper's; leg (a)'s lack-of-fit p is in the reason.
    "P3": Headline("Low-precision training = fewer parameters",
                   "f_w(4) = N_eff/N with 4-bit weights (leg b; leg a, the N_eff form's lack of fit, in why)",
                   "f_w_4", paper="paper_f_w_4", lo="f_w_4_lo", hi="f_w_4_hi"),
    "P4": Headline("Activations most sensitive, KV cache least", "f_a(4) (the most sensitive)", "f_a_4",
                   paper="paper_f_a_4", lo="f_a_4_lo", hi="f_a_4_hi"),
    # P5 (rule v8, the seeded factorial): κ = 1/T, how strongly the parts' effects compound (0: they add); the
    # paper's law at our N gives κ over T's registered interval; ours is κ̂ with its 95 % t-interval.
    "P5": Headline("Precision effects multiply", "κ = 1/T (0 = add, < 0 = less than add)", "kappa",
                   paper="kappa_paper_lo", paper_hi="kappa_paper_hi", lo="kappa_lo", hi="kappa_hi", interval="t seeds"),
    "P6": Headline("Compute-optimal precision ≈ 7–8 bits", "P* (bits)", "ours_p_star", paper="paper_p_star",
                   lo="ours_p_star_lo", hi="ours_p_star_hi", fmt=".1f"),
    "P7": Headline("At low precision, grow N before D", "N*(4 bits) / N*(P*)", "ours_n_star_4_over_p_star",
                   paper="paper_n_star_4_over_p_star", lo="ours_n_star_4_over_p_star_lo",
                   hi="ours_n_star_4_over_p_star_hi"),
    "P8": Headline("P* grows like log(D/N)", "bits per e-fold of D/N", "ours_slope_per_ln_dn",
                   paper="paper_slope_per_ln_dn", lo="ours_slope_lo", hi="ours_slope_hi"),
    # P9 (rule v5/v6, the matched grid): r̄ = mean ln(δ_low/δ_hp) at P_post = P_w − 1 (< 0: the low-precision-trained
    # model degrades less); the paper's value is Eq. 9 over Eq. 2 on the same units at C_w = 1 (Eq. 10's case; the
    # paper prints no C_w), its range over C_w's registered range in brackets.
    "P9": Headline("Low-precision training resists PTQ", "r̄ = ln(δ_low/δ_hp), P_w → P_w − 1 (< 0: resists)",
                   "r_mean", paper="paper_c1", paper_range=("paper_lo", "paper_hi"), lo="r_lo", hi="r_hi", interval="t sizes",
                   fmt=".3f", power_against="against the law at C_w = 1, at the least favourable noise structure"),
    "P10": Headline("Floats beat integers slightly", "FP − INT loss (nats/byte)", "mean_delta",
                    paper="paper_mean_delta", se="mean_delta_se", se_mult="mean_delta_t", interval="t SE",
                    fmt="+.4f"),
    # Q1–Q3 are graded on SmolLM2-135M (bitlaws.study.quik_smollm, rule 2); intervals: paired
    # bootstrap over the evaluation windows.
    "Q1": Headline("W8A8 keeps quality", "Δppl per token, QUIK W8A8, SmolLM2-135M", "rel_ppl",
                   paper=0.01 / 5.47, lo="rel_ppl_lo", hi="rel_ppl_hi", fmt="%"),  # Table 12: 7B 5.47 → 5.48
    "Q2": Headline("W4A4 + fp16 outliers costs little", "Δppl per token, QUIK W4A4, SmolLM2-135M", "rel_ppl",
                   paper=(5.84 - 5.47) / 5.47, lo="rel_ppl_lo", hi="rel_ppl_hi", fmt="%"),  # Table 2: 7B
    "Q3": Headline("≈ 256 outliers is near the knee", "share of the W4A4 loss that 4× the outliers recovers",
                   "beyond_default", paper=math.log(3.74 / 3.62) / math.log(3.74 / 3.20), lo="beyond_default_lo",
                   hi="beyond_default_hi", fmt="pct"),  # Table 7 (70B): 256 → 3.74, 1024 → 3.62; fp 3.20 (in nats, as ours)
    # QUIK's Fig. 6 gives QUIK-4B's > 4× on large layers and no number for QUIK-8B; the "> 2×" at 8 bits
    # is the ideal INT8 matmul of Fig. 9, to which Q4's Hopper form (ours) anchors its 8-bit threshold.
    "Q4": Headline("Kernels ≈ 4× at 4 bits (ours: int8's 2× on Hopper)",
                   "8-bit layer speed-up over 16-bit (fp16 there, bf16 here) [×]", "speedup_w8a8",
                   paper="ideal int8 matmul > 2× (Fig. 9)",
                   lo="speedup_w8a8_lo", hi="speedup_w8a8_hi", interval="runs", fmt=".2f"),
}

# What each chapter reproduces, in words (the numbers come from the verdicts).
CHAPTERS: dict[str, str] = {
    "00-number-formats": "the number formats the papers use: INT and floating-point grids (the OCP formats "
    "and the paper's ExMy), their error against bits, and per-tensor against per-channel scales",
    "01-ptq-degradation": "Kumar et al.'s Fig. 1 (left) and Fig. 2: how much post-training quantization "
    "(GPTQ, and RTN as the paper's Appendix F) costs as the data D, the size N and the bits P_post vary, "
    "Eq. 2 and the critical data size",
    "02-low-precision-training": "Kumar et al.'s Fig. 3–4: training with weights, activations or the KV "
    "cache in few bits, which part is most sensitive, floating point against integer, and a compute-matched "
    "suite (Fig. 1, right)",
    "03-law-fitting": "the fits of Kumar et al.'s laws (Eqs. 2–4, 9, Table 1), with the Chinchilla refit "
    "of Besiroglu et al. as a check of the fitter",
    "04-compute-optimal": "Kumar et al.'s compute-optimal precision (Eq. 7, Figs. 1 right, 6 and 9): P*, "
    "N* and D* from the fitted laws, D_crit, and the compute-matched suite",
    "05-quik-accuracy": "QUIK's accuracy: W8A8 and W4A4 with fp16 outlier features against RTN, "
    "SmoothQuant and GPTQ, and its ablations (the outlier count, down_proj's bits, clipping)",
    "06-quik-kernels": "QUIK's fused layer (its Algorithm 1, Fig. 6): activation quantization, integer "
    "GEMM, dequantization and the outlier GEMM, checked on the CPU, timed on a GPU when one is lent",
}

# Chapters that grade no claim, and the claims they inform.
_INFORMS = {"00-number-formats": ("P10",)}

# Characters that change a table cell's or a line's meaning on GitHub and in MyST.
_MARKDOWN_SPECIALS = "\\|*~$<`"

# What each ``Headline.interval`` is, in the chapter box's legend.
_INTERVALS = {"grid": "the grid step where it lies (≥ at the grid's edge: no turn-up within the grid is "
                      "not excluded)",
              "2 SE": "± two standard errors", "runs": "the range over the runs' baselines",
              "t SE": "± t_0.975 standard errors (t on the pooled seed σ's degrees of freedom)",
              "t seeds": "a 95 % t-interval on the within-seed σ̂", "t sizes": "a 95 % t-interval over the model sizes"}

_HOW_SURE = {  # when each rule was written, before or after its data, is on the rules page (RULE_HISTORY)
    "reproduced": "a rule that could have come out either way came out the paper's way",
    "partly": "the rule met some of its tests and not others",
    "not reproduced": "the rule came out against the paper",
    "inconclusive": "the data do not decide: too little power, or a statistic between the rule's thresholds "
    "(the reason says which)",
    "derived": "a consequence of the fitted form, not a test: read its interval",
    "pending": "no data yet",
}


def _fmt(x: float, fmt: str) -> str:
    if fmt == "%":
        return f"{100 * x:+.2f} %".replace("-", "−")
    if fmt == "pct":
        return f"{100 * x:.0f} %"
    if fmt == "M":
        return f"{x / 1e9:.1f}B" if abs(x) >= 1e9 else f"{x / 1e6:.1f}M"
    return format(x, fmt).replace("-", "−")


def _number(details: Mapping[str, float | str], key: str | None) -> float | None:
    value = details.get(key) if key is not None else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _count(x: float) -> str:
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.0f}"


def quantity_text(claim_id: str, details: Mapping[str, Any] | None) -> str:
    """A headline's quantity with each ``{key}`` filled from the verdict's details (``—`` where not stored).

    Args:
        claim_id: a claim with a ``HEADLINES`` entry.
        details: the verdict's ``details`` (or None: a pending claim).

    Returns:
        The text, e.g. ``"… (ours: bytes at N = 26.8k; …)"``.

    Raises:
        ValueError: if the claim has no ``HEADLINES`` entry.
    """
    if claim_id not in HEADLINES:
        raise ValueError(f"no HEADLINES entry for {claim_id!r}; it has {', '.join(HEADLINES)}")

    def fill(m: re.Match) -> str:
        value = _number(details or {}, m.group(1))
        return "—" if value is None else _count(value)

    return re.sub(r"\{(\w+)\}", fill, HEADLINES[claim_id].quantity)


def key_number(verdict: Any) -> tuple[str, str]:
    """The claim's key number, the paper's and ours (with its interval), as two strings.

    Args:
        verdict: a stored ``bitlaws.study.claims.Verdict``; its ``claim_id`` must have a ``HEADLINES``
            entry.

    Returns:
        ``(paper, ours)``: e.g. ``("7.0", "6.2 [4.4, 8.4]")``; ``"—"`` for a side the store does not
        hold (a pending claim, or a detail that its rule no longer writes). A grid interval whose
        upper end lies past the grid reads ``> lo``; one whose upper end is the grid's edge (``Headline.hi_open``)
        reads ``[lo, ≥ hi (the grid's edge)]``.

    Raises:
        ValueError: if the claim has no ``HEADLINES`` entry.
    """
    if verdict.claim_id not in HEADLINES:
        raise ValueError(f"no HEADLINES entry for {verdict.claim_id!r}; it has {', '.join(HEADLINES)}")
    h = HEADLINES[verdict.claim_id]
    d = verdict.details
    if isinstance(h.paper, float):
        paper = _fmt(h.paper, h.fmt)
    elif isinstance(h.paper, str) and h.paper in d:
        value, top = _number(d, h.paper), _number(d, h.paper_hi)
        paper = _fmt(value, h.fmt) if value is not None else "—"
        if value is not None and top is not None:
            paper += f"–{_fmt(top, h.fmt)}"
        ends = [_number(d, k) for k in h.paper_range] if h.paper_range else []
        if value is not None and ends and None not in ends:
            paper += f" [{_fmt(ends[0], h.fmt)}, {_fmt(ends[1], h.fmt)}]"
    elif isinstance(h.paper, str) and not h.paper.replace("_", "").isalnum():
        paper = h.paper  # a phrase of the paper's, shown as is
    else:
        paper = "—"
    value = _number(d, h.ours)
    if value is None:
        return paper, "—"
    ours = _fmt(value, h.fmt)
    lo, hi, se = _number(d, h.lo), _number(d, h.hi), _number(d, h.se)
    if se is not None:
        mult = _number(d, h.se_mult)
        ours += f" ± {_fmt((2.0 if mult is None else mult) * se, h.fmt.lstrip('+'))}"
    elif lo is not None and hi is not None:
        top = _fmt(hi, h.fmt)
        if _number(d, h.hi_open) == 1.0:
            top = f"≥ {top} (the grid's edge)"
        ours += f" [{_fmt(lo, h.fmt)}, {top}]"
    elif lo is not None:
        ours += f" [> {_fmt(lo, h.fmt)}]"
    return paper, ours


def _chapter_link(claim: Mapping[str, Any], prefix: str) -> str:
    chapter = claim["chapter"]
    if not chapter:
        return "—"
    name = Path(chapter).name
    return f"[{name[:2]}]({prefix}{chapter}.md)"


def _rows(verdicts: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], claim_ids, prefix: str,
          with_chapter: bool, subscripts: bool = False) -> list[str]:
    head = "| claim | in a few words | key number | paper | ours | grade |"
    rule = "|---|---|---|---|---|---|"
    if with_chapter:
        head, rule = head + " chapter |", rule + "---|"
    lines = [head, rule]
    for claim_id in claim_ids:
        verdict = verdicts[claim_id]
        h = HEADLINES[claim_id]
        paper, ours = key_number(verdict)
        quantity = quantity_text(claim_id, getattr(verdict, "details", None))
        cells = [f"**{claim_id}**"] + [_esc(c, subscripts) for c in (h.short, quantity, paper, ours)]
        cells.append(f"**{verdict.verdict}**")
        if with_chapter:
            cells.append(_chapter_link(claims[claim_id], prefix))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


_LEGEND = ("Ours: our value [its 95 % interval from the pipeline bootstrap]; P2's value is Eq. 13 on our fitted "
           "constants and its interval the 95 % range over paired bootstrap draws of the Chinchilla and Eq. 2 "
           "constants (conditional on Eq. 2's form, with runs resampled as independent though a seed's runs share "
           "noise, which a wild cluster bootstrap in the reason checks; the two sides are each study's own Eq. 13 at our "
           "smallest N, not one quantity: the reason "
           "sets the unit-free ones side by side, N's exponent in D_crit and its growth per bit of P_post; the "
           "grade reads the observed turn-up, whose grid step is in the verdict's text); P3's key number is leg (b), "
           "f_w(4) against the paper's (leg (a), the N_eff form's lack of fit at fixed N, D, is in the reason; the rule counts an unresolved leg as not met); P5's a t-interval on the factorial's within-seed σ̂ (its paper value is the "
           "paper's law, κ = 1/T with T = A·N<sup>−α</sup> from our Chinchilla fit at the factorial's N; κ < 0: the effects "
           "add up to less than their sum), P9's a t-interval over the model sizes of the matched grid (its paper "
           "value is Eq. 9 over Eq. 2 on the same units at C_w = 1, Eq. 10's case, and in brackets over C_w from 0.5 "
           "to 2.15, as the paper prints no C_w), "
           "P10's ± is t_0.975 standard errors (t on the pooled seed σ's degrees of freedom), Q1–Q3's from a "
           "bootstrap over "
           "evaluation windows, Q4's the range over the graded code's runs read against every committed run's "
           "bf16 timing; a value without one has "
           "no interval in its record. Grades: *reproduced*, *partly*, *not reproduced* come from a rule with a "
           "stated power (Q4: at least two runs of one kernel code agreeing instead; whether a rule was written "
           "before or after its data is on the rules page); "
           "*inconclusive*: the data do not decide (too little power, or a statistic between the rule's thresholds; "
           "Q4: fewer than two runs of the graded code, or their readings disagree); *derived*: a consequence of a fitted form, not a test; *pending*: no "
           "data yet.")


def summary_markdown(verdicts: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], prefix: str = "",
                     subscripts: bool = False) -> str:
    """The one-screen summary: one short row per claim, the key number paper vs ours, the grade.

    Args:
        verdicts: claim id -> verdict for every claim (``load_verdicts()``, which fills in pending ones).
        claims: the ledger, ``bitlaws.study.claims.CLAIMS``.
        prefix: prepended to the chapter links (``notebooks/NN-topic.md``), for pages elsewhere.
        subscripts: set symbols' subscripts as HTML (``f<sub>w</sub>(4)``), as the chapters' boxes do (the book's
            introduction); False keeps the plain text the README has always had.

    Returns:
        A Markdown table and its legend, ending with a newline.

    Raises:
        ValueError: if ``verdicts`` and ``claims`` do not name the same claims, or a claim has no
            ``HEADLINES`` entry.
    """
    _check(verdicts, claims)
    legend = _plain_subscripts(_LEGEND) if subscripts else _LEGEND
    return "\n".join(_rows(verdicts, claims, claims, prefix, True, subscripts)) + "\n\n" + legend + "\n"


def _check(verdicts: Mapping[str, Any], claims: Mapping[str, Any]) -> None:
    if set(verdicts) != set(claims):
        raise ValueError(f"verdicts must hold every claim of the ledger ({', '.join(claims)}), as "
                         f"load_verdicts() gives; got {', '.join(verdicts) or 'none'}")
    missing = sorted(set(claims) - set(HEADLINES))
    if missing:
        raise ValueError(f"no HEADLINES entry for {missing}")


# Inline code in the store's text: reStructuredText's ``x`` (docstring style) or Markdown's `x`.
_CODE = re.compile(r"``([^`]+)``|`([^`]+)`")
_SUBSCRIPT = re.compile(r"(\w)_\{([^{}`]+)\}")  # x_{…} in the store's plain text (outside code spans)
# A symbol's plain subscript: one letter (Latin or Greek) that no word character precedes, "_", then letters or
# digits (a decimal too: t_0.975), not followed by another word character: f_w(4), γ_w, D_crit, N_eff, δ_PTQ; an
# identifier such as down_proj or n_params_w is left as written.
_PLAIN_SUBSCRIPT = re.compile(r"(?<![\w\\])([^\W\d_])_([^\W_]+(?:\.\d+)?)(?![\w{])")
# what our own Markdown keeps as written: code spans and inline math
_CODE_OR_MATH = re.compile(_CODE.pattern + r"|\$[^$\n]+\$")


def markdown_text(text: str, table: bool = False, subscripts: bool = False) -> str:
    """Text from the store on one line, as Markdown that GitHub and MyST render as it reads.

    Inline code (````x```` or ```x```) becomes one Markdown code span, ```x```, left as it is
    (a ``|`` in it escaped where `table` is set, as GitHub's tables need); everywhere else the
    characters that Markdown would read (:data:`_MARKDOWN_SPECIALS`: cell separators, emphasis,
    strikethrough, math, raw HTML, a stray backtick) are escaped with a backslash, and a subscript written
    ``x_{…}`` becomes ``x<sub>…</sub>`` (the one HTML it emits), so no TeX-like text reaches the page.
    With `subscripts`, a symbol's plain subscript (``f_w(4)``, ``γ_w``, ``D_crit``, ``t_0.975``:
    :data:`_PLAIN_SUBSCRIPT`) becomes one too, ``f<sub>w</sub>(4)``: the chapters' leads and boxes, which stand
    beside the prose's MathJax (``<sub>`` renders alike in the book, in Jupyter and on GitHub; the stored text is
    unchanged).
    """
    flat = " ".join(text.split())

    def escaped(part: str) -> str:
        return "".join("\\" + char if char in _MARKDOWN_SPECIALS else char for char in part)

    def escaped_sub(part: str) -> str:  # escaping touches no letter, digit, "_" or ".": the symbols stay whole
        return _PLAIN_SUBSCRIPT.sub(r"\1<sub>\2</sub>", escaped(part)) if subscripts else escaped(part)

    def plain(part: str) -> str:  # a subscript written t_{0.975, ν} renders as one: t<sub>0.975, ν</sub>
        out, at = [], 0
        for m in _SUBSCRIPT.finditer(part):
            out += [escaped_sub(part[at:m.start() + 1]), f"<sub>{escaped(m.group(2))}</sub>"]
            at = m.end()
        return "".join(out) + escaped_sub(part[at:])

    out, pos = [], 0
    for m in _CODE.finditer(flat):
        code = m.group(1) if m.group(1) is not None else m.group(2)
        out += [plain(flat[pos:m.start()]), "`" + (code.replace("|", "\\|") if table else code) + "`"]
        pos = m.end()
    return "".join(out) + plain(flat[pos:])


def with_subscripts(text: str) -> str:
    """Markdown written by hand (the rules' texts, which use its emphasis) with each ``x_{…}`` outside code spans
    as ``x<sub>…</sub>``, so a page without MathJax shows no TeX-like text; nothing else changes."""
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out += [_SUBSCRIPT.sub(r"\1<sub>\2</sub>", text[pos:m.start()]), m.group(0)]
        pos = m.end()
    return "".join(out) + _SUBSCRIPT.sub(r"\1<sub>\2</sub>", text[pos:])


def _plain_subscripts(markdown: str) -> str:
    """Our own Markdown (the grades' meanings, the chapters' descriptions, the intervals' legend) with each symbol's
    plain subscript outside code spans and ``$…$`` as HTML, ``D_crit`` → ``D<sub>crit</sub>``, as
    ``markdown_text(…, subscripts=True)`` renders the store's text beside it."""
    out, pos = [], 0
    for m in _CODE_OR_MATH.finditer(markdown):
        out += [_PLAIN_SUBSCRIPT.sub(r"\1<sub>\2</sub>", markdown[pos:m.start()]), m.group(0)]
        pos = m.end()
    return "".join(out) + _PLAIN_SUBSCRIPT.sub(r"\1<sub>\2</sub>", markdown[pos:])


def _esc(text: str, subscripts: bool = False) -> str:
    return markdown_text(text, table=True, subscripts=subscripts)


def _flat(text: str, subscripts: bool = False) -> str:
    return markdown_text(text, subscripts=subscripts) or "—"


def ledger_details_markdown(verdicts: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], claim_ids=None,
                            prefix: str = "") -> str:
    """The long text of each claim: the paper's side, ours, why the grade, and the command.

    Args:
        verdicts: claim id -> verdict for every claim.
        claims: the ledger, ``bitlaws.study.claims.CLAIMS``.
        claim_ids: the claims to list (default: every claim, in ledger order).
        prefix: prepended to the chapter links.

    Returns:
        Markdown, one bullet list per claim, ending with a newline.
    """
    _check(verdicts, claims)
    blocks = []
    for claim_id in claim_ids or claims:
        claim = claims[claim_id]
        verdict = verdicts[claim_id]
        blocks.append("\n".join([
            f"**{claim_id}** {_flat(claim['claim'] or '')}: **{verdict.verdict}**",
            "",
            f"- *The paper:* {_flat(verdict.paper or claim['paper'] or '')}",
            f"- *Ours:* {_flat(verdict.ours)}",
            f"- *Why this grade:* {_flat(verdict.reason)}",
            f"- *Chapter:* {_chapter_link(claim, prefix)}; *regenerate:* `{claim['command']}`",
        ]))
    return "\n\n".join(blocks) + "\n"



def chapter_verdicts_markdown(verdicts: Mapping[str, Any], claim_ids) -> str:
    """A chapter's verdicts: a short table (claim, the paper's statement, the key number — the paper's and
    ours, from :data:`HEADLINES` — and the grade), then each claim as :func:`verdict_markdown` without
    its key number: the grade and how sure in one sentence, the full text (what we measured and why the
    grade) folded below it.

    Args:
        verdicts: claim id -> verdict (``bitlaws.study.claims.Verdict``: ``paper``, ``ours``,
            ``verdict``, ``reason``, ``details``), as computed in the chapter or stored.
        claim_ids: the claims, in order.

    Returns:
        Markdown: the table, a blank line, one lead and dropdown per claim.
    """
    rows = ["| claim | the paper | key number: paper / ours | verdict |", "|---|---|---|---|"]
    for c in claim_ids:
        v = verdicts[c]
        key = "—"
        if c in HEADLINES and isinstance(getattr(v, "details", None), Mapping):
            paper, ours = key_number(v)
            key = f"{quantity_text(c, v.details)}: {paper} / {ours}"
        rows.append(f"| {c} | {_esc(v.paper or '—', True)} | {_esc(key, True)} | **{v.verdict}** |")
    return "\n".join(rows + [""] + ["\n\n".join(verdict_markdown(verdicts[c], key=False) for c in claim_ids)])


def how_sure(verdict: Any) -> str:
    """What a grade means, and its power where the store holds one, in one sentence ending in a full stop, as
    Markdown (a symbol's subscript as HTML, ``C<sub>w</sub>``, as the leads beside it have theirs).

    A *partly* or *not reproduced* grade gives the power of that grade's own gate (``power_gate_value``) where
    the rule has one; otherwise, and for an inconclusive grade, the rule's power against the paper's effect on
    our design (its ``power`` detail; ``<method>_power`` where the details name a ``method``, P1 and P2), each
    with its 95 % Monte Carlo interval where the details say over how many datasets (the gate reads its lower
    end). The grade's meaning is :data:`_HOW_SURE`.

    Args:
        verdict: a ``bitlaws.study.claims.Verdict``.

    Raises:
        KeyError: if the verdict's grade is not one of ``_HOW_SURE``'s.
    """
    details = getattr(verdict, "details", None) or {}
    line = _HOW_SURE[verdict.verdict]
    method = details.get("method")  # P1, P2: one set of numbers per PTQ method, the graded one named here
    power = _number(details, f"{method}_power" if isinstance(method, str) else "power")
    own = _number(details, "power_gate_value")
    against = getattr(HEADLINES.get(verdict.claim_id), "power_against", None) or "against the paper's effect"
    if verdict.verdict in ("partly", "not reproduced") and own is not None:
        line += f"; this grade's own power on our design: {_rate_with_interval(own, details)}"
    elif verdict.verdict in ("inconclusive", "partly", "not reproduced") and power is not None:
        line += (f"; the rule's power {against} on our design: "
                 f"{_rate_with_interval(power, details, 'power_n' if not isinstance(method, str) else None)}")
    return _plain_subscripts(line + ".")


def _rate_with_interval(rate: float, details: Mapping[str, Any], n_key: str | None = None) -> str:
    """``"55 % [48, 61]"``: a simulated rate with its 95 % Monte Carlo interval over the datasets the details name
    (``n_key`` where given and present, e.g. P3's ``power_n``, the datasets behind its ``power``, which is a whole
    share of both its worlds' counts; else ``n_sim``, else ``n_sim_residual``: the one of which the rate is a whole
    share); the point alone where none fits. The interval is Wilson's score interval, the one
    ``claims.mc_interval`` prints and whose lower end ``claims.gate_value`` reads, in closed form here (this module
    cannot import ``claims``, which imports it)."""
    keys = ("n_sim", "n_sim_residual")
    if n_key is not None and _number(details, n_key) is not None:
        keys = (n_key,)
    for key in keys:
        n = _number(details, key)
        if n is not None and n >= 1 and abs(rate * n - round(rate * n)) < 1e-6:
            z = 1.959963984540054  # the standard normal's 97.5 % quantile
            centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
            half = z / (1 + z * z / n) * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
            return f"{100 * rate:.0f} % [{100 * max(0.0, centre - half):.0f}, {100 * min(1.0, centre + half):.0f}]"
    return f"{100 * rate:.0f} %"


def verdict_markdown(verdict: Any, key: bool = True) -> str:
    """One verdict as a chapter shows it: a one-sentence lead, the rest folded.

    The lead is the grade, the key number (``key``: ours with its interval beside the paper's, from
    :data:`HEADLINES`) and :func:`how_sure`; a MyST ``dropdown`` below it holds what we measured and why
    the grade, in the verdict's own words. A verdict whose texts are written one sentence a line (P6)
    is folded as a list: the reason's first line, each line of what we measured, the reason's other lines.

    Args:
        verdict: a ``bitlaws.study.claims.Verdict`` (``claim_id``, ``verdict``, ``ours``, ``reason``, ``details``).
        key: print the key number in the lead (False where a table above already gives it).

    Returns:
        Markdown: the lead paragraph, a blank line, the dropdown.
    """
    c, v = verdict.claim_id, verdict
    lead = f"**{c}, {v.verdict}.**"
    if key and c in HEADLINES and isinstance(getattr(v, "details", None), Mapping):
        paper, ours = key_number(v)
        lead += (f" {_flat(quantity_text(c, v.details), True)}: ours {_flat(ours, True)}, "
                 f"the paper's {_flat(paper, True)}.")
    sure = how_sure(v) if v.verdict in _HOW_SURE else ""
    lead += f" {sure[:1].upper() + sure[1:]}" if sure else ""  # our own Markdown, as the chapter box has it
    ours, why = _lines(v.ours), _lines(v.reason)
    if len(ours) > 1 or len(why) > 1:
        full = (f"{_full_stop(why[0] if why else '')}\n\n"
                + "\n".join(f"- {_full_stop(line)}" for line in ours + why[1:]))
    else:
        full = f"*Here:* {_full_stop(v.ours or '')}\n\n*Why:* {_full_stop(v.reason or '')}"
    # the verdict's own words, with each symbol's plain subscript as the lead sets it (f_w(4) → f<sub>w</sub>(4))
    return f"{lead}\n\n```{{dropdown}} {c} in full: what we measured, and why this grade\n{_plain_subscripts(full)}\n```"


def _lines(text: str | None) -> list[str]:
    return [line for line in (text or "").splitlines() if line.strip()]


def _full_stop(text: str) -> str:
    """One line of a verdict's text as Markdown (:func:`markdown_text`), ending in one full stop."""
    flat = _flat(text)
    return flat if flat == "—" else flat.rstrip(". ") + "."


def readme_block(verdicts: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]) -> str:
    """What the README holds between its ledger markers: the summary, then the long text folded.

    Args:
        verdicts: claim id -> verdict for every claim.
        claims: the ledger, ``bitlaws.study.claims.CLAIMS``.

    Returns:
        Markdown (GitHub's ``<details>`` folds the long text), ending with a newline.
    """
    return (summary_markdown(verdicts, claims) + "\n<details>\n<summary>Each claim in full: the paper's side, ours, "
            "why the grade, the command</summary>\n\n" + ledger_details_markdown(verdicts, claims) + "\n</details>\n")


def chapter_claims(chapter: str, claims: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The claims a chapter grades, in ledger order.

    Args:
        chapter: a chapter's file stem, e.g. ``"01-ptq-degradation"``.
        claims: the ledger, ``bitlaws.study.claims.CLAIMS``.

    Raises:
        ValueError: if ``chapter`` is not in ``CHAPTERS``.
    """
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {', '.join(CHAPTERS)}; got {chapter!r}")
    return [c for c, claim in claims.items() if claim["chapter"] and Path(claim["chapter"]).name == chapter]


def chapter_summary_markdown(chapter: str, verdicts: Mapping[str, Any],
                             claims: Mapping[str, Mapping[str, Any]]) -> str:
    """The box that opens a chapter: what it reproduces, what we found, the grades, how sure.

    Args:
        chapter: a chapter's file stem, e.g. ``"01-ptq-degradation"``.
        verdicts: claim id -> verdict for every claim (``load_verdicts()``).
        claims: the ledger, ``bitlaws.study.claims.CLAIMS``.

    Returns:
        A MyST admonition (four-backtick fence; classes ``tip bitlaws-summary``, which the book's stylesheet reads)
        holding the table of :func:`summary_markdown` for its claims and how sure each grade is.

    Raises:
        ValueError: if ``chapter`` is not in ``CHAPTERS``, or as ``summary_markdown``.
    """
    _check(verdicts, claims)
    graded = chapter_claims(chapter, claims)
    parts = [f"**Reproduces** {_plain_subscripts(CHAPTERS[chapter])}."]
    if graded:
        other = [(c, HEADLINES[c].interval) for c in graded if c in HEADLINES and HEADLINES[c].interval != "95 %"]
        extra = "".join(f"; {c}'s: {_plain_subscripts(_INTERVALS[kind])}" for c, kind in other)
        parts.append(f"**What we found** (our value [95 % interval{extra}] beside the paper's; the grade):")
        parts.append("\n".join(_rows(verdicts, claims, graded, "../", False, subscripts=True)))
        sure = [f"**{claim_id}** *{verdicts[claim_id].verdict}*: {how_sure(verdicts[claim_id])}" for claim_id in graded]
        parts.append("**How sure.** " + " ".join(sure))
        # each verdict's own words are in the chapter's verdict section (once a page); the rules on the rules page
        parts.append("What we measured and why each grade, in the rule's own words: the chapter's verdicts below; "
                     "each rule and its history: [the rules page](../rules.md).")
    else:
        informed = []
        for claim_id in _INFORMS.get(chapter, ()):
            verdict = verdicts[claim_id]
            informed.append(f"{claim_id} ({HEADLINES[claim_id].short.lower()}; {_chapter_link(claims[claim_id], '../')}, "
                            f"graded *{verdict.verdict}*)")
        parts.append("**Grades.** This chapter grades no claim: its numbers are exact properties of the "
                     "formats, checked against closed forms" + (f"; they inform {', '.join(informed)}" if informed
                                                                   else "") + ".")
    # bitlaws-summary: the book's stylesheet sets its table as the introduction's (compact; a card per claim on a phone)
    return ("````{admonition} This chapter at a glance\n:class: tip bitlaws-summary\n\n" + "\n\n".join(parts)
            + "\n````\n")

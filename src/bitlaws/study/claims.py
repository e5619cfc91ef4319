"""The claims ledger and the verdict store.

``CLAIMS`` fixes the ledger of the two papers (Kumar et al. 2024, P1–P10; Ashkboos et al. 2023,
Q1–Q4; the ledger in README.md and book/rules.md): what each claim says, the paper's number or direction, the
chapter that tests it and the command that regenerates its data. Verdicts are computed by the
chapters' functions from the data, never typed, stored in ``data/verdicts.json`` and rendered as
one table by the README and the book's introduction. The decision rules (``rule_p1`` …,
``power_gate``, ``sign_test_p``) take the statistics the chapters compute and return a grade;
``bitlaws.study.power`` runs the same rules on simulated data.

Computed floats differ across machines in the last bits, so a verdict's identity
(``inputs_identity``) hashes only what was *read* (rows, fit records' input hashes, typed constants)
and the rule version; ``verdict_differences`` compares grades, identities and strings exactly,
numbers within ``DETAIL_RTOL``. ``store_verdicts`` is the one refresh path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._io import frame_sha256, json_sha256, write_atomic
from .summary import markdown_text, readme_block

__all__ = [
    "finite_or_na",
    "CLAIMS",
    "VERDICTS",
    "RULE_VERSIONS",
    "RULE_SOURCES",
    "RULE_HISTORY",
    "rule_text",
    "DETAIL_RTOL",
    "POWER_MIN",
    "ALPHA",
    "power_gate",
    "gate_value",
    "rate_text",
    "mc_interval",
    "sign_test_p",
    "P1_MIN_RESOLVED",
    "rule_p1",
    "rule_p2",
    "rule_p4",
    "P4_VARIANTS",
    "rule_p4_variants",
    "rule_p5",
    "rule_p5_v6",
    "rule_p5_v5",
    "rule_p5_v4",
    "P5_MIN_SEEDS",
    "P5_N_PAIRS",
    "rule_p9",
    "rule_p9_matched",
    "Verdict",
    "pending_verdict",
    "repo_root",
    "inputs_identity",
    "verdict_differences",
    "prose_number_drift",
    "merge_verdicts",
    "load_verdicts",
    "save_verdicts",
    "update_verdict",
    "store_verdicts",
    "ledger_markdown",
    "update_readme",
]

# Grades: reproduced / partly / not reproduced come from a rule that can come out either way;
# inconclusive where our design cannot detect the paper's effect at two standard errors; derived for
# a consequence of a fitted form (reported with its interval, not a test); pending without data.
VERDICTS = ("reproduced", "partly", "not reproduced", "inconclusive", "derived", "pending")

_PTQ_CHAPTER = "notebooks/01-ptq-degradation"
_CPU_SWEEP = "make reproduce PROFILE=cpu"
_FIT_CHAPTER = "notebooks/03-law-fitting"
_OPT_CHAPTER = "notebooks/04-compute-optimal"
_KERNEL_CHAPTER = "notebooks/06-quik-kernels"
_FIT = "python -m bitlaws fit --profile cpu"
_QUIK_CHAPTER = "notebooks/05-quik-accuracy"
_QAT_CHAPTER = "notebooks/02-low-precision-training"
_QUIK = "python -m bitlaws quik --profile cpu"

# The paper's side of each claim, in our words, from book/papers/*.md. Numbers marked
# "derived" are our algebra on the paper's Table 2 constants, not numbers the paper prints.
CLAIMS: dict[str, dict[str, str | None]] = {
    "P1": {
        "claim": "δ_PTQ grows with D at fixed N, shrinks with N, and grows exponentially as "
        "P_post falls (Eq. 2, Fig. 2)",
        "paper": "δ_PTQ = C_T·D^γ_D·N^(−γ_N)·e^(−P_post/γ_post) with γ_D = 0.51, γ_N = 0.34, "
        "γ_post = 0.59; fit R² = 0.97 (GPTQ, INT3–INT6); RTN and AWQ show the same trends "
        "(App. F, Figs. 10–11)",
        "chapter": _PTQ_CHAPTER,
        "command": _CPU_SWEEP,
    },
    "P2": {
        "claim": "Past a critical data size, more pretraining makes the post-PTQ model worse "
        "(Fig. 1 left, D_crit, Eq. 13)",
        "paper": "post-PTQ loss of the 30M model at INT3 (GPTQ) turns upward within 26B tokens; "
        "D_crit ≈ 16B tokens there (derived from Table 2, Eq. 13)",
        "chapter": _PTQ_CHAPTER,
        "command": _CPU_SWEEP,
    },
    "P3": {
        "claim": "Low-precision training acts as fewer parameters: "
        "N_eff = N·Π_x(1 − e^(−P_x/γ_x + n_x)) (Eqs. 3–4, Figs. 3–4)",
        "paper": "γ_w = 2.67, γ_a = 2.21, γ_kv = 0.96 with offsets n_w = 0.30, n_a = 1.41, "
        "n_kv = 2.42 (Table 2); one fit across N, D and P_w (Fig. 4)",
        "chapter": _FIT_CHAPTER,
        "command": _FIT,
    },
    "P4": {
        "claim": "At equal bits (4–8), activations are the most sensitive, weights next, the "
        "KV cache least, compared on f_x(P) = N_eff/N",
        "paper": "f_x(4 bits): a 0.33, w 0.70, kv 0.83; f_x(8 bits): a 0.89, w 0.93, "
        "kv 0.997 (derived from Table 2)",
        "chapter": _QAT_CHAPTER,
        "command": _CPU_SWEEP,
    },
    "P5": {
        "claim": "The effects of weight, activation and KV-cache precision are independent and "
        "multiply (Fig. 5)",
        "paper": "N_eff multiplies the three precision factors (Eq. 4); joint fit R² = 0.901, product of marginal "
        "fits R² = 0.897",
        "chapter": _FIT_CHAPTER,
        "command": _FIT,
    },
    "P6": {
        "claim": "Compute-optimal training precision is about 7–8 bits, independent of "
        "compute (Eq. 7, Figs. 1 right and 6)",
        "paper": "P* ≈ 7–8 bits (7.0 from Table 2, derived); the compute-matched suite is "
        "U-shaped with its minimum at FP6–FP8",
        "chapter": _OPT_CHAPTER,
        "command": _CPU_SWEEP,  # the compute-matched suite, then the fits
    },
    "P7": {
        "claim": "At a fixed low training precision, spend compute on parameters before data "
        "(§4.3.1)",
        "paper": "below P*, the optimal N rises and the optimal D falls as P is lowered "
        "(Eq. 6); below 4 bits a model must grow more than 4×",
        "chapter": _OPT_CHAPTER,
        "command": _FIT,
    },
    "P8": {
        "claim": "At fixed N, the optimal precision grows like log(D/N) (§4.3.3, Fig. 6 right)",
        "paper": "P* ≈ β·γ·ln C ∝ log(D/N) for an overtrained fixed-size model",
        "chapter": _OPT_CHAPTER,
        "command": _FIT,
    },
    "P9": {
        "claim": "Models trained in low precision degrade less under PTQ (unified law, Eq. 9, "
        "Fig. 7)",
        "paper": "δ_PTQ shrinks as P_train approaches P_post (robustification); unified fit "
        "R² = 0.90 over >1000 points",
        "chapter": _FIT_CHAPTER,
        "command": _FIT,
    },
    "P10": {
        "claim": "Floating-point formats do slightly better than integer ones at equal bits "
        "(Appendix N)",
        "paper": "FP weight-training fit γ_w = 2.81 (bias 0.124) against INT γ_w = 2.67 "
        "(offset 0.30); FP slightly ahead at equal bits (Fig. 16)",
        "chapter": _QAT_CHAPTER,
        "command": _CPU_SWEEP,
    },
    "Q1": {
        "claim": "W8A8 keeps quality",
        "paper": "QUIK-8B: +0.01 ppl on LLaMA-2-7B (5.47 → 5.48, +0.18 %) and -13B (4.88 → 4.89), "
        "+0.13 on -70B (3.20 → 3.33, +4.1 %) (Table 12)",
        "chapter": _QUIK_CHAPTER,
        "command": _QUIK,
    },
    "Q2": {
        "claim": "W4A4 with 256 fp16 outlier features loses about 0.5 ppl where plain W4A4 "
        "collapses",
        "paper": "LLaMA-2-7B 5.47 → 5.84 (+6.8 %), -70B 3.20 → 3.74 (+16.9 %) (Table 2); OPT-1.3B "
        "14.63 → 17.358 (+18.6 %, 256 outliers, Table 10); OPT W4A4 with no outliers ≈ 10⁴ ppl (Table 10)",
        "chapter": _QUIK_CHAPTER,
        "command": _QUIK,
    },
    "Q3": {
        "claim": "About 256 outliers is near the knee; down_proj in 4 bits hurts most",
        "paper": "LLaMA-2-70B: 128/256/512/1024 outliers → 3.80/3.74/3.67/3.62 ppl (Table 7); "
        "4-bit down_proj: 3.74 → 6.91 (Table 4)",
        "chapter": _QUIK_CHAPTER,
        "command": _QUIK,
    },
    "Q4": {
        "claim": "Kernels: a QUIK layer beats fp16, slightly above 4× at 4 bits on large layers; "
        "ours, not QUIK's: on Hopper (int8 tensor cores, no int4) the 8-bit layer is held to the ideal "
        "INT8 matmul's ~2×",
        "paper": "RTX 3090, 2048 tokens, layer-wise (Fig. 6): QUIK-4B (256 outliers) slightly above 4× "
        "over fp16 on large layers, above 2× on smaller ones; QUIK-8B (no outliers) shown, no number in "
        "the text. Ideal INT8 matmul (CUTLASS, M = N = K, no quantize/dequantize): slightly above 2× "
        "(Fig. 9). End to end up to 3.4× (Fig. 8)",
        "chapter": _KERNEL_CHAPTER,
        "command": "python bench/quik_kernels.py --profile gpu",
    },
}

# The version of each claim's decision rule; it enters the claim's identity, so a changed rule
# cannot pass for the stored verdict. Bump it with every change of a rule (and say why in the
# rule's docstring). RULE_HISTORY says which changes came after the data were seen.
RULE_VERSIONS: dict[str, str] = {
    "P1": "3", "P2": "4", "P3": "7", "P4": "8", "P5": "13", "P6": "5", "P7": "2", "P8": "2",
    "P9": "9", "P10": "4", "Q1": "2", "Q2": "2", "Q3": "2", "Q4": "3",
}

# Where each claim's rule is written: the verdict function, whose docstring states the rule.
RULE_SOURCES: dict[str, str] = {
    "P1": "bitlaws.study.ptq_degradation:verdict_p1", "P2": "bitlaws.study.ptq_degradation:verdict_p2",
    "P3": "bitlaws.study.law_fits:verdict_p3", "P4": "bitlaws.study.low_precision_training:verdict_p4",
    "P5": "bitlaws.study.law_fits:verdict_p5", "P6": "bitlaws.study.compute_optimal:verdict_p6",
    "P7": "bitlaws.study.compute_optimal:verdict_p7", "P8": "bitlaws.study.compute_optimal:verdict_p8",
    "P9": "bitlaws.study.law_fits:verdict_p9", "P10": "bitlaws.study.low_precision_training:verdict_p10",
    "Q1": "bitlaws.study.quik_smollm:verdict_q1", "Q2": "bitlaws.study.quik_smollm:verdict_q2",
    "Q3": "bitlaws.study.quik_smollm:verdict_q3", "Q4": "bitlaws.study.quik_kernels:verdict_q4",
}

# Every version of every rule: (version, when, what it asks and why it changed). The last entry's
# version is the one in RULE_VERSIONS (a test checks). Sessions are the project's working sessions.
# The change every gated rule took on 2026-12-07 (its own version of each; RULE_HISTORY quotes it).
_GATE_CHANGE = ("the power gate (power_gate) reads the lower end of the power's Monte Carlo 95 % interval over its "
                "simulated datasets (gate_value, Wilson's) instead of its point, after a referee noted that a power of "
                "55 % [48, 61] passed the 50 % gate though its own simulation cannot tell it from 50 %; no grade moved")

RULE_HISTORY: dict[str, list[tuple[str, str, str]]] = {
    "P1": [("1", "session 1, before the base grid ran", "the share of (N, P_post) and (D, P_post) series and "
            "(N, D) cells whose δ_PTQ moves in the paper's direction beyond the seed noise; GPTQ graded, RTN "
            "reported as the paper's App. F replication"),
           ("2", "2026-12-01, after a referee's reading of the data (a change after the data)", "judged only where δ "
            "clears the noise floor (t-quantiles on the seeds' degrees of freedom; cells and series below it are "
            "unresolved, not failures), with γ_D's bootstrap interval against the paper's 0.51 as the quantitative "
            "test, and power by simulation: v1's failures were series below the floor, while γ_D's gap went ungraded"),
           ("3", "2026-12-07 (issue 14), after the data, with every gated rule at once (stricter)", f"version 2's decision; {_GATE_CHANGE} (the gated powers on these rows: GPTQ 98 % of 200 datasets, lower end 94 %)")],
    "P2": [("1", "session 1, before the base grid ran", "the smallest model's post-PTQ loss turns upward in D "
            "by more than twice the seed spread at some P_post"),
           ("2", "2026-12-01, after a referee's reading of the data (a change after the data)", "the rise against "
            "the t-quantile of the pooled seed σ over each end point's seeds (seed cells at the turn-up count), and "
            "inconclusive where the rule's power with the paper's exponents on our grid is below 0.5: v1 rested on one "
            "series, one seed and a normal 2σ"),
           ("3", "2026-12-01, after v2's near-miss (rise 0.039 against 0.058) was seen and seeds 1–4 were added at "
            "n27k 8.4M and seeds 1–3 at 16.8M (a change after the data)", "v2 as written: its code applied the power "
            "gate to failures only, so the rise the new seeds resolved read 'reproduced' at 0% power; the gate now "
            "applies to a pass as v2 states, and the reason always gives the power and the passes over the data"),
           ("4", "2026-12-07 (issue 14), after the data, with every gated rule at once (stricter)", f"version 3's decision; {_GATE_CHANGE} (P2 is inconclusive on its power alone (GPTQ 0 % with the paper's exponents), at either reading)")],
    "P3": [("1", "session 1, before the QAT sweeps ran", "held-out R² (leave one size out) of the N_eff form "
            "≥ 0.75 reproduced, ≥ 0.5 partly"),
           ("2", "session 4 (2026-12-01), after a referee's reading of the fits (a change after the data)",
            "a precision-blind fit scores the same held-out R², so the rule reads what the precision term "
            "explains at fixed (N, D) and whether the paper's f_w(4) lies in our bootstrap interval"),
           ("3", "session 7 (2026-12-01), after a refit moved the interval's lower end from 0.657 to 0.704, across "
            "the paper's 0.696 (a change after the data)", "the interval's ends read with their Monte Carlo error "
            "(the SD of each percentile over resamples of the 200 draws): the paper's value within two of them of "
            "an end is unresolved, neither inside nor outside; the grade is unchanged (partly)"),
           ("4", "2026-12-06, after the data, after a referee showed the grade had no power behind it (a change "
            "after the data, conservative)", "version 3's decision, gated by its power as every other rule is "
            "(claims.power_gate): the share of datasets simulated from the paper's γ_w, n_w on our design that the "
            "same decision grades reproduced (bitlaws.study.p3_power, law_fits.p3_decision), the smaller of the "
            "powers at seed noise and at our fits' residual scatter; a grade short of reproduced stands only at a "
            "power ≥ POWER_MIN (50 %), and without power rows for the training rows read it is inconclusive. The "
            "first draft, the same day, gated on the seed-noise power alone (72 %, partly); a second referee "
            "showed our f_w(4) interval is wider than every seed-noise dataset's, so the residual-scatter power "
            "(47 %) is read too and P3 reads inconclusive. The same referee found leg (a)'s lack-of-fit test "
            "lenient: its residuals are centred per (N, D, seed), which removes the seed-shared noise that the "
            "pooled seed variance it is tested against still holds; changed in version 5"),
           ("5", "2026-12-06, after the data, after the same referee (a change after the data, stricter on the "
            "frozen rows)", "leg (a)'s lack of fit tested against σ_e², the noise a run does not share with its (N, "
            "D, seed) at other P_w, which is all the centred residuals keep of the seed noise, instead of the pooled "
            "seed variance (σ_seed² + σ_e²): law_fits.p3_run_noise estimates it from the seeded P_w cells (P_w × seed "
            "residual) where they exist, else from the high-precision runs' D cell × seed residual as a stand-in (the "
            "frozen rows: 0.0073 on 6 degrees of freedom, one size, at other D than the P_w sweep's, so it may be too "
            "small or too large). On the frozen rows leg (a) then fails (p = 0.004; v4's test gave 0.084) and the "
            "rule's own grade moves from partly to not reproduced. At simulation version 2 the gate reads 57 % (the "
            "residual-scatter power, 34 of 60 datasets, Monte Carlo interval [44, 68]; v4's rows had read 47 %), so "
            "the published grade moved from inconclusive to not reproduced. That residual-scatter world was extended "
            "from 30 to 60 datasets after its first 30 read 15 (50 %, which already passes the gate), to estimate "
            "that fixed power more closely; the grade is the same at both. The gate now "
            "needs both powers simulated (a gate on whichever one exists would pass on the larger). The same day, "
            "before a v5 verdict was stored, a third referee's reading moved the estimate's first choice to the "
            "seeded P_w cells and corrected its description: the qat_seeds rows, written after the freeze and not "
            "read by the rule, give about 0.011 there (p ≈ 0.01), a number the referee computed and this author has "
            "seen. The power simulation reads the same (P3_POWER_SIM_VERSION 2), so v4's power rows are not read"),
           ("6", "2026-12-07 (issue 14), after the data, with every gated rule at once (stricter)", f"version 5's decision; {_GATE_CHANGE} (the gate's power on these rows: 87 % of 60 residual-scatter datasets, lower end 76 %)"),
           ("7", "2026-12-07 (issue 14), after the data: the classical test had been reported beside v6's grade (p = "
            "0.0013) before this version was written (a change after the data, stricter)", "leg (a) tested by the "
            "classical F-tests on one least-squares fit of γ_w, n_w to the centred losses (law_fits.p3_leg_a; the "
            "stage's fit and three fixed starts, the lowest sum of squares kept): the precision term against a "
            "precision-blind law, and the lack of fit against pure error, the P_w × seed interaction of the seeded "
            "P_w cells (v6's test where there is none, with the reason); v6's F set the law's residual variance, "
            "which holds the pure error, against that pure error, so under the law it rarely rejected: of the stored "
            "power datasets drawn from the paper's and our fitted curves v6's test rejects none of 140 and v7's 6 "
            "(4.3 %, nominal 5 %; of all 200 none and 11, the no-effect world's fits mostly ending on a bound of γ_w "
            "or n_w, where the lack of fit keeps too many degrees of freedom); on 200 drawn in "
            "tests/test_p3_power.py it rejects at its size and finds a bump at one P_w. Both assume one noise "
            "variance across P_w and across (N, D) cells, which our pure error does not quite show (its SD differs "
            "by cell); the p with the Greenhouse–Geisser correction of the pure error's P_w covariance is reported "
            "(our data: ε = 0.63, p = 0.008; a conservative bound, as ε estimated from the blocks' 12 seed "
            "degrees of freedom runs low), not graded, and a power simulated at each cell's own σ is not made. Leg (b) and the gate are v6's. "
            "The power reads the same leg (a) on each stored power dataset, regenerated from its generator "
            "(p3_leg_a.csv; each regenerated dataset's point f_w(4) and v6's p's agree with the stored row's, to "
            "1e-6), so p3_power.csv was not simulated again. On these rows the grade is the same (not reproduced: "
            "leg (a) fails by both tests, p = 0.0013 and v6's 0.005); the gate's power moved from 87 % to 85 % of 60 "
            "residual-scatter datasets (lower end 74 %), the seed-noise power from 92 % to 88 %, and leg (a) in the "
            "paper's world from 100 % to 95 % (seed noise) and 98 % (residual scatter), near its nominal 95 %. A "
            "referee's reading, the same day before this version was stored, added the multistart, the p's in the "
            "regeneration check (a no-effect dataset's f_w(4) is 1 whichever it is), the Greenhouse–Geisser p, and "
            "blocks that drop an unreplicated P_w rather than a seed")],
    "P4": [("1", "session 2, before the QAT sweeps ran", "the order of the fitted f_x(P) at P = 4–8 bits"),
           ("2", "2026-12-01, after the data (a change after the data)", "the order's probability over the pipeline "
            "bootstrap's draws (≥ 95 % to count) instead of the point fits, so the grade carries the fits' "
            "uncertainty; its power is not simulated"),
           ("3", "session 6 (2026-12-01), after v2 graded the data inconclusive (a change after the data)",
            "the power gate of every other rule, with the power simulated on our design (the paper's γ_x, n_x on "
            "our Chinchilla constants and seed noise; the simulation's own spread stands in for each dataset's "
            "bootstrap); v2's inconclusive does not depend on it"),
           ("4", "session 7 (2026-12-01), after a referee's reading of v3's simulation (a change after the data; "
            "thresholds unchanged)", "one design for the fit and the simulation: v3 simulated without the activation "
            "runs at P_a = 3 (the paper's f_a ≤ 0 there) while the real N_eff fit kept them, so the N_eff fits now "
            "leave them out too (power.neff_design; the paper's own fits left out its P_a = 3 runs); the size is "
            "the largest false-positive rate over six nulls, all parts equal and the boundary ones where one "
            "inequality of the order is an equality (v3 measured it at the first only, where the least favourable "
            "nulls lie on the boundary); the simulation refits Chinchilla per dataset as the bootstrap does"),
           ("5", "session 8 (2026-12-01), after a referee's reading of v4 (a change after the data; thresholds "
            "unchanged)", "every run fitted again, P_a = 3 included: v4 made the fit's rows equal the simulation's by "
            "dropping the runs where the paper's law is undefined, a data selection made by the hypothesis under "
            "test; now the simulation keeps those rows too and generates them from a stated extension of the "
            "paper's law (f_x(P) clipped at 0.05, power.extended_factor), so both still read exactly the same rows; "
            "constants on a bound of the fit's box are reported as not identified and an interval that reaches a "
            "bound is printed as reaching it"),
           ("6", "session 9 (2026-12-02, issue 14), after a referee's reading of v5 (a change after the data; "
            "thresholds unchanged)", "v5's power rose from 7 % to 28 % on the 6 clipped P_a = 3 rows alone, at a floor "
            "(0.05) chosen after the data: the grade is now read in four variants, the simulation's floor at 0.02, "
            "0.05 and 0.2 and the P_a ≤ 3 runs dropped from both the fit and the simulation, each with its own "
            "power gate, and a grade other than inconclusive stands only if all four give it (rule_p4_variants); "
            "the power reported is that rule's (a simulated dataset passes only if the fits with and without "
            "those rows both pass it) at the least favourable floor, each variant's own power beside it. The grade "
            "on our runs stays inconclusive (the order holds in 31 % of the pipeline draws)"),
           ("7", "2026-12-04 (issue 14), after a referee's reading of v6 and before any v6 grade was computed from "
            "data (the stored bootstrap record lacks v6's variants)", "the variants' agreed partly or not reproduced "
            "is gated with the conjunction's own power (power.p4_power's power: the least over the floors of the "
            "share of paper-constant datasets that the fits with and without the P_a ≤ 3 runs both grade "
            "reproduced), not each variant's own: the conjunction passes less often than any variant, so v6's "
            "gate was too lenient. Stricter; the grade stays inconclusive"),
           ("8", "2026-12-07 (issue 14), after the data, with every gated rule at once (stricter)", f"version 7's decision; {_GATE_CHANGE} (the conjunction's power on these rows, 55 % of 200 datasets, has its lower end at 48 %, so an agreed failure would now read inconclusive; the grade was inconclusive before any gate (no variant's draws decide))")],
    "P5": [("1", "session 2, before the joint sweep ran", "the product of marginal fits predicts the mixed runs "
            "with R² ≥ 0.75, within 0.05 of the joint fit"),
           ("2", "2026-12-01, after a referee's reading of the data (a change after the data)", "out of sample against "
            "out of sample: the measured marginals' product against their sum on the mixed runs, an interaction test "
            "against the seed noise, and power by simulation; v1 set an out-of-sample R² against an in-sample one"),
           ("3", "session 7 (2026-12-01), after a referee's reading of v2 (a change after the data)", "the residuals' "
            "covariance from the runs they share (mixed runs of one (N, D) share marginal runs and the "
            "high-precision mean; v2 treated them as independent), in the statistics and the power simulation; "
            "'multiply' against 'add' as a test of two simple hypotheses on Δχ² (v2's bar, the 95 % χ²(n) of the "
            "noise, grows with the runs as fast as the separation, so no design could meet it); inconclusive when "
            "the residuals are tighter than the noise model allows (the noise check). On our runs the noise "
            "check fails and the grade stays inconclusive (the power gate alone would make it so too); the reason "
            "says what the tests give taken at face value, the reverse test, and the grade's sensitivity to σ"),
           ("4", "2026-12-01 (issue 14), after a referee measured v3's tests miscalibrated in simulation on our design "
            "(the interaction test's size 2 %, the Δχ² test's 0.5 %, at a nominal 5 %); written before v4's statistics "
            "were computed (a change after the data)", "critical values simulated on our exact design from the fitted "
            "nulls (a parametric bootstrap: both no-interaction forms, 'add' and 'multiply', fitted to every run, the "
            "interaction test against the better form's own fitted null), σ̂ drawn from its sampling distribution; "
            "each mixed run beside the high-precision run of its own seed (v3: a five-seed mean beside seed-0 runs); "
            "σ from the P5 cell's own seeds (v3: pooled over all seeded cells; the pooled σ is reported as a "
            "sensitivity); each test's simulated size reported with its Monte Carlo interval; the seeded factorial "
            "(qat_factorial) read instead of the joint sweep once complete; on the joint sweep (runs v3's sensitivity "
            "had already read with this σ) any decision is exploratory and the grade inconclusive: only the "
            "pre-registered factorial, at seeds no other sweep trains, can grade P5"),
           ("5", "2026-12-02, written before the first qat_factorial row (no factorial run trained), after a "
            "referee's reading of v4's simulations", "the seeded factorial graded as a seed-blocked two-way layout (27 "
            "combinations × seeds, a seed effect removed): σ̂ is the within-seed σ of the factorial's own replicates "
            "(the combination × seed residual, 26·(S − 1) degrees of freedom; v4's across-seed σ also counted the seed "
            "effect that pairing removes, and simulation with a share ρ of the variance shared by a seed's runs put "
            "v4's power at 0.98, 0.82 and 0.38 for ρ = 0, 0.4, 0.7 against the 0.86 it reported); the multiplicative "
            "form fitted with T = A·N^(−α) free (κ = 1/T, nested: κ = 0 is 'add'; v4 plugged in the Chinchilla fit's T "
            "without its interval), the multiplicative direction by Tukey's one-degree-of-freedom test (exact t under "
            "'add'), the interaction by the κ form's lack of fit against the within-seed σ (F); references analytic, "
            "with the size of the whole procedure simulated on ≥ 1000 datasets and reported with its 95 % Monte Carlo "
            "interval (v4's check datasets came from the mean that set its critical values); power simulated with seed "
            "blocks at ρ = 0, 0.4, 0.7, the gate at the unfavourable end; 'partly' gated on a stated interaction "
            "alternative (0.03 nats on every run with weights and activations at 4 bits); graded on the seeds whose "
            "27 runs are all finite, inconclusive below 2 such seeds; the noise check dropped (σ̂ is the pure error "
            "of the graded runs themselves); on the joint sweep v4's statistics stay exploratory and the grade "
            "inconclusive; the source of the rule, its statistics and its data selection frozen by a test"),
           ("6", "2026-12-04, registered before any qat_factorial row was read (its runs were being trained and "
            "committed unread), after a hostile referee's reading of v5", "'reproduced' means the paper's law, not only κ̂ > 0: "
            "v5's κ form absorbed a W4A4 interaction (median κ̂ 1.8 against the paper's 1/T ≈ 6.1) and graded it "
            "reproduced in 20–26 % of such datasets; v6 adds κ̂ against the paper's κ = 1/T over T's registered "
            "interval (power.P5_T_INTERVAL: [0.132, 0.197] at N = 83,280, the pipeline bootstrap's 95 %; a "
            "likelihood-ratio F at the nearest κ0) and three one-degree-of-freedom contrasts of the W4A4, W4KV4 "
            "and A4KV4 cells against the paper's law over that interval (Bonferroni), either one rejecting: not "
            "reproduced ('add' is now graded not reproduced where κ̂'s interval excludes the paper's); P5 reads "
            "evaluation version 2 (spread windows) whatever store.EVAL_VERSION_READ says (power.P5_EVAL_VERSION); "
            "a variance-homogeneity check (4-bit runs against the others) with the larger σ̂ as fallback; absurd "
            "losses (≥ ln 256, ≤ 0, or > 1 nat above the seed's all-16 run) treated as diverged and every bad run "
            "counted per combination; power at σ̂'s upper end on four registered Chinchilla laws (T's point and "
            "2.5/50/97.5 % draws), the least; a test whose simulated size lies wholly above 5 % read with its "
            "simulated p-value; the freeze extended to the generating law (forms.qat_loss), the power gate, the "
            "factorial's training specification, the evaluation and the registered Chinchilla inputs. Simulated on "
            "our design (2000 datasets per cell, MC SD ≤ 1.1 points) at our pooled seed σ 0.0162 all within-seed: "
            "power 0.93 (v5 0.95), 'add' reproduced 0.049 and not reproduced 0.63, the W4A4 alternative not "
            "reproduced 0.59 (v5 0.11) and reproduced 0.20 (v5 0.23), the paper's law not reproduced 0.066; at "
            "σ_w 0.0089 (a seed share 0.7) the alternative is not reproduced in 0.98"),
           ("7", "2026-12-04, registered before any qat_factorial row was read (80 of its 81 runs committed unread, "
            "the last held), after a hostile referee's blind reading of v6 (simulations only)", "v6 graded 'not "
            "reproduced' where any of the κ form's lack of fit, κ̂ against the paper's κ, or the pair contrasts "
            "rejected at 0.05, so the paper's own law was graded not reproduced in 6.5–10.4 % of datasets over our "
            "four registered Chinchilla laws; v7 reads the least of those three p-values against its simulated 5 % "
            "quantile under the paper's law (power.p5_v7_critical: the dataset's fitted paper law and the four laws "
            "at σ̂, the least quantile; Tukey's 'less than add' leg kept apart, as under the paper's law it fired in "
            "0 of 2000 datasets per law). 'Reproduced' now also needs the law-relative W–A interaction alternative "
            "(the paper's law minus its own W4A4 compounding, 0.026–0.037 nats/byte over the laws, instead of v6's "
            "fixed 0.03) graded reproduced at most 0.20 at σ̂'s 95 % upper end on every law, and no seed dropped "
            "for a run with a part at 4 bits (such runs listed); else 'partly' with the reason. 'Not reproduced' is "
            "gated on its own power ('add' graded not reproduced, or the interaction alternative, by the route that "
            "fired), not on the power to reproduce; a not reproduced resting on κ̂ against the paper's κ alone says "
            "the effects compound but not at the strength our Chinchilla T predicts (T depends on the α = β form). "
            "T's interval widened (power.P5_T_INTERVAL_V7: lower end × 0.982, the evaluation-v2 rescaling; upper "
            "end ≥ the free-exponent fit's T = 0.188, inside already) and the referee's 15-run v1/v2 comparison "
            "recorded (power.P5_T_SOURCE_V7). Simulated on our design (1000 datasets per law and hypothesis, MC SD "
            "≤ 1.6 points; 2000 per law for the critical value and for fresh-draw sizes, MC SD ≈ 0.5 points): at a "
            "within-seed σ 0.0089 critical value 0.026, family-wise 'not reproduced' on the paper's law 3.1–4.8 % "
            "over the laws, power 0.95, 'add' not reproduced 0.93, the interaction alternative not reproduced 0.90 "
            "and reproduced ≤ 0.094 (reproduced allowed); at σ 0.0162 critical value 0.024, size 3.4–4.5 %, power "
            "0.92, 'add' reproduced ≤ 0.049 and not reproduced ≥ 0.41, the alternative reproduced up to 0.30 (so "
            "'reproduced' is not allowed: partly, gated on the power to reproduce alone, as it says the interaction "
            "is not excluded); at σ 0.011 the alternative is reproduced up to 0.197, the gate's edge (σ̂ ≈ 0.009 "
            "on 52 degrees of freedom); at σ 0.020 size 3.5–4.5 %, power 0.83, the alternative reproduced up to "
            "0.25"),
           ("8", "2026-12-04, registered before any qat_factorial row was read (80 of 81 runs committed unread, the "
            "last held), after a second hostile referee's blind reading (of v7; simulations only)", "v7 read its "
            "interaction gate and power at σ̂'s 95 % upper end alone, but the share of the W–A interaction "
            "alternative graded reproduced rises and then falls with σ (Tukey's test loses power at high noise: "
            "0.095 at σ 0.009, 0.307 at 0.0162, 0.218 at 0.0237, 0.196 at 0.026, 0.135 at 0.04; 1000 datasets per "
            "law), so v7's gate reopened above σ_hi ≈ 0.026 and a dropped seed or the 4-bit group's fallback σ made "
            "'reproduced' easier; the referee graded data drawn from the alternative at σ 0.024 reproduced twice. "
            "v8 reads the gate and the power as the worst over a geometric grid of 5 σ spanning σ̂'s 95 % interval "
            "(power.p5_v8_sigma_grid, power.p5_v8_design; the same simulation seed at each σ). A family p that is "
            "not finite (a leg not tested) now grades inconclusive (v7 took Python's min, which drops a NaN unless "
            "it comes first, while the simulation propagated it). The all-16 run missing or diverged no longer "
            "lists its seed's other runs as absurd (the margin is not checked against a missing baseline). The "
            "pre-registration is now computed as the verdict reads it (1000 datasets per law, σ and hypothesis, "
            "over the pooled σ's interval; v7's stored text was at 200 and named the minimum over two σ of a gate "
            "the verdict read at one), and every P5 verdict states the grades the rule can reach on its data: at "
            "our pooled σ 0.0162 only partly or inconclusive (the gate is closed, and 'not reproduced' has power "
            "0.25–0.26 under 'add' and the interaction alternative). Two v7 figures were at 200 datasets: 'add' "
            "not reproduced ≥ 0.41 (0.38–0.46 at 1000) and 'add' reproduced ≤ 0.049 (0.057 at 1000)"),
           ("9", "2026-12-04, after the factorial was read (a change after the data, to the verdict's words only)",
            "a referee's reading of the graded factorial found the verdict's text wrong where κ̂'s interval lies wholly "
            "below 0 (it said 'holds 0'); v9 says so, names the pair contrast the Bonferroni leg rests on, gives κ̂ "
            "beside the paper's κ in the reason, states the grade's own power and that the result is about one cell "
            "with per-tensor activation and KV-cache quantization, and prints small p-values and degrees of freedom "
            "plainly (the verdict function's docstring says so too). No statistic, threshold, simulation, data "
            "selection or decision changed: v8's grade and every number stand"),
           ("10", "2026-12-06, after the factorial was read (no change to the rule, its statistics, simulations or words)",
            "store.load_runs, which the freeze digests, gained the data freeze (store.ROWS_READ_UNTIL: sweep rows written "
            "after it are not read until a batch is complete); every qat_factorial row predates it, so P5 reads the "
            "same rows (tests/test_p5_freeze.py checks that the freeze cuts none of them); versioned because the "
            "data selection's code changed"),
           ("11", "2026-12-06, after the factorial was read (no change to the rule, its statistics, simulations, data "
            "selection or words)",
            "store.load_runs, which the freeze digests, now refuses an experiment name that no file holds and "
            "bitlaws.study.sweep does not declare (a ValueError naming it; it said no row was written before the data "
            "freeze), no longer narrows a list holding such a name silently to the names that exist, and counts the "
            "rows each filter (evaluation version, data freeze) removed when none is left; the rows it returns for "
            "valid names are unchanged, so P5 reads the same qat_factorial rows; versioned because the data "
            "selection's code changed"),
           ("12", "2026-12-06, after the factorial was read (no change to the rule, its statistics, simulations, data "
            "selection or words)",
            "store.load_runs, which the freeze digests, now refuses an empty experiment collection (a ValueError; it "
            "gave a FileNotFoundError) and, when no row is left, says which rows at another evaluation version the "
            "data freeze holds back as well, so its message names eval_version and until together instead of one "
            "at a time; the rows it returns for valid arguments are unchanged, so P5 reads the same qat_factorial rows; "
            "versioned because the data selection's code changed"),
           ("13", "2026-12-07 (issue 14), after the data, with every gated rule at once (stricter)", f"version 12's decision; {_GATE_CHANGE} (the grade's own power on these rows: 57 % of 1000 datasets, lower end 54 %: not reproduced stands); the verdict also stores the current Chinchilla fit's T (printed, not read) among its details, so a refit that moves it shows in verdicts --check (the stored text had kept 0.152 after a refit to 0.157, since prose numbers are masked)")],
    "P6": [("1", "session 2, before the compute-matched suite ran", "our P* in [6, 9] bits; the suite's lowest "
            "loss at 6 or 8 bits"),
           ("2", "session 3, after the suite's seeds (a change after the data)", "the suite's noise-resolved "
            "minimum instead of its argmin, which moved with the seeds inside the noise"),
           ("3", "session 4 (2026-12-01), after a referee measured P*'s interval (a change after the data)",
            "P*'s 95 % interval from the pipeline bootstrap instead of the point estimate; an interval that "
            "straddles the band with no resolving suite is inconclusive; \"independent of C\" derived"),
           ("4", "2026-12-06, after the suite's evaluation-v2 rows moved the grade from inconclusive to partly and a "
            "referee asked (a change after the data)", "the suite's near-best test reads the t quantile on its "
            "pooled seed degrees of freedom with Bonferroni's correction over the comparisons with the best "
            "(3.21 for 5 members and 8 degrees of freedom) instead of 2; the suite leg's power and false-positive "
            "rate are simulated with the same test (power.p6_suite_power) and the Welch reading is reported; the "
            "suite leg is graded only where that power reaches 50 % (a resolution the paper's law rarely produces "
            "is no evidence for it). Stricter than v3; on these rows its power is 4 %, so the grade is "
            "inconclusive"),
           ("5", "2026-12-07 (issue 14), after the data, with every gated rule at once", "version 4's decision; "
            "its suite leg's gate reads the lower end of the suite power's Monte Carlo 95 % interval (gate_value) "
            "instead of the point, as the power gate of every rule now does, and a suite whose power is not "
            "simulated is reported, not graded (version 4 graded it: an unknown power passed); no grade moved (the "
            "suite power is 4 % of 2000 on these rows)")],
    "P7": [("1", "session 1", "N* rises and D* falls below P* with our constants: reproduced"),
           ("2", "session 4 (2026-12-01), after the data", "derived: the direction follows from Eq. 6's form "
            "for any constants with P* above 4 bits, so it cannot fail; reported with its interval")],
    "P8": [("1", "session 1", "P* rises linearly in ln(D/N) (R² ≥ 0.95) with our constants: reproduced"),
           ("2", "session 4 (2026-12-01), after the data", "derived: a consequence of the fitted form; "
            "reported with its interval")],
    "P9": [("1", "session 2, before the QAT→PTQ runs", "the share of cells where a low-precision-trained "
            "model degrades less, and the unified law's R²"),
           ("2", "2026-12-01, after a referee's reading of the data (a change after the data)", "a sign test in the "
            "cells where δ_PTQ is measurable (P_w nearest P_post) and an F-test of the R² Eq. 9's robustness term adds "
            "over Eq. 2 without it, with power and false-positive rate by simulation: the v1 R² is reached by Eq. 2 "
            "without any robustness term, and its share counted cells below the noise"),
           ("3", "2026-12-05, after 37 of the matched grid's 50 runs were committed, before any comparison of their "
            "δ was read (two rows, one unit on both grids, were printed while checking the file's columns, without their twin)",
            "the matched grid (qat_matched): the 95 % t-interval over (N, D) cells of mean ln(δ_low/δ_hp), weights "
            "trained at P_w against the high-precision twin, RTN to P_post = P_w − 1 on training's symmetric grid, "
            "against 0 and against the paper's law over C_w ∈ [0.5, 1.5] (the paper prints no C_w); no power gate, "
            "each decisive grade an interval's exclusion with its size simulated; graded once the grid is complete, "
            "v2 until then. v2 compared grids that differ (symmetric training, asymmetric PTQ) and its power rested "
            "on C_w = 1 alone"),
           ("4", "2026-12-05, after a blind referee's reading of v3 (simulations only), still before any comparison of "
            "the matched grid's δ was read; prior information disclosed: v2's fit of the older rows gave C_w = 1.26, "
            "6 of the grid's 40 low-precision models are qat_marginal runs whose asymmetric-grid, eval-v1 δ v2 read "
            "(the twins' asymmetric δ are in base_grid.csv)",
            "v3's test with three changes: P_w = 3 (P_post = 2, ternary on the symmetric grid, outside Eq. 2's fitted "
            "range) reported apart, not graded; the replicates are model sizes, not (N, D) cells (every run shares "
            "seed 0, so data order, and across D the initial weights); the C_w range runs from 0.5 to the largest C_w "
            "at which the law's robustification still wins at every graded P_w (2.15, from Table 2 alone) instead "
            "of 1.5, set beside our C_w of 1.26; the grades under [0.5, 1] and [0.5, 1.5] are reported beside"),
           ("5", "2026-12-05, after a second blind referee's reading of v4 (simulations only), still before any "
            "comparison of the matched grid's δ was read (41 of 50 runs committed)",
            "v4's statistic and decision unchanged; the grid counts as complete only when every run has every "
            "observation the test reads (a failed run counts, its units left out and counted); units without a "
            "twin, with a run not ok or a δ not finite are counted apart from those below the floor; a scenario "
            "with a fifth of the noise shared by every run across sizes (the shared data order; the interval "
            "assumes the sizes independent) is reported apart; 'partly' also covers an interval below 0 but "
            "weaker than the range's weak end; the verdict prints P(not reproduced | no effect) and each rate's "
            "Monte Carlo interval. v4's range moved the rule in the paper's favour: with the cell-share noise, "
            "no effect read not reproduced 30 % under [0.5, 1.5] and 5 % under [0.5, 2.15], no bracket 58 % "
            "and 17 %; the weak end hinges on Eq. 9's N_eff (with the printed Eq. 8's N every C_w wins)"),
           ("6", "2026-12-05, after the complete grid was read and graded by v5 (a change after the data, to the "
            "verdict's words only)", "a referee's reading of the graded grid: the reason named two branches ('the "
            "interval reaches both 0 and the paper's range (or too few sizes)') where one applied, five sizes being "
            "in; it now names the branch that applied; δ_low/δ_hp is printed with its interval. No statistic, "
            "threshold, simulation, data selection or decision changed: v5's grade (inconclusive) and every number "
            "stand"),
           ("7", "2026-12-06, after the grid was read (no change to the rule, its statistic, simulation or words)",
            "store.load_runs, which the freeze digests, gained the data freeze (store.ROWS_READ_UNTIL); every "
            "qat_matched row predates it, so P9 reads the same rows (tests/test_p9_freeze.py checks that the freeze "
            "cuts none of them); versioned because the data selection's code changed"),
           ("8", "2026-12-06, after the grid was read (no change to the rule, its statistic, simulation, data "
            "selection or words)",
            "store.load_runs, which the freeze digests, now refuses an experiment name that no file holds and "
            "bitlaws.study.sweep does not declare (a ValueError naming it; it said no row was written before the data "
            "freeze), no longer narrows a list holding such a name silently to the names that exist, and counts the "
            "rows each filter (evaluation version, data freeze) removed when none is left; the rows it returns for "
            "valid names are unchanged, so P9 reads the same qat_matched rows; versioned because the data "
            "selection's code changed"),
           ("9", "2026-12-06, after the grid was read (no change to the rule, its statistic, simulation, data "
            "selection or words)",
            "store.load_runs, which the freeze digests, now refuses an empty experiment collection (a ValueError; it "
            "gave a FileNotFoundError) and, when no row is left, says which rows at another evaluation version the "
            "data freeze holds back as well, so its message names eval_version and until together instead of one "
            "at a time; the rows it returns for valid arguments are unchanged, so P9 reads the same qat_matched rows; "
            "versioned because the data selection's code changed")],
    "P10": [("1", "session 2, before the formats sweep ran", "the share of FP/INT pairs favouring FP"),
            ("2", "session 3, after the data (a change after the data)", "the mean FP − INT difference against "
             "its standard error: 8/15 pairs at −0.002 ± 0.007 is a null result"),
            ("3", "session 4 (2026-12-01), after the data (the grade moved from not reproduced to "
             "inconclusive)", "a power check first: the paper's own FP and INT fits predict −0.002 on our "
             "design, inside two standard errors, so the grade is inconclusive; the share-of-pairs leg "
             "dropped (unreachable for so small an effect); the standard error counts shared integer twins"),
            ("4", "2026-12-06, after a referee, after the data (a change after the data; the grade stayed "
             "inconclusive)", "the seed σ is the base grid's pooled σ (noise.noise_model: 0.0171 on 19 degrees of "
             "freedom), the one P1, P2, P3 and P6 read, not the largest single cell's seed SD (0.0311, from n214k at "
             "D = 1M, a cell the formats design, all at D = 2M, does not hold); the critical value is t_{0.975, ν} on "
             "its degrees of freedom (2.09), not a normal 2, in the grade, the power check, the power simulation "
             "(each simulated dataset draws its own σ̂ on ν degrees of freedom) and the pairs for 80 % power "
             "(noncentral t); the smaller σ narrows the standard error (0.0134 → 0.0074), so this is not a more "
             "conservative rule: the power check still finds the paper's −0.0026 inside t standard errors")],
    "Q1": [("1", "session 2, before the QUIK rows", "QUIK W8A8 costs ≤ 1 % perplexity on every size and no more "
            "than SmoothQuant plus the noise floor"),
           ("2", "session 4 (2026-12-01), written after SmolLM2's fp, RTN W8A8 and SmoothQuant W8A8 rows were seen, "
            "before QUIK W8A8's; thresholds (1 %, 5 %) kept from rule 1; after a referee showed rule 1 cannot tell "
            "QUIK from plain RTN W8A8 on models without outlier features",
            "graded on a real pretrained causal LM (SmolLM2-135M) per token, with window-bootstrap intervals: the "
            "upper bound of QUIK W8A8's ppl cost ≤ 1 % and QUIK not resolvably worse than the best simple W8A8 "
            "baseline; power simulated; the tiny models' rule-1 grade kept as replication")],
    "Q2": [("1", "session 2, before the QUIK rows", "QUIK W4A4 with outliers close to the paper's relative "
            "loss, and plain W4A4 far worse"),
           ("2", "session 4 (2026-12-01), written after a 4-window smoke run had shown plain RTN W4A4 (+3.8 "
            "nats/token) and QUIK W4A4 (+0.24); thresholds (15 %, 3×, 2× fp) kept from rule 1 unchanged; after a "
            "referee showed rule 1's 4.7× gain was mostly down_proj at 8 bits and GPTQ", "on SmolLM2-135M with intervals: QUIK W4A4 ≤ 15 % ppl, ≥ 3× better than the best "
            "simple W4A4 baseline, plain W4A4 collapsing, and the absmax outliers beating both k = 0 and random "
            "columns at the same k; the gain decomposed step by step")],
    "Q3": [("1", "session 2, before the QUIK rows", "the outlier count's knee and the down_proj ablation"),
           ("2", "session 4 (2026-12-01), written before any SmolLM2 k-sweep or ablation row; after a referee "
            "showed rule 1 measured the knee from k = 0 where Table 7 starts at 128 outliers", "on SmolLM2-135M with intervals: "
            "the knee read from the default k upward as Table 7 does (4× the default recovers < half the remaining "
            "cost), and down_proj at 4 bits costlier than clipping off or halving k")],
    "Q4": [("1", "session 1, before any GPU rows", "the best 8-bit layer speed-up over bf16 on CUDA ≥ 1.6× "
            "reproduced; either width ≥ 1.2× partly (that leg added 2026-11-29, still before any GPU row)"),
           ("2", "2026-12-04, after the first H200 rows were seen (a change after the data; thresholds kept)",
            "the same thresholds read against the bf16 timing of every committed run of the benchmark (two "
            "device calls 17 minutes apart on one machine), inconclusive where they disagree: rule 1 read one "
            "run's baseline, and the dense bf16 layer moved by up to 6 % between runs. Also after the data: the "
            "first run graded 1.16× (not reproduced under rule 1); two large-K tiles were then added to the int8 "
            "GEMM's autotune set, and the rerun graded 1.36× (partly). Every large shape's ratio, their median "
            "(1.16×), the fp16 baseline and the int8 GEMM alone are reported beside the grade"),
           ("3", "2026-12-06, after a referee, after the data (a change after the data; conservative: it can "
            "only turn a grade into inconclusive; thresholds kept)",
            "a grade other than inconclusive needs the graded QUIK code timed in at least two committed runs, "
            "each read against every run's bf16 timing, all pairings giving the same grade; with one run of "
            "the graded code the verdict is inconclusive and the reason says what settles it (a second device "
            "run of the same code, bench/device_check.py --parts bench). Same code: git_sha naming commits with "
            "the same src/bitlaws/kernels tree, or the identical label (quik_kernels.kernel_code). Why: rule 2's "
            "1.36× was one QUIK timing of code that gained two large-K autotune tiles after the first run "
            "(2ee528d, its own QUIK timings 1.16×) was seen, and its interval (1.30–1.36×) varied only the "
            "bf16 baseline while the QUIK W8A8 timings of the large shapes moved by up to 12 % between the two "
            "runs, which ran different kernel code (13B gate/up 0.3443 → 0.3640 ms, +6 %; 70B gate/up, the graded "
            "shape the new tiles were tuned on, 1.0362 → 0.9153 ms, −12 %: the tiles, not noise; the same code's "
            "drift shows in the bf16 layer, −5 % to +6 %); "
            "only 2 of 5 large shapes reach 1.2× (median 1.16×), and the graded tiles were checked on the GPU at "
            "M ≤ 256 only; the QUIK-side spread of the graded shape is now reported. "
            "Under rule 3 the committed data grade inconclusive (rule 2: partly)")],
}

# Stored and recomputed numbers agree when |a − b| ≤ DETAIL_ATOL + DETAIL_RTOL·max(|a|, |b|). Refits
# on other CPUs and BLAS builds differ by ~1e-8 relative (L-BFGS-B stops at a slightly different
# point); 1e-6 leaves a margin of 100 and is still far below any printed digit.
DETAIL_RTOL = 1e-6
DETAIL_ATOL = 1e-12

_VERDICTS_FILE = Path("data") / "verdicts.json"
_LEDGER_START = "<!-- ledger:start -->"
_LEDGER_END = "<!-- ledger:end -->"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The verdict on one claim, with the paper's number and ours side by side.

    Args:
        claim_id: a key of ``CLAIMS``, e.g. ``"P1"``.
        verdict: one of ``VERDICTS`` (reproduced, partly, not reproduced, inconclusive, derived, pending).
        paper: what the paper says, as text (its number or direction).
        ours: what our data say, as text.
        reason: why the verdict is what it is, most of all where the two sides differ.
        profile: the profile whose data gave the verdict (``smoke``, ``cpu``, ``gpu``), or
            ``""`` while pending.
        inputs_sha256: SHA-256 of the data the verdict was computed from, or ``""``.
        details: the numbers behind the verdict, name -> float or str; numbers are stored as
            Python floats (NumPy scalars included), and must be finite.

    Raises:
        ValueError: if ``claim_id`` is not in ``CLAIMS``, ``verdict`` is not in ``VERDICTS``,
            or a value in ``details`` is neither a string nor a finite real number.
    """

    claim_id: str
    verdict: str
    paper: str
    ours: str
    reason: str
    profile: str
    inputs_sha256: str
    details: dict[str, float | str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.claim_id not in CLAIMS:
            raise ValueError(
                f"claim_id must be one of {', '.join(CLAIMS)}; got {self.claim_id!r}"
            )
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"verdict must be one of {', '.join(map(repr, VERDICTS))}; got {self.verdict!r}"
            )
        object.__setattr__(self, "details", _clean_details(self.claim_id, self.details))


# The fields of one entry in data/verdicts.json, which is keyed by claim id.
_STORED_FIELDS = {field.name for field in dataclasses.fields(Verdict)} - {"claim_id"}


def finite_or_na(details: Mapping[str, object]) -> dict[str, float | str]:
    """``details`` ready for a :class:`Verdict`: strings kept, numbers as floats, and a number that
    could not be measured (None, NaN, ±inf) stored as ``"n/a"`` (the store keeps finite numbers only)."""
    out: dict[str, float | str] = {}
    for k, v in details.items():
        out[k] = v if isinstance(v, str) else "n/a" if v is None or not math.isfinite(float(v)) else float(v)
    return out


def _clean_details(claim_id: str, details: Mapping[str, object]) -> dict[str, float | str]:
    """Copy ``details`` with every number as a finite Python float.

    Args:
        claim_id: the claim the details belong to, for the error message.
        details: name -> number or string.

    Returns:
        A new dict, so a caller's later edits cannot change a frozen verdict.

    Raises:
        ValueError: if a key is not a string or a value is not a string or finite real number.
    """
    clean: dict[str, float | str] = {}
    for key, value in details.items():
        if not isinstance(key, str):
            raise ValueError(f"{claim_id}: details keys must be strings; got {key!r}")
        if isinstance(value, str):
            clean[key] = value
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(f"{claim_id}: details[{key!r}] must be finite; got {number}")
            clean[key] = number
        else:
            raise ValueError(
                f"{claim_id}: details[{key!r}] must be a string or a real number; got {value!r}"
            )
    return clean


def pending_verdict(claim_id: str) -> Verdict:
    """The verdict of a claim that has no data yet.

    Args:
        claim_id: a key of ``CLAIMS``.

    Returns:
        A ``pending`` verdict that carries the ledger's text for the paper's side.

    Raises:
        ValueError: if ``claim_id`` is not in ``CLAIMS``.
    """
    if claim_id not in CLAIMS:
        raise ValueError(f"claim_id must be one of {', '.join(CLAIMS)}; got {claim_id!r}")
    return Verdict(
        claim_id=claim_id,
        verdict="pending",
        paper=CLAIMS[claim_id]["paper"] or "",
        ours="",
        reason="not run yet",
        profile="",
        inputs_sha256="",
    )


def repo_root() -> Path:
    """The root of the bitlaws checkout: the folder that holds ``pyproject.toml`` and ``data/``.

    Looked for in this order: the environment variable ``BITLAWS_ROOT``; the current working
    directory and its parents (notebooks run from ``notebooks/``, ``book/notebooks/`` or
    ``build/nbval/``); the folders above this file (an editable install).

    Returns:
        The absolute path of the root.

    Raises:
        FileNotFoundError: if ``BITLAWS_ROOT`` names a folder without ``pyproject.toml`` and
            ``data/``, or no such folder is found.
    """
    from_env = os.environ.get("BITLAWS_ROOT")
    if from_env:
        root = Path(from_env).expanduser().resolve()
        if not _is_root(root):
            raise FileNotFoundError(
                f"BITLAWS_ROOT={from_env!r} is not a bitlaws checkout (pyproject.toml naming bitlaws, and data/)"
            )
        return root
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            if _is_root(folder):
                return folder
    raise FileNotFoundError(
        "cannot find the bitlaws checkout (a folder with pyproject.toml and data/) above "
        f"{Path.cwd()} or {Path(__file__).resolve().parent}; run from inside the checkout "
        "or set BITLAWS_ROOT to it"
    )


def _is_root(folder: Path) -> bool:
    """A bitlaws checkout: ``data/`` beside a ``pyproject.toml`` that names the project bitlaws."""
    pyproject = folder / "pyproject.toml"
    if not (pyproject.is_file() and (folder / "data").is_dir()):
        return False
    try:
        return 'name = "bitlaws"' in pyproject.read_text(encoding="utf-8")
    except OSError:
        return False


def inputs_identity(
    claim_id: str,
    profile: str,
    *,
    frames: Mapping[str, Any] | None = None,
    records: Mapping[str, Mapping[str, Any] | None] | None = None,
    constants: Any = None,
) -> str:
    """The identity of a verdict's inputs: a hash of what was read, never of what was computed.

    Args:
        claim_id: a key of ``CLAIMS``; its ``RULE_VERSIONS`` entry is hashed with the inputs.
        profile: the profile whose data the verdict reads.
        frames: name -> ``pandas.DataFrame`` of rows as read from the run store (hashed by
            ``bitlaws._io.frame_sha256``: parsed values, the same on every machine).
        records: stage -> fit record read from ``data/fits`` (or None when absent): only the
            record's ``status``, ``input_sha256`` (the rows it was fitted on), ``n_boot`` and
            ``boot_seed`` are hashed, not its fitted numbers, which a refit on another machine
            changes in the last bits.
        constants: typed constants the rule reads (e.g. the paper's Table 2), as JSON.

    Returns:
        64 hex digits.

    Raises:
        ValueError: if ``claim_id`` has no rule version.
    """
    if claim_id not in RULE_VERSIONS:
        raise ValueError(f"claim_id must be one of {', '.join(RULE_VERSIONS)}; got {claim_id!r}")
    payload = {
        "claim": claim_id,
        "rule_version": RULE_VERSIONS[claim_id],
        "profile": profile,
        "frames": {name: frame_sha256(frame) for name, frame in (frames or {}).items()},
        "records": {
            name: None if rec is None else [rec.get("status"), rec.get("input_sha256"), rec.get("n_boot"),
                                            rec.get("boot_seed")]
            + ([rec["fit_version"]] if "fit_version" in rec else [])  # records before the field hash as they did
            for name, rec in (records or {}).items()
        },
        "constants": constants,
    }
    return json_sha256(payload)


def rule_text(claim_id: str) -> str:
    """The docstring of the function that grades ``claim_id`` (``RULE_SOURCES``): its rule, in words
    (the prose only: its Args, Returns and Raises sections are left out).

    Raises:
        ValueError: if ``claim_id`` is not in ``CLAIMS``.
    """
    import importlib
    import inspect

    if claim_id not in RULE_SOURCES:
        raise ValueError(f"claim_id must be one of {', '.join(RULE_SOURCES)}; got {claim_id!r}")
    module, name = RULE_SOURCES[claim_id].split(":")
    doc = inspect.getdoc(getattr(importlib.import_module(module), name)) or ""
    # the rule is the prose: drop the Args/Returns/Raises sections and Sphinx roles
    doc = re.split(r"\n(?:Args|Returns|Raises):\n", doc)[0].rstrip()
    return re.sub(r":\w+:`~?([^`]+)`", r"``\1``", doc)


# --- Decision rules (issue 14): each claim's test statistic and decision, on plain numbers ---------
# The chapters' verdict functions compute the statistics from the rows and call these; their power
# simulations call the same functions on simulated data, so the rule that is graded is the rule
# whose power is reported.

# A rule whose power on our design (share of simulated paper-constant datasets graded reproduced) is
# below this cannot tell the paper's effect from none: a failure there is *inconclusive*.
POWER_MIN = 0.5
# Significance level of every test in the rules (one- or two-sided as each rule says).
ALPHA = 0.05


def mc_interval(rate: float, n_sim: float, level: float = 0.95) -> tuple[float, float]:
    """Monte Carlo interval of a simulated rate (power, false-positive rate): Wilson's score interval
    for ``rate · n_sim`` successes in ``n_sim`` simulated datasets (``scipy.stats.binomtest``).

    Args:
        rate: the share of datasets graded so, in [0, 1]. n_sim: the simulated datasets (a whole number ≥ 1).
        level: the interval's coverage.

    Returns:
        ``(lo, hi)``, both in [0, 1]; ``(nan, nan)`` when ``rate`` or ``n_sim`` is NaN.

    Raises:
        ValueError: ``rate`` outside [0, 1], ``n_sim`` < 1 or not whole, or ``rate · n_sim`` not a whole
            number (a rate that did not come from ``n_sim`` datasets).
    """
    from scipy.stats import binomtest  # scipy is heavy to import: only when asked

    if not (math.isfinite(rate) and math.isfinite(n_sim)):
        return math.nan, math.nan
    if not 0.0 <= rate <= 1.0 or n_sim < 1 or n_sim != round(n_sim):
        raise ValueError(f"mc_interval needs a rate in [0, 1] and a whole n_sim ≥ 1; got rate={rate}, n_sim={n_sim}")
    k = rate * n_sim
    if abs(k - round(k)) > 1e-6 * n_sim:
        raise ValueError(f"rate {rate} is not a count out of n_sim = {n_sim:g} datasets")
    ci = binomtest(int(round(k)), int(n_sim)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def rate_text(record: Mapping, key: str = "power") -> str:
    """A simulated rate of a power record (``record[key]`` out of ``record["n_sim"]`` datasets) as the
    verdicts print it: the percentage with its Monte Carlo 95 % interval
    (``mc_interval``, Wilson), e.g. ``28% [22, 35]``; the bare percentage when
    the rate is not a count out of ``n_sim``; ``n/a`` if not finite."""
    rate, n = float(record.get(key, math.nan)), float(record.get("n_sim", math.nan))
    if not math.isfinite(rate):
        return "n/a"
    try:
        lo, hi = mc_interval(rate, n) if math.isfinite(n) else (math.nan, math.nan)
    except ValueError:  # not a count out of n_sim (e.g. some datasets failed): no interval to give
        lo = hi = math.nan
    return f"{rate:.0%}" if not math.isfinite(lo) else f"{rate:.0%} [{100 * lo:.0f}, {100 * hi:.0f}]"


def gate_value(power: float, n_sim: float | None = None, level: float = 0.95) -> float:
    """What the power gate reads: the lower end of ``power``'s Monte Carlo interval over ``n_sim`` simulated
    datasets (Wilson's score interval at ``level``, the interval ``mc_interval`` prints, here in closed form so
    that a rate over datasets some of which failed needs no whole count), so a power whose simulation cannot
    tell it from ``POWER_MIN`` does not pass; the point itself where ``n_sim`` is None (a power computed in
    closed form, not simulated). NaN stays NaN, and a NaN ``n_sim`` (a simulated power whose record does not
    say over how many datasets) gives NaN, which no gate passes.

    Raises:
        ValueError: ``power`` outside [0, 1], or ``n_sim`` given and not ≥ 1.
    """
    if not math.isfinite(power):
        return math.nan
    if not 0.0 <= power <= 1.0:
        raise ValueError(f"gate_value: power must lie in [0, 1]; got {power}")
    if n_sim is None:
        return float(power)
    if math.isnan(n_sim):
        return math.nan
    if not n_sim >= 1:
        raise ValueError(f"gate_value: n_sim must be ≥ 1 simulated datasets; got {n_sim}")
    from scipy.stats import norm

    z, n = float(norm.ppf(0.5 + level / 2)), float(n_sim)
    centre = (power + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(power * (1 - power) / n + z * z / (4 * n * n))
    return max(0.0, centre - half)


def power_gate(grade: str, power: float, n_sim: float | None = None) -> str:
    """``grade``, or *inconclusive* when the rule failed (anything short of reproduced) and its
    simulated power is below ``POWER_MIN`` (or unknown): an underpowered failure is no evidence.

    Since 2026-12-07 the gate reads the lower end of the power's Monte Carlo 95 % interval over its
    ``n_sim`` simulated datasets (``gate_value``), not its point: a power of 55 % [48, 61] does not show
    that the rule detects the paper's effect at least half the time. No grade changed with it.

    Raises:
        ValueError: if ``grade`` is not a grade a rule gives.
    """
    if grade not in ("reproduced", "partly", "not reproduced"):
        raise ValueError(f"grade must be reproduced, partly or not reproduced; got {grade!r}")
    if grade != "reproduced" and not (gate_value(power, n_sim) >= POWER_MIN):
        return "inconclusive"
    return grade


def sign_test_p(n_success: int, n: int) -> float:
    """One-sided exact binomial sign test: P(X ≥ n_success) for X ~ Bin(n, 1/2); NaN when n = 0."""
    from scipy import stats

    return float(stats.binom.sf(n_success - 1, n, 0.5)) if n > 0 else math.nan


def rule_p9(n_less: int, n_measurable: int, p_robustness: float) -> str:
    """P9 (version 2): (a) in the cells where the high-precision δ_PTQ is measurable, models trained
    in low precision degrade less in more cells than chance allows (``sign_test_p`` < ``ALPHA``);
    (b) the robustness term of Eq. 9 adds to Eq. 2 with N_eff and no such term (extra-sum-of-squares
    F-test, p < ``ALPHA``). Both: reproduced; one: partly; neither: not reproduced."""
    legs = int(sign_test_p(n_less, n_measurable) < ALPHA) + int(p_robustness < ALPHA)
    return ("not reproduced", "partly", "reproduced")[legs]



def rule_p9_matched(lo: float, hi: float, paper_lo: float, paper_hi: float) -> str:
    """P9 (version 5, ``bitlaws.study.p9_matched``; versions 3 and 4 differ in the units and replicates read,
    not in this decision): r̄ is the mean over model sizes of ln(δ_low/δ_hp), weights trained at P_w ∈
    {4, 5, 6} and quantized to P_post = P_w − 1 against the high-precision twin on the same grid;
    [``lo``, ``hi``] its 95 % t-interval; [``paper_lo``, ``paper_hi``] the paper's law's r̄ on the same
    units over the registered C_w range (``paper_lo`` < ``paper_hi`` ≤ 0; its weak end is the largest
    C_w at which the law's robustification still wins). The interval below 0 and meeting the paper's
    range: reproduced; below 0 but outside the range (stronger than its strong end, or weaker than its
    weak end): partly; above the range's weak end and reaching 0 or above (the data exclude
    robustification winning as the law has it): not reproduced; otherwise (reaching both 0 and the
    range) inconclusive. Any bound not finite: inconclusive."""
    if not all(math.isfinite(v) for v in (lo, hi, paper_lo, paper_hi)):
        return "inconclusive"
    if hi < 0:
        return "reproduced" if lo <= paper_hi and hi >= paper_lo else "partly"
    return "not reproduced" if lo > paper_hi else "inconclusive"

# P1: a direction is judged on at least this many series that move beyond the noise.
P1_MIN_RESOLVED = 3


def rule_p1(fracs: Mapping[str, float], resolved: Mapping[str, int], paper_inside: bool) -> str:
    """P1 (version 2): a series is *resolved* when its end points (the first and last cells whose δ
    clears the noise floor) differ by more than the t-quantile of their noise; series below the
    floor or within the noise are unresolved, not failures. A direction holds when at least
    ``P1_MIN_RESOLVED`` of its series are resolved and ≥ 0.75 of those (``fracs``) go the paper's
    way. All three hold and the paper's γ_D lies in our 95 % interval: reproduced; all three hold
    but the interval excludes the paper's γ_D, or two of three hold: partly; else not reproduced."""
    holds = sum(bool(resolved.get(k, 0) >= P1_MIN_RESOLVED and f >= 0.75) for k, f in fracs.items())
    if holds == len(fracs) and paper_inside:
        return "reproduced"
    return "partly" if holds >= len(fracs) - 1 else "not reproduced"


def rule_p2(n_rising_smallest: int, n_rising: int) -> str:
    """P2 (version 2): a (N, P_post) series turns upward when its post-PTQ loss at the largest D
    exceeds its minimum over smaller D by more than the t-quantile (seed degrees of freedom) of the
    pooled seed σ of that difference (each end point's σ over its own seed count). A series of the
    smallest model turns upward: reproduced; only series of larger models: partly; none: not
    reproduced."""
    if n_rising_smallest > 0:
        return "reproduced"
    return "partly" if n_rising > 0 else "not reproduced"


# P5 (rules v5–v8): the fewest seeds whose factorial runs are all finite for the factorial to be graded.
P5_MIN_SEEDS = 2
# P5 (rule v6): the interaction contrasts (W4A4, W4KV4, A4KV4) are graded as one family, Bonferroni-adjusted.
P5_N_PAIRS = 3


def rule_p5(n_seeds: int, p_family: float, p_crit: float, p_multiply: float, interaction_excluded: bool = True,
            low_dropped: bool = False) -> str:
    """P5 (version 8, registered 2026-12-04, before any ``qat_factorial`` row was read, after referees'
    blind readings of v6 and v7; statistics ``bitlaws.study.power.p5_v6_statistics`` on the seed-blocked factorial
    with T's interval ``power.P5_T_INTERVAL_V7``, read at evaluation version ``power.P5_EVAL_VERSION`` = 2).

    The claim graded is the paper's: the effects multiply **as the paper's law says** (κ = 1/T, T from our
    Chinchilla fit) and nothing else interacts. v6's tests, on the seeds whose 27 runs are all finite and not
    absurd (``power.p5_factorial_table``): the κ form's lack of fit (``p_interaction``), κ̂ against the
    paper's κ over T's interval (``p_paper``), the W4A4, W4KV4, A4KV4 contrasts (``p_pairs``, Bonferroni
    over the three), Tukey's one-sided test of the multiplicative direction (``p_multiply``, read with its
    simulated p where its size on the fitted 'add' is above ``ALPHA``, ``power.p5_v6_calibrated``).

    New in v7: the three tests that grade against the paper's law are one family. ``p_family`` = min(
    ``p_interaction``, ``p_paper``, ``p_pairs``) is read against ``p_crit``, its simulated ``ALPHA``
    quantile under the paper's law (``power.p5_v7_critical``: the dataset's fitted paper law and our four
    registered Chinchilla laws, σ̂ the tests' own; the least of the quantiles), so the family rejects the
    paper's law at most 5 % of the time on each (v6 graded any of them at 0.05: 6.5–10.4 %).
    "Reproduced" also needs ``interaction_excluded`` (the rule grades the law-relative W–A interaction
    alternative — the paper's law minus its own W4A4 compounding — reproduced at most
    ``power.P5_V7_GATE_REPRODUCED`` of the time at every σ of a geometric grid over σ̂'s 95 % interval, the
    largest over the four laws, ``power.p5_v8_design``; v8, as v7 read the upper end alone and that rate is
    not monotone in σ) and no seed dropped for a run with a part at 4 bits (``low_dropped`` False:
    such a seed would leave the 4-bit cells read on the seeds that behaved).

    Decision: fewer than ``P5_MIN_SEEDS`` graded seeds, or an input not finite (``p_family`` is NaN where any
    of its legs is, v8): **inconclusive**. ``p_family`` < ``p_crit`` or ``p_multiply`` > 1 − ``ALPHA`` (the effects compound less than they add;
    a leg kept apart: under the paper's law it fires in well under 1 % of factorials on our design, and
    the size simulated counts it): **not reproduced**. Otherwise ``p_multiply`` < ``ALPHA``, the
    interaction excluded and no 4-bit seed dropped: **reproduced**; else **partly**. The verdict then gates
    "partly" on the power to reproduce (and, where multiply is not told from add, against the interaction
    alternative too), and "not reproduced" on
    its own power (the simulated share graded not reproduced under 'add' where κ̂ against the paper's κ or
    the less-than-add leg fired, under the interaction alternative where the lack of fit or the pairs
    did; the larger where both), each the least over the σ grid. Versions 7 and 8 share this decision and differ
    in the gate's σ (above). Version 6 is ``rule_p5_v6``."""
    vals = (p_family, p_crit, p_multiply)
    if n_seeds < P5_MIN_SEEDS or not all(math.isfinite(v) for v in vals):
        return "inconclusive"
    if p_family < p_crit or p_multiply > 1.0 - ALPHA:
        return "not reproduced"
    if p_multiply < ALPHA and interaction_excluded and not low_dropped:
        return "reproduced"
    return "partly"


def rule_p5_v6(n_seeds: int, p_interaction: float, p_multiply: float, p_paper: float, p_pairs: float) -> str:
    """P5 (version 6, registered 2026-12-04, before any ``qat_factorial`` row was read; statistics
    ``bitlaws.study.power.p5_v6_statistics`` on the seed-blocked factorial, read at evaluation version
    ``power.P5_EVAL_VERSION`` = 2; T's interval ``power.P5_T_INTERVAL`` registered from the law-fitting
    pipeline's bootstrap before the factorial was read).

    The claim graded is the paper's: the effects multiply **as the paper's law says**, κ = 1/T with
    T = A·N^(−α) from our Chinchilla fit (the product of the marginal N_eff factors predicts the mixed
    runs), and nothing else interacts. Inputs, every p-value from the seeds whose 27 runs are all
    finite and not absurd (``power.p5_factorial_table`` with ``power.P5_ABSURD_MARGIN``):

    * ``p_interaction``: the κ form (T free) leaves lack of fit beyond the within-seed σ (F);
    * ``p_multiply``: Tukey's one-degree-of-freedom test of the multiplicative direction (one-sided);
    * ``p_paper``: κ̂ against the paper's κ over T's whole interval (a likelihood-ratio F on 1
      degree of freedom at the nearest κ0 in [1/T_hi, 1/T_lo]; 1 where κ̂ lies inside): the
      paper's law is rejected only if it is rejected at every T in the interval;
    * ``p_pairs``: the three one-degree-of-freedom contrasts of the W4A4, W4KV4 and A4KV4 cells
      (each pair at 4 bits, the third part at any width) against the paper's law fitted at κ0,
      two-sided, the largest p over κ0 in the interval, Bonferroni-adjusted over the three
      (3 × the smallest, capped at 1): an interaction concentrated in one pair, which the κ form
      would absorb by moving κ̂, is read here.

    Where the within-seed residuals of the runs with a part at 4 bits and of the others differ
    (two-sided F, p < ``ALPHA``), every test uses the larger group's σ̂ and degrees of freedom
    instead of the pooled σ̂ (``power.p5_v6_statistics``); where the simulated size of a test on
    this dataset's fitted null has its 95 % Monte Carlo interval wholly above ``ALPHA``, that test's
    p-value is the simulated one (``power.p5_v6_calibrated``).

    Decision: fewer than ``P5_MIN_SEEDS`` graded seeds, or a p-value not finite: **inconclusive**.
    ``p_interaction`` < ``ALPHA``, ``p_pairs`` < ``ALPHA``, ``p_paper`` < ``ALPHA`` (the effects
    compound by a κ the paper's T excludes, "add" included when κ̂'s interval excludes the
    paper's), or ``p_multiply`` > 1 − ``ALPHA`` (they compound less than they add): **not
    reproduced**. Otherwise ``p_multiply`` < ``ALPHA``: **reproduced**; else **partly** (no departure
    from the paper's law resolved, multiply not told from add). The verdict then gates a grade
    short of reproduced on the simulated power (``power.p5_v6_power``: least over σ̂_w's 95 % upper end
    and T's 2.5 %, 50 %, 97.5 % draws), "partly" also on the power against the interaction
    alternative. Version 5 is ``rule_p5_v5``; version 7 is ``rule_p5``."""
    ps = (p_interaction, p_multiply, p_paper, p_pairs)
    if n_seeds < P5_MIN_SEEDS or not all(math.isfinite(p) for p in ps):
        return "inconclusive"
    if p_interaction < ALPHA or p_pairs < ALPHA or p_paper < ALPHA or p_multiply > 1.0 - ALPHA:
        return "not reproduced"
    return "reproduced" if p_multiply < ALPHA else "partly"


def rule_p5_v5(n_seeds: int, p_interaction: float, p_multiply: float) -> str:
    """P5 (version 5, registered 2026-12-02 before the first ``qat_factorial`` run; statistics
    ``bitlaws.study.power.p5_factorial_statistics`` on the seed-blocked factorial, every reference
    exact or checked by simulation; kept so v5's statistics and design power stay reproducible).

    ``n_seeds`` seeds whose 27 runs are all finite are graded (``power.p5_factorial_table``); fewer
    than ``P5_MIN_SEEDS``: inconclusive (no within-seed σ). The multiplicative form with T free
    leaves lack of fit beyond the within-seed noise (``p_interaction`` < ``ALPHA``): an interaction,
    not reproduced. Otherwise the multiplicative direction (one-sided, κ = 1/T > 0): ``p_multiply``
    < ``ALPHA``, reproduced; ``p_multiply`` > 1 − ``ALPHA`` (the effects compound less than they
    add): not reproduced; else partly (no interaction resolved, multiply not told from add). A
    p-value that is not finite: inconclusive. The verdict then gates a grade short of reproduced
    on the simulated power (``power.p5_factorial_power``)."""
    if n_seeds < P5_MIN_SEEDS or not (math.isfinite(p_interaction) and math.isfinite(p_multiply)):
        return "inconclusive"
    if p_interaction < ALPHA or p_multiply > 1.0 - ALPHA:
        return "not reproduced"
    return "reproduced" if p_multiply < ALPHA else "partly"


def rule_p5_v4(p_interaction: float, p_multiply: float, noise_check: float) -> str:
    """P5 version 4, kept for the joint sweep's exploratory reading (``rule_p5`` is version 8;
    statistics ``bitlaws.study.power.p5_statistics``, every p-value against
    critical values simulated on our design from the fitted nulls): the effects are independent when
    the better-fitting no-interaction form ("add" or "multiply") leaves no lack of fit beyond its own
    fitted null (``p_interaction`` ≥ ``ALPHA``); they multiply when Δ = S_add − S_mult rejects the
    fitted "add" (``p_multiply`` < ``ALPHA``). Independent and multiplying: reproduced; independent
    only: partly; an interaction: not reproduced. Inconclusive when the noise check fails
    (``noise_check`` < ``ALPHA``: the better form fits tighter than the simulated noise allows, so σ̂
    overstates the residuals' noise and neither test is calibrated) or is undefined.

    (Version 3 had the same three-way decision with analytic references, an F-test on the product's
    χ² and a normal reference for Δχ², that simulation showed miscalibrated on our design; version 2
    asked the predictions to differ by more than the 95 % χ²(n) of the noise, a bar no design could
    meet.)"""
    if not noise_check >= ALPHA:
        return "inconclusive"
    if not p_interaction >= ALPHA:
        return "not reproduced"
    return "reproduced" if p_multiply < ALPHA else "partly"


def rule_p4(p_order: float, p_a_most: float) -> str:
    """P4 (versions 2–6): from the pipeline bootstrap's draws, the probability of the paper's order
    f_a < f_w < f_kv at every P in 4–8 bits (``p_order``) and of activations being the most
    sensitive at every P (``p_a_most``). p_order ≥ 0.95: reproduced; p_a_most ≥ 0.95 (the w/KV
    order not resolved the paper's way): partly; p_order ≤ 0.05 (the paper's order excluded):
    not reproduced; otherwise the draws cannot resolve the order: inconclusive. Versions 3–4 pass
    a partly or not reproduced through ``power_gate`` with the rule's simulated power; version 4
    reports the rule's size at the boundary nulls (``bitlaws.study.power.P4_NULLS``); version 5 fits and
    simulates every run (P_a = 3 included, ``bitlaws.study.power.extended_factor``), grades unchanged;
    version 6 applies this rule in each of ``P4_VARIANTS`` (``rule_p4_variants``); version 7 gates the
    variants' agreed grade with the conjunction's own power."""
    if p_order >= 0.95:
        return "reproduced"
    if p_a_most >= 0.95:
        return "partly"
    return "not reproduced" if p_order <= 0.05 else "inconclusive"


# P4 (version 6): the variants a grade must agree across (``rule_p4_variants``). ``floor_<f>``: every
# run fitted, the simulation generating the rows where the paper's law is undefined from its curve
# clipped at f (``bitlaws.study.power.extended_factor``); ``no_pa3``: the runs at P_a ≤ 3 dropped from
# the fit and the simulation alike. The floors differ only in the simulated world, so in the power.
P4_VARIANTS = ("floor_0.02", "floor_0.05", "floor_0.2", "no_pa3")


def rule_p4_variants(probabilities: Mapping[str, tuple[float, float]], powers: Mapping[str, float],
                     joint_power: float = math.nan, n_sim: float | None = None) -> str:
    """P4 (versions 7–8): ``rule_p4`` in each of ``P4_VARIANTS``; a grade other than inconclusive
    stands only if every variant gives it, else *inconclusive*; an agreed partly or not reproduced
    is then made inconclusive by ``power_gate`` with the power of this conjunction itself
    (`joint_power`: ``bitlaws.study.power.p4_power``'s ``power``, the least over the floors of
    ``power_joint_<floor>``, the share of paper-constant datasets that the fits with and without the
    P_a ≤ 3 runs both grade reproduced).

    Version 6 gated each variant with its own power before the conjunction; a conjunction passes
    less often than any of its parts, so its own power is the one that says whether a failure is
    evidence. Version 7 (2026-12-04) gates with it; no v6 grade had been computed from data (the
    stored bootstrap record lacked the variants), so the change moved no grade. Version 8 (2026-12-07)
    gates on the lower end of that power's Monte Carlo interval over its ``n_sim`` datasets
    (``gate_value``), as every gated rule now does; no grade moved.

    Args:
        probabilities: variant -> (p_order, p_a_most), the shares of the pipeline bootstrap's draws
            (the floor variants share the fit on every run, so they share these).
        powers: variant -> the rule's simulated power in that variant (``power_<variant>``), for the
            record; every variant must be there.
        joint_power: the conjunction's power; NaN (not simulated) gates a failure to inconclusive, as
            ``power_gate`` does.
        n_sim: the simulated datasets behind ``joint_power`` (None: the gate reads its point).

    Returns:
        ``reproduced``, ``partly``, ``not reproduced`` or ``inconclusive``.

    Raises:
        ValueError: a variant of ``P4_VARIANTS`` missing from ``probabilities`` or ``powers`` (the message
            names it and lists the variants), or a probability outside [0, 1].
    """
    for name, given in (("probabilities", probabilities), ("powers", powers)):
        missing = [v for v in P4_VARIANTS if v not in given]
        if missing:
            raise ValueError(f"rule_p4_variants: {name} lacks {', '.join(missing)}; it needs every one of "
                             f"{', '.join(P4_VARIANTS)}")
    grades = set()
    for v in P4_VARIANTS:
        p_order, p_a = (float(x) for x in probabilities[v])
        if not (0.0 <= p_order <= 1.0 and 0.0 <= p_a <= 1.0):
            raise ValueError(f"rule_p4_variants: {v}'s probabilities must lie in [0, 1]; got {probabilities[v]!r}")
        grades.add(rule_p4(p_order, p_a))
    if len(grades) != 1:
        return "inconclusive"
    g = grades.pop()
    return g if g == "inconclusive" else power_gate(g, float(joint_power), n_sim)


# A printed number in the prose: digits with their sign, point, exponent and thousands separators.
_NUMBER = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?(?:[eE][-+−]?\d+)?")


def _numbers_agree(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= DETAIL_ATOL + rtol * max(abs(a), abs(b))


_MC_RATES = ("power", "power_partly", "false_positive", "false_partly")
# P5 v6's other simulated rates (``power.p5_v6_power``), shares of the same n_sim datasets.
_P5_RATES = ("mult_not", "add_not", "interaction_reproduced", "power_interaction", "power_gate_value")
_DRAW_SHARES = ("p_order", "p_a_most", "p_kv_below_w")


def _mc_datasets(key: str, details: Mapping) -> float | None:
    """The number of simulated datasets behind a Monte Carlo rate detail (``power``, ``fp_<null>``,
    ``size_<test>`` ...: a share of ``n_sim`` or ``size_n_sim`` datasets; P4's ``p_order``,
    ``p_a_most``, ``p_kv_below_w``: shares of ``n_draws`` bootstrap draws; P5's ``factorial_`` and
    ``v4_`` rates, per ρ (``_rho<ρ>``) and their interval ends (``_lo``, ``_hi``): of that prefix's
    ``n_sim`` or ``size_n_sim``; P5 v6's rates per law and σ, ``<rate>__<law>[__<σ>]``, and its
    ``mult_not``, ``add_not``, ``interaction_reproduced``, ``power_interaction``), None for any other key."""
    pre = next((p for p in ("factorial_", "v4_", "crit_") if key.startswith(p)
                and key not in (p + "n_sim", p + "size_n_sim")), "")
    key = key.split("__")[0]
    if pre:
        key = key[len(pre):]
        key = key.split("_rho")[0]
        key = key[:-3] if key.endswith(("_lo", "_hi")) else key
        if not key.startswith(("power", "false_", "size_") + _P5_RATES):
            return None
    if key.startswith("size_") and key != "size_n_sim":
        n = details.get(pre + "size_n_sim")
    elif key in _DRAW_SHARES:  # P4: shares of the pipeline bootstrap's draws
        n = details.get("n_draws")
    elif key.endswith("_no_pa3") and key[:-len("_no_pa3")] in _DRAW_SHARES:  # P4 v6: the draws without P_a ≤ 3
        n = details.get("n_draws_no_pa3")
    elif pre or key in _MC_RATES + _P5_RATES or key.startswith(("fp_", "fp_partly_")) or (
            key.startswith(("power_", "false_")) and key.endswith(tuple(f"_{v}" for v in P4_VARIANTS))):
        n = details.get(pre + "n_sim")
    else:
        return None
    return float(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 1 else None


# P5's simulated critical values by key (before any ``__<law or σ>`` suffix), besides each null's ``crit_q_<null>``.
_MC_QUANTILES = ("factorial_crit", "crit", "p_crit", "crit_crit")


def _mc_quantile_rtol(key: str, details: Mapping) -> float | None:
    """The relative tolerance of a Monte Carlo quantile detail, None for any other key: P5's simulated
    critical values (``factorial_crit``, per law and σ ``factorial_crit__<…>``; on the complete factorial
    ``p_crit``, ``crit_crit``, each null's ``crit_q_<null>`` and each σ's ``crit__g<i>``), the ``ALPHA``
    quantile of ``factorial_size_n_sim`` datasets' least p-values. Its rank is known to about
    ±2·sqrt(nα(1 − α)) datasets, so the quantile to about 2·sqrt((1 − α)/(nα)) of itself (0.28 at
    n = 1000): under perturbed arithmetic a clean clone moved it by 1.8 %."""
    base = key.split("__")[0]
    if not (base in _MC_QUANTILES or base.startswith(("crit_q_", "factorial_crit_q_"))):
        return None
    pre = next((p for p in ("factorial_", "crit_") if base.startswith(p)), "")
    n = details.get(pre + "size_n_sim", details.get("size_n_sim"))
    if not isinstance(n, (int, float)) or isinstance(n, bool) or n < 1:
        return None
    return 2.0 * math.sqrt((1.0 - ALPHA) / (float(n) * ALPHA))


def _mc_tolerance(p: float, n: float) -> float:
    """How far a Monte Carlo rate ``p`` of ``n`` datasets may move under last-bit arithmetic: one
    dataset (1/n) or two Monte Carlo standard errors, 2·sqrt(p(1 − p)/n), whichever is larger. Datasets
    whose statistics sit within the last bits of a threshold flip, and a refit on each simulated
    dataset (P5's factorial rates) can flip several: a clean clone moved one of P5 v6's rates by 4 of
    200 datasets (0.355 → 0.375) under perturbed arithmetic, beyond the half standard error allowed
    before. The rate is only known to its MC interval (about ±2 standard errors), so a recomputation
    inside it is no difference; grades still compare exactly."""
    q = min(max(float(p), 0.0), 1.0)
    return max(1.0 / n, 2.0 * math.sqrt(q * (1.0 - q) / n))


def verdict_differences(stored: Verdict, new: Verdict, rtol: float = DETAIL_RTOL) -> list[str]:
    """How a recomputed verdict differs from the stored one; empty if they agree.

    Grade, claim, profile, identity and every string detail compare exactly; numeric details
    compare within ``rtol`` (plus ``DETAIL_ATOL``), since refits differ in the last bits across
    machines; a Monte Carlo rate (``power``, ``false_positive``, ``fp_<null>``, ``size_<test>``, P4's
    shares of bootstrap draws, P5's factorial rates: a share of the n datasets or draws the details
    name) within one of them, 1/n, or two Monte Carlo standard errors if larger (``_mc_tolerance``),
    since statistics within the last bits of a threshold flip a few datasets' grades. The prose fields (``ours``, ``reason``) compare with every number masked: a number
    within tolerance may round to another printed digit, but a changed word is a difference.

    Args:
        stored: the verdict read from ``data/verdicts.json``.
        new: the verdict recomputed from the data.
        rtol: relative tolerance on numeric details.

    Returns:
        One line per difference, naming the field and both values.
    """
    out = []
    for field in ("claim_id", "verdict", "profile", "inputs_sha256"):
        a, b = getattr(stored, field), getattr(new, field)
        if a != b:
            out.append(f"{stored.claim_id}.{field}: stored {a!r}, recomputed {b!r}")
    for field in ("ours", "reason"):  # the words, not the digits (those are the details' business)
        a, b = getattr(stored, field), getattr(new, field)
        if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
            out.append(f"{stored.claim_id}.{field}: the text differs beyond its numbers")
    for key in sorted(set(stored.details) | set(new.details)):
        if key not in stored.details or key not in new.details:
            where = "stored" if key in stored.details else "recomputed"
            out.append(f"{stored.claim_id}.details[{key!r}] only in the {where} verdict")
            continue
        a, b = stored.details[key], new.details[key]
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                out.append(f"{stored.claim_id}.details[{key!r}]: stored {a!r}, recomputed {b!r}")
        elif (n := _mc_datasets(key, stored.details)) is not None and \
                abs(float(a) - float(b)) <= _mc_tolerance(float(a), n) + DETAIL_ATOL:
            continue  # a share of n simulated datasets: one dataset whose statistic sits on a threshold may flip
        elif (r := _mc_quantile_rtol(key, stored.details)) is not None and _numbers_agree(float(a), float(b), r):
            continue  # a simulated critical value: a quantile of n datasets' statistics
        elif not _numbers_agree(float(a), float(b), rtol):
            out.append(f"{stored.claim_id}.details[{key!r}]: stored {a!r}, recomputed {b!r} "
                       f"(beyond rtol {rtol:g})")
    return out


def _printed(token: str) -> tuple[float, float]:
    """A number as printed in the prose (``"1,205,888"``, ``"−0.008"``, ``"2.1e-05"``): its value and one unit
    in its last printed place."""
    text = token.replace(",", "").replace("−", "-")
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(text), 10.0 ** (int(exponent or 0) - decimals)


def prose_number_drift(stored: Verdict, new: Verdict) -> list[str]:
    """Numbers printed in a verdict's prose that a recomputation moved by more than their printed rounding.

    :func:`verdict_differences` masks the prose's numbers (a value within its tolerance may print another
    last digit), so a number printed only in the prose, not in the details, would go stale unseen (P5's
    Chinchilla T did once). This reports each such number: where the words agree, the k-th number of each
    text is compared, and one that moved by more than one unit in the last place either side printed is
    listed, as is a whole number that changed at all (a count or a label such as INT3 may move by one; it is
    marked, since a value rounded whole may also flip by one). It is a report for whoever regenerates the verdicts (``verdicts --check`` prints it), not a
    failure: a Monte Carlo share printed in the prose may move by one simulated dataset on another machine,
    which its detail's tolerance allows. Where the words differ, ``verdict_differences`` already says so.

    Args:
        stored: the verdict read from ``data/verdicts.json``. new: the verdict recomputed from the data.

    Returns:
        One line per moved number: field, its place among the field's numbers, both values, and the words
        before it.
    """
    out = []
    for field in ("ours", "reason"):
        a, b = getattr(stored, field) or "", getattr(new, field) or ""
        if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
            continue
        for k, (ma, mb) in enumerate(zip(_NUMBER.finditer(a), _NUMBER.finditer(b)), start=1):
            (x, ux), (y, uy) = _printed(ma.group()), _printed(mb.group())
            whole = not re.search(r"[.eE]", ma.group() + mb.group())  # a count, a label, or a value rounded whole
            if abs(x - y) > max(ux, uy) * (1.0 + 1e-9) or (whole and x != y):
                before = " ".join(a[max(0, ma.start() - 60):ma.start()].split()[-6:])
                one = " (one unit: a rounding flip, or a count that moved)" if abs(x - y) <= max(ux, uy) else ""
                out.append(f"{stored.claim_id}.{field}: number {k} moved, stored {ma.group().rstrip(',')}, "
                           f"recomputed {mb.group().rstrip(',')} (after “{before}”){one}")
    return out


def merge_verdicts(stored: Mapping[str, Verdict], new: Mapping[str, Verdict]) -> dict[str, Verdict]:
    """``stored`` with each claim of ``new`` that differs from it (``verdict_differences``) replaced.

    A recomputed verdict that agrees with the stored one keeps the stored one, bytes and prose
    included, so rerunning the verdicts on another machine changes neither ``data/verdicts.json``
    nor the README's ledger.
    """
    merged = dict(stored)
    for claim_id, verdict in new.items():
        old = merged.get(claim_id)
        if old is None or verdict_differences(old, verdict):
            merged[claim_id] = verdict
    return merged


def _verdicts_path(path: str | os.PathLike[str] | None) -> Path:
    return Path(path) if path is not None else repo_root() / _VERDICTS_FILE


def load_verdicts(path: str | os.PathLike[str] | None = None) -> dict[str, Verdict]:
    """Read the verdict store.

    Args:
        path: the JSON file; ``data/verdicts.json`` under ``repo_root()`` by default.

    Returns:
        claim id -> verdict for every claim of ``CLAIMS``, in ledger order; a claim that is
        missing from the file (or a file that does not exist) gives a pending verdict.

    Raises:
        ValueError: if the file names a claim that is not in ``CLAIMS`` or holds a bad verdict.
    """
    file = _verdicts_path(path)
    stored = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
    unknown = sorted(set(stored) - set(CLAIMS))
    if unknown:
        raise ValueError(f"{file}: unknown claim ids {unknown}; the ledger has {list(CLAIMS)}")
    for claim_id, fields in stored.items():
        if set(fields) != _STORED_FIELDS:
            raise ValueError(
                f"{file}: {claim_id} must have the fields {sorted(_STORED_FIELDS)}; "
                f"got {sorted(fields)}"
            )
    return {
        claim_id: Verdict(claim_id=claim_id, **stored[claim_id])
        if claim_id in stored
        else pending_verdict(claim_id)
        for claim_id in CLAIMS
    }


def save_verdicts(
    verdicts: Mapping[str, Verdict], path: str | os.PathLike[str] | None = None
) -> None:
    """Write the verdict store atomically (temporary file, then ``os.replace``).

    Claims absent from ``verdicts`` are written as pending, so the file always lists the whole
    ledger. The JSON is indented with sorted keys, so diffs stay small.

    Args:
        verdicts: claim id -> verdict.
        path: the JSON file; ``data/verdicts.json`` under ``repo_root()`` by default.

    Raises:
        ValueError: if a key is not in ``CLAIMS`` or differs from its verdict's ``claim_id``.
    """
    unknown = sorted(set(verdicts) - set(CLAIMS))
    if unknown:
        raise ValueError(f"unknown claim ids {unknown}; the ledger has {list(CLAIMS)}")
    for claim_id, verdict in verdicts.items():
        if verdict.claim_id != claim_id:
            raise ValueError(f"verdicts[{claim_id!r}] is the verdict of {verdict.claim_id!r}")
    payload = {}
    for claim_id in CLAIMS:
        fields = dataclasses.asdict(verdicts.get(claim_id) or pending_verdict(claim_id))
        del fields["claim_id"]
        payload[claim_id] = fields
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    write_atomic(_verdicts_path(path), text + "\n")


def update_verdict(verdict: Verdict, path: str | os.PathLike[str] | None = None) -> None:
    """Replace one claim's verdict in the store, leaving the others as they are.

    Args:
        verdict: the new verdict.
        path: the JSON file; ``data/verdicts.json`` under ``repo_root()`` by default.

    Raises:
        ValueError: as ``load_verdicts`` does, if the stored file is bad.
    """
    verdicts = load_verdicts(path)
    verdicts[verdict.claim_id] = verdict
    save_verdicts(verdicts, path)


def store_verdicts(new: Mapping[str, Verdict], data_root: str | os.PathLike[str] | None = None) -> dict[str, Verdict]:
    """The one refresh path: merge recomputed verdicts into the store and the README's ledger.

    The store is ``<data_root>/verdicts.json``; claims that agree with their stored verdict keep it
    (``merge_verdicts``). The README's ledger is rewritten only when ``data_root`` is the
    repository's own ``data/`` folder: a copy of the data elsewhere never changes the README.
    Its callers are the command line's ``verdicts`` (which first refuses while a table the training claims read
    was made from other rows than the data freeze admits) and ``quik`` (Q1–Q4, which read no such table); the
    chapters' verdict functions compute and write nothing.

    Args:
        new: claim id -> recomputed verdict.
        data_root: a ``data/`` folder (default ``repo_root() / "data"``).

    Returns:
        The whole merged store, claim id -> verdict.

    Raises:
        ValueError: as ``load_verdicts`` does, if the stored file is bad.
    """
    own = (repo_root() / "data").resolve()
    root = Path(data_root).resolve() if data_root is not None else own
    path = root / "verdicts.json"
    merged = merge_verdicts(load_verdicts(path), new)
    save_verdicts(merged, path)
    if root == own:
        update_readme(repo_root() / "README.md", merged)
    return merged


def _cell(text: str) -> str:
    """One Markdown table cell: on one line, inline code as a code span, the characters that break
    tables escaped (``bitlaws.study.summary.markdown_text``)."""
    return markdown_text(text, table=True)


def ledger_markdown(verdicts: Mapping[str, Verdict]) -> str:
    """The claims ledger as one Markdown table, for the README and the book's introduction.

    Chapter links are relative paths (``notebooks/NN-topic.md``), which resolve both from the
    repository root (README.md) and from ``book/`` (whose ``notebooks`` links to
    ``../notebooks``).

    Args:
        verdicts: claim id -> verdict; a claim that is missing is shown as pending.

    Returns:
        The table, one row per claim in ledger order, ending with a newline.

    Raises:
        ValueError: if ``verdicts`` names a claim that is not in ``CLAIMS``.
    """
    unknown = sorted(set(verdicts) - set(CLAIMS))
    if unknown:
        raise ValueError(f"unknown claim ids {unknown}; the ledger has {list(CLAIMS)}")
    lines = [
        "| claim | what the paper says | ours | verdict | chapter | command |",
        "|---|---|---|---|---|---|",
    ]
    for claim_id, claim in CLAIMS.items():
        verdict = verdicts.get(claim_id) or pending_verdict(claim_id)
        chapter = claim["chapter"]
        command = claim["command"]
        lines.append(
            "| "
            + " | ".join(
                [
                    f"**{claim_id}** {_cell(claim['claim'] or '')}",
                    _cell(verdict.paper or claim["paper"] or ""),
                    _cell(verdict.ours) or "—",
                    f"**{verdict.verdict}**",
                    f"[{Path(chapter).name}]({chapter}.md)" if chapter else "—",
                    f"`{command}`" if command else "—",
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def update_readme(readme_path: str | os.PathLike[str], verdicts: Mapping[str, Verdict]) -> bool:
    """Rewrite the ledger between ``<!-- ledger:start -->`` and ``<!-- ledger:end -->``: the
    one-screen summary and the long text folded (``bitlaws.study.summary.readme_block``).

    Everything outside the markers is kept byte for byte; the file is rewritten atomically and
    only if the table changed.

    Args:
        readme_path: the README to update.
        verdicts: claim id -> verdict, as for ``ledger_markdown``.

    Returns:
        True if the file changed, False if it already held this table.

    Raises:
        ValueError: if the markers are missing, repeated or out of order.
    """
    path = Path(readme_path)
    text = path.read_bytes().decode("utf-8")
    if text.count(_LEDGER_START) != 1 or text.count(_LEDGER_END) != 1:
        raise ValueError(
            f"{path} must contain {_LEDGER_START} and {_LEDGER_END} exactly once each"
        )
    start = text.index(_LEDGER_START) + len(_LEDGER_START)
    end = text.index(_LEDGER_END)
    if end < start:
        raise ValueError(f"{path}: {_LEDGER_END} comes before {_LEDGER_START}")
    unknown = sorted(set(verdicts) - set(CLAIMS))
    if unknown:
        raise ValueError(f"unknown claim ids {unknown}; the ledger has {list(CLAIMS)}")
    full = {claim_id: verdicts.get(claim_id) or pending_verdict(claim_id) for claim_id in CLAIMS}
    new_text = text[:start] + "\n" + readme_block(full, CLAIMS) + text[end:]
    if new_text == text:
        return False
    write_atomic(path, new_text)
    return True

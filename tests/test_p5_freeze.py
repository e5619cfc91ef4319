"""P5's rule is frozen by the SHA-256 of its source text (never of a computed float): v5 was registered on
2026-12-02, before the seeded factorial's first run; v6 on 2026-12-04, before any of its rows was read; v7 on
2026-12-04, before any of its rows was read, after a referee's blind reading of v6 (the freeze extended to v7's
critical value, power and design simulations, T's widened interval and its source, and the pre-registration); v8 on
2026-12-04, before any of its rows was read, after a second referee's blind reading of v7 (the σ grid); v9 on
2026-12-04, after the factorial was read, the verdict's wording only (no decision changed); v10, v11 and v12 on
2026-12-06, changes to ``store.load_runs`` only (the data freeze; the refusal of an experiment name no file holds
and no sweep declares; the refusal of an empty collection and a message naming both filters), the rule and the
rows it reads unchanged; v13 on 2026-12-07, after the data, the power gate reading its power's Monte Carlo
lower end (``claims.gate_value``, frozen from v13), with every gated rule (no grade moved). The
freeze covers the rule, its statistics, its simulations, its data selection and evaluation version, the law
that generates its simulated data (``forms.qat_loss`` and what it calls), the power gate, the factorial's
training specification and the Chinchilla inputs it reads (registered constants). Any change fails here until
it is a new rule version: bump ``RULE_VERSIONS["P5"]``, add its ``RULE_HISTORY`` entry (when, and why), and
record the new digest. Earlier versions' digests are kept as a record (their source is no longer the code's)."""

from __future__ import annotations

import hashlib
import inspect

from bitlaws import train
from bitlaws.laws import forms
from bitlaws.study import claims, law_fits, power, store, sweep
from bitlaws.study.sweep import PROFILES

# version -> SHA-256 of that version's ``_frozen_text()`` (v5's text was the function list of its own test)
FROZEN = {"5": "29e5bfe945e2885f076698e191b0eaffd311f6793c79984a9a23d1c9aca997b5",
          "6": "a60e0fb79e18068dc8f995fb9d246b7f2b0d960f80774ffdc3322188aede667a",
          "7": "3fbbdf342b3177354d2a01657b516ce8af96bfaed63d9e8002c30faf9c8fc127",
          "8": "d16f850f394c8f05722a371cc40663912b21ab0765c5cf741f00688a7d9c7b35",
          "9": "06fd7ee2846d83fdaa0a78f1a6e4fe8645744936d56314b36c764dc542c74c37", "10": "bf66380f5b090f84a9dcdf566334977200b419b36e3a2394ac42ce61bf852351",
          "11": "cd388c636abc854d05a4e80daefc7d1b0473daf0c0e5b76103b8282901a547a6",
          "12": "28e2b6b17f6136f1dda485cc08a77b92720d6377e5aa9f793e5af59fee7474da",
          "13": "0bb17072f2a913bc7b8f9d4e389d6d82142cdfc3f0b268070d16bad31f32119f"}


def _factorial_spec() -> str:
    """The factorial's runs as the sweep trains them (model, training, precision, evaluations)."""
    return "\n".join(sorted(repr(s) for s in sweep.plan("cpu", "qat_factorial")))


def _frozen_text() -> str:
    funcs = (claims.rule_p5, claims.rule_p5_v6, claims.power_gate, claims.gate_value,
             power.p5_factorial_table, power._p5_main_effects, power._p5_v5_batch, power._p5_gauss_newton,
             power._p5_paper_fit, power._p5_pair_cells, power._p5_v6_batch, power.p5_v6_statistics,
             power._p5_v6_grades, power._p5_truths, power.p5_v6_power, power.p5_v6_sizes, power.p5_v6_calibrated,
             power._p5_v7_min_p, power._p5_v7_interaction, power._p5_v7_grades, power.p5_v7_critical,
             power.p5_v7_power, power.p5_v7_design, power.mc_interval,
             power.p5_v8_sigma_grid, power.p5_v8_design, power.p5_v8_reachable,
             law_fits.p5_rows, law_fits.load_p5_factorial, law_fits.verdict_p5, law_fits._p5_factorial_verdict,
             law_fits._p5_preregistered,
             forms.qat_loss, forms.n_eff, forms.precision_factor, forms.chinchilla_loss,
             sweep.qat_factorial, sweep._qat_spec, train.eval_windows, store.load_runs)
    plan = PROFILES["cpu"].power_design
    consts = repr({"P5_EVAL_VERSION": power.P5_EVAL_VERSION, "EVAL_VERSIONS": store.EVAL_VERSIONS,
                   "P5_T_INTERVAL": power.P5_T_INTERVAL, "P5_T_SOURCE": power.P5_T_SOURCE,
                   "P5_T_FREE": power.P5_T_FREE, "P5_T_INTERVAL_V7": power.P5_T_INTERVAL_V7,
                   "P5_T_SOURCE_V7": power.P5_T_SOURCE_V7, "P5_V7_FAMILY": power.P5_V7_FAMILY,
                   "P5_V7_GATE_REPRODUCED": power.P5_V7_GATE_REPRODUCED, "P5_V7_N_SIM": power.P5_V7_N_SIM,
                   "P5_V8_SIGMA_POINTS": power.P5_V8_SIGMA_POINTS, "P5_V8_LEAST": power.P5_V8_LEAST,
                   "P5_V8_MOST": power.P5_V8_MOST,
                   "P5_CHINCHILLA": power.P5_CHINCHILLA, "P5_KAPPA_GRID": power.P5_KAPPA_GRID,
                   "P5_PAIRS": power.P5_PAIRS, "P5_ABSURD_MARGIN": power.P5_ABSURD_MARGIN,
                   "P5_V6_TESTS": power.P5_V6_TESTS, "P5_BITS": power.P5_BITS, "P5_N_CHECK": power.P5_N_CHECK,
                   "P5_INTERACTION": power.P5_INTERACTION, "N_SIM": power.N_SIM,
                   "PAPER_CONSTANTS": forms.PAPER_CONSTANTS, "HIGH_PRECISION_BITS": forms.HIGH_PRECISION_BITS,
                   "P5_MIN_SEEDS": claims.P5_MIN_SEEDS, "P5_N_PAIRS": claims.P5_N_PAIRS, "ALPHA": claims.ALPHA,
                   "POWER_MIN": claims.POWER_MIN, "factorial_cell": plan.factorial_cell,
                   "factorial_bits": plan.factorial_bits, "factorial_seeds": plan.factorial_seeds,
                   "vocab_size": PROFILES["cpu"].model_vocab_size})
    return "\n".join([inspect.getsource(f) for f in funcs] + [consts, _factorial_spec()])


def test_p5_rule_source_is_frozen_at_its_version():
    version = claims.RULE_VERSIONS["P5"]
    assert version in FROZEN, f"P5 rule v{version} has no frozen digest; record it in FROZEN"
    assert [v for v, *_ in claims.RULE_HISTORY["P5"]][-len(FROZEN):] == list(FROZEN), \
        "every frozen P5 version needs its RULE_HISTORY entry"
    assert list(FROZEN)[-1] == version, "the current P5 version is the last one frozen"
    digest = hashlib.sha256(_frozen_text().encode("utf-8")).hexdigest()
    assert digest == FROZEN[version], (
        f"P5's rule, statistics, simulations, data selection, evaluation version, generating law, training "
        f"specification or registered inputs changed after rule v{version} was registered (digest {digest}): a "
        "change is a new version — bump RULE_VERSIONS['P5'], add a RULE_HISTORY entry saying when and why (after "
        "the data, if the factorial's rows were read), and add the digest to FROZEN")


def test_the_digest_sees_every_part_it_freezes():
    # one character changed in any frozen part changes the digest
    text = _frozen_text()
    for needle in ("P5_MIN_SEEDS", "def _p5_v6_batch", "def verdict_p5", "def p5_rows", "factorial_seeds",
                   "def qat_loss", "def power_gate", "def gate_value", "P5_EVAL_VERSION", "P5_T_INTERVAL", "def eval_windows",
                   "def load_p5_factorial", "qat_factorial", "lr=", "'spread'", "P5_CHINCHILLA",
                   "def p5_v7_critical", "def p5_v7_design", "P5_T_INTERVAL_V7", "P5_V7_GATE_REPRODUCED",
                   "def _p5_preregistered"):
        assert needle in text, needle
        i = text.index(needle)
        assert hashlib.sha256((text[:i] + "x" + text[i + 1:]).encode()).digest() != \
            hashlib.sha256(text.encode()).digest()


def test_the_factorial_is_read_at_the_pinned_evaluation_version():
    # rule v6 pins P5 to the spread-windows evaluation, whatever the profile's default reads
    assert power.P5_EVAL_VERSION == 2 and store.EVAL_VERSIONS[2] == "spread"
    assert "eval_version=P5_EVAL_VERSION" in inspect.getsource(law_fits.load_p5_factorial)
    assert "load_p5_factorial(profile)" in inspect.getsource(law_fits.law_verdicts)
    # every factorial run is measured at that version
    assert all(2 in {e.version for e in s.evals} for s in sweep.plan("cpu", "qat_factorial"))


def test_the_data_freeze_cuts_none_of_the_rows_qat_factorial_reads():
    """store.load_runs gained the data freeze after this rule was registered (the version bump of 2026-12-06):
    every qat_factorial row predates it, so the rule reads what it read before."""
    from bitlaws.study.store import load_runs

    read = load_runs("cpu", "qat_factorial", eval_version="all")
    every = load_runs("cpu", "qat_factorial", eval_version="all", until="all")
    assert len(read) == len(every) > 0 and read["obs_id"].tolist() == every["obs_id"].tolist()

"""P5's rule v5 was registered on 2026-12-02, before the seeded factorial's first run: its rule, its
statistics, its simulations, its data selection and its constants are frozen by the SHA-256 of their
source text (never of a computed float). Any change fails here until it is a new rule version: bump
``RULE_VERSIONS["P5"]``, add its ``RULE_HISTORY`` entry (when, and why), and record the new digest."""

from __future__ import annotations

import hashlib
import inspect

from bitlaws.study import claims, law_fits, power
from bitlaws.study.sweep import PROFILES

# version -> SHA-256 of ``_frozen_text()``
FROZEN = {"5": "29e5bfe945e2885f076698e191b0eaffd311f6793c79984a9a23d1c9aca997b5"}


def _frozen_text() -> str:
    funcs = (claims.rule_p5, power.p5_factorial_table, power._p5_main_effects, power._p5_v5_batch,
             power.p5_factorial_statistics, power._p5_grades, power._p5_truths, power.p5_factorial_power,
             power.p5_factorial_sizes, power.p5_design, law_fits.p5_rows, law_fits.verdict_p5,
             law_fits._p5_factorial_verdict)
    plan = PROFILES["cpu"].power_design
    consts = repr({"P5_N_NULL": power.P5_N_NULL, "P5_BITS": power.P5_BITS, "P5_N_CHECK": power.P5_N_CHECK,
                   "P5_RHOS": power.P5_RHOS, "P5_INTERACTION": power.P5_INTERACTION,
                   "P5_MIN_SEEDS": claims.P5_MIN_SEEDS, "ALPHA": claims.ALPHA, "POWER_MIN": claims.POWER_MIN,
                   "factorial_cell": plan.factorial_cell, "factorial_bits": plan.factorial_bits,
                   "factorial_seeds": plan.factorial_seeds})
    return "\n".join([inspect.getsource(f) for f in funcs] + [consts])


def test_p5_rule_source_is_frozen_at_its_version():
    version = claims.RULE_VERSIONS["P5"]
    assert version in FROZEN, f"P5 rule v{version} has no frozen digest; record it in FROZEN"
    assert [v for v, *_ in claims.RULE_HISTORY["P5"]][-len(FROZEN):] == list(FROZEN), \
        "every frozen P5 version needs its RULE_HISTORY entry"
    digest = hashlib.sha256(_frozen_text().encode("utf-8")).hexdigest()
    assert digest == FROZEN[version], (
        f"P5's rule, statistics, simulations, data selection or constants changed after rule v{version} was "
        f"registered (digest {digest}): a change is a new version — bump RULE_VERSIONS['P5'], add a RULE_HISTORY "
        "entry saying when and why (after the data, if the factorial's rows exist), and add the digest to FROZEN")


def test_the_digest_sees_every_part_it_freezes():
    # one character changed in any frozen part changes the digest
    text = _frozen_text()
    for needle in ("P5_MIN_SEEDS", "def _p5_v5_batch", "def verdict_p5", "def p5_rows", "factorial_seeds"):
        assert needle in text
        i = text.index(needle)
        assert hashlib.sha256((text[:i] + "x" + text[i + 1:]).encode()).digest() != \
            hashlib.sha256(text.encode()).digest()

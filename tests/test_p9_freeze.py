"""P9's matched rule is frozen by the SHA-256 of its source text (never of a computed float): version 3 registered on
2026-12-05 after 37 of the matched grid's 50 runs were committed and before any comparison of their δ was read;
version 4 the same day after a blind referee's reading of v3, still before any comparison was read; version 5 the
same day after a second blind referee's reading of v4, likewise before any comparison was read; version 6 the
same day after the complete grid was read and graded, a change to the verdict's words only; versions 7, 8 and 9 on
2026-12-06, changes to ``store.load_runs`` only (the data freeze; the refusal of an experiment name no file holds and
no sweep declares; the refusal of an empty collection and a message naming both filters), the rule and the rows it
reads unchanged.
The freeze covers the rule, its statistic, its data selection and evaluation version, its simulation, the noise
model and detection floor it reads, the law of its simulated data, the verdict that reads it and the grid's
training specification. Any change fails here until it is a new rule version: bump ``RULE_VERSIONS["P9"]``, add
its ``RULE_HISTORY`` entry (when, and why: after the data if the grid was read), and record the new digest."""

from __future__ import annotations

import hashlib
import inspect

from bitlaws import train
from bitlaws.laws import forms
from bitlaws.study import claims, law_fits, noise, p9_matched, store, sweep

# version -> SHA-256 of that version's ``_frozen_text()``
FROZEN = {"9": "2e25e888fe4879aef32b89b4a57ca2b57affe817e82ef5e52935e470a798c7e7",
          "8": "41341e14f1c3fed6bdf5c750fc9b0e87611acc1f4e5fd626440d935bb67fb8a9", "7": "3692b4e14a749e8dbac57e3613bf41cceffa471a242d70f43971735213668393", "6": "18183e0b4ed0ae7226fd340d7b3769d24c8d73e32412a4b13c49bfe749c3dd01", "5": "4d8928ccab0956ac14a483480cf38b9f4478a23173c5709235facb87689d030a", "4": "d9f4126950060203b78d692a85941444159d10c0bb62d7f17b4128b7cbd7402e", "3": "92287fb0f1c6e746da4e704215019b2912aa05e87e735c4543b7ee9b003ceacf"}


def _frozen_text() -> str:
    funcs = (claims.rule_p9_matched, law_fits.verdict_p9, law_fits._p9_matched_verdict, noise.noise_model,
             noise.t_quantile, noise._delta_noise, noise.NoiseModel, forms.delta_ptq, store.load_runs,
             sweep.qat_matched, sweep._qat_spec, train.eval_windows)
    spec = "\n".join(sorted(repr(s) for s in sweep.plan("cpu", "qat_matched")))
    consts = repr({"PAPER_CONSTANTS": forms.PAPER_CONSTANTS, "EVAL_VERSIONS": store.EVAL_VERSIONS,
                   "HIGH_PRECISION_BITS": forms.HIGH_PRECISION_BITS})
    return "\n".join([inspect.getsource(p9_matched)] + [inspect.getsource(f) for f in funcs] + [consts, spec])


def test_p9_rule_source_is_frozen_at_its_version():
    version = claims.RULE_VERSIONS["P9"]
    assert version in FROZEN, f"P9 rule v{version} has no frozen digest; record it in FROZEN"
    assert [v for v, *_ in claims.RULE_HISTORY["P9"]][-len(FROZEN):] == sorted(FROZEN, key=int)
    assert max(FROZEN, key=int) == version, "the current P9 version is the last one frozen"
    digest = hashlib.sha256(_frozen_text().encode("utf-8")).hexdigest()
    assert digest == FROZEN[version], (
        f"P9's rule v{version}, its statistic, simulation, data selection, noise model, verdict or the matched "
        f"grid's specification changed after it was registered (digest {digest}): a change is a new version — bump "
        "RULE_VERSIONS['P9'], add a RULE_HISTORY entry saying when and why, and add the digest to FROZEN")


def test_the_digest_sees_every_part_it_freezes():
    text = _frozen_text()
    for needle in ("P9_C_W_RANGE = ", "P9_GRID = ", "P9_EVAL_VERSION = ", "P9_SCENARIOS", "P9_GRADED_BITS = ",
                   "def c_w_max", "P9_C_W_SENSITIVITY", "def matched_complete", "twin below floor", "def rule_p9_matched",
                   "def _p9_matched_verdict", "def verdict_p9", "def noise_model", "def qat_matched",
                   "def delta_ptq", "'gamma_N'", "experiment='qat_matched'", "def eval_windows"):
        assert needle in text, needle
        i = text.index(needle)
        assert hashlib.sha256((text[:i] + "x" + text[i + 1:]).encode()).digest() != \
            hashlib.sha256(text.encode()).digest()


def test_the_matched_grid_is_read_at_its_pinned_evaluation_version():
    assert p9_matched.P9_EVAL_VERSION == 2 and store.EVAL_VERSIONS[2] == "spread"
    assert "eval_version=P9_EVAL_VERSION" in inspect.getsource(p9_matched.load_matched)
    assert all(2 in {e.version for e in s.evals} for s in sweep.plan("cpu", "qat_matched"))


def test_the_data_freeze_cuts_none_of_the_rows_qat_matched_reads():
    """store.load_runs gained the data freeze after this rule was registered (the version bump of 2026-12-06):
    every qat_matched row predates it, so the rule reads what it read before."""
    from bitlaws.study.store import load_runs

    read = load_runs("cpu", "qat_matched", eval_version="all")
    every = load_runs("cpu", "qat_matched", eval_version="all", until="all")
    assert len(read) == len(every) > 0 and read["obs_id"].tolist() == every["obs_id"].tolist()

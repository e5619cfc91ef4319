"""The stored verdicts survive a machine whose floating-point results differ in the last bits.

A reader's laptop computes every fit again with another CPU and BLAS build, so its numbers differ
from the committing machine's around the 8th significant digit. These tests simulate that
machine: every float that the law fitters, the compute-optimal analysis and the law forms
return is perturbed by a relative 1e-12 (which L-BFGS-B amplifies, as a real machine does), and
BLAS / torch run with 1 and with 2 threads. The identities, grades, the README's ledger and the
notebooks' check (``verdict_differences``) must not change.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bitlaws.study import ledger
from bitlaws.study.summary import readme_block
from bitlaws.laws import fit as lf
from bitlaws.laws import forms, optimal
from bitlaws.study.claims import (
    CLAIMS,
    DETAIL_RTOL,
    RULE_VERSIONS,
    Verdict,
    inputs_identity,
    ledger_markdown,
    load_verdicts,
    merge_verdicts,
    store_verdicts,
    verdict_differences,
)

REPO = Path(__file__).resolve().parents[1]
EPS = 1e-12
# Functions of the laws package that return what was read (the rows as arrays, bit widths, names),
# not what was computed: a machine does not change those.
READ_NOT_COMPUTED = {"prepare", "_subset", "_json_clean", "_param", "table1_stage", "hoffmann_grid"}


class _Perturber:
    """Multiplies every float in a returned value by (1 ± EPS), signs from a seeded generator."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def __call__(self, x):
        if isinstance(x, (bool, np.bool_, int, np.integer, str)) or x is None:
            return x
        if isinstance(x, float):
            self.calls += 1
            return float(x * (1.0 + EPS * self.rng.choice((-1.0, 1.0))))
        if isinstance(x, np.floating):
            self.calls += 1
            return type(x)(x * (1.0 + EPS * self.rng.choice((-1.0, 1.0))))
        if isinstance(x, np.ndarray):
            if x.dtype.kind != "f":
                return x
            self.calls += 1
            return x * (1.0 + EPS * self.rng.choice((-1.0, 1.0), size=x.shape))
        if isinstance(x, dict) and hasattr(x, "x") and hasattr(x, "fun"):  # scipy's OptimizeResult
            x.x, x.fun = self(x.x), self(x.fun)
            return x
        if isinstance(x, dict):
            return {k: self(v) for k, v in x.items()}
        if isinstance(x, tuple) and not hasattr(x, "_fields"):
            return tuple(self(v) for v in x)
        if isinstance(x, list):
            return [self(v) for v in x]
        return x


def _wrap(fn, perturb):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return perturb(fn(*args, **kwargs))

    return wrapped


@pytest.fixture
def other_machine(monkeypatch):
    """Perturb the outputs of scipy's optimiser and of every function of the laws package."""
    perturb = _Perturber()
    monkeypatch.setattr(lf, "minimize", _wrap(lf.minimize, perturb))
    for module in (lf, optimal, forms):
        for name, obj in list(vars(module).items()):
            if inspect.isfunction(obj) and obj.__module__ == module.__name__ and name not in READ_NOT_COMPUTED:
                monkeypatch.setattr(module, name, _wrap(obj, perturb))
    yield perturb


def test_stored_verdicts_are_what_the_committed_data_give():
    assert ledger.check_verdicts("cpu") == []


def test_perturbed_arithmetic_changes_no_identity_grade_or_ledger(other_machine):
    stored = load_verdicts()
    new = ledger.compute_verdicts("cpu", refit=False)
    assert other_machine.calls > 1000  # the perturbation reached the fits and the analysis
    # The numbers did move (else this test would prove nothing) ...
    moved = [
        (c, k) for c, v in new.items() for k, x in v.details.items()
        if isinstance(x, float) and x != stored[c].details.get(k)
    ]
    assert len(moved) >= 10, moved
    # ... but no identity, grade or detail beyond tolerance did, and the ledger is unchanged.
    for claim_id, verdict in new.items():
        assert verdict_differences(stored[claim_id], verdict) == [], claim_id
    assert ledger_markdown(merge_verdicts(stored, new)) == ledger_markdown(stored)


def test_readme_ledger_is_the_stored_one():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text.split("<!-- ledger:start -->\n", 1)[1].split("<!-- ledger:end -->", 1)[0]
    assert table == readme_block(load_verdicts(), CLAIMS)


@pytest.mark.slow
def test_identities_do_not_depend_on_blas_or_torch_threads():
    outs = []
    for threads in ("1", "2"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
               "MKL_NUM_THREADS": threads}
        proc = subprocess.run([sys.executable, "-c", (
            "import sys, torch; torch.set_num_threads(int(sys.argv[1])); "
            "from bitlaws.cli import main; sys.exit(main(['verdicts', '--check', '--json']))"), threads],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    stored = load_verdicts()
    assert {c: v["inputs_sha256"] for c, v in outs[0].items()} == {c: stored[c].inputs_sha256 for c in outs[0]}


# --- the identity and the comparison themselves ----------------------------------------------------

def _rows(loss: float = 1.5) -> pd.DataFrame:
    return pd.DataFrame({"obs_id": ["b", "a"], "loss_val": [loss, 2.0], "n_params": [10, 20]})


def test_identity_hashes_what_was_read_not_what_was_computed():
    rec = {"status": "ok", "input_sha256": "f" * 64, "params": {"gamma_w": 2.67}}
    refit = {**rec, "params": {"gamma_w": 2.67 * (1 + 1e-9)}}  # the same rows, refitted elsewhere
    base = inputs_identity("P3", "cpu", frames={"rows": _rows()}, records={"neff_w": rec})
    assert inputs_identity("P3", "cpu", frames={"rows": _rows()}, records={"neff_w": refit}) == base
    # row order does not matter (sorted by obs_id); a changed value, profile or record input does
    assert inputs_identity("P3", "cpu", frames={"rows": _rows().iloc[::-1]}, records={"neff_w": rec}) == base
    assert inputs_identity("P3", "cpu", frames={"rows": _rows(1.25)}, records={"neff_w": rec}) != base
    assert inputs_identity("P3", "smoke", frames={"rows": _rows()}, records={"neff_w": rec}) != base
    other = {**rec, "input_sha256": "e" * 64}
    assert inputs_identity("P3", "cpu", frames={"rows": _rows()}, records={"neff_w": other}) != base
    assert inputs_identity("P4", "cpu", frames={"rows": _rows()}, records={"neff_w": rec}) != base
    with pytest.raises(ValueError, match="claim_id"):
        inputs_identity("P99", "cpu")


def test_identity_changes_with_the_rule_version(monkeypatch):
    before = inputs_identity("P6", "cpu", frames={"rows": _rows()})
    monkeypatch.setitem(RULE_VERSIONS, "P6", RULE_VERSIONS["P6"] + "+1")
    assert inputs_identity("P6", "cpu", frames={"rows": _rows()}) != before


def _verdict(**changes) -> Verdict:
    fields = dict(claim_id="P3", verdict="partly", paper="p", ours="γ_w = 2.00", reason="r", profile="cpu",
                  inputs_sha256="a" * 64, details={"gamma_w": 2.0, "note": "x", "zero": 0.0})
    fields.update(changes)
    return Verdict(**fields)


def test_verdict_differences_tolerates_last_bits_only():
    v = _verdict()
    close = _verdict(details={"gamma_w": 2.0 * (1 + DETAIL_RTOL / 2), "note": "x", "zero": 1e-15},
                     ours="γ_w = 2.01")  # prose is not compared
    assert verdict_differences(v, close) == []
    far = _verdict(details={"gamma_w": 2.0 * (1 + 3 * DETAIL_RTOL), "note": "x", "zero": 0.0})
    assert any("gamma_w" in d for d in verdict_differences(v, far))
    assert any("verdict" in d for d in verdict_differences(v, _verdict(verdict="reproduced")))
    assert any("inputs_sha256" in d for d in verdict_differences(v, _verdict(inputs_sha256="b" * 64)))
    assert any("note" in d for d in verdict_differences(v, _verdict(details={"gamma_w": 2.0, "note": "y",
                                                                                 "zero": 0.0})))
    assert any("only in" in d for d in verdict_differences(v, _verdict(details={"gamma_w": 2.0, "note": "x"})))
    # a Monte Carlo rate of n = 200 datasets may move within two MC standard errors (0.93: 0.036), not by 0.05
    mc = _verdict(details={"gamma_w": 2.0, "note": "x", "zero": 0.0, "power_partly": 0.93, "n_sim": 200.0})
    one = _verdict(details={**mc.details, "power_partly": 0.96})
    two = _verdict(details={**mc.details, "power_partly": 0.98})
    assert verdict_differences(mc, one) == [] and any("power_partly" in d for d in verdict_differences(mc, two))
    no_n = _verdict(details={"gamma_w": 2.0, "note": "x", "zero": 0.0, "power_partly": 0.93})
    assert any("power_partly" in d for d in verdict_differences(no_n, _verdict(details={**no_n.details,
                                                                                        "power_partly": 0.935})))
    # P5's factorial rates (per ρ, and their interval ends) are shares of factorial_n_sim / factorial_size_n_sim
    # datasets: they may move by two MC standard errors (0.29 of 200: 0.064), not by 0.07
    fac = _verdict(details={"gamma_w": 2.0, "note": "x", "zero": 0.0, "factorial_n_sim": 200.0,
                            "factorial_size_n_sim": 1000.0, "factorial_power_interaction_rho0.7": 0.29,
                            "factorial_size_multiply_lo": 0.032, "factorial_sigma": 0.0162})
    assert verdict_differences(fac, _verdict(details={**fac.details, "factorial_power_interaction_rho0.7": 0.35,
                                                      "factorial_size_multiply_lo": 0.042})) == []
    assert any("rho0.7" in d for d in verdict_differences(fac, _verdict(
        details={**fac.details, "factorial_power_interaction_rho0.7": 0.36})))
    assert any("multiply_lo" in d for d in verdict_differences(fac, _verdict(
        details={**fac.details, "factorial_size_multiply_lo": 0.05})))
    # P5 v7's simulated critical value, the 5 % quantile of 1000 datasets' least p: known to ±28 % of itself
    crit = _verdict(details={**fac.details, "factorial_crit": 0.0226, "factorial_crit__sigma_hi": 0.0215})
    assert verdict_differences(crit, _verdict(details={**crit.details, "factorial_crit": 0.0230,
                                                       "factorial_crit__sigma_hi": 0.0218})) == []
    assert any("factorial_crit" in d for d in verdict_differences(crit, _verdict(
        details={**crit.details, "factorial_crit": 0.0330})))
    assert any("factorial_sigma" in d for d in verdict_differences(fac, _verdict(  # not a rate: rtol only
        details={**fac.details, "factorial_sigma": 0.0163})))
    v4 = _verdict(details={"gamma_w": 2.0, "note": "x", "zero": 0.0, "v4_n_sim": 200.0, "v4_power_partly": 0.93})
    assert verdict_differences(v4, _verdict(details={**v4.details, "v4_power_partly": 0.95})) == []
    assert any("v4_power_partly" in d for d in verdict_differences(v4, _verdict(details={**v4.details,
                                                                                         "v4_power_partly": 0.98})))
    # prose: other digits are no difference (they come from the details), other words are
    assert verdict_differences(v, _verdict(ours="γ_w = 1.99", reason="r")) == []
    assert any("ours" in d for d in verdict_differences(v, _verdict(ours="γ_a = 2.00")))


def test_merge_keeps_the_stored_verdict_when_it_agrees():
    stored = {"P3": _verdict()}
    agreeing = _verdict(details={"gamma_w": 2.0 * (1 + 1e-9), "note": "x", "zero": 0.0}, ours="γ_w = 2.01")
    assert merge_verdicts(stored, {"P3": agreeing})["P3"] is stored["P3"]
    regraded = _verdict(verdict="reproduced")
    assert merge_verdicts(stored, {"P3": regraded})["P3"] is regraded


def test_store_verdicts_rewrites_the_readme_only_for_the_repositorys_data(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "bitlaws"\n', encoding="utf-8")
    (tmp_path / "data").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- ledger:start -->\n<!-- ledger:end -->\n", encoding="utf-8")
    monkeypatch.setenv("BITLAWS_ROOT", str(tmp_path))
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    store_verdicts({"P3": _verdict()}, elsewhere)
    assert load_verdicts(elsewhere / "verdicts.json")["P3"] == _verdict()
    assert readme.read_text(encoding="utf-8") == "x\n<!-- ledger:start -->\n<!-- ledger:end -->\n"
    store_verdicts({"P3": _verdict()}, tmp_path / "data")
    assert "**partly**" in readme.read_text(encoding="utf-8")


def test_prose_number_drift_reports_a_number_that_moved_beyond_its_rounding():
    from bitlaws.study.claims import prose_number_drift

    stored = _verdict(ours="T = 0.152 over 1,205,888 runs; power 45% [40, 50]")
    assert prose_number_drift(stored, stored) == []
    # one unit in the last decimal place is a rounding flip (another machine), not a move
    assert prose_number_drift(stored, _verdict(ours="T = 0.153 over 1,205,888 runs; power 45% [40, 50]")) == []
    # a whole number that changed at all is listed (a count, or a label such as INT3), marked when by one unit
    assert prose_number_drift(stored, _verdict(ours="T = 0.152 over 1,205,889 runs; power 45% [40, 50]")) == [
        "P3.ours: number 2 moved, stored 1,205,888, recomputed 1,205,889 (after “T = 0.152 over”) (one unit: a "
        "rounding flip, or a count that moved)"]
    assert prose_number_drift(_verdict(ours="at INT3, 1/25"), _verdict(ours="at INT4, 1/25"))[0].startswith(
        "P3.ours: number 1 moved, stored 3, recomputed 4")
    moved = prose_number_drift(stored, _verdict(ours="T = 0.157 over 1,205,888 runs; power 45% [40, 50]"))
    assert moved == ["P3.ours: number 1 moved, stored 0.152, recomputed 0.157 (after “T =”)"]
    assert prose_number_drift(stored, _verdict(ours="T − 0.157 over runs")) == []  # words differ: not its business
    assert prose_number_drift(_verdict(ours="−0.008 and 2.1e-05"), _verdict(ours="-0.010 and 2.3e-05")) == [
        "P3.ours: number 1 moved, stored −0.008, recomputed -0.010 (after “”)",
        "P3.ours: number 2 moved, stored 2.1e-05, recomputed 2.3e-05 (after “−0.008 and”)"]

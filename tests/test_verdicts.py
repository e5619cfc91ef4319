"""Tests of the claims ledger and the verdict store (bitlaws.study.claims)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bitlaws.study import claims as vd
from bitlaws.study.summary import readme_block
from bitlaws.study.claims import (
    CLAIMS,
    VERDICTS,
    Verdict,
    ledger_markdown,
    load_verdicts,
    pending_verdict,
    repo_root,
    save_verdicts,
    update_readme,
    update_verdict,
)

REPO = Path(__file__).resolve().parents[1]


def _verdict(claim_id: str = "P1", **overrides) -> Verdict:
    fields = dict(
        claim_id=claim_id,
        verdict="partly",
        paper="γ_D = 0.51",
        ours="γ_D = 0.42 ± 0.05",
        reason="the trend holds; the exponent is smaller at our scale",
        profile="cpu",
        inputs_sha256="ab" * 32,
        details={"gamma_d": 0.42, "n_cells": 20, "note": "RTN only"},
    )
    fields.update(overrides)
    return Verdict(**fields)


def _ledger_rows(table: str) -> list[str]:
    return [line for line in table.splitlines() if line.startswith("| **")]


def _unescaped_pipes(row: str) -> int:
    return row.count("|") - row.count("\\|")


def test_claims_ledger_lists_the_fourteen_claims_in_order():
    assert list(CLAIMS) == [f"P{i}" for i in range(1, 11)] + [f"Q{i}" for i in range(1, 5)]
    for claim in CLAIMS.values():
        assert set(claim) == {"claim", "paper", "chapter", "command"}
        assert claim["claim"] and claim["paper"]
    assert CLAIMS["P1"]["chapter"] == CLAIMS["P2"]["chapter"] == "notebooks/01-ptq-degradation"
    assert CLAIMS["P1"]["command"] == "make reproduce PROFILE=cpu"


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "verdicts.json"
    verdicts = load_verdicts(path)  # no file yet: every claim pending
    assert all(v.verdict == "pending" for v in verdicts.values())
    verdicts["P1"] = _verdict("P1")
    verdicts["Q2"] = _verdict("Q2", verdict="not reproduced", details={"ppl": np.float64(7.5)})
    save_verdicts(verdicts, path)
    loaded = load_verdicts(path)
    assert loaded == verdicts
    assert list(loaded) == list(CLAIMS)
    assert loaded["Q2"].details == {"ppl": 7.5}
    assert type(loaded["Q2"].details["ppl"]) is float


def test_saved_json_is_sorted_indented_and_complete(tmp_path):
    path = tmp_path / "verdicts.json"
    save_verdicts({"P3": _verdict("P3")}, path)
    text = path.read_text(encoding="utf-8")
    stored = json.loads(text)
    assert set(stored) == set(CLAIMS)  # absent claims are written as pending
    assert stored["P4"]["verdict"] == "pending"
    assert text == json.dumps(stored, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_atomic_save_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "verdicts.json"
    save_verdicts({"P1": _verdict()}, path)
    save_verdicts({"P1": _verdict(verdict="reproduced")}, path)
    assert sorted(os.listdir(tmp_path)) == ["verdicts.json"]


def test_failed_save_keeps_the_old_file_and_no_temporary_files(tmp_path, monkeypatch):
    path = tmp_path / "verdicts.json"
    save_verdicts({"P1": _verdict()}, path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(vd.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_verdicts({"P1": _verdict(verdict="reproduced")}, path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["verdicts.json"]


def test_update_verdict_replaces_one_claim_only(tmp_path):
    path = tmp_path / "verdicts.json"
    save_verdicts({"P1": _verdict("P1"), "P2": _verdict("P2")}, path)
    update_verdict(_verdict("P2", verdict="reproduced", ours="D_crit ≈ 3M bytes"), path)
    loaded = load_verdicts(path)
    assert loaded["P1"] == _verdict("P1")
    assert loaded["P2"].verdict == "reproduced"
    assert loaded["P2"].ours == "D_crit ≈ 3M bytes"


def test_unknown_claim_id_raises(tmp_path):
    with pytest.raises(ValueError, match="claim_id must be one of"):
        _verdict("P11")
    with pytest.raises(ValueError, match="claim_id must be one of"):
        pending_verdict("Q5")
    with pytest.raises(ValueError, match="unknown claim ids"):
        save_verdicts({"P99": _verdict("P1")}, tmp_path / "v.json")
    with pytest.raises(ValueError, match="is the verdict of"):
        save_verdicts({"P2": _verdict("P1")}, tmp_path / "v.json")
    with pytest.raises(ValueError, match="unknown claim ids"):
        ledger_markdown({"P0": _verdict("P1")})
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps({"P0": {}}), encoding="utf-8")
    with pytest.raises(ValueError, match="unknown claim ids"):
        load_verdicts(bad_file)
    assert not (tmp_path / "v.json").exists()


def test_unknown_verdict_string_raises_and_names_the_allowed_set():
    with pytest.raises(ValueError) as excinfo:
        _verdict(verdict="yes")
    for allowed in VERDICTS:
        assert repr(allowed) in str(excinfo.value)


def test_bad_details_and_bad_stored_fields_raise(tmp_path):
    with pytest.raises(ValueError, match="finite"):
        _verdict(details={"gamma": float("nan")})
    with pytest.raises(ValueError, match="string or a real number"):
        _verdict(details={"flag": True})
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps({"P1": {"verdict": "pending"}}), encoding="utf-8")
    with pytest.raises(ValueError, match="must have the fields"):
        load_verdicts(bad_file)


def test_verdict_details_are_copied():
    details = {"gamma": 1.0}
    verdict = _verdict(details=details)
    details["gamma"] = 2.0
    assert verdict.details == {"gamma": 1.0}


def test_ledger_markdown_has_one_row_per_claim():
    verdicts = {"P1": _verdict("P1", ours="a | b with * and ~ and $x$")}
    table = ledger_markdown(verdicts)
    lines = table.splitlines()
    assert lines[0] == "| claim | what the paper says | ours | verdict | chapter | command |"
    rows = _ledger_rows(table)
    assert len(rows) == len(CLAIMS) == len(lines) - 2
    for claim_id, row in zip(CLAIMS, rows):
        assert row.startswith(f"| **{claim_id}** ")
        assert _unescaped_pipes(row) == 7  # six cells, whatever the text holds
    assert "a \\| b with \\* and \\~ and \\$x\\$" in rows[0]
    assert "**partly**" in rows[0]
    assert "[01-ptq-degradation](notebooks/01-ptq-degradation.md)" in rows[0]
    assert "`make reproduce PROFILE=cpu`" in rows[0]
    assert "**pending**" in rows[2]


def test_update_readme_rewrites_only_between_markers(tmp_path):
    head = b"# bitlaws\r\n\r\nSome text with \xce\xb4_PTQ.\n\n<!-- ledger:start -->"
    tail = b"<!-- ledger:end -->\n\nMore text.\r\n"
    readme = tmp_path / "README.md"
    readme.write_bytes(head + b"\nold table\n" + tail)
    verdicts = {"P1": _verdict()}

    assert update_readme(readme, verdicts) is True
    data = readme.read_bytes()
    assert data.startswith(head)
    assert data.endswith(tail)
    assert data[len(head) : len(data) - len(tail)].decode("utf-8") == "\n" + readme_block(
        {c: verdicts.get(c) or pending_verdict(c) for c in CLAIMS}, CLAIMS)

    assert update_readme(readme, verdicts) is False
    assert readme.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["README.md"]


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all\n",
        "<!-- ledger:start -->\nonly the start\n",
        "<!-- ledger:end -->\n<!-- ledger:start -->\n",
        "<!-- ledger:start --><!-- ledger:start --><!-- ledger:end -->\n",
    ],
)
def test_update_readme_needs_one_pair_of_markers(tmp_path, text):
    readme = tmp_path / "README.md"
    readme.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        update_readme(readme, {})
    assert readme.read_text(encoding="utf-8") == text


def test_repo_root_from_a_nested_cwd(monkeypatch):
    monkeypatch.delenv("BITLAWS_ROOT", raising=False)
    monkeypatch.chdir(REPO / "tests")
    assert repo_root() == REPO


def test_repo_root_honours_bitlaws_root(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "bitlaws"\n', encoding="utf-8")
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("BITLAWS_ROOT", str(tmp_path))
    monkeypatch.chdir(REPO / "tests")
    assert repo_root() == tmp_path.resolve()
    save_verdicts({"P1": _verdict()})  # the default path follows the root
    assert load_verdicts(tmp_path / "data" / "verdicts.json")["P1"] == _verdict()
    assert load_verdicts()["P1"] == _verdict()


def test_repo_root_rejects_a_bitlaws_root_that_is_not_a_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("BITLAWS_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="BITLAWS_ROOT"):
        repo_root()


def test_committed_store_covers_the_ledger():
    verdicts = load_verdicts(REPO / "data" / "verdicts.json")
    assert list(verdicts) == list(CLAIMS)
    for claim_id, verdict in verdicts.items():
        assert verdict.verdict in VERDICTS
        if verdict.verdict != "pending":
            assert verdict.ours and verdict.reason and verdict.profile and verdict.inputs_sha256, (
                f"{claim_id} has a verdict without its evidence"
            )


def test_repo_root_ignores_other_projects(tmp_path, monkeypatch):
    """A folder with some other project's pyproject.toml and a data/ folder is not our checkout."""
    other = tmp_path / "other"
    (other / "data").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "someone-else"\n', encoding="utf-8")
    monkeypatch.delenv("BITLAWS_ROOT", raising=False)
    monkeypatch.chdir(other)
    assert repo_root() != other


def test_every_rule_has_its_source_and_its_history():
    from bitlaws.study.claims import RULE_HISTORY, RULE_SOURCES, RULE_VERSIONS, rule_text

    assert set(RULE_SOURCES) == set(RULE_HISTORY) == set(RULE_VERSIONS) == set(CLAIMS)
    for claim_id in CLAIMS:
        versions = [v for v, _, _ in RULE_HISTORY[claim_id]]
        assert versions == [str(i) for i in range(1, len(versions) + 1)], claim_id  # no gap, in order
        assert versions[-1] == RULE_VERSIONS[claim_id], claim_id
        assert len(rule_text(claim_id)) > 40, claim_id  # the grading function states its rule
    with pytest.raises(ValueError, match="claim_id"):
        rule_text("P99")


def test_changed_rules_say_so_in_their_docstrings():
    from bitlaws.study.claims import RULE_VERSIONS, rule_text

    for claim_id, version in RULE_VERSIONS.items():
        if int(version) > 1:
            assert f"Version {version}" in rule_text(claim_id) or f"version {version}" in rule_text(claim_id), claim_id

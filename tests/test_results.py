"""The run store: atomic appends keyed by obs_id, stable hashes, provenance."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from bitlaws.study.store import COLUMNS, append_rows, frame_sha256, provenance, read_rows, stable_hash


def test_append_rows_skips_existing_and_repeated_keys(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    assert append_rows(path, [{"obs_id": "a", "loss_val": 1.0}, {"obs_id": "b", "loss_val": 2.0}]) == 2
    # 'a' is already in the file and 'c' is repeated within the batch: one new row.
    assert append_rows(path, [{"obs_id": "a", "loss_val": 9.0}, {"obs_id": "c", "loss_val": 3.0},
                              {"obs_id": "c", "loss_val": 4.0}]) == 1
    df = read_rows(path)
    assert list(df.columns) == COLUMNS
    assert df["obs_id"].tolist() == ["a", "b", "c"]
    assert df["loss_val"].tolist() == [1.0, 2.0, 3.0]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_append_rows_rejects_unknown_columns(tmp_path):
    with pytest.raises(ValueError, match="not in the schema.*'bogus'"):
        append_rows(tmp_path / "r.csv", [{"obs_id": "a", "bogus": 1}])
    assert not (tmp_path / "r.csv").exists()


def test_stable_hash_ignores_key_order_but_not_values():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})
    assert re.fullmatch(r"[0-9a-f]{16}", stable_hash("x"))


def test_frame_sha256_ignores_row_order():
    df = pd.DataFrame({"obs_id": ["b", "a"], "loss_val": [2.0, 1.0]})
    assert frame_sha256(df) == frame_sha256(df.iloc[::-1])
    assert frame_sha256(df) != frame_sha256(df.assign(loss_val=[2.0, 1.5]))


def test_provenance_names_the_commit():
    p = provenance(threads=3)
    assert p["threads"] == 3
    assert p["git_sha"] == "unknown" or re.fullmatch(r"[0-9a-f]{12}(-dirty)?", p["git_sha"])
    assert p["device"].startswith(("cpu:", "cuda:"))

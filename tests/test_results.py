"""The run store: atomic appends keyed by obs_id, stable hashes, provenance."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from bitlaws.study.store import (COLUMNS, CURVE_COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, StoreError, _cell, _parse,
                                 append_rows, format_float, frame_sha256, migrate_schema, provenance, read_rows,
                                 rewrite_rows, stable_hash)


def row(obs_id: str, loss_val: float = 1.0, **changes) -> dict:
    """A complete observation row (every identifier the schema requires)."""
    r = {"run_id": "r" + obs_id, "obs_id": obs_id, "experiment": "base_grid", "profile": "smoke",
         "corpus": "shakespeare", "size": "n3k", "seed": 0, "n_params": 3376, "n_tokens": 32768, "d_model": 16,
         "n_layers": 1, "fmt_w": "none", "fmt_a": "none", "fmt_kv": "none", "bits_w": 16, "bits_a": 16,
         "bits_kv": 16, "ptq_method": "none", "quant_scheme": "none", "fmt_post": "none", "bits_post": 16, "group_size": 0,
         "eval_version": 1,
         "loss_val": loss_val, "status": "ok", "steps": 64, "threads": 1}
    r.update(changes)
    return r


def test_append_rows_skips_existing_and_repeated_keys(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    assert append_rows(path, [row("a", 1.0), row("b", 2.0)]) == 2
    # 'a' is already in the file and 'c' is repeated within the batch: one new row.
    assert append_rows(path, [row("a", 9.0), row("c", 3.0), row("c", 4.0)]) == 1
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


# --- the store keeps every row: exact numbers, appends only, committed files byte for byte ----------

REPO = Path(__file__).resolve().parents[1]
SWEEP_FILES = ("base_grid", "qat_marginal", "qat_joint", "qat_formats", "compute_matched")


def committed_csvs() -> list[Path]:
    return sorted((REPO / "data" / "runs").glob("*/*.csv"))


def schema_of(path: Path):
    """The schema each committed CSV is written with: (columns, key)."""
    from bitlaws.study.quik_accuracy import OUTLIER_COLUMNS, QUIK_COLUMNS

    name = path.name
    if name.endswith("_curves.csv"):
        return CURVE_COLUMNS, None
    if path.stem in SWEEP_FILES:
        return COLUMNS, "obs_id"
    return {"quik_accuracy.csv": (QUIK_COLUMNS, "obs_id"),
            "quik_outliers.csv": (OUTLIER_COLUMNS, "stat_id")}.get(name, (None, None))


def test_every_committed_csv_reads_back_and_reserialises_byte_for_byte():
    """Each committed file passes the schema, and writing its parsed rows through the store's cell
    writer gives the same bytes (integers as integers; floats' shortest text is the committed %.6g)."""
    files = committed_csvs()
    assert len(files) >= 14
    for path in files:
        columns, key = schema_of(path)
        data = path.read_bytes()
        header, records = _parse(path, data, columns, key)
        assert columns is None or header == list(columns), path
        df = read_rows(path, columns, key)
        assert len(df) == len(records) == data.count(b"\n") - 1, path
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for rec in records:
            vals = [None if v == "" else int(v) if c in INT_COLUMNS else float(v) if c in FLOAT_COLUMNS else v
                    for c, v in zip(header, rec)]
            w.writerow([_cell(c, v) for c, v in zip(header, vals)])
        assert buf.getvalue().encode() == data, path


def test_appending_to_a_committed_csv_keeps_its_bytes(tmp_path):
    """The writer never rewrites: a copy of each committed file is a byte prefix after a new row,
    and unchanged when every row offered is already there."""
    for path in committed_csvs():
        columns, key = schema_of(path)
        if columns is None:
            continue
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        old = read_rows(copy, columns, key)
        if key is not None:  # offering the stored rows again writes nothing
            again = [{c: v for c, v in r.items() if c in columns} for r in old.head(3).to_dict("records")]
            assert append_rows(copy, again, columns=columns, key=key) == 0
            assert copy.read_bytes() == path.read_bytes(), path
        new = {c: old.iloc[-1][c] for c in columns}
        if key is not None:
            new[key] = "ffffffffffffffff"
        new["loss_train" if "loss_train" in columns else columns[-1]] = 1.2345678901234567
        assert append_rows(copy, [new], columns=columns, key=key) == 1
        data = copy.read_bytes()
        assert data.startswith(path.read_bytes()) and data.count(b"\n") == path.read_bytes().count(b"\n") + 1
        assert len(read_rows(copy, columns, key)) == len(old) + 1


def test_numbers_are_written_exactly(tmp_path):
    path = tmp_path / "r.csv"
    loss = 2.5579123456789012
    append_rows(path, [row("a", loss, n_params=1_205_888, n_tokens=16_777_216, delta_ptq=0.0,
                           lr_peak=0.00424264, tokens_per_s=27930.0, train_s=float("nan"))])
    line = path.read_text().splitlines()[1].split(",")
    cells = dict(zip(COLUMNS, line))
    assert cells["n_params"] == "1205888" and cells["n_tokens"] == "16777216"
    assert cells["delta_ptq"] == "0" and cells["lr_peak"] == "0.00424264" and cells["tokens_per_s"] == "27930"
    assert cells["train_s"] == "" and float(cells["loss_val"]) == loss
    back = read_rows(path, COLUMNS, "obs_id")
    assert back["loss_val"][0] == loss and back["n_params"][0] == 1_205_888
    for x in (0.1, 1 / 3, 1e-300, 123456789.125, -2.5e-7, 5e300):
        assert float(format_float(x)) == x


def test_an_empty_integer_cell_cannot_reround_stored_rows(tmp_path):
    """On main one empty int cell turned the column to float and the rewrite rounded every row
    (1,205,888 -> 1,205,890); now the damaged file is refused and its bytes stay as they were."""
    path = tmp_path / "r.csv"
    append_rows(path, [row("a", n_params=1_205_888, n_tokens=16_777_216)])
    bad = path.read_text() + path.read_text().splitlines()[1].replace(",1205888,", ",,").replace("ra,a,", "rb,b,") + "\n"
    path.write_text(bad)
    with pytest.raises(StoreError, match=r"r\.csv, line 3: column 'n_params' is empty"):
        append_rows(path, [row("c")])
    assert path.read_text() == bad and "1205888" in bad and "16777216" in bad


def test_unknown_columns_are_kept_and_missing_ones_refused(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [row("a")])
    text = path.read_text().splitlines()
    path.write_text(text[0] + ",note\n" + text[1] + ",hand note\n")
    assert append_rows(path, [row("b")]) == 1
    lines = path.read_text().splitlines()
    assert lines[0].endswith(",note") and lines[1].endswith(",hand note") and lines[2].endswith(",")
    assert read_rows(path)["note"].tolist()[0] == "hand note"
    # a dropped column: refused, nothing written
    cols = lines[0].split(",")
    i = cols.index("loss_val")
    dropped = "\n".join(",".join(c for j, c in enumerate(l.split(",")) if j != i) for l in lines) + "\n"
    path.write_text(dropped)
    with pytest.raises(StoreError, match=r"line 1: the header lacks the columns \['loss_val'\]"):
        append_rows(path, [row("c")])
    with pytest.raises(StoreError, match="loss_val"):
        read_rows(path, COLUMNS, "obs_id")
    assert path.read_text() == dropped


def test_a_killed_append_is_ignored_by_readers_and_cut_by_the_next_writer(tmp_path):
    """A journal names the size before and after; the partial lines of a killed writer never count."""
    path = tmp_path / "r.csv"
    append_rows(path, [row("a")])
    good = path.read_bytes()
    line = good.splitlines()[1].replace(b"ra,a,", b"rb,b,")
    (tmp_path / ".r.csv.journal").write_text(f"{len(good)} {len(good) + len(line) + 1} end\n")
    path.write_bytes(good + line[:40])  # killed mid-write
    assert read_rows(path)["obs_id"].tolist() == ["a"]
    assert append_rows(path, [row("c")]) == 1
    assert read_rows(path)["obs_id"].tolist() == ["a", "c"]
    assert path.read_bytes().startswith(good) and not (tmp_path / ".r.csv.journal").exists()


def _append_many(path: str, prefix: str, n: int) -> None:
    for i in range(n):
        append_rows(path, [row(f"{prefix}{i:03d}", float(i))])


def test_concurrent_appends_lose_nothing(tmp_path):
    """Two processes appending 60 rows each to one CSV: 120 rows (main kept 60)."""
    import multiprocessing as mp

    path = tmp_path / "r.csv"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), p, 60)) for p in ("x", "y")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    df = read_rows(path, COLUMNS, "obs_id")
    assert len(df) == 120 and df["obs_id"].is_unique
    assert sorted(df["obs_id"]) == sorted([f"x{i:03d}" for i in range(60)] + [f"y{i:03d}" for i in range(60)])


def test_a_folder_where_the_csv_should_be_is_a_clear_error(tmp_path):
    (tmp_path / "r.csv").mkdir()
    with pytest.raises(StoreError, match="is a folder where a results file should be"):
        append_rows(tmp_path / "r.csv", [row("a")])
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot write results to"):
        append_rows(tmp_path / "file" / "r.csv", [row("a")])


def test_load_runs_checks_the_profile(tmp_path):
    from bitlaws.study.store import load_runs

    with pytest.raises(ValueError, match=r"unknown profile 'tpu'; allowed: \['cpu', 'gpu', 'smoke'\]"):
        load_runs("tpu", root=REPO / "data")
    # a declared profile without rows: the message names the command that makes them
    with pytest.raises(FileNotFoundError, match=r"python -m bitlaws sweep --profile gpu"):
        load_runs("gpu", root=tmp_path)


def test_rewrite_rows_changes_only_the_columns_it_names(tmp_path):
    path = tmp_path / "rows.csv"
    append_rows(path, [row("a", 1.25), row("b", 2.5)])
    before = path.read_bytes()

    def rename(header, rows, changed=("ptq_method",), drop=False):
        for r in rows:
            r["ptq_method"], r["quant_scheme"] = "renamed", "touched"
        return header, rows[:1] if drop else rows, set(changed)

    with pytest.raises(StoreError, match=r"line 2: the rewrite would change column 'quant_scheme' \('none' → 'touched'\)"):
        rewrite_rows(path, rename)
    with pytest.raises(StoreError, match=r"number of rows \(2 → 1\)"):
        rewrite_rows(path, lambda h, rs: rename(h, rs, ("ptq_method", "quant_scheme"), drop=True))
    assert path.read_bytes() == before  # refused: nothing written
    assert rewrite_rows(path, lambda h, rs: None) == 0 and path.read_bytes() == before
    assert rewrite_rows(path, lambda h, rs: rename(h, rs, ("ptq_method", "quant_scheme"))) == 2
    back = read_rows(path, COLUMNS, "obs_id")
    assert list(back["ptq_method"]) == ["renamed"] * 2 and list(back["loss_val"]) == [1.25, 2.5]
    assert path.read_bytes() == before.replace(b",16,16,16,none,none,none,16,", b",16,16,16,renamed,touched,none,16,")


def test_migrate_schema_gives_the_committed_base_grid_back_from_its_old_form(tmp_path):
    """The committed base grid's version-1 rows, written as before fmt_post and eval_version (a PTQ row's
    format in fmt_w), migrate to exactly their committed text; a second migration changes nothing."""
    text = (Path(__file__).resolve().parents[1] / "data" / "runs" / "cpu" / "base_grid.csv").read_text()
    rows = [r for r in csv.DictReader(io.StringIO(text, newline="")) if r["eval_version"] == "1"]
    header = list(rows[0])

    def write(cols, rs):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        w.writerows([r[c] for c in cols] for r in rs)
        return buf.getvalue()

    new = write(header, rows)
    old_rows = [{**r, "fmt_w": r["fmt_post"] if r["ptq_method"] != "none" else r["fmt_w"]} for r in rows]
    assert any(r["fmt_w"] != n["fmt_w"] for r, n in zip(old_rows, rows))  # some PTQ rows change back
    path = tmp_path / "base_grid.csv"
    path.write_text(write([c for c in header if c not in ("fmt_post", "eval_version")], old_rows))
    assert migrate_schema(path) == len(rows)
    assert path.read_text() == new
    assert migrate_schema(path) == 0 and path.read_text() == new
    orphan = write([c for c in header if c not in ("fmt_post", "eval_version")],
                   [r for r in old_rows if r["ptq_method"] != "none"][:2])
    path.write_text(orphan)
    with pytest.raises(StoreError, match=r"line 2: PTQ row of run '\w+', which has no unquantized row"):
        migrate_schema(path)
    assert path.read_text() == orphan


def test_the_data_freeze_keeps_later_sweep_rows_out_of_every_table_until_it_moves(tmp_path, monkeypatch):
    """Rows a sweep adds after the profile's freeze are stored but not read (store.ROWS_READ_UNTIL), so a
    partly trained batch never changes a fit; `until='all'` and a later freeze read them."""
    from bitlaws.study import store
    from bitlaws.study.store import load_runs

    folder = tmp_path / "runs" / "cpu"
    append_rows(folder / "base_grid.csv", [
        row("a", 1.0, profile="cpu", timestamp="2026-12-06T07:59:59Z"),
        row("b", 2.0, profile="cpu", timestamp="2026-12-06T08:00:00Z"),  # at the freeze: read
        row("c", 3.0, profile="cpu", timestamp="2026-12-06T08:00:01Z")])  # after it: stored, not read
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", "2026-12-06T08:00:00Z")
    assert load_runs("cpu", root=tmp_path, eval_version=1)["obs_id"].tolist() == ["a", "b"]
    assert load_runs("cpu", root=tmp_path, eval_version=1, until="all")["obs_id"].tolist() == ["a", "b", "c"]
    assert load_runs("cpu", root=tmp_path, eval_version=1, until="2026-12-06T07:59:59Z")["obs_id"].tolist() == ["a"]
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", None)
    assert len(load_runs("cpu", root=tmp_path, eval_version=1)) == 3
    with pytest.raises(ValueError, match=r"bad until='2026-12-06 08:00'.*'all'"):
        load_runs("cpu", root=tmp_path, until="2026-12-06 08:00")
    with pytest.raises(ValueError, match=r"bad until='2026-13-45T99:99:99Z'.*a real date"):
        load_runs("cpu", root=tmp_path, until="2026-13-45T99:99:99Z")
    # the command line's --until (BITLAWS_UNTIL) stands in for the table, and an explicit until beats it
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", "2026-12-06T08:00:00Z")
    monkeypatch.setenv("BITLAWS_UNTIL", "all")
    assert load_runs("cpu", root=tmp_path, eval_version=1)["obs_id"].tolist() == ["a", "b", "c"]
    assert load_runs("cpu", root=tmp_path, eval_version=1, until="2026-12-06T07:59:59Z")["obs_id"].tolist() == ["a"]
    monkeypatch.setenv("BITLAWS_UNTIL", "noon")
    with pytest.raises(ValueError, match=r"bad BITLAWS_UNTIL='noon'"):
        load_runs("cpu", root=tmp_path)
    monkeypatch.delenv("BITLAWS_UNTIL")
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", None)
    # a bad entry of the table itself is named as that entry, not as an argument the caller never passed
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", "2026-12-06")
    with pytest.raises(ValueError, match=r"bad store.ROWS_READ_UNTIL\['cpu'\] = '2026-12-06'"):
        load_runs("cpu", root=tmp_path)
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", None)
    # an experiment with rows only after the freeze: the message names the freeze and how to read them
    append_rows(folder / "qat_seeds.csv", [row("s", 1.0, profile="cpu", experiment="qat_seeds",
                                               timestamp="2026-12-07T00:00:00Z")])
    with pytest.raises(FileNotFoundError, match=r"1 row the files hold, 1, at version 1, was written after the "
                                                r"data freeze 2026-12-06T07:59:59Z \(only rows written at or "
                                                r"before it.*until='all'"):
        load_runs("cpu", "qat_seeds", root=tmp_path, eval_version=1, until="2026-12-06T07:59:59Z")
    # a sweep row whose timestamp cannot be placed is refused, not silently read or dropped
    append_rows(folder / "base_grid.csv", [row("d", 4.0, profile="cpu", timestamp="yesterday")])
    with pytest.raises(StoreError, match="timestamp 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ"):
        load_runs("cpu", root=tmp_path, eval_version=1, until="2026-12-06T08:00:00Z")


def test_an_experiment_name_no_file_holds_and_no_sweep_declares_is_refused_by_name(tmp_path):
    """A typo is a ValueError naming it and the experiments there are, alone or in a list (never narrowed
    silently to the names that exist); a name the sweep declares but has not run stays the FileNotFoundError
    callers catch for 'no rows yet'."""
    from bitlaws.study.store import load_runs

    folder = tmp_path / "runs" / "cpu"
    append_rows(folder / "base_grid.csv", [row("a", 1.0, profile="cpu", eval_version=2,
                                               timestamp="2026-12-06T07:00:00Z")])
    append_rows(folder / "lr_peak.csv", [row("l", 1.0, profile="cpu", experiment="lr_peak", eval_version=2,
                                             timestamp="2026-12-06T07:00:00Z")])
    allowed = (r"allowed: the experiments the profile's files hold, \['base_grid', 'lr_peak'\], or those the sweep "
               r"declares for 'cpu' and has not run yet, \['qat_marginal', .*'qat_mechanism'\]")
    with pytest.raises(ValueError, match=r"unknown experiment 'base_grd' for profile 'cpu': no file under .* holds "
                                         r"it and bitlaws.study.sweep declares no such experiment; " + allowed):
        load_runs("cpu", "base_grd", root=tmp_path)
    with pytest.raises(ValueError, match=r"unknown experiment 'base_grd' for profile 'cpu'.*" + allowed):
        load_runs("cpu", ["base_grid", "base_grd"], root=tmp_path)
    with pytest.raises(ValueError, match=r"unknown experiments 'base_grd', 'lr_pek' for profile 'cpu'"):
        load_runs("cpu", {"lr_pek", "base_grid", "base_grd"}, root=tmp_path)
    # the freeze does not hide a typo: the name is checked against every row, whatever the filters read
    with pytest.raises(ValueError, match=r"unknown experiment 'base_grd'"):
        load_runs("cpu", "base_grd", root=tmp_path, until="2026-01-01T00:00:00Z")
    # declared by the sweep, no row yet: FileNotFoundError, saying so and how to make them
    with pytest.raises(FileNotFoundError, match=r"no file holds 'qat_mechanism', which bitlaws.study.sweep declares "
                                                r"for 'cpu' and has not run yet \(`python -m bitlaws sweep --profile cpu "
                                                r"--experiments qat_mechanism`"):
        load_runs("cpu", "qat_mechanism", root=tmp_path)
    # ... and in a list with rows of another experiment it is simply absent, as before
    assert load_runs("cpu", ["base_grid", "qat_mechanism", "manual"], root=tmp_path)["obs_id"].tolist() == ["a"]
    # declared by another profile's sweep only, or the command line's `train` rows: not a typo either
    append_rows(tmp_path / "runs" / "smoke" / "base_grid.csv", [row("z")])
    with pytest.raises(FileNotFoundError, match=r"no file holds 'qat_factorial', for which 'smoke' declares no run"):
        load_runs("smoke", "qat_factorial", root=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no file holds 'manual' \(the rows of `python -m bitlaws train`"):
        load_runs("smoke", "manual", root=tmp_path)


def test_when_every_row_is_filtered_out_the_message_counts_what_each_filter_removed(tmp_path, monkeypatch):
    from bitlaws.study import store
    from bitlaws.study.store import load_runs

    monkeypatch.setitem(store.ROWS_READ_UNTIL, "cpu", "2026-12-06T08:00:00Z")
    folder = tmp_path / "runs" / "cpu"
    append_rows(folder / "qat_seeds.csv", [  # rows only after the freeze
        row(s, 1.0, profile="cpu", experiment="qat_seeds", eval_version=2, timestamp="2026-12-07T00:00:00Z")
        for s in ("s1", "s2", "s3")])
    append_rows(folder / "lr_peak.csv", [  # rows only at another evaluation version, inside the freeze
        row(s, 1.0, profile="cpu", experiment="lr_peak", eval_version=1, timestamp="2026-12-01T00:00:00Z")
        for s in ("l1", "l2")])
    append_rows(folder / "repetition.csv", [  # one of each
        row("r1", 1.0, profile="cpu", experiment="repetition", eval_version=1, timestamp="2026-12-01T00:00:00Z"),
        row("r2", 1.0, profile="cpu", experiment="repetition", eval_version=2, timestamp="2026-12-07T00:00:00Z")])
    freeze = r"after the data freeze 2026-12-06T08:00:00Z \(only rows written at or before it are read: " \
             r"`until`, by default store.ROWS_READ_UNTIL; until='all' reads later ones\)"
    with pytest.raises(FileNotFoundError, match=r"no rows of experiment 'qat_seeds' for profile 'cpu' under .*: of "
                                                r"the 3 rows the files hold, 3, at version 2, were written " + freeze):
        load_runs("cpu", "qat_seeds", root=tmp_path)
    assert len(load_runs("cpu", "qat_seeds", root=tmp_path, until="all")) == 3
    with pytest.raises(FileNotFoundError, match=r"no rows of experiment 'lr_peak' .*: of the 2 rows the files hold, "
                                                r"2 are at evaluation versions other than 2, the version read \(2 at "
                                                r"version 1; eval_version=1 or 'all' reads them, the data freeze "
                                                r"still applying\)$"):
        load_runs("cpu", "lr_peak", root=tmp_path)
    assert len(load_runs("cpu", "lr_peak", root=tmp_path, eval_version=1)) == 2
    with pytest.raises(FileNotFoundError, match=r"of the 2 rows the files hold, 1 is at evaluation versions other "
                                                r"than 2, the version read \(1 at version 1; eval_version=1 or 'all' "
                                                r"reads it, the data freeze still applying\); the other 1, at version "
                                                r"2, was written " + freeze):
        load_runs("cpu", "repetition", root=tmp_path)
    # rows at another version and after the freeze: the message names both arguments at once, not one at a time
    append_rows(folder / "lr_schedule.csv", [
        row(s, 1.0, profile="cpu", experiment="lr_schedule", eval_version=1, timestamp=t)
        for s, t in (("m1", "2026-12-07T00:00:00Z"), ("m2", "2026-12-07T00:00:00Z"), ("m3", "2026-12-01T00:00:00Z"))])
    with pytest.raises(FileNotFoundError, match=r"3 are at evaluation versions other than 2, the version read \(3 at "
                                                r"version 1; eval_version=1 or 'all' reads 1 of them; the other 2 were "
                                                r"written after the data freeze too and need until='all' as well\)$"):
        load_runs("cpu", "lr_schedule", root=tmp_path)
    assert len(load_runs("cpu", "lr_schedule", root=tmp_path, eval_version=1)) == 1
    assert len(load_runs("cpu", "lr_schedule", root=tmp_path, eval_version=1, until="all")) == 3
    late_only = tmp_path / "late"
    append_rows(late_only / "runs" / "cpu" / "lr_peak.csv", [
        row(s, 1.0, profile="cpu", experiment="lr_peak", eval_version=1, timestamp="2026-12-07T00:00:00Z")
        for s in ("a", "b")])
    with pytest.raises(FileNotFoundError, match=r"\(2 at version 1; they were written after the data freeze too, so "
                                                r"eval_version=1 or 'all' with until='all' reads them\)$"):
        load_runs("cpu", "lr_peak", root=late_only)
    assert len(load_runs("cpu", "lr_peak", root=late_only, eval_version=1, until="all")) == 2
    with pytest.raises(ValueError, match="experiment is an empty collection for profile 'cpu': name at least one"):
        load_runs("cpu", [], root=tmp_path)
    # the freeze alone, every version read: no version is named
    with pytest.raises(FileNotFoundError, match=r"of the 3 rows the files hold, 3 were written " + freeze):
        load_runs("cpu", "qat_seeds", root=tmp_path, eval_version="all")
    # a declared experiment without rows beside filtered ones: both causes are named
    with pytest.raises(FileNotFoundError, match=r"no rows of experiments \['lr_peak', 'qat_mechanism'\] .*no file "
                                                r"holds 'qat_mechanism', which .*; of the 2 rows the files hold, 2 are at "
                                                r"evaluation versions other than 2"):
        load_runs("cpu", ["qat_mechanism", "lr_peak"], root=tmp_path)


def test_the_committed_sweep_rows_all_sit_at_or_before_cpus_freeze_or_are_counted_after_it():
    """Every committed cpu sweep row has a placeable timestamp, and the coverage table's two counts add up:
    the runs read at the freeze and those trained after it are disjoint parts of the rows' runs."""
    from bitlaws.study.store import ROWS_READ_UNTIL, after_freeze, load_runs
    from bitlaws.study.sweep import coverage, declared_experiments

    sweeps = declared_experiments("cpu")
    every = load_runs("cpu", sweeps, root=REPO / "data", eval_version="all", until="all")
    late = after_freeze(every, ROWS_READ_UNTIL["cpu"])  # raises on a timestamp it cannot place
    read = load_runs("cpu", sweeps, root=REPO / "data", eval_version="all")
    assert len(read) + int(late.sum()) == len(every)
    for e in sweeps:
        cov = coverage("cpu", REPO / "data", e)
        runs_late = set(every.loc[late & (every["experiment"] == e), "run_id"])
        runs_read = set(read.loc[read["experiment"] == e, "run_id"])
        assert cov["runs_after_freeze"] == len(runs_late - runs_read), e
        assert cov["runs_trained"] == len(runs_read), e


def test_read_current_rows_keeps_only_this_version_made_from_these_rows(tmp_path):
    from bitlaws.study.store import append_rows, read_current_rows

    cols = ["sim_id", "x", "sim_version", "inputs_sha256"]
    path = tmp_path / "sim.csv"
    make = "mod.write_sim('cpu')"
    assert read_current_rows(path, cols, "sim_id", "2", "h1", make) == (None, f"not simulated yet (`{make}`)")
    append_rows(path, [{"sim_id": "a", "x": 1.0, "sim_version": "1", "inputs_sha256": "h1"}], cols, "sim_id")
    assert read_current_rows(path, cols, "sim_id", "2", "h1", make)[1] == \
        "simulated by another version of the simulation; not read"
    append_rows(path, [{"sim_id": "b", "x": 2.0, "sim_version": "2", "inputs_sha256": "h0"},
                       {"sim_id": "c", "x": 3.0, "sim_version": "2", "inputs_sha256": "h1"}], cols, "sim_id")
    tab, why = read_current_rows(path, cols, "sim_id", "2", "h1", make)
    assert why == "" and list(tab["sim_id"]) == ["c"] and list(tab.index) == [0] and float(tab["x"].iloc[0]) == 3.0
    assert read_current_rows(path, cols, "sim_id", "2", "h9", make)[1].startswith(
        "simulated from other training rows than these; not read")

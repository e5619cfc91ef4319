"""Fault injection on the run store (smoke profile, one run, --threads 1): damaged CSVs, write
faults, locks, corrupt checkpoints and a kill during PTQ. Each asserts that nothing stored is
lost or changed, and that a resumed run gives the numbers of an unbroken one, exactly."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import bitlaws.study.sweep as sweep_mod
from bitlaws.cli import main
from bitlaws.study.store import COLUMNS, StoreError, read_rows, sweep_lock
from bitlaws.study.sweep import RESULTS_JSON, coverage, plan, run_sweep

pytestmark = pytest.mark.slow

EXP = ["base_grid"]


def sweep(root: Path, **kw):
    return run_sweep("smoke", data_root=root / "data", run_root=root / "runs", progress=False, experiments=EXP,
                     limit=1, **kw)


def csv_of(root: Path) -> Path:
    return root / "data" / "runs" / "smoke" / "base_grid.csv"


def run_dir(root: Path) -> Path:
    spec = plan("smoke")[0]
    return root / "runs" / "smoke" / spec.run_id


MEASURES = ["obs_id", "loss_val", "loss_train", "delta_ptq", "bpb_val", "ppl", "n_params", "n_tokens", "steps",
            "status"]


def same_numbers(a: pd.DataFrame, b: pd.DataFrame) -> None:
    a = a[MEASURES].set_index("obs_id").sort_index()
    b = b[MEASURES].set_index("obs_id").sort_index()
    assert a.index.tolist() == b.index.tolist()
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The cheapest smoke run, unbroken: its rows and its run folder."""
    root = tmp_path_factory.mktemp("ref")
    sweep(root)
    return root, read_rows(csv_of(root), COLUMNS, "obs_id")


def no_training(*a, **k):
    raise AssertionError("retrained a run whose training had finished")


# --- damaged files: refused with the file and line, never changed, nothing trained ------------------

def _damage(root: Path, reference, how: str) -> bytes:
    ref_root, _ = reference
    csv = csv_of(root)
    csv.parent.mkdir(parents=True)
    lines = csv_of(ref_root).read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    if how == "truncated":  # the last line cut right after its obs_id
        text = header + "".join(rows[:-1]) + ",".join(rows[-1].split(",")[:2]) + "\n"
    elif how == "garbage":
        text = header + rows[0] + "\x13#!garbage, not a row\n" + "".join(rows[1:])
    elif how == "empty_int":  # a hand edit blanks n_params
        cells = rows[1].split(",")
        cells[COLUMNS.index("n_params")] = ""
        text = header + rows[0] + ",".join(cells) + "".join(rows[2:])
    elif how in ("no_loss_val", "no_obs_id"):
        i = COLUMNS.index(how[3:])
        text = "".join(",".join(c for j, c in enumerate(l.rstrip("\n").split(",")) if j != i) + "\n" for l in lines)
    elif how == "no_newline":
        text = "".join(lines)[:-1]
    else:
        raise ValueError(how)
    csv.write_text(text)
    return csv.read_bytes()


@pytest.mark.parametrize("how, pattern", [
    # one run of the smoke base grid: 6 observations at each of 2 evaluation versions = 12 rows
    ("truncated", rf"base_grid\.csv, line 13: 2 fields where the header has {len(COLUMNS)}"),
    ("garbage", rf"base_grid\.csv, line 3: 2 fields where the header has {len(COLUMNS)}"),
    ("empty_int", r"base_grid\.csv, line 3: column 'n_params' is empty"),
    ("no_loss_val", r"base_grid\.csv, line 1: the header lacks the columns \['loss_val'\]"),
    ("no_obs_id", r"base_grid\.csv, line 1: the header lacks the columns \['obs_id'\]"),
    ("no_newline", r"base_grid\.csv, line 13: the last line is incomplete"),
])
def test_a_damaged_csv_is_refused_and_kept(how, pattern, tmp_path, reference, monkeypatch, capsys):
    before = _damage(tmp_path, reference, how)
    monkeypatch.setattr(sweep_mod, "train", no_training)
    argv = ["sweep", "--profile", "smoke", "--threads", "1", "--experiments", "base_grid", "--limit", "1",
            "--data-root", str(tmp_path / "data"), "--run-root", str(tmp_path / "runs")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and re.search(pattern, err) and "Traceback" not in err, err
    assert csv_of(tmp_path).read_bytes() == before  # nothing stored changed
    assert not (tmp_path / "runs").exists()  # nothing trained
    with pytest.raises(StoreError, match=pattern):  # coverage does not count a damaged file as 0 or done
        coverage("smoke", tmp_path / "data")


def test_an_unknown_column_is_kept_through_a_resume(tmp_path, reference):
    ref_root, ref = reference
    csv = csv_of(tmp_path)
    csv.parent.mkdir(parents=True)
    lines = csv_of(ref_root).read_text().splitlines()
    # keep the first three rows, with a hand-added column; the resume appends the other nine
    text = lines[0] + ",note\n" + "".join(l + ",checked by hand\n" for l in lines[1:4])
    csv.write_text(text)
    shutil.copytree(ref_root / "runs", tmp_path / "runs")
    sweep(tmp_path)
    new = csv.read_text()
    assert new.startswith(text) and new.count("\n") == 1 + len(lines[1:])
    got = read_rows(csv, COLUMNS, "obs_id")
    assert got["note"].tolist()[:3] == ["checked by hand"] * 3 and got["note"][3:].isna().all()
    same_numbers(got, ref)


# --- write faults: probed before training ------------------------------------------------------------

def test_a_file_where_the_data_folder_should_be_exits_2_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "train", no_training)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "runs").write_text("not a folder")
    rc = main(["sweep", "--profile", "smoke", "--experiments", "base_grid", "--limit", "1",
               "--data-root", str(tmp_path / "data"), "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and re.search(r"cannot (read|write) results (from|to) .*Not a directory", err), err
    assert "Traceback" not in err
    assert (tmp_path / "data" / "runs").read_text() == "not a folder"


def test_a_read_only_data_root_exits_2_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "train", no_training)
    data = tmp_path / "data"
    data.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: make the folder refuse new files as a read-only mount does
        import tempfile

        real = tempfile.mkstemp

        def read_only(*a, dir=None, **k):
            if dir is not None and Path(dir).resolve().is_relative_to(data.resolve()):
                raise PermissionError(13, "Read-only file system", str(dir))
            return real(*a, dir=dir, **k)

        monkeypatch.setattr(tempfile, "mkstemp", read_only)
    else:
        data.chmod(0o555)
    try:
        rc = main(["sweep", "--profile", "smoke", "--experiments", "base_grid", "--limit", "1",
                   "--data-root", str(data), "--run-root", str(tmp_path / "runs")])
    finally:
        data.chmod(0o755)
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write results to" in err and str(data) in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


# --- locks --------------------------------------------------------------------------------------------

def test_a_second_sweep_into_one_data_root_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "train", no_training)
    with sweep_lock(tmp_path / "data"):
        rc = main(["sweep", "--profile", "smoke", "--experiments", "base_grid", "--limit", "1",
                   "--data-root", str(tmp_path / "data"), "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and "another sweep is writing into" in err, err
    assert not (tmp_path / "runs").exists()
    with sweep_lock(tmp_path / "data"):  # released when the holder ends
        pass


# --- finished training is kept --------------------------------------------------------------------------

def test_a_kill_during_gptq_loses_only_the_ptq(tmp_path, reference, monkeypatch):
    """The run's facts are beside its checkpoint the moment training ends: the rerun trains nothing
    and its rows (δ_PTQ included) equal the unbroken run's exactly."""
    _, ref = reference
    real = sweep_mod._apply_ptq_

    def killed(model, ptq, *a):
        if sweep_mod._method(ptq) == "gptq":
            raise KeyboardInterrupt("SIGKILL stand-in: the process dies inside GPTQ")
        return real(model, ptq, *a)

    monkeypatch.setattr(sweep_mod, "_apply_ptq_", killed)
    with pytest.raises(KeyboardInterrupt):
        sweep(tmp_path)
    assert not csv_of(tmp_path).exists()  # no row was written: the process died before recording
    facts = json.loads((run_dir(tmp_path) / RESULTS_JSON).read_text())
    base = ref[ref["ptq_method"] == "none"].iloc[0]
    assert facts["loss_val"] == base["loss_val"] and facts["steps"] == base["steps"]
    monkeypatch.setattr(sweep_mod, "_apply_ptq_", real)
    monkeypatch.setattr(sweep_mod, "train", no_training)
    sweep(tmp_path)
    same_numbers(read_rows(csv_of(tmp_path), COLUMNS, "obs_id"), ref)
    curves = read_rows(csv_of(tmp_path).with_name("base_grid_curves.csv"))
    assert len(curves) == len(facts["curve"]) > 0


def test_a_reused_old_checkpoint_gives_the_exact_delta(tmp_path, reference, monkeypatch):
    """A checkpoint saved before results.json existed, reused for missing PTQ rows: δ_PTQ is taken
    against the checkpoint's loss measured again, not the six-digit loss of its row (off by 3e-6)."""
    ref_root, ref = reference
    shutil.copytree(ref_root / "runs", tmp_path / "runs")
    (run_dir(tmp_path) / RESULTS_JSON).unlink()
    base = ref[ref["ptq_method"] == "none"]
    rounded = base.assign(loss_val=[float("%.6g" % v) for v in base["loss_val"]])
    assert (rounded["loss_val"] != base["loss_val"]).all()  # the base row as main wrote it
    csv = csv_of(tmp_path)
    csv.parent.mkdir(parents=True)
    from bitlaws.study.store import append_rows

    append_rows(csv, rounded.to_dict("records"))
    before = csv.read_bytes()
    monkeypatch.setattr(sweep_mod, "train", no_training)
    sweep(tmp_path)
    assert csv.read_bytes().startswith(before)  # the stored base row is not touched
    got = read_rows(csv, COLUMNS, "obs_id")
    q = ref[ref["ptq_method"] != "none"]
    same_numbers(got[got["ptq_method"] != "none"], q)  # loss and δ exactly as unbroken


def test_a_corrupt_state_pt_is_moved_aside_and_the_run_retrains(tmp_path, reference):
    _, ref = reference
    d = run_dir(tmp_path)
    d.mkdir(parents=True)
    (d / "state.pt").write_bytes(b"PK\x03\x04 a torn torch.save")
    (d / "state.pt.tmp").write_bytes(b"orphan of a killed save")
    with pytest.warns(RuntimeWarning, match=r"state\.pt cannot be read.*moved it to state\.pt\.corrupt"):
        sweep(tmp_path)
    assert (d / "state.pt.corrupt").read_bytes() == b"PK\x03\x04 a torn torch.save"  # kept as evidence
    assert not (d / "state.pt.tmp").exists() and not (d / "state.pt").exists()
    same_numbers(read_rows(csv_of(tmp_path), COLUMNS, "obs_id"), ref)


def test_a_corrupt_model_safetensors_is_moved_aside_and_the_run_retrains(tmp_path, reference, monkeypatch):
    ref_root, ref = reference
    shutil.copytree(ref_root / "runs", tmp_path / "runs")  # finished training, no rows yet (killed in PTQ)
    d = run_dir(tmp_path)
    (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match=r"model\.safetensors cannot be read.*moved it to model\.safetensors\.corrupt"):
        sweep(tmp_path)
    assert (d / "model.safetensors.corrupt").stat().st_size == 100
    same_numbers(read_rows(csv_of(tmp_path), COLUMNS, "obs_id"), ref)
    # again: a second corrupt copy does not overwrite the first piece of evidence
    (d / "model.safetensors").write_bytes(b"garbage")
    csv_of(tmp_path).unlink()
    with pytest.warns(RuntimeWarning, match=r"moved it to model\.safetensors\.corrupt\.1"):
        sweep(tmp_path)
    assert (d / "model.safetensors.corrupt").stat().st_size == 100
    assert (d / "model.safetensors.corrupt.1").read_bytes() == b"garbage"
    same_numbers(read_rows(csv_of(tmp_path), COLUMNS, "obs_id"), ref)


def test_a_corrupt_results_json_is_moved_aside_and_the_run_retrains(tmp_path, reference):
    ref_root, ref = reference
    shutil.copytree(ref_root / "runs", tmp_path / "runs")
    d = run_dir(tmp_path)
    (d / RESULTS_JSON).write_text('{"run_id": "')  # torn
    with pytest.warns(RuntimeWarning, match=r"results\.json cannot be read.*moved it to results\.json\.corrupt"):
        sweep(tmp_path)
    assert (d / "results.json.corrupt").read_text() == '{"run_id": "'
    assert json.loads((d / RESULTS_JSON).read_text())["run_id"] == d.name
    same_numbers(read_rows(csv_of(tmp_path), COLUMNS, "obs_id"), ref)


def test_quik_skips_a_corrupt_checkpoint_with_a_clear_error(tmp_path, capsys):
    from bitlaws.study.quik_accuracy import SETTINGS

    ckpts = tmp_path / "data" / "checkpoints" / "cpu"
    ckpts.mkdir(parents=True)
    for stem in SETTINGS["smoke"].main:
        (ckpts / f"{stem}.safetensors").write_bytes(b"\x00garbage")
    rc = main(["quik", "--profile", "smoke", "--quiet", "--data-root", str(tmp_path / "data")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot be read and were skipped" in err and "Traceback" not in err, err
    assert all((ckpts / f"{s}.safetensors").read_bytes() == b"\x00garbage" for s in SETTINGS["smoke"].main)


# --- a diverged run reports what it reached ---------------------------------------------------------

def test_a_diverged_row_reports_the_steps_and_tokens_reached(tmp_path, monkeypatch):
    import torch

    import bitlaws.train as train_mod

    real = train_mod.F.cross_entropy
    calls = {"n": 0}

    def breaks_at_step_5(*a, **k):
        out = real(*a, **k)
        calls["n"] += 1
        return out * float("nan") if calls["n"] > 5 else out

    monkeypatch.setattr(train_mod.F, "cross_entropy", breaks_at_step_5)
    spec = plan("smoke")[0]
    rows, curve = sweep_mod.run_spec(spec, threads=1, run_root=tmp_path / "runs", progress=False)
    monkeypatch.setattr(train_mod.F, "cross_entropy", real)
    t = spec.train
    assert {r["status"] for r in rows} == {"diverged"}
    for r in rows:
        assert r["steps"] == 5 and r["n_tokens"] == 5 * t.batch_size * t.seq_len < t.tokens_trained
        # tokens/s of the tokens reached (train_s is rounded to ms, hence the tolerance), not the 12.8x planned
        assert r["tokens_per_s"] == pytest.approx(r["n_tokens"] / r["train_s"], rel=0.1)
        assert math.isnan(r["loss_val"])
    assert curve[-1]["step"] == 5 and math.isnan(curve[-1]["loss_train"])
    assert torch.get_num_threads() == 1

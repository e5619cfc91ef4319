"""What a fresh user meets first at the command line: `coverage`'s table, a --data-root that is not
there, a --help that answers without importing torch, and one list of model sizes."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bitlaws.cli import main
from bitlaws.model import SIZE_LADDERS
from bitlaws.study.budget import THROUGHPUT_COLUMNS
from bitlaws.study.sweep import coverage, coverage_table, declared_experiments, plan

SRC = Path(__file__).resolve().parents[1] / "src"


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_coverage_table_shows_runs_trained_and_observations_per_version_newest_first():
    covs = [{"profile": "cpu", "experiment": "base_grid", "runs_trained": 3, "runs_done": 1, "runs_planned": 3,
             "obs_done": 5, "obs_planned": 12, "runs_done_by_eval_version": {1: 2, 2: 1},
             "obs_done_by_eval_version": {1: 4, 2: 1}, "obs_planned_by_eval_version": {1: 6, 2: 6}},
            {"profile": "cpu", "experiment": "qat_marginal", "runs_trained": 2, "runs_done": 0, "runs_planned": 2,
             "obs_done": 2, "obs_planned": 4, "runs_done_by_eval_version": {"1": 2, "2": 0},
             "obs_done_by_eval_version": {"1": 2, "2": 0},
             "obs_planned_by_eval_version": {"1": 2, "2": 2}}]  # JSON's string keys read alike
    lines = coverage_table(covs).splitlines()
    assert _columns(lines[0]) == ["experiment", "runs trained", "observations at eval v2", "observations at eval v1",
                                  "runs with all rows"]
    assert _columns(lines[1]) == ["base_grid", "3/3", "1/6", "4/6", "1/3"]
    assert _columns(lines[2]) == ["qat_marginal", "2/2", "0/2", "2/2", "0/2"]
    assert _columns(lines[3]) == ["total", "5/5", "1/8", "6/8", "1/5"]
    notes = lines[4:]  # one footnote per kind of column, naming it
    assert [n.split(":", 1)[0] for n in notes] == ["runs trained", "observations at eval vN", "runs with all rows"]
    from bitlaws.study.store import EVAL_VERSION_READ

    assert f"eval v2 is the current one, the chapters read eval v{EVAL_VERSION_READ['cpu']}" in notes[1]
    with pytest.raises(ValueError, match="at least one coverage record"):
        coverage_table([])


def _write_obs(path: Path, obs_ids: list[str]) -> None:
    from bitlaws.study.store import COLUMNS

    path.parent.mkdir(parents=True, exist_ok=True)
    filler = {c: "ok" if c == "status" else "0" for c in COLUMNS}
    lines = [",".join(COLUMNS)] + [",".join(o if c == "obs_id" else filler[c] for c in COLUMNS) for o in obs_ids]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_coverage_counts_a_run_trained_once_any_of_its_rows_exists(tmp_path):
    specs = plan("smoke", "base_grid")
    (v1, v2), a, b = specs[0].evals, specs[0], specs[1]
    rows_a = [a.obs_id(p, v1) for p in (None, *a.ptq)]  # every v1 row of one run, no v2 row
    rows_b = [b.obs_id(None, v2)]  # one v2 row of another
    _write_obs(tmp_path / "runs" / "smoke" / "base_grid.csv", rows_a + rows_b)
    cov = coverage("smoke", tmp_path, "base_grid")
    assert (cov["runs_trained"], cov["runs_done"], cov["runs_planned"]) == (2, 0, len(specs))
    assert cov["obs_done_by_eval_version"] == {1: len(rows_a), 2: 1}
    assert cov["runs_done_by_eval_version"] == {1: 1, 2: 0}
    line = _columns(coverage_table([cov]).splitlines()[1])
    n = len(a.ptq) + 1
    assert line == ["base_grid", f"2/{len(specs)}", f"1/{n * len(specs)}", f"{n}/{n * len(specs)}", f"0/{len(specs)}"]


def test_coverage_prints_the_table_by_default_and_json_with_a_flag(tmp_path, capsys):
    assert main(["coverage", "--profile", "smoke", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert str(tmp_path / "runs" / "smoke") in out[0]
    declared = declared_experiments("smoke")
    rows = {_columns(line)[0]: _columns(line) for line in out[2:2 + len(declared) + 1]}
    assert list(rows) == [*declared, "total"]
    for exp in declared:  # an empty data folder: nothing done of what the profile declares
        specs = plan("smoke", exp)
        n_obs = [sum(1 + len(s.ptq) for s in specs)] * 2  # v2 then v1
        assert rows[exp][1:] == [f"0/{len(specs)}", *(f"0/{n}" for n in n_obs), f"0/{len(specs)}"], rows[exp]
    assert main(["coverage", "--profile", "smoke", "--data-root", str(tmp_path), "--json"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["experiment"] for r in recs] == declared
    assert recs[0] == json.loads(json.dumps(coverage("smoke", tmp_path, declared[0])))


def test_sweep_ends_with_the_same_table(tmp_path, monkeypatch, capsys):
    import bitlaws.study.sweep as sweep

    rec = coverage("smoke", tmp_path, "base_grid")
    monkeypatch.setattr(sweep, "spec_corpus", lambda spec: None)
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: {**rec, "experiments": {"base_grid": rec}})
    assert main(["sweep", "--profile", "smoke", "--no-estimate", "--experiments", "base_grid",
                 "--data-root", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("after the sweep:\n" + coverage_table([rec]) + "\n"), out


@pytest.mark.parametrize("argv", [["coverage"], ["quik"], ["fit"], ["estimate"], ["export-checkpoints"],
                                  ["migrate-store"], ["design-power"], ["export-hf"], ["verdicts"],
                                  ["verdicts", "--check"]])
def test_a_missing_data_root_is_one_line_naming_it(argv, tmp_path, capsys):
    missing = tmp_path / "no" / "data"
    assert _exit_code([*argv, "--profile", "smoke", "--data-root", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --data-root ") and str(missing) in err and "no such folder" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "no").exists()  # nothing made


def test_a_file_as_data_root_is_refused(tmp_path, capsys):
    f = tmp_path / "data"
    f.write_text("not a folder")
    assert main(["coverage", "--profile", "smoke", "--data-root", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"--data-root {f} is a file, not a folder" in err


def test_help_and_argument_errors_import_neither_torch_nor_pandas():
    code = (
        "import sys\n"
        "from bitlaws.cli import main\n"
        "for argv in (['--help'], [], ['bogus'], ['coverage', '--help'], ['fit', '--boot', '0'],"
        " ['quik', '--profile', 'tpu'], ['sweep', '--help'], ['train', '--help'],"
        " ['train', '--model.size=nope'], ['train', '--train.lr=abc'],"
        " ['design-power', '--claims', 'P4,Q1']):\n"
        "    try:\n"
        "        rc = main(argv)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, 2), (argv, exc.code)\n"
        "    else:  # a bad training option: the command's own error, before any heavy import\n"
        "        assert argv[0] == 'train' and rc == 2, (argv, rc)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'scipy') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout


def test_train_help_and_the_size_error_list_the_same_sizes_by_ladder(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    block = out.split("NAME from one of the ladders\n", 1)[1].split("\n  --model.", 1)[0]
    in_help = [(line.split(":", 1)[0].strip(), [n.strip() for n in line.split(":", 1)[1].split(",")])
               for line in block.splitlines()]
    assert main(["train", "--model.size=nope", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    listed = re.search(r"allowed, by ladder: (.*)$", err.strip()).group(1)
    in_error = [(part.split(": ", 1)[0], list(ast.literal_eval("[" + part.split(": ", 1)[1] + "]")))
                for part in listed.split("; ")]
    declared = [(name, list(ladder)) for name, ladder in SIZE_LADDERS.items()]
    assert in_help == in_error == declared  # the same ladders, in the same order, each in its own order
    names = [n for _, ladder in declared for n in ladder]
    assert len(names) == len(set(names)) == 28  # no name in two ladders


def _fake_verdicts(monkeypatch, seen: list[Path]):
    """compute_verdicts -> the repository's stored verdicts, noting the data folder the study reads meanwhile."""
    import bitlaws.study.ledger as ledger
    from bitlaws.study.claims import load_verdicts, repo_root
    from bitlaws.study.store import data_dir

    stored = load_verdicts(repo_root() / "data" / "verdicts.json")

    def compute(profile="cpu", refit=True):
        seen.append(data_dir())
        return dict(stored)

    monkeypatch.setattr(ledger, "compute_verdicts", compute)
    return stored


def test_verdicts_reads_and_writes_the_data_root_it_is_given(tmp_path, monkeypatch, capsys):
    from bitlaws.study.claims import load_verdicts, repo_root

    monkeypatch.delenv("BITLAWS_DATA", raising=False)
    readme = (repo_root() / "README.md").read_bytes()
    seen: list[Path] = []
    stored = _fake_verdicts(monkeypatch, seen)
    root = tmp_path / "data"
    root.mkdir()
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 2  # nothing there to check against
    err = capsys.readouterr().err
    assert f"--data-root {root} has no verdicts.json" in err and err.count("\n") == 1, err
    assert main(["verdicts", "--data-root", str(root)]) == 0  # writes the copy's store, not the README
    assert seen == [root] and os.environ.get("BITLAWS_DATA") is None  # read there, then restored
    assert load_verdicts(root / "verdicts.json") == stored
    assert (repo_root() / "README.md").read_bytes() == readme
    capsys.readouterr()
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert err.strip().endswith(f"{len(stored)} of {len(stored)} verdicts agree with {root / 'verdicts.json'}")
    lines = out.splitlines()  # one line per claim, in the ledger's order: its id, its grade, its identity's start
    assert len(lines) == len(stored), out
    from bitlaws.study.claims import CLAIMS

    for ln, c in zip(lines, [c for c in CLAIMS if c in stored]):
        v = stored[c]
        assert ln.split()[0] == c and f" {v.verdict} " in ln and (v.inputs_sha256 or "none")[:12] in ln, ln
    assert main(["verdicts", "--check", "--json", "--data-root", str(root)]) == 0
    assert json.loads(capsys.readouterr().out) == {c: {"verdict": v.verdict, "inputs_sha256": v.inputs_sha256}
                                                  for c, v in stored.items()}
    record = json.loads((root / "verdicts.json").read_text(encoding="utf-8"))
    # a number printed only in the prose that moved is reported, and counted, without failing the check
    import re

    saved = record["P7"]["ours"]
    first = re.search(r"\d+\.\d+", saved).group()
    record["P7"]["ours"] = saved.replace(first, f"{float(first) + 1:.{len(first.split('.')[1])}f}", 1)
    (root / "verdicts.json").write_text(json.dumps(record), encoding="utf-8")
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 0
    err = capsys.readouterr().err
    assert "prose moved: P7.ours: number " in err and f"stored {float(first) + 1:.{len(first.split('.')[1])}f}, " \
           f"recomputed {first}" in err and "1 number(s) in the prose moved" in err, err
    record["P7"]["ours"] = saved
    claim = next(iter(record))
    record[claim]["verdict"] = "reproduced" if record[claim]["verdict"] != "reproduced" else "partly"
    (root / "verdicts.json").write_text(json.dumps(record), encoding="utf-8")
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 1  # the copy's store, edited, differs
    err = capsys.readouterr().err
    assert f"differ: {claim}" in err, err
    assert seen == [root] * 5


@pytest.mark.parametrize("kind", ["missing", "folder", "other csv", "empty", "markdown"])
@pytest.mark.parametrize("cmd", [["estimate"], ["sweep", "--estimate"]])
def test_a_bad_throughput_file_is_one_line_naming_it_and_what_is_expected(kind, cmd, tmp_path, capsys):
    path = {"missing": tmp_path / "nope.csv", "folder": tmp_path, "other csv": tmp_path / "other.csv",
            "empty": tmp_path / "empty.csv", "markdown": tmp_path / "README.md"}[kind]
    if kind == "other csv":
        path.write_text("a,b\n1,2\n", encoding="utf-8")
    if kind == "empty":
        path.write_text("", encoding="utf-8")
    if kind == "markdown":  # the README: rows of unequal field counts, which pandas' parser refuses
        path.write_text("# title\n\na, b\nc, d, e\n", encoding="utf-8")
    assert main([*cmd, "--profile", "smoke", "--throughput", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --throughput {path}: ") and err.count("\n") == 1, err
    assert "train_throughput.csv that bench/device_check.py writes" in err and "Errno" not in err, err
    assert "TRAIN_COLUMNS" not in err and "Error tokenizing" not in err, err  # no internal or parser names
    assert ", ".join(THROUGHPUT_COLUMNS) in err, err  # the columns it needs, named
    if kind == "markdown":
        assert "not a comma-separated table" in err, err


def test_the_throughput_columns_read_are_columns_device_check_writes():
    tree = ast.parse((SRC.parent / "bench" / "device_check.py").read_text(encoding="utf-8"))
    written = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and [getattr(t, "id", None) for t in node.targets] == ["TRAIN_COLUMNS"])
    assert set(THROUGHPUT_COLUMNS) <= set(written), set(THROUGHPUT_COLUMNS) - set(written)


def test_sweep_estimate_splits_runs_to_train_from_runs_to_reevaluate(tmp_path, capsys):
    specs = plan("smoke", "base_grid")
    (v1, _), done, reeval, partial = specs[0].evals, specs[0], specs[1], specs[2]
    rows = (list(done.obs_ids)  # every row: nothing to do
            + [reeval.obs_id(p, v1) for p in (None, *reeval.ptq)]  # complete at v1, no v2 row
            + [partial.obs_id(None, v1)])  # an interrupted run: trained again, counted "to train"
    _write_obs(tmp_path / "runs" / "smoke" / "base_grid.csv", rows)
    assert main(["sweep", "--estimate", "--profile", "smoke", "--experiments", "base_grid", "--tflops", "1",
                 "--data-root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert _columns(lines[1])[:3] == ["experiment", "to train", "to re-evaluate"]
    base = _columns(next(line for line in lines if line.startswith("base_grid")))
    assert base[1:3] == [str(len(specs) - 2), "1"]
    tokens = sum(s.train.tokens_trained for s in specs[1:])  # both groups at full training cost
    assert base[3] == f"{tokens:,}"
    notes = [line.split(":", 1)[0] for line in lines if not line.startswith(("estimate", "experiment", "base_grid",
                                                                             "total"))]
    assert notes == ["to train", "to re-evaluate", "tokens, FLOPs and hours"], lines
    assert "runs not yet in the CSVs" not in "\n".join(lines)
    assert main(["estimate", "--profile", "smoke", "--experiments", "base_grid", "--tflops", "1",
                 "--data-root", str(tmp_path)]) == 0  # without --missing: every declared run, one column
    lines = capsys.readouterr().out.splitlines()
    assert _columns(lines[1])[:2] == ["experiment", "runs"] and _columns(lines[2])[:2] == ["base_grid", str(len(specs))]


@pytest.mark.parametrize("cmd", [["train", "--quiet"], ["export-hf"]])
@pytest.mark.parametrize("where", ["file", "below a file"])
def test_an_out_that_is_a_file_is_refused_naming_out_before_any_work(cmd, where, tmp_path, capsys):
    f = tmp_path / "README.md"
    f.write_text("a file\n", encoding="utf-8")
    out = f if where == "file" else f / "sub"
    assert _exit_code([*cmd, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith(f"error: --out {out} ") and err.count("\n") == 1, err
    assert ("is a file;" if where == "file" else f"cannot be made: {f} is a file;") in err, err
    assert "--out takes a folder (made if it is not there)" in err, err
    assert "--data-root" not in err and "--run-root" not in err and "finished runs" not in err, err
    assert "%|" not in err and captured.out == "", err  # no progress bar before the error
    assert f.read_text(encoding="utf-8") == "a file\n"


@pytest.mark.parametrize("flag, message", [
    ("--train.n_tokens=1000", "--train.n_tokens=1000 (TrainConfig.n_tokens) is less than one step"),
    ("--train.n_tokens=-5", "--train.n_tokens (TrainConfig.n_tokens) must be a positive int, got -5"),
    ("--train.beta2=1", "--train.beta1/--train.beta2 (TrainConfig.beta1/beta2) must be in [0, 1)"),
    ("--train.grad_clip=0", "--train.grad_clip (TrainConfig.grad_clip) must be > 0, got 0.0"),
    ("--train.eval_tokens=10", "--train.eval_tokens=10 (TrainConfig.eval_tokens) is shorter than one evaluation"),
    ("--model.d_model=36", "--model.d_model/--model.n_heads (ModelConfig.d_model/n_heads) = 36/4 = 9 (the head "
                           "size) must be even"),
    ("--model.norm_eps=0", "--model.norm_eps (ModelConfig.norm_eps) must be positive, got 0.0"),
    ("--ptq.bits=1", "--ptq.bits (RTNConfig.bits) must be an int in [2, 16], got 1"),
])
def test_train_errors_name_the_flag_with_the_config_field_after_it(flag, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    assert main(["train", flag, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_export_hf_shows_one_progress_bar_and_restores_transformers_settings(tmp_path, capsys):
    import shutil

    from transformers.utils import logging as hf_logging

    from bitlaws.study.claims import repo_root

    committed = sorted((repo_root() / "data" / "checkpoints" / "cpu").glob("*.safetensors"))[:2]
    root = tmp_path / "data"
    (root / "checkpoints" / "cpu").mkdir(parents=True)
    for f in committed:
        shutil.copy(f, root / "checkpoints" / "cpu" / f.name)
    hf_logging.set_verbosity_info()  # a user's own settings, to be given back
    hf_logging.enable_progress_bar()
    try:
        assert main(["export-hf", "--profile", "cpu", "--data-root", str(root), "--out", str(tmp_path / "hf")]) == 0
        assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == hf_logging.INFO
    finally:
        hf_logging.set_verbosity_warning()
    captured = capsys.readouterr()
    assert "export-hf:" in captured.err and f"{len(committed)}/{len(committed)}" in captured.err, captured.err
    assert "Writing model shards" not in captured.err + captured.out, captured.err
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [f.stem for f in committed]
    assert captured.out.startswith(f"wrote {len(committed)} Hugging Face folders")


def test_verdicts_json_without_check_is_refused_before_anything_is_written(tmp_path, capsys):
    # --json only shapes --check's output; alone it used to be ignored while the store was rewritten
    store = tmp_path / "verdicts.json"
    store.write_text("{}", encoding="utf-8")
    assert main(["verdicts", "--json", "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--json prints the recomputed grades of --check" in err and "`verdicts --check --json`" in err
    assert store.read_text(encoding="utf-8") == "{}"


def test_design_power_claims_are_the_candidates_claims_and_bad_ones_exit_2(capsys):
    from bitlaws.cli import DESIGN_CLAIMS
    from bitlaws.study.qat_design import CANDIDATES

    assert set(DESIGN_CLAIMS) == {c.claim for c in CANDIDATES}
    for bad in ("P4,Q1", "P4,P4", ""):
        assert _exit_code(["design-power", "--claims", bad]) == 2
        err = capsys.readouterr().err
        assert "claims must be distinct, comma-separated, of P4, P5, P9" in err and repr(bad) in err, err


def test_design_power_claims_reach_the_writer(monkeypatch, tmp_path, capsys):
    from bitlaws.study import qat_design

    seen = {}
    monkeypatch.setattr(qat_design, "write_design_power",
                        lambda profile, n_sim, root, claims: seen.update(claims=claims) or tmp_path / "t.csv")
    assert main(["design-power", "--claims", "P9,P4", "--profile", "smoke", "--data-root", str(tmp_path)]) == 0
    assert seen["claims"] == ["P9", "P4"]
    assert "rows of P9, P4 replaced, the others kept" in capsys.readouterr().out


def test_coverage_counts_runs_trained_after_the_data_freeze_apart_and_the_table_says_so(tmp_path, monkeypatch):
    from bitlaws.study import store

    specs = plan("smoke", "base_grid")
    (v1, _), a, b = specs[0].evals, specs[0], specs[1]
    path = tmp_path / "runs" / "smoke" / "base_grid.csv"
    _write_obs(path, [a.obs_id(None, v1), b.obs_id(None, v1)])
    text = path.read_text().splitlines()
    stamp = store.COLUMNS.index("timestamp")

    def stamped(line: str, when: str) -> str:
        cells = line.split(",")
        cells[stamp] = when
        return ",".join(cells)

    path.write_text("\n".join([text[0], stamped(text[1], "2026-12-01T00:00:00Z"),
                               stamped(text[2], "2026-12-09T00:00:00Z")]) + "\n")
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "smoke", "2026-12-06T08:00:00Z")
    cov = coverage("smoke", tmp_path, "base_grid")
    assert (cov["runs_trained"], cov["runs_after_freeze"], cov["freeze"]) == (1, 1, "2026-12-06T08:00:00Z")
    assert cov["obs_done_by_eval_version"][1] == 1  # the later row is not counted as read
    lines = coverage_table([cov]).splitlines()
    assert _columns(lines[0])[-1] == "trained after the freeze" and _columns(lines[1])[-1] == "1"
    assert "read from the next refit" in lines[-1] and "2026-12-06T08:00:00Z" in lines[-1]
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "smoke", None)
    cov = coverage("smoke", tmp_path, "base_grid")
    assert (cov["runs_trained"], cov["runs_after_freeze"], cov["freeze"]) == (2, 0, None)
    assert "trained after the freeze" not in coverage_table([cov])


def test_until_on_the_command_line_reads_a_fresh_folders_rows_and_refuses_a_bad_time(tmp_path, monkeypatch, capsys):
    """A --data-root of one's own (a retraining from scratch) has only rows newer than the repository's freeze:
    `--until all` reads them; a bad time is named as --until's value and nothing runs."""
    from bitlaws.study import store

    monkeypatch.delenv("BITLAWS_UNTIL", raising=False)
    folder = tmp_path / "runs" / "cpu"
    spec = plan("cpu", "base_grid")[0]
    store.append_rows(folder / "base_grid.csv", [{
        "run_id": spec.run_id, "obs_id": o, "experiment": "base_grid", "profile": "cpu", "corpus": "x",
        "size": spec.size, "seed": spec.train.seed, "n_params": 1, "n_tokens": spec.train.n_tokens, "d_model": 1,
        "n_layers": 1, "fmt_w": "bf16", "fmt_a": "bf16", "fmt_kv": "bf16", "bits_w": 16, "bits_a": 16, "bits_kv": 16,
        "ptq_method": "none", "quant_scheme": "none", "fmt_post": "none", "bits_post": 16, "group_size": 0,
        "eval_version": 2, "loss_val": 1.0, "status": "ok", "steps": 1, "threads": 1,
        "timestamp": "2099-01-01T00:00:00Z"} for o in spec.obs_ids[:1]])
    assert main(["coverage", "--profile", "cpu", "--data-root", str(tmp_path), "--json"]) == 0
    seen = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert next(r for r in seen if r["experiment"] == "base_grid").get("runs_after_freeze") == 1
    monkeypatch.setenv("BITLAWS_UNTIL", "")  # main sets the variable for the process: undone after the test
    assert main(["coverage", "--profile", "cpu", "--data-root", str(tmp_path), "--json", "--until", "all"]) == 0
    seen = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert next(r for r in seen if r["experiment"] == "base_grid")["runs_trained"] == 1
    assert _exit_code(["coverage", "--profile", "cpu", "--data-root", str(tmp_path), "--until", "noon"]) == 2
    assert "bad until='noon'" in capsys.readouterr().err


def test_verdicts_refuses_to_write_from_stale_tables_and_names_them(tmp_path, monkeypatch, capsys):
    from bitlaws.study import cascade

    monkeypatch.delenv("BITLAWS_DATA", raising=False)
    _fake_verdicts(monkeypatch, [])
    root = tmp_path / "data"
    root.mkdir()
    steps = [cascade.Step("fit", "fit", cascade.CLI, current=False, why="cpu_chinchilla.json: other rows"),
             cascade.Step("p3_power.paper", "p3_power", "x.y", current=True, why="ok"),
             cascade.Step("verdicts", "verdicts", cascade.CLI, current=False, why="not checked")]
    monkeypatch.setattr(cascade, "cascade_plan", lambda profile, root=None, check_verdicts=True: steps)
    assert main(["verdicts", "--data-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "1 table(s) the verdicts read were made from other training rows" in err
    assert "fit (cpu_chinchilla.json: other rows)" in err and "p3_power" not in err and "cascade --profile cpu" in err
    assert not (root / "verdicts.json").exists()  # nothing written
    assert main(["verdicts", "--allow-stale", "--data-root", str(root)]) == 0
    assert (root / "verdicts.json").is_file()
    capsys.readouterr()
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 0  # a check reads, and says what is stale
    assert "stale input: fit (cpu_chinchilla.json: other rows)" in capsys.readouterr().err
    steps[0] = cascade.Step("fit", "fit", cascade.CLI, current=True, why="ok")
    assert main(["verdicts", "--data-root", str(root)]) == 0  # every table current: written

    def refused(profile, root=None, check_verdicts=True):
        raise ValueError("the freeze cuts run r1 in two")

    monkeypatch.setattr(cascade, "cascade_plan", refused)  # a plan the cascade refuses: a check says so and reads
    capsys.readouterr()
    assert main(["verdicts", "--check", "--data-root", str(root)]) == 0
    assert "stale input: the cascade's plan could not be read (the freeze cuts run r1 in two)" in capsys.readouterr().err
    assert main(["verdicts", "--data-root", str(root)]) == 2  # and a write stops, naming it
    assert "the freeze cuts run r1 in two" in capsys.readouterr().err


def test_no_command_and_a_missing_file_are_named_for_what_they_are(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "arguments are required: command" in capsys.readouterr().err  # what it is, not an abbreviation
    missing = tmp_path / "nope.csv"
    assert main(["migrate-store", str(missing), "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"migrate-store: no such file: {missing}" in err and "Traceback" not in err

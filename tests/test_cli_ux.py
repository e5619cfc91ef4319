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
from bitlaws.study.sweep import coverage, coverage_table, declared_experiments, plan

SRC = Path(__file__).resolve().parents[1] / "src"


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_coverage_table_counts_done_over_planned_with_a_total():
    covs = [{"experiment": "base_grid", "runs_done": 1, "runs_planned": 3, "obs_done": 5, "obs_planned": 12,
             "runs_done_by_eval_version": {1: 2, 2: 1}, "obs_done_by_eval_version": {1: 4, 2: 1},
             "obs_planned_by_eval_version": {1: 6, 2: 6}},
            {"experiment": "qat_marginal", "runs_done": 0, "runs_planned": 2, "obs_done": 2, "obs_planned": 4,
             "runs_done_by_eval_version": {"1": 2, "2": 0}, "obs_done_by_eval_version": {"1": 2, "2": 0},
             "obs_planned_by_eval_version": {"1": 2, "2": 2}}]  # JSON's string keys read alike
    lines = [line.split() for line in coverage_table(covs).splitlines()]
    assert lines[0] == ["experiment", "runs", "observations", "v1", "runs", "v1", "observations", "v2", "runs",
                        "v2", "observations"]
    assert lines[1] == ["base_grid", "1/3", "5/12", "2/3", "4/6", "1/3", "1/6"]
    assert lines[2] == ["qat_marginal", "0/2", "2/4", "2/2", "2/2", "0/2", "0/2"]
    assert lines[3] == ["total", "1/5", "7/16", "4/5", "6/8", "1/5", "1/8"]
    with pytest.raises(ValueError, match="at least one coverage record"):
        coverage_table([])


def test_coverage_prints_the_table_by_default_and_json_with_a_flag(tmp_path, capsys):
    assert main(["coverage", "--profile", "smoke", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert str(tmp_path / "runs" / "smoke") in out[0]
    rows = {line.split()[0]: line.split() for line in out[2:]}
    declared = declared_experiments("smoke")
    assert list(rows) == [*declared, "total"]
    for exp in declared:  # an empty data folder: nothing done of what the profile plans
        specs = plan("smoke", exp)
        n_obs = sum(len(s.obs_ids) for s in specs)
        assert rows[exp][1:3] == [f"0/{len(specs)}", f"0/{n_obs}"], rows[exp]
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
                                  ["migrate-store"], ["design-power"], ["export-hf"]])
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
        " ['train', '--model.size=nope'], ['train', '--train.lr=abc']):\n"
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

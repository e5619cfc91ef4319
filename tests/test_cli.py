"""Tests for bitlaws.cli: dotted overrides and the `train` command end to end on a micro model."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Optional

import pandas as pd
import pytest
import torch

from bitlaws.cli import apply_overrides, main
from bitlaws.model import ModelConfig
from bitlaws.train import TrainConfig, peak_lr_rule

torch.set_num_threads(1)


@dataclass(frozen=True)
class _Opts:
    flag: bool = False
    count: int = 1
    rate: float = 0.5
    limit: Optional[int] = 3
    cap: float | None = 1.0
    name: str = "x"


def test_apply_overrides_converts_types():
    o = apply_overrides(_Opts(), "o", {"o.flag": "true", "o.count": "2e6", "o.rate": "1e-3", "o.limit": "None",
                                       "o.cap": "null", "o.name": "abc", "other.count": "7"})
    assert o == _Opts(flag=True, count=2_000_000, rate=1e-3, limit=None, cap=None, name="abc")
    assert type(o.count) is int and type(o.rate) is float
    for text, want in [("1", True), ("yes", True), ("False", False), ("0", False), ("no", False)]:
        assert apply_overrides(_Opts(), "o", {"o.flag": text}).flag is want
    assert apply_overrides(_Opts(), "o", {"o.limit": "4.0"}).limit == 4
    assert apply_overrides(_Opts(), "o", {"o.cap": "2"}).cap == 2.0
    assert apply_overrides(_Opts(), "o", {}) == _Opts()


def test_apply_overrides_real_configs():
    t = apply_overrides(TrainConfig(), "train", {"train.n_tokens": "2e6", "train.lr": "2e-3", "train.seed": "3"})
    assert (t.n_tokens, t.lr, t.seed) == (2_000_000, 2e-3, 3)
    assert apply_overrides(t, "train", {"train.lr": "none"}).lr is None
    m = apply_overrides(ModelConfig(), "model", {"model.d_model": "96", "model.n_heads": "6"})
    assert (m.d_model, m.n_heads, m.head_size) == (96, 6, 16)


@pytest.mark.parametrize("overrides, pattern", [
    ({"o.count": "1.5"}, r"--o\.count: cannot read '1\.5' as int"),
    ({"o.rate": "abc"}, r"--o\.rate: cannot read 'abc' as float"),
    ({"o.flag": "maybe"}, r"--o\.flag: cannot read 'maybe' as bool"),
    ({"o.limit": "many"}, r"--o\.limit: cannot read 'many' as int"),
    ({"o.count": "None"}, r"--o\.count"),  # not Optional
])
def test_apply_overrides_bad_values(overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        apply_overrides(_Opts(), "o", overrides)


def test_apply_overrides_unknown_field_lists_valid():
    with pytest.raises(ValueError, match=r"unknown option --o\.bogus") as err:
        apply_overrides(_Opts(), "o", {"o.bogus": "1"})
    assert "cap, count, flag, limit, name, rate" in str(err.value)


def test_apply_overrides_runs_validation():
    with pytest.raises(ValueError, match=r"TrainConfig\.warmup_frac"):
        apply_overrides(TrainConfig(), "train", {"train.warmup_frac": "1"})


def test_cli_train_end_to_end(tmp_path, corpus_cache, monkeypatch, capsys):
    monkeypatch.setenv("BITLAWS_CACHE", str(corpus_cache))
    out = tmp_path / "out"
    rc = main(["train", "--model.size=n3k", "--train.n_tokens=16384", "--train.batch_size=8",
               "--train.seq_len=64", "--train.eval_tokens=4160", "--ptq.bits=3,8", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    csvs = list(out.glob("custom/*/rows.csv"))
    assert len(csvs) == 1
    run_dir = csvs[0].parent
    rows = pd.read_csv(csvs[0])
    assert len(rows) == 3
    assert list(rows["ptq_method"]) == ["none", "rtn", "rtn"]
    assert list(rows["bits_post"]) == [16, 3, 8]
    assert list(rows["fmt_post"]) == ["none", "int3", "int8"] and set(rows["fmt_w"]) == {"none"}
    assert list(rows["quant_scheme"]) == ["none", "asym_per_channel", "asym_per_channel"]
    assert set(rows["status"]) == {"ok"}
    assert set(rows["n_tokens"]) == {16384} and set(rows["steps"]) == {32} and set(rows["n_params"]) == {3376}
    assert rows["run_id"].nunique() == 1 and rows["obs_id"].nunique() == 3
    assert rows["run_id"][0] == run_dir.name
    base = rows["loss_val"][0]
    assert 0 < base < math.log(256)
    assert rows["delta_ptq"][0] == 0.0
    for i in (1, 2):  # delta is the quantized loss minus the base loss (CSV keeps 6 significant digits)
        assert rows["delta_ptq"][i] == pytest.approx(rows["loss_val"][i] - base, abs=2e-5)
    assert rows["delta_ptq"][1] > rows["delta_ptq"][2]  # 3 bits hurt more than 8

    cfg = json.loads((run_dir / "run_config.json").read_text())
    assert cfg["train"]["lr"] == peak_lr_rule(16)
    assert cfg["train"]["n_tokens"] == 16384 and cfg["model"]["d_model"] == 16
    assert cfg["status"] == "ok" and cfg["run_id"] == run_dir.name
    assert (run_dir / "model.safetensors").stat().st_size > 0
    assert not (run_dir / "state.pt").exists()
    assert "rtn" in captured.out and "loss_val=" in captured.out


@pytest.mark.parametrize("argv, field", [
    (["--model.d_model=30"], r"--model\.d_model=30 \(ModelConfig\.d_model\) must be divisible by "
                             r"--model\.n_heads=4 \(ModelConfig\.n_heads\)"),
    (["--train.lr=abc"], r"--train\.lr: cannot read 'abc'"),
    (["--bogus.x=1"], r"--bogus\.x"),
    (["--train.bogus=1"], r"--train\.bogus.*batch_size"),
    (["--model.size=nope"], r"unknown model size 'nope'.*n27k"),
    (["--ptq.group=4"], r"ptq\.group"),
    (["--train.lr"], r"--train\.lr needs a value"),
    (["stray"], r"unexpected argument 'stray'"),
    (["--ptq.bits=abc"], r"--ptq\.bits: expected comma-separated integers"),
    (["--ptq.bits=1"], r"--ptq\.bits \(RTNConfig\.bits\) must be an int in \[2, 16\]"),
    (["--train.eval_tokens=10"], r"--train\.eval_tokens=10 \(TrainConfig\.eval_tokens\) is shorter than one "
                                 r"evaluation window"),
    (["--train.n_tokens=1e9"], r"exceeds 4 passes"),
])
def test_cli_bad_override_exits_2(argv, field, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    rc = main(["train", *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ")
    assert re.search(field, err), err
    assert not (tmp_path / "out").exists()  # nothing trained or written


def test_cli_offline_corpus_exits_2_naming_the_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = main(["train", "--train.corpus=tinystories", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "shakespeare" in err and "Traceback" not in err


def exit_code(argv: list[str]) -> int:
    """main's status, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("argv, pattern", [
    (["sweep", "--profile", "smoke", "--limit", "-1"], r"--limit: must be an integer ≥ 0, got -1"),
    (["sweep", "--profile", "smoke", "--limit", "2.5"], r"--limit: expected an integer ≥ 0, got '2.5'"),
    (["sweep", "--profile", "smoke", "--threads", "0"], r"--threads: must be an integer ≥ 1, got 0"),
    (["sweep", "--profile", "smoke", "--workers", "0"], r"--workers: must be an integer ≥ 1, got 0"),
    (["sweep", "--profile", "smoke", "--executor", "ray"], r"unknown executor 'ray'"),
    (["sweep", "--profile", "smoke", "--experiments", ""], r"--experiments: no experiment named in ''.*base_grid"),
    (["sweep", "--profile", "smoke", "--experiments", ",,"], r"--experiments: no experiment named in ',,'"),
    (["sweep", "--profile", "smoke", "--experiments", "base_grid,nope"], r"declares no experiment \['nope'\]"),
])
def test_cli_sweep_bad_input_exits_2(argv, pattern, tmp_path, capsys):
    rc = exit_code([*argv, "--data-root", str(tmp_path / "data"), "--run-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and re.search(pattern, err), err
    assert "Traceback" not in err
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, pattern", [
    (["fit", "--profile", "smoke", "--boot", "-1"], r"--boot: must be an integer ≥ 1, got -1"),
    (["fit", "--profile", "smoke", "--boot", "0"], r"--boot: must be an integer ≥ 1, got 0"),
    (["quik", "--profile", "smoke", "--limit", "-1"], r"--limit: must be an integer ≥ 0, got -1"),
    (["quik", "--profile", "smoke", "--threads", "0"], r"--threads: must be an integer ≥ 1, got 0"),
    (["quik", "--profile", "smoke", "--threads", "x"], r"--threads: expected an integer ≥ 1, got 'x'"),
])
def test_cli_fit_and_quik_counts_are_range_checked(argv, pattern, tmp_path, capsys):
    rc = exit_code([*argv, "--data-root", str(tmp_path / "data")])
    err = capsys.readouterr().err
    assert rc == 2 and re.search(pattern, err), err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("flag", ["--train.max_epochs=nan", "--train.grad_clip=nan", "--train.weight_decay=nan",
                                  "--train.eps=nan", "--train.lr=inf", "--train.max_epochs=inf",
                                  "--train.warmup_frac=nan"])
def test_cli_train_refuses_non_finite_numbers(flag, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    rc = main(["train", flag, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    name = flag.split("=")[0]
    assert rc == 2 and f"{name}: " in err and "is not a finite number" in err, err
    assert not (tmp_path / "out").exists()


def test_train_config_refuses_nan_in_every_float_field():
    for f in ("warmup_frac", "min_lr_frac", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "max_epochs"):
        with pytest.raises(ValueError, match=rf"TrainConfig\.{f} must be a finite number, got nan"):
            TrainConfig(**{f: float("nan")})
    with pytest.raises(ValueError, match=r"TrainConfig\.seed must be an int ≥ 0"):
        TrainConfig(seed=-1)


def test_cli_train_into_a_file_exits_2_before_training(tmp_path, monkeypatch, capsys):
    import bitlaws.study.sweep as sweep_mod

    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sweep_mod, "train", lambda *a, **k: pytest.fail("trained before checking the output"))
    (tmp_path / "out").write_text("a file where the folder should be")
    rc = main(["train", "--model.size=n3k", "--train.n_tokens=16384", "--train.batch_size=8",
               "--train.seq_len=64", "--train.eval_tokens=4160", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and f"--out {tmp_path / 'out'} is a file; --out takes a folder" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("cmd", ["sweep", "coverage", "verdicts", "export-checkpoints", "fit", "quik"])
def test_cli_unknown_profile_exits_2_listing_the_profiles(cmd, tmp_path, capsys):
    # argparse refuses it before anything runs, so no command can point at a sweep that cannot exist
    with pytest.raises(SystemExit) as exc:
        main([cmd, "--profile", "tpu"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'tpu'" in err and "'cpu'" in err and "'smoke'" in err, err


def test_cli_train_help_lists_every_field(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for name in ("--model.d_model", "--model.size", "--train.n_tokens", "--train.lr", "--ptq.bits", "n554k"):
        assert name in out, name

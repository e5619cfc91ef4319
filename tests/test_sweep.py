"""The resumable sweep runner on the `smoke` profile: end to end (train → RTN → rows), killed with
SIGKILL mid-run and resumed, and through submitit's local executor."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bitlaws.model import SMOKE_LADDER, hand_count_n_params
from bitlaws.ptq.rtn import RTNConfig
from bitlaws.study.sweep import PROFILES, RunSpec, base_grid, plan, run_sweep

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory):
    """One uninterrupted smoke sweep, the reference for the others."""
    root = tmp_path_factory.mktemp("unbroken")
    cov = run_sweep("smoke", data_root=root / "data", run_root=root / "runs", progress=False)
    return cov, pd.read_csv(root / "data" / "runs" / "smoke" / "base_grid.csv"), root


def test_smoke_end_to_end(unbroken):
    cov, all_rows, _ = unbroken
    specs = plan("smoke")
    smoke = PROFILES["smoke"]
    assert cov["runs_done"] == cov["runs_planned"] == len(specs)
    assert cov["runs_done_by_eval_version"] == {v: len(specs) for v in smoke.eval_versions}
    assert sum(cov["obs_done_by_eval_version"].values()) == cov["obs_done"]
    assert len(all_rows) == sum(len(s.obs_ids) for s in specs) and all_rows["obs_id"].is_unique
    assert sorted(all_rows["eval_version"].unique()) == list(smoke.eval_versions) == [1, 2]
    for version, df in all_rows.groupby("eval_version"):
        assert (df["status"] == "ok").all()
        # Every model learned something: well below the uniform byte distribution (ln 256 ≈ 5.55).
        assert df["loss_val"].max() < math.log(256) - 1.5
        # δ_PTQ is defined against the same run's unquantized loss at the same evaluation.
        base = df[df["ptq_method"] == "none"].set_index("run_id")["loss_val"]
        q = df[df["ptq_method"] == "rtn"]
        assert ((q["loss_val"] - q["run_id"].map(base) - q["delta_ptq"]).abs() < 1e-5).all()
        # Fewer bits hurt more: INT3 degrades more than INT8 on average and in most runs (micro models
        # at an INT3 δ of ~1e-3 nats can come out below zero on one evaluation's windows).
        by_bits = q.pivot(index="run_id", columns="bits_post", values="delta_ptq")
        assert (by_bits[3] > by_bits[8]).mean() >= 0.8 and by_bits[3].mean() > by_bits[8].mean()
        # More data helps before quantization at every size.
        hp = df[(df["ptq_method"] == "none") & (df["seed"] == 0)].sort_values("n_tokens")
        for _, s in hp.groupby("n_params"):
            assert s["loss_val"].is_monotonic_decreasing
        # Keys: one run_id per training config, obs_ids distinct per PTQ config.
        assert df.groupby("run_id")["obs_id"].nunique().eq(1 + len(smoke.bits_post) + len(smoke.gptq_bits)).all()
        # fmt_w is the training format (none: high precision), fmt_post the PTQ format.
        assert (df["fmt_w"] == "none").all()
        assert (df["fmt_post"] == np.where(df["ptq_method"] == "none", "none", "int" + df["bits_post"].astype(str))).all()
        # GPTQ on the same grid beats RTN at 3 bits in most runs (it minimises the layer output error)
        g = df[df["ptq_method"] == "gptq"].pivot(index="run_id", columns="bits_post", values="delta_ptq")
        assert (g[3] < by_bits[3]).mean() >= 0.5
    # The two evaluations read different windows of the same split: other numbers, the same model.
    hp = all_rows[all_rows["ptq_method"] == "none"].pivot(index="run_id", columns="eval_version", values="loss_val")
    assert (hp[1] != hp[2]).all() and ((hp[1] - hp[2]).abs() < 0.3).all()


def _rows(path: Path) -> int:
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _cli(root: Path) -> list[str]:
    return [sys.executable, "-m", "bitlaws", "sweep", "--profile", "smoke", "--threads", "1",
            "--data-root", str(root / "data"), "--run-root", str(root / "runs")]


def test_sigkill_mid_training_then_resume_loses_and_duplicates_nothing(tmp_path, unbroken):
    _, ref, _ = unbroken
    csv = tmp_path / "data" / "runs" / "smoke" / "base_grid.csv"
    env = {**os.environ, "TQDM_DISABLE": "1"}
    proc = subprocess.Popen(_cli(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 120
    killed_with_state = False
    try:
        # Kill once a run's rows are written AND another run is mid-training (its checkpoint exists).
        while time.time() < deadline and proc.poll() is None:
            if _rows(csv) >= 1 and any((tmp_path / "runs").rglob("state.pt")):
                proc.send_signal(signal.SIGKILL)
                killed_with_state = True
                break
            time.sleep(0.02)
    finally:
        proc.wait(timeout=60)
    assert killed_with_state, "the sweep finished before it could be killed mid-run"
    partial = pd.read_csv(csv)
    partial_text = csv.read_text()
    assert 0 < len(partial) < len(ref)
    assert list(tmp_path.joinpath("runs").rglob("state.pt")), "the killed run left its checkpoint"
    # Resume: only the missing runs train; the finished runs are not repeated.
    done = subprocess.run(_cli(tmp_path), capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = pd.read_csv(csv)
    assert resumed["obs_id"].is_unique
    assert set(resumed["obs_id"]) == set(ref["obs_id"])
    # The rows written before the kill are untouched: the old file is a prefix of the new one.
    text_partial = partial_text
    assert csv.read_text().startswith(text_partial)
    # Resumed training (from the mid-run checkpoint) is bit-identical to the unbroken sweep.
    a = resumed.set_index("obs_id").sort_index()
    b = ref.set_index("obs_id").sort_index()
    assert (a["loss_val"] == b["loss_val"]).all()
    assert (a["loss_train"] == b["loss_train"]).all()
    assert not list(tmp_path.joinpath("runs").rglob("state.pt")), "checkpoints are removed once a run is done"


def test_submitit_local_executor_matches_inline(tmp_path, unbroken):
    _, ref, _ = unbroken
    cov = run_sweep("smoke", executor="submitit-local", workers=2, limit=2, data_root=tmp_path / "data",
                    run_root=tmp_path / "runs", progress=False, experiments=["base_grid"])
    assert cov["runs_done"] == 2
    got = pd.read_csv(tmp_path / "data" / "runs" / "smoke" / "base_grid.csv").set_index("obs_id")
    want = ref.set_index("obs_id").loc[got.index]
    assert (got["loss_val"] == want["loss_val"]).all()
    # A rerun with nothing left to do (limit=0) writes nothing.
    csv = tmp_path / "data" / "runs" / "smoke" / "base_grid.csv"
    before = csv.read_bytes()
    run_sweep("smoke", executor="submitit-local", limit=0, data_root=tmp_path / "data",
              run_root=tmp_path / "runs", progress=False, experiments=["base_grid"])
    assert csv.read_bytes() == before


def test_declared_grids_and_bad_input():
    cpu = PROFILES["cpu"]
    specs = base_grid(cpu)
    # ≥ 4 sizes × ≥ 5 budgets, plus 2 extra seeds at each seed cell.
    assert len(cpu.sizes) >= 4 and len(cpu.budgets) >= 5
    assert len(specs) == (len(cpu.sizes) * len(cpu.budgets) + len(cpu.seed_cells) * len(cpu.extra_seeds)
                          + len(cpu.extra_cells))
    # No budget past 4 passes over the training split (4.6 M bytes).
    assert max(s.train.n_tokens for s in specs) <= 4 * 4_600_028
    assert len({s.run_id for s in specs}) == len(specs)
    d_over_n = [s.train.n_tokens / hand_count_n_params(s.model) for s in specs]
    assert max(d_over_n) / min(d_over_n) >= 100, "D/N must span two decades"
    # run_id ignores the thread count (results are identical across it) but not the seed.
    s = specs[0]
    same = RunSpec(s.experiment, s.profile, s.size, s.model, s.train.replace(threads=7), s.ptq)
    other = RunSpec(s.experiment, s.profile, s.size, s.model, s.train.replace(seed=9), s.ptq)
    assert same.run_id == s.run_id and other.run_id != s.run_id
    assert s.obs_id(RTNConfig(bits=3)) != s.obs_id(RTNConfig(bits=4)) != s.obs_id(None)
    with pytest.raises(ValueError, match="allowed"):
        plan("tpu")
    with pytest.raises(ValueError, match="executor"):
        run_sweep("smoke", executor="ray")
    with pytest.raises(ValueError, match="allowed"):
        plan("smoke", "qat_everything")
    with pytest.raises(ValueError, match="declares no experiment"):
        run_sweep("smoke", experiments=["base_grid", "qat_everything"])


def test_local_process_pool_matches_inline(tmp_path, unbroken):
    _, ref, _ = unbroken
    cov = run_sweep("smoke", executor="local", workers=2, limit=2, data_root=tmp_path / "data",
                    run_root=tmp_path / "runs", progress=False, experiments=["base_grid"])
    assert cov["runs_done"] == 2
    got = pd.read_csv(tmp_path / "data" / "runs" / "smoke" / "base_grid.csv")
    assert got["obs_id"].is_unique
    want = ref.set_index("obs_id").loc[got["obs_id"]]
    assert (got["loss_val"].to_numpy() == want["loss_val"].to_numpy()).all()


def test_exported_checkpoint_is_the_trained_model_in_bf16(tmp_path_factory, unbroken):
    import torch
    from safetensors.torch import load_file

    from bitlaws.study.checkpoints import checkpoint_name, export_checkpoints, load_checkpoint
    from bitlaws.corpus import load_corpus
    from bitlaws.train import evaluate

    _, ref, root = unbroken
    dest = tmp_path_factory.mktemp("ckpt")
    written = export_checkpoints(ref, root / "runs", dest)
    base = ref[(ref["ptq_method"] == "none") & (ref["seed"] == 0)]
    assert len(written) == len(base)
    assert export_checkpoints(ref, root / "runs", dest) == []  # idempotent
    r = base.iloc[0]
    model, meta = load_checkpoint(dest / checkpoint_name(r["size"], r["n_tokens"], 0))
    assert meta["run_id"] == r["run_id"]
    fp32 = load_file(root / "runs" / "smoke" / r["run_id"] / "model.safetensors")
    for k, v in model.state_dict().items():
        assert torch.equal(v, fp32[k].to(torch.bfloat16).float()), k
    # bf16 rounding moves the validation loss by little, not by nothing.
    spec = next(s for s in plan("smoke") if s.run_id == r["run_id"])
    loss = evaluate(model, load_corpus("shakespeare").val, spec.train.seq_len, spec.train.eval_tokens)
    assert abs(loss - r["loss_val"]) < 0.02
    with pytest.raises(ValueError, match="MiB"):
        export_checkpoints(ref, root / "runs", tmp_path_factory.mktemp("small"), max_total_bytes=1000)


def test_high_precision_run_ids_unchanged_by_the_precision_field():
    """Adding the training precision to run_id must not re-key the committed base grid."""
    committed = pd.read_csv(Path(__file__).parents[1] / "data" / "runs" / "cpu" / "base_grid.csv")
    planned = {s.run_id: s for s in plan("cpu")}
    assert set(committed["run_id"]) <= set(planned)
    # The runs not committed yet are only the extra seeds of the seed cells (issue 15, item 2).
    cells = set(PROFILES["cpu"].seed_cells)
    for rid in set(planned) - set(committed["run_id"]):
        s = planned[rid]
        assert s.train.seed in PROFILES["cpu"].extra_seeds and (s.size, s.train.n_tokens) in cells, (s.size, s.train)


def test_qat_runs_record_their_precision(unbroken):
    _, _, root = unbroken
    df = pd.read_csv(root / "data" / "runs" / "smoke" / "qat_marginal.csv")
    df = df[df["eval_version"] == 1]
    specs = {s.run_id: s for s in plan("smoke", "qat_marginal")}
    assert set(df["run_id"]) == set(specs)
    for _, r in df[df["ptq_method"] == "none"].iterrows():
        p = specs[r["run_id"]].precision
        assert (r["bits_w"], r["bits_a"], r["bits_kv"]) == (p.bits("w"), p.bits("a"), p.bits("kv"))
        assert (r["fmt_w"], r["fmt_a"], r["fmt_kv"]) == (p.fmt("w"), p.fmt("a"), p.fmt("kv"))
        # exactly one part is quantized in the marginal sweep
        assert sum(b < 16 for b in (r["bits_w"], r["bits_a"], r["bits_kv"])) == 1
    # QAT→PTQ pairs: post-training bits below the training bits, δ against the same run
    pairs = df[df["ptq_method"] == "rtn"]
    assert len(pairs) and (pairs["bits_post"] < pairs["bits_w"]).all()
    base = df[df["ptq_method"] == "none"].set_index("run_id")["loss_val"]
    assert ((pairs["loss_val"] - pairs["run_id"].map(base) - pairs["delta_ptq"]).abs() < 1e-5).all()


def test_a_new_ptq_reuses_the_saved_checkpoint(unbroken, tmp_path, monkeypatch):
    """Observations missing for a finished run are computed from its saved model, not retrained."""
    import shutil

    import bitlaws.study.sweep as sweep_mod

    _, _, root = unbroken
    shutil.copytree(root / "data", tmp_path / "data")
    csv = tmp_path / "data" / "runs" / "smoke" / "qat_marginal.csv"
    full = pd.read_csv(csv)
    pairs = full[full["ptq_method"] == "rtn"]
    full[full["ptq_method"] != "rtn"].to_csv(csv, index=False)

    def no_training(*a, **k):
        raise AssertionError("retrained a run whose checkpoint was saved")

    monkeypatch.setattr(sweep_mod, "train", no_training)
    run_sweep("smoke", data_root=tmp_path / "data", run_root=root / "runs", progress=False,
              experiments=["qat_marginal"])
    again = pd.read_csv(csv).set_index("obs_id")
    assert set(again.index) == set(full["obs_id"])
    for _, r in pairs.iterrows():
        # exactly as the unbroken run: δ is taken against the base loss the run recorded beside its
        # checkpoint at full precision (main took the CSV's, rounded to 6 digits: off by up to 3e-6)
        assert again.loc[r["obs_id"], "loss_val"] == r["loss_val"]
        assert again.loc[r["obs_id"], "delta_ptq"] == r["delta_ptq"]


def test_the_store_knows_every_declared_profile():
    from bitlaws.study.store import PROFILE_NAMES
    from bitlaws.study.sweep import PROFILES

    assert set(PROFILE_NAMES) == set(PROFILES)


def test_the_store_knows_every_experiment_each_profile_declares():
    from bitlaws.study import DECLARED_EXPERIMENTS, EXPERIMENT_NAMES
    from bitlaws.study.sweep import EXPERIMENTS, PROFILES, declared_experiments

    assert EXPERIMENT_NAMES == EXPERIMENTS
    assert DECLARED_EXPERIMENTS == {p: tuple(declared_experiments(p)) for p in PROFILES}


def test_design_checks_read_the_confound_sweeps(unbroken):
    """The lr_peak, lr_schedule and repetition sweeps of the smoke profile, through design_checks."""
    from bitlaws.corpus import load_corpus
    from bitlaws.study.design_checks import lr_rule_check, repetition_table, schedule_slopes, schedule_table
    from bitlaws.train import peak_lr_rule

    _, _, root = unbroken
    folder = root / "data" / "runs" / "smoke"
    base = pd.read_csv(folder / "base_grid.csv")
    base = base[base["eval_version"] == 2]
    c = PROFILES["smoke"].confounds
    lr = pd.read_csv(folder / "lr_peak.csv")
    lr = lr[lr["eval_version"] == 2]
    check = lr_rule_check(base, lr)
    assert list(check["size"]) == list(c.lr_sizes)
    rule = peak_lr_rule(SMOKE_LADDER["n3k"].d_model)
    assert sorted(lr["lr_peak"].unique()) == sorted(m * rule for m in c.lr_multipliers)
    assert (check["gap"] >= 0).all() and check["lr_best"].isin([rule] + [m * rule for m in c.lr_multipliers]).all()
    sched = pd.read_csv(folder / "lr_schedule.csv")
    tab = schedule_table(sched[sched["eval_version"] == 2], base, method="rtn")
    wsd, const = tab[tab["schedule"] == "wsd"], tab[tab["schedule"] == "constant"]
    assert len(wsd) == len(const) == len(c.schedule_budgets) * len(c.ptq_bits)
    assert sorted(wsd["d_branch"]) == sorted(const["n_tokens"])  # each cooldown names its branch point
    assert (wsd["n_tokens"] - wsd["d_branch"] == c.cooldown_tokens).all()
    assert set(schedule_slopes(tab)["schedule"]) == {"constant", "wsd", "cosine"}
    rep = pd.read_csv(folder / "repetition.csv")
    rt = repetition_table(base, rep[rep["eval_version"] == 2], method="rtn")
    n_train = len(load_corpus("shakespeare").train)
    assert set(rt["train_fraction"]) == {1.0, *c.repetition_fractions}
    assert np.allclose(rt["passes"], rt["n_tokens"] / (n_train * rt["train_fraction"]), rtol=0, atol=0)


def test_mechanism_ablation_plan_is_the_factorial_cell_with_new_run_ids():
    """P5's mechanism ablation (qat_mechanism): every variant at the factorial's cell and seeds, its
    flags in the run_id (so no run is another sweep's model), weights 16-bit."""
    from bitlaws.study.sweep import MECHANISM_VARIANTS, PROFILES, _BUILDERS

    pp = PROFILES["cpu"].power_design
    specs = plan("cpu", "qat_mechanism")
    assert len(specs) == len(MECHANISM_VARIANTS) * len(pp.factorial_seeds) == 18
    assert {(s.size, s.train.n_tokens) for s in specs} == {pp.factorial_cell}
    assert {s.train.seed for s in specs} == set(pp.factorial_seeds)
    assert all(s.precision.w is None and s.precision.variant for s in specs)
    got = {(s.precision.bits("a"), s.precision.bits("kv"), s.precision.kv_parts, s.precision.a_skip) for s in specs}
    assert got == set(MECHANISM_VARIANTS)
    others = {s.run_id for e, b in _BUILDERS.items() if e != "qat_mechanism" for s in b(PROFILES["cpu"])}
    assert len({s.run_id for s in specs}) == 18 and not ({s.run_id for s in specs} & others)
    assert plan("smoke", "qat_mechanism") == []  # declared only where PowerPlan.mechanism is set


def test_optional_train_variant_column_round_trips(tmp_path):
    from bitlaws.study.store import COLUMNS, OPTIONAL_COLUMNS, append_rows, read_rows

    spec = plan("cpu", "qat_mechanism")[0]
    ids = {"experiment": spec.experiment, "profile": "cpu", "corpus": "x", "size": spec.size, "seed": 101,
           "n_params": 1, "n_tokens": 1, "d_model": 1, "n_layers": 1, "fmt_w": "none", "fmt_a": "int4",
           "fmt_kv": "int4", "bits_w": 16, "bits_a": 4, "bits_kv": 4, "ptq_method": "none", "quant_scheme": "none",
           "fmt_post": "none", "bits_post": 16, "group_size": 0, "eval_version": 2, "steps": 1, "threads": 1,
           "loss_val": 2.0, "delta_ptq": 0.0}
    row = {c: None for c in COLUMNS} | ids | {"run_id": spec.run_id, "obs_id": "o1", "status": "ok",
                                              "train_variant": spec.precision.variant}
    path = tmp_path / "qat_mechanism.csv"
    with pytest.raises(ValueError, match="experiment"):  # the sweep's identifiers stay required with the extra column
        append_rows(path, [row | {"experiment": None}], columns=COLUMNS + OPTIONAL_COLUMNS, key="obs_id")
    append_rows(path, [row], columns=COLUMNS + OPTIONAL_COLUMNS, key="obs_id")
    back = read_rows(path, COLUMNS, "obs_id")  # the sweep's own read: extra columns kept
    assert back["train_variant"].tolist() == [spec.precision.variant] and spec.precision.variant.startswith("kv_parts=")
    with pytest.raises(ValueError, match="not in the schema"):
        append_rows(tmp_path / "other.csv", [row])  # the plain schema refuses the column


def test_a_retrained_run_that_differs_says_by_how_much():
    import warnings
    from types import SimpleNamespace

    from bitlaws.study import sweep

    spec = plan("smoke")[0]
    rec = {"loss_val": 2.098850, "threads": 1, "git_sha": "d1f698cc2d8a"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within REPRODUCE_RTOL: silent
        sweep._check_retrained(spec, SimpleNamespace(status="ok", loss_val=2.098850 * (1 + 5e-6)), rec)
        sweep._check_retrained(spec, SimpleNamespace(status="diverged", loss_val=9.0), rec)  # nothing to compare
    with pytest.warns(UserWarning, match="differs in the last bits"):
        sweep._check_retrained(spec, SimpleNamespace(status="ok", loss_val=2.098850 * (1 + 5e-5)), rec)
    with pytest.warns(UserWarning, match=r"a different model \(\+0\.0232 nats/byte.*git d1f698cc2d8a"):
        sweep._check_retrained(spec, SimpleNamespace(status="ok", loss_val=2.12201), rec)


@pytest.mark.parametrize("only", ["new", "re-evaluate"])
def test_only_runs_one_group_new_or_re_evaluations(only, tmp_path, monkeypatch):
    from bitlaws.study import sweep as sweep_mod
    from bitlaws.study.store import COLUMNS

    specs = plan("smoke", "base_grid")
    (v1, _), reeval, partial = specs[0].evals, specs[0], specs[1]
    rows = [reeval.obs_id(p, v1) for p in (None, *reeval.ptq)] + [partial.obs_id(None, v1)]
    path = tmp_path / "runs" / "smoke" / "base_grid.csv"
    path.parent.mkdir(parents=True)
    filler = {c: "ok" if c == "status" else "1" for c in COLUMNS}
    path.write_text("\n".join([",".join(COLUMNS)] + [",".join(o if c == "obs_id" else filler[c] for c in COLUMNS)
                                                      for o in rows]) + "\n", encoding="utf-8")
    ran = []
    monkeypatch.setattr(sweep_mod, "run_spec", lambda spec, *a, **k: (ran.append(spec.run_id), ([], []))[1])
    run_sweep("smoke", data_root=tmp_path, experiments=["base_grid"], progress=False, only=only)
    if only == "re-evaluate":  # the one run complete at v1 alone
        assert ran == [reeval.run_id]
    else:  # every other run: the interrupted one and those with no row, none complete at a version
        assert sorted(ran) == sorted(s.run_id for s in specs[1:]) and reeval.run_id not in ran
    with pytest.raises(ValueError, match="only must be one of new, re-evaluate"):
        run_sweep("smoke", data_root=tmp_path, experiments=["base_grid"], progress=False, only="all")

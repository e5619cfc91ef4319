"""The freeze cascade (bitlaws.study.cascade): the arguments it reads back from the stored tables, the
order of its steps, which steps it skips (stored inputs hash = the rows' hash) and which it runs, the
guard against a freeze that cuts a run in two or admits a half-trained run, and the real data's plan."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bitlaws.cli import main
from bitlaws.study import cascade, compute_optimal, qat_design, store, sweep
from bitlaws.study.boot_check import P6_PSTAR_COLUMNS, p6_pstar_sim_id
from bitlaws.study.power import NEFF_F_FLOOR, P6_PSTAR_SIM_VERSION

REPO = Path(__file__).resolve().parents[1]
NOW, OLD = "a" * 64, "b" * 64  # the hash of the rows the freeze reads now; of other rows
SD = 0.00874415269213072  # the design table's σ_seed in these tables
SD_UPPER = 0.0171  # σ_seed of P6's seed_upper variant
P4 = ("marginal sweeps as run, 1 seed", "marginal sweeps as run, 3 seeds", "marginal sweeps as run, 5 seeds")


class FakeRows:
    """Stands for cascade._Rows: the rows' hash and σ_seed without reading any training row."""

    def __init__(self, profile, root):
        self.profile, self.root, self.sha, self.seed_sd, self.df = profile, root, NOW, SD, None
        self.seed_sd_upper = SD_UPPER


def _design(root: Path, sha: str = NOW) -> None:
    rows = [{"experiment": "qat_design_power", "profile": "cpu", "claim": "P4", "design": d, "seeds": s,
             "n_sim": 100.0, "seed_sd": SD, "inputs_sha256": sha} for d, s in zip(P4, (1, 3, 5))]
    rows.append({"experiment": "qat_design_power", "profile": "cpu", "claim": "P9", "design": "p9", "seeds": 1,
                 "n_sim": 100.0, "seed_sd": 0.0, "inputs_sha256": sha})
    path = root / "runs" / "cpu" / "qat_design_power.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def _replicates(root: Path, sha: str = NOW) -> None:
    rows = [{"experiment": "qat_design_p4_replicates", "profile": "cpu", "rng": r, "design": P4[i], "seeds": s,
             "n_sim": 50.0, "power": 0.5, "inputs_sha256": sha} for r in (0, 1, 2) for i, s in ((0, 1), (1, 3))]
    pd.DataFrame(rows).to_csv(root / "runs" / "cpu" / "qat_design_p4_replicates.csv", index=False)


def _pool(root: Path, second: str = NOW) -> None:
    """Three rectangles, written in this order: rngs 0, 1 × seeds 1, 3 and rng 2 × seeds 3 at the design
    table's σ_seed (n_sim 100), then rngs 0, 1 × seed 1 at σ_seed 0 (n_sim 200); `second`: the second's hash."""
    rows = [(r, s, 100, SD, NOW) for r in (0, 1) for s in (1, 3)] + [(2, 3, 100, SD, second)] \
        + [(r, 1, 200, 0.0, NOW) for r in (0, 1)]
    tab = pd.DataFrame([{"experiment": "p4_pool_power", "profile": "cpu", "rng": r, "design": P4[(s - 1) // 2],
                         "seeds": s, "n_sim": n, "pool": 200, "seed_sd": sd, "power_shared": 0.5, "power_pool": 0.5,
                         "inputs_sha256": h} for r, s, n, sd, h in rows])
    path = root / "checks" / "cpu" / "p4_pool_power.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    tab.to_csv(path, index=False)


def _p6_row(world: str, noise: str, k: int, sha: str = NOW, version: str = P6_PSTAR_SIM_VERSION,
            floor: float = NEFF_F_FLOOR) -> dict:
    sd = {"residual": 0.0, "seed_upper": SD_UPPER}.get(noise, SD)
    return {"sim_id": p6_pstar_sim_id(world, 0, k, sd, floor, 100, noise == "residual", noise, sha)
            + ("" if version == P6_PSTAR_SIM_VERSION else ":v1"),
            "world": world, "noise": noise, "rng": 0, "dataset": k, "seed_sd": sd, "floor": floor,
            "n_boot": 100, "p_star_true": 7.0, "p_star_point": 7.0, "low": 6.5, "high": 7.5, "width": 1.0,
            "grade": "inside", "n_ok": 100, "n_p_star": 100, "sim_version": version, "inputs_sha256": sha,
            "git_sha": "x", "timestamp": "2026-12-06T09:00:00Z"}


def _p6(root: Path, residual: str = NOW) -> Path:
    """paper/seed datasets 0–2 and no_offsets/residual datasets 0–1 (hash `residual`), the sensitivity variants
    paper/seed at floor 0.02 (dataset 0) and ours/seed_upper (datasets 0–1), and one row of another simulation
    version (not replayed)."""
    path = root / "checks" / "cpu" / "p6_pstar_power.csv"
    rows = [_p6_row("paper", "seed", k) for k in range(3)] + [_p6_row("no_offsets", "residual", k, residual)
                                                             for k in range(2)]
    rows += [_p6_row("paper", "seed", 0, floor=0.02)] + [_p6_row("ours", "seed_upper", k) for k in range(2)]
    rows.append(_p6_row("ours", "seed", 7, version="1: an older simulation"))
    store.append_rows(path, rows, P6_PSTAR_COLUMNS, "sim_id")
    return path


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A data root with every stored table made from the rows read now, the expensive checks stood in for."""
    _design(tmp_path)
    _replicates(tmp_path)
    _pool(tmp_path)
    _p6(tmp_path)
    monkeypatch.setattr(cascade, "check_freeze", lambda profile, root=None: pd.DataFrame(
        columns=["experiment", "runs_planned", "runs_admitted", "runs_after_freeze", "runs_untrained", "freeze"]))
    monkeypatch.setattr(cascade, "_Rows", FakeRows)
    monkeypatch.setattr(cascade, "_book_data", lambda: tmp_path)  # only this root's tables give the steps
    monkeypatch.setattr(cascade, "_fit_status", lambda *a: (True, "fits made from these rows"))
    monkeypatch.setattr(cascade, "_verdicts_status", lambda *a: (True, "verdicts --check: all agree"))
    return tmp_path


@pytest.fixture
def calls(monkeypatch):
    """Every writer and command the cascade would run, recorded instead of run."""
    log: list[tuple[str, object]] = []

    def recorder(name):
        def record(**kwargs):
            log.append((name, kwargs))
        return record

    monkeypatch.setattr(qat_design, "write_p4_replicates", recorder("write_p4_replicates"))
    monkeypatch.setattr(qat_design, "write_p4_pool_power", recorder("write_p4_pool_power"))
    monkeypatch.setattr(compute_optimal, "write_p6_pstar_power", recorder("write_p6_pstar_power"))
    monkeypatch.setattr(cascade, "_run_cli", lambda argv: log.append(("cli", list(argv))) or 0)
    return log


def test_replayed_arguments_are_read_back_from_the_stored_tables(root):
    steps = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    r = str(root)
    assert steps["fit"].kwargs == {"argv": ["fit", "--profile", "cpu", "--data-root", r]}
    assert steps["design_power"].kwargs == {"argv": ["design-power", "--profile", "cpu", "--n-sim", "100",
                                                     "--data-root", r]}
    assert steps["p4_replicates"].kwargs == {"profile": "cpu", "seeds": (1, 3), "rngs": (0, 1, 2), "n_sim": 50,
                                             "root": r}
    # one call per rectangle, in the order written; seed_sd only where it is not the design table's σ_seed
    assert [steps[f"p4_pool.{i}"].kwargs for i in (1, 2, 3)] == [
        {"profile": "cpu", "rngs": (0, 1), "seeds": (1, 3), "n_sim": 100, "pool": 200, "root": r},
        {"profile": "cpu", "rngs": (2,), "seeds": (3,), "n_sim": 100, "pool": 200, "root": r},
        {"profile": "cpu", "rngs": (0, 1), "seeds": (1,), "n_sim": 200, "pool": 200, "seed_sd": 0.0, "root": r}]
    assert "p4_pool.4" not in steps
    # one call per (world, noise) with its datasets; residual noise is never given seed_sd; the row of
    # another simulation version is not replayed
    assert steps["p6_pstar.paper.seed"].kwargs == {"profile": "cpu", "worlds": "paper", "noise": "seed",
                                                   "datasets": (0, 1, 2), "n_boot": 100, "seed": 0, "root": r}
    assert steps["p6_pstar.no_offsets.residual"].kwargs == {
        "profile": "cpu", "worlds": "no_offsets", "noise": "residual", "datasets": (0, 1), "n_boot": 100,
        "seed": 0, "root": r}
    # the sensitivity variants: another floor (given), seed_upper (never seed_sd)
    assert steps["p6_pstar.paper.seed.floor0.02"].kwargs == {
        "profile": "cpu", "worlds": "paper", "noise": "seed", "datasets": (0,), "n_boot": 100, "seed": 0,
        "floor": 0.02, "root": r}
    assert steps["p6_pstar.ours.seed_upper"].kwargs == {
        "profile": "cpu", "worlds": "ours", "noise": "seed_upper", "datasets": (0, 1), "n_boot": 100, "seed": 0,
        "root": r}
    assert not [n for n in steps if n.startswith("p6_pstar.ours.seed") and not n.endswith("seed_upper")]
    assert all(s.current for n, s in steps.items() if n.startswith("p6_pstar."))
    assert steps["verdicts"].kwargs == {"argv": ["verdicts", "--profile", "cpu", "--data-root", r]}
    assert steps["p4_pool.3"].command == (f"qat_design.write_p4_pool_power('cpu', rngs=(0, 1), seeds=(1,), "
                                          f"n_sim=200, pool=200, seed_sd=0.0, root={r!r})")


def test_steps_run_in_the_cascade_order(root):
    steps = cascade.cascade_plan("cpu", root)
    assert [s.name for s in steps] == ["fit", "design_power", "p4_replicates", "p4_pool.1", "p4_pool.2",
                                       "p4_pool.3", "p6_pstar.paper.seed", "p6_pstar.no_offsets.residual",
                                       "p6_pstar.ours.seed_upper", "p6_pstar.paper.seed.floor0.02", "verdicts"]
    assert [s.call for s in steps] == [cascade.CLI, cascade.CLI, "bitlaws.study.qat_design.write_p4_replicates",
                                       *["bitlaws.study.qat_design.write_p4_pool_power"] * 3,
                                       *["bitlaws.study.compute_optimal.write_p6_pstar_power"] * 4, cascade.CLI]


def test_a_design_table_of_two_n_sims_is_replayed_per_claim(root):
    tab = pd.read_csv(root / "runs" / "cpu" / "qat_design_power.csv")
    tab.loc[tab["claim"] == "P9", "n_sim"] = 1000.0
    tab.to_csv(root / "runs" / "cpu" / "qat_design_power.csv", index=False)
    steps = [s for s in cascade.cascade_plan("cpu", root) if s.kind == "design_power"]
    assert [s.kwargs["argv"][3:7] for s in steps] == [["--n-sim", "100", "--claims", "P4"],
                                                      ["--n-sim", "1000", "--claims", "P9"]]


def test_every_table_current_runs_nothing(root, calls):
    out = cascade.run_cascade("cpu", root, progress=False)
    assert calls == []
    assert list(out["status"]) == ["current"] * 11
    assert out["seconds"].isna().all()
    assert not (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()


def test_a_stale_step_runs_and_the_current_ones_are_skipped(root, calls, capsys):
    _pool(root, second=OLD)  # the second rectangle was simulated from other rows
    _replicates(root, sha=OLD)
    plan = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    assert not plan["p4_pool.2"].current and plan["p4_pool.2"].why == "0 of its 1 rows made from these rows"
    assert not plan["p4_replicates"].current
    assert plan["p4_pool.1"].current and plan["p4_pool.3"].current and plan["design_power"].current
    assert not plan["verdicts"].current and plan["verdicts"].why == "after the stale steps above"
    out = cascade.run_cascade("cpu", root)
    r = str(root)
    assert calls == [
        ("write_p4_replicates", {"profile": "cpu", "seeds": (1, 3), "rngs": (0, 1, 2), "n_sim": 50, "root": r,
                                 "progress": True}),
        ("write_p4_pool_power", {"profile": "cpu", "rngs": (2,), "seeds": (3,), "n_sim": 100, "pool": 200,
                                 "root": r, "progress": True}),
        ("cli", ["verdicts", "--profile", "cpu", "--data-root", r])]
    assert dict(zip(out["step"], out["status"])) == {
        "fit": "current", "design_power": "current", "p4_replicates": "ran", "p4_pool.1": "current",
        "p4_pool.2": "ran", "p4_pool.3": "current", "p6_pstar.paper.seed": "current",
        "p6_pstar.no_offsets.residual": "current", "p6_pstar.ours.seed_upper": "current",
        "p6_pstar.paper.seed.floor0.02": "current", "verdicts": "ran"}
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(out)  # the summary, then one line per step
    assert "p4_pool.1" in lines[4] and "current, skipped" in lines[4]
    assert "p4_pool.2" in lines[5] and "ran in 0 s" in lines[5]
    assert not (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()  # done: the saved plan is gone


def test_p6_rows_of_other_inputs_are_kept_and_their_datasets_simulated_again(root, calls):
    """The key names the rows read, so a dataset simulated from other rows is not this cascade's: the step is
    stale, its writer is called for those datasets, and no stored row is touched."""
    path = root / "checks" / "cpu" / "p6_pstar_power.csv"
    path.unlink()
    _p6(root, residual=OLD)  # the residual rows were simulated from other rows
    plan = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    assert plan["p6_pstar.paper.seed"].current
    assert not plan["p6_pstar.no_offsets.residual"].current
    assert plan["p6_pstar.no_offsets.residual"].why == "0 of its 2 datasets made from these rows"
    before = path.read_bytes()
    cascade.run_cascade("cpu", root, progress=False)
    assert calls[0] == ("write_p6_pstar_power", {"profile": "cpu", "worlds": "no_offsets", "noise": "residual",
                                                 "datasets": (0, 1), "n_boot": 100, "seed": 0, "root": str(root),
                                                 "progress": False})
    assert path.read_bytes() == before  # nothing removed or rewritten: the writer adds its rows beside them


def test_stale_steps_are_not_remade_while_declared_runs_are_untrained(root, calls, monkeypatch, capsys):
    """A freeze moved past the last row of a half-trained batch cuts no run, so check_freeze passes it; the
    untrained runs stop the cascade instead, unless allowed, and a dry run only reports them."""
    _replicates(root, sha=OLD)
    monkeypatch.setattr(cascade, "check_freeze", lambda profile, root=None: pd.DataFrame(
        [{"experiment": "qat_seeds", "runs_planned": 224, "runs_admitted": 137, "runs_after_freeze": 0,
          "runs_untrained": 87, "freeze": "2026-12-07T00:00:00Z"},
         {"experiment": "repetition", "runs_planned": 12, "runs_admitted": 0, "runs_after_freeze": 0,  # not begun
          "runs_untrained": 12, "freeze": "2026-12-07T00:00:00Z"}]))
    with pytest.raises(ValueError, match=r"half done: qat_seeds \(137 of 224 runs read, 87 untrained\); .*"
                                         rf"--profile cpu --data-root {root} --only new"):
        cascade.run_cascade("cpu", root, progress=False)
    assert calls == []
    capsys.readouterr()  # the dry run says what a real run would do, and runs nothing
    assert set(cascade.run_cascade("cpu", root, dry_run=True)["status"]) == {"current", "stale"}
    assert "a run without --dry-run would stop here: the freeze reads part of a sweep's runs" in capsys.readouterr().out
    assert calls == []
    # selecting only current kinds has nothing to remake: no refusal, nothing run, no plan left behind
    out = cascade.run_cascade("cpu", root, progress=False, only="p6_pstar,p3_power")
    assert calls == [] and "ran" not in set(out["status"])
    assert not (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()
    cascade.run_cascade("cpu", root, progress=False, allow_untrained=True)
    assert [c[0] for c in calls] == ["write_p4_replicates", "cli"]


def test_a_killed_cascade_resumes_with_the_plan_it_started_with(root, monkeypatch, calls):
    _pool(root, second=OLD)
    tab = pd.read_csv(root / "checks" / "cpu" / "p4_pool_power.csv")
    tab["inputs_sha256"] = OLD  # every rectangle from other rows: all three calls to make
    tab.to_csv(root / "checks" / "cpu" / "p4_pool_power.csv", index=False)
    done = []

    def writer(**kw):  # the real writer drops the rows of other inputs: the first call leaves only its own
        if done:
            raise KeyboardInterrupt  # killed during the second call
        done.append(kw)
        new = tab[(tab["n_sim"] == kw["n_sim"]) & tab["rng"].isin(kw["rngs"]) & tab["seeds"].isin(kw["seeds"])]
        new.assign(inputs_sha256=NOW).to_csv(root / "checks" / "cpu" / "p4_pool_power.csv", index=False)

    monkeypatch.setattr(qat_design, "write_p4_pool_power", writer)
    with pytest.raises(KeyboardInterrupt):
        cascade.run_cascade("cpu", root, progress=False)
    saved = json.loads((root / "checks" / "cpu" / cascade.PLAN_FILE).read_text())
    assert saved["inputs_sha256"] == NOW and len([s for s in saved["steps"] if s["kind"] == "p4_pool"]) == 3
    resumed = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    assert resumed["p4_pool.1"].current  # made before the kill
    assert [resumed[f"p4_pool.{i}"].kwargs["rngs"] for i in (2, 3)] == [(2,), (0, 1)]  # not lost with their rows
    assert not resumed["p4_pool.2"].current and not resumed["p4_pool.3"].current
    monkeypatch.setattr(qat_design, "write_p4_pool_power", lambda **kw: calls.append(("pool", kw)))
    out = cascade.run_cascade("cpu", root, progress=False)
    assert [kw["rngs"] for _, kw in calls if _ == "pool"] == [(2,), (0, 1)]
    assert dict(zip(out["step"], out["status"]))["p4_pool.1"] == "current"
    assert not (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()


def test_a_failing_step_is_named_and_the_cli_exits_1(root, monkeypatch, capsys):
    _replicates(root, sha=OLD)

    def broken(**kw):
        raise ValueError("no fits")

    monkeypatch.setattr(qat_design, "write_p4_replicates", broken)
    with pytest.raises(cascade.StepFailed, match=r"step p4_replicates: .*write_p4_replicates.*ValueError: no fits"):
        cascade.run_cascade("cpu", root, progress=False)
    assert main(["cascade", "--profile", "cpu", "--data-root", str(root)]) == 1
    assert "error: step p4_replicates" in capsys.readouterr().err


def test_dry_run_runs_nothing_and_prints_each_status(root, calls, capsys):
    _replicates(root, sha=OLD)
    assert main(["cascade", "--profile", "cpu", "--data-root", str(root), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert calls == []
    assert "p4_replicates" in out and "STALE" in out
    assert "replicate rows made from other rows (inputs bbbbbbbbbbbb…)" in out
    assert not (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()


def test_p6_rows_of_another_simulation_version_are_named_not_dropped_silently(root, calls, capsys):
    """The fixture's one row of an older P6 simulation is not replayed (no step), and the summary says so:
    the version, its rows and groups; without such rows the clause is absent."""
    assert main(["cascade", "--profile", "cpu", "--data-root", str(root), "--dry-run"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert ("not replayed, P6 P* rows of another simulation version than this code's "
            f"({P6_PSTAR_SIM_VERSION!r}): version '1: an older simulation': 1 row in 1 (world, noise) group "
            "(ours/seed)") in first
    path = root / "checks" / "cpu" / "p6_pstar_power.csv"
    path.unlink()
    store.append_rows(path, [_p6_row("paper", "seed", 0)], P6_PSTAR_COLUMNS, "sim_id")
    assert cascade.p6_other_versions("cpu", root) == ""


def test_only_runs_the_kinds_selected_and_keeps_the_plan_for_the_rest(root, calls):
    """With stale P4 replicates and stale P6 rows, ``only="p6_pstar"`` calls P6's writer alone, shows the
    replicates as not selected, and keeps the saved plan for the cascade that runs them."""
    _replicates(root, sha=OLD)
    path = root / "checks" / "cpu" / "p6_pstar_power.csv"
    path.unlink()
    _p6(root, residual=OLD)
    out = cascade.run_cascade("cpu", root, progress=False, only="p6_pstar").set_index("step")["status"]
    assert [c[0] for c in calls] == ["write_p6_pstar_power"]
    assert calls[0][1]["worlds"] == "no_offsets" and calls[0][1]["noise"] == "residual"
    assert out["p4_replicates"] == "not selected" and out["verdicts"] == "not selected"
    assert out["fit"] == "not selected" and out["p6_pstar.no_offsets.residual"] == "ran"
    assert (root / "checks" / "cpu" / cascade.PLAN_FILE).exists()
    calls.clear()
    cascade.run_cascade("cpu", root, progress=False, only=["p4_replicates", "p4_pool"])
    assert [c[0] for c in calls] == ["write_p4_replicates"]


def test_only_refuses_a_step_whose_inputs_are_stale_and_an_unknown_kind(root, calls, monkeypatch):
    monkeypatch.setattr(cascade, "_fit_status", lambda *a: (False, "made from other rows"))
    (root / "checks" / "cpu" / "p6_pstar_power.csv").unlink()
    _p6(root, residual=OLD)  # a stale P6 step, which reads the stale fit
    with pytest.raises(ValueError, match=r"stale steps not selected: fit \(fit\); run those first "
                                         r"\(`python -m bitlaws cascade --profile cpu --data-root .* --only fit`\)"):
        cascade.run_cascade("cpu", root, progress=False, only="p6_pstar")
    with pytest.raises(ValueError, match="unknown cascade step kind.*'p6'.*allowed: fit, design_power, "
                                         "p4_replicates, p4_pool, p6_pstar, p3_power, verdicts"):
        cascade.run_cascade("cpu", root, progress=False, only="p6,fit")
    assert calls == []
    # the inputs themselves may be selected with it: fit runs first, then the rest in order
    cascade.run_cascade("cpu", root, progress=False, only="fit,design_power,p6_pstar")
    assert calls[0] == ("cli", ["fit", "--profile", "cpu", "--data-root", str(root)])


def test_dry_run_with_only_marks_the_others_not_selected(root, calls, capsys):
    _replicates(root, sha=OLD)
    assert main(["cascade", "--profile", "cpu", "--data-root", str(root), "--dry-run", "--only", "p6"]) == 2
    assert "unknown cascade step kind(s) ['p6']; allowed: fit," in capsys.readouterr().err
    assert main(["cascade", "--profile", "cpu", "--data-root", str(root), "--dry-run", "--only", ""]) == 2
    assert "only needs at least one kind of step" in capsys.readouterr().err
    tab = cascade.run_cascade("cpu", root, dry_run=True, progress=False, only="p4_replicates")
    assert calls == []
    assert dict(zip(tab["step"], tab["status"]))["p4_replicates"] == "stale"
    assert set(tab.loc[tab["step"] != "p4_replicates", "status"]) == {"not selected"}


def test_p3_power_rows_are_replayed_per_world_and_noise_and_read_by_their_key(root, calls, monkeypatch):
    """P3's power table gives one write_p3_power call per (world, noise, rng, n_boot) with its datasets; a
    step is current where every dataset has a row keyed by these training rows and its leg (a) of rule v7."""
    from bitlaws.study import p3_power
    from bitlaws.study.law_fits import P3_LEG_A_COLUMNS, P3_POWER_COLUMNS, P3_POWER_SIM_VERSION, p3_leg_a_key, p3_sim_id

    path = root / "checks" / "cpu" / "p3_power.csv"

    def row(world, noise, k, sha=NOW):
        sd = 0.0 if noise == "residual" else SD
        return {**dict.fromkeys(P3_POWER_COLUMNS, 0), "sim_id": p3_sim_id(world, noise, 0, k, sd, 100, sha),
                "world": world, "noise": noise, "rng": 0, "dataset": k, "seed_sd": sd, "n_boot": 100,
                "grade": "reproduced", "sim_version": P3_POWER_SIM_VERSION, "inputs_sha256": sha}

    old_version = {**row("no_effect", "residual", 0), "sim_version": "1",  # keyed as version 1 keyed its rows
                   "sim_id": p3_sim_id("no_effect", "residual", 0, 0, 0.0, 100, NOW, version="1")}
    store.append_rows(path, [row("paper", "seed", k) for k in range(3)] + [row("no_effect", "seed", 0)]
                      + [row("paper", "residual", k, OLD) for k in range(2)] + [old_version], P3_POWER_COLUMNS,
                      "sim_id")
    # leg (a) of rule v7 on the current rows but one (paper, seed, dataset 2)
    legs = [{**dict.fromkeys(P3_LEG_A_COLUMNS, 0), "key": p3_leg_a_key(r["sim_id"]), "sim_id": r["sim_id"],
             "leg_a_version": "1", "test": "pure error", "inputs_sha256": NOW}
            for r in [row("paper", "seed", k) for k in range(2)] + [row("no_effect", "seed", 0)]]
    store.append_rows(path.with_name("p3_leg_a.csv"), legs, P3_LEG_A_COLUMNS, "key")
    steps = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    # a row of another simulation version names a dataset to simulate again, and is not read as current
    assert steps["p3_power.no_effect.residual"].why == "0 of its 1 datasets made from these rows"
    assert steps["p3_power.paper.seed"].kwargs == {"profile": "cpu", "worlds": "paper", "noise": "seed",
                                                   "datasets": (0, 1, 2), "n_boot": 100, "seed": 0, "root": str(root)}
    # a dataset without leg (a) leaves its call stale: write_p3_power computes it for the datasets it finds stored
    assert not steps["p3_power.paper.seed"].current and steps["p3_power.no_effect.seed"].current
    assert steps["p3_power.paper.seed"].why == "3 of its 3 datasets made from these rows, 2 of them with leg (a) of rule v7"
    store.append_rows(path.with_name("p3_leg_a.csv"), [{**legs[0], "key": p3_leg_a_key(row("paper", "seed", 2)["sim_id"]),
                                                        "sim_id": row("paper", "seed", 2)["sim_id"]}],
                      P3_LEG_A_COLUMNS, "key")
    steps = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    assert steps["p3_power.paper.seed"].current
    assert steps["p3_power.paper.residual"].why == "0 of its 2 datasets made from these rows"
    made = []
    monkeypatch.setattr(p3_power, "write_p3_power", lambda **kw: made.append(kw))
    cascade.run_cascade("cpu", root, progress=False, only="p3_power")
    assert made == [{"profile": "cpu", "worlds": w, "noise": "residual", "datasets": ds, "n_boot": 100,
                     "seed": 0, "root": str(root), "progress": False} for w, ds in (("paper", (0, 1)),
                                                                                     ("no_effect", (0,)))]
    assert list(cascade.KINDS).index("p3_power") < list(cascade.KINDS).index("verdicts")


# --- the guard ----------------------------------------------------------------------------------------

def _rows(spec, obs_ids, stamp: str) -> list[dict]:
    return [{"run_id": spec.run_id, "obs_id": o, "experiment": spec.experiment, "profile": "smoke", "corpus": "x",
             "size": spec.size, "seed": spec.train.seed, "n_params": 1, "n_tokens": spec.train.n_tokens,
             "d_model": 1, "n_layers": 1, "fmt_w": "bf16", "fmt_a": "bf16", "fmt_kv": "bf16", "bits_w": 16,
             "bits_a": 16, "bits_kv": 16, "ptq_method": "none", "quant_scheme": "none", "fmt_post": "none",
             "bits_post": 16, "group_size": 0, "eval_version": 1, "loss_val": 1.0, "status": "ok", "steps": 1,
             "threads": 1, "timestamp": stamp} for o in obs_ids]


def test_the_guard_refuses_a_run_with_rows_on_both_sides_of_the_freeze(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "smoke", "2026-12-06T08:00:00Z")
    specs = sweep.plan("smoke", "base_grid")
    whole, cut, waiting = specs[0], specs[1], specs[2]
    path = tmp_path / "runs" / "smoke" / "base_grid.csv"
    store.append_rows(path, _rows(whole, whole.obs_ids, "2026-12-06T07:00:00Z")
                      + _rows(cut, cut.obs_ids[:1], "2026-12-06T07:59:59Z")
                      + _rows(cut, cut.obs_ids[1:], "2026-12-06T08:00:01Z")
                      + _rows(waiting, waiting.obs_ids, "2026-12-07T00:00:00Z"))
    with pytest.raises(ValueError, match="rows on both sides") as exc:
        cascade.check_freeze("smoke", tmp_path)
    msg = str(exc.value)
    assert cut.run_id in msg and f"1 rows at or before, {len(cut.obs_ids) - 1} after" in msg
    assert whole.run_id not in msg and waiting.run_id not in msg
    # the command refuses before anything runs, naming the run
    assert main(["cascade", "--profile", "smoke", "--data-root", str(tmp_path), "--dry-run"]) == 2
    assert cut.run_id in capsys.readouterr().err


def test_the_guard_refuses_an_admitted_run_without_its_planned_rows(tmp_path, monkeypatch):
    monkeypatch.setitem(store.ROWS_READ_UNTIL, "smoke", "2026-12-06T08:00:00Z")
    specs = sweep.plan("smoke", "base_grid")
    half, waiting = specs[0], specs[1]
    path = tmp_path / "runs" / "smoke" / "base_grid.csv"
    store.append_rows(path, _rows(half, half.obs_ids[:2], "2026-12-06T07:00:00Z"))
    with pytest.raises(ValueError, match="half-trained") as exc:
        cascade.check_freeze("smoke", tmp_path)
    assert half.run_id in str(exc.value) and f"2 of its {len(half.obs_ids)} planned rows" in str(exc.value)
    # complete, the run passes; a run with every row after the freeze waits (counted, not refused)
    store.append_rows(path, _rows(half, half.obs_ids[2:], "2026-12-06T07:00:00Z")
                      + _rows(waiting, waiting.obs_ids[:1], "2026-12-07T00:00:00Z"))
    summary = cascade.check_freeze("smoke", tmp_path).set_index("experiment")
    assert summary.loc["base_grid", ["runs_planned", "runs_admitted", "runs_after_freeze"]].tolist() == [
        len(specs), 1, 1]


def test_a_missing_data_root_is_refused_before_anything(tmp_path, capsys):
    missing = tmp_path / "no" / "data"
    assert main(["cascade", "--profile", "smoke", "--data-root", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --data-root ") and "no such folder" in err and not (tmp_path / "no").exists()


# --- the real data (read only) --------------------------------------------------------------------------------

def test_the_real_tables_replay_the_calls_that_made_them():
    steps = {s.name: s for s in cascade.cascade_plan("cpu", check_verdicts=False)}
    pool = pd.read_csv(REPO / "data" / "checks" / "cpu" / "p4_pool_power.csv")
    keys = {(int(r), int(s), int(n), int(p), float(sd)) for r, s, n, p, sd in
            pool[["rng", "seeds", "n_sim", "pool", "seed_sd"]].itertuples(index=False)}
    calls = [steps[n].kwargs for n in steps if n.startswith("p4_pool.")]
    design_sd = float(pd.read_csv(REPO / "data" / "runs" / "cpu" / "qat_design_power.csv").query("claim == 'P4'")
                      ["seed_sd"].iloc[0])
    replayed = {(r, s, c["n_sim"], c["pool"], c.get("seed_sd", design_sd))
                for c in calls for r in c["rngs"] for s in c["seeds"]}
    assert replayed == keys and sum(len(c["rngs"]) * len(c["seeds"]) for c in calls) == len(pool)
    p6 = pd.read_csv(REPO / "data" / "checks" / "cpu" / "p6_pstar_power.csv")
    # a group replays the datasets held made from any training rows (those of an unfinished cascade included)
    groups = {(w, nz, fl): tuple(sorted(set(g["dataset"]))) for (w, nz, fl), g in p6.groupby(["world", "noise", "floor"])}
    p6_calls = [steps[n].kwargs for n in steps if n.startswith("p6_pstar.")]
    assert {(c["worlds"], c["noise"], c.get("floor", NEFF_F_FLOOR)): c["datasets"] for c in p6_calls} == groups
    assert len(p6_calls) == len(groups) and all("seed_sd" not in c for c in p6_calls)
    assert [n for n, s in steps.items() if not s.current] == ["verdicts"]  # not checked here: the slow test does


def test_a_data_root_without_the_tables_replays_the_books_design(tmp_path):
    # a retraining from scratch in a folder of one's own: no power table yet, so each step takes the arguments
    # of the repository's own table (else the cascade would make no simulation and the verdicts read none)
    own, empty = cascade._derive("cpu", REPO / "data"), cascade._derive("cpu", tmp_path)
    strip = lambda specs: [(s["name"], s["kind"], s["call"], s["kwargs"], s["output"]) for s in specs  # noqa: E731
                           if s["kind"] not in ("fit", "verdicts")]
    assert strip(empty) == strip(own)
    assert {s["kind"] for s in empty} == set(cascade.KINDS)
    # a folder with its own table replays that one, not the book's
    (tmp_path / "runs" / "cpu").mkdir(parents=True)
    _replicates(tmp_path)
    mine = {s["name"]: s["kwargs"] for s in cascade._derive("cpu", tmp_path)}
    assert mine["p4_replicates"] == {"seeds": (1, 3), "rngs": (0, 1, 2), "n_sim": 50}


@pytest.mark.slow
def test_dry_run_on_the_real_data_finds_every_step_current(capsys):
    assert main(["cascade", "--profile", "cpu", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "STALE" not in out, out
    assert " 0 stale" in out.splitlines()[0]


def test_a_killed_p6_call_leaves_its_plan_and_the_cascade_resumes_the_rest(root, monkeypatch):
    """write_p6_pstar_power records every dataset it is asked for before it simulates any; a call killed after
    one dataset leaves the plan on record, and the cascade, which derives its calls from the table and the
    plan, finds the group short and asks the writer for the whole plan again (the writer skips what is there)."""
    from bitlaws.study import boot_check, power

    path = root / "checks" / "cpu" / "p6_pstar_power.csv"
    path.unlink()
    monkeypatch.setattr(compute_optimal, "simulation_design", lambda *a, **k: {
        "chin": {}, "inputs": (None,), "stage_sd": None, "fits": {}, "frames": {}, "read": NOW})
    monkeypatch.setattr(compute_optimal, "_ours_params", lambda fits: ({}, []))
    monkeypatch.setattr(power, "p6_pstar_worlds", lambda ours: {"paper": None})

    def killed(frames, chin, noise, worlds, datasets, **kw):  # dataset 0 finishes, then the process dies
        yield _p6_row("paper", "seed", datasets[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(boot_check, "p6_pstar_rows", killed)
    with pytest.raises(KeyboardInterrupt):
        compute_optimal.write_p6_pstar_power("cpu", worlds="paper", datasets=range(4), n_boot=100, seed=0,
                                             seed_sd=SD, root=root)
    assert len(store.read_rows(path, P6_PSTAR_COLUMNS, "sim_id")) == 1
    plan_rows = store.read_rows(compute_optimal.p6_pstar_plan_path("cpu", root), boot_check.P6_PSTAR_PLAN_COLUMNS,
                                "sim_id")
    assert sorted(plan_rows["dataset"].astype(int)) == [0, 1, 2, 3]
    # the plan's keys are the table's: dataset 0's row and its plan row name one simulation
    assert _p6_row("paper", "seed", 0)["sim_id"] in set(plan_rows["sim_id"])
    steps = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    assert not steps["p6_pstar.paper.seed"].current
    assert steps["p6_pstar.paper.seed"].why == "1 of its 4 datasets made from these rows"
    assert steps["p6_pstar.paper.seed"].kwargs["datasets"] == (0, 1, 2, 3)


def test_a_killed_p3_call_leaves_its_plan_and_the_cascade_resumes_the_rest(root, monkeypatch):
    """write_p3_power records the datasets it is asked for before it simulates any; after a call killed once
    dataset 0 is written, the cascade reads the group as 1 of 3 and replays the whole plan."""
    from bitlaws.study import p3_power
    from bitlaws.study import law_fits as la

    monkeypatch.setattr(compute_optimal, "simulation_design", lambda *a, **k: {
        "chin": {}, "inputs": (None,), "stage_sd": None, "fits": {}, "frames": {}, "read": NOW})
    monkeypatch.setattr(compute_optimal, "p6_seed_sd", lambda inputs, noise: SD)

    def killed(frames, chin, noise, worlds, datasets, **kw):
        k = datasets[0]
        yield {**dict.fromkeys(la.P3_POWER_COLUMNS, 0), "sim_id": la.p3_sim_id(worlds[0], "seed", 0, k, SD, 100, NOW),
               "world": worlds[0], "noise": "seed", "rng": 0, "dataset": k, "seed_sd": SD, "n_boot": 100,
               "grade": "reproduced", "sim_version": la.P3_POWER_SIM_VERSION, "inputs_sha256": NOW}
        raise KeyboardInterrupt

    monkeypatch.setattr(p3_power, "p3_power_rows", killed)
    with pytest.raises(KeyboardInterrupt):
        p3_power.write_p3_power("cpu", worlds="paper", datasets=range(3), n_boot=100, seed=0, root=root)
    assert len(store.read_rows(la.p3_power_path("cpu", root), la.P3_POWER_COLUMNS, "sim_id")) == 1
    plan = store.read_rows(la.p3_power_plan_path("cpu", root), la.P3_POWER_PLAN_COLUMNS, "sim_id")
    assert sorted(plan["dataset"].astype(int)) == [0, 1, 2]
    steps = {s.name: s for s in cascade.cascade_plan("cpu", root)}
    # killed before its leg (a) step too: the one dataset it finished has no leg (a) of rule v7 yet
    assert steps["p3_power.paper.seed"].why == ("1 of its 3 datasets made from these rows, 0 of them with leg (a) of "
                                                "rule v7")
    assert steps["p3_power.paper.seed"].kwargs["datasets"] == (0, 1, 2)

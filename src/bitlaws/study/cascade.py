"""The cascade of a data freeze: every table the frozen sweep rows feed, remade in order by one command.

When a batch is complete and ``store.ROWS_READ_UNTIL[profile]`` moves past it, the fits, the design tables
and the verdicts are remade on the rows the freeze now admits, in a fixed order, with the arguments the
stored tables were made with (``python -m bitlaws cascade``). :func:`cascade_plan` lists the steps, the
arguments of P4's replicates and pool and of P6's P* leg read back from their stored tables, each step
marked current where its stored output was made from the rows the freeze reads now (``inputs_sha256``);
:func:`run_cascade` runs the others in order, so a killed cascade resumes where it stopped (its plan is
kept in ``checks/<profile>/.cascade_plan.json`` until it ends). :func:`check_freeze` first refuses a
freeze that cuts a run in two or admits a run without all its planned rows.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from .store import data_dir_set_to

__all__ = ["CLI", "KINDS", "NEEDS", "PLAN_FILE", "Step", "StepFailed", "check_freeze", "cascade_plan",
           "p6_other_versions", "run_cascade"]

CLI = "python -m bitlaws"  # the call of the steps that are commands
PLAN_FILE = ".cascade_plan.json"  # checks/<profile>/: the plan of a cascade under way (git-ignored)
_QD = "bitlaws.study.qat_design"
_CO = "bitlaws.study.compute_optimal"
# The kinds of step, in the cascade's order, and the kinds each reads the output of: a step may run (``only``)
# once every step of those kinds is current. P4's steps and P6's read the fits and the design table but not
# each other, so on two cores they may run side by side (two cascades with ``only``; data/README).
KINDS = ("fit", "design_power", "p4_replicates", "p4_pool", "p6_pstar", "p3_power", "verdicts")
NEEDS = {"fit": (), "design_power": ("fit",), "p4_replicates": ("fit", "design_power"),
         "p4_pool": ("fit", "design_power"), "p6_pstar": ("fit", "design_power"), "p3_power": ("fit",),
         "verdicts": ("fit", "design_power", "p4_replicates", "p4_pool", "p6_pstar", "p3_power")}


class StepFailed(RuntimeError):
    """A step of the cascade failed; the steps before it are kept (rerun the cascade to resume)."""


@dataclass(frozen=True)
class Step:
    """One step of the cascade.

    Args:
        name: unique within the plan (``fit``, ``design_power``, ``p4_pool.2``, ``p6_pstar.paper.seed`` …).
        kind: one of :data:`KINDS`.
        call: :data:`CLI` (``kwargs["argv"]`` are the command's arguments) or a function's dotted name.
        kwargs: the call's keyword arguments (the data root included: ``root`` or ``--data-root``).
        output: what it writes, relative to the data root.
        current: its stored output was made from the rows the freeze reads now (the step is skipped).
        why: what the currency check found.
    """

    name: str
    kind: str
    call: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    current: bool = False
    why: str = ""

    @property
    def command(self) -> str:
        """The step as one would type it: a command line, or the function call."""
        if self.call == CLI:
            return f"{CLI} {shlex.join(self.kwargs['argv'])}"
        module, fn = self.call.rsplit(".", 1)
        args = [repr(self.kwargs["profile"])] + [f"{k}={_show(v)}" for k, v in self.kwargs.items()
                                                 if k != "profile" and not (k == "root" and v is None)]
        return f"{module.rsplit('.', 1)[-1]}.{fn}({', '.join(args)})"


def _show(v: Any) -> str:
    if isinstance(v, tuple) and len(v) > 3 and all(isinstance(x, int) for x in v) \
            and list(v) == list(range(v[0], v[0] + len(v))):
        return f"range({v[0]}, {v[0] + len(v)})"
    return repr(v)


# --- the rows the freeze reads ----------------------------------------------------------------------

class _Rows:
    """The training rows the freeze admits (what every writer of the cascade reads), read once."""

    def __init__(self, profile: str, root: str | None):
        self.profile, self.root = profile, root

    @functools.cached_property
    def df(self) -> pd.DataFrame:
        from .law_fits import TRAINING_EXPERIMENTS
        from .store import load_runs

        return load_runs(self.profile, experiment=TRAINING_EXPERIMENTS, root=self.root)

    @functools.cached_property
    def sha(self) -> str:
        from .._io import frame_sha256

        return frame_sha256(self.df)

    @functools.cached_property
    def _sim_inputs(self) -> tuple:
        from .qat_design import _p4_sim_inputs

        return _p4_sim_inputs(self.df)

    @functools.cached_property
    def seed_sd(self) -> float:
        """σ_seed as P4's and P6's simulations read it when not given (the design table's)."""
        from .compute_optimal import p6_seed_sd

        return float(p6_seed_sd(self._sim_inputs, "seed"))

    @functools.cached_property
    def seed_sd_upper(self) -> float:
        """σ_seed of P6's ``seed_upper`` rows (``compute_optimal.p6_seed_sd``, as the writer reads it)."""
        from .compute_optimal import p6_seed_sd

        return float(p6_seed_sd(self._sim_inputs, "seed_upper"))


def _folder(root: str | os.PathLike | None) -> Path:
    from .store import data_dir

    return Path(root) if root is not None else data_dir()


# --- the guard ----------------------------------------------------------------------------------------

def _describe(rows: pd.DataFrame, exp: str, run_id: str) -> str:
    r = rows[rows["run_id"] == run_id].iloc[0]
    return (f"{exp} run {run_id} ({r['size']}, D {int(r['n_tokens']):,}, seed {int(r['seed'])}, "
            f"W/A/KV {r['fmt_w']}/{r['fmt_a']}/{r['fmt_kv']})")


def check_freeze(profile: str, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Refuse a data freeze that would feed the cascade part of a run or a run without all its rows.

    Every declared sweep of `profile` (``sweep.declared_experiments``) is read whole (all evaluation
    versions, as ``sweep.coverage`` counts): a run with rows on both sides of the freeze
    (``store.after_freeze``), or a run the freeze admits (a row at or before it) that lacks some of its
    planned rows (``sweep.plan``'s ``obs_ids``: every post-training quantization at every evaluation
    version), is refused. Runs with every row after the freeze wait for the next cascade.

    Args:
        profile: a declared profile (``cpu``).
        root: a ``data/`` folder (default ``store.data_dir()``).

    Returns:
        One row per declared sweep: ``experiment``, ``runs_planned``, ``runs_admitted`` (a row at or
        before the freeze), ``runs_after_freeze`` (every row after it), ``runs_untrained`` (no row at all),
        ``freeze``. Untrained runs are not refused here (a sweep may be declared before it runs);
        :func:`run_cascade` refuses stale steps while the freeze reads only part of a sweep's runs.

    Raises:
        ValueError: an unknown profile, a bad freeze, or the runs above (each named: sweep, run_id,
            size, D, seed, training formats, and its rows on each side or missing).
        StoreError: a damaged results file.
    """
    from .store import COLUMNS, after_freeze, read_rows, read_until
    from .sweep import declared_experiments, plan

    freeze = read_until(profile)
    folder = _folder(root) / "runs" / profile
    split, partial, summary = [], [], []
    for exp in declared_experiments(profile):
        specs = plan(profile, exp)
        rows = read_rows(folder / f"{exp}.csv", COLUMNS, "obs_id")
        if rows.empty:
            summary.append({"experiment": exp, "runs_planned": len(specs), "runs_admitted": 0,
                            "runs_after_freeze": 0, "runs_untrained": len(specs), "freeze": freeze})
            continue
        late = after_freeze(rows, freeze)
        side = pd.DataFrame({"run_id": rows["run_id"].astype(str), "late": late.to_numpy(bool)})
        sides = side.groupby("run_id")["late"].agg(["any", "all"])
        cut = set(sides.index[sides["any"] & ~sides["all"]])
        for run_id in sorted(cut):
            n_late = int(side.loc[side["run_id"] == run_id, "late"].sum())
            n_all = int((side["run_id"] == run_id).sum())
            split.append(f"{_describe(rows, exp, run_id)}: {n_all - n_late} rows at or before, {n_late} after")
        have = set(rows.loc[~late, "obs_id"].astype(str))
        admitted = 0
        for s in specs:
            got = sum(o in have for o in s.obs_ids)
            admitted += got > 0
            if 0 < got < len(s.obs_ids) and s.run_id not in cut:
                partial.append(f"{_describe(rows, exp, s.run_id)}: {got} of its {len(s.obs_ids)} planned rows")
        late_runs = set(sides.index[sides["all"]])
        trained = set(side["run_id"])
        summary.append({"experiment": exp, "runs_planned": len(specs), "runs_admitted": int(admitted),
                        "runs_after_freeze": len(late_runs & {s.run_id for s in specs}),
                        "runs_untrained": sum(s.run_id not in trained for s in specs), "freeze": freeze})
    if split or partial:
        where = f"the data freeze {freeze} (store.ROWS_READ_UNTIL[{profile!r}])" if freeze else "no data freeze"

        def listing(items: list[str]) -> str:
            return "; ".join(items[:10]) + (f"; and {len(items) - 10} more" if len(items) > 10 else "")

        parts = []
        if split:
            parts.append(f"{len(split)} run(s) with rows on both sides of it: {listing(split)}")
        if partial:
            parts.append(f"{len(partial)} run(s) it admits without all their planned rows (a half-trained "
                         f"batch, or rows lost: `sweep --only new` makes them again): {listing(partial)}")
        data_arg = f" --data-root {root}" if root is not None else ""
        raise ValueError(f"refused, nothing was run: with {where}, " + "; ".join(parts) + ". Move the freeze past "
                         "the batch's last row once every run of it is complete (`python -m bitlaws coverage "
                         f"--profile {profile}{data_arg}`), or back before its first, then rerun")
    return pd.DataFrame(summary)


# --- the steps' arguments, read back from the stored tables ---------------------------------------------

def _read_csv(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.exists() else None


def _seed_sd_arg(value: float, sha: str, design: pd.DataFrame | None) -> float | None:
    """The ``seed_sd`` argument that made a stored row at σ_seed `value` from rows of hash `sha`: 0.0 for 0;
    None (the design table's σ_seed, what the writers read by default) where `value` is the σ_seed of the
    design table's P4 rows made from the same rows, or where no design table of those rows is kept (the
    tables hold rows at the design table's σ_seed and at 0, data/README.md); else `value` itself."""
    value = float(value)
    if value == 0.0:
        return 0.0
    if design is not None and {"claim", "inputs_sha256", "seed_sd"} <= set(design.columns):
        same = design[(design["claim"] == "P4") & (design["inputs_sha256"].astype(str) == sha)]
        if len(same):
            return None if any(math.isclose(value, float(v), rel_tol=1e-9) for v in same["seed_sd"]) else value
    return None


def _design_args(tab: pd.DataFrame | None) -> list[tuple[int | None, list[str] | None]]:
    """(n_sim, claims) per ``design-power`` call: one call (claims None) where every row has one
    ``n_sim``, else one per ``n_sim`` with its claims; (None, None) without a table (the command's default)."""
    if tab is None or tab.empty:
        return [(None, None)]
    by: dict[int, list[str]] = {}
    for claim, n in zip(tab["claim"].astype(str), tab["n_sim"]):
        claims = by.setdefault(int(n), [])
        if claim not in claims:
            claims.append(claim)
    return [(n, None) for n in by] if len(by) == 1 else list(by.items())


def _replicate_kwargs(tab: pd.DataFrame, path: Path) -> dict[str, Any]:
    seeds = tuple(sorted({int(s) for s in tab["seeds"]}))
    rngs = tuple(sorted({int(r) for r in tab["rng"]}))
    n_sim = sorted({int(n) for n in tab["n_sim"]})
    pairs = {(int(r), int(s)) for r, s in zip(tab["rng"], tab["seeds"])}
    if len(n_sim) != 1 or pairs != {(r, s) for r in rngs for s in seeds} or len(pairs) != len(tab):
        raise ValueError(f"{path}: not the rows of one write_p4_replicates call (rngs × seeds at one n_sim, each "
                         f"once); found n_sim {n_sim}, {len(tab)} rows, (rng, seeds) {sorted(pairs)}")
    return {"seeds": seeds, "rngs": rngs, "n_sim": n_sim[0]}


def _pool_kwargs(tab: pd.DataFrame, design: pd.DataFrame | None) -> list[dict[str, Any]]:
    """One ``write_p4_pool_power`` call per rectangle of stored rows: at each (n_sim, pool, seed_sd), the
    generators that hold the same seed counts, in the order the rows were written."""
    calls: dict[tuple, dict[str, Any]] = {}
    seeds_of: dict[tuple, dict[int, list[int]]] = {}
    for r in tab.itertuples(index=False):
        key = (int(r.n_sim), int(r.pool), float(r.seed_sd), str(r.inputs_sha256))
        seeds_of.setdefault(key, {}).setdefault(int(r.rng), [])
        if int(r.seeds) not in seeds_of[key][int(r.rng)]:
            seeds_of[key][int(r.rng)].append(int(r.seeds))
    for (n_sim, pool, sd, sha), by_rng in seeds_of.items():
        arg = _seed_sd_arg(sd, sha, design)
        for rng, seeds in by_rng.items():
            k = (n_sim, pool, arg, tuple(sorted(seeds)))
            call = calls.setdefault(k, {"rngs": (), "seeds": tuple(sorted(seeds)), "n_sim": n_sim, "pool": pool,
                                        **({} if arg is None else {"seed_sd": arg})})
            if rng not in call["rngs"]:
                call["rngs"] = (*call["rngs"], rng)
    return [dict(c, rngs=tuple(sorted(c["rngs"]))) for c in calls.values()]


def _p6_kwargs(tab: pd.DataFrame, design: pd.DataFrame | None) -> list[dict[str, Any]]:
    """One ``write_p6_pstar_power`` call per (noise, world, rng, n_boot, floor, σ_seed) of the stored rows of
    this simulation version (any training rows) and of its plan (the datasets each call was asked for,
    ``boot_check.P6_PSTAR_PLAN_COLUMNS``: a call killed part-way is not taken as complete), with the datasets
    they hold: the verdict's rows (``seed``,
    ``residual`` at ``power.NEFF_F_FLOOR``) and the sensitivity variants (another ``floor``, ``seed_upper``).
    ``floor`` is given only where it is not the default; ``seed_sd`` only to ``seed`` noise, where it is not
    the design table's (``residual`` and ``seed_upper`` set σ_seed themselves and refuse one)."""
    from .power import NEFF_F_FLOOR, P6_PSTAR_SIM_VERSION, P6_PSTAR_WORLDS

    tab = tab[tab["sim_version"].astype(str) == P6_PSTAR_SIM_VERSION]
    groups: dict[tuple, set[int]] = {}
    for r in tab.itertuples(index=False):
        sd = _seed_sd_arg(float(r.seed_sd), str(r.inputs_sha256), design) if r.noise == "seed" else None
        key = (str(r.noise), str(r.world), int(r.rng), int(r.n_boot), float(r.floor), sd)
        groups.setdefault(key, set()).add(int(r.dataset))
    noises, worlds = ("seed", "residual", "seed_upper"), list(P6_PSTAR_WORLDS)

    def order(k):
        return (k[4] != NEFF_F_FLOOR, noises.index(k[0]) if k[0] in noises else 9,
                worlds.index(k[1]) if k[1] in worlds else 9, k[2], k[3], k[4], -1.0 if k[5] is None else k[5])

    return [{"worlds": w, "noise": nz, "datasets": tuple(sorted(ds)), "n_boot": nb, "seed": rng,
             **({} if fl == NEFF_F_FLOOR else {"floor": fl}), **({"seed_sd": sd} if sd is not None else {})}
            for (nz, w, rng, nb, fl, sd), ds in sorted(groups.items(), key=lambda kv: order(kv[0]))]


def _book_data() -> Path:
    """The repository's own ``data/`` folder, whose tables give the book's design (``_derive``)."""
    from .claims import repo_root

    return repo_root() / "data"


def _derive(profile: str, folder: Path) -> list[dict[str, Any]]:
    """The steps as (name, kind, call, replay kwargs without the data root, output), from the stored tables.

    A table the data folder lacks (a retraining from scratch in a ``--data-root`` of one's own) gives its steps
    the arguments of the repository's own table of the profile (``repo_root()/data``, the book's design), so the
    cascade makes every simulation the verdicts read there too; none where neither holds it."""
    from .boot_check import P6_PSTAR_COLUMNS, P6_PSTAR_PLAN_COLUMNS
    from .compute_optimal import p6_pstar_plan_path
    from .law_fits import N_BOOT, PIPELINE_N_BOOT, fits_path, load_fits
    from .store import read_rows

    own = _book_data()

    def source(path: Path) -> Path:  # where a step's arguments are read: the folder's table, else the book's
        return path if path.exists() else own / path.relative_to(folder)

    out: list[dict[str, Any]] = []
    fits = load_fits(profile, folder)
    argv = ["fit", "--profile", profile]
    boot = (fits.get("chinchilla") or {}).get("n_boot")
    if boot is not None and int(boot) != N_BOOT.get(profile, 200):
        argv += ["--boot", str(int(boot))]
    pboot = (fits.get("pipeline_boot") or {}).get("n_boot")
    if pboot is not None and int(pboot) != PIPELINE_N_BOOT.get(profile, 2000):
        argv += ["--pipeline-boot", str(int(pboot))]
    out.append({"name": "fit", "kind": "fit", "call": CLI, "kwargs": {"argv": argv},
                "output": str(fits_path(profile, "*", folder).relative_to(folder))})
    design_path = folder / "runs" / profile / "qat_design_power.csv"
    design = _read_csv(source(design_path))
    groups = _design_args(design)
    for i, (n_sim, claims) in enumerate(groups, start=1):
        argv = ["design-power", "--profile", profile] + ([] if n_sim is None else ["--n-sim", str(n_sim)]) \
            + ([] if claims is None else ["--claims", ",".join(claims)])
        out.append({"name": "design_power" + (f".{i}" if len(groups) > 1 else ""), "kind": "design_power",
                    "call": CLI, "kwargs": {"argv": argv}, "output": str(design_path.relative_to(folder))})
    rep_path = folder / "runs" / profile / "qat_design_p4_replicates.csv"
    rep_source = source(rep_path)
    rep = _read_csv(rep_source)
    if rep is not None and len(rep):
        out.append({"name": "p4_replicates", "kind": "p4_replicates", "call": f"{_QD}.write_p4_replicates",
                    "kwargs": _replicate_kwargs(rep, rep_source), "output": str(rep_path.relative_to(folder))})
    pool_path = folder / "checks" / profile / "p4_pool_power.csv"
    pool = _read_csv(source(pool_path))
    calls = _pool_kwargs(pool, design) if pool is not None and len(pool) else []
    for i, kw in enumerate(calls, start=1):
        out.append({"name": f"p4_pool.{i}", "kind": "p4_pool", "call": f"{_QD}.write_p4_pool_power", "kwargs": kw,
                    "output": str(pool_path.relative_to(folder))})
    p6_path = folder / "checks" / profile / "p6_pstar_power.csv"
    p6_source = source(p6_path)
    p6 = read_rows(p6_source, P6_PSTAR_COLUMNS, "sim_id") if p6_source.exists() else pd.DataFrame()
    # the datasets each writer's call was asked for (its plan), so a call killed part-way is not taken as complete
    plan_source = source(p6_pstar_plan_path(profile, folder))
    if plan_source.exists():
        planned = read_rows(plan_source, P6_PSTAR_PLAN_COLUMNS, "sim_id")
        p6 = pd.concat([p6[P6_PSTAR_PLAN_COLUMNS] if len(p6) else None, planned], ignore_index=True)
    for kw in (_p6_kwargs(p6, design) if len(p6) else []):
        name = f"p6_pstar.{kw['worlds']}.{kw['noise']}" + (f".floor{kw['floor']:g}" if "floor" in kw else "")
        taken = {o["name"] for o in out}
        if name in taken:
            name = next(f"{name}.{i}" for i in range(2, len(taken) + 3) if f"{name}.{i}" not in taken)
        out.append({"name": name, "kind": "p6_pstar", "call": f"{_CO}.write_p6_pstar_power", "kwargs": kw,
                    "output": str(p6_path.relative_to(folder))})
    p3_path = folder / "checks" / profile / "p3_power.csv"
    for kw in _p3_kwargs(source(p3_path)):
        out.append({"name": f"p3_power.{kw['worlds']}.{kw['noise']}", "kind": "p3_power",
                    "call": "bitlaws.study.p3_power.write_p3_power", "kwargs": kw,
                    "output": str(p3_path.relative_to(folder))})
    out.append({"name": "verdicts", "kind": "verdicts", "call": CLI,
                "kwargs": {"argv": ["verdicts", "--profile", profile]}, "output": "verdicts.json"})
    return out


def _with_root(spec: dict[str, Any], profile: str, root: str | os.PathLike | None) -> dict[str, Any]:
    kw = dict(spec["kwargs"])
    if spec["call"] == CLI:
        kw["argv"] = list(kw["argv"]) + ([] if root is None else ["--data-root", str(root)])
    else:
        kw = {"profile": profile, **kw, "root": None if root is None else str(root)}
    return {**spec, "kwargs": kw}


# --- is a step's stored output current? --------------------------------------------------------------------

def _fit_status(profile: str, folder: Path, rows: _Rows, argv: list[str]) -> tuple[bool, str]:
    """Whether ``python -m bitlaws fit`` would find nothing to redo: every stage record (``fits_are_current``),
    the pipeline bootstrap (its rows, draws asked for, P4 simulation version and no-P_a≤3 draws), the Eq. 2
    fit of each other PTQ method (``ptq_fit_is_current``), the joint fit and Eq. 13's D_crit draws
    (``ptq_degradation.d_crit_boot_is_current``) made from these rows."""
    from . import law_fits as lf
    from .power import P4_SIM_VERSION
    from .ptq_degradation import d_crit_boot_is_current

    df, fits = rows.df, lf.load_fits(profile, folder)
    frames = lf.stage_frames(df)
    stale = [s for s in lf.FIT_ORDER if not lf.record_is_current(fits.get(s), lf._sha(frames[s]))]
    if not lf.record_is_current(fits.get("table1"), lf._sha(frames["neff_w"])):
        stale.append("table1")
    boot = fits.get("pipeline_boot")
    want = int(argv[argv.index("--pipeline-boot") + 1]) if "--pipeline-boot" in argv else \
        lf.PIPELINE_N_BOOT.get(profile, 2000)
    if not lf.pipeline_boot_is_current(boot, df) or boot.get("n_boot") != want:
        stale.append("pipeline_boot")
    elif boot.get("status") == "ok" and "p4_power" in boot and (
            boot["p4_power"].get("sim_version") != P4_SIM_VERSION
            or not lf.p4_dropped_is_current(boot.get("p4_no_pa3"), boot, frames)):
        stale.append("pipeline_boot (P4 simulation)")
    methods = sorted(set(df["ptq_method"].dropna().astype(str)) - {"none", "rtn"}) if "ptq_method" in df else []
    stale += [f"ptq_{m}" for m in methods if not lf.ptq_fit_is_current(fits.get(f"ptq_{m}"), df, m)]
    if not lf.record_is_current(fits.get("joint_all"), lf._sha(lf._joint_all_rows(df))):
        stale.append("joint_all")
    d_ok, d_why = d_crit_boot_is_current(profile, df, folder)
    if not d_ok:
        stale.append(f"d_crit_boot: {d_why}")
    if stale:
        return False, f"made from other rows, by another fit version (now {lf.FIT_VERSION}), or missing: {', '.join(stale)}"
    n = (boot or {}).get("n_boot")
    return True, (f"every stage, table1, the pipeline bootstrap ({n} draws), "
                  + "".join(f"ptq_{m}, " for m in methods) + "joint_all, d_crit_boot made from these rows")


def _table_status(tab: pd.DataFrame | None, sha: str, what: str) -> tuple[bool, str]:
    if tab is None or tab.empty:
        return False, f"no {what} stored"
    other = sorted({h for h in tab["inputs_sha256"].astype(str)} - {sha})
    if other:
        return False, f"{what} made from other rows (inputs {', '.join(h[:12] + '…' for h in other)})"
    return True, f"{len(tab)} {what} made from these rows"


def _pool_status(tab: pd.DataFrame | None, kw: dict[str, Any], rows: _Rows) -> tuple[bool, str]:
    want = len(kw["rngs"]) * len(kw["seeds"])
    if tab is None or tab.empty:
        return False, f"0 of its {want} rows stored"
    sd = kw.get("seed_sd")
    sd = rows.seed_sd if sd is None else float(sd)
    mine = tab[(tab["inputs_sha256"].astype(str) == rows.sha) & (tab["n_sim"].astype(int) == kw["n_sim"])
               & (tab["pool"].astype(int) == kw["pool"])
               & pd.Series([math.isclose(float(v), sd, rel_tol=1e-9, abs_tol=0.0) for v in tab["seed_sd"]],
                           index=tab.index, dtype=bool)]
    have = {(int(r), int(s)) for r, s in zip(mine["rng"], mine["seeds"])}
    n = sum((r, s) in have for r in kw["rngs"] for s in kw["seeds"])
    return n == want, f"{n} of its {want} rows made from these rows"


def _p6_status(tab: pd.DataFrame, kw: dict[str, Any], rows: _Rows) -> tuple[bool, str]:
    from .boot_check import p6_pstar_sim_id
    from .power import NEFF_F_FLOOR, P6_PSTAR_SIM_VERSION

    noise = kw["noise"]
    sd = 0.0 if noise == "residual" else rows.seed_sd_upper if noise == "seed_upper" else \
        rows.seed_sd if kw.get("seed_sd") is None else float(kw["seed_sd"])
    floor = float(kw.get("floor", NEFF_F_FLOOR))
    have = set() if tab.empty else set(tab.loc[(tab["inputs_sha256"].astype(str) == rows.sha)
                                               & (tab["sim_version"].astype(str) == P6_PSTAR_SIM_VERSION), "sim_id"])
    n = sum(p6_pstar_sim_id(kw["worlds"], kw["seed"], k, sd, floor, kw["n_boot"], noise == "residual", noise,
                            rows.sha) in have for k in kw["datasets"])
    return n == len(kw["datasets"]), f"{n} of its {len(kw['datasets'])} datasets made from these rows"


def _p3_kwargs(path: Path) -> list[dict[str, Any]]:
    """One ``p3_power.write_p3_power`` call per (world, noise, rng, n_boot) of the stored rows and of their plan
    (``law_fits.P3_POWER_PLAN_COLUMNS``: the datasets each call was asked for, so a call killed part-way is not
    taken as complete) (any training rows, any simulation version: a new version replays the datasets the old
    one simulated, which ``_p3_status`` then finds missing), with the datasets there; none where both are
    absent."""
    from .law_fits import P3_POWER_COLUMNS, P3_POWER_PLAN_COLUMNS, P3_POWER_PLAN_CSV
    from .p3_power import P3_NOISES, P3_WORLDS
    from .store import read_rows

    plan = path.with_name(P3_POWER_PLAN_CSV)  # the datasets each call was asked for: a killed call is not complete
    parts = ([read_rows(path, P3_POWER_COLUMNS, "sim_id")[P3_POWER_PLAN_COLUMNS]] if path.exists() else []) \
        + ([read_rows(plan, P3_POWER_PLAN_COLUMNS, "sim_id")] if plan.exists() else [])
    if not parts:
        return []
    tab = pd.concat(parts, ignore_index=True)
    groups: dict[tuple, set[int]] = {}
    for r in tab.itertuples(index=False):
        groups.setdefault((str(r.world), str(r.noise), int(r.rng), int(r.n_boot)), set()).add(int(r.dataset))

    def order(k):
        return (P3_NOISES.index(k[1]) if k[1] in P3_NOISES else 9, P3_WORLDS.index(k[0]) if k[0] in P3_WORLDS else 9,
                k[2], k[3])

    return [{"worlds": w, "noise": nz, "datasets": tuple(sorted(ds)), "n_boot": nb, "seed": rng}
            for (w, nz, rng, nb), ds in sorted(groups.items(), key=lambda kv: order(kv[0]))]


def _p3_status(tab: pd.DataFrame, kw: dict[str, Any], rows: _Rows, legs: pd.DataFrame | None = None
               ) -> tuple[bool, str]:
    """A P3 power call is current when every dataset it was asked for is stored from these rows by this version,
    each with leg (a) of rule v7 (``legs``: ``p3_leg_a.csv``, which ``write_p3_power`` computes after simulating)."""
    from .law_fits import P3_POWER_SIM_VERSION, p3_leg_a_key, p3_sim_id

    sd = 0.0 if kw["noise"] == "residual" else rows.seed_sd
    have = set() if tab is None or tab.empty else set(
        tab.loc[(tab["inputs_sha256"].astype(str) == rows.sha)
                & (tab["sim_version"].astype(str) == P3_POWER_SIM_VERSION), "sim_id"])
    ids = [p3_sim_id(kw["worlds"], kw["noise"], kw["seed"], k, sd, kw["n_boot"], rows.sha) for k in kw["datasets"]]
    n = sum(i in have for i in ids)
    keys = set() if legs is None or legs.empty else set(legs["key"])
    n_a = sum(i in have and p3_leg_a_key(i) in keys for i in ids)
    why = f"{n} of its {len(ids)} datasets made from these rows"
    return n_a == len(ids), why + ("" if n_a == n else f", {n_a} of them with leg (a) of rule v7")


def _verdicts_status(profile: str, root: str | os.PathLike | None, folder: Path) -> tuple[bool, str]:
    """``python -m bitlaws verdicts --check``'s comparison: every recomputed verdict agrees with the store."""
    from .ledger import check_verdicts, compute_verdicts

    store = folder / "verdicts.json"
    if not store.is_file():
        return False, f"no {store.name} stored"
    with data_dir_set_to(root):
        new = compute_verdicts(profile)
        diffs = check_verdicts(profile, path=store, verdicts=new)
    if not diffs:
        return True, f"verdicts --check: all {len(new)} verdicts agree with {store.name}"
    differing = sorted({d.split(".", 1)[0].split(":", 1)[0] for d in diffs})
    return False, f"verdicts --check: {', '.join(differing)} differ ({diffs[0]})"


def _status(steps: list[Step], profile: str, root, folder: Path, rows: _Rows, check_verdicts: bool) -> list[Step]:
    from .boot_check import P6_PSTAR_COLUMNS
    from .law_fits import P3_LEG_A_COLUMNS, P3_LEG_A_CSV, P3_POWER_COLUMNS
    from .ptq_degradation import BOOK_PROFILE
    from .store import read_rows

    tables: dict[str, pd.DataFrame | None] = {}
    keyed = {"p6_pstar_power.csv": (P6_PSTAR_COLUMNS, "sim_id"), "p3_power.csv": (P3_POWER_COLUMNS, "sim_id"),
             P3_LEG_A_CSV: (P3_LEG_A_COLUMNS, "key")}  # row tables and their keys

    def table(rel: str) -> pd.DataFrame | None:
        if rel not in tables:
            p, (columns, key) = folder / rel, keyed.get(Path(rel).name, (None, None))
            tables[rel] = _read_csv(p) if columns is None else \
                read_rows(p, columns, key) if p.exists() else pd.DataFrame()
        return tables[rel]

    out = []
    for s in steps:
        if s.kind == "fit":
            ok, why = _fit_status(profile, folder, rows, s.kwargs["argv"])
        elif s.kind == "design_power":
            tab = table(s.output)
            argv = s.kwargs["argv"]
            if tab is not None and "--claims" in argv:
                tab = tab[tab["claim"].isin(argv[argv.index("--claims") + 1].split(","))]
            ok, why = _table_status(tab, rows.sha, "design rows")
        elif s.kind == "p4_replicates":
            ok, why = _table_status(table(s.output), rows.sha, "replicate rows")
        elif s.kind == "p4_pool":
            ok, why = _pool_status(table(s.output), s.kwargs, rows)
        elif s.kind == "p6_pstar":
            ok, why = _p6_status(table(s.output), s.kwargs, rows)
        elif s.kind == "p3_power":
            ok, why = _p3_status(table(s.output), s.kwargs, rows, table(str(Path(s.output).with_name(P3_LEG_A_CSV))))
        elif profile != BOOK_PROFILE:
            ok, why = True, f"profile {profile!r}: `verdicts` prints them and stores nothing"
        elif any(not o.current for o in out):
            ok, why = False, "after the stale steps above"
        elif not check_verdicts:
            ok, why = False, "not checked (check_verdicts=False)"
        else:
            ok, why = _verdicts_status(profile, root, folder)
        out.append(replace(s, current=bool(ok), why=why))
    return out


# --- the plan -------------------------------------------------------------------------------------------

def _plan_path(folder: Path, profile: str) -> Path:
    return folder / "checks" / profile / PLAN_FILE


def _saved_plan(folder: Path, profile: str, sha: str) -> list[dict[str, Any]] | None:
    """The plan kept by a cascade under way on the same rows, or None."""
    path = _plan_path(folder, profile)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if saved.get("profile") != profile or saved.get("inputs_sha256") != sha:
        return None
    return [{**s, "kwargs": {k: tuple(v) if isinstance(v, list) and k != "argv" else v
                             for k, v in s["kwargs"].items()}} for s in saved["steps"]]


def _save_plan(folder: Path, profile: str, sha: str, specs: list[dict[str, Any]]) -> None:
    from .._io import write_atomic

    path = _plan_path(folder, profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"profile": profile, "inputs_sha256": sha, "steps": specs}, indent=1) + "\n")


def _specs(profile: str, folder: Path, rows: _Rows) -> tuple[list[dict[str, Any]], bool]:
    saved = _saved_plan(folder, profile, rows.sha)
    return (saved, True) if saved is not None else (_derive(profile, folder), False)


def cascade_plan(profile: str, root: str | os.PathLike | None = None, check_verdicts: bool = True) -> list[Step]:
    """The ordered steps that remake every table the data freeze feeds, each marked current or stale.

    Order: ``fit`` (``python -m bitlaws fit``), ``design_power`` (``design-power`` at the stored table's
    ``n_sim``), ``p4_replicates`` (``qat_design.write_p4_replicates`` at its table's seeds, rngs, n_sim),
    ``p4_pool.N`` (``qat_design.write_p4_pool_power``, one call per rectangle of generators × seed counts
    at one (n_sim, pool, σ_seed) of its table; ``seed_sd`` given only where it is not the design table's),
    ``p6_pstar.…`` (``compute_optimal.write_p6_pstar_power``, one call per (world, noise, rng, n_boot, floor)
    of its table, the sensitivity variants included, with the datasets there; only ``seed`` noise may take
    ``seed_sd``), ``p3_power.…`` (``p3_power.write_p3_power``, one call per (world, noise, rng, n_boot) of its
    table, with the datasets there), ``verdicts``. A table not
    stored gives no step. While a cascade is under way on the same rows its saved plan is used, since
    the writers replace the tables the arguments are read from.

    A step is current where its stored output was made from the rows the freeze reads now
    (``inputs_sha256`` = ``frame_sha256(load_runs(profile, TRAINING_EXPERIMENTS))``; the fits as
    ``law_fits.fits_are_current``, ``pipeline_boot_is_current`` and ``ptq_fit_is_current`` decide; the
    P6 rows by their key, ``boot_check.p6_pstar_sim_id``, and hash, as ``compute_optimal.load_p6_pstar_power``
    reads them); ``verdicts`` is stale after any stale
    step, else current where ``python -m bitlaws verdicts --check`` finds no difference (minutes).

    Args:
        profile: a declared profile.
        root: a ``data/`` folder (default ``store.data_dir()``); read only.
        check_verdicts: run the verdicts' check where every earlier step is current (else: not checked,
            marked stale).

    Returns:
        The steps, in order.

    Raises:
        ValueError: an unknown profile, :func:`check_freeze`'s refusal, or a stored table that is not the
            output of the calls it should replay.
        FileNotFoundError: no training rows for `profile`.
    """
    return _plan(profile, root, check_verdicts)[0]


def _plan(profile: str, root, check_verdicts: bool = True):
    """(steps, the rows read, root-less step specs, resumed: the saved plan was used, check_freeze's summary)."""
    from . import PROFILE_NAMES

    if profile not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {sorted(PROFILE_NAMES)}")
    summary = check_freeze(profile, root)
    folder, rows = _folder(root), _Rows(profile, root)
    specs, resumed = _specs(profile, folder, rows)
    steps = [Step(**_with_root(s, profile, root)) for s in specs]
    return _status(steps, profile, root, folder, rows, check_verdicts), rows, specs, resumed, summary


# --- running it ---------------------------------------------------------------------------------------------

def _run_cli(argv: list[str]) -> int:
    """``python -m bitlaws ARGV`` in a child process (its output shown as it comes); its exit status."""
    return subprocess.run([sys.executable, "-m", "bitlaws", *argv], check=False).returncode


def _invoke(step: Step, root, progress: bool) -> None:
    """Run one step."""
    if step.call == CLI:
        rc = _run_cli(list(step.kwargs["argv"]))
        if rc != 0:
            raise StepFailed(f"step {step.name}: `{step.command}` exited with status {rc}; the steps before it are "
                             "kept: fix the cause and rerun the cascade to resume")
        return
    module, fn = step.call.rsplit(".", 1)
    func = getattr(importlib.import_module(module), fn)
    try:
        with data_dir_set_to(root):
            func(**step.kwargs, progress=progress)
    except Exception as exc:  # noqa: BLE001 - named with its step, the cause chained
        raise StepFailed(f"step {step.name}: `{step.command}` failed: {type(exc).__name__}: {exc}; the steps "
                         "before it are kept: fix the cause and rerun the cascade to resume") from exc


def _table(steps: list[Step], status: dict[str, str], seconds: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"step": s.name, "status": status[s.name], "seconds": seconds.get(s.name, math.nan),
                          "command": s.command, "why": s.why} for s in steps],
                        columns=["step", "status", "seconds", "command", "why"])


def p6_other_versions(profile: str, root: str | os.PathLike | None = None) -> str:
    """What the cascade does not replay of P6's P* table: its rows of simulation versions other than
    ``power.P6_PSTAR_SIM_VERSION`` (a changed simulation is a code change, not a moved freeze, so whoever
    bumps the version chooses which of those groups to simulate again; ``load_p6_pstar_power`` reads only
    this version's rows). "" where there are none.

    Returns:
        One clause: per other version, its rows and (world, noise) groups, and the call that remakes one.
    """
    from .boot_check import P6_PSTAR_COLUMNS
    from .power import P6_PSTAR_SIM_VERSION
    from .store import read_rows

    path = _folder(root) / "checks" / profile / "p6_pstar_power.csv"
    tab = read_rows(path, P6_PSTAR_COLUMNS, "sim_id") if path.exists() else pd.DataFrame()
    if tab.empty:
        return ""
    other = tab[tab["sim_version"].astype(str) != P6_PSTAR_SIM_VERSION]
    if other.empty:
        return ""
    parts = []
    for v, g in other.groupby(other["sim_version"].astype(str), sort=True):
        groups = sorted({f"{w}/{n}" for w, n in zip(g["world"], g["noise"])})
        rows = f"{len(g)} row{'s' if len(g) != 1 else ''}"
        parts.append(f"version {v!r}: {rows} in {len(groups)} (world, noise) group{'s' if len(groups) != 1 else ''} "
                     f"({', '.join(groups)})")
    return (f"not replayed, P6 P* rows of another simulation version than this code's "
            f"({P6_PSTAR_SIM_VERSION!r}): {'; '.join(parts)}; the verdict does not read them, and "
            "compute_optimal.write_p6_pstar_power remakes a group at this version if it is still wanted")


def _summary_line(profile: str, root, rows: _Rows, steps: list[Step], resumed: bool,
                  freeze: pd.DataFrame) -> str:
    from .store import read_until

    stale = sum(not s.current for s in steps)
    late = [f"{r.experiment} {r.runs_after_freeze}" for r in freeze.itertuples() if r.runs_after_freeze]
    waiting = [f"{r.experiment} {r.runs_untrained}" for r in freeze.itertuples() if r.runs_untrained]
    return (f"cascade of profile {profile!r} under {_folder(root)}: freeze {read_until(profile) or 'none'}, training "
            f"rows {rows.sha[:12]}…; {len(steps)} steps, {stale} stale"
            + (" (the plan of the cascade under way)" if resumed else "")
            + (f"; runs trained after the freeze, read from the next cascade: {', '.join(late)}" if late else "")
            + (f"; runs not trained yet: {', '.join(waiting)}" if waiting else "")
            + (f"; {other}" if (other := p6_other_versions(profile, root)) else ""))


def _only(only) -> tuple[str, ...] | None:
    """`only` as a tuple of kinds (None: every kind); refuses an unknown kind, naming the allowed ones."""
    if only is None:
        return None
    kinds = tuple(dict.fromkeys(k.strip() for k in (only.split(",") if isinstance(only, str) else only) if k.strip()))
    bad = [k for k in kinds if k not in KINDS]
    if not kinds:
        raise ValueError(f"only needs at least one kind of step (comma-separated); allowed: {', '.join(KINDS)}")
    if bad:
        raise ValueError(f"unknown cascade step kind(s) {bad!r}; allowed: {', '.join(KINDS)} (kinds, not the step "
                         "names a dry run prints)")
    return kinds


def _blocked(steps: list[Step], only: tuple[str, ...]) -> tuple[list[str], str]:
    """Why the selected stale steps cannot run yet: the kinds they read that have stale steps and are not
    selected, and those steps named per kind ("" if none)."""
    stale: dict[str, list[str]] = {}
    for s in steps:
        if not s.current:
            stale.setdefault(s.kind, []).append(s.name)
    wanted = {s.kind for s in steps if s.kind in only and not s.current}
    missing = sorted({k for w in wanted for k in NEEDS[w] if k not in only and stale.get(k)}, key=KINDS.index)
    return missing, "; ".join(f"{k} ({', '.join(stale[k])})" for k in missing)


def run_cascade(profile: str, root: str | os.PathLike | None = None, dry_run: bool = False,
                progress: bool = True, allow_untrained: bool = False,
                only: str | list[str] | tuple[str, ...] | None = None) -> pd.DataFrame:
    """Remake, in order, every table of :func:`cascade_plan` that is not current; skip the others.

    Before the first step runs the plan is saved (``checks/<profile>/.cascade_plan.json``), so a killed
    cascade resumes with the same arguments even where a writer has already replaced the table they were
    read from; it is removed once every step is done. The commands run as child processes
    (``python -m bitlaws ...``); the functions in this process, with ``store.data_dir()`` set to `root`.
    P6 rows made from other training rows are kept: their key (``boot_check.p6_pstar_sim_id``) names the rows
    read, so the new datasets are new rows beside them, and no reader mixes the two. P6 rows of another
    simulation version are not replayed; the first line printed names them (:func:`p6_other_versions`).

    Args:
        profile: a declared profile.
        root: a ``data/`` folder (default ``store.data_dir()``): read and written.
        dry_run: print the plan with each step's status and run nothing.
        progress: print one line per step (current and skipped / ran in N s), and the writers' progress bars.
        allow_untrained: remake stale steps although the freeze reads only part of some sweep's runs (others
            untrained, or trained after it). By default that is refused: a batch half trained when the freeze
            moved past its last row would pass :func:`check_freeze` (its trained runs are whole), and the
            cascade would fit it. A sweep none of whose runs the freeze reads (declared, not yet begun, or
            wholly after it) does not count.
        only: run only the steps of these kinds (:data:`KINDS`; a comma-separated string or a list), the
            others shown as ``not selected``; refused while a step of a kind they read (:data:`NEEDS`) is
            stale. The plan is kept for the cascade that runs the rest. On two cores the P4 steps and the P6
            steps may run side by side: ``only="fit,design_power"``, then ``only="p4_replicates,p4_pool"``
            beside ``only="p6_pstar,p3_power"`` (their writers never write one table), then the whole cascade.

    Returns:
        One row per step: ``step``, ``status`` (``current``: skipped; ``ran``; ``not selected``; with
        `dry_run`, ``stale``: would run), ``seconds`` (NaN where not run), ``command``, ``why``.

    Raises:
        ValueError, FileNotFoundError: as :func:`cascade_plan`, or a stale step while the freeze reads part of
            a sweep's runs (each such sweep named with its counts) without `allow_untrained`, or an unknown
            kind in `only`, or a selected stale step whose inputs are stale (named); nothing is run.
        StepFailed: a step failed (named, its cause chained); the steps before it are kept.
    """
    only = _only(only)
    folder = _folder(root)
    steps, rows, specs, resumed, freeze = _plan(profile, root, check_verdicts=only is None or "verdicts" in only)
    say = print if progress else (lambda *a, **k: None)
    say(_summary_line(profile, root, rows, steps, resumed, freeze))
    width = max(len(s.name) for s in steps)
    half = [f"{r.experiment} ({r.runs_admitted} of {r.runs_planned} runs read"
            + (f", {r.runs_untrained} untrained" if r.runs_untrained else "")
            + (f", {r.runs_after_freeze} trained after the freeze" if r.runs_after_freeze else "") + ")"
            for r in freeze.itertuples() if r.runs_admitted and (r.runs_untrained or r.runs_after_freeze)]
    data_arg = f" --data-root {root}" if root is not None else ""
    until = os.environ.get("BITLAWS_UNTIL")  # the command line's --until reaches here (and the children) this way
    until_arg = f" --until {until}" if until else ""
    selected = {s.name: only is None or s.kind in only for s in steps}
    to_run = [s for s in steps if selected[s.name] and not s.current]
    refusal = (f"refused, nothing was run: the freeze reads part of a sweep's runs, so a batch may be half done: "
               f"{'; '.join(half)}; train the rest (`python -m bitlaws sweep --profile {profile}{data_arg} --only "
               "new`) and move the freeze past the last, or pass --allow-untrained if those runs are meant to wait "
               f"(it trains nothing; the {len(to_run)} stale step{'s' if len(to_run) != 1 else ''} selected would then "
               "run: the fits and simulations take hours)") if half and not allow_untrained and to_run else ""
    missing, blocked = _blocked(steps, only) if only is not None else ([], "")
    if blocked:
        blocked = (f"refused, nothing was run: the steps selected ({', '.join(only)}) read the output of stale "
                   f"steps not selected: {blocked}; run those first (`python -m bitlaws cascade --profile "
                   f"{profile}{data_arg}{until_arg} --only {','.join(missing)}`) or the whole cascade")
    if dry_run:
        for why in (refusal, blocked):
            if why:
                say("a run without --dry-run would stop here: " + why.removeprefix("refused, nothing was run: "))
        for i, s in enumerate(steps, start=1):
            mark = ("current" if s.current else "STALE  ") if selected[s.name] else "not selected"
            say(f"{i:>2} {s.name:<{width}}  {mark}  {s.command}\n"
                f"   {'':<{width}}  {s.why}")
        return _table(steps, {s.name: ("current" if s.current else "stale") if selected[s.name] else "not selected"
                              for s in steps}, {})
    if refusal:
        raise ValueError(refusal)
    if blocked:
        raise ValueError(blocked)
    status, seconds = {}, {}
    if to_run and not resumed:
        _save_plan(folder, profile, rows.sha, specs)
    for i, s in enumerate(steps, start=1):
        if not selected[s.name]:
            status[s.name] = "not selected"
            continue
        if s.current:
            status[s.name] = "current"
            say(f"{i:>2}/{len(steps)} {s.name:<{width}}  current, skipped ({s.why})", flush=True)
            continue
        t0 = time.monotonic()
        _invoke(s, root, progress)
        seconds[s.name], status[s.name] = time.monotonic() - t0, "ran"
        say(f"{i:>2}/{len(steps)} {s.name:<{width}}  ran in {seconds[s.name]:.0f} s: {s.command}", flush=True)
    if only is None or all(s.current or status[s.name] == "ran" for s in steps):
        _plan_path(folder, profile).unlink(missing_ok=True)
    return _table(steps, status, seconds)

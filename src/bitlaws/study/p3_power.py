"""P3's power: its rule run on datasets simulated on our design, with the instrument the verdict reads.

Dataset k of a world draws the runs of our Chinchilla stage and of the P_w sweep (``power.p6_pstar_dataset``,
generator ``default_rng([seed, k])``: the same noise as P6's P* leg's dataset k) from our Chinchilla constants
and the world's weight curve: ``paper`` (Table 2's γ_w = 2.67, n_w = 0.30, f_w(4) = 0.70), ``no_effect``
(f_w ≡ 1: the null) or ``ours`` (our own fit's γ_w, n_w: a world where the paper's value is wrong by what
our data say). Each is fitted on every run, bootstrapped as ``law_fits.pipeline_bootstrap`` does
(resamples of runs, Chinchilla refitted in each, its ``chinchilla`` and ``neff_w`` stages: the ones f_w reads)
and graded by ``law_fits.p3_decision``. The rows go to ``data/checks/<profile>/p3_power.csv``, one per dataset,
appended as each finishes and keyed by ``law_fits.p3_sim_id`` (which names the training rows read), so a killed
run resumes; ``law_fits.load_p3_power`` gives the verdict the rows made from the rows it reads. Leg (a) of rule v7
(``law_fits.p3_leg_a``: the classical tests on a least-squares fit) reads the point fits only, so it is computed on
each stored dataset regenerated from its generator (:func:`write_p3_leg_a`, ``p3_leg_a.csv``), not simulated again.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..laws import fit as lf
from ..laws import forms
from . import law_fits as la

__all__ = ["P3_NOISES", "P3_NULL_GAMMA", "P3_STAGES", "P3_WORLDS", "p3_leg_a_rows", "p3_power_rows", "p3_worlds",
           "write_p3_leg_a", "write_p3_power"]

P3_WORLDS = ("paper", "no_effect", "ours")
P3_NOISES = ("seed", "residual")
# γ_w [bits] of the null world: f_w(P) = 1 − e^(−P/0.05) is 1 to double precision at every P_w ≥ 2 we train.
P3_NULL_GAMMA = 0.05
P3_STAGES = ("chinchilla", "neff_w")  # the stages f_w(4) is read from (the others do not touch it)


def p3_worlds(ours: Mapping[str, float] | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    """World -> part -> (γ_x, n_x) the simulation generates from: ``paper`` (Table 2 for every part),
    ``no_effect`` (the same, with the weights' curve flat at 1: γ_w = ``P3_NULL_GAMMA``, n_w = 0) and, given
    ``ours`` (our ``neff_w`` fit's ``gamma_w``, ``n_w``), ``ours`` (the same with our weights' curve). Only the
    weights' curve is read (``P3_STAGES``)."""
    p = forms.PAPER_CONSTANTS
    paper = {x: (float(p[f"gamma_{x}"]), float(p[f"n_{x}"])) for x in ("w", "a", "kv")}
    out = {"paper": paper, "no_effect": {**paper, "w": (P3_NULL_GAMMA, 0.0)}}
    if ours is not None:
        out["ours"] = {**paper, "w": (float(ours["gamma_w"]), float(ours["n_w"]))}
    return out


def _dataset(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], world: Mapping, noise, seed: int,
             k: int, seed_sd: float, stage_sd: Mapping[str, float] | None):
    """Dataset k of a world (generator ``default_rng([seed, k])``) and its point fits: (frames, Chinchilla fit,
    ``neff_w`` fit). The one place a dataset is drawn, so :func:`p3_leg_a_rows` regenerates what
    :func:`p3_power_rows` simulated."""
    from .power import NEFF_F_FLOOR, p6_pstar_dataset

    syn = p6_pstar_dataset(frames, chinchilla, world, noise, np.random.default_rng([seed, k]), seed_sd, NEFF_F_FLOOR,
                           stage_sd)
    chin = lf.fit_stage(lf.STAGES["chinchilla"], syn["chinchilla"])
    return syn, chin, lf.fit_stage(lf.STAGES["neff_w"], syn["neff_w"], dict(chin.params))


def p3_power_rows(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], noise, worlds: Sequence[str],
                  datasets: Sequence[int], *, n_boot: int = 100, seed: int = 0, seed_sd: float = 0.0,
                  inputs_sha256: str = "", progress: bool = False, stage_sd: Mapping[str, float] | None = None,
                  ours: Mapping[str, float] | None = None):
    """P3's rule on simulated datasets (yielded one row per dataset, so a caller stores each as it finishes).

    Args:
        frames: ``law_fits.stage_frames(df)`` of our rows (the design). chinchilla: the generating constants.
        noise: ``noise.noise_model`` (one run's σ: ``noise.loss_sd``). worlds: names of :data:`P3_WORLDS`.
        datasets: dataset indices k. n_boot: resamples per dataset (≥ 2). seed: the generator's seed.
        seed_sd: σ_seed [nats], the part of one run's σ the runs of one (N, seed) share.
        inputs_sha256: the training rows' hash, named in each row's key. progress: a progress bar.
        stage_sd: per-frame σ [nats] instead of the seed noise (our fits' residual scatter,
            ``compute_optimal.stage_residual_sd``); the rows' ``noise`` is then ``residual``.
        ours: our ``neff_w`` fit's ``gamma_w``, ``n_w``, which the world ``ours`` needs.

    Yields:
        dicts with the columns of ``law_fits.P3_POWER_COLUMNS``: the point and the 95 % percentile interval
        of f_w(4) over the resamples (with the Monte Carlo errors of its ends), leg (a)'s p-values on the
        dataset's own σ_e² (``law_fits.p3_run_noise``, rule v5), and ``grade`` (``law_fits.p3_decision``).

    Raises:
        ValueError: an unknown world, ``ours`` asked for without our constants, ``n_boot`` < 2, or
            ``power.p6_pstar_dataset``'s errors.
    """
    from tqdm.auto import tqdm

    from .._io import git_sha

    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an int ≥ 2, got {n_boot!r}")
    every = p3_worlds(ours)
    bad = [w for w in worlds if w not in P3_WORLDS]
    if bad:
        raise ValueError(f"unknown world(s) {bad}; allowed: {list(P3_WORLDS)}")
    if "ours" in worlds and "ours" not in every:
        raise ValueError("the world 'ours' needs our neff_w fit's constants: pass ours={'gamma_w': …, 'n_w': …}")
    label = "seed" if stage_sd is None else "residual"
    stages = list(P3_STAGES)
    for w, k in tqdm([(w, int(k)) for k in datasets for w in worlds], desc="P3 power", disable=not progress):
        gamma, offset = every[w]["w"]
        syn, chin, neff = _dataset(frames, chinchilla, every[w], noise, seed, k, seed_sd, stage_sd)
        starts = {"chinchilla": np.asarray(chin.theta, dtype=float)[None, :],
                  "neff_w": np.asarray(neff.theta, dtype=float)[None, :]}
        draws = [la._refit_draw(syn, stages, [], la._draw_picks(syn, stages, la.BOOT_SEED, i), starts)[0]
                 for i in range(n_boot)]
        draws = [d for d in draws if d is not None]
        f4s = np.array([forms.precision_factor(4.0, d["gamma_w"], d["n_w"]) for d in draws], dtype=float)
        f4s = f4s[np.isfinite(f4s)]
        lo = hi = se_lo = se_hi = math.nan
        if len(f4s) >= 2:
            lo, hi = (float(v) for v in np.percentile(f4s, [2.5, 97.5]))
            se_lo, se_hi = la._percentile_mc_se(f4s, (2.5, 97.5))
        tests = la.p3_leg_a_v6(syn["neff_w"], syn["chinchilla"], dict(chin.params), dict(neff.params))
        dec = la.p3_decision(tests["p_effect"], tests["p_lack_of_fit"], lo, hi, se_lo, se_hi)
        yield {"sim_id": la.p3_sim_id(w, label, seed, k, seed_sd, n_boot, inputs_sha256), "world": w,
               "noise": label, "rng": int(seed), "dataset": k, "seed_sd": float(seed_sd), "n_boot": int(n_boot),
               "f_w_4_true": float(forms.precision_factor(4.0, gamma, offset)),
               "f_w_4_point": float(forms.precision_factor(4.0, neff.params["gamma_w"], neff.params["n_w"])),
               "low": lo, "high": hi, "low_mc_se": float(se_lo), "high_mc_se": float(se_hi),
               "p_effect": float(tests["p_effect"]), "p_lack_of_fit": float(tests["p_lack_of_fit"]),
               "grade": dec["grade"], "n_ok": len(draws), "sim_version": la.P3_POWER_SIM_VERSION,
               "inputs_sha256": inputs_sha256, "git_sha": git_sha(),
               "timestamp": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def p3_leg_a_rows(frames: Mapping[str, pd.DataFrame], chinchilla: Mapping[str, float], noise, power_rows: pd.DataFrame,
                  *, stage_sd: Mapping[str, float] | None = None, ours: Mapping[str, float] | None = None,
                  inputs_sha256: str = "", progress: bool = False):
    """Leg (a) of P3's rule v7 (``law_fits.p3_leg_a``) on stored power datasets, each regenerated from its generator
    (``default_rng([rng, dataset])``, the row's world, noise and σ_seed) and refitted at its point (no bootstrap:
    leg (a) reads the point fits only), so ``p3_power.csv`` need not be simulated again for a new leg (a).

    Args:
        frames, chinchilla, noise: as :func:`p3_power_rows` (the design the rows were simulated on).
        power_rows: rows of ``p3_power.csv`` (``law_fits.P3_POWER_COLUMNS``).
        stage_sd: each frame's residual σ, read for the rows whose ``noise`` is ``residual``.
        ours: our ``neff_w`` fit's ``gamma_w``, ``n_w`` (rows of the world ``ours``).
        inputs_sha256: the training rows' hash. progress: a progress bar.

    Yields:
        dicts with the columns of ``law_fits.P3_LEG_A_COLUMNS``, one per row, keyed ``law_fits.p3_leg_a_key``; its
        ``f_w_4_point`` and rule v6's ``p_effect_v6``, ``p_lack_of_fit_v6`` are the regenerated dataset's, which
        ``law_fits.load_p3_power`` checks against the stored row's (``law_fits.P3_LEG_A_POINT_TOL``,
        ``P3_LEG_A_P_TOL``): the p's tell datasets apart where f_w(4) cannot (1 exactly in many no-effect datasets).

    Raises:
        ValueError: a row of an unknown world or noise, or of the world ``ours`` without ``ours``.
    """
    from tqdm.auto import tqdm

    from .._io import git_sha

    every = p3_worlds(ours)
    for r in tqdm(list(power_rows.itertuples(index=False)), desc="P3 leg (a)", disable=not progress):
        if str(r.world) not in every or str(r.noise) not in P3_NOISES:
            raise ValueError(f"row {r.sim_id!r}: world {r.world!r}, noise {r.noise!r}; allowed: worlds "
                             f"{list(every)}, noises {list(P3_NOISES)}")
        if str(r.noise) == "residual" and stage_sd is None:
            raise ValueError(f"row {r.sim_id!r} was simulated at the residual scatter: pass stage_sd")
        syn, chin, neff = _dataset(frames, chinchilla, every[str(r.world)], noise, int(r.rng), int(r.dataset),
                                   float(r.seed_sd), stage_sd if str(r.noise) == "residual" else None)
        leg = la.p3_leg_a(syn["neff_w"], syn["chinchilla"], dict(chin.params), dict(neff.params))
        # rule v6's p's as p3_power_rows computed them: with the point f_w(4), the check that this is the stored dataset
        v6 = la.p3_leg_a_v6(syn["neff_w"], syn["chinchilla"], dict(chin.params), dict(neff.params))
        yield {"key": la.p3_leg_a_key(str(r.sim_id)), "sim_id": str(r.sim_id), "leg_a_version": la.P3_LEG_A_VERSION,
               "f_w_4_point": float(forms.precision_factor(4.0, neff.params["gamma_w"], neff.params["n_w"])),
               "p_effect_v6": float(v6["p_effect"]), "p_lack_of_fit_v6": float(v6["p_lack_of_fit"]),
               "test": leg["test"], **{k: float(leg[k]) for k in ("f_effect", "p_effect", "f_lack_of_fit",
                                                                   "p_lack_of_fit", "dof_effect", "dof_lof", "dof_pe",
                                                                   "gamma_w", "n_w")},
               "inputs_sha256": inputs_sha256, "git_sha": git_sha(),
               "timestamp": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_p3_leg_a(profile: str = "cpu", root: str | os.PathLike | None = None, sim_ids: Sequence[str] | None = None,
                   progress: bool = False) -> Path:
    """Leg (a) of P3's rule v7 on every stored power dataset made from the rows read now (or on ``sim_ids`` of
    them) that has none yet, appended to ``<root>/checks/<profile>/p3_leg_a.csv`` as each finishes
    (``store.append_rows``, keyed by ``law_fits.p3_leg_a_key``: a rerun resumes, two processes may write at once).
    One to a few seconds a dataset (two point fits, the multistart refit and the tests, no bootstrap).

    Raises:
        ValueError: no power rows of this version made from these rows (run :func:`write_p3_power`), or
            ``compute_optimal.simulation_design``'s errors (fits missing or made from other rows).
    """
    from .compute_optimal import simulation_design
    from .store import append_rows, read_current_rows, read_rows

    design = simulation_design(profile, root, "write_p3_leg_a", "residual", ("neff_w",))
    read = design["read"]
    tab, why = read_current_rows(la.p3_power_path(profile, root), la.P3_POWER_COLUMNS, "sim_id",
                                 la.P3_POWER_SIM_VERSION, read, f"bitlaws.study.p3_power.write_p3_power('{profile}')")
    if tab is None:
        raise ValueError(f"no P3 power datasets to compute leg (a) on: {why}")
    path = la.p3_leg_a_path(profile, root)
    have = set(read_rows(path, la.P3_LEG_A_COLUMNS, "key").get("key", [])) if path.exists() else set()
    todo = tab[~tab["sim_id"].map(la.p3_leg_a_key).isin(have)]
    if sim_ids is not None:
        todo = todo[todo["sim_id"].isin(set(sim_ids))]
    for row in p3_leg_a_rows(design["frames"], design["chin"], design["inputs"][0], todo, stage_sd=design["stage_sd"],
                             ours=la.params_of(design["fits"].get("neff_w")), inputs_sha256=read, progress=progress):
        append_rows(path, [row], la.P3_LEG_A_COLUMNS, "key")
    return path


def write_p3_power(profile: str = "cpu", worlds: str | Sequence[str] | None = None, datasets=range(40),
                   n_boot: int = 100, seed: int = 0, noise: str = "seed", root: str | os.PathLike | None = None,
                   progress: bool = False) -> Path:
    """Simulate P3's power on the profile's committed design and append one row per dataset to
    ``<root>/checks/<profile>/p3_power.csv`` as each finishes (``store.append_rows``, keyed by ``sim_id``: a
    rerun skips the datasets there, so a killed run resumes and two processes may write at once). Before it
    simulates any, it records every dataset it was asked for in ``law_fits.p3_power_plan_path`` (same key), so
    the cascade sees a killed call's unfinished datasets.

    Args:
        profile: a declared profile with its Chinchilla and ``neff_w`` fits, made from the rows read now.
        worlds: names of :data:`P3_WORLDS` (default all three; one name alone is one world). datasets: indices.
        n_boot: resamples per dataset (the verdict's own bootstrap has 2000; fewer widen the Monte Carlo
            error on the interval's ends, which the rule reads, so the power is if anything understated).
        seed: the generator's seed. root: a ``data/`` folder. progress: a progress bar.
        noise: ``seed`` (one run's σ, σ_seed of it shared per (N, seed), as P4's and P6's simulations) or
            ``residual`` (each frame's runs at the RMS residual of our own fit on it, σ_seed 0).

    Raises:
        ValueError: an unknown world or noise, or the fits missing or made from other rows than the freeze
            reads (run ``python -m bitlaws fit``).
    """
    from .compute_optimal import p6_seed_sd, simulation_design
    from .store import append_rows, read_rows

    if noise not in P3_NOISES:
        raise ValueError(f"unknown noise {noise!r}; allowed: {', '.join(map(repr, P3_NOISES))}")
    worlds = list(P3_WORLDS if worlds is None else [worlds] if isinstance(worlds, str) else worlds)
    bad = [w for w in worlds if w not in P3_WORLDS]
    if bad:
        raise ValueError(f"unknown world(s) {bad}; allowed: {list(P3_WORLDS)}")
    design = simulation_design(profile, root, "write_p3_power", noise, ("neff_w",))
    chin, inputs, stage_sd = design["chin"], design["inputs"], design["stage_sd"]
    seed_sd = p6_seed_sd(inputs, noise)
    path = la.p3_power_path(profile, root)
    have = set(read_rows(path, la.P3_POWER_COLUMNS, "sim_id").get("sim_id", [])) if path.exists() else set()
    frames, read = design["frames"], design["read"]
    # the plan first: every dataset asked for, so a call killed part-way leaves what it did not finish on record
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    planned = [{"sim_id": la.p3_sim_id(w, noise, seed, k, seed_sd, n_boot, read), "world": w, "noise": noise,
                "rng": int(seed), "dataset": int(k), "seed_sd": float(seed_sd), "n_boot": int(n_boot),
                "sim_version": la.P3_POWER_SIM_VERSION, "inputs_sha256": read, "timestamp": stamp}
               for w in worlds for k in datasets]
    append_rows(la.p3_power_plan_path(profile, root), planned, la.P3_POWER_PLAN_COLUMNS, "sim_id")
    for w in worlds:
        left = [r["dataset"] for r in planned if r["world"] == w and r["sim_id"] not in have]
        for row in p3_power_rows(frames, chin, inputs[0], [w], left, n_boot=n_boot, seed=seed, seed_sd=seed_sd,
                                 inputs_sha256=read, progress=progress, stage_sd=stage_sd,
                                 ours=la.params_of(design["fits"].get("neff_w"))):
            append_rows(path, [row], la.P3_POWER_COLUMNS, "sim_id")
    # leg (a) of rule v7 on the datasets of this call (stored now or before): the verdict reads it beside each row
    write_p3_leg_a(profile, root, [r["sim_id"] for r in planned], progress)
    return path

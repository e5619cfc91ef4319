"""Declarative sweeps, profiles and a resumable runner with local and SLURM executors.

A sweep is a list of :class:`RunSpec`: one training run (model, budget, seed) and the
post-training quantizations done right after it, so no later step needs its checkpoint.
:func:`run_sweep`, holding the data root's lock (:func:`bitlaws.study.store.sweep_lock`),

1. reads the observation CSV and skips every run whose observations (``obs_id``) are all there;
2. trains the rest, new and interrupted runs first, then re-evaluations, each group cheapest
   first, each in a run folder holding a resumable checkpoint;
3. appends each finished run's loss curve, then its rows (journaled appends; rows last, as
   ``obs_id`` is the resume key). So a sweep killed at any moment (even by SIGKILL) resumes without
   losing or duplicating a row, and a run restarts from its last checkpoint, bit-identical.

Executors (``EXECUTORS``): ``local`` (in this process for one worker, else a process pool),
``submitit-local`` (testing the cluster path) and ``slurm`` (submitit; :class:`SlurmOptions`).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from tqdm import tqdm

from .._io import write_atomic
from ..model import ModelConfig, get_size
from ..precision import TrainPrecision
from ..ptq.rtn import RTNConfig, rtn_quantize_
from ..train import TrainConfig, config_dict, evaluate, train
from .store import (
    COLUMNS,
    CURVE_COLUMNS,
    OPTIONAL_COLUMNS,
    EVAL_VERSION_READ,
    EVAL_VERSIONS,
    append_rows,
    probe_csv,
    probe_writable,
    provenance,
    read_rows,
    stable_hash,
    sweep_lock,
)

__all__ = ["Profile", "QATPlan", "ConfoundPlan", "PowerPlan", "Evaluation", "lr_peak", "lr_schedule", "repetition",
           "SlurmOptions", "make_executor", "PROFILES", "spec_corpus", "select_profile",
           "MissingRowsError", "RunSpec", "EXPERIMENTS", "base_grid", "qat_marginal", "qat_joint",
           "qat_formats", "compute_matched", "declared_experiments", "plan", "run_spec", "run_sweep", "coverage",
           "coverage_table", "EXECUTORS"]

EXECUTORS = ("local", "submitit-local", "slurm")
HP = 16  # "bits" of a high-precision (unquantized) part in the sweep declarations
# Fields of TrainConfig that do not change a run's result, so they are left out of run_id.
_NON_RESULT_FIELDS = ("threads", "log_every", "ckpt_every")


@dataclass(frozen=True)
class QATPlan:
    """The low-precision-training sweeps of a profile (issue 3; Kumar et al. §4, Fig. 3–7).

    Bits of 16 mean "not quantized". Integer parts use the paper's training scheme (symmetric
    absmax; weights per output channel, activations and K/V per tensor).

    Args:
        marginal_sizes, marginal_budgets, marginal_bits: P_w, P_a, P_kv varied one at a time
            over these sizes × budgets (the base grid's high-precision runs are the baselines).
        joint_cell: (size, budget) of the joint sweep; joint_combos: its (P_w, P_a, P_kv).
        format_sizes, format_budget, formats: weight-only training in these formats (P10).
        qat_ptq_bits_w: weight-only runs of the marginal sweep that are also quantized after
            training (RTN) to every `bits_post` below their P_w (the unified law, P9).
        bits_post: the post-training bit widths for those pairs.
        cm_budget, cm_cells: the compute-matched suite, (size, P) with N·P about constant; every
            part (W, A, KV) at P.
        cm_reference: the base-grid size whose high-precision run at ``cm_budget`` is the suite's
            16-bit member (its N·16 is the N·P the suite matches).
        cm_seeds: the seeds of every low-precision member (their spread is the suite's own noise
            floor, at the suite's sizes); the 16-bit member is the base grid's seed-0 run.
        cm_more_levels: further compute levels, each ``(budget, reference, cells)`` as the three
            fields above, for P* across compute (P6's "independent of C"); the same seeds.
            :meth:`levels` lists every level, the one above first.
    """

    marginal_sizes: tuple[str, ...]
    marginal_budgets: tuple[int, ...]
    marginal_bits: tuple[int, ...]
    joint_cell: tuple[str, int]
    joint_combos: tuple[tuple[int, int, int], ...]
    format_sizes: tuple[str, ...]
    format_budget: int
    formats: tuple[str, ...]
    qat_ptq_bits_w: tuple[int, ...]
    bits_post: tuple[int, ...]
    cm_budget: int
    cm_cells: tuple[tuple[str, int], ...]
    cm_reference: str
    cm_seeds: tuple[int, ...] = (0,)
    cm_more_levels: tuple[tuple[int, str, tuple[tuple[str, int], ...]], ...] = ()

    def levels(self) -> list[tuple[int, str, tuple[tuple[str, int], ...]]]:
        """Every compute-matched level as (budget, reference size, (size, P) cells), primary first."""
        return [(self.cm_budget, self.cm_reference, self.cm_cells), *self.cm_more_levels]


@dataclass(frozen=True)
class ConfoundPlan:
    """The design checks of issue 15: is δ_PTQ's growth with D the tokens, or the learning rate's
    decay, or repetition; and is the learning-rate rule tuned. Every run is followed by RTN and GPTQ
    (act-order) at ``ptq_bits``.

    Args:
        lr_sizes, lr_budget, lr_multipliers: the peak learning rate at these multiples of the rule
            (:func:`bitlaws.train.peak_lr_rule`), at each size and one D (×1 is the base grid's run).
        schedule_sizes, schedule_budgets: constant-LR runs to each D, and warmup-stable-decay runs
            of D + ``cooldown_tokens`` that branch from them (the same steps up to D: a shared
            ``warmup_steps``) and decay linearly to 10% of the peak (Catalan-Tatjer et al. 2025's
            question: does δ_PTQ grow with D, or with the low-LR phase a cosine's end adds?).
        repetition_cells, repetition_fractions: (size, D) trained on the first fraction of the
            training split only (the passes over the data double, quadruple), ``max_epochs`` raised
            to ``repetition_max_epochs``.
        ptq_bits: the post-training bit widths of every confound run (RTN and GPTQ).
    """

    lr_sizes: tuple[str, ...]
    lr_budget: int
    lr_multipliers: tuple[float, ...]
    schedule_sizes: tuple[str, ...]
    schedule_budgets: tuple[int, ...]
    warmup_steps: int
    cooldown_tokens: int
    repetition_cells: tuple[tuple[str, int], ...]
    repetition_fractions: tuple[float, ...]
    repetition_max_epochs: float
    ptq_bits: tuple[int, ...] = (3, 4)


@dataclass(frozen=True)
class PowerPlan:
    """The QAT design sized by the power simulations (issue 15, item 6;
    ``bitlaws.study.qat_design.design_power_table``, ``data/runs/<profile>/qat_design_power.csv``).

    Args:
        marginal_seeds: seeds beyond 0 of every run of the marginal sweeps (``QATPlan``'s sizes,
            budgets and bits; experiment ``qat_seeds``): P4's order needs them.
        matched_sizes, matched_budgets, matched_bits: weights trained at P_w, then RTN to
            P_post = P_w − 1 on the asymmetric min-max grid and on the symmetric absmax grid training
            used, beside the high-precision model at the same (N, D) quantized alike (experiment
            ``qat_matched``; seed 0): P9's test as P_train approaches P_post, on both grids.
        factorial_cell, factorial_bits, factorial_seeds: every (P_w, P_a, P_kv) in
            ``factorial_bits``³ at one (size, D), at each seed, the all-16 run being that seed's paired
            baseline (experiment ``qat_factorial``): P5's interaction test on a full factorial. Its seeds should be ones no other sweep trains
            there: a run_id leaves the experiment out, so a shared seed makes some factorial runs the
            very models (and rows) of another sweep, seen before the factorial's rule reads them.
        mechanism: also train P5's mechanism ablation at the factorial's cell and seeds (experiment
            ``qat_mechanism``; see :func:`qat_mechanism`). Exploratory: no verdict reads it.
    """

    marginal_seeds: tuple[int, ...]
    matched_sizes: tuple[str, ...]
    matched_budgets: tuple[int, ...]
    matched_bits: tuple[int, ...]
    factorial_cell: tuple[str, int]
    factorial_bits: tuple[int, ...] = (4, 8, 16)
    factorial_seeds: tuple[int, ...] = (0, 1)
    mechanism: bool = False

    def __post_init__(self) -> None:
        if 0 in self.marginal_seeds:
            raise ValueError("PowerPlan.marginal_seeds are the seeds beyond 0 (seed 0 is the marginal sweep's)")
        if self.matched_bits and min(self.matched_bits) < 3:
            raise ValueError(f"PowerPlan.matched_bits must be ≥ 3 (P_post = P_w − 1 ≥ 2); got {self.matched_bits}")


@dataclass(frozen=True)
class Profile:
    """A named scale of the whole study.

    Args:
        name: ``smoke``, ``cpu`` or ``gpu``.
        sizes: model sizes (names in :data:`bitlaws.model.LADDER` / ``SMOKE_LADDER``).
        budgets: training tokens D per run (separate runs per budget, as the paper).
        seed_cells: (size, budget) cells trained with the extra seeds, for the noise floor.
        extra_seeds: seeds beyond 0 at the seed cells.
        bits_post: RTN weight bit widths P_post applied after each run.
        train: the TrainConfig template (batch, context, eval budget, corpus).
        extra_cells: (size, budget) cells beyond the size × budget rectangle (seed 0), e.g. the
            smallest models trained to the largest D/N for the critical data size.
        qat: the low-precision-training sweeps (None: none declared).
        confounds: the learning-rate and repetition checks (:class:`ConfoundPlan`; None: none).
        power_design: the QAT design sized for power (:class:`PowerPlan`; None: none).
        gptq_bits: GPTQ weight bit widths applied after each base-grid run as well (same grid
            as RTN, act-order, 128 calibration windows of the training split).
        eval_versions: the evaluation versions every run is measured at
            (:data:`bitlaws.study.store.EVAL_VERSIONS`; one row per version and observation).
        spread_eval_tokens: the budget of the ``spread`` evaluation (version 2) [tokens].
        vocab_size: the BPE vocabulary of a ``datasets`` corpus (None: the corpus's default,
            ``bitlaws.corpus.DEFAULT_BPE_VOCAB``); every model's ``vocab_size`` follows it
            (256 for the byte-level corpus).
        note: one line saying what the profile is for.
    """

    name: str
    sizes: tuple[str, ...]
    budgets: tuple[int, ...]
    seed_cells: tuple[tuple[str, int], ...]
    extra_seeds: tuple[int, ...]
    bits_post: tuple[int, ...]
    train: TrainConfig
    extra_cells: tuple[tuple[str, int], ...] = ()
    qat: QATPlan | None = None
    gptq_bits: tuple[int, ...] = ()
    note: str = ""
    confounds: ConfoundPlan | None = None
    power_design: PowerPlan | None = None
    eval_versions: tuple[int, ...] = (1, 2)
    spread_eval_tokens: int = 0
    vocab_size: int | None = None

    def evaluations(self) -> tuple["Evaluation", ...]:
        """The evaluations of :attr:`eval_versions`: version 1 reads the first ``train.eval_tokens``,
        version 2 ``spread_eval_tokens`` (default the same budget) spread over the whole split."""
        budget = {1: self.train.eval_tokens, 2: self.spread_eval_tokens or self.train.eval_tokens}
        return tuple(Evaluation(v, EVAL_VERSIONS[v], budget[v]) for v in self.eval_versions)


    @property
    def model_vocab_size(self) -> int:
        """The vocabulary of every model of the profile: the corpus tokenizer's (256 for bytes)."""
        from ..corpus import corpus_vocab_size

        return corpus_vocab_size(self.train.corpus, self.vocab_size)


@dataclass(frozen=True)
class Evaluation:
    """How a row's ``loss_val`` is measured: evaluation `version`, window `layout`
    (:func:`bitlaws.train.eval_windows`) and budget `tokens`."""

    version: int
    layout: str
    tokens: int


_M64 = 1 << 26  # 67,108,864 tokens: the `gpu` profile's smallest budget

PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        sizes=("n3k", "n14k"),
        budgets=(32_768, 98_304),
        seed_cells=(("n3k", 98_304),),
        extra_seeds=(1, 2),
        bits_post=(3, 4, 8),
        gptq_bits=(3, 4),
        train=TrainConfig(n_tokens=32_768, batch_size=8, seq_len=64, eval_tokens=16_640, log_every=10,
                          ckpt_every=50),
        qat=QATPlan(
            marginal_sizes=("n3k",), marginal_budgets=(32_768,), marginal_bits=(3, 8),
            joint_cell=("n3k", 32_768), joint_combos=((4, 4, 4), (8, 4, 8)),
            format_sizes=("n3k",), format_budget=32_768, formats=("fp4_e2m1fn",),
            qat_ptq_bits_w=(8,), bits_post=(3, 4),
            cm_budget=32_768, cm_cells=(("n14k", 4),), cm_reference="n3k",
        ),
        confounds=ConfoundPlan(
            lr_sizes=("n3k",), lr_budget=32_768, lr_multipliers=(0.5, 2.0),
            schedule_sizes=("n3k",), schedule_budgets=(16_384, 32_768), warmup_steps=3, cooldown_tokens=8_192,
            repetition_cells=(("n3k", 32_768),), repetition_fractions=(0.5,), repetition_max_epochs=16.0,
            ptq_bits=(3,),
        ),
        note="micro models for tests and CI: the whole pipeline in about a minute",
    ),
    "cpu": Profile(
        name="cpu",
        sizes=("n27k", "n83k", "n214k", "n554k", "n1.2m"),
        budgets=(524_288, 1_048_576, 2_097_152, 4_194_304, 8_388_608),
        # Five seeds at six cells spanning N (27k-1.2M) and D (1M-16.8M), with P2's turn-up cells
        # (n27k at 8.4M and 16.8M): the noise model of the verdicts (issue 15, item 2).
        seed_cells=(("n27k", 4_194_304), ("n83k", 2_097_152), ("n214k", 1_048_576), ("n27k", 8_388_608),
                    ("n27k", 16_777_216), ("n1.2m", 8_388_608)),
        extra_cells=(("n27k", 16_777_216), ("n83k", 16_777_216)),
        extra_seeds=(1, 2, 3, 4),
        bits_post=(3, 4, 5, 6, 7, 8),
        gptq_bits=(3, 4, 5, 6, 8),
        train=TrainConfig(n_tokens=524_288, batch_size=16, seq_len=256, eval_tokens=65_792, log_every=10,
                          ckpt_every=200),
        spread_eval_tokens=131_584,  # 512 windows of 257 bytes, evenly over the 4 validation works
        qat=QATPlan(
            marginal_sizes=("n27k", "n83k", "n214k"), marginal_budgets=(1_048_576, 2_097_152),
            marginal_bits=(3, 4, 5, 6, 8, 12),
            joint_cell=("n83k", 2_097_152),
            joint_combos=((4, 4, 4), (8, 8, 8), (6, 6, 6), (5, 5, 5), (4, 8, 8), (8, 4, 8), (8, 8, 4),
                          (4, 4, 16), (4, 16, 4), (16, 4, 4), (6, 8, 4), (8, 6, 6), (12, 4, 8), (4, 6, 12)),
            format_sizes=("n27k", "n83k", "n214k"), format_budget=2_097_152,
            formats=("fp4_e2m1fn", "fp4_e3m0fn", "fp6_e3m2fn", "fp8_e4m3fn", "fp8_e5m2"),
            qat_ptq_bits_w=(4, 6, 8), bits_post=(3, 4, 5, 6),
            cm_budget=2_097_152,
            cm_cells=(("n851k", 4), ("n566k", 6), ("n425k", 8), ("n282k", 12)), cm_reference="n214k",
            cm_seeds=(0, 1, 2),
        ),
        confounds=ConfoundPlan(
            lr_sizes=("n27k", "n1.2m"), lr_budget=2_097_152, lr_multipliers=(0.5, 2.0),
            schedule_sizes=("n27k", "n83k", "n214k"),
            schedule_budgets=(524_288, 1_048_576, 2_097_152, 4_194_304, 8_388_608),
            warmup_steps=13,  # 10% of the shortest run's 128 steps, as its cosine twin warms up
            cooldown_tokens=262_144,  # 64 steps
            repetition_cells=(("n27k", 8_388_608), ("n27k", 16_777_216), ("n83k", 8_388_608)),
            repetition_fractions=(0.5, 0.25), repetition_max_epochs=16.0,
        ),
        # Sized by the power simulations (qat_design.design_power_table; data/runs/cpu/qat_design_power.csv)
        power_design=PowerPlan(
            # 3 seeds in all, a budget choice (2026-12-06; 5 before): what the noise model asks of the marginal
            # sweep. P4's design simulation cannot size it: no count reaches power 0.8 at σ_seed's point or lower
            # end, none clears the verdict's 0.5 gate at σ_seed = 0, and its power falls from 3 seeds to 5
            # (qat_design.seed_budget_sentence reads qat_design_power.csv; chapter 07 says so)
            marginal_seeds=(1, 2),
            matched_sizes=("n27k", "n83k", "n214k", "n554k", "n1.2m"), matched_budgets=(2_097_152, 8_388_608),
            # P5's factorial: 3 seeds, the fewest simulated (1, 2, 3) whose P5 power reaches 0.8; seeds
            # 101-103, which no other sweep trains: at seed 0 14 of its 26 runs were qat_joint / qat_marginal
            # runs already committed (run_id leaves the experiment out), and seeds 1-2 are qat_seeds'
            matched_bits=(3, 4, 5, 6), factorial_cell=("n83k", 2_097_152), factorial_seeds=(101, 102, 103),
            mechanism=True,
        ),
        note="the published results: 5 sizes x 5 budgets (+ D = 16.8M at the two smallest), byte-level "
             "Shakespeare, D <= 3.65 passes",
    ),
    "gpu": Profile(
        name="gpu",
        sizes=("g1.1m", "g3.1m", "g10m", "g32m", "g99m"),
        budgets=(_M64, 2 * _M64, 4 * _M64, 8 * _M64, 16 * _M64),
        seed_cells=(("g1.1m", 4 * _M64), ("g3.1m", 2 * _M64)),
        extra_seeds=(1, 2),
        bits_post=(3, 4, 5, 6, 8),
        gptq_bits=(3, 4, 6),
        train=TrainConfig(n_tokens=_M64, batch_size=64, seq_len=512, eval_tokens=1_026_000, eval_batch_size=64,
                          log_every=50, ckpt_every=1000, corpus="fineweb-edu", max_epochs=1.0, device="auto",
                          grad_accum=1),
        qat=QATPlan(
            marginal_sizes=("g1.1m", "g3.1m", "g10m"), marginal_budgets=(4 * _M64,),
            marginal_bits=(3, 4, 6, 8),
            joint_cell=("g3.1m", 4 * _M64),
            joint_combos=((4, 4, 4), (8, 8, 8), (6, 6, 6), (4, 8, 8), (8, 4, 8), (8, 8, 4), (4, 4, 16), (16, 4, 4)),
            format_sizes=("g3.1m",), format_budget=4 * _M64, formats=("fp4_e2m1fn", "fp6_e3m2fn", "fp8_e4m3fn"),
            qat_ptq_bits_w=(4, 8), bits_post=(3, 4, 6),
            cm_budget=2 * _M64, cm_reference="g3.1m",
            cm_cells=(("g12.4m", 4), ("g8.25m", 6), ("g6.20m", 8), ("g4.15m", 12)),
            cm_seeds=(0, 1),
            cm_more_levels=(
                (_M64, "g1.1m", (("g4.23m", 4), ("g2.82m", 6), ("g2.12m", 8), ("g1.41m", 12))),
                (4 * _M64, "g10m", (("g40.8m", 4), ("g27.1m", 6), ("g20.3m", 8), ("g13.5m", 12))),
            ),
        ),
        note="readers with a GPU: N 1.1M-99M x D 67M-1.07B BPE tokens of FineWeb-Edu (8192 symbols), one "
             "pass, no repetition; compute-matched suites at three compute levels; about one GPU-day "
             "(`python -m bitlaws estimate --profile gpu`)",
    ),
}


@dataclass(frozen=True)
class SlurmOptions:
    """What each job of a ``slurm`` (or ``submitit-local``) sweep asks for; handed to submitit.

    Args:
        gpus_per_node: GPUs per job (0: none). partition, account: SLURM's ``--partition`` and
            ``--account`` (None: the cluster's defaults; ignored by the local executor).
        mem_gb: memory per job in GB (None: the cluster's default).
        timeout_min: wall-clock limit per job in minutes.
        cpus_per_task: CPU cores per job (None: the sweep's ``threads``).

    Raises:
        ValueError: a negative GPU count, a non-positive memory, time or core count, an empty name.
    """

    gpus_per_node: int = 0
    partition: str | None = None
    account: str | None = None
    mem_gb: float | None = None
    timeout_min: int = 24 * 60
    cpus_per_task: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 0:
            raise ValueError(f"SlurmOptions.gpus_per_node must be an int ≥ 0, got {self.gpus_per_node!r}")
        if isinstance(self.timeout_min, bool) or not isinstance(self.timeout_min, int) or self.timeout_min < 1:
            raise ValueError(f"SlurmOptions.timeout_min must be an int ≥ 1 (minutes), got {self.timeout_min!r}")
        if self.cpus_per_task is not None and (not isinstance(self.cpus_per_task, int) or self.cpus_per_task < 1):
            raise ValueError(f"SlurmOptions.cpus_per_task must be an int ≥ 1 or None, got {self.cpus_per_task!r}")
        if self.mem_gb is not None and not (isinstance(self.mem_gb, (int, float)) and math.isfinite(self.mem_gb)
                                            and self.mem_gb > 0):
            raise ValueError(f"SlurmOptions.mem_gb must be a positive number of GB or None, got {self.mem_gb!r}")
        for f in ("partition", "account"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise ValueError(f"SlurmOptions.{f} must be a non-empty name or None, got {v!r}")

    def parameters(self, threads: int) -> dict[str, Any]:
        """The keyword arguments of ``submitit.AutoExecutor.update_parameters``."""
        out: dict[str, Any] = {"timeout_min": self.timeout_min, "cpus_per_task": self.cpus_per_task or threads,
                               "gpus_per_node": self.gpus_per_node}
        if self.mem_gb is not None:
            out["mem_gb"] = self.mem_gb
        if self.partition is not None:
            out["slurm_partition"] = self.partition
        if self.account is not None:
            out["slurm_account"] = self.account
        return out


def make_executor(executor: str, folder: str | os.PathLike, threads: int = 1, workers: int = 1,
                  slurm: SlurmOptions | None = None):
    """The submitit executor of a ``submitit-local`` or ``slurm`` sweep, its parameters set.

    Raises:
        ValueError: an executor other than ``submitit-local`` or ``slurm``.
    """
    import submitit

    if executor not in ("submitit-local", "slurm"):
        raise ValueError(f"make_executor: executor must be 'submitit-local' or 'slurm', got {executor!r}")
    ex = submitit.AutoExecutor(folder=folder, cluster="local" if executor == "submitit-local" else "slurm")
    ex.update_parameters(**(slurm or SlurmOptions()).parameters(threads))
    if executor == "slurm":
        ex.update_parameters(slurm_array_parallelism=workers)
    return ex


class MissingRowsError(FileNotFoundError):
    """A chapter's profile has no rows yet; the message says which command makes them.

    In a notebook it shows as its message alone, not a traceback (IPython's ``_render_traceback_``).
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def select_profile(experiments: Sequence[str] = ("base_grid",), default: str = "cpu") -> str:
    """The profile a chapter reads: ``$BITLAWS_PROFILE`` (default `default`), checked, with the
    figure labels set to its corpus's units (``figures.use_units``).

    Args:
        experiments: the sweeps whose rows the chapter reads (``data/runs/<profile>/<experiment>.csv``);
            checked unless ``$BITLAWS_RECOMPUTE=1`` (then the chapter makes them).
        default: the profile when the variable is unset (the book's, ``cpu``).

    Raises:
        ValueError: a profile not in :data:`PROFILES` (the message lists them).
        MissingRowsError: one of those CSVs is missing; the message names the command that makes it.
    """
    from . import figures
    from .store import data_dir

    name = os.environ.get("BITLAWS_PROFILE", default).strip() or default
    if name not in PROFILES:
        raise ValueError(f"BITLAWS_PROFILE={name!r}: allowed {', '.join(sorted(PROFILES))}")
    figures.use_units(PROFILES[name].train.corpus)
    if os.environ.get("BITLAWS_RECOMPUTE", "0") != "1":
        folder = data_dir() / "runs" / name
        missing = [e for e in experiments if not (folder / f"{e}.csv").is_file()]
        if missing:
            raise MissingRowsError(
                f"profile {name!r} has no rows of {', '.join(missing)} under {folder}. Make them with "
                f"`python -m bitlaws sweep --profile {name} --experiments {','.join(missing)}` and then "
                f"`python -m bitlaws fit --profile {name}` (`python -m bitlaws estimate --profile {name}` says "
                "what that costs first), or run this chapter with BITLAWS_RECOMPUTE=1, which does the same.")
    return name


@dataclass(frozen=True)
class RunSpec:
    """One training run and the post-training quantizations that follow it."""

    experiment: str
    profile: str
    size: str
    model: ModelConfig
    train: TrainConfig
    ptq: tuple = field(default_factory=tuple)
    precision: TrainPrecision = field(default_factory=TrainPrecision)
    evals: tuple[Evaluation, ...] = (Evaluation(1, "first", 0),)  # tokens 0: train.eval_tokens

    @property
    def run_id(self) -> str:
        """Hash of everything that fixes the trained model: shape, training config, training precision."""
        cfg = config_dict(self.model, self.train, self.precision)
        for f in _NON_RESULT_FIELDS:
            cfg["train"].pop(f)
        return stable_hash(cfg)

    def obs_id(self, ptq=None, evaluation: Evaluation | None = None) -> str:
        """Hash of the run, one post-training quantization (None: the model as trained) and the
        evaluation (None: version 1, whose ids are those of the rows made before versions existed;
        a later version adds its layout and budget to the hash)."""
        post = {"method": "none"} if ptq is None else {"method": _method(ptq), **dataclasses.asdict(ptq)}
        key = {"run_id": self.run_id, "post": post}
        if evaluation is not None and evaluation.version != 1:
            key["eval"] = dataclasses.asdict(evaluation)
        return stable_hash(key)

    @property
    def obs_ids(self) -> list[str]:
        """Every observation of the run: each evaluation × (as trained, then each PTQ)."""
        return [self.obs_id(p, e) for e in self.evals for p in (None, *self.ptq)]

    @property
    def cost(self) -> float:
        """Relative cost ∝ N·D (for ordering: cheapest first)."""
        from ..model import hand_count_n_params

        return hand_count_n_params(self.model) * self.train.n_tokens


def base_grid(profile: Profile) -> list[RunSpec]:
    """The high-precision base grid: every size × budget at seed 0, the extra seeds at the seed cells,
    and the extra cells.

    Each run is followed by RTN (asymmetric, per output channel) to every ``profile.bits_post``
    and by GPTQ (same grid, act-order) to every ``profile.gptq_bits``.
    """
    from ..ptq.gptq import GPTQConfig

    ptq = tuple(RTNConfig(bits=b) for b in profile.bits_post) + tuple(
        GPTQConfig(bits=b, act_order=True) for b in profile.gptq_bits)
    specs = []
    for size in profile.sizes:
        mcfg = _model(size, profile)
        for budget in profile.budgets:
            seeds = (0,) + (profile.extra_seeds if (size, budget) in profile.seed_cells else ())
            for seed in seeds:
                tcfg = profile.train.replace(n_tokens=budget, seed=seed)
                specs.append(RunSpec("base_grid", profile.name, size, mcfg, tcfg, ptq))
    for size, budget in profile.extra_cells:
        mcfg = _model(size, profile)
        seeds = (0,) + (profile.extra_seeds if (size, budget) in profile.seed_cells else ())
        for seed in seeds:
            tcfg = profile.train.replace(n_tokens=budget, seed=seed)
            specs.append(RunSpec("base_grid", profile.name, size, mcfg, tcfg, ptq))
    return specs


def _method(ptq) -> str:
    return getattr(ptq, "method", "rtn")


def _model(size: str, profile: Profile) -> ModelConfig:
    cfg = get_size(size)
    return cfg.replace(max_seq_len=max(cfg.max_seq_len, profile.train.seq_len), vocab_size=profile.model_vocab_size)


def _prec(bits_w: int | str, bits_a: int | str = HP, bits_kv: int | str = HP) -> TrainPrecision:
    def part(b):
        return None if b == HP else b
    return TrainPrecision.of(w=part(bits_w), a=part(bits_a), kv=part(bits_kv))


def _qat_spec(experiment: str, profile: Profile, size: str, budget: int, prec: TrainPrecision,
              ptq: tuple = (), seed: int = 0) -> RunSpec:
    return RunSpec(experiment, profile.name, size, _model(size, profile),
                   profile.train.replace(n_tokens=budget, seed=seed), ptq, prec)


def qat_marginal(profile: Profile) -> list[RunSpec]:
    """P_w, P_a, P_kv one at a time over the marginal sizes × budgets; the weight-only runs at
    ``qat_ptq_bits_w`` are also quantized after training (RTN) to every lower ``bits_post``."""
    q = profile.qat
    if q is None:
        return []
    specs = []
    for size in q.marginal_sizes:
        for budget in q.marginal_budgets:
            for bits in q.marginal_bits:
                for part in ("w", "a", "kv"):
                    prec = _prec(*[bits if p == part else HP for p in ("w", "a", "kv")])
                    ptq = ()
                    if part == "w" and bits in q.qat_ptq_bits_w:
                        ptq = tuple(RTNConfig(bits=b) for b in q.bits_post if b < bits)
                    specs.append(_qat_spec("qat_marginal", profile, size, budget, prec, ptq))
    return specs


def qat_joint(profile: Profile) -> list[RunSpec]:
    """Several (P_w, P_a, P_kv) at one cell, for the independence test (P5)."""
    q = profile.qat
    if q is None:
        return []
    size, budget = q.joint_cell
    return [_qat_spec("qat_joint", profile, size, budget, _prec(*c)) for c in q.joint_combos]


def qat_formats(profile: Profile) -> list[RunSpec]:
    """Weight-only training in floating-point formats (the integer twins are in the marginal sweep; P10)."""
    q = profile.qat
    if q is None:
        return []
    return [_qat_spec("qat_formats", profile, size, q.format_budget, TrainPrecision.of(w=fmt))
            for size in q.format_sizes for fmt in q.formats]


def compute_matched(profile: Profile) -> list[RunSpec]:
    """Models with N·P about constant at one D, every part at P (Fig. 1 right; P6–P7), at every
    seed of ``cm_seeds``, at every compute level (:meth:`QATPlan.levels`). The high-precision member
    of a level is the base grid's seed-0 run of its reference size at the same budget."""
    q = profile.qat
    if q is None:
        return []
    return [_qat_spec("compute_matched", profile, size, budget, _prec(bits, bits, bits), seed=seed)
            for budget, _ref, cells in q.levels() for size, bits in cells for seed in q.cm_seeds]


def _confound_ptq(c: ConfoundPlan) -> tuple:
    from ..ptq.gptq import GPTQConfig

    return tuple(RTNConfig(bits=b) for b in c.ptq_bits) + tuple(GPTQConfig(bits=b, act_order=True) for b in c.ptq_bits)


def lr_peak(profile: Profile) -> list[RunSpec]:
    """The peak learning rate at ``lr_multipliers`` × the rule, at each of ``lr_sizes`` (issue 15, item 5)."""
    from ..train import peak_lr_rule

    c = profile.confounds
    if c is None:
        return []
    out = []
    for size in c.lr_sizes:
        m = _model(size, profile)
        for mult in c.lr_multipliers:
            tcfg = profile.train.replace(n_tokens=c.lr_budget, lr=mult * peak_lr_rule(m.d_model))
            out.append(RunSpec("lr_peak", profile.name, size, m, tcfg, _confound_ptq(c)))
    return out


def lr_schedule(profile: Profile) -> list[RunSpec]:
    """Constant-LR runs to each D and their WSD cooldowns of ``cooldown_tokens`` (issue 15, item 3)."""
    c = profile.confounds
    if c is None:
        return []
    out = []
    for size in c.schedule_sizes:
        m = _model(size, profile)
        for budget in c.schedule_budgets:
            const = profile.train.replace(n_tokens=budget, schedule="constant", warmup_steps=c.warmup_steps)
            wsd = profile.train.replace(n_tokens=budget + c.cooldown_tokens, schedule="wsd",
                                        warmup_steps=c.warmup_steps, decay_tokens=c.cooldown_tokens)
            out += [RunSpec("lr_schedule", profile.name, size, m, t, _confound_ptq(c)) for t in (const, wsd)]
    return out


def repetition(profile: Profile) -> list[RunSpec]:
    """Base-grid cells trained on a leading fraction of the training split (issue 15, item 4)."""
    c = profile.confounds
    if c is None:
        return []
    return [RunSpec("repetition", profile.name, size, _model(size, profile),
                    profile.train.replace(n_tokens=budget, train_fraction=f, max_epochs=c.repetition_max_epochs),
                    _confound_ptq(c))
            for size, budget in c.repetition_cells for f in c.repetition_fractions]


def qat_seeds(profile: Profile) -> list[RunSpec]:
    """The marginal sweeps (``qat_marginal``) again at each of ``PowerPlan.marginal_seeds``, without
    their post-training quantizations (P4's order; issue 15, item 6), and the high-precision twin of
    each (size, D, seed) that the base grid does not already train (the Chinchilla stage and the
    paired N_eff stages read them; the design table's power assumes them)."""
    q, pp = profile.qat, profile.power_design
    if q is None or pp is None:
        return []
    base = {s.run_id for s in base_grid(profile)}
    out = []
    for seed in pp.marginal_seeds:
        for size in q.marginal_sizes:
            for budget in q.marginal_budgets:
                twin = _qat_spec("qat_seeds", profile, size, budget, _prec(HP), seed=seed)
                out += [twin] if twin.run_id not in base else []
                out += [_qat_spec("qat_seeds", profile, size, budget,
                                  _prec(*[bits if p == part else HP for p in ("w", "a", "kv")]), seed=seed)
                        for bits in q.marginal_bits for part in ("w", "a", "kv")]
    return out


def qat_matched(profile: Profile) -> list[RunSpec]:
    """Weights trained at P_w, then RTN to P_post = P_w − 1 on both grids (asymmetric min-max and the
    symmetric absmax of training), and the high-precision model of each (N, D) quantized to every such
    P_post alike (P9; issue 15, item 6)."""
    pp = profile.power_design
    if pp is None:
        return []
    both = lambda b: (RTNConfig(bits=b), RTNConfig(bits=b, symmetric=True))  # noqa: E731
    out = []
    for size in pp.matched_sizes:
        for budget in pp.matched_budgets:
            hp_ptq = tuple(c for b in pp.matched_bits for c in both(b - 1))
            out.append(_qat_spec("qat_matched", profile, size, budget, _prec(HP), hp_ptq))
            out += [_qat_spec("qat_matched", profile, size, budget, _prec(b), both(b - 1)) for b in pp.matched_bits]
    return out


# P5's mechanism ablation (exploratory; written 2026-12-04 after P5 was graded on the factorial, which found
# the effects of A4 and KV4 compounding less than they add, all of it in the A4KV4 cells). Hypothesis, stated
# before any of these runs: the overlap is V4 and A4 quantizing the same signal -- the attention output
# P·V is o_proj's input, which A4 quantizes again -- so (i) A4 with V4 alone is sub-additive and A4 with K4
# alone is not, and (ii) without o_proj's input quantization A4 and KV4 add. Weights stay 16-bit (the
# factorial's W4 and W8 cells show the same A4KV4 shortfall); each variant beside the factorial's own
# W16 runs of the same seed (A16KV16, A4KV16, A16KV4, A4KV4). Power, stated before the runs: each
# contrast (e.g. I_V - I_K = L(A4,V4) - L(A16,V4) - L(A4,K4) + L(A16,K4)) is four runs, so with the factorial's
# within-seed sigma 0.0106 its mean over 3 seeds has SE 2*0.0106/sqrt(3) = 0.0122; against the factorial's A4KV4
# shortfall (-0.0103) a two-sided 5 % test has power 0.13, and 80 % power needs |effect| >= 0.034. A pilot,
# read with intervals, never graded; more seeds (about 20 for power 0.6) are for a later session.
MECHANISM_VARIANTS: tuple[tuple[int, int, str, tuple[str, ...]], ...] = (
    # (P_a, P_kv, kv_parts, a_skip)
    (16, 4, "k", ()), (16, 4, "v", ()),
    (4, 4, "k", ()), (4, 4, "v", ()),
    (4, 16, "kv", ("o_proj",)), (4, 4, "kv", ("o_proj",)),
)


def qat_mechanism(profile: Profile) -> list[RunSpec]:
    """P5's mechanism ablation at the factorial's cell and seeds (:data:`MECHANISM_VARIANTS`): K or V
    alone at 4 bits, at A16 and A4, and A4 without o_proj's input quantized, at KV16 and KV4; weights
    16-bit. Declared where ``PowerPlan.mechanism`` is set. Exploratory: chapter 03 reports it, no
    verdict reads it."""
    pp = profile.power_design
    if pp is None or not pp.mechanism:
        return []
    size, budget = pp.factorial_cell
    out = []
    for seed in pp.factorial_seeds:
        for a, kv, parts, skip in MECHANISM_VARIANTS:
            prec = dataclasses.replace(_prec(HP, a, kv), kv_parts=parts, a_skip=skip)
            out.append(_qat_spec("qat_mechanism", profile, size, budget, prec, seed=seed))
    return out


def qat_factorial(profile: Profile) -> list[RunSpec]:
    """Every (P_w, P_a, P_kv) in ``factorial_bits``³, at one cell and each seed (P5); the all-16 run
    of each seed is its seed-paired baseline (``power.p5_design`` pairs a cell only when every
    mixed run has the high-precision run and the marginals of its own seed)."""
    pp = profile.power_design
    if pp is None:
        return []
    size, budget = pp.factorial_cell
    combos = list(itertools.product(pp.factorial_bits, repeat=3))
    return [_qat_spec("qat_factorial", profile, size, budget, _prec(*c), seed=seed)
            for seed in pp.factorial_seeds for c in combos]


_BUILDERS: dict[str, Callable[[Profile], list[RunSpec]]] = {
    "base_grid": base_grid,
    "qat_marginal": qat_marginal,
    "qat_joint": qat_joint,
    "qat_formats": qat_formats,
    "compute_matched": compute_matched,
    "lr_peak": lr_peak,
    "lr_schedule": lr_schedule,
    "repetition": repetition,
    "qat_seeds": qat_seeds,
    "qat_matched": qat_matched,
    "qat_factorial": qat_factorial,
    "qat_mechanism": qat_mechanism,
}
EXPERIMENTS = tuple(_BUILDERS)


def _profile(profile: str) -> Profile:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {sorted(PROFILES)}")
    return PROFILES[profile]


def declared_experiments(profile: str) -> list[str]:
    """The experiments `profile` declares (those with at least one run), in :data:`EXPERIMENTS` order."""
    prof = _profile(profile)
    return [e for e in EXPERIMENTS if _BUILDERS[e](prof)]


def plan(profile: str, experiment: str = "base_grid") -> list[RunSpec]:
    """Every run of one of `profile`'s declared sweeps, cheapest first.

    Args:
        profile: ``smoke``, ``cpu`` or ``gpu``.
        experiment: one of :data:`EXPERIMENTS` (default the base grid).

    Raises:
        ValueError: unknown profile or experiment; the message lists the allowed ones.
    """
    prof = _profile(profile)
    if experiment not in _BUILDERS:
        raise ValueError(f"unknown experiment {experiment!r}; allowed: {list(EXPERIMENTS)}")
    specs = [dataclasses.replace(s, evals=prof.evaluations()) for s in _BUILDERS[experiment](prof)]
    return sorted(specs, key=lambda s: (s.cost, s.train.seed, s.run_id))


def _row(spec: RunSpec, res, ptq, loss_val: float, base_loss: float, threads: int,
         bytes_per_token: float = 1.0, evaluation: Evaluation | None = None) -> dict:
    ok = res.status == "ok" and math.isfinite(loss_val)
    prec = spec.precision
    evaluation = evaluation or spec.evals[0]
    return {
        "run_id": spec.run_id, "obs_id": spec.obs_id(ptq, evaluation), "experiment": spec.experiment,
        "profile": spec.profile, "corpus": spec.train.corpus, "size": spec.size, "seed": spec.train.seed,
        "n_params": res.n_params, "n_tokens": res.n_tokens, "d_model": spec.model.d_model,
        "n_layers": spec.model.n_layers,
        "fmt_w": prec.fmt("w"), "fmt_a": prec.fmt("a"), "fmt_kv": prec.fmt("kv"),
        **({"train_variant": prec.variant} if prec.variant else {}),
        "fmt_post": "none" if ptq is None else f"int{ptq.bits}", "eval_version": evaluation.version,
        "bits_w": prec.bits("w"), "bits_a": prec.bits("a"), "bits_kv": prec.bits("kv"),
        "ptq_method": "none" if ptq is None else _method(ptq),
        "quant_scheme": "none" if ptq is None else ptq.quant_scheme,
        "bits_post": 16 if ptq is None else ptq.bits,
        "group_size": 0 if ptq is None else ptq.group_size,
        "loss_val": loss_val, "loss_train": res.loss_train,
        # bits per byte: nats per token over ln 2 and the corpus's bytes per token (1 for bytes)
        "bpb_val": loss_val / math.log(2) / bytes_per_token if ok else math.nan,
        "delta_ptq": (loss_val - base_loss) if ok and ptq is not None else (0.0 if ok else math.nan),
        "ppl": math.exp(loss_val) if ok else math.nan,
        "status": "ok" if ok else "diverged",
        "steps": res.steps, "lr_peak": spec.train.peak_lr(spec.model),
        "train_s": round(res.wall_s, 3), "tokens_per_s": round(res.n_tokens / res.wall_s, 1) if res.wall_s else math.nan,
        **provenance(threads),
    }


def _apply_ptq_(model, ptq, corpus, train_cfg: TrainConfig) -> None:
    """Quantize `model`'s weights in place with `ptq` (RTN, or GPTQ calibrated on the training split)."""
    if _method(ptq) == "rtn":
        rtn_quantize_(model, ptq)
        return
    if _method(ptq) == "gptq":
        from ..ptq.calibration import calibration_batch, gptq_quantize_

        seq_len = ptq.calib_seq_len or train_cfg.seq_len
        calib = calibration_batch(corpus.train, ptq.n_calib, seq_len, ptq.seed)
        gptq_quantize_(model, calib, ptq, progress=False)
        return
    raise ValueError(f"unknown post-training method {_method(ptq)!r}; allowed: 'rtn', 'gptq'")


RESULTS_JSON = "results.json"  # a finished run's facts, beside its checkpoint, at full precision


def _write_json(path: Path, obj: dict) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True).encode(), mode=0o644)


def _saved_facts(run_dir: Path, spec: RunSpec) -> dict | None:
    """The facts a finished run recorded beside its checkpoint (:data:`RESULTS_JSON`), or None.

    An unreadable file is moved aside with a warning (the run then retrains)."""
    from ..train import move_aside

    path = run_dir / RESULTS_JSON
    if not path.exists():
        return None
    try:
        facts = json.loads(path.read_text())
        if facts.get("run_id") != spec.run_id:
            raise ValueError(f"run_id {facts.get('run_id')!r}, expected {spec.run_id!r}")
        for k in ("status", "loss_val", "loss_train", "n_params", "n_tokens", "steps", "wall_s", "curve"):
            facts[k]  # noqa: B018 - every fact is there
        return facts
    except Exception as exc:
        move_aside(path, exc)
        return None


def _saved_run(run_dir: Path, spec: RunSpec, base_row: dict | None, corpus=None, train_cfg: TrainConfig | None = None):
    """The finished run saved in `run_dir`, or None (train it).

    A run is reused when its :data:`RESULTS_JSON` is there (written as training ends, so a kill during
    PTQ loses only the PTQ), or, for checkpoints saved before that file existed, when its unquantized
    row is recorded. The base loss is then the one recorded at full precision, or (for those older
    checkpoints, whose row holds it to six digits) the checkpoint evaluated again, so δ_PTQ comes out
    as in an unbroken run. The model gets its run-time activation/KV quantizers back (its weights
    were saved already quantized). A checkpoint that cannot be loaded is moved aside with a warning."""
    from types import SimpleNamespace

    from ..train import move_aside

    facts = _saved_facts(run_dir, spec)
    if facts is not None and facts["status"] != "ok":  # diverged: nothing to load, nothing to quantize
        return SimpleNamespace(model=None, status=facts["status"], loss_val=float(facts["loss_val"]),
                               loss_train=float(facts["loss_train"]), n_params=int(facts["n_params"]),
                               n_tokens=int(facts["n_tokens"]), steps=int(facts["steps"]),
                               wall_s=float(facts["wall_s"]), curve=list(facts["curve"]))
    cfg_path = run_dir / "run_config.json"
    weights = run_dir / "model.safetensors"
    if (facts is None and base_row is None) or not weights.exists():
        return None
    if facts is None:
        try:
            cfg = json.loads(cfg_path.read_text())
        except (OSError, ValueError):
            return None
        if cfg.get("run_id") != spec.run_id or cfg.get("status") != "ok":
            return None
    from transformers import LlamaForCausalLM

    try:
        model = LlamaForCausalLM.from_pretrained(run_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
        if not spec.precision.is_high_precision:
            from ..precision import apply_precision_

            apply_precision_(model, dataclasses.replace(spec.precision, w=None))
        if facts is None:  # an older checkpoint: measure the base loss again, exactly
            loss_val = evaluate(model, corpus.val, train_cfg.seq_len, train_cfg.eval_tokens, train_cfg.eval_batch_size)
    except Exception as exc:  # a truncated or garbage checkpoint
        move_aside(weights, exc)
        return None
    if facts is not None:
        return SimpleNamespace(model=model, status="ok", loss_val=float(facts["loss_val"]),
                               loss_train=float(facts["loss_train"]), n_params=int(facts["n_params"]),
                               n_tokens=int(facts["n_tokens"]), steps=int(facts["steps"]),
                               wall_s=float(facts["wall_s"]), curve=list(facts["curve"]))
    return SimpleNamespace(model=model, status="ok", loss_val=loss_val,
                           loss_train=float(base_row["loss_train"]), n_params=int(base_row["n_params"]),
                           n_tokens=int(base_row["n_tokens"]), steps=int(base_row["steps"]),
                           wall_s=float(base_row["train_s"]), curve=[])


REPRODUCE_RTOL = 1e-5  # a retrained run's loss against its recorded row (six significant digits)
LAST_BITS_RTOL = 1e-4  # beyond this a retrained run's loss differs by more than another machine's last bits


def _check_retrained(spec: RunSpec, res, recorded: dict) -> None:
    """Warn when a run retrained for a new evaluation does not give its recorded version-1 loss back
    (to ``REPRODUCE_RTOL``: runs are bit-reproducible for a fixed thread count on one machine). Within
    ``LAST_BITS_RTOL`` the difference is another CPU or BLAS moving the last bits; beyond it, the training code
    or the machine differs from the recorded run's (its ``git_sha``) and training amplified the difference;
    the warning says by how much. Either way the new rows describe the retrained model, not the recorded one."""
    import warnings

    old, new = float(recorded["loss_val"]), float(res.loss_val)
    if res.status == "ok" and math.isfinite(old) and abs(new - old) > REPRODUCE_RTOL * abs(old):
        if abs(new - old) <= LAST_BITS_RTOL * abs(old):
            what = "a model that differs in the last bits"
        else:
            what = (f"a different model ({new - old:+.4f} nats/byte, more than the last bits: the training code or "
                    f"the machine differs from the recorded run's, git {recorded.get('git_sha') or 'unknown'}, and "
                    "training amplified the difference)")
        warnings.warn(f"run {spec.run_id} ({spec.size}, D={spec.train.n_tokens}, seed {spec.train.seed}) retrained to "
                      f"loss_val {new:.6g}, recorded {old:.6g} (threads {recorded.get('threads')}): its new rows "
                      f"come from {what}", stacklevel=2)


def run_spec(spec: RunSpec, threads: int = 1, run_root: str | os.PathLike = "runs", progress: bool = True,
             corpus=None, have: dict[str, dict] | None = None) -> tuple[list[dict], list[dict]]:
    """Train `spec`, save its checkpoint, apply its PTQs, and return (observation rows, curve rows).

    The checkpoint (``model.safetensors`` + ``config.json`` + our ``run_config.json``) goes to
    ``run_root/<profile>/<run_id>/``; a resumable ``state.pt`` lives there while training, and
    :data:`RESULTS_JSON` (losses at full precision, N, D, steps, seconds, the loss curve) is written
    the moment training ends. Saved weights are the weights the model ran with (Q_w(W) for a
    weight-quantized run).

    Args:
        have: rows already recorded, by ``obs_id``. Only the missing observations are returned.
            A finished run (its :data:`RESULTS_JSON` and checkpoint in `run_root`) is loaded instead
            of retrained, so a kill during PTQ, or a new PTQ method, costs no training.

    A diverged run yields rows with ``status = "diverged"`` and its loss curve, never an exception.
    """

    have = have or {}
    corpus = corpus if corpus is not None else spec_corpus(spec)
    tcfg = spec.train.replace(threads=threads)
    torch.set_num_threads(threads)
    run_dir = Path(run_root) / spec.profile / spec.run_id
    recorded = have.get(spec.obs_id(None))  # the version-1 row of a run being re-evaluated
    res = _saved_run(run_dir, spec, recorded, corpus, tcfg)
    if res is None:
        res = train(spec.model, tcfg, corpus=corpus, run_dir=run_dir, progress=progress, precision=spec.precision)
        if recorded is not None:
            _check_retrained(spec, res, recorded)
        run_dir.mkdir(parents=True, exist_ok=True)
        cfg = config_dict(spec.model, tcfg, spec.precision)
        cfg.update({"run_id": spec.run_id, "experiment": spec.experiment, "profile": spec.profile,
                    "size": spec.size, "corpus_sha256": corpus.source_sha256, "status": res.status})
        if res.status == "ok":
            res.model.save_pretrained(run_dir, safe_serialization=True)
        _write_json(run_dir / "run_config.json", cfg)
        # Last, the facts: their presence says the checkpoint beside them is complete.
        _write_json(run_dir / RESULTS_JSON, {
            "run_id": spec.run_id, "status": res.status, "loss_val": res.loss_val, "loss_train": res.loss_train,
            "n_params": res.n_params, "n_tokens": res.n_tokens, "steps": res.steps, "wall_s": res.wall_s,
            "curve": res.curve})
    bpt = corpus.bytes_per_token

    def measure(model, ev: Evaluation) -> float:
        return evaluate(model, corpus.val, tcfg.seq_len, ev.tokens or tcfg.eval_tokens, tcfg.eval_batch_size,
                        layout=ev.layout)

    def missing(ptq) -> list[Evaluation]:
        return [ev for ev in spec.evals if spec.obs_id(ptq, ev) not in have]

    base = {}  # the unquantized model's loss at each evaluation: train()'s own where it is the same
    for ev in spec.evals:
        same = ev.layout == "first" and (ev.tokens or tcfg.eval_tokens) == tcfg.eval_tokens
        base[ev.version] = res.loss_val if same or res.status != "ok" else measure(res.model, ev)
    rows = [_row(spec, res, None, base[ev.version], base[ev.version], threads, bpt, ev) for ev in missing(None)]
    for ptq in spec.ptq:
        todo = missing(ptq)
        if not todo:
            continue
        qmodel = None
        if res.status == "ok":
            qmodel = copy.deepcopy(res.model)
            _apply_ptq_(qmodel, ptq, corpus, tcfg)
        for ev in todo:
            loss_q = measure(qmodel, ev) if qmodel is not None else math.nan
            rows.append(_row(spec, res, ptq, loss_q, base[ev.version], threads, bpt, ev))
    curve = [{"run_id": spec.run_id, "experiment": spec.experiment, "profile": spec.profile, "size": spec.size,
              "seed": spec.train.seed, "n_params": res.n_params, "n_tokens": res.n_tokens, **pt} for pt in res.curve]
    return rows, curve


def spec_corpus(spec: RunSpec):
    """The corpus `spec` trains on, with the BPE vocabulary its model was sized for.

    Raises:
        CorpusUnavailableError: the corpus cannot be built here (offline); names the embedded default.
    """
    from ..corpus import is_byte_level, load_corpus

    vocab = None if is_byte_level(spec.train.corpus) else spec.model.vocab_size
    return load_corpus(spec.train.corpus, vocab_size=vocab)


def _paths(profile: str, data_root: Path, experiment: str = "base_grid") -> tuple[Path, Path]:
    folder = data_root / "runs" / profile
    return folder / f"{experiment}.csv", folder / f"{experiment}_curves.csv"


def coverage(profile: str, data_root: str | os.PathLike | None = None, experiment: str = "base_grid") -> dict[str, Any]:
    """How much of one of `profile`'s declared sweeps is in its CSV: runs trained (a row of the run at
    any evaluation version: ``runs_trained``), runs complete (every observation at every evaluation
    version: ``runs_done``) and observations done, each of those declared (``*_planned``); and at each
    evaluation version, the runs complete and the observations present (``runs_done_by_eval_version``,
    ``obs_done_by_eval_version``, of ``obs_planned_by_eval_version``). Every count reads the rows of the
    profile's data freeze (``store.ROWS_READ_UNTIL``), as the fits and chapters do; the runs trained after
    it, not read until the next refit, are ``runs_after_freeze`` (``freeze``: its timestamp, or None)."""
    from .store import after_freeze, data_dir, read_until

    data_root = Path(data_root) if data_root is not None else data_dir()
    specs = plan(profile, experiment)
    obs_csv, _ = _paths(profile, data_root, experiment)
    rows = read_rows(obs_csv, COLUMNS, "obs_id")
    freeze = read_until(profile)
    late = after_freeze(rows, freeze)
    have = set(rows.loc[~late, "obs_id"]) if len(rows) else set()
    have_late = set(rows.loc[late, "obs_id"]) if len(rows) else set()
    runs_done = sum(all(o in have for o in s.obs_ids) for s in specs)
    planned = [o for s in specs for o in s.obs_ids]
    by_version, obs_by_version, obs_planned_by_version = {}, {}, {}
    for ev in (specs[0].evals if specs else ()):
        ids = [[s.obs_id(p, ev) for p in (None, *s.ptq)] for s in specs]
        by_version[ev.version] = sum(all(o in have for o in run) for run in ids)
        obs_by_version[ev.version] = sum(o in have for run in ids for o in run)
        obs_planned_by_version[ev.version] = sum(len(run) for run in ids)
    return {"profile": profile, "experiment": experiment, "runs_planned": len(specs),
            "runs_trained": sum(any(o in have for o in s.obs_ids) for s in specs), "runs_done": runs_done,
            "runs_after_freeze": sum(any(o in have_late for o in s.obs_ids) and not any(o in have for o in s.obs_ids)
                                     for s in specs), "freeze": freeze,
            "obs_planned": len(planned), "obs_done": sum(o in have for o in planned),
            "runs_done_by_eval_version": by_version, "obs_done_by_eval_version": obs_by_version,
            "obs_planned_by_eval_version": obs_planned_by_version}


def coverage_table(covs: Sequence[dict[str, Any]]) -> str:
    """:func:`coverage` records (one per experiment) as a text table, done/declared in each cell: one
    line per experiment and a ``total`` line, with the columns ``runs trained`` (a row at any
    evaluation version), ``observations at eval vN`` for each evaluation version N, newest (the one a sweep
    measures now) first, and ``runs with all rows`` (every observation at every version; a sweep
    retrains the others); then a footnote line per column saying so.

    Raises:
        ValueError: no records.
    """
    if not covs:
        raise ValueError("coverage_table needs at least one coverage record")
    versions = sorted({int(v) for c in covs for v in c["obs_planned_by_eval_version"]}, reverse=True)

    def by(c, key) -> dict[int, int]:
        return {int(v): n for v, n in c.get(key, {}).items()}

    def cells(c) -> dict[str, str]:
        row = {"runs trained": f"{c['runs_trained']}/{c['runs_planned']}"}
        done, planned = by(c, "obs_done_by_eval_version"), by(c, "obs_planned_by_eval_version")
        for v in versions:
            row[f"observations at eval v{v}"] = f"{done.get(v, 0)}/{planned.get(v, 0)}"
        row["runs with all rows"] = f"{c['runs_done']}/{c['runs_planned']}"
        if late:
            row["trained after the freeze"] = str(c.get("runs_after_freeze", 0))
        return row

    late = any(c.get("runs_after_freeze") for c in covs)

    keys = ("obs_done_by_eval_version", "obs_planned_by_eval_version")
    total = {k: sum(c.get(k, 0) for c in covs) for k in ("runs_trained", "runs_done", "runs_planned",
                                                           "runs_after_freeze")}
    total.update({k: {v: sum(by(c, k).get(v, 0) for c in covs) for v in versions} for k in keys})
    rows = [{"experiment": c["experiment"], **cells(c)} for c in covs] + [{"experiment": "total", **cells(total)}]
    cols = list(rows[0])
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in cols}
    lines = [[k.ljust(widths[k]) if k == "experiment" else k.rjust(widths[k]) for k in cols]]
    lines += [[r[k].ljust(widths[k]) if k == "experiment" else r[k].rjust(widths[k]) for k in cols] for r in rows]
    read = sorted({EVAL_VERSION_READ[c["profile"]] for c in covs if c.get("profile") in EVAL_VERSION_READ})
    words = {"first": "the first windows of the validation split", "spread": "windows spread over the whole split"}
    how = "; ".join(f"eval v{v}: {words.get(EVAL_VERSIONS.get(v), 'see data/README.md')}" for v in versions)
    notes = ["runs trained: runs with a row at any evaluation version, of those declared.",
             f"observations at eval vN: rows measured by evaluation version N (how the validation loss is "
             f"measured, data/README.md's eval_version), of those declared ({how}; "
             + (f"eval v{versions[0]} is the current one" if versions else "none declared")
             + (f", the chapters read eval v{', eval v'.join(map(str, read))}" if read else "")
             + (", P5's factorial eval v2 whatever the chapters read" if read and 2 not in read else "") + ").",
             "runs with all rows: every observation at every version; a sweep retrains the other runs to add "
             "their missing rows."]
    freezes = sorted({c["freeze"] for c in covs if c.get("freeze")})
    if freezes:
        notes.append(f"every count reads the rows of the data freeze ({', '.join(freezes)}: store.ROWS_READ_UNTIL), "
                     "as the fits and chapters do"
                     + ("; trained after the freeze: runs whose rows came later, read from the next refit of the "
                        "whole cascade." if late else "."))
    return "\n".join(["  ".join(line) for line in lines] + notes)


def run_sweep(profile: str, executor: str = "local", workers: int = 1, threads: int = 1,
              data_root: str | os.PathLike | None = None, run_root: str | os.PathLike | None = None,
              limit: int | None = None, progress: bool = True,
              on_run_done: Callable[[RunSpec], None] | None = None,
              experiments: Sequence[str] | None = None, slurm: SlurmOptions | None = None,
              only: str | None = None) -> dict[str, Any]:
    """Run every missing run of `profile`'s sweeps, appending rows as each finishes (resumable).

    Args:
        profile: ``smoke``, ``cpu`` or ``gpu``.
        executor: ``local``, ``submitit-local`` or ``slurm``.
        workers: parallel runs (processes or jobs). threads: torch threads per run.
        data_root: the ``data/`` folder receiving ``runs/<profile>/<experiment>*.csv`` (default: the repo's).
        run_root: where checkpoints go (default: ``runs/`` beside `data_root`; a build product).
        limit: run at most this many missing runs (cheapest first).
        progress: tqdm bars.
        on_run_done: callback after each run's rows are written.
        experiments: which of the profile's sweeps (default: every one it declares, base grid first).
        slurm: what each submitit job asks for (GPUs, partition, account, memory, time); None: no
            GPU, 24 hours, ``threads`` cores.
        only: ``"new"``: only runs with no evaluation version complete (new and interrupted runs, which add
            rows at the version the chapters read, so the fits change); ``"re-evaluate"``: only runs complete
            at some version and missing another (their new rows are at another version, so nothing read
            changes); None: both, new ones first.

    Returns:
        The :func:`coverage` of the base grid after the sweep, with ``"experiments"``: the
        coverage of each experiment run.

    Before any training, the output folders are made and probed, the data root is locked
    (:func:`bitlaws.study.store.sweep_lock`) for the whole sweep, and the corpus is loaded once
    (built and cached on first use), so an offline machine fails at once.

    Raises:
        ValueError: unknown profile, experiment or executor, an empty list of experiments,
            workers/threads < 1, limit < 0, ``only`` not one of ``SWEEP_ONLY``.
        StoreError: a damaged results file (its path and line), an output folder that cannot be
            written, or another sweep holding the data root.
        CorpusUnavailableError: the profile's corpus cannot be built here (offline); the message
            names the embedded default.
    """
    from .._io import git_sha
    from .store import data_dir

    git_sha()  # pin the provenance to the code as it was when the sweep started
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; allowed: {list(EXECUTORS)}")
    for name, v in (("workers", workers), ("threads", threads)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise ValueError(f"limit must be an int ≥ 0 (or None for every missing run), got {limit!r}")
    if workers < 1 or threads < 1:
        raise ValueError(f"workers and threads must be ≥ 1, got workers={workers}, threads={threads}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be ≥ 0 (or None for every missing run), got {limit}")
    if only is not None and only not in SWEEP_ONLY:
        raise ValueError(f"only must be one of {', '.join(SWEEP_ONLY)} (or None for both), got {only!r}")
    declared = declared_experiments(profile)
    chosen = list(experiments) if experiments is not None else declared
    if not chosen:
        raise ValueError(f"no experiment chosen (an empty list); allowed: {declared}, or None for all of them")
    bad = [e for e in chosen if e not in declared]
    if bad:
        raise ValueError(f"profile {profile!r} declares no experiment {bad}; allowed: {declared}")
    chosen = list(dict.fromkeys(chosen))
    data_root = Path(data_root) if data_root is not None else data_dir()
    run_root = Path(run_root) if run_root is not None else data_root.parent / "runs"
    with sweep_lock(data_root):
        return _run_locked(profile, executor, workers, threads, data_root, run_root, limit, progress,
                           on_run_done, chosen, slurm, only)


def _run_locked(profile, executor, workers, threads, data_root: Path, run_root: Path, limit, progress,
                on_run_done, chosen, slurm=None, only=None) -> dict[str, Any]:
    todo: list[tuple[RunSpec, dict]] = []
    for exp in chosen:
        obs_csv, _ = _paths(profile, data_root, exp)
        old = read_rows(obs_csv, COLUMNS, "obs_id")  # a damaged file is refused here, before any training
        recorded = {r["obs_id"]: r for r in old.to_dict("records")} if len(old) else {}
        for s in plan(profile, exp):
            if not all(o in recorded for o in s.obs_ids):
                todo.append((s, {o: recorded[o] for o in s.obs_ids if o in recorded}))
    # New and interrupted runs first, then the re-evaluations (runs complete at an older evaluation
    # version: retrained, since checkpoints are build products), each group cheapest first.
    todo.sort(key=lambda t: (_complete_at_some_version(*t), t[0].cost, t[0].train.seed, t[0].run_id))
    if only is not None:
        todo = [t for t in todo if _complete_at_some_version(*t) == (only == "re-evaluate")]
    if limit is not None:
        todo = todo[:limit]
    # Probe every output before training, so a write fault is a clear error, not a lost run.
    for exp in {s.experiment for s, _ in todo}:
        for csv_path in _paths(profile, data_root, exp):
            probe_csv(csv_path)
            read_rows(csv_path, CURVE_COLUMNS if csv_path.name.endswith("_curves.csv") else COLUMNS)
    if todo:
        probe_writable(run_root / profile)
        spec_corpus(todo[0][0])  # build the corpus cache once, here, or fail now if it cannot be built

    def record(spec: RunSpec, rows: list[dict], curve: list[dict]) -> None:
        obs_csv, curve_csv = _paths(profile, data_root, spec.experiment)
        # Curve first: an obs row present implies its curve is present (the resume key is obs_id).
        if curve and not _has_curve(curve_csv, spec):
            append_rows(curve_csv, curve, columns=CURVE_COLUMNS, key=None)
        append_rows(obs_csv, rows, columns=COLUMNS + [c for c in OPTIONAL_COLUMNS if any(c in r for r in rows)])
        if on_run_done is not None:
            on_run_done(spec)

    bar = tqdm(total=len(todo), desc=f"sweep {profile}", unit="run", disable=None if progress else True)
    if executor == "local" and workers == 1:
        for spec, have in todo:
            rows, curve = run_spec(spec, _threads_for(spec, have, threads), run_root, progress, have=have)
            record(spec, rows, curve)
            bar.update(1)
    elif executor == "local":
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_spec, s, _threads_for(s, h, threads), run_root, False, None, h): s
                       for s, h in todo}
            for fut in as_completed(futures):
                record(futures[fut], *fut.result())
                bar.update(1)
    else:
        import submitit

        ex = make_executor(executor, run_root / "submitit" / profile, threads, workers, slurm)
        jobs = {}
        for s, h in todo:
            job = ex.submit(run_spec, s, _threads_for(s, h, threads), run_root, False, None, h)
            jobs[job] = s
        for job in submitit.helpers.as_completed(list(jobs)):
            record(jobs[job], *job.result())
            bar.update(1)
    bar.close()
    out = coverage(profile, data_root)
    out["experiments"] = {e: coverage(profile, data_root, e) for e in chosen}
    return out


# run_sweep's ``only``: the new runs alone, or the re-evaluations alone.
SWEEP_ONLY = ("new", "re-evaluate")


def _complete_at_some_version(spec: RunSpec, have: dict[str, dict]) -> bool:
    return any(all(spec.obs_id(p, ev) in have for p in (None, *spec.ptq)) for ev in spec.evals)


def _threads_for(spec: RunSpec, have: dict[str, dict], threads: int) -> int:
    """The thread count of a run's recorded rows (a retrained run then repeats its arithmetic), else
    `threads`."""
    base = have.get(spec.obs_id(None))
    try:
        return int(base["threads"]) if base is not None else threads
    except (KeyError, TypeError, ValueError):
        return threads


def _has_curve(curve_csv: Path, spec: RunSpec) -> bool:
    rows = read_rows(curve_csv, CURVE_COLUMNS)
    return bool(len(rows)) and spec.run_id in set(rows["run_id"])

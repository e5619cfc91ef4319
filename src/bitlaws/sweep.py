"""Declarative sweeps, profiles and a resumable runner with local and SLURM executors.

A sweep is a list of :class:`RunSpec`: one training run (model, budget, seed) and the
post-training quantizations done right after it, so no later step needs its checkpoint. The runner

1. reads the observation CSV and skips every run whose observations (``obs_id``) are all there;
2. trains the rest, cheapest first, each in a run folder holding a resumable checkpoint;
3. appends each finished run's rows (and its loss curve) in one atomic write.

So a sweep killed at any moment (even by SIGKILL) resumes without losing or duplicating a row,
and an interrupted training run restarts from its last checkpoint, ending bit-identical to an
unbroken run.

Executors: ``local`` (in this process for one worker, else a process pool), ``submitit-local``
(submitit's local executor, for testing the cluster path) and ``slurm`` (submitit on a cluster).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from .model import LADDER, SMOKE_LADDER, ModelConfig
from .ptq.rtn import RTNConfig, rtn_quantize_
from .results import CURVE_COLUMNS, append_rows, provenance, read_rows, stable_hash
from .train import TrainConfig, config_dict, evaluate, train

__all__ = ["Profile", "PROFILES", "RunSpec", "base_grid", "plan", "run_spec", "run_sweep", "coverage", "EXECUTORS"]

EXECUTORS = ("local", "submitit-local", "slurm")
# Fields of TrainConfig that do not change a run's result, so they are left out of run_id.
_NON_RESULT_FIELDS = ("threads", "log_every", "ckpt_every")


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
    """

    name: str
    sizes: tuple[str, ...]
    budgets: tuple[int, ...]
    seed_cells: tuple[tuple[str, int], ...]
    extra_seeds: tuple[int, ...]
    bits_post: tuple[int, ...]
    train: TrainConfig
    extra_cells: tuple[tuple[str, int], ...] = ()
    note: str = ""


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        sizes=("n3k", "n14k"),
        budgets=(32_768, 98_304),
        seed_cells=(("n3k", 98_304),),
        extra_seeds=(1, 2),
        bits_post=(3, 4, 8),
        train=TrainConfig(n_tokens=32_768, batch_size=8, seq_len=64, eval_tokens=16_640, log_every=10,
                          ckpt_every=50),
        note="micro models for tests and CI: the whole pipeline in about a minute",
    ),
    "cpu": Profile(
        name="cpu",
        sizes=("n27k", "n83k", "n214k", "n554k", "n1.2m"),
        budgets=(524_288, 1_048_576, 2_097_152, 4_194_304, 8_388_608),
        seed_cells=(("n27k", 4_194_304), ("n83k", 2_097_152)),
        extra_cells=(("n27k", 16_777_216), ("n83k", 16_777_216)),
        extra_seeds=(1, 2),
        bits_post=(3, 4, 5, 6, 7, 8),
        train=TrainConfig(n_tokens=524_288, batch_size=16, seq_len=256, eval_tokens=65_792, log_every=10,
                          ckpt_every=200),
        note="the published results: 5 sizes x 5 budgets (+ D = 16.8M at the two smallest), byte-level "
             "Shakespeare, D <= 3.65 passes",
    ),
}


@dataclass(frozen=True)
class RunSpec:
    """One training run and the post-training quantizations that follow it."""

    experiment: str
    profile: str
    size: str
    model: ModelConfig
    train: TrainConfig
    ptq: tuple[RTNConfig, ...] = field(default_factory=tuple)

    @property
    def run_id(self) -> str:
        cfg = config_dict(self.model, self.train)
        for f in _NON_RESULT_FIELDS:
            cfg["train"].pop(f)
        cfg["precision"] = {"w": None, "a": None, "kv": None}
        return stable_hash(cfg)

    def obs_id(self, ptq: RTNConfig | None) -> str:
        post = {"method": "none"} if ptq is None else {"method": "rtn", **dataclasses.asdict(ptq)}
        return stable_hash({"run_id": self.run_id, "post": post})

    @property
    def obs_ids(self) -> list[str]:
        return [self.obs_id(None)] + [self.obs_id(p) for p in self.ptq]

    @property
    def cost(self) -> float:
        """Relative cost ∝ N·D (for ordering: cheapest first)."""
        from .model import hand_count_n_params

        return hand_count_n_params(self.model) * self.train.n_tokens


def base_grid(profile: Profile) -> list[RunSpec]:
    """The high-precision base grid: every size × budget at seed 0, the extra seeds at the seed cells,
    and the extra cells.

    Each run is followed by RTN (asymmetric, per output channel) to every ``profile.bits_post``.
    """
    sizes = {**LADDER, **SMOKE_LADDER}
    ptq = tuple(RTNConfig(bits=b) for b in profile.bits_post)
    specs = []
    for size in profile.sizes:
        mcfg = sizes[size].replace(max_seq_len=max(sizes[size].max_seq_len, profile.train.seq_len))
        for budget in profile.budgets:
            seeds = (0,) + (profile.extra_seeds if (size, budget) in profile.seed_cells else ())
            for seed in seeds:
                tcfg = profile.train.replace(n_tokens=budget, seed=seed)
                specs.append(RunSpec("base_grid", profile.name, size, mcfg, tcfg, ptq))
    for size, budget in profile.extra_cells:
        mcfg = sizes[size].replace(max_seq_len=max(sizes[size].max_seq_len, profile.train.seq_len))
        specs.append(RunSpec("base_grid", profile.name, size, mcfg, profile.train.replace(n_tokens=budget), ptq))
    return specs


def plan(profile: str) -> list[RunSpec]:
    """Every run of `profile`'s declared sweeps, cheapest first.

    Raises:
        ValueError: unknown profile; the message lists the allowed ones.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {sorted(PROFILES)}")
    return sorted(base_grid(PROFILES[profile]), key=lambda s: (s.cost, s.train.seed))


def _row(spec: RunSpec, res, ptq: RTNConfig | None, loss_val: float, base_loss: float, threads: int,
         per_byte: bool = True) -> dict:
    ok = res.status == "ok" and math.isfinite(loss_val)
    return {
        "run_id": spec.run_id, "obs_id": spec.obs_id(ptq), "experiment": spec.experiment,
        "profile": spec.profile, "corpus": spec.train.corpus, "size": spec.size, "seed": spec.train.seed,
        "n_params": res.n_params, "n_tokens": res.n_tokens, "d_model": spec.model.d_model,
        "n_layers": spec.model.n_layers,
        "fmt_w": "none" if ptq is None else f"int{ptq.bits}", "fmt_a": "none", "fmt_kv": "none",
        "bits_w": 16, "bits_a": 16, "bits_kv": 16,
        "ptq_method": "none" if ptq is None else "rtn",
        "quant_scheme": "none" if ptq is None else ptq.quant_scheme,
        "bits_post": 16 if ptq is None else ptq.bits,
        "group_size": 0 if ptq is None else ptq.group_size,
        "loss_val": loss_val, "loss_train": res.loss_train,
        # bits per byte only where a token is a byte; BPE corpora would need their bytes per token
        "bpb_val": loss_val / math.log(2) if ok and per_byte else math.nan,
        "delta_ptq": (loss_val - base_loss) if ok and ptq is not None else (0.0 if ok else math.nan),
        "ppl": math.exp(loss_val) if ok else math.nan,
        "status": "ok" if ok else "diverged",
        "steps": res.steps, "lr_peak": spec.train.peak_lr(spec.model),
        "train_s": round(res.wall_s, 3), "tokens_per_s": round(res.n_tokens / res.wall_s, 1) if res.wall_s else math.nan,
        **provenance(threads),
    }


def run_spec(spec: RunSpec, threads: int = 1, run_root: str | os.PathLike = "runs", progress: bool = True,
             corpus=None) -> tuple[list[dict], list[dict]]:
    """Train `spec`, save its checkpoint, apply its PTQs, and return (observation rows, curve rows).

    The checkpoint (``model.safetensors`` + ``config.json`` + our ``run_config.json``) goes to
    ``run_root/<profile>/<run_id>/``; a resumable ``state.pt`` lives there while training.
    A diverged run yields rows with ``status = "diverged"`` and its loss curve, never an exception.
    """
    from .corpus import load_corpus

    corpus = corpus if corpus is not None else load_corpus(spec.train.corpus)
    tcfg = spec.train.replace(threads=threads)
    run_dir = Path(run_root) / spec.profile / spec.run_id
    res = train(spec.model, tcfg, corpus=corpus, run_dir=run_dir, progress=progress)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = config_dict(spec.model, tcfg)
    cfg.update({"run_id": spec.run_id, "experiment": spec.experiment, "profile": spec.profile, "size": spec.size,
                "corpus_sha256": corpus.source_sha256, "status": res.status})
    (run_dir / "run_config.json").write_text(__import__("json").dumps(cfg, indent=2, sort_keys=True))
    if res.status == "ok":
        res.model.save_pretrained(run_dir, safe_serialization=True)
    per_byte = corpus.tokenizer == "bytes"
    rows = [_row(spec, res, None, res.loss_val, res.loss_val, threads, per_byte)]
    for ptq in spec.ptq:
        if res.status == "ok":
            qmodel = copy.deepcopy(res.model)
            rtn_quantize_(qmodel, ptq)
            loss_q = evaluate(qmodel, corpus.val, tcfg.seq_len, tcfg.eval_tokens, tcfg.eval_batch_size)
        else:
            loss_q = math.nan
        rows.append(_row(spec, res, ptq, loss_q, res.loss_val, threads, per_byte))
    curve = [{"run_id": spec.run_id, "experiment": spec.experiment, "profile": spec.profile, "size": spec.size,
              "seed": spec.train.seed, "n_params": res.n_params, "n_tokens": res.n_tokens, **pt} for pt in res.curve]
    return rows, curve


def _paths(profile: str, data_root: Path) -> tuple[Path, Path]:
    folder = data_root / "runs" / profile
    return folder / "base_grid.csv", folder / "base_grid_curves.csv"


def coverage(profile: str, data_root: str | os.PathLike | None = None) -> dict[str, Any]:
    """How much of `profile`'s declared sweep is in its CSV: runs and observations done / planned."""
    from .results import data_dir

    data_root = Path(data_root) if data_root is not None else data_dir()
    specs = plan(profile)
    obs_csv, _ = _paths(profile, data_root)
    have = set(read_rows(obs_csv).get("obs_id", []))
    runs_done = sum(all(o in have for o in s.obs_ids) for s in specs)
    planned = [o for s in specs for o in s.obs_ids]
    return {"profile": profile, "runs_planned": len(specs), "runs_done": runs_done,
            "obs_planned": len(planned), "obs_done": sum(o in have for o in planned)}


def run_sweep(profile: str, executor: str = "local", workers: int = 1, threads: int = 1,
              data_root: str | os.PathLike | None = None, run_root: str | os.PathLike | None = None,
              limit: int | None = None, progress: bool = True,
              on_run_done: Callable[[RunSpec], None] | None = None) -> dict[str, Any]:
    """Run every missing run of `profile`, appending rows as each finishes (resumable).

    Args:
        profile: ``smoke`` or ``cpu``.
        executor: ``local``, ``submitit-local`` or ``slurm``.
        workers: parallel runs (processes or jobs). threads: torch threads per run.
        data_root: the ``data/`` folder receiving ``runs/<profile>/base_grid*.csv`` (default: the repo's).
        run_root: where checkpoints go (default: ``runs/`` beside `data_root`; a build product).
        limit: run at most this many missing runs (cheapest first).
        progress: tqdm bars.
        on_run_done: callback after each run's rows are written.

    Returns:
        The :func:`coverage` after the sweep.

    Raises:
        ValueError: unknown profile or executor, or workers/threads < 1.
    """
    from .results import _git_sha, data_dir

    _git_sha()  # pin the provenance to the code as it was when the sweep started
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; allowed: {list(EXECUTORS)}")
    if workers < 1 or threads < 1:
        raise ValueError(f"workers and threads must be ≥ 1, got workers={workers}, threads={threads}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be ≥ 0 (or None for every missing run), got {limit}")
    specs = plan(profile)
    data_root = Path(data_root) if data_root is not None else data_dir()
    run_root = Path(run_root) if run_root is not None else data_root.parent / "runs"
    obs_csv, curve_csv = _paths(profile, data_root)
    have = set(read_rows(obs_csv).get("obs_id", []))
    todo = [s for s in specs if not all(o in have for o in s.obs_ids)]
    if limit is not None:
        todo = todo[:limit]

    def record(spec: RunSpec, rows: list[dict], curve: list[dict]) -> None:
        # Curve first: an obs row present implies its curve is present (the resume key is obs_id).
        append_rows(curve_csv, curve, columns=CURVE_COLUMNS, key=None) if not _has_curve(curve_csv, spec) else None
        append_rows(obs_csv, rows)
        if on_run_done is not None:
            on_run_done(spec)

    bar = tqdm(total=len(todo), desc=f"sweep {profile}", unit="run", disable=None if progress else True)
    if executor == "local" and workers == 1:
        for spec in todo:
            rows, curve = run_spec(spec, threads, run_root, progress)
            record(spec, rows, curve)
            bar.update(1)
    elif executor == "local":
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_spec, s, threads, run_root, False): s for s in todo}
            for fut in as_completed(futures):
                record(futures[fut], *fut.result())
                bar.update(1)
    else:
        import submitit

        folder = run_root / "submitit" / profile
        ex = submitit.AutoExecutor(folder=folder, cluster="local" if executor == "submitit-local" else "slurm")
        ex.update_parameters(timeout_min=24 * 60, cpus_per_task=threads)
        if executor == "slurm":
            ex.update_parameters(slurm_array_parallelism=workers)
        jobs = {}
        for s in todo:
            job = ex.submit(run_spec, s, threads, run_root, False)
            jobs[job] = s
        for job in submitit.helpers.as_completed(list(jobs)):
            record(jobs[job], *job.result())
            bar.update(1)
    bar.close()
    return coverage(profile, data_root)


def _has_curve(curve_csv: Path, spec: RunSpec) -> bool:
    rows = read_rows(curve_csv)
    return bool(len(rows)) and spec.run_id in set(rows["run_id"])

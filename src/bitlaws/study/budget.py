"""What a profile's sweeps cost, from a measured training throughput, before any of them runs.

A :class:`Throughput` is a model FLOP rate measured at a few model sizes (training FLOPs per token
× tokens/s, so one measurement transfers across sizes by interpolation in log N), read from the
lent device's ``train_throughput.csv`` (``bench/device_check.py``), from a profile's committed rows
(their ``tokens_per_s``), measured here in a few steps, or assumed. :func:`estimate` adds up the
hours of every run of a profile (:func:`run_seconds`): training tokens at that rate (slower by the
measured factor for fake-quantized runs) plus one evaluation forward (a third of a training step's
FLOPs) per observation; GPTQ's solves are not counted.

Training FLOPs per token (Kaplan et al. 2020, Eq. 2.1, with the untied lm_head):
``6·(N + V·C) + 6·L·T·C`` for N non-embedding parameters, vocabulary V, width C, L layers, context T.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..model import ModelConfig, hand_count_n_params

__all__ = ["Throughput", "throughput_summary_markdown", "flops_per_token", "throughput_from_csv", "throughput_from_rows", "assumed_throughput",
           "measure_throughput", "default_throughput", "run_seconds", "estimate", "format_estimate",
           "ASSUMED_GPU_TFLOPS", "THROUGHPUT_COLUMNS"]

# Only for the book's table while no GPU throughput is committed: an assumed sustained bf16 model
# FLOP rate, about a third of an H100/H200's dense bf16 peak (989 TFLOP/s). Never used silently:
# the source of every estimate is printed with it.
ASSUMED_GPU_TFLOPS = 100.0


# The columns of bench/device_check.py's train_throughput.csv (its TRAIN_COLUMNS) that
# :func:`throughput_from_csv` reads.
THROUGHPUT_COLUMNS = ("size", "n_params", "d_model", "n_layers", "vocab_size", "seq_len", "grad_accum", "compile",
                      "precision", "tokens_per_s", "status", "device")
THROUGHPUT_FILE = "the train_throughput.csv that bench/device_check.py writes"
THROUGHPUT_HINT = f"expected {THROUGHPUT_FILE}, with the columns {', '.join(THROUGHPUT_COLUMNS)}"


def flops_per_token(model: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward and backward) of `model` at context `seq_len` (module docstring)."""
    return _flops(hand_count_n_params(model), model.d_model, model.n_layers, model.vocab_size, seq_len)


def _flops(n_params, d_model, n_layers, vocab_size, seq_len) -> float:
    return 6.0 * (float(n_params) + float(vocab_size) * d_model) + 6.0 * float(n_layers) * seq_len * d_model


@dataclass(frozen=True)
class Throughput:
    """A measured (or assumed) training FLOP rate as a function of model size.

    Args:
        flops: (k,) training FLOPs per token of the measured models, ascending.
        flops_per_s: (k,) model FLOP rate measured at each (FLOPs per token × tokens/s).
        source: where the numbers come from (a file, rows, a measurement, an assumption).
        device: what they were measured on.
        qat_factor: tokens/s of a fake-quantized run over an unquantized one (1: no slowdown).

    Raises:
        ValueError: no points, unequal lengths, or a non-positive or non-finite rate.
    """

    flops: tuple[float, ...]
    flops_per_s: tuple[float, ...]
    source: str
    device: str
    qat_factor: float = 1.0

    def __post_init__(self) -> None:
        if not self.flops or len(self.flops) != len(self.flops_per_s):
            raise ValueError(f"Throughput needs one rate per measured size, got {len(self.flops)} sizes and "
                             f"{len(self.flops_per_s)} rates")
        vals = [*self.flops, *self.flops_per_s, self.qat_factor]
        if not all(math.isfinite(v) and v > 0 for v in vals):
            raise ValueError(f"Throughput: every size, rate and qat_factor must be positive and finite, got {vals}")

    def tokens_per_s(self, model: ModelConfig, seq_len: int) -> float:
        """Training tokens/s of `model`: the FLOP rate interpolated in log FLOPs per token
        (constant beyond the measured range), over its FLOPs per token."""
        f = flops_per_token(model, seq_len)
        order = np.argsort(self.flops)
        x, y = np.log(np.asarray(self.flops)[order]), np.log(np.asarray(self.flops_per_s)[order])
        return float(np.exp(np.interp(math.log(f), x, y))) / f


def run_seconds(throughput: Throughput, model: ModelConfig, seq_len: int, n_tokens: int, eval_tokens: float,
                quantized: bool) -> float:
    """Seconds of one training run at `throughput`: `n_tokens` of training at the model's tokens/s
    (times ``throughput.qat_factor`` for a fake-quantized run), then `eval_tokens` of evaluation
    forwards at the unquantized tokens/s, a forward costing a third of a training step's FLOPs.

    The one per-run formula of :func:`estimate` and ``qat_design.candidate_hours``.

    Args:
        throughput: see :class:`Throughput`. model, seq_len: the run's shape and context T.
        n_tokens: training tokens D (counting repeats). eval_tokens: every token evaluated, summed
            over the run's observations and evaluation versions.
        quantized: the run trains with fake-quantized weights, activations or KV cache.

    Returns:
        Seconds (float, > 0 for a positive D).
    """
    tps = throughput.tokens_per_s(model, seq_len)
    train_tps = tps * throughput.qat_factor if quantized else tps
    return n_tokens / train_tps + eval_tokens / (3 * tps)


def _from_points(points: list[tuple[float, float]], source: str, device: str, qat_factor: float = 1.0) -> Throughput:
    by = {}
    for f, rate in points:
        by.setdefault(f, []).append(rate)
    fs = sorted(by)
    return Throughput(tuple(fs), tuple(float(np.median(by[f])) for f in fs), source, device, qat_factor)


def throughput_from_csv(path: str | os.PathLike) -> Throughput:
    """The throughput in ``train_throughput.csv`` (``bench/device_check.py``, ``TRAIN_COLUMNS``):
    its unquantized, uncompiled, unaccumulated rows; ``qat_factor`` from its W8 A8 KV8 row.

    Raises:
        FileNotFoundError: no such file. ValueError: not a comma-separated table, a column of
            :data:`THROUGHPUT_COLUMNS` missing, or no usable row; one line naming `path` and those columns.
    """
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = reason.split("C error: ", 1)[-1]  # pandas' "Error tokenizing data. C error: ..." -> its detail
        raise ValueError(f"{path}: not a comma-separated table ({reason}); {THROUGHPUT_HINT}") from None
    missing = [c for c in THROUGHPUT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: lacks the column(s) {', '.join(missing)}; expected {THROUGHPUT_FILE}")
    ok = df[(df["status"] == "ok") & (df["tokens_per_s"] > 0)]
    compiled = ok["compile"].astype(str).str.strip().str.lower().isin(("true", "1"))
    plain = ok[(ok["grad_accum"] == 1) & ~compiled & (ok["precision"] == "W16 A16 KV16")]
    if not len(plain):
        raise ValueError(f"{path}: no row with status ok, grad_accum 1, compile False and precision W16 A16 KV16; "
                         f"{THROUGHPUT_HINT}")

    def fpt(r) -> float:
        return _flops(r["n_params"], r["d_model"], r["n_layers"], r["vocab_size"], r["seq_len"])

    points = [(fpt(r), fpt(r) * r["tokens_per_s"]) for _, r in plain.iterrows()]
    factor = 1.0
    quant = ok[ok["precision"] != "W16 A16 KV16"]
    ratios = [q["tokens_per_s"] / plain[plain["size"] == q["size"]]["tokens_per_s"].median()
              for _, q in quant.iterrows() if (plain["size"] == q["size"]).any()]
    if ratios:
        factor = float(min(1.0, np.median(ratios)))
    return _from_points(points, str(path), ", ".join(map(str, plain["device"].unique())), factor)


def throughput_from_rows(rows: pd.DataFrame, seq_len: int, vocab_size: int, source: str = "rows") -> Throughput:
    """The throughput in a profile's observation rows: each run's ``tokens_per_s`` (unquantized
    rows of high-precision runs), ``qat_factor`` from the low-precision runs of the same sizes.

    Raises:
        ValueError: no row with a measured ``tokens_per_s``.
    """
    r = rows[(rows["ptq_method"] == "none") & (rows["status"] == "ok") & (rows["tokens_per_s"] > 0)]
    hp = r[(r["bits_w"] >= 16) & (r["bits_a"] >= 16) & (r["bits_kv"] >= 16)]
    if not len(hp):
        raise ValueError(f"{source}: no high-precision row with a measured tokens_per_s")

    def fpt(x) -> float:
        return _flops(x["n_params"], x["d_model"], x["n_layers"], vocab_size, seq_len)

    points = [(fpt(x), fpt(x) * x["tokens_per_s"]) for _, x in hp.iterrows()]
    lp = r.drop(hp.index)
    med = hp.groupby("size")["tokens_per_s"].median()
    ratios = [x["tokens_per_s"] / med[x["size"]] for _, x in lp.iterrows() if x["size"] in med.index]
    factor = float(min(1.0, np.median(ratios))) if ratios else 1.0
    devices = ", ".join(sorted(map(str, r["device"].unique())))
    threads = ", ".join(sorted(map(str, r["threads"].unique()))) if "threads" in r else "?"
    return _from_points(points, source, f"{devices} ({threads} thread(s))", factor)


def assumed_throughput(tflops: float = ASSUMED_GPU_TFLOPS, device: str = "a GPU") -> Throughput:
    """A constant model FLOP rate of `tflops` TFLOP/s (an assumption, said so in ``source``)."""
    return Throughput((1.0,), (tflops * 1e12,), f"assumed: {tflops:g} TFLOP/s sustained", device)


def measure_throughput(profile: str, sizes: Sequence[str] | None = None, steps: int = 4) -> Throughput:
    """Measure training tokens/s here, on the profile's device, on random tokens, in a few steps.

    For each size (default: the profile's smallest and largest), three runs of ``train``: a warm-up
    and a short run of 2 steps, then one of ``2 + steps``; tokens/s is the extra steps' tokens over
    the extra seconds, so start-up costs cancel.
    """
    from ..corpus import Corpus
    from ..train import train
    from .sweep import PROFILES, _model

    prof = PROFILES[profile]
    names = list(sizes) if sizes is not None else [prof.sizes[0], prof.sizes[-1]]
    tc0 = prof.train
    points, device = [], ""
    for name in names:
        m = _model(name, prof)
        rng = np.random.default_rng(0)
        n_train = 2 * (2 + steps) * tc0.batch_size * (tc0.seq_len + 1) + 4 * tc0.seq_len
        dt = np.uint8 if m.vocab_size <= 256 else np.uint16
        corpus = Corpus(name="random", tokenizer=f"random-{m.vocab_size}", vocab_size=m.vocab_size,
                        train=rng.integers(0, m.vocab_size, n_train, dtype=dt),
                        val=rng.integers(0, m.vocab_size, 4 * (tc0.seq_len + 1), dtype=dt),
                        train_docs=("random",), val_docs=("random",), source_sha256="none")
        walls = []
        for n in (2, 2, 2 + steps):
            tc = tc0.replace(n_tokens=n * tc0.batch_size * tc0.seq_len, eval_tokens=tc0.seq_len + 1, eval_batch_size=1,
                             log_every=1, ckpt_every=0, max_epochs=1e9)
            t0 = time.perf_counter()
            res = train(m, tc, corpus=corpus, progress=False)
            walls.append(res.wall_s if res.wall_s > 0 else time.perf_counter() - t0)
            device = str(next(res.model.parameters()).device)
        extra = max(walls[2] - walls[1], 1e-9)
        tps = steps * tc0.batch_size * tc0.seq_len / extra
        points.append((flops_per_token(m, tc0.seq_len), flops_per_token(m, tc0.seq_len) * tps))
    return _from_points(points, f"measured here ({steps} steps at {', '.join(names)})", device)


def default_throughput(profile: str, data_root: str | os.PathLike | None = None) -> Throughput | None:
    """The throughput an estimate uses unless told otherwise: ``data/runs/<profile>/train_throughput.csv``
    if committed, else the profile's committed rows (their measured ``tokens_per_s``), else None."""
    from .store import data_dir, load_runs
    from .sweep import PROFILES

    root = Path(data_root) if data_root is not None else data_dir()
    csv = root / "runs" / profile / "train_throughput.csv"
    if csv.is_file():
        try:
            return throughput_from_csv(csv)
        except ValueError:
            pass
    prof = PROFILES[profile]
    try:
        rows = load_runs(profile, experiment=("base_grid", "qat_marginal", "qat_joint", "qat_formats",
                                              "compute_matched"), root=root)
        return throughput_from_rows(rows, prof.train.seq_len, prof.model_vocab_size,
                                    source=f"{root / 'runs' / profile}/*.csv (tokens_per_s of each run)")
    except (FileNotFoundError, ValueError, KeyError):
        return None


def estimate(profile: str, throughput: Throughput, experiments: Sequence[str] | None = None,
             missing_only: bool = False, data_root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Device-hours of each of a profile's sweeps at `throughput`.

    Args:
        profile: a name in ``bitlaws.study.sweep.PROFILES``.
        throughput: see :class:`Throughput`.
        experiments: which sweeps (default: every one the profile declares).
        missing_only: count only the runs that miss a row in ``data/runs/<profile>/``: those to
            train (no row yet, or an interrupted run's) and those to re-evaluate (every row at one
            evaluation version, some missing at another, e.g. v1 rows without their v2 ones). A sweep retrains both (the
            checkpoints are build products; one still under its run root is loaded instead), so
            both count at full training cost.

    Raises:
        ValueError: an experiment the profile does not declare (the message lists those it does).

    Returns:
        One row per experiment and a ``total`` row: ``experiment``, ``runs``, ``train_tokens``
        (D summed), ``train_flops``, ``hours`` (training and evaluation at `throughput`); with
        `missing_only`, also ``runs_to_train`` and ``runs_to_reevaluate`` (they sum to ``runs``).
    """
    from .store import COLUMNS, data_dir, read_rows
    from .sweep import _complete_at_some_version, _paths, declared_experiments, plan

    declared = declared_experiments(profile)
    exps = list(experiments) if experiments is not None else declared
    bad = [e for e in exps if e not in declared]
    if bad:
        raise ValueError(f"profile {profile!r} declares no experiment {bad}; allowed: {declared}")
    root = Path(data_root) if data_root is not None else data_dir()
    out = []
    for exp in exps:
        specs = plan(profile, exp)
        split = {}
        if missing_only:
            have = dict.fromkeys(read_rows(_paths(profile, root, exp)[0], COLUMNS, "obs_id").get("obs_id", []))
            specs = [s for s in specs if not all(o in have for o in s.obs_ids)]
            n_reeval = sum(_complete_at_some_version(s, have) for s in specs)
            split = {"runs_to_train": len(specs) - n_reeval, "runs_to_reevaluate": n_reeval}
        secs = tokens = flops = 0.0
        for s in specs:
            d = s.train.tokens_trained
            secs += run_seconds(throughput, s.model, s.train.seq_len, d, s.train.eval_tokens * (1 + len(s.ptq)),
                                quantized=not s.precision.is_high_precision)
            tokens += d
            flops += d * flops_per_token(s.model, s.train.seq_len)
        out.append({"experiment": exp, "runs": len(specs), **split, "train_tokens": int(tokens),
                    "train_flops": flops, "hours": secs / 3600})
    cols = ["experiment", "runs", *(["runs_to_train", "runs_to_reevaluate"] if missing_only else []),
            "train_tokens", "train_flops", "hours"]
    df = pd.DataFrame(out, columns=cols)
    total = {"experiment": "total", **{c: int(df[c].sum()) for c in cols if c.startswith(("runs", "train_tokens"))},
             "train_flops": float(df["train_flops"].sum()), "hours": float(df["hours"].sum())}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def format_estimate(profile: str, table: pd.DataFrame, throughput: Throughput) -> str:
    """The estimate of :func:`estimate` as lines of text, its throughput's source first; a table of
    missing runs (its ``runs_to_train`` / ``runs_to_reevaluate`` columns) shows both counts and ends
    with a note saying what each counts."""
    split = "runs_to_reevaluate" in table.columns
    runs_head = f"{'to train':>9}  {'to re-evaluate':>14}" if split else f"{'runs':>5}"
    lines = [f"estimate for profile {profile!r} on {throughput.device} — throughput: {throughput.source}"
             + (f"; fake-quantized runs at {throughput.qat_factor:.2f}× the tokens/s" if throughput.qat_factor < 1 else ""),
             f"{'experiment':<16} {runs_head} {'tokens':>14} {'FLOPs':>10} {'hours':>9}"]
    for _, r in table.iterrows():
        runs = (f"{int(r['runs_to_train']):>9}  {int(r['runs_to_reevaluate']):>14}" if split
                else f"{int(r['runs']):>5}")
        lines.append(f"{r['experiment']:<16} {runs} {int(r['train_tokens']):>14,} "
                     f"{r['train_flops']:>10.2e} {r['hours']:>9.2f}")
    if split:
        lines += [f"to train: runs of profile {profile!r} with no row in its CSVs yet (or an interrupted run's "
                  "first rows only).",
                  "to re-evaluate: runs with every row at one evaluation version but some missing at another "
                  "(`coverage` counts the rows per version); the sweep retrains them to add those rows "
                  "(a checkpoint still under the run root is loaded instead).",
                  "tokens, FLOPs and hours: both groups, each run at its full training cost."]
    return "\n".join(lines)


def throughput_summary_markdown(path: str | os.PathLike) -> str:
    """One Markdown paragraph on a ``train_throughput.csv`` (``bench/device_check.py``): the device,
    library versions and date; tokens/s and model TFLOP/s of the smallest and the largest size
    (bf16, no compile, no fake quantization); the fake-quantized run's tokens/s as a share of its
    size's; ``torch.compile``'s gain where it ran. ``""`` when the file does not exist.

    Raises:
        ValueError: the file lacks a column of ``THROUGHPUT_COLUMNS``-style rows (``size``,
            ``precision``, ``compile``, ``grad_accum``, ``tokens_per_s``, ``model_tflops``, ``n_params``).
    """
    path = Path(path)
    if not path.exists():
        return ""
    t = pd.read_csv(path)
    need = {"size", "precision", "compile", "grad_accum", "tokens_per_s", "model_tflops", "n_params", "status"}
    if not need <= set(t.columns):
        raise ValueError(f"{path}: a train_throughput.csv needs the columns {sorted(need)}; "
                         f"missing {sorted(need - set(t.columns))}")
    ok = t[t["status"] == "ok"]
    plain = ok[(ok["precision"] == "W16 A16 KV16") & (~ok["compile"].astype(bool)) & (ok["grad_accum"] == 1)]
    plain = plain.sort_values("n_params")
    if plain.empty:
        return ""
    lo, hi = plain.iloc[0], plain.iloc[-1]
    text = (f"Measured on {lo['device']} (torch {lo.get('torch_version', '?')}, {str(lo.get('timestamp', ''))[:10]}): "
            f"{lo['tokens_per_s'] / 1e6:.2f} M tokens/s at `{lo['size']}` ({lo['model_tflops']:.0f} TFLOP/s) and "
            f"{hi['tokens_per_s'] / 1e6:.2f} M tokens/s at `{hi['size']}` ({hi['model_tflops']:.0f} TFLOP/s), bf16 "
            "autocast without `torch.compile`")
    for _, r in ok[ok["precision"] != "W16 A16 KV16"].iterrows():
        base = plain[plain["size"] == r["size"]]
        if len(base):
            text += (f"; with {r['precision']} fake quantization `{r['size']}` runs at "
                     f"{r['tokens_per_s'] / base['tokens_per_s'].iloc[0]:.2f}× its tokens/s")
    for _, r in ok[ok["compile"].astype(bool)].iterrows():
        base = plain[plain["size"] == r["size"]]
        if len(base):
            text += (f"; `torch.compile` gives `{r['size']}` {r['tokens_per_s'] / base['tokens_per_s'].iloc[0]:.2f}× "
                     "its tokens/s")
    return text + "."

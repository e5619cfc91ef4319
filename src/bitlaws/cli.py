"""Command line: ``python -m bitlaws COMMAND ...`` (``COMMAND --help`` lists its options), COMMAND one
of train, sweep, estimate, coverage, verdicts, export-checkpoints, export-hf, fit, quik, migrate-store,
design-power, cascade. Configuration is overridden with dotted flags, as minGPT does::

    python -m bitlaws train --model.size=n83k --train.n_tokens=2e6 --train.lr=2e-3 --ptq.bits=3,4,8
    python -m bitlaws sweep --profile cpu --workers 1 --threads 2
    python -m bitlaws estimate --profile gpu --tflops 100   # device-hours per sweep, nothing run
    python -m bitlaws sweep --profile gpu --executor slurm --gpus-per-node 1 --partition gpu --time-min 600
    python -m bitlaws coverage --profile cpu
    python -m bitlaws fit --profile cpu   # law fits -> data/fits/
    python -m bitlaws quik --profile cpu  # QUIK and baselines on the committed checkpoints -> Q1–Q3
    python -m bitlaws verdicts            # recompute data/verdicts.json and the README's ledger
    python -m bitlaws export-checkpoints --profile cpu   # seed-0 models to data/checkpoints/ (bf16)

A bad flag or value exits with status 2 and a message naming the field and what is allowed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import sys
import typing
from pathlib import Path

# Only light imports here: `--help` and argument errors answer at once. Each command imports the
# heavy parts (torch, transformers, pandas, scipy) it needs inside its function.
from .study import PROFILE_NAMES

__all__ = ["main", "apply_overrides"]


def _convert(text: str, typ: typing.Any, where: str) -> typing.Any:
    origin = typing.get_origin(typ)
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    if text.lower() in ("none", "null") and (type(None) in typing.get_args(typ)):
        return None
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        typ = args[0]
    try:
        if typ is bool:
            if text.lower() in ("1", "true", "yes"):
                return True
            if text.lower() in ("0", "false", "no"):
                return False
            raise ValueError
        if typ is int:
            value = float(text)
            if not value.is_integer():
                raise ValueError
            return int(value)
        if typ is float:
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(f"{where}: {text!r} is not a finite number")
            return value
        return str(text)
    except ValueError as exc:
        if "finite" in str(exc):
            raise
        raise ValueError(f"{where}: cannot read {text!r} as {getattr(typ, '__name__', typ)}") from None


def apply_overrides(obj, prefix: str, overrides: dict[str, str]):
    """Return a copy of the frozen dataclass `obj` with ``prefix.field=value`` overrides applied.

    Raises:
        ValueError: an unknown field (the message lists the fields) or an unreadable value; the
            dataclass' own validation errors propagate.
    """
    hints = typing.get_type_hints(type(obj))
    fields = {f.name for f in dataclasses.fields(obj)}
    changes = {}
    for key, text in overrides.items():
        if not key.startswith(prefix + "."):
            continue
        name = key[len(prefix) + 1:]
        if name not in fields:
            raise ValueError(f"unknown option --{key}; {prefix} fields: {', '.join(sorted(fields))}")
        changes[name] = _convert(text, hints[name], f"--{key}")
    return dataclasses.replace(obj, **changes) if changes else obj


def _split_overrides(rest: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--") or "." not in tok:
            raise ValueError(f"unexpected argument {tok!r}; overrides look like --train.lr=3e-4")
        if "=" in tok:
            k, v = tok[2:].split("=", 1)
        else:
            if i + 1 >= len(rest):
                raise ValueError(f"{tok} needs a value")
            k, v = tok[2:], rest[i + 1]
            i += 1
        out[k] = v
        i += 1
    return out


def _count(minimum: int):
    """An argparse type: an integer ≥ `minimum` (argparse exits 2 with the message otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer ≥ {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer ≥ {minimum}, got {value}")
        return value

    parse.__name__ = f"integer ≥ {minimum}"
    return parse


DESIGN_CLAIMS = ("P4", "P5", "P9")  # the claims of qat_design.CANDIDATES (tested), kept here so parsing imports neither


def _claim_list(text: str) -> str:
    """An argparse type: comma-separated claims of :data:`DESIGN_CLAIMS`, each once."""
    allowed = DESIGN_CLAIMS
    names = [t.strip() for t in text.split(",")]
    bad = [n for n in names if n not in allowed]
    if bad or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"claims must be distinct, comma-separated, of {', '.join(allowed)}; "
                                         f"got {text!r}")
    return ",".join(names)


def _parse_experiments(text: str | None) -> list[str] | None:
    """``"base_grid,qat_joint"`` -> the list; None -> None (every declared one); an empty list is refused."""
    if text is None:
        return None
    exps = [e.strip() for e in text.split(",") if e.strip()]
    if not exps:
        from .study.sweep import EXPERIMENTS

        raise ValueError(f"--experiments: no experiment named in {text!r}; allowed: comma-separated names from "
                         f"{list(EXPERIMENTS)}, or leave the option out for every one the profile declares")
    return exps


def _parse_bits(text: str) -> list[int]:
    """``"3,4,8"`` -> [3, 4, 8] (sorted, unique); ``"none"`` -> [] (no PTQ)."""
    if text.strip().lower() == "none":
        return []
    try:
        bits = sorted({int(b) for b in text.split(",")})
    except ValueError:
        raise ValueError(f"--ptq.bits: expected comma-separated integers in [2, 16] or 'none', got {text!r}") from None
    return bits


def _check_out_folder(flag: str, path: str, holds: str) -> None:
    """An output folder given as `flag`: made later if absent, so its nearest existing ancestor must
    be a writable folder. Raises ValueError (a file stands there, or no write permission), naming
    `flag`, the path and what the folder `holds`; creates nothing and imports nothing heavy."""
    given = Path(path)
    probe = given
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == given else f"cannot be made: {probe} is a file"
        raise ValueError(f"{flag} {given} {where}; {flag} takes a folder (made if it is not there) for {holds}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {given}: {probe} is not writable here; {flag} takes a writable folder (made if "
                         f"it is not there) for {holds}")


_FLAG_PREFIX = {"ModelConfig": "model", "TrainConfig": "train", "RTNConfig": "ptq"}  # class -> its dotted flags


def _flag_names(message: str) -> str:
    """`message` with each configuration field it names (``TrainConfig.n_tokens``, ``ModelConfig.d_model/n_heads``)
    written as the flag that sets it, the field in parentheses: ``--train.n_tokens (TrainConfig.n_tokens)``."""
    pattern = re.compile(r"\b(" + "|".join(_FLAG_PREFIX) + r")\.(\w+(?:/\w+)*)(=\S+)?")

    def flag(m: re.Match) -> str:
        cls, names, value = m.group(1), m.group(2), m.group(3) or ""
        flags = "/".join(f"--{_FLAG_PREFIX[cls]}.{n}" for n in names.split("/"))
        return f"{flags}{value} ({cls}.{names})"

    return pattern.sub(flag, message)


def _cmd_train(args, overrides: dict[str, str]) -> int:
    try:
        return _train(args, overrides)
    except ValueError as exc:  # the configuration's own errors, in the flags' names
        raise ValueError(_flag_names(str(exc))) from None


def _train(args, overrides: dict[str, str]) -> int:
    from .configs import ModelConfig, TrainConfig, get_size  # torch-free: a bad size or field answers at once

    _check_out_folder("--out", args.out, "the run's checkpoint, config JSON and rows CSV")

    unknown = [k for k in overrides if k.split(".")[0] not in ("model", "train", "ptq")]
    if unknown:
        raise ValueError(f"unknown option(s) {['--' + k for k in unknown]}; prefixes: --model., --train., --ptq.")
    size = overrides.pop("model.size", None)
    model = get_size(size) if size else ModelConfig()
    model = apply_overrides(model, "model", overrides)
    train_cfg = apply_overrides(TrainConfig(), "train", overrides)
    from .ptq.rtn import RTNConfig
    from .study import MANUAL_EXPERIMENT
    from .study.store import append_rows
    from .study.sweep import RunSpec, run_spec
    from .train import resolve_device

    resolve_device(train_cfg.device)  # --train.device=cuda without CUDA: exit 2 before any work
    if "model.vocab_size" not in overrides:  # the corpus tokenizer's vocabulary (256 for bytes), not by hand
        from .corpus import corpus_vocab_size

        model = model.replace(vocab_size=corpus_vocab_size(train_cfg.corpus))
    if "model.max_seq_len" not in overrides and train_cfg.seq_len > model.max_seq_len:
        model = model.replace(max_seq_len=train_cfg.seq_len)  # rotary tables cover the context, as sweeps do
    bits = overrides.pop("ptq.bits", "3,4,5,6,7,8")
    extra = [k for k in overrides if k.startswith("ptq.")]
    if extra:
        raise ValueError(f"unknown option(s) {extra}; --ptq.bits=3,4,8 is the only ptq option")
    ptq = tuple(RTNConfig(bits=b) for b in _parse_bits(bits))
    spec = RunSpec(MANUAL_EXPERIMENT, "custom", size or "custom", model, train_cfg, ptq)
    from .study.store import probe_csv

    probe_csv(Path(args.out) / "custom" / spec.run_id / "rows.csv", "--out")  # a write fault now, not after training
    rows, curve = run_spec(spec, threads=train_cfg.threads, run_root=args.out, progress=not args.quiet)
    out_csv = Path(args.out) / "custom" / spec.run_id / "rows.csv"
    append_rows(out_csv, rows)
    for r in rows:
        print(f"{r['ptq_method']:>5} bits_post={r['bits_post']:>2}  loss_val={r['loss_val']:.4f}  "
              f"delta_ptq={r['delta_ptq']:+.4f}  status={r['status']}")
    print(f"checkpoint, config and rows: {out_csv.parent}")
    return 0


def _throughput(args, measure_if_none: bool):
    """The throughput an estimate reads: --throughput CSV, --tflops, --measure, else the default."""
    from .study import budget

    if getattr(args, "throughput", None):
        path = Path(args.throughput)
        if not path.is_file():
            raise FileNotFoundError(f"--throughput {path}: {'a folder' if path.is_dir() else 'no such file'}; "
                                    f"{budget.THROUGHPUT_HINT}")
        try:
            return budget.throughput_from_csv(path)
        except ValueError as exc:  # one line naming the file and the columns expected
            raise ValueError(f"--throughput {exc}") from None
    if getattr(args, "tflops", None) is not None:
        if not (math.isfinite(args.tflops) and args.tflops > 0):
            raise ValueError(f"--tflops must be a positive number, got {args.tflops}")
        return budget.assumed_throughput(args.tflops)
    if getattr(args, "measure", False):
        return budget.measure_throughput(args.profile)
    tp = budget.default_throughput(args.profile, args.data_root)
    if tp is None and measure_if_none:
        return budget.measure_throughput(args.profile)
    if tp is None:
        raise ValueError(f"no measured throughput for profile {args.profile!r} (no data/runs/{args.profile}/"
                         "train_throughput.csv, no rows with tokens_per_s): pass --throughput CSV "
                         "(bench/device_check.py writes one), --measure (a few steps here) or --tflops X "
                         "(an assumed model FLOP rate)")
    return tp


def _print_estimate(args, missing_only: bool, measure_if_none: bool) -> None:
    from .study import budget

    tp = _throughput(args, measure_if_none)
    table = budget.estimate(args.profile, tp, _parse_experiments(args.experiments), missing_only=missing_only,
                            data_root=args.data_root)
    print(budget.format_estimate(args.profile, table, tp))


def _cmd_estimate(args) -> int:
    _print_estimate(args, missing_only=args.missing, measure_if_none=False)
    return 0


def _cmd_sweep(args) -> int:
    from .study.sweep import EXECUTORS, SlurmOptions, declared_experiments, plan, run_sweep, spec_corpus

    exps = _parse_experiments(args.experiments)
    if args.executor not in EXECUTORS:  # checked here too: before the estimate measures anything
        raise ValueError(f"unknown executor {args.executor!r}; allowed: {list(EXECUTORS)}")
    slurm = SlurmOptions(gpus_per_node=args.gpus_per_node, partition=args.partition, account=args.account,
                         mem_gb=args.mem_gb, timeout_min=args.time_min)
    declared = declared_experiments(args.profile)
    bad = [e for e in (exps or []) if e not in declared]
    if bad:
        raise ValueError(f"profile {args.profile!r} declares no experiment {bad}; allowed: {declared}")
    if not args.estimate:  # the corpus first: offline, fail now, before measuring or training anything
        first = plan(args.profile, (exps or declared)[0])
        if first:
            spec_corpus(first[0])
    if args.estimate or not args.no_estimate:  # before any training: what the missing runs cost here
        _print_estimate(args, missing_only=True, measure_if_none=True)
    if args.estimate:
        return 0
    cov = run_sweep(args.profile, executor=args.executor, workers=args.workers, threads=args.threads,
                    data_root=args.data_root, run_root=args.run_root, limit=args.limit, progress=not args.quiet,
                    experiments=exps, slurm=slurm, only=args.only)
    from .study.sweep import coverage_table

    covs = list(cov.get("experiments", {}).values())
    print(f"coverage of profile {args.profile!r} after the sweep:\n{coverage_table(covs)}" if covs else json.dumps(cov))
    return 0


def _cmd_coverage(args) -> int:
    from .study.store import data_dir
    from .study.sweep import coverage, coverage_table, declared_experiments

    covs = [coverage(args.profile, args.data_root, exp) for exp in declared_experiments(args.profile)]
    if args.json:
        for cov in covs:
            print(json.dumps(cov))
        return 0
    root = Path(args.data_root) if args.data_root else data_dir()
    print(f"profile {args.profile!r}, rows under {root / 'runs' / args.profile}: done/declared per experiment")
    print(coverage_table(covs))
    return 0


def _cmd_migrate(args) -> int:
    from .study.quik_accuracy import QUIK_COLUMNS, QUIK_CSV, migrate_quik_columns
    from .study.store import COLUMNS, SCHEMA_ADDED, data_dir, migrate_schema, read_rows, sweep_lock

    root = Path(args.data_root) if args.data_root else data_dir()
    old_schema = set(COLUMNS) - set(SCHEMA_ADDED)

    def is_observation_file(f: Path) -> bool:  # the sweeps' files and QUIK's; the benchmark files differ
        with f.open(encoding="utf-8") as fh:
            return old_schema <= set(fh.readline().rstrip("\n").split(","))

    absent = [f for f in args.files if not Path(f).is_file()]
    if absent:
        raise FileNotFoundError(f"migrate-store: no such file: {', '.join(absent)}; give observation CSVs of a "
                                f"sweep (e.g. {root / 'runs' / args.profile / 'base_grid.csv'}), or no file to "
                                f"migrate every one of --profile {args.profile}")
    files = [Path(f) for f in args.files] or sorted(
        f for f in (root / "runs" / args.profile).glob("*.csv") if not f.name.endswith("_curves.csv")
        and is_observation_file(f))
    with sweep_lock(root):  # no sweep may append while a file is replaced
        for f in files:
            quik = f.name == QUIK_CSV  # QUIK's rows have their own schema and migration
            n = migrate_quik_columns(f) if quik else migrate_schema(f)
            read_rows(f, QUIK_COLUMNS if quik else COLUMNS, "obs_id")  # the migrated file meets the schema
            print(f"{f}: {n} rows migrated" if n else f"{f}: already has the columns")
    return 0


def _other_ptq_methods(profile: str, root) -> list[str]:
    """The post-training methods besides RTN (``run_fits``' own) in the profile's training rows, sorted."""
    from .study.law_fits import TRAINING_EXPERIMENTS
    from .study.store import load_runs

    df = load_runs(profile, experiment=TRAINING_EXPERIMENTS, root=root)
    return sorted(set(df["ptq_method"].dropna()) - {"none", "rtn"}) if "ptq_method" in df else []


def _cmd_fit(args) -> int:
    from .study.law_fits import fit_ptq_method, joint_all_fit, pipeline_bootstrap, run_fits

    for stage, rec in run_fits(args.profile, n_boot=args.boot, root=args.data_root).items():
        if rec["status"] == "ok" and "params" in rec:
            consts = ", ".join(f"{k} = {v:.4g}" for k, v in rec["params"].items())
            print(f"{stage}: {consts} (R² {rec['r2']:.3f}, {rec['n_points']} rows)")
        else:
            print(f"{stage}: {rec['status']}" + (f" — {rec['reason']}" if rec.get("reason") else ""))
    for method in _other_ptq_methods(args.profile, args.data_root):  # Eq. 2 per PTQ method (P1's GPTQ interval)
        rec = fit_ptq_method(args.profile, method, n_boot=args.boot, root=args.data_root)
        print(f"ptq_{method}: {rec['status']}" + (f", γ_D = {rec['params']['gamma_D']:.3g} (R² {rec['r2']:.3f}, "
                                                  f"{rec['n_points']} rows)" if rec["status"] == "ok" else
                                                  f" — {rec.get('reason', '')}"))
    rec = pipeline_bootstrap(args.profile, n_boot=args.pipeline_boot, root=args.data_root, progress=True)
    print(f"pipeline_boot: {rec['status']}, {rec['n_ok']} of {rec['n_boot']} resamples refitted every stage"
          + (f" ({rec['n_resumed']} reused from the stored record)" if rec.get("n_resumed") else "")
          + (f" — {rec['reason']}" if rec.get("reason") else ""))
    rec = joint_all_fit(args.profile, root=args.data_root)
    print(f"joint_all: {rec['status']}" + (f", objective {rec['objective']:.4g} against {rec['objective_staged']:.4g} "
                                          f"at the staged constants, converged {rec['converged']}"
                                          if rec["status"] == "ok" else f" — {rec['reason']}"))
    _fit_d_crit(args)
    return 0


def _fit_d_crit(args) -> None:
    """Eq. 13's D_crit draws (P2): paired refits of Chinchilla and Eq. 2 per resample of the base grid's runs."""
    from .study.ptq_degradation import d_crit_interval, load_d_crit_boots, write_d_crit_boot
    from .study.store import load_runs

    try:
        df = load_runs(args.profile, experiment="base_grid", root=args.data_root)
    except FileNotFoundError:
        print("d_crit_boot: skipped — no base-grid rows")
        return
    for resample in ("runs", "wild", "wild_runs"):  # P2's interval; the wild draws reported beside it
        path = write_d_crit_boot(args.profile, root=args.data_root, progress=True, rows=df, resample=resample)
        for m, (boot, why) in load_d_crit_boots(args.profile, df, root=args.data_root, resample=resample).items():
            if boot is None:
                print(f"d_crit_boot {m} ({resample}): {why}")
                continue
            n = float(df.loc[df["status"] == "ok", "n_params"].min())
            iv = d_crit_interval(boot, n, 3)
            print(f"d_crit_boot {m} ({resample}): D_crit(N = {n:,.0f}, INT3) 95 % [{iv['lo']:.3g}, {iv['hi']:.3g}] "
                  f"tokens (bytes) over {iv['n_used']:.0f} of {iv['n_draws']:.0f} draws ({path.name})")


def _cmd_design_power(args) -> int:
    from .study.qat_design import write_design_power

    claims = None if args.claims is None else args.claims.split(",")
    path = write_design_power(args.profile, n_sim=args.n_sim, root=args.data_root, claims=claims)
    print(f"wrote {path}" + (f" (rows of {', '.join(claims)} replaced, the others kept)" if claims else ""))
    return 0


def _cmd_cascade(args) -> int:
    from .study.cascade import StepFailed, run_cascade

    try:
        run_cascade(args.profile, root=args.data_root, dry_run=args.dry_run, allow_untrained=args.allow_untrained,
                    only=args.only)
    except StepFailed as exc:  # the steps before it are kept; a rerun resumes
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def _transformers_quiet():
    """transformers' progress bars off and its logging at errors only while the block runs; both restored."""
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _cmd_export_hf(args) -> int:
    from tqdm.auto import tqdm

    from .study.checkpoints import export_hf_folder
    from .study.store import data_dir

    src = (Path(args.data_root) if args.data_root else data_dir()) / "checkpoints" / args.profile
    files = sorted(src.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no committed checkpoints under {src}; `python -m bitlaws export-checkpoints "
                                f"--profile {args.profile}` makes them")
    out = Path(args.out)
    _check_out_folder("--out", args.out, "one Hugging Face folder per checkpoint")  # before any progress bar
    with _transformers_quiet():  # one progress bar: ours, not transformers' per-save "Writing model shards"
        for f in tqdm(files, desc="export-hf"):
            export_hf_folder(f, out / f.stem)
    print(f"wrote {len(files)} Hugging Face folders under {out} (AutoModelForCausalLM.from_pretrained(folder))")
    return 0


def _cmd_export(args) -> int:
    from .study.checkpoints import export_checkpoints
    from .study.store import data_dir, load_runs

    root = Path(args.data_root) if args.data_root else data_dir()
    rows = load_runs(args.profile, experiment="base_grid", root=root)
    run_root = Path(args.run_root) if args.run_root else root.parent / "runs"
    written = export_checkpoints(rows, run_root, root / "checkpoints" / args.profile)
    print(f"wrote {len(written)} checkpoints to {root / 'checkpoints' / args.profile}")
    return 0


def _stale_inputs(profile: str, root: Path | None) -> list[str]:
    """The cascade's steps before the verdicts whose stored output was made from other training rows than the
    data freeze admits, as "name (why)"; none where the profile has no training rows there."""
    from .study.cascade import cascade_plan

    try:
        steps = cascade_plan(profile, root, check_verdicts=False)
    except FileNotFoundError:  # no training rows: the verdicts are pending, nothing upstream to be stale
        return []
    return [f"{s.name} ({s.why})" for s in steps if s.kind != "verdicts" and not s.current]


def _cmd_verdicts(args) -> int:
    from .study import ledger
    from .study.ptq_degradation import BOOK_PROFILE
    from .study.store import data_dir

    if args.json and not args.check:
        raise ValueError("verdicts: --json prints the recomputed grades of --check and writes nothing; without "
                         "--check the command writes data/verdicts.json and the README's ledger. Allowed: "
                         "`verdicts --check --json` or `verdicts`")
    root = Path(args.data_root) if args.data_root else None
    store = (root if root is not None else data_dir()) / "verdicts.json"
    if args.check and args.profile == BOOK_PROFILE and root is not None and not store.is_file():
        raise FileNotFoundError(f"--data-root {root} has no verdicts.json to check against; --check compares "
                                "with the verdicts stored there (run `verdicts` without --check to write them)")
    from .study.store import data_dir_set_to

    writes = not args.check and args.profile == BOOK_PROFILE  # other profiles' verdicts are printed only
    try:
        stale = _stale_inputs(args.profile, root)
    except ValueError as exc:  # a freeze or plan the cascade refuses stops a guarded write too
        if writes and not args.allow_stale:
            raise
        stale = [f"the cascade's plan could not be read ({exc})"]  # a check, another profile, --allow-stale: said
    if stale and writes and not args.allow_stale:
        raise ValueError(f"verdicts: {len(stale)} table(s) the verdicts read were made from other training rows than "
                         f"the data freeze admits: {'; '.join(stale)}. Run `python -m bitlaws cascade --profile "
                         f"{args.profile}` (it remakes them in order, then the verdicts), or pass --allow-stale to "
                         "write verdicts from the stale tables anyway")
    for line in stale if not writes or args.allow_stale else []:
        print(f"stale input: {line}", file=sys.stderr)
    with data_dir_set_to(root):  # the rows and fits of --data-root, read by every verdict function
        new = ledger.compute_verdicts(args.profile)
    if args.check:
        from .study.claims import CLAIMS

        new = {c: new[c] for c in sorted(new, key=lambda c: list(CLAIMS).index(c) if c in CLAIMS else len(CLAIMS))}
        diffs = ledger.check_verdicts(args.profile, path=store, verdicts=new) if args.profile == BOOK_PROFILE else []
        if args.json:
            print(json.dumps({c: {"verdict": v.verdict, "inputs_sha256": v.inputs_sha256} for c, v in new.items()},
                             indent=1, sort_keys=True))
        else:  # one line per claim: its recomputed grade and the first 12 hex digits of what it read
            for c, v in new.items():
                print(f"{c:<4} {v.verdict:<15} inputs {(v.inputs_sha256 or 'none')[:12]}")
        for line in diffs:
            print(f"differs: {line}", file=sys.stderr)
        moved: list[str] = []
        if args.profile == BOOK_PROFILE:  # prose-only numbers are masked above: say which moved (not a failure)
            from .study.claims import load_verdicts, prose_number_drift

            stored = load_verdicts(store)
            for c, v in new.items():
                moved += prose_number_drift(stored[c], v) if c in stored else []
            for line in moved:
                print(f"prose moved: {line}", file=sys.stderr)
        if args.profile != BOOK_PROFILE:
            print(f"(profile {args.profile!r}: nothing to check against; {store} holds the "
                  f"{BOOK_PROFILE!r} profile's verdicts)", file=sys.stderr)
        else:
            differing = sorted({line.split(".", 1)[0].split(":", 1)[0] for line in diffs})
            print(f"verdicts --check: {len(new) - len(differing)} of {len(new)} verdicts agree with {store}"
                  + (f"; differ: {', '.join(differing)}" if differing else "")
                  + (f"; {len(moved)} number(s) in the prose moved beyond their rounding (not a failure: a number "
                     "printed only in the prose is checked once it is stored as a detail)" if moved else ""),
                  file=sys.stderr)
        return 1 if diffs else 0
    for v in new.values():
        print(f"{v.claim_id}: {v.verdict} — {v.ours or v.reason}")
    if args.profile == BOOK_PROFILE:
        from .study.claims import store_verdicts

        store_verdicts(new, store.parent)  # the README's ledger too, where that is the repository's data/
        print(f"wrote {store}")
    else:
        print(f"(profile {args.profile!r}: printed only; {store} and the README hold the "
              f"{BOOK_PROFILE!r} profile's verdicts)")
    return 0


def _cmd_quik(args) -> int:
    from .study.ptq_degradation import BOOK_PROFILE
    from .study.quik_accuracy import refresh_quik_verdicts, run_quik_experiment

    n = run_quik_experiment(args.profile, root=args.data_root, progress=not args.quiet, threads=args.threads,
                            limit=args.limit)
    where = Path(args.data_root) if args.data_root else Path("data")
    print(f"wrote {n} rows to {where / 'runs' / args.profile / 'quik_accuracy.csv'}")
    if args.data_root is None:
        for v in refresh_quik_verdicts(args.profile, write=args.profile == BOOK_PROFILE).values():
            print(f"{v.claim_id}: {v.verdict} — {v.ours or v.reason}")
    return 0


def _train_epilog() -> str:
    """`train --help`'s list of every option and default (from the torch-free ``bitlaws.configs``)."""
    from .configs import SIZE_LADDERS, ModelConfig, TrainConfig

    def fields(obj, prefix):
        return "\n".join(f"  --{prefix}.{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj))

    ladders = "\n".join(f"      {name}: {', '.join(sizes)}" for name, sizes in SIZE_LADDERS.items())
    return ("options and defaults (any field, dotted):\n"
            f"  --model.size=NAME   sets every model field; NAME from one of the ladders\n{ladders}\n"
            f"{fields(ModelConfig(), 'model')}\n{fields(TrainConfig(), 'train')}\n"
            "  --ptq.bits=3,4,5,6,7,8   RTN bit widths after training ('none' for no PTQ)\n"
            "train.lr=None applies the width rule 3e-3·(64/d_model)^0.5.")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose ``epilog`` may be a function, called only when the help is printed."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def _check_data_root(args) -> None:
    """A given ``--data-root`` must be an existing folder; only ``sweep`` starts a new one (README:
    retrain into a fresh folder). Raises FileNotFoundError (none there) or ValueError (a file), naming it."""
    root = getattr(args, "data_root", None)
    if root is None or args.command == "sweep":
        return
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--data-root {path} is a file, not a folder")
    if not path.exists():
        raise FileNotFoundError(f"--data-root {path}: no such folder ({args.command} reads a data/ folder: give an "
                                "existing one, or leave the option out for the repository's data/; only "
                                "`sweep` makes a new one)")


def main(argv: list[str] | None = None) -> int:
    # the module docstring, as plain text (no reStructuredText literals) for --help
    parser = _Parser(prog="python -m bitlaws", description=__doc__.replace("``", "").replace("::", ":"),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p_train = sub.add_parser("train", help="train one model, then RTN it; dotted --model./--train./--ptq. overrides",
                             epilog=_train_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p_train.add_argument("--out", default="runs", help="folder for the checkpoint, config JSON and rows CSV")
    p_sweep = sub.add_parser("sweep", help="run a profile's sweep, resumably")
    p_est = sub.add_parser("estimate", help="device-hours of a profile's sweeps from a measured tokens/s (runs nothing)")
    p_est.add_argument("--missing", action="store_true",
                       help="only the runs that miss a row in the CSVs: to train, and to re-evaluate")
    p_cov = sub.add_parser("coverage", help="how much of a profile's sweep is committed, per experiment: runs "
                                            "trained and observations at each evaluation version, of those declared")
    p_cov.add_argument("--json", action="store_true", help="JSON lines, one record per experiment, instead of the table")
    p_ver = sub.add_parser("verdicts", help="recompute data/verdicts.json from the committed CSVs")
    p_ver.add_argument("--check", action="store_true",
                       help="write nothing; exit 1 if a recomputed verdict differs from the stored one "
                            "(grades and identities exactly, numbers within bitlaws.study.claims.DETAIL_RTOL)")
    p_ver.add_argument("--json", action="store_true",
                       help="with --check: print {claim: {verdict, inputs_sha256}} as JSON instead of one line per claim")
    p_ver.add_argument("--allow-stale", action="store_true",
                       help="write the verdicts even where a fit or power table they read was made from other "
                            "training rows than the data freeze admits (default: refuse, naming the stale steps; "
                            "`python -m bitlaws cascade` remakes them, then the verdicts)")
    p_exp = sub.add_parser("export-checkpoints", help="copy a profile's seed-0 models to data/checkpoints/ in bf16")
    p_mig = sub.add_parser("migrate-store", help="bring observation CSVs to the current schema: add the columns "
                                                 "added since a file was written (fmt_post, eval_version) and, in "
                                                 "quik_accuracy.csv, move post-training formats out of the training "
                                                 "columns; no loss or id changes (each rewrite is checked)")
    p_mig.add_argument("files", nargs="*", help="observation CSVs (default: every one of --profile)")
    p_hf = sub.add_parser("export-hf", help="the committed checkpoints as Hugging Face folders (config, bf16 weights, "
                                            "byte-level tokenizer, model card) that from_pretrained loads")
    p_hf.add_argument("--out", default="build/hf", help="output folder, one subfolder per checkpoint (default build/hf)")
    p_dp = sub.add_parser("design-power", help="power of P4's, P5's and P9's rules on candidate QAT designs, with "
                                               "their CPU-hours; rewrites <data-root>/runs/<profile>/"
                                               "qat_design_power.csv (about 10 min on 2 cores at --n-sim 100)",
                          description="Simulates each candidate design of bitlaws.study.qat_design.CANDIDATES and "
                                      "rewrites <data-root>/runs/<profile>/qat_design_power.csv, which chapter 07 "
                                      "reads: run it on a copy (--data-root) unless you mean to replace the "
                                      "committed table.")
    p_dp.add_argument("--n-sim", type=_count(2), default=100, help="simulated datasets per hypothesis (default 100)")
    p_dp.add_argument("--claims", type=_claim_list, default=None,
                      help="comma-separated claims to simulate again, of P4, P5, P9 (default: all); the other "
                           "claims' committed rows are kept as they are")
    p_fit = sub.add_parser("fit", help="fit the scaling laws to a profile's runs; writes data/fits/<profile>_<stage>.json")
    p_cas = sub.add_parser("cascade", help="after the data freeze (store.ROWS_READ_UNTIL) moves: remake, in order, every "
                                           "table it feeds that is stale (fit, design-power, P4's replicates and pool, "
                                           "P6's P* leg, P3's power, verdicts), skipping the current ones (resumable)",
                           description="Runs the steps of bitlaws.study.cascade.cascade_plan in order: python -m "
                                       "bitlaws fit, design-power, qat_design.write_p4_replicates and "
                                       "write_p4_pool_power, compute_optimal.write_p6_pstar_power, "
                                       "p3_power.write_p3_power (with the arguments of the stored tables) and "
                                       "verdicts; a step whose stored output was made from "
                                       "the rows the freeze reads now is skipped. It first refuses a freeze that cuts "
                                       "a run in two or admits a run without all its planned rows, and remakes "
                                       "nothing while declared runs are untrained (--allow-untrained).")
    p_cas.add_argument("--dry-run", action="store_true",
                       help="print each step with its status (current / stale) and why, and run nothing (where every "
                            "other step is current it runs `verdicts --check`, about two minutes, to tell the verdicts' "
                            "status)")
    p_cas.add_argument("--only", default=None, metavar="KINDS",
                       help="run only these kinds of step, comma-separated (fit, design_power, p4_replicates, p4_pool, "
                            "p6_pstar, p3_power, verdicts); refused while a kind they read is stale. On two cores: "
                            "--only fit,design_power, then --only p4_replicates,p4_pool beside --only p6_pstar,p3_power, "
                            "then the whole cascade")
    p_cas.add_argument("--allow-untrained", action="store_true",
                       help="remake stale steps although the freeze reads only part of a sweep's runs (some untrained, "
                            "or trained after the freeze; refused by default: a half-trained batch)")
    p_quik = sub.add_parser("quik", help="QUIK / RTN / SmoothQuant / GPTQ on the committed checkpoints "
                                         "(data/runs/<profile>/quik_accuracy.csv, resumable), then Q1–Q3")
    p_quik.add_argument("--threads", type=_count(1), default=1, help="torch threads, ≥ 1 (default 1)")
    p_quik.add_argument("--limit", type=_count(0), default=None, help="at most this many new rows")
    p_fit.add_argument("--boot", type=_count(1), default=None,
                       help="bootstrap resamples per stage, ≥ 1 (default 20 smoke, 200 cpu)")
    p_fit.add_argument("--pipeline-boot", type=_count(1), default=None,
                       help="resamples of the pipeline bootstrap (every stage refitted per resample), ≥ 1 "
                            "(default 20 smoke, 2000 cpu); draws already stored for the same rows are kept, and a running one "
                            "checkpoints its draws every 50 (fits/<profile>_pipeline_boot.json.partial), so a "
                            "killed run resumes where it stopped")
    for p in (p_sweep, p_cov, p_ver, p_exp, p_fit, p_quik, p_est, p_mig, p_dp, p_hf, p_cas):
        p.add_argument("--profile", default="cpu", choices=sorted(PROFILE_NAMES),
                       help="which declared sweep: %(choices)s (default %(default)s)")
    for p in (p_sweep, p_cov, p_ver, p_exp, p_fit, p_quik, p_est, p_mig, p_dp, p_hf, p_cas):
        p.add_argument("--data-root", default=None, help="data/ folder (default: the repository's); "
                       + ("made if it is not there" if p is p_sweep else "must exist"))
    for p in (p_cov, p_ver, p_fit, p_dp, p_cas):
        p.add_argument("--until", default=None, metavar="TIME",
                       help="read the sweep rows written at or before this UTC time (YYYY-MM-DDTHH:MM:SSZ), or 'all' "
                            "(default: the repository's data freeze, store.ROWS_READ_UNTIL; give 'all' for a "
                            "--data-root of your own, e.g. a retraining from scratch, whose rows are all newer)")
    p_exp.add_argument("--run-root", default=None, help="training checkpoints (default: runs/ beside data/)")
    p_sweep.add_argument("--executor", default="local",
                         help="where runs train: local (this machine's processes), submitit-local or slurm")
    p_sweep.add_argument("--workers", type=_count(1), default=1, help="runs trained at once, ≥ 1 (default 1)")
    p_sweep.add_argument("--threads", type=_count(1), default=1, help="torch threads per run, ≥ 1 (default 1)")
    p_sweep.add_argument("--run-root", default=None, help="checkpoint folder (default: <repo>/runs)")
    p_sweep.add_argument("--limit", type=_count(0), default=None, help="at most this many runs (≥ 0)")
    p_sweep.add_argument("--only", choices=("new", "re-evaluate"), default=None,
                         help="only the new (and interrupted) runs, whose rows change the fits, or only the "
                              "re-evaluations, whose rows are at another evaluation version (default: both)")
    for p in (p_sweep, p_est):
        p.add_argument("--experiments", default=None,
                       help="comma-separated experiment names (default: every one the profile declares; "
                            "`coverage` lists them)")
        p.add_argument("--throughput", default=None, metavar="CSV",
                       help="train_throughput.csv of bench/device_check.py (default: data/runs/<profile>/"
                            "train_throughput.csv, else the profile's rows' tokens_per_s)")
        p.add_argument("--tflops", type=float, default=None, help="an assumed model FLOP rate, TFLOP/s")
        p.add_argument("--measure", action="store_true", help="measure tokens/s here in a few steps")
    p_sweep.add_argument("--estimate", action="store_true",
                         help="print the estimate of the runs to train and to re-evaluate, and stop")
    p_sweep.add_argument("--no-estimate", action="store_true", help="start without printing the estimate")
    p_sweep.add_argument("--gpus-per-node", type=_count(0), default=0, help="submitit/slurm: GPUs per job")
    p_sweep.add_argument("--partition", default=None, help="slurm: --partition")
    p_sweep.add_argument("--account", default=None, help="slurm: --account")
    p_sweep.add_argument("--mem-gb", type=float, default=None, help="submitit/slurm: memory per job, GB")
    p_sweep.add_argument("--time-min", type=_count(1), default=24 * 60, help="submitit/slurm: minutes per job")
    for p in (p_train, p_sweep, p_quik):
        p.add_argument("--quiet", action="store_true", help="no progress bars")
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "train":
            return _cmd_train(args, _split_overrides(rest))
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        _check_data_root(args)
        if getattr(args, "until", None) is not None:  # store.read_until reads it wherever rows are loaded
            from .study.store import read_until

            read_until(args.profile, args.until)  # a bad time is refused here, named as --until
            os.environ["BITLAWS_UNTIL"] = args.until
        return {"sweep": _cmd_sweep, "estimate": _cmd_estimate, "coverage": _cmd_coverage, "verdicts": _cmd_verdicts,
                "export-checkpoints": _cmd_export, "fit": _cmd_fit, "quik": _cmd_quik,
                "migrate-store": _cmd_migrate, "design-power": _cmd_design_power,
                "export-hf": _cmd_export_hf, "cascade": _cmd_cascade}[args.command](args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a corpus that cannot be had offline (its module is loaded if it raised)
        from .corpus import CorpusUnavailableError

        if not isinstance(exc, CorpusUnavailableError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a write fault (read-only folder, a file where a folder should be, disk full)
        where = f" {exc.filename}" if exc.filename else ""
        kept = " (finished runs are kept)" if args.command in ("train", "sweep", "quik") else ""
        print(f"error: cannot write{where}: {exc.strerror or exc}; choose a writable folder and rerun{kept}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished runs are saved; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

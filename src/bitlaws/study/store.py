"""Tidy result rows with provenance, atomic CSV writes, and load helpers.

One row is one observation (DESIGN.md, "Results"): a trained model evaluated before PTQ
(``ptq_method = "none"``, ``bits_post = 16``) or after one post-training quantization. Keys:

* ``run_id`` — hash of the training configuration (model, train, training precision, corpus);
* ``obs_id`` — hash of ``run_id`` and the post-training configuration. Sweeps resume by it.

Every column is documented in ``data/README.md``. Writes go to a temporary file in the same folder
and are renamed over the target (``os.replace``), so a killed writer leaves either the old file or
the new one, never half a row.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import torch

from .._io import frame_sha256  # re-exported: the inputs' hash recorded with fits and verdicts

__all__ = [
    "COLUMNS",
    "CURVE_COLUMNS",
    "stable_hash",
    "provenance",
    "append_rows",
    "read_rows",
    "data_dir",
    "frame_sha256",
    "load_runs",
]

# Column order of the observation CSVs (data/README.md documents each).
COLUMNS = [
    # identifiers
    "run_id", "obs_id", "experiment", "profile", "corpus", "size", "seed",
    "n_params", "n_tokens", "d_model", "n_layers",
    "fmt_w", "fmt_a", "fmt_kv", "bits_w", "bits_a", "bits_kv",
    "ptq_method", "quant_scheme", "bits_post", "group_size",
    # measures
    "loss_val", "loss_train", "bpb_val", "delta_ptq", "ppl", "status", "steps", "lr_peak",
    "train_s", "tokens_per_s",
    # provenance
    "threads", "git_sha", "device", "torch_version", "transformers_version", "timestamp",
]
CURVE_COLUMNS = ["run_id", "experiment", "profile", "size", "seed", "n_params", "n_tokens",
                 "step", "n_tokens_seen", "loss_train", "lr"]


def stable_hash(obj: Any, n: int = 16) -> str:
    """First `n` hex digits of the SHA-256 of `obj`'s canonical JSON (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:n]


@functools.lru_cache(maxsize=1)
def _git_sha() -> str:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        # ':/src' is a pathspec from the top of the work tree, wherever cwd is.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/src"], cwd=here, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if len(sha) != 40:
        return "unknown"
    return sha[:12] + ("-dirty" if dirty else "")


def provenance(threads: int) -> dict[str, Any]:
    """The provenance columns: code version, machine, library versions, UTC time."""
    import transformers

    device = "cuda:" + torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu:{platform.machine()}"
    return {
        "threads": threads,
        "git_sha": _git_sha(),
        "device": device,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def read_rows(path: str | os.PathLike) -> pd.DataFrame:
    """The CSV at `path`, or an empty frame if it does not exist."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame()
    return pd.read_csv(path, keep_default_na=True)


def append_rows(path: str | os.PathLike, rows: Iterable[dict[str, Any]], columns: list[str] | None = None,
                key: str | None = "obs_id") -> int:
    """Append `rows` to the CSV at `path` atomically; rows whose `key` is already there are skipped.

    Args:
        path: CSV file (created with its folder if absent).
        rows: dicts; missing columns are left empty; unknown keys raise.
        columns: column order (default :data:`COLUMNS`).
        key: de-duplication column, or None to append everything.

    Returns:
        The number of rows written.

    Raises:
        ValueError: a row with a key not in `columns`.
    """
    columns = columns or COLUMNS
    rows = list(rows)
    for r in rows:
        extra = set(r) - set(columns)
        if extra:
            raise ValueError(f"row has columns not in the schema: {sorted(extra)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = read_rows(path)
    if key is not None:
        seen = set(old[key].astype(str)) if len(old) else set()
        fresh = []
        for r in rows:  # skip keys already in the file, and repeats within this batch
            if str(r[key]) not in seen:
                seen.add(str(r[key]))
                fresh.append(r)
        rows = fresh
    if not rows:
        return 0
    new = pd.DataFrame(rows).reindex(columns=columns)
    frame = new if old.empty else pd.concat([old.reindex(columns=columns), new], ignore_index=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            frame.to_csv(fh, index=False, float_format="%.6g")
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(rows)


def data_dir() -> Path:
    """The ``data/`` folder: env ``BITLAWS_DATA`` if set, else the repository's (see
    :func:`bitlaws.verdicts.repo_root`)."""
    from .claims import repo_root

    env = os.environ.get("BITLAWS_DATA")
    return Path(env) if env else repo_root() / "data"


def load_runs(profile: str, experiment: str | Iterable[str] | None = None,
              root: str | os.PathLike | None = None) -> pd.DataFrame:
    """All observation rows of `profile` (``data/runs/<profile>/*.csv``, curves excluded).

    Args:
        profile: ``smoke``, ``cpu`` or ``gpu``.
        experiment: keep only this experiment (e.g. ``"base_grid"``) or these experiments. Files
            are filtered before they are joined, so other experiments' columns never widen or
            retype the frame (its hash then depends only on the rows asked for).
        root: a ``data/`` folder other than the repository's.

    Raises:
        FileNotFoundError: no observation CSV for `profile`; the message says how to make one.
    """
    folder = Path(root) if root is not None else data_dir()
    folder = folder / "runs" / profile
    files = sorted(p for p in folder.glob("*.csv") if not p.name.endswith("_curves.csv"))
    if not files:
        raise FileNotFoundError(
            f"no results for profile {profile!r} under {folder}; run `python -m bitlaws sweep --profile {profile}`"
        )
    wanted = None if experiment is None else ({experiment} if isinstance(experiment, str) else set(experiment))
    frames = []
    for f in files:
        part = pd.read_csv(f)
        if wanted is not None:
            # Filter before concatenating: other experiments' files (e.g. kernel benchmarks) have
            # other columns, which would otherwise widen and retype this frame.
            if "experiment" not in part:
                continue
            part = part[part["experiment"].isin(wanted)]
        if len(part):
            frames.append(part)
    if not frames:
        raise FileNotFoundError(f"no rows of experiment {experiment!r} for profile {profile!r} under {folder}")
    return pd.concat(frames, ignore_index=True)

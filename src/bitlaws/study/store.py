"""Tidy result rows with provenance: journaled appends, checked reads, and load helpers.

One row is one observation: a trained model evaluated before PTQ (``ptq_method = "none"``,
``bits_post = 16``) or after one post-training quantization. ``run_id`` hashes the training
configuration (model, train, training precision, corpus); ``obs_id`` hashes ``run_id`` and the
post-training configuration, and sweeps resume by it. Every column is in ``data/README.md``.

* :func:`read_rows` checks a file against its schema (columns, types, non-empty identifiers and
  status) and refuses a damaged one with :class:`StoreError`, naming the file and the line;
* :func:`append_rows` appends, never rewrites, under an exclusive lock on the file, with a journal:
  a writer killed mid-append leaves the rows before it intact and its own partial lines ignored;
* numbers are written exactly (:func:`format_float`: ``%.6g`` where six digits round-trip, as the
  committed rows were written, more digits where needed); :func:`migrate_schema` is the one rewrite;
* a sweep holds a lock on its data root (:func:`sweep_lock`), so a second one is refused.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import fcntl
import hashlib
import io
import json
import math
import numbers
import os
import platform
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd
import torch

from .._io import (  # frame_sha256 re-exported: the inputs' hash of fits and verdicts
    frame_sha256,
    git_sha,
    write_atomic,
)
from . import PROFILE_NAMES  # re-exported: the profiles whose rows the store holds
# the experiment names load_runs accepts: the sweep's (declared per profile) and `python -m bitlaws train`'s
from . import DECLARED_EXPERIMENTS, EXPERIMENT_NAMES, MANUAL_EXPERIMENT

__all__ = [
    "COLUMNS",
    "CURVE_COLUMNS",
    "OPTIONAL_COLUMNS",
    "stable_hash",
    "provenance",
    "append_rows",
    "read_rows",
    "read_current_rows",
    "format_float",
    "probe_writable",
    "probe_csv",
    "sweep_lock",
    "data_dir_set_to",
    "migrate_schema",
    "rewrite_rows",
    "StoreError",
    "data_dir",
    "PROFILE_NAMES",
    "ROWS_READ_UNTIL",
    "read_until",
    "after_freeze",
    "frame_sha256",
    "load_runs",
]

# Column order of the observation CSVs (data/README.md documents each).
COLUMNS = [
    # identifiers
    "run_id", "obs_id", "experiment", "profile", "corpus", "size", "seed",
    "n_params", "n_tokens", "d_model", "n_layers",
    "fmt_w", "fmt_a", "fmt_kv", "bits_w", "bits_a", "bits_kv",
    "ptq_method", "quant_scheme", "fmt_post", "bits_post", "group_size", "eval_version",
    # measures
    "loss_val", "loss_train", "bpb_val", "delta_ptq", "ppl", "status", "steps", "lr_peak",
    "train_s", "tokens_per_s",
    # provenance
    "threads", "git_sha", "device", "torch_version", "transformers_version", "timestamp",
]

# Evaluation versions (data/README.md, "Evaluation versions"): how ``loss_val`` was measured.
# 1: the first ``eval_tokens`` of the validation split (for Shakespeare, one play, Henry V);
# 2: windows spread evenly over the whole split (every validation work). Rows of different versions
# never mix in one table: :func:`load_runs` returns one version, by default the profile's entry here,
# the version its committed rows are complete in (``python -m bitlaws sweep`` reports coverage).
# cpu reads version 2 since 2026-12-06, when every trained run of its training sweeps had its rows at 2
# (the fits, the pipeline bootstrap, the design tables and the verdicts were remade on them then).
EVAL_VERSIONS = {1: "first", 2: "spread"}
EVAL_VERSION_READ = {"cpu": 2, "gpu": 2, "smoke": 2}
# The data freeze (data/README.md, "The data freeze"): the fits, tables and verdicts read the sweep rows
# written (``timestamp``, UTC) at or before the profile's entry; None reads every row. Rows a sweep adds
# later are committed as they finish but wait, unread, until every declared run of the batch is in and the
# whole cascade is refitted at once (then the entry moves forward). So a partly trained batch never mixes
# into one table with a complete one, and a clean clone's fits stay current with the rows they read.
# cpu's freeze: after every declared run's last row (2026-12-06 20:41:43Z: qat_seeds and base_grid's seed runs);
# the previous one, 2026-12-06T08:00:00Z, held the evaluation-version-2 refit's inputs.
ROWS_READ_UNTIL: dict[str, str | None] = {"cpu": "2026-12-06T21:00:00Z", "gpu": None, "smoke": None}
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# Columns added to the observation schema after rows were committed, with what an older row holds.
SCHEMA_ADDED = {"fmt_post": "the PTQ format of fmt_w before the column", "eval_version": "1"}
CURVE_COLUMNS = ["run_id", "experiment", "profile", "size", "seed", "n_params", "n_tokens",
                 "step", "n_tokens_seen", "loss_train", "lr"]


def stable_hash(obj: Any, n: int = 16) -> str:
    """First `n` hex digits of the SHA-256 of `obj`'s canonical JSON (sorted keys)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:n]


def provenance(threads: int) -> dict[str, Any]:
    """The provenance columns: code version, machine, library versions, UTC time."""
    import transformers

    device = "cuda:" + torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu:{platform.machine()}"
    return {
        "threads": threads,
        "git_sha": git_sha(),
        "device": device,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# ---------------------------------------------------------------------------------------------
# The store: a schema for every CSV, appends under a lock, numbers written exactly.

# Column types by name (any schema that uses the name). Columns not named here are read and
# written as text, unchecked.
INT_COLUMNS = frozenset({
    "seed", "n_params", "n_tokens", "d_model", "n_layers", "bits_w", "bits_a", "bits_kv", "bits_post",
    "group_size", "steps", "threads", "step", "n_tokens_seen", "eval_version",
})
FLOAT_COLUMNS = frozenset({
    "loss_val", "loss_train", "bpb_val", "delta_ptq", "ppl", "lr_peak", "train_s", "tokens_per_s", "lr",
})
# Columns a sweep's file has only where its runs need them (appended after COLUMNS): the ablation
# flags of a training precision (``TrainPrecision.variant``, e.g. ``kv_parts=v;a_skip=o_proj``).
OPTIONAL_COLUMNS = ["train_variant"]

STR_COLUMNS = frozenset({
    "train_variant", "run_id", "obs_id", "stat_id", "experiment", "profile", "corpus", "size", "fmt_w", "fmt_a", "fmt_kv",
    "fmt_post", "ptq_method", "quant_scheme", "status", "git_sha", "device", "torch_version", "transformers_version",
    "timestamp",
})
STATUSES = ("ok", "diverged")
# Cells that may never be empty wherever the column exists.
_ALWAYS_REQUIRED = ("run_id", "obs_id", "status")
# In a sweep's observation file (schema COLUMNS) the identifiers are never empty either.
SWEEP_REQUIRED = frozenset({
    "run_id", "obs_id", "experiment", "profile", "corpus", "size", "seed", "n_params", "n_tokens", "d_model",
    "n_layers", "fmt_w", "fmt_a", "fmt_kv", "bits_w", "bits_a", "bits_kv", "ptq_method", "quant_scheme",
    "fmt_post", "bits_post", "group_size", "eval_version", "status", "steps", "threads",
})
_INT_RE = re.compile(r"-?[0-9]+")
_FLOAT_WORDS = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity"})
_RESTORE_HINT = ("nothing was written; restore the file (e.g. `git checkout -- <file>` for committed rows) "
                 "or remove the damaged line, then rerun")


class StoreError(ValueError):
    """A results file that cannot be read or written safely (damaged, wrong columns, not writable,
    locked by another sweep). The message names the file, the line where there is one, and what is
    allowed; nothing stored is changed."""


def format_float(x: float) -> str:
    """`x` as the shortest ``%.{p}g`` (p ≥ 6) that reads back to the same float; ``""`` for NaN.

    Values with at most six significant digits come out exactly as the committed files wrote them
    (``%.6g``); every other value keeps the digits it needs to round-trip (at most 17)."""
    x = float(x)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    for p in range(6, 18):
        s = "%.*g" % (p, x)
        if float(s) == x:
            return s
    return repr(x)  # pragma: no cover - %.17g always round-trips


def _is_missing(v: Any) -> bool:
    if v is None or (isinstance(v, str) and v == ""):
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    try:
        return bool(pd.isna(v)) if not isinstance(v, (str, bytes, list, tuple, dict)) else False
    except (TypeError, ValueError):
        return False


def _cell(column: str, v: Any) -> str:
    """One value as CSV text: integers as integers, floats round-trip exact, missing as empty."""
    if _is_missing(v):
        return ""
    if column in INT_COLUMNS:
        if isinstance(v, bool):
            raise ValueError(f"column {column!r} takes an integer, got {v!r}")
        if isinstance(v, numbers.Integral):
            return str(int(v))
        if isinstance(v, numbers.Real) and float(v).is_integer():
            return str(int(v))
        if isinstance(v, str) and _INT_RE.fullmatch(v):
            return v
        raise ValueError(f"column {column!r} takes an integer, got {v!r}")
    if column in FLOAT_COLUMNS:
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)):
            raise ValueError(f"column {column!r} takes a number, got {v!r}")
        try:
            return format_float(float(v))
        except ValueError:
            raise ValueError(f"column {column!r} takes a number, got {v!r}") from None
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return format_float(float(v))
    return str(v)


def _required(header: Sequence[str], columns: Sequence[str] | None, key: str | None) -> set[str]:
    req = {c for c in _ALWAYS_REQUIRED if c in header}
    if key is not None:
        req.add(key)
    if columns is not None and list(columns)[:len(COLUMNS)] == COLUMNS:  # a sweep's schema (+ OPTIONAL_COLUMNS)
        req |= SWEEP_REQUIRED
    return req


def _journal(path: Path) -> Path:
    return path.with_name(f".{path.name}.journal")


def _read_journal(path: Path) -> tuple[int, int] | None:
    """(size before, size after) of an append that may not have finished, or None."""
    try:
        text = _journal(path).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    parts = text.split()
    if len(parts) != 3 or parts[2] != "end" or not all(p.isdigit() for p in parts[:2]):
        return None  # the journal itself was cut short: its append never started
    return int(parts[0]), int(parts[1])


def _committed_size(path: Path, size: int) -> int:
    """How many bytes of `path` (now `size` long) are committed rows: all of them, unless an
    append was cut short (its journal is there and the file has not reached the size it names)."""
    j = _read_journal(path)
    if j is None:
        return size
    before, after = j
    return size if size == after else min(before, size)


def _parse(path: Path, data: bytes, columns: Sequence[str] | None, key: str | None
           ) -> tuple[list[str] | None, list[list[str]]]:
    """Check the bytes of a results file against the schema; return (header, records).

    Raises:
        StoreError: naming the file and line: not UTF-8, a line cut short (no end of line, too few
            or too many fields), a duplicate or empty column name, a column of the schema missing,
            an empty identifier, a non-integer in an integer column, a non-number in a number
            column, an unknown status, a repeated key.
    """
    if not data:
        return None, []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise StoreError(f"{path}, line {line}: not UTF-8 text (garbage bytes); {_RESTORE_HINT}") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise StoreError(f"{path}, line {line}: NUL bytes (a damaged or partly written file); {_RESTORE_HINT}")
    if not text.endswith("\n"):
        line = text.count("\n") + 1
        raise StoreError(f"{path}, line {line}: the last line is incomplete (no end of line: a truncated write "
                         f"or a hand edit); {_RESTORE_HINT}")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise StoreError(f"{path}, line 1: no header ({exc}); {_RESTORE_HINT}") from None
    if not header or any(not h for h in header) or len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise StoreError(f"{path}, line 1: the header has empty or repeated column names {dup or ['']}; "
                         f"{_RESTORE_HINT}")
    if columns is not None:
        missing = [c for c in columns if c not in header]
        if missing and set(missing) <= set(SCHEMA_ADDED):
            raise StoreError(f"{path}, line 1: the header lacks the columns {missing}, added to the schema after "
                             f"these rows were written; run `python -m bitlaws migrate-store {path}` (it adds "
                             f"them and changes no stored value)")
        if missing:
            raise StoreError(f"{path}, line 1: the header lacks the columns {missing} (the schema has "
                             f"{len(columns)} columns, the file {len(header)}): a dropped column loses every "
                             f"row's values; {_RESTORE_HINT}")
    req = _required(header, columns, key)
    idx = {c: i for i, c in enumerate(header)}
    checks = [(i, c, "int" if c in INT_COLUMNS else "float" if c in FLOAT_COLUMNS else "str", c in req)
              for c, i in idx.items()]
    status_i = idx.get("status")
    loss_i = idx.get("loss_val")
    key_i = idx.get(key) if key is not None else None
    seen: dict[str, int] = {}
    records = []
    try:
        for rec in reader:
            line = reader.line_num
            if len(rec) != len(header):
                raise StoreError(f"{path}, line {line}: {len(rec)} fields where the header has {len(header)} "
                                 f"(a truncated or garbage line); {_RESTORE_HINT}")
            for i, c, kind, required in checks:
                v = rec[i]
                if v == "":
                    if required:
                        raise StoreError(f"{path}, line {line}: column {c!r} is empty (it identifies the row); "
                                         f"{_RESTORE_HINT}")
                    continue
                if kind == "int" and not _INT_RE.fullmatch(v):
                    raise StoreError(f"{path}, line {line}: column {c!r} holds {v!r}, not an integer; "
                                     f"{_RESTORE_HINT}")
                if kind == "float" and v.lower() not in _FLOAT_WORDS:
                    try:
                        float(v)
                    except ValueError:
                        raise StoreError(f"{path}, line {line}: column {c!r} holds {v!r}, not a number; "
                                         f"{_RESTORE_HINT}") from None
            if status_i is not None:
                if rec[status_i] not in STATUSES:
                    raise StoreError(f"{path}, line {line}: status {rec[status_i]!r}; allowed: {list(STATUSES)}; "
                                     f"{_RESTORE_HINT}")
                if loss_i is not None and rec[status_i] == "ok" and rec[loss_i] == "":
                    raise StoreError(f"{path}, line {line}: status 'ok' with an empty loss_val; {_RESTORE_HINT}")
            if key_i is not None:
                k = rec[key_i]
                if k in seen:
                    raise StoreError(f"{path}, line {line}: {key} {k!r} repeats line {seen[k]}; {_RESTORE_HINT}")
                seen[k] = line
            records.append(rec)
    except csv.Error as exc:
        raise StoreError(f"{path}, line {reader.line_num}: not CSV ({exc}); {_RESTORE_HINT}") from None
    return header, records


def _read_locked_bytes(path: Path) -> bytes | None:
    """The committed bytes of `path` (a shared lock held while reading, where the file allows it),
    or None when there is no file."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StoreError(f"{path} is a folder where a results file should be") from None
    except OSError as exc:  # a file where a folder of the path should be, no permission
        raise _os_error(path, exc, "read results from") from None
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        except OSError:
            pass  # a filesystem without locks: read anyway (appends are journaled)
        data = fh.read()
        return data[: _committed_size(path, len(data))]


def _frame(header: list[str] | None, data: bytes) -> pd.DataFrame:
    if header is None:
        return pd.DataFrame()
    dtypes = {c: str for c in header if c in STR_COLUMNS}
    return pd.read_csv(io.BytesIO(data), keep_default_na=True, dtype=dtypes)  # pandas ≥ 3 parses floats exactly


def read_rows(path: str | os.PathLike, columns: Sequence[str] | None = None,
              key: str | None = None) -> pd.DataFrame:
    """The CSV at `path` checked against its schema, or an empty frame if it does not exist.

    Args:
        path: a results CSV.
        columns: the columns it must have (e.g. :data:`COLUMNS`); None: whatever its header says.
            Columns beyond these are kept.
        key: a column whose values must be unique and present (``obs_id``, ``stat_id``), or None.

    Floats are parsed exactly (pandas ≥ 3 reads them round-trip); the identifier columns stay text.

    Raises:
        StoreError: a damaged file (see :func:`_parse`), with its path and line.
    """
    path = Path(path)
    data = _read_locked_bytes(path)
    if data is None:
        return pd.DataFrame()
    header, _ = _parse(path, data, columns, key)
    return _frame(header, data)


def read_current_rows(path: str | os.PathLike, columns: Sequence[str], key: str, version: str,
                      inputs_sha256: str, make: str, version_column: str = "sim_version"
                      ) -> tuple[pd.DataFrame | None, str]:
    """The rows of a stored simulation made by this code version from these training rows, or (None, why not).

    Args:
        path: the table (one row per simulated dataset, ``append_rows``). columns, key: as :func:`read_rows`.
        version: the code version a row must name in ``version_column``. inputs_sha256: the hash of the
            training rows (``_io.frame_sha256``) a row must name in ``inputs_sha256``.
        make: the call that makes the rows, named in the reason when none is stored.

    Returns:
        ``(rows, "")`` with a fresh index, or ``(None, why)``: the file is absent ("not simulated yet"), holds
        no row of this version ("another version of the simulation"), or none made from these rows.

    Raises:
        StoreError: a damaged file (:func:`read_rows`).
    """
    path = Path(path)
    if not path.exists():
        return None, f"not simulated yet (`{make}`)"
    tab = read_rows(path, columns, key)
    tab = tab[tab[version_column].astype(str) == str(version)]
    if tab.empty:
        return None, "simulated by another version of the simulation; not read"
    tab = tab[tab["inputs_sha256"].astype(str) == inputs_sha256]
    if tab.empty:
        return None, f"simulated from other training rows than these; not read (`{make}` simulates them again)"
    return tab.reset_index(drop=True), ""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _remove_orphans(path: Path) -> None:
    """Temporaries left by a killed writer of an earlier version (mkstemp ``.<name>.*.tmp``)."""
    for p in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


def _os_error(path: Path, exc: OSError, what: str = "write results to", flag: str = "--data-root / --run-root"
              ) -> StoreError:
    return StoreError(f"cannot {what} {exc.filename or path}: {exc.strerror or exc}; choose a writable "
                      f"{flag} (a folder, not a file) and rerun")


def append_rows(path: str | os.PathLike, rows: Iterable[dict[str, Any]], columns: list[str] | None = None,
                key: str | None = "obs_id") -> int:
    """Append `rows` to the CSV at `path`; rows whose `key` is already there are skipped.

    The file is never rewritten: new lines go after the old ones, in one write, under an exclusive
    lock on the file (so concurrent writers lose nothing), with a journal naming the size before and
    after (a writer killed mid-append leaves a journal; the next read ignores, and the next write
    cuts off, the partial lines). Before appending, the whole file is checked against the schema,
    and a damaged one is refused.

    Args:
        path: CSV file (created with its folder if absent).
        rows: dicts; missing columns are left empty; unknown keys raise. Integers are written as
            integers, floats as the shortest text that reads back to the same float.
        columns: the schema's column order for a new file (default :data:`COLUMNS`). An existing
            file must have every one of them; columns it has beyond them are kept (empty in new rows).
        key: de-duplication column (never empty), or None to append everything.

    Returns:
        The number of rows written.

    Raises:
        ValueError: a row with a key not in `columns`, an empty key, a value of the wrong type.
        StoreError: the file is damaged or lacks a column (nothing is written), or cannot be written.
    """
    columns = list(columns or COLUMNS)
    rows = list(rows)
    for r in rows:
        extra = set(r) - set(columns)
        if extra:
            raise ValueError(f"row has columns not in the schema: {sorted(extra)}")
        if key is not None and _is_missing(r.get(key)):
            raise ValueError(f"row has no {key!r} (the key of {Path(path).name})")
    cells = [{c: _cell(c, r.get(c)) for c in columns} for r in rows]  # type errors before any write
    for r, cs in zip(rows, cells):
        for c in _required(columns, columns, key):
            if cs.get(c, "") == "":
                raise ValueError(f"row {r.get(key, '')!r} has an empty {c!r}; it identifies the row")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError:
        raise StoreError(f"{path} is a folder where a results file should be") from None
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        keep = _committed_size(path, size)
        if keep != size:  # an append was cut short by a kill: drop its partial lines
            os.ftruncate(fd, keep)
            os.fsync(fd)
        if _journal(path).exists():
            _journal(path).unlink()
        _remove_orphans(path)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        header, records = _parse(path, data, columns, key)
        if key is not None:
            seen = set()
            if header is not None:
                ki = header.index(key)
                seen = {rec[ki] for rec in records}
            fresh = []
            for cs in cells:  # skip keys already in the file, and repeats within this batch
                if cs[key] not in seen:
                    seen.add(cs[key])
                    fresh.append(cs)
            cells = fresh
        if not cells:
            return 0
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if header is None:
            header = columns
            writer.writerow(header)
        for cs in cells:
            writer.writerow([cs.get(c, "") for c in header])
        blob = buf.getvalue().encode("utf-8")
        start = len(data)
        write_atomic(_journal(path), f"{start} {start + len(blob)} end\n".encode())
        os.lseek(fd, start, os.SEEK_SET)
        _write_all(fd, blob)
        os.fsync(fd)
        _journal(path).unlink()
        return len(cells)
    except OSError as exc:
        raise _os_error(path, exc) from None
    finally:
        os.close(fd)  # releases the lock


def migrate_schema(path: str | os.PathLike) -> int:
    """Add the columns of :data:`SCHEMA_ADDED` to an observation file written before them.

    It changes no stored value: every old cell but a PTQ row's ``fmt_w`` is kept as its text, which
    :func:`rewrite_rows` checks before the file is replaced (atomically, under the file's lock). The
    new cells:

    * ``eval_version`` = 1 (those rows were measured on the first ``eval_tokens`` of the split);
    * ``fmt_post`` = the PTQ format: the old ``fmt_w`` of a PTQ row (``int3`` …), ``none`` on an
      unquantized row; a PTQ row's ``fmt_w`` then becomes its run's training format, copied from the
      run's unquantized row (so ``fmt_w`` always means the format the model was trained in).

    Args:
        path: an observation CSV (schema :data:`COLUMNS` minus the added columns).

    Returns:
        The number of rows migrated (0 when the file already has the columns).

    Raises:
        FileNotFoundError: no file at `path`.
        StoreError: a damaged file, a file with other missing columns, a PTQ row whose run has no
            unquantized row, or a sweep journal (a cut append: run the sweep once first); nothing is
            written.
    """
    path = Path(path)

    def rewrite(header: list[str], rows: list[dict[str, str]]):
        added = [c for c in SCHEMA_ADDED if c not in header]
        if not added:
            return None
        missing = [c for c in COLUMNS if c not in header and c not in SCHEMA_ADDED]
        if missing:
            raise StoreError(f"{path}: lacks {missing} besides the added columns; not an observation file")
        trained_fmt = {r["run_id"]: r["fmt_w"] for r in rows if r["ptq_method"] == "none"}
        for line, cell in enumerate(rows, start=2):
            if "fmt_post" in added:
                if cell["ptq_method"] == "none":
                    cell["fmt_post"] = "none"
                else:
                    if cell["run_id"] not in trained_fmt:
                        raise StoreError(f"{path}, line {line}: PTQ row of run {cell['run_id']!r}, which has no "
                                         f"unquantized row to give its training format; nothing was written")
                    cell["fmt_post"], cell["fmt_w"] = cell["fmt_w"], trained_fmt[cell["run_id"]]
            if "eval_version" in added:
                cell["eval_version"] = "1"
        new_header = [c for c in COLUMNS if c in header or c in added] + [c for c in header if c not in COLUMNS]
        return new_header, rows, set(added) | ({"fmt_w"} if "fmt_post" in added else set())

    return rewrite_rows(path, rewrite)


# (header, rows as column -> text) -> None when the file needs nothing, else (new header, the rows in
# the same order, the columns whose cells the rewrite may change)
RowRewrite = Callable[[list[str], list[dict[str, str]]], tuple[list[str], list[dict[str, str]], set[str]] | None]


def rewrite_rows(path: str | os.PathLike, rewrite: RowRewrite, key: str = "obs_id") -> int:
    """Rewrite the rows of the results file at `path` by `rewrite`: a schema migration, the one
    rewrite the store allows (:func:`migrate_schema`, ``bitlaws.study.quik_accuracy.migrate_quik_columns``).

    Under the file's exclusive lock, `rewrite` gets the header and every row as text; what it
    returns is written out, checked to read back with the same rows in the same order and every
    cell of a column it does not name as changed as its old text, and only then replaces the file
    (atomically). A column may be dropped only if named as changed.

    Args:
        path: a results CSV.
        rewrite: see ``RowRewrite`` above; it may raise :class:`StoreError` to refuse a row.
        key: the file's key column (unique, never empty).

    Returns:
        The number of rows rewritten; 0 when `rewrite` returns None or the file is empty (nothing
        is written then).

    Raises:
        FileNotFoundError: no file at `path`.
        StoreError: a damaged file, a sweep journal (a cut append), or a rewrite that would change
            a cell it does not name, add or drop rows; nothing is written.
    """
    path = Path(path)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _journal(path).exists():
            raise StoreError(f"{path}: an append was cut short (journal {_journal(path).name}); run the command "
                             f"that writes the file once (its next append cuts the partial lines off), then migrate")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        header, records = _parse(path, data, None, key)
        if header is None:
            return 0
        old = [dict(zip(header, r)) for r in records]
        out = rewrite(list(header), [dict(r) for r in old])
        if out is None:
            return 0
        new_header, rows, changed = out
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(new_header)
        writer.writerows([row[c] for c in new_header] for row in rows)
        blob = buf.getvalue().encode("utf-8")
        h2, back = _parse(path, blob, None, key)
        dropped = [c for c in header if c not in h2 and c not in changed]
        if dropped or len(back) != len(old):
            raise StoreError(f"{path}: the rewrite would drop the columns {dropped} or change the number of rows "
                             f"({len(old)} → {len(back)}); nothing was written")
        j = {c: i for i, c in enumerate(h2)}
        kept = [c for c in header if c not in changed]
        for line, (before, after) in enumerate(zip(old, back), start=2):
            for c in kept:
                if after[j[c]] != before[c]:
                    raise StoreError(f"{path}, line {line}: the rewrite would change column {c!r} "
                                     f"({before[c]!r} → {after[j[c]]!r}), which it does not name as changed; "
                                     f"nothing was written")
        write_atomic(path, blob, mode=0o644)
        return len(back)
    finally:
        os.close(fd)


def probe_writable(folder: str | os.PathLike, flag: str = "--data-root / --run-root") -> Path:
    """Check, before any work, that `folder` can be made and written: its nearest existing ancestor
    is a folder in which a file can be created (a probe file, removed at once). Creates nothing.

    Args:
        flag: the command-line option that chose `folder`, named in the error.

    Raises:
        StoreError: a file stands where a folder should be, or the folder cannot be written.
    """
    folder = Path(folder)
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, "a file stands where a folder should be", str(probe))
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise _os_error(folder, exc, flag=flag) from None
    return folder


def probe_csv(path: str | os.PathLike, flag: str = "--data-root / --run-root") -> None:
    """Check that the results file `path` can be appended to (or created) before any work.

    Args:
        flag: the command-line option that chose where `path` is, named in the error.

    Raises:
        StoreError: its folder cannot be made or written, it is a folder, or it is read-only.
    """
    path = Path(path)
    probe_writable(path.parent, flag)
    if path.is_dir():
        raise StoreError(f"{path} is a folder where a results file should be")
    if path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        except OSError as exc:
            raise _os_error(path, exc, flag=flag) from None


@contextlib.contextmanager
def sweep_lock(data_root: str | os.PathLike):
    """Hold the lock of a data root for a sweep: a second sweep into the same root is refused.

    Raises:
        StoreError: another process holds it (the message says what to do).
    """
    data_root = Path(data_root)
    try:
        data_root.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_root, os.O_RDONLY)
    except OSError as exc:
        raise _os_error(data_root, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"another sweep is writing into {data_root}; wait for it to finish (its rows are "
                             f"kept as each run ends) or give this one another --data-root") from None
        yield data_root
    finally:
        os.close(fd)


def data_dir() -> Path:
    """The ``data/`` folder: env ``BITLAWS_DATA`` if set, else the repository's (see
    :func:`bitlaws.study.claims.repo_root`)."""
    from .claims import repo_root

    env = os.environ.get("BITLAWS_DATA")
    return Path(env) if env else repo_root() / "data"


@contextlib.contextmanager
def data_dir_set_to(root: str | os.PathLike | None):
    """While the block runs, :func:`data_dir` (every study reader's default ``data/``) is `root`, through its
    variable ``BITLAWS_DATA``; restored after. None: left as it is."""
    if root is None:
        yield
        return
    before = os.environ.get("BITLAWS_DATA")
    os.environ["BITLAWS_DATA"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("BITLAWS_DATA", None)
        else:
            os.environ["BITLAWS_DATA"] = before


def read_until(profile: str, until: str | None = None) -> str | None:
    """The freeze `profile`'s tables read (:data:`ROWS_READ_UNTIL`), or `until` if given, or else the
    environment variable ``BITLAWS_UNTIL`` where set (the command line's ``--until``: a data folder of one's
    own, e.g. a retraining from scratch, is read with ``all``); ``"all"``: None (no freeze).

    Raises:
        ValueError: `until` (or the variable, or the entry) is not a UTC timestamp ``YYYY-MM-DDTHH:MM:SSZ`` or
            ``"all"``.
    """
    env = os.environ.get("BITLAWS_UNTIL") if until is None else None
    value = until if until is not None else env if env else ROWS_READ_UNTIL.get(profile)
    if value is None or value == "all":
        return None
    ok = isinstance(value, str) and _TIMESTAMP.fullmatch(value)
    if ok:
        try:
            _dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            ok = False
    if not ok:
        what = (f"until={value!r}" if until is not None else f"BITLAWS_UNTIL={value!r}" if env
                else f"store.ROWS_READ_UNTIL[{profile!r}] = {value!r}")
        raise ValueError(f"bad {what}: allowed a UTC timestamp like '2026-12-06T08:00:00Z' "
                         "(the rows' timestamp column's format, a real date and time) or 'all'")
    return value


def after_freeze(rows: pd.DataFrame, until: str | None) -> pd.Series:
    """Boolean mask of the sweep rows written after the freeze `until` (a :func:`read_until` value);
    all False when `until` is None or the frame has no ``timestamp`` or ``eval_version`` column (the
    QUIK and benchmark files are not sweep rows). Timestamps compare as text: one fixed format.

    Raises:
        StoreError: a sweep row whose timestamp is not ``YYYY-MM-DDTHH:MM:SSZ`` (it could not be placed).
    """
    if until is None or "timestamp" not in rows or "eval_version" not in rows or rows.empty:
        return pd.Series(False, index=rows.index)
    stamps = rows["timestamp"].astype(str)
    bad = ~stamps.str.fullmatch(_TIMESTAMP.pattern)
    if bad.any():
        raise StoreError(f"row {rows.index[bad][0]}: timestamp {stamps[bad].iloc[0]!r} is not YYYY-MM-DDTHH:MM:SSZ, "
                         "so the data freeze cannot place it")
    return stamps > until


def _no_rows_message(profile, experiment, wanted, folder, absent, n_rows, other_versions, eval_version, n_late,
                     freeze, other_late=None) -> str:
    """:func:`load_runs`' FileNotFoundError where no row is left: which experiments no file holds (declared
    but not run), and how many rows the evaluation version and the data freeze removed; for the rows at other
    versions, the arguments that read them (``until='all'`` too where the freeze holds them back as well:
    ``other_late``, version -> rows)."""
    what = "" if wanted is None else f" of experiment {experiment!r}" if isinstance(experiment, str) \
        else f" of experiments {sorted(wanted, key=str)}"
    why = []
    if absent:

        declared = DECLARED_EXPERIMENTS.get(profile, ())
        run = [e for e in absent if e in declared]
        other = [e for e in absent if e not in declared and e != MANUAL_EXPERIMENT]
        if run:
            why.append(f"no file holds {', '.join(map(repr, run))}, which bitlaws.study.sweep declares for {profile!r} "
                       f"and has not run yet (`python -m bitlaws sweep --profile {profile} --experiments "
                       f"{','.join(run)}` makes the rows)")
        if other:
            why.append(f"no file holds {', '.join(map(repr, other))}, for which {profile!r} declares no run "
                       f"(bitlaws.study.sweep.declared_experiments({profile!r}) lists those it does)")
        if MANUAL_EXPERIMENT in absent:
            why.append(f"no file holds {MANUAL_EXPERIMENT!r} (the rows of `python -m bitlaws train`, copied in)")
    if n_rows:
        cut = []
        if other_versions:
            versions = sorted(other_versions, key=str)
            at = " and ".join(f"{other_versions[v]} at version {v}" for v in versions)
            n = sum(other_versions.values())
            late = sum((other_late or {}).values())
            arg = f"eval_version={' or '.join(map(str, versions))} or 'all'"
            them = "them" if n > 1 else "it"
            reads = (f"{arg} reads {them}, the data freeze still applying" if not late else
                     f"{'they were' if n > 1 else 'it was'} written after the data freeze too, so {arg} with "
                     f"until='all' reads {them}" if late == n else
                     f"{arg} reads {n - late} of them; the other {late} {'were' if late > 1 else 'was'} written after "
                     "the data freeze too and need until='all' as well")
            cut.append(f"{n} {'are' if n > 1 else 'is'} at evaluation versions other than {eval_version}, the "
                       f"version read ({at}; {reads})")
        if n_late:
            cut.append(f"{'the other ' if other_versions else ''}{n_late}"
                       f"{', at version ' + str(eval_version) + ',' if eval_version != 'all' else ''} "
                       f"{'were' if n_late > 1 else 'was'} written "
                       f"after the data freeze {freeze} (only rows written at or before it are read: `until`, by "
                       "default store.ROWS_READ_UNTIL; until='all' reads later ones)")
        why.append(f"of the {n_rows} row{'s' if n_rows > 1 else ''} the files hold, {'; '.join(cut)}")
    elif not absent:
        why.append("the files hold none")
    return f"no rows{what} for profile {profile!r} under {folder}: {'; '.join(why)}"


def load_runs(profile: str, experiment: str | Iterable[str] | None = None,
              root: str | os.PathLike | None = None, eval_version: int | str | None = None,
              until: str | None = None) -> pd.DataFrame:
    """All observation rows of `profile` (``data/runs/<profile>/*.csv``, curves excluded).

    Args:
        profile: one of ``PROFILE_NAMES`` (``smoke``, ``cpu``, ``gpu``: the profiles ``bitlaws.study.sweep`` declares).
        experiment: keep only this experiment (e.g. ``"base_grid"``) or these experiments. Files
            are filtered before they are joined, so other experiments' columns never widen or
            retype the frame (its hash then depends only on the rows asked for).
        root: a ``data/`` folder other than the repository's.
        eval_version: keep the sweep rows of this evaluation version only (:data:`EVAL_VERSIONS`);
            None (default): the profile's :data:`EVAL_VERSION_READ`, so old and new evaluations
            never mix in one table; ``"all"``: every version. Files without the column (the QUIK
            and benchmark files) are not filtered.
        until: keep the sweep rows written at or before this UTC timestamp; None (default): the
            profile's data freeze :data:`ROWS_READ_UNTIL`; ``"all"``: every row, later ones included.

    Raises:
        ValueError: an unknown profile or evaluation version, or a bad `until` (the message lists the allowed
            ones); an empty `experiment` collection; or an `experiment` name that no file of the profile holds and ``bitlaws.study.sweep`` does not
            declare (nor ``manual``, the rows of ``python -m bitlaws train``): the message names it and lists the
            experiments the files hold and those the profile's sweep declares but has not run.
        FileNotFoundError: no observation CSV for `profile` (the message says how to make one); or no row left
            of the experiments asked for: a declared one not yet run (no file holds it), or rows that only other
            evaluation versions or the data freeze hold (the message counts the rows each filter removed).
        StoreError: a damaged file (its path and line).
    """
    if profile not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {sorted(PROFILE_NAMES)} (the profiles the package "
                         "declares; `python -m bitlaws sweep --profile NAME` makes their rows)")
    if eval_version is None:
        eval_version = EVAL_VERSION_READ[profile]
    if eval_version != "all" and eval_version not in EVAL_VERSIONS:
        raise ValueError(f"unknown evaluation version {eval_version!r}; allowed: {sorted(EVAL_VERSIONS)} or 'all'")
    freeze = read_until(profile, until)
    folder = Path(root) if root is not None else data_dir()
    folder = folder / "runs" / profile
    files = sorted(p for p in folder.glob("*.csv") if not p.name.endswith("_curves.csv"))
    if not files:
        raise FileNotFoundError(
            f"no results for profile {profile!r} under {folder}; run `python -m bitlaws sweep --profile {profile}`"
        )
    wanted = None if experiment is None else ({experiment} if isinstance(experiment, str) else set(experiment))
    if wanted is not None and not wanted:
        raise ValueError(f"experiment is an empty collection for profile {profile!r}: name at least one experiment, "
                         "or pass None for every experiment")
    present: set[str] = set()  # the experiments the files hold, before any filter
    n_rows, other_versions, other_late, n_late = 0, {}, {}, 0  # the rows asked for; those each filter removed
    frames = []
    for f in files:
        data = _read_locked_bytes(f) or b""
        _parse(f, data, None, None)  # a damaged file is refused, not half read
        part = pd.read_csv(io.BytesIO(data))  # parsed as ever: the inputs' hashes stay what they were
        if "experiment" in part:
            present.update(part["experiment"].dropna().astype(str))
        if wanted is not None:
            # Filter before concatenating: other experiments' files (e.g. kernel benchmarks) have
            # other columns, which would otherwise widen and retype this frame.
            if "experiment" not in part:
                continue
            part = part[part["experiment"].isin(wanted)]
        n_rows += len(part)
        if eval_version != "all" and "eval_version" in part:
            other = part["eval_version"] != eval_version
            for v, n in part.loc[other, "eval_version"].value_counts(dropna=False).items():
                other_versions[v] = other_versions.get(v, 0) + int(n)
            cut = part[other]  # of those, the ones the freeze would still hold back at their own version
            for v, n in cut.loc[after_freeze(cut, freeze), "eval_version"].value_counts(dropna=False).items():
                other_late[v] = other_late.get(v, 0) + int(n)
            part = part[~other]
        late = after_freeze(part, freeze)
        n_late += int(late.sum())
        part = part[~late]
        if len(part):
            frames.append(part)
    absent = sorted(wanted - present, key=str) if wanted is not None else []
    if absent:

        unknown = [e for e in absent if e not in EXPERIMENT_NAMES and e != MANUAL_EXPERIMENT]
        if unknown:
            not_run = [e for e in DECLARED_EXPERIMENTS.get(profile, ()) if e not in present]
            raise ValueError(
                f"unknown experiment{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for profile "
                f"{profile!r}: no file under {folder} holds {'them' if len(unknown) > 1 else 'it'} and "
                f"bitlaws.study.sweep declares no such experiment; allowed: the experiments the profile's files hold, "
                f"{sorted(present)}" + (f", or those the sweep declares for {profile!r} and has not run yet, {not_run}"
                                        if not_run else f" (the sweep declares no other for {profile!r})"))
    if not frames:
        raise FileNotFoundError(_no_rows_message(profile, experiment, wanted, folder, absent, n_rows, other_versions,
                                                 eval_version, n_late, freeze, other_late))
    return pd.concat(frames, ignore_index=True)

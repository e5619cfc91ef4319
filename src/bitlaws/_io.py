"""Small file and hashing helpers shared by the library and the study: atomic writes and the
hashes that identify what was *read* (never what was computed).

* ``write_atomic(path, data)`` writes to a temporary file beside ``path``, fsyncs it and renames
  it over ``path`` (``os.replace``): a killed writer leaves the old file or the new one.
* ``frame_sha256(frame)`` hashes a frame's rows as CSV, sorted by ``obs_id``: the identity of the
  rows a fit or a verdict read. Rows are values parsed from committed files, so the hash is the
  same on every machine; a frame of numbers that code computed would not be (last-bit
  differences between CPUs and BLAS builds), and is never hashed.
* ``json_sha256(obj)`` hashes canonical JSON (sorted keys); floats in it must be values that were
  read or typed, not computed.
* ``git_sha()`` names the code that made a row: the checkout's commit, ``-dirty`` if ``src/`` has
  uncommitted changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["write_atomic", "fsync_dir", "frame_sha256", "json_sha256", "git_sha"]


def write_atomic(path: str | os.PathLike[str], data: str | bytes | Iterable[bytes],
                 mode: int | None = None) -> None:
    """Write ``data`` (str as UTF-8) to ``path`` atomically: temporary file, fsync, rename, fsync
    of the folder (so the rename itself survives a power cut).

    Args:
        path: the target file; its folder must exist.
        data: the whole new content: text, bytes, or an iterable of byte chunks (large files).
        mode: permission bits of the new file; default: those of the file being replaced, else
            0o644 (``mkstemp`` would make it private).

    Raises:
        OSError: if the folder is missing or not writable (the temporary file is removed).
    """
    path = Path(path)
    chunks = [data.encode("utf-8")] if isinstance(data, str) else [data] if isinstance(data, (bytes, bytearray)) else data
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as tmp:
            for chunk in chunks:
                tmp.write(chunk)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """fsync a folder (its entries, e.g. after a rename); silently skipped where not supported."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def frame_sha256(frame: Any) -> str:
    """SHA-256 of a pandas frame's rows as CSV, sorted by ``obs_id`` when it has one.

    Args:
        frame: a ``pandas.DataFrame`` of rows read from the run store.

    Returns:
        64 hex digits.
    """
    ordered = frame.sort_values("obs_id").reset_index(drop=True) if "obs_id" in frame else frame
    return hashlib.sha256(ordered.to_csv(index=False).encode()).hexdigest()


def json_sha256(obj: Any) -> str:
    """SHA-256 of ``obj`` as canonical JSON (sorted keys, no spaces, non-JSON values as ``str``)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def git_sha() -> str:
    """The commit of this checkout (12 hex, ``-dirty`` if tracked files under ``src/`` have
    uncommitted changes), or ``unknown`` outside a git work tree. Cached: the first call pins the
    provenance of a process (a sweep calls it before training)."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        # ':/src' is a pathspec from the top of the work tree, wherever cwd is.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/src"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha[:12] + ("-dirty" if dirty else "") if len(sha) == 40 else "unknown"

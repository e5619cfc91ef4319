"""Sampling text from the committed checkpoints (bitlaws.study.talk): seeded, greedy = argmax, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bitlaws.study.checkpoints import load_checkpoint
from bitlaws.study.talk import sample_text, talk_before_after

CKPT = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "cpu" / "n27k_D8388608_s0.safetensors"


@pytest.fixture(scope="module")
def model():
    return load_checkpoint(CKPT)[0]


def test_greedy_is_the_argmax_at_every_step(model):
    prompt = "KING:\n"
    ids = list(prompt.encode())
    with torch.no_grad():
        for _ in range(24):  # the oracle: no cache, the whole context each step
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    expected = bytes(ids[len(prompt):]).decode("utf-8", errors="replace")
    assert sample_text(model, prompt, 24, temperature=0.0) == expected


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(model):
    state = torch.get_rng_state()
    a = sample_text(model, "ROMEO:\n", 60, temperature=1.0, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert sample_text(model, "ROMEO:\n", 60, temperature=1.0, seed=3) == a
    assert len(a.encode("utf-8", errors="surrogatepass")) >= 20
    assert sample_text(model, "ROMEO:\n", 60, temperature=1.0, seed=4) != a


def test_before_and_after_share_the_seed_and_the_quantization_changes_the_text(model):
    texts = talk_before_after(CKPT, "ROMEO:\n", bits=2, n_bytes=40, temperature=0.0)
    assert list(texts) == ["as trained", "RTN INT2"]
    assert texts["as trained"] == sample_text(model, "ROMEO:\n", 40, temperature=0.0)
    assert texts["RTN INT2"] != texts["as trained"]  # two-bit weights change the greedy path


@pytest.mark.parametrize("kwargs, match", [
    (dict(prompt=""), "non-empty"),
    (dict(n_bytes=0), "n_bytes"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_k=-2), "top_k"),
    (dict(n_bytes=10_000), "context"),
])
def test_bad_arguments_say_what_is_allowed(model, kwargs, match):
    args = dict(prompt="A", n_bytes=5) | kwargs
    with pytest.raises(ValueError, match=match):
        sample_text(model, args.pop("prompt"), **args)

"""Tests for bitlaws.model: N counted exactly, untied embeddings, seeding, shapes, validation."""

import pytest
import torch

from bitlaws.model import (
    LADDER,
    SMOKE_LADDER,
    ModelConfig,
    build_model,
    count_n_params,
    get_size,
    hand_count_n_params,
)

torch.set_num_threads(1)

ALL_SIZES = {**LADDER, **SMOKE_LADDER}


@pytest.mark.parametrize("name", sorted(ALL_SIZES))
def test_n_params_matches_closed_form_and_excludes_embeddings(name):
    cfg = ALL_SIZES[name]
    model = build_model(cfg)
    n = count_n_params(model)
    assert n == hand_count_n_params(cfg)
    total = sum(p.numel() for p in model.parameters())
    assert total - n == 2 * cfg.vocab_size * cfg.d_model  # embed_tokens + untied lm_head
    # the cpu ladder's names are N rounded to their last digit ("n214k": 213568, "n1.2m": 1205888)
    if name in LADDER:
        digits, unit = name[1:-1], {"k": 1000, "m": 1_000_000}[name[-1]]
        res = unit // 10 ** len(digits.partition(".")[2])
        assert round(n / res) * res == round(float(digits) * unit), (name, n)


def test_hand_count_independent():
    # d = 32, L = 2, d_ff = 96: per layer 4·32² (q,k,v,o) + 3·32·96 (gate,up,down) + 2·32 (norms),
    # then the final norm: 2·(4096 + 9216 + 64) + 32 = 26784
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=96)
    assert hand_count_n_params(cfg) == 26784
    assert count_n_params(build_model(cfg)) == 26784
    assert LADDER["n27k"] == cfg


def test_untied_embeddings():
    model = build_model(SMOKE_LADDER["n3k"])
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    assert emb.shape == head.shape == (256, 16)
    assert emb.data_ptr() != head.data_ptr()
    assert not torch.equal(emb, head)
    with torch.no_grad():
        emb.add_(1.0)
    assert not torch.equal(emb, head)  # changing one leaves the other


def test_seeding():
    cfg = SMOKE_LADDER["n14k"]
    a, b, c = build_model(cfg, seed=3), build_model(cfg, seed=3), build_model(cfg, seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    matrices = [k for k in sa if sa[k].dim() == 2]
    assert len(matrices) == 2 + 7 * cfg.n_layers
    for k in matrices:  # every random matrix differs; norm gains are all ones in both
        assert not torch.equal(sa[k], sc[k]), k
    # init std as configured (transformers' initializer_range)
    w = torch.cat([sa[k].flatten() for k in matrices])
    assert float(w.std()) == pytest.approx(cfg.init_std, rel=0.05)


def test_logits_shape_and_dtype():
    model = build_model(SMOKE_LADDER["n3k"])
    ids = torch.randint(0, 256, (3, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (3, 17, 256)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()


def test_causal():
    # position t's logits do not depend on tokens after t
    model = build_model(SMOKE_LADDER["n3k"]).eval()
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    ids2 = ids.clone()
    ids2[0, 8:] = (ids2[0, 8:] + 1) % 256
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, model(input_ids=ids2).logits
    torch.testing.assert_close(a[0, :8], b[0, :8], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(a[0, 8:], b[0, 8:])


@pytest.mark.parametrize("kwargs, pattern", [
    ({"d_model": 30, "n_heads": 4}, r"ModelConfig\.d_model=30 must be divisible by ModelConfig\.n_heads=4"),
    ({"d_model": 24, "n_heads": 8}, r"ModelConfig\.d_model/n_heads = 24/8 = 3 \(the head size\) must be even"),
    ({"n_layers": 0}, r"ModelConfig\.n_layers"),
    ({"d_ff": -1}, r"ModelConfig\.d_ff"),
    ({"vocab_size": 2.5}, r"ModelConfig\.vocab_size"),
    ({"n_heads": True}, r"ModelConfig\.n_heads"),
    ({"init_std": 0.0}, r"ModelConfig\.init_std must be positive, got 0\.0"),
    ({"norm_eps": -1e-5}, r"ModelConfig\.norm_eps must be positive, got -1e-05"),
    ({"rope_theta": 0.0}, r"ModelConfig\.rope_theta must be positive, got 0\.0"),
])
def test_config_validation(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        ModelConfig(**kwargs)


def test_get_size():
    assert get_size("n3k") is SMOKE_LADDER["n3k"]
    assert get_size("n214k") is LADDER["n214k"]
    with pytest.raises(ValueError, match="nope") as err:
        get_size("nope")
    for name in ALL_SIZES:
        assert repr(name) in str(err.value)


def test_to_llama():
    cfg = SMOKE_LADDER["n14k"]
    llama = cfg.to_llama()
    assert (llama.hidden_size, llama.num_hidden_layers, llama.num_attention_heads, llama.intermediate_size) == (
        24, 2, 2, 64)
    assert llama.num_key_value_heads == llama.num_attention_heads
    assert llama.head_dim == cfg.head_size == 12
    assert llama.tie_word_embeddings is False

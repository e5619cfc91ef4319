"""Training precision: hooks that cannot pass by accident.

* all parts None → training is bit-identical to the plain model;
* each part at int4 → every quantized linear's weight (per output channel) and input (per tensor),
  and K and V as attention reads them (per tensor), lie on the 4-bit grid of their scale;
* the gradient through the rounding is the identity (straight-through);
* baking the weights leaves the forward unchanged; a resumed low-precision run ends bit-identical.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
import transformers.integrations.sdpa_attention as sdpa_mod

from bitlaws.model import SMOKE_LADDER, build_model
from bitlaws.precision import TrainPrecision, _fq_attention, _input_hook, apply_precision_
from bitlaws.ptq import block_linears
from bitlaws.quant import PerChannel, PerTensor, QuantSpec
from bitlaws.train import TrainConfig, train

torch.set_num_threads(1)
CFG = SMOKE_LADDER["n3k"]
TCFG = TrainConfig(n_tokens=8 * 64 * 12, batch_size=8, seq_len=64, eval_tokens=16_640, log_every=4, ckpt_every=5)
QMAX4 = 7  # symmetric int4: codes in [-8, 7], absmax maps to 7


def _on_grid(x: torch.Tensor, dims: tuple[int, ...] | None, qmax: int = QMAX4) -> None:
    """Every element of `x` is an integer multiple of absmax/qmax of its slice, with |code| ≤ qmax."""
    x = x.detach().double()
    absmax = x.abs().amax() if dims is None else x.abs().amax(dim=dims, keepdim=True)
    codes = x / (absmax / qmax)
    assert torch.allclose(codes, codes.round(), atol=1e-4), (codes - codes.round()).abs().max()
    assert codes.abs().max() <= qmax + 1e-6
    # and the grid is used: more than one level, at most 2·qmax + 1 levels per slice
    assert 1 < len(torch.unique(codes.round())) <= 2 * qmax + 1


def test_all_none_trains_bit_identically(corpus):
    plain = train(CFG, TCFG, corpus=corpus, progress=False)
    none = train(CFG, TCFG, corpus=corpus, progress=False, precision=TrainPrecision())
    assert plain.loss_val == none.loss_val
    sd_a, sd_b = plain.model.state_dict(), none.model.state_dict()
    assert sd_a.keys() == sd_b.keys()
    assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)
    # and nothing was installed on the model
    model = build_model(CFG, seed=0)
    handle = apply_precision_(model, TrainPrecision())
    assert not handle.linears and model.config._attn_implementation == "sdpa"


def test_int4_everywhere_lies_on_the_grid(monkeypatch):
    model = build_model(CFG, seed=3)
    apply_precision_(model, TrainPrecision.of(w=4, a=4, kv=4))
    seen_inputs, seen_kv = {}, []
    for name, lin in block_linears(model).items():
        # registered after ours, so it sees the quantized input
        lin.register_forward_pre_hook(lambda m, args, name=name: seen_inputs.__setitem__(name, args[0]))

    real = sdpa_mod.sdpa_attention_forward

    def spy(module, q, k, v, *args, **kwargs):
        seen_kv.append((k, v))
        return real(module, q, k, v, *args, **kwargs)

    monkeypatch.setattr(sdpa_mod, "sdpa_attention_forward", spy)
    ids = torch.randint(0, 256, (2, 32))
    model(input_ids=ids)
    linears = block_linears(model)
    assert set(seen_inputs) == set(linears) and len(seen_inputs) == 7 * CFG.n_layers
    for name, lin in linears.items():
        _on_grid(lin.weight, dims=(1,))  # per output channel
        _on_grid(seen_inputs[name], dims=None)  # per tensor
    assert len(seen_kv) == CFG.n_layers
    for k, v in seen_kv:
        _on_grid(k, dims=None)
        _on_grid(v, dims=None)


def test_each_part_alone_quantizes_only_that_part(monkeypatch):
    ids = torch.randint(0, 256, (2, 32))
    ref = build_model(CFG, seed=4)
    out_ref = ref(input_ids=ids).logits
    for part in ("w", "a", "kv"):
        model = copy.deepcopy(ref)
        handle = apply_precision_(model, TrainPrecision.of(**{part: 4}))
        assert not torch.equal(model(input_ids=ids).logits, out_ref), part
        handle.remove(bake_weights=False)
        assert torch.equal(model(input_ids=ids).logits, out_ref), part  # removal restores the plain model


def test_straight_through_gradients():
    torch.manual_seed(0)
    spec = QuantSpec("int4", PerTensor(), True)
    # activations: the pre-hook's gradient is the identity
    x = torch.randn(2, 5, 16, requires_grad=True)
    (y,) = _input_hook(spec, False)(None, (x,))
    g = torch.randn_like(y)
    y.backward(g)
    assert torch.allclose(x.grad, g, rtol=1e-6, atol=0)  # g · (1/s) · s, one rounding each
    # weights: the latent weight receives exactly the gradient of the quantized weight used
    model = build_model(CFG, seed=5)
    ids = torch.randint(0, 256, (2, 16))
    baked = copy.deepcopy(model)
    h = apply_precision_(model, TrainPrecision.of(w=3))
    apply_precision_(baked, TrainPrecision.of(w=3)).bake_weights()
    F.cross_entropy(model(input_ids=ids).logits.flatten(0, 1), ids.flatten()).backward()
    F.cross_entropy(baked(input_ids=ids).logits.flatten(0, 1), ids.flatten()).backward()
    for (name, lin), lin_b in zip(h.linears.items(), block_linears(baked).values()):
        latent = lin.parametrizations.weight.original
        assert torch.allclose(latent.grad, lin_b.weight.grad, rtol=1e-5, atol=1e-7), name
    # K/V: the attention function passes the gradient of its quantized inputs straight through
    from types import SimpleNamespace

    q, k, v = (torch.randn(1, 2, 8, 4, requires_grad=True) for _ in range(3))
    mod = SimpleNamespace(_bitlaws_kv=QuantSpec("int4", PerTensor(), True), _bitlaws_q=False, is_causal=True,
                          num_key_value_groups=1, training=False)
    out, _ = _fq_attention(mod, q, k, v, None, scaling=0.5)
    go = torch.randn_like(out)
    out.backward(go)
    from bitlaws.quant import fake_quantize

    kq, vq = (fake_quantize(t.detach(), mod._bitlaws_kv).requires_grad_() for t in (k, v))
    q2 = q.detach().clone().requires_grad_()
    out2, _ = sdpa_mod.sdpa_attention_forward(mod, q2, kq, vq, None, scaling=0.5)
    out2.backward(go)
    assert torch.equal(out, out2)
    assert torch.allclose(k.grad, kq.grad) and torch.allclose(v.grad, vq.grad)


def test_bake_keeps_the_forward_and_puts_weights_on_the_grid():
    model = build_model(CFG, seed=6)
    ids = torch.randint(0, 256, (2, 16))
    h = apply_precision_(model, TrainPrecision.of(w=4, a=8))
    before = model(input_ids=ids).logits
    h.bake_weights()
    assert torch.equal(model(input_ids=ids).logits, before)
    for lin in block_linears(model).values():
        assert not hasattr(lin, "parametrizations")
        _on_grid(lin.weight, dims=(1,))


def test_low_precision_run_resumes_bit_identically(corpus, tmp_path):
    prec = TrainPrecision.of(w=4, a=4, kv=4)
    full = train(CFG, TCFG, corpus=corpus, progress=False, precision=prec)
    part = train(CFG, TCFG, corpus=corpus, run_dir=tmp_path, progress=False, stop_after=7, precision=prec)
    assert part.status == "interrupted" and (tmp_path / "state.pt").exists()
    resumed = train(CFG, TCFG, corpus=corpus, run_dir=tmp_path, progress=False, precision=prec)
    assert resumed.loss_val == full.loss_val
    assert all(torch.equal(a, b) for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()))
    # the returned model carries baked weights and still quantizes its activations
    assert full.loss_val != train(CFG, TCFG, corpus=corpus, progress=False).loss_val


def test_ids_labels_and_bad_input():
    p = TrainPrecision.of(w=4, a="int8")
    assert (p.fmt("w"), p.bits("w"), p.fmt("a"), p.bits("a"), p.fmt("kv"), p.bits("kv")) == \
        ("int4", 4, "int8", 8, "none", 16)
    assert p.w.granularity == PerChannel(0) and p.a.granularity == PerTensor() and p.w.symmetric
    assert p.label() == "W4 A8 KV16"
    assert TrainPrecision().id_dict() == {"w": None, "a": None, "kv": None}
    assert TrainPrecision.of(kv=4, quantize_q=True).id_dict()["quantize_q"] is True
    with pytest.raises(ValueError, match=r"TrainPrecision.w=1: .*\[2, 16\]"):
        TrainPrecision.of(w=1)
    with pytest.raises(ValueError, match="unknown number format"):
        TrainPrecision.of(a="int4x")
    with pytest.raises(ValueError, match="QuantSpec or None"):
        TrainPrecision(w=4)
    with pytest.raises(ValueError, match="quantize_q"):
        TrainPrecision(quantize_q=True)
    with pytest.raises(ValueError, match="TrainPrecision.w"):
        TrainPrecision.of(w=True)


def test_kv_parts_quantizes_only_the_named_cache_tensor(monkeypatch):
    """kv_parts='k' / 'v' (P5's mechanism ablation): attention reads exactly K on the int4 grid and V
    as given, or the reverse; 'kv' both (the paper's setting)."""
    torch.manual_seed(7)
    q, k, v = (torch.randn(2, 2, 16, 8) for _ in range(3))
    seen = []
    monkeypatch.setattr(sdpa_mod, "sdpa_attention_forward",
                        lambda module, q_, k_, v_, *a, **kw: (seen.append((q_, k_, v_)), None)[1])
    for parts in ("k", "v", "kv"):
        model = build_model(CFG, seed=5)
        apply_precision_(model, TrainPrecision.of(kv=4, kv_parts=parts))
        attn = next(m for m in model.modules() if hasattr(m, "_bitlaws_kv"))
        assert attn._bitlaws_kv_parts == parts
        seen.clear()
        _fq_attention(attn, q, k, v, None)
        (q_, k_, v_), = seen
        assert torch.equal(q_, q)
        if "k" in parts:
            _on_grid(k_, dims=None)
        else:
            assert torch.equal(k_, k)
        if "v" in parts:
            _on_grid(v_, dims=None)
        else:
            assert torch.equal(v_, v)


def test_a_skip_leaves_only_the_named_inputs_in_high_precision(monkeypatch):
    model = build_model(CFG, seed=6)
    apply_precision_(model, TrainPrecision.of(a=4, a_skip=("o_proj",)))
    seen = {}
    for name, lin in block_linears(model).items():
        lin.register_forward_pre_hook(lambda m, args, name=name: seen.__setitem__(name, args[0]))
    model(input_ids=torch.randint(0, 256, (2, 32)))
    assert len(seen) == 7 * CFG.n_layers
    for name, x in seen.items():
        if name.endswith("o_proj"):
            codes = x.detach().double() / (x.detach().double().abs().amax() / QMAX4)
            assert len(torch.unique(codes.round(decimals=3))) > 2 * QMAX4 + 1, name  # off the int4 grid
        else:
            _on_grid(x, dims=None)


def test_ablation_flags_ids_labels_and_bad_input():
    p = TrainPrecision.of(a=4, kv=4, kv_parts="v", a_skip=("o_proj",))
    assert p.label() == "W16 A4(not o_proj) V4" and p.variant == "kv_parts=v;a_skip=o_proj"
    assert p.id_dict()["kv_parts"] == "v" and p.id_dict()["a_skip"] == ["o_proj"]
    # the paper's setting adds nothing to the id (every committed run keeps its run_id)
    assert TrainPrecision.of(a=4, kv=4).id_dict() == {"w": TrainPrecision.of(a=4, kv=4).id_dict()["w"],
                                                      "a": p.id_dict()["a"], "kv": p.id_dict()["kv"]}
    assert TrainPrecision.of(a=4, kv=4).variant == ""
    with pytest.raises(ValueError, match=r"kv_parts must be one of \['kv', 'k', 'v'\]"):
        TrainPrecision.of(kv=4, kv_parts="q")
    with pytest.raises(ValueError, match="needs a kv spec"):
        TrainPrecision.of(kv_parts="k")
    with pytest.raises(ValueError, match=r"a_skip must be a tuple of names among \['q_proj'"):
        TrainPrecision.of(a=4, a_skip=("attn_out",))
    with pytest.raises(ValueError, match="a_skip must be a tuple"):
        TrainPrecision.of(a=4, a_skip="o_proj")
    with pytest.raises(ValueError, match="needs an `a` spec"):
        TrainPrecision.of(w=4, a_skip=("o_proj",))


def test_repr_names_the_ablation_fields_only_where_set_and_round_trips():
    # The paper's setting keeps the repr it had before the ablation fields existed (P5's freeze hashes the
    # factorial's specs through it); an ablation shows its fields; eval(repr) gives back an equal spec.
    from bitlaws.quant import PerChannel, PerTensor, QuantSpec  # noqa: F401 (names for eval)
    paper = TrainPrecision.of(w=4, a=8, kv=4)
    assert "kv_parts" not in repr(paper) and "a_skip" not in repr(paper)
    assert repr(paper).endswith("extra_norm=False, quantize_q=False)")
    ablation = TrainPrecision.of(a=4, kv=4, kv_parts="v", a_skip=("o_proj",))
    assert "kv_parts='v'" in repr(ablation) and "a_skip=('o_proj',)" in repr(ablation)
    for p in (paper, ablation, TrainPrecision()):
        assert eval(repr(p)) == p

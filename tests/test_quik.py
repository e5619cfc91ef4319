"""QUIK whole-model quantization (bitlaws.ptq.quik), SmoothQuant, and the experiment's bookkeeping."""

from __future__ import annotations

import copy
import csv
import io
import math
import shutil

import pytest
import torch
from torch import nn

from bitlaws.kernels import QuikLinear
from bitlaws.model import SMOKE_LADDER, build_model
from bitlaws.ptq.gptq import GPTQConfig, gptq_weight, output_error
from bitlaws.ptq.quik import (QuikConfig, QuikSimLinear, activation_absmax, input_groups, quik_quantize_,
                              quik_weight, select_outliers)
from bitlaws.ptq.smoothquant import SmoothQuantConfig, smooth_, smoothquant_quantize_

torch.set_num_threads(1)


def _layer_data(n_out=24, n_in=40, n_tok=600, seed=0):
    """A weight, correlated inputs with a few large channels, their Hessian and act scales."""
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(n_in, n_in, generator=g) / math.sqrt(n_in) + torch.eye(n_in)
    X = torch.randn(n_tok, n_in, generator=g) @ mix
    X[:, [3, 17, 29]] *= 12.0  # outlier features
    W = torch.randn(n_out, n_in, generator=g) / math.sqrt(n_in)
    H = 2.0 / n_tok * X.T.double() @ X.double()
    return W, H.float(), X.abs().amax(dim=0), n_tok


def _model(seed=0):
    torch.manual_seed(seed)
    model = build_model(SMOKE_LADDER["n14k"]).eval()
    calib = torch.randint(0, 256, (8, 32), generator=torch.Generator().manual_seed(1))
    return model, calib


# --------------------------------------------------------------------------- the layer step


@pytest.mark.parametrize("clip", [False, True])
def test_k0_equals_plain_gptq(clip):
    W, H, act, _ = _layer_data()
    cfg = QuikConfig(bits_w=4, n_outliers=0, clip=clip)
    # Ascending act scales -> QUIK's order is the identity -> exactly symmetric GPTQ.
    ident = torch.arange(W.shape[1], dtype=torch.float32)
    W_q, info = quik_weight(W, H, ident, torch.empty(0, dtype=torch.long), 4, cfg)
    W_g, _ = gptq_weight(W, H, GPTQConfig(bits=4, symmetric=True, mse=clip))
    assert torch.equal(W_q, W_g.float())
    # Any other order: GPTQ of the permuted columns, un-permuted.
    W_q, info = quik_weight(W, H, act, torch.empty(0, dtype=torch.long), 4, cfg)
    p = info.perm
    W_g, _ = gptq_weight(W[:, p], H[p][:, p], GPTQConfig(bits=4, symmetric=True, mse=clip))
    assert torch.equal(W_q, W_g.float()[:, torch.argsort(p)])


def test_outlier_columns_absorb_error_and_beat_copying():
    W, H, act, n = _layer_data()
    k = 3
    out_idx = torch.topk(act, k).indices
    assert set(out_idx.tolist()) == {3, 17, 29}
    cfg = QuikConfig(bits_w=4, n_outliers=k, clip=False)
    W_q, info = quik_weight(W, H, act, out_idx, 4, cfg)
    # outlier columns are last in the processing order, not quantized, and changed by GPTQ
    assert set(info.perm[-k:].tolist()) == set(out_idx.tolist())
    assert not torch.allclose(W_q[:, out_idx], W[:, out_idx])
    # base columns lie on the symmetric grid whose scale comes from the base columns only
    base = torch.tensor([i for i in range(W.shape[1]) if i not in set(out_idx.tolist())])
    scale = info.scale.reshape(-1, 1)
    codes = W_q[:, base] / scale
    assert torch.allclose(codes, codes.round(), atol=1e-4) and codes.abs().max() <= 8
    copied = W_q.clone()
    copied[:, out_idx] = W[:, out_idx]
    err_absorb = output_error(W, W_q, H, n)
    err_copy = output_error(W, copied, H, n)
    assert err_absorb < err_copy
    # and keeping outliers beats k = 0 at the same bits
    W0, _ = quik_weight(W, H, act, torch.empty(0, dtype=torch.long), 4, cfg)
    assert err_absorb < output_error(W, W0, H, n)


def test_scale_from_base_columns_rtn():
    W, _, act, _ = _layer_data()
    W = W.clone()
    W[:, 3] *= 50  # a huge weight in an outlier column must not widen the grid
    out_idx = torch.tensor([3, 17, 29])
    cfg = QuikConfig(bits_w=4, n_outliers=3, clip=False, weight_method="rtn")
    W_q, info = quik_weight(W, None, act, out_idx, 4, cfg)
    keep = torch.ones(W.shape[1], dtype=torch.bool)
    keep[out_idx] = False
    assert torch.allclose(info.scale.reshape(-1), W[:, keep].abs().amax(dim=1) / 7)
    assert torch.equal(W_q[:, out_idx], W[:, out_idx])  # RTN leaves the outliers as they are
    # k = 0 RTN is QuikLinear's own round-to-nearest grid
    lin = nn.Linear(W.shape[1], W.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(W)
    W_r, _ = quik_weight(W, None, act, torch.empty(0, dtype=torch.long), 8, QuikConfig(bits_w=8, bits_a=8, n_outliers=0,
                                                                                       clip=False, weight_method="rtn"), )
    ql = QuikLinear.from_linear(lin, torch.empty(0, dtype=torch.long), 8)
    assert torch.allclose(W_r, ql.dequantized_weight(), rtol=0, atol=1e-7)


# --------------------------------------------------------------------------- simulation vs kernel


@pytest.mark.parametrize("bits", [4, 8])
def test_sim_layer_matches_quiklinear(bits):
    torch.manual_seed(0)
    lin = nn.Linear(40, 24, bias=True)
    out_idx = torch.tensor([1, 5, 33])
    ql = QuikLinear.from_linear(lin, out_idx, bits, dtype=torch.float16)
    sim = QuikSimLinear(ql.dequantized_weight(), out_idx, bits, lin.bias.detach().half().float())
    x = torch.randn(3, 7, 40) * 2
    x[..., 5] *= 20
    y_k, y_s = ql(x), sim(x)
    assert torch.allclose(y_k, y_s, rtol=1e-5, atol=1e-5 * y_k.abs().max().item())


def test_sim_model_matches_kernel_model():
    model, calib = _model()
    cfg = QuikConfig(bits_w=4, bits_a=4, n_outliers=0.125)
    mk, ms = copy.deepcopy(model), copy.deepcopy(model)
    quik_quantize_(mk, calib, cfg, modules="kernel")
    quik_quantize_(ms, calib, cfg, modules="sim")
    kinds = {type(m).__name__ for m in mk.modules()}
    assert "QuikLinear" in kinds and "QuikSimLinear" in {type(m).__name__ for m in ms.modules()}
    with torch.no_grad():
        for lk, ls in zip([m for m in mk.modules() if isinstance(m, QuikLinear)],
                          [m for m in ms.modules() if isinstance(m, QuikSimLinear)]):
            assert torch.equal(lk.dequantized_weight(), ls.weight)
        a, b = mk(input_ids=calib[:2]).logits, ms(input_ids=calib[:2]).logits
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * a.abs().max().item())
    # quantization changed the model, and the lm_head / embeddings stayed
    with torch.no_grad():
        ref = model(input_ids=calib[:2]).logits
    assert not torch.allclose(a, ref)
    assert isinstance(mk.lm_head, nn.Linear) and torch.equal(mk.lm_head.weight, model.lm_head.weight)


# --------------------------------------------------------------------------- the model driver


def test_outliers_shared_and_down_proj_policy():
    model, calib = _model()
    cfg = QuikConfig(n_outliers=0.125)  # d_model 24 -> 3; down_proj (64 inputs) -> 8
    rep = quik_quantize_(copy.deepcopy(model), calib, cfg, modules="kernel")
    out = rep["_outliers"]
    for li in range(2):
        p = f"model.layers.{li}."
        assert torch.equal(out[p + "self_attn.q_proj"], out[p + "self_attn.k_proj"])
        assert torch.equal(out[p + "self_attn.q_proj"], out[p + "self_attn.v_proj"])
        assert torch.equal(out[p + "mlp.gate_proj"], out[p + "mlp.up_proj"])
        assert len(out[p + "self_attn.q_proj"]) == 3 and len(out[p + "mlp.down_proj"]) == 8
        assert rep[p + "mlp.down_proj"]["bits_w"] == 8 and rep[p + "self_attn.o_proj"]["bits_w"] == 4
    # the outliers are the top-k channels of the calibration statistic
    stats = activation_absmax(model, calib)
    name = "model.layers.1.mlp.down_proj"
    assert set(out[name].tolist()) == set(torch.topk(stats[name], 8).indices.tolist())
    # count given as an int scales for down_proj by in_features / hidden_size
    assert QuikConfig(n_outliers=256).layer_outliers("x.down_proj", 11008, 4096) == 688
    assert QuikConfig(n_outliers=256).layer_outliers("x.q_proj", 4096, 4096) == 256
    # bits_down = 16 leaves down_proj an nn.Linear
    m16 = copy.deepcopy(model)
    quik_quantize_(m16, calib, QuikConfig(bits_down=16), modules="kernel")
    assert type(m16.model.layers[0].mlp.down_proj) is nn.Linear
    assert torch.equal(m16.model.layers[0].mlp.down_proj.weight, model.model.layers[0].mlp.down_proj.weight)
    assert isinstance(m16.model.layers[0].mlp.up_proj, QuikLinear)


def test_input_groups_and_select():
    names = ["m.layers.0.self_attn.q_proj", "m.layers.0.self_attn.k_proj", "m.layers.0.self_attn.o_proj",
             "m.layers.1.self_attn.q_proj", "m.layers.0.mlp.up_proj", "m.layers.0.mlp.gate_proj"]
    groups = sorted(map(sorted, input_groups(names)))
    assert ["m.layers.0.mlp.gate_proj", "m.layers.0.mlp.up_proj"] in groups
    assert ["m.layers.0.self_attn.k_proj", "m.layers.0.self_attn.q_proj"] in groups
    assert ["m.layers.1.self_attn.q_proj"] in groups
    stats = {"a.q_proj": torch.tensor([1.0, 5.0, 2.0, 5.0]), "a.k_proj": torch.tensor([9.0, 0.0, 0.0, 0.0])}
    idx = select_outliers(stats, {"a.q_proj": 2, "a.k_proj": 2})
    assert idx["a.q_proj"].tolist() == [0, 3] == idx["a.k_proj"].tolist()  # max over the group; ties by index


def test_weight_only_gptq_agrees_with_driver_when_activations_unquantized():
    # W8A8 with 8-bit everything is close to the fp model (sanity of the whole pipeline)
    model, calib = _model()
    m8 = copy.deepcopy(model)
    quik_quantize_(m8, calib, QuikConfig(bits_w=8, bits_a=8, n_outliers=0.125), modules="kernel")
    with torch.no_grad():
        a, b = model(input_ids=calib).logits, m8(input_ids=calib).logits
    assert (a - b).abs().max() < 0.05 * a.abs().max()


# --------------------------------------------------------------------------- SmoothQuant


def test_smoothing_is_exact_and_quantizes():
    model, calib = _model()
    stats = activation_absmax(model, calib)
    sm = copy.deepcopy(model)
    scales = smooth_(sm, stats, SmoothQuantConfig(alpha=0.5))
    assert len(scales) == 2 * 3
    with torch.no_grad():
        a, b = model(input_ids=calib).logits, sm(input_ids=calib).logits
    assert torch.allclose(a, b, atol=1e-4)
    # after smoothing, the activation range is flatter
    stats2 = activation_absmax(sm, calib)
    n = "model.layers.0.self_attn.q_proj"
    r1, r2 = (s[n].max() / s[n].median() for s in (stats, stats2))
    assert r2 < r1
    q = copy.deepcopy(model)
    rep = smoothquant_quantize_(q, calib, SmoothQuantConfig(alpha=0.5, bits=8))
    assert "_smooth_scales" in rep and isinstance(q.model.layers[0].mlp.down_proj, QuikLinear)
    assert q.model.layers[0].mlp.down_proj.n_outliers == 0


def test_smoothing_leaves_a_channel_that_never_fires_alone_in_float16():
    """α = 1 makes s_j = max|x_j|; for a channel whose max is 0, main floored it at min_scale and
    divided the norm weight by 1e-5 (inf in float16). Such a channel has nothing to migrate: s = 1."""
    model, calib = _model()
    stats = activation_absmax(model, calib)
    n = "model.layers.0.self_attn.q_proj"
    stats[n] = stats[n].clone()
    stats[n][5] = 0.0
    half = copy.deepcopy(model).half()
    norm_before = half.model.layers[0].input_layernorm.weight.clone()
    scales = smooth_(half, stats, SmoothQuantConfig(alpha=1.0))
    assert float(scales[n][5]) == 1.0
    assert all(torch.isfinite(p).all() for p in half.parameters())
    assert half.model.layers[0].input_layernorm.weight[5] == norm_before[5]  # untouched channel
    # every other channel: s = max|x| exactly at α = 1 (w_max^0 = 1)
    others = torch.arange(stats[n].numel()) != 5
    torch.testing.assert_close(scales[n][others], stats[n][others].float().clamp(min=1e-5), rtol=0, atol=0)


def test_smoothing_that_would_overflow_a_weight_raises_and_restores_the_model():
    model, calib = _model()
    stats = activation_absmax(model, calib)
    n = "model.layers.1.mlp.gate_proj"  # a later pair: the earlier folds must be rolled back too
    stats[n] = stats[n].clone()
    stats[n][0] = 1e9  # the consumer columns × 1e9 pass float16's 65504
    half = copy.deepcopy(model).half()
    before = {k: v.clone() for k, v in half.state_dict().items()}
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.gate_proj: smoothing \(alpha=1.0\) makes a weight "
                                         r"non-finite in torch.float16"):
        smooth_(half, stats, SmoothQuantConfig(alpha=1.0))
    after = half.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    stats[n][0] = math.nan
    with pytest.raises(ValueError, match="gate_proj: the activation statistic max|x| has NaN"):
        smooth_(half, stats, SmoothQuantConfig(alpha=0.5))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("where", ["base", "outlier", "bias"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_from_linear_refuses_a_nonfinite_weight(bits, where, bad):
    """Main wrote code 0 for a NaN weight at 8 bits (with a given weight_scale), failed in pack_int4
    at 4, and stored a NaN outlier weight silently."""
    lin = nn.Linear(8, 4)
    with torch.no_grad():
        if where == "bias":
            lin.bias[2] = bad
        else:
            lin.weight[1, 0 if where == "outlier" else 2] = bad
    for ws in (None, torch.ones(4)):
        with pytest.raises(ValueError, match=r"from_linear: the linear's (weight|bias) has NaN or Inf"):
            QuikLinear.from_linear(lin, torch.tensor([0]), bits, weight_scale=ws)
    with pytest.raises(ValueError, match="positive and finite"):
        QuikLinear.from_linear(nn.Linear(8, 4), torch.tensor([0]), bits,
                               weight_scale=torch.tensor([1.0, math.inf, 1.0, 1.0]))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("kwargs", [
    {"bits_w": 3}, {"bits_a": 16}, {"bits_w": True}, {"bits_down": 2}, {"n_outliers": 1.5},
    {"n_outliers": -1}, {"n_outliers": "8"}, {"n_outliers_down": -0.1}, {"clip": 1},
    {"weight_method": "awq"}, {"fp_layers": ["o_proj"]}, {"damp": 0}, {"block_size": 0},
])
def test_config_rejects(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        QuikConfig(**kwargs)


@pytest.mark.parametrize("kwargs", [{"alpha": 1.5}, {"bits": 6}, {"smooth_down": "no"}])
def test_smoothquant_config_rejects(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SmoothQuantConfig(**kwargs)


def test_driver_rejects_bad_input():
    model, calib = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="modules"):
        quik_quantize_(model, calib, QuikConfig(), modules="fast")
    with pytest.raises(ValueError, match="equal weight and activation bits"):
        quik_quantize_(model, calib, QuikConfig(bits_w=4, bits_a=8), modules="kernel")
    with pytest.raises(ValueError, match="calib"):
        quik_quantize_(model, calib.float(), QuikConfig())
    with pytest.raises(ValueError, match="no base feature"):
        quik_quantize_(model, calib, QuikConfig(n_outliers=24))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    W, H, act, _ = _layer_data()
    with pytest.raises(ValueError, match="distinct"):
        quik_weight(W, H, act, torch.tensor([1, 1]), 4, QuikConfig())
    with pytest.raises(ValueError, match="Hessian"):
        quik_weight(W, None, act, torch.tensor([1]), 4, QuikConfig())
    # bits_w != bits_a works in the simulation
    ms = copy.deepcopy(model)
    quik_quantize_(ms, calib, QuikConfig(bits_w=4, bits_a=8), modules="sim")
    assert isinstance(ms.model.layers[0].self_attn.q_proj, QuikSimLinear)


# --------------------------------------------------------------------------- the experiment


def test_smoke_experiment_resumes_and_gives_verdicts(tmp_path):
    from bitlaws.study import quik_accuracy as qa
    from bitlaws.study.store import data_dir

    (tmp_path / "checkpoints" / "cpu").mkdir(parents=True)
    src = data_dir() / "checkpoints" / "cpu" / "n27k_D524288_s0.safetensors"
    if not src.exists():
        pytest.skip("committed n27k checkpoint missing")
    shutil.copy(src, tmp_path / "checkpoints" / "cpu")
    n = qa.run_quik_experiment("smoke", root=tmp_path, progress=False, limit=3)
    assert n == 3
    df, _ = qa.load_quik("smoke", tmp_path)
    assert list(df["method"]) == ["fp", "quik_w8a8", "quik_w4a4"]
    assert df["obs_id"].is_unique and set(df["ptq_method"]) <= {"none", "quik"}
    # the observation files' convention: training columns = the 16-bit checkpoint, the PTQ in fmt_post/bits_post
    fp, w4 = (df[df["method"] == m].iloc[0] for m in ("fp", "quik_w4a4"))
    assert (fp["ptq_method"], fp["fmt_post"], fp["bits_post"], fp["fmt_w"], fp["bits_w"]) == ("none", "none", 16,
                                                                                              "none", 16)
    assert (w4["ptq_method"], w4["fmt_post"], w4["bits_post"], w4["bits_a_post"]) == ("quik", "int4", 4, 4)
    assert (w4["fmt_w"], w4["fmt_a"], w4["bits_w"], w4["bits_a"]) == ("none", "none", 16, 16)
    assert qa.run_quik_experiment("smoke", root=tmp_path, progress=False, limit=2) == 2  # resumes
    df, _ = qa.load_quik("smoke", tmp_path)
    assert len(df) == 5 and df["obs_id"].is_unique
    df = df.iloc[:3]
    v = qa.verdict_q1(df, "smoke")
    assert v.verdict == "pending"  # RTN and SmoothQuant rows are missing


def test_row_fields_say_training_in_fmt_w_and_the_ptq_in_fmt_post():
    """Every method's row: fmt_w/fmt_a/fmt_kv and bits_* are the checkpoint's training precision (none / 16),
    fmt_post/bits_post the post-training weight format, ptq_method none for the unquantized row."""
    from bitlaws.study import quik_accuracy as qa

    fields = {s.key: qa._row_fields(s) for s in qa.method_specs(ablations=True)}
    for key, f in fields.items():
        assert {c: f[c] for c in ("fmt_w", "fmt_a", "fmt_kv", "bits_w", "bits_a", "bits_kv")} == {
            "fmt_w": "none", "fmt_a": "none", "fmt_kv": "none", "bits_w": 16, "bits_a": 16, "bits_kv": 16}, key
        assert f["fmt_post"] == ("none" if f["bits_post"] == 16 else f"int{f['bits_post']}"), key
        assert f["bits_post"] == f["bits_w_post"], key
        assert "bf16" not in f.values(), key
    assert {k: (f["ptq_method"], f["fmt_post"], f["bits_post"], f["bits_a_post"]) for k, f in fields.items()
            if k in ("fp", "quik_w4a4", "quik_w8a8", "rtn_w4a4", "smoothquant_w8a8", "gptq_w4a16")} == {
        "fp": ("none", "none", 16, 16), "quik_w4a4": ("quik", "int4", 4, 4), "quik_w8a8": ("quik", "int8", 8, 8),
        "rtn_w4a4": ("rtn_wa", "int4", 4, 4), "smoothquant_w8a8": ("smoothquant", "int8", 8, 8),
        "gptq_w4a16": ("gptq", "int4", 4, 16)}


def _committed_quik_csv():
    from bitlaws.study.claims import repo_root

    return repo_root() / "data" / "runs" / "cpu" / "quik_accuracy.csv"


def test_committed_quik_obs_ids_are_the_hashes_of_their_methods():
    """Every committed obs_id is _obs_id(run_id, its method's spec, the cpu setting), recomputed now:
    the columns' convention changed no id."""
    import pandas as pd

    from bitlaws.study import quik_accuracy as qa

    df = pd.read_csv(_committed_quik_csv(), dtype=str)
    specs = {s.key: s for s in qa.method_specs(ablations=True)}
    assert set(df["method"]) == set(specs)
    got = [qa._obs_id(r.run_id, specs[r.method], qa.SETTINGS["cpu"]) for r in df.itertuples()]
    assert got == list(df["obs_id"])
    assert list(df["experiment"]) == [specs[m].experiment for m in df["method"]]


def _old_quik_text(path) -> str:
    """The committed QUIK file as written before 2026-12-01: no fmt_post, the post-training weight format
    in fmt_w (bf16 on the unquantized row), the activations' in fmt_a, ptq_method bf16 / gptq_bf16."""
    rows = list(csv.DictReader(open(path, newline="")))
    header = [c for c in rows[0] if c != "fmt_post"]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        r["fmt_w"] = "bf16" if r["ptq_method"] == "none" else r["fmt_post"]
        r["fmt_a"] = "none" if r["bits_a_post"] == "16" else "int" + r["bits_a_post"]
        r["ptq_method"] = {"none": "bf16", "gptq": "gptq_bf16"}.get(r["ptq_method"], r["ptq_method"])
        w.writerow([r[c] for c in header])
    return out.getvalue()


def test_migrate_quik_columns_maps_the_old_values_and_is_idempotent(tmp_path):
    from bitlaws.study import quik_accuracy as qa
    from bitlaws.study.store import StoreError, read_rows

    new = _committed_quik_csv().read_bytes()
    old = _old_quik_text(_committed_quik_csv())
    assert "gptq_bf16" in old and ",bf16," in old and "fmt_post" not in old
    path = tmp_path / "runs" / "smoke" / "quik_accuracy.csv"
    path.parent.mkdir(parents=True)
    path.write_text(old)
    with pytest.raises(StoreError, match=r"lacks the columns \['fmt_post'\].*migrate-store"):  # before any work
        qa.run_quik_experiment("smoke", root=tmp_path, progress=False)
    assert qa.migrate_quik_columns(path) == len(old.splitlines()) - 1
    assert path.read_bytes() == new  # exactly the committed file
    assert qa.migrate_quik_columns(path) == 0 and path.read_bytes() == new  # idempotent
    assert list(read_rows(path, qa.QUIK_COLUMNS, "obs_id").columns) == qa.QUIK_COLUMNS
    # a row whose old fmt_a disagrees with its bits_a_post is refused, and nothing is written
    bad = old.replace(",int4,int4,none,16,16,16,quik,", ",int4,int8,none,16,16,16,quik,", 1)
    assert bad != old
    path.write_text(bad)
    with pytest.raises(StoreError, match=r"line \d+: fmt_w 'int4' / fmt_a 'int8' disagree"):
        qa.migrate_quik_columns(path)
    assert path.read_text() == bad


def test_migrate_store_migrates_the_quik_file_with_its_own_rule(tmp_path, capsys):
    """`python -m bitlaws migrate-store --profile cpu` over a copy of the committed rows, QUIK's in the old
    form: every file comes out as committed (before, the QUIK file stopped the command)."""
    from bitlaws.cli import main

    src = _committed_quik_csv().parent
    dst = tmp_path / "runs" / "cpu"
    dst.mkdir(parents=True)
    for f in src.glob("*.csv"):
        shutil.copy(f, dst / f.name)
    old = _old_quik_text(src / "quik_accuracy.csv")
    (dst / "quik_accuracy.csv").write_text(old)
    assert main(["migrate-store", "--profile", "cpu", "--data-root", str(tmp_path)]) == 0
    assert f"quik_accuracy.csv: {len(old.splitlines()) - 1} rows migrated" in capsys.readouterr().out
    assert {f.name: f.read_bytes() for f in dst.glob("*.csv")} == {f.name: f.read_bytes() for f in src.glob("*.csv")}


# --------------------------------------------------------------------------- OPT and Falcon module names


def _tiny_lm(arch: str, seed: int = 0, **extra):
    """A random 2-layer, 64-wide OPT or Falcon causal LM built from its config (no download)."""
    from transformers import FalconConfig, FalconForCausalLM, OPTConfig, OPTForCausalLM

    torch.manual_seed(seed)
    if arch == "opt":
        cfg = OPTConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, ffn_dim=256, num_attention_heads=4,
                        max_position_embeddings=64, word_embed_proj_dim=extra.pop("word_embed_proj_dim", 64), **extra)
        return OPTForCausalLM(cfg).eval()
    cfg = FalconConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, **extra)
    return FalconForCausalLM(cfg).eval()


# per family: (short names of the quantized linears, the "down" layer)
_ARCH = {
    "opt": ({"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}, "fc2"),
    "falcon": ({"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}, "dense_4h_to_h"),
}


@pytest.mark.parametrize("arch", ["opt", "falcon"])
def test_quik_on_opt_and_falcon(arch):
    from bitlaws.ptq.quik import is_down, layer_index, quik_linears

    model = _tiny_lm(arch)
    calib = torch.randint(0, 128, (8, 32), generator=torch.Generator().manual_seed(1))
    shorts, down = _ARCH[arch]
    names = list(quik_linears(model))
    assert {n.rsplit(".", 1)[-1] for n in names} == shorts and len(names) == 2 * len(shorts)
    assert sorted({layer_index(n) for n in names}) == [0, 1]
    assert {n for n in names if is_down(n)} == {n for n in names if n.endswith(down)}
    # W4A4: every block linear a QuikLinear, the down layer at 8 bits with the larger k
    m4 = copy.deepcopy(model)
    rep = quik_quantize_(m4, calib, QuikConfig(bits_w=4, bits_a=4), modules="kernel")
    for n in names:
        mod = m4.get_submodule(n)
        assert isinstance(mod, QuikLinear), n
        want_bits, want_k = (8, 16) if n.endswith(down) else (4, 4)  # 1/16 of 256 and of 64 inputs
        assert (mod.bits, mod.n_outliers) == (want_bits, want_k), n
        assert rep[n]["bits_w"] == want_bits
    # lm_head and the embeddings stay 16-bit and unchanged
    assert type(m4.lm_head) is nn.Linear and torch.equal(m4.lm_head.weight, model.lm_head.weight)
    emb_new, emb_old = m4.get_input_embeddings(), model.get_input_embeddings()
    assert isinstance(emb_new, nn.Embedding) and torch.equal(emb_new.weight, emb_old.weight)
    n_quik = sum(isinstance(m, QuikLinear) for m in m4.modules())
    assert n_quik == len(names)
    # W8A8 stays close to the fp model; W4A4 is finite
    m8 = copy.deepcopy(model)
    quik_quantize_(m8, calib, QuikConfig(bits_w=8, bits_a=8), modules="kernel")
    with torch.no_grad():
        ref, y8, y4 = (m(input_ids=calib).logits for m in (model, m8, m4))
    assert torch.isfinite(y8).all() and torch.isfinite(y4).all()
    assert (ref - y8).norm() / ref.norm() < 0.03
    assert (ref - y4).norm() / ref.norm() > (ref - y8).norm() / ref.norm()
    # the per-channel statistics cover exactly the same linears (plus none of lm_head)
    assert set(activation_absmax(model, calib)) == set(names)


def test_opt_embedding_projections_stay_16bit():
    # OPT-350m style: word_embed_proj_dim != hidden_size adds project_in / project_out outside the blocks
    from bitlaws.ptq.quik import quik_linears

    model = _tiny_lm("opt", word_embed_proj_dim=32)
    calib = torch.randint(0, 128, (8, 32), generator=torch.Generator().manual_seed(1))
    assert not any("project" in n for n in quik_linears(model))
    for method in ("gptq", "rtn"):
        m = copy.deepcopy(model)
        quik_quantize_(m, calib, QuikConfig(bits_w=8, bits_a=8, weight_method=method), modules="kernel")
        for p in ("project_in", "project_out"):
            new, old = getattr(m.model.decoder, p), getattr(model.model.decoder, p)
            assert type(new) is nn.Linear and torch.equal(new.weight, old.weight), (method, p)
        with torch.no_grad():
            ref, y = model(input_ids=calib).logits, m(input_ids=calib).logits
        assert (ref - y).norm() / ref.norm() < 0.03


def test_layer_index_and_is_down():
    from bitlaws.ptq.quik import is_down, layer_index

    assert layer_index("model.layers.3.mlp.down_proj") == 3
    assert layer_index("model.decoder.layers.11.fc2") == 11
    assert layer_index("transformer.h.7.mlp.dense_4h_to_h") == 7
    assert layer_index("encoder.layer.2.output.dense") == 2
    assert layer_index("lm_head") == -1
    assert is_down("model.decoder.layers.0.fc2") and is_down("transformer.h.0.mlp.dense_4h_to_h")
    assert is_down("down_proj") and not is_down("model.decoder.layers.0.fc1")
    assert not is_down("transformer.h.0.self_attention.dense")


def test_load_causal_lm_from_disk_only(tmp_path):
    from bitlaws.study.quik_realmodel import load_causal_lm

    model = _tiny_lm("opt")
    model.save_pretrained(tmp_path / "opt")
    loaded = load_causal_lm(tmp_path / "opt")
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert not loaded.training
    # missing folder, config without weights, a hub name not in the cache: clear errors, no download
    with pytest.raises(FileNotFoundError, match="downloads nothing") as e:
        load_causal_lm(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(e.value)
    (tmp_path / "bare").mkdir()
    model.config.save_pretrained(tmp_path / "bare")
    with pytest.raises(FileNotFoundError, match="no weights") as e:
        load_causal_lm(str(tmp_path / "bare"))
    assert str(tmp_path / "bare") in str(e.value)
    with pytest.raises(FileNotFoundError, match="not on disk.*downloads nothing"):
        load_causal_lm("bitlaws-test-org/no-such-model-xyz")


def _method_rows(values):
    """Rows of quik_accuracy.csv as method_table reads them: {(size, n_params, method): loss_val}."""
    import pandas as pd

    return pd.DataFrame([{"size": s, "n_params": n, "method": m, "experiment": "quik_accuracy", "loss_val": v,
                          "ppl": math.exp(v), "n_tokens": 8388608}
                         for (s, n, m), v in values.items()])


def test_chapter_tables_of_the_byte_level_models():
    from bitlaws.study import quik_accuracy as qa

    rows = {("n1", 1, "fp"): 1.0, ("n1", 1, "quik_w4a4"): 1.1, ("n1", 1, "zzz_extra"): 1.3,
            ("n2", 2, "fp"): 0.9, ("n2", 2, "quik_w4a4"): 0.95, ("n2", 2, "quik_w4a4_down4"): 1.2,
            ("n2", 2, "rtn_w8a8"): 0.92}
    tab = qa.method_table(_method_rows(rows))
    assert qa.model_sizes(tab) == ["n1", "n2"]
    wide = qa.delta_table(tab)  # fp, the graded methods in their order, then the rest
    assert list(wide.index) == ["fp", "rtn_w8a8", "quik_w4a4", "quik_w4a4_down4", "zzz_extra"]
    assert wide.loc["quik_w4a4", "n1"] == pytest.approx(0.1) and math.isnan(wide.loc["rtn_w8a8", "n1"])
    abl = qa.ablation_table(tab)  # only the sizes that ran the ablations
    assert list(abl.columns) == ["n2"] and list(abl.index) == list(qa.ABLATIONS)
    assert abl.loc["quik_w4a4_down4", "n2"] == pytest.approx(0.3)
    cov = qa.coverage_numbers(_method_rows(rows), "smoke")
    assert cov["rows"] == 7 and cov["checkpoints"] == 2 and cov["sizes"] == "n1, n2" and cov["methods"] == 5
    assert cov["n_tokens"] == "8388608" and cov["n_calib"] == qa.SETTINGS["smoke"].n_calib


def test_outlier_statistics_count_a_shared_input_once():
    import pandas as pd

    from bitlaws.study import quik_accuracy as qa

    kinds = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    stats = pd.DataFrame([{"size": "n1", "layer_index": 0, "kind": k, "absmax_ratio": 2.0 + (k == "down_proj") * 10}
                          for k in kinds])
    st = qa.outlier_statistics(stats)
    assert sorted(st["kind"]) == ["down_proj", "gate/up_proj", "o_proj", "q/k/v_proj"]
    assert qa.outlier_numbers(st) == {"down_max": 12.0, "down_median": 12.0, "rest_max": 2.0, "rest_median": 2.0}

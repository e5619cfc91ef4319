"""Tests for bitlaws.train: schedule, data order, learning, determinism, resume, divergence, eval."""

import math
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bitlaws.train as T
from bitlaws.model import SMOKE_LADDER, build_model
from bitlaws.train import TrainConfig, batch_at, evaluate, lr_at, peak_lr_rule, train

torch.set_num_threads(1)

MODEL = SMOKE_LADDER["n3k"]
STEPS = 60
CFG = TrainConfig(n_tokens=STEPS * 8 * 64, batch_size=8, seq_len=64, eval_tokens=64 * 65, eval_batch_size=16,
                  log_every=10, ckpt_every=20, threads=1)


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_run(a, b) -> None:
    assert a.status == b.status == "ok"
    assert a.loss_val == b.loss_val  # bit-identical, not approximately
    assert a.loss_train == b.loss_train
    assert a.curve == b.curve
    pa, pb = _params(a.model), _params(b.model)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k


@pytest.fixture(scope="module")
def run(corpus):
    return train(MODEL, CFG, corpus=corpus, progress=False)


# ----------------------------------------------------------------- schedule


@pytest.mark.parametrize("total, warmup_frac, min_frac", [(100, 0.1, 0.1), (1000, 0.1, 0.1), (37, 0.2, 0.0)])
def test_lr_schedule_identities(total, warmup_frac, min_frac):
    peak = 3e-3
    warmup = round(warmup_frac * total)
    lr = [lr_at(s, total, peak, warmup_frac, min_frac) for s in range(total + 1)]
    assert lr[0] == pytest.approx(peak / warmup, rel=1e-12)
    for s in range(warmup):  # linear warmup: (s + 1)/warmup of the peak
        assert lr[s] == pytest.approx(peak * (s + 1) / warmup, rel=1e-12)
    assert lr[warmup - 1] == pytest.approx(peak, rel=1e-12)  # end of warmup
    assert lr[warmup] == pytest.approx(peak, rel=1e-12)  # cosine starts at the peak
    # the cosine ends at min_lr_frac·peak when the run ends (step == total_steps)
    assert abs(lr[total] - min_frac * peak) <= 1e-12
    # ... and the last optimizer step (total - 1) is one cosine notch above it
    notch = peak * (1 - min_frac) * 0.5 * (1 - math.cos(math.pi / (total - warmup)))
    assert lr[total - 1] - min_frac * peak == pytest.approx(notch, rel=1e-9)
    after = np.array(lr[warmup:])
    assert np.all(np.diff(after) < 0)  # strictly decreasing after warmup
    # midpoint of the cosine: halfway between peak and floor
    if (total - warmup) % 2 == 0:
        mid = warmup + (total - warmup) // 2
        assert lr[mid] == pytest.approx(peak * (1 + min_frac) / 2, rel=1e-12)


def test_lr_no_warmup():
    assert lr_at(0, 50, 1.0, warmup_frac=0.0, min_lr_frac=0.1) == 1.0


def test_peak_lr_rule():
    assert peak_lr_rule(64) == 3e-3
    assert peak_lr_rule(16) == pytest.approx(6e-3, rel=1e-15)
    assert peak_lr_rule(128) == pytest.approx(3e-3 / math.sqrt(2), rel=1e-15)
    assert CFG.peak_lr(MODEL) == peak_lr_rule(16)
    assert CFG.replace(lr=1e-3).peak_lr(MODEL) == 1e-3


# ----------------------------------------------------------------- data order


def test_batch_at_pure_contiguous_and_non_repeating():
    n, B, T_ = 5000, 4, 31
    tokens = np.arange(n, dtype=np.uint16)  # each token is its own position: row[0] is the start
    win = T_ + 1
    n_win = (n - T_) // win
    a = batch_at(tokens, 3, 7, B, T_)
    batch_at(tokens, 11, 9, B, T_)  # other calls in between (the pass order is cached)
    assert torch.equal(batch_at(tokens, 3, 7, B, T_), a)
    assert a.dtype == torch.int64 and a.shape == (B, win)
    assert not torch.equal(batch_at(tokens, 3, 8, B, T_), a)  # the seed changes the order

    steps_per_pass = n_win // B
    starts = []
    for step in range(steps_per_pass):
        batch = batch_at(tokens, step, 7, B, T_).numpy()
        for row in batch:
            start = int(row[0])
            assert np.array_equal(row, tokens[start:start + win].astype(np.int64))  # contiguous
            starts.append(start)
    starts = np.sort(starts)
    assert len(starts) == steps_per_pass * B
    assert np.all(np.diff(starts) >= win)  # no window repeats or overlaps within a pass
    assert len({s % win for s in starts}) == 1  # one offset per pass
    assert starts[0] < T_ and starts[-1] + win <= n
    # with B = 1, step i is window i: pass 0 is steps [0, n_win), pass 1 is [n_win, 2·n_win)
    p0 = [int(batch_at(tokens, i, 7, 1, T_)[0, 0]) for i in range(n_win)]
    p1 = [int(batch_at(tokens, i, 7, 1, T_)[0, 0]) for i in range(n_win, 2 * n_win)]
    assert p0[: len(starts)] == [int(r) for st in range(steps_per_pass)
                                 for r in batch_at(tokens, st, 7, B, T_)[:, 0]]  # rows are windows in order
    for p in (p0, p1):
        assert len(set(p)) == n_win and np.all(np.diff(np.sort(p)) >= win)
    assert p0 != p1  # each pass is a fresh permutation


def test_batch_at_real_split(corpus):
    batch = batch_at(corpus.train, 5, 0, 8, 64).numpy()
    train = np.asarray(corpus.train)
    for row in batch:
        hits = np.flatnonzero(train[: len(train) - 64] == row[0])
        for k in range(1, 65):  # keep the positions whose next k tokens also match
            hits = hits[train[hits + k] == row[k]]
        assert len(hits) >= 1
        assert np.array_equal(train[hits[0]:hits[0] + 65], row)


def test_batch_at_too_short():
    with pytest.raises(ValueError, match="fewer than two windows"):
        batch_at(np.zeros(100, dtype=np.uint8), 0, 0, 2, 64)


# ----------------------------------------------------------------- training


def test_training_learns(run):
    assert run.status == "ok"
    assert run.steps == STEPS and run.n_tokens == STEPS * 8 * 64
    assert run.loss_val < 4.0 < math.log(256)  # well below the uniform byte model
    assert run.loss_train < 4.0
    assert [p["step"] for p in run.curve] == list(range(10, STEPS + 1, 10))
    assert run.curve[-1]["loss_train"] < run.curve[0]["loss_train"]
    assert run.curve[0]["lr"] == pytest.approx(lr_at(9, STEPS, peak_lr_rule(16)))
    assert not run.model.training
    assert run.n_params == 3376


def test_deterministic(run, corpus):
    _same_run(run, train(MODEL, CFG, corpus=corpus, progress=False))


def test_seed_changes_run(run, corpus):
    other = train(MODEL, CFG.replace(seed=1, n_tokens=10 * 8 * 64), corpus=corpus, progress=False)
    assert not torch.equal(other.model.lm_head.weight, run.model.lm_head.weight)


def test_resume_is_bit_identical(run, corpus, tmp_path, monkeypatch):
    part = train(MODEL, CFG, corpus=corpus, run_dir=tmp_path, progress=False, stop_after=40)
    assert part.status == "interrupted" and math.isnan(part.loss_val)
    assert (tmp_path / "state.pt").exists()
    state = torch.load(tmp_path / "state.pt", weights_only=False)
    assert state["step"] == 40
    steps_run = []
    monkeypatch.setattr(T, "batch_at", lambda tok, step, *a: steps_run.append(step) or batch_at(tok, step, *a))
    resumed = train(MODEL, CFG, corpus=corpus, run_dir=tmp_path, progress=False)
    assert steps_run == list(range(40, STEPS))  # it resumed, rather than starting over
    _same_run(run, resumed)
    assert not (tmp_path / "state.pt").exists()


def test_budget_past_max_epochs(corpus):
    n_train = len(corpus.train)
    cfg = CFG.replace(max_epochs=0.001)
    assert cfg.tokens_trained > 0.001 * n_train
    with pytest.raises(ValueError, match=r"0\.001 passes over the 'shakespeare' training split") as err:
        train(MODEL, cfg, corpus=corpus, progress=False)
    assert f"{n_train:,}" in str(err.value)


def test_seq_len_past_context(corpus):
    cfg = CFG.replace(seq_len=128, n_tokens=8 * 128 * 2, eval_tokens=129 * 4)
    with pytest.raises(ValueError, match="max_seq_len=64"):
        train(MODEL, cfg, corpus=corpus, progress=False)


def test_eval_budget_past_val_split(corpus):
    with pytest.raises(ValueError, match="eval_tokens"):
        train(MODEL, CFG.replace(eval_tokens=len(corpus.val) + 1), corpus=corpus, progress=False)


@pytest.mark.parametrize("kwargs, field", [
    ({"lr": -1.0}, "lr"), ({"lr": math.inf}, "lr"),
    ({"warmup_frac": 1.0}, "warmup_frac"), ({"min_lr_frac": -0.1}, "min_lr_frac"),
    ({"n_tokens": 8 * 64 - 1}, "n_tokens"), ({"batch_size": 0}, "batch_size"),
    ({"seq_len": 2.5}, "seq_len"), ({"ckpt_every": -1}, "ckpt_every"),
    ({"weight_decay": -0.1}, "weight_decay must be ≥ 0"), ({"grad_clip": 0.0}, "grad_clip must be > 0"),
    ({"eps": -1e-8}, "eps must be > 0"), ({"max_epochs": 0}, "max_epochs must be > 0"),
])
def test_train_config_validation(kwargs, field):
    base = dict(n_tokens=8 * 64, batch_size=8, seq_len=64)
    with pytest.raises(ValueError, match=f"TrainConfig.{field}"):
        TrainConfig(**{**base, **kwargs})


def test_steps_round_down():
    cfg = TrainConfig(n_tokens=3 * 512 + 511, batch_size=8, seq_len=64)
    assert cfg.steps == 3 and cfg.tokens_trained == 1536


def test_diverged_run_is_reported_not_raised(corpus, monkeypatch):
    calls = {"n": 0}

    def nan_after_12(logits, target, **kw):
        calls["n"] += 1
        loss = F.cross_entropy(logits, target, **kw)
        return loss * math.nan if calls["n"] > 12 else loss

    monkeypatch.setattr(T, "F", types.SimpleNamespace(cross_entropy=nan_after_12))
    cfg = CFG.replace(log_every=5)
    res = train(MODEL, cfg, corpus=corpus, progress=False)
    assert res.status == "diverged"
    assert math.isnan(res.loss_val)
    assert calls["n"] == 13  # stopped at the first NaN step, no evaluation
    assert [p["step"] for p in res.curve] == [5, 10, 12]
    assert math.isnan(res.curve[-1]["loss_train"])
    assert all(math.isfinite(p["loss_train"]) for p in res.curve[:-1])


class _ConstLogits(nn.Module):
    """A stub LM whose logits are the same vector at every position."""

    def __init__(self, vec: torch.Tensor):
        super().__init__()
        self.register_buffer("vec", vec)

    def forward(self, input_ids):
        b, t = input_ids.shape
        return types.SimpleNamespace(logits=self.vec.expand(b, t, -1))


def test_evaluate_uniform_is_ln256(corpus):
    model = _ConstLogits(torch.zeros(256)).train()
    loss = evaluate(model, corpus.val, seq_len=64, eval_tokens=65 * 40, batch_size=16)
    assert loss == pytest.approx(math.log(256), rel=1e-6)  # float32 logsumexp of 256 zeros
    assert model.training  # mode restored


def test_evaluate_unigram_oracle(corpus):
    # A fixed logit vector c: loss = mean over targets of logsumexp(c) - c[target], where the targets
    # are every token of each (T+1)-window of the first eval_tokens tokens but the window's first.
    rng = np.random.default_rng(0)
    c = rng.standard_normal(256)
    seq_len, eval_tokens = 32, 33 * 50 + 7  # a partial window at the end is dropped
    val = np.asarray(corpus.val[: 33 * 50], dtype=np.int64).reshape(50, 33)
    lse = math.log(np.exp(c).sum())
    want = float(np.mean(lse - c[val[:, 1:]]))
    got = evaluate(_ConstLogits(torch.tensor(c, dtype=torch.float32)), corpus.val, seq_len, eval_tokens, 7)
    assert got == pytest.approx(want, rel=1e-5)


def test_evaluate_bad_budget(corpus):
    m = _ConstLogits(torch.zeros(256))
    with pytest.raises(ValueError, match="shorter than one window"):
        evaluate(m, corpus.val, 64, 64)
    with pytest.raises(ValueError, match="exceeds the validation split"):
        evaluate(m, corpus.val[:1000], 64, 65 * 20)


# ----------------------------------------------------------------- devices, autocast, accumulation, run ids

from pathlib import Path  # noqa: E402

from bitlaws.precision import TrainPrecision, apply_precision_  # noqa: E402
from bitlaws.quant import choose_qparams, dequantize, quantize  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kwargs, pattern", [
    ({"device": "gpu"}, "TrainConfig.device must be one of cpu, cuda, auto"),
    ({"device": "cuda:0"}, "TrainConfig.device must be one of"),
    ({"grad_accum": 0}, "TrainConfig.grad_accum must be a positive int"),
    ({"grad_accum": 3}, "grad_accum=3 must divide batch_size=8"),
    ({"compile": "yes"}, "TrainConfig.compile must be True or False"),
])
def test_execution_fields_validated(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        TrainConfig(n_tokens=8 * 64, batch_size=8, seq_len=64, **kwargs)


def test_resolve_device():
    assert T.resolve_device("cpu") == torch.device("cpu")
    assert T.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be one of"):
        T.resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where CUDA is missing")
def test_cuda_without_cuda_is_a_clear_error(corpus, tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match="device='cuda' but CUDA is not available here"):
        train(MODEL, CFG.replace(device="cuda"), corpus=corpus, progress=False)
    from bitlaws.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "--model.size=n3k", "--train.device=cuda", "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "'auto'" in err
    assert not (tmp_path / "runs").exists()  # refused before any work


def test_execution_defaults_stay_out_of_config_dict():
    """So adding the fields left every run id as it was; non-default values are recorded."""
    d = T.config_dict(MODEL, CFG)
    assert not {"device", "grad_accum", "compile"} & set(d["train"])
    d2 = T.config_dict(MODEL, CFG.replace(device="auto", grad_accum=2, compile=True))
    assert (d2["train"]["device"], d2["train"]["grad_accum"], d2["train"]["compile"]) == ("auto", 2, True)


def test_committed_run_and_obs_ids_recomputed_from_their_configs():
    """Every run_id and obs_id in data/runs/cpu/*.csv is the hash of a planned config, recomputed now."""
    import pandas as pd

    from bitlaws.study.sweep import _BUILDERS, plan

    specs = {e: plan("cpu", e) for e in _BUILDERS}
    run_ids = {s.run_id for v in specs.values() for s in v}
    checked = 0
    for path in sorted((_ROOT / "data" / "runs" / "cpu").glob("*.csv")):
        df = pd.read_csv(path, low_memory=False)
        if "run_id" not in df:
            continue
        got = set(df["run_id"].dropna())
        assert got and got <= run_ids, (path.name, sorted(got - run_ids)[:3])
        exp = path.stem.removesuffix("_curves")
        if exp in specs and "obs_id" in df:
            obs = {o for s in specs[exp] for o in s.obs_ids}
            assert set(df["obs_id"]) <= obs, path.name
        checked += len(got)
    assert checked > 100
    # and a few by value, as committed
    base = pd.read_csv(_ROOT / "data" / "runs" / "cpu" / "base_grid.csv")
    by_key = {(s.size, s.train.n_tokens, s.train.seed): s.run_id for s in specs["base_grid"]}
    for _, r in base[base["ptq_method"] == "none"].head(5).iterrows():
        assert by_key[(r["size"], int(r["n_tokens"]), int(r["seed"]))] == r["run_id"]


def test_grad_accum_is_the_same_step(corpus):
    """Two micro-batches of 4 sum to the gradient of the batch of 8: the same run up to rounding."""
    cfg = CFG.replace(n_tokens=20 * 8 * 64, ckpt_every=0)
    one = train(MODEL, cfg, corpus=corpus, progress=False)
    two = train(MODEL, cfg.replace(grad_accum=2), corpus=corpus, progress=False)
    assert two.status == "ok" and two.steps == one.steps
    assert two.loss_val == pytest.approx(one.loss_val, abs=1e-4)
    for a, b in zip(one.curve, two.curve):
        assert (a["step"], a["n_tokens_seen"]) == (b["step"], b["n_tokens_seen"])
        assert b["loss_train"] == pytest.approx(a["loss_train"], abs=1e-4)


def test_cuda_path_on_the_cpu_with_bf16_autocast(corpus, monkeypatch):
    """The CUDA branch of the loop (autocast, fp32 master weights, accumulation, quantizers) run on
    the CPU with bf16 autocast in place of CUDA's: it trains, and evaluation can autocast too."""
    monkeypatch.setattr(T, "_autocast", lambda device: torch.autocast("cpu", dtype=torch.bfloat16))
    prec = TrainPrecision.of(w=4, a=8, kv=8)
    cfg = CFG.replace(n_tokens=30 * 8 * 64, ckpt_every=0, grad_accum=2)
    res = train(SMOKE_LADDER["n14k"], cfg, corpus=corpus, progress=False, precision=prec)
    assert res.status == "ok" and math.isfinite(res.loss_val)
    assert res.curve[-1]["loss_train"] < res.curve[0]["loss_train"] - 0.3
    assert all(p.dtype == torch.float32 for p in res.model.parameters())  # master weights stay fp32
    amp = evaluate(res.model, corpus.val, cfg.seq_len, cfg.eval_tokens, cfg.eval_batch_size, autocast=True)
    assert amp == pytest.approx(res.loss_val, abs=0.05)


@pytest.mark.parametrize("w, a, kv", [(4, 8, 8), ("fp4_e2m1fn", "fp8_e4m3fn", "fp6_e3m2fn")])
def test_precision_hooks_under_bf16_autocast(monkeypatch, w, a, kv):
    """Under CPU bf16 autocast every fake-quantized tensor (weights, linear inputs, K and V) keeps its
    input's dtype and lands on the format's grid: re-quantizing it with the scale of its input gives
    the codes of the input exactly (a bf16 result is one rounding of a grid point, never a neighbour);
    and gradients reach every latent weight through the straight-through rounding."""
    import bitlaws.precision as P

    seen = []

    def record(x, spec):
        y = P_fake(x, spec)
        seen.append((x.detach(), y.detach(), spec))
        return y

    P_fake = P.fake_quantize
    monkeypatch.setattr(P, "fake_quantize", record)
    from bitlaws.model import build_model

    model = build_model(SMOKE_LADDER["n14k"], seed=0)
    apply_precision_(model, TrainPrecision.of(w=w, a=a, kv=kv))
    ids = torch.randint(0, 256, (2, 33), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(input_ids=ids[:, :-1]).logits
    loss = F.cross_entropy(logits.float().reshape(-1, 256), ids[:, 1:].reshape(-1))
    loss.backward()
    dtypes = {x.dtype for x, _, _ in seen}
    assert torch.bfloat16 in dtypes and torch.float32 in dtypes  # both kinds of input were quantized
    n_layers = SMOKE_LADDER["n14k"].n_layers
    # 7 weights (also once more each when the parametrization is registered), 7 linear inputs, K and V
    assert len(seen) == n_layers * (7 + 7 + 7 + 2)
    for x, y, spec in seen:
        assert y.dtype == x.dtype and torch.isfinite(y).all()
        scale, zero = choose_qparams(x.float(), spec.fmt, spec.granularity, symmetric=True)
        want = quantize(x.float(), scale, zero, spec.fmt, symmetric=True)
        got = quantize(y.float(), scale, zero, spec.fmt, symmetric=True)
        assert torch.equal(got, want)
        if y.dtype == torch.float32:  # fp32: exactly the grid value
            assert torch.equal(y, dequantize(want, scale, zero))
    from bitlaws.ptq import block_linears

    for name, lin in block_linears(model).items():
        g = lin.parametrizations.weight.original.grad
        assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0, name


# ----------------------------------------------------------------------------------------------
# evaluation layouts, schedules and the training fraction (issue 15)

def test_eval_windows_layouts():
    first = T.eval_windows(10_000, 63, 64 * 20, "first")
    assert first.tolist() == [64 * i for i in range(20)]
    spread = T.eval_windows(10_000, 63, 64 * 20, "spread")
    # evenly spaced from the first token to the last full window, never overlapping
    assert spread[0] == 0 and spread[-1] == 10_000 - 64 and np.all(np.diff(spread) >= 64)
    assert np.all(np.abs(np.diff(spread) - (10_000 - 64) / 19) < 1)
    # a budget of the whole split: both layouts are the same tiling
    assert T.eval_windows(64 * 20, 63, 64 * 20, "spread").tolist() == first.tolist()
    with pytest.raises(ValueError, match="layout"):
        T.eval_windows(10_000, 63, 640, "random")
    with pytest.raises(ValueError, match="exceeds"):
        T.eval_windows(1_000, 63, 64 * 20, "spread")


def test_evaluate_spread_reads_the_spread_windows(corpus):
    """The spread loss is the mean over exactly the windows eval_windows names (an oracle model)."""
    model = build_model(MODEL, seed=0).eval()
    val = corpus.val
    starts = T.eval_windows(len(val), 64, 65 * 6, "spread")
    want = []
    with torch.no_grad():
        for s in starts:
            w = torch.from_numpy(np.asarray(val[s:s + 65], dtype=np.int64))[None]
            logits = model(input_ids=w[:, :-1]).logits
            want.append(F.cross_entropy(logits[0], w[0, 1:], reduction="sum").item())
    got = evaluate(model, val, 64, 65 * 6, batch_size=4, layout="spread")
    assert math.isclose(got, sum(want) / (6 * 64), rel_tol=1e-6)
    assert not math.isclose(got, evaluate(model, val, 64, 65 * 6, batch_size=4, layout="first"), rel_tol=1e-6)


def test_schedules():
    c = TrainConfig(n_tokens=16 * 256 * 100)
    assert all(T.schedule_lr(i, c, 1e-3) == lr_at(i, 100, 1e-3, 0.1, 0.1) for i in range(100))  # to the bit
    const = TrainConfig(n_tokens=16 * 256 * 100, schedule="constant", warmup_steps=10)
    wsd = TrainConfig(n_tokens=16 * 256 * 120, schedule="wsd", warmup_steps=10, decay_tokens=16 * 256 * 20)
    assert [T.schedule_lr(i, const, 1.0) for i in (0, 9, 10, 99)] == [0.1, 1.0, 1.0, 1.0]
    assert all(T.schedule_lr(i, wsd, 1.0) == T.schedule_lr(i, const, 1.0) for i in range(100))  # the branch
    assert math.isclose(T.schedule_lr(119, wsd, 1.0), 0.1) and T.schedule_lr(100, wsd, 1.0) < 1.0
    assert all(T.schedule_lr(i + 1, wsd, 1.0) < T.schedule_lr(i, wsd, 1.0) for i in range(100, 119))
    for kwargs, field in [({"schedule": "step"}, "schedule"), ({"schedule": "wsd"}, "decay_tokens"),
                          ({"decay_tokens": 4096}, "decay_tokens"), ({"warmup_steps": -1}, "warmup_steps"),
                          ({"train_fraction": 0.0}, "train_fraction"), ({"train_fraction": 1.5}, "train_fraction")]:
        with pytest.raises(ValueError, match=field):
            TrainConfig(n_tokens=16 * 256 * 100, **kwargs)


def test_added_fields_stay_out_of_config_dict_at_their_defaults():
    base = T.config_dict(MODEL, CFG)["train"]
    assert not {"schedule", "warmup_steps", "decay_tokens", "train_fraction"} & set(base)
    d = T.config_dict(MODEL, CFG.replace(schedule="constant", warmup_steps=2, train_fraction=0.5))["train"]
    assert (d["schedule"], d["warmup_steps"], d["train_fraction"]) == ("constant", 2, 0.5)


def test_wsd_run_branches_from_the_constant_run_bit_for_bit(corpus):
    """A WSD run of D + C tokens is, at step D, the constant-LR run of D tokens: the same weights."""
    const = CFG.replace(schedule="constant", warmup_steps=2)
    wsd = CFG.replace(n_tokens=CFG.n_tokens + 4 * 8 * 64, schedule="wsd", warmup_steps=2, decay_tokens=4 * 8 * 64)
    a = train(MODEL, const, corpus, progress=False)
    b = train(MODEL, wsd, corpus, progress=False, stop_after=const.steps)
    assert b.status == "interrupted"
    for (k, v), (_, w) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(v, w), k


def test_train_fraction_reads_only_the_leading_part(corpus, monkeypatch):
    seen = []
    real = T.batch_at

    def spy(tokens, step, seed, batch_size, seq_len):
        seen.append(len(tokens))
        return real(tokens, step, seed, batch_size, seq_len)

    monkeypatch.setattr(T, "batch_at", spy)
    train(MODEL, CFG.replace(train_fraction=0.25), corpus, progress=False)
    assert set(seen) == {int(len(corpus.train) * 0.25)}
    with pytest.raises(ValueError, match="passes"):  # the limit counts passes over the part trained on
        train(MODEL, CFG.replace(n_tokens=int(len(corpus.train) * 0.25 * 4.5), batch_size=8, seq_len=64,
                                 train_fraction=0.25), corpus, progress=False)

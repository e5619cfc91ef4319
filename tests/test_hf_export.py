"""A committed checkpoint as a Hugging Face folder: ``from_pretrained`` rebuilds the same model
(bf16 weights upcast exactly) and the tokenizer's ids are the corpus's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bitlaws import cli
from bitlaws.study.checkpoints import byte_tokenizer, export_hf_folder, load_checkpoint

CKPT = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "cpu" / "n27k_D524288_s0.safetensors"


def test_byte_tokenizer_ids_are_utf8_bytes():
    tok = byte_tokenizer()
    for text in ("ROMEO: To be, or not to be?\n", "é ∑ 😀", "\t  two  spaces"):
        ids = tok(text).input_ids
        assert ids == list(text.encode("utf-8"))
        assert tok.decode(ids) == text
    assert len(tok) == 256 and tok.all_special_ids == []


@pytest.mark.skipif(not CKPT.exists(), reason="the committed cpu checkpoints are not in this checkout")
def test_hf_folder_loads_the_committed_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = export_hf_folder(CKPT, tmp_path / CKPT.stem)
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in out.iterdir()}
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(out)
    ref, meta = load_checkpoint(CKPT)
    ids = tok("ROMEO: é\n", return_tensors="pt").input_ids
    assert ids[0].tolist() == list("ROMEO: é\n".encode())
    with torch.no_grad():
        # the same bf16 weights upcast alike, the same Llama code: equal up to kernel rounding
        torch.testing.assert_close(model(ids).logits, ref(ids).logits, rtol=1e-6, atol=1e-6)
    assert meta["run_id"] in (out / "README.md").read_text()


def test_export_hf_cli_names_the_missing_checkpoints(tmp_path, capsys):
    assert cli.main(["export-hf", "--profile", "cpu", "--data-root", str(tmp_path), "--out", str(tmp_path / "hf")]) == 2
    assert "export-checkpoints --profile cpu" in capsys.readouterr().err

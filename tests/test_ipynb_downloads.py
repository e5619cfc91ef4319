"""The chapters' downloadable notebooks (book/_ext/ipynb_downloads.py): the install cell first,
then the chapter's own cells unchanged."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ipynb_downloads", ROOT / "book" / "_ext" / "ipynb_downloads.py")
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)


def test_chapter_notebook_puts_the_install_cell_first():
    md = ROOT / "notebooks" / "00-number-formats.md"
    nb = ext.chapter_notebook(md, "https://github.com/example/bitlaws")
    own = jupytext.read(md)
    assert nb.cells[0].cell_type == "code" and nb.cells[0].metadata["tags"] == ["install"]
    assert "git\", \"clone\", \"--depth\", \"1\", \"https://github.com/example/bitlaws\"" in nb.cells[0].source
    assert [c.source for c in nb.cells[1:]] == [c.source for c in own.cells]
    compile(nb.cells[0].source, "install", "exec")  # the install cell is valid Python
    with pytest.raises(ValueError, match="http"):
        ext.chapter_notebook(md, "git@github.com:x/y")

"""Each notebook's RECOMPUTE path on the `smoke` profile: the chapter reruns the sweep behind its
CSV with the package's own functions, in a temporary data folder, and its assert cells pass.

(The default path, from the committed CSVs, runs under nbval and in the book build.)
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
# Chapters that read no run data (chapter 00 computes everything it shows) have no RECOMPUTE path.
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.md") if "BITLAWS_RECOMPUTE" in p.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_recompute_on_smoke(path, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("BITLAWS_DATA", str(data))
    monkeypatch.setenv("BITLAWS_PROFILE", "smoke")
    monkeypatch.setenv("BITLAWS_RECOMPUTE", "1")
    monkeypatch.setenv("BITLAWS_CACHE", str(tmp_path / "cache"))
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    # The recompute wrote its rows where we pointed it, not into the repository.
    written = list((data / "runs" / "smoke").glob("*.csv"))
    assert written, "RECOMPUTE wrote no CSV under BITLAWS_DATA"
    grid = data / "runs" / "smoke" / "base_grid.csv"
    if grid.exists():
        from bitlaws.study.sweep import plan

        expected = sum(len(s.obs_ids) for s in plan("smoke"))
        assert len(grid.read_text().splitlines()) - 1 == expected

"""Every name a chapter reads is bound somewhere in it: a cheap guard against a renamed module
whose uses were left behind (the chapters run only in the slower notebook tests)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.md"))
# names the kernel provides without an import
KERNEL = {"display", "get_ipython", "In", "Out"}


def _unbound(source: str) -> set[str]:
    tree = ast.parse(source)
    bound, loaded = set(KERNEL) | set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_name_a_chapter_reads_is_bound(path):
    nb = jupytext.read(path)
    code = "\n\n".join(c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith("%"))
    assert _unbound(code) == set()


def test_the_check_finds_a_left_behind_module_name():
    assert _unbound("from bitlaws.study import figures\nplotting.apply_style()\n") == {"plotting"}

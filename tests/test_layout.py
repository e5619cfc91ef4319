"""The package's two layers, read from the source: the library never imports the study, no module
imports itself through a circle, and the README's layout map names every module in the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "bitlaws"
README = Path(__file__).resolve().parents[1] / "README.md"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> dict[str, bool]:
    """bitlaws modules imported by ``path`` -> True if any such import is at module level."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # "from . import x" may name a submodule
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for t in targets:
            if t.startswith("bitlaws") and (_exists(t)):
                out[t] = out.get(t, False) or id(node) in top_level
    out.pop(name, None)
    return out


def _exists(mod: str) -> bool:
    rel = Path(*mod.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}
GRAPH = {name: _imports(path) for name, path in MODULES.items()}
STUDY = {m for m in MODULES if m == "bitlaws.study" or m.startswith("bitlaws.study.")}
TOP = {"bitlaws.cli", "bitlaws.__main__"}
LIBRARY = set(MODULES) - STUDY - TOP


def test_the_library_never_imports_the_study_or_the_cli():
    bad = {m: sorted(t for t in GRAPH[m] if t in STUDY or t in TOP) for m in LIBRARY}
    assert {m: v for m, v in bad.items() if v} == {}


def test_laws_are_numpy_and_scipy_only():
    for m in (m for m in LIBRARY if m.startswith("bitlaws.laws")):
        tree = ast.parse(MODULES[m].read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
        assert not names & {"torch", "bitlaws", "transformers"}, (m, names)
        assert all(t.startswith("bitlaws.laws") for t in GRAPH[m]), (m, GRAPH[m])


def test_formats_and_quant_use_nothing_of_ours():
    assert set(GRAPH["bitlaws.formats"]) == set()
    assert set(GRAPH["bitlaws.quant"]) <= {"bitlaws.formats"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _without_packages(targets) -> set[str]:
    # "from . import x" in a package's module names the package too; a package's own
    # __init__ re-exporting its submodules is not a circle through them
    return {t for t in targets if not (PKG / Path(*t.split(".")[1:]) / "__init__.py").is_file()}


def test_no_import_circles():
    graph = {m: _without_packages(t) for m, t in GRAPH.items()}
    assert _cycle(graph) is None, _cycle(graph)


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_readme_layout_names_every_module():
    text = README.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    missing = []
    for name, path in MODULES.items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        rel = path.relative_to(PKG)
        folder = rel.parts[0] if len(rel.parts) > 1 else None
        stem = rel.stem
        # a module is named by "stem.py" on its own line, or inside its folder's line as "stem.py"
        # or "stem" followed by a parenthesis/comma
        if not re.search(rf"(?<![\w/]){re.escape(stem)}\.py\b", block) and not (
            folder and re.search(rf"{re.escape(folder)}/.*\b{re.escape(stem)}\b", block, flags=re.S)
        ):
            missing.append(str(rel))
    assert missing == []

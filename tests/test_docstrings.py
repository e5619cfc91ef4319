"""Module docstrings say what a module is in at most 15 lines; the design choices live on the book's
methods page (book/methods.md). The CLI's docstring is its --help text and names every command."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "bitlaws"
MAX_LINES = 15


def _docstring_lines(path: Path) -> int | None:
    """Lines of the module docstring of `path` (blank first/last lines not counted), None if it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return None if doc is None else len(doc.strip("\n").splitlines())


def test_line_count_reads_the_docstring_as_written(tmp_path):
    # the counter itself, on files whose answer is known
    cases = {'"""One line."""\n': 1, '"""First.\n\nThird.\n"""\nx = 1\n': 3, "x = 1\n": None,
             "# a comment\n" + '"""' + "\n".join(f"line {i}" for i in range(16)) + '\n"""\n': 16}
    for i, (text, want) in enumerate(cases.items()):
        f = tmp_path / f"m{i}.py"
        f.write_text(text, encoding="utf-8")
        assert _docstring_lines(f) == want, text


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_every_module_has_a_docstring_of_at_most_15_lines(path):
    n = _docstring_lines(path)
    assert n is not None, f"{path.relative_to(PKG)} has no module docstring"
    assert n <= MAX_LINES, (f"{path.relative_to(PKG)}: module docstring of {n} lines (at most {MAX_LINES}); "
                            "move the design choices to book/methods.md or to the function they describe")


def test_cli_help_names_every_command():
    from bitlaws import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    text = out.getvalue()
    choices = re.search(r"\{([a-z,-]+)\}", text)
    assert choices, text
    commands = choices.group(1).split(",")
    assert "train" in commands and "verdicts" in commands, commands
    named = set(re.findall(r"[a-z][a-z-]*", cli.__doc__.split("\n\n")[0]))
    assert [c for c in commands if c not in named] == []
    # the description is the docstring, shown without reStructuredText markup
    assert "``" not in text and "Command line: python -m bitlaws COMMAND" in text

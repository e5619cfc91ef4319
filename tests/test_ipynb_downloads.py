"""The chapters' downloadable notebooks (book/_ext/ipynb_downloads.py): the install cell first,
then the chapter's own cells unchanged; tools/unglue.py fills in an executed chapter's glue references."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ipynb_downloads", ROOT / "book" / "_ext" / "ipynb_downloads.py")
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)
_u = importlib.util.spec_from_file_location("unglue", ROOT / "tools" / "unglue.py")
unglue = importlib.util.module_from_spec(_u)
_u.loader.exec_module(unglue)


def test_chapter_notebook_puts_the_install_cell_first():
    md = ROOT / "notebooks" / "00-number-formats.md"
    nb = ext.chapter_notebook(md, "https://github.com/example/bitlaws")
    own = jupytext.read(md)
    assert nb.cells[0].cell_type == "code" and nb.cells[0].metadata["tags"] == ["install"]
    assert "git\", \"clone\", \"--depth\", \"1\", \"https://github.com/example/bitlaws\"" in nb.cells[0].source
    glued = any("{glue" in c.source for c in own.cells if c.cell_type == "markdown")
    assert glued  # chapter 00's prose quotes glued values: the note on filling them in follows its title
    assert own.cells[0].source.startswith("# ") and nb.cells[1].source == own.cells[0].source
    assert nb.cells[2].cell_type == "markdown" and nb.cells[2].source == ext.GLUE_NOTE
    assert [c.source for c in nb.cells[1:2] + nb.cells[3:]] == [c.source for c in own.cells]
    # the note names the syntax in code spans, which unglue leaves alone: no bogus "left as written"
    import nbformat

    assert unglue.unglue(nbformat.v4.new_notebook(cells=[nb.cells[2]])) == (0, [])
    compile(nb.cells[0].source, "install", "exec")  # the install cell is valid Python
    with pytest.raises(ValueError, match="http"):
        ext.chapter_notebook(md, "git@github.com:x/y")


def _glued(name, data):
    """An output as myst-nb's ``glue(name, value, display=False)`` leaves it in an executed notebook."""
    import nbformat

    return nbformat.v4.new_output("display_data", data={unglue.PREFIX + k: v for k, v in data.items()},
                                  metadata={"scrapbook": {"mime_prefix": unglue.PREFIX, "name": name}})


def test_unglue_fills_each_reference_from_what_the_cells_glued():
    import nbformat

    code = nbformat.v4.new_code_cell("glue(...)")
    code.outputs = [_glued("x", {"text/plain": "3.14159"}), _glued("who", {"text/plain": "'the weights'"}),
                    _glued("m", {"text/markdown": "**bold**", "text/plain": "<Markdown>"}),
                    _glued("fig", {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}),
                    nbformat.v4.new_output("display_data", data={"text/plain": "not glued"})]
    prose = nbformat.v4.new_markdown_cell(
        "Value {glue:text}`x:.2f`, {glue:text}`who`, {glue:md}`m`, {glue}`x` and {glue:text}`absent:.1f`.\n\n"
        "```{glue:figure} fig\n:alt: a line rising\n:name: fig-a\n\nThe caption,\nover two lines.\n```\n\nAfter.")
    nb = nbformat.v4.new_notebook(cells=[code, prose])
    filled, missing = unglue.unglue(nb)
    assert (filled, missing) == (5, ["absent"])
    assert nb.cells[1].source == ("Value 3.14, the weights, **bold**, 3.14159 and {glue:text}`absent:.1f`.\n\n"
                                  "![a line rising](attachment:fig.png)\n\n**Figure.** The caption, over two lines."
                                  "\n\nAfter.")
    assert nb.cells[1].attachments == {"fig.png": {"image/png": "iVBORw0KGgo="}}
    nbformat.validate(nb)  # still a valid notebook, attachments included
    # a code span naming the syntax is not a reference; a role right after one still is
    prose.source = "Write `{glue:text}` then {glue:text}`x:.1f`."
    assert unglue.unglue(nb) == (1, []) and prose.source == "Write `{glue:text}` then 3.1."
    # a cell the book hides keeps only its glue records (the figure shows once, where the prose puts it)
    hidden = nbformat.v4.new_code_cell("fig", metadata={"tags": ["remove-output"]})
    hidden.outputs = [_glued("fig", {"image/png": "iVBORw0KGgo="}),
                      nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})]
    nb.cells.append(hidden)
    unglue.unglue(nb)
    assert [o["metadata"]["scrapbook"]["name"] for o in hidden.outputs] == ["fig"]
    nb.cells.pop()
    # a figure glued without an image (no inline backend) is left as written, and said
    code.outputs = [_glued("fig", {"text/plain": "<Figure>"})]
    prose.source, prose.attachments = "```{glue:figure} fig\n\nCap.\n```", {}
    assert unglue.unglue(nb) == (0, ["fig"]) and prose.source == "```{glue:figure} fig\n\nCap.\n```"


def test_myst_folds_and_boxes_in_outputs_become_markdown_jupyter_renders():
    import nbformat

    from bitlaws.study.claims import CLAIMS, load_verdicts
    from bitlaws.study.summary import chapter_summary_markdown, verdict_markdown

    verdicts = load_verdicts()
    lead, fold = verdict_markdown(verdicts["P4"]).split("\n\n", 1)
    plain = unglue.plain_markdown(verdict_markdown(verdicts["P4"]))
    # the lead as it was; the fold a <details> with the dropdown's title as its summary, its body unchanged
    body = fold.split("\n", 1)[1].rsplit("\n```", 1)[0]
    assert plain == (f"{lead}\n\n<details>\n<summary>P4 in full: what we measured, and why this grade</summary>\n\n"
                     f"{body}\n\n</details>")
    assert "f<sub>a</sub>(4) (the most sensitive)" in plain  # the lead's subscripts are HTML Jupyter renders
    box = unglue.plain_markdown(chapter_summary_markdown("02-low-precision-training", verdicts, CLAIMS))
    assert box.startswith("**This chapter at a glance**\n\n**Reproduces**") and "{admonition}" not in box
    assert ":class:" not in box and "````" not in box
    # nested: a dropdown inside a box keeps its fold; other directives are left alone
    nested = "````{admonition} Box\n:class: tip\n\nText.\n\n```{dropdown} More\nInside.\n```\n````\n```{note}\nN\n```"
    assert unglue.plain_markdown(nested) == ("**Box**\n\nText.\n\n<details>\n<summary>More</summary>\n\nInside.\n\n"
                                             "</details>\n```{note}\nN\n```")
    # unglue converts the code cells' Markdown outputs
    cell = nbformat.v4.new_code_cell("v")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": verdict_markdown(verdicts["P4"])})]
    nb = nbformat.v4.new_notebook(cells=[cell])
    unglue.unglue(nb)
    assert cell.outputs[0]["data"]["text/markdown"] == plain and "{dropdown}" not in plain


def test_unglue_cli_refuses_what_it_cannot_fill(tmp_path, capsys):
    import nbformat

    assert unglue.main([]) == 2 and "usage" in capsys.readouterr().err
    assert unglue.main([str(tmp_path / "absent.ipynb")]) == 2 and "cannot read it as a notebook" in \
        capsys.readouterr().err
    (tmp_path / "bad.ipynb").write_text("not json")
    assert unglue.main([str(tmp_path / "bad.ipynb")]) == 2
    capsys.readouterr()
    for i, not_a_notebook in enumerate(("{}", "[]", '{"cells": 3, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}')):
        (tmp_path / f"json{i}.ipynb").write_text(not_a_notebook)  # JSON, but no notebook: one line, no traceback
        assert unglue.main([str(tmp_path / f"json{i}.ipynb")]) == 2
        assert "cannot read it as a notebook" in capsys.readouterr().err
    never_run = tmp_path / "never.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1"),
                                                   nbformat.v4.new_markdown_cell("{glue:text}`x`")]), never_run)
    assert unglue.main([str(never_run)]) == 1 and "run every cell, save" in capsys.readouterr().err

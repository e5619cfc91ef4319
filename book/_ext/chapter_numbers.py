"""Sphinx extension: each chapter numbers its own exercises from 1, and figures carry no number.

sphinx-exercise numbers its exercises through Sphinx's numfig, which it turns on for every build (its
``config-inited`` handler sets ``numfig = True`` over the book's ``numfig: false``). Without section numbers
(the book's table of contents numbers no chapter) numfig counts each kind of node across the whole book, so
chapter 02 opened at "Exercise 9" and its figures read "Fig. 9" to "Fig. 13". After Sphinx has assigned the
numbers (``env-get-updated``), this renumbers each page's exercises 1, 2, … in their order on the page, so an
exercise's title, its solution's title and a ``{ref}`` to it all read the page's own number; and it drops the
numbers of figures, tables and code blocks, as the book's ``numfig: false`` asks: the captions cite the papers'
figure numbers ("reproduces Fig. 2"), which a number of our own would contradict. The book cites no figure
by ``{numref}``; one would now fail the build (``--warningiserror``) instead of printing a book-wide number.
"""

from __future__ import annotations

# numfig's kinds of node whose numbers are dropped: the book's own figures, tables and code blocks
UNNUMBERED = ("figure", "table", "code-block")
# kinds numbered again from 1 on each page
PER_PAGE = ("exercise",)


def renumber(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]]) -> list[str]:
    """Number each page's ``PER_PAGE`` kinds 1, 2, … in the order numfig gave them, and drop ``UNNUMBERED``.

    Args:
        fignumbers: ``env.toc_fignumbers``, ``docname -> kind -> node id -> number`` (a tuple of ints); changed
            in place.

    Returns:
        The docnames whose numbers changed (Sphinx writes them again).
    """
    changed = []
    for docname, kinds in fignumbers.items():
        before = {kind: dict(ids) for kind, ids in kinds.items()}
        for kind in UNNUMBERED:
            kinds.pop(kind, None)
        for kind in PER_PAGE:
            ids = kinds.get(kind)
            if ids:
                kinds[kind] = {node_id: (i,) for i, node_id in enumerate(sorted(ids, key=ids.__getitem__), start=1)}
        if kinds != before:
            changed.append(docname)
    return changed


def _renumber(app, env) -> list[str]:
    return renumber(env.toc_fignumbers)


def setup(app):
    # after Sphinx's own collector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", _renumber, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

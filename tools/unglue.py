"""Fill in a chapter's ``{glue:…}`` references in an executed notebook, for reading it in plain Jupyter.

The book's prose quotes values that its code cells ``glue`` (myst-nb): ``{glue:text}`name:.3f```,
``{glue:md}`name``` and ``{glue:figure} name`` blocks. Sphinx fills them in when it builds the book; plain
Jupyter shows them as written. After ``make chapter`` executes a chapter, this replaces each reference in
its markdown cells with the value the executed cells glued (text/markdown or text/plain, formatted as
myst-nb formats it; a figure as an image attachment with its caption). A reference whose name no cell
glued is left as written and reported.

Usage: ``python tools/unglue.py build/chapters/04-compute-optimal.ipynb`` (rewrites it in place).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PREFIX = "application/papermill.record/"
ROLE = re.compile(r"\{glue(?::(text|md|any))?\}`([^`]+)`")
# a role, or a code span (group 3), scanned left to right: a span such as `{glue:text}` names the syntax
ROLE_OR_SPAN = re.compile(ROLE.pattern + r"|(`[^`\n]*`)")
FIGURE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue:figure\}\s+(?P<name>\S+)\s*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.S | re.M)


# a MyST dropdown or admonition fenced with backticks or colons (the fence's own length closes it, so a box may
# hold a shorter-fenced one), with its option lines (":class: tip") first in the body
DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<kind>dropdown|admonition)\}[ \t]*(?P<title>[^\n]*)\n"
                       r"(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M)


def plain_markdown(text: str) -> str:
    """MyST's ``dropdown`` and ``admonition`` directives in ``text`` as Markdown that Jupyter renders: a dropdown
    as ``<details><summary>title</summary>`` (folded, as in the book), an admonition as its title in bold above
    its body; nested ones alike. Other text is left as written."""
    def one(m: re.Match) -> str:
        lines = m.group("body").split("\n")
        while lines and re.match(r":\S+:", lines[0]):  # the directive's options
            lines.pop(0)
        body = plain_markdown("\n".join(lines).strip("\n"))
        title = m.group("title").strip()
        if m.group("kind") == "dropdown":
            return f"<details>\n<summary>{title or 'More'}</summary>\n\n{body}\n\n</details>"
        return (f"**{title}**\n\n" if title else "") + body

    return DIRECTIVE.sub(one, text)


def glued_values(nb) -> dict[str, dict[str, str]]:
    """``name -> {mime: data}`` of every output an executed notebook's cells glued (the papermill prefix
    removed); a name glued twice keeps its last value, as myst-nb does."""
    out: dict[str, dict[str, str]] = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = (o.get("metadata") or {}).get("scrapbook", {}).get("name")
            if name:
                data = o.get("data", {})
                out[name] = {k.removeprefix(PREFIX): "".join(v) if isinstance(v, list) else v for k, v in data.items()}
    return out


def _role(kind: str | None, ref: str, values: dict[str, dict[str, str]]) -> str | None:
    from myst_nb.core.variables import format_plain_text

    name, _, fmt = ref.partition(":")
    data = values.get(name.strip())
    if data is None:
        return None
    if kind in (None, "md", "any") and "text/markdown" in data:
        return plain_markdown(data["text/markdown"]).strip()
    if "text/plain" not in data:
        return None
    return format_plain_text(data["text/plain"], fmt if kind == "text" else "")


HIDDEN = ("remove-output", "remove-cell")


def unglue(nb):
    """Replace the ``{glue…}`` references of ``nb``'s markdown cells by the values its outputs glued.

    The outputs of code cells the book hides (tagged ``remove-output`` or ``remove-cell``) are dropped but for
    their glue records, so a glued figure shows once, where the prose places it, as in the book. References
    inside code spans (`` `…` ``) are left as written. The MyST dropdowns and admonitions in the cells'
    Markdown outputs (each verdict's fold, each chapter's opening box) become :func:`plain_markdown`, which
    Jupyter renders.

    Args:
        nb: an executed ``nbformat`` notebook (version 4); changed in place.

    Returns:
        ``(filled, missing)``: how many references were replaced, and the names no output glued (left as
        written).
    """
    values = glued_values(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and set(cell.metadata.get("tags", [])) & set(HIDDEN):
            cell.outputs = [o for o in cell.get("outputs", []) if (o.get("metadata") or {}).get("scrapbook")]
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:  # the verdicts' folds, the boxes
            md = (o.get("data") or {}).get("text/markdown")
            if md is not None:
                o["data"]["text/markdown"] = plain_markdown("".join(md) if isinstance(md, list) else md)
    filled, missing = 0, []

    def role(m: re.Match) -> str:
        nonlocal filled
        if m.group(3) is not None:  # a code span: left as written
            return m.group(0)
        text = _role(m.group(1), m.group(2), values)
        if text is None:
            missing.append(m.group(2).partition(":")[0])
            return m.group(0)
        filled += 1
        return text

    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        src, attachments = cell.source, dict(cell.get("attachments") or {})

        def figure(m: re.Match) -> str:
            nonlocal filled
            name = m.group("name")
            png = (values.get(name) or {}).get("image/png")
            if png is None:
                missing.append(name)
                return m.group(0)
            body = m.group("body").splitlines()
            opts = dict(re.match(r":(\S+):\s*(.*)", line).groups() for line in body if re.match(r":\S+:", line))
            caption = " ".join(line.strip() for line in body if line.strip() and not re.match(r":\S+:", line))
            attachments[f"{name}.png"] = {"image/png": png}
            filled += 1
            return f"![{opts.get('alt', name)}](attachment:{name}.png)\n\n**Figure.** {caption}"

        src = FIGURE.sub(figure, src)
        src = ROLE_OR_SPAN.sub(role, src)
        cell.source = src
        if attachments:
            cell["attachments"] = attachments
    return filled, missing


def main(argv: list[str]) -> int:
    import nbformat

    if len(argv) != 1 or not argv[0].endswith(".ipynb"):
        print("usage: python tools/unglue.py CHAPTER.ipynb (an executed notebook; rewritten in place)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)  # JSON that is not a notebook ({}, [], a wrong field) fails here, not later
    except (OSError, ValueError, AttributeError, TypeError, KeyError, nbformat.ValidationError) as exc:
        # absent, a folder, not JSON, or JSON that is not a notebook
        print(f"{path}: cannot read it as a notebook ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
        print(f"{path}: no cell has outputs, so nothing was glued: run every cell, save, then run this again",
              file=sys.stderr)
        return 1
    filled, missing = unglue(nb)
    nbformat.write(nb, path)
    print(f"{path}: {filled} glue references filled in"
          + (f"; {len(missing)} left as written (no output glued {', '.join(sorted(set(missing)))})" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Check every built page of the book in a real headless browser, with the network off.

Run it before you stop, after `make book` (it is not part of `make test`: Debian's chromium is not a
project dependency):

    python tools/page_check.py                       # every page of book/_build/html
    python tools/page_check.py --screenshots /tmp/shots notebooks/01-ptq-degradation.html

For each page it loads a copy with a small script added that waits for MathJax, then records:
raw TeX left in the text after rendering (``\\(``, ``$$``, ``\\mathrm``, inline ``$C_w$`` …, outside
code) or a MyST role left as text (``{math}``, ``{doc}``, ``{glue:md}`` …), images that did not load
or whose alt text is a file name, tables wider than the article column, and tables that overflow
their own scrolling box (a notebook output's ``overflow: auto``: the table fits the column, but its
right-hand columns are cut off until the reader scrolls sideways). It prints one line per page and
exits 1 if any page fails. ``--screenshots DIR`` also saves a 1400-px-wide PNG of each whole page
(``--height`` cuts it to a given height). ``--width 420`` checks and draws each page as a phone shows it:
the page is loaded in a frame of that width (chromium's own window is never narrower than about 500 px),
so the book's narrow-screen styles apply, and a table wider than the column or cut off by its scrolling
box fails the page as at 1400 px. The book checked is ``--html-root`` (default: the build beside this
script); a page may also be given by its own path (another clone's build, a chapter built alone),
relative to the working directory.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "book" / "_build" / "html"
SKIP = {"genindex.html", "search.html", "py-modindex.html"}
# No request leaves the machine: every host name fails to resolve and any proxy use fails.
NO_NETWORK = ["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]
MARK = "bitlaws-page-check"
MIN_HEIGHT, MAX_HEIGHT = 200, 30_000  # screenshot heights chromium draws (px)
MIN_WIDTH, MAX_WIDTH = 280, 1400  # viewport widths --width takes (px; 1400, the default, needs no frame)
WINDOW_WIDTH = 1400  # chromium's window; a narrower --width is a frame inside it

PROBE = r"""
<script>
window.addEventListener("load", async () => {
  try { if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; } } catch (e) {}
  await new Promise(r => setTimeout(r, 500));
  const out = {mathjax: !!(window.MathJax && MathJax.startup), images: 0, broken: [], no_alt: [], raw_tex: [],
               wide_tables: [], clipped_tables: [],
               height: Math.ceil(document.documentElement.scrollHeight)};
  const imgs = Array.from(document.querySelectorAll("article img, main img"));
  out.images = imgs.length;
  out.broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src"));
  out.no_alt = imgs.filter(i => !/[a-z]{3,} [a-z]/i.test(i.getAttribute("alt") || "")).map(i => i.getAttribute("src"));
  const scope = document.querySelector("article") || document.body;
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  // inline $...$ left unrendered too: "$C_w$", "$\bar r$" (a letter or a command right after the opening $)
  // and a MyST role left as text ("{math}`D`" in glued Markdown, which parses no roles)
  const tex = /\\\(|\\\)|\\\[|\\\]|\$\$|\\(mathrm|frac|gamma|delta|alpha|beta|cdot|le|ge|approx)(?![a-z])|\$[A-Za-z][^$\s]*\$|\$\\[a-z]+[^$]{0,30}\$|\{(math|doc|ref|numref|eq|cite(:[a-z]+)?|glue(:[a-z]+)?)\}/;
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (n.parentElement.closest("script, style, pre, code, mjx-container, .highlight, textarea, kbd")) continue;
    if (tex.test(n.textContent)) out.raw_tex.push(n.textContent.trim().slice(0, 100));
  }
  const column = scope.getBoundingClientRect();
  document.querySelectorAll("article table").forEach(t => {
    const r = t.getBoundingClientRect();
    if (r.width > column.width + 1 || r.right > column.right + 1) {
      out.wide_tables.push({first_cell: (t.querySelector("th, td") || {}).textContent || "",
                            width: Math.round(r.width), column: Math.round(column.width)});
    }
  });
  // a table inside a box that scrolls sideways (a cell output's overflow-x: auto) is cut off at the box's edge
  document.querySelectorAll("article table").forEach(t => {
    for (let a = t.parentElement; a && a !== scope.parentElement; a = a.parentElement) {
      if (!/(auto|scroll|hidden)/.test(getComputedStyle(a).overflowX)) continue;
      if (a.scrollWidth > a.clientWidth + 1) {
        out.clipped_tables.push({first_cell: (t.querySelector("th, td") || {}).textContent || "",
                                 width: Math.round(a.scrollWidth), box: Math.round(a.clientWidth)});
      }
      break;
    }
  });
  const pre = document.createElement("pre");
  pre.id = "MARK";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
  if (window.parent !== window) { window.parent.postMessage(pre.textContent, "*"); }  // in a --width frame
});
</script>
""".replace("MARK", MARK)


def chromium() -> str:
    """The path of Debian's chromium (``apt-get install chromium``), or exit with a clear message."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("page_check: no chromium on PATH; install Debian's package: apt-get install chromium")


def _run(browser: str, url: str, *extra: str, timeout: float = 120) -> str:
    """Chromium's stdout for ``url``; empty if it ran past ``timeout`` seconds (the caller reports the page)."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", *NO_NETWORK, f"--window-size={WINDOW_WIDTH},1000",
           *extra, url]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return ""


def _frame(page: Path, url: str, width: int, height: int) -> Path:
    """A page beside ``page`` that shows ``url`` in a frame ``width`` px wide and ``height`` px high, and copies
    the probe's report (a message from the frame) into its own body, where ``--dump-dom`` reads it."""
    frame = page.with_name(f".{MARK}-frame-{page.name}")
    frame.write_text(f"""<html><body style="margin:0">
<iframe src="{html.escape(url)}" style="width:{width}px;height:{height}px;border:0;display:block"></iframe>
<script>window.addEventListener("message", e => {{ const pre = document.createElement("pre"); pre.id = "{MARK}";
pre.textContent = e.data; document.body.appendChild(pre); }});</script>
</body></html>""", encoding="utf-8")
    return frame


def check_page(browser: str, page: Path, root: Path = BUILD, width: int | None = None) -> dict:
    """Load ``page`` (a built HTML file) with the probe and return what it found.

    Args:
        width: the viewport's width in px: None (or 1400) loads the page in chromium's 1400-px window; a narrower
            one loads it in a frame that wide (:func:`_frame`), as a phone's screen.

    Returns:
        ``{"page", "mathjax", "images", "broken", "no_alt", "raw_tex", "wide_tables", "clipped_tables", "height",
        "ok"}`` (``height``: the rendered page's height in px at that width; ``page``: relative to ``root``);
        ``ok`` is False on any broken image, image whose alt text is not words (a file name), raw TeX, wide
        table or table clipped by its scrolling box (``{"first_cell", "width", "box"}``: the content's and
        the box's width in px), or if the probe did not report.
    """
    probe = page.with_name(f".{MARK}-{page.name}")  # beside the page, so relative links resolve
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    found = None
    framed = width is not None and width != WINDOW_WIDTH
    try:
        url = _frame(page, probe.as_uri(), width, 1000).as_uri() if framed else probe.as_uri()
        # A busy machine can dump the DOM before MathJax is done: try again with more virtual time.
        for budget in (20_000, 60_000, 120_000):
            dom = _run(browser, url, "--dump-dom", f"--virtual-time-budget={budget}", timeout=300)
            found = re.search(rf'<pre id="{MARK}">(.*?)</pre>', dom, re.S)
            if found:
                break
    finally:
        probe.unlink(missing_ok=True)
        page.with_name(f".{MARK}-frame-{page.name}").unlink(missing_ok=True)
    rel = str(page.relative_to(root)) if page.is_relative_to(root) else str(page)
    if not found:
        return {"page": rel, "ok": False, "error": "the probe did not report (page failed to load?)"}
    result = json.loads(html.unescape(found.group(1)))
    result["page"] = rel
    result["ok"] = not any(result.get(k) for k in ("broken", "no_alt", "raw_tex", "wide_tables", "clipped_tables"))
    return result


def _is_redirect(page: Path) -> bool:
    """jupyter-book's index.html only redirects to the root page (a meta refresh, no content)."""
    head = page.read_text(encoding="utf-8", errors="replace")[:2000].lower()
    return 'http-equiv="refresh"' in head


def _crop(png: Path, width: int) -> None:
    """Cut a screenshot to its left ``width`` px (the frame; chromium's window is wider), where Pillow is installed
    (matplotlib's dependency, so in the book's environment); otherwise the PNG keeps the blank margin."""
    try:
        from PIL import Image
    except ImportError:
        return
    if png.exists():
        with Image.open(png) as im:
            cut = im.crop((0, 0, min(width, im.width), im.height))
        cut.save(png)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*",
                    help="pages: paths from the working directory, or relative to --html-root (default: every page)")
    ap.add_argument("--html-root", type=Path, default=BUILD,
                    help=f"the built book to check (default: {BUILD.relative_to(ROOT)} beside this script)")
    ap.add_argument("--screenshots", type=Path, default=None, help="folder for a PNG of each page")
    ap.add_argument("--height", type=int, default=None,
                    help=f"screenshot height in px, {MIN_HEIGHT} to {MAX_HEIGHT} (default: the whole page, at most "
                         f"{MAX_HEIGHT})")
    ap.add_argument("--width", type=int, default=WINDOW_WIDTH,
                    help=f"viewport width in px, {MIN_WIDTH} to {MAX_WIDTH} (default {WINDOW_WIDTH}); e.g. 420 for a "
                         "phone: the page is checked and drawn in a frame that wide")
    args = ap.parse_args(argv)
    if args.height is not None and not MIN_HEIGHT <= args.height <= MAX_HEIGHT:
        ap.error(f"--height must be {MIN_HEIGHT} to {MAX_HEIGHT} px; got {args.height}")
    if not MIN_WIDTH <= args.width <= MAX_WIDTH:
        ap.error(f"--width must be {MIN_WIDTH} to {MAX_WIDTH} px; got {args.width}")
    root = args.html_root.resolve()
    if not args.pages and not (root / "index.html").exists():
        sys.exit(f"page_check: {root}/index.html not found: build the book first (make book), "
                 "or name the built book with --html-root")
    pages = []
    for p in args.pages:
        here, there = Path(p), root / p
        if here.is_file():
            pages.append(here.resolve())
        elif there.is_file():
            pages.append(there)
        else:
            sys.exit(f"page_check: no page {p!r}: neither {here.resolve()} nor {there} is a file "
                     "(give a built .html page, from the working directory or relative to --html-root)")
    browser = chromium()
    pages = pages or sorted(p for p in root.rglob("*.html") if p.name not in SKIP and not p.name.startswith(".")
                            and not {"_static", "_sources", "_images"} & set(p.relative_to(root).parts)
                            and not _is_redirect(p))
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    failed = 0
    for page in pages:
        res = check_page(browser, page, root, width=args.width)
        failed += not res["ok"]
        if res.get("error"):
            print(f"FAIL {res['page']}: {res['error']}")
        else:
            print(f"{'ok  ' if res['ok'] else 'FAIL'} {res['page']}: {res['images']} images "
                  f"({len(res['broken'])} broken, {len(res['no_alt'])} without alt text), "
                  f"raw TeX {len(res['raw_tex'])}, wide tables {len(res['wide_tables'])}, "
                  f"clipped tables {len(res.get('clipped_tables', []))}, "
                  f"MathJax {'on' if res['mathjax'] else 'absent'}")
            for key in ("broken", "no_alt", "raw_tex", "wide_tables", "clipped_tables"):
                for item in res.get(key, [])[:5]:
                    print(f"       {key}: {item}")
        if args.screenshots:
            rel = page.relative_to(root) if page.is_relative_to(root) else Path(page.name)  # a page built elsewhere
            name = str(rel).replace("/", "_").removesuffix(".html") + ".png"
            full = int(res.get("height") or 2400)
            height = args.height or min(max(full, 800), MAX_HEIGHT)
            shot = args.screenshots / name
            if args.width == WINDOW_WIDTH:
                _run(browser, page.as_uri(), f"--screenshot={shot}", f"--window-size={WINDOW_WIDTH},{height}",
                     "--virtual-time-budget=20000", timeout=300)
            else:  # the page in a frame of that width, cut to it
                frame = _frame(page, page.as_uri(), args.width, height)
                try:
                    _run(browser, frame.as_uri(), f"--screenshot={shot}", f"--window-size={WINDOW_WIDTH},{height}",
                         "--virtual-time-budget=20000", timeout=300)
                finally:
                    frame.unlink(missing_ok=True)
                _crop(shot, args.width)
            if not shot.exists():
                print(f"       screenshot: chromium wrote none for {name} (it timed out or failed)")
            elif full > height:
                print(f"       screenshot: the top {height} px of {full} ({name}); the rest is not in it")
    print(f"{len(pages) - failed} of {len(pages)} pages pass")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

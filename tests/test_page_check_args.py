"""tools/page_check.py finds the pages it is asked for before it needs a browser (no chromium here)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("page_check", ROOT / "tools" / "page_check.py")
page_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(page_check)


def test_a_missing_page_names_both_places_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        page_check.main(["nosuch.html", "--html-root", str(tmp_path / "built")])
    msg = str(exc.value)
    assert str(tmp_path / "nosuch.html") in msg and str(tmp_path / "built" / "nosuch.html") in msg


def test_a_book_with_no_index_says_to_build_or_name_it(tmp_path):
    with pytest.raises(SystemExit) as exc:
        page_check.main(["--html-root", str(tmp_path)])
    assert f"{tmp_path}/index.html not found" in str(exc.value) and "--html-root" in str(exc.value)


def test_pages_resolve_from_the_working_directory_then_the_root(tmp_path, monkeypatch):
    built = tmp_path / "built"
    (built / "notebooks").mkdir(parents=True)
    (built / "notebooks" / "ch.html").write_text("<html><body></body></html>")
    monkeypatch.chdir(tmp_path)
    seen = []
    monkeypatch.setattr(page_check, "chromium", lambda: "browser")
    monkeypatch.setattr(page_check, "check_page",
                        lambda b, page, root, width=None: seen.append((page, root)) or {"page": str(page), "ok": True,
                                                                              "error": None, "images": 0,
                                                                              "broken": [], "no_alt": [],
                                                                              "raw_tex": [], "wide_tables": [],
                                                                              "mathjax": True})
    assert page_check.main(["built/notebooks/ch.html", "notebooks/ch.html", "--html-root", str(built)]) == 0
    assert seen == [(built / "notebooks" / "ch.html", built), (built / "notebooks" / "ch.html", built)]


def test_a_screenshot_height_chromium_cannot_draw_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        page_check.main(["--height", "-5", "--html-root", str(tmp_path)])
    assert exc.value.code == 2 and "--height must be 200 to 30000 px; got -5" in capsys.readouterr().err


def test_a_browser_that_hangs_is_a_failed_page_not_a_traceback(tmp_path, monkeypatch):
    import subprocess

    def hang(*a, **k):
        raise subprocess.TimeoutExpired(cmd="chromium", timeout=1)

    monkeypatch.setattr(page_check.subprocess, "run", hang)
    page = tmp_path / "p.html"
    page.write_text("<html><body>x</body></html>")
    res = page_check.check_page("chromium", page, tmp_path)
    assert res["ok"] is False and "did not report" in res["error"]
    assert not list(tmp_path.glob(".bitlaws-page-check-*"))  # its probe copy is removed
    res = page_check.check_page("chromium", page, tmp_path, width=420)  # in a frame: the frame page goes too
    assert res["ok"] is False and not list(tmp_path.glob(".bitlaws-page-check-*"))


def test_a_viewport_width_chromium_cannot_draw_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        page_check.main(["--width", "100", "--html-root", str(tmp_path)])
    assert exc.value.code == 2 and "--width must be 280 to 1400 px; got 100" in capsys.readouterr().err


def test_a_narrow_width_loads_the_page_in_a_frame_that_wide(tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<html><body>x</body></html>")
    frame = page_check._frame(page, page.as_uri(), 420, 900)
    text = frame.read_text()
    assert 'style="width:420px;height:900px' in text and page.as_uri() in text and "postMessage" not in text
    assert "window.parent.postMessage" in page_check.PROBE  # the probe reports to the frame's page

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
                        lambda b, page, root: seen.append((page, root)) or {"page": str(page), "ok": True,
                                                                              "error": None, "images": 0,
                                                                              "broken": [], "no_alt": [],
                                                                              "raw_tex": [], "wide_tables": [],
                                                                              "mathjax": True})
    assert page_check.main(["built/notebooks/ch.html", "notebooks/ch.html", "--html-root", str(built)]) == 0
    assert seen == [(built / "notebooks" / "ch.html", built), (built / "notebooks" / "ch.html", built)]

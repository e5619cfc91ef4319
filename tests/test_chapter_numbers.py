"""Each chapter numbers its exercises from 1 and figures carry no number (book/_ext/chapter_numbers.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("chapter_numbers", ROOT / "book" / "_ext" / "chapter_numbers.py")
chapter_numbers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chapter_numbers)


def test_exercises_restart_at_one_on_each_page_and_figures_lose_their_numbers():
    # numfig's book-wide numbers, as Sphinx assigns them without section numbers (chapter 02 opened at Exercise 9)
    fignumbers = {
        "notebooks/00-number-formats": {"exercise": {"ex-00-a": (1,), "ex-00-b": (2,)}, "figure": {"f1": (1,)}},
        "notebooks/02-low-precision-training": {"exercise": {"ex-02-kv": (12,), "ex-02-fw4": (9,), "ex-02-live": (10,)},
                                                "figure": {"fig-qat-formats": (12,)}, "table": {"t": (3,)}},
        "intro": {},
    }
    changed = chapter_numbers.renumber(fignumbers)
    assert fignumbers["notebooks/02-low-precision-training"] == {
        "exercise": {"ex-02-fw4": (1,), "ex-02-live": (2,), "ex-02-kv": (3,)}}  # the page's order kept
    assert fignumbers["notebooks/00-number-formats"] == {"exercise": {"ex-00-a": (1,), "ex-00-b": (2,)}}
    assert sorted(changed) == ["notebooks/00-number-formats", "notebooks/02-low-precision-training"]
    assert chapter_numbers.renumber(fignumbers) == []  # numbered already: nothing to write again


def test_the_book_loads_the_extension():
    config = (ROOT / "book" / "_config.yml").read_text(encoding="utf-8")
    assert "    chapter_numbers: _ext\n" in config

"""`make publish` (tools/publish_pages.sh) against a local bare repository, with a dummy HTML folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "publish_pages.sh"


def _git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _publish(html: Path, remote: str, *extra: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(html.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["bash", str(SCRIPT), str(html), remote, *extra], cwd=html.parent, env=env,
                          capture_output=True, text=True)


def _files(bare: Path, branch: str = "gh-pages") -> set[str]:
    return set(_git("ls-tree", "-r", "--name-only", branch, cwd=bare).split())


@pytest.fixture
def site(tmp_path):
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare))
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "index.html").write_text("<h1>v1</h1>")
    (html / "notebooks" / "old.html").write_text("old")
    return bare, html


def test_publish_creates_the_branch_then_adds_one_commit_per_change(site):
    bare, html = site
    first = _publish(html, str(bare))
    assert first.returncode == 0, first.stderr
    assert _files(bare) == {"index.html", "notebooks/old.html", ".nojekyll"}
    assert _git("show", "gh-pages:index.html", cwd=bare) == "<h1>v1</h1>"
    tip1 = _git("rev-parse", "gh-pages", cwd=bare).strip()

    (html / "index.html").write_text("<h1>v2</h1>")
    (html / "notebooks" / "old.html").unlink()
    (html / "notebooks" / "new.html").write_text("new")
    second = _publish(html, str(bare))
    assert second.returncode == 0, second.stderr
    assert _files(bare) == {"index.html", "notebooks/new.html", ".nojekyll"}  # the removed page is gone
    assert _git("show", "gh-pages:index.html", cwd=bare) == "<h1>v2</h1>"
    assert _git("rev-parse", "gh-pages^", cwd=bare).strip() == tip1  # history kept, one commit on top

    again = _publish(html, str(bare))
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert _git("rev-list", "--count", "gh-pages", cwd=bare).strip() == "2"


def test_publish_to_another_branch_leaves_gh_pages_alone(site):
    bare, html = site
    assert _publish(html, str(bare), "preview").returncode == 0
    assert _git("for-each-ref", "--format=%(refname)", cwd=bare).split() == ["refs/heads/preview"]


def test_publish_without_a_built_book_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    result = _publish(tmp_path / "empty", str(tmp_path / "nowhere.git"))
    assert result.returncode == 2
    assert "index.html not found" in result.stderr and "make book" in result.stderr

"""The conda environment mirrors the package's pins (README, "Install notes")."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(requirements):
    """name -> version of the exact pins without an environment marker (triton is Linux-only)."""
    out = {}
    for req in requirements:
        if ";" in req:
            continue
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s]+)\s*", req)
        assert m, f"not an exact pin: {req!r}"
        out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_environment_yml_mirrors_the_pins_of_the_package_and_its_test_and_book_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _pins(project["dependencies"])
    for extra in ("test", "book"):
        wanted.update(_pins(project["optional-dependencies"][extra]))
    listed = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.fullmatch(r"\s*-\s*([A-Za-z0-9_.\-]+)==(\S+)\s*", line)
        if m:
            listed[m.group(1).lower().replace("_", "-")] = m.group(2)
    assert {k: v for k, v in wanted.items() if listed.get(k) != v} == {}

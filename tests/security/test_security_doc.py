"""docs/security.md and its tests name each other: every promise links to a test module that exists
and names the promise back; every module of this folder names a promise of the page."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "security.md"
ROW = re.compile(r"^\| (?P<id>[A-Z]\d) \| (?P<promise>.+?) \| (?P<tests>.+) \|$", re.MULTILINE)
LINK = re.compile(r"\]\(\.\./(?P<path>tests/security/[\w/]+\.py)\)")


def _promises() -> dict[str, list[Path]]:
    rows = {
        row["id"]: [ROOT / link["path"] for link in LINK.finditer(row["tests"])]
        for row in ROW.finditer(PAGE.read_text())
    }
    assert rows, "docs/security.md lists no promises"
    return rows


def _named(module: Path) -> set[str]:
    docstring = ast.get_docstring(ast.parse(module.read_text())) or ""
    head = docstring.split(":", 1)[0]
    return set(re.findall(r"\b([A-Z]\d)\b", head)) if "Promise" in head else set()


def test_every_promise_names_a_test_that_names_it_back() -> None:
    for promise, modules in _promises().items():
        assert modules, f"promise {promise} names no test"
        for module in modules:
            assert module.is_file(), f"promise {promise} names {module}, which does not exist"
            assert promise in _named(module), f"{module.name} does not name promise {promise} back"


def test_every_security_test_names_a_promise_of_the_page() -> None:
    promises = set(_promises())
    for module in sorted(Path(__file__).parent.glob("test_*.py")):
        if module.name == Path(__file__).name:
            continue
        named = _named(module)
        assert named, f"{module.name} names no promise of docs/security.md in its docstring"
        assert named <= promises, f"{module.name} names {named - promises}, not on the page"

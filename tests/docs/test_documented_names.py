"""What the docs name exists: dotted ``telos_wrap`` names, the emulator's public API, its routes.

* Every backticked ``telos_wrap.a.b`` in README.md and docs/ imports or resolves as an attribute.
* docs/emulator.md's public API table names only what ``telos_wrap.emulator`` has, and every name
  the package exports (``__all__``) is in it.
* Every flavour route docs/emulator.md lists (the routing table and the ``telos-wrap emulator``
  banner) is the flavour's :func:`~telos_wrap.emulator.flavour_base_url`, and a chat request sent
  there through the real ``openai`` client is answered by that flavour.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import openai
import pytest

import telos_wrap.emulator
from telos_wrap.emulator import CHAT_FLAVOURS, Emulator, flavour_base_url, serve

from .snippets import documents

ROOT = Path(__file__).resolve().parents[2]
EMULATOR_PAGE = (ROOT / "docs" / "emulator.md").read_text(encoding="utf-8")
_DOTTED = re.compile(r"`(telos_wrap(?:\.[A-Za-z_]\w*)+)")


def _section(page: str, heading: str) -> str:
    start = page.index(f"\n## {heading}")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else None]


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)  # AttributeError: the documented name does not exist
        return found
    raise ImportError(dotted)


DOTTED = sorted({(path.name, m[1]) for path in documents(ROOT) for m in _DOTTED.finditer(path.read_text())})


def test_the_docs_name_telos_wrap_objects() -> None:
    assert len(DOTTED) >= 30, DOTTED


@pytest.mark.parametrize(("page", "dotted"), DOTTED, ids=[f"{p}:{d}" for p, d in DOTTED])
def test_every_dotted_name_in_the_docs_exists(page: str, dotted: str) -> None:
    _resolve(dotted)


def _api_table_names() -> set[str]:
    rows = [line for line in _section(EMULATOR_PAGE, "Public API").splitlines() if line.startswith("| `")]
    first_cells = [row.split(" | ")[0] for row in rows]
    return {m[1] for cell in first_cells for m in re.finditer(r"`([A-Za-z_]\w*)", cell)}


def test_the_emulator_api_table_names_what_exists_and_everything_exported() -> None:
    documented = _api_table_names()
    missing = sorted(name for name in documented if not hasattr(telos_wrap.emulator, name))
    assert not missing, f"docs/emulator.md documents names telos_wrap.emulator does not have: {missing}"
    undocumented = sorted(set(telos_wrap.emulator.__all__) - documented)
    assert not undocumented, f"exported but not in docs/emulator.md's public API table: {undocumented}"


def _documented_routes() -> dict[str, set[str]]:
    """flavour -> the base paths docs/emulator.md gives it (routing table and CLI banner)."""
    routes: dict[str, set[str]] = {}
    row = next(
        line
        for line in _section(EMULATOR_PAGE, "Choosing a flavour").splitlines()
        if "through `serve()`" in line
    )
    for match in re.finditer(r"`/([a-z]+)(/[^`]*?)?/\.\.\.`", row):
        routes.setdefault(match[1], set()).add(f"/{match[1]}{match[2] or ''}")
    banner = _section(EMULATOR_PAGE, "The command-line emulator: `telos-wrap emulator`")
    for match in re.finditer(r"^  ([a-z]+) +base_url=http://127\.0\.0\.1:8790(\S*)$", banner, re.M):
        routes.setdefault(match[1], set()).add(match[2])
    return routes


def test_every_chat_flavour_route_is_documented_as_served() -> None:
    routes = _documented_routes()
    assert set(routes) == {"anthropic", *CHAT_FLAVOURS}, sorted(routes)
    for flavour, paths in routes.items():
        assert paths == {flavour_base_url("", flavour)}, (flavour, paths)


@pytest.mark.parametrize("flavour", CHAT_FLAVOURS)
def test_a_documented_route_is_answered_by_its_flavour(flavour: str) -> None:
    emu = Emulator()
    (path,) = _documented_routes()[flavour]
    with serve(emu) as url, openai.OpenAI(api_key="x", base_url=url + path, max_retries=0) as client:
        client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    (record,) = emu.requests
    # The server takes the flavour segment off; the rest is the vendor's own path.
    assert (record.flavour, record.status) == (flavour, 200)
    assert f"/{flavour}{record.path}" == f"{path}/chat/completions"

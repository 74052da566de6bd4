"""Every Python snippet of ``README.md`` and ``docs/`` runs, as written, against the emulator and Redis.

Snippets are found by ``tests/docs/snippets.py`` (any ```` ```python ```` block of README.md or a
Markdown file under docs/, so a new page or block is picked up without editing this test); the
names a snippet uses without defining come from the fixtures it names (``tests/docs/fixtures.py``).
A snippet that raises fails here, so a documented line cannot drift from the code.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.sessions import MemoryStore

from ..sessions.conftest import (  # noqa: F401  (fixtures, used through getfixturevalue)
    redis_cluster_url,
    redis_url,
)
from ..stores import default_store
from .fixtures import FIXTURES
from .snippets import Snippet, documents, snippets_of

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = [snippet for path in documents(ROOT) for snippet in snippets_of(path)]


@pytest.fixture
def emulator_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    """The emulator on a real local HTTP server, named by the SDKs' own environment variables."""
    emu = Emulator()
    with serve(emu) as base_url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "docs-test")
        monkeypatch.setenv("OPENAI_BASE_URL", base_url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "docs-test")
        with default_store(MemoryStore()):
            try:
                yield emu
            finally:
                telos_wrap.unpatch()


def run_snippet(snippet: Snippet, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Execute ``snippet`` with its fixtures; returns its globals (raises what the snippet raises)."""
    context = {
        "redis_url": lambda: request.getfixturevalue("redis_url"),
        "redis_cluster_url": lambda: request.getfixturevalue("redis_cluster_url"),
    }
    namespace: dict[str, Any] = {"__name__": f"docs_snippet_{snippet.path.stem}"}
    code = snippet.code
    closers = []
    for name in snippet.fixtures:
        if name not in FIXTURES:
            raise KeyError(f"{snippet.id}: unknown docs-test fixture {name!r} (known: {sorted(FIXTURES)})")
        prepared = FIXTURES[name](context)
        namespace.update(prepared.names)
        closers.extend(prepared.closers)
        for placeholder, value in prepared.replacements.items():
            if placeholder not in code:
                raise AssertionError(f"{snippet.id}: fixture {name!r} replaces {placeholder!r}, absent here")
            code = code.replace(placeholder, value)
    try:
        compiled = compile(code, f"{snippet.path}:{snippet.line}", "exec", flags=_top_level_await())
        result = eval(compiled, namespace)
        if inspect.iscoroutine(result):  # a snippet with a top-level ``await`` / ``async with``
            asyncio.run(result)
    finally:
        for close in closers:
            close()
    return namespace


def _top_level_await() -> int:
    import ast

    return ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


@pytest.mark.parametrize(
    "snippet",
    [
        pytest.param(
            s, id=s.id, marks=[pytest.mark.redis] if {"redis", "redis-cluster"} & set(s.fixtures) else []
        )
        for s in SNIPPETS
    ],
)
def test_documented_snippet_runs(
    snippet: Snippet, emulator_env: Emulator, request: pytest.FixtureRequest
) -> None:
    run_snippet(snippet, request)


def test_the_docs_have_snippets_and_every_fixture_name_is_known() -> None:
    assert len({s.path for s in SNIPPETS}) >= 3, [s.id for s in SNIPPETS]
    for snippet in SNIPPETS:
        assert set(snippet.fixtures) <= set(FIXTURES), snippet.id


def test_a_broken_snippet_fails(
    tmp_path: Path, emulator_env: Emulator, request: pytest.FixtureRequest
) -> None:
    """The runner really executes: a documented name that does not exist raises."""
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n<!-- docs-test: conversation -->\n```python\nimport telos_wrap\n"
        "telos_wrap.sessions.NoSuchStore()\n```\n",
        encoding="utf-8",
    )
    (snippet,) = snippets_of(page)
    assert snippet.fixtures == ("conversation",) and snippet.line == 4
    with pytest.raises(AttributeError, match="NoSuchStore"):
        run_snippet(snippet, request)

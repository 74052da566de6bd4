"""What the two HTTP matrices (``test_matrix_http.py``: chat; ``test_responses_matrix_http.py``: Responses)
share: a cell's two calls, its recorded exchange, the ``prompt_cache_key`` they expect, and the check
of their cassettes.

A cell calls the same entry point twice: with ``telos_hint={"disable": True}`` (the SDK's own body,
the baseline), then in a session, rewritten. ``run_cell`` / ``arun_cell`` make the two calls and
check what every cell must hold; ``recorded`` reads the two requests back from the cassette.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import telos_wrap
from telos_wrap.ir.canon import canonical_bytes, canonical_json, canonicalize_tool_def
from telos_wrap.sessions import MemoryStore

from .conftest import API_KEY, HttpWire

#: An entry point called with the request's keyword arguments: (what it returned, what it yielded).
Call = Callable[[dict[str, Any]], tuple[Any, list[Any]]]
AsyncCall = Callable[[dict[str, Any]], Awaitable[tuple[Any, list[Any]]]]


def family_key(tools: Sequence[dict[str, Any]]) -> str:
    """The documented prompt_cache_key: sha256 over the canonical tools (docs/engines.md)."""
    material = {
        "tools": sorted(canonical_json(canonicalize_tool_def(tool)) for tool in tools),
    }
    return "telos-" + hashlib.sha256(canonical_bytes(material)).hexdigest()[:16]


def cassette_text(body: Any) -> str:
    """A cassette body (bytes when just recorded, str when loaded from YAML) as text."""
    return body.decode("utf-8") if isinstance(body, bytes) else str(body)


def recorded(cassette: Any, wire: HttpWire) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(baseline body, rewritten body, rewritten call's response) from the cassette, after checking that
    the cassette holds exactly the two requests that went out, byte for byte, and both succeeded."""
    requests, responses = cassette.requests, cassette.responses
    assert len(requests) == len(wire.sent) == 2, "two calls, one request each"
    assert [cassette_text(r.body) for r in requests] == [r.content.decode("utf-8") for r in wire.sent]
    if cassette.rewound:  # replaying: each recorded exchange was played exactly once
        assert cassette.play_count == 2 and cassette.all_played
    assert [r.method for r in requests] == ["POST", "POST"]
    assert [response["status"]["code"] for response in responses] == [200, 200], responses
    return json.loads(requests[0].body), json.loads(requests[1].body), responses[1]


def run_cell(wire: HttpWire, call: Call, kwargs: dict[str, Any], *, turns: int = 1) -> tuple[Any, list[Any]]:
    """The baseline call, then the rewritten one in a session: one request each, ``turns`` turns of
    the session (a token count or a compaction is none), the caller's arguments left alone.

    The session is on a store of its own: every cell is a one-request conversation of one
    application (the same system prompt), and on a shared store the fleet would learn, after five
    of them, that this application's conversations end at their first request and stop writing the
    message tail nobody reads (docs/sessions.md); a cell's bytes would then depend on how many cells
    ran before it, and miss its cassette."""
    before = copy.deepcopy(kwargs)
    call({**kwargs, "telos_hint": {"disable": True}})
    assert len(wire.sent) == 1, "one call must send exactly one request"
    with telos_wrap.session(store=MemoryStore()) as session:
        result, items = call(kwargs)
    assert len(wire.sent) == 2, "one call must send exactly one request"
    assert session.stats.requests == turns, "a turn is rewritten exactly once"
    assert kwargs == before, "the caller's arguments must not be mutated"
    return result, items


async def arun_cell(
    wire: HttpWire, call: AsyncCall, kwargs: dict[str, Any], *, turns: int = 1
) -> tuple[Any, list[Any]]:
    """``run_cell`` for an async client's entry point."""
    before = copy.deepcopy(kwargs)
    await call({**kwargs, "telos_hint": {"disable": True}})
    assert len(wire.sent) == 1, "one call must send exactly one request"
    async with telos_wrap.session(store=MemoryStore()) as session:
        result, items = await call(kwargs)
    assert len(wire.sent) == 2, "one call must send exactly one request"
    assert session.stats.requests == turns, "a turn is rewritten exactly once"
    assert kwargs == before, "the caller's arguments must not be mutated"
    return result, items


def assert_cassettes_cover(directory: Path, names: Iterable[str], entries: Iterable[str]) -> None:
    """One cassette in ``directory`` per cell (sync and async, each endpoint ``name`` and ``entry``
    point), and none holds the API key or an auth header (vcr_config filters them)."""
    found = {path.name for path in directory.glob("*.yaml")}
    cells = {
        f"test_{mode}_matrix[{name}-{entry}].yaml"
        for mode in ("sync", "async")
        for name in names
        for entry in entries
    }
    assert found == cells
    for path in directory.glob("*.yaml"):
        text = path.read_text(encoding="utf-8").lower()
        assert API_KEY.lower() not in text, path.name
        for header in ("authorization:", "api-key:", "openai-organization:", "openai-project:", "cookie:"):
            assert header not in text, (path.name, header)

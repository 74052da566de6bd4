"""The dashboard of a Redis store: every conversation's counters, and none of the caller's text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.dashboard.from_store import from_store_url
from telos_wrap.dashboard.page import render
from telos_wrap.emulator import Emulator, serve
from telos_wrap.sessions import RedisStore
from telos_wrap.sessions.hashed import session_hash

pytestmark = pytest.mark.redis

NAME, EMAIL = "Ana Lopez", "ana.lopez@example.com"
POLICY = "".join(f"Rule {i}: quote the order record before answering, never guess.\n" for i in range(150))


def _system(turn: int) -> str:
    # A customer line, a balance that changes every turn (learned volatile), then the shared policy.
    return f"Customer: {NAME} <{EMAIL}>\n{NAME} has a balance of {100 + turn} EUR\n{POLICY}"


@pytest.fixture
def emulator() -> Iterator[str]:
    with serve(Emulator()) as url:
        yield url


def _conversation(client: Any, store: RedisStore, session_id: str, turns: int) -> telos_wrap.Session:
    history: list[dict[str, Any]] = []
    with telos_wrap.session(session_id, store=store) as s:
        for turn in range(turns):
            history.append({"role": "user", "content": f"Where is order {4200 + turn}, {NAME}?"})
            msg = client.messages.create(
                model="claude-opus-5", max_tokens=16, messages=history, system=_system(turn)
            )
            history.append({"role": "assistant", "content": msg.content[0].text})
    return s


def test_store_page_has_counts_and_no_caller_text(
    patched: None, emulator: str, redis_url: str, redis_prefix: str
) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix)
    client = anthropic.Anthropic(api_key="k", base_url=emulator)
    try:
        sessions = {
            sid: _conversation(client, store, sid, turns)
            for sid, turns in (("ticket-ana-lopez-1", 4), ("ticket-ana-lopez-2", 2))
        }
        for s in sessions.values():
            s.flush()
        board = from_store_url(redis_url, prefix=redis_prefix)
    finally:
        client.close()
        store.close()
    by_name = {c.name: c for c in board.conversations}
    assert set(by_name) == {session_hash(sid) for sid in sessions}
    for sid, s in sessions.items():
        view, stats = by_name[session_hash(sid)], s.stats
        assert (view.request_count, view.input, view.read, view.write) == (
            stats.requests,
            stats.total_input,
            stats.cache_read,
            stats.cache_write,
        )
        assert view.cost == pytest.approx(stats.cost)
        assert view.learned_spans == len(s.volatile_spans)
    page = render(board, show_text=True)
    for secret in (NAME, "Lopez", EMAIL, "balance", "Rule 1:", "order 42", *sessions):
        assert secret not in page, secret
    assert session_hash("ticket-ana-lopez-1") in page

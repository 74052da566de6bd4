"""Logs an operator can keep (issue 44): nothing above DEBUG scales with the number of sessions, and no
raw session id or caller text is logged at INFO or above.

A multi-conversation workload on two workers sharing one store (each conversation named by its id,
here a user's e-mail address; its turns land on both workers), where one worker cannot reach the
store for two turns while the other writes the same sessions, so every session's outage work is
merged when the store answers again; and a clock line in the system prompt that every conversation
learns at its first change. Run with 4 and with 16 conversations: the lines at INFO and above are the
same in number (the first of each kind, then one summary of the counts), and none holds an id or the
caller's text. The ids appear hashed, as the spans hash them (``sessions/hashed.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.ir.model import UsageReport
from telos_wrap.sessions import logs
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.hashed import session_hash
from telos_wrap.sessions.stores.breaker import StoreBreaker
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.store import MemoryStore, Swapped, Versioned

from .convo import MODEL, RULES


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class OutageStore(MemoryStore):
    """A ``MemoryStore`` that raises ``ConnectionError`` on every call while ``down``."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.down = False
        self.breaker = StoreBreaker(5.0, 60.0, clock=clock)

    def _check(self) -> None:
        if self.down:
            raise ConnectionError("the store is down")

    def load(self, session_id: str) -> Versioned | None:
        self._check()
        return super().load(session_id)

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        self._check()
        return super().compare_and_set(session_id, expected, text)

    def swap_state(self, session_id: str, expected: int, state: Any) -> Swapped:
        self._check()
        return super().swap_state(session_id, expected, state)

    def swap(self, session_id: str, expected: int, text: str) -> Swapped:
        self._check()
        return super().swap(session_id, expected, text)


def _secret(n: int) -> str:
    return f"CALLER-SECRET-{n:03d}"


def _conversations(client: anthropic.Anthropic, ids: list[str]) -> None:
    """Six turns of each conversation in the per-request pattern (a new session object per request),
    turn by turn across them, on a store that is down for turns 2-3."""
    clock = Clock()
    store = OutageStore(clock)
    histories: list[list[dict[str, str]]] = [[] for _ in ids]
    for turn in range(6):
        store.down = turn in (2, 3)
        clock.now += 10.0  # past the breaker's window: the first call of a turn probes the store
        for n, conversation in enumerate(ids):
            history = histories[n]
            history.append({"role": "user", "content": f"{_secret(n)}: question {turn} about my order."})
            system = f"You are the support agent.\nChecked at 10:00:{turn:02d}\n{RULES}"
            with telos_wrap.session(conversation, store=store, clock=clock):
                reply = client.messages.create(model=MODEL, max_tokens=16, system=system, messages=history)
            history.append({"role": "assistant", "content": reply.content[0].text})


def _passthrough(session: telos_wrap.Session) -> None:
    index = runtime_of(session).note_passthrough("anthropic", "anthropic", {"messages": []})
    runtime_of(session).record_usage(index, UsageReport("anthropic", 10, 0, 0, 1))


def _outage_on_one_worker(redis_url: str, prefix: str, ids: list[str]) -> None:
    """Two workers (store objects on one Redis) share each session; worker A cannot reach Redis for
    a while (its breaker open) as B writes the same sessions: A's outage work is merged per session
    when its window is over (``sessions/durable/merge.py``)."""
    clock = Clock()
    a_store, b_store = RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)
    a_store.breaker = StoreBreaker(5.0, 60.0, clock=clock)
    a = [telos_wrap.session(i, store=a_store) for i in ids]
    b = [telos_wrap.session(i, store=b_store) for i in ids]
    for session in a:
        _passthrough(session)
    a_store.breaker.failure(ConnectionError("forced"))
    for session in a:
        _passthrough(session)
    for session in b:
        _passthrough(session)
        session.flush()
    clock.now += 10.0
    for session in a:
        _passthrough(session)
        session.flush()


def _loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith("telos_wrap")]


def _text(record: logging.LogRecord) -> str:
    return record.getMessage() + (record.exc_text or "")


@pytest.mark.redis
def test_lines_above_debug_do_not_grow_with_the_sessions(
    lenient: anthropic.Anthropic, caplog: pytest.LogCaptureFixture, redis_url: str, redis_prefix: str
) -> None:
    counts = {}
    for conversations in (4, 16):
        logs._reset()
        caplog.clear()
        ids = [f"user{n}-{conversations}@example.com" for n in range(conversations)]
        with caplog.at_level(logging.DEBUG, logger="telos_wrap"):
            _conversations(lenient, ids)
            _outage_on_one_worker(redis_url, redis_prefix, ids)
            logs.summarize()  # what a summary window would say at its end
        loud = _loud(caplog)
        counts[conversations] = len(loud)
        texts = [_text(r) for r in loud]
        for n, session_id in enumerate(ids):
            for text in texts:
                assert session_id not in text and _secret(n) not in text, text
        # What happened is still said: the first break learned, the outage, the recovery, the counts.
        joined = "\n".join(texts)
        assert "cache break in session" in joined and "learned as volatile" in joined
        assert "stage 'session.store' failed" in joined and "answers again" in joined
        assert "in-process state merged" in joined
        assert any(session_hash(i) in joined for i in ids), "a session is named by its hash"
        (summary,) = [t for t in texts if "besides what was logged above DEBUG" in t]
        assert f"{conversations - 1} cache breaks (system_changed)" in summary
        assert f"{conversations - 1} sessions' in-process state merged" in summary
        # Every event is still at DEBUG (one per break and per recovered session, hashed too).
        debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
        assert sum("cache break in session" in m for m in debug) == conversations - 1
        assert sum("in-process state merged" in m for m in debug) == conversations - 1
        assert not any(i in m for m in debug for i in ids)
    assert counts[4] == counts[16], counts
    assert counts[16] <= 10, counts

"""16 threads and 500 asyncio tasks, each in its own session; and many writers on one session."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import Session, current_session
from tests.sdk_http import AsyncEmulatorTransport, sdk_http

from .convo import MODEL

TURNS = 3


def _messages(owner: str, turn: int) -> Any:
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        messages.append({"role": "user", "content": f"[{owner}] question {t} " + "words " * 300})
        if t < turn:
            messages.append({"role": "assistant", "content": f"[{owner}] answer {t}"})
    return messages


def _add(totals: dict[str, list[int]], owner: str, usage: Any) -> None:
    row = totals[owner]
    row[0] += usage.input_tokens
    row[1] += usage.cache_read_input_tokens or 0
    row[2] += usage.cache_creation_input_tokens or 0
    row[3] += usage.output_tokens


def _check(sessions: dict[str, Session], totals: dict[str, list[int]]) -> None:
    for owner, sess in sessions.items():
        stats = sess.stats
        assert stats.requests == TURNS, owner
        assert stats.responses_with_usage == TURNS, owner
        assert [stats.raw_input, stats.cache_read, stats.cache_write, stats.output] == totals[owner], owner
        assert stats.cache_breaks == 0, owner
        # No leak: every request of this session carried this session's own conversation.
        assert sess.state.app is not None and len(sess.state.app.kinds) == 2 * TURNS - 1


def test_16_threads_each_in_its_own_session(claude: anthropic.Anthropic) -> None:
    sessions: dict[str, Session] = {}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    lock = threading.Lock()
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)

    def worker(n: int) -> None:
        owner = f"thread-{n}"
        try:
            barrier.wait()
            with telos_wrap.session(owner) as sess:
                with lock:
                    sessions[owner] = sess
                for turn in range(TURNS):
                    assert current_session() is sess
                    message = claude.messages.create(
                        model=MODEL, max_tokens=16, messages=_messages(owner, turn)
                    )
                    with lock:
                        _add(totals, owner, message.usage)
            assert current_session() is None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(sessions) == 16
    _check(sessions, totals)


def test_500_asyncio_tasks_each_in_its_own_session(patched: None) -> None:
    emu = Emulator()
    sessions: dict[str, Session] = {}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    async def task(client: anthropic.AsyncAnthropic, n: int) -> None:
        owner = f"task-{n}"
        async with telos_wrap.session(owner) as sess:
            sessions[owner] = sess
            for turn in range(TURNS):
                message = await client.messages.create(
                    model=MODEL, max_tokens=16, messages=_messages(owner, turn)
                )
                assert current_session() is sess
                _add(totals, owner, message.usage)
                await asyncio.sleep(0)

    async def main() -> None:
        http = sdk_http.AsyncClient(transport=AsyncEmulatorTransport(emu))
        client = anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0)
        try:
            await asyncio.gather(*(task(client, n) for n in range(500)))
        finally:
            await client.close()
        assert current_session() is None

    asyncio.run(main())
    assert len(sessions) == 500
    _check(sessions, totals)
    assert len(emu.requests) == 500 * TURNS


@pytest.mark.parametrize("writers", [8])
def test_writers_sharing_one_session_never_lose_an_update(writers: int, claude: anthropic.Anthropic) -> None:
    """Separate Session objects on one id (as separate workers would be): every counter stays exact."""
    per_writer = 10
    barrier = threading.Barrier(writers)
    totals = [0, 0, 0, 0]
    lock = threading.Lock()

    def writer(n: int) -> None:
        sess = telos_wrap.session("shared")
        barrier.wait()
        for turn in range(per_writer):
            with sess:
                message = claude.messages.create(
                    model=MODEL, max_tokens=16, messages=_messages(f"w{n}", turn % 2)
                )
            with lock:
                usage = message.usage
                totals[0] += usage.input_tokens
                totals[1] += usage.cache_read_input_tokens or 0
                totals[2] += usage.cache_creation_input_tokens or 0
                totals[3] += usage.output_tokens

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = telos_wrap.session("shared").bind(claude).stats  # read in the calls' tenant
    assert stats.requests == writers * per_writer
    assert stats.responses_with_usage == writers * per_writer
    assert [stats.raw_input, stats.cache_read, stats.cache_write, stats.output] == totals

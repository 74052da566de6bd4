"""A write whose answer is lost is counted once: the compare-and-set is idempotent under retries.

redis-py sends a command again when its connection drops before the answer comes (``RedisStore``
configures one such retry; a cluster client does the same after re-reading the slot map, which is
what happens when a primary dies mid-write). If the first run of the compare-and-set script had
landed, the second run finds the revision that very write drew, holding its text. Read as a lost
race, the session recomputed its step on top of its own write and counted the turn twice (seen in
the failover test: 107 requests stored for 106 calls).

``ReplyDropper`` is a TCP proxy in front of a real ``redis-server`` that, once armed, closes the
client's connection instead of forwarding the next reply: the command ran on the server, its
answer never arrived.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import SessionState
from telos_wrap.sessions.stores.redis_store import RedisStore
from telos_wrap.sessions.stores.store import Swapped
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, sdk_http

from .convo import MODEL, messages_for, system_prompt

pytestmark = pytest.mark.redis


class ReplyDropper:
    """A loopback proxy to ``upstream``; ``arm()`` makes it swallow the next reply and hang up."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = 0
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        self.armed.set()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self.armed.is_set():
                    self.armed.clear()
                    self.dropped += 1
                    break  # the command ran on the server; its answer is thrown away
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def close(self) -> None:
        self._closing = True
        self.listener.close()


@pytest.fixture
def dropper(redis_url: str) -> Iterator[ReplyDropper]:
    from urllib.parse import urlsplit

    parts = urlsplit(redis_url)
    proxy = ReplyDropper((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield proxy
    proxy.close()


def test_a_write_sent_again_after_its_answer_was_lost_is_recognized_as_landed(
    dropper: ReplyDropper, redis_prefix: str
) -> None:
    store = RedisStore(f"redis://127.0.0.1:{dropper.port}/0", prefix=redis_prefix)
    base = store.compare_and_set("s", 0, '{"turn":1}')
    assert base is not None
    dropper.arm()
    swapped = store.swap("s", base, '{"turn":2}')
    assert dropper.dropped == 1  # the first answer was lost; redis-py sent the script again
    assert swapped.revision is not None and swapped.revision != base, swapped
    loaded = store.load("s")
    assert loaded is not None and (loaded.revision, loaded.text) == (swapped.revision, '{"turn":2}')
    # Idempotence is only for the write's own revision and text: another state still loses.
    assert store.swap("s", base, '{"turn":2}') == Swapped(None, loaded)
    store.close()


def test_a_session_turn_whose_write_answer_was_lost_is_counted_once(
    dropper: ReplyDropper, redis_prefix: str, patched_lenient: None
) -> None:
    store = RedisStore(f"redis://127.0.0.1:{dropper.port}/0", prefix=redis_prefix)
    client = anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=EmulatorTransport(Emulator())), max_retries=0
    )
    calls = 6
    with telos_wrap.session("lost-answer", store=store) as session:
        for turn in range(calls):
            if turn in (2, 4):
                dropper.arm()  # the session's one round trip of this turn: its compare-and-set
            client.messages.create(
                model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
            )
        session.flush()  # the last turn's usage is written with the session's next write
    assert dropper.dropped == 2
    stored = store.load(session.store_key)  # the key of the calls' tenant
    assert stored is not None
    state = SessionState.loads(stored.text)
    assert state.requests == calls
    assert sum(u.responses for u in state.usage.values()) == calls
    store.close()


def test_an_async_session_turn_whose_write_answer_was_lost_is_counted_once(
    dropper: ReplyDropper, redis_prefix: str, patched_lenient: None
) -> None:
    store = RedisStore(f"redis://127.0.0.1:{dropper.port}/0", prefix=redis_prefix)
    calls = 6

    keys: list[str] = []

    async def converse() -> None:
        client = anthropic.AsyncAnthropic(
            api_key="test",
            http_client=sdk_http.AsyncClient(transport=AsyncEmulatorTransport(Emulator())),
            max_retries=0,
        )
        async with telos_wrap.session("lost-answer-async", store=store) as session:
            for turn in range(calls):
                if turn in (1, 3):
                    dropper.arm()  # this turn's compare-and-set, on redis.asyncio
                await client.messages.create(
                    model=MODEL, max_tokens=16, system=system_prompt(turn), messages=messages_for(turn)
                )
            await session.aflush()
        keys.append(session.store_key)
        await client.close()
        await store.aclose()  # the redis.asyncio client of this event loop

    asyncio.run(converse())
    assert dropper.dropped == 2
    stored = store.load(keys[0])
    assert stored is not None
    state = SessionState.loads(stored.text)
    assert (state.requests, sum(u.responses for u in state.usage.values())) == (calls, calls)
    store.close()

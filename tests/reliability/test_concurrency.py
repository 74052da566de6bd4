"""Concurrency: patching under live traffic, and hundreds of asyncio tasks over shared and separate sessions.

* ``patch()`` / ``unpatch()`` in a loop while 16 threads call patched clients of both SDKs: no
  exception, every response answers its own request, every body on the wire is either exactly the
  caller's or exactly telos' rewrite of it, and telos records no failure of its own.
* 500 asyncio tasks (both SDKs) over one shared session and many separate ones: every call answers its
  own request, each separate session holds exactly its one request, and the shared session's counters
  are exact (requests and token totals equal the sum over its responses).

Two OS processes writing one session through Redis are covered by
``tests/sessions/test_redis.py::test_two_processes_alternating_turns_emit_the_bytes_of_one_process``
(and ``test_concurrent_increments_never_lose_an_update`` for threads on one Redis session).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import telos_wrap
from telos_wrap.lift.user_split import SplitPatterns
from telos_wrap.patch.calls import HINT_HEADER
from telos_wrap.pipeline import PrepareOptions, SessionHooks, prepare

from .harness import ANTHROPIC_USAGE, OPENAI_USAGE, Wire, client_for, kwargs_for

_API = {"anthropic": ("anthropic", "anthropic"), "openai": ("openai_chat", "openai")}


class _Forked(SessionHooks):
    """A session whose previous request differed from this one from message ``fork`` on."""

    def __init__(self, fork: int) -> None:
        self.fork = fork

    def fork_point(self) -> int | None:
        return self.fork


class _ClockInPlace(SessionHooks):
    """A learning session on an engine without breakpoints: the system prompt's final clock to the
    second stays where the caller wrote it until it changes (docs/sessions.md, *A clock that ends
    the system prompt*)."""

    def patterns(self, base: SplitPatterns) -> SplitPatterns:
        return base.with_clock_in_place()


def _telos_body(
    sdk: str, kwargs: dict[str, Any], fork: int | None = None, clock_in_place: bool = False
) -> dict[str, Any]:
    api, engine = _API[sdk]
    hooks = _ClockInPlace() if clock_in_place else None if fork is None else _Forked(fork)
    return prepare(api, kwargs, PrepareOptions(engine=engine), hooks).body


def _answer(sdk: str, result: Any) -> str:
    return result.content[0].text if sdk == "anthropic" else result.choices[0].message.content


def test_patch_and_unpatch_while_16_threads_call() -> None:
    wire = Wire()
    clients = {sdk: client_for(sdk, wire) for sdk in ("anthropic", "openai")}
    errors: list[BaseException] = []
    answers: list[tuple[str, str]] = []
    seen: set[bool] = set()  # whether calls went out rewritten (True) and as sent (False)
    toggled = [0]  # patch/unpatch rounds the main thread completed so far

    def worker(index: int) -> None:
        sdk = "anthropic" if index % 2 else "openai"
        try:
            with telos_wrap.session(f"thread-{index}"):
                # 20 calls each, and more (up to 2,000) until both patched and unpatched calls went
                # out and the main thread toggled twice: which calls land in a patched window, and
                # when the main thread gets the GIL back from 16 busy threads, is up to the scheduler.
                for n in range(2000):
                    if n >= 20 and len(seen) == 2 and toggled[0] >= 2:
                        break
                    tag = f"t{index}-{n}"
                    kwargs = kwargs_for(sdk, tag)
                    result = (
                        clients[sdk].messages.create(**kwargs)
                        if sdk == "anthropic"
                        else (clients[sdk].chat.completions.create(**kwargs))
                    )
                    answers.append((f"[req:{tag}]", _answer(sdk, result)))
                    marker = f"[req:{tag}]".encode()
                    sent = next(item for item in reversed(wire.sent) if marker in item.raw)
                    seen.add(sent.body != kwargs)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    toggles = 0
    while any(thread.is_alive() for thread in threads):
        telos_wrap.patch()
        time.sleep(0.0005)
        telos_wrap.unpatch()
        time.sleep(0.0005)
        toggles += 1
        toggled[0] = toggles
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert len(answers) >= 16 * 20 and all(expected == got for expected, got in answers)
    assert toggles >= 2, "patch/unpatch really ran while the threads called"
    rewritten = 0
    for sent in wire.sent:
        body = sent.body
        sdk = "anthropic" if sent.path.endswith("/v1/messages") else "openai"
        tag = next(part for part in sent.raw.decode().split("[req:")[1:]).split("]")[0]
        original = kwargs_for(sdk, tag)
        # Each thread's requests share their first two messages and differ from the third on:
        # after the thread's first request, the Anthropic rewrite also anchors that shared prefix
        # (BP-fork, docs/engines.md). On OpenAI (no breakpoints) the thread's session keeps the
        # system prompt's final clock in place while it has not changed.
        rewrites = (
            (_telos_body(sdk, original), _telos_body(sdk, original, fork=2))
            if sdk == "anthropic"
            else (_telos_body(sdk, original, clock_in_place=True),)
        )
        assert body in (original, *rewrites), "a body is the caller's or telos' rewrite of it"
        rewritten += body != original
    assert 0 < rewritten < len(wire.sent), "both patched and unpatched calls happened"
    assert telos_wrap.failure_counts() == {}, "a race made telos fail (and fall back)"


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_request_started_before_unpatch_never_sends_the_private_hint_header(sdk: str) -> None:
    wire = Wire()
    client = client_for(sdk, wire)
    telos_wrap.patch()
    with telos_wrap.session("raw-session-id-123"):
        hint = {"telos_hint": {"isolation": "tenant-raw-42"}}
        if sdk == "anthropic":
            manager = client.messages.stream(**kwargs_for(sdk), **hint)
        else:
            manager = client.chat.completions.stream(**kwargs_for(sdk), **hint)
    telos_wrap.unpatch()
    with manager as stream:
        for _ in stream:
            pass
    headers = wire.sent[-1].headers
    assert not [name for name in headers if name.startswith(HINT_HEADER)]
    assert "raw-session-id-123" not in str(headers) and "tenant-raw-42" not in str(headers)


def test_500_asyncio_tasks_over_shared_and_separate_sessions() -> None:
    wire = Wire()
    telos_wrap.patch(strict=True)

    async def main() -> tuple[telos_wrap.Session, list[telos_wrap.Session], list[tuple[str, str, Any]]]:
        clients = {sdk: client_for(sdk, wire, is_async=True) for sdk in ("anthropic", "openai")}
        results: list[tuple[str, str, Any]] = []

        async def call(sdk: str, tag: str) -> None:
            kwargs = kwargs_for(sdk, tag)
            if sdk == "anthropic":
                result = await clients[sdk].messages.create(**kwargs)
            else:
                result = await clients[sdk].chat.completions.create(**kwargs)
            results.append((f"[req:{tag}]", _answer(sdk, result), result))

        async def alone(sdk: str, tag: str, session: telos_wrap.Session) -> None:
            async with session:
                await call(sdk, tag)

        shared = telos_wrap.session("shared-by-200-tasks")
        separate = [telos_wrap.session(f"alone-{i}") for i in range(300)]
        with shared:  # tasks created here inherit the session
            shared_tasks = [
                asyncio.create_task(call("anthropic" if i % 2 else "openai", f"s{i}")) for i in range(200)
            ]
        alone_tasks = [
            asyncio.create_task(alone("anthropic" if i % 2 else "openai", f"a{i}", separate[i]))
            for i in range(300)
        ]
        await asyncio.gather(*shared_tasks, *alone_tasks)
        return shared, separate, results

    shared, separate, results = asyncio.run(main())
    assert len(results) == 500 and len(wire.sent) == 500
    assert all(expected == got for expected, got, _ in results), "every call got its own answer"
    assert all(telos_wrap.usage_of(result) is not None for _, _, result in results)
    assert all(not name.startswith(HINT_HEADER) for sent in wire.sent for name in sent.headers)
    assert all(s.stats.requests == 1 and s.stats.responses_with_usage == 1 for s in separate)
    stats = shared.stats
    assert stats.requests == 200 and stats.responses_with_usage == 200 and stats.unreported == 0
    assert stats.by_engine == {"anthropic": 100, "openai": 100}
    anthropic_input = ANTHROPIC_USAGE["input_tokens"]
    openai_uncached = OPENAI_USAGE["prompt_tokens"] - OPENAI_USAGE["prompt_tokens_details"]["cached_tokens"]
    assert stats.raw_input == 100 * anthropic_input + 100 * openai_uncached
    assert stats.cache_read == 100 * ANTHROPIC_USAGE["cache_read_input_tokens"] + 100 * 8
    assert stats.output == 200 * 2
    assert telos_wrap.failure_counts() == {}

"""Promise S1 (docs/security.md): a request belongs to the session it was built in.

Two tenants that use the same session id, each on its own store, never get each other's pinned
documents (threads and asyncio, both SDKs, real HTTP to the emulator); a request built inside
``with session(X)`` and sent after the block — and after the application dropped ``X`` — still goes
out in ``X``; a session named by id (``telos_hint``, ``X-Telos-Session``) resolves within the
caller's own store.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest

import telos_wrap
from telos_wrap.sessions import MemoryStore, Session
from tests.over_http import Wire

from .wire import text_of


def _doc(tenant: str) -> str:
    return " ".join(f"Clause {n} of tenant {tenant}'s knowledge base: CANARY-{tenant}." for n in range(120))


def _tenant(tenant: str) -> Session:
    """Session ``support-1`` on the tenant's own store, with the tenant's document pinned."""
    session = telos_wrap.session("support-1", store=MemoryStore())
    session.pin("kb", _doc(tenant))
    return session


def _system(tenant: str) -> str:
    """A system prompt long enough to be worth caching (a tiny one is sent as the SDK built it)."""
    return f"You answer tenant {tenant}'s customers.\n" + "\n".join(
        f"Rule {n}: be precise, polite and brief in every answer you give." for n in range(150)
    )


def _anthropic_kwargs(tenant: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "system": _system(tenant),
        "messages": [{"role": "user", "content": f"hello from {tenant}"}],
    }


def _openai_kwargs(tenant: str) -> dict[str, Any]:
    return {
        "model": "gpt-5.6",
        "messages": [
            {"role": "system", "content": _system(tenant)},
            {"role": "user", "content": f"hello from {tenant}"},
        ],
    }


def _check(wire: Wire) -> None:
    """Every request carries its own tenant's document and never the other's."""
    requests = wire.requests()
    assert requests
    for body in requests:
        text = text_of(body)
        own = "A" if "hello from A" in text else "B"
        other = "B" if own == "A" else "A"
        assert f"CANARY-{own}." in text, f"tenant {own}'s request lacks its own pinned document"
        assert f"CANARY-{other}." not in text, f"tenant {own}'s request carries tenant {other}'s document"


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_same_id_on_two_stores_with_threads(wire: Wire, sdk: str) -> None:
    sessions = {"A": _tenant("A"), "B": _tenant("B")}
    client = wire.anthropic() if sdk == "anthropic" else wire.openai()
    kwargs = _anthropic_kwargs if sdk == "anthropic" else _openai_kwargs
    barrier = threading.Barrier(2)

    def run(tenant: str) -> None:
        for _ in range(12):
            barrier.wait()
            with sessions[tenant]:
                if sdk == "anthropic":
                    manager = client.messages.stream(**kwargs(tenant))
                else:
                    manager = client.chat.completions.stream(**kwargs(tenant))
            barrier.wait()  # both built before either is sent
            with manager as stream:  # sent after the block, while the other thread enters its own
                stream.get_final_completion() if sdk == "openai" else stream.get_final_message()

    threads = [threading.Thread(target=run, args=(tenant,)) for tenant in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    assert len(wire.requests()) == 24
    _check(wire)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_same_id_on_two_stores_with_asyncio(wire: Wire, sdk: str) -> None:
    """The issue's repro: B's call built inside ``with sb:``, A's inside ``with sa:``, B's awaited."""
    sessions = {"A": _tenant("A"), "B": _tenant("B")}

    async def main() -> None:
        client: Any = wire.async_anthropic() if sdk == "anthropic" else wire.async_openai()
        create = client.messages.create if sdk == "anthropic" else client.chat.completions.create
        kwargs = _anthropic_kwargs if sdk == "anthropic" else _openai_kwargs
        for _ in range(5):
            with sessions["B"]:
                b = create(**kwargs("B"))
            with sessions["A"]:
                a = create(**kwargs("A"))
            await b
            await a
            calls = []
            for tenant in "ABAB":
                with sessions[tenant]:
                    calls.append(create(**kwargs(tenant)))
            await asyncio.gather(*calls)
        await client.close()

    asyncio.run(main())
    assert len(wire.requests()) == 30
    _check(wire)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_request_sent_after_its_block_stays_in_its_session(wire: Wire, sdk: str) -> None:
    """A stream manager returned from the function that opened the session, the session object
    dropped, then entered: it goes out in that session, with its pinned document."""
    client: Any = wire.anthropic() if sdk == "anthropic" else wire.openai()

    def build() -> Any:
        with _tenant("A"):
            if sdk == "anthropic":
                return client.messages.stream(**_anthropic_kwargs("A"))
            return client.chat.completions.stream(**_openai_kwargs("A"))

    manager = build()
    gc.collect()
    with manager as stream:
        stream.get_final_message() if sdk == "anthropic" else stream.get_final_completion()
    client.close()
    _check(wire)


def test_a_named_session_resolves_within_the_callers_store(wire: Wire) -> None:
    """``telos_hint={"session": id}`` / ``X-Telos-Session`` inside tenant B's session name B's
    session with that id on B's store, never tenant A's live session with the same id."""
    a, b = _tenant("A"), _tenant("B")
    client = wire.anthropic()
    with a:
        client.messages.create(**_anthropic_kwargs("A"), telos_hint={"session": "support-1"})
    with b:
        client.messages.create(**_anthropic_kwargs("B"), telos_hint={"session": "support-1"})
        client.messages.create(**_anthropic_kwargs("B"), extra_headers={"X-Telos-Session": "support-1"})
    client.close()
    _check(wire)
    assert a.stats.requests == 1 and b.stats.requests == 2


ODD_IDS = [
    "x" * 100_000,
    "a\x00b\x1b[31m",
    "../../etc/passwd",
    "*?[]{}",
    "support-1\nsupport-2",
    "\u202eevil",
    " ",
]


@pytest.mark.parametrize("odd", ODD_IDS, ids=["huge", "control", "path", "glob", "newline", "bidi", "blank"])
def test_odd_session_ids_name_their_own_session_and_never_break_the_call(wire: Wire, odd: str) -> None:
    """A session id is application input, but it may come from an end user (a thread id): any string
    names a session of its own on the caller's store, and the call goes out."""
    a = _tenant("A")
    client = wire.anthropic()
    with a:
        client.messages.create(**_anthropic_kwargs("A"), telos_hint={"session": odd})
    client.close()
    [sent] = wire.requests()
    assert "hello from A" in text_of(sent)
    assert a.stats.requests == 0, "the named session is another one than the active session"
    assert Session(odd, store=a.store).bind(client).stats.requests == 1  # in the call's tenant (T2)


def test_a_request_whose_token_was_pushed_out_never_joins_the_session_open_when_sent(wire: Wire) -> None:
    """The pending table is bounded: a request built in tenant A's session whose entry newer calls
    pushed out, sent inside tenant B's block, goes out in no session - never in B's."""
    from telos_wrap.patch import calls

    a, b = _tenant("A"), _tenant("B")
    client = wire.anthropic()
    with a:
        manager = client.messages.stream(**_anthropic_kwargs("A"))
    with calls._pending_lock:
        calls._pending.clear()  # what 4,096 newer calls do
    with b, manager as stream:
        stream.get_final_message()
    client.close()
    [sent] = wire.requests()
    assert "CANARY-B." not in text_of(sent)
    assert a.stats.requests == 0 and b.stats.requests == 0

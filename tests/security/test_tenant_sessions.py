"""Promise T2 (docs/security.md): a named session is its tenant's unless the application calls its id global.

Issue 44: with two API keys and the same session id (a ticket id two customers share) on one store
and prefix, tenant B read tenant A's stats and learned spans. Here two tenants (two clients with
their own API keys, real SDKs over real HTTP to the emulator) name one session id on one
``MemoryStore`` and on real Redis: neither reads the other's stats, learned spans, pins or folds,
whether the id is given by ``session()`` or by ``telos_hint``; ``scope="global"`` shares them;
``Session.erase()`` removes everything of the session, in its tenant and in the layout before
tenants; a session read or pinned before its first call binds to its tenant at that call; an entry
written in the earlier layout (the id's own key) is found by the tenant's first call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

import telos_wrap
from telos_wrap.errors import TelosStageError
from telos_wrap.sessions import MemoryStore, RedisStore, Session, set_default_store
from telos_wrap.sessions import registry as session_registry

from .wire import Wire, emulator_over_http

MODEL = "claude-opus-4-8"
RULES = "\n".join(f"Rule {n}: answer precisely and politely, citing the policy." for n in range(150))
DOC = "Handbook. " + " ".join(f"Section {n} says what to do in case {n}." for n in range(200))
TICKET = "ticket-7"


class _Wire(Wire):
    """``Wire`` whose clients are closed with it."""

    clients: list[Any]

    def anthropic(self, **kwargs: Any) -> Any:
        made = super().anthropic(**kwargs)
        self.clients.append(made)
        return made


@pytest.fixture
def wire(patched: None) -> Iterator[Wire]:
    session_registry._named.clear()
    with emulator_over_http() as plain:
        wire = _Wire(plain.emulator, plain.url)
        wire.clients = []
        yield wire
        for client in wire.clients:
            client.close()
    session_registry._named.clear()


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    pytest.importorskip("redis")
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    made = RedisStore(url, prefix=prefix, ttl=600)
    try:
        yield made
    finally:
        for key in made.redis.scan_iter(match=f"{prefix}*"):
            made.redis.delete(key)
        made.close()


def _keys(store: Any) -> list[str]:
    """Every session id the store holds an entry or blobs for."""
    if isinstance(store, MemoryStore):
        return list(store._entries)
    prefix = store.prefix
    names = (key.decode()[len(prefix) :] for key in store.redis.scan_iter(f"{prefix}*"))
    return sorted({name.split("}")[0].lstrip("{") for name in names})


def _system(tenant: str, turn: int) -> str:
    # A live value that changes every request: the session learns it as a volatile span.
    minute = turn if tenant == "A" else 0  # B's prompt never changes: it learns nothing of its own
    return f"You answer for customer {tenant}.\nTime now: 10:{minute:02d}:07.\n{RULES}"


def _messages(turn: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for n in range(1, turn + 1):
        messages += [
            {"role": "assistant", "content": f"answer {n}"},
            {"role": "user", "content": f"more {n}"},
        ]
    return messages


def _call(client: Any, tenant: str, turn: int, **extra: Any) -> None:
    client.messages.create(
        model=MODEL, max_tokens=8, system=_system(tenant, turn), messages=_messages(turn), **extra
    )


def _reader(store: Any, client: Any, scope: str = "tenant") -> Session:
    """Another process's view of the session: a fresh object bound to ``client``'s tenant."""
    return Session(TICKET, store=store, scope=scope).bind(client)


def test_two_tenants_with_one_session_id_never_read_each_other(wire: Wire, store: Any) -> None:
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store) as sa:
        sa.pin("handbook", DOC)
        for turn in range(4):
            _call(a, "A", turn)
        sa.fold(slugs=["handbook"], summary="The handbook, folded.")
        _call(a, "A", 4)
    with telos_wrap.session(TICKET, store=store) as sb:
        for turn in range(2):
            _call(b, "B", turn)
    assert sa.store_key != sb.store_key and TICKET not in _keys(store)
    assert not any("key-tenant" in key for key in _keys(store))  # namespaces are digests
    for view_a, view_b in ((sa, sb), (_reader(store, a), _reader(store, b))):
        assert view_a.stats.requests == 5 and view_b.stats.requests == 2
        assert view_a.volatile_spans and not view_b.volatile_spans
        assert set(view_a.state.pins) == {"handbook"} and view_a.state.slug_folds
        assert not view_b.state.pins and not view_b.state.slug_folds
        assert "request 4" in view_a.explain(4) and "no request 4" in view_b.explain(4)
    requests = wire.requests()
    assert all(DOC not in json.dumps(body) for body in requests[5:])  # B's requests
    assert DOC in json.dumps(requests[0])  # A's first request has the pinned document


def test_sessions_named_by_hint_are_per_tenant(wire: Wire, store: Any) -> None:
    set_default_store(store)  # the autouse fixture puts the previous one back
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    for turn in range(3):
        _call(a, "A", turn, telos_hint={"session": TICKET})
    _call(b, "B", 0, extra_headers={"X-Telos-Session": TICKET})
    assert _reader(store, a).stats.requests == 3
    assert _reader(store, b).stats.requests == 1
    assert not _reader(store, b).volatile_spans and _reader(store, a).volatile_spans


def test_the_global_scope_shares_one_state(wire: Wire, store: Any) -> None:
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store, scope="global") as sa:
        sa.pin("handbook", DOC)
        for turn in range(3):
            _call(a, "A", turn)
    with telos_wrap.session(TICKET, store=store, scope="global") as sb:
        _call(b, "A", 3)
    assert sa.store_key == sb.store_key == TICKET and _keys(store) == [TICKET]
    assert sb.stats.requests == sa.stats.requests == 4
    assert set(sb.state.pins) == {"handbook"} and sb.volatile_spans
    assert DOC in json.dumps(wire.requests()[-1])
    with pytest.raises(telos_wrap.errors.TelosHintError, match="scope"):
        telos_wrap.session(TICKET, scope="everyone")


def test_erase_removes_everything_of_the_session(wire: Wire, store: Any) -> None:
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store, scope="global") as old:  # the layout before tenants
        _call(a, "A", 0)
    with telos_wrap.session(TICKET, store=store) as sa:
        sa.pin("handbook", DOC)
        for turn in range(1, 4):
            _call(a, "A", turn)
    with telos_wrap.session(TICKET, store=store) as sb:
        _call(b, "B", 0)
    assert old.store_key in _keys(store) and sa.store_key in _keys(store)
    sa.erase()
    left = _keys(store)
    assert sa.store_key not in left and TICKET not in left
    assert sb.store_key in left and _reader(store, b).stats.requests == 2  # migrated + its own
    assert _reader(store, a).stats.requests == 0 and not _reader(store, a).state.pins


def test_a_session_binds_to_its_tenant_at_its_first_call(wire: Wire, store: Any) -> None:
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    for turn in range(2):  # the per-request pattern: a new session object, pinned before each call
        with telos_wrap.session(TICKET, store=store) as s:
            assert not s.bound and s.stats.requests == 0  # before its call: nothing stored is read
            s.pin("handbook", DOC)
            assert set(s.state.pins) == {"handbook"} and s.store_key == TICKET
            _call(a, "A", turn)
            assert s.bound and s.stats.requests == turn + 1 and set(s.state.pins) == {"handbook"}
    assert all(json.dumps(body).count("Section 199 says") == 1 for body in wire.requests())
    with telos_wrap.session(TICKET, store=store) as other:
        other.pin("handbook", "Another tenant's handbook. " * 200)
        _call(b, "B", 0)
    assert DOC not in json.dumps(wire.requests()[-1]) and _reader(store, a).stats.requests == 2
    assert TICKET not in _keys(store)  # nothing was stored before a binding
    with telos_wrap.session(TICKET, store=store) as again:  # tenant A, another text under a frozen slug
        again.pin("handbook", "Another handbook. " * 200)
        with pytest.raises(TelosStageError, match="frozen"):  # strict here; fails open by default
            _call(a, "A", 2)
        _call(a, "A", 2)  # the pin was dropped: the stored one stays
    assert _reader(store, a).stats.requests == 3 and DOC in json.dumps(wire.requests()[-1])


def test_an_entry_of_the_earlier_layout_is_found_by_the_tenants_first_call(wire: Wire, store: Any) -> None:
    a = wire.anthropic(api_key="key-tenant-a")
    with telos_wrap.session(TICKET, store=store, scope="global") as old:  # what the previous version wrote
        old.pin("handbook", DOC)
        for turn in range(3):
            _call(a, "A", turn)
    learned = old.volatile_spans
    assert learned
    with telos_wrap.session(TICKET, store=store) as new:
        _call(a, "A", 3)
    assert new.stats.requests == 4 and set(new.state.pins) == {"handbook"}
    assert new.volatile_spans[: len(learned)] == learned
    assert DOC in json.dumps(wire.requests()[-1])
    assert new.store_key in _keys(store)


def test_async_clients_keep_tenants_apart(wire: Wire, store: Any) -> None:
    async def main() -> None:
        a = wire.async_anthropic(api_key="key-tenant-a")
        b = wire.async_anthropic(api_key="key-tenant-b")
        async with telos_wrap.session(TICKET, store=store) as sa:
            sa.pin("handbook", DOC)
            for turn in range(3):
                await a.messages.create(
                    model=MODEL, max_tokens=8, system=_system("A", turn), messages=_messages(turn)
                )
        async with telos_wrap.session(TICKET, store=store) as sb:
            await b.messages.create(model=MODEL, max_tokens=8, system=_system("B", 0), messages=_messages(0))
        await sa.aflush()
        await sb.aflush()
        assert sa.stats.requests == 3 and sb.stats.requests == 1
        assert set(sa.state.pins) == {"handbook"} and not sb.state.pins
        await sa.aerase()
        assert sa.store_key not in _keys(store) and sb.store_key in _keys(store)
        await a.close()
        await b.close()
        if isinstance(store, RedisStore):
            await store.aclose()  # its async client belongs to this event loop

    asyncio.run(main())

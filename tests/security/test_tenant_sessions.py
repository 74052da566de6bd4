"""Promise T2 (docs/security.md): a named session is its tenant's unless the application calls its id global.

Issue 44: with two API keys and the same session id (a ticket id two customers share) on one store
and prefix, tenant B read tenant A's stats and learned spans. Here two tenants (two clients with
their own API keys, real SDKs over real HTTP to the emulator) name one session id on one
``MemoryStore`` and on real Redis: neither reads the other's stats, learned spans, pins or folds,
whether the id is given by ``session()`` or by ``telos_hint``; the request tenant B sends is the one
it would send on an empty store; ``scope="global"`` shares them; ``Session.erase()`` of one tenant's
session leaves the other's and the global one; a session read or pinned before its first call binds
to its tenant at that call. One layout: a tenant's session never reads the id's own key.
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
from tests.over_http import Wire, emulator_over_http

from .wire import conversation

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


def _call(client: Any, tenant: str, turn: int, **extra: Any) -> None:
    client.messages.create(
        model=MODEL, max_tokens=8, system=_system(tenant, turn), messages=conversation(turn), **extra
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


def _queue_prompt(depth: int) -> str:
    # One application, one template: a live value that is not self-labelled as the present, learned
    # at its first change (docs/sessions.md, "Learned volatility").
    return f"You answer support tickets.\nOpen tickets in the queue: {depth}.\n{RULES}"


def _ticket_call(client: Any, turn: int, depth: int) -> None:
    client.messages.create(
        model=MODEL, max_tokens=8, system=_queue_prompt(depth), messages=conversation(turn)
    )


def _first_b_request(wire: Wire, store: Any, scope: str) -> tuple[dict[str, Any], Session, Session]:
    """Issue 44's drill: tenant A talks in ticket ``TICKET`` with its handbook pinned (the queue depth
    changes every request: a learned span), then tenant B's conversation of the same id on the same
    store and prefix starts."""
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store, scope=scope) as sa:
        sa.pin("handbook", DOC)
        for turn in range(4):
            _ticket_call(a, turn, 10 + turn)
    with telos_wrap.session(TICKET, store=store, scope=scope) as sb:
        _ticket_call(b, 0, 3)
    return wire.requests()[-1], sa, sb


def test_issue_44_tenant_b_sends_what_it_would_send_on_an_empty_store(wire: Wire, store: Any) -> None:
    sent_b, sa, sb = _first_b_request(wire, store, "tenant")
    with telos_wrap.session(TICKET, store=MemoryStore()):  # B alone, nothing learned by anyone
        _ticket_call(wire.anthropic(api_key="key-tenant-b"), 0, 3)
    alone = wire.requests()[-1]
    assert sent_b == alone, "tenant B's request was shaped by what tenant A's conversation learned"
    assert sa.volatile_spans and not sb.volatile_spans
    assert set(sa.state.pins) == {"handbook"} and not sb.state.pins
    assert (sa.stats.requests, sb.stats.requests) == (4, 1)
    assert (_reader(store, wire.anthropic(api_key="key-tenant-b")).stats.requests) == 1


def test_issue_44_the_global_scope_shares_what_was_learned_on_purpose(wire: Wire, store: Any) -> None:
    sent_b, sa, sb = _first_b_request(wire, store, "global")
    with telos_wrap.session(TICKET, store=MemoryStore(), scope="global"):
        _ticket_call(wire.anthropic(api_key="key-tenant-b"), 0, 3)
    alone = wire.requests()[-1]
    assert sent_b != alone, "the shared state changes nothing: the tenant test above proves nothing"
    assert DOC in json.dumps(sent_b) and DOC not in json.dumps(alone)  # A's pinned handbook
    assert sb.volatile_spans == sa.volatile_spans and sb.stats.requests == 5
    assert set(sb.state.pins) == {"handbook"}


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


def test_erase_of_one_tenant_leaves_the_other_and_the_global_session(wire: Wire, store: Any) -> None:
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store, scope="global") as shared:
        _call(a, "A", 0)
    with telos_wrap.session(TICKET, store=store) as sa:
        sa.pin("handbook", DOC)
        for turn in range(1, 4):
            _call(a, "A", turn)
    with telos_wrap.session(TICKET, store=store) as sb:
        _call(b, "B", 0)
    assert sorted(_keys(store)) == sorted([shared.store_key, sa.store_key, sb.store_key])
    sa.erase()
    assert sorted(_keys(store)) == sorted([TICKET, sb.store_key])  # A's entry and its blobs are gone
    assert _reader(store, b).stats.requests == 1  # B's own request, nothing of A's or the global one
    assert _reader(store, a, scope="global").stats.requests == 1  # the global session is another one
    fresh = _reader(store, a)
    assert fresh.stats.requests == 0 and not fresh.state.pins and not fresh.volatile_spans
    _reader(store, b).erase()
    assert _keys(store) == [TICKET]


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


def test_a_fold_before_the_first_call_is_checked_in_the_tenants_state(wire: Wire, store: Any) -> None:
    """The per-request pattern: a new object folds a document its tenant pinned in an earlier request
    (it cannot know it before its binding); a slug the tenant never pinned fails that call open."""
    a, b = wire.anthropic(api_key="key-tenant-a"), wire.anthropic(api_key="key-tenant-b")
    with telos_wrap.session(TICKET, store=store) as first:
        first.pin("handbook", DOC)
        _call(a, "A", 0)
    with telos_wrap.session(TICKET, store=store) as other_tenant:
        other_tenant.fold(slugs=["handbook"], summary="B's summary.")  # B pinned nothing: not B's slug
        with pytest.raises(TelosStageError, match="cannot fold"):  # strict here; fails open by default
            _call(b, "B", 0)
        assert not other_tenant.state.slug_folds  # dropped, not tried again
        _call(b, "B", 0)
    with telos_wrap.session(TICKET, store=store) as later:
        later.fold(slugs=["handbook"], summary="The handbook, folded.")
        assert not later.bound and later.state.slug_folds  # recorded here, not checked yet
        _call(a, "A", 1)
    sent = json.dumps(wire.requests()[-1])
    assert "The handbook, folded." in sent and DOC not in sent and "B's summary." not in sent
    reader = _reader(store, a)
    assert [f.slug for f in reader.state.slug_folds] == ["handbook"] and reader.stats.requests == 2
    assert not _reader(store, b).state.slug_folds and _reader(store, b).stats.requests == 1


def test_a_tenants_session_never_reads_the_ids_own_entry(wire: Wire, store: Any) -> None:
    """One layout: what is kept under the id itself (a global session's state) is not a tenant's."""
    a = wire.anthropic(api_key="key-tenant-a")
    with telos_wrap.session(TICKET, store=store, scope="global") as shared:
        shared.pin("handbook", DOC)
        for turn in range(3):
            _call(a, "A", turn)
    assert shared.volatile_spans
    kept = store.load(TICKET)
    assert kept is not None
    with telos_wrap.session(TICKET, store=store) as mine:
        _call(a, "A", 3)
    assert mine.stats.requests == 1 and not mine.state.pins and not mine.volatile_spans
    assert DOC not in json.dumps(wire.requests()[-1])
    assert store.load(TICKET) == kept  # the global entry neither read into nor written by the tenant
    assert sorted(_keys(store)) == sorted([TICKET, mine.store_key])


def test_async_clients_keep_tenants_apart(wire: Wire, store: Any) -> None:
    async def main() -> None:
        a = wire.async_anthropic(api_key="key-tenant-a")
        b = wire.async_anthropic(api_key="key-tenant-b")
        async with telos_wrap.session(TICKET, store=store) as sa:
            sa.pin("handbook", DOC)
            for turn in range(3):
                await a.messages.create(
                    model=MODEL, max_tokens=8, system=_system("A", turn), messages=conversation(turn)
                )
        async with telos_wrap.session(TICKET, store=store) as sb:
            await b.messages.create(
                model=MODEL, max_tokens=8, system=_system("B", 0), messages=conversation(0)
            )
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

"""Creating and finding sessions: ``session()``, the active one, the implicit and the named ones.

``session()`` makes a ``core.Session`` from checked options; ``current_session()`` is the
innermost active one in this context; a call outside any session gets its implicit session
(bounded LRU, keyed by what stays fixed for a conversation), a ``telos_hint={"session": id}`` its
named session on the caller's store (docs/sessions.md, docs/security.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from telos_wrap.errors import TelosHintError
from telos_wrap.ir.hints import TelosHints, parse_hints
from telos_wrap.ir.model import Api
from telos_wrap.ir.shared import shared_texts
from telos_wrap.sessions import live
from telos_wrap.sessions.arguments import check_session_arguments
from telos_wrap.sessions.core import Session, runtime_of
from telos_wrap.sessions.identity import conversation_key
from telos_wrap.sessions.runtime import CacheBreakCallback
from telos_wrap.sessions.stores.store import SessionStore, default_store
from telos_wrap.sessions.sync import known
from telos_wrap.sessions.tenancy import SCOPES, SHARED
from telos_wrap.sessions.views.stats import PriceMultipliers

__all__ = [
    "current_session",
    "implicit_session",
    "memory_limits",
    "named_session",
    "session",
    "set_memory_limits",
]

#: Sessions the registry keeps (implicit ones; hint-named ones on a store, a table of their own).
_IMPLICIT_LIMIT = 1024


def memory_limits() -> dict[str, int]:
    """The process's memory bounds for sessions (docs/sessions.md, "Memory"): ``implicit_sessions``
    (sessions in each of the registry's tables), ``session_texts`` (bytes of texts live sessions
    hold in this process: history memos, wire ledgers, last requests), ``shared_texts`` (bytes of
    the texts held once for every conversation that sends them), ``known_sessions`` (sessions whose
    last-known state the process keeps for every ``Session`` object with their id: ``sync/known.py``).
    The default store's own bound is its ``max_bytes`` / ``max_sessions`` (``MemoryStore``)."""
    return {
        "implicit_sessions": _IMPLICIT_LIMIT,
        "known_sessions": known.LIMIT,
        "session_texts": live.WARM_BYTES,
        "shared_texts": shared_texts.max_bytes,
    }


def set_memory_limits(
    *,
    implicit_sessions: int | None = None,
    session_texts: int | None = None,
    shared: int | None = None,
    known_sessions: int | None = None,
) -> dict[str, int]:
    """Change the bounds ``memory_limits`` reports (``None`` keeps one); returns the previous ones.
    Lower bounds apply from the next request on."""
    global _IMPLICIT_LIMIT
    previous = memory_limits()
    for name, value in (
        ("implicit_sessions", implicit_sessions),
        ("session_texts", session_texts),
        ("known_sessions", known_sessions),
    ):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if shared is not None and (not isinstance(shared, int) or shared < 0):
        raise ValueError(f"shared must be a non-negative integer, got {shared!r}")
    if implicit_sessions is not None:
        _IMPLICIT_LIMIT = implicit_sessions
    if session_texts is not None:
        live.WARM_BYTES = session_texts
    if known_sessions is not None:
        known.LIMIT = known_sessions
    if shared is not None:
        shared_texts.max_bytes = shared
    return previous


def session(
    session_id: str | None = None,
    *,
    engine: str | None = None,
    store: SessionStore | str | None = None,
    ttl: str | None = None,
    strict: bool | None = None,
    hints: TelosHints | Mapping[str, Any] | None = None,
    on_cache_break: CacheBreakCallback | None = None,
    learn_volatility: bool = True,
    diagnostics: bool = False,
    prices: Mapping[str, PriceMultipliers] | None = None,
    clock: Callable[[], float] | None = None,
    fleet_learning: bool | None = None,
    output_filter: Any = None,
    context: Any = None,
    scope: str = "tenant",
) -> Session:
    """Create a session; use it as ``with telos_wrap.session(...):`` or ``async with``.

    Args:
        session_id: a stable id (state is shared by every ``Session`` with this id on one store);
            generated when omitted.
        engine: engine adapter for the session's calls (``TelosHints.engine``).
        store: where the state lives (default: the process-wide ``MemoryStore``; pass a
            ``RedisStore`` to share a session between workers), or a store URL
            (``"redis://host:6379/0"``, ``"memory://"``: ``store_from_url``, one store per URL).
        ttl: cache lifetime of the stable prefix (``"5m"``/``"1h"``, ``"30m"``/``"12h"``).
        strict: raise instead of failing open, for this session's calls.
        hints: default ``TelosHints`` (or a dict, validated) for every call in the session.
        on_cache_break: called with each ``CacheBreak`` (after the warning is logged).
        learn_volatility: learn the live values and changing lines of the system prompt as DROP
            (on by default; docs/sessions.md, "Learned volatility").
        diagnostics: on Anthropic, send ``diagnostics.previous_message_id`` so the server's
            ``cache_miss_reason`` lands in each ``UsageReport``.
        prices: price multipliers per engine over ``DEFAULT_PRICES`` (for ``stats.cost``).
        clock: seconds clock for TTL reasoning (default ``time.time``).
        fleet_learning: start from what earlier conversations of the same system-prompt template
            learned, and publish what this one learns (docs/sessions.md, "Fleet learning");
            ``None``: ``patch(fleet_learning=...)``, on by default.
        output_filter: the output filter for the session's tool results (``"off"``, ``"safe"``,
            ``"aggressive"`` or a ``telos_wrap.OutputFilter``); ``None``: ``patch(output_filter=...)``.
            A call's ``telos_hint={"output_filter": ...}`` overrides it (docs/output-filter.md).
        context: fold old tool results under pressure (``TelosHints.context``): a dict written as
            Anthropic's ``clear_tool_uses_20250919`` edit or a ``ContextPolicy``; ``None``:
            ``patch(context=...)``, off by default (docs/sessions.md, "Context under pressure").
        scope: ``"tenant"`` (default): the state is kept within the namespace of the tenant of the
            session's first call (its client's credentials and base URL, the ``isolation`` hint), so
            two tenants naming the same id never share it; ``"global"``: the id is global, every
            tenant naming it on the store shares one state (docs/sessions.md, "Tenants").

    Raises ``TelosHintError`` saying what is valid for an invalid argument (a session id that is
    not a string, an unknown engine or ttl, ...) or hints (listing the valid keys).
    """
    check_session_arguments(
        session_id,
        engine=engine,
        ttl=ttl,
        strict=strict,
        learn_volatility=learn_volatility,
        diagnostics=diagnostics,
        on_cache_break=on_cache_break,
        clock=clock,
        prices=prices,
        fleet_learning=fleet_learning,
    )
    if scope not in SCOPES:
        raise TelosHintError(f"session(scope=...) must be one of {SCOPES}, got {scope!r}")
    parsed = parse_hints(hints)
    if engine is not None or ttl is not None or output_filter is not None or context is not None:
        data = parsed.model_dump(exclude_unset=True)
        given = (("engine", engine), ("ttl", ttl), ("output_filter", output_filter), ("context", context))
        data.update({k: v for k, v in given if v is not None})
        try:
            parsed = parse_hints(data)
        except TelosHintError as exc:
            if output_filter is None:
                raise
            raise TelosHintError(
                str(exc).replace("telos_hint={'output_filter': ...}", "session(output_filter=...)")
            ) from None
    return Session(
        session_id,
        store=store,
        hints=parsed,
        strict=strict,
        on_cache_break=on_cache_break,
        learn_volatility=learn_volatility,
        diagnostics=diagnostics,
        prices=prices,
        clock=clock,
        fleet_learning=fleet_learning,
        scope=scope,
    )


def current_session() -> Session | None:
    """The innermost session active in this context, if any."""
    found: Session | None = live.innermost()  # only ``Session.__enter__`` pushes
    return found


#: Guards the two tables below.
_tables_lock = threading.Lock()
_implicit: OrderedDict[str, Session] = OrderedDict()
_named: OrderedDict[tuple[int, str, str], Session] = OrderedDict()


def _lru_get(
    table: OrderedDict[Any, Session],
    key: Any,
    make: Callable[[], Session],
    valid: Callable[[Session], bool] | None = None,
) -> Session:
    """The session under ``key``, made by ``make`` if absent (or not ``valid`` any more).

    A session pushed out of the table is cooled (``SessionRuntime.cool``: its texts dropped, its pending
    usage written to an in-process store), so nothing of this process keeps it alive any more
    unless the application holds it.
    """
    evicted: list[Session] = []
    with _tables_lock:
        found = table.get(key)
        if found is None or (valid is not None and not valid(found)):
            found = table[key] = make()
            while len(table) > _IMPLICIT_LIMIT:
                evicted.append(table.popitem(last=False)[1])
        else:
            table.move_to_end(key)
    for session in evicted:
        runtime_of(session).cool()
    return found


def implicit_session(
    api: Api, body: Mapping[str, Any], *, drop_patterns: Sequence[str] = (), tenant: str = ""
) -> Session:
    """The implicit session of a request made outside any ``session()``: ``implicit-<key>``.

    The key (``sessions.identity.conversation_key``) is what stays fixed across the turns of one
    conversation — API, model, tool names, the caller's own user/conversation fields, and the
    conversation's opening message with its envelopes stripped, and ``tenant`` (a digest of the
    isolation hint and the client's credentials and base URL) — never the system prompt,
    instructions or envelopes a harness rebuilds every turn (docs/sessions.md). Bounded LRU.
    """
    digest = conversation_key(api, body, drop_patterns, tenant)
    return _lru_get(
        _implicit, digest, lambda: Session(f"implicit-{digest}", implicit=True, keep_requests=False)
    )


def named_session(session_id: str, *, store: SessionStore | None = None, space: str | None = None) -> Session:
    """The session a ``telos_hint={"session": id}`` or ``X-Telos-Session`` names, within ``store``.

    ``store``: the caller's own store (the patch layer passes the store of the session the call was
    built in, else the default); ``None`` means the process default store. ``space``: the call's
    tenant namespace (``tenancy``; ``None``: no tenant signal). Returns the live session with that
    id *on that store* that serves that tenant (bound to it, or global), or a new one on it bound to
    the tenant, whose state is whatever the store holds for the id in the tenant's namespace. A
    session with the same id on another store, or bound to another tenant, is never returned
    (docs/security.md).
    """
    store = default_store() if store is None else store
    on_default = store is default_store()
    for given in (store, *((None,) if on_default else ())):
        found = live.find(given, session_id)
        if isinstance(found, Session) and found.store is store and runtime_of(found).serves(space):
            return found
    tenant = space or SHARED

    def make(on: SessionStore | None) -> Session:
        made = Session(session_id, store=on, keep_requests=False)
        runtime_of(made).bind_tenant(tenant)
        return made

    if on_default:
        return _lru_get(_named, (0, tenant, session_id), lambda: make(None))
    # Keyed by the store's identity; an entry is valid only while it is that very store (an id may
    # be reused once a store is gone, but an entry here keeps its store alive through its session).
    return _lru_get(
        _named,
        (id(store), tenant, session_id),
        lambda: make(store),
        valid=lambda found: found.store is store,
    )

"""A dashboard of a session store: every conversation a Redis (or Redis Cluster) store holds.

A store keeps what telos learned as hashes and positions plus each session's counters (docs/
sessions.md), never the conversation, so this view shows totals per conversation, the positions and
reasons of its recent cache breaks (without their sentences, which may quote a prompt), and counts
of what was learned and folded. Session ids are shown as the digest OpenTelemetry spans use.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from telos_wrap.dashboard.model import BreakView, ConversationView, Dashboard
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.hashed import session_hash
from telos_wrap.sessions.views.stats import SessionStats


def states_in(client: Any, prefix: str) -> Iterator[SessionState]:
    """Every session state under ``prefix`` on a redis-py client (a cluster's: on every primary).

    Keys are ``<prefix>{<tag>}:session`` hashes (``sessions/stores/redis_store.py``); a state that
    does not parse (another application's key under the same prefix) is skipped.
    """
    for key in client.scan_iter(match=f"{prefix}*:session", count=500):
        text = client.hget(key, "state")
        if text is None:
            continue
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        try:
            yield SessionState.loads(text)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            continue


def conversation_of(state: SessionState) -> ConversationView:
    """One stored session as a conversation view: counters, break positions, learned counts."""
    stats = SessionStats.of(state)
    spans = tuple(state.volatile)
    return ConversationView(
        name=session_hash(state.session_id),
        request_count=stats.requests,
        input=stats.total_input,
        read=stats.cache_read,
        write=stats.cache_write,
        cost=stats.cost,
        native_cost=None,
        breaks=tuple(
            BreakView(b.request, str(b.reason), b.where, b.tokens_at_risk) for b in state.recent_breaks
        ),
        break_count=stats.cache_breaks,
        learned_spans=len(spans),
        fleet_spans=sum(1 for span in spans if getattr(span, "origin", "") == "fleet"),
        folds=len(state.slug_folds) + len(state.range_folds),
        fallbacks=stats.fallbacks,
    )


def from_states(title: str, states: Iterable[SessionState]) -> Dashboard:
    """A dashboard of stored states, busiest conversation first."""
    held = list(states)
    views = sorted((conversation_of(s) for s in held), key=lambda c: (-c.input, c.name))
    engines = sorted({engine for state in held for engine in state.by_engine})
    return Dashboard(title, "store", ", ".join(engines) or "none", tuple(views))


def from_store_url(url: str, *, prefix: str = "telos:") -> Dashboard:
    """Read every session under ``prefix`` from the Redis store at ``url`` (redis://, +cluster...)."""
    from telos_wrap.sessions.stores.redis_store import RedisStore

    store = RedisStore(url, prefix=prefix)
    try:
        states = list(states_in(store.redis, prefix))
    finally:
        store.close()
    return from_states(f"{_without_password(url)}: {len(states)} conversation(s)", states)


def _without_password(url: str) -> str:
    """The URL as the page may show it: no user name or password."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return f"{scheme}://{rest.rpartition('@')[2]}"

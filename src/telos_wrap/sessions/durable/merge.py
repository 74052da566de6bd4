"""Outage work merged, not dropped: what a worker did while it could not write, added to the stored state.

A session's counters (``requests``, ``refreshes``, ``unreported``, ``breaks``, ``telos_rewrites``,
``fallbacks``, ``by_engine`` and ``usage``) are sums over every worker's calls. While a worker
cannot write (its breaker is open, or a write's answer was lost), ``StateSync`` keeps the *delta*
it added on top of the last state it read: a ``Delta``. When it can write again and finds that
another worker wrote meanwhile, ``merged`` adds the delta to the store's state instead of
discarding it.

Idempotence under lost answers and retries: every write from a worker to a shared store carries a
*mark* ``applied[writer] = seq`` (``marked``), a fresh ``seq`` per write. A write whose answer was
lost may have landed, and other workers may since have built on it (they keep the marks they read).
The worker remembers the delta each unanswered write carried; the store's mark for this writer says
which of them landed, and exactly that delta is subtracted before the rest is merged (``settle`` in
``sessions/sync/plans.py``). So a delta is added once, whatever the interleaving (docs/sessions.md,
"Outages and several workers: the invariant").

What is not a sum follows the rule "the stored state wins": the last prompt print, folds, pins,
breaks and orders are the store's (another worker's newer view of the conversation). Volatile spans
are merged by union (both were learned and verified on this session's prompt), capped at
``MAX_LEARNED`` like learning itself; so are the output filter's records of filtered tool results
(each was sent that way; the store's record of one result wins). Pure state arithmetic: no I/O,
and no other room of ``sessions`` (the durable room imports none: an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from telos_wrap.sessions.durable.records import MAX_LEARNED
from telos_wrap.sessions.durable.state import EngineUsage, SessionState

__all__ = ["MAX_WRITERS", "Delta", "delta_of", "marked", "merged"]

#: How many writers' marks a state keeps (the most recent ones). A worker's unanswered write is
#: recognized as long as fewer than this many other workers wrote the session since.
MAX_WRITERS = 32

_SCALARS = ("requests", "refreshes", "unreported", "breaks", "telos_rewrites", "fallbacks")
_USAGE = ("responses", "raw", "read", "write", "write_1h", "output")


def _usage_sum(a: EngineUsage, b: EngineUsage, sign: int) -> EngineUsage:
    return EngineUsage(*(getattr(a, k) + sign * getattr(b, k) for k in _USAGE))


@dataclass(frozen=True, slots=True)
class Delta:
    """What one worker added to a session's counters that the store is not known to hold."""

    requests: int = 0
    refreshes: int = 0
    unreported: int = 0
    breaks: int = 0
    telos_rewrites: int = 0
    fallbacks: int = 0
    by_engine: Mapping[str, int] = field(default_factory=dict)
    usage: Mapping[str, EngineUsage] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return (
            any(getattr(self, k) for k in _SCALARS)
            or any(self.by_engine.values())
            or any(any(getattr(u, k) for k in _USAGE) for u in self.usage.values())
        )

    def combine(self, other: Delta, sign: int = 1) -> Delta:
        """``self + other`` (``sign=-1``: ``self - other``)."""
        engines = dict(self.by_engine)
        for key, value in other.by_engine.items():
            engines[key] = engines.get(key, 0) + sign * value
        usage = dict(self.usage)
        for key, used in other.usage.items():
            usage[key] = _usage_sum(usage.get(key, EngineUsage()), used, sign)
        return Delta(
            **{k: getattr(self, k) + sign * getattr(other, k) for k in _SCALARS},
            by_engine={k: v for k, v in engines.items() if v},
            usage={k: v for k, v in usage.items() if any(getattr(v, f) for f in _USAGE)},
        )


def delta_of(after: SessionState, before: SessionState) -> Delta:
    """The counters ``after`` added to ``before`` (a step of this worker: ``after`` grew from ``before``)."""
    if after is before:
        return Delta()
    engines = {
        key: after.by_engine.get(key, 0) - before.by_engine.get(key, 0)
        for key in set(after.by_engine) | set(before.by_engine)
    }
    usage = {
        key: _usage_sum(after.usage.get(key, EngineUsage()), before.usage.get(key, EngineUsage()), -1)
        for key in set(after.usage) | set(before.usage)
    }
    return Delta(
        **{k: getattr(after, k) - getattr(before, k) for k in _SCALARS},
        by_engine={k: v for k, v in engines.items() if v},
        usage={k: v for k, v in usage.items() if any(getattr(v, f) for f in _USAGE)},
    )


def merged(stored: SessionState, delta: Delta, mine: SessionState) -> SessionState:
    """The store's state plus this worker's ``delta``; volatile spans of ``mine`` joined (see module)."""
    engines = dict(stored.by_engine)
    for key, value in delta.by_engine.items():
        engines[key] = engines.get(key, 0) + value
    usage = dict(stored.usage)
    for key, used in delta.usage.items():
        usage[key] = _usage_sum(usage.get(key, EngineUsage()), used, 1)
    known = {span.where for span in stored.volatile}
    extra = tuple(span for span in mine.volatile if span.where not in known)
    volatile = (*stored.volatile, *extra[: max(0, MAX_LEARNED - len(stored.volatile))])
    changes: dict[str, Any] = {k: getattr(stored, k) + getattr(delta, k) for k in _SCALARS}
    if mine.filtered.keys() - stored.filtered.keys():
        # Both filtered results the model was sent: the store's record of a result wins.
        changes["filtered"] = {**mine.filtered, **stored.filtered}
    if mine.last_response_index > stored.last_response_index:
        changes["last_response_id"] = mine.last_response_id
        changes["last_response_index"] = mine.last_response_index
    return replace(stored, by_engine=engines, usage=usage, volatile=volatile, **changes)


def marked(state: SessionState, writer: str, seq: int) -> SessionState:
    """``state`` with ``applied[writer] = seq`` (the most recent ``MAX_WRITERS`` writers kept)."""
    applied = {k: v for k, v in state.applied.items() if k != writer}
    applied[writer] = seq
    while len(applied) > MAX_WRITERS:
        del applied[next(iter(applied))]
    return replace(state, applied=applied)

"""The pure state transitions of a session's calls other than a turn: state in, (state, result) out.

A *step* is what a plan (``plans.StateSync.plan``) runs on the newest state before making the
result durable; a turn's step is ``turn.run_turn``. Here: a request sent as built (a pass-through
or a ``max_tokens=0`` refresh), a pin, a fold, forgetting the learned volatile spans. No I/O, no
clock: the time and the checks a step needs are given to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from telos_wrap.errors import RefPoolError
from telos_wrap.sessions.durable.records import RangeFold, SlugFold
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.turns.files import file_key
from telos_wrap.sessions.turns.folds import validate_range

__all__ = ["Step", "fold_step", "forget_volatility", "passthrough_step", "pin_step", "unknown_slugs"]

#: A step: the new state (``None``: unchanged) and the call's result.
Step = Callable[[SessionState], tuple[Any, Any]]


def passthrough_step(
    engine: str, body: Mapping[str, Any], now: float, *, fallback: bool = False
) -> Callable[[SessionState], tuple[SessionState, int]]:
    """Count a request sent as built; a ``max_tokens=0`` body is a refresh (its entry's time is now);
    ``fallback``: it was sent as built because a telos stage failed (``SessionState.fallbacks``)."""
    refresh = body.get("max_tokens") == 0

    def step(state: SessionState) -> tuple[SessionState, int]:
        by_engine = dict(state.by_engine)
        by_engine[engine] = by_engine.get(engine, 0) + 1
        new = replace(state, requests=state.requests + 1, by_engine=by_engine)
        if fallback:
            new = replace(new, fallbacks=state.fallbacks + 1)
        if refresh:
            last = None if state.last is None else replace(state.last, at=now)
            new = replace(
                new,
                refreshes=state.refreshes + 1,
                refreshes_since_request=state.refreshes_since_request + 1,
                last=last,
            )
        else:
            new = replace(new, refreshes_since_request=0)
        return new, state.requests

    return step


def pin_step(slug: str, key: str) -> Callable[[SessionState], tuple[SessionState, None]]:
    """Register blob ``key`` under ``slug`` in the ref-pool (slugs are frozen)."""

    def step(state: SessionState) -> tuple[SessionState, None]:
        if slug in state.pins:
            raise RefPoolError(f"ref-pool slug {slug!r} is already pinned; slugs are frozen")
        return replace(state, pins={**state.pins, slug: key}), None

    return step


def unknown_slugs(state: SessionState, slug_list: Sequence[str]) -> None:
    """Raise ``RefPoolError`` unless every slug of ``slug_list`` (not empty) is pinned in ``state`` or
    a ``<file path=…>`` block of its last request."""
    known = set(state.pins) | set(state.app.slugs if state.app else ())
    unknown = [slug for slug in slug_list if slug not in known and file_key(slug) not in known]
    if not slug_list or unknown:
        raise RefPoolError(
            f"cannot fold {unknown or list(slug_list)}: not in the ref-pool nor a <file path=…> block of "
            f"the last request (ref-pool: {sorted(k for k in known if not k.startswith('file:'))})"
        )


def fold_step(
    summary: str,
    slug_list: Sequence[str],
    message_range: tuple[int, int] | None,
    recheck: Callable[[SessionState], None],
    *,
    deferred: bool = False,
) -> Callable[[SessionState], tuple[SessionState, None]]:
    """Record a fold of ``message_range`` (if given) or of the ref-pool entries ``slug_list``;
    ``recheck`` raises if the folded state would break the last request's invariants. ``deferred``:
    the state is a session's before its binding (``sessions/tenancy.py``), which cannot know the
    slugs its tenant's stored state holds: the slugs are checked when the fold is carried over."""

    def step(state: SessionState) -> tuple[SessionState, None]:
        at = state.requests
        if message_range is not None:
            start, end = message_range
            digest = validate_range(state.app, start, end, state.range_folds)
            folds = (*state.range_folds, RangeFold(start, end, digest, summary, at))
            new = replace(state, range_folds=folds)
        else:
            if not deferred or not slug_list:
                unknown_slugs(state, slug_list)
            kept = tuple(f for f in state.slug_folds if f.slug not in slug_list)
            new = replace(state, slug_folds=(*kept, *(SlugFold(s, summary, at) for s in slug_list)))
        recheck(new)
        return new, None

    return step


def forget_volatility(state: SessionState) -> tuple[SessionState, None]:
    """Drop every learned volatile span."""
    return replace(state, volatile=()), None

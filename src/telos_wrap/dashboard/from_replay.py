"""A dashboard of a recording: its sessions replayed through the real SDKs and the emulator.

The recording (``telos_wrap.record``) or trace file is replayed twice on fresh emulators, as
``telos-wrap replay`` does (``telos_wrap.replay``): once as the caller built it with the vendor's own
caching (Anthropic's automatic caching; OpenAI-style engines cache prefixes by themselves) and once
through telos_wrap, keeping each telos session to read its cache breaks and what it learned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import telos_wrap
from telos_wrap.dashboard.model import BreakView, ConversationView, Dashboard, RequestPoint
from telos_wrap.replay.results import ReplayedTurn, RunResult
from telos_wrap.replay.runner import AS_SENT, AUTO_CACHING, TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest


def native_label(engine: str) -> str:
    """What the native baseline is on ``engine``."""
    if engine == "anthropic":
        return "Anthropic's automatic caching"
    return "the engine's own prefix caching"


def from_replay(
    title: str, sessions: Sequence[Sequence[TraceRequest]], *, engine: str, show_text: bool = False
) -> Dashboard:
    """Replay ``sessions`` natively and through telos on ``engine``; one view per conversation.

    ``show_text`` keeps each break's human sentence, which may quote the recording's text.
    """
    kept: dict[str, telos_wrap.Session] = {}

    def keep(session_id: str) -> telos_wrap.Session:
        session = telos_wrap.session(session_id)
        kept[session_id] = session
        return session

    with patched():
        native = replay(sessions, AUTO_CACHING if engine == "anthropic" else AS_SENT, engine=engine)
        telos = replay(sessions, TELOS, engine=engine, session_factory=keep)
    # replay() names each telos session "replay-<run>-<recorded id>", in the recording's order.
    by_recorded = dict(zip((s[0].session for s in sessions if s), kept.values(), strict=False))
    conversations = tuple(
        _conversation(group[0].session, native, telos, by_recorded.get(group[0].session), show_text)
        for group in sessions
        if group
    )
    return Dashboard(title, "recording", engine, conversations, native_label(engine))


def _turns(run: RunResult, session: str) -> list[ReplayedTurn]:
    return [t for t in run.turns if t.session == session]


def _conversation(
    name: str, native: RunResult, telos: RunResult, session: telos_wrap.Session | None, show_text: bool
) -> ConversationView:
    native_by_turn = {t.turn: t for t in _turns(native, name)}
    points = []
    for index, turn in enumerate(_turns(telos, name)):
        base = native_by_turn.get(turn.turn)
        points.append(
            RequestPoint(
                index=index,
                input=turn.input,
                read=turn.read,
                write=turn.write,
                cost=turn.cost(telos.prices),
                native_cost=None if base is None or base.error else base.cost(native.prices),
                error=turn.error,
            )
        )
    natives = [p.native_cost for p in points]
    native_cost = None if any(c is None for c in natives) else sum(c for c in natives if c is not None)
    breaks: tuple[BreakView, ...] = ()
    learned = fleet = folds = fallbacks = 0
    break_count = 0
    if session is not None:
        breaks = tuple(
            BreakView(b.request, str(b.reason), b.where, b.tokens_at_risk, b.detail if show_text else None)
            for b in session.cache_breaks
        )
        spans = session.volatile_spans
        learned = len(spans)
        fleet = sum(1 for span in spans if getattr(span, "origin", "") == "fleet")
        state: Any = session.state
        folds = len(getattr(state, "slug_folds", ())) + len(getattr(state, "range_folds", ()))
        fallbacks = int(getattr(state, "fallbacks", 0))
        break_count = int(getattr(state, "breaks", len(breaks)))
    return ConversationView(
        name=name,
        request_count=len(points),
        input=sum(p.input for p in points),
        read=sum(p.read for p in points),
        write=sum(p.write for p in points),
        cost=sum(p.cost for p in points),
        native_cost=native_cost,
        breaks=breaks,
        break_count=break_count,
        learned_spans=learned,
        fleet_spans=fleet,
        folds=folds,
        fallbacks=fallbacks,
        requests=tuple(points),
    )

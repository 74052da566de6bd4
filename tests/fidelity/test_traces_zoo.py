"""The fidelity property over every trace session the project ships and every harness style of the zoo.

Each request of ``src/telos_wrap/data/demo_session.jsonl.xz`` (a 43-request LangGraph customer-support
session), rewritten by every style of ``telos_wrap.testing.harnesses`` (and as recorded), goes through the
session step telos runs under ``patch()`` (``run_turn``), turn after turn. For every request: each
caller line of the system prompt is sent unchanged in place or whole at the tail (0 lines cut apart),
a moved line under a heading travels with it, JSON blocks parse, and lines that never change in the
conversation do not move (unless with a line of their unit that did, or they state the present).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import telos_wrap
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.replay.traces import group_sessions, load_trace
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.turns.turn import run_turn
from telos_wrap.testing.harnesses import rewrite_session, style_names

from .check import caller_system, check, sent_parts

TRACES = sorted((Path(telos_wrap.__file__).parent / "data").glob("*.jsonl.xz"))
SESSIONS = [
    (path.name, index, session)
    for path in TRACES
    for index, session in enumerate(group_sessions(load_trace(path)))
]


@pytest.mark.parametrize("style", ["clean", *style_names()])
@pytest.mark.parametrize("trace", SESSIONS, ids=lambda s: f"{s[0]}#{s[1]}")
def test_every_caller_line_is_in_place_or_moved_whole(style: str, trace: tuple[str, int, list]) -> None:
    _, _, requests = trace
    if style != "clean":
        requests, _ = rewrite_session(requests, style)
    api = {"anthropic": "anthropic", "openai": "openai_chat"}[requests[0].api]
    engine = "anthropic" if api == "anthropic" else "openai"
    bodies = [{k: v for k, v in request.kwargs.items() if k != "extra_headers"} for request in requests]
    systems = [caller_system(api, body) for body in bodies]
    stable = set(systems[0].split("\n")).intersection(*(text.split("\n") for text in systems[1:]))
    state = SessionState(session_id="fidelity")
    problems: list[str] = []
    moved_lines = 0
    for index, body in enumerate(bodies):
        options = PrepareOptions(engine=engine, session_id="fidelity")
        result = run_turn(state, api, body, options, pins={}, now=float(index))
        state = result.state
        sent, moved = sent_parts(api, body, result.prepared.body)
        report = check(systems[index], sent, moved, stable=stable)
        problems += [f"request {index}: {problem}" for problem in report.problems]
        moved_lines += len(report.moved)
    assert not problems, problems[:5]
    if style in ("clock-first", "clock-last", "volatile-block", "env-dump", "git-status", "kitchen-sink"):
        assert moved_lines, "the style's live lines were expected to move at some request"

"""A cache break explained in the application's terms names its real cause first (``testing.changes``).

telos sorts tool definitions itself (``bridge.canonicalize``) unless the caller marked a tool for
caching: the order a harness builds its tool list in is then no cause of a break, and an edited
definition (a timestamp in one tool's description) is.
"""

from __future__ import annotations

from typing import Any

from telos_wrap.replay.traces import TraceRequest
from telos_wrap.testing.budget import replay_requests

SYSTEM = "You are the support agent of Acme. " * 300
SCHEMA = {"type": "object"}


def _tools(turn: int, *, stamped: bool, marked: bool = False) -> list[dict[str, Any]]:
    stamp = f" Checked at 10:00:{turn:02d}." if stamped else ""
    tools: list[dict[str, Any]] = [
        {"name": "escalate", "description": f"Hand over to a human.{stamp}", "input_schema": SCHEMA},
        {"name": "lookup_order", "description": "Find an order.", "input_schema": SCHEMA},
        {"name": "refund", "description": "Refund an order.", "input_schema": SCHEMA},
    ]
    if marked:
        tools[1] = {**tools[1], "cache_control": {"type": "ephemeral"}}
    shift = turn % 3  # the harness builds the list in another order every turn
    return tools[shift:] + tools[:shift]


def _conversation(**options: Any) -> list[TraceRequest]:
    requests: list[TraceRequest] = []
    history: list[dict[str, Any]] = []
    for turn in range(4):
        history = [*history, {"role": "user", "content": f"question {turn} " + "x" * 3000}]
        tools = _tools(turn, **options)
        body = {"model": "claude-opus-5", "max_tokens": 64, "system": SYSTEM, "tools": tools}
        requests.append(TraceRequest("agent", turn, "anthropic", {**body, "messages": list(history)}))
        history = [*history, {"role": "assistant", "content": "ok"}]
    return requests


def test_an_edited_tool_is_named_before_an_order_telos_undoes() -> None:
    report = replay_requests(_conversation(stamped=True))
    assert report.break_count == 3
    for n, brk in enumerate(report.breaks, 1):
        assert brk.summary().startswith(
            f"cache break at request {n}: tool 'escalate' description line 1 changed: "
            f"'Hand over to a human. Checked at 10:00:{n - 1:02d}.' → "
            f"'Hand over to a human. Checked at 10:00:{n:02d}.' (tools_changed at tools[0]"
        ), brk.summary()
        assert "tools reordered" not in brk.change


def test_an_order_telos_undoes_is_no_break_at_all() -> None:
    report = replay_requests(_conversation(stamped=False))
    assert report.break_count == 0
    assert report.breaks == []


def test_an_order_the_caller_pinned_with_its_own_marker_is_the_cause() -> None:
    report = replay_requests(_conversation(stamped=False, marked=True))
    assert report.break_count >= 1
    first = report.breaks[0]
    assert first.change == (
        "tools reordered: ['escalate', 'lookup_order', 'refund'] → ['lookup_order', 'refund', 'escalate']"
    )

"""Issue 47, the rest: a policy fold is its own outcome (``context_folded``), the caller's own
``context_management`` coexists with telos (kept as sent; telos knows what the server clears and
marks the prefix before it), the emulator's ``clear_thinking_20251015``, and thinking in telos' own
policy. Sessions run on the emulator over the real SDK."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.ir.context import ContextPolicy, ContextPolicyError, parse_context
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.durable.records import THINKING_CALL
from telos_wrap.sessions.turns.pressure import Unit, plan_folds
from tests.sdk_http import sdk_http

from .convo import RecordingTransport

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]
RESULT_CHARS = 40_000  # ~10,000 tokens a tool result


@pytest.fixture
def emulated() -> Iterator[RecordingTransport]:
    yield RecordingTransport(Emulator())


def _anthropic(transport: RecordingTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _result(turn: int) -> str:
    return f"file {turn}\n" + f"line {turn} of the file, unchanged\n" * (RESULT_CHARS // 30)


def _tool_turn(history: list[dict[str, Any]], turn: int, thinking: bool = False) -> None:
    call = f"toolu_{turn:04d}"
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": f"plan {turn} " * 400, "signature": f"sig{turn}"})
    content.append({"type": "tool_use", "id": call, "name": "read_file", "input": {"n": turn}})
    history.append({"role": "assistant", "content": content})
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}]}
    )


def _total(u: Any) -> int:
    return int(u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0))


# -- a policy fold is its own outcome ----------------------------------------------------------------------


def test_a_policy_fold_is_reported_as_context_folded_not_as_a_rewritten_history(
    patched: None, emulated: RecordingTransport, caplog: pytest.LogCaptureFixture
) -> None:
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    fold_requests = []
    with (
        caplog.at_level(logging.DEBUG, logger="telos_wrap"),
        telos_wrap.session("fold-reason", context={"trigger": 60_000, "keep": 2}) as s,
    ):
        for turn in range(16):
            before = len(s.state.clear_folds)
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
            )
            if len(s.state.clear_folds) > before:
                fold_requests.append(turn)
            _tool_turn(history, turn)
        breaks = s.cache_breaks
        stats = s.stats
        explained = s.explain(fold_requests[0]) if fold_requests else ""
    assert len(fold_requests) >= 2
    assert [b.request for b in breaks] == fold_requests
    assert {b.reason for b in breaks} == {"context_folded"}  # a structured value, not a sentence
    assert stats.context_folds == len(fold_requests) and stats.cache_breaks == len(fold_requests)
    assert "CONTEXT FOLD (context_folded) at messages[" in explained
    assert "CACHE BREAK" not in explained
    # Planned: logged at INFO, never as a WARNING about a break.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "cache break" in r.getMessage()]


def test_a_change_of_the_callers_before_the_fold_point_stays_the_callers_break(
    patched: None, emulated: RecordingTransport
) -> None:
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    with telos_wrap.session("fold-and-edit", context={"trigger": 60_000, "keep": 2}) as s:
        for turn in range(12):
            before = len(s.state.clear_folds)
            if turn == 10:  # a request on which the policy folds (at 60k: requests 6, 10, 14)
                history[0] = {"role": "user", "content": "Read every file, then stop."}
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
            )
            folded = len(s.state.clear_folds) > before
            if turn == 10:
                brk = s.cache_breaks[-1]
                assert folded and brk.request == 10 and brk.reason == "history_rewritten", (brk, folded)
                assert brk.message == 0
            _tool_turn(history, turn)


# -- the caller's own context_management ---------------------------------------------------------------


def _plan_turn(history: list[dict[str, Any]]) -> None:
    """A first tool use of ``read_plan``, whose ~10,000-token result the caller's edit excludes."""
    history.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_plan", "name": "read_plan", "input": {}}],
        }
    )
    history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_plan", "content": _result(99)}],
        }
    )


def _server_records(s: Any, index: int) -> list[tuple[str, str, str, int]]:
    record = runtime_of(s).request_record(index)
    assert record is not None and record.explained is not None
    return [r for r in record.explained.records if r[0] == "vendor-context-edit"]


def test_the_callers_clear_tool_uses_is_kept_known_and_read_before_its_frontier(
    patched: None, emulated: RecordingTransport
) -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 40_000},
        "keep": {"type": "tool_uses", "value": 2},
        "exclude_tools": ["read_plan"],
    }
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read the plan, then every file."}]
    _plan_turn(history)
    clearing = []
    with telos_wrap.session("server-edits") as s:
        for turn in range(12):
            msg = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=[
                    *TOOLS,
                    {"name": "read_plan", "description": "Plan.", "input_schema": {"type": "object"}},
                ],
                messages=history,
                extra_body={"context_management": {"edits": [edit]}},
            )
            applied = (msg.model_extra or {})["context_management"]["applied_edits"]
            records = _server_records(s, turn)
            if applied:
                clearing.append((turn, msg.usage.cache_read_input_tokens))
                (record,) = records
                # telos knew what the server cleared: the same count of tool results
                assert f"clears {applied[0]['cleared_tool_uses']} tool result(s)" in record[2]
                frontier = int(record[1][len("messages[") : -2])
                plan = runtime_of(s).request_record(turn)
                assert plan is not None and plan.explained is not None
                forks = [bp for bp in plan.explained.breakpoints if bp[0] == "BP-fork"]
                assert forks and forks[0][2] == frontier - 1  # the last block before the frontier
            else:
                assert records == []
            _tool_turn(history, turn)
        breaks = s.cache_breaks
    for body in emulated.bodies:
        assert json.loads(body)["context_management"] == {"edits": [edit]}  # as the caller wrote it
    assert breaks == ()  # the server's edits are no cache break
    assert len(clearing) >= 5
    # From the second request the server clears on, the prefix before the frontier (the system
    # prompt, the kept plan result, the placeholders) is read: ≥ the plan's ~10,000 tokens.
    assert all(read >= RESULT_CHARS // 4 for _, read in clearing[1:]), clearing


def test_the_callers_clear_thinking_is_read_up_to_the_oldest_kept_thinking_turn(
    patched: None, emulated: RecordingTransport
) -> None:
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Think, then read every file."}]
    reads, cleared = [], []
    with telos_wrap.session("server-thinking") as s:
        for turn in range(7):
            # Through client.messages (extra_body), not client.beta: a beta call under a session
            # leaves an entry in telos' table of hint tokens (patch/calls.py; seen on main too).
            msg = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=2048,
                system="You are a coder. " * 400,
                tools=TOOLS,
                messages=history,
                thinking={"type": "enabled", "budget_tokens": 1024},
                extra_body={"context_management": {"edits": [edit]}},
            )
            applied = (msg.model_extra or {})["context_management"]["applied_edits"]
            turns = applied[0]["cleared_thinking_turns"] if applied else 0
            cleared.append(turns)
            records = _server_records(s, turn)
            assert bool(records) is bool(turns)
            if turns:
                assert f"the thinking of {turns} assistant turn(s)" in records[0][2]
            reads.append(msg.usage.cache_read_input_tokens)
            _tool_turn(history, turn, thinking=True)
        breaks = s.cache_breaks
    assert breaks == ()
    assert cleared[3:] == [1, 2, 3, 4]
    # Each request reads what the previous one marked before its oldest kept thinking turn: the
    # system prompt and every turn up to it (more each time), not only the system prompt.
    system = len("You are a coder. " * 400) // 4
    assert all(read > system + RESULT_CHARS // 4 for read in reads[4:]), reads
    assert reads[4:] == sorted(reads[4:])


# -- thinking in telos' own policy ---------------------------------------------------------------------


def test_the_vendors_context_management_form_and_a_lone_clear_thinking_are_accepted() -> None:
    thinking = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    tools = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 50_000}}
    both = parse_context({"edits": [thinking, tools]})
    assert both == ContextPolicy(trigger_tokens=50_000, clear_thinking=2)
    assert parse_context(thinking) == ContextPolicy(clear_results=False, clear_thinking=2)
    assert parse_context({"type": "clear_thinking_20251015"}) == ContextPolicy(
        clear_results=False, clear_thinking=1
    )
    assert (
        parse_context({"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}).clear_thinking is None
    )
    for bad, says in (
        ({"edits": []}, "edits"),
        ({"edits": [tools, tools]}, "at most one"),
        ({"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 1}}, "thinking_turns"),
        ({"type": "clear_thinking_20251015", "trigger": 5}, "unknown clear_thinking_20251015 key"),
    ):
        with pytest.raises(ContextPolicyError, match=says):
            parse_context(bad)


_units = st.lists(
    st.tuples(st.booleans(), st.integers(min_value=1, max_value=5_000)), min_size=1, max_size=24
)


@settings(max_examples=200, deadline=None)
@given(
    units=_units,
    keep=st.integers(min_value=0, max_value=4),
    thinking_keep=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
)
def test_the_planner_keeps_the_latest_thinking_turns_and_never_the_current_turn(
    units: list[tuple[bool, int]], keep: int, thinking_keep: int | None
) -> None:
    planned = [
        Unit(
            message=i,
            call=THINKING_CALL if thinking else f"c{i}",
            name="thinking" if thinking else "read",
            tokens=size,
        )
        for i, (thinking, size) in enumerate(units)
    ]
    current = len(planned) - 1
    policy = ContextPolicy(trigger_tokens=1, keep=keep, clear_thinking=thinking_keep)
    decision = plan_folds(planned, 10**9, current, policy, None)
    folded = {unit.key() for unit in decision.fold}
    turns = [u for u in planned if u.call == THINKING_CALL]
    results = [u for u in planned if u.call != THINKING_CALL]
    if thinking_keep is None:
        assert not folded & {u.key() for u in turns}
    else:
        kept = turns[max(0, len(turns) - thinking_keep) :] if thinking_keep else []
        assert not folded & {u.key() for u in kept}
        assert {u.key() for u in turns if u.message < current and u not in kept} <= folded
    assert not folded & {u.key() for u in results[max(0, len(results) - keep) :]} if keep else True
    assert all(unit.message < current for unit in decision.fold)
    assert [u.message for u in decision.fold] == sorted(u.message for u in decision.fold)


def _thinking_session(client: anthropic.Anthropic, turns: int, history: list[dict[str, Any]]) -> list[Any]:
    """An agent that thinks before each tool use; every third turn the user says something (a new
    turn: the thinking before it is an earlier turn's)."""
    sent = []
    for turn in range(turns):
        sent.append(
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=2048,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
                thinking={"type": "enabled", "budget_tokens": 1024},
            )
        )
        _tool_turn(history, turn, thinking=True)
        if turn % 3 == 2:
            history[-1]["content"].append({"type": "text", "text": f"Now the next part ({turn})."})
    return sent


def test_a_policy_with_clear_thinking_folds_earlier_turns_thinking_and_never_the_current_turns(
    patched: None, emulated: RecordingTransport
) -> None:
    policy = {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 60_000},
                "keep": {"type": "tool_uses", "value": 2},
            },
        ]
    }
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    with telos_wrap.session("thinking-policy", context=policy) as s:
        _thinking_session(_anthropic(emulated), 14, history)
        folds = s.state.clear_folds
        breaks = s.cache_breaks
    thinking_folds = [f for f in folds if f.thinking]
    assert thinking_folds and [f for f in folds if not f.thinking]
    assert {b.reason for b in breaks} == {"context_folded"}
    bodies = [json.loads(body) for body in emulated.bodies]
    for index, body in enumerate(bodies):
        sent = body["messages"]
        # The current turn (the assistant messages after the last user text) goes back unchanged:
        # its thinking blocks are byte for byte what the caller sent.
        last_text = max(
            i
            for i, m in enumerate(sent)
            if m["role"] == "user"
            and (isinstance(m["content"], str) or any(b.get("type") == "text" for b in m["content"]))
        )
        for i in range(last_text + 1, len(sent)):
            if sent[i]["role"] == "assistant":
                assert _unmarked(sent[i]["content"]) == history[i]["content"], (index, i)
        # What was folded stays folded on every later request: those messages carry no thinking.
        for fold in thinking_folds:
            if fold.at <= index and fold.message < len(sent):
                assert not [b for b in sent[fold.message]["content"] if b["type"] == "thinking"], (
                    index,
                    fold,
                )
                assert [b for b in sent[fold.message]["content"] if b["type"] == "tool_use"]
    # The thinking of the latest earlier turn is kept (keep 1): some earlier-turn thinking is still sent.
    last = bodies[-1]["messages"]
    kept = [
        i for i, m in enumerate(last) if m["role"] == "assistant" and m["content"][0]["type"] == "thinking"
    ]
    assert len(kept) > 3


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


# -- clear_thinking where the vendor refuses it ---------------------------------------------------------


def test_a_policy_written_with_clear_thinking_never_sends_it_even_without_thinking(
    patched: None, emulated: RecordingTransport
) -> None:
    """telos applies its policy itself: the vendor's edit (which Anthropic refuses without extended
    thinking, docs/vendor-facts.md §9.2) never goes on the wire, so a session without thinking runs."""
    policy = {
        "edits": [
            {"type": "clear_thinking_20251015"},
            {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30_000}},
        ]
    }
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    with telos_wrap.session("no-thinking-policy", context=policy) as s:
        for turn in range(8):
            _anthropic(emulated).messages.create(
                model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history
            )
            _tool_turn(history, turn)
        folds = s.state.clear_folds
    assert folds and not any(f.thinking for f in folds)
    assert all(b"context_management" not in body for body in emulated.bodies)


def test_the_callers_refused_clear_thinking_reaches_them_untouched_and_marks_nothing(
    patched: None, emulated: RecordingTransport
) -> None:
    from telos_wrap.lift.anthropic_messages import lift_anthropic_messages
    from telos_wrap.sessions.turns.clearing import measure
    from telos_wrap.sessions.turns.server_edits import predict, refused

    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for turn in range(3):
        _tool_turn(history, turn, thinking=True)
    edits = [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": history}
    enabled = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    cases: list[tuple[dict[str, Any], list[dict[str, Any]], str]] = [
        ({}, [], "without extended thinking"),
        ({"thinking": {"type": "disabled"}}, [], "without extended thinking"),
        (enabled, [{"type": "clear_tool_uses_20250919"}], "not the first"),
    ]
    for extra, before, why in cases:
        listed = [*before, *edits]
        ir = lift_anthropic_messages(
            {**body, **extra, "context_management": {"edits": listed}}, session_id="refused"
        )
        assert why in str(refused(ir)) and predict(ir, measure(ir)) is None
        with telos_wrap.session("refused"), pytest.raises(anthropic.BadRequestError) as raised:
            _anthropic(emulated).messages.create(
                **{**body, **extra}, extra_body={"context_management": {"edits": listed}}
            )
        assert raised.value.status_code == 400
        assert json.loads(emulated.bodies[-1])["context_management"] == {"edits": listed}  # as sent
    accepted = lift_anthropic_messages(
        {
            **body,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": {"edits": edits},
        },
        session_id="accepted",
    )
    assert refused(accepted) is None and predict(accepted, measure(accepted)) is not None

"""Context under pressure (issue 47): the policy's options, the pure planner's properties, and
sessions that outgrow their model's window finishing on every API, with durable folds."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.errors import TelosHintError, TelosOptionError
from telos_wrap.ir.context import ContextPolicy, ContextPolicyError, parse_context
from telos_wrap.ir.windows import context_window
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.turns.pressure import Unit, plan_folds
from tests.sdk_http import sdk_http

from .convo import RecordingTransport

ANTHROPIC_EDIT = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 100000},
    "keep": {"type": "tool_uses", "value": 3},
    "clear_at_least": {"type": "input_tokens", "value": 20000},
    "exclude_tools": ["read_plan"],
}

# -- options -----------------------------------------------------------------------------------------


def test_an_anthropic_edit_is_accepted_as_written() -> None:
    policy = parse_context(ANTHROPIC_EDIT)
    assert policy == ContextPolicy(
        trigger_tokens=100_000, keep=3, clear_at_least=20_000, exclude_tools=("read_plan",)
    )
    assert parse_context({"trigger": 0.5}) == ContextPolicy(trigger_tokens=None, trigger_fraction=0.5)
    assert parse_context(True) == ContextPolicy()
    assert parse_context(None) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"keep": -1}, "keep"),
        ({"trigger": {"type": "tool_uses", "value": 3}}, "trigger type"),
        ({"type": "compact_20260112"}, "not supported"),
        ({"triger": 100}, "unknown context key"),
        ({"summarizer": "no"}, "callable"),
        ("100k", "must be a dict"),
    ],
)
def test_bad_values_are_refused_saying_what_is_valid(value: Any, says: str) -> None:
    with pytest.raises(ContextPolicyError, match=says):
        parse_context(value)
    with pytest.raises(TelosHintError, match=says):
        telos_wrap.session("bad", context=value)
    with pytest.raises(TelosOptionError, match=says):
        telos_wrap.patch(context=value)


def test_the_hint_and_the_session_option_carry_the_policy() -> None:
    from telos_wrap.ir.hints import parse_hints

    assert parse_hints({"context": ANTHROPIC_EDIT}).context == parse_context(ANTHROPIC_EDIT)
    assert telos_wrap.session("ok", context=ANTHROPIC_EDIT).hints.context == parse_context(ANTHROPIC_EDIT)


def test_windows_are_known_per_family() -> None:
    assert context_window("claude-opus-5") == 1_000_000
    assert context_window("claude-sonnet-4-5-20250929") == 200_000
    assert context_window("gpt-4o-mini") == 128_000
    assert context_window("my-local-llama") is None


# -- the planner, pure ---------------------------------------------------------------------------------

UNIT = 1_000  # tokens a tool result carries in the simulated sessions
TURN = UNIT + 60  # what one turn adds: the call, its result, a little text


def _simulate(turns: int, policy: ContextPolicy, sizes: list[int]) -> tuple[list[int], list[set[Any]]]:
    """A session of ``turns`` tool uses (result ``sizes[i % len]``); every request is planned and
    the folds applied. Returns each request's tokens as sent and the folded set after each."""
    folded: set[tuple[int, str]] = set()
    sent, history = [], []
    base = 500
    for turn in range(turns):
        units = []
        offset = base
        for i in range(turn + 1):
            size = 0 if (2 * i + 2, f"c{i}") in folded else sizes[i % len(sizes)]
            units.append(Unit(message=2 * i + 2, call=f"c{i}", name="read", tokens=size, offset=offset))
            offset += 60 + size
        total = offset
        decision = plan_folds(units, total, current=2 * turn + 1, policy=policy, window=None, folded=folded)
        folded |= {unit.key() for unit in decision.fold}
        sent.append(total - decision.cleared)
        history.append(set(folded))
    return sent, history


@settings(max_examples=60, deadline=None)
@given(
    turns=st.integers(1, 60),
    keep=st.integers(0, 4),
    trigger=st.integers(8_000, 30_000),
    at_least=st.integers(0, 6_000),
    sizes=st.lists(st.integers(0, UNIT), min_size=1, max_size=5),
)
def test_every_request_stays_below_the_trigger_plus_one_turn(
    turns: int, keep: int, trigger: int, at_least: int, sizes: list[int]
) -> None:
    policy = ContextPolicy(trigger_tokens=trigger, keep=keep, clear_at_least=at_least)
    sent, history = _simulate(turns, policy, sizes)
    # What can never be cleared: the base, every turn's own bytes, the kept results, the current
    # turn; and a fold waits for clear_at_least: the bound the issue sets, with those margins.
    bound = trigger + TURN + (keep + 1) * UNIT + at_least
    assert all(tokens <= bound for tokens in sent), (max(sent), bound)
    # Folds only grow: each request's folded set contains the one before.
    assert all(a <= b for a, b in itertools.pairwise(history))
    # Deterministic: the same session plans the same folds.
    assert _simulate(turns, policy, sizes) == (sent, history)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 30),
    keep=st.integers(0, 5),
    excluded=st.booleans(),
    current=st.integers(0, 70),
)
def test_the_plan_never_touches_kept_excluded_or_current_results(
    n: int, keep: int, excluded: bool, current: int
) -> None:
    units = [
        Unit(message=2 * i + 2, call=f"c{i}", name="plan" if i % 3 == 0 else "read", tokens=500)
        for i in range(n)
    ]
    policy = ContextPolicy(trigger_tokens=1, keep=keep, exclude_tools=("plan",) if excluded else ())
    decision = plan_folds(units, 10**6, current, policy, None, ())
    kept = {u.key() for u in units[max(0, len(units) - keep) :]} if keep else set()
    for unit in decision.fold:
        assert unit.key() not in kept
        assert unit.message < current
        assert not (excluded and unit.name == "plan")
    assert decision.cleared == sum(u.tokens for u in decision.fold)


def test_below_the_trigger_or_below_clear_at_least_nothing_is_folded() -> None:
    units = [
        Unit(message=2, call="a", name="read", tokens=900),
        Unit(message=4, call="b", name="read", tokens=900),
    ]
    assert not plan_folds(units, 5_000, 5, ContextPolicy(trigger_tokens=5_000, keep=0), None).fold
    waiting = plan_folds(
        units, 6_000, 5, ContextPolicy(trigger_tokens=5_000, keep=0, clear_at_least=2_000), None
    )
    assert not waiting.fold and "clear_at_least" in waiting.note
    # ... unless the request would not fit the window at all.
    forced = plan_folds(
        units, 6_000, 5, ContextPolicy(trigger_tokens=5_000, keep=0, clear_at_least=2_000), 5_500
    )
    assert len(forced.fold) == 2


# -- sessions on the emulator ------------------------------------------------------------------------------


@pytest.fixture
def emulated() -> Iterator[RecordingTransport]:
    yield RecordingTransport(Emulator())


def _anthropic(transport: RecordingTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _openai(transport: RecordingTransport) -> openai.OpenAI:
    return openai.OpenAI(api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0)


RESULT_CHARS = 40_000  # ~10,000 tokens a tool result
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]


def _result(turn: int) -> str:
    return f"file {turn}\n" + f"line {turn} of the file, unchanged\n" * (RESULT_CHARS // 30)


def _anthropic_session(client: anthropic.Anthropic, turns: int, model: str) -> list[int]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file and report."}]
    inputs = []
    for turn in range(turns):
        msg = client.messages.create(
            model=model,
            max_tokens=16,
            system="You are a careful coder. " * 100,
            tools=TOOLS,
            messages=history,
        )
        u = msg.usage
        inputs.append(
            u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
        )
        call = f"toolu_{turn:04d}"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read_file", "input": {"n": turn}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}],
            }
        )
    return inputs


def test_without_a_policy_the_session_hits_the_vendors_window_error(
    patched: None, emulated: RecordingTransport
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 200000 maximum"):
        _anthropic_session(_anthropic(emulated), 25, "claude-sonnet-4-5")


def test_an_anthropic_session_past_its_window_finishes_under_a_policy(
    patched: None, emulated: RecordingTransport
) -> None:
    trigger = 100_000
    with telos_wrap.session("long", context={"trigger": trigger, "keep": 3, "clear_at_least": 20_000}) as s:
        inputs = _anthropic_session(_anthropic(emulated), 40, "claude-sonnet-4-5")
        folds = s.state.clear_folds
    turn_tokens = RESULT_CHARS // 4 + 200
    assert max(inputs) <= trigger + turn_tokens, max(inputs)
    assert sum(inputs) > 0 and folds
    body = json.loads(emulated.bodies[-1])
    cleared = [
        b
        for m in body["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result" and "run read_file again" in str(b.get("content"))
    ]
    assert cleared, "the placeholder names the tool and says how to see the result again"
    # Pairs are never split: every tool_use still has its tool_result.
    uses = {
        b["id"]
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    results = {
        b["tool_use_id"]
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    assert uses == results


def test_between_folds_every_request_reads_the_whole_earlier_prefix(
    patched: None, emulated: RecordingTransport
) -> None:
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    with telos_wrap.session("reads", context={"trigger": 60_000, "keep": 2}) as s:
        previous_total, fold_turns = 0, []
        for turn in range(30):
            folds_before = len(s.state.clear_folds)
            msg = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
            )
            u = msg.usage
            total = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
            if len(s.state.clear_folds) > folds_before:
                fold_turns.append(turn)
            elif previous_total > 4_096:  # the previous request was past any minimum: it cached
                # No fold: everything the previous request sent is read from the cache.
                assert u.cache_read_input_tokens >= previous_total - 64, (turn, u, previous_total)
            previous_total = total
            call = f"toolu_{turn}"
            history.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": call, "name": "read_file", "input": {}}],
                }
            )
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}],
                }
            )
    assert len(fold_turns) >= 2


def _chat_session(client: openai.OpenAI, turns: int, model: str) -> list[int]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coder. " * 100},
        {"role": "user", "content": "Read all."},
    ]
    inputs = []
    for turn in range(turns):
        done = client.chat.completions.create(model=model, messages=messages)
        inputs.append(done.usage.prompt_tokens)
        call = f"call_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"n": turn})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": _result(turn)})
    return inputs


def test_a_chat_completions_session_past_its_window_finishes_under_a_policy(
    patched: None, emulated: RecordingTransport
) -> None:
    client = _openai(emulated)
    with (
        pytest.raises(openai.BadRequestError, match="maximum context length is 128000") as refused,
        telos_wrap.session("chat-no-policy"),
    ):
        _chat_session(client, 16, "gpt-4o")
    assert refused.value.code == "context_length_exceeded" and refused.value.param == "messages"
    with telos_wrap.session("chat", context={"trigger": 0.5, "keep": 2}):
        inputs = _chat_session(client, 24, "gpt-4o")
    assert max(inputs) <= 64_000 + RESULT_CHARS // 4 + 200


def _responses_session(client: openai.OpenAI, turns: int, model: str) -> list[int]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Read all."}]
    inputs = []
    for turn in range(turns):
        done = client.responses.create(model=model, instructions="You are a coder. " * 100, input=items)
        inputs.append(done.usage.input_tokens)
        call = f"call_{turn}"
        items.append({"type": "function_call", "call_id": call, "name": "read_file", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": call, "output": _result(turn)})
    return inputs


def test_a_responses_session_past_its_window_finishes_under_a_policy(
    patched: None, emulated: RecordingTransport
) -> None:
    client = _openai(emulated)
    with (
        pytest.raises(openai.BadRequestError, match="exceeds the context window") as refused,
        telos_wrap.session("responses-no-policy"),
    ):
        _responses_session(client, 16, "gpt-4o")
    assert refused.value.code == "context_length_exceeded"
    with telos_wrap.session("responses", context={"trigger": 50_000, "keep": 2}):
        inputs = _responses_session(client, 24, "gpt-4o")
    assert max(inputs) <= 50_000 + RESULT_CHARS // 4 + 200


def _workers_session(
    transport: RecordingTransport, store: Any, fresh_each_turn: bool, sid: str
) -> list[bytes]:
    client = _anthropic(transport)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    hints = telos_wrap.TelosHints(context={"trigger": 30_000, "keep": 1})
    one = telos_wrap.sessions.Session(sid, store=store, hints=hints)
    start = len(transport.bodies)
    for turn in range(10):
        # A fresh Session object each turn: another worker, or this process after a restart.
        worker = telos_wrap.sessions.Session(sid, store=store, hints=hints) if fresh_each_turn else one
        with worker:
            client.messages.create(model="claude-sonnet-4-5", max_tokens=8, tools=TOOLS, messages=history)
        call = f"toolu_{turn}"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read_file", "input": {}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}],
            }
        )
    return transport.bodies[start:]


def _unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` markers (breakpoints move; content must not)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def test_the_folded_form_is_the_same_for_another_worker_and_after_a_restart(
    patched: None, redis_url: str, redis_prefix: str
) -> None:
    from telos_wrap.sessions import RedisStore

    alone = _workers_session(RecordingTransport(Emulator()), MemoryStore(), False, "alone")
    store = RedisStore(redis_url, prefix=redis_prefix)
    workers = _workers_session(RecordingTransport(Emulator()), store, True, "alone")
    assert any(b"telos_wrap cleared" in body for body in alone), "the policy folded"
    assert workers == alone  # byte for byte, every request
    # Between folds the folded messages are re-sent byte for byte.
    for before, after in itertools.pairwise(alone):  # the first was below any minimum
        old, new = _unmarked(json.loads(before)["messages"]), _unmarked(json.loads(after)["messages"])
        touched = b"cache_control" in before  # sent as built below the minimum: another shape
        if touched and before.count(b"telos_wrap cleared") == after.count(b"telos_wrap cleared"):
            assert new[: len(old)] == old


def test_vllm_gets_the_seeds_evict_span_on_the_request_that_folds(patched: None) -> None:
    url = "http://vllm.emulated:8000/v1"
    telos_wrap.patch(engines={url: "vllm"})
    transport = RecordingTransport(Emulator(routes={url: "vllm"}))
    client = openai.OpenAI(
        api_key="test", base_url=url, http_client=sdk_http.Client(transport=transport), max_retries=0
    )
    with telos_wrap.session("vllm", context={"trigger": 40_000, "keep": 1}) as s:
        _chat_session(client, 8, "gpt-4o")
        folds = s.state.clear_folds
    bodies = [json.loads(body) for body in transport.bodies]
    spans = [
        (i, b["cache_policy"]["evict_span"])
        for i, b in enumerate(bodies)
        if "evict_span" in b.get("cache_policy", {})
    ]
    fold_requests = sorted({fold.at for fold in folds})
    assert [i for i, _ in spans] == fold_requests and fold_requests
    for index, span in spans:
        first = min(fold.message for fold in folds if fold.at == index)
        assert span == {
            "from": {"message": first + 1, "part": 0},
            "reason": "context-fold",
        }  # +1: the system message
        assert "telos_wrap cleared" in json.dumps(bodies[index]["messages"][first + 1])


def test_the_callers_context_management_is_sent_as_written_and_the_emulator_applies_it(
    patched: None, emulated: RecordingTransport
) -> None:
    edit = {k: v for k, v in ANTHROPIC_EDIT.items() if k != "clear_at_least"}
    edit["trigger"] = {"type": "input_tokens", "value": 30_000}
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    reports = []
    for turn in range(6):
        msg = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=8,
            tools=TOOLS,
            messages=history,
            extra_body={"context_management": {"edits": [edit]}},
        )
        reports.append(msg.model_extra.get("context_management") if msg.model_extra else None)
        call = f"toolu_{turn}"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read_file", "input": {}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}],
            }
        )
    for body in emulated.bodies:
        assert json.loads(body)["context_management"] == {"edits": [edit]}  # the caller's, untouched
    assert reports[0] == {"applied_edits": []}
    applied = reports[-1]["applied_edits"][0]
    assert applied["type"] == "clear_tool_uses_20250919"
    assert applied["cleared_tool_uses"] == 5 - 3  # all but the three latest of five results
    assert applied["cleared_input_tokens"] > 15_000


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_between_folds_chat_completions_and_responses_read_the_whole_earlier_prefix(
    patched: None, emulated: RecordingTransport, api: str
) -> None:
    """The acceptance line on the APIs with automatic caching: between two folds every request reads
    what the previous one sent (to OpenAI's 128-token granularity, docs/vendor-facts.md §2.1)."""
    client = _openai(emulated)
    items: list[dict[str, Any]] = [{"role": "user", "content": "Read all."}]
    previous, fold_turns = 0, []
    with telos_wrap.session(f"reads-{api}", context={"trigger": 50_000, "keep": 2}) as s:
        for turn in range(20):
            folds_before = len(s.state.clear_folds)
            if api == "chat":
                done = client.chat.completions.create(
                    model="gpt-4o",
                    messages=[{"role": "system", "content": "You are a coder. " * 100}, *items],
                )
                assert done.usage is not None and done.usage.prompt_tokens_details is not None
                total, cached = done.usage.prompt_tokens, done.usage.prompt_tokens_details.cached_tokens or 0
            else:
                answer = client.responses.create(
                    model="gpt-4o", instructions="You are a coder. " * 100, input=items
                )
                assert answer.usage is not None
                total, cached = answer.usage.input_tokens, answer.usage.input_tokens_details.cached_tokens
            if len(s.state.clear_folds) > folds_before:
                fold_turns.append(turn)
            elif previous > 1_024:  # the previous request was past the minimum: it cached
                assert cached >= previous - 128, (turn, cached, previous)
            previous = total
            call = f"call_{turn}"
            if api == "chat":
                function = {"name": "read_file", "arguments": "{}"}
                items += [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": call, "type": "function", "function": function}],
                    },
                    {"role": "tool", "tool_call_id": call, "content": _result(turn)},
                ]
            else:
                items += [
                    {"type": "function_call", "call_id": call, "name": "read_file", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": call, "output": _result(turn)},
                ]
    assert len(fold_turns) >= 3


def test_fewer_tool_uses_than_keep_are_all_kept() -> None:
    """``keep`` 3 with two results: both are kept (the slice of the latest once kept only the last
    when there were fewer results than ``keep``)."""
    units = [
        Unit(message=2, call="a", name="read", tokens=900),
        Unit(message=4, call="b", name="read", tokens=900),
    ]
    decision = plan_folds(units, 50_000, 5, ContextPolicy(trigger_tokens=1_000, keep=3), None)
    assert not decision.fold and "no tool result can be cleared" in decision.note

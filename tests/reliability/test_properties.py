"""Property tests over generated Anthropic and OpenAI requests (``strategies.py``).

For every generated request, what telos emits (``pipeline.prepare``, the function the patch layer
calls, and end to end through the patched SDKs for a few):

(a) validates against the SDK's own request types (``sdk_types.py``: strict, no unknown keys) — as
    the caller's request does;
(b) keeps every piece of content: tools, images, documents, thinking, tool_use / tool_result and
    every assistant message unchanged as a multiset; every non-envelope piece of text still there
    in the same message; every character accounted for, the only removals being the envelopes of past
    user turns that ``prepared.ir.records`` lists as ``drop-pruned`` (char counts must match), the only
    moves the system envelopes recorded as ``drop-moved`` to the latest turn;
(c) obeys the vendor's limits: Anthropic ≤ 4 breakpoints (top-level included), none on thinking /
    redacted thinking / empty text, a longer TTL never after a shorter one, the caller's own markers
    kept, no message left empty; OpenAI breakpoints only on parts that accept them, never on
    assistant parts, none added for models before gpt-5.6, the caller's ``prompt_cache_key`` kept;
(d) is idempotent: telos applied to its own output changes nothing;
(e) is deterministic across processes: the same bytes under different ``PYTHONHASHSEED`` values.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.engines.openai import supports_breakpoints
from telos_wrap.ir.schema_roots import SCHEMA_MAP_KEYS
from telos_wrap.pipeline import Prepared, PrepareOptions, prepare
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of

from . import content as c
from .harness import Wire, client_for
from .sdk_types import check_anthropic_body, check_openai_body
from .strategies import anthropic_requests, big_document, envelope_only_turns, openai_requests

#: Examples per property; raise it for a deeper run (``TELOS_PROPERTY_EXAMPLES=2000 pytest ...``).
EXAMPLES = int(os.environ.get("TELOS_PROPERTY_EXAMPLES", "120"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,  # a failure prints @reproduce_failure(...) to replay it exactly
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ROOT = Path(__file__).resolve().parents[2]
# A failing example holds whole requests; let hypothesis print it even when it is large.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


def run_anthropic(body: dict[str, Any], **options: Any) -> Prepared:
    return prepare("anthropic", body, PrepareOptions(engine="anthropic", **options))


def run_openai(body: dict[str, Any], **options: Any) -> Prepared:
    return prepare("openai_chat", body, PrepareOptions(engine="openai", **options))


def _latest_turn(messages: list[dict[str, Any]], roles: tuple[str, ...]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] in roles), None)


def _message_index(where: str) -> int:
    found = re.match(r"messages\[(\d+)\]", where)
    assert found, f"a pruned block must come from a message, not {where!r}"
    return int(found.group(1))


# -- (b) content ---------------------------------------------------------------------------------


def check_text_accounting(
    prepared: Prepared,
    system_in: list[str],
    system_out_raw: list[str],
    turns_in: list[list[str]],
    turns_out: list[list[str]],
    user_like: list[bool],
    latest: int | None,
    appended_out: list[str] | None = None,
    wire_offset: int = 0,
    envelope_only: list[bool] | None = None,
) -> None:
    """Shared by both APIs: every character of system / user text accounted for by the records.

    ``appended_out``: the texts of the trailing system message telos appends for OpenAI requests whose
    latest turn is followed by assistant messages (where the system envelopes go in that case).
    ``wire_offset``: wire index of ``turns_in[0]`` (records name blocks by wire index).
    ``envelope_only``: per message, whether it is nothing but envelopes — such a past turn keeps them
    as history (pruning would leave an empty message).
    """
    kept = envelope_only or [False] * len(turns_in)
    records = prepared.ir.records
    assert {r.kind for r in records} <= c.DOCUMENTED_RECORDS, [r.kind for r in records]
    system_out, stubs = c.undecorate(system_out_raw)
    assert stubs == sum(1 for r in records if r.kind == "ref-stub")

    all_in = system_in + [t for texts in turns_in for t in texts]
    all_out = system_out + [t for texts in turns_out for t in texts] + (appended_out or [])
    added = c.chars(all_out) - c.chars(all_in)
    assert not added, f"telos added text: {added}"
    removed = c.chars(all_in) - c.chars(all_out)
    pruned = [r for r in records if r.kind == "drop-pruned"]
    assert sum(removed.values()) == sum(r.chars for r in pruned), (
        "every removed character is a recorded prune"
    )
    past_envelopes = c.chars(
        e
        for i, texts in enumerate(turns_in)
        if user_like[i] and latest is not None and i < latest and not kept[i]
        for t in texts
        for e in c.envelopes(t)
    )
    assert all(ch.isspace() for ch in (removed - past_envelopes)), (
        "only past envelopes (and their spacing) go"
    )
    assert all(latest is not None and _message_index(r.where) - wire_offset < latest for r in pruned)

    # Non-envelope text stays in its own message (system text stays in the system segment).
    for text in system_in:
        for core in c.cores(text):
            assert any(core in out for out in system_out), f"system text lost: {core!r}"
    for i, texts in enumerate(turns_in):
        for text in texts:
            for core in c.cores(text):
                assert any(core in out for out in turns_out[i]), f"message {i} lost text {core!r}"

    # Envelopes: the latest turn keeps its own; system ones join it (or the appended system message);
    # past ones are gone.
    moved = [r for r in records if r.kind == "drop-moved"]
    if latest is None:
        assert not moved and appended_out is None
        return
    destination = turns_out[latest] if appended_out is None else appended_out
    for text in system_in:
        for envelope in c.envelopes(text):
            assert any(envelope in out for out in destination), f"system envelope not moved: {envelope!r}"
    # The latest turn's own envelopes stay in it, or (a Chat Completions turn sent as a string) go
    # to the appended system message, each move recorded (docs/engines.md, *Wire shapes*).
    own_moved = [r for r in moved if r.detail.startswith("envelope of the latest turn")]
    moved = [r for r in moved if r not in own_moved]
    for text in turns_in[latest]:
        for envelope in c.envelopes(text):
            stayed = any(envelope in out for out in turns_out[latest])
            went = appended_out is not None and any(envelope in out for out in appended_out)
            assert stayed or went, f"latest turn lost {envelope!r}"
    own_chars = sum(len(e) for t in turns_in[latest] for e in c.envelopes(t))
    assert sum(r.chars for r in own_moved) <= own_chars + sum(len(t) for t in turns_in[latest])
    assert not own_moved or appended_out is not None
    assert not any(c.envelopes(t) for t in system_out), "a system envelope stayed in the system prompt"
    for i, texts in enumerate(turns_out):
        if user_like[i] and i < latest and kept[i]:
            assert texts == turns_in[i], f"past envelope-only turn {i} stays as it was"
        elif user_like[i] and i < latest:
            assert not any(c.envelopes(t) for t in texts), f"past turn {i} kept its envelope"
    with_envelopes = sum(1 for t in system_in if c.envelopes(t))
    assert len(moved) == with_envelopes
    assert sum(r.chars for r in moved) == len("".join(system_in)) - len("".join(system_out))


def check_anthropic_content(src: dict[str, Any], prepared: Prepared) -> None:
    out = prepared.body
    assert set(out) == set(src), "no top-level field added or lost"
    for key, value in src.items():
        if key not in ("system", "messages", "tools"):
            assert out[key] == value, key
    assert c.a_tools(out) == c.a_tools(src)
    assert c.a_payloads(out) == c.a_payloads(src)
    messages_in, messages_out = src["messages"], out["messages"]
    assert [m["role"] for m in messages_out] == [m["role"] for m in messages_in]
    for m_in, m_out in zip(messages_in, messages_out, strict=True):
        assert set(m_out) == set(m_in)
        if m_in["role"] == "assistant":
            strip_out = [c.without(b, "cache_control") for b in c.a_blocks(m_out["content"])]
            strip_in = [c.without(b, "cache_control") for b in c.a_blocks(m_in["content"])]
            assert strip_out == strip_in, "assistant turns travel unchanged"
    check_text_accounting(
        prepared,
        c.a_system_texts(src),
        c.a_system_texts(out),
        [c.a_message_texts(m) for m in messages_in],
        [c.a_message_texts(m) for m in messages_out],
        [m["role"] == "user" for m in messages_in],
        _latest_turn(messages_in, ("user",)),
        envelope_only=[c.envelope_only(c.a_blocks(m["content"])) for m in messages_in],
    )


def check_openai_content(src: dict[str, Any], prepared: Prepared) -> None:
    out = prepared.body
    assert set(src) <= set(out)
    assert set(out) - set(src) <= {"prompt_cache_key", "prompt_cache_options", "stream_options"}
    for key, value in src.items():
        if key not in ("messages", "tools", "stream_options"):
            assert out[key] == value, key
    if "stream_options" in src:  # telos may only ask for the usage chunk (and hides it from the caller)
        assert c.without(out["stream_options"], "include_usage") == c.without(
            src["stream_options"], "include_usage"
        )
    assert c.o_tools(out) == c.o_tools(src)
    messages_in, messages_out = src["messages"], out["messages"]
    lead_in, lead_out = c.o_leading_system(messages_in), c.o_leading_system(messages_out)
    rest_in, rest_out = messages_in[lead_in:], messages_out[lead_out:]
    latest = _latest_turn(rest_in, ("user", "tool", "function"))
    appended: list[str] | None = None
    if len(rest_out) == len(rest_in) + 1:
        # Documented: system envelopes of a request whose latest turn is followed by assistant
        # messages, or whose latest turn's content is a string, go into one trailing system message
        # (the caller's string is never turned into parts for one turn only: docs/engines.md).
        assert latest is not None, "a message was added"
        # A turn sent as a string: as the caller sent it, or as its one text part (envelopes aside).
        content = rest_in[latest].get("content")
        parts = [p for p in c.o_parts(content) if not c.envelope_only([p])]
        string_turn = isinstance(content, str) or (
            len(parts) == 1 and isinstance(parts[0], dict) and set(parts[0]) == {"type", "text"}
        )
        assert latest < len(rest_in) - 1 or string_turn, "a message was added"
        assert rest_out[-1]["role"] == "system" and set(rest_out[-1]) == {"role", "content"}
        appended = c.o_texts(rest_out[-1])
        rest_out = rest_out[:-1]
    assert c.o_payloads({"messages": messages_out[:lead_out] + rest_out}) == c.o_payloads(src)
    assert [m["role"] for m in rest_out] == [m["role"] for m in rest_in]
    system_heads_in = [(m["role"], m.get("name")) for m in messages_in[:lead_in]]
    system_heads_out = [(m["role"], m.get("name")) for m in messages_out[:lead_out]]
    assert all(head in system_heads_in for head in system_heads_out), "system messages keep role and name"
    for m_in, m_out in zip(rest_in, rest_out, strict=True):
        assert c.without(m_out, "content") == c.without(m_in, "content"), "tool_calls, ids, names unchanged"
    check_text_accounting(
        prepared,
        [t for m in messages_in[:lead_in] for t in c.o_texts(m)],
        [t for m in messages_out[:lead_out] for t in c.o_texts(m)],
        [c.o_texts(m) if m["role"] in ("user", "tool") else [] for m in rest_in],
        [c.o_texts(m) if m["role"] in ("user", "tool") else [] for m in rest_out],
        [m["role"] == "user" for m in rest_in],
        latest,
        appended,
        wire_offset=lead_in,
        envelope_only=[c.envelope_only(c.o_parts(m.get("content"))) for m in rest_in],
    )


# -- (c) vendor limits -----------------------------------------------------------------------------


def check_anthropic_limits(src: dict[str, Any], out: dict[str, Any]) -> None:
    markers = c.a_markers(out)
    assert len(markers) <= 4, f"{len(markers)} breakpoints: {[m[0] for m in markers]}"
    for where, block, _ in markers:
        if block is None:
            continue
        assert block.get("type") not in ("thinking", "redacted_thinking"), f"marker on thinking at {where}"
        if block.get("type") == "text":
            assert block["text"].strip(), f"marker on empty text at {where}"
    ranks = [1 if marker.get("ttl") == "1h" else 0 for _, _, marker in markers]
    assert ranks == sorted(ranks, reverse=True), f"a 1h breakpoint after a 5m one: {ranks}"
    for index, message in enumerate(out["messages"]):
        final_assistant = index == len(out["messages"]) - 1 and message["role"] == "assistant"
        assert message["content"] or final_assistant, f"message {index} was left empty"
    for index, (m_in, m_out) in enumerate(zip(src["messages"], out["messages"], strict=True)):
        kinds_in = [b.get("type") for b in c.a_blocks(m_in["content"])]
        kinds_out = [b.get("type") for b in c.a_blocks(m_out["content"])]
        results = kinds_in.count("tool_result")
        if results and kinds_in[:results] == ["tool_result"] * results:
            assert kinds_out[:results] == ["tool_result"] * results, (
                f"message {index}: tool_result no longer first"
            )
    caller = c.a_markers(src)
    on_envelopes = sum(
        1
        for _, block, _ in caller
        if block is not None and block.get("type") == "text" and not c.cores(block["text"])
    )
    assert len(markers) >= min(len(caller), 4) - on_envelopes, "the caller's own markers are kept"
    if len(caller) <= 4:  # the caller's own markers (on non-text blocks: findable by content) are kept

        def marked(found: list[tuple[str, Any, Any]]) -> Counter[str]:
            return Counter(
                c.canon([c.one_shape(c.a_normal(block)), marker])
                for _, block, marker in found
                if block is not None and block.get("type") != "text"
            )

        assert not marked(caller) - marked(markers), (
            "a caller's marker on a non-text block was lost or changed"
        )
        if src.get("cache_control"):
            assert out["cache_control"] == src["cache_control"]


def check_openai_limits(src: dict[str, Any], out: dict[str, Any]) -> None:
    markers = c.o_markers(out)
    for role, part, _ in markers:
        assert role != "assistant", "breakpoint on an assistant part"
        assert part["type"] in ("text", "image_url", "input_audio", "file")
        if role in ("system", "developer", "tool"):
            assert part["type"] == "text"
        if part["type"] == "text":
            assert part["text"].strip(), "breakpoint on empty text"
    # Counted over the whole request: a marker travels with its text (a system envelope the caller
    # marked moves to the latest turn with its marker).
    n_in, n_out = len(c.o_markers(src)), len(markers)
    on_envelopes = sum(
        1 for _, part, _ in c.o_markers(src) if part.get("type") == "text" and not c.cores(part["text"])
    )
    assert n_out >= n_in - on_envelopes, "the caller's own breakpoints are kept"
    if supports_breakpoints(src["model"]):
        assert n_out - n_in <= max(0, 3 - n_in), "implicit mode writes at most 3 explicit breakpoints"
    else:
        assert n_out <= n_in, "breakpoints added for a model before gpt-5.6"
        assert "prompt_cache_options" not in out, "gpt-5.6-only field sent to an older model"
    if "prompt_cache_key" in src:
        assert out["prompt_cache_key"] == src["prompt_cache_key"]
    else:
        assert re.fullmatch(r"telos-[0-9a-f]{16}", out["prompt_cache_key"])
    lead_in, lead_out = c.o_leading_system(src["messages"]), c.o_leading_system(out["messages"])
    pairs = zip(src["messages"][lead_in:], out["messages"][lead_out:], strict=False)
    for index, (m_in, m_out) in enumerate(pairs):
        if m_in.get("content") not in ("", [], None):
            assert m_out.get("content") not in ("", [], None), f"message {lead_out + index} was left empty"


# -- the properties ------------------------------------------------------------------------------------


@PROPERTY
@given(anthropic_requests())
def test_anthropic_emitted_request_is_valid_complete_and_within_limits(body: dict[str, Any]) -> None:
    check_anthropic_body(body)
    source = json.loads(json.dumps(body))
    prepared = run_anthropic(body)
    assert body == source, "prepare() never modifies its input"
    check_anthropic_body(prepared.body)
    check_anthropic_content(body, prepared)
    check_anthropic_limits(body, prepared.body)


@PROPERTY
@given(openai_requests())
def test_openai_emitted_request_is_valid_complete_and_within_limits(body: dict[str, Any]) -> None:
    check_openai_body(body)
    source = json.loads(json.dumps(body))
    prepared = run_openai(body)
    assert body == source, "prepare() never modifies its input"
    check_openai_body(prepared.body)
    check_openai_content(body, prepared)
    check_openai_limits(body, prepared.body)


@PROPERTY
@given(anthropic_requests(), st.sampled_from([None, "5m", "1h"]))
def test_anthropic_rewrite_is_idempotent(body: dict[str, Any], ttl: str | None) -> None:
    options = {"hints": telos_wrap.TelosHints(ttl=ttl)}
    once = run_anthropic(body, **options).body
    assert run_anthropic(once, **options).body == once


@PROPERTY
@given(openai_requests())
def test_openai_rewrite_is_idempotent(body: dict[str, Any]) -> None:
    once = run_openai(body).body
    assert run_openai(once).body == once


@settings(PROPERTY, max_examples=min(EXAMPLES, 25))
@given(anthropic_requests(big_system=True), openai_requests(big_system=True))
def test_rewrite_with_a_pooled_system_document_is_idempotent(
    anthropic_body: dict[str, Any], openai_body: dict[str, Any]
) -> None:
    """Regression: telos pooled its own rendered ref-pool entry again (RefPoolError in bridge.refpool)."""
    once = run_anthropic(anthropic_body).body
    assert run_anthropic(once).body == once
    once = run_openai(openai_body).body
    assert run_openai(once).body == once


# Regressions this suite found (each was a strict xfail until fixed in src; kept as plain tests).


@pytest.mark.parametrize("latest", ["tool", "assistant-steps"])
def test_openai_moved_envelopes_are_stable_under_a_second_pass(latest: str) -> None:
    """System envelopes moved into the last tool message, or into the trailing system message after an
    agent's own steps, must stay DROP when telos reads its own output (no breakpoint on them)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be nice.\nCurrent time: 2026-11-21T10:00:00"},
        {"role": "user", "content": "question"},
    ]
    if latest == "tool":
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "result"},
        ]
    else:
        messages.append({"role": "assistant", "content": "a step the agent appended"})
    once = run_openai({"model": "gpt-5.6", "messages": messages}).body
    assert run_openai(once).body == once
    assert not any("Current time" in part.get("text", "") for _, part, _ in c.o_markers(once)), (
        "a breakpoint on the clock line"
    )


@pytest.mark.parametrize("where", ["system", "past-turn"])
def test_an_envelope_glued_to_a_clock_line_is_handled_in_one_pass(where: str) -> None:
    """'</environment_info> Current time: …' on one line: the clock line is DROP on the first pass."""
    glued = "<environment_info>cwd: /srv</environment_info> Current time: 2026-11-21T10:00:00\nHello"
    if where == "system":
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "system": glued,
            "messages": [{"role": "user", "content": "question"}],
        }
    else:
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "messages": [
                {"role": "user", "content": glued},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "question"},
            ],
        }
    once = run_anthropic(body).body
    assert run_anthropic(once).body == once
    stays = once.get("system", "") if where == "system" else once["messages"][0]
    assert "Current time" not in json.dumps(stays), "the clock line left the stable part on the first pass"


def test_sorting_tools_keeps_the_callers_ttl_order() -> None:
    """Tools carrying the caller's own markers keep their order (sorting put a 1h marker after a 5m one)."""
    schema = {"type": "object", "properties": {}}
    body = {
        "model": "claude-opus-5",
        "max_tokens": 8,
        "tools": [
            {"name": "search", "input_schema": schema, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"name": "calc", "input_schema": schema, "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": "question"}],
    }
    check_anthropic_limits(body, run_anthropic(body).body)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_callers_marker_on_an_envelope_only_text_is_kept(api: str) -> None:
    """The caller's marker on a text that is all envelope stays on it (it used to vanish, unrecorded)."""
    reminder = "<system-reminder>budget: 300 USD</system-reminder>"
    if api == "anthropic":
        marker = {"type": "ephemeral", "ttl": "1h"}
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "question"},
                        {"type": "text", "text": reminder, "cache_control": marker},
                    ],
                }
            ],
        }
        kept = [
            m
            for _, block, m in c.a_markers(run_anthropic(body).body)
            if block and block.get("text") == reminder
        ]
    else:
        marker = {"mode": "explicit"}
        body = {
            "model": "gpt-4.1",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "question"},
                        {"type": "text", "text": reminder, "prompt_cache_breakpoint": marker},
                    ],
                }
            ],
        }
        kept = [m for _, part, m in c.o_markers(run_openai(body).body) if part.get("text") == reminder]
    assert kept == [marker]


@pytest.mark.parametrize("where", ["system-envelope", "same-message", "ref-pool", "ref-pool-after-pin"])
def test_a_moved_marker_keeps_the_ttl_order(where: str) -> None:
    """Telos moves a block carrying the caller's 1h marker past a 5m one (an envelope to the end of
    its message or of the latest turn): the 1h marker is placed on the last block before the 5m one,
    or dropped if there is none, with a plan note; the request is rewritten (strict mode does not
    raise) and valid. A long document with no fold declared is not moved, nor its marker."""
    reminder = "<system-reminder>0</system-reminder>"
    hour, five = {"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}
    if where == "ref-pool-after-pin":
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "system": [
                {"type": "text", "text": "You are the support assistant."},
                {"type": "text", "text": big_document("rules"), "cache_control": hour},
                {"type": "text", "text": "Be brief.", "cache_control": five},
            ],
            "messages": [{"role": "user", "content": "question"}],
        }
    elif where == "ref-pool":
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "system": [
                {"type": "text", "text": big_document("rules"), "cache_control": hour},
                {"type": "text", "text": "Be brief.", "cache_control": five},
            ],
            "messages": [{"role": "user", "content": "question"}],
        }
    elif where == "system-envelope":
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "system": [{"type": "text", "text": reminder + "\n", "cache_control": hour}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "question", "cache_control": five}]}
            ],
        }
    else:
        body = {
            "model": "claude-opus-5",
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Current time: 2026-11-21T23:39:00", "cache_control": hour},
                        {"type": "text", "text": "question", "cache_control": five},
                    ],
                }
            ],
        }
    check_anthropic_body(body)
    prepared = run_anthropic(body)
    check_anthropic_limits(body, prepared.body)
    hours = [(w, block) for w, block, marker in c.a_markers(prepared.body) if marker == hour]
    if where.startswith("ref-pool"):
        # The document stays where the caller put it (no fold declared: no stub), before the 5m
        # marker: the 1h goes there.
        stub = "system[1]" if where == "ref-pool-after-pin" else "system[0]"
        assert [w for w, _ in hours] == [stub] and hours[0][1]["text"] == big_document("rules")
        # It is the caller's own marker on the caller's own block: nothing was moved.
        assert not any("placed on" in note for note in prepared.plan.notes)
    else:  # an envelope at the very start: no block before the 5m marker can take it
        assert not hours and any("dropped" in note for note in prepared.plan.notes)


def test_tool_results_stay_first_in_their_message() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    body = {
        "model": "claude-opus-5",
        "max_tokens": 8,
        "tools": [{"name": "screenshot", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "take a screenshot"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu1", "name": "screenshot", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu1", "content": "done"},
                    image,
                    {"type": "text", "text": "what do you see?"},
                ],
            },
        ],
    }
    check_anthropic_limits(body, run_anthropic(body).body)


@settings(PROPERTY, max_examples=min(EXAMPLES, 25))
@given(envelope_only_turns())
def test_a_past_turn_made_only_of_envelopes_is_not_emptied(body: dict[str, Any]) -> None:
    """A slash-command / reminder-only turn used to be pruned to content [] (both APIs reject that)."""
    out = run_anthropic(body).body
    check_anthropic_limits(body, out)
    assert out["messages"][0]["content"], "the past turn keeps its envelope as history"


# -- (e) determinism: across processes, and whatever order the caller's keys came in ------------------

WORKER = Path(__file__).with_name("_determinism_worker.py")


@settings(PROPERTY, max_examples=3, phases=[Phase.generate])
@given(
    st.lists(anthropic_requests(), min_size=6, max_size=6),
    st.lists(openai_requests(), min_size=6, max_size=6),
)
def test_emitted_bytes_are_the_same_in_every_process(
    tmp_path_factory: pytest.TempPathFactory, anthropic_bodies: list[Any], openai_bodies: list[Any]
) -> None:
    corpus = tmp_path_factory.mktemp("determinism") / "corpus.json"
    items = [("anthropic", b) for b in anthropic_bodies] + [("openai", b) for b in openai_bodies]
    corpus.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    outputs = []
    for seed in ("0", "1", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
        done = subprocess.run(
            [sys.executable, str(WORKER), str(corpus)], env=env, capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(json.loads(done.stdout))
    assert all(output == outputs[0] for output in outputs), "bytes differ between hash seeds"
    from ._determinism_worker import digest_all

    assert digest_all(items) == outputs[0], "bytes differ between this process and a fresh one"


def reverse_keys(value: Any, *, names: bool = False) -> Any:
    """``value`` with every object's keys in reverse order (a harness that rebuilds its objects).

    The names of a JSON Schema's ``properties`` (and the other name → schema maps) keep their order
    unless ``names``: the model reads and writes fields in that order, so telos keeps the caller's
    (a session restores the order it saw first: ``test_a_session_keeps_the_first_schema_order``).
    """
    if isinstance(value, dict):
        keep = not names and value.get("type") == "object" and "properties" in value
        return {
            k: (
                {name: reverse_keys(sub, names=names) for name, sub in value[k].items()}
                if keep and k in SCHEMA_MAP_KEYS and isinstance(value[k], dict)
                else reverse_keys(value[k], names=names)
            )
            for k in reversed(list(value))
        }
    if isinstance(value, list):
        return [reverse_keys(v, names=names) for v in value]
    return value


def _wire_bytes(body: dict[str, Any]) -> bytes:
    """Serialized as the SDKs do, insertion order kept below the top level; the top-level fields in
    one fixed order, since telos keeps the caller's order there (never part of the prompt)."""
    return json.dumps(dict(sorted(body.items())), ensure_ascii=False).encode("utf-8")


@PROPERTY
@given(anthropic_requests(), openai_requests())
def test_key_order_never_changes_the_bytes(
    anthropic_body: dict[str, Any], openai_body: dict[str, Any]
) -> None:
    assert _wire_bytes(run_anthropic(anthropic_body).body) == _wire_bytes(
        run_anthropic(reverse_keys(anthropic_body)).body
    )
    assert _wire_bytes(run_openai(openai_body).body) == _wire_bytes(
        run_openai(reverse_keys(openai_body)).body
    )
    # The top level keeps the caller's order, whatever it is; telos' own fields come after it.
    for run, body in ((run_anthropic, anthropic_body), (run_openai, openai_body)):
        reversed_body = reverse_keys(body)
        sent = list(run(reversed_body).body)
        assert sent[: len(reversed_body)] == [key for key in reversed_body if key in sent]


@PROPERTY
@given(anthropic_requests(), openai_requests())
def test_a_session_keeps_the_first_schema_order(
    anthropic_body: dict[str, Any], openai_body: dict[str, Any]
) -> None:
    """Within a session, every key order — schema property names included — gives the bytes of the
    first request: the names come in the order the session saw first."""
    for api, engine, body in (
        ("anthropic", "anthropic", anthropic_body),
        ("openai_chat", "openai", openai_body),
    ):
        session = Session("orders", store=MemoryStore(), clock=lambda: 1_000.0)
        options = PrepareOptions(engine=engine, session_id="orders")
        _, first = runtime_of(session).prepare_request(api, body, options)
        _, again = runtime_of(session).prepare_request(api, reverse_keys(body, names=True), options)
        assert _wire_bytes(again.body) == _wire_bytes(first.body)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_key_order_of_the_callers_own_markers_never_changes_the_bytes(api: str) -> None:
    """Regression: the caller's marker object went back on the wire with its own key order."""
    if api == "anthropic":

        def body(marker: dict[str, str]) -> dict[str, Any]:
            block = {"type": "text", "text": "question", "cache_control": marker}
            return {
                "model": "claude-opus-5",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": [block]}],
            }

        run, first, second = (
            run_anthropic,
            {"type": "ephemeral", "ttl": "1h"},
            {"ttl": "1h", "type": "ephemeral"},
        )
    else:

        def body(marker: dict[str, str]) -> dict[str, Any]:
            part = {"type": "text", "text": "question", "prompt_cache_breakpoint": marker}
            return {"model": "gpt-5.6", "messages": [{"role": "user", "content": [part]}]}

        run, first, second = (
            run_openai,
            {"mode": "explicit", "ttl": "30m"},
            {"ttl": "30m", "mode": "explicit"},
        )
    assert _wire_bytes(run(body(first)).body) == _wire_bytes(run(body(second)).body)


# -- end to end through the patched SDKs ----------------------------------------------------------
# These check the rewrite itself on any generated body, most of them far below the minimum cacheable
# prefix: ``only_what_pays=False`` makes telos rewrite them all (the default leaves small requests as
# the SDK built them, which ``test_only_what_pays.py`` checks).


@settings(PROPERTY, max_examples=15)
@given(anthropic_requests(), st.booleans())
def test_anthropic_end_to_end(body: dict[str, Any], stream: bool) -> None:
    wire = Wire()
    client = client_for("anthropic", wire)
    kwargs = json.loads(json.dumps(body))
    extra = {k: kwargs.pop(k) for k in ("cache_control",) if k in kwargs}
    telos_wrap.patch(strict=True, only_what_pays=False)
    try:
        with telos_wrap.session():
            if stream:
                with client.messages.stream(**kwargs, extra_body=extra or None) as events:
                    events.until_done()
            else:
                client.messages.create(**kwargs, extra_body=extra or None)
    finally:
        telos_wrap.unpatch()
    sent = wire.bodies[-1]
    if stream:
        assert sent.pop("stream") is True
    check_anthropic_body(sent)
    check_anthropic_limits(body, sent)
    assert c.a_payloads(sent) == c.a_payloads(body) and c.a_tools(sent) == c.a_tools(body)
    assert Counter(m["role"] for m in sent["messages"]) == Counter(m["role"] for m in body["messages"])


@settings(PROPERTY, max_examples=15)
@given(openai_requests())
def test_openai_end_to_end(body: dict[str, Any]) -> None:
    wire = Wire()
    client = client_for("openai", wire)
    telos_wrap.patch(strict=True, only_what_pays=False)
    try:
        with telos_wrap.session():
            result = client.chat.completions.create(**json.loads(json.dumps(body)))
            if body.get("stream"):
                chunks = list(result)
                wants_usage = (body.get("stream_options") or {}).get("include_usage") is True
                assert all(chunk.choices for chunk in chunks) or wants_usage
    finally:
        telos_wrap.unpatch()
    sent = wire.bodies[-1]
    check_openai_body(sent)
    check_openai_limits(body, sent)
    lead = c.o_leading_system(sent["messages"])
    if len(sent["messages"]) - lead > len(body["messages"]) - c.o_leading_system(body["messages"]):
        sent = {**sent, "messages": sent["messages"][:-1]}  # the documented trailing system message
    assert c.o_payloads(sent) == c.o_payloads(body) and c.o_tools(sent) == c.o_tools(body)

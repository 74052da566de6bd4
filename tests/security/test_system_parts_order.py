"""Promise R1 (docs/security.md), the caller's system parts: they keep their order, with no text the
caller did not write.

A system prompt in two parts — a long document, then an instruction that points at it — is sent as
the caller wrote it, in the caller's order, on Messages, Chat Completions and Responses, in a session
and out of one: no ``[ref:…]`` stub unless a fold of the document was declared (tests/sessions/
test_folds.py covers the declared fold). The anthropic SDK's own OpenTelemetry span, which reads the
body the SDK sends, then reports the caller's system instructions exactly as without ``patch()``.
"""

from __future__ import annotations

import inspect
import json
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.failopen import failure_counts
from tests.over_http import Wire, emulator_over_http

from .wire import text_of

DOCUMENT = "\n".join(f"Section {n}: the warranty covers part {n} for {n + 6} months." for n in range(120))
INSTRUCTION = "Answer using only the document above."


def _session(in_session: bool) -> AbstractContextManager[Any]:
    return telos_wrap.session("two-part-system") if in_session else nullcontext()


def _texts(content: Any) -> list[str]:
    return [content] if isinstance(content, str) else [part["text"] for part in content]


def _send(wire: Wire, api: str, turn: int) -> tuple[list[str], dict[str, Any]]:
    """Send turn ``turn`` of a conversation with the two-part system prompt; return the system
    texts the model reads, in order, and the body sent."""
    history: list[dict[str, Any]] = []
    for n in range(turn):
        history += [
            {"role": "user", "content": f"Question {n}: how long is part {n} covered?"},
            {"role": "assistant", "content": f"Part {n} is covered for {n + 6} months."},
        ]
    question = {"role": "user", "content": f"Question {turn}: how long is part {turn} covered?"}
    if api == "messages":
        client: Any = wire.anthropic()
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=16,
            system=[{"type": "text", "text": DOCUMENT}, {"type": "text", "text": INSTRUCTION}],
            messages=[*history, question],
        )
        body = wire.requests()[-1]
        texts = _texts(body["system"])
    elif api == "chat":
        client = wire.openai()
        client.chat.completions.create(
            model="gpt-5.6",
            messages=[
                {"role": "system", "content": DOCUMENT},
                {"role": "system", "content": INSTRUCTION},
                *history,
                question,
            ],
        )
        body = wire.requests()[-1]
        texts = [t for m in body["messages"] if m["role"] == "system" for t in _texts(m["content"])]
    else:
        client = wire.openai()
        client.responses.create(
            model="gpt-5.6",
            input=[
                {"role": "system", "content": DOCUMENT},
                {"role": "system", "content": INSTRUCTION},
                *history,
                question,
            ],
        )
        body = wire.requests()[-1]
        texts = [
            part.get("text", part) if isinstance(part, dict) else part
            for item in body["input"]
            if item.get("role") == "system"
            for part in (_texts(item["content"]) if isinstance(item["content"], str) else item["content"])
        ]
    client.close()
    return texts, body


@pytest.mark.parametrize("in_session", [False, True], ids=["no-session", "session"])
@pytest.mark.parametrize("api", ["messages", "chat", "responses"])
def test_two_part_system_prompt_is_sent_in_the_callers_order(wire: Wire, api: str, in_session: bool) -> None:
    with _session(in_session):
        sent = [_send(wire, api, turn) for turn in range(3)]
    for texts, body in sent:
        assert texts == [DOCUMENT, INSTRUCTION]
        assert "[ref:" not in text_of(body), "telos sent text the caller did not write"
    if api == "messages":  # and the prompt is still cached: a breakpoint covers both parts
        system = sent[-1][1]["system"]
        assert "cache_control" in system[-1]
    assert failure_counts() == {}


def _otel_system_instructions(patched: bool) -> list[Any]:
    """``gen_ai.system_instructions`` of the anthropic SDK's own span for one two-part request."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if patched:
        telos_wrap.patch(strict=True)
    try:
        with emulator_over_http() as wire:
            client = wire.anthropic(
                open_telemetry={
                    "tracer_provider": provider,
                    "traces": {"enabled": True, "content_mode": "content"},
                }
            )
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system=[{"type": "text", "text": DOCUMENT}, {"type": "text", "text": INSTRUCTION}],
                messages=[{"role": "user", "content": "How long is part 3 covered?"}],
            )
            client.close()
    finally:
        if patched:
            telos_wrap.unpatch()
    found = [
        span.attributes["gen_ai.system_instructions"]
        for span in exporter.get_finished_spans()
        if span.attributes and "gen_ai.system_instructions" in span.attributes
    ]
    assert len(found) == 1, "the SDK's span carries the system instructions"
    instructions: list[Any] = json.loads(str(found[0]))
    return instructions


@pytest.mark.skipif(
    "open_telemetry" not in inspect.signature(anthropic.Anthropic).parameters,
    reason="this anthropic SDK line has no native OpenTelemetry spans",
)
def test_the_sdks_own_span_reports_the_callers_system_instructions() -> None:
    pytest.importorskip("opentelemetry.sdk")
    expected = [{"type": "text", "content": DOCUMENT}, {"type": "text", "content": INSTRUCTION}]
    assert _otel_system_instructions(patched=False) == expected
    assert _otel_system_instructions(patched=True) == expected
    assert failure_counts() == {}

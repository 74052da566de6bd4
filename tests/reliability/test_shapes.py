"""Every shape the SDK accepts is read as the SDK serializes it (issue 32), a hypothesis property.

Requests are generated from the SDKs' own types: assistant turns made of the SDK's response models
(anthropic ``TextBlock`` / ``ToolUseBlock`` / ``ThinkingBlock`` / ``RedactedThinkingBlock``, openai
``ChatCompletionMessage`` with ``ChatCompletionMessageToolCall``s), the params' TypedDicts, ``str``
Enum roles (as smolagents writes them), tuples and generators where a param is an ``Iterable``,
``omit`` in an optional TypedDict field, ``None`` set on a model's optional field. The same request
is also written as plain JSON: each object replaced by what the SDK sends for it. Sent through the
real SDK with ``patch(strict=True)`` (a fallback would raise), both give the same wire bytes, above
and below the cacheable minimum. Runs on every SDK line (tests/reliability is in the 0.x nox line).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.sessions import MemoryStore
from tests.anthropic.capture import Capture
from tests.reliability.harness import ENTRIES, RESPONSES_ENTRIES, Entry, Wire, client_for
from tests.sdk_http import sdk_http

anthropic_types = pytest.importorskip("anthropic.types")
chat_types = pytest.importorskip("openai.types.chat")


class Role(str, enum.Enum):
    """A role as smolagents and other frameworks write it: a ``str`` Enum."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def _omit() -> Any:
    """The SDK's ``omit`` (``NOT_GIVEN`` on lines without it)."""
    return getattr(anthropic, "omit", anthropic.NOT_GIVEN)


def sdk_json(value: Any) -> Any:
    """``value`` as the SDK sends it (the plain-JSON spelling of the same request)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(
            mode="json", exclude_unset=True, by_alias=True, exclude=getattr(value, "__api_exclude__", None)
        )
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: sdk_json(v) for k, v in value.items() if not isinstance(v, type(_omit()))}
    if isinstance(value, (list, tuple)):
        return [sdk_json(v) for v in value]
    return value


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
SYSTEM = "You are the support agent of an online shop.\n" + "Quote the order record; never guess.\n" * 300


def _role(draw: st.DrawFn, role: str) -> Any:
    return Role(role) if draw(st.booleans()) else role


def _container(draw: st.DrawFn, items: list[Any]) -> Any:
    """A list, a tuple, or (for an ``Iterable`` param) a generator of ``items``."""
    kind = draw(st.sampled_from(["list", "tuple", "generator"]))
    if kind == "tuple":
        return tuple(items)
    if kind == "generator":
        return (item for item in items)
    return items


# -- Anthropic ---------------------------------------------------------------------------------------


@st.composite
def anthropic_turns(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """``(messages as objects, the same as plain JSON)`` of a tool-using conversation."""
    objects: list[Any] = []
    for n in range(draw(st.integers(1, 4))):
        text_block: dict[str, Any] = {"type": "text", "text": draw(TEXT)}
        if draw(st.booleans()):
            text_block["cache_control"] = _omit()  # an optional TypedDict field left out
        question = draw(st.sampled_from(["string", "blocks"]))
        user_content = text_block["text"] if question == "string" else _container(draw, [text_block])
        objects.append({"role": _role(draw, "user"), "content": user_content})
        blocks: list[Any] = []
        if draw(st.booleans()):
            blocks.append(
                anthropic_types.ThinkingBlock(type="thinking", thinking=draw(TEXT), signature=f"sig-{n}")
            )
        if draw(st.booleans()):
            blocks.append(anthropic_types.RedactedThinkingBlock(type="redacted_thinking", data=f"opaque-{n}"))
        text = anthropic_types.TextBlock(type="text", text=draw(TEXT))
        if draw(st.booleans()):
            text = anthropic_types.TextBlock(type="text", text=text.text, citations=None)  # None, set
        blocks.append(text)
        tool = anthropic_types.ToolUseBlock(
            type="tool_use", id=f"toolu_{n}", name="lookup", input={"id": draw(TEXT), "n": n}
        )
        blocks.append(tool)
        objects.append({"role": _role(draw, "assistant"), "content": _container(draw, blocks)})
        result = {"type": "tool_result", "tool_use_id": tool.id, "content": draw(TEXT)}
        objects.append({"role": "user", "content": [result]})
    objects.append({"role": "user", "content": draw(TEXT)})
    # The plain spelling is taken before a generator is consumed: materialize the containers once.
    objects = [{**m, "content": _replay(m["content"])} for m in objects]
    plain = [
        sdk_json({**m, "content": list(m["content"]) if _many(m["content"]) else m["content"]})
        for m in objects
    ]
    return objects, plain


def _replay(content: Any) -> Any:
    if isinstance(content, (str, list, tuple)):
        return content
    return list(content)  # a generator: drawn once, replayed as a fresh generator per send


def _many(content: Any) -> bool:
    return not isinstance(content, str)


def _fresh(messages: list[Any], generators: bool) -> list[Any]:
    """The messages for one send: generator contents made anew (a generator is read once)."""
    if not generators:
        return messages
    return [
        {**m, "content": (b for b in m["content"])} if isinstance(m["content"], list) else m for m in messages
    ]


def _anthropic_body(messages: Any, system: str) -> dict[str, Any]:
    capture = Capture()
    client = capture.client()
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=system,
        tools=[
            {"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}
        ],
        messages=messages,
    )
    (body,) = capture.bodies
    return body


def _send(body_of: Callable[[], dict[str, Any]]) -> str:
    """One request in a fresh session of a fresh store: what went out, as text (key order included)."""
    with telos_wrap.session("shapes", store=MemoryStore()):
        return json.dumps(body_of())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=anthropic_turns(), big=st.booleans(), generators=st.booleans())
def test_anthropic_shapes_are_read_as_the_sdk_sends_them(
    patched: None, turns: tuple[list[Any], list[Any]], big: bool, generators: bool
) -> None:
    objects, plain = turns
    system = SYSTEM if big else "Be terse."
    sent = _send(lambda: _anthropic_body(_fresh(objects, generators), system))
    expected = _send(lambda: _anthropic_body(plain, system))
    assert telos_wrap.failure_counts() == {}
    assert sent == expected
    if big:
        assert "cache_control" in sent
    else:  # below the minimum: the SDK's own bytes, as it sends the plain spelling unpatched
        telos_wrap.unpatch()
        try:
            assert json.dumps(_anthropic_body(plain, system)) == sent
        finally:
            telos_wrap.patch(strict=True)


# -- OpenAI Chat Completions ---------------------------------------------------------------------------


_COMPLETION = {
    "id": "chatcmpl-shape",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4.1",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


def _openai_body(messages: Any, system: str, system_role: Any = "system") -> dict[str, Any]:
    bodies: list[dict[str, Any]] = []

    def answer(request: sdk_http.Request) -> sdk_http.Response:
        bodies.append(json.loads(request.content))
        return sdk_http.Response(200, json=_COMPLETION)

    client = openai.OpenAI(api_key="k", http_client=sdk_http.Client(transport=sdk_http.MockTransport(answer)))
    client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": system_role, "content": system}, *messages]
    )
    (body,) = bodies
    return body


@st.composite
def chat_turns(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    objects: list[Any] = []
    for n in range(draw(st.integers(1, 4))):
        question = draw(TEXT)
        if draw(st.booleans()):
            objects.append({"role": _role(draw, "user"), "content": question})
        else:
            objects.append(
                {
                    "role": _role(draw, "user"),
                    "content": _container(draw, [{"type": "text", "text": question}]),
                }
            )
        call = chat_types.ChatCompletionMessageToolCall(
            id=f"call_{n}", type="function", function={"name": "lookup", "arguments": json.dumps({"id": n})}
        )
        content = draw(st.one_of(st.none(), TEXT))
        message = chat_types.ChatCompletionMessage(role="assistant", content=content, tool_calls=[call])
        objects.append(message)
        objects.append({"role": _role(draw, "tool"), "tool_call_id": call.id, "content": draw(TEXT)})
    objects.append({"role": "user", "content": draw(TEXT)})
    objects = [m if not isinstance(m, dict) else {**m, "content": _replay(m["content"])} for m in objects]
    plain = [
        sdk_json(
            m
            if not isinstance(m, dict)
            else {**m, "content": list(m["content"]) if _many(m["content"]) else m["content"]}
        )
        for m in objects
    ]
    return objects, plain


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=chat_turns(), big=st.booleans(), generators=st.booleans(), enum_system=st.booleans())
def test_openai_shapes_are_read_as_the_sdk_sends_them(
    patched: None, turns: tuple[list[Any], list[Any]], big: bool, generators: bool, enum_system: bool
) -> None:
    objects, plain = turns
    system = SYSTEM if big else "Be terse."
    fresh = [
        {**m, "content": (b for b in m["content"])}
        if generators and isinstance(m, dict) and isinstance(m["content"], list)
        else m
        for m in objects
    ]
    sent = _send(lambda: _openai_body(fresh, system, Role.SYSTEM if enum_system else "system"))
    expected = _send(lambda: _openai_body(plain, system))
    assert telos_wrap.failure_counts() == {}
    assert sent == expected
    assert "MessageRole" not in sent and "Role." not in sent


# -- Every entry point, and Responses items ------------------------------------------------------------
#
# The same property through each public entry point telos patches (``tests/reliability/harness.py``:
# create, stream, the stream helpers, parse, with_raw_response, with_streaming_response, beta, the
# tool runner, token counts, Responses compact; sync and async), the bytes on the wire compared: what
# the objects send equals what their plain spelling sends, and below the minimum what the SDK itself
# sends unpatched.

responses_types = pytest.importorskip("openai.types.responses")

_LOOKUP_CHAT = {
    "type": "function",
    "function": {
        "name": "lookup",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        },
    },
}


def _wire_bytes(
    entry: Entry, kwargs_of: Callable[[], dict[str, Any]], *, session: bool = True
) -> list[bytes]:
    """Every request body ``entry`` puts on the wire for ``kwargs_of()``, in a fresh session."""
    wire = Wire()
    client = client_for(entry.sdk, wire, is_async=entry.is_async)
    scope = telos_wrap.session("shapes", store=MemoryStore()) if session else contextlib.nullcontext()
    with scope:
        entry.run(client, kwargs_of())
    return [sent.raw for sent in wire.sent]


def _same_bytes_through(
    entry: Entry,
    objects_kwargs: Callable[[], dict[str, Any]],
    plain_kwargs: Callable[[], dict[str, Any]],
    big: bool,
) -> list[bytes]:
    sent = _wire_bytes(entry, objects_kwargs)
    expected = _wire_bytes(entry, plain_kwargs)
    assert telos_wrap.failure_counts() == {}
    assert sent == expected
    assert b"MessageRole" not in b"".join(sent) and b"Role." not in b"".join(sent)
    if not big:  # below the minimum: the SDK's own bytes, as it sends the plain spelling unpatched
        telos_wrap.unpatch()
        try:
            assert _wire_bytes(entry, plain_kwargs, session=False) == sent
        finally:
            telos_wrap.patch(strict=True)
    return sent


def _anthropic_kwargs(messages: Any, system: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": system,
        "tools": [
            {"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}
        ],
        "messages": messages,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=anthropic_turns(),
    big=st.booleans(),
    generators=st.booleans(),
    entry=st.sampled_from([e for e in ENTRIES if e.sdk == "anthropic"]),
)
def test_anthropic_shapes_through_every_entry_point(
    patched: None, turns: tuple[list[Any], list[Any]], big: bool, generators: bool, entry: Entry
) -> None:
    objects, plain = turns
    system = SYSTEM if big else "Be terse."
    sent = _same_bytes_through(
        entry,
        lambda: _anthropic_kwargs(_fresh(objects, generators), system),
        lambda: _anthropic_kwargs(plain, system),
        big,
    )
    assert sent
    if big:
        assert all(b"cache_control" in body for body in sent)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=chat_turns(),
    big=st.booleans(),
    generators=st.booleans(),
    enum_system=st.booleans(),
    entry=st.sampled_from([e for e in ENTRIES if e.sdk == "openai"]),
)
def test_openai_shapes_through_every_entry_point(
    patched: None,
    turns: tuple[list[Any], list[Any]],
    big: bool,
    generators: bool,
    enum_system: bool,
    entry: Entry,
) -> None:
    objects, plain = turns
    system = SYSTEM if big else "Be terse."
    system_role = Role.SYSTEM if enum_system else "system"

    def with_objects() -> dict[str, Any]:
        fresh = [
            {**m, "content": (b for b in m["content"])}
            if generators and isinstance(m, dict) and isinstance(m["content"], list)
            else m
            for m in objects
        ]
        messages = [{"role": system_role, "content": system}, *fresh]
        return {"model": "gpt-4.1", "tools": [_LOOKUP_CHAT], "messages": messages}

    def as_plain() -> dict[str, Any]:
        messages = [{"role": "system", "content": system}, *plain]
        return {"model": "gpt-4.1", "tools": [_LOOKUP_CHAT], "messages": messages}

    assert _same_bytes_through(entry, with_objects, as_plain, big)


@st.composite
def responses_turns(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """``(input items, some of them the SDK's output models, the same as plain JSON)``: what
    ``input += response.output`` builds, as the Responses docs write the tool loop."""
    objects: list[Any] = []
    for n in range(draw(st.integers(1, 3))):
        question = draw(TEXT)
        if draw(st.booleans()):
            objects.append({"role": _role(draw, "user"), "content": question})
        else:
            objects.append(
                {"role": _role(draw, "user"), "content": [{"type": "input_text", "text": question}]}
            )
        if draw(st.booleans()):
            objects.append(
                responses_types.ResponseReasoningItem(
                    id=f"rs_{n}", type="reasoning", summary=[], encrypted_content=f"opaque-{n}"
                )
            )
        call = responses_types.ResponseFunctionToolCall(
            type="function_call",
            call_id=f"call_{n}",
            name="lookup",
            arguments=json.dumps({"id": draw(TEXT)}),
            id=f"fc_{n}",
            status="completed",
        )
        objects.append(call)
        objects.append({"type": "function_call_output", "call_id": call.call_id, "output": draw(TEXT)})
        text = responses_types.ResponseOutputText(type="output_text", text=draw(TEXT), annotations=[])
        objects.append(
            responses_types.ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text]
            )
        )
    objects.append({"role": "user", "content": draw(TEXT)})
    return objects, [sdk_json(item) for item in objects]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=responses_turns(), big=st.booleans(), entry=st.sampled_from(RESPONSES_ENTRIES))
def test_responses_items_through_every_entry_point(
    patched: None, turns: tuple[list[Any], list[Any]], big: bool, entry: Entry
) -> None:
    objects, plain = turns
    instructions = SYSTEM if big else "Be terse."
    tool = {
        "type": "function",
        "name": "lookup",
        "strict": True,
        "parameters": _LOOKUP_CHAT["function"]["parameters"],
    }

    def kwargs(items: list[Any]) -> dict[str, Any]:
        return {"model": "gpt-4.1", "instructions": instructions, "tools": [tool], "input": list(items)}

    assert _same_bytes_through(entry, lambda: kwargs(objects), lambda: kwargs(plain), big)


@pytest.mark.parametrize("where", ["first message", "later message"])
def test_an_async_clients_generator_is_read_once_and_sent_whole(patched: None, where: str) -> None:
    """Regression: on an async anthropic client, telos looked for file inputs by copying the body
    the way the SDK does, which reads a generator, and then serialized the caller's body again: the
    generator's blocks went out as ``"content": []`` (found by the entry-point property above). The
    copy is now what is serialized and sent."""
    blocks = [{"type": "text", "text": "Where is order 1042?"}]
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi"},
    ]
    asked = {"role": "user", "content": (block for block in blocks)}
    messages = [asked] if where == "first message" else [*history, asked]
    wire = Wire()
    client = client_for("anthropic", wire, is_async=True)

    async def call() -> None:
        await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, system="Be terse.", messages=messages
        )

    with telos_wrap.session("generator", store=MemoryStore()):
        asyncio.run(call())
    (sent,) = wire.sent
    assert sent.body["messages"][-1]["content"] == blocks
    assert telos_wrap.failure_counts() == {}

"""The agent loops of the vendors' own documentation, as written, through ``patch()`` (issue 32).

Anthropic's tool-use docs append ``response.content`` (the SDK's own ``TextBlock`` / ``ToolUseBlock``
objects) as the assistant turn, also after ``client.messages.stream(...)`` with
``get_final_message().content``; OpenAI's function-calling docs append
``completion.choices[0].message`` (a ``ChatCompletionMessage``), the Responses docs do
``input += response.output``, and ``parse()`` takes a pydantic model. Each loop runs sync, async and
streamed where the SDK has it, inside a session and without one, over real HTTP against the emulator:
no fallback, every request after the first carries the cache field (Anthropic ``cache_control``,
OpenAI ``prompt_cache_key``), and the bytes are those of the same loop written with plain JSON
(the objects dumped as the SDK sends them). Runs on every SDK line (tests/reliability is in the
0.x nox line).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import anthropic
import openai
import pydantic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, Replier, Reply, ToolCall, serve, tool_loop
from telos_wrap.failopen import reset_failures

SYSTEM = "You are the support agent of an online shop.\n" + "Quote the order record; never guess.\n" * 300
QUESTION = "Where are orders 1, 2 and 3?"
SCRIPT = [ToolCall("lookup", {"id": "1"}), ToolCall("lookup", {"id": "2"}), ToolCall("lookup", {"id": "3"})]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
ANTHROPIC_TOOLS = [{"name": "lookup", "description": "Look up an order.", "input_schema": SCHEMA}]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "lookup", "description": "Look up an order.", "parameters": SCHEMA},
    }
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "lookup", "description": "Look up an order.", "parameters": SCHEMA}
]
MODES = ["sync", "async", "stream"]


def _dump(value: Any, objects: bool) -> Any:
    """``value`` as the loop appends it: the SDK's objects, or their JSON as the SDK sends it."""
    if objects:
        return value
    if isinstance(value, list):
        return [_dump(item, objects) for item in value]
    # As the SDKs dump a model in a request: set fields only, by alias, without ``__api_exclude__``
    # (the Responses stream helper's ``parsed_arguments``).
    return value.model_dump(
        mode="json", exclude_unset=True, by_alias=True, exclude=getattr(value, "__api_exclude__", None)
    )


@contextmanager
def _patched(url: str, in_session: bool) -> Iterator[None]:
    telos_wrap.patch(engines={f"{url}/v1": "openai"})
    reset_failures()
    try:
        with telos_wrap.session("documented-loop") if in_session else nullcontext():
            yield
    finally:
        telos_wrap.unpatch()


def _run(
    loop: Callable[[str, bool], None], *, objects: bool, in_session: bool, replier: Replier | None = None
) -> tuple[list[Any], dict[str, int]]:
    emulator = Emulator(replier=replier or tool_loop(SCRIPT, "All three ship tomorrow."))
    with serve(emulator) as url, _patched(url, in_session):
        loop(url, objects)
        failures = telos_wrap.failure_counts()
    assert all(r.status == 200 for r in emulator.requests), [r.error for r in emulator.requests]
    return [r.body for r in emulator.requests], failures


def _check(
    loop: Callable[[str, bool], None],
    field: str,
    in_session: bool,
    requests: int,
    replier: Replier | None = None,
) -> None:
    bodies, failures = _run(loop, objects=True, in_session=in_session, replier=replier)
    assert failures == {}
    assert len(bodies) == requests
    assert all(field in json.dumps(body) for body in bodies[1:]), f"a request without {field}"
    plain, _ = _run(loop, objects=False, in_session=in_session, replier=replier)
    # The same loop written with plain JSON sends the same bytes (key order included).
    assert [json.dumps(b) for b in bodies] == [json.dumps(b) for b in plain]


# -- Anthropic: tool use, response.content appended ------------------------------------------------


def _tool_results(content: Any) -> dict[str, Any]:
    results = [
        {"type": "tool_result", "tool_use_id": block.id, "content": f"order {block.input['id']}: shipped"}
        for block in content
        if block.type == "tool_use"
    ]
    return {"role": "user", "content": results}


def anthropic_loop(mode: str, thinking: bool = False) -> Callable[[str, bool], None]:
    extra: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else {}

    def loop(url: str, objects: bool) -> None:
        kwargs = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 2048,
            "system": SYSTEM,
            "tools": ANTHROPIC_TOOLS,
        }
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        if mode == "async":

            async def main() -> None:
                async with anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0) as client:
                    while True:
                        response = await client.messages.create(messages=messages, **kwargs, **extra)
                        messages.append({"role": "assistant", "content": _dump(response.content, objects)})
                        if response.stop_reason != "tool_use":
                            return
                        messages.append(_tool_results(response.content))

            asyncio.run(main())
            return
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        while True:
            if mode == "stream":
                with client.messages.stream(messages=messages, **kwargs, **extra) as stream:
                    response = stream.get_final_message()
            else:
                response = client.messages.create(messages=messages, **kwargs, **extra)
            messages.append({"role": "assistant", "content": _dump(response.content, objects)})
            if response.stop_reason != "tool_use":
                return
            messages.append(_tool_results(response.content))

    return loop


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
@pytest.mark.parametrize("mode", MODES)
def test_anthropic_tool_use_loop(mode: str, in_session: bool) -> None:
    _check(anthropic_loop(mode), "cache_control", in_session, len(SCRIPT) + 1)


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
def test_anthropic_extended_thinking_tool_loop(in_session: bool) -> None:
    _check(anthropic_loop("sync", thinking=True), "cache_control", in_session, len(SCRIPT) + 1)


def test_anthropic_thinking_blocks_passed_back() -> None:
    """A ``ThinkingBlock`` and a ``RedactedThinkingBlock`` of the SDK's own, passed back with the tool
    use as the extended-thinking docs require, are sent as the SDK serializes them."""
    from anthropic.types import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock

    def loop(url: str, objects: bool) -> None:
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        turn = [
            ThinkingBlock(type="thinking", thinking="Look the order up first.", signature="sig-1"),
            RedactedThinkingBlock(type="redacted_thinking", data="b3BhcXVl"),
            TextBlock(type="text", text="Looking it up."),
            ToolUseBlock(type="tool_use", id="toolu_1", name="lookup", input={"id": "1"}),
        ]
        for n in range(2):
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=2048,
                system=SYSTEM,
                tools=ANTHROPIC_TOOLS,
                thinking={"type": "enabled", "budget_tokens": 1024},
                messages=[
                    {"role": "user", "content": QUESTION},
                    {"role": "assistant", "content": _dump(turn, objects)},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
                    },
                    *(
                        [{"role": "assistant", "content": "Shipped."}, {"role": "user", "content": "Thanks"}]
                        * n
                    ),
                ],
            )

    _check(loop, "cache_control", True, 2)


# -- OpenAI: function calling, Responses, parse() ----------------------------------------------------


def chat_loop(mode: str) -> Callable[[str, bool], None]:
    def results(message: Any) -> list[dict[str, Any]]:
        return [
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": f"order {json.loads(call.function.arguments)['id']}",
            }
            for call in message.tool_calls or []
        ]

    def loop(url: str, objects: bool) -> None:
        kwargs = {"model": "gpt-4.1", "tools": CHAT_TOOLS}
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        if mode == "async":

            async def main() -> None:
                async with openai.AsyncOpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0) as client:
                    while True:
                        completion = await client.chat.completions.create(messages=messages, **kwargs)
                        message = completion.choices[0].message
                        messages.append(_dump(message, objects))
                        if not message.tool_calls:
                            return
                        messages.extend(results(message))

            asyncio.run(main())
            return
        client = openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0)
        while True:
            if mode == "stream":
                with client.chat.completions.stream(messages=messages, **kwargs) as stream:
                    completion = stream.get_final_completion()
            else:
                completion = client.chat.completions.create(messages=messages, **kwargs)
            message = completion.choices[0].message
            messages.append(_dump(message, objects))
            if not message.tool_calls:
                return
            messages.extend(results(message))

    return loop


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
@pytest.mark.parametrize("mode", MODES)
def test_openai_function_calling_loop(mode: str, in_session: bool) -> None:
    _check(chat_loop(mode), "prompt_cache_key", in_session, len(SCRIPT) + 1)


def responses_loop(mode: str) -> Callable[[str, bool], None]:
    def outputs(response: Any) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": item.call_id, "output": "order 1: shipped"}
            for item in response.output
            if item.type == "function_call"
        ]

    def loop(url: str, objects: bool) -> None:
        kwargs = {"model": "gpt-4.1", "instructions": SYSTEM, "tools": RESPONSES_TOOLS}
        items: list[Any] = [{"role": "user", "content": QUESTION}]
        if mode == "async":

            async def main() -> None:
                async with openai.AsyncOpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0) as client:
                    while True:
                        response = await client.responses.create(input=items, **kwargs)
                        items.extend(_dump(response.output, objects))
                        if not outputs(response):
                            return
                        items.extend(outputs(response))

            asyncio.run(main())
            return
        client = openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0)
        while True:
            if mode == "stream":
                with client.responses.stream(input=items, **kwargs) as stream:
                    response = stream.get_final_response()
            else:
                response = client.responses.create(input=items, **kwargs)
            items.extend(_dump(response.output, objects))  # input += response.output
            if not outputs(response):
                return
            items.extend(outputs(response))

    return loop


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
@pytest.mark.parametrize("mode", MODES)
def test_openai_responses_loop(mode: str, in_session: bool) -> None:
    _check(responses_loop(mode), "prompt_cache_key", in_session, 2)


class Order(pydantic.BaseModel):
    id: str
    status: str


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
def test_openai_parse_loop(in_session: bool) -> None:
    """``chat.completions.parse(response_format=Model)``, the parsed message appended each turn."""

    def loop(url: str, objects: bool) -> None:
        client = openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0)
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        for n in range(3):
            completion = client.chat.completions.parse(
                model="gpt-4.1", messages=messages, response_format=Order
            )
            messages.append(_dump(completion.choices[0].message, objects))
            messages.append({"role": "user", "content": f"And order {n + 2}?"})

    _check(loop, "prompt_cache_key", in_session, 3)


def _order_json(api: str, body: Any) -> Reply:
    """A structured-output reply: the JSON of an ``Order`` (the turn count names the order)."""
    return Reply(text=json.dumps({"id": str(len(body["messages"])), "status": "shipped"}))


@pytest.mark.parametrize("in_session", [False, True], ids=["implicit", "session"])
@pytest.mark.parametrize("mode", MODES)
def test_anthropic_parse_loop(mode: str, in_session: bool) -> None:
    """``messages.parse(output_format=Model)`` (and ``messages.stream(output_format=Model)``), the
    parsed reply's ``response.content`` (``ParsedTextBlock`` objects, whose ``parsed_output`` the SDK
    leaves out of a request) appended each turn, as the structured-outputs docs do."""

    def loop(url: str, objects: bool) -> None:
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": SYSTEM,
            "output_format": Order,
        }
        messages: list[Any] = [{"role": "user", "content": QUESTION}]

        def turn(response: Any, n: int) -> None:
            assert response.parsed_output == Order(id=str(len(messages)), status="shipped")
            messages.append({"role": "assistant", "content": _dump(response.content, objects)})
            messages.append({"role": "user", "content": f"And order {n + 2}?"})

        if mode == "async":

            async def main() -> None:
                async with anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0) as client:
                    for n in range(3):
                        turn(await client.messages.parse(messages=messages, **kwargs), n)

            asyncio.run(main())
            return
        with anthropic.Anthropic(api_key="k", base_url=url, max_retries=0) as client:
            for n in range(3):
                if mode == "stream":
                    with client.messages.stream(messages=messages, **kwargs) as stream:
                        turn(stream.get_final_message(), n)
                else:
                    turn(client.messages.parse(messages=messages, **kwargs), n)

    _check(loop, "cache_control", in_session, 3, replier=_order_json)


# -- below the cacheable minimum: the SDK's own bytes --------------------------------------------------


def test_small_request_with_sdk_objects_is_sent_as_the_sdk_sends_it() -> None:
    """Below the minimum cacheable prefix telos touches nothing: the bytes are the unpatched SDK's."""

    def loop(url: str) -> list[bytes]:
        sent: list[bytes] = []
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        client._client.event_hooks["request"].append(lambda request: sent.append(request.read()))
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        while True:
            response = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=messages
            )
            messages.append({"role": "assistant", "content": response.content})
            if response.stop_reason != "tool_use":
                return sent
            messages.append(_tool_results(response.content))

    runs = []
    for patched in (False, True):
        with serve(Emulator(replier=tool_loop(SCRIPT, "done"))) as url:
            if patched:
                telos_wrap.patch()
                reset_failures()
            try:
                runs.append(loop(url))
                failures = telos_wrap.failure_counts()
            finally:
                telos_wrap.unpatch()
    assert failures == {}
    assert len(runs[1]) == len(SCRIPT) + 1
    assert runs[0] == runs[1]


@pytest.mark.parametrize("where", ["first message", "later tool result"])
def test_async_file_input_is_read_off_the_event_loop(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """An image given as a ``pathlib.Path`` (anthropic >= 1 reads it as base64) on an async client: telos
    reads it as the SDK does there, in a worker thread, never on the event loop's thread; once, and
    the request is rewritten with the file's bytes (found by the anthropic SDK's own suite,
    ``test_file_input_is_read_when_the_stream_is_entered``). Deep in a later message (a tool
    result's image) it is found only once the body is lifted: read in a worker thread there too."""
    import base64
    import importlib
    import pathlib
    import threading

    prepare = importlib.import_module("anthropic._utils")
    if not hasattr(getattr(prepare, "_prepare", None), "async_prepare_request_data"):
        pytest.skip("this anthropic SDK reads no file inputs in a JSON body")
    image = tmp_path / "image.png"
    image.write_bytes(b"image-bytes")
    on_loop: list[bool] = []
    read_bytes = pathlib.Path.read_bytes

    def observed(self: pathlib.Path) -> bytes:
        on_loop.append(threading.current_thread() is loop_thread)
        return read_bytes(self)

    monkeypatch.setattr(pathlib.Path, "read_bytes", observed)
    source = {"type": "base64", "media_type": "image/png", "data": image}
    image_block = {"type": "image", "source": source}
    if where == "first message":
        messages: list[dict[str, Any]] = [{"role": "user", "content": [image_block]}]
        at: list[Any] = [0, "content", 0, "source", "data"]
    else:
        messages = [
            {"role": "user", "content": "Show me the chart."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [image_block]}],
            },
        ]
        at = [2, "content", 0, "content", 0, "source", "data"]

    async def main() -> None:
        async with anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0) as client:
            await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                system=SYSTEM,
                messages=messages,
            )

    loop_thread = threading.current_thread()  # asyncio.run's loop runs on this thread
    emulator = Emulator()
    with serve(emulator) as url, _patched(url, in_session=False):
        asyncio.run(main())
        failures = telos_wrap.failure_counts()
    assert failures == {}
    assert on_loop == [False]
    (sent,) = emulator.requests
    assert sent.status == 200
    value: Any = sent.body["messages"]
    for key in at:
        value = value[key]
    assert value == base64.b64encode(b"image-bytes").decode()
    assert "cache_control" in json.dumps(sent.body)  # rewritten, not sent as built

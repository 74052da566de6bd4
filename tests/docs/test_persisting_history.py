"""docs/sessions.md, "Persisting a history": which stored form of a reply sends back the same bytes.

The in-process objects are the reference (what a worker that keeps the conversation in memory
sends); each stored form goes through JSON, as it would through a queue or a database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import Emulator, Reply, ToolCall, emulator_http_client, script

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
STEPS = [Reply(text="Looking it up.", tool_calls=(ToolCall("lookup", {"id": "42"}),))]
#: A tool call with no text: the server sends ``"content": null`` (Chat Completions).
TOOL_ONLY = [Reply(tool_calls=(ToolCall("lookup", {"id": "42"}),))]

FORMS: dict[str, Callable[[Any], Any]] = {
    "to_dict": lambda model: model.to_dict(),
    "model_dump": lambda model: model.model_dump(),
    "model_dump_exclude_none": lambda model: model.model_dump(exclude_none=True),
}


def _anthropic_wire(form: str | None) -> str:
    emu = Emulator(replier=script(STEPS))
    tools = [{"name": "lookup", "description": "Find an order.", "input_schema": SCHEMA}]
    question = [{"role": "user", "content": "Where is order 42?"}]
    with anthropic.Anthropic(
        api_key="x", http_client=emulator_http_client(emu, "anthropic"), max_retries=0
    ) as client:
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, tools=tools, messages=question
        )
        content: Any = reply.content
        if form is not None:
            content = json.loads(json.dumps([FORMS[form](block) for block in reply.content]))
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            tools=tools,
            messages=[*question, {"role": "assistant", "content": content}],
        )
    return json.dumps(emu.requests[-1].body["messages"][1])


def _openai_wire(form: str | None) -> str:
    emu = Emulator(replier=script(TOOL_ONLY))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}}]
    question = [{"role": "user", "content": "Where is order 42?"}]
    with openai.OpenAI(api_key="x", http_client=emulator_http_client(emu, "openai"), max_retries=0) as client:
        message: Any = client.chat.completions.create(model="gpt-4.1", tools=tools, messages=question)
        message = message.choices[0].message
        if form is not None:
            message = json.loads(json.dumps(FORMS[form](message)))
        client.chat.completions.create(model="gpt-4.1", tools=tools, messages=[*question, message])
    return json.dumps(emu.requests[-1].body["messages"][1])


@pytest.mark.parametrize("wire", [_anthropic_wire, _openai_wire], ids=["anthropic", "openai"])
def test_to_dict_sends_back_the_bytes_of_the_reply_objects(wire: Callable[[str | None], str]) -> None:
    reference = wire(None)
    assert wire("to_dict") == reference
    assert wire("model_dump") != reference  # null fields the server never sent
    assert "null" in wire("model_dump").replace(reference, "")


def test_exclude_none_drops_what_the_openai_server_sent() -> None:
    reference = _openai_wire(None)
    assert '"content": null' in reference
    assert _openai_wire("model_dump_exclude_none") != reference

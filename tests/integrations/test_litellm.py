"""LiteLLM's SDK path for an OpenAI-compatible provider (``openai/<model>``), with and without ``patch()``.

LiteLLM sends these requests through the official ``openai`` client, so ``patch()`` sees them; it
returns its own ``ModelResponse``, not the SDK's object; ``usage_of()`` normalizes that object's
own ``usage`` field (docs/integrations.md).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("litellm", reason="install the extra: pip install 'telos-wrap[integrations]'")

import litellm

import telos_wrap

from .agent_kit import (
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    check,
    clock_prompt,
    run_both,
    summary,
)

#: Tool schemas built from a dict, the way LiteLLM users write them.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": fn.__doc__,
            "parameters": {
                "type": "object",
                "properties": {
                    arg: {"type": "integer" if kind is int else "string"}
                    for arg, kind in fn.__annotations__.items()
                    if arg != "return"
                },
                "required": [arg for arg in fn.__annotations__ if arg != "return"],
            },
        },
    }
    for name, fn in TOOL_FUNCTIONS.items()
]


def _kwargs(url: str, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    return {
        "model": f"openai/{OPENAI_MODEL}",
        "api_base": f"{url}/openai/v1",
        "api_key": "x",
        "messages": messages,
        "tools": TOOLS,
        "stream": stream,
        "max_retries": 0,
    }


def _step(messages: list[dict[str, Any]], message: Any) -> bool:
    """Append the assistant turn and the tool results; False when the agent is done."""
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in (message.tool_calls or [])
    ]
    messages.append(
        {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})}
    )
    for c in calls:
        result = TOOL_FUNCTIONS[c["function"]["name"]](**json.loads(c["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})
    return bool(calls)


def agent(mode: str, clock: bool) -> Any:
    def run(url: str) -> Any:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": ""},
            {"role": "user", "content": QUESTION},
        ]

        def system() -> None:
            messages[0] = {"role": "system", "content": clock_prompt() if clock else SYSTEM_PROMPT}

        if mode == "async":

            async def main() -> Any:
                while True:
                    system()
                    response = await litellm.acompletion(**_kwargs(url, messages, False))
                    if not _step(messages, response.choices[0].message):
                        return messages[1:]

            return asyncio.run(main())
        while True:
            system()
            if mode == "stream":
                chunks = list(litellm.completion(**_kwargs(url, messages, True)))
                response = litellm.stream_chunk_builder(chunks, messages=messages)
            else:
                response = litellm.completion(**_kwargs(url, messages, False))
                # LiteLLM's own object, not the SDK's: usage_of() normalizes its usage field.
                report = telos_wrap.usage_of(response)
                cached = response.usage.prompt_tokens_details.cached_tokens or 0
                assert report is not None and report.cache_read == cached
            if not _step(messages, response.choices[0].message):
                return messages[1:]

    return run


@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_litellm_openai_compatible_agent(mode: str, clock: bool, record_property: Any) -> None:
    plain, patched = run_both(agent(mode, clock), openai_engine=True)
    record_property(
        "summary", summary(f"litellm-openai-{mode}-{'clock' if clock else 'stable'}", plain, patched)
    )
    check(plain, patched)

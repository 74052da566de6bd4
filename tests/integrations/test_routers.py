"""The official ``openai`` client through an OpenAI-compatible router to Claude, with and without ``patch()``.

The emulator serves an OpenRouter-shaped and a LiteLLM-proxy-shaped endpoint (docs/emulator.md,
``flavour_router``): each translates the Chat Completions request to the Anthropic Messages API and
caches it under Anthropic's rules, so only ``cache_control`` breakpoints written in the OpenAI format
cache anything. The careless agent (the clock re-rendered into the system prompt on every request)
read nothing before telos placed them (docs/engines.md, *Routes*).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

import telos_wrap

from .agent_kit import CHAT_TOOLS as TOOLS
from .agent_kit import QUESTION, SYSTEM_PROMPT, TOOL_FUNCTIONS, clock_prompt

#: route → (the emulator's path prefix, the base URL's path, the model name as that route spells it)
ROUTES = {
    "openrouter": ("openrouter", "/api/v1", "anthropic/claude-sonnet-4.5"),
    "litellm": ("litellm", "/v1", "claude-sonnet-4-5"),
}


def _base_url(url: str, route: str) -> str:
    prefix, path, _ = ROUTES[route]
    return f"{url}/{prefix}{path}"


def agent(route: str, clock: bool, stream: bool) -> Any:
    model = ROUTES[route][2]

    def run(url: str) -> Any:
        client = openai.OpenAI(api_key="x", base_url=_base_url(url, route), max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        try:
            while True:
                system = {"role": "system", "content": clock_prompt() if clock else SYSTEM_PROMPT}
                kwargs = {"model": model, "messages": [system, *messages], "tools": TOOLS}
                if stream:
                    with client.chat.completions.stream(**kwargs) as events:
                        message = events.get_final_completion().choices[0].message
                else:
                    completion = client.chat.completions.create(**kwargs)
                    report = telos_wrap.usage_of(completion)
                    details = completion.usage.prompt_tokens_details if completion.usage else None
                    if telos_wrap.is_patched():
                        # Exact figures from the route's own fields, never a guess.
                        assert report is not None and details is not None
                        assert report.cache_read == details.cached_tokens
                        assert report.raw_input is not None and report.cache_write is not None
                        total = report.raw_input + report.cache_read + report.cache_write
                        assert total == completion.usage.prompt_tokens
                    message = completion.choices[0].message
                calls = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls or []
                ]
                turn: dict[str, Any] = {"role": "assistant", "content": message.content}
                messages.append({**turn, "tool_calls": calls} if calls else turn)
                for call in calls:
                    result = TOOL_FUNCTIONS[call["function"]["name"]](
                        **json.loads(call["function"]["arguments"])
                    )
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
                if not calls:
                    return messages
        finally:
            client.close()

    return run


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_openai_client_through_a_router_to_claude(
    route: str, clock: bool, stream: bool, before_after: Any
) -> None:
    name = f"{route}-claude-{'stream' if stream else 'sync'}-{'clock' if clock else 'stable'}"
    _, patched = before_after(
        name, agent(route, clock, stream), engines=lambda url: {_base_url(url, route): route}
    )
    assert all(r.flavour == route for r in patched.emulator.requests)

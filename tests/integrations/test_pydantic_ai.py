"""pydantic-ai agents on its Anthropic and OpenAI models, with and without ``patch()``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="install the extra: pip install 'telos-wrap[integrations]'")

from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from .agent_kit import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    clock_prompt,
    tools_as_set,
)


def _agent(vendor: str, url: str, clock: bool) -> Agent[None, str]:
    if vendor == "anthropic":
        model: Any = AnthropicModel(ANTHROPIC_MODEL, provider=AnthropicProvider(api_key="x", base_url=url))
    else:
        model = OpenAIChatModel(
            OPENAI_MODEL, provider=OpenAIProvider(base_url=f"{url}/openai/v1", api_key="x")
        )
    # Tools from a set: their order differs between processes (hash randomization).
    agent: Agent[None, str] = Agent(
        model, tools=tools_as_set(), retries=0, model_settings={"max_tokens": 1024}
    )
    if clock:
        agent.system_prompt(dynamic=True)(clock_prompt)  # re-evaluated on every request
    else:
        agent.system_prompt(lambda: SYSTEM_PROMPT)
    return agent


def _transcript(result: Any) -> list[Any]:
    """Parts in order (kind, text content, tool name), system prompt parts left out (they hold the clock)."""
    out = []
    for message in result.all_messages():
        for part in message.parts:
            if type(part).__name__ == "SystemPromptPart":
                continue
            content = getattr(part, "content", None)
            out.append(
                (
                    type(part).__name__,
                    content if isinstance(content, str) else None,
                    getattr(part, "tool_name", None),
                )
            )
    return out


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_pydantic_ai_agent(vendor: str, clock: bool, mode: str, before_after: Any) -> None:
    def run(url: str) -> Any:
        agent = _agent(vendor, url, clock)
        if mode == "sync":
            return _transcript(agent.run_sync(QUESTION))

        async def main() -> Any:
            if mode == "async":
                return _transcript(await agent.run(QUESTION))
            async with agent.run_stream_events(QUESTION) as stream:
                events = [e async for e in stream]
            return [type(e).__name__ for e in events if "Delta" not in type(e).__name__]

        return asyncio.run(main())

    name = f"pydantic-ai-{vendor}-{mode}-{'clock' if clock else 'stable'}"
    # pydantic-ai evaluates a dynamic system prompt once per run: its clock line never changes within
    # it, and where it ends the system prompt on OpenAI telos leaves it in place (agent_kit.check).
    before_after(name, run, openai_engine=vendor == "openai")

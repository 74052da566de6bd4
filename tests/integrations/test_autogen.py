"""AutoGen AgentChat's ``AssistantAgent`` on its OpenAI and Anthropic model clients, with and without
``patch()``.

``autogen-ext``'s ``OpenAIChatCompletionClient`` and ``AnthropicChatCompletionClient`` wrap the
official async clients, so ``patch()`` covers them. AutoGen 0.7's Anthropic client passes
``temperature``, which ``messages.create`` has no longer taken since anthropic 1.0 (a ``TypeError``
before any request, patched or not): its environment pins ``anthropic<1`` (pyproject's
``integrations-autogen``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "autogen_agentchat", reason="install the extra: pip install 'telos-wrap[integrations-autogen]'"
)

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.anthropic import AnthropicChatCompletionClient
from autogen_ext.models.openai import OpenAIChatCompletionClient

from .agent_kit import (
    ANTHROPIC_MODEL,
    FEW_CALLS,
    FINAL_TEXT,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
)

#: The dated name the API reports back: AutoGen warns when the model it was given maps to another.
OPENAI_DATED_MODEL = "gpt-4.1-2025-04-14"


def _agent(vendor: str) -> Any:
    def run(url: str) -> Any:
        client: Any
        if vendor == "anthropic":
            client = AnthropicChatCompletionClient(
                model=ANTHROPIC_MODEL, base_url=url, api_key="x", max_tokens=1024
            )
        else:
            client = OpenAIChatCompletionClient(
                model=OPENAI_DATED_MODEL, base_url=f"{url}/openai/v1", api_key="x"
            )
        agent = AssistantAgent(
            "support",
            model_client=client,
            tools=list(TOOL_FUNCTIONS.values()),
            system_message=SYSTEM_PROMPT,
            max_tool_iterations=len(FEW_CALLS) + 1,
        )

        async def main() -> Any:
            try:
                result = await agent.run(task=QUESTION)
            finally:
                await client.close()
            return result.messages[-1].content

        return asyncio.run(main())

    return run


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_autogen_assistant_agent(vendor: str, before_after: Any) -> None:
    plain, patched = before_after(
        f"autogen-{vendor}-agent-stable", _agent(vendor), openai_engine=vendor == "openai", script=FEW_CALLS
    )
    assert patched.result == FINAL_TEXT
    if vendor == "anthropic":
        assert plain.cache_read() == 0  # AutoGen's Anthropic client sends no breakpoint of its own

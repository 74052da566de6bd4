"""LlamaIndex's agent (``FunctionAgent``) on its Anthropic and OpenAI LLMs, with and without ``patch()``.

LlamaIndex's LLM classes call the official SDKs (``llama-index-llms-anthropic`` the ``anthropic``
client, ``llama-index-llms-openai`` the ``openai`` one), so the one-line ``patch()`` covers them. The
agent is a workflow: async, and it streams each model turn (``astream_chat_with_tools``). Its Anthropic
LLM fails on anthropic >= 1 before any request, patched or not (it passes ``temperature``, which
``messages.create`` no longer takes; on 2.x it calls ``MessageParam(...)``, a ``Union`` there) and its
OpenAI LLM requires ``openai<3``: the environment pins both lines (pyproject's
``integrations-llamaindex``, docs/integrations.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "llama_index.core", reason="install the extra: pip install 'telos-wrap[integrations-llamaindex]'"
)

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.anthropic import Anthropic
from llama_index.llms.openai import OpenAI

from .agent_kit import (
    ANTHROPIC_MODEL,
    FEW_CALLS,
    FINAL_TEXT,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
)

# Building an agent, LlamaIndex's workflow runs ``inspect.getmembers`` on it (a pydantic model), which
# touches each of pydantic's deprecated attributes: pydantic's own warnings, patched or not.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


def _llm(vendor: str, url: str) -> Any:
    if vendor == "anthropic":
        return Anthropic(model=ANTHROPIC_MODEL, api_key="x", base_url=url, max_tokens=1024)
    return OpenAI(model=OPENAI_MODEL, api_key="x", api_base=f"{url}/openai/v1", max_retries=0)


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_llamaindex_function_agent(vendor: str, before_after: Any) -> None:
    def run(url: str) -> Any:
        # Plain functions as tools: LlamaIndex reads their signatures and docstrings.
        agent = FunctionAgent(
            tools=list(TOOL_FUNCTIONS.values()), llm=_llm(vendor, url), system_prompt=SYSTEM_PROMPT
        )

        async def main() -> str:
            return str(await agent.run(user_msg=QUESTION))

        return asyncio.run(main())

    plain, patched = before_after(
        f"llamaindex-{vendor}-agent-stable", run, openai_engine=vendor == "openai", script=FEW_CALLS
    )
    assert patched.result == FINAL_TEXT
    if vendor == "anthropic":
        assert plain.cache_read() == 0  # LlamaIndex's Anthropic LLM sends no breakpoint of its own

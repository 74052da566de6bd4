"""LangChain ``ChatAnthropic`` / ``ChatOpenAI`` tool-calling agents, with and without ``patch()``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic", reason="install the extra: pip install 'telos-wrap[integrations]'")
pytest.importorskip("langchain_openai", reason="install the extra: pip install 'telos-wrap[integrations]'")

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import telos_wrap

from .agent_kit import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    clock_prompt,
)

TOOLS = {name: tool(fn) for name, fn in TOOL_FUNCTIONS.items()}


def _model(vendor: str, url: str) -> Any:
    if vendor == "anthropic":
        chat: Any = ChatAnthropic(
            model=ANTHROPIC_MODEL, base_url=url, api_key="x", max_retries=0, max_tokens=256
        )
    else:
        chat = ChatOpenAI(model=OPENAI_MODEL, base_url=f"{url}/openai/v1", api_key="x", max_retries=0)
    # Tools from a dict's values: whatever order the dict had is the order sent.
    return chat.bind_tools(list(TOOLS.values()))


def _system(clock: bool) -> str:
    return clock_prompt() if clock else SYSTEM_PROMPT


def _answer(messages: list[Any]) -> list[Any]:
    """The transcript without volatile parts: roles, texts and tool calls."""
    out = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])]
        out.append((type(m).__name__, m.content if isinstance(m.content, str) else repr(m.content), calls))
    return out


def _tool_results(ai: AIMessage) -> list[ToolMessage]:
    return [ToolMessage(str(TOOLS[c["name"]].invoke(c["args"])), tool_call_id=c["id"]) for c in ai.tool_calls]


def _reports(ai: AIMessage) -> None:
    """LangChain hides the SDK response: usage_of() has nothing to read on an AIMessage."""
    assert telos_wrap.usage_of(ai) is None


def run_sync(vendor: str, clock: bool, stream: bool) -> Any:
    def agent(url: str) -> Any:
        model = _model(vendor, url)
        messages: list[Any] = [SystemMessage(_system(clock)), HumanMessage(QUESTION)]
        while True:
            messages[0] = SystemMessage(_system(clock))  # a prompt template re-rendered every turn
            if stream:
                chunks = list(model.stream(messages))
                ai: Any = chunks[0]
                for chunk in chunks[1:]:
                    ai = ai + chunk
                ai = AIMessage(content=ai.content, tool_calls=ai.tool_calls)
            else:
                ai = model.invoke(messages)
            messages.append(ai)
            if not ai.tool_calls:
                return _answer(messages)
            messages.extend(_tool_results(ai))

    return agent


def run_async(vendor: str, clock: bool) -> Any:
    def agent(url: str) -> Any:
        async def main() -> Any:
            model = _model(vendor, url)
            messages: list[Any] = [SystemMessage(_system(clock)), HumanMessage(QUESTION)]
            while True:
                messages[0] = SystemMessage(_system(clock))
                ai = await model.ainvoke(messages)
                messages.append(ai)
                if not ai.tool_calls:
                    return _answer(messages)
                messages.extend(_tool_results(ai))

        return asyncio.run(main())

    return agent


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("mode", ["sync", "stream", "async"])
def test_langchain_agent(vendor: str, clock: bool, mode: str, before_after: Any) -> None:
    agent = run_async(vendor, clock) if mode == "async" else run_sync(vendor, clock, mode == "stream")
    name = f"langchain-{vendor}-{mode}-{'clock' if clock else 'stable'}"
    before_after(name, agent, openai_engine=vendor == "openai")

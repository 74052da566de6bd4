"""A LangGraph agent graph (model node + ``ToolNode``) on ``ChatAnthropic`` / ``ChatOpenAI``.

Beyond LangChain it adds the graph's own message state and tool execution; the model calls are
LangChain's, so the same one-line ``patch()`` applies.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="install the extra: pip install 'telos-wrap[integrations]'")

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from .agent_kit import QUESTION, clock_prompt
from .test_langchain import TOOLS, _answer, _model


def _graph(vendor: str, url: str) -> Any:
    model = _model(vendor, url)

    def call_model(state: MessagesState) -> dict[str, Any]:
        # A dynamic system prompt with the clock, prepended on every model call.
        return {"messages": [model.invoke([SystemMessage(clock_prompt()), *state["messages"]])]}

    async def acall_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([SystemMessage(clock_prompt()), *state["messages"]])]}

    def build(node: Any) -> Any:
        graph = StateGraph(MessagesState)
        graph.add_node("model", node)
        graph.add_node("tools", ToolNode(list(TOOLS.values())))
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
        graph.add_edge("tools", "model")
        return graph.compile()

    return build(call_model), build(acall_model)


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_langgraph_agent(vendor: str, mode: str, before_after: Any) -> None:
    def agent(url: str) -> Any:
        sync_graph, async_graph = _graph(vendor, url)
        state = {"messages": [HumanMessage(QUESTION)]}
        if mode == "sync":
            return _answer(sync_graph.invoke(state)["messages"])
        return _answer(asyncio.run(async_graph.ainvoke(state))["messages"])

    before_after(f"langgraph-{vendor}-{mode}-clock", agent, openai_engine=vendor == "openai")

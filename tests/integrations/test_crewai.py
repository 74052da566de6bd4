"""A CrewAI crew (one agent, one task, three tools) on its native OpenAI and Anthropic LLMs, with and
without ``patch()``.

CrewAI (>= 1.0) calls the official SDKs for ``openai/`` and ``anthropic/`` models, so ``patch()``
covers them. CrewAI requires ``openai<3`` and ``pydantic<2.13``; its ``anthropic`` extra pins
``anthropic~=0.73``, older than telos' floor (0.93), so the environment installs CrewAI without that
extra, beside the ``anthropic`` telos requires: CrewAI's Anthropic LLM runs on it unchanged
(docs/integrations.md). The agent's backstory carries the long stable prompt.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("install the extra: pip install 'telos-wrap[integrations-crewai]'", allow_module_level=True)

# CrewAI's telemetry and tracing post to its own servers: off, as in any offline deployment.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

with warnings.catch_warnings():
    # CrewAI's lazy ``crewai.rag`` module warns while it imports (an ``ImportWarning`` of its own).
    warnings.simplefilter("ignore", ImportWarning)
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool

from .agent_kit import (
    ANTHROPIC_MODEL,
    FEW_CALLS,
    FINAL_TEXT,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
)

# CrewAI reads its own deprecated fields (``function_calling_llm``, ...) when an agent is built: its
# warnings, raised in its own modules, patched or not.
pytestmark = pytest.mark.filterwarnings(r"ignore::DeprecationWarning:crewai\.")

#: CrewAI's ``@tool`` over the plain functions (it reads their signatures and docstrings).
TOOLS = [tool(fn) for fn in TOOL_FUNCTIONS.values()]


def _crew(vendor: str) -> Any:
    def run(url: str) -> Any:
        if vendor == "anthropic":
            llm = LLM(model=f"anthropic/{ANTHROPIC_MODEL}", base_url=url, api_key="x", max_tokens=1024)
        else:
            llm = LLM(model=f"openai/{OPENAI_MODEL}", base_url=f"{url}/openai/v1", api_key="x")
        agent = Agent(
            role="Support agent",
            goal="Answer the customer's question with the shop's tools.",
            backstory=SYSTEM_PROMPT,
            tools=TOOLS,
            llm=llm,
            max_iter=len(FEW_CALLS) + 2,
            verbose=False,
        )
        task = Task(description=QUESTION, expected_output="A short answer.", agent=agent)
        return str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff())

    return run


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_crewai_crew(vendor: str, before_after: Any) -> None:
    # CrewAI's Anthropic LLM also counts tokens (``/v1/messages/count_tokens``) before each turn and
    # for each tool's output: requests without usage, in neither the reads nor the bound; the
    # checks take as many requests as the run without patch() sent, the model turns are counted here.
    _, patched = before_after(
        f"crewai-{vendor}-crew-stable",
        _crew(vendor),
        openai_engine=vendor == "openai",
        script=FEW_CALLS,
        requests=None,
    )
    turns = [r for r in patched.emulator.requests if not r.path.endswith("/count_tokens")]
    assert len(turns) == len(FEW_CALLS) + 1
    assert patched.result == FINAL_TEXT

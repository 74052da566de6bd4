"""DSPy's ``ReAct`` agent over LiteLLM, with and without ``patch()``; and DSPy's native route, which telos
does not see.

``dspy.LM`` (DSPy >= 3.4) has two engines. ``engine="litellm"`` calls ``litellm.completion``: telos
rewrites the ``anthropic/`` route there (``patch/litellm.py``) and the ``openai/`` route in the
``openai`` client LiteLLM calls. The default, ``engine="auto"``, sends a model it knows through DSPy's
own built-in HTTP client (its vendored ``lm15``, neither SDK nor LiteLLM), so telos never sees that
traffic: docs/integrations.md gives the one line that routes DSPy through LiteLLM, and
:func:`test_dspy_native_engine_is_not_seen` pins the fact, so a DSPy that starts calling a covered
path is noticed.

ReAct does not use the API's tool calling: the model answers in DSPy's field format
(``[[ ## next_tool_name ## ]]`` ...), so the emulator's replier writes that text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

# LiteLLM's bundled model table instead of fetching it on import (test_litellm.py).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("dspy", reason="install the extra: pip install 'telos-wrap[integrations-dspy]'")

import dspy

from telos_wrap.emulator import Reply

from .agent_kit import (
    ANTHROPIC_MODEL,
    FEW_CALLS,
    FINAL_TEXT,
    OPENAI_MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_FUNCTIONS,
    run_both,
)

#: ReAct's trajectory, one ``observation_<i>`` field per tool result, in the prompt it sends.
_OBSERVATION = "[[ ## observation_"


def _texts(body: Mapping[str, Any]) -> str:
    parts: list[Any] = [body.get("system")]
    for message in body.get("messages", []):
        parts.append(message.get("content"))
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, list):
            out.extend(block.get("text", "") for block in part if isinstance(block, Mapping))
    return "\n".join(out)


def react_replier(api: str, body: Mapping[str, Any]) -> Reply:
    """The model's side of ReAct: a tool per step from :data:`FEW_CALLS`, then ``finish``; then the
    answer when DSPy asks its extraction step (the one whose fields are ``reasoning`` / ``answer``)."""
    text = _texts(body)
    if "next_tool_name" not in text:
        return Reply(
            text=f"[[ ## reasoning ## ]]\nDone.\n\n[[ ## answer ## ]]\n{FINAL_TEXT}\n\n[[ ## completed ## ]]"
        )
    done = text.count(_OBSERVATION)
    name, args = (
        (FEW_CALLS[done].name, dict(FEW_CALLS[done].arguments)) if done < len(FEW_CALLS) else ("finish", {})
    )
    return Reply(
        text=f"[[ ## next_thought ## ]]\nStep {done + 1}.\n\n[[ ## next_tool_name ## ]]\n{name}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(args)}\n\n[[ ## completed ## ]]"
    )


#: The tool steps, ``finish``, and the extraction step.
REQUESTS = len(FEW_CALLS) + 2


def _agent(vendor: str, engine: str) -> Any:
    def run(url: str) -> Any:
        if vendor == "anthropic":
            model, api_base = f"anthropic/{ANTHROPIC_MODEL}", url
        else:
            model, api_base = f"openai/{OPENAI_MODEL}", f"{url}/openai/v1"
        # cache=False: DSPy's own response cache would answer the second run without a request.
        lm = dspy.LM(model, api_base=api_base, api_key="x", cache=False, num_retries=0, engine=engine)
        signature = dspy.Signature("question -> answer", instructions=SYSTEM_PROMPT)
        react = dspy.ReAct(signature, tools=list(TOOL_FUNCTIONS.values()), max_iters=6)
        with dspy.context(lm=lm):
            return react(question=QUESTION).answer

    return run


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_dspy_react_over_litellm(vendor: str, before_after: Any) -> None:
    plain, patched = before_after(
        f"dspy-react-litellm-{vendor}-stable",
        _agent(vendor, "litellm"),
        openai_engine=vendor == "openai",
        replier=react_replier,
        requests=REQUESTS,
    )
    assert patched.result == FINAL_TEXT
    if vendor == "anthropic":
        assert plain.cache_read() == 0  # neither DSPy nor LiteLLM marks a breakpoint


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_dspy_native_engine_is_not_seen(vendor: str) -> None:
    """DSPy's default engine posts with its own client: patched, the wire is exactly DSPy's own."""
    plain, patched = run_both(_agent(vendor, "auto"), openai_engine=vendor == "openai", replier=react_replier)
    assert patched.result == plain.result == FINAL_TEXT
    assert [r.body for r in patched.emulator.requests] == [r.body for r in plain.emulator.requests]
    assert len(patched.emulator.requests) == REQUESTS
    assert "cache_control" not in json.dumps([r.body for r in patched.emulator.requests])
    assert all("prompt_cache_key" not in r.body for r in patched.emulator.requests)
    assert patched.failures == {}

"""Claude on the clouds through the official clients, over real HTTP, with and without ``patch()``.

``AnthropicBedrock`` (``/model/{id}/invoke``), ``AnthropicVertex`` (``...:rawPredict`` /
``:streamRawPredict``) and ``AnthropicFoundry`` (Azure, ``/v1/messages``) build the Messages request
and only then move the model into the URL, so telos rewrites it like a direct call (the ``anthropic``
engine). The emulator answers on each cloud's own path (``telos_wrap.emulator.clouds``). The careless
agent re-renders a clock into its system prompt on every request; the cloud's model id picks the
minimum (docs/engines.md, *Routes*).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.engines.minimums import minimum_for
from tests.integrations.agent_kit import (
    QUESTION,
    TOOL_FUNCTIONS,
    check,
    clock_prompt,
    parameters_of,
    run_both,
    summary,
)

TOOLS = [
    {"name": name, "description": fn.__doc__, "input_schema": parameters_of(fn)}
    for name, fn in TOOL_FUNCTIONS.items()
]

# Each cloud client is a sibling of ``anthropic.Anthropic`` with the same resources, not a subclass.
CLOUDS: dict[str, tuple[Callable[[str], Any], str]] = {
    "bedrock": (
        lambda url: anthropic.AnthropicBedrock(
            api_key="x", aws_region="us-east-1", base_url=url, max_retries=0
        ),
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ),
    "vertex": (
        lambda url: anthropic.AnthropicVertex(
            access_token="x", region="us-east5", project_id="p", base_url=url, max_retries=0
        ),
        "claude-sonnet-4-5@20250929",
    ),
    "foundry": (
        lambda url: anthropic.AnthropicFoundry(api_key="x", base_url=url, max_retries=0),
        "claude-sonnet-4-5",
    ),
}


#: What each cloud client needs from the installed SDK line (older lines lack some of it).
NEEDS = {
    "bedrock": ("AnthropicBedrock", "api_key"),
    "vertex": ("AnthropicVertex", "access_token"),
    "foundry": ("AnthropicFoundry", "api_key"),
}


def _skip_without(cloud: str) -> None:
    name, parameter = NEEDS[cloud]
    cls = getattr(anthropic, name, None)
    if cls is None or parameter not in inspect.signature(cls.__init__).parameters:
        pytest.skip(f"anthropic {anthropic.__version__} has no {name}({parameter}=...)")


def agent(cloud: str, stream: bool) -> Callable[[str], Any]:
    make, model = CLOUDS[cloud]

    def run(url: str) -> Any:
        client = make(url)
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        while True:
            kwargs = {"model": model, "max_tokens": 256, "system": clock_prompt(), "tools": TOOLS}
            if stream:
                with client.messages.stream(**kwargs, messages=messages) as events:
                    message = events.get_final_message()
            else:
                message = client.messages.create(**kwargs, messages=messages)
                report = telos_wrap.usage_of(message)
                usage = message.usage
                assert report is not None and report.cache_read == (usage.cache_read_input_tokens or 0)
                assert report.raw_input == usage.input_tokens
            content = [block.model_dump(exclude_none=True) for block in message.content]
            messages.append({"role": "assistant", "content": content})
            calls = [block for block in message.content if block.type == "tool_use"]
            if not calls:
                client.close()
                return messages
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": c.id,
                            "content": str(TOOL_FUNCTIONS[c.name](**c.input)),
                        }
                        for c in calls
                    ],
                }
            )

    return run


@pytest.mark.parametrize(
    ("cloud", "stream"),
    [("bedrock", False), ("vertex", False), ("vertex", True), ("foundry", False)],
)
def test_careless_agent_on_a_cloud(cloud: str, stream: bool, record_property: Any) -> None:
    _skip_without(cloud)
    plain, patched = run_both(agent(cloud, stream))
    record_property("summary", summary(f"{cloud}-{'stream' if stream else 'sync'}-clock", plain, patched))
    check(plain, patched)
    paths = {r.path for r in patched.emulator.requests}
    assert len(paths) == 1 and paths == {r.path for r in plain.emulator.requests}
    sent = json.dumps([r.body for r in patched.emulator.requests])
    assert "cache_control" in sent
    assert ("anthropic_version" in sent) == (cloud != "foundry")  # the SDK's cloud body, model in the URL


def test_cloud_model_ids_get_claude_minimums() -> None:
    assert minimum_for("anthropic", "us.anthropic.claude-haiku-4-5-20251001-v1:0").tokens == 4096
    assert minimum_for("anthropic", "anthropic.claude-opus-4-6-v1").tokens == 4096
    assert minimum_for("anthropic", "claude-sonnet-4-5@20250929").tokens == 1024
    assert minimum_for("anthropic", "global.anthropic.claude-opus-5-v1:0").tokens == 512
    # Bedrock lists Claude 3.5 at 1,024 where Anthropic says 2,048 for Haiku 3.5: the lower one.
    assert minimum_for("anthropic", "anthropic.claude-3-5-haiku-20241022-v1:0").tokens == 1024
    assert minimum_for("anthropic", "claude-3-5-haiku-20241022").tokens == 2048

"""The OpenAI Agents SDK, unchanged, on the Responses API over real HTTP — with and without telos.

A small multi-turn, tool-using agent runs with the SDK's own Responses model (``OpenAIProvider`` with
``use_responses=True``, the SDK's default API) against the engine emulator served on 127.0.0.1 (OpenAI
cache rules: automatic caching from 1,024 tokens, ``prompt_cache_key`` partitions). Its ``instructions``
are a function returning a live clock line above a long, fixed policy — the dynamic-instructions
pattern of the SDK's docs. The emulator answers a new user message with a call of the agent's tool,
and the tool's output with text, so every turn is a tool loop of two model calls.

Without ``patch()`` the clock sits at the top of ``instructions`` (rendered right after the short
tools): no request ever reads the cache. With ``patch()`` — nothing else, no ``session()`` — the
agent produces the same outputs and, once telos has learned the clock line as volatile (one miss),
every later call reads the whole stable prefix.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

POLICY = "\n".join(
    f"Rule {n}: when a customer asks about order status, look the order up before answering; "
    "never guess a delivery date and always quote the carrier's own words."
    for n in range(1, 61)
)
QUESTIONS = ["Where is order 42?", "And order 7?", "Can you check order 99 as well?", "What about 13?"]
_ticks = itertools.count()


def _instructions(context: Any, agent: Any) -> str:
    """Dynamic instructions: a clock line that changes on every call, then the fixed policy."""
    return f"It is now 2026-11-23 10:{next(_ticks) % 60:02d}:{next(_ticks) % 60:02d} UTC.\n{POLICY}"


def lookup_order(order_id: int) -> str:
    """Look an order up by its number."""
    return f"order {order_id}: shipped on Monday"


@pytest.fixture
def emulator_url() -> Iterator[tuple[Emulator, str]]:
    emulator = Emulator(clock=ManualClock())
    with serve(emulator, flavour="openai") as url:
        yield emulator, url


def _run_agent(url: str) -> list[str]:
    """Four user turns, each a tool loop; returns the agent's final outputs."""

    async def main() -> list[str]:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{url}/v1", max_retries=0)
        provider = agents.OpenAIProvider(openai_client=client, use_responses=True)
        config = agents.RunConfig(model_provider=provider, tracing_disabled=True)
        agent = agents.Agent(
            name="support", instructions=_instructions, tools=[agents.function_tool(lookup_order)]
        )
        outputs: list[str] = []
        history: list[Any] = []
        try:
            for question in QUESTIONS:
                result = await agents.Runner.run(
                    agent, [*history, {"role": "user", "content": question}], run_config=config
                )
                outputs.append(str(result.final_output))
                history = result.to_input_list()
        finally:
            await client.close()
        return outputs

    return asyncio.run(main())


def _reads(emulator: Emulator) -> list[int]:
    records = [r for r in emulator.requests if r.path.endswith("/responses")]
    assert records and all(r.status == 200 for r in records), [r.error for r in records if r.error]
    return [int((r.usage or {})["input_tokens_details"]["cached_tokens"]) for r in records]


def test_agent_runs_unchanged_and_hits_the_cache_when_patched(
    emulator_url: tuple[Emulator, str], patched_lenient: None
) -> None:
    emulator, url = emulator_url
    telos_wrap.unpatch()
    plain = _run_agent(url)
    plain_reads = _reads(emulator)
    assert len(plain_reads) == 2 * len(QUESTIONS), "each turn is a tool call and an answer"
    assert all(isinstance(body, dict) and "It is now" in body["instructions"] for body in _bodies(emulator))
    assert plain_reads == [0] * len(plain_reads), "a clock at the top of instructions: no reads without telos"

    emulator.reset()
    telos_wrap.patch(engines={f"{url}/v1": "openai"})
    patched = _run_agent(url)
    reads = _reads(emulator)
    assert patched == plain, "the agent's outputs do not change"
    assert len(reads) == len(plain_reads)
    # The first call writes; the second teaches telos the clock line (one more miss); every call after
    # it reads the tools + instructions prefix, and more as the conversation grows.
    assert all(read > 1024 for read in reads[2:]), reads
    assert reads[2:] == sorted(reads[2:]), reads
    bodies = _bodies(emulator)
    assert all("It is now" not in body["instructions"] for body in bodies[2:])
    # The key covers tools + the PIN part of instructions: stable from the request that learned the clock.
    keys = {body["prompt_cache_key"] for body in bodies[1:]}
    assert len(keys) == 1 and keys.pop().startswith("telos-")


def _bodies(emulator: Emulator) -> list[dict[str, Any]]:
    return [r.body for r in emulator.requests if r.path.endswith("/responses")]

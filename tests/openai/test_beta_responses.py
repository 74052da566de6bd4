"""``client.beta.responses``: the beta twin of the Responses API (``POST /responses?beta=true``).

Through the real ``openai`` SDK over real HTTP to the emulator served on 127.0.0.1 (OpenAI flavour),
with the server named as an OpenAI endpoint (``patch(engines=...)``). The beta entry points take
``telos_hint=`` like the others and send one rewritten request per call: a careless harness's clock
in ``instructions`` moves out of the cached prefix, so the second turn reads the first's prefix.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve
from telos_wrap.failopen import failure_counts

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("openai.resources.beta.responses") is None,
    reason="this openai release has no client.beta.responses",
)

INSTRUCTIONS = "You are the support agent of a shop.\n" + "".join(
    f"Rule {i}: answer in plain words and cite the handbook section you used.\n" for i in range(80)
)


@pytest.fixture
def served() -> Iterator[tuple[Emulator, str]]:
    emulator = Emulator(clock=ManualClock())
    with serve(emulator, flavour="openai") as url:
        telos_wrap.patch(strict=True, engines={url + "/v1": "openai"})
        try:
            yield emulator, url + "/v1"
        finally:
            telos_wrap.unpatch()


def _turn(t: int) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "instructions": f"Current time: 10:0{t}:00\n" + INSTRUCTIONS,
        "input": [{"role": "user", "content": f"question {n}"} for n in range(t + 1)],
    }


def test_beta_create_takes_the_hint_and_is_rewritten(served: tuple[Emulator, str]) -> None:
    emulator, base_url = served
    client = openai.OpenAI(api_key="x", base_url=base_url)
    with telos_wrap.session("beta-responses") as session:
        first = client.beta.responses.create(**_turn(0), telos_hint={"ttl": "5m"})
        second = client.beta.responses.create(**_turn(1))
    bodies = [record.body for record in emulator.requests]
    assert [record.path.split("?")[0] for record in emulator.requests] == ["/v1/responses"] * 2
    assert all("telos_hint" not in body for body in bodies)
    # The clock left the cached prefix: instructions are the same bytes on both turns.
    assert bodies[0]["instructions"] == bodies[1]["instructions"]
    assert "Current time" not in bodies[1]["instructions"]
    assert bodies[1]["prompt_cache_key"] == bodies[0]["prompt_cache_key"]
    assert session.stats.requests == 2
    usage = telos_wrap.usage_of(second)
    assert usage is not None and usage.cache_read == second.usage.input_tokens_details.cached_tokens > 0
    assert telos_wrap.usage_of(first) is not None
    assert not failure_counts()


def test_beta_async_count_and_compact_take_the_hint(served: tuple[Emulator, str]) -> None:
    emulator, base_url = served

    async def main() -> None:
        client = openai.AsyncOpenAI(api_key="x", base_url=base_url)
        await client.beta.responses.input_tokens.count(**_turn(0), telos_hint={"ttl": "5m"})  # type: ignore[call-arg]
        await client.beta.responses.create(**_turn(0), telos_hint={"ttl": "5m"})
        await client.beta.responses.compact(**_turn(1), telos_hint={"ttl": "5m"})  # type: ignore[call-arg]
        await client.close()

    asyncio.run(main())
    paths = [record.path.split("?")[0] for record in emulator.requests]
    assert paths == ["/v1/responses/input_tokens", "/v1/responses", "/v1/responses/compact"]
    assert all("telos_hint" not in record.body for record in emulator.requests)
    assert not failure_counts()

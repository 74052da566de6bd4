"""The SDKs' async clients on trio (they run on any event loop anyio supports): telos prepares the
call in an anyio worker thread, since its sessions' async paths are asyncio's — the same bytes as
on asyncio, cached, no fallback. Found by openai's own suite under ``patch()`` (its trio tests
passed, with every call falling back: ``RuntimeError: no running event loop``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, serve
from telos_wrap.failopen import reset_failures
from telos_wrap.sessions import MemoryStore

trio = pytest.importorskip("trio")

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}
SYSTEM = "You are the support agent of an online shop.\n" + "Quote the order record; never guess.\n" * 300


async def _conversation(sdk: str, url: str) -> Any:
    """Three turns of one conversation on an async client: create, create, then a stream."""
    history: list[dict[str, Any]] = []
    async with telos_wrap.session(f"loops-{sdk}", store=MemoryStore()) as s:
        for turn in range(3):
            history.append({"role": "user", "content": f"Where is order {1000 + turn}?"})
            if sdk == "anthropic":
                client: Any = anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0)
                if turn < 2:
                    reply = await client.messages.create(
                        model="claude-sonnet-4-5", max_tokens=16, system=SYSTEM, messages=history
                    )
                    text = reply.content[0].text
                else:
                    async with client.messages.stream(
                        model="claude-sonnet-4-5", max_tokens=16, system=SYSTEM, messages=history
                    ) as stream:
                        text = await stream.get_final_text()
            else:
                client = openai.AsyncOpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0)
                messages = [{"role": "system", "content": SYSTEM}, *history]
                if turn < 2:
                    completion = await client.chat.completions.create(
                        model="gpt-4.1", messages=messages, tools=[LOOKUP]
                    )
                    text = completion.choices[0].message.content or ""
                else:
                    chunks = await client.chat.completions.create(
                        model="gpt-4.1",
                        messages=messages,
                        tools=[LOOKUP],
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                    async with chunks:
                        text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
            await client.close()
            history.append({"role": "assistant", "content": text})
    return s


# openai's async stream leaves two of its generators to the collector on trio, which warns; the
# SDK does so unpatched too (its SSEDecoder.aiter_bytes, AsyncStream._iter_events), with the stream
# read to its end and closed.
@pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object "
    r"(SSEDecoder\.aiter_bytes|AsyncStream\._iter_events):pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_async_clients_on_trio_are_cached_as_on_asyncio(sdk: str) -> None:
    telos_wrap.patch(strict=True)
    reset_failures()
    sent: dict[str, list[Any]] = {}
    try:
        for loop in ("asyncio", "trio"):
            emulator = Emulator()
            with serve(emulator) as url:
                if loop == "trio":
                    s = trio.run(_conversation, sdk, url)
                else:
                    s = asyncio.run(_conversation(sdk, url))
            assert telos_wrap.failure_counts() == {}, loop  # strict: a fallback would have raised
            assert s.stats.requests == 3 and s.stats.fallbacks == 0, loop
            assert s.stats.cache_read > 0, loop
            assert s.stats.responses_with_usage == 3, loop  # the stream's usage too
            sent[loop] = [json.dumps(request.body, sort_keys=True) for request in emulator.requests]
    finally:
        telos_wrap.unpatch()
    assert len(sent["trio"]) == 3
    assert sent["trio"] == sent["asyncio"]
    if sdk == "anthropic":  # the emulator's OpenAI route is a compatible server's: no key to add
        assert all("cache_control" in body for body in sent["trio"])

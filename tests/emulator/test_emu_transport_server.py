"""Flavour routing, the async transport, the real HTTP server, the request log and threads."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import anthropic
import openai
import pytest

from telos_wrap.emulator import Emulator, ManualClock, serve
from tests.sdk_http import AsyncEmulatorTransport, EmulatorTransport, sdk_http

from .emu_helpers import block, text

SYSTEM = [block(2000, "s", mark=True)]
MSGS = [{"role": "user", "content": "hello"}]
CHAT = [{"role": "system", "content": text(2000)}, {"role": "user", "content": "hi"}]


# --- routing -----------------------------------------------------------------------------------


def test_flavour_for_url() -> None:
    emu = Emulator(
        routes={"gpu:8000": "vllm", "http://lb.internal/sglang": "sglang", "lb.internal": "deepseek"}
    )
    assert emu.flavour_for_url("https://api.openai.com/v1/chat/completions") == "openai"
    assert emu.flavour_for_url("https://api.deepseek.com/chat/completions") == "deepseek"
    assert emu.flavour_for_url("http://gpu:8000/v1/chat/completions") == "vllm"
    assert emu.flavour_for_url("http://gpu:9000/v1/chat/completions") == "openai"  # default
    assert emu.flavour_for_url("http://lb.internal/sglang/v1/chat/completions") == "sglang"
    assert emu.flavour_for_url("http://lb.internal/other/v1/chat/completions") == "deepseek"
    emu.default_openai_flavour = "sglang"
    assert emu.flavour_for_url("http://elsewhere/v1/chat/completions") == "sglang"
    with pytest.raises(ValueError, match="unknown flavour"):
        emu.default_openai_flavour = "anthropic"
    with pytest.raises(ValueError, match="unknown flavour"):
        Emulator(routes={"x": "mistral"})


def test_transport_flavour_override_and_request_log() -> None:
    emu = Emulator(clock=ManualClock())
    with openai.OpenAI(
        api_key="x",
        http_client=sdk_http.Client(transport=EmulatorTransport(emu, flavour="vllm")),
        max_retries=0,
    ) as client:
        client.chat.completions.create(model="m", messages=CHAT, extra_body={"cache_salt": "s1"})
        second = client.chat.completions.create(model="m", messages=CHAT, extra_body={"cache_salt": "s1"})
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens == 2000
    log = emu.requests
    assert [(r.path, r.flavour, r.status) for r in log] == [("/v1/chat/completions", "vllm", 200)] * 2
    assert log[1].body["cache_salt"] == "s1"
    assert log[1].usage is not None and log[1].usage["prompt_tokens_details"]["cached_tokens"] == 2000
    assert log[1].response_id == second.id and log[1].model == "m"
    emu.reset()
    assert emu.requests == []


def test_reset_empties_the_caches(claude: anthropic.Anthropic, emu: Emulator) -> None:
    claude.messages.create(model="claude-opus-4-8", max_tokens=8, system=SYSTEM, messages=MSGS)
    emu.reset()
    again = claude.messages.create(model="claude-opus-4-8", max_tokens=8, system=SYSTEM, messages=MSGS)
    assert (again.usage.cache_read_input_tokens, again.usage.cache_creation_input_tokens) == (0, 2000)
    assert len(emu.requests) == 1


def test_unknown_path_is_a_404(emu: Emulator) -> None:
    with sdk_http.Client(transport=EmulatorTransport(emu)) as client:
        r = client.post("https://api.openai.com/v1/embeddings", json={"model": "m", "input": "x"})
        bad = client.post("https://api.anthropic.com/v1/messages", content=b"{not json")
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"
    assert bad.status_code == 400 and bad.json()["type"] == "error"


# --- async transport ---------------------------------------------------------------------------


def test_async_transport_with_both_sdks(emu: Emulator) -> None:
    async def main() -> tuple[Any, Any]:
        transport = AsyncEmulatorTransport(emu)
        async with anthropic.AsyncAnthropic(
            api_key="x", http_client=sdk_http.AsyncClient(transport=transport)
        ) as claude:
            await claude.messages.create(model="claude-opus-4-8", max_tokens=8, system=SYSTEM, messages=MSGS)
            async with claude.messages.stream(
                model="claude-opus-4-8", max_tokens=8, system=SYSTEM, messages=MSGS
            ) as stream:
                message = await stream.get_final_message()
        async with openai.AsyncOpenAI(
            api_key="x",
            base_url="https://api.deepseek.com",
            http_client=sdk_http.AsyncClient(transport=transport),
        ) as ds:
            await ds.chat.completions.create(model="deepseek-chat", messages=CHAT)
            completion = await ds.chat.completions.create(model="deepseek-chat", messages=CHAT)
        return message, completion

    message, completion = asyncio.run(main())
    assert message.usage.cache_read_input_tokens == 2000 and message.usage.input_tokens == 2
    assert (completion.usage.model_extra or {})["prompt_cache_hit_tokens"] == 2001


# --- real HTTP server --------------------------------------------------------------------------


def test_serve_over_real_http(emu: Emulator) -> None:
    with serve(emu, flavour="deepseek") as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        with anthropic.Anthropic(api_key="x", base_url=base_url, max_retries=0) as claude:
            first = claude.messages.create(
                model="claude-opus-4-8", max_tokens=8, system=SYSTEM, messages=MSGS
            )
            with claude.messages.stream(
                model="claude-opus-4-8", max_tokens=64, system=SYSTEM, messages=MSGS
            ) as stream:
                second = stream.get_final_message()
            five_marks: list[Any] = [{"role": "user", "content": [block(1, c, mark=True) for c in "abcde"]}]
            with pytest.raises(anthropic.BadRequestError, match="Found 5"):
                claude.messages.create(model="claude-opus-4-8", max_tokens=8, messages=five_marks)
        with openai.OpenAI(api_key="x", base_url=base_url + "/v1", max_retries=0) as ds:
            ds.chat.completions.create(model="deepseek-chat", messages=CHAT)
            hit = ds.chat.completions.create(model="deepseek-chat", messages=CHAT)
        with openai.OpenAI(api_key="x", base_url=base_url + "/vllm/v1", max_retries=0) as vllm:
            chunks = list(
                vllm.chat.completions.create(
                    model="m", messages=CHAT, stream=True, stream_options={"include_usage": True}
                )
            )
    assert (first.usage.cache_creation_input_tokens, second.usage.cache_read_input_tokens) == (2000, 2000)
    assert (
        second.usage.cache_creation is not None and second.usage.cache_creation.ephemeral_5m_input_tokens == 0
    )
    assert (hit.usage.model_extra or {})["prompt_cache_hit_tokens"] == 2001
    assert (
        chunks[-1].usage.prompt_tokens == 2001 and chunks[-1].usage.prompt_tokens_details.cached_tokens == 0
    )
    assert [r.flavour for r in emu.requests] == ["anthropic"] * 3 + ["deepseek"] * 2 + ["vllm"]


# --- threads -----------------------------------------------------------------------------------


def test_concurrent_requests_from_threads() -> None:
    emu = Emulator(clock=ManualClock(), default_openai_flavour="sglang")
    results: dict[int, list[int]] = {}

    def worker(n: int) -> None:
        with openai.OpenAI(
            api_key="x",
            base_url="http://engine/v1",
            http_client=sdk_http.Client(transport=EmulatorTransport(emu)),
        ) as client:
            msgs = [
                {"role": "system", "content": text(500, chr(ord("a") + n))},
                {"role": "user", "content": "q"},
            ]
            out = []
            for _ in range(10):
                r = client.chat.completions.create(model="m", messages=msgs)
                assert r.usage is not None and r.usage.prompt_tokens_details is not None
                out.append(r.usage.prompt_tokens_details.cached_tokens or 0)
            results[n] = out

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {n: [0] + [500] * 9 for n in range(8)}
    assert len(emu.requests) == 80
    assert len({r.response_id for r in emu.requests}) == 80


def test_serve_on_a_fixed_port(emu: Emulator) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with serve(emu, port=port) as base_url, sdk_http.Client() as client:
        assert base_url == f"http://127.0.0.1:{port}"
        r = client.post(base_url + "/v1/messages/count_tokens", json={"model": "m", "messages": MSGS})
        missing = client.get(base_url + "/v1/models")
    assert r.status_code == 200 and r.json() == {"input_tokens": 2}
    assert missing.status_code == 404

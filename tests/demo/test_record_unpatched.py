"""``telos_wrap.record()`` on its own, without ``patch()`` (issue 16: measure before adopting).

Over real HTTP: the built-in emulator's ``serve()`` on 127.0.0.1 and the real SDK clients with
their default HTTP stack. Every call is made twice — once with no recording at all, once inside
``record()`` — and the bodies the server received are compared byte for byte: recording observes
requests exactly as the SDK sends them and rewrites nothing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve, text_for_tokens
from telos_wrap.patch import TARGETS, _resolve

SYSTEM = "You answer in one word.\n" + text_for_tokens(1500)
TURNS = [{"role": "user", "content": "Hello?"}]


@pytest.fixture
def server() -> Iterator[tuple[Emulator, str]]:
    emu = Emulator(clock=ManualClock())
    with serve(emu) as url:
        yield emu, url


def _wrapped_now() -> list[str]:
    return [name for name, wrapped in telos_wrap.coverage().items() if wrapped]


def _calls(url: str) -> None:
    """Both SDKs, sync / async / stream: eight requests, all fully consumed."""
    claude = anthropic.Anthropic(api_key="sk-ant-test", base_url=url, max_retries=0)
    gpt = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    kwargs_a: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "system": SYSTEM,
        "messages": TURNS,
    }
    kwargs_o: dict[str, Any] = {
        "model": "gpt-4o",
        "max_tokens": 8,
        "messages": [{"role": "system", "content": SYSTEM}, *TURNS],
    }
    claude.messages.create(**kwargs_a)
    with claude.messages.stream(**kwargs_a) as stream:
        stream.get_final_message()
    gpt.chat.completions.create(**kwargs_o)
    for _ in gpt.chat.completions.create(**kwargs_o, stream=True, stream_options={"include_usage": True}):
        pass

    async def run_async() -> None:
        aclaude = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=url, max_retries=0)
        agpt = openai.AsyncOpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
        await aclaude.messages.create(**kwargs_a)
        async with aclaude.messages.stream(**kwargs_a) as astream:
            await astream.get_final_message()
        await agpt.chat.completions.create(**kwargs_o)
        chunks = await agpt.chat.completions.create(
            **kwargs_o, stream=True, stream_options={"include_usage": True}
        )
        async for _ in chunks:
            pass
        await aclaude.close()
        await agpt.close()

    asyncio.run(run_async())
    claude.close()
    gpt.close()


def _bodies(emu: Emulator) -> list[str]:
    return [json.dumps(r.body) for r in emu.requests]


def test_record_without_patch_observes_every_call_and_changes_nothing(
    tmp_path: Path, server: tuple[Emulator, str]
) -> None:
    emu, url = server
    assert not telos_wrap.is_patched()
    _calls(url)  # no telos at all: what the SDK sends
    untouched = _bodies(emu)
    emu.reset()

    path = tmp_path / "calls.jsonl"
    with telos_wrap.record(path):
        assert not telos_wrap.is_patched(), "record() observes; it does not patch"
        _calls(url)
    sent = _bodies(emu)

    assert len(untouched) == 8
    assert sent == untouched, "recording changed what went out"
    assert "cache_control" not in "".join(sent)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8, "one line per request, streams and async calls included"
    # Line by line (the calls are sequential): the body the server received, with the usage it reported.
    for row, received in zip(rows, emu.requests, strict=True):
        assert json.dumps(row["kwargs"]) == json.dumps(received.body)
        usage = received.usage or {}
        details = usage.get("prompt_tokens_details") or {}
        assert row["usage"]["cache_read"] == usage.get(
            "cache_read_input_tokens", details.get("cached_tokens")
        )
        assert row["api"] == ("anthropic" if received.flavour == "anthropic" else "openai")
    assert sum(row["usage"]["cache_read"] for row in rows) > 0, "OpenAI's automatic caching read something"
    # The wrappers were there only while recording.
    assert _wrapped_now() == []
    assert not telos_wrap.is_patched()


def test_patch_and_unpatch_while_recording(tmp_path: Path, server: tuple[Emulator, str]) -> None:
    emu, url = server
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=url, max_retries=0)

    def call() -> None:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=8, system=SYSTEM, messages=TURNS)

    path = tmp_path / "calls.jsonl"
    # Targets of another SDK line (LegacyAPIResponse in anthropic 0.x) are absent, so never wrapped;
    # LiteLLM's completion and DSPy's client rewrite and are never observers.
    observe_only = {f"{t.module}:{t.qualname}" for t in TARGETS if t.observer and _resolve(t)}
    try:
        with telos_wrap.record(path):
            assert set(_wrapped_now()) == observe_only  # entry points stay the SDK's own
            call()
            telos_wrap.patch(strict=True)
            call()  # rewritten by telos, recorded as the caller sent it
            telos_wrap.unpatch()
            assert set(_wrapped_now()) == observe_only, "unpatch() leaves the recording observing"
            call()
            telos_wrap.patch(strict=True)
        assert telos_wrap.is_patched(), "ending the recording does not unpatch a patch() made inside it"
        # Every target in a module imported so far; the rest are patched when they are imported.
        imported = {f"{t.module}:{t.qualname}" for t in TARGETS if t.module in sys.modules and _resolve(t)}
        assert set(_wrapped_now()) == imported
    finally:
        telos_wrap.unpatch()
    assert _wrapped_now() == []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    assert all(r["kwargs"]["system"] == SYSTEM for r in rows)
    sent = [r.body for r in emu.requests]
    assert isinstance(sent[1]["system"], list), "the patched call was rewritten on the wire"
    assert sent[0]["system"] == sent[2]["system"] == SYSTEM


def test_nested_recordings_share_the_observer_wrappers(tmp_path: Path, server: tuple[Emulator, str]) -> None:
    _, url = server
    client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Hi"}]
    with telos_wrap.record(tmp_path / "outer.jsonl"):
        with telos_wrap.record(tmp_path / "inner.jsonl"):
            client.chat.completions.create(model="gpt-4o", max_tokens=4, messages=messages)
        assert _wrapped_now() != [], "the outer recording is still active"
        client.chat.completions.create(model="gpt-4o", max_tokens=4, messages=messages)
    assert _wrapped_now() == []
    assert len((tmp_path / "inner.jsonl").read_text().splitlines()) == 1
    assert len((tmp_path / "outer.jsonl").read_text().splitlines()) == 2
    client.close()

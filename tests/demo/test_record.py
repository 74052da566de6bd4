"""``telos_wrap.record()``: the requests as the caller sent them, with usage, redacted, as a trace."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.patch.observers import OBSERVERS
from telos_wrap.replay.recording import sized_digest
from telos_wrap.replay.runner import create_kwargs
from telos_wrap.replay.traces import TraceRequest, load_trace

from .conftest import SECRET_KEY


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def assert_no_secrets(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert SECRET_KEY not in text and "S3cr3tKeyMaterial" not in text and "OpenAIsecret" not in text
    lowered = text.lower()
    for header in ("x-api-key", "authorization", "bearer", "x-telos-hint", "anthropic-version"):
        assert header not in lowered


@pytest.mark.usefixtures("patched")
def test_records_bodies_as_sent_with_usage(
    tmp_path: Path, claude: anthropic.Anthropic, demo_requests: list[TraceRequest]
) -> None:
    path = tmp_path / "run.jsonl"
    reports = []
    with telos_wrap.record(path), telos_wrap.session("ticket-7"):
        for request in demo_requests[:4]:
            message = claude.messages.create(**create_kwargs("anthropic", request.kwargs))
            reports.append(telos_wrap.usage_of(message))
    assert OBSERVERS == [], "the recorder unregisters itself"
    recorded = rows(path)
    assert [(r["session"], r["turn"], r["api"]) for r in recorded] == [
        ("ticket-7", i, "anthropic") for i in range(4)
    ]
    for row, request, report in zip(recorded, demo_requests, reports, strict=False):
        # The body the caller sent (extra_body merged back), not telos' rewrite: replayable later.
        assert row["kwargs"] == request.kwargs
        assert "cache_control" not in json.dumps(row["kwargs"])
        assert row["usage"]["cache_read"] == report.cache_read
        assert row["usage"]["cache_write"] == report.cache_write
        assert row["usage"]["raw_input"] == report.raw_input
        assert row["usage"]["engine"] == "anthropic"
    assert recorded[1]["usage"]["cache_read"] > 0, "telos' second request read the first one's prefix"
    assert_no_secrets(path)
    # The file is a trace: telos_wrap.replay.traces reads it back.
    assert [r.kwargs for r in load_trace(path)] == [r.kwargs for r in demo_requests[:4]]


@pytest.mark.usefixtures("patched")
def test_api_keys_inside_bodies_are_redacted(tmp_path: Path, claude: anthropic.Anthropic) -> None:
    path = tmp_path / "run.jsonl"
    with telos_wrap.record(path):
        claude.messages.create(
            model="claude-opus-5",
            max_tokens=16,
            messages=[{"role": "user", "content": f"my key is {SECRET_KEY}, keep it safe"}],
        )
    (row,) = rows(path)
    assert row["kwargs"]["messages"][0]["content"] == "my key is [redacted], keep it safe"
    assert_no_secrets(path)


@pytest.mark.usefixtures("patched")
def test_hash_mode_hashes_every_text(
    tmp_path: Path, claude: anthropic.Anthropic, demo_requests: list[TraceRequest]
) -> None:
    path = tmp_path / "hashed.jsonl"
    with telos_wrap.record(path, hash_content=True):
        for request in demo_requests[:2]:
            claude.messages.create(**create_kwargs("anthropic", request.kwargs))
    first, second = rows(path)
    original = demo_requests[0].kwargs
    assert first["kwargs"]["system"] == sized_digest(original["system"])
    assert len(first["kwargs"]["system"].encode()) == len(original["system"].encode())
    assert first["kwargs"]["model"] == original["model"]  # structure is kept
    assert first["kwargs"]["messages"][0]["role"] == "user"
    assert first["kwargs"]["messages"][0]["content"] == sized_digest(original["messages"][0]["content"])
    tool = first["kwargs"]["tools"][0]
    assert tool["name"] == original["tools"][0]["name"]
    assert tool["description"] == sized_digest(original["tools"][0]["description"])
    assert first["hashed"] == "sized-sha256"
    # Equal texts stay equal, so cache behaviour can still be studied.
    assert second["kwargs"]["messages"][0] == first["kwargs"]["messages"][0]
    text = path.read_text(encoding="utf-8")
    assert "Swiss Airlines" not in text
    assert_no_secrets(path)
    # Hashed recordings replay too (the CLI reads them as traces).
    assert len(list(load_trace(path))) == 2


@pytest.mark.usefixtures("patched")
def test_streams_and_openai_calls_are_recorded(tmp_path: Path, claude: anthropic.Anthropic, gpt: Any) -> None:
    path = tmp_path / "mixed.jsonl"
    long_text = "You are a careful assistant. " * 400
    with telos_wrap.record(path):
        with telos_wrap.session("stream"):
            stream = claude.messages.create(
                model="claude-opus-5",
                max_tokens=16,
                system=long_text,
                messages=[{"role": "user", "content": "hello"}],
                stream=True,
            )
            for _ in stream:
                pass
            with claude.messages.stream(
                model="claude-opus-5",
                max_tokens=16,
                system=long_text,
                messages=[{"role": "user", "content": "hello again"}],
            ) as helper:
                helper.get_final_message()
        with telos_wrap.session("chat"):
            gpt.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "system", "content": long_text}, {"role": "user", "content": "hi"}],
            )
    recorded = {(r["session"], r["turn"]): r for r in rows(path)}
    assert set(recorded) == {("stream", 0), ("stream", 1), ("chat", 0)}
    assert recorded[("stream", 0)]["kwargs"]["stream"] is True
    assert recorded[("stream", 0)]["usage"]["cache_write"] > 0
    assert recorded[("stream", 1)]["usage"]["cache_read"] > 0
    assert recorded[("chat", 0)]["api"] == "openai"
    assert recorded[("chat", 0)]["usage"]["engine"] == "openai"
    assert_no_secrets(path)


@pytest.mark.usefixtures("patched")
def test_async_calls_are_recorded(tmp_path: Path, async_claude: Any) -> None:
    path = tmp_path / "async.jsonl"

    async def run() -> None:
        async with telos_wrap.record(path), telos_wrap.session("a"):
            for question in ("one", "two"):
                await async_claude.messages.create(
                    model="claude-opus-5", max_tokens=8, messages=[{"role": "user", "content": question}]
                )
            stream = await async_claude.messages.create(
                model="claude-opus-5",
                max_tokens=8,
                messages=[{"role": "user", "content": "three"}],
                stream=True,
            )
            async for _ in stream:
                pass
        await async_claude.close()

    asyncio.run(run())
    recorded = rows(path)
    assert [r["turn"] for r in recorded] == [0, 1, 2]
    assert all(r["usage"] is not None for r in recorded)


@pytest.mark.usefixtures("patched_lenient")
def test_refused_requests_are_written_without_usage(tmp_path: Path, claude: anthropic.Anthropic) -> None:
    path = tmp_path / "refused.jsonl"
    marker = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"block {i}", "cache_control": marker} for i in range(5)]
    with telos_wrap.record(path), pytest.raises(anthropic.BadRequestError):
        claude.messages.create(
            model="claude-opus-5",
            max_tokens=8,
            messages=[{"role": "user", "content": blocks}],
            telos_hint={"disable": True},
        )
    (row,) = rows(path)
    assert row["usage"] is None
    assert row["kwargs"]["messages"][0]["content"] == blocks


PROBE = """
import json, sys
from importlib.util import find_spec
import telos_wrap
from telos_wrap.replay import recording
room = ["telos_wrap.replay.runner", "telos_wrap.replay.comparison", "telos_wrap.emulator"]
room += ["anthropic", "openai"]
print(json.dumps({
    "record": telos_wrap.record is recording.record,
    "loaded": [name for name in room if name in sys.modules],
    "old_paths": [name for name in ("telos_wrap.record", "telos_wrap.traces") if find_spec(name)],
}))
"""


def test_import_telos_wrap_loads_the_recorder_and_nothing_else_of_the_replay_room() -> None:
    """``telos_wrap.record`` is the replay room's ``record()``; the room's runner, the emulator and the
    SDKs stay unloaded (a fresh interpreter: this one has them all); the old paths are gone (no alias)."""
    command = [sys.executable, "-c", PROBE]
    probe = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(probe.stdout) == {"record": True, "loaded": [], "old_paths": []}

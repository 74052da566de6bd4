"""OpenAI Responses traffic through ``record()``, ``telos-wrap replay`` and the cache-budget replay.

A Responses-based agent must be measurable the way a chat agent is (issue 16, "measure before
adopting"; the pytest plugin of docs/testing.md): each request is recorded as ``"api": "responses"``
with its ``instructions`` / ``input`` as the application sent them, and replayed with
``client.responses.create``. Over real HTTP: the emulator served on 127.0.0.1, the real ``openai``
SDK, the server named as an OpenAI endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock, serve, text_for_tokens
from telos_wrap.testing import RequestCapture, replay_requests

from .test_replay_cli import run_json

INSTRUCTIONS = "You are the support agent of a shop; cite the handbook.\n" + text_for_tokens(1800)
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]


@pytest.fixture
def base_url() -> Iterator[str]:
    with serve(Emulator(clock=ManualClock()), flavour="openai") as url:
        yield url + "/v1"


def _agent(base_url: str, turns: int = 4) -> None:
    """A careless Responses agent: a live clock (untagged) at the top of its instructions."""
    client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
    items: list[dict[str, Any]] = []
    for turn in range(turns):
        items.append({"role": "user", "content": f"question {turn}"})
        reply = client.responses.create(
            model="gpt-5",
            instructions=f"Now: 10:{turn:02d}:17\n{INSTRUCTIONS}",
            input=list(items),
            tools=TOOLS,
        )
        items.append({"role": "assistant", "content": reply.output_text or "ok"})
    client.close()


def test_record_writes_responses_lines_that_replay(base_url: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with telos_wrap.record(path):  # without patch(): observe only
        _agent(base_url)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["api"] for line in lines] == ["responses"] * 4
    assert lines[1]["kwargs"]["instructions"].startswith("Now: 10:01:17\n"), "as the app sent it"
    assert [item["content"] for item in lines[1]["kwargs"]["input"]][:1] == ["question 0"]

    data = run_json("replay", str(path), "--engine", "openai", "--json")
    runs = data["variants"]["recorded"]
    assert runs["as sent"]["cache_read"] == 0, "the clock at the top of instructions: nothing is read"
    assert runs["telos_wrap"]["hit_ratio"] > 0.5
    assert all(run["errors"] == 0 and run["telos_fallbacks"] == 0 for run in runs.values())


def test_cache_budget_replays_responses_and_explains_the_break(base_url: str) -> None:
    telos_wrap.patch()
    try:
        with RequestCapture() as capture:
            _agent(base_url)
    finally:
        telos_wrap.unpatch()
    assert [request.api for request in capture.requests] == ["responses"] * 4

    report = replay_requests(capture.requests, learn_volatility=False)
    assert not report.skipped and report.conversations == 1
    assert report.break_count == 3
    assert "system[0] line 1 changed: 'Now: 10:00:17' → 'Now: 10:01:17'" in report.explain()

    learned = replay_requests(capture.requests)
    assert learned.break_count == 0 and learned.hit_ratio > 0.5


def test_server_held_responses_are_listed_not_replayed(base_url: str) -> None:
    telos_wrap.patch()
    try:
        with RequestCapture() as capture:
            client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
            first = client.responses.create(model="gpt-5", instructions=INSTRUCTIONS, input="hello")
            client.responses.create(model="gpt-5", input="and then?", previous_response_id=first.id)
            client.close()
    finally:
        telos_wrap.unpatch()
    report = replay_requests(capture.requests)
    assert report.conversations == 1
    assert len(report.skipped) == 1 and "previous_response_id" in report.skipped[0]

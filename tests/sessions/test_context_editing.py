"""Issue 47, the rest: a policy fold is its own outcome (``context_folded``), the caller's own
``context_management`` coexists with telos (kept as sent; telos knows what the server clears and
marks the prefix before it), the emulator's ``clear_thinking_20251015``, and thinking in telos' own
policy. Sessions run on the emulator over the real SDK."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from tests.sdk_http import sdk_http

from .convo import RecordingTransport

TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]
RESULT_CHARS = 40_000  # ~10,000 tokens a tool result


@pytest.fixture
def emulated() -> Iterator[RecordingTransport]:
    yield RecordingTransport(Emulator())


def _anthropic(transport: RecordingTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _result(turn: int) -> str:
    return f"file {turn}\n" + f"line {turn} of the file, unchanged\n" * (RESULT_CHARS // 30)


def _tool_turn(history: list[dict[str, Any]], turn: int, thinking: bool = False) -> None:
    call = f"toolu_{turn:04d}"
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": f"plan {turn} " * 400, "signature": f"sig{turn}"})
    content.append({"type": "tool_use", "id": call, "name": "read_file", "input": {"n": turn}})
    history.append({"role": "assistant", "content": content})
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(turn)}]}
    )


def _total(u: Any) -> int:
    return int(u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0))


# -- a policy fold is its own outcome ----------------------------------------------------------------------


def test_a_policy_fold_is_reported_as_context_folded_not_as_a_rewritten_history(
    patched: None, emulated: RecordingTransport, caplog: pytest.LogCaptureFixture
) -> None:
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    fold_requests = []
    with (
        caplog.at_level(logging.DEBUG, logger="telos_wrap"),
        telos_wrap.session("fold-reason", context={"trigger": 60_000, "keep": 2}) as s,
    ):
        for turn in range(16):
            before = len(s.state.clear_folds)
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
            )
            if len(s.state.clear_folds) > before:
                fold_requests.append(turn)
            _tool_turn(history, turn)
        breaks = s.cache_breaks
        stats = s.stats
        explained = s.explain(fold_requests[0]) if fold_requests else ""
    assert len(fold_requests) >= 2
    assert [b.request for b in breaks] == fold_requests
    assert {b.reason for b in breaks} == {"context_folded"}  # a structured value, not a sentence
    assert stats.context_folds == len(fold_requests) and stats.cache_breaks == len(fold_requests)
    assert "CONTEXT FOLD (context_folded) at messages[" in explained
    assert "CACHE BREAK" not in explained
    # Planned: logged at INFO, never as a WARNING about a break.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "cache break" in r.getMessage()]


def test_a_change_of_the_callers_before_the_fold_point_stays_the_callers_break(
    patched: None, emulated: RecordingTransport
) -> None:
    client = _anthropic(emulated)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    with telos_wrap.session("fold-and-edit", context={"trigger": 60_000, "keep": 2}) as s:
        for turn in range(12):
            before = len(s.state.clear_folds)
            if turn == 10:  # a request on which the policy folds (at 60k: requests 6, 10, 14)
                history[0] = {"role": "user", "content": "Read every file, then stop."}
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system="You are a coder. " * 200,
                tools=TOOLS,
                messages=history,
            )
            folded = len(s.state.clear_folds) > before
            if turn == 10:
                brk = s.cache_breaks[-1]
                assert folded and brk.request == 10 and brk.reason == "history_rewritten", (brk, folded)
                assert brk.message == 0
            _tool_turn(history, turn)

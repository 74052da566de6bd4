"""Replay a real tau-bench session (../shared/traces/tau-bench.jsonl.xz) through the OpenAI engine.

The harness is made as careless as real ones get: every request's JSON keys and tool list are shuffled,
and the date line in the system prompt changes every turn. Through telos the stable prefix (tools +
system) is byte-identical on every turn, each request's history is a byte prefix of the next one's,
``prompt_cache_key`` never changes, and the emulated OpenAI cache hits from the second turn on —
where the same session sent as-is hits nothing.
"""

from __future__ import annotations

import itertools
import json
import lzma
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.ir.canon import canonical_json

from .conftest import ENDPOINTS, Endpoint

TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "tau-bench.jsonl.xz"
DATE_LINE = re.compile(r"The current time is [^\n]*")
DROP_PATTERN = r"^The current time is [^\n]*"

pytestmark = [
    pytest.mark.usefixtures("oai_patched"),
    pytest.mark.skipif(not TRACE.exists(), reason="shared traces not available"),
]


def _session(min_turns: int = 8) -> list[dict[str, Any]]:
    """The kwargs of every request of the first session with at least ``min_turns`` requests."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    with lzma.open(TRACE, "rt") as handle:
        for line in handle:
            record = json.loads(line)
            sessions.setdefault(record["session"], []).append(record["kwargs"])
    turns: list[dict[str, Any]] = next(t for t in sessions.values() if len(t) >= min_turns)
    return turns


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON with every object's keys in a random order (arrays keep theirs)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _careless(kwargs: dict[str, Any], turn: int) -> dict[str, Any]:
    rng = random.Random(turn)
    messy: dict[str, Any] = _shuffled(kwargs, rng)
    rng.shuffle(messy["tools"])
    system = messy["messages"][0]
    system["content"] = DATE_LINE.sub(
        f"The current time is 2024-05-15 15:{turn:02d}:{turn * 7 % 60:02d} EST.", system["content"]
    )
    return messy


def _replay(
    emu: Emulator, client: openai.OpenAI, model: str, *, hints: dict[str, Any] | None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
    with telos_wrap.session("tau-bench-replay", hints=hints):
        for turn, kwargs in enumerate(_session()):
            call = {**_careless(kwargs, turn), "model": model}
            if hints is None:
                call["telos_hint"] = {"disable": True}
            client.chat.completions.create(**call)
            record = emu.requests[-1]
            assert record.status == 200, record.error
            assert record.usage is not None
            sent.append((record.body, record.usage))
    return sent


def _prefix_bytes(body: dict[str, Any]) -> str:
    system = [m for m in body["messages"] if m["role"] in ("system", "developer")][:1]
    return canonical_json({"tools": body["tools"], "system": system})


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-5.6"])
def test_replay_keeps_the_prefix_and_the_key(
    model: str, emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai"])
    sent = _replay(emu, client, model, hints={"drop_patterns": [DROP_PATTERN]})
    bodies = [body for body, _ in sent]
    assert len({_prefix_bytes(body) for body in bodies}) == 1, "stable prefix changed between turns"
    assert len({body["prompt_cache_key"] for body in bodies}) == 1
    assert all("The current time is" not in json.dumps(body["messages"][0]) for body in bodies)
    for body in bodies:  # the changing date line went to the tail: the latest turn's last part, or
        # a system message after it when its content is a string (never turned into parts)
        tail = body["messages"][-1]
        assert tail["role"] in ("user", "tool", "system")
        text = tail["content"] if isinstance(tail["content"], str) else tail["content"][-1]["text"]
        assert "The current time is" in text
    reads = [usage["prompt_tokens_details"]["cached_tokens"] for _, usage in sent]
    assert reads[0] == 0 and all(read > 0 for read in reads[1:])
    if model == "gpt-5.6":
        assert all(body["prompt_cache_options"] == {"mode": "implicit"} for body in bodies)
        for body in bodies:
            marked = [
                message["role"]
                for message in body["messages"]
                for part in (message["content"] if isinstance(message.get("content"), list) else [])
                if "prompt_cache_breakpoint" in part
            ]
            assert 1 <= len(marked) <= 3 and "assistant" not in marked


def test_the_same_careless_session_without_telos_misses(
    emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai"])
    sent = _replay(emu, client, "gpt-4o", hints=None)
    assert all("prompt_cache_key" not in body for body, _ in sent)
    assert sum(usage["prompt_tokens_details"]["cached_tokens"] for _, usage in sent) == 0


def test_history_is_a_byte_prefix_of_the_next_turn(
    emu: Emulator, make_client: Callable[[Endpoint], openai.OpenAI]
) -> None:
    client = make_client(ENDPOINTS["openai"])
    bodies = [body for body, _ in _replay(emu, client, "gpt-4o", hints={"drop_patterns": [DROP_PATTERN]})]
    for before, after in itertools.pairwise(bodies):
        history = before["messages"][:-1]
        assert after["messages"][: len(history)] == history

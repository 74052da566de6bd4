"""The fidelity property over generated prompts: structured units (JSON blocks, tables, code fences,
XML-like elements, sections under headings, lists) with a live value in a random line of a random
unit, or none, sent turn after turn through the session step ``run_turn``.

Every request must be faithful (``check.check``): caller lines in place or moved whole with their
heading, JSON blocks parse, stable lines never move on their own. Without a live value nothing moves.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telos_wrap.emulator import text_for_tokens
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.turns.turn import run_turn

from .check import check, sent_parts

LIVE = "\x01"  # where the live value goes in a generated unit
WORDS = st.sampled_from(
    ["status", "owner", "region", "queue", "window", "limit", "retries", "contact", "plan", "tier"]
)
PHRASE = st.lists(WORDS, min_size=2, max_size=5, unique=True).map(lambda w: " ".join(w).capitalize())


@st.composite
def units(draw: st.DrawFn) -> list[str]:
    """One unit as lines; at most one line holds ``LIVE``."""
    kind = draw(st.sampled_from(["prose", "section", "list", "json", "table", "fence", "xml", "yaml"]))
    n = draw(st.integers(2, 4))
    keys = draw(st.lists(WORDS, min_size=n, max_size=n, unique=True))
    live = draw(st.integers(-1, n - 1))
    values = [LIVE if i == live else f"v{i}" for i in range(n)]
    if kind == "prose":
        return [f"{draw(PHRASE)} {values[0]}."]
    if kind == "section":
        return [f"{draw(PHRASE)}:", *(f"  {k}: {v}" for k, v in zip(keys, values, strict=True))]
    if kind == "list":
        return [f"{draw(PHRASE)}:", *(f"- {k} at {v}" for k, v in zip(keys, values, strict=True))]
    if kind == "json":
        return [f"{draw(PHRASE)}:", *json.dumps(dict(zip(keys, values, strict=True)), indent=2).split("\n")]
    if kind == "table":
        return [
            "| name | value |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in zip(keys, values, strict=True)),
        ]
    if kind == "fence":
        return ["```ini", *(f"{k} = {v}" for k, v in zip(keys, values, strict=True)), "```"]
    if kind == "xml":
        return ["<settings>", *(f"<{k}>{v}</{k}>" for k, v in zip(keys, values, strict=True)), "</settings>"]
    return [f"{keys[0]}:", *(f"  {k}: {v}" for k, v in zip(keys[1:], values[1:], strict=True))]


PROMPTS = st.lists(units(), min_size=2, max_size=5)


def _render(prompt: list[list[str]], turn: int, live: bool) -> str:
    lines: list[str] = []
    seen = False
    for unit in prompt:
        for line in unit:
            if LIVE in line and not seen and live:
                seen = True
                line = line.replace(LIVE, f"10:{3 + 7 * turn:02d}:{(11 * turn) % 60:02d}")
            else:
                line = line.replace(LIVE, "v")
            lines.append(line)
    return "\n".join(lines) + "\n\nPolicy:\n" + text_for_tokens(1200)


def _body(system: str, turn: int) -> dict[str, Any]:
    history: list[dict[str, Any]] = []
    for t in range(turn + 1):
        history.append({"role": "user", "content": f"Question {t}?"})
        if t < turn:
            history.append({"role": "assistant", "content": f"Answer {t}."})
    return {"model": "claude-opus-4-8", "max_tokens": 8, "system": system, "messages": history}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=PROMPTS, live=st.booleans())
def test_generated_prompts_are_sent_faithfully(prompt: list[list[str]], live: bool) -> None:
    systems = [_render(prompt, turn, live) for turn in range(4)]
    stable = set(systems[0].split("\n")).intersection(*(s.split("\n") for s in systems[1:]))
    state = SessionState(session_id="generated")
    for turn, system in enumerate(systems):
        body = _body(system, turn)
        options = PrepareOptions(engine="anthropic", session_id="generated")
        result = run_turn(state, "anthropic", body, options, pins={}, now=float(turn))
        state = result.state
        sent, moved = sent_parts("anthropic", body, result.prepared.body)
        report = check(system, sent, moved, stable=stable)
        assert not report.problems, (turn, report.problems, system.split("\n\nPolicy")[0])
        if not live:
            assert sent == system and moved == "", "nothing moves without a live value"

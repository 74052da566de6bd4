"""Promise L1 (docs/security.md): no input stalls a call — telos on pathological inputs adds less
than the SDK's own time on the same request, and past ``patch(time_budget=)`` the SDK's request goes
out untouched (recorded, counted).

Timed over real HTTP to the emulator, both SDKs' requests built by the real SDK; each figure is the
best of a few runs of a two-request conversation, so a loaded machine slows both sides alike.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

import telos_wrap
from telos_wrap.failopen import failure_counts, reset_failures
from tests.over_http import Wire

# Each test bounds telos' time against the SDK's on the wall clock: run alone (CONTRIBUTING.md).
pytestmark = pytest.mark.timed

MODEL = "claude-opus-4-8"


def _schedule(_: int) -> str:
    """5,000 short lines that each hold a time of day (a log excerpt, a schedule)."""
    return "Schedule:\n" + "\n".join(
        f"{(i // 60) % 24:02d}:{i % 60:02d} job {i} ran for {i % 7} s" for i in range(5000)
    )


def _run(_: int) -> str:
    """A 1 MB run of one character (the SDKs' own tests send ``"s" * 600_000``)."""
    return "s" * 1_000_000


def _nested(_: int) -> str:
    return "[" * 50_000 + "1" * 10 + "]" * 50_000


def _digits(_: int) -> str:
    return ("1" * 999 + "<") * 1000


def _envelopes(_: int) -> str:
    return "<system-reminder>" * 20_000


INPUTS: dict[str, Callable[[int], str]] = {
    "1MB-run": _run,
    "5000-timestamped-lines": _schedule,
    "deep-brackets": _nested,
    "digit-runs": _digits,
    "unclosed-envelopes": _envelopes,
}


def _conversation(wire: Wire, system: Callable[[int], str], *, patched: bool) -> float:
    client = wire.anthropic()
    try:
        if patched:
            telos_wrap.patch()
        started = time.perf_counter()
        with telos_wrap.session():
            for turn in range(2):
                client.messages.create(
                    model=MODEL,
                    max_tokens=8,
                    system=system(turn),
                    messages=[{"role": "user", "content": f"question {turn}"}],
                )
        return time.perf_counter() - started
    finally:
        if patched:
            telos_wrap.unpatch()
        client.close()


@pytest.mark.parametrize("name", list(INPUTS))
def test_telos_adds_less_than_the_sdks_own_time(bare_wire: Wire, name: str) -> None:
    system = INPUTS[name]
    reset_failures()
    sdk, patched = [], []
    for _ in range(3):
        sdk.append(_conversation(bare_wire, system, patched=False))
        patched.append(_conversation(bare_wire, system, patched=True))
    own, added = min(sdk), min(patched) - min(sdk)
    assert failure_counts() == {}, "telos gave up (time budget) instead of being fast"
    assert added < own, f"{name}: telos added {added:.3f} s to the SDK's own {own:.3f} s"


def test_past_its_time_budget_the_sdks_request_goes_out(
    bare_wire: Wire, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget too small for any request: every request goes out exactly as the SDK built it,
    counted as stage 'budget' and logged; the call itself succeeds."""
    from telos_wrap import pipeline

    slow = pipeline.prepare

    def busy(*args: Any, **kwargs: Any) -> Any:
        # The budget counts the preparing thread's CPU time (a sleep would not spend it).
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        return slow(*args, **kwargs)

    monkeypatch.setattr("telos_wrap.sessions.turns.turn.prepare", busy)
    client = bare_wire.anthropic()
    telos_wrap.patch(time_budget=0.01)
    reset_failures()
    try:
        with caplog.at_level(logging.WARNING, logger="telos_wrap"), telos_wrap.session():
            reply = client.messages.create(
                model=MODEL,
                max_tokens=8,
                system=_schedule(0),
                messages=[{"role": "user", "content": "question"}],
            )
    finally:
        telos_wrap.unpatch()
        client.close()
    assert reply.content
    sent = json.loads(bare_wire.bodies[-1])
    assert sent["system"] == _schedule(0), "the SDK's own request went out"
    assert failure_counts() == {"budget": 1}
    assert "budget" in caplog.text


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1s", True])
def test_a_bad_time_budget_is_refused_with_what_to_do(bad: object) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        telos_wrap.patch(time_budget=bad)

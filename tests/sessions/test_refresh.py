"""R8 refresh gating and the Anthropic pre-warm (max_tokens=0)."""

from __future__ import annotations

import json

import anthropic

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.sessions import REFRESH_THRESHOLD
from telos_wrap.sessions.refresh_io import send_refresh

from .convo import MODEL, RecordingTransport, messages_for, system_prompt


def _send(client: anthropic.Anthropic, turn: int) -> anthropic.types.Message:
    return client.messages.create(
        model=MODEL, max_tokens=16, system=system_prompt(0, clock_line=False), messages=messages_for(turn)
    )


def test_refresh_gating_and_prewarm(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    sess = telos_wrap.session(clock=clock.now)
    assert not sess.refresh().send  # nothing cached yet
    with sess:
        _send(claude, 0)
        _send(claude, 1)
    decision = sess.refresh()
    assert not decision.send and "not due" in decision.reason
    clock.advance(270)
    decision = sess.refresh()
    assert decision.send and decision.body is not None
    assert decision.body["max_tokens"] == 0 and "stream" not in decision.body
    # The pre-warm is the last request as sent, markers included; only max_tokens differs.
    last = json.loads(transport.bodies[-1])
    assert {k: v for k, v in decision.body.items() if k != "max_tokens"} == {
        k: v for k, v in last.items() if k != "max_tokens"
    }
    # Sending it through the client keeps the prefix warm (a read, no write) and counts as a refresh.
    refreshes = 0
    while True:
        decision, message = send_refresh(sess, claude)
        if message is None:
            break
        refreshes += 1
        assert message.usage.cache_read_input_tokens > 0 and message.usage.cache_creation_input_tokens == 0
        assert message.content == []
        clock.advance(270)
    assert refreshes == REFRESH_THRESHOLD
    assert "R8" in decision.reason
    stats = sess.stats
    assert stats.refreshes == REFRESH_THRESHOLD and stats.requests == 2 + REFRESH_THRESHOLD
    # A real request resets the gate; an expired prefix is never "refreshed".
    with sess:
        _send(claude, 2)
    clock.advance(400)
    decision = sess.refresh()
    assert not decision.send and "expired" in decision.reason

"""Opt-in Anthropic diagnostics: the server's cache_miss_reason lands in the UsageReport."""

from __future__ import annotations

import json

import anthropic

import telos_wrap
from telos_wrap.emulator import ManualClock

from .convo import MODEL, RecordingTransport, messages_for, system_prompt


def test_previous_message_id_is_sent_and_the_miss_reason_reported(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    ids = []
    with telos_wrap.session(clock=clock.now, diagnostics=True) as sess:
        for turn in range(2):
            ids.append(
                claude.messages.create(
                    model=MODEL,
                    max_tokens=8,
                    system=system_prompt(0, clock_line=False),
                    messages=messages_for(turn),
                ).id
            )
        changed = claude.messages.create(
            model=MODEL,
            max_tokens=8,
            system=system_prompt(0, clock_line=False) + "!",
            messages=messages_for(2),
        )
    sent = [json.loads(body)["diagnostics"] for body in transport.bodies]
    assert sent == [
        {"previous_message_id": None},
        {"previous_message_id": ids[0]},
        {"previous_message_id": ids[1]},
    ]
    report = telos_wrap.usage_of(changed)
    assert report is not None and report.cache_miss_reason is not None
    assert report.cache_miss_reason["type"] == "system_changed"
    assert "server cache_miss_reason" in sess.explain(2)
    assert sess.cache_breaks[0].reason == "system_changed"  # telos' own view agrees


def test_a_streamed_response_reports_the_miss_reason_too(
    claude: anthropic.Anthropic, clock: ManualClock
) -> None:
    """The stream's ``message_start`` carries the diagnostics: the usage read from it keeps them."""
    with telos_wrap.session(clock=clock.now, diagnostics=True):
        for turn in range(2):
            claude.messages.create(
                model=MODEL,
                max_tokens=8,
                system=system_prompt(0, clock_line=False),
                messages=messages_for(turn),
            )
        with claude.messages.stream(
            model=MODEL,
            max_tokens=8,
            system=system_prompt(0, clock_line=False) + "!",
            messages=messages_for(2),
        ) as stream:
            final = stream.get_final_message()
    report = telos_wrap.usage_of(stream)
    assert report is not None and report.cache_miss_reason is not None
    assert report.cache_miss_reason["type"] == "system_changed"
    assert report.output is not None and report.output > 0  # message_delta's usage was fed too
    # The stream's final message carries the same diagnostics (read from its own fields).
    assert telos_wrap.usage_of(final) == report

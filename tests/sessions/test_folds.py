"""Bridge primitives on the session: pin, fold (slugs and message ranges), mark."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.emulator import ManualClock
from telos_wrap.errors import RefPoolError
from telos_wrap.sessions import FoldError, Session
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.views.explain import anchor

from .convo import HANDBOOK, MODEL, RecordingTransport, messages_for, system_prompt


def _send(client: anthropic.Anthropic, turn: int) -> None:
    client.messages.create(
        model=MODEL, max_tokens=32, system=system_prompt(0, clock_line=False), messages=messages_for(turn)
    )


def _last(transport: RecordingTransport) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(transport.bodies[-1])
    return body


def _entry_index(system: list[dict[str, Any]], slug: str) -> int:
    return next(i for i, b in enumerate(system) if b["text"].startswith(f"[ref:{slug}]\n"))


def test_fold_keeps_every_byte_before_the_slug_content_and_the_stub(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    slug = "handbook"
    with telos_wrap.session(clock=clock.now) as sess:
        sess.pin("handbook", HANDBOOK)
        for turn in range(3):
            _send(claude, turn)
        before = _last(transport)
        sess.fold(slugs=[slug], summary="Summary: be concise; refunds in 14 days.")
        _send(claude, 3)
        after = _last(transport)
    assert before.get("tools") == after.get("tools")
    i = _entry_index(after["system"], slug)
    assert i == _entry_index(before["system"], slug)
    # Every system block before the folded entry (the PIN text, the [ref:] stub, earlier entries)
    # is byte-identical, markers included.
    assert json.dumps(before["system"][:i], sort_keys=True) == json.dumps(after["system"][:i], sort_keys=True)
    # The entry keeps its reference line; only its content changed.
    assert after["system"][i]["text"] == f"[ref:{slug}]\nSummary: be concise; refunds in 14 days."
    assert {k: v for k, v in before["system"][i].items() if k != "text"} == {
        k: v for k, v in after["system"][i].items() if k != "text"
    }
    assert "fold: ref:" + slug in sess.explain(3)


def test_long_system_text_is_sent_in_place_until_a_fold_of_it_is_declared(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    # A document, then an instruction about it: sent in the caller's order with no stub until the
    # application declares a fold of the document; the fold then pays one break (the stub takes the
    # document's place, the summary goes after the PIN text) and the requests after it are stable.
    instruction = "Answer using only the document above."
    system = [{"type": "text", "text": HANDBOOK}, {"type": "text", "text": instruction}]

    def send(turn: int) -> dict[str, Any]:
        claude.messages.create(model=MODEL, max_tokens=32, system=system, messages=messages_for(turn))
        return _last(transport)

    with telos_wrap.session(clock=clock.now) as sess:
        before = [send(turn) for turn in range(2)]
        sess.fold(slugs=["system-doc-0"], summary="Summary: refunds in 14 days.")
        folded = send(2)
        later = send(3)
    for body in before:
        assert [block["text"] for block in body["system"]] == [HANDBOOK, instruction]
        assert "[ref:" not in json.dumps(body["system"])
    assert [block["text"] for block in folded["system"]] == [
        "[ref:system-doc-0]",
        instruction,
        "[ref:system-doc-0]\nSummary: refunds in 14 days.",
    ]
    assert json.dumps(later["system"], sort_keys=True) == json.dumps(folded["system"], sort_keys=True)
    assert "fold: ref:system-doc-0" in sess.explain(2)


def test_fold_of_a_long_last_system_text_swaps_it_in_place(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    # The system prompt is one long text: pooled, but sent as written (no stub would pay), so the
    # fold replaces that block with the summary where it stands, and the tools before it stay.
    with telos_wrap.session(clock=clock.now) as sess:
        for turn in range(2):
            claude.messages.create(model=MODEL, max_tokens=32, system=HANDBOOK, messages=messages_for(turn))
        before = _last(transport)
        sess.fold(slugs=["system-doc-0"], summary="Summary: refunds in 14 days.")
        claude.messages.create(model=MODEL, max_tokens=32, system=HANDBOOK, messages=messages_for(2))
        after = _last(transport)
    assert [block["text"] for block in before["system"]] == [HANDBOOK]
    assert [block["text"] for block in after["system"]] == ["Summary: refunds in 14 days."]
    assert before.get("tools") == after.get("tools")
    assert "fold: ref:system-doc-0" in sess.explain(2)


def test_fold_of_a_message_range_is_durable_and_explained(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    with telos_wrap.session("range-fold", clock=clock.now) as sess:
        for turn in range(4):
            _send(claude, turn)
        sess.fold(message_range=(0, 4), summary="Orders 1000 and 1001: refund questions answered.")
        # Recorded before the next request: another Session object on the same id sees it.
        folds = Session("range-fold").bind(claude).state.range_folds  # in the calls' tenant
        assert [(f.start, f.end, f.at) for f in folds] == [(0, 4, 4)]
        _send(claude, 4)
        _send(claude, 5)
    app = messages_for(5)
    sent = _last(transport)["messages"]
    assert len(sent) == len(app) - 3
    summary = sent[0]["content"][0]["text"]
    assert summary.startswith('<conversation-summary messages="0-3">\nOrders 1000')
    assert [m["role"] for m in sent] == ["user", *(m["role"] for m in app[4:])]
    assert "summary: messages[0:4]" in sess.explain(5)


def test_invalid_folds_and_pins_are_refused_before_anything_is_recorded(
    claude: anthropic.Anthropic, clock: ManualClock
) -> None:
    sess = telos_wrap.session(clock=clock.now)
    with pytest.raises(FoldError, match="needs a request"):
        sess.fold(message_range=(0, 2), summary="x")
    with sess:
        _send(claude, 3)
    with pytest.raises(FoldError, match="end right before a user message"):
        sess.fold(message_range=(0, 3), summary="x")
    with pytest.raises(FoldError, match="latest turn"):
        sess.fold(message_range=(2, 9), summary="x")
    with pytest.raises(RefPoolError, match="not in the ref-pool"):
        sess.fold(slugs=["nope"], summary="x")
    with pytest.raises(FoldError, match="exactly one"):
        sess.fold(summary="x")
    sess.pin("doc", "text")
    with pytest.raises(RefPoolError, match="frozen"):
        sess.pin("doc", "other text")
    with pytest.raises(FoldError, match="reserved"):
        sess.pin("system-doc-7", "text")
    sess.fold(message_range=(0, 2), summary="x")
    with pytest.raises(FoldError, match="overlaps"):
        sess.fold(message_range=(0, 4), summary="y")
    assert len(sess.state.range_folds) == 1


def test_mark_is_a_dry_run_of_the_next_request(
    claude: anthropic.Anthropic, transport: RecordingTransport, clock: ManualClock
) -> None:
    with telos_wrap.session(clock=clock.now) as sess:
        with pytest.raises(telos_wrap.TelosError, match="needs a body"):
            sess.mark()
        _send(claude, 0)
        plan = sess.mark()
        explained = runtime_of(sess)._records[0].explained
        assert explained is not None
        assert tuple(map(anchor, plan.breakpoints)) == explained.breakpoints
        assert sess.stats.requests == 1  # nothing recorded
        # A fold recorded since is visible in the dry run, and a body can be given explicitly.
        other = sess.mark(
            {
                "model": MODEL,
                "max_tokens": 8,
                "system": system_prompt(0, clock_line=False),
                "messages": messages_for(2),
            }
        )
        assert "BP-X" in [bp.name for bp in other.breakpoints]
        # A body below the minimum cacheable prefix would be sent as built: the dry run says so.
        small = sess.mark({"model": MODEL, "max_tokens": 8, "messages": messages_for(2)})
        assert small.breakpoints == () and "left untouched" in small.notes[0]
    assert len(transport.bodies) == 1

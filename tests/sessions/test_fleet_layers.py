"""Fleet learning with a careless harness (issue 42, what was left of it): a ``<system-reminder>``
the harness adds to the newest turn and takes away on the next, a live block of its own first, and a
line that first changes only after other lines were learned. What one conversation learned still
serves the next: the envelope does not make two consecutive requests look like two conversations
(nothing was published before), and facts are described on the prompt before any learned cut, the
text a conversation's first request shows (a fact described on the cut text, next to a line cut
earlier or after a block cut whole, fitted no later conversation).

Real SDK clients over real HTTP to the emulator (a fresh emulator per conversation: the second one
cannot read the first one's cache, only the facts).
"""

from __future__ import annotations

from typing import Any

import telos_wrap
from telos_wrap.sessions import MemoryStore
from tests.over_http import emulator_over_http

from .convo import MODEL, RULES, messages_for

TURNS = 5
REMINDER = "<system-reminder>\nIt is 10:0{turn}. {turn} todo items are open.\n</system-reminder>"


def _system(conv: int, turn: int) -> list[dict[str, Any]]:
    """A live block of its own first; then the caller's block: a clock line, a queue line that first
    changes at request 2, and a per-user line above the shared rules."""
    queue = 3 if turn < 2 else 5 + turn
    return [
        {"type": "text", "text": f"Live status: clock 10:{turn:02d}:{conv:02d}; {turn + conv} jobs running"},
        {
            "type": "text",
            "text": (
                "You are the support assistant of Example Corp.\n"
                f"Server clock: 2026-05-01 10:{turn:02d}:{conv % 60:02d}\n"
                f"Queue: {queue} tickets waiting\n"
                f"You are helping customer number {conv} today.\n{RULES}"
            ),
        },
    ]


def _messages(turn: int, reminder: bool) -> list[dict[str, Any]]:
    """The conversation's history; the newest user turn carries the harness's reminder."""
    messages = messages_for(turn)
    if reminder:
        newest = messages[-1]
        newest["content"] = [
            {"type": "text", "text": newest["content"]},
            {"type": "text", "text": REMINDER.format(turn=turn)},
        ]
    return messages


def _conversation(
    store: Any, conv: int, reminder: bool = True
) -> tuple[telos_wrap.Session, list[tuple[int, int]]]:
    usage = []
    with emulator_over_http() as wire:
        client = wire.anthropic()
        with telos_wrap.session(f"layers-{conv}", store=store) as sess:
            for turn in range(TURNS):
                reply = client.messages.create(
                    model=MODEL, max_tokens=16, system=_system(conv, turn), messages=_messages(turn, reminder)
                )
                usage.append(
                    (reply.usage.cache_read_input_tokens or 0, reply.usage.cache_creation_input_tokens or 0)
                )
        client.close()
    return sess, usage


def _no_break_after_first(usage: list[tuple[int, int]]) -> bool:
    return all(usage[t][0] >= usage[t - 1][0] + usage[t - 1][1] for t in range(1, len(usage)))


def test_a_reminder_on_the_newest_turn_and_a_later_layer_still_serve_the_next_conversation(
    patched: None,
) -> None:
    store = MemoryStore()
    first, usage1 = _conversation(store, 1)
    learned_at = sorted({span.learned_at for span in first.volatile_spans})
    assert learned_at == [1, 2], first.volatile_spans  # two layers: the clocks, then the queue line
    assert first.stats.cache_breaks == 2 and not _no_break_after_first(usage1)
    second, usage2 = _conversation(store, 2)
    assert second.stats.cache_breaks == 0, second.explain(2)
    assert _no_break_after_first(usage2), usage2
    assert len(second.volatile_spans) == len(first.volatile_spans)
    assert {span.origin for span in second.volatile_spans} == {"fleet"}
    # The queue line, learned at the first conversation's request 2, is adopted at the second's first.
    assert "at its request 2" in second.explain(0)
    # The per-user line and the rules never changed: they stay in the system prompt.
    assert second.explain(0).count("learned-volatile") == len(second.volatile_spans)


def test_without_the_reminder_the_same_facts(patched: None) -> None:
    """Control: the envelope changes nothing of what is learned and shared."""
    store, other = MemoryStore(), MemoryStore()
    with_reminder, _ = _conversation(store, 1)
    without, _ = _conversation(other, 1, reminder=False)
    assert [(s.block, s.line, s.lines, s.kind, s.learned_at) for s in with_reminder.volatile_spans] == [
        (s.block, s.line, s.lines, s.kind, s.learned_at) for s in without.volatile_spans
    ]
    assert all(not span.local for span in with_reminder.volatile_spans)


def test_the_state_keeps_which_messages_carried_an_envelope() -> None:
    """``AppPrint.dropped`` round-trips through the stored state (only when there is any, so a state
    without envelopes is stored as before); malformed records read as none; ``extends_previous``
    accepts a message that comes back without its envelope and nothing else."""
    from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosMessage
    from telos_wrap.sessions.durable.prints import kept_hash, message_hash
    from telos_wrap.sessions.durable.state import AppPrint
    from telos_wrap.sessions.turns.turn import extends_previous

    def message(*parts: tuple[str, Band]) -> TelosMessage:
        blocks = tuple(
            TelosBlock(f"m{n}", band, BlockKind.TEXT, {"type": "text", "text": text})
            for n, (text, band) in enumerate(parts)
        )
        return TelosMessage(role="user", blocks=blocks)

    asked = message(
        ("Where is my order?", Band.PIN), ("<system-reminder>It is 10:01</system-reminder>", Band.DROP)
    )
    plain = message(("Where is my order?", Band.PIN))
    edited = message(("Where is my parcel?", Band.PIN))
    assert kept_hash(asked) == kept_hash(plain) == message_hash(plain) != message_hash(asked)
    previous = AppPrint(
        messages=message_hash(asked), kinds="u", system=(), dropped=(f"0:{kept_hash(asked)}",)
    )
    assert AppPrint.from_json(previous.to_json()) == previous
    assert "dropped" not in AppPrint(messages="", kinds="", system=()).to_json()
    assert AppPrint.from_json({**previous.to_json(), "dropped": {"0": "x"}}).dropped == ()
    later = message(("Thanks.", Band.PIN))
    # The messages sent now hold no envelope (``held`` empty): each one's kept hash is its hash.
    assert extends_previous(previous, message_hash(plain) + message_hash(later), ())
    assert not extends_previous(previous, message_hash(edited) + message_hash(later), ())
    assert not extends_previous(replace_dropped(previous), message_hash(plain) + message_hash(later), ())
    # One that holds an envelope again (another one) is compared without it.
    again = message(("Where is my order?", Band.PIN), ("<system-reminder>10:02</system-reminder>", Band.DROP))
    assert extends_previous(previous, message_hash(again) + message_hash(later), ((0, kept_hash(again)),))
    assert not extends_previous(previous, message_hash(again) + message_hash(later), ())


def replace_dropped(app: Any) -> Any:
    """``app`` without its record of envelopes: then only an unchanged message extends it."""
    from dataclasses import replace

    return replace(app, dropped=())

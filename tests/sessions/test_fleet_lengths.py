"""No write nobody reads (sessions/learning/lengths.py, engines/anthropic.py ``plan(final=...)``):
a request expected to end its conversation writes nothing past what an earlier request wrote.

The counts (``Lengths``) are checked as values and, with their in-process pending counts and the
store, by a state machine; the policy end to end through the real SDK over real HTTP to one
emulator (one organisation's cache, shared by the conversations of an application).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import telos_wrap
from telos_wrap.engines.anthropic import FINAL_NOTE
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.learning import fleet_io
from telos_wrap.sessions.learning.lengths import (
    MAX_TRACKED,
    MIN_SEEN,
    Lengths,
    count_reached,
    final_reason,
    write_pays,
)
from tests.over_http import emulator_over_http

from .convo import MODEL, system_prompt, user_text

ANTHROPIC = (0.1, 1.25)  # (read, write) multipliers, docs/vendor-facts.md §1


# -- the counts and the rule -------------------------------------------------------------------------


@given(
    st.lists(st.integers(0, 1 << 40), max_size=MAX_TRACKED).map(tuple),
    st.integers(-2, MAX_TRACKED + 3),
)
def test_counting_one_request_in_place_is_adding_its_lengths(reached: tuple[int, ...], requests: int) -> None:
    # ``fleet_io.note_reached`` counts every request with ``count_reached``, not with the objects.
    expected = Lengths(reached).plus(Lengths.one(requests)).reached
    assert count_reached(reached, requests) == expected


def test_counts_say_which_share_went_on() -> None:
    lengths = Lengths()
    for made in (2, 2, 2, 2, 2, 3):  # six conversations: five of two requests, one of three
        for k in range(1, made + 1):
            lengths = lengths.plus(Lengths.one(k))
    assert lengths.reached == (6, 6, 1)
    assert lengths.goes_on(1) == 1.0
    assert lengths.goes_on(2) == pytest.approx(1 / 6)
    assert lengths.goes_on(3) is None  # only one conversation made three requests: too few to say
    assert Lengths.one(0) == Lengths() and Lengths.one(MAX_TRACKED + 1) == Lengths()


def test_the_write_pays_from_a_read_chance_of_28_percent_on_anthropic() -> None:
    assert write_pays(0.28, write=1.25, read=0.1)
    assert not write_pays(0.27, write=1.25, read=0.1)
    assert write_pays(0.0, write=1.0, read=0.1)  # free writes always pay


def test_final_reason_needs_a_hint_or_enough_conversations() -> None:
    few = Lengths((MIN_SEEN - 1, 0))
    many = Lengths((MIN_SEEN, 1))  # one in five went on: 20% < 28%
    assert final_reason(1, None, few, ANTHROPIC) is None
    assert final_reason(1, None, many, ANTHROPIC) is not None
    assert final_reason(1, None, Lengths((MIN_SEEN, 2)), ANTHROPIC) is None  # 40% go on: write
    assert final_reason(1, None, many, (0.1, 1.0)) is None  # writes cost nothing extra: always write
    assert final_reason(1, 2, None, ANTHROPIC) is None
    assert "expected_turns=2" in (final_reason(2, 2, None, ANTHROPIC) or "")
    assert final_reason(3, 2, None, ANTHROPIC) is not None
    # The caller's hint wins over what the fleet saw.
    assert final_reason(1, 4, many, ANTHROPIC) is None


@given(
    st.one_of(st.none(), st.integers(), st.text(), st.lists(st.one_of(st.integers(), st.text(), st.none())))
)
def test_stored_counts_that_are_malformed_read_as_none(data: Any) -> None:
    lengths = Lengths.from_json(data)
    assert all(type(n) is int and n >= 0 for n in lengths.reached)
    assert len(lengths.reached) <= MAX_TRACKED
    if lengths.reached:
        assert lengths.reached == tuple(data)


# -- counts in memory and in the store: a state machine -------------------------------------------

APPS = [("tenant-a", "app-1"), ("tenant-a", "app-2"), ("tenant-b", "app-1")]


class CountsMachine(RuleBasedStateMachine):
    """Requests counted in memory (``note_reached``) and published at a conversation's start
    (``fleet_for``'s publish) add up to exactly what was counted, per store and application: nothing
    lost, nothing counted twice, nothing crossing to another application or tenant."""

    def __init__(self) -> None:
        super().__init__()
        self.stores = [MemoryStore(), MemoryStore()]
        self.model: dict[tuple[int, tuple[str, str]], list[int]] = {}

    @rule(store=st.integers(0, 1), app=st.sampled_from(APPS), requests=st.integers(1, MAX_TRACKED + 2))
    def request(self, store: int, app: tuple[str, str], requests: int) -> None:
        fleet_io.note_reached(self.stores[store], app, requests)
        if requests <= MAX_TRACKED:
            counts = self.model.setdefault((store, app), [0] * MAX_TRACKED)
            counts[requests - 1] += 1

    @precondition(lambda self: bool(self.model))
    @rule(store=st.integers(0, 1), app=st.sampled_from(APPS))
    def start(self, store: int, app: tuple[str, str]) -> None:
        """A conversation starts: this process's pending counts go to the store."""
        pending = fleet_io._take_pending(self.stores[store], app)
        fleet_io.publish(self.stores[store], *app, (), (), pending)
        assert fleet_io._take_pending(self.stores[store], app) == Lengths()

    @invariant()
    def stored_plus_pending_is_what_was_counted(self) -> None:
        for store_number, store in enumerate(self.stores):
            for app in APPS:
                stored = fleet_io.lookup_entry(store, *app).lengths
                pending = Lengths(fleet_io._pending.get(store, {}).get(app, ()))
                total = stored.plus(pending).reached
                want = self.model.get((store_number, app), [])
                assert list(total) + [0] * (len(want) - len(total)) == want


TestCounts = CountsMachine.TestCase
TestCounts.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


# -- end to end: the real SDK over real HTTP to one organisation's cache ----------------------------


def _conversation(
    client: Any,
    store: MemoryStore,
    name: str,
    turns: int,
    *,
    hint: dict[str, Any] | None = None,
    clock: bool = True,
) -> tuple[telos_wrap.Session, list[tuple[int, int, int]]]:
    """``turns`` requests of conversation ``name``: (uncached, read, write) per request."""
    usage = []
    history: list[dict[str, Any]] = []
    with telos_wrap.session(name, store=store, hints=hint) as sess:
        for turn in range(turns):
            history.append({"role": "user", "content": f"[{name}] " + user_text(turn)})
            reply = client.messages.create(
                model=MODEL,
                max_tokens=16,
                system=system_prompt(turn, clock_line=clock),
                messages=list(history),
            )
            history.append({"role": "assistant", "content": reply.content[0].text})
            u = reply.usage
            usage.append((u.input_tokens, u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0))
    return sess, usage


def test_expected_turns_keeps_the_last_request_from_writing(patched: None) -> None:
    with emulator_over_http() as wire:
        client = wire.anthropic()
        store = MemoryStore()
        _, plain = _conversation(client, store, "plain", 3)
        sess, hinted = _conversation(client, store, "hints", 3, hint={"expected_turns": 3})
        client.close()
    # Request 2 writes its tail as always; request 3 reads what request 2 wrote and writes nothing.
    assert hinted[1][2] > 0
    assert plain[2][2] > 0  # without the hint the last request writes its tail
    uncached, read, write = hinted[2]
    assert write == 0
    assert read >= hinted[1][1] + hinted[1][2]  # everything request 2 read or wrote is read
    assert uncached == plain[2][0] + plain[2][2]  # the tail is paid uncached instead of written
    explained = sess.explain(2)
    assert FINAL_NOTE in explained and "expected_turns=3" in explained


def test_a_conversation_that_goes_on_after_its_expected_last_request_reads_on(patched: None) -> None:
    with emulator_over_http() as wire:
        client = wire.anthropic()
        _, usage = _conversation(client, MemoryStore(), "longer", 4, hint={"expected_turns": 2}, clock=False)
        client.close()
    assert usage[1][2] == 0
    # Request 3 reads what request 1 wrote (within the lookback) and writes the rest: no break.
    assert usage[2][1] >= usage[0][1] + usage[0][2]
    assert usage[3][1] >= usage[2][1] + usage[2][2]


def test_the_fleet_learns_that_conversations_end_at_two_requests(patched: None) -> None:
    """Conversations of one application, two requests each, on one store and one cache: once
    ``MIN_SEEN`` conversations made two requests and none a third, the second request of the next
    ones writes nothing; another tenant's conversations learn nothing from them."""
    count = MIN_SEEN + 3
    with emulator_over_http() as wire:
        client = wire.anthropic()
        store = MemoryStore()
        runs = [_conversation(client, store, f"c{n}", 2)[1] for n in range(count)]
        other = _conversation(client, store, "other", 2, hint={"isolation": "tenant-b"})[1]
        client.close()
    first, later = runs[:MIN_SEEN], runs[MIN_SEEN:]  # conversation MIN_SEEN + 1 sees MIN_SEEN ended
    assert all(usage[1][2] > 0 for usage in first[1:])  # too few seen yet: written as always
    assert all(usage[1][2] == 0 for usage in later)
    assert all(usage[1][1] >= usage[0][1] + usage[0][2] for usage in later)
    assert all(usage[0][2] > 0 for usage in later)  # the first request still writes (read next)
    assert other[1][2] > 0  # tenant b has seen no conversation end: no count crossed tenants


def test_counts_need_no_store_io_per_request(patched: None) -> None:
    """Counting a request is in memory; the next conversation's start publishes it with the read
    and write it already makes."""
    store = MemoryStore()
    writes: list[str] = []
    put = store.put_blob

    def counting(session_id: str, key: str, text: str) -> None:
        writes.append(session_id)
        put(session_id, key, text)

    store.put_blob = counting  # type: ignore[method-assign]
    with emulator_over_http() as wire:
        client = wire.anthropic()
        _conversation(client, store, "first", 3)
        fleet_writes = [w for w in writes if w.startswith("telos-fleet:")]
        assert len(fleet_writes) <= 2  # its shape at its start, what it learned at request 2
        writes.clear()
        _conversation(client, store, "second", 1)
        client.close()
    assert len([w for w in writes if w.startswith("telos-fleet:")]) == 1  # the first one's counts
    app = next(key for key in store._entries if key.startswith("telos-fleet:"))
    space, template = app.removeprefix("telos-fleet:").split(":")
    assert fleet_io.lookup_entry(store, space, template).lengths.reached[:3] == (1, 1, 1)

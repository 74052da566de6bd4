"""Property and stateful tests of learned volatility (hypothesis), through ``run_turn``.

Stable system prompts are generated; a live value is injected at a random granularity (a block of
its own, a whole line anywhere, a sentence inside a line) in a random value shape (date-time, clock,
counter, hex id). The session must learn it after at most one change, the system segment must then
be byte-stable, and the value must still reach the model. A one-off prompt edit must cost exactly
one cache break and never be learned.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .volatile_driver import Driver, anthropic_body, openai_body

WORDS = [
    "answer",
    "cite",
    "policy",
    "plain",
    "words",
    "refunds",
    "orders",
    "handbook",
    "support",
    "tickets",
    "agent",
    "tools",
    "files",
    "review",
    "changes",
    "always",
    "never",
    "brief",
    "polite",
    "customer",
    "account",
    "billing",
    "shipping",
    "returns",
    "escalate",
    "summary",
    "context",
    "request",
    "explain",
    "verify",
    "confirm",
]
TURNS = 5
_SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

sentence = st.lists(st.sampled_from(WORDS), min_size=4, max_size=9).map(
    lambda w: " ".join(w).capitalize() + "."
)
line = st.lists(sentence, min_size=1, max_size=2).map(" ".join)
prompt = st.lists(line, min_size=4, max_size=10, unique=True)


def value(kind: str, turn: int) -> str:
    minute = 2 + 7 * turn
    return {
        "datetime": f"2026-11-23 10:{minute:02d}:{(13 * turn) % 60:02d}",
        "clock": f"{9 + minute // 60:02d}:{minute % 60:02d}",
        "counter": f"{17 + 3 * turn} jobs",
        "hexid": f"run-{(0x3FA2C1 + 7919 * turn):06x}9",
    }[kind]


def inject(lines: list[str], where: str, position: int, label: str, kind: str, turn: int) -> list[Any]:
    """The system blocks (Anthropic text blocks) of one turn."""
    live = f"{label.capitalize()} {value(kind, turn)}."
    text = list(lines)
    p = position % len(text)
    blocks: list[str]
    if where == "block":
        blocks = [f"Status report: {value(kind, turn)} right now", "\n".join(text)]
    elif where == "line":
        text.insert(p, live)
        blocks = ["\n".join(text)]
    elif where == "first":
        blocks = ["\n".join([live, *text])]
    elif where == "last":
        blocks = ["\n".join([*text, live])]
    else:  # inside a line, between sentences
        text[p] = f"{text[p]} {live} Keep going."
        blocks = ["\n".join(text)]
    return [{"type": "text", "text": block} for block in blocks]


@_SETTINGS
@given(
    lines=prompt,
    where=st.sampled_from(["block", "line", "first", "last", "inside"]),
    position=st.integers(0, 20),
    label=st.sampled_from(["clock", "status", "now", "queue", "workspace"]),
    kind=st.sampled_from(["datetime", "clock", "counter", "hexid"]),
    api=st.sampled_from(["anthropic", "openai_chat"]),
)
def test_a_live_value_is_learned_after_one_change_and_the_prefix_is_then_stable(
    lines: list[str], where: str, position: int, label: str, kind: str, api: str
) -> None:
    driver = Driver(api, "anthropic" if api == "anthropic" else "openai")
    for turn in range(TURNS):
        blocks = inject(lines, where, position, label, kind, turn)
        if api == "anthropic":
            driver.send(anthropic_body(blocks, turn))
        else:
            driver.send(openai_body([{"role": "system", "content": b["text"]} for b in blocks], turn))
    # A whole line that only states the present ("Now 10:02.") is learned on sight; any other value,
    # a time of day included, at its first change (request 1).
    present = label == "now" and kind in ("datetime", "clock") and where in ("line", "first", "last")
    at = 0 if present else 1
    assert driver.state.volatile, "the live value was never learned"
    assert {span.learned_at for span in driver.state.volatile} == {at}
    assert all(span.kind == ("present" if present else "value") for span in driver.state.volatile)
    assert [request for request, _ in driver.breaks] == ([] if at == 0 else [1])
    for turn in range(at + 1, TURNS):
        assert driver.system_bytes(turn) == driver.system_bytes(at)
    assert value(kind, TURNS - 1) in repr(driver.results[-1].prepared.body)  # still seen by the model


@_SETTINGS
@given(
    lines=prompt,
    target=st.integers(0, 20),
    at=st.integers(1, TURNS - 2),
    word=st.sampled_from(["kindly", "carefully", "quickly", "formally"]),
)
def test_a_one_off_edit_costs_one_break_and_is_not_learned(
    lines: list[str], target: int, at: int, word: str
) -> None:
    edited = list(lines)
    p = target % len(edited)
    edited[p] = edited[p].replace(".", f" {word}.", 1)
    driver = Driver()
    for turn in range(TURNS):
        text = "\n".join(edited if turn >= at else lines)
        driver.send(anthropic_body(text, turn))
    assert driver.state.volatile == ()
    assert driver.breaks == [(at, "system_changed")]


class LiveValueAndEdits(RuleBasedStateMachine):
    """A session whose queue counter ticks or rests and whose other lines are edited now and then.

    Model: the first tick costs one break (the request that learns it); every edit costs exactly one
    break and is never learned; ticks after the first and rests cost nothing.
    """

    @initialize(lines=prompt)
    def start(self, lines: list[str]) -> None:
        self.lines = list(lines)
        self.edited: set[int] = set()
        self.clock = 0
        self.ticked = 0
        self.expected_breaks = 0
        self.turn = 0
        self.driver = Driver()
        self._send()

    def _send(self) -> None:
        counter = f"Queue: {17 + self.clock} jobs waiting, batch b{9000 + 3 * self.clock}."
        text = "\n".join([self.lines[0], counter, *self.lines[1:]])
        self.driver.send(anthropic_body(text, min(self.turn, 6)))
        self.turn += 1

    @rule()
    def tick(self) -> None:
        self.clock += 1
        self.ticked += 1
        if self.ticked == 1:
            self.expected_breaks += 1
        self._send()

    @rule()
    def rest(self) -> None:
        self._send()

    @precondition(lambda self: len(self.edited) < len(self.lines))
    @rule(pick=st.integers(0, 20), word=st.sampled_from(["kindly", "formally", "softly"]))
    def edit(self, pick: int, word: str) -> None:
        free = [i for i in range(len(self.lines)) if i not in self.edited]
        index = free[pick % len(free)]
        self.edited.add(index)
        self.lines[index] = f"{word.capitalize()}, {self.lines[index]}"
        self.expected_breaks += 1
        self._send()

    @invariant()
    def breaks_are_exactly_the_first_tick_and_the_edits(self) -> None:
        assert self.driver.state.breaks == self.expected_breaks, self.driver.breaks

    @invariant()
    def only_the_clock_is_learned(self) -> None:
        spans = self.driver.state.volatile
        assert all(span.kind == "value" for span in spans)
        assert len(spans) == (1 if self.ticked else 0)


TestLiveValueAndEdits = LiveValueAndEdits.TestCase
TestLiveValueAndEdits.settings = settings(
    max_examples=8, stateful_step_count=8, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

"""Learned volatility at every granularity, through the pure session step (``run_turn``).

Each case sends a conversation whose system prompt changes the way a careless harness changes it,
and checks: which request taught which span, how many cache breaks it cost, that the system segment
is byte-stable from then on, and that the changing text still reaches the model (DROP, recorded).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from telos_wrap.sessions.durable.state import SessionState

from .volatile_driver import RULES, Driver, anthropic_body, openai_body

TURNS = 8


def clock(turn: int) -> str:
    return f"2026-11-23 10:{(turn * 7 + 3) % 60:02d}"  # never a round hour: those are learned later


def run(make: Callable[[int], dict[str, Any]], turns: int = TURNS, api: str = "anthropic") -> Driver:
    driver = Driver(api, "anthropic" if api == "anthropic" else "openai")
    for turn in range(turns):
        driver.send(make(turn))
    return driver


def stable_from(driver: Driver, turn: int) -> None:
    first = driver.system_bytes(turn)
    for later in range(turn + 1, len(driver.results)):
        assert driver.system_bytes(later) == first, later


def learned(driver: Driver) -> list[tuple[int, str, int, int]]:
    return [(s.learned_at, s.kind, s.block, s.line) for s in driver.state.volatile]


def reaches_the_model(driver: Driver, text: str) -> None:
    body = repr(driver.results[-1].prepared.body)
    assert text in body
    records = [r for r in driver.results[-1].prepared.ir.records if r.kind == "learned-volatile"]
    assert records, "a learned span that moved text must be recorded"


def test_a_system_block_of_its_own() -> None:
    def body(turn: int) -> dict[str, Any]:
        live = f"Today is {clock(turn)[:10]}; clock {clock(turn)[11:]}; {3 + turn // 4} jobs running"
        return anthropic_body([{"type": "text", "text": live}, {"type": "text", "text": RULES}], turn)

    driver = run(body)
    # Not a bare statement of the present (it also counts jobs): learned at its first change.
    assert learned(driver) == [(1, "value", 0, 0)]
    assert driver.breaks == [(1, "system_changed")]  # the jobs count changes at turn 4: no break
    stable_from(driver, 1)
    reaches_the_model(driver, f"clock {clock(TURNS - 1)[11:]}")
    # The whole block became DROP: nothing of it is left in the system segment.
    assert "jobs running" not in repr(driver.results[-1].prepared.body["system"])


def live(kind: str, turn: int) -> str:
    """A self-labelled present (learned on sight), or a clock or another live value (learned at its
    first change: a time of day that is not labelled as "now" may be data)."""
    return {
        "present": f"Current date and time: {clock(turn)}",
        "clock": f"Server clock: {clock(turn)}",
        "queue": f"Build queue id q{4711 + 13 * turn}",
    }[kind]


@pytest.mark.parametrize("kind", ["present", "clock", "queue"])
@pytest.mark.parametrize("where", ["first", "last", "only", "mid"])
def test_a_line_anywhere(where: str, kind: str) -> None:
    def body(turn: int) -> dict[str, Any]:
        line = live(kind, turn)
        text = {
            "first": f"{line}\nYou are the support assistant.\n{RULES}",
            "last": f"You are the support assistant.\n{RULES}{line}",
            "only": line,
            "mid": f"You are the support assistant.\n{line}\n{RULES}",
        }[where]
        system = [{"type": "text", "text": text}]
        if where == "only":
            system.append({"type": "text", "text": RULES})
        return anthropic_body(system, turn)

    driver = run(body)
    at = 0 if kind == "present" else 1
    assert [(a, k) for a, k, _, _ in learned(driver)] == [(at, "present" if kind == "present" else "value")]
    assert driver.breaks == ([] if kind == "present" else [(1, "system_changed")])
    stable_from(driver, at)
    reaches_the_model(driver, live(kind, TURNS - 1))


def test_a_value_inside_a_line_moves_the_whole_line_never_a_piece() -> None:
    def body(turn: int) -> dict[str, Any]:
        text = (
            f"You are helping Ana. Date: {clock(turn)}. Be brief and cite the policy.\n{RULES}"
            f"Workspace (run id {4000 + turn}) is ready. Answer in English.\n"
        )
        return anthropic_body(text, turn)

    driver = run(body)
    spans = driver.state.volatile
    # Both lines at their first change (the one request that breaks), each as a whole line.
    assert [(s.learned_at, s.kind, s.line, s.lines) for s in spans] == [
        (1, "value", 0, 1),
        (1, "value", 61, 1),
    ]
    assert driver.breaks == [(1, "system_changed")]
    stable_from(driver, 1)
    system = driver.results[-1].prepared.body["system"]
    text = "".join(block["text"] for block in system)
    assert text == RULES  # what stays reads as written: whole lines, nothing cut out of them
    line = f"You are helping Ana. Date: {clock(TURNS - 1)}. Be brief and cite the policy.\n"
    reaches_the_model(driver, line.replace("\n", ""))
    tail = driver.results[-1].prepared.body["messages"][-1]["content"][-1]["text"]
    assert tail == line + f"Workspace (run id {4000 + TURNS - 1}) is ready. Answer in English.\n"


def test_a_value_that_rests_then_changes_is_learned_at_its_first_change() -> None:
    def branch(turn: int) -> str:
        return "17" if turn < 4 else "18" if turn < 6 else "19"

    def body(turn: int) -> dict[str, Any]:
        return anthropic_body(f"You are a coding agent.\nOpen pull requests: {branch(turn)}\n{RULES}", turn)

    driver = run(body)
    assert learned(driver) == [(4, "value", 0, 1)]
    assert driver.breaks == [(4, "system_changed")]  # the change at turn 6 is free: never forgotten
    stable_from(driver, 4)


def test_a_leading_volatile_system_message_openai() -> None:
    def body(turn: int) -> dict[str, Any]:
        return openai_body(
            [
                {"role": "system", "content": f"Current date and time: {clock(turn)}"},
                {"role": "developer", "content": RULES},
            ],
            turn,
        )

    driver = run(body, api="openai_chat")
    assert learned(driver) == [(0, "present", 0, 0)]  # a self-labelled present: on sight
    assert driver.breaks == []
    stable_from(driver, 0)
    reaches_the_model(driver, f"Current date and time: {clock(TURNS - 1)}")


def test_a_system_message_that_is_only_a_short_clock_is_learned_at_its_first_change() -> None:
    # Little literal text around the value ("(sent …)"): pinned to the whole message instead.
    def body(turn: int) -> dict[str, Any]:
        return openai_body(
            [{"role": "developer", "content": RULES}, {"role": "system", "content": f"(sent {clock(turn)})"}],
            turn,
        )

    driver = run(body, api="openai_chat")
    assert learned(driver) == [(1, "value", 1, 0)]
    assert driver.state.volatile[0].before == "^"  # pinned to the start of its message
    assert driver.breaks == [(1, "system_changed")]
    stable_from(driver, 1)
    reaches_the_model(driver, f"(sent {clock(TURNS - 1)})")


def test_a_real_prompt_edit_costs_one_break_and_is_not_learned() -> None:
    def body(turn: int) -> dict[str, Any]:
        tone = "Be concise." if turn < 4 else "Be thorough and explain each step."
        return anthropic_body(f"You are the support assistant.\n{tone}\n{RULES}Sign as Example Corp.", turn)

    driver = run(body)
    assert driver.state.volatile == ()
    assert driver.breaks == [(4, "system_changed")]
    assert len(driver.state.suspects) == 1  # remembered; learned only if the same place changes again
    stable_from(driver, 4)
    assert "Be thorough" in repr(driver.results[-1].prepared.body["system"])


def test_a_changing_line_without_digits_is_learned_at_its_second_change() -> None:
    moods = ["calm", "busy", "tired", "happy", "curious", "sleepy", "eager", "bored"]

    def body(turn: int) -> dict[str, Any]:
        return anthropic_body(f"You are the support assistant.\nUser mood: {moods[turn]}\n{RULES}", turn)

    driver = run(body)
    assert learned(driver) == [(2, "lines", 0, 1)]
    assert driver.breaks == [(1, "system_changed"), (2, "system_changed")]
    stable_from(driver, 2)


def test_a_region_of_varying_line_count_is_learned_at_its_second_change() -> None:
    def body(turn: int) -> dict[str, Any]:
        files = "\n".join(f"- src/module_{chr(97 + k)}.py modified" for k in range(1 + turn % 3))
        return anthropic_body(
            f"You are a coding agent.\nChanged files:\n{files}\nEnd of status.\n{RULES}", turn
        )

    driver = run(body)
    assert [(at, kind) for at, kind, _, _ in learned(driver)] == [(2, "region")]
    assert len(driver.breaks) == 2
    stable_from(driver, 2)


def test_an_environment_dump_whose_items_come_and_go_is_learned_at_its_first_change() -> None:
    jobs = [0, 0, 2, 3, 1, 4, 0, 2]

    def dump(turn: int) -> str:
        items = [f"JOB_{k}=running (pid {1000 + 37 * turn + k})" for k in range(jobs[turn])]
        stable = ["Environment:", "HOME=/home/agent", f"PWD=/tmp/run-{turn:04x}a", "SHELL=/bin/bash"]
        return "\n".join([*stable, f"UPTIME={40 * turn + 3}s", *items])

    driver = run(lambda turn: anthropic_body(f"{dump(turn)}\nYou are a coding agent.\n{RULES}", turn))
    # Turn 1: PWD and UPTIME change in place (values): one break. Turn 2: job lines come (a list of
    # one kind), learned and cut in the request they first appear in: no break.
    assert [(at, kind) for at, kind, _, _ in learned(driver)] == [(1, "value"), (1, "value"), (2, "list")]
    assert driver.breaks == [(1, "system_changed")]
    stable_from(driver, 1)
    system = "".join(block["text"] for block in driver.results[-1].prepared.body["system"])
    assert "SHELL=/bin/bash" in system and "JOB_" not in system and "UPTIME" not in system
    reaches_the_model(driver, "JOB_1=running (pid 1260)")


def test_one_new_line_with_a_number_is_an_edit_not_a_list() -> None:
    def body(turn: int) -> dict[str, Any]:
        extra = "Use at most 3 tools per answer.\n" if turn >= 3 else ""
        return anthropic_body(f"You are the support assistant.\n{extra}{RULES}", turn)

    driver = run(body)
    assert driver.state.volatile == ()
    assert driver.breaks == [(3, "system_changed")]
    stable_from(driver, 3)


def test_state_round_trips_and_old_schemas_are_read() -> None:
    driver = run(lambda turn: anthropic_body(f"Intro line.\nClock: {clock(turn)}\n{RULES}", turn), turns=3)
    text = driver.state.dumps()
    again = SessionState.loads(text)
    assert again.volatile == driver.state.volatile and again.app == driver.state.app
    assert '"schema":3' in text
    old = re.sub(r'"system":\[[^\]]*\]', '"system_lines":["abc"]', text).replace('"schema":3', '"schema":2')
    legacy = SessionState.loads(old)
    assert legacy.app is not None and legacy.app.system is None  # learning restarts, nothing breaks
    assert legacy.volatile == driver.state.volatile


FROZEN = "The current time is 2024-05-15 15:00:00 EST."


def test_a_frozen_round_hour_stays_in_the_cached_prefix() -> None:
    # tau-bench's simulated "now": moved to the DROP tail on sight, it cost its tokens on every request.
    driver = run(lambda turn: anthropic_body([{"type": "text", "text": f"{RULES}\n{FROZEN}"}], turn))
    assert learned(driver) == []
    assert driver.breaks == []
    assert FROZEN in driver.system_bytes(TURNS - 1).decode()


def test_a_live_clock_first_read_on_the_hour_costs_one_break() -> None:
    # The one-in-sixty live clock that starts on a round hour: learned at its first change instead.
    def body(turn: int) -> dict[str, Any]:
        return anthropic_body([{"type": "text", "text": f"Now: 2026-11-23 10:{turn * 7:02d}\n{RULES}"}], turn)

    driver = run(body)
    assert learned(driver) == [(1, "value", 0, 0)]
    assert len(driver.breaks) == 1
    stable_from(driver, 1)

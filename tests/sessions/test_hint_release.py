"""A finished call keeps nothing in the table of hint tokens (issue 44): its entry holds the session
the call was built in, so every finished per-request call used to keep its ``Session`` object alive
until 4,096 newer calls pushed it out (1,000 objects alive after 1,000 calls)."""

from __future__ import annotations

import anthropic
import pytest

import telos_wrap
from telos_wrap.patch import calls

from .convo import MODEL, messages_for, system_prompt


@pytest.fixture(autouse=True)
def empty_table() -> None:
    """The table starts empty: under pytest-xdist the modules a worker ran before this one may have
    left entries of calls built but never sent (bounded by the table's cap), which are not this
    test's."""
    calls._pending.clear()


def test_a_finished_call_leaves_no_hint_entry(claude: anthropic.Anthropic) -> None:
    for i in range(40):
        with telos_wrap.session(f"conv-{i % 4}"):
            claude.messages.create(
                model=MODEL, max_tokens=8, system=system_prompt(i // 4), messages=messages_for(i // 4)
            )
    assert not calls._pending


def test_a_call_the_sdk_refuses_leaves_no_hint_entry(claude: anthropic.Anthropic) -> None:
    with telos_wrap.session("refused"), pytest.raises(TypeError):
        claude.messages.create(model=MODEL, messages=messages_for(0))
    assert not calls._pending

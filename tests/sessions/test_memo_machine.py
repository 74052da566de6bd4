"""The history memo never disagrees with the request it is read for: a hypothesis state machine.

The memo (``telos_wrap.history.HistoryMemo``) hands back the settled IR of the leading messages of a
request that are still what it settled. "Still what it settled" is a byte property: a message whose
JSON changed — an edit in words, a number turned into another type (``True`` → ``1``, ``1`` →
``1.0``, ``0.0`` → ``-0.0``), a message replaced — must not be reused, whatever Python's ``==`` says.
The model here is the JSON text (sorted keys: key order is not content) of every message the memo
holds; the machine appends, edits in place, rewinds and retries, and after every request checks
that the memo reused exactly the prefix whose JSON is unchanged.

    TELOS_STATEFUL_EXAMPLES=200 TELOS_STATEFUL_STEPS=60 python -m pytest tests/sessions/test_memo_machine.py
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from telos_wrap.history import HistoryMemo

KEY = ("anthropic", 0, "anthropic")
EXAMPLES = int(os.environ.get("TELOS_STATEFUL_EXAMPLES", "40"))
STEPS = int(os.environ.get("TELOS_STATEFUL_STEPS", "40"))

numbers = st.one_of(
    st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.0, 1e16, 3.0])
)
leaves = st.one_of(numbers, st.text(max_size=6), st.none())
blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result"]), "text": st.text(max_size=8)},
    optional={"input": st.dictionaries(st.sampled_from(["n", "ok", "x", "name"]), leaves, max_size=3)},
)
messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(st.text(max_size=10), st.lists(blocks, min_size=1, max_size=2)),
    }
)


def _json(message: Any) -> str:
    return json.dumps(message, sort_keys=True)


def _twins(value: Any) -> list[Any]:
    """Values ``==`` to ``value`` whose JSON differs (``True`` / ``1`` / ``1.0``, ``0.0`` / ``-0.0``)."""
    candidates = [True, False, 0, 1, -1, 0.0, -0.0, 1.0, -1.0, float(value), -value]
    if type(value) is float and value.is_integer():
        candidates.append(int(value))
    return [c for c in candidates if c == value and json.dumps(c) != json.dumps(value)]


class MemoMachine(RuleBasedStateMachine):
    """One session's requests: what the application sends, and what the memo must know of it."""

    def __init__(self) -> None:
        super().__init__()
        self.memo = HistoryMemo()
        self.messages: list[dict[str, Any]] = []
        #: The JSON of every message the memo holds, as it was when settled (the model).
        self.held: list[str] = []
        self.requests = 0

    @rule(message=messages)
    def append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.send()

    @rule(data=st.data())
    def edit_a_number_in_place(self, data: st.DataObject) -> None:
        """Turn a number of an old message into its ``==`` twin of another type (or a new value)."""
        found = [
            (block["input"], name)
            for message in self.messages
            if isinstance(message["content"], list)
            for block in message["content"]
            for name, value in block.get("input", {}).items()
            if type(value) in (bool, int, float)
        ]
        if not found:
            return
        holder, name = data.draw(st.sampled_from(found))
        choices = _twins(holder[name]) or [holder[name] + 1]
        holder[name] = data.draw(st.sampled_from(choices))
        self.send()

    @rule(data=st.data())
    def edit_text_in_place(self, data: st.DataObject) -> None:
        if not self.messages:
            return
        message = self.messages[data.draw(st.integers(0, len(self.messages) - 1))]
        if isinstance(message["content"], str):
            message["content"] += data.draw(st.sampled_from(["", " (edited)"]))
        else:
            message["content"][0]["text"] += " (edited)"
        self.send()

    @rule(k=st.integers(1, 4))
    def rewind(self, k: int) -> None:
        del self.messages[max(0, len(self.messages) - k) :]
        self.send()

    @rule()
    def retry(self) -> None:
        self.send()

    def send(self) -> None:
        """One request: read the memo, check it against the model, settle what is new."""
        latest = len(self.messages)
        reused = self.memo.reusable(KEY, self.messages, latest)
        limit = min(len(self.held), latest)
        same = 0
        while same < limit and _json(self.messages[same]) == self.held[same]:
            same += 1
        assert len(reused) == same, (len(reused), same, self.messages[: same + 1], self.held[: same + 1])
        if same < limit:  # a difference inside what the memo held: it forgets from there
            del self.held[same:]
        ir = SimpleNamespace(messages=[*reused, *(object() for _ in range(latest - len(reused)))])
        self.memo.settle(KEY, self.messages, ir, latest)
        if len(self.held) == len(reused):  # the memo extends only a prefix it handed back whole
            self.held += [_json(message) for message in self.messages[len(self.held) : latest]]
        self.requests += 1

    @invariant()
    def the_memo_holds_as_many_messages_as_the_model(self) -> None:
        assert len(self.memo) == len(self.held)


TestMemoMachine = MemoMachine.TestCase
TestMemoMachine.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None)

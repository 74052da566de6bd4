"""I2 on the wire: a message telos sent is re-sent byte for byte on every later turn.

The property is checked here *independently* of the session's own check (``sessions/turns/wire_i2.py``):
each request's JSON is compared with the previous one's, message by message, cache markers aside,
up to where the previous request's moved envelope began (its DROP tail). A hypothesis state
machine grows conversations of every shape an agent sends (string or parts content, tool rounds,
envelopes in the system prompt and in user turns, trailing assistant steps) and replays them through
every engine; the session's own counter must stay at zero too.

``test_reintroduced_openai_shape_flip_is_caught`` puts the old OpenAI behaviour back on purpose
(the envelope appended to a string tool result as a second part) and shows both checks fail.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import telos_wrap.bridge as bridge
from telos_wrap.errors import TelosStageError
from telos_wrap.ir.model import TelosIR
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions.core import Session, runtime_of

MARKERS = ("cache_control", "prompt_cache_breakpoint")
#: A stable system prompt well above every model's minimum cacheable prefix.
STABLE = "You are a careful agent. Follow the house rules below.\n" + "".join(
    f"Rule {i}: answer with care, cite the file you read, keep replies short.\n" for i in range(120)
)
#: (api, engine, model) — every engine, both OpenAI model generations.
ROUTES = [
    ("anthropic", "anthropic", "claude-sonnet-4-5"),
    ("openai_chat", "openai", "gpt-4o"),
    ("openai_chat", "openai", "gpt-5.6"),
    ("openai_chat", "deepseek", "deepseek-chat"),
    ("openai_chat", "vllm", "qwen3"),
    ("openai_chat", "sglang", "qwen3"),
    ("openai_chat", "generic", "local"),
    ("openai_chat", "openrouter", "anthropic/claude-sonnet-4.5"),
    ("openai_chat", "litellm", "claude-sonnet-4-5"),
]


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _unmarked(item) for key, item in value.items() if key not in MARKERS}
    if isinstance(value, list):
        return [_unmarked(item) for item in value]
    return value


def _bytes(message: Any) -> str:
    return json.dumps(_unmarked(message), ensure_ascii=False, separators=(",", ":"))


def _drop_start(text: str, envelopes: list[str]) -> int:
    """Where the first envelope of ``envelopes`` starts in ``text`` (backed off to its part), or -1."""
    found = [text.find(json.dumps(e, ensure_ascii=False)[1:-1]) for e in envelopes]
    found = [index for index in found if index >= 0]
    if not found:
        return -1
    start = min(found)
    if not text.endswith('"text":"', 0, start):
        return start  # inside a string it ends (Chat Completions, string form): cut right there
    part = text.rfind('{"', 0, start)  # the part that holds it, and the comma before that part
    if part > 0 and text[part - 1] == ",":
        part -= 1
    return part if part >= 0 else start


def assert_wire_i2(previous: list[Any], current: list[Any], settled: int, envelopes: list[str]) -> None:
    """Messages ``[0, settled)`` of ``previous`` are re-sent in ``current`` byte for byte (see module doc)."""
    for index in range(settled):
        before, after = _bytes(previous[index]), _bytes(current[index])
        if before == after:
            continue
        cut = _drop_start(before, envelopes)
        assert cut >= 0 and before[:cut] == after[:cut], (
            f"message {index} was re-sent in another form:\n  before {before[:200]}\n  after  {after[:200]}"
        )


def _conversation(body: dict[str, Any], api: str) -> list[Any]:
    messages = body["messages"]
    if api == "anthropic":
        return list(messages)
    lead = 0
    while lead < len(messages) and messages[lead]["role"] in ("system", "developer"):
        lead += 1
    return list(messages[lead:])


class Conversation:
    """An agent conversation in the neutral form both APIs are rendered from."""

    def __init__(self, api: str, model: str) -> None:
        self.api = api
        self.model = model
        self.steps: list[dict[str, Any]] = []
        self.calls = 0

    def user(self, text: str, as_parts: bool, reminder: str | None) -> None:
        if reminder is not None:
            text = f"{text}\n{reminder}"
        content: Any = [{"type": "text", "text": text}] if as_parts else text
        self.steps.append({"role": "user", "content": content})

    def assistant(self, text: str) -> None:
        self.steps.append({"role": "assistant", "content": text})

    def tool_round(self, results: list[str], as_parts: bool) -> None:
        ids = [f"call_{self.calls + i}" for i in range(len(results))]
        self.calls += len(results)
        if self.api == "anthropic":
            self.steps.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": i, "name": "read", "input": {"path": f"/f/{i}"}}
                        for i in ids
                    ],
                }
            )
            self.steps.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": i,
                            "content": [{"type": "text", "text": r}] if as_parts else r,
                        }
                        for i, r in zip(ids, results, strict=True)
                    ],
                }
            )
        else:
            self.steps.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "/f"}'},
                        }
                        for i in ids
                    ],
                }
            )
            for i, r in zip(ids, results, strict=True):
                content: Any = [{"type": "text", "text": r}] if as_parts else r
                self.steps.append({"role": "tool", "tool_call_id": i, "content": content})

    def body(self, system: str) -> dict[str, Any]:
        tools_a = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}}]
        if self.api == "anthropic":
            return {
                "model": self.model,
                "max_tokens": 64,
                "system": system,
                "tools": tools_a,
                "messages": [dict(m) for m in self.steps],
            }
        tools_o = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *(dict(m) for m in self.steps)],
            "tools": tools_o,
        }


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda t: t.strip() != "" and "<" not in t
)


def _one_part(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1 and set(content[0]) == {"type", "text"}:
        return str(content[0]["text"])
    return None


def _flipped(step: dict[str, Any], as_string: bool) -> dict[str, Any]:
    """``step`` with its text-only content (and its tool results') as a string or one text part."""

    def shape(content: Any) -> Any:
        text = _one_part(content)
        if text is None:
            return content
        return text if as_string else [{"type": "text", "text": text}]

    content = step.get("content")
    if step["role"] in ("user", "tool") and _one_part(content) is not None:
        return {**step, "content": shape(content)}
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {
            **step,
            "content": [
                {**b, "content": shape(b["content"])} if b.get("type") == "tool_result" else b
                for b in content
            ],
        }
    return step


class WireI2Machine(RuleBasedStateMachine):
    """Grow a conversation turn by turn; after every request, the wire I2 property must hold."""

    @initialize(route=st.sampled_from(ROUTES), clock_in_system=st.booleans())
    def start(self, route: tuple[str, str, str], clock_in_system: bool) -> None:
        self.api, self.engine, model = route
        self.convo = Conversation(self.api, model)
        self.session = Session(strict=False)
        self.clock = clock_in_system
        self.turn = 0
        self.previous: list[Any] | None = None
        self.previous_settled = 0
        self.envelopes: list[str] = []
        self.reminded: tuple[int, str] | None = None
        self.convo.user("Start the task.", False, None)

    def _send(self) -> None:
        self.turn += 1
        envelope = f"Current time: 2026-11-23 10:{self.turn % 60:02d}:{self.turn // 60:02d}"
        system = STABLE + (envelope + "\n" if self.clock else "")
        _, prepared = runtime_of(self.session).prepare_request(
            self.api, self.convo.body(system), PrepareOptions(engine=self.engine)
        )
        current = _conversation(prepared.body, self.api)
        if self.previous is not None:
            assert_wire_i2(self.previous, current, self.previous_settled, self.envelopes)
        self.previous = current
        self.previous_settled = len(self.convo.steps)
        self.envelopes = [envelope, *self._reminders()]

    def _reminders(self) -> list[str]:
        found = []
        for step in self.convo.steps:
            content = step.get("content")
            texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
            for text in texts:
                if isinstance(text, str) and "<system-reminder>" in text:
                    found.append(text[text.index("<system-reminder>") :])
        return found

    @rule(text=TEXT, as_parts=st.booleans(), reminder=st.booleans())
    def user_turn(self, text: str, as_parts: bool, reminder: bool) -> None:
        self._restore_reminded()
        if self.convo.steps and self.convo.steps[-1]["role"] == "user":
            self.convo.assistant("Noted.")
        tag = f"<system-reminder>turn {self.turn}</system-reminder>" if reminder else None
        self.convo.user(text, as_parts, tag)
        self._send()

    @rule(results=st.lists(TEXT, min_size=1, max_size=3), as_parts=st.booleans())
    def tool_round(self, results: list[str], as_parts: bool) -> None:
        self._restore_reminded()
        self.convo.tool_round(results, as_parts)
        self._send()

    @rule(text=TEXT, flips=st.lists(st.booleans(), min_size=1, max_size=8))
    def careless_user_turn(self, text: str, flips: list[bool]) -> None:
        """A careless harness: history re-serialized (text-only content a string or one text part,
        chosen anew), and a reminder part on the newest turn that is gone again next turn."""
        self._restore_reminded()
        for index, choice in zip(range(len(self.convo.steps)), itertools.cycle(flips)):
            self.convo.steps[index] = _flipped(self.convo.steps[index], choice)
        if self.convo.steps and self.convo.steps[-1]["role"] == "user":
            self.convo.assistant("Noted.")
        reminder = f"<system-reminder>turn {self.turn}, {len(text)} todos</system-reminder>"
        self.convo.steps.append(
            {"role": "user", "content": [{"type": "text", "text": text}, {"type": "text", "text": reminder}]}
        )
        self.reminded = (len(self.convo.steps) - 1, text)
        self._send()

    def _restore_reminded(self) -> None:
        reminded = getattr(self, "reminded", None)
        if reminded is not None:
            index, text = reminded
            self.convo.steps[index] = {"role": "user", "content": text}
            self.reminded = None

    @rule(text=TEXT)
    def assistant_step(self, text: str) -> None:
        # An agent appending its own step after the latest turn (OpenAI: trailing assistant messages).
        self.convo.assistant(text)
        self._send()

    @invariant()
    def telos_saw_no_rewrite(self) -> None:
        assert self.session.stats.telos_rewrites == 0, [b.detail for b in self.session.cache_breaks]


WireI2Machine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWireI2 = WireI2Machine.TestCase


# -- the deliberate regression ------------------------------------------------------------------------


def _old_openai_relocate(original: Callable[..., TelosIR]) -> Callable[..., TelosIR]:
    """The pre-fix behaviour: an envelope after a string tool/user turn joins it as a second part."""

    def relocate(ir: TelosIR, **kwargs: Any) -> TelosIR:
        out = original(ir, **kwargs)
        messages = list(out.messages)
        if out.api != "openai_chat" or len(messages) < 2 or messages[-1].role != "system":
            return out
        target = messages[-2]
        if len(out.messages) == len(ir.messages) or target.role not in ("user", "tool"):
            return out
        merged = target.with_blocks(target.blocks + messages[-1].blocks, "list")
        return replace(out, messages=(*messages[:-2], merged))

    return relocate


@pytest.fixture
def old_openai_flip(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(bridge, "relocate_drop", _old_openai_relocate(bridge.relocate_drop))
    yield


def _tool_loop(session: Session, turns: int) -> list[list[Any]]:
    convo = Conversation("openai_chat", "gpt-4o")
    convo.user("Fix the bug.", False, None)
    sent = []
    for turn in range(turns):
        convo.tool_round([f"output {turn}"], as_parts=False)
        body = convo.body(STABLE + f"Current time: 10:{turn:02d}\n")
        _, prepared = runtime_of(session).prepare_request(
            "openai_chat", body, PrepareOptions(engine="openai")
        )
        sent.append(_conversation(prepared.body, "openai_chat"))
    return sent


def test_tool_loop_resends_string_tool_results_as_strings() -> None:
    session = Session(strict=False)
    sent = _tool_loop(session, 4)
    for previous, current in itertools.pairwise(sent):
        assert_wire_i2(previous, current, len(previous) - 1, [])  # the last one is the envelope message
    assert session.stats.telos_rewrites == 0


@pytest.mark.allow_telos_rewrote
@pytest.mark.usefixtures("old_openai_flip")
def test_reintroduced_openai_shape_flip_is_caught() -> None:
    session = Session(strict=False)
    sent = _tool_loop(session, 4)
    # The independent property fails ...
    with pytest.raises(AssertionError, match="re-sent in another form"):
        assert_wire_i2(sent[0], sent[1], len(sent[0]), ["Current time: 10:00"])
    # ... and so does the session's own check: one telos_rewrote break per tool turn, counted.
    assert session.stats.telos_rewrites == 3
    assert [b.reason for b in session.cache_breaks] == ["telos_rewrote"] * 3
    assert session.cache_breaks[0].where == "messages[2][0]"
    assert "telos_rewrote" in session.explain(1)
    strict = Session(strict=True)
    _tool_loop(strict, 1)
    with pytest.raises(TelosStageError, match=r"wire\.i2"):
        _tool_loop(strict, 2)

"""Sessions that do not just grow (issue 12): a hypothesis state machine over session operations.

Real agents retry a request, rewind, run sibling branches from one prefix, start over with the same
first message, edit an old message in place (a redacted text, a cleared tool result), call tools,
rebuild their history with every JSON key in another order, interleave two conversations, fold and
refresh. The
machine below does all of these, in any order, through the real patched SDK (``strict=True``) and
the engine emulator, for every engine and both wire APIs, and checks after every request:

* **no stage ever fails**: the call does not raise (strict mode raises on any internal failure)
  and ``telos_wrap.failure_counts()`` stays empty;
* **the memo is a cache, never state**: the bytes sent equal, byte for byte, what a fresh process
  sends for the same request from the same durable session state (a new ``Session`` object over a
  copy of the store: no history memo, no prefix tables, no parsed-state cache), and the state it
  writes is the same text;
* **nothing the caller sent is lost**: the content checks of the reliability suite (every
  character accounted for; the only removals and moves are recorded DROP prunes and moves) hold
  for every request of a session without folds or pins.

Budget: CI runs a few examples per engine (seconds). For a deeper local run::

    TELOS_STATEFUL_EXAMPLES=300 TELOS_STATEFUL_STEPS=60 python -m pytest tests/sessions/test_nonlinear.py

To add a wire API (Responses, say), add a ``Wire`` to ``WIRES``: how to build its client and how to
send a conversation with it.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import telos_wrap
from telos_wrap.emulator import Emulator, ManualClock
from telos_wrap.sessions import MemoryStore, Session
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.refresh_io import send_refresh
from telos_wrap.sessions.stores.store import Versioned
from telos_wrap.sessions.turns.folds import FoldError
from tests.sdk_http import EmulatorTransport, sdk_http

from ..reliability.test_properties import check_anthropic_content, check_openai_content, reverse_keys
from .convo import HANDBOOK, RULES

EXAMPLES = int(os.environ.get("TELOS_STATEFUL_EXAMPLES", "8"))
STEPS = int(os.environ.get("TELOS_STATEFUL_STEPS", "25"))
SYSTEM = f"You are the support assistant of Example Corp.\n{RULES}Be concise."


# -- the wires --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """One engine behind one wire API: how to reach it and how to send a conversation."""

    api: str
    engine: str
    base_url: str
    model: str
    make_client: Callable[[str, sdk_http.BaseTransport], Any]
    send: Callable[[Any, str, list[dict[str, Any]]], Any]
    check_content: Callable[[dict[str, Any], Any], None]
    #: The caller's body as the pipeline sees it (for the content check).
    body: Callable[[str, list[dict[str, Any]]], dict[str, Any]]
    #: An assistant step that calls a tool and the tool's result, in this API's shapes (``tool_step``).
    tool_step: Callable[[int, bool, bool], list[dict[str, Any]]]


def _anthropic_client(base_url: str, transport: sdk_http.BaseTransport) -> Any:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _openai_client(base_url: str, transport: sdk_http.BaseTransport) -> Any:
    return openai.OpenAI(
        api_key="sk-test", base_url=base_url, http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _anthropic_body(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"max_tokens": 16, "messages": messages, "model": model, "system": SYSTEM}


def _anthropic_send(client: Any, model: str, messages: list[dict[str, Any]]) -> Any:
    return client.messages.create(model=model, max_tokens=16, system=SYSTEM, messages=messages)


def _openai_body(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": SYSTEM}, *messages], "model": model}


def _openai_send(client: Any, model: str, messages: list[dict[str, Any]]) -> Any:
    return client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": SYSTEM}, *messages]
    )


def _responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as Responses input items (text parts become ``input_text``)."""
    items = []
    for message in messages:
        if "type" in message:  # a function call or its output: already an input item
            items.append(message)
            continue
        content = message["content"]
        if isinstance(content, list):
            content = [{"type": "input_text", "text": part["text"]} for part in content]
        items.append({"role": message["role"], "content": content})
    return items


def _responses_body(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"input": _responses_input(messages), "instructions": SYSTEM, "model": model}


def _responses_send(client: Any, model: str, messages: list[dict[str, Any]]) -> Any:
    return client.responses.create(model=model, instructions=SYSTEM, input=_responses_input(messages))


def _no_content_check(body: dict[str, Any], prepared: Any) -> None:
    """The reliability suite's content checks are written for the two message APIs."""


def _tool_call(n: int) -> tuple[str, dict[str, Any], str]:
    """A tool call's id, its arguments (keys not in sorted order, as a model writes them) and result."""
    arguments = {"order": 1000 + n, "fields": ["status", "refund"], "verbose": n % 2 == 0}
    return f"call_{n:04d}", arguments, f"order {1000 + n}: shipped; refund eligible until day {n % 28 + 1}."


def _big(result: str, big: bool) -> str:
    """A tool result as long as a file read or a command's log (over the ref-pool threshold)."""
    return result + "".join(f"\nlog {i:05d}: step done in {i % 97} ms" for i in range(400)) if big else result


def _anthropic_tool_step(n: int, as_list: bool, big: bool) -> list[dict[str, Any]]:
    call_id, arguments, result = _tool_call(n)
    text = _big(result, big)
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Looking up order {1000 + n}."},
                {"type": "tool_use", "id": call_id, "name": "lookup_order", "input": arguments},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": [{"type": "text", "text": text}] if as_list else text,
                }
            ],
        },
    ]


def _chat_tool_step(n: int, as_list: bool, big: bool) -> list[dict[str, Any]]:
    call_id, arguments, result = _tool_call(n)
    text = _big(result, big)
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps(arguments)},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": [{"type": "text", "text": text}] if as_list else text,
        },
    ]


def _responses_tool_step(n: int, as_list: bool, big: bool) -> list[dict[str, Any]]:
    call_id, arguments, result = _tool_call(n)
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "lookup_order",
            "arguments": json.dumps(arguments),
        },
        {"type": "function_call_output", "call_id": call_id, "output": _big(result, big)},
    ]


def _chat(engine: str, base_url: str, model: str) -> Wire:
    return Wire(
        "openai_chat",
        engine,
        base_url,
        model,
        _openai_client,
        _openai_send,
        check_openai_content,
        _openai_body,
        _chat_tool_step,
    )


WIRES: dict[str, Wire] = {
    "anthropic": Wire(
        "anthropic",
        "anthropic",
        "https://api.anthropic.com",
        "claude-opus-4-8",
        _anthropic_client,
        _anthropic_send,
        check_anthropic_content,
        _anthropic_body,
        _anthropic_tool_step,
    ),
    "openai": _chat("openai", "https://api.openai.com/v1", "gpt-5.6"),
    "deepseek": _chat("deepseek", "https://api.deepseek.com/v1", "deepseek-chat"),
    "vllm": _chat("vllm", "http://gpu-box.internal:8000/v1", "qwen3-8b"),
    "sglang": _chat("sglang", "http://sgl-box.internal:30000/v1", "qwen3-8b"),
    "generic": _chat("generic", "http://llm.example.net/v1", "some-model"),
    "openai-responses": Wire(
        "openai_responses",
        "openai",
        "https://api.openai.com/v1",
        "gpt-5.6",
        _openai_client,
        _responses_send,
        _no_content_check,
        _responses_body,
        _responses_tool_step,
    ),
}
EMULATOR_ROUTES = {
    "gpu-box.internal:8000": "vllm",
    "sgl-box.internal:30000": "sglang",
    "llm.example.net": "openai",
}


# -- recording the bytes and the state ----------------------------------------------------------------


class RecordingTransport(EmulatorTransport):
    """An ``EmulatorTransport`` that keeps every request body exactly as sent."""

    def __init__(self, emulator: Emulator) -> None:
        super().__init__(emulator)
        self.bodies: list[bytes] = []

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        self.bodies.append(request.read())
        return super().handle_request(request)


class RecordingStore(MemoryStore):
    """A ``MemoryStore`` that keeps every state text written."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def compare_and_set(self, session_id: str, expected: int, text: str) -> int | None:
        written = super().compare_and_set(session_id, expected, text)
        if written is not None:
            self.writes.append(text)
        return written


@dataclass(frozen=True)
class Durable:
    """What a session leaves in its store: the state text and the pinned documents."""

    state: Versioned | None
    blobs: dict[str, str]

    @staticmethod
    def of(session: Session) -> Durable:
        session.flush()  # usage this process still holds (it rides along with the next write)
        # Under the key of the session's tenant (docs/sessions.md, "Tenants").
        stored = session.store.load(session.store_key)
        keys = session.state.pins.values() if stored is not None else ()
        return Durable(stored, {key: session.store.get_blob(session.store_key, key) or "" for key in keys})

    def restore(self, session_id: str) -> RecordingStore:
        store = RecordingStore()
        if self.state is not None:
            assert store.compare_and_set(session_id, 0, self.state.text) is not None  # revisions are opaque
        for key, text in self.blobs.items():
            store.put_blob(session_id, key, text)
        store.writes.clear()
        return store


def _visible(text: str) -> dict[str, Any]:
    """A stored state's JSON without the ``applied`` marks (docs/sessions.md, "Outages and several
    workers: the invariant"): everything a later request of the session can read."""
    data = json.loads(text)
    data.pop("applied", None)
    return dict(data)


# -- the conversations --------------------------------------------------------------------------------


def user(n: int, envelope: bool, as_list: bool) -> dict[str, Any]:
    text = f"Question {n}: how do refunds work for order {1000 + n}? " + "Details follow. " * 4
    if envelope:
        text += f"\n<system-reminder>turn {n}, clock 10:{n % 60:02d}</system-reminder>"
    content: Any = [{"type": "text", "text": text}] if as_list else text
    return {"role": "user", "content": content}


def assistant(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"Answer {n}: refunds take fourteen days (section {n % 30})."}


def calls_tool(message: dict[str, Any]) -> bool:
    """An assistant step that calls a tool (its result must follow it)."""
    content = message.get("content")
    return (
        message.get("type") == "function_call"
        or bool(message.get("tool_calls"))
        or (isinstance(content, list) and any(part.get("type") == "tool_use" for part in content))
    )


def redact(message: dict[str, Any], suffix: str) -> None:
    """Change an old message's text in place, as a harness that redacts it or clears a tool result."""
    if "output" in message:  # a Responses function_call_output
        message["output"] = "".join([message["output"], suffix])
        return
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = "".join([content, suffix])
    elif isinstance(content, list) and content:
        part = content[0]
        if part.get("type") == "tool_result":
            inner = part["content"]
            if isinstance(inner, str):
                part["content"] = "".join([inner, suffix])
            else:
                inner[0]["text"] = inner[0]["text"] + suffix
        else:
            part["text"] = part["text"] + suffix
    # A tool call with no text (an OpenAI assistant step, a Responses function_call): left as it is.


def last_prepared(session: Session) -> Any:
    """The session's latest request as this process prepared it (body, plan, IR)."""
    prepared = runtime_of(session)._last_prepared
    assert prepared is not None, "the request was not rewritten"
    return prepared


class SessionsMachine(RuleBasedStateMachine):
    """Two interleaved sessions of one engine, driven by every operation a real agent performs."""

    wire: Wire

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1_000.0)
        self.store = RecordingStore()
        self.transport = RecordingTransport(Emulator(clock=self.clock, routes=EMULATOR_ROUTES))
        self.client = self.wire.make_client(self.wire.base_url, self.transport)
        self.sessions = [self._session(f"nonlinear-{i}", self.store) for i in range(2)]
        self.current = 0
        #: The application's own message lists (the dicts it may edit in place), per session.
        self.history: list[list[dict[str, Any]]] = [[user(0, True, False)], [user(0, False, True)]]
        self.saved: list[list[dict[str, Any]] | None] = [None, None]
        self.counter = 1
        self.sent = False

    def _session(self, session_id: str, store: RecordingStore) -> Session:
        return telos_wrap.session(session_id, engine=self.wire.engine, store=store, clock=self.clock.now)

    def teardown(self) -> None:
        self.client.close()

    # -- sending, and the invariants of every request ------------------------------------------------

    def _send(self, messages: list[dict[str, Any]] | None = None) -> None:
        index = self.current
        if messages is not None:
            self.history[index] = messages
        messages = self.history[index]
        session = self.sessions[index]
        before = Durable.of(session)
        previous = session.state.app
        sent_before, writes_before = len(self.transport.bodies), len(self.store.writes)
        caller_view = copy.deepcopy(messages)
        with session:
            self.wire.send(self.client, self.wire.model, messages)
        assert telos_wrap.failure_counts() == {}
        assert messages == caller_view, "the caller's messages were mutated"
        assert len(self.transport.bodies) == sent_before + 1
        sent = self.transport.bodies[-1]
        written = self.store.writes[writes_before]  # the request's state (one write per call)
        self.sent = True

        # A fresh process: the same durable state, no memo, no tables, no parsed-state cache.
        fresh_store = before.restore(session.store_key)
        fresh_transport = RecordingTransport(Emulator(clock=self.clock, routes=EMULATOR_ROUTES))
        fresh_client = self.wire.make_client(self.wire.base_url, fresh_transport)
        with fresh_client, self._session(session.id, fresh_store) as fresh:
            self.wire.send(fresh_client, self.wire.model, copy.deepcopy(messages))
        assert fresh_transport.bodies == [sent], "the memo changed the bytes sent"
        # The state written, less its writers' ``applied`` marks: a mark names the writing process
        # (unique per writer, so never equal across processes) and carries no model-visible state.
        assert _visible(fresh_store.writes[0]) == _visible(written), "the memo changed the state written"

        state = session.state
        prepared = last_prepared(session)
        assert json.loads(sent) == prepared.body
        # BP-fork only on a request that diverges from the session's previous one, and only on
        # the prefix both share (an append-only request carries no extra marker).
        forks = [bp for bp in prepared.plan.breakpoints if bp.name == "BP-fork"]
        if previous is None or state.app is None or state.app.messages.startswith(previous.messages):
            assert not forks, "BP-fork on an append-only request"
        else:
            old, new = previous.message_hashes(), state.app.message_hashes()
            common = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(new))
            assert all(bp.message is not None and bp.message < common for bp in forks)
        # Settled history is reused as it was bridged: the prunes in it were recorded on the
        # request that settled it. The fresh process lifts everything, so it records them all.
        complete = last_prepared(fresh)
        assert set(prepared.ir.records) <= set(complete.ir.records)
        if not state.pins and not state.range_folds and not state.slug_folds:
            self.wire.check_content(self.wire.body(self.wire.model, caller_view), complete)

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    # -- the operations ---------------------------------------------------------------------------------

    @initialize()
    def first_request(self) -> None:
        self._send()

    @rule(envelope=st.booleans(), as_list=st.booleans())
    def append_turn(self, envelope: bool, as_list: bool) -> None:
        n = self._next()
        self._send([*self.history[self.current], assistant(n), user(n, envelope, as_list)])

    @rule(as_list=st.booleans(), big=st.booleans())
    def tool_step(self, as_list: bool, big: bool) -> None:
        """The model called a tool; the harness sends its result (a long one: a file or a log)."""
        self._send([*self.history[self.current], *self.wire.tool_step(self._next(), as_list, big)])

    @rule()
    def rebuild_with_keys_reversed(self) -> None:
        """The harness rebuilds its history from its own objects: equal messages, every key order new."""
        self._send(reverse_keys(self.history[self.current]))

    @rule(copied=st.booleans())
    def retry(self, copied: bool) -> None:
        """The same request again (after a 529, say): the same objects, or an equal copy."""
        messages = self.history[self.current]
        self._send(copy.deepcopy(messages) if copied else messages)

    @rule(k=st.integers(1, 4))
    def rewind(self, k: int) -> None:
        messages = self.history[self.current]
        self._send(messages[: max(1, len(messages) - 2 * k)])

    @rule(at=st.integers(0, 20), envelope=st.booleans())
    def branch(self, at: int, envelope: bool) -> None:
        """A sibling of an earlier user turn; the branch it leaves is kept to come back to."""
        messages = self.history[self.current]
        cut = 2 * (at % ((len(messages) + 1) // 2))
        while cut > 0 and calls_tool(messages[cut - 1]):
            cut -= 2  # a new user turn never follows a tool call without its result
        self.saved[self.current] = messages
        self._send([*messages[:cut], user(self._next(), envelope, False)])

    @precondition(lambda self: self.saved[self.current] is not None)
    @rule()
    def continue_sibling(self) -> None:
        """Back to the branch left by ``branch`` (the two alternate from their common prefix)."""
        other = self.saved[self.current]
        assert other is not None
        self.saved[self.current] = self.history[self.current]
        n = self._next()
        self._send([*other, assistant(n), user(n, True, False)])

    @rule()
    def shrink_to_first(self) -> None:
        """A new task that starts with the same first message (the same implicit conversation)."""
        self._send(self.history[self.current][:1])

    @rule(at=st.integers(0, 40), suffix=st.sampled_from([" (edited)", " [redacted]", ""]))
    def edit_in_place(self, at: int, suffix: str) -> None:
        """Redact an old message: the same dict, its text changed (``""``: the same text, a new str)."""
        messages = self.history[self.current]
        if len(messages) < 2:
            return
        redact(messages[at % (len(messages) - 1)], suffix)
        self._send()

    @rule(append=st.booleans())
    def switch_session(self, append: bool) -> None:
        self.current = 1 - self.current
        if append:
            self.append_turn(envelope=True, as_list=False)
        else:
            self._send()

    @rule(start=st.integers(0, 10), length=st.integers(1, 4))
    def fold_range(self, start: int, length: int) -> None:
        session = self.sessions[self.current]
        try:
            session.fold(message_range=(start, start + length), summary=f"Summary of {length} messages.")
        except FoldError:
            return  # an invalid range is refused before anything is recorded
        self._send()

    @rule()
    def pin_handbook(self) -> None:
        session = self.sessions[self.current]
        if "handbook" in session.state.pins:
            session.fold(slugs=["handbook"], summary="Handbook: refunds within fourteen days.")
        else:
            session.pin("handbook", HANDBOOK)
        self._send()

    @rule(seconds=st.sampled_from([30, 250, 290, 400]))
    def wait_and_refresh(self, seconds: float) -> None:
        """Time passes; on Anthropic the session may send a keep-alive (``max_tokens: 0``)."""
        self.clock.advance(seconds)
        if self.wire.api != "anthropic":
            return
        session = self.sessions[self.current]
        decision, _ = send_refresh(session, self.client)
        assert telos_wrap.failure_counts() == {}
        if decision.send:
            assert json.loads(self.transport.bodies[-1])["max_tokens"] == 0

    @invariant()
    def no_failures(self) -> None:
        assert telos_wrap.failure_counts() == {}


def machine_for(name: str) -> type[SessionsMachine]:
    return type(f"SessionsMachine_{name}", (SessionsMachine,), {"wire": WIRES[name]})


@pytest.mark.parametrize("name", sorted(WIRES))
def test_sessions_that_do_not_just_grow(name: str, patched: None) -> None:
    run_state_machine_as_test(
        machine_for(name),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# -- regressions found by the machine (and the issue) -----------------------------------------------------


def conversation(turns: int) -> list[dict[str, Any]]:
    """One conversation ``turns`` exchanges deep, every user turn carrying an envelope (DROP)."""
    messages = [user(0, True, False)]
    for n in range(1, turns + 1):
        messages += [assistant(n), user(n, True, False)]
    return messages


@pytest.mark.parametrize("depths", [(3, 1, 4), (3, 2, 4), (2, 0, 3), (4, 1, 1, 4, 2, 5)])
@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_deep_then_shallow_then_deeper(name: str, depths: tuple[int, ...], patched: None) -> None:
    """Issue 12: 3 turns deep, back to 1, then 4 deep raised StopIteration in the Anthropic plan.

    The shallower request reused part of the memo; the engine's plan table got rows for *its*
    latest turn (holding a DROP envelope) at indices the memo still held for the deeper one, and
    the deeper request trusted them. Implicit session, as the issue's user had it.
    """
    wire = WIRES[name]
    transport = RecordingTransport(Emulator(routes=EMULATOR_ROUTES))
    with wire.make_client(wire.base_url, transport) as client:
        for depth in depths:
            messages = conversation(depth)
            wire.send(client, wire.model, messages)
            assert telos_wrap.failure_counts() == {}
            stateless = telos_wrap.pipeline.prepare(
                wire.api,
                wire.body(wire.model, copy.deepcopy(messages)),
                telos_wrap.pipeline.PrepareOptions(engine=wire.engine),
            )
            assert json.loads(transport.bodies[-1])["messages"] == stateless.body["messages"]


#: Sequences the machine found against the code before issue 12 (all but the last failed there).
FOUND: dict[str, list[tuple[str, dict[str, Any]]]] = {
    # The Anthropic plan trusted rows of a shorter request: StopIteration in strict mode.
    "rewind-then-grow": [("append_turn", {"envelope": True, "as_list": False})] * 3
    + [("rewind", {"k": 2}), ("append_turn", {"envelope": True, "as_list": False})] * 2,
    # An old message edited in place: its hash as the application sent it came from the memo's
    # bridged form (envelope pruned), so the state differed from a fresh process's.
    "edit-an-old-message": [
        ("append_turn", {"envelope": False, "as_list": False}),
        ("edit_in_place", {"at": 1, "suffix": " (edited)"}),
    ],
    # Sibling branches alternating: wire rows of one branch served to the other.
    "siblings": [
        ("append_turn", {"envelope": True, "as_list": True}),
        ("append_turn", {"envelope": False, "as_list": False}),
        ("branch", {"at": 1, "envelope": True}),
        ("continue_sibling", {}),
        ("continue_sibling", {}),
        ("retry", {"copied": True}),
    ],
    "interleaved-with-a-pin": [
        ("switch_session", {"append": False}),
        ("pin_handbook", {}),
        ("switch_session", {"append": True}),
        ("switch_session", {"append": False}),
        ("switch_session", {"append": False}),
        ("edit_in_place", {"at": 9, "suffix": " (edited)"}),
    ],
    # Back to turn 0, then the branch left there again: the memo still held that branch, so its
    # messages came back settled (bridged: envelopes pruned), and the state's record of the
    # messages that carried an envelope (``AppPrint.dropped``) missed theirs.
    "siblings-from-turn-0": [
        ("append_turn", {"envelope": True, "as_list": False}),
        ("append_turn", {"envelope": True, "as_list": False}),
        ("branch", {"at": 0, "envelope": False}),
        ("continue_sibling", {}),
    ],
    "shrink-to-first-and-back": [
        ("append_turn", {"envelope": True, "as_list": False}),
        ("append_turn", {"envelope": True, "as_list": False}),
        ("shrink_to_first", {}),
        ("retry", {"copied": False}),
        ("append_turn", {"envelope": True, "as_list": False}),
    ],
}


@pytest.mark.parametrize("sequence", sorted(FOUND))
@pytest.mark.parametrize("name", sorted(WIRES))
def test_found_sequences(name: str, sequence: str, patched: None) -> None:
    machine = machine_for(name)()
    try:
        machine.first_request()
        for operation, arguments in FOUND[sequence]:
            getattr(machine, operation)(**arguments)
            machine.no_failures()
    finally:
        machine.teardown()

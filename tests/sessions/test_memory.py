"""A worker that runs for weeks (issue 36): what an idle conversation costs, and every bound in bytes.

An idle conversation costs hashes, positions and small records; a text many conversations send is
held once (``ir.shared``); every per-process table that grows with traffic is bounded in bytes.
The memory figures are counted with tracemalloc (deterministic for a code path), never timed.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap import failopen
from telos_wrap.errors import TelosStageError
from telos_wrap.ir.shared import BoundedMemo, SharedTexts, shared_texts
from telos_wrap.lift import user_split
from telos_wrap.lift.user_split import split_text
from telos_wrap.patch import calls
from telos_wrap.sessions import MemoryStore, live, registry, set_memory_limits
from telos_wrap.sessions.core import runtime_of
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.learning.digests import _block_prints
from tests.canned import anthropic_message, json_response
from tests.sdk_http import sdk_http

MODEL = "claude-opus-5"
#: An agent's system prompt: ~50 KB of rules (agents' prompts are 20-60 KB).
PROMPT = "".join(
    f"Rule {i}: quote the order record verbatim and never guess a delivery date for class {i % 17}.\n"
    for i in range(520)
)
REPLY = json.dumps(
    anthropic_message(
        {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 0,
        },
        id="msg_mem",
        model=MODEL,
    )
).encode()


class Recording:
    """A vendor that answers at once and keeps the bodies only when asked to."""

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self.bodies: list[bytes] = []

    def __call__(self, request: Any) -> Any:
        if self.keep:
            self.bodies.append(bytes(request.read()))
        return json_response(REPLY)


@pytest.fixture
def vendor() -> Recording:
    return Recording()


@pytest.fixture
def client(vendor: Recording) -> Iterator[anthropic.Anthropic]:
    telos_wrap.patch(strict=True)
    try:
        with anthropic.Anthropic(
            api_key="test", http_client=sdk_http.Client(transport=sdk_http.MockTransport(vendor))
        ) as sdk:
            yield sdk
    finally:
        telos_wrap.unpatch()


@pytest.fixture
def small_tables() -> Iterator[None]:
    """Tables small enough to be full after a few hundred conversations (the steady state of a worker)."""
    previous = set_memory_limits(implicit_sessions=32)
    pending = calls._PENDING_LIMIT
    calls._PENDING_LIMIT = 64
    try:
        yield
    finally:
        set_memory_limits(implicit_sessions=previous["implicit_sessions"])
        calls._PENDING_LIMIT = pending


def conversation(client: anthropic.Anthropic, i: int, *, turns: int = 2, **extra: Any) -> None:
    """The issue's conversation: implicit, a shared prompt with a clock line that changes per call."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Where is order {i}?"}]
    for turn in range(turns):
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            system=f"{PROMPT}Current time: 2026-11-26 09:{i % 60:02d}:{turn:02d}",
            messages=history,
            **extra,
        )
        history = [
            *history,
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": f"item {turn}?"},
        ]


def test_telos_holds_one_copy_of_a_prompt_many_conversations_share(
    client: anthropic.Anthropic, small_tables: None
) -> None:
    conversation(client, 0)  # process-wide tables first
    gc.collect()
    tracemalloc.start(10)
    try:
        for i in range(1, 60):
            conversation(client, i)
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # Every live block that could hold the prompt (the caller's strings were all dropped).
    copies = [trace for trace in snapshot.traces if trace.size >= len(PROMPT) * 0.9]
    where = "\n\n".join("\n".join(trace.traceback.format()[-6:]) for trace in copies)
    assert len(copies) <= 1, f"{len(copies)} copies of the prompt held:\n{where}"


def _sessions_held() -> int:
    """How many sessions the process holds until they write their usage to their own stores."""
    return len(live.held())


def test_an_idle_conversation_costs_a_few_kilobytes(client: anthropic.Anthropic, small_tables: None) -> None:
    # Sessions other tests left waiting to write usage to their own stores are not this test's.
    held_before = _sessions_held()
    # Traced from the start: what a table lets go is subtracted too (not only what it newly holds).
    tracemalloc.start()
    try:
        for i in range(150):  # every bounded table full: the steady state
            conversation(client, i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(150, 450):
            conversation(client, i)
        gc.collect()
        per_conversation = (tracemalloc.get_traced_memory()[0] - before) / 300
    finally:
        tracemalloc.stop()
    # The default store keeps each conversation's state (hashes, positions, counters): ~1.5 KB here.
    assert per_conversation <= 5_000, f"{per_conversation:.0f} bytes per additional conversation"
    assert len(registry._implicit) <= 32
    assert _sessions_held() - held_before <= 32, "sessions pushed out of the implicit table are let go"


def test_cooling_a_session_changes_no_byte_that_is_sent() -> None:
    """The same conversations, interleaved, with every session cooled between its turns and without."""

    def run(session_texts: int) -> list[bytes]:
        vendor = Recording(keep=True)
        previous = set_memory_limits(session_texts=session_texts)
        telos_wrap.patch(strict=True)
        try:
            with anthropic.Anthropic(
                api_key="test", http_client=sdk_http.Client(transport=sdk_http.MockTransport(vendor))
            ) as sdk:
                sessions = [telos_wrap.session(f"cool-{n}") for n in range(4)]
                histories: list[list[dict[str, Any]]] = [[] for _ in sessions]
                for turn in range(5):
                    for n, sess in enumerate(sessions):
                        histories[n] += [{"role": "user", "content": f"question {turn} of {n} " * 40}]
                        with sess:
                            sdk.messages.create(
                                model=MODEL,
                                max_tokens=8,
                                system=f"{PROMPT}Current time: 09:00:{turn:02d}",
                                messages=histories[n],
                            )
                        histories[n] += [{"role": "assistant", "content": f"answer {turn}"}]
                if session_texts == 1:
                    assert all(
                        runtime_of(sess)._last_request is None and len(runtime_of(sess)._memo) == 0
                        for sess in sessions[:-1]
                    )
                else:
                    assert all(runtime_of(sess)._last_request is not None for sess in sessions)
        finally:
            telos_wrap.unpatch()
            set_memory_limits(session_texts=previous["session_texts"])
        return vendor.bodies

    with_memo = run(64 << 20)
    cooled = run(1)
    assert cooled == with_memo
    assert len(cooled) == 20


def test_the_warm_table_is_bounded_in_bytes(client: anthropic.Anthropic) -> None:
    previous = set_memory_limits(session_texts=300_000)
    try:
        for i in range(40):
            with telos_wrap.session(f"warm-{i}"):
                conversation(client, i)
        sessions, held = live.warm_bytes()
        assert held <= 300_000 and 0 < sessions < 40
    finally:
        set_memory_limits(session_texts=previous["session_texts"])


def test_the_memory_store_is_bounded_in_bytes() -> None:
    store = MemoryStore(max_bytes=200_000)
    for i in range(1_000):
        state = SessionState(session_id=f"s-{i}", requests=i)
        store.swap_state(f"s-{i}", 0, state)
        store.put_blob(f"s-{i}", "k", "x" * 100)
    assert store.bytes_held <= 200_000
    assert 0 < len(store) < 1_000
    assert store.load("s-999") is not None  # the most recent ones are kept
    assert store.load("s-0") is None  # the least recently used are forgotten first
    # A load encodes the state once and keeps its text instead (never both), counted again.
    held = store.bytes_held
    assert (
        store.load("s-998") is not None and store.bytes_held <= 200_000 and store.bytes_held >= held - 5_000
    )
    store.delete("s-999")
    assert store.bytes_held < held


def test_a_pinned_document_is_held_once_by_every_session_that_pins_it() -> None:
    store = MemoryStore()
    document = "A long contract clause. " * 4_000
    for i in range(10):
        store.put_blob(f"s-{i}", "k", "".join(list(document)))  # ten equal, distinct strings
    texts = {id(store._entries[f"s-{i}"].blobs["k"]) for i in range(10)}
    assert len(texts) == 1


def test_shared_texts_are_one_object_and_bounded() -> None:
    table = SharedTexts(max_bytes=10_000, min_chars=10)
    first = "y" * 2_000
    again = "".join(["y"] * 2_000)
    assert again is not first and table.share(again) is table.share(first) is again
    assert table.share("short") == "short" and len(table) == 1
    for n in range(20):
        table.share(str(n) * 1_000)
    assert table.bytes_held <= 10_000
    assert table.share(first) is first  # pushed out: shared again from now on (a value, never lost)


def test_a_bounded_memo_counts_bytes() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(str.upper, max_entries=1_000, max_bytes=50_000)
    for n in range(200):
        assert memo(str(n) * 500) == (str(n) * 500).upper()
    assert memo.bytes_held <= 50_000 and len(memo) < 200


def test_the_split_memo_keeps_no_caller_text_and_is_bounded() -> None:
    user_split._split_memo.cache_clear()
    for n in range(300):
        text = f"{PROMPT}Current time: 09:00:{n:02d}"
        split = split_text(text, with_fold=False)
        assert "".join(span.text for span in split.spans) == text
    assert user_split._split_memo.bytes_held <= user_split._SPLIT_MEMO_BYTES
    # The system text is held once, shared; the caller's 300 strings are not kept.
    assert shared_texts.holds(split_text(f"{PROMPT}Current time: 10:00", with_fold=False).spans[0].text)
    assert user_split._split_memo.bytes_held < 300 * 1_000  # ~250 bytes an entry, no text of 50 KB


def test_print_memos_are_bounded_in_bytes() -> None:
    from telos_wrap.sessions.learning.volatility import fingerprint

    for n in range(100):
        fingerprint([f"{n}\n" + PROMPT])
    assert _block_prints.bytes_held <= _block_prints.max_bytes


def test_failopen_remembers_a_bounded_number_of_call_sites(caplog: pytest.LogCaptureFixture) -> None:
    failopen.reset_failures()
    try:
        for n in range(failopen._WARNED_LIMIT + 200):
            failopen.report_failure(TelosStageError(f"stage-{n}", ValueError("x")), strict=False)
        assert len(failopen._warned) == failopen._WARNED_LIMIT
    finally:
        failopen.reset_failures()


def test_the_pending_hints_table_is_bounded(client: anthropic.Anthropic, small_tables: None) -> None:
    for i in range(100):
        conversation(client, i, turns=1, telos_hint={"ttl": "1h"})
    assert len(calls._pending) <= calls._PENDING_LIMIT

"""The output filter across a conversation (docs/output-filter.md): a result filtered once is sent
with the same bytes on every later request — through the real SDK, the emulator reading the whole
earlier prefix, a mode change, a telos upgrade, a restarted process and a second process on Redis."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap import filters
from telos_wrap.failopen import failure_counts
from telos_wrap.sessions import MemoryStore, RedisStore
from telos_wrap.sessions.durable.state import SessionState
from tests.stores import key_of

from .convo import RecordingTransport
from .filter_convo import REQUESTS, STEPS, send, tool_results


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _message_bytes(body: bytes) -> list[str]:
    return [json.dumps(_unmarked(m), sort_keys=True) for m in json.loads(body)["messages"]]


def assert_sent_alike(bodies: list[bytes]) -> None:
    """Every message a request sent is re-sent byte for byte (markers aside) by every later one."""
    sent = [_message_bytes(body) for body in bodies]
    for index in range(1, len(sent)):
        earlier, now = sent[index - 1], sent[index]
        assert now[: len(earlier)] == earlier, f"request {index} re-sent an earlier message differently"


def _conversation(
    client: anthropic.Anthropic, sess: telos_wrap.Session, stop: int = REQUESTS, **extra: Any
) -> None:
    with sess:
        for request in range(stop):
            send(client, request, **extra)


def test_a_filtered_result_is_sent_alike_on_every_later_request(
    claude: anthropic.Anthropic, transport: RecordingTransport
) -> None:
    telos_wrap.patch(output_filter="aggressive")
    sess = telos_wrap.session("agent", store=MemoryStore())
    _conversation(claude, sess)
    bodies = transport.bodies
    assert len(bodies) == REQUESTS
    assert_sent_alike(bodies)
    last = tool_results(bodies[-1])
    originals = {f"toolu_{step:02d}": output for step, (_, output) in enumerate(STEPS)}
    # Tests, installs, git and listings lost their noise; the file read and the diff went whole.
    for step in (0, 1, 2, 4, 6):
        assert len(last[f"toolu_{step:02d}"]) < len(originals[f"toolu_{step:02d}"])
    assert last["toolu_03"] == originals["toolu_03"] and last["toolu_07"] == originals["toolu_07"]
    assert "tests/test_orders.py::test_refund_rounding FAILED" in last["toolu_00"]
    # The second identical listing is a pointer to the first.
    assert last["toolu_05"] == filters.repeat_pointer(originals["toolu_05"])
    # The emulator read every earlier prefix: no cache break, and the cache keeps hitting.
    assert sess.cache_breaks == ()
    stats = sess.stats
    assert stats.filtered_outputs == 6
    removed = sum(len(originals[k]) - len(v) for k, v in last.items())
    assert stats.filter_tokens_removed == removed // 4
    assert stats.hit_ratio is not None and stats.hit_ratio > 0.6
    text = sess.explain(REQUESTS - 1)
    assert "output-filtered" in text and "aggressive/1" in text and "bash result" in text
    assert "test_refund_rounding" not in sess.explain(1)  # counts and sizes, never the text


def test_off_by_default_sends_every_result_as_built(
    claude: anthropic.Anthropic, transport: RecordingTransport
) -> None:
    sess = telos_wrap.session("plain", store=MemoryStore())
    _conversation(claude, sess)
    last = tool_results(transport.bodies[-1])
    assert last == {f"toolu_{step:02d}": output for step, (_, output) in enumerate(STEPS)}
    assert "filtered" not in sess.state.to_json()


def test_a_mode_change_an_upgrade_and_a_restart_never_refilter_a_sent_result(
    claude: anthropic.Anthropic, transport: RecordingTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    telos_wrap.patch(output_filter="aggressive")
    _conversation(claude, telos_wrap.session("agent", store=store), stop=4)
    # A telos upgrade: "aggressive" now means another behaviour (version 2); the process restarts
    # (a new Session object, no memo) and the application turns the filter to "safe" for the rest.
    monkeypatch.setitem(filters.BUILTIN, "aggressive/2", lambda text, command, tool: text[:50])
    monkeypatch.setitem(filters._CURRENT, "aggressive", "aggressive/2")
    later = telos_wrap.session("agent", store=store, output_filter="safe")
    with later:
        for request in range(4, REQUESTS):
            send(claude, request)
    bodies = transport.bodies
    assert_sent_alike(bodies)
    first = tool_results(bodies[3])
    last = tool_results(bodies[-1])
    for key, value in first.items():
        assert last[key] == value  # the first bytes, whatever the mode and version are by then
    # New results follow the new mode: the jest output gets safe's edits only (none apply here).
    assert last["toolu_06"] == STEPS[6][1]
    assert later.cache_breaks == ()
    # And turning the filter off keeps the recorded ones too.
    with telos_wrap.session("agent", store=store, output_filter="off"):
        send(claude, REQUESTS - 1)
    assert tool_results(transport.bodies[-1]) == last


def test_a_caller_filter_that_raises_sends_the_result_whole_and_counts_a_fallback(
    claude: anthropic.Anthropic, transport: RecordingTransport
) -> None:
    def broken(text: str) -> str:
        raise RuntimeError("boom")

    mine = telos_wrap.OutputFilter("mine", 1, commands={"pytest": broken}, then="off")
    with telos_wrap.session("agent", store=MemoryStore(), output_filter=mine):
        send(claude, 1)
    assert tool_results(transport.bodies[-1])["toolu_00"] == STEPS[0][1]
    assert failure_counts().get("output_filter") == 1
    shorter = telos_wrap.OutputFilter("mine", 2, commands={"pytest": lambda text: text[-300:]})
    with telos_wrap.session("agent2", store=MemoryStore()) as sess:
        send(claude, 1, telos_hint={"output_filter": shorter})
        send(claude, 2, telos_hint={"output_filter": shorter})
    assert tool_results(transport.bodies[-1])["toolu_00"] == STEPS[0][1][-300:]
    assert list(sess.state.filtered.values()) == [f"user:mine/2|{len(STEPS[0][1])}|300"]
    assert_sent_alike(transport.bodies[-2:])


@pytest.mark.redis
def test_a_second_process_continuing_from_redis_sends_the_same_bytes(
    redis_url: str,
    redis_prefix: str,
    tmp_path: Path,
    claude: anthropic.Anthropic,
    transport: RecordingTransport,
) -> None:
    telos_wrap.patch(output_filter="aggressive")
    half = REQUESTS // 2
    _conversation(
        claude, telos_wrap.session("shared", store=RedisStore(redis_url, prefix=redis_prefix)), stop=half
    )
    worker = Path(__file__).resolve().parent / "filter_convo.py"
    out = tmp_path / "worker.json"
    done = subprocess.run(
        [
            sys.executable,
            str(worker),
            redis_url,
            redis_prefix,
            "shared",
            str(half),
            str(REQUESTS),
            str(out),
            "aggressive",
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    theirs = [base64.b64decode(item) for item in json.loads(out.read_text())]
    mine = transport.bodies[:half]
    # The same conversation in one process, on a memory store.
    transport.bodies.clear()
    _conversation(claude, telos_wrap.session("shared", store=MemoryStore()))
    alone = transport.bodies
    assert mine + theirs == alone
    stored = RedisStore(redis_url, prefix=redis_prefix).load(key_of("shared"))  # the calls' tenant
    assert stored is not None
    state = SessionState.loads(stored.text)
    assert len(state.filtered) == 6 and all("|" in value for value in state.filtered.values())
    assert not any("refund" in key for key in state.filtered)  # digests, never text


def test_a_result_first_seen_in_a_request_below_the_minimum_is_sent_alike_later(
    claude: anthropic.Anthropic, transport: RecordingTransport
) -> None:
    """A request below the model's minimum goes out as built, but the session's memo keeps its
    messages as bridged: the result is recorded then, so every process sends it alike afterwards."""
    status = next(output for command, output in STEPS if command == "git status")
    tests = STEPS[0][1]

    def body(results: list[tuple[str, str]]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix it."}]
        for n, (command, output) in enumerate(results):
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": command}}
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": output}],
                }
            )
        return {"model": "claude-opus-4-8", "max_tokens": 8, "system": "Be brief.", "messages": messages}

    store = MemoryStore()
    telos_wrap.patch(output_filter="aggressive")
    with telos_wrap.session("small", store=store) as sess:
        claude.messages.create(**body([("git status", status)]))
        claude.messages.create(**body([("git status", status), ("pytest -v", tests)]))
    assert tool_results(transport.bodies[0])["t0"] == status  # below the minimum: as built
    sent = tool_results(transport.bodies[1])["t0"]
    assert sent != status and len(sess.state.filtered) == 2
    with telos_wrap.session("small", store=store):  # a restarted process: no memo, the record
        claude.messages.create(**body([("git status", status), ("pytest -v", tests)]))
    assert transport.bodies[2] == transport.bodies[1]

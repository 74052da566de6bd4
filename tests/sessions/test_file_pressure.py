"""The context policy folds ``<file path=…>`` blocks (issue 47): the seeds' rule says a file block
registered under its path can be replaced whole by ``s.fold(slugs=[path])`` *and the pressure
policy*. The planner takes a file block as a candidate only before the kept window and the current
turn, never the latest copy of a file the kept window still names, and only where the rewrite it
causes pays; the fold is recorded (the same bytes for every worker and after a restart)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.ir.context import ContextPolicy
from telos_wrap.lift.anthropic_messages import lift_anthropic_messages
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.turns.clearing import apply_clear_folds, file_placeholder, folds_of, measure
from telos_wrap.sessions.turns.files import file_key
from telos_wrap.sessions.turns.pressure import Unit, plan_folds
from tests.filters.corpus import entries, visible
from tests.sdk_http import sdk_http

from .convo import RecordingTransport

# -- the planner, pure -------------------------------------------------------------------------------


def _result(message: int, tokens: int = 1_000) -> Unit:
    return Unit(
        message=message,
        call=f"c{message}",
        name="bash",
        tokens=tokens,
        offset=message * 1_000,
        use=message - 1,
    )


def _file(message: int, path: str, tokens: int = 2_000, refs_until: int = -1, copy_until: int = -1) -> Unit:
    return Unit(
        message=message,
        call=file_key(path),
        name=path,
        tokens=tokens,
        offset=message * 1_000,
        refs_until=refs_until,
        copy_until=copy_until,
    )


POLICY = ContextPolicy(trigger_tokens=10_000, keep=2)


def test_a_file_before_the_kept_window_is_folded_with_the_old_results() -> None:
    units = [_file(0, "src/app.py"), *(_result(m) for m in (2, 4, 6, 8))]
    decision = plan_folds(units, 20_000, 9, POLICY, None, turn=1_000)
    assert [u.key() for u in decision.fold] == [(0, file_key("src/app.py")), (2, "c2"), (4, "c4")]
    assert "1 file block(s)" in decision.note and "2 tool result(s)" in decision.note
    assert "src/app.py" not in decision.note  # counts, never the caller's text


@pytest.mark.parametrize(
    ("unit", "why"),
    [
        (_file(0, "src/app.py", refs_until=7), "the kept window names it (an edit of that file)"),
        (_file(5, "src/app.py"), "it is in the kept window (from the oldest kept call, message 5)"),
        (_file(9, "src/app.py"), "it is in the current turn"),
    ],
)
def test_a_file_the_agent_still_needs_stays(unit: Unit, why: str) -> None:
    units = sorted([unit, *(_result(m) for m in (2, 4, 6, 8))], key=lambda u: u.message)
    decision = plan_folds(units, 20_000, 9, POLICY, None, turn=1_000)
    assert unit.key() not in {u.key() for u in decision.fold}, why
    assert decision.fold  # the old results still go


def test_a_stale_copy_goes_when_a_later_copy_survives() -> None:
    # Message 0 carries src/app.py, message 6 carries it again in its text, message 8 edits it.
    old = _file(0, "src/app.py", refs_until=8, copy_until=10)  # 10: the message count (a text copy)
    units = [old, _result(2), _result(4), _file(6, "src/app.py", refs_until=8), _result(8)]
    decision = plan_folds(units, 20_000, 9, ContextPolicy(trigger_tokens=10_000, keep=1), None, turn=1_000)
    keys = {u.key() for u in decision.fold}
    assert old.key() in keys and (6, file_key("src/app.py")) not in keys


@pytest.mark.parametrize(("copy_at", "folded"), [(4, False), (6, True)])
def test_a_copy_in_a_tool_result_counts_only_while_that_result_is_kept(copy_at: int, folded: bool) -> None:
    """The agent read the file again with a tool (result at ``copy_at``) and edits it now: the first
    copy may go only if the re-read is still in the kept window (results 6 and 8, from call 5)."""
    first = _file(0, "src/app.py", refs_until=8, copy_until=copy_at)
    units = [first, *(_result(m) for m in (2, 4, 6, 8))]
    decision = plan_folds(units, 20_000, 9, POLICY, None, turn=1_000)
    assert (first.key() in {u.key() for u in decision.fold}) is folded


def test_a_thinking_only_policy_leaves_files_alone() -> None:
    units = [_file(0, "src/app.py"), *(_result(m) for m in (2, 4, 6, 8))]
    policy = ContextPolicy(trigger_tokens=10_000, clear_results=False, clear_thinking=1)
    assert not plan_folds(units, 20_000, 9, policy, None, turn=1_000).fold


def test_an_early_file_waits_while_the_rewrite_it_causes_does_not_pay() -> None:
    # The file sits far before the results the step clears: folding it with them writes ~40,000
    # more tokens once (40,000 x 1.15 units) to save 500 tokens a request (50 units) for ~3 requests.
    small = Unit(message=0, call=file_key("a.md"), name="a.md", tokens=500, offset=0)
    filler = Unit(message=2, call="keep", name="plan", tokens=40_000, offset=1_000)
    units = [small, filler, *(_result(m) for m in range(50, 60, 2))]
    policy = ContextPolicy(trigger_tokens=60_000, keep=2, exclude_tools=("plan",))
    decision = plan_folds(units, 62_000, 59, policy, None, turn=1_000)
    assert decision.fold and small.key() not in {u.key() for u in decision.fold}
    # ... unless the request would not fit the model's window at all.
    forced = plan_folds(units, 62_000, 59, policy, 61_000, turn=1_000)
    assert small.key() in {u.key() for u in forced.fold}
    # A large file pays for the same rewrite: it joins the step.
    large = Unit(message=0, call=file_key("a.md"), name="a.md", tokens=20_000, offset=0)
    joined = plan_folds([large, *units[1:]], 62_000, 59, policy, None, turn=1_000)
    assert large.key() in {u.key() for u in joined.fold}


def test_files_alone_fold_in_one_step_past_the_trigger_and_clear_at_least_holds() -> None:
    units = [_file(0, "a.py", 3_000), _file(2, "b.py", 3_000)]
    policy = ContextPolicy(trigger_tokens=5_000, keep=0, clear_at_least=7_000)
    waiting = plan_folds(units, 8_000, 5, policy, None, turn=500)
    assert not waiting.fold and "clear_at_least" in waiting.note
    policy = ContextPolicy(trigger_tokens=5_000, keep=0, clear_at_least=5_000)
    assert len(plan_folds(units, 8_000, 5, policy, None, turn=500).fold) == 2


@settings(max_examples=80, deadline=None)
@given(
    layout=st.lists(st.sampled_from(["result", "file", "named", "copied", "text"]), min_size=1, max_size=30),
    keep=st.integers(0, 4),
    turn=st.integers(0, 3_000),
    total=st.integers(5_000, 80_000),
)
def test_the_plan_never_folds_a_file_in_the_window_or_one_the_window_names(
    layout: list[str], keep: int, turn: int, total: int
) -> None:
    units, current = [], len(layout)
    for message, kind in enumerate(layout):
        if kind == "result":
            units.append(_result(message, 800))
        elif kind in ("file", "named", "copied"):
            named = current if kind != "file" else -1
            copied = current - 1 if kind == "copied" else -1  # a copy in the last message's result
            units.append(_file(message, f"f{message}.py", 1_500, refs_until=named, copy_until=copied))
    policy = ContextPolicy(trigger_tokens=4_000, keep=keep)
    decision = plan_folds(units, total, current, policy, None, read=0.1, write=1.25, turn=turn)
    results = [u for u in units if not u.file]
    kept = results[max(0, len(results) - keep) :] if keep else []
    start = min([current, *(u.use for u in kept)])
    for unit in decision.fold:
        if unit.file:
            assert unit.message < start and (unit.refs_until < start or unit.copy_until >= start)
    assert decision == plan_folds(units, total, current, policy, None, read=0.1, write=1.25, turn=turn)


# -- measure and apply on a lifted request -----------------------------------------------------------

APP = "def main():\n" + "    print('hello')\n" * 2_000  # ~9,000 tokens
UTIL = "def util():\n" + "    return 1\n" * 2_000


def _body(tail: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "messages": [
            {
                "role": "user",
                "content": f'Fix the bug.\n<file path="src/app.py">\n{APP}</file>\n'
                f'<file path="src/util.py">\n{UTIL}</file>\nThanks.',
            },
            *tail,
        ],
    }


def _turn(i: int, name: str = "bash", inputs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    call = f"toolu_{i}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call, "name": name, "input": inputs or {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call, "content": f"out {i} " * 2_000}],
        },
    ]


def test_measure_finds_the_file_blocks_and_what_names_them() -> None:
    tail = [*_turn(1), *_turn(2, "edit_file", {"path": "src/app.py"}), *_turn(3)]
    ir = lift_anthropic_messages(_body(tail), session_id="m")
    measured = measure(ir)
    files = {u.name: u for u in measured.units if u.file}
    assert set(files) == {"src/app.py", "src/util.py"}
    assert files["src/app.py"].refs_until == 3  # the edit_file call names it
    assert files["src/util.py"].refs_until == -1
    assert files["src/app.py"].tokens > 8_000 and measured.turn > 0
    assert len(measured.results) == 3
    assert files["src/app.py"].copy_until == files["src/util.py"].copy_until == -1
    # A read_file result carrying src/util.py again (message 8), then the user pasting it (10).
    copy = f'<file path="src/util.py">\n{UTIL}</file>'
    tail += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_4", "name": "read_file", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_4", "content": copy}]},
    ]
    measured = measure(lift_anthropic_messages(_body(tail), session_id="m"))
    assert next(u for u in measured.units if u.name == "src/util.py").copy_until == 8
    tail += [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": f"again:\n{copy}"},
        {"role": "assistant", "content": "ok"},
    ]
    measured = measure(lift_anthropic_messages(_body(tail), session_id="m"))
    first = next(u for u in measured.units if u.name == "src/util.py" and u.message == 0)
    assert first.copy_until == len(tail) + 1 and first.refs_until == 10


def test_a_cleared_file_keeps_its_tag_and_the_text_around_it() -> None:
    ir = lift_anthropic_messages(_body([*_turn(1), *_turn(2), *_turn(3)]), session_id="m")
    measured = measure(ir)
    decision = plan_folds(
        measured.units,
        measured.total,
        measured.current,
        ContextPolicy(trigger_tokens=1_000, keep=1),
        None,
        turn=measured.turn,
    )
    hashes = [f"h{i}" for i in range(len(ir.messages))]
    folds = folds_of(decision, measured, hashes, 4, False)
    assert {f.call for f in folds if f.file} == {file_key("src/app.py"), file_key("src/util.py")}
    assert all("src/" not in json.dumps(f.to_json()) for f in folds)  # digests, never the path
    folded, records = apply_clear_folds(ir, folds, hashes)
    text = folded.messages[0].blocks[0].payload["text"]
    app_tokens = next(f.tokens for f in folds if f.call == file_key("src/app.py"))
    assert text.startswith('Fix the bug.\n<file path="src/app.py">[telos_wrap cleared the content')
    assert f'<file path="src/app.py">{file_placeholder("src/app.py", app_tokens)}</file>' in text
    assert "read src/util.py again" in text and text.endswith("</file>\nThanks.")
    detail = records[0].detail
    assert "2 file block(s)" in detail and "src/" not in detail


# -- sessions on the emulator --------------------------------------------------------------------------


def _anthropic(transport: RecordingTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _session(
    client: anthropic.Anthropic,
    first: str,
    turns: int,
    tool_for: Any = None,
    store: Any = None,
    fresh: bool = False,
    sid: str = "f",
    start: int = 0,
) -> list[int]:
    """A coding session under a policy; ``fresh``: a new Session object each turn (another worker,
    or this process after a restart) on the same ``store``; ``start``: the first turn sent (the
    earlier ones are only history: another process sent them)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": first}]
    inputs = []
    store = store if store is not None else MemoryStore()
    hints = telos_wrap.TelosHints(context={"trigger": 40_000, "keep": 2})
    one = telos_wrap.sessions.Session(sid, store=store, hints=hints)
    for turn in range(turns):
        if turn >= start:
            with telos_wrap.sessions.Session(sid, store=store, hints=hints) if fresh else one:
                msg = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=8,
                    system="You are a coder. " * 200,
                    messages=history,
                )
            u = msg.usage
            inputs.append(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens)
        name, arguments = tool_for(turn) if tool_for else ("bash", {"command": f"ls {turn}"})
        call = f"toolu_{turn}"
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": name, "input": arguments}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": f"output {turn}\n" * 1_200}
                ],
            },
        ]
    return inputs


FIRST = f'Fix the bug.\n<file path="src/app.py">\n{APP}</file>\n<file path="src/util.py">\n{UTIL}</file>'


def _messages(body: bytes) -> list[dict[str, Any]]:
    return json.loads(body)["messages"]


def _first_text(body: bytes) -> str:
    content = _messages(body)[0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def test_the_policy_folds_a_file_nobody_names_any_more_and_keeps_the_one_being_edited(patched: None) -> None:
    transport = RecordingTransport(Emulator())

    def tool_for(turn: int) -> tuple[str, dict[str, Any]]:  # the agent keeps editing src/app.py
        return "edit_file", {"path": "src/app.py", "line": turn}

    inputs = _session(_anthropic(transport), FIRST, 30, tool_for)
    text = _first_text(transport.bodies[-1])
    assert "read src/util.py again" in text and "return 1" not in text  # folded in its tag
    assert APP in text  # the file the kept window names stays whole
    assert max(inputs) <= 40_000 + 4_000
    # It waits until its saving pays for rewriting what follows it (src/app.py, ~9,000 tokens): the
    # 25th request, the fourth fold (docs/sessions.md quotes this session).
    assert next(i for i, body in enumerate(transport.bodies) if b"read src/util.py again" in body) == 24
    # The first request carried both files as written (nothing is folded before the trigger).
    assert _first_text(transport.bodies[0]) == FIRST


def test_without_a_policy_file_blocks_are_sent_as_written(patched: None) -> None:
    transport = RecordingTransport(Emulator())
    client = _anthropic(transport)
    history: list[dict[str, Any]] = [{"role": "user", "content": FIRST}]
    with telos_wrap.session("no-policy"):
        for turn in range(3):
            client.messages.create(model="claude-sonnet-4-5", max_tokens=8, messages=history)
            history += [
                {"role": "assistant", "content": f"step {turn}"},
                {"role": "user", "content": "go on " * 4_000},
            ]
    assert all(_first_text(body) == FIRST for body in transport.bodies)
    assert all(b"telos_wrap cleared" not in body for body in transport.bodies)


def test_the_folded_form_is_the_same_for_another_worker_and_after_a_restart(
    patched: None, redis_url: str, redis_prefix: str
) -> None:
    from telos_wrap.sessions import RedisStore

    alone = RecordingTransport(Emulator())
    _session(_anthropic(alone), FIRST, 26, sid="files")
    workers = RecordingTransport(Emulator())
    store = RedisStore(redis_url, prefix=redis_prefix)
    _session(_anthropic(workers), FIRST, 26, store=store, fresh=True, sid="files")
    assert any(b"read src/app.py again" in body for body in alone.bodies), "the policy folded the files"
    assert workers.bodies == alone.bodies  # byte for byte, every request
    # What the store holds names the folded files by digests, never by path or content.
    held = b"".join(
        b"".join(k + v for k, v in store.redis.hgetall(key).items())
        for key in store.redis.keys(f"{redis_prefix}*")
        if store.redis.type(key) == b"hash"
    )
    assert b"file:" in held and b"src/app.py" not in held and b"hello" not in held


_FIRST_PROCESS = """
import base64, json, sys
import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.sessions import RedisStore
from tests.sessions.convo import RecordingTransport
from tests.sessions.test_file_pressure import FIRST, _anthropic, _session

telos_wrap.patch(strict=True)
transport = RecordingTransport(Emulator())
store = RedisStore(sys.argv[1], prefix=sys.argv[2])
_session(_anthropic(transport), FIRST, int(sys.argv[3]), store=store, fresh=True, sid="files")
print(json.dumps([base64.b64encode(body).decode() for body in transport.bodies]))
"""


def test_another_process_and_a_restart_send_the_same_folded_bytes(
    patched: None, redis_url: str, redis_prefix: str
) -> None:
    """Requests 0-17 (two folds of results) in a child process that then exits; requests 18-29 here,
    a new process on the same Redis, which carries those folds and decides the next ones (the
    first message's unnamed file among them): byte for byte what one process sends over the same
    split (each half on its own emulator, as the two processes have)."""
    import base64
    import subprocess
    import sys
    from pathlib import Path

    from telos_wrap.sessions import RedisStore

    split, turns = 18, 30
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", _FIRST_PROCESS, redis_url, redis_prefix, str(split)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    first_half = [base64.b64decode(body) for body in json.loads(child.stdout.splitlines()[-1])]
    second = RecordingTransport(Emulator())
    store = RedisStore(redis_url, prefix=redis_prefix)
    _session(_anthropic(second), FIRST, turns, store=store, fresh=True, sid="files", start=split)

    store_one = MemoryStore()
    one_first, one_second = RecordingTransport(Emulator()), RecordingTransport(Emulator())
    _session(_anthropic(one_first), FIRST, split, store=store_one, sid="files")
    _session(_anthropic(one_second), FIRST, turns, store=store_one, sid="files", start=split)
    assert first_half == one_first.bodies and second.bodies == one_second.bodies
    assert any(b"telos_wrap cleared the content of this file" in body for body in second.bodies)


# -- the facts an agent needs (tests/filters' corpus) --------------------------------------------------

CORPUS = {entry.name: entry for entry in entries()}
EDITED = "src/app/billing/refund.py"  # nl_file: the file the agent is editing
READ = "src/app/billing/helpers.py"  # cat_file: read once, then read again
# A file worth folding (~6,500 tokens: a small one is not worth rewriting what follows it).
HELPERS = CORPUS["cat_file"].text * 20


def test_the_facts_of_the_file_being_edited_and_of_the_kept_window_survive_every_fold(patched: None) -> None:
    outputs = [e for e in CORPUS.values() if not e.whole and e.tool == "bash" and len(e.text) > 1_500]
    first = (
        f'Fix the refund rounding.\n<file path="{EDITED}">\n{CORPUS["nl_file"].text}</file>\n'
        f'<file path="{READ}">\n{HELPERS}</file>'
    )
    transport = RecordingTransport(Emulator())
    client = _anthropic(transport)
    history: list[dict[str, Any]] = [{"role": "user", "content": first}]
    keep = 2
    shown: list[Any] = []  # the corpus entry each tool result carries
    with telos_wrap.session("corpus", context={"trigger": 6_000, "keep": keep}) as s:
        for turn in range(24):
            client.messages.create(model="claude-sonnet-4-5", max_tokens=8, messages=history)
            sent = json.dumps(_messages(transport.bodies[-1]), ensure_ascii=False)
            body = json.loads(transport.bodies[-1])
            visible_text = visible(_wire_text(body))
            for fact in CORPUS["nl_file"].facts:  # the file being edited: whole, every request
                assert fact in visible_text, (turn, fact)
            for entry in shown[-keep:]:  # the kept window's results: every fact
                for fact in entry.facts:
                    assert fact in visible_text, (turn, entry.name, fact)
            if turn == 12:  # the agent reads helpers.py again, then never names it: the first copy may go
                name, arguments, entry = "read_file", {"path": READ}, CORPUS["cat_file"]
                content = f'<file path="{READ}">\n{HELPERS}</file>'
            else:
                entry = outputs[turn % len(outputs)]
                name, arguments, content = "bash", {"command": entry.command}, entry.text
            if turn % 3 == 0:  # and keeps editing refund.py
                name, arguments = (
                    "edit_file",
                    {"path": EDITED, "old": "round(amount, 1)", "new": "round(amount, 2)"},
                )
            shown.append(entry)
            call = f"toolu_{turn}"
            history += [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": call, "name": name, "input": arguments}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": content}],
                },
            ]
        folds = s.state.clear_folds
        explained = s.explain()
    assert any(not f.file for f in folds), "the policy folded old results"
    stale = [f for f in folds if f.file]
    assert stale and all(f.message == 0 for f in stale), "the first copy of helpers.py was folded"
    last = _wire_text(json.loads(transport.bodies[-1]))
    assert f'<file path="{READ}">[telos_wrap cleared the content of this file' in last
    assert f"read {READ} again" in last and sent
    assert READ not in explained and EDITED not in explained and "file block(s)" in explained


def _wire_text(body: dict[str, Any]) -> str:
    """Every text the model reads in the messages of ``body`` (texts and tool results)."""
    parts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                parts.append(inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False))
    return "\n".join(parts)


def _openai(transport: RecordingTransport) -> openai.OpenAI:
    return openai.OpenAI(api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_chat_completions_and_responses_fold_file_blocks_under_pressure(patched: None, api: str) -> None:
    transport = RecordingTransport(Emulator())
    client = _openai(transport)
    first = f'Fix the bug.\n<file path="src/util.py">\n{UTIL}</file>'
    items: list[dict[str, Any]] = [{"role": "user", "content": first}]
    with telos_wrap.session(f"files-{api}", context={"trigger": 30_000, "keep": 2}) as s:
        for turn in range(16):
            if api == "chat":
                client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "system", "content": "Code."}, *items]
                )
            else:
                client.responses.create(model="gpt-4o", instructions="Code.", input=items)
            call, output = f"call_{turn}", f"output {turn}\n" * 1_200
            if api == "chat":
                function = {"name": "bash", "arguments": json.dumps({"n": turn})}
                items += [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": call, "type": "function", "function": function}],
                    },
                    {"role": "tool", "tool_call_id": call, "content": output},
                ]
            else:
                items += [
                    {"type": "function_call", "call_id": call, "name": "bash", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": call, "output": output},
                ]
        files = [f for f in s.state.clear_folds if f.file]
    body = json.loads(transport.bodies[-1])
    user = body["messages"][1] if api == "chat" else body["input"][0]
    text = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
    assert files and text.startswith('Fix the bug.\n<file path="src/util.py">[telos_wrap cleared the content')
    assert "read src/util.py again" in text and "return 1" not in text
    assert json.dumps(UTIL)[1:-1] in transport.bodies[0].decode()  # the first request: as written

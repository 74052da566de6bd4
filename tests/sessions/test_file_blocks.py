"""The seeds' ``<file path=…>`` rule (issue 47): a file block in a message is registered under its
path, sent as written until something folds it, and ``s.fold(slugs=[path])`` replaces its content
whole, durably, on every API. Sessions run on the emulator over the real SDK."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

import telos_wrap
from telos_wrap.emulator import Emulator
from telos_wrap.errors import RefPoolError
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage
from telos_wrap.sessions import MemoryStore
from telos_wrap.sessions.durable.records import SlugFold
from telos_wrap.sessions.turns.files import apply_file_folds, file_slugs
from tests.sdk_http import sdk_http

from .convo import RecordingTransport

APP = "def main():\n" + "    print('hello')\n" * 800
FILE = f'<file path="src/app.py">\n{APP}</file>'
SUMMARY = "[src/app.py: main() prints hello 800 times]"
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]


def _ir(*texts: str) -> TelosIR:
    blocks = tuple(
        TelosBlock(
            id=f"messages[0][{i}]", band=Band.FOLD, kind=BlockKind.TEXT, payload={"type": "text", "text": t}
        )
        for i, t in enumerate(texts)
    )
    return TelosIR(session_id="t", api="anthropic", messages=(TelosMessage("user", blocks, "list"),))


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        (FILE, ("src/app.py",)),
        ("<file path='a/b.txt'>x</file> and <file path=c.md>y</file>", ("a/b.txt", "c.md")),
        ('<file path="a.py">1</file><file path="a.py">2</file>', ("a.py",)),
        ('<file path="bad path">x</file>', ()),  # not a slug: left as text
        ('<file path="open.py">no end', ()),
        ("no files here", ()),
    ],
)
def test_file_blocks_are_found_by_path(text: str, paths: tuple[str, ...]) -> None:
    assert file_slugs(_ir(text)) == paths


def test_a_fold_replaces_the_content_inside_the_tag_and_nothing_else() -> None:
    text = f'Fix this:\n{FILE}\nand <file path="other.py">kept</file>.'
    folded, records, first = apply_file_folds(_ir(text), [SlugFold("src/app.py", SUMMARY, 3)])
    out = folded.messages[0].blocks[0].payload["text"]
    assert (
        out == f'Fix this:\n<file path="src/app.py">{SUMMARY}</file>\nand <file path="other.py">kept</file>.'
    )
    assert first == 0 and [r.where for r in records] == ["file:src/app.py"]
    assert records[0].chars == len(APP) + 1  # the content, newline after the tag included
    unchanged, none, at = apply_file_folds(_ir(text), [SlugFold("nothere.py", SUMMARY, 3)])
    assert unchanged.messages == _ir(text).messages and none == [] and at is None


def _anthropic(transport: RecordingTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0
    )


def _turns(
    client: anthropic.Anthropic, history: list[dict[str, Any]], turns: range, fold: Any = None
) -> None:
    for turn in turns:
        if fold is not None and turn == 3:
            fold()
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=8,
            system="You are a coder. " * 200,
            tools=TOOLS,
            messages=history,
        )
        call = f"toolu_{turn}"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call, "name": "read_file", "input": {}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": f"ok {turn} " * 900}],
            }
        )


def test_a_file_block_is_sent_as_written_until_folded_then_folded_for_good(patched: None) -> None:
    transport = RecordingTransport(Emulator())
    client = _anthropic(transport)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"Fix the bug in this file:\n{FILE}\nThanks."}
    ]
    store = MemoryStore()
    with telos_wrap.session("files", store=store) as s:
        with pytest.raises(RefPoolError, match="nor a <file path="):
            _turns(client, history, range(1))
            s.fold(slugs=["src/other.py"], summary="x")
        unfolded = s.state.dumps()  # what the store holds
        _turns(client, history, range(1, 7), fold=lambda: s.fold(slugs=["src/app.py"], summary=SUMMARY))
        breaks = s.cache_breaks
    bodies = [json.loads(body) for body in transport.bodies]
    first = [b["messages"][0]["content"] for b in bodies]

    def text_of(content: Any) -> str:
        return content if isinstance(content, str) else "".join(part["text"] for part in content)

    assert all(text_of(c) == f"Fix the bug in this file:\n{FILE}\nThanks." for c in first[:3])  # as written
    folded = f'Fix the bug in this file:\n<file path="src/app.py">{SUMMARY}</file>\nThanks.'
    assert all(text_of(c) == folded for c in first[3:])  # replaced whole, on every later request
    assert [b.reason for b in breaks] == ["context_folded"] and breaks[0].request == 3
    assert "file:" in unfolded and "src/app.py" not in unfolded  # a digest of the path, not the path


def test_another_worker_sends_the_same_folded_bytes(patched: None) -> None:
    def run(fresh: bool) -> list[bytes]:
        transport = RecordingTransport(Emulator())
        client = _anthropic(transport)
        history: list[dict[str, Any]] = [{"role": "user", "content": f"Fix this:\n{FILE}"}]
        store = MemoryStore()
        one = telos_wrap.sessions.Session("w", store=store)
        for turn in range(6):
            worker = telos_wrap.sessions.Session("w", store=store) if fresh else one
            with worker:
                if turn == 3:
                    worker.fold(slugs=["src/app.py"], summary=SUMMARY)
                _turns(client, history, range(turn, turn + 1))
        return transport.bodies

    assert run(True) == run(False)


def test_chat_completions_and_responses_fold_file_blocks_too(patched: None) -> None:
    transport = RecordingTransport(Emulator())
    client = openai.OpenAI(api_key="test", http_client=sdk_http.Client(transport=transport), max_retries=0)
    with telos_wrap.session("chat-files") as s:
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"Review:\n{FILE}"}]
        client.chat.completions.create(model="gpt-4o", messages=messages)
        s.fold(slugs=["src/app.py"], summary=SUMMARY)
        client.chat.completions.create(model="gpt-4o", messages=messages)
    with telos_wrap.session("responses-files") as s:
        items: list[dict[str, Any]] = [
            {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": FILE},
        ]
        client.responses.create(model="gpt-4o", input=items)
        s.fold(slugs=["src/app.py"], summary=SUMMARY)
        client.responses.create(model="gpt-4o", input=items)
    chat = [json.loads(body) for body in transport.bodies[:2]]
    responses = [json.loads(body) for body in transport.bodies[2:]]
    assert json.dumps(chat[0]["messages"]).count("print('hello')") == 800
    assert SUMMARY in json.dumps(chat[1]["messages"]) and "print('hello')" not in json.dumps(
        chat[1]["messages"]
    )
    assert responses[0]["input"][1]["output"] == FILE
    assert responses[1]["input"][1]["output"] == f'<file path="src/app.py">{SUMMARY}</file>'

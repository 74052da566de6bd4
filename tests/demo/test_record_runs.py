"""``record()`` never merges two runs silently: an existing recording is refused unless
``append=True``, and appended runs keep their own run id, so ``telos-wrap replay`` sees two sessions
where the two runs' implicit session ids are equal (the same conversation sent twice)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import telos_wrap
from telos_wrap.replay.runner import load_sessions

_KWARGS: dict[str, Any] = {
    "model": "claude-opus-5",
    "max_tokens": 16,
    "system": "You are terse.",
    "messages": [{"role": "user", "content": "Where is my order?"}],
}


def _one_run(path: Path, client: anthropic.Anthropic, **options: bool) -> None:
    with telos_wrap.record(path, **options):
        client.messages.create(**_KWARGS)
        client.messages.create(
            **{
                **_KWARGS,
                "messages": [
                    *_KWARGS["messages"],
                    {"role": "assistant", "content": "Which one?"},
                    {"role": "user", "content": "1042"},
                ],
            }
        )


def test_an_existing_recording_is_refused_without_append(tmp_path: Path, claude: anthropic.Anthropic) -> None:
    path = tmp_path / "calls.jsonl"
    _one_run(path, claude)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="append=True"):
        _one_run(path, claude)
    assert path.read_bytes() == before, "nothing was written by the refused run"


def test_appended_runs_replay_as_separate_sessions(tmp_path: Path, claude: anthropic.Anthropic) -> None:
    path = tmp_path / "calls.jsonl"
    _one_run(path, claude)
    _one_run(path, claude, append=True)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4
    assert lines[0]["session"] == lines[2]["session"], "the same conversation: the same implicit session"
    assert lines[0]["run"] != lines[2]["run"]

    sessions = load_sessions(path)

    assert [len(session) for session in sessions] == [2, 2], "two sessions, not one of four requests"
    assert [request.kwargs for request in sessions[0]] == [request.kwargs for request in sessions[1]]

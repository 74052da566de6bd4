"""A ``hash_content=True`` recording replays with the recording's prompt sizes, and schemas stay valid.

Before: every text became a 71-character ``sha256:<hex>``, so the demo session replayed at 112,770
input tokens instead of 536,808 with no warning, and a tool schema's ``required`` entries were hashed
while its property names were not.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

import telos_wrap
from telos_wrap.cli import main
from telos_wrap.replay.recording import hash_text, sized_digest
from telos_wrap.replay.runner import TELOS, patched, replay
from telos_wrap.replay.traces import TraceRequest, content_hashing

from .test_replay_cli import fails, run_json


def _recordings(tmp_path: Path, requests: list[TraceRequest]) -> tuple[Path, Path]:
    plain, hashed = tmp_path / "plain.jsonl", tmp_path / "hashed.jsonl.gz"
    with patched(), telos_wrap.record(plain), telos_wrap.record(hashed, hash_content=True):
        replay([requests], TELOS)
    return plain, hashed


def _schemas(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        found = [value] if isinstance(value.get("properties"), dict) else []
        return found + [s for item in value.values() for s in _schemas(item)]
    if isinstance(value, list):
        return [s for item in value for s in _schemas(item)]
    return []


def test_sized_digest_keeps_lengths_lines_and_equality() -> None:
    text = "Système: be brief.\nCurrent time: 09:30\n\nTools follow."
    digest = sized_digest(text)
    assert len(digest.encode()) == len(text.encode()) and digest.count("\n") == text.count("\n")
    assert digest.isascii() and "brief" not in digest
    assert sized_digest(text) == digest
    other = sized_digest(text.replace("09:30", "09:31"))
    assert other.split("\n")[0] == digest.split("\n")[0] and other.split("\n")[1] != digest.split("\n")[1]


def test_a_hashed_recording_replays_at_the_recordings_sizes(
    tmp_path: Path, demo_requests: list[TraceRequest]
) -> None:
    plain, hashed = _recordings(tmp_path, demo_requests[:12])
    assert content_hashing(hashed) == "sized" and content_hashing(plain) is None
    with gzip.open(hashed, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    for row in rows:  # every schema valid: what `required` names is a property
        for schema in _schemas(row["kwargs"]):
            assert set(schema.get("required", [])) <= set(schema["properties"]), schema
    original = run_json("replay", str(plain), "--json")["variants"]["recorded"]
    data = run_json("replay", str(hashed), "--json")
    assert "texts hashed" in data["title"]
    again = data["variants"]["recorded"]
    for name in ("as sent", "auto-caching", "telos_wrap"):
        # Text blocks keep their bytes; a tool definition's JSON escapes (a quote is 2 bytes, its
        # digest 1) differ by a few tokens.
        assert (
            abs(again[name]["input_tokens"] - original[name]["input_tokens"])
            <= 0.01 * original[name]["input_tokens"]
        ), (name, again[name], original[name])
    assert again["telos_wrap"]["cache_read"] > 0.5 * original["telos_wrap"]["cache_read"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["replay", str(hashed)]) == 0
    assert "texts hashed" in out.getvalue()


def test_an_old_fixed_length_hashed_recording_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.jsonl"
    row = {
        "run": "r",
        "session": "s",
        "turn": 0,
        "api": "anthropic",
        "kwargs": {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "system": hash_text("a long system prompt"),
            "messages": [{"role": "user", "content": hash_text("hi")}],
        },
        "usage": None,
    }
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert content_hashing(path) == "fixed"
    said = fails(capsys, "replay", str(path))
    assert "71-character sha256 digest" in said and "Record again" in said

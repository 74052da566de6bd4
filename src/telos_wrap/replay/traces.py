"""Recorded agent sessions: loading trace files, and replaying them the way a careless harness would.

A trace file is JSON Lines (optionally ``.xz`` or ``.gz``): one request per line,
``{"session": id, "turn": n, "api": "anthropic"|"openai"|"responses", "kwargs": {...}}`` (``openai``:
Chat Completions; ``responses``: the OpenAI Responses API), lines of one session
consecutive and in order — the format of the bundled sample traces and of ``telos_wrap.record()``.

``jitter()`` rebuilds a request the way the failure modes of the TELOS seeds describe: a live clock
line and an environment envelope rewritten into the system prompt every turn, tools and JSON keys in
a new order every turn. It is deterministic for a given seed.
"""

from __future__ import annotations

import copy
import gzip
import json
import lzma
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

__all__ = [
    "TraceRequest",
    "content_hashing",
    "envelope",
    "group_sessions",
    "jitter",
    "load_trace",
    "shuffle_keys",
]

#: A text ``telos_wrap.record(hash_content=True)`` wrote before digests kept the text's length.
_FIXED_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One recorded request."""

    session: str
    turn: int
    api: str
    kwargs: dict[str, Any]


def _open_text(path: Path) -> IO[str]:
    """A trace or recording for reading: ``.xz`` and ``.gz`` (what ``record()`` writes) or plain."""
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_trace(path: str | Path) -> Iterator[TraceRequest]:
    """Read a trace file (``.jsonl``, ``.jsonl.xz`` or ``.jsonl.gz``) lazily, one request at a time."""
    path = Path(path)
    with _open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                # A recording's lines carry its run id (telos_wrap.record): two runs appended to one
                # file are separate sessions even where their session ids are equal.
                session = str(row["session"]) if "run" not in row else f"{row['run']}/{row['session']}"
                yield TraceRequest(session, int(row.get("turn", 0)), str(row["api"]), dict(row["kwargs"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"{path}:{number}: not a trace line ({exc}); expected "
                    '{"session": ..., "turn": n, "api": "anthropic"|"openai"|"responses", "kwargs": {...}}'
                ) from exc


def content_hashing(path: str | Path, *, lines: int = 50) -> str | None:
    """How a recording's texts are hashed: ``"sized"`` (``record(hash_content=True)``: digests of the
    texts' own length, line by line), ``"fixed"`` (every text a 71-character ``sha256:<hex>``, what
    earlier versions wrote: the prompt sizes are lost) or ``None`` (plain text). Reads the first
    ``lines`` lines."""
    with _open_text(Path(path)) as handle:
        for number, line in enumerate(handle):
            if number >= lines:
                break
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            if row.get("hashed"):
                return "sized"
            if _has_fixed_digest(row.get("kwargs")):
                return "fixed"
    return None


def _has_fixed_digest(value: Any) -> bool:
    if isinstance(value, str):
        return _FIXED_DIGEST.fullmatch(value) is not None
    if isinstance(value, dict):
        return any(_has_fixed_digest(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_fixed_digest(item) for item in value)
    return False


def group_sessions(requests: Iterator[TraceRequest]) -> Iterator[list[TraceRequest]]:
    """Group consecutive requests of the same session."""
    current: list[TraceRequest] = []
    for request in requests:
        if current and request.session != current[0].session:
            yield current
            current = []
        current.append(request)
    if current:
        yield current


def shuffle_keys(value: Any, rng: random.Random) -> Any:
    """``value`` with every dict's keys in a random insertion order (what Go/Swift JSON maps do)."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffle_keys(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffle_keys(item, rng) for item in value]
    return value


def envelope(turn: int, rng: random.Random) -> tuple[str, str]:
    """The clock line and the ``<environment_info>`` block :func:`jitter` writes on ``turn``, from ``rng``."""
    now = datetime(2026, 11, 21, 9, 30, tzinfo=timezone.utc) + timedelta(
        seconds=47 * turn, microseconds=rng.randrange(10**6)
    )
    clock = f"Current time: {now.isoformat()}"
    env = (
        "<environment_info>\n"
        f"cwd: /tmp/agent-run-{rng.randrange(16**6):06x}\n"
        f"git status: {rng.randrange(1, 9)} files changed\n"
        f"pid: {rng.randrange(1000, 99999)}\n"
        "</environment_info>"
    )
    return clock, env


def _is_text_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text"


def jitter(api: str, kwargs: dict[str, Any], turn: int, seed: int = 0) -> dict[str, Any]:
    """The request as a careless harness sends it on ``turn`` (the input is not modified)."""
    rng = random.Random(f"{seed}:{turn}")
    request = copy.deepcopy(kwargs)
    clock, env = envelope(turn, rng)
    volatile = f"{clock}\n{env}"
    if api == "anthropic":
        system = request.get("system")
        if isinstance(system, str):
            request["system"] = f"{volatile}\n{system}"
        elif (
            isinstance(system, list)
            and system
            and isinstance(system[0], dict)
            and system[0].get("type") == "text"
        ):
            system[0] = {**system[0], "text": f"{volatile}\n{system[0]['text']}"}
        else:
            request["system"] = volatile
    else:
        messages = request.get("messages") or []
        first = messages[0] if messages else None
        if (
            isinstance(first, dict)
            and first.get("role") in ("system", "developer")
            and isinstance(first.get("content"), str)
        ):
            first["content"] = f"{volatile}\n{first['content']}"
        else:
            messages.insert(0, {"role": "system", "content": volatile})
            request["messages"] = messages
    tools = request.get("tools")
    if isinstance(tools, list):
        rng.shuffle(tools)
    shuffled: dict[str, Any] = shuffle_keys(request, rng)
    return shuffled

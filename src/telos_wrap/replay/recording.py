"""``telos_wrap.record(path)``: append every request telos handles, with its usage, as a trace.

Each line is one request in the trace format of ``telos_wrap.replay.traces`` plus its normalized usage::

    {"run": "<recording id>", "session": "<id>", "turn": <index in the session>,
     "api": "anthropic"|"openai"|"responses", "kwargs": {<the body as the caller sent it>},
     "usage": {<UsageReport fields>} | null}

(``openai`` is Chat Completions, ``responses`` the OpenAI Responses API)

so a recording can be replayed through telos later (``telos-wrap replay FILE``). ``kwargs`` is
the body before telos rewrote it (``extra_body`` fields merged in, as the SDK sends them).

Recording works with or without ``patch()``. Without it, ``record()`` installs observe-only
wrappers for as long as it is active (``telos_wrap.patch.hold_observer_wrappers``): every request
goes out exactly as the SDK built it, nothing is rewritten, and the wrappers are removed again
when the last recording ends — the way to measure today's traffic before adopting telos. With
``patch()`` (or ``patch(enabled=False)``) it records what the caller sent, before telos' rewrite.

Redaction: only bodies are recorded — never headers, so never an API key or an auth header — and
strings in a body that look like Anthropic/OpenAI API keys are replaced by ``[redacted]``. With
``hash_content=True`` every text (message and system text, tool results and descriptions, every
string that is not structure such as ``role``, ``type``, ``model``, an id, a tool's name or a JSON
Schema's ``required`` entries, which name its properties) is replaced line by line by a digest of the
same UTF-8 length (:func:`sized_digest`): equal lines stay equal and every text keeps its length, so a
replay sees the prompt's real size and the prefixes its texts share line by line, and a tool schema
stays valid (property names are keys, never hashed; ``required`` names them, so neither is). The
lines then carry ``"hashed": "sized-sha256"``. What stays visible: the number and length of lines.

A line is written when the response's usage is known (for a stream: once it is consumed or
closed). Requests that never got one (an HTTP error, an abandoned call) are written with
``"usage": null`` when the recording ends. Recording is process-wide while active: calls from
every thread and asyncio task are recorded. Lines of concurrent sessions may interleave;
``telos-wrap replay`` groups them by session and orders them by ``turn``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import re
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from telos_wrap.ir.model import UsageReport
from telos_wrap.patch import hold_observer_wrappers, release_observer_wrappers
from telos_wrap.patch.observers import OBSERVERS

__all__ = ["HASHED", "Recorder", "hash_text", "record", "redact_body", "sized_digest", "usage_to_json"]

#: The ``"hashed"`` field of a recording line whose texts are :func:`sized_digest` digests.
HASHED = "sized-sha256"

# API keys the SDKs use (Anthropic ``sk-ant-…``, OpenAI ``sk-…``/``sk-proj-…``), wherever they appear.
_KEY_PATTERN = re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}")
_REDACTED = "[redacted]"
# Keys whose string values are structure, not content: kept verbatim when hashing.
_STRUCTURAL_KEYS = frozenset(
    {
        "model",
        "role",
        "type",
        "id",
        "tool_use_id",
        "tool_call_id",
        "name",
        "media_type",
        "ttl",
        "tool_choice",
        "stop_reason",
        "service_tier",
        "reasoning_effort",
        "verbosity",
        "detail",
        "format",
        # A JSON Schema's ``required`` lists property names, which are keys and so never hashed:
        # hashing one side only would leave a schema whose required properties do not exist.
        "required",
    }
)


def hash_text(text: str) -> str:
    """``sha256:<hex>`` of ``text`` (UTF-8)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def sized_digest(text: str) -> str:
    """``text`` with each line replaced by a SHA-256-derived hex digest of the same UTF-8 length.

    Line breaks are kept, so texts that share their first lines share a prefix, and the emulator's
    token estimate (UTF-8 bytes, docs/emulator.md) of the digest equals the original's. Equal lines
    give equal digests; a line of one or two bytes has few digests, so short lines may collide.
    """
    return "\n".join(_sized_line(line) for line in text.split("\n"))


def _sized_line(line: str) -> str:
    size = len(line.encode("utf-8"))
    out = ""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{counter}\x00{line}".encode()).hexdigest()
        counter += 1
    return out[:size]


def _redact(value: Any, *, hash_content: bool, key: str | None) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _redact(v, hash_content=hash_content, key=str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(item, hash_content=hash_content, key=key) for item in value]
    if isinstance(value, str):
        if hash_content and key not in _STRUCTURAL_KEYS:
            return sized_digest(value)
        return _KEY_PATTERN.sub(_REDACTED, value)
    return value


def redact_body(body: Mapping[str, Any], *, hash_content: bool = False) -> dict[str, Any]:
    """A JSON-safe copy of ``body`` with API-key-like strings redacted (and texts hashed if asked)."""
    redacted: dict[str, Any] = _redact(body, hash_content=hash_content, key=None)
    return redacted


def usage_to_json(report: UsageReport | None) -> dict[str, Any] | None:
    """The recorded form of a ``UsageReport`` (``None`` stays ``None``)."""
    if report is None:
        return None
    data: dict[str, Any] = {
        "engine": report.engine,
        "raw_input": report.raw_input,
        "cache_read": report.cache_read,
        "cache_write": report.cache_write,
        "output": report.output,
    }
    if report.cache_write_by_ttl is not None:
        data["cache_write_by_ttl"] = dict(report.cache_write_by_ttl)
    if report.cache_miss_reason is not None:
        data["cache_miss_reason"] = dict(report.cache_miss_reason)
    return data


def _open_append(path: Path) -> IO[str]:
    if path.suffix == ".xz":
        return lzma.open(path, "at", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "at", encoding="utf-8")
    return open(path, "a", encoding="utf-8")  # closed by Recorder.close()


class Recorder:
    """The observer behind :func:`record` (one open file, thread-safe)."""

    def __init__(self, path: str | Path, *, hash_content: bool = False, append: bool = False) -> None:
        self.path = Path(path)
        if not append and self.path.exists() and self.path.stat().st_size > 0:
            raise FileExistsError(
                f"telos_wrap.record: {self.path} already holds a recording; pass append=True to add this "
                "run to it (its lines get their own run id, so a replay never merges the two runs), or "
                "record to another file"
            )
        self.hash_content = hash_content
        #: Written on every line: ``telos-wrap replay`` keeps the sessions of two runs apart.
        self.run = uuid.uuid4().hex[:12]
        self.written = 0
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], dict[str, Any]] = {}
        self._file: IO[str] | None = None

    # -- the observer protocol (``telos_wrap.patch.wrappers.RequestObserver``) ----------------

    def on_request(self, api: str, session_id: str, index: int, body: Mapping[str, Any]) -> None:
        """Remember a request until its usage arrives."""
        line = {
            "run": self.run,
            "session": session_id,
            "turn": index,
            "api": api,
            "kwargs": redact_body(body, hash_content=self.hash_content),
        }
        if self.hash_content:
            line["hashed"] = HASHED
        with self._lock:
            self._pending[(session_id, index)] = line

    def on_usage(self, session_id: str, index: int, report: UsageReport | None) -> None:
        """Write the request's line with its usage (once per request)."""
        with self._lock:
            line = self._pending.pop((session_id, index), None)
            if line is None:
                return
            line["usage"] = usage_to_json(report)
            self._write(line)

    # -- file handling ------------------------------------------------------------------------

    def _write(self, line: Mapping[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _open_append(self.path)
        # default=str: a value the SDK would have serialized its own way never loses the line.
        self._file.write(json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        """Write requests that never got a usage (``"usage": null``) and close the file."""
        with self._lock:
            for key in sorted(self._pending):
                line = self._pending[key]
                line["usage"] = None
                self._write(line)
            self._pending.clear()
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- context manager ----------------------------------------------------------------------

    def __enter__(self) -> Recorder:
        hold_observer_wrappers()
        OBSERVERS.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            OBSERVERS.remove(self)
        except ValueError:
            pass
        else:
            release_observer_wrappers()
        self.close()

    async def __aenter__(self) -> Recorder:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def record(path: str | Path, *, hash_content: bool = False, append: bool = False) -> Recorder:
    """Record every request telos handles while active: ``with telos_wrap.record("run.jsonl"):``.

    Usable as ``with`` or ``async with`` (also around async code with a plain ``with``). Appends
    JSON Lines in the trace format of ``telos_wrap.replay.traces`` plus ``"usage"`` (see module doc);
    ``.xz``/``.gz`` paths are compressed. Only request bodies are written — never headers or API
    keys. ``hash_content=True`` replaces every text, line by line, by a digest of the same length
    (:func:`sized_digest`), so a replay of it counts the real prompt sizes.

    A file that already holds a recording is refused (``FileExistsError``) unless ``append=True``:
    every line carries the recording's ``run`` id, so two runs appended to one file replay as
    separate sessions even where their session ids are equal (implicit sessions of the same
    conversation are).

    Works on its own: without ``telos_wrap.patch()`` the requests are observed and sent exactly
    as the SDK builds them (observe-only wrappers, removed when the recording ends). With
    ``patch()`` the recorded body is the caller's, before telos' rewrite (requests sent with
    ``telos_hint={"disable": True}`` or under ``patch(enabled=False)`` are recorded too, as sent).
    """
    return Recorder(path, hash_content=hash_content, append=append)

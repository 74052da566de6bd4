"""Transport-neutral HTTP responses and the helpers that build JSON / SSE bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .tokens import BYTES_PER_TOKEN, estimate_tokens

REPLY_TEXT = "This is a deterministic reply from the telos_wrap emulator."
"""The text every emulated completion returns (cut short by a small ``max_tokens``)."""


@dataclass(frozen=True)
class EmulatorResponse:
    """An HTTP response: status, headers and the body as a sequence of chunks (SSE events)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[bytes, ...]

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(self.chunks)

    def json(self) -> Any:
        """The body decoded as JSON (non-streaming responses)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Handled:
    """A response plus what the request log records about it."""

    response: EmulatorResponse
    usage: dict[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None


def encode(obj: Any) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_response(status: int, obj: Any, headers: tuple[tuple[str, str], ...] = ()) -> EmulatorResponse:
    """A JSON response."""
    return EmulatorResponse(status, (("content-type", "application/json"), *headers), (encode(obj),))


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a ``str``."""
    payload = data if isinstance(data, str) else encode(data).decode("utf-8")
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def sse_response(events: list[bytes], headers: tuple[tuple[str, str], ...] = ()) -> EmulatorResponse:
    """A ``text/event-stream`` response made of pre-encoded events."""
    base = (("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache"))
    return EmulatorResponse(200, (*base, *headers), tuple(events))


def reply_text(max_tokens: int | None) -> tuple[str, bool]:
    """The emulated reply and whether ``max_tokens`` cut it short."""
    if max_tokens is not None and max_tokens < estimate_tokens(REPLY_TEXT):
        return REPLY_TEXT[: max(0, max_tokens) * BYTES_PER_TOKEN], True
    return REPLY_TEXT, False


def split_words(text: str, per_chunk: int = 3) -> list[str]:
    """Split a reply into a few stream deltas (keeps the whitespace, so joining restores it)."""
    words = text.split(" ")
    pieces = [" ".join(words[i : i + per_chunk]) for i in range(0, len(words), per_chunk)]
    return [p if i == len(pieces) - 1 else p + " " for i, p in enumerate(pieces)] if text else []

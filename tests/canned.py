"""Canned vendor replies: the fixed answer of a mock transport, for tests that look at what telos sends
or keeps, not at what the vendor answers.

``anthropic_message(usage, ...)`` is a complete Messages API ``Message`` (one text block, ``end_turn``);
``json_response(content)`` answers a request with ready JSON bytes (a reply encoded once, up front,
costs a test that counts objects or bytes nothing per call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.sdk_http import sdk_http

_JSON = {"content-type": "application/json"}


def anthropic_message(
    usage: Mapping[str, int], *, id: str = "msg_canned", model: str = "claude-opus-5", text: str = "ok"
) -> dict[str, Any]:
    """An Anthropic ``Message`` answering ``text`` with this ``usage`` (a fresh dict each call)."""
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "model": model,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": dict(usage),
    }


def json_response(content: bytes) -> sdk_http.Response:
    """A 200 response carrying ``content``, JSON already encoded."""
    return sdk_http.Response(200, content=content, headers=_JSON)

"""A capturing transport: the real SDK over a real ``httpx2`` transport that records each request body."""

from __future__ import annotations

import json
from typing import Any

from tests.canned import anthropic_message
from tests.sdk_http import sdk_http

_MESSAGE = anthropic_message(
    {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    id="msg_capture",
)


class Capture:
    """Collects the JSON bodies the SDK sends; answers with a fixed Anthropic ``Message``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: sdk_http.Request) -> sdk_http.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        if request.url.path.endswith("/count_tokens"):
            return sdk_http.Response(200, json={"input_tokens": 10})
        return sdk_http.Response(200, json=_MESSAGE)

    def client(self) -> Any:
        import anthropic

        return anthropic.Anthropic(
            api_key="test-key", http_client=sdk_http.Client(transport=sdk_http.MockTransport(self))
        )


CREATE_KEYS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "stream",
        "thinking",
        "cache_control",
        "top_k",
        "top_p",
    }
)


def create_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Trace kwargs split for ``messages.create``: unknown ones go to ``extra_body`` (traces/README.md)."""
    known = {k: v for k, v in kwargs.items() if k in CREATE_KEYS}
    extra = {k: v for k, v in kwargs.items() if k not in CREATE_KEYS}
    if extra:
        known["extra_body"] = extra
    return known

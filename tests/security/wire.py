"""Real HTTP to the emulator for the security suite: sync and async clients of both SDKs.

Every client keeps its vendor base URL (telos resolves the engine as for a user); its transport
sends each request over real HTTP to a local emulator server and keeps the exact bytes sent, so a
test reads what a model would read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from telos_wrap.emulator import Emulator, ManualClock, serve
from tests.sdk_http import redirected, sdk_http


class _Sent:
    """The bodies sent, in order (thread-safe: one list shared by the sync and async transports)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []

    def add(self, body: bytes) -> None:
        with self.lock:
            self.bodies.append(body)


class Redirect(sdk_http.HTTPTransport):
    def __init__(self, base: str, sent: _Sent) -> None:
        super().__init__()
        self.base, self.sent = base, sent

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = request.read()
        self.sent.add(body)
        return super().handle_request(redirected(request, self.base, body))


class AsyncRedirect(sdk_http.AsyncHTTPTransport):
    def __init__(self, base: str, sent: _Sent) -> None:
        super().__init__()
        self.base, self.sent = base, sent

    async def handle_async_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = await request.aread()
        self.sent.add(body)
        return await super().handle_async_request(redirected(request, self.base, body))


@dataclass
class Wire:
    """The emulator behind a real local HTTP server, and SDK clients talking to it."""

    emulator: Emulator
    url: str
    sent: _Sent = field(default_factory=_Sent)

    @property
    def bodies(self) -> list[bytes]:
        return self.sent.bodies

    def requests(self) -> list[dict[str, Any]]:
        """Every body sent, parsed."""
        with self.sent.lock:
            return [json.loads(body) for body in self.sent.bodies]

    def anthropic(self, **kwargs: Any) -> anthropic.Anthropic:
        http = sdk_http.Client(transport=Redirect(self.url, self.sent))
        return anthropic.Anthropic(**{"api_key": "test", "max_retries": 0, **kwargs}, http_client=http)

    def async_anthropic(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        http = sdk_http.AsyncClient(transport=AsyncRedirect(self.url, self.sent))
        return anthropic.AsyncAnthropic(**{"api_key": "test", "max_retries": 0, **kwargs}, http_client=http)

    def openai(self, **kwargs: Any) -> openai.OpenAI:
        http = sdk_http.Client(transport=Redirect(f"{self.url}/openai", self.sent))
        return openai.OpenAI(**{"api_key": "sk-test", "max_retries": 0, **kwargs}, http_client=http)

    def async_openai(self, **kwargs: Any) -> openai.AsyncOpenAI:
        http = sdk_http.AsyncClient(transport=AsyncRedirect(f"{self.url}/openai", self.sent))
        return openai.AsyncOpenAI(**{"api_key": "sk-test", "max_retries": 0, **kwargs}, http_client=http)


@contextmanager
def emulator_over_http() -> Iterator[Wire]:
    """A fresh emulator (manual clock) served on 127.0.0.1 for the block."""
    emulator = Emulator(clock=ManualClock(1_000.0))
    with serve(emulator) as url:
        yield Wire(emulator, url)


def text_of(body: Any) -> str:
    """Every string in ``body`` joined: what a model (and a log) could read of a request."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    return "\n".join(out)

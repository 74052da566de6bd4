"""Real HTTP to the emulator: ``serve()`` on a free port, and SDK clients whose requests go there.

The clients keep the vendor's base URL (so telos resolves the engine exactly as for a user); their
transport is a real ``sdk_http.HTTPTransport`` that moves every request to the local emulator server
and keeps the exact bytes and headers sent. One module for the suite (the sessions and security tests
used a copy each); tests/security/conftest.py makes the ``wire`` fixture of it.
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
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from telos_wrap.emulator import Emulator, ManualClock, serve
from tests.sdk_http import redirected, sdk_http


class _Sent:
    """The bodies and headers sent, in order (thread-safe: one record shared by the sync and async
    transports of every client of a ``Wire``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []

    def add(self, request: sdk_http.Request, body: bytes) -> None:
        with self.lock:
            self.bodies.append(body)
            self.headers.append({key.lower(): value for key, value in request.headers.items()})


class Redirect(sdk_http.HTTPTransport):
    """Sends every request to ``{base}{path}`` over real HTTP and records what was sent."""

    def __init__(self, base: str, sent: _Sent) -> None:
        super().__init__()
        self.base, self.sent = base, sent

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = request.read()
        self.sent.add(request, body)
        return super().handle_request(redirected(request, self.base, body))


class AsyncRedirect(sdk_http.AsyncHTTPTransport):
    """``Redirect`` for async clients."""

    def __init__(self, base: str, sent: _Sent) -> None:
        super().__init__()
        self.base, self.sent = base, sent

    async def handle_async_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = await request.aread()
        self.sent.add(request, body)
        return await super().handle_async_request(redirected(request, self.base, body))


@dataclass
class Wire:
    """The emulator (its clock) behind a real local HTTP server, and SDK clients talking to it."""

    emulator: Emulator
    url: str
    sent: _Sent = field(default_factory=_Sent)

    @property
    def bodies(self) -> list[bytes]:
        """Every body sent, in order, as the bytes that went out."""
        return self.sent.bodies

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of every request sent (names in lower case), in order."""
        return self.sent.headers

    @property
    def clock(self) -> ManualClock:
        clock = self.emulator.clock
        assert isinstance(clock, ManualClock)
        return clock

    def requests(self) -> list[dict[str, Any]]:
        """Every body sent, parsed."""
        with self.sent.lock:
            return [json.loads(body) for body in self.sent.bodies]

    def anthropic(self, **kwargs: Any) -> anthropic.Anthropic:
        http = sdk_http.Client(transport=Redirect(self.url, self.sent))
        return anthropic.Anthropic(**{"api_key": "test", "max_retries": 0, **kwargs}, http_client=http)

    def async_anthropic(self, **kwargs: Any) -> AsyncAnthropic:
        http = sdk_http.AsyncClient(transport=AsyncRedirect(self.url, self.sent))
        return anthropic.AsyncAnthropic(**{"api_key": "test", "max_retries": 0, **kwargs}, http_client=http)

    def openai(self, **kwargs: Any) -> openai.OpenAI:
        http = sdk_http.Client(transport=Redirect(f"{self.url}/openai", self.sent))
        return openai.OpenAI(**{"api_key": "sk-test", "max_retries": 0, **kwargs}, http_client=http)

    def async_openai(self, **kwargs: Any) -> AsyncOpenAI:
        http = sdk_http.AsyncClient(transport=AsyncRedirect(f"{self.url}/openai", self.sent))
        return openai.AsyncOpenAI(**{"api_key": "sk-test", "max_retries": 0, **kwargs}, http_client=http)


@contextmanager
def emulator_over_http() -> Iterator[Wire]:
    """A fresh emulator (manual clock) served on 127.0.0.1 for the block."""
    emulator = Emulator(clock=ManualClock(1_000.0))
    with serve(emulator) as url:
        yield Wire(emulator, url)

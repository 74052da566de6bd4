"""Real HTTP to the emulator: ``serve()`` on a free port, and SDK clients whose requests go there.

The clients keep the vendor's base URL (so telos resolves the engine exactly as for a user); their
transport is a real ``sdk_http.HTTPTransport`` that moves every request to the local emulator server
and keeps the exact bytes sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anthropic
import openai

from telos_wrap.emulator import Emulator, ManualClock, serve
from tests.sdk_http import redirected, sdk_http


class Redirect(sdk_http.HTTPTransport):
    """Sends every request to ``{base}{path}`` over real HTTP; ``bodies`` / ``headers``: what was sent."""

    def __init__(self, base: str, bodies: list[bytes], headers: list[dict[str, str]]) -> None:
        super().__init__()
        self.base = base
        self.bodies = bodies
        self.headers = headers

    def handle_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = request.read()
        self.bodies.append(body)
        self.headers.append({key.lower(): value for key, value in request.headers.items()})
        return super().handle_request(redirected(request, self.base, body))


class AsyncRedirect(sdk_http.AsyncHTTPTransport):
    """``Redirect`` for async clients."""

    def __init__(self, base: str, bodies: list[bytes], headers: list[dict[str, str]]) -> None:
        super().__init__()
        self.base = base
        self.bodies = bodies
        self.headers = headers

    async def handle_async_request(self, request: sdk_http.Request) -> sdk_http.Response:
        body = await request.aread()
        self.bodies.append(body)
        self.headers.append({key.lower(): value for key, value in request.headers.items()})
        return await super().handle_async_request(redirected(request, self.base, body))


@dataclass
class Wire:
    """The emulator (its clock) behind a real local HTTP server, and clients talking to it."""

    emulator: Emulator
    url: str
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    @property
    def clock(self) -> ManualClock:
        clock = self.emulator.clock
        assert isinstance(clock, ManualClock)
        return clock

    def openai(self, **kwargs: object) -> openai.OpenAI:
        http = sdk_http.Client(transport=Redirect(f"{self.url}/openai", self.bodies, self.headers))
        return openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0, **kwargs)  # type: ignore[arg-type]

    def anthropic(self, **kwargs: object) -> anthropic.Anthropic:
        http = sdk_http.Client(transport=Redirect(self.url, self.bodies, self.headers))
        return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0, **kwargs)  # type: ignore[arg-type]

    def async_anthropic(self, **kwargs: object) -> anthropic.AsyncAnthropic:
        http = sdk_http.AsyncClient(transport=AsyncRedirect(self.url, self.bodies, self.headers))
        return anthropic.AsyncAnthropic(api_key="test", http_client=http, max_retries=0, **kwargs)  # type: ignore[arg-type]


@contextmanager
def emulator_over_http() -> Iterator[Wire]:
    """A fresh emulator (manual clock) served on 127.0.0.1 for the block."""
    emulator = Emulator(clock=ManualClock(1_000.0))
    with serve(emulator) as url:
        yield Wire(emulator, url)

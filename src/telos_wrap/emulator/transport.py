"""httpx2 transports that send requests to an :class:`Emulator` instead of the network.

>>> emu = Emulator()
>>> client = anthropic.Anthropic(api_key="x", http_client=httpx2.Client(transport=EmulatorTransport(emu)))

The chat flavour is chosen from the request URL (see :meth:`Emulator.flavour_for_url`) unless
``flavour`` is given.
"""

from __future__ import annotations

import httpx2

from .emulator import Emulator
from .wire import EmulatorResponse


def _to_httpx(result: EmulatorResponse, request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(result.status, headers=list(result.headers), content=result.body, request=request)


class EmulatorTransport(httpx2.BaseTransport):
    """Synchronous transport: ``httpx2.Client(transport=EmulatorTransport(emu))``."""

    def __init__(self, emulator: Emulator, *, flavour: str | None = None) -> None:
        self.emulator = emulator
        self.flavour = flavour

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        result = self.emulator.handle(request.method, str(request.url), body, flavour=self.flavour)
        return _to_httpx(result, request)


class AsyncEmulatorTransport(httpx2.AsyncBaseTransport):
    """Asynchronous transport: ``httpx2.AsyncClient(transport=AsyncEmulatorTransport(emu))``."""

    def __init__(self, emulator: Emulator, *, flavour: str | None = None) -> None:
        self.emulator = emulator
        self.flavour = flavour

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        result = self.emulator.handle(request.method, str(request.url), body, flavour=self.flavour)
        return _to_httpx(result, request)

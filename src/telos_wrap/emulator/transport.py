"""In-process HTTP transports that send requests to an :class:`Emulator` instead of the network.

>>> emu = Emulator()
>>> client = anthropic.Anthropic(api_key="x", http_client=emulator_http_client(emu, "anthropic"))

The SDK lines telos supports use two HTTP libraries with the same API: ``httpx2`` (anthropic >= 1,
openai >= 3) and ``httpx`` (anthropic 0.x, openai 1.x / 2.x); an SDK accepts only a client of its
own library (docs/integrations.md, "SDK versions"). :func:`emulator_http_client` builds the right
one; :func:`emulator_transport` gives the bare transport. ``EmulatorTransport`` /
``AsyncEmulatorTransport`` are the ``httpx2`` classes (or ``httpx`` where ``httpx2`` is not
installed). The real local HTTP server (:func:`telos_wrap.emulator.serve`) works with any library.

The chat flavour is chosen from the request URL (see :meth:`Emulator.flavour_for_url`) unless
``flavour`` is given.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any

from telos_wrap.private_api import sdk_module

from .emulator import Emulator
from .wire import EmulatorResponse

__all__ = [
    "AsyncEmulatorTransport",
    "EmulatorTransport",
    "emulator_http_client",
    "emulator_transport",
    "sdk_http_library",
]

#: The HTTP libraries the supported SDK lines are built on, newest first.
HTTP_LIBRARIES = ("httpx2", "httpx")


def sdk_http_library(sdk: str | ModuleType) -> ModuleType:
    """The HTTP library (``httpx2`` or ``httpx``) the installed ``anthropic`` / ``openai`` SDK uses."""
    name = sdk if isinstance(sdk, str) else sdk.__name__
    base_client = importlib.import_module(sdk_module(name, "base_client"))
    for library in HTTP_LIBRARIES:
        module = getattr(base_client, library, None)  # the SDK's own ``import httpx2`` / ``import httpx``
        if isinstance(module, ModuleType):
            return module
    raise RuntimeError(f"cannot tell which HTTP library {name} uses (neither httpx2 nor httpx)")


def _to_response(http: ModuleType, result: EmulatorResponse, request: Any) -> Any:
    return http.Response(result.status, headers=list(result.headers), content=result.body, request=request)


@functools.cache
def _transport_classes(library: str) -> tuple[type, type]:
    """(sync, async) transport classes for ``library`` (``"httpx2"`` or ``"httpx"``)."""
    http = importlib.import_module(library)

    class _Sync(http.BaseTransport):  # type: ignore[name-defined,misc]
        """Synchronous transport: ``Client(transport=EmulatorTransport(emu))``."""

        def __init__(self, emulator: Emulator, *, flavour: str | None = None) -> None:
            self.emulator = emulator
            self.flavour = flavour

        def handle_request(self, request: Any) -> Any:
            body = request.read()
            result = self.emulator.handle(request.method, str(request.url), body, flavour=self.flavour)
            return _to_response(http, result, request)

    class _Async(http.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        """Asynchronous transport: ``AsyncClient(transport=AsyncEmulatorTransport(emu))``."""

        def __init__(self, emulator: Emulator, *, flavour: str | None = None) -> None:
            self.emulator = emulator
            self.flavour = flavour

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            result = self.emulator.handle(request.method, str(request.url), body, flavour=self.flavour)
            return _to_response(http, result, request)

    for cls, name in ((_Sync, "EmulatorTransport"), (_Async, "AsyncEmulatorTransport")):
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = __name__
    return _Sync, _Async


def emulator_transport(
    emulator: Emulator,
    *,
    library: str | ModuleType = "httpx2",
    asynchronous: bool = False,
    flavour: str | None = None,
) -> Any:
    """A transport of ``library`` (a name or the module) that answers from ``emulator``."""
    name = library if isinstance(library, str) else library.__name__
    sync, async_ = _transport_classes(name)
    return (async_ if asynchronous else sync)(emulator, flavour=flavour)


def emulator_http_client(
    emulator: Emulator,
    sdk: str | ModuleType = "anthropic",
    *,
    asynchronous: bool = False,
    flavour: str | None = None,
) -> Any:
    """A ``Client`` / ``AsyncClient`` of the HTTP library ``sdk`` uses, answered by ``emulator``.

    Pass it as ``http_client=`` to that SDK's client.
    """
    http = sdk_http_library(sdk)
    transport = emulator_transport(emulator, library=http, asynchronous=asynchronous, flavour=flavour)
    return (http.AsyncClient if asynchronous else http.Client)(transport=transport)


def _default_library() -> str:
    for library in HTTP_LIBRARIES:
        try:
            importlib.import_module(library)
        except ImportError:
            continue
        return library
    raise ImportError("the emulator's transports need httpx2 or httpx (installed with the SDKs)")


#: The transports of the newest library installed (``httpx2``, else ``httpx``).
EmulatorTransport, AsyncEmulatorTransport = _transport_classes(_default_library())

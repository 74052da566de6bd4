"""The HTTP library the SDKs under test are built on, for the suite's mock and emulator transports.

anthropic >= 1 and openai >= 3 use ``httpx2``; anthropic 0.x and openai 1.x / 2.x use ``httpx``
(docs/integrations.md, "SDK versions"). An SDK accepts only a client of its own library, so the
suite's transports, requests and responses are built from ``sdk_http`` — the library both SDKs
use. The nox matrix pairs SDK lines that share one library; a mixed install is refused up front.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from telos_wrap.emulator import sdk_http_library
from telos_wrap.emulator.transport import _transport_classes

if TYPE_CHECKING:
    # mypy runs where the newest SDKs are installed (noxfile.py, typecheck): they send through httpx2.
    import httpx2 as sdk_http
else:
    sdk_http = sdk_http_library("anthropic")
if sdk_http_library("openai") is not sdk_http:  # pragma: no cover - an environment error
    raise RuntimeError(
        "the test suite needs anthropic and openai on one HTTP library; installed: "
        f"anthropic uses {sdk_http.__name__}, openai uses {sdk_http_library('openai').__name__}"
    )

#: The emulator's transports for ``sdk_http``.
EmulatorTransport, AsyncEmulatorTransport = _transport_classes(sdk_http.__name__)

__all__ = ["AsyncEmulatorTransport", "EmulatorTransport", "redirected", "sdk_http"]


def redirected(request: sdk_http.Request, base: str, body: bytes) -> sdk_http.Request:
    """``request`` (its ``body`` already read) sent to ``{base}{path}`` instead of its vendor's host:
    how the suite's redirecting transports reach a local emulator server over real HTTP."""
    headers = request.headers.copy()
    del headers["host"]
    return sdk_http.Request(
        request.method,
        f"{base}{request.url.raw_path.decode('ascii')}",
        headers=headers,
        content=body,
        extensions=request.extensions,
    )

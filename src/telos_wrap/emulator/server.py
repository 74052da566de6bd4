"""A real local HTTP server in front of an :class:`Emulator` (for recording cassettes over HTTP).

>>> with serve(emu) as base_url:           # "http://127.0.0.1:PORT"
...     anthropic.Anthropic(api_key="x", base_url=base_url)
...     openai.OpenAI(api_key="x", base_url=base_url + "/v1")

It is the standard library's ``ThreadingHTTPServer`` made to take a crowd: one daemon thread per
connection, a listen queue of :data:`LISTEN_BACKLOG` instead of ``socketserver``'s 5 (with 5, a burst
of 30 concurrent SDK calls saw 6 to 12 connections reset: ``openai.APIConnectionError`` with
``max_retries=0``), and a client that hangs up mid-answer (a timeout, a cancelled task) ends its
connection quietly instead of printing a traceback. It is bound to 127.0.0.1 (a free port unless
``port`` is given), run in a daemon thread and shut down when the ``with`` block exits. No third-party
server: the package's runtime dependencies stay the SDKs, wrapt and pydantic, and the emulator
answers one request at a time anyway (a lock), so a server's throughput is not what limits it.

Flavour of ``/v1/chat/completions``: a first path segment naming a chat flavour wins
(``{base_url}/vllm/v1/chat/completions`` is vLLM); otherwise the ``flavour`` argument of
:func:`serve`; otherwise the emulator's ``default_openai_flavour``.  ``/v1/messages`` is always
the Anthropic flavour.

While it serves, each flavour's base URL (:func:`flavour_base_url`: ``{base_url}/openai/v1``,
``/deepseek/v1``, ``/vllm/v1``, ``/sglang/v1``, ``/openrouter/api/v1``, ``/litellm/v1``) is
announced to telos in this process (``telos_wrap.endpoints``): a patched OpenAI client pointed
there gets the engine of the service the flavour emulates, not ``generic``.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from telos_wrap import endpoints

from .emulator import BASE_PATHS, CHAT_FLAVOURS, COMPAT_CHAT_FLAVOURS, Emulator, _check_flavour

_HOST = "127.0.0.1"
#: Connections the kernel queues before the server accepts them (capped by ``net.core.somaxconn``).
LISTEN_BACKLOG = max(1024, socket.SOMAXCONN)
#: What a client hanging up mid-request or mid-answer raises in the handler thread.
_HUNG_UP = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_log = logging.getLogger(__name__)


class EmulatorHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a deep listen queue, daemon threads and quiet hang-ups."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not an error of the emulator: one debug line, no traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, _HUNG_UP):
            _log.debug("emulator: client %s hung up (%s)", client_address, type(error).__name__)
            return
        super().handle_error(request, client_address)


def _split_flavour(path: str) -> tuple[str | None, str]:
    """``/vllm/v1/chat/completions`` -> ("vllm", "/v1/chat/completions")."""
    head, sep, rest = path.lstrip("/").partition("/")
    if head in CHAT_FLAVOURS and sep:
        return head, "/" + rest
    return None, path


def _handler(emulator: Emulator, flavour: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60  # seconds an idle keep-alive connection is kept open

        def _respond(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            prefixed, path = _split_flavour(self.path)
            url = f"http://{self.headers.get('Host') or _HOST}{path}"
            result = emulator.handle(self.command, url, body, flavour=prefixed or flavour)
            self.send_response(result.status)
            for name, value in result.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(result.body)))
            self.end_headers()
            for chunk in result.chunks:  # one write per SSE event
                self.wfile.write(chunk)
                self.wfile.flush()

        do_POST = _respond
        do_GET = _respond

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default stderr access log."""

    return Handler


def flavour_base_url(base_url: str, flavour: str) -> str:
    """The base URL an SDK client uses for ``flavour`` on the server at ``base_url``.

    ``anthropic`` is the server's own URL; a chat flavour NAME is ``{base_url}/NAME`` followed by the
    vendor's own base path (:data:`~telos_wrap.emulator.BASE_PATHS`: ``/gemini/v1beta/openai``,
    ``/groq/openai/v1``, ``/vllm/v1``...).
    """
    name = _check_flavour(flavour)
    if name == "anthropic":
        return base_url
    return f"{base_url}/{name}{BASE_PATHS[name]}"


@contextmanager
def serve(emulator: Emulator, *, flavour: str | None = None, port: int = 0) -> Iterator[str]:
    """Serve ``emulator`` on ``http://127.0.0.1:<port>`` for the duration of the block.

    Yields the base URL (no trailing slash).  ``flavour`` picks the chat flavour for paths
    without a flavour prefix.  ``port=0`` (default) takes a free port; a fixed port keeps
    recorded cassette URLs stable.  Only the loopback interface is bound.
    """
    if flavour is not None:
        _check_flavour(flavour, CHAT_FLAVOURS)
    server = EmulatorHTTPServer((_HOST, port), _handler(emulator, flavour))
    thread = threading.Thread(target=server.serve_forever, name="telos-wrap-emulator", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    base_url = f"http://{host!s}:{port}"
    # telos in this process routes each flavour's URL to the engine of the service it emulates. The
    # automatic-caching vendors (``flavour_compat``) get telos's ``generic`` engine, as an unannounced
    # URL does: nothing to announce.
    announced = [name for name in CHAT_FLAVOURS if name not in COMPAT_CHAT_FLAVOURS]
    flavour_urls = [flavour_base_url(base_url, name) for name in announced]
    for url, name in zip(flavour_urls, announced, strict=True):
        endpoints.announce(url, name)
    try:
        yield base_url
    finally:
        for url in flavour_urls:
            endpoints.withdraw(url)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

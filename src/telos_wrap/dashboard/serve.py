"""Serving the dashboard page on loopback: one static document, so the standard library's server.

The page is rendered once before the server starts; every GET of ``/`` (or ``/index.html``) returns
it, anything else 404. It binds 127.0.0.1 by default: the page is for the person at this machine.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _handler(page: bytes) -> type[BaseHTTPRequestHandler]:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/", "/index.html"):
                self.send_error(404, "the dashboard is at /")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a page view is not worth a line on the terminal."""

    return Page


def make_server(page: str, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for ``page`` on ``host:port`` (port 0: a free one; read ``server_address``)."""
    server = ThreadingHTTPServer((host, port), _handler(page.encode("utf-8")))
    server.daemon_threads = True
    return server


@contextlib.contextmanager
def served(page: str, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``page`` in a background thread for the block; yields its URL."""
    server = make_server(page, host, port)
    thread = threading.Thread(target=server.serve_forever, name="telos-dashboard", daemon=True)
    thread.start()
    try:
        bound, chosen = server.server_address[:2]
        yield f"http://{bound!s}:{chosen}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

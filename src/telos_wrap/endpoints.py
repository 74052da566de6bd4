"""Endpoints this process serves itself, and the engine each one emulates.

The built-in emulator's ``serve()`` announces the base URLs of its chat flavours here
(``http://127.0.0.1:PORT/openai/v1`` emulates OpenAI, ``…/vllm/v1`` vLLM, …), so telos in the same
process routes a client pointed at one of them to the engine of the service it emulates — the engine
the application will run against the real service — instead of the ``generic`` engine of an unknown
host. ``patch(engines=...)`` still wins; a URL nobody announced is routed as before.
"""

from __future__ import annotations

import threading
from types import MappingProxyType

__all__ = ["announce", "served_endpoints", "withdraw"]

_lock = threading.Lock()
_served: MappingProxyType[str, str] = MappingProxyType({})


def announce(base_url: str, engine: str) -> None:
    """Route OpenAI-client requests to ``base_url`` (and below it) to ``engine`` until withdrawn."""
    global _served
    with _lock:
        _served = MappingProxyType({**_served, base_url.rstrip("/"): engine})


def withdraw(base_url: str) -> None:
    """Forget ``base_url`` (the server stopped)."""
    global _served
    with _lock:
        _served = MappingProxyType({k: v for k, v in _served.items() if k != base_url.rstrip("/")})


def served_endpoints() -> MappingProxyType[str, str]:
    """``{base_url: engine}`` of the endpoints served in this process (a read-only snapshot)."""
    return _served

"""What a test sent: ``RequestCapture``, a request observer that keeps each body as the application built it.

The cache budgets (``telos_wrap.testing.budget``) replay these bodies — never the answers the test
got — through telos and the built-in emulator. See ``docs/testing.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from telos_wrap.ir.model import UsageReport
from telos_wrap.replay.traces import TraceRequest

__all__ = ["RequestCapture"]


class RequestCapture:
    """A ``telos_wrap.patch`` request observer that keeps every body as the application sent it.

    ``with RequestCapture() as capture:`` — while active (and ``patch()`` in effect) each request telos
    handles is appended to ``capture.requests`` as a ``TraceRequest`` whose ``session`` is the telos
    session it was sent in; usage reports go to ``capture.usage`` by ``(session, index)``.
    """

    def __init__(self) -> None:
        self.requests: list[TraceRequest] = []
        self.usage: dict[tuple[str, int], UsageReport | None] = {}
        self._lock = threading.Lock()

    def on_request(self, api: str, session_id: str, index: int, body: Mapping[str, Any]) -> None:
        """Keep a deep copy of ``body`` (the caller may mutate its lists after the call)."""
        copied = _plain_copy(body)
        with self._lock:
            self.requests.append(TraceRequest(session_id, index, api, copied))

    def on_usage(self, session_id: str, index: int, report: UsageReport | None) -> None:
        with self._lock:
            self.usage[(session_id, index)] = report

    def __enter__(self) -> RequestCapture:
        from telos_wrap.patch.observers import OBSERVERS

        OBSERVERS.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from telos_wrap.patch.observers import OBSERVERS

        try:
            OBSERVERS.remove(self)
        except ValueError:
            pass


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_copy(item) for item in value]
    return value

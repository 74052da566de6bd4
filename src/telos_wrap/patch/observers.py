"""Observers of the requests telos handles (``telos_wrap.record()`` is one).

The only hook for recording: with no observer registered it costs one list check per call. An
observer never breaks a call, even in strict mode: its failures are logged and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.ir.model import UsageReport
from telos_wrap.patch.calls import CallContext

__all__ = ["OBSERVERS", "RequestObserver", "notify_request", "notify_usage"]


class RequestObserver(Protocol):
    """Sees the requests telos handles; must not raise.

    ``on_request(api, session_id, index, body)`` runs before sending, with the body as the caller
    sent it (``json_data`` merged with ``extra_body``) and ``api`` in the vocabulary of trace files
    (``telos_wrap.replay.traces``): ``"anthropic"`` (Messages), ``"openai"`` (Chat Completions) or
    ``"responses"`` (OpenAI Responses); ``on_usage(session_id, index, report)`` runs once the
    response's usage is known (for a stream: when it is exhausted or closed).
    """

    def on_request(self, api: str, session_id: str, index: int, body: Mapping[str, Any]) -> None: ...

    def on_usage(self, session_id: str, index: int, report: UsageReport | None) -> None: ...


#: Active observers.
OBSERVERS: list[RequestObserver] = []


def notify_request(api: str, ctx: CallContext | None, body: Mapping[str, Any] | None) -> None:
    """Tell every observer about a request telos is about to send (turns only, not token counts).

    ``api``: ``"anthropic"``, ``"openai"`` (Chat Completions) or ``"responses"`` (see the protocol).
    """
    if not OBSERVERS or ctx is None or ctx.index < 0:
        return
    try:
        for observer in list(OBSERVERS):
            observer.on_request(api, ctx.session.id, ctx.index, body or {})
    except Exception as exc:  # an observer never breaks the call
        report_failure(TelosStageError("observer", exc), strict=False)


def notify_usage(ctx: CallContext, report: UsageReport | None) -> None:
    """Tell every observer the usage of a request's response."""
    if not OBSERVERS or ctx.index < 0:
        return
    try:
        for observer in list(OBSERVERS):
            observer.on_usage(ctx.session.id, ctx.index, report)
    except Exception as exc:
        report_failure(TelosStageError("observer", exc), strict=False)

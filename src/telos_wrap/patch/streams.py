"""Usage from streams, with no proxy: the SDK's own ``Stream`` object gets an observing iterator.

Both SDKs' ``Stream.__iter__``/``__next__`` pull from one iterator attribute
(``private_api.stream_iterator``); replacing it on the instance (as Sentry and Langfuse do) keeps the
object's type, ``with`` support, ``.response``, ``close()``, the helpers built on it
(``MessageStream``, ``ChatCompletionStream``) and pickling behaviour exactly as they were. Usage is
attached as events arrive, so a stream abandoned half way still reports what it saw; nothing raised
by the observer reaches the caller unless ``strict``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from telos_wrap.engines.base import StreamUsage
from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.patch.calls import CallContext
from telos_wrap.patch.observers import notify_usage
from telos_wrap.private_api import set_stream_iterator, stream_iterator
from telos_wrap.usage import as_json, attach_usage

__all__ = ["hook_stream", "is_stream"]

_USAGE_EVENTS = frozenset({"message_start", "message_delta"})
_UNREAD: Any = object()  # an event's ``type`` not read yet (see ``_event_kind``)
#: Anthropic stream events that never carry usage (a stream's content deltas are most of its events):
#: passed on without feeding them (``_feed`` would look up their ``usage``, which they lack: ~1.5 us
#: each, the SDK model's ``__getattr__`` raises, and nothing of theirs would be fed).
_NO_USAGE_EVENTS = frozenset(
    {"content_block_start", "content_block_delta", "content_block_stop", "message_stop", "ping"}
)


def is_stream(obj: Any) -> bool:
    """True for the SDKs' ``Stream`` / ``AsyncStream`` (they define ``__stream__`` and a response)."""
    return hasattr(type(obj), "__stream__") and hasattr(obj, "response")


def _feed(accumulator: StreamUsage, event: Any, stream: Any, ctx: CallContext, kind: Any = _UNREAD) -> bool:
    """Feed one event; return True if the caller must not see it (our own usage-only chunk).

    ``kind``: the event's ``type`` if the caller read it already (``_event_kind``).
    """
    if kind is _UNREAD:
        kind = getattr(event, "type", None)
    if isinstance(kind, str) and kind.startswith("response."):
        # OpenAI Responses: usage rides on the terminal event's ``response`` (response.completed).
        response = getattr(event, "response", None)
        usage = getattr(response, "usage", None)
        if usage is not None and hasattr(usage, "model_dump"):
            accumulator.feed({"type": kind, "response": {"usage": as_json(usage)}})
            attach_usage(stream, accumulator.report())
        return False
    if kind in _USAGE_EVENTS:
        accumulator.feed(_usage_event(kind, event))
        attach_usage(stream, report := accumulator.report())
        if ctx.telemetry is not None:  # the SDK's own span ends before the stream's last event
            ctx.telemetry.observe(report, final=False)
        return False
    usage = getattr(event, "usage", None)
    if usage is not None and hasattr(usage, "model_dump"):
        choices = getattr(event, "choices", None)
        accumulator.feed({"usage": as_json(usage), "choices": len(choices or ())})
        attach_usage(stream, accumulator.report())
        return ctx.hide_usage_chunk and not choices
    return False


def _usage_event(kind: str, event: Any) -> dict[str, Any]:
    """The part of an Anthropic ``message_start`` / ``message_delta`` event that carries usage (and
    the message's ``diagnostics``), as plain JSON: dumping the whole event would also dump the
    message it starts."""
    if kind == "message_start":
        message = getattr(event, "message", None)
        dumped = {"usage": as_json(getattr(message, "usage", None))}
        diagnostics = getattr(message, "diagnostics", None)
        if diagnostics is not None:
            dumped["diagnostics"] = as_json(diagnostics)
        return {"type": kind, "message": dumped}
    return {"type": kind, "usage": as_json(getattr(event, "usage", None))}


def _is_usage_only(event: Any) -> bool:
    """A chat chunk that only carries usage (``choices == []``), the one telos may have asked for."""
    try:
        return getattr(event, "usage", None) is not None and not getattr(event, "choices", None)
    except Exception:
        return False


def _event_kind(event: Any) -> Any:
    """The event's ``type`` (``None`` if it has none), read once per event; ``_UNREAD`` if reading
    it raised (``_feed`` reads it again, inside ``_guarded_feed``'s handler, which reports it)."""
    try:
        return getattr(event, "type", None)
    except Exception:
        return _UNREAD


def _plain(kind: Any) -> bool:
    """An Anthropic event that never carries usage (``_NO_USAGE_EVENTS``): nothing to feed or hide."""
    return type(kind) is str and kind in _NO_USAGE_EVENTS


def _guarded_feed(
    accumulator: StreamUsage, event: Any, stream: Any, ctx: CallContext, kind: Any = _UNREAD
) -> bool:
    if not ctx.stream_failed:
        try:
            return _feed(accumulator, event, stream, ctx, kind)
        except Exception as exc:
            ctx.stream_failed = True
            report_failure(TelosStageError("stream-usage", exc), strict=ctx.strict)
    # Usage capture is off, but a usage chunk telos asked for is still not the caller's to see.
    return ctx.hide_usage_chunk and _is_usage_only(event)


def _finish(accumulator: StreamUsage, stream: Any, ctx: CallContext) -> None:
    try:
        report = accumulator.report()
        attach_usage(stream, report)
        if ctx.index >= 0:
            ctx.session.record_usage(ctx.index, report)
        notify_usage(ctx, report)
        if ctx.telemetry is not None:
            ctx.telemetry.observe(report)
    except Exception as exc:
        report_failure(TelosStageError("stream-usage", exc), strict=ctx.strict)


def _observe(
    iterator: Iterator[Any], accumulator: StreamUsage, stream: Any, ctx: CallContext
) -> Iterator[Any]:
    try:
        for event in iterator:
            kind = _event_kind(event)
            if _plain(kind) or not _guarded_feed(accumulator, event, stream, ctx, kind):
                yield event
    finally:
        _finish(accumulator, stream, ctx)


async def _aobserve(
    iterator: AsyncIterator[Any], accumulator: StreamUsage, stream: Any, ctx: CallContext
) -> AsyncIterator[Any]:
    try:
        async for event in iterator:
            kind = _event_kind(event)
            if _plain(kind) or not _guarded_feed(accumulator, event, stream, ctx, kind):
                yield event
    finally:
        _finish(accumulator, stream, ctx)


def hook_stream(stream: Any, ctx: CallContext) -> None:
    """Make ``stream`` report usage as it is consumed (idempotent per stream)."""
    if getattr(stream, "_telos_hooked", False):
        return
    accumulator = ctx.engine.stream_usage()
    if ctx.telemetry is not None:  # its span waits for the stream's usage
        ctx.telemetry.streaming = True
    original = stream_iterator(stream)
    if hasattr(original, "__anext__"):
        set_stream_iterator(stream, _aobserve(original, accumulator, stream, ctx))
    else:
        set_stream_iterator(stream, _observe(original, accumulator, stream, ctx))
    stream._telos_hooked = True

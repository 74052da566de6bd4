"""Usage from streams, with no proxy: the SDK's own ``Stream`` object gets an observing iterator.

Both SDKs' ``Stream.__iter__``/``__next__`` pull from ``self._iterator``; replacing that attribute on
the instance (as Sentry and Langfuse do) keeps the object's type, ``with`` support, ``.response``,
``close()``, the helpers built on it (``MessageStream``, ``ChatCompletionStream``) and pickling
behaviour exactly as they were. Usage is attached as events arrive, so a stream abandoned half way
still reports what it saw; nothing raised by the observer reaches the caller unless ``strict``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from telos_wrap.engines.base import StreamUsage
from telos_wrap.errors import TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.patch.calls import CallContext
from telos_wrap.patch.observers import notify_usage
from telos_wrap.usage import attach_usage

__all__ = ["hook_stream", "is_stream"]

_USAGE_EVENTS = frozenset({"message_start", "message_delta"})


def is_stream(obj: Any) -> bool:
    """True for the SDKs' ``Stream`` / ``AsyncStream`` (they define ``__stream__`` and ``_iterator``)."""
    return hasattr(type(obj), "__stream__") and hasattr(obj, "response")


def _feed(accumulator: StreamUsage, event: Any, stream: Any, ctx: CallContext) -> bool:
    """Feed one event; return True if the caller must not see it (our own usage-only chunk)."""
    kind = getattr(event, "type", None)
    if isinstance(kind, str) and kind.startswith("response."):
        # OpenAI Responses: usage rides on the terminal event's ``response`` (response.completed).
        response = getattr(event, "response", None)
        usage = getattr(response, "usage", None)
        if usage is not None and hasattr(usage, "model_dump"):
            accumulator.feed({"type": kind, "response": {"usage": usage.model_dump(mode="json")}})
            attach_usage(stream, accumulator.report())
        return False
    if kind in _USAGE_EVENTS:
        accumulator.feed(event.model_dump(mode="json"))
        attach_usage(stream, accumulator.report())
        return False
    usage = getattr(event, "usage", None)
    if usage is not None and hasattr(usage, "model_dump"):
        choices = getattr(event, "choices", None)
        accumulator.feed({"usage": usage.model_dump(mode="json"), "choices": len(choices or ())})
        attach_usage(stream, accumulator.report())
        return ctx.hide_usage_chunk and not choices
    return False


def _is_usage_only(event: Any) -> bool:
    """A chat chunk that only carries usage (``choices == []``), the one telos may have asked for."""
    try:
        return getattr(event, "usage", None) is not None and not getattr(event, "choices", None)
    except Exception:
        return False


def _guarded_feed(accumulator: StreamUsage, event: Any, stream: Any, ctx: CallContext) -> bool:
    if not ctx.stream_failed:
        try:
            return _feed(accumulator, event, stream, ctx)
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
    except Exception as exc:
        report_failure(TelosStageError("stream-usage", exc), strict=ctx.strict)


def _observe(
    iterator: Iterator[Any], accumulator: StreamUsage, stream: Any, ctx: CallContext
) -> Iterator[Any]:
    try:
        for event in iterator:
            if _guarded_feed(accumulator, event, stream, ctx):
                continue
            yield event
    finally:
        _finish(accumulator, stream, ctx)


async def _aobserve(
    iterator: AsyncIterator[Any], accumulator: StreamUsage, stream: Any, ctx: CallContext
) -> AsyncIterator[Any]:
    try:
        async for event in iterator:
            if _guarded_feed(accumulator, event, stream, ctx):
                continue
            yield event
    finally:
        _finish(accumulator, stream, ctx)


def hook_stream(stream: Any, ctx: CallContext) -> None:
    """Make ``stream`` report usage as it is consumed (idempotent per stream)."""
    if getattr(stream, "_telos_hooked", False):
        return
    accumulator = ctx.engine.stream_usage()
    original = stream._iterator
    if hasattr(original, "__anext__"):
        stream._iterator = _aobserve(original, accumulator, stream, ctx)
    else:
        stream._iterator = _observe(original, accumulator, stream, ctx)
    stream._telos_hooked = True

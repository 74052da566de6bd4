"""The wrapt wrappers: entry points, the request layer, and response parsing.

* **Entry points** (``create``/``stream``/``parse``/``count_tokens``/``tool_runner``): take
  ``telos_hint=`` out of the call (validated before any I/O) and nothing else.
* **``request()``** of the SDKs' base clients — the one method every Messages / Chat Completions call
  passes through exactly once per logical call (retries happen inside it): the call's turn is
  prepared once (``turns``: lift → bridge → emit the body). A failure there sends the original body
  (fail open).
* **``APIResponse.parse()``** — where every response object is made, raw or not: attach the
  ``UsageReport`` to what it returns, or hook the stream it returns.

Vendor exceptions are never caught here: ``wrapped(...)`` is always called outside any ``try`` that
could swallow or alter its errors. What the request layer reads (``request_body``), how a call
becomes a session's turn (``turns``), the SDK's serializer, streams, observers, routing tables and
the LiteLLM and DSPy hooks are modules of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from telos_wrap.errors import TelosHintError, TelosStageError
from telos_wrap.failopen import report_failure
from telos_wrap.patch.calls import (
    CallContext,
    current_call,
    hint_headers,
    release_hint,
)
from telos_wrap.patch.observers import OBSERVERS, notify_request, notify_usage
from telos_wrap.patch.request_body import observed_body, trace_api
from telos_wrap.patch.streams import hook_stream, is_stream
from telos_wrap.patch.turns import aprepare_for_sending, prepare_for_sending
from telos_wrap.telemetry import begin as telemetry_begin
from telos_wrap.usage import as_json, attach_usage, json_mapping

__all__ = [
    "async_parse_wrapper",
    "entry_wrapper",
    "make_async_request_wrapper",
    "make_request_wrapper",
    "parse_wrapper",
]

logger = logging.getLogger("telos_wrap")

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def entry_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Public entry point: move ``telos_hint`` into a private header; forward everything else.

    An invalid hint raises ``TelosHintError`` (the call is written wrong); any other failure here is
    telos' own and fails open: the call goes on without the hint.
    """
    token: str | None = None
    try:
        token = hint_headers(kwargs)
    except TelosHintError:
        raise
    except Exception as exc:
        kwargs.pop("telos_hint", None)
        report_failure(TelosStageError("hint", exc))
    if token is None:
        return wrapped(*args, **kwargs)
    try:
        return wrapped(*args, **kwargs)
    except BaseException:
        # The call ended before its request was read (the SDK refused its arguments): nothing will
        # read its entry. A call that was sent had its entry taken by the request layer already.
        release_hint(token)
        raise


def _swap_options(
    args: tuple[Any, ...], kwargs: dict[str, Any], options: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if len(args) > 1:
        return (args[0], options, *args[2:]), kwargs
    kwargs = dict(kwargs)
    kwargs["options"] = options
    return args, kwargs


def _original_options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("options")


def _after(result: Any, ctx: CallContext) -> None:
    """Remember the call on a raw response so its later ``.parse()`` can attach usage."""
    if hasattr(result, "http_response") and hasattr(result, "parse"):
        try:
            result._telos_call = ctx
        except Exception:
            pass


def make_request_wrapper(sdk: str) -> Wrapper:
    """Wrapper for ``SyncAPIClient.request`` of ``sdk`` (``"anthropic"`` or ``"openai"``)."""

    def request_wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        original = _original_options(args, kwargs)
        options, ctx = prepare_for_sending(sdk, instance, original)
        if OBSERVERS:
            notify_request(trace_api(sdk, original), ctx, observed_body(sdk, original))
        tel = telemetry_begin(ctx, original, instance)  # None unless a provider is configured
        args, kwargs = _swap_options(args, kwargs, options)
        if ctx is None:
            return wrapped(*args, **kwargs)
        token = current_call.set(ctx)
        flight = tel.sending() if tel is not None else None
        try:
            result = wrapped(*args, **kwargs)
        finally:
            current_call.reset(token)
            if tel is not None:
                tel.sent(flight)
        _after(result, ctx)
        return result

    return request_wrapper


def make_async_request_wrapper(sdk: str) -> Callable[..., Awaitable[Any]]:
    """Wrapper for ``AsyncAPIClient.request`` of ``sdk``."""

    async def request_wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        original = _original_options(args, kwargs)
        options, ctx = await aprepare_for_sending(sdk, instance, original)
        if OBSERVERS:
            notify_request(trace_api(sdk, original), ctx, observed_body(sdk, original))
        tel = telemetry_begin(ctx, original, instance)  # None unless a provider is configured
        args, kwargs = _swap_options(args, kwargs, options)
        if ctx is None:
            return await wrapped(*args, **kwargs)
        token = current_call.set(ctx)
        flight = tel.sending() if tel is not None else None
        try:
            result = await wrapped(*args, **kwargs)
        finally:
            current_call.reset(token)
            if tel is not None:
                tel.sent(flight)
        _after(result, ctx)
        return result

    return request_wrapper


# -- responses -------------------------------------------------------------------------------------


def _observe_result(result: Any, ctx: CallContext) -> None:
    try:
        if is_stream(result):
            hook_stream(result, ctx)
            return
        usage = getattr(result, "usage", None)
        if usage is None or not hasattr(usage, "model_dump"):
            return
        # Anthropic ``diagnostics``; OpenAI Responses ``prompt_cache_diagnostics`` (docs/engines.md).
        diagnostics = _field(result, "diagnostics") or _field(result, "prompt_cache_diagnostics")
        report = ctx.engine.parse_usage(as_json(usage), diagnostics=json_mapping(diagnostics))
        attach_usage(result, report)
        notify_usage(ctx, report)
        if ctx.telemetry is not None:
            ctx.telemetry.observe(report)
        if ctx.index >= 0:
            response_id = getattr(result, "id", None)
            ctx.session.record_usage(
                ctx.index, report, response_id=response_id if isinstance(response_id, str) else None
            )
    except Exception as exc:
        report_failure(TelosStageError("usage", exc), strict=ctx.strict)


def _field(model: Any, name: str) -> Any:
    """``getattr(model, name, None)`` for an SDK model, without the raised and caught AttributeError
    (~0.8 us) of a field the model lacks: pydantic keeps fields in ``__dict__``, unknown ones (an
    SDK line without the type) in ``__pydantic_extra__``."""
    fields = getattr(model, "__dict__", None)
    if not isinstance(fields, dict):
        return getattr(model, name, None)
    if name in fields:
        return fields[name]
    extra = getattr(model, "__pydantic_extra__", None)
    return extra.get(name) if isinstance(extra, dict) else None


def _context_of(response: Any) -> CallContext | None:
    ctx = getattr(response, "_telos_call", None)
    return ctx if isinstance(ctx, CallContext) else current_call.get()


def parse_wrapper(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``APIResponse.parse`` / ``LegacyAPIResponse.parse``: attach usage to what it returns."""
    result = wrapped(*args, **kwargs)
    ctx = _context_of(instance)
    if ctx is not None:
        _observe_result(result, ctx)
    return result


async def async_parse_wrapper(
    wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``AsyncAPIResponse.parse``: attach usage to what it returns."""
    result = await wrapped(*args, **kwargs)
    ctx = _context_of(instance)
    if ctx is not None:
        _observe_result(result, ctx)
    return result

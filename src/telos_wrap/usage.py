"""``usage_of()``: the normalized ``UsageReport`` of an SDK response, attached without proxies.

The report is stored as a private attribute (``_telos_usage``) on the SDK's own object — the
pattern the SDKs use for ``_request_id`` — so it stays out of ``model_dump()`` and survives
``pickle``, ``copy`` and ``model_copy``. Nothing of the response is wrapped or replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from telos_wrap.engines.anthropic_usage import parse_anthropic_usage
from telos_wrap.ir.model import UsageReport
from telos_wrap.private_api import (
    has_stream_iterator,
    parsed_inner_responses,
    set_stream_iterator,
    stream_iterator,
)

__all__ = ["ATTRIBUTE", "as_json", "attach_usage", "json_mapping", "usage_of"]

ATTRIBUTE = "_telos_usage"


def attach_usage(obj: Any, report: UsageReport | None) -> None:
    """Store ``report`` on ``obj`` (an SDK model, stream or raw response). Never raises."""
    if report is None:
        return
    try:
        setattr(obj, ATTRIBUTE, report)
    except Exception:
        try:
            object.__setattr__(obj, ATTRIBUTE, report)
        except Exception:  # pragma: no cover - objects without a __dict__
            pass


def usage_of(obj: Any) -> UsageReport | None:
    """The ``UsageReport`` of a response, or ``None`` when there is none (yet).

    Works on a ``Message`` / ``ChatCompletion`` (plain or parsed), a ``Stream`` after it was
    consumed (or while it is, with what arrived so far), a ``MessageStream`` / chat stream helper and
    its final message, and a raw response after ``.parse()``. A response telos did not see (e.g.
    sent before ``patch()``) is normalized from its own ``usage`` field when the vendor is evident;
    a stream helper telos did not see from what the SDK accumulated; a raw ``stream=True`` stream
    telos did not see from its events, once ``usage_of`` was asked before they passed (it keeps none).
    """
    report = getattr(obj, ATTRIBUTE, None)
    if isinstance(report, UsageReport):
        return report
    for inner in parsed_inner_responses(obj):
        if inner is not obj:
            found = usage_of(inner)
            if found is not None:
                return found
    snapshot = _from_snapshot(obj)
    if snapshot is not None:
        return snapshot
    if _is_raw_stream(obj):
        _tap(obj)
        return None
    return _from_own_usage(obj)


def _from_snapshot(obj: Any) -> UsageReport | None:
    """A stream helper the SDK accumulates (``MessageStream``, a chat ``ChatCompletionStream``, sync
    or async) sent without ``patch()``: the usage of what it accumulated so far."""
    for name in ("current_message_snapshot", "current_completion_snapshot"):
        if not hasattr(type(obj), name):
            continue
        try:
            snapshot = getattr(obj, name)
        except Exception:  # nothing arrived yet (the SDK asserts a snapshot exists)
            return None
        report = _from_own_usage(snapshot)
        if report is not None and name == "current_completion_snapshot" and isinstance(report.raw, Mapping):
            # The chunk's usage as it came: the SDK's accumulated copy adds the fields it left unset.
            raw = {key: value for key, value in report.raw.items() if value is not None}
            report = replace(report, raw=raw)
        return report
    return None


def _is_raw_stream(obj: Any) -> bool:
    """An SDK ``Stream`` / ``AsyncStream`` of ``stream=True`` (it keeps none of its events)."""
    return hasattr(type(obj), "__stream__") and has_stream_iterator(obj) and hasattr(obj, "response")


def _tap(stream: Any) -> None:
    """Make a raw stream telos did not see keep its usage as its events pass: ``usage_of(stream)``
    then reads it (from what arrived so far). A raw stream keeps none of its events, so a stream
    already consumed when first asked has nothing left to read (README, "usage_of")."""
    if getattr(stream, "_telos_tapped", False) or getattr(stream, "_telos_hooked", False):
        return  # already observed (by an earlier ``usage_of``, or by ``patch()``: its own reading)
    seen: dict[str, Any] = {}

    def note(event: Any) -> None:
        try:
            report = _usage_of_event(event, seen)
        except Exception:  # a reading failure never breaks the caller's stream
            report = None
        attach_usage(stream, report)

    inner = stream_iterator(stream)
    if hasattr(inner, "__anext__"):

        async def tapped_async() -> Any:
            async for event in inner:
                note(event)
                yield event

        set_stream_iterator(stream, tapped_async())
    else:

        def tapped() -> Any:
            for event in inner:
                note(event)
                yield event

        set_stream_iterator(stream, tapped())
    stream._telos_tapped = True


def _usage_of_event(event: Any, seen: dict[str, Any]) -> UsageReport | None:
    """The usage so far of a raw stream, given its next event; ``seen`` holds the stream's
    accumulator, the one ``patch()`` feeds for the same engine (``StreamUsage``), fed the same way."""
    kind = getattr(event, "type", None)
    if kind in ("message_start", "message_delta"):  # Anthropic
        if kind == "message_start":
            message = event.message
            fed: dict[str, Any] = {"usage": as_json(getattr(message, "usage", None))}
            if getattr(message, "diagnostics", None) is not None:
                fed["diagnostics"] = as_json(message.diagnostics)
            item: dict[str, Any] = {"type": kind, "message": fed}
        else:
            item = {"type": kind, "usage": as_json(getattr(event, "usage", None))}
        engine = "anthropic"
    elif isinstance(kind, str) and kind.startswith("response."):  # Responses: on the terminal event
        usage = getattr(getattr(event, "response", None), "usage", None)
        if usage is None or not hasattr(usage, "model_dump"):
            return None
        item, engine = {"type": kind, "response": {"usage": as_json(usage)}}, "openai"
    else:  # a chat chunk: usage on the last one (``stream_options.include_usage``)
        usage = getattr(event, "usage", None)
        if usage is None or not hasattr(usage, "model_dump"):
            return None
        item = {"usage": as_json(usage), "choices": len(getattr(event, "choices", None) or ())}
        engine = "openai"
    accumulator = seen.get(engine)
    if accumulator is None:
        from telos_wrap.engines.registry import get_engine

        accumulator = seen[engine] = get_engine(engine).stream_usage()
    accumulator.feed(item)
    report: UsageReport | None = accumulator.report()
    return report


def as_json(value: Any) -> Any:
    """An SDK model as plain JSON (``model_dump(mode="json")``); anything else as it is.

    Without pydantic's serializer warnings: a response the SDK parsed leniently (a token count sent
    as a string) is read as it is, and a value telos cannot use counts as not reported, never as a
    warning the application sees (or, under ``-W error``, a failed stage)."""
    return value.model_dump(mode="json", warnings=False) if hasattr(value, "model_dump") else value


def json_mapping(value: Any) -> Mapping[str, Any] | None:
    """``value`` (an SDK model, or the raw JSON an SDK line without its type keeps) as a plain JSON
    mapping, or ``None`` when it is neither."""
    dumped = as_json(value)
    return dumped if isinstance(dumped, Mapping) else None


def _anthropic_diagnostics(message: Any) -> Mapping[str, Any] | None:
    """A message's own ``diagnostics`` (e.g. a stream's final message, which carries what its
    ``message_start`` said), as plain JSON."""
    return json_mapping(getattr(message, "diagnostics", None))


def _from_own_usage(obj: Any) -> UsageReport | None:
    usage = getattr(obj, "usage", None)
    if usage is None or not hasattr(usage, "model_dump"):
        return None
    data = as_json(usage)
    from telos_wrap.engines.openai_usage import is_responses_usage, parse_openai_usage

    # LiteLLM's ``ModelResponse`` on a route to Claude carries Anthropic's cache fields beside the
    # inclusive ``prompt_tokens`` of the chat shape: read as the chat shape (docs/engines.md, *Routes*).
    if "prompt_tokens" in data:
        litellm = "cache_read_input_tokens" in data or "cache_creation_input_tokens" in data
        return parse_openai_usage(data, engine="litellm" if litellm else "openai")
    # OpenAI Responses also says ``input_tokens`` (inclusive, with ``input_tokens_details``); only
    # Anthropic's own cache fields make a usage Anthropic's (docs/engines.md, "Usage").
    if "cache_read_input_tokens" in data or "cache_creation_input_tokens" in data:
        return parse_anthropic_usage(data, diagnostics=_anthropic_diagnostics(obj))
    if is_responses_usage(data):
        return parse_openai_usage(data, engine="openai")
    if "input_tokens" in data and "prompt_tokens" not in data:
        return parse_anthropic_usage(data, diagnostics=_anthropic_diagnostics(obj))
    return parse_openai_usage(data, engine="openai")

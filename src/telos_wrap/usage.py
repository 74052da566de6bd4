"""``usage_of()``: the normalized ``UsageReport`` of an SDK response, attached without proxies.

The report is stored as a private attribute (``_telos_usage``) on the SDK's own object — the
pattern the SDKs use for ``_request_id`` — so it stays out of ``model_dump()`` and survives
``pickle``, ``copy`` and ``model_copy``. Nothing of the response is wrapped or replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telos_wrap.engines.anthropic_usage import parse_anthropic_usage
from telos_wrap.ir.model import UsageReport
from telos_wrap.private_api import parsed_inner_responses

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
    sent before ``patch()``) is normalized from its own ``usage`` field when the vendor is evident.
    """
    report = getattr(obj, ATTRIBUTE, None)
    if isinstance(report, UsageReport):
        return report
    for inner in parsed_inner_responses(obj):
        if inner is not obj:
            found = usage_of(inner)
            if found is not None:
                return found
    return _from_own_usage(obj)


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

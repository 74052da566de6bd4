"""The request body telos reads: what the SDK would send, read from its request options.

The request layer sees the SDK's ``FinalRequestOptions`` before the SDK serializes them: a body
(``json_data`` merged with ``extra_json``, top-level sentinels removed, as the SDK merges them) that
is plain JSON at the top is read as it is, with its deeper values checked by the pipeline
(``lift/plain.py``); any other is read as the SDK itself serializes it (``sdk_json``), and those
plain bytes are what goes out, rewritten or not. Iterables the SDK accepts for ``messages`` or
``tools`` are listed once (``materialize``). ``readable`` and ``as_sdk_sends`` are plans
(``patch/steps.py``): a body's file inputs are read by the driver that runs them (``ReadFiles``),
inline for a sync client, in a worker thread for an async one, never on the event loop's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from itertools import repeat
from typing import Any

from telos_wrap.errors import NotPlainJSON, TelosStageError, TelosUnreadableError
from telos_wrap.failopen import report_failure
from telos_wrap.lift.plain import require_plain
from telos_wrap.patch.sdk_json import sdk_plain, with_file_inputs
from telos_wrap.patch.steps import Plan, ReadFiles

__all__ = [
    "as_sdk_sends",
    "materialize",
    "merged_body",
    "observed_body",
    "plain_body",
    "readable",
    "trace_api",
    "well_formed",
]

logger = logging.getLogger("telos_wrap")


#: Types of plain JSON values (``_top_plain``).
_PLAIN = frozenset({str, int, float, bool, type(None), list, dict})


def _is_sentinel(value: Any) -> bool:
    """Whether ``value`` is an SDK sentinel: anthropic's or openai's ``Omit`` / ``NotGiven``."""
    kind = type(value)
    return kind.__name__ in ("Omit", "NotGiven") and kind.__module__.split(".")[0] in ("anthropic", "openai")


def merged_body(options: Any) -> dict[str, Any] | None:
    """``json_data`` merged with ``extra_json``, top-level sentinels removed (as the SDK merges them)."""
    data = options.json_data
    if not isinstance(data, Mapping):
        return None
    body = {key: value for key, value in data.items() if not _is_sentinel(value)}
    extra = options.extra_json
    if isinstance(extra, Mapping):
        # Like the SDK's _merge_mappings: extra_body wins, an Omit removes the key.
        for key, value in extra.items():
            if _is_sentinel(value):
                body.pop(key, None)
            else:
                body[key] = value
    return body


def plain_body(options: Any) -> dict[str, Any] | None:
    """The body the SDK would send: ``json_data`` merged with ``extra_json``, sentinels removed."""
    body = merged_body(options)
    return None if body is None else well_formed(body, options.url)


def well_formed(body: dict[str, Any], url: Any, *, checked: bool = False) -> dict[str, Any] | None:
    """``body`` if it has the message list (or Responses input items) of its endpoint, else ``None``.

    ``checked``: ``_top_plain`` already found every message a dict with a ``str`` role.
    """
    if checked and not _is_responses_url(url):
        return body if type(body.get("messages")) is list else None
    if _is_responses_url(url):
        items = body.get("input")
        if isinstance(items, list) and not all(isinstance(item, Mapping) for item in items):
            return None  # malformed: let the SDK / API produce its own error
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not _all_messages(messages):
        return None  # malformed: let the SDK / API produce its own error
    return body


_RESPONSES_PATHS = ("/responses", "/responses/input_tokens", "/responses/compact")


def trace_api(sdk: str, options: Any) -> str:
    """The API of a request in the vocabulary of trace files: anthropic, openai (chat) or responses."""
    if sdk == "anthropic":
        return "anthropic"
    return "responses" if _is_responses_url(getattr(options, "url", None)) else "openai"


def _is_responses_url(url: Any) -> bool:
    """Whether the request goes to an OpenAI Responses endpoint (``input`` items, no ``messages``)."""
    return isinstance(url, str) and url.split("?", 1)[0].rstrip("/").endswith(_RESPONSES_PATHS)


_ROLE_KEYS = repeat("role")  # an endless "role", "role", ... for map(dict.get, ...)


def _top_plain(body: dict[str, Any]) -> bool:
    """Whether ``body`` is plain JSON at the top, in its message (or input item) list and roles, in
    its first message and tools (which name an implicit session): C-level passes in the common case.
    Deeper values are checked by the pipeline (``lift/plain.py``), past what a session has settled."""
    if not set(map(type, body.values())) <= _PLAIN:
        return False
    for key in ("messages", "input"):
        items = body.get(key)
        if type(items) is list and items:
            if not set(map(type, items)) <= {dict}:
                return False
            if key == "messages" and not set(map(type, map(dict.get, items, _ROLE_KEYS))) <= {str}:
                return False
            try:
                require_plain({"first": items[0]})
            except NotPlainJSON:
                return False
    tools = body.get("tools")
    return type(tools) is not list or set(map(type, tools)) <= {dict}


def readable(sdk: str, options: Any) -> Plan[tuple[Any, dict[str, Any] | None]]:
    """The options to send and the plain body telos reads from them (``None``: not for telos).

    A body that is plain JSON at the top is read as it is; any other is read as the SDK serializes
    it (``as_sdk_sends``).
    """
    body = merged_body(options)
    if body is None:
        return options, None
    if _top_plain(body):
        return options, _reported(well_formed(body, options.url, checked=True), body, options.url)
    return (yield from as_sdk_sends(sdk, options, body))


def _reported(read: dict[str, Any] | None, body: Mapping[str, Any], url: Any) -> dict[str, Any] | None:
    """``read``; when it is ``None`` (no message list of the endpoint's form), the request goes out as
    built and that fallback is counted and logged like any request the lift cannot read."""
    if read is None:
        field = "input" if _is_responses_url(url) else "messages"
        what = (
            "is not a list of input item objects"
            if field == "input"
            else "is missing, or not a list of message objects with a string role"
        )
        if field in body or field == "messages":
            report_failure(TelosStageError("lift", TelosUnreadableError(field, what)))
    return read


def as_sdk_sends(sdk: str, options: Any, body: dict[str, Any]) -> Plan[tuple[Any, dict[str, Any] | None]]:
    """``body`` as the SDK serializes it (``patch/sdk_json.py``), and options that send exactly that.

    The body is copied as the SDK copies it (a generator in it is read once, into the copy: the copy
    is what is serialized from then on); its file inputs, if any, are read by the driver
    (``ReadFiles``). If the SDK rejects a value (its copy, a file read or its serializer raises), the
    request goes out as built (the SDK then raises its own error), with a log line saying so;
    nothing is guessed.
    """
    try:
        copied, files = with_file_inputs(sdk, body)
        if files:
            copied = yield ReadFiles(sdk, copied)
        plain = sdk_plain(sdk, copied)
    except Exception as exc:
        logger.warning(
            "telos_wrap: the %s SDK cannot serialize this request's body (%s); telos leaves it as "
            "built and the SDK reports the error",
            sdk,
            type(exc).__name__,
        )
        return options, None
    return options.model_copy(update={"json_data": plain, "extra_json": None}), _reported(
        well_formed(plain, options.url), plain, options.url
    )


def observed_body(sdk: str, options: Any) -> dict[str, Any] | None:
    """The body observers (``record()``, the pytest plugin) see: what the caller sent, as the SDK
    serializes it when it is not plain JSON (only while someone observes: it walks the whole body)."""
    body = plain_body(options)
    try:
        if body is not None:
            require_plain(body)
        return body
    except NotPlainJSON:
        pass
    merged = merged_body(options)
    try:
        return None if merged is None else well_formed(sdk_plain(sdk, merged), options.url)
    except Exception:
        return body


def _all_messages(messages: list[Any]) -> bool:
    """Whether every item is a mapping with a string ``role``."""
    # The common case (plain dicts, str roles) in C-level passes: this runs on every call over the
    # whole conversation, and a Python-level loop costs ~0.1 ms at 1,000 messages.
    if set(map(type, messages)) <= {dict} and set(map(type, map(dict.get, messages, _ROLE_KEYS))) <= {str}:
        return True
    return all(isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in messages)


def materialize(options: Any) -> Any:
    """Options whose ``messages`` / ``tools`` are lists, if the caller passed other iterables.

    The anthropic SDK leaves a generator or tuple as it came; it can be read only once, so it is
    turned into a list here and that list is what goes out — rewritten, or as is if telos fails.
    """
    data = options.json_data
    if not isinstance(data, Mapping):
        return options
    changed = {
        key: list(value)
        for key in ("messages", "tools", "input")
        if (value := data.get(key)) is not None
        and type(value) is not list  # the usual case, before the ABC checks
        and not isinstance(value, (list, str, bytes, Mapping))
        and not _is_sentinel(value)
        and hasattr(value, "__iter__")
    }
    return options.model_copy(update={"json_data": {**data, **changed}}) if changed else options

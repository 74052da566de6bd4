"""Validate a plain-JSON request body against the SDK's own request ``TypedDict``s, strictly.

pydantic's ``TypeAdapter`` over the SDKs' params types validates ``Iterable[...]`` fields lazily
and ignores unknown keys, so it would accept almost anything. This walker reads the same types
(``anthropic.types.message_create_params.MessageCreateParamsNonStreaming``, ``openai.types.chat.
completion_create_params.CompletionCreateParamsNonStreaming`` and everything they reference) and
checks the body the way the API does: required keys present, no unknown keys, literals exact,
arrays are JSON arrays (an ``Iterable`` param is sent as a list), unions matched by one branch.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import typing_extensions
from anthropic.types import message_create_params as anthropic_params
from openai.types.chat import completion_create_params as openai_params

__all__ = ["SchemaError", "check", "check_anthropic_body", "check_openai_body"]


class SchemaError(AssertionError):
    """The body does not match the SDK's request type."""


_WRAPPERS = {
    typing_extensions.Required,
    typing_extensions.NotRequired,
    getattr(typing_extensions, "ReadOnly", object()),
    getattr(typing, "Required", object()),
    getattr(typing, "NotRequired", object()),
}
_SEQUENCES = {list, Iterable, Sequence, typing.List, typing.Iterable, typing.Sequence}  # noqa: UP006
_MAPPINGS = {dict, Mapping, typing.Dict, typing.Mapping}  # noqa: UP006


_REQUIRED = {typing_extensions.Required, getattr(typing, "Required", object())}
_NOT_REQUIRED = {typing_extensions.NotRequired, getattr(typing, "NotRequired", object())}


@functools.cache
def _hints(td: type) -> dict[str, Any]:
    return typing.get_type_hints(td, include_extras=True)


@functools.cache
def _required(td: Any) -> frozenset[str]:  # a TypedDict class (typing has no type for one)
    """Required keys. ``__required_keys__`` alone is wrong for the SDKs' TypedDicts: they are declared
    with ``from __future__ import annotations``, so a ``Required[...]`` inside a ``total=False`` class
    is a string when the class is built. The resolved annotations say what each key really is."""
    hints = _hints(td)
    marked = {k for k, t in hints.items() if typing.get_origin(t) in _REQUIRED}
    unmarked = {k for k in td.__required_keys__ if typing.get_origin(hints.get(k)) not in _NOT_REQUIRED}
    return frozenset(marked | unmarked)


def _describe(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def check(value: Any, tp: Any, path: str = "$") -> None:
    """Raise ``SchemaError`` if ``value`` (plain JSON) is not a valid ``tp``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return check(value, typing.get_args(tp)[0], path)
    if origin in _WRAPPERS:
        return check(value, typing.get_args(tp)[0], path)
    if tp is Any or tp is object:
        return None
    if tp is type(None) or tp is None:
        if value is not None:
            raise SchemaError(f"{path}: expected null, got {type(value).__name__}")
        return None
    if origin is typing.Union or origin is types.UnionType:
        errors = []
        for option in typing.get_args(tp):
            try:
                check(value, option, path)
                return None
            except SchemaError as exc:
                errors.append(str(exc))
        raise SchemaError(f"{path}: matches no branch of {_describe(tp)}:\n  " + "\n  ".join(errors[:6]))
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if not any(value == a and type(value) is type(a) for a in allowed):
            raise SchemaError(f"{path}: {value!r} is not one of {allowed!r}")
        return None
    if typing_extensions.is_typeddict(tp):
        return _check_typeddict(value, tp, path)
    if origin in _SEQUENCES or tp in _SEQUENCES:
        if not isinstance(value, list):
            raise SchemaError(f"{path}: expected an array, got {type(value).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        for index, element in enumerate(value):
            check(element, item, f"{path}[{index}]")
        return None
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise SchemaError(f"{path}: expected an object, got {type(value).__name__}")
        args = typing.get_args(tp)
        for key, element in value.items():
            check(element, args[1] if args else Any, f"{path}.{key}")
        return None
    if tp is bool:
        if type(value) is not bool:
            raise SchemaError(f"{path}: expected a boolean, got {value!r}")
        return None
    if tp is int:
        if type(value) is not int:
            raise SchemaError(f"{path}: expected an integer, got {value!r}")
        return None
    if tp is float:
        if type(value) not in (int, float):
            raise SchemaError(f"{path}: expected a number, got {value!r}")
        return None
    if tp is str:
        if not isinstance(value, str):
            raise SchemaError(f"{path}: expected a string, got {type(value).__name__}")
        return None
    # File handles, paths and other non-JSON inputs the SDK converts: never valid in a JSON body.
    raise SchemaError(f"{path}: {type(value).__name__} is not a JSON value of type {_describe(tp)}")


def _check_typeddict(value: Any, td: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise SchemaError(f"{path}: expected an object ({td.__name__}), got {type(value).__name__}")
    hints = _hints(td)
    unknown = sorted(set(value) - set(hints))
    if unknown:
        raise SchemaError(f"{path}: unknown key(s) {unknown} for {td.__name__}")
    missing = sorted(_required(td) - set(value))
    if missing:
        raise SchemaError(f"{path}: missing required key(s) {missing} for {td.__name__}")
    for key in sorted(value):  # sorted: the first error reported does not depend on key order
        check(value[key], hints[key], f"{path}.{key}")


def check_anthropic_body(body: Mapping[str, Any]) -> None:
    """``body`` is a valid ``messages.create`` request (streaming or not)."""
    params = (
        anthropic_params.MessageCreateParamsStreaming
        if body.get("stream") is True
        else anthropic_params.MessageCreateParamsNonStreaming
    )
    check(dict(body), params)


def check_openai_body(body: Mapping[str, Any]) -> None:
    """``body`` is a valid ``chat.completions.create`` request (streaming or not)."""
    params = (
        openai_params.CompletionCreateParamsStreaming
        if body.get("stream") is True
        else openai_params.CompletionCreateParamsNonStreaming
    )
    if "prompt_cache_options" not in _hints(params):
        body = _without_newer_cache_fields(body)
    elif not _breakpoints_take_a_ttl():
        body = _without_breakpoint_ttls(body)
    check(dict(body), params)


def _breakpoints_take_a_ttl() -> bool:
    from openai.types.chat import chat_completion_content_part_text_param as text_part

    breakpoint_type = getattr(text_part, "PromptCacheBreakpoint", None)
    return breakpoint_type is None or "ttl" in _hints(breakpoint_type)


def _without_breakpoint_ttls(body: Mapping[str, Any]) -> dict[str, Any]:
    """openai 3.0's ``PromptCacheBreakpoint`` predates its ``ttl`` (the API accepts it from any
    client, docs/engines.md): check the rest of the body."""

    def strip(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                k: (
                    {kk: vv for kk, vv in v.items() if kk != "ttl"}
                    if k == "prompt_cache_breakpoint"
                    else strip(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return {k: strip(v) for k, v in body.items()}


def _without_newer_cache_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """An older SDK line (openai 2.x) predates the API's newer cache fields, which telos sends on
    models that take them (the API accepts them from any client): check the rest of the body."""
    from telos_wrap.emulator.flavour_openai import NEWER_API_FIELDS

    def strip(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: strip(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return {
        k: strip(v)
        for k, v in body.items()
        if k not in NEWER_API_FIELDS or k in _hints(openai_params.CompletionCreateParamsNonStreaming)
    }

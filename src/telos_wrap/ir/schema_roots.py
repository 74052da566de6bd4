"""Where the JSON Schemas of a request are: tool parameters and structured-output formats.

A schema's ``properties`` order is read by the model: with structured outputs it writes the fields
in schema order (docs/sessions.md, *Orders telos keeps*), so a schema written ``reasoning, answer``
makes it reason before it answers. Canonical bytes (``ir.canon``) therefore keep the order of every
name → schema map (``properties``, ``patternProperties``, ``$defs``...), and a session restores the
order it saw first when a harness reshuffles them (``sessions/learning/orders.py``). Both need to find the
schemas; this module is that one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PARAM_SCHEMA_PATHS", "SCHEMA_MAP_KEYS", "param_schemas", "tool_schema_path"]

#: JSON-Schema keywords whose value maps names to schemas: their order is kept.
SCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})

#: Top-level request fields holding a structured-output schema, and the path to it: Chat
#: Completions ``response_format``, Responses ``text.format``, Anthropic ``output_format`` /
#: ``output_config.format``.
PARAM_SCHEMA_PATHS: tuple[tuple[str, ...], ...] = (
    ("response_format", "json_schema", "schema"),
    ("text", "format", "schema"),
    ("output_format", "schema"),
    ("output_config", "format", "schema"),
)


def tool_schema_path(tool: Any) -> tuple[str, ...] | None:
    """The path of a tool definition's parameter schema (Anthropic, Chat, Responses shapes)."""
    if not isinstance(tool, Mapping):
        return None
    if isinstance(tool.get("input_schema"), Mapping):
        return ("input_schema",)
    function = tool.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("parameters"), Mapping):
        return ("function", "parameters")
    if tool.get("type") == "function" and isinstance(tool.get("parameters"), Mapping):
        return ("parameters",)
    return None


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def param_schemas(params: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    """``(path, schema)`` of every structured-output schema among the request's top-level fields."""
    for path in PARAM_SCHEMA_PATHS:
        if path[0] not in params:
            continue  # the usual case, every request: no walk down a path that is not there
        schema = _at(params, path)
        if isinstance(schema, Mapping):
            yield path, schema


def replaced_at(value: Mapping[str, Any], path: tuple[str, ...], new: Any) -> dict[str, Any]:
    """A copy of ``value`` with ``new`` at ``path`` (the containers on the way copied, nothing else)."""
    out = dict(value)
    if len(path) == 1:
        out[path[0]] = new
    else:
        inner = out.get(path[0])
        out[path[0]] = replaced_at(inner if isinstance(inner, Mapping) else {}, path[1:], new)
    return out

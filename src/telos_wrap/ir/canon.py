"""Canonical bytes (TELOS R5): equal content must give equal bytes, whatever order keys arrived in.

A prefix cache matches bytes (or the tokens rendered from them). A harness written in a language
whose JSON maps iterate in random order (Go, Swift), or one that rebuilds its tool list from a set,
changes the prefix on every request without changing its meaning. This module is the one place
that decides the canonical form:

* payloads: dict keys sorted recursively; array order never touched (``tool_use`` inputs and
  ``tool_result`` contents are user data: a field that happens to be named ``required`` in them
  must not be reordered);
* JSON-Schema subtrees (a tool's ``input_schema`` / ``function.parameters``, a structured-output
  ``response_format`` / ``text.format`` / ``output_format`` schema): additionally sort the
  set-semantics array ``required``; never ``enum``, ``examples``, ``anyOf``, ``oneOf``, ``allOf``
  (their order is meaningful), and never the names of ``properties`` (or ``patternProperties``,
  ``$defs``...): the model writes structured output in ``properties`` order, so they keep the
  caller's order (a session restores the order it saw first when a harness reshuffles them:
  ``sessions/learning/orders.py``);
* the tools array: a stable sort key, builtin → mcp → user → unmarked, then MCP server, then name.

Key sorting is a walk over the containers that reuses every leaf object (strings are never copied):
on the sample traces it is ~15 times faster than a round trip through the C JSON encoder, whose cost
grows with the bytes of text rather than with the number of nodes (measured in
``benchmarks/overhead.py``). The C encoder is used where bytes are needed (``canonical_json``).
This is also the only module allowed to call ``json.dumps`` (ruff TID251 enforces it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from telos_wrap.ir.schema_roots import SCHEMA_MAP_KEYS, param_schemas, replaced_at

__all__ = [
    "MARKER_KEYS",
    "SCHEMA_SET_ARRAY_KEYS",
    "TOOL_SOURCE_RANK",
    "canonical_bytes",
    "canonical_json",
    "canonicalize_params",
    "canonicalize_payload",
    "canonicalize_schema",
    "canonicalize_tool_def",
    "compact_json_encoder",
    "is_plain_text_part",
    "tool_label",
    "tool_name",
    "tool_sort_key",
]

#: JSON-Schema keywords whose array value is a set (order carries no meaning). Module-level so an
#: application can extend it.
SCHEMA_SET_ARRAY_KEYS: frozenset[str] = frozenset({"required"})

#: Tool source ranks for the stable tool sort.
TOOL_SOURCE_RANK: Mapping[str, int] = {"builtin": 0, "mcp": 1, "user": 2, "unmarked": 3}

# Keywords whose value is a schema, a list of schemas, or a map of name -> schema.
_SCHEMA_VALUED = frozenset(
    {
        "additionalProperties",
        "items",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
    }
)
_SCHEMA_LIST_VALUED = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAP_VALUED = SCHEMA_MAP_KEYS

_SCALARS = frozenset({str, int, float, bool, type(None)})


def compact_json_encoder(*, sort_keys: bool, allow_nan: bool) -> Callable[[Any], str]:
    """A compact JSON text function (no insignificant whitespace, UTF-8 kept), built once.

    ``JSONEncoder.encode`` builds a new C encoder on every call (~1.2 us, more than encoding a small
    value); the function returned here reuses one, with the same settings. Without the
    circular-reference check, which needs a markers dict per call: a cyclic value raises
    RecursionError instead of ValueError (an error either way).
    """
    python = json.JSONEncoder(
        sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan
    )
    if c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        return python.encode
    encode = c_make_encoder(
        None, python.default, encode_basestring, None, ":", ",", sort_keys, False, allow_nan
    )

    def text(value: Any) -> str:
        return "".join(encode(value, 0))

    return text


#: The canonical JSON text of a value: sorted keys, no insignificant whitespace, UTF-8 kept.
#: (``canonicalize_payload`` already recurses on a cyclic value before it is ever encoded.)
canonical_json: Callable[[Any], str] = compact_json_encoder(sort_keys=True, allow_nan=True)


def canonical_bytes(value: Any) -> bytes:
    """``canonical_json(value)`` encoded as UTF-8 — the bytes prefix caches compare."""
    return canonical_json(value).encode("utf-8")


#: The fields a cache marker takes on a block: Anthropic ``cache_control``, OpenAI
#: ``prompt_cache_breakpoint`` (docs/engines.md).
MARKER_KEYS = frozenset({"cache_control", "prompt_cache_breakpoint"})


def is_plain_text_part(part: Any) -> bool:
    """A ``{"type": "text", "text": ...}`` part with nothing else (no marker, no citations).

    Chat Completions and Anthropic define string content as the equivalent of one such part
    (docs/engines.md, *Wire shapes*): where telos sends one shape for both, this decides.
    """
    return (
        isinstance(part, Mapping)
        and len(part) == 2
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


def canonicalize_payload(value: Any) -> Any:
    """Return ``value`` with every dict's keys in sorted order, recursively. Arrays keep their order.

    The result is a new structure of plain dicts and lists (tuples become lists, as in JSON) whose
    leaves are the original objects; ``value`` is not modified. Equal for any permutation of keys;
    idempotent.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError:  # mixed key types: order as JSON would after turning keys into strings
            keys = sorted(value, key=str)
        result = {}
        for key in keys:
            item = value[key]
            result[key] = item if type(item) in _SCALARS else canonicalize_payload(item)
        return result
    if isinstance(value, (list, tuple)):
        return [item if type(item) in _SCALARS else canonicalize_payload(item) for item in value]
    return value


def canonicalize_schema(schema: Any) -> Any:
    """Canonicalize a JSON-Schema (sub)tree: keys sorted, ``required`` sorted, nothing else reordered
    (the names of ``properties`` and the other name → schema maps keep their order)."""
    if isinstance(schema, list):
        # Only reached for tuple-form ``items``; each element is a schema.
        return [canonicalize_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return canonicalize_payload(schema)
    result: dict[str, Any] = {}
    for key in sorted(schema):
        value = schema[key]
        if (
            key in SCHEMA_SET_ARRAY_KEYS
            and isinstance(value, list)
            and all(isinstance(v, str) for v in value)
        ):
            result[key] = sorted(value)
        elif key in _SCHEMA_VALUED:
            result[key] = canonicalize_schema(value)
        elif key in _SCHEMA_LIST_VALUED and isinstance(value, list):
            result[key] = [canonicalize_schema(item) for item in value]
        elif key in _SCHEMA_MAP_VALUED and isinstance(value, Mapping):
            result[key] = {name: canonicalize_schema(value[name]) for name in value}
        else:
            # enum, const, examples, default, description...: data, keys sorted only.
            result[key] = canonicalize_payload(value)
    return result


def canonicalize_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``canonicalize_payload(params)``, with every structured-output schema canonicalized as a schema
    (``schema_roots.PARAM_SCHEMA_PATHS``): its ``properties`` keep their order."""
    result: dict[str, Any] = canonicalize_payload(dict(params))
    for path, schema in param_schemas(params):
        result = replaced_at(result, path, canonicalize_schema(schema))
    return result


def canonicalize_tool_def(tool: Any) -> Any:
    """Canonicalize a tool definition in Anthropic (``input_schema``) or OpenAI (``parameters``) shape."""
    if not isinstance(tool, Mapping):
        return canonicalize_payload(tool)
    result = canonicalize_payload(tool)
    if "input_schema" in tool:
        result["input_schema"] = canonicalize_schema(tool["input_schema"])
    function = tool.get("function")
    if isinstance(function, Mapping) and "parameters" in function:
        result["function"]["parameters"] = canonicalize_schema(function["parameters"])
    elif tool.get("type") == "function" and isinstance(tool.get("parameters"), Mapping):
        # OpenAI Responses function tools are flat: ``{"type": "function", "name", "parameters"}``.
        result["parameters"] = canonicalize_schema(tool["parameters"])
    return result


#: OpenAI Responses built-in tool types, which carry no ``name`` (openai 3.54 ``responses/tool_param.py``:
#: ``web_search*``, ``file_search``, ``code_interpreter``, ``computer*``, ``image_generation``,
#: ``local_shell``, ``shell``, ``apply_patch``...): every lower-case snake-case type.
_RESPONSES_BUILTIN = re.compile(r"^[a-z][a-z0-9_]*$")


def tool_name(tool: Mapping[str, Any]) -> str:
    """A tool definition's name (Chat Completions ``function.name`` or a top-level ``name``), or ``""``."""
    function = tool.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])
    name = tool.get("name")
    return name if isinstance(name, str) else ""


def tool_label(tool: Any) -> str:
    """What a tool is told apart by when it may have no name: its name, else its ``type``.

    ``function.name`` (Chat Completions) or, without a ``function`` object, the top-level ``name``;
    when that is not a string (an OpenAI Responses built-in such as ``{"type": "web_search"}``), the
    tool's ``type`` as a string; ``""`` for anything that is not a mapping. It differs from
    ``tool_name`` on purpose: ``tool_name`` is the name or ``""``, for the callers that classify a
    nameless tool by its type themselves (``tool_source``, ``tool_sort_key``). The implicit session
    key hashes ``tool_label`` (``sessions.identity``), so its result for a given tool never changes.
    """
    if not isinstance(tool, Mapping):
        return ""
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return name if isinstance(name, str) else str(tool.get("type", ""))


def tool_source(tool: Any) -> tuple[str, str]:
    """Classify a tool as ``(source, mcp_server)``.

    * builtin — a vendor server tool: Anthropic tools with a versioned ``type`` (``bash_20250124``,
      ``web_search_20250305``...), OpenAI tools whose ``type`` is not ``function``/``custom``;
    * mcp — named ``mcp__<server>__<tool>`` (the MCP client convention) or carrying ``mcp_server``;
    * user — an ordinary function tool the application defined;
    * unmarked — anything else.
    """
    if not isinstance(tool, Mapping):
        return "unmarked", ""
    name = tool_name(tool)
    server = tool.get("mcp_server")
    if isinstance(server, str):
        return "mcp", server
    if name.startswith("mcp__"):
        return "mcp", name.split("__")[1] if name.count("__") >= 2 else ""
    kind = tool.get("type")
    if kind == "mcp":  # OpenAI Responses: one entry per remote MCP server (``server_label``)
        label = tool.get("server_label")
        return "mcp", label if isinstance(label, str) else ""
    if kind in (None, "custom") and "input_schema" in tool:
        return "user", ""
    if kind == "function" and isinstance(tool.get("function"), Mapping):
        return "user", ""
    if kind in ("function", "custom") and name:  # OpenAI Responses: flat function / custom tools
        return "user", ""
    if (
        isinstance(kind, str)
        and kind not in ("custom", "function")
        and (name or _RESPONSES_BUILTIN.match(kind))
    ):
        return "builtin", ""
    return "unmarked", ""


def tool_sort_key(tool: Any) -> tuple[int, str, str]:
    """Stable tool sort key: ``(source rank, mcp server, name)``; builtin 0 → mcp 1 → user 2 → unmarked 3.

    A tool without a name (OpenAI Responses built-ins: ``{"type": "web_search"}``) sorts by its type.
    """
    source, server = tool_source(tool)
    name = tool_name(tool) if isinstance(tool, Mapping) else ""
    if not name and isinstance(tool, Mapping) and isinstance(tool.get("type"), str):
        name = str(tool["type"])
    return TOOL_SOURCE_RANK[source], server, name

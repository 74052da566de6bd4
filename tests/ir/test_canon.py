"""Canonical bytes (R5): permutation-invariant, idempotent, schema-aware."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telos_wrap.ir.canon import (
    canonical_bytes,
    canonicalize_payload,
    canonicalize_schema,
    canonicalize_tool_def,
    tool_label,
    tool_name,
    tool_sort_key,
)
from telos_wrap.replay.traces import shuffle_keys as shuffled_keys

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=25,
)


@given(json_values, st.integers(0, 2**32))
def test_canonical_bytes_ignore_key_order(value: Any, seed: int) -> None:
    assert canonical_bytes(shuffled_keys(value, random.Random(seed))) == canonical_bytes(value)


@given(json_values)
def test_canonicalize_twice_equals_once(value: Any) -> None:
    once = canonicalize_payload(value)
    assert canonicalize_payload(once) == once
    assert json.dumps(once) == json.dumps(canonicalize_payload(once))


@given(json_values)
def test_payload_canonicalization_never_reorders_arrays(value: Any) -> None:
    # Equal as values (dict equality ignores order): nothing but key order may change.
    assert canonicalize_payload(value) == value


tool_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)


@st.composite
def tool_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(tool_names, min_size=1, max_size=8, unique=True))
    tools = []
    for name in names:
        kind = draw(st.sampled_from(["user", "mcp", "builtin"]))
        props = draw(st.lists(tool_names, max_size=4, unique=True))
        schema = {"type": "object", "properties": {p: {"type": "string"} for p in props}, "required": props}
        if kind == "mcp":
            tools.append({"name": f"mcp__srv{len(name) % 3}__{name}", "input_schema": schema})
        elif kind == "builtin":
            tools.append({"type": f"{name}_20250124", "name": name})
        else:
            tools.append({"name": name, "description": "d", "input_schema": schema})
    return tools


def canonical_tools(tools: list[dict[str, Any]]) -> bytes:
    return canonical_bytes(sorted((canonicalize_tool_def(t) for t in tools), key=tool_sort_key))


@given(tool_lists(), st.integers(0, 2**32))
@settings(max_examples=200)
def test_tools_identical_for_any_permutation_of_tools_and_keys(
    tools: list[dict[str, Any]], seed: int
) -> None:
    rng = random.Random(seed)
    jittered = [shuffled_keys(tool, rng) for tool in tools]
    rng.shuffle(jittered)
    for tool in jittered:
        if "input_schema" in tool:
            rng.shuffle(tool["input_schema"]["required"])
    assert canonical_tools(jittered) == canonical_tools(tools)


def test_tool_sort_key_orders_builtin_mcp_user_unmarked() -> None:
    tools = [
        {"something": "else"},
        {"name": "zeta", "input_schema": {}},
        {"name": "mcp__b__x", "input_schema": {}},
        {"name": "mcp__a__y", "input_schema": {}},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "function", "function": {"name": "alpha", "parameters": {}}},
    ]
    ordered = sorted(tools, key=tool_sort_key)
    assert [tool_sort_key(t)[:2] for t in ordered] == [(0, ""), (1, "a"), (1, "b"), (2, ""), (2, ""), (3, "")]
    assert [tool_sort_key(t)[2] for t in ordered[3:5]] == ["alpha", "zeta"]


def test_schema_sorts_required_but_never_enum_anyof_examples() -> None:
    schema = {
        "type": "object",
        "required": ["b", "a"],
        "properties": {
            "mode": {"enum": ["z", "a"], "examples": ["z", "a"]},
            "choice": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "nested": {"type": "object", "required": ["y", "x"]},
        },
    }
    result = canonicalize_schema(schema)
    assert result["required"] == ["a", "b"]
    assert result["properties"]["nested"]["required"] == ["x", "y"]
    assert result["properties"]["mode"]["enum"] == ["z", "a"]
    assert result["properties"]["mode"]["examples"] == ["z", "a"]
    assert result["properties"]["choice"]["anyOf"] == [{"type": "string"}, {"type": "integer"}]
    assert list(result) == sorted(result)


def test_tool_payload_field_named_required_is_not_reordered() -> None:
    # A tool_use input is user data: only keys sort, arrays keep their order.
    payload = {"input": {"required": ["b", "a"]}, "name": "t", "type": "tool_use", "id": "1"}
    assert canonicalize_payload(payload)["input"]["required"] == ["b", "a"]


def test_openai_tool_shape_is_schema_canonicalized() -> None:
    tool = {
        "type": "function",
        "function": {"parameters": {"required": ["b", "a"], "type": "object"}, "name": "f"},
    }
    assert canonicalize_tool_def(tool)["function"]["parameters"]["required"] == ["a", "b"]


# -- a tool's name and its label: one helper each, a named difference ----------------------------------

TOOLS_NAMED = [
    # (tool, tool_name, tool_label)
    ({"name": "lookup", "input_schema": {}}, "lookup", "lookup"),
    ({"type": "function", "function": {"name": "lookup"}}, "lookup", "lookup"),
    ({"type": "function", "name": "lookup", "parameters": {}}, "lookup", "lookup"),  # Responses, flat
    ({"type": "web_search"}, "", "web_search"),  # a nameless built-in: the label is its type
    ({"type": "bash_20250124", "name": "bash"}, "bash", "bash"),
    ({"type": "function", "function": {}, "name": "x"}, "x", "function"),  # function object without a name
    ({}, "", ""),
]


@pytest.mark.parametrize(("tool", "name", "label"), TOOLS_NAMED)
def test_tool_name_and_tool_label(tool: dict[str, Any], name: str, label: str) -> None:
    assert tool_name(tool) == name
    assert tool_label(tool) == label


def test_tool_label_of_a_non_mapping_is_empty() -> None:
    assert tool_label("lookup") == "" and tool_label(None) == ""

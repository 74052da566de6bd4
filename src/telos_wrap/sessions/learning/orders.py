"""The order first seen: a session keeps the order of each schema's ``properties`` stable.

Canonical bytes keep the caller's order of a JSON Schema's ``properties`` (the model writes
structured output in that order: docs/sessions.md, *Orders telos keeps*). A harness that rebuilds
its schemas from a hash map (Go, Swift, a set) sends the same names in another order on every
turn, which changes the cached tools prefix. The session remembers, per schema map, the order in
which it first saw its names and sends that order again whenever the same names come in another
order: the caller's order of the first request, never an alphabetical one.

Where: every name → schema map (``properties``, ``patternProperties``, ``$defs``...) of every tool's
parameter schema and of a structured-output schema (``ir.schema_roots``). A map is identified by
its place (tool name or request field, path inside the schema) and its set of names; a changed set
is a new map (its order is then recorded anew). The state holds no names: one short hash per map
and the order as positions in the sorted names (``"2,0,1"``). Pure and deterministic: every worker
of a shared session sends the same order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from telos_wrap.ir.canon import tool_name
from telos_wrap.ir.model import TelosIR, Transformation
from telos_wrap.ir.schema_roots import SCHEMA_MAP_KEYS, param_schemas, replaced_at, tool_schema_path

__all__ = ["MAX_ORDERS", "stabilize_orders"]

#: Session-wide cap on remembered orders (the oldest are kept: they are the ones in use).
MAX_ORDERS = 512


def _key(place: str, names: list[str]) -> str:
    data = "\x1f".join([place, *sorted(names)]).encode("utf-8")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


class _Walk:
    def __init__(self, known: Mapping[str, str]) -> None:
        self.known = known
        self.new: dict[str, str] = {}
        self.restored: list[str] = []

    def schema(self, value: Any, place: str) -> Any:
        if isinstance(value, list):
            out = [self.schema(item, f"{place}/{i}") for i, item in enumerate(value)]
            return out if any(a is not b for a, b in zip(out, value, strict=True)) else value
        if not isinstance(value, Mapping):
            return value
        changed: dict[str, Any] = {}
        for key, item in value.items():
            if key in SCHEMA_MAP_KEYS and isinstance(item, Mapping):
                new = self.names(item, f"{place}/{key}")
            elif isinstance(item, (Mapping, list)):
                new = self.schema(item, f"{place}/{key}")
            else:
                continue
            if new is not item:
                changed[key] = new
        if not changed:
            return value
        return {key: changed.get(key, item) for key, item in value.items()}

    def names(self, mapping: Mapping[str, Any], place: str) -> Any:
        names = [str(name) for name in mapping]
        inner = {name: self.schema(mapping[name], f"{place}/{name}") for name in mapping}
        changed_inside = any(inner[name] is not mapping[name] for name in mapping)
        if len(names) < 2:
            return inner if changed_inside else mapping
        key = _key(place, names)
        ordered = sorted(names)
        rank = {name: i for i, name in enumerate(ordered)}
        now = ",".join(str(rank[name]) for name in names)
        seen = self.known.get(key, self.new.get(key))
        if seen is None:
            self.new[key] = now
        elif seen != now:
            positions = [int(p) for p in seen.split(",")]
            if sorted(positions) == list(range(len(names))):
                self.restored.append(place)
                return {ordered[p]: inner[ordered[p]] for p in positions}
        return inner if changed_inside else mapping


def stabilize_orders(ir: TelosIR, known: Mapping[str, str]) -> tuple[TelosIR, dict[str, str]]:
    """``ir`` with every schema map in the order first seen (``known``: map key → order).

    Returns the IR (the same object when nothing moved) and the orders seen for the first time.
    """
    walk = _Walk(known)
    tools = list(ir.tools)
    for index, tool in enumerate(ir.tools):
        path = tool_schema_path(tool.payload)
        if path is None:
            continue
        name = tool_name(tool.payload)
        schema: Any = tool.payload
        for key in path:
            schema = schema[key]
        new = walk.schema(schema, f"tool:{name}")
        if new is not schema:
            tools[index] = tool.with_payload(replaced_at(tool.payload, path, new))
    params: dict[str, Any] | None = None
    for path, schema in param_schemas(ir.params):
        new = walk.schema(schema, "param:" + ".".join(path))
        if new is not schema:
            params = replaced_at(params if params is not None else dict(ir.params), path, new)
    if not walk.restored:
        return ir, walk.new
    record = Transformation(
        kind="order-restored",
        where=", ".join(walk.restored[:4]) + (" ..." if len(walk.restored) > 4 else ""),
        detail="schema names sent in the order this session first saw them (the harness sent them in "
        "another order; the model reads and writes fields in this order)",
    )
    return (
        replace(
            ir,
            tools=tuple(tools),
            params=MappingProxyType(params) if params is not None else ir.params,
            records=(*ir.records, record),
        ),
        walk.new,
    )

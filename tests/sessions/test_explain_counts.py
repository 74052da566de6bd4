"""``explain()`` gives a character count only where text moved: a reorder says none."""

from __future__ import annotations

import anthropic

import telos_wrap
from telos_wrap.emulator import Emulator, emulator_http_client

SYSTEM = "You answer questions about the shop's orders.\n" + "Orders ship within two days. " * 200
TOOL = {"description": "d", "input_schema": {"type": "object", "properties": {}}}


def _explain(tools: list[dict[str, object]] | None) -> str:
    emu = Emulator()
    extra = {"tools": tools} if tools is not None else {}
    with (
        anthropic.Anthropic(
            api_key="x", http_client=emulator_http_client(emu, "anthropic"), max_retries=0
        ) as c,
        telos_wrap.session() as session,
    ):
        c.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=16,
            system=SYSTEM,
            messages=[{"role": "user", "content": "hi"}],
            **extra,
        )
        return session.explain(-1)


def test_sorted_tools_are_explained_without_a_character_count() -> None:
    telos_wrap.patch()
    try:
        text = _explain([{"name": "zeta", **TOOL}, {"name": "alpha", **TOOL}])
        without = _explain(None)
    finally:
        telos_wrap.unpatch()
    (line,) = [line for line in text.splitlines() if "tools-sorted" in line]
    assert line.startswith("  tools-sorted: tools — tool definitions sorted"), line
    assert "chars" not in line
    assert "tools-sorted" not in without and "chars" not in without, without

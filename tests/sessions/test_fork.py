"""Sibling branches over real HTTP: each request re-reads the shared prefix (BP-fork), past the TTL too.

Two branches share a system prompt and six agent steps, then alternate A, B, A, B with 3 minutes
between requests (6 per branch, past the 5-minute TTL): each branch's own entries expire, and the
shared prefix stays cached only if every request reads (refreshes) it for the other branch.
"""

from __future__ import annotations

import json
from typing import Any

import telos_wrap
from tests.over_http import emulator_over_http

MODEL = "claude-opus-4-8"
SYSTEM = "You are the support assistant of Example Corp.\n" + "".join(
    f"Rule {i}: answer in plain words and cite the handbook section you used.\n" for i in range(80)
)


def _step(branch: str, n: int) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"{branch}{n}", "name": "lookup", "input": {"order": n}}
    result = {"type": "tool_result", "tool_use_id": f"{branch}{n}", "content": f"order {n}: " + "ok " * 60}
    return [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result, {"type": "text", "text": f"Branch {branch}, step {n}: go on."}]},
    ]


def _marked(body: dict[str, Any]) -> list[tuple[int, int]]:
    return [
        (m, b)
        for m, message in enumerate(body["messages"])
        for b, block in enumerate(message["content"])
        if "cache_control" in block
    ]


def test_alternating_branches_past_the_ttl_keep_the_shared_prefix_read(patched: None) -> None:
    shared: list[dict[str, Any]] = [{"role": "user", "content": "Please audit my last orders."}]
    for n in range(6):
        shared += _step("s", n)
    fork = len(shared)  # the first message the branches do not share
    history = {"A": list(shared), "B": list(shared)}
    with emulator_over_http() as wire, telos_wrap.session("branches") as session:
        client = wire.anthropic()
        reads = []
        for step in range(40):  # far past 38 positions from the fork: mid anchors leave the shared part
            name = "AB"[step % 2]
            history[name] += _step(name, step)
            usage = client.messages.create(
                model=MODEL,
                max_tokens=8,
                system=SYSTEM,
                tools=[{"name": "lookup", "input_schema": {}}],
                messages=history[name],
            ).usage
            reads.append(usage.cache_read_input_tokens)
            body = json.loads(wire.bodies[-1])
            if step > 0:
                # The last block of the shared prefix carries a marker on every diverging request.
                assert (fork - 1, 1) in _marked(body), (step, _marked(body))
            wire.clock.advance(180)
        client.close()
        assert "BP-fork on messages[12][1]" in session.explain()
    shared_tokens = reads[1]  # B's first request reads exactly what A wrote up to the fork
    assert shared_tokens > 0
    assert all(read >= shared_tokens for read in reads[1:]), reads

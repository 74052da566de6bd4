"""Each engine adapter, one table: a request in, the body it emits out (inline), and a usage object
in, the ``UsageReport`` out.

A case is prepared as ``pipeline.prepare`` does for the engine named (no session, no gate) and the
emitted body is compared whole with the one written below it, so a change to any byte an adapter
produces (a marker moved, a key derived differently, a field added) shows up here as a diff of one
case. The same small conversation goes to every engine, so the table also reads as what each
vendor's cache needs: Anthropic breakpoints (docs/vendor-facts.md §1), OpenAI's
``prompt_cache_key`` (§2), nothing for DeepSeek's automatic disk cache (§3), vLLM's ``cache_salt`` and
``cache_policy`` (§4) and SGLang's routing fields (§5) — the last two sent by the patch layer as the
SDK's ``extra_body``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from telos_wrap.engines.registry import get_engine
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api
from telos_wrap.pipeline import PrepareOptions, prepare

SYSTEM = "You are a support agent for Acme. " * 3
QUESTION = "Where is order 42?"
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}
ANTHROPIC = {
    "model": "m",
    "max_tokens": 8,
    "system": SYSTEM,
    "messages": [{"role": "user", "content": QUESTION}],
}
CHAT = {
    "model": "m",
    "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
    "tools": [TOOL],
}
RESPONSES = {"model": "m", "instructions": SYSTEM, "input": [{"role": "user", "content": QUESTION}]}

#: What every OpenAI-compatible engine sends of ``CHAT`` before its own fields: keys sorted inside
#: the messages and the tool (the canonical form), the top-level keys in the caller's order.
CHAT_CANONICAL: dict[str, Any] = {
    "model": "m",
    "messages": [{"content": SYSTEM, "role": "system"}, {"content": QUESTION, "role": "user"}],
    "tools": [
        {
            "function": {
                "name": "lookup",
                "parameters": {"properties": {"id": {"type": "string"}}, "type": "object"},
            },
            "type": "function",
        }
    ],
}
#: The vLLM / SGLang tenant salt of ``isolation="tenant-a"`` in session ``s1``.
SALT = "telos-8aca8b010308ac26c5e2bf12f1e22faac429d12220268844515f5718c5710c2d"


@dataclass(frozen=True)
class Case:
    api: Api
    engine: str
    body: dict[str, Any]
    emitted: dict[str, Any]
    hints: TelosHints = field(default_factory=TelosHints)


EMIT = {
    "anthropic: a breakpoint on the system prompt and on the latest turn": Case(
        "anthropic",
        "anthropic",
        ANTHROPIC,
        {
            "model": "m",
            "max_tokens": 8,
            "system": [{"cache_control": {"type": "ephemeral"}, "text": SYSTEM, "type": "text"}],
            "messages": [
                {
                    "content": [{"cache_control": {"type": "ephemeral"}, "text": QUESTION, "type": "text"}],
                    "role": "user",
                }
            ],
        },
    ),
    "anthropic: ttl 1h on the system breakpoint, the default 5m on the turn's": Case(
        "anthropic",
        "anthropic",
        ANTHROPIC,
        {
            "model": "m",
            "max_tokens": 8,
            "system": [{"cache_control": {"type": "ephemeral", "ttl": "1h"}, "text": SYSTEM, "type": "text"}],
            "messages": [
                {
                    "content": [{"cache_control": {"type": "ephemeral"}, "text": QUESTION, "type": "text"}],
                    "role": "user",
                }
            ],
        },
        TelosHints(ttl="1h"),
    ),
    "openai chat: the canonical body and a prompt_cache_key": Case(
        "openai_chat", "openai", CHAT, {**CHAT_CANONICAL, "prompt_cache_key": "telos-bc2189d5d9d30074"}
    ),
    "openai responses: the canonical body and a prompt_cache_key": Case(
        "openai_responses",
        "openai",
        RESPONSES,
        {
            "model": "m",
            "instructions": SYSTEM,
            "input": [{"content": QUESTION, "role": "user"}],
            "prompt_cache_key": "telos-fe2f3b4ef49492d8",
        },
    ),
    "deepseek: the canonical body, nothing added (its disk cache is automatic)": Case(
        "openai_chat", "deepseek", CHAT, CHAT_CANONICAL
    ),
    "generic: the canonical body, nothing added": Case("openai_chat", "generic", CHAT, CHAT_CANONICAL),
    "vllm: cache_policy pins the prefix through the system message": Case(
        "openai_chat",
        "vllm",
        CHAT,
        {**CHAT_CANONICAL, "cache_policy": {"pin_prefix_until_block": {"message": 0, "part": 0}}},
    ),
    "vllm: a tenant's isolation is its cache_salt": Case(
        "openai_chat",
        "vllm",
        CHAT,
        {
            **CHAT_CANONICAL,
            "cache_policy": {"pin_prefix_until_block": {"message": 0, "part": 0}},
            "cache_salt": SALT,
        },
        TelosHints(isolation="tenant-a"),
    ),
    "sglang: routing by affinity key and path hash, on the GPU tier": Case(
        "openai_chat",
        "sglang",
        CHAT,
        {
            **CHAT_CANONICAL,
            "cache_control": {
                "affinity_key": "telos-bc2189d5d9d30074",
                "lock_radix_path": True,
                "path_hash": "127689289057d76cd00cdb3b91440cae",
                "prefer_tier": "gpu",
            },
            "tier_hint": "gpu",
        },
    ),
    "sglang: a tenant's isolation salts the cache and keys its radix tree apart": Case(
        "openai_chat",
        "sglang",
        CHAT,
        {
            **CHAT_CANONICAL,
            "cache_control": {
                "affinity_key": "telos-3a37aff390402b74",
                "lock_radix_path": True,
                "path_hash": "127689289057d76cd00cdb3b91440cae",
                "prefer_tier": "gpu",
            },
            "cache_salt": SALT,
            "extra_key": "telos-f6f8f0bab68406a2867237ea9551192b7cfc3cdde0f4530cd936214d9acbc44d",
            "tier_hint": "gpu",
        },
        TelosHints(isolation="tenant-a"),
    ),
}


@pytest.mark.parametrize("case", list(EMIT.values()), ids=list(EMIT))
def test_emitted_body(case: Case) -> None:
    prepared = prepare(
        case.api, case.body, PrepareOptions(engine=case.engine, session_id="s1", hints=case.hints)
    )
    assert prepared.body == case.emitted
    # The top-level keys keep the caller's order, the engine's own fields after them.
    assert list(prepared.body) == list(case.emitted)


def test_the_key_follows_the_tools_and_the_tenant_not_the_session() -> None:
    """OpenAI's routing key is the prefix family (the canonical tools, and the tenant's isolation when
    given): two sessions, or two system prompts, over one tool set share it (engines/openai.py,
    ``family_digest``); other tools or another tenant get another."""

    def key(body: dict[str, Any], session_id: str = "s1", **hints: Any) -> str:
        options = PrepareOptions(engine="openai", session_id=session_id, hints=TelosHints(**hints))
        return str(prepare("openai_chat", body, options).body["prompt_cache_key"])

    first = key(CHAT)
    other_system = {
        **CHAT,
        "messages": [{"role": "system", "content": "Another agent."}, *CHAT["messages"][1:]],
    }
    other_tool = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    assert key(CHAT, session_id="s2") == key(other_system) == first
    assert key({**CHAT, "tools": [TOOL, other_tool]}) != first
    assert key(CHAT, isolation="tenant-a") != first
    # The tools' order and the keys' order inside them do not matter (the canonical form).
    reordered = {**TOOL, "function": dict(reversed(list(TOOL["function"].items())))}
    assert key({**CHAT, "tools": [other_tool, reordered]}) == key({**CHAT, "tools": [TOOL, other_tool]})


#: ``(engine, the vendor's usage object, (raw_input, cache_read, cache_write, output))``: raw_input
#: is the uncached, unwritten part of the prompt.
USAGE = {
    "anthropic": (
        "anthropic",
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 100,
            "output_tokens": 5,
        },
        (10, 2000, 100, 5),
    ),
    "openai chat": (
        "openai",
        {"prompt_tokens": 2100, "prompt_tokens_details": {"cached_tokens": 2000}, "completion_tokens": 5},
        (100, 2000, 0, 5),
    ),
    "openai responses (no write count on this shape)": (
        "openai",
        {"input_tokens": 2100, "input_tokens_details": {"cached_tokens": 2000}, "output_tokens": 5},
        (100, 2000, None, 5),
    ),
    "deepseek (hit and miss counts)": (
        "deepseek",
        {
            "prompt_tokens": 2100,
            "prompt_cache_hit_tokens": 2000,
            "prompt_cache_miss_tokens": 100,
            "completion_tokens": 5,
        },
        (100, 2000, 0, 5),
    ),
    "vllm (no write count)": (
        "vllm",
        {"prompt_tokens": 2100, "prompt_tokens_details": {"cached_tokens": 2000}, "completion_tokens": 5},
        (100, 2000, None, 5),
    ),
    "sglang": (
        "sglang",
        {"prompt_tokens": 2100, "prompt_tokens_details": {"cached_tokens": 2000}, "completion_tokens": 5},
        (100, 2000, 0, 5),
    ),
}


@pytest.mark.parametrize(("engine", "usage", "expected"), list(USAGE.values()), ids=list(USAGE))
def test_usage_report(engine: str, usage: dict[str, Any], expected: tuple[int | None, ...]) -> None:
    report = get_engine(engine).parse_usage(usage)
    assert report is not None and report.engine == engine
    assert (report.raw_input, report.cache_read, report.cache_write, report.output) == expected
    assert report.raw == usage


@pytest.mark.parametrize("engine", ["anthropic", "openai", "deepseek", "vllm", "sglang", "generic"])
def test_no_usage_is_no_report(engine: str) -> None:
    assert get_engine(engine).parse_usage(None) is None

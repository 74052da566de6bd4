"""The names a documented snippet may ask for with ``<!-- docs-test: NAME, ... -->``.

Every snippet runs with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` (and dummy API keys) pointing
at the built-in emulator served over real HTTP on 127.0.0.1, so ``anthropic.Anthropic()`` as written
in the docs talks to it; with a fresh process-wide ``MemoryStore``; and is unpatched afterwards.
A fixture adds names to the snippet's globals and may declare *replacements*: a placeholder that
cannot be a real value in prose (a Redis URL) and the value the test substitutes. A declared
placeholder that does not occur in the snippet fails the test, so a replacement never silently
does nothing.

* ``conversation`` — ``client`` (``anthropic.Anthropic()``), ``async_client``
  (``anthropic.AsyncAnthropic()``), ``openai_client`` (``openai.OpenAI()``), and a small agent
  conversation: ``system`` (text), ``tools`` (two tools), ``history`` (messages).
* ``redis`` — ``redis://localhost:6379/0`` in the snippet is replaced by a real ``redis-server``'s
  URL (``TELOS_REDIS_URL`` or a throwaway server, as in ``tests/sessions``).
* ``redis-cluster`` — ``redis+cluster://localhost:7000,localhost:7001`` is replaced by a real
  Redis Cluster's URL (``TELOS_REDIS_CLUSTER_URL`` or a throwaway cluster, as in ``tests/sessions``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

__all__ = ["FIXTURES", "REDIS_CLUSTER_PLACEHOLDER", "REDIS_PLACEHOLDER", "Prepared"]

REDIS_PLACEHOLDER = "redis://localhost:6379/0"
REDIS_CLUSTER_PLACEHOLDER = "redis+cluster://localhost:7000,localhost:7001"


@dataclass
class Prepared:
    """What one fixture contributes: globals, placeholder replacements, and objects to close."""

    names: dict[str, Any] = field(default_factory=dict)
    replacements: dict[str, str] = field(default_factory=dict)
    closers: list[Callable[[], Any]] = field(default_factory=list)


SYSTEM = "You are the support agent of an online shop. Answer in one short paragraph.\n" + (
    "Refunds are accepted within fourteen days of delivery. " * 40
)
_NUMBER_SCHEMA = {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}
TOOLS = [
    {
        "name": "lookup_order",
        "description": "Find an order by its number.",
        "input_schema": _NUMBER_SCHEMA,
    },
    {
        "name": "refund",
        "description": "Refund an order.",
        "input_schema": _NUMBER_SCHEMA,
    },
]
HISTORY = [
    {"role": "user", "content": "Where is my order 1001?"},
    {"role": "assistant", "content": "It shipped yesterday and arrives on Friday."},
    {"role": "user", "content": "Can I still return it after it arrives?"},
]


def _conversation(context: dict[str, Any]) -> Prepared:
    client = anthropic.Anthropic()
    openai_client = openai.OpenAI()
    return Prepared(
        names={
            "client": client,
            "async_client": anthropic.AsyncAnthropic(),
            "openai_client": openai_client,
            "system": SYSTEM,
            "tools": [dict(tool) for tool in TOOLS],
            "history": [dict(message) for message in HISTORY],
        },
        closers=[client.close, openai_client.close],
    )


def _redis(context: dict[str, Any]) -> Prepared:
    return Prepared(replacements={REDIS_PLACEHOLDER: context["redis_url"]()})


def _redis_cluster(context: dict[str, Any]) -> Prepared:
    return Prepared(replacements={REDIS_CLUSTER_PLACEHOLDER: context["redis_cluster_url"]()})


FIXTURES: dict[str, Callable[[dict[str, Any]], Prepared]] = {
    "conversation": _conversation,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
}

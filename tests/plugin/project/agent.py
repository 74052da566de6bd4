"""A small support agent, the kind of application code a project's own tests exercise.

Copied into the ``pytester`` projects of ``tests/plugin`` (and used by ``record_cassettes.py``).
Every turn it rebuilds its system prompt with a live clock (``datetime.now()``), written in one of
three ways: untagged (``Now: …``, a line telos can only learn is volatile), tagged (``Current time:
…``, a DROP envelope telos recognises) or absent.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

ANTHROPIC_MODEL = "claude-opus-5"
OPENAI_MODEL = "gpt-5.4"
POLICY = "\n".join(
    f"Policy {i}: a refund under rule {i} needs the receipt, the original card and a reason code."
    for i in range(70)
)
QUESTIONS = (
    "My order 1042 arrived broken. Can I get a refund?",
    "I paid with a gift card, does that change anything?",
    "The receipt is lost, but I have the bank statement.",
    "How long does the refund take?",
    "Can you send the confirmation to my other email?",
    "What if the replacement is broken too?",
    "Do I need to ship the broken item back?",
    "Thanks, that is all.",
)


def system_prompt(clock: str, now: datetime.datetime) -> str:
    """The system prompt of one turn; ``clock`` is ``"untagged"``, ``"tagged"`` or ``"none"``."""
    lines = ["You are the support agent of Acme Home."]
    if clock == "untagged":
        lines.append(f"Now: {now:%Y-%m-%d %H:%M:%S.%f}")
    elif clock == "tagged":
        lines.append(f"Current time: {now.isoformat()}")
    lines.append("Answer briefly and politely.")
    lines.append(POLICY)
    return "\n".join(lines)


def run_anthropic(
    client: Any,
    clock: str = "untagged",
    questions: Sequence[str] = QUESTIONS,
    now: Callable[[], datetime.datetime] = datetime.datetime.now,
) -> list[str]:
    """Ask ``questions`` one after another in one conversation (Anthropic Messages API)."""
    history: list[dict[str, Any]] = []
    answers = []
    for question in questions:
        history.append({"role": "user", "content": question})
        reply = client.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=32, system=system_prompt(clock, now()), messages=history
        )
        text = reply.content[0].text
        history.append({"role": "assistant", "content": text})
        answers.append(text)
    return answers


def run_openai(
    client: Any,
    clock: str = "untagged",
    questions: Sequence[str] = QUESTIONS,
    now: Callable[[], datetime.datetime] = datetime.datetime.now,
) -> list[str]:
    """The same conversation over the OpenAI Chat Completions API."""
    history: list[dict[str, Any]] = []
    answers = []
    for question in questions:
        history.append({"role": "user", "content": question})
        reply = client.chat.completions.create(
            model=OPENAI_MODEL,
            max_completion_tokens=32,
            messages=[{"role": "system", "content": system_prompt(clock, now())}, *history],
        )
        text = reply.choices[0].message.content
        history.append({"role": "assistant", "content": text})
        answers.append(text)
    return answers

"""instructor's patched Anthropic and OpenAI clients: nine structured extractions over one
growing conversation, with and without ``patch()``.

instructor pins ``jiter<0.15`` and ``anthropic==0.93.0``, so it runs in its own environment
(``nox -s integrations_instructor``) with openai 3.3 (httpx2) beside anthropic 0.93 (httpx).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "instructor", reason="install the extra: pip install 'telos-wrap[integrations-instructor]'"
)

import anthropic
import instructor
import openai
from pydantic import BaseModel

import telos_wrap
from telos_wrap.emulator import Reply, ToolCall

from .agent_kit import ANTHROPIC_MODEL, OPENAI_MODEL, SYSTEM_PROMPT, clock_prompt

TURNS = 9


class Ticket(BaseModel):
    """A support ticket extracted from the customer's message."""

    order_id: str
    intent: str


def _replier(api: str, body: Any) -> Reply:
    return Reply(tool_calls=(ToolCall("Ticket", {"intent": "status", "order_id": "42"}),))


def _question(turn: int) -> str:
    return f"Message {turn}: where is my order 42? It has been {turn} days."


def agent(vendor: str, mode: str, clock: bool) -> Any:
    def run(url: str) -> Any:
        history: list[dict[str, Any]] = []
        results: list[Any] = []

        def system() -> str:
            return clock_prompt() if clock else SYSTEM_PROMPT

        def record(turn: int, ticket: Ticket, completion: Any) -> None:
            report = telos_wrap.usage_of(completion)  # instructor hands back the SDK's own response
            assert report is not None
            history.append({"role": "assistant", "content": ticket.model_dump_json()})
            results.append(ticket.model_dump())

        if vendor == "anthropic":
            if mode == "async":
                aclient = instructor.from_anthropic(
                    anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
                )
            else:
                client = instructor.from_anthropic(
                    anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
                )
        elif mode == "async":
            aclient = instructor.from_openai(
                openai.AsyncOpenAI(base_url=f"{url}/openai/v1", api_key="x", max_retries=0)
            )
        else:
            client = instructor.from_openai(
                openai.OpenAI(base_url=f"{url}/openai/v1", api_key="x", max_retries=0)
            )

        def kwargs(turn: int) -> dict[str, Any]:
            history.append({"role": "user", "content": _question(turn)})
            if vendor == "anthropic":
                return {
                    "model": ANTHROPIC_MODEL,
                    "max_tokens": 256,
                    "system": system(),
                    "messages": list(history),
                }
            return {"model": OPENAI_MODEL, "messages": [{"role": "system", "content": system()}, *history]}

        if mode == "async":

            async def main() -> None:
                for turn in range(TURNS):
                    ticket, completion = await aclient.create_with_completion(
                        response_model=Ticket, max_retries=0, **kwargs(turn)
                    )
                    record(turn, ticket, completion)

            asyncio.run(main())
        else:
            for turn in range(TURNS):
                ticket, completion = client.create_with_completion(
                    response_model=Ticket, max_retries=0, **kwargs(turn)
                )
                record(turn, ticket, completion)
        return results

    return run


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
@pytest.mark.parametrize("clock", [False, True], ids=["stable", "clock"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_instructor_extractions(vendor: str, mode: str, clock: bool, before_after: Any) -> None:
    name = f"instructor-{vendor}-{mode}-{'clock' if clock else 'stable'}"
    before_after(
        name, agent(vendor, mode, clock), openai_engine=vendor == "openai", replier=_replier, requests=TURNS
    )

"""Drive ``run_turn`` (the pure session step) with a harness's requests, turn after turn."""

from __future__ import annotations

import json
from typing import Any

from telos_wrap.ir.model import Api
from telos_wrap.pipeline import PrepareOptions
from telos_wrap.sessions.durable.state import SessionState
from telos_wrap.sessions.turns.turn import TurnResult, run_turn

from .convo import MODEL, RULES, assistant_text, user_text


class Driver:
    """One session's state, advanced by ``send``; remembers every ``TurnResult``."""

    def __init__(self, api: Api = "anthropic", engine: str = "anthropic") -> None:
        self.api = api
        self.engine = engine
        self.state = SessionState(session_id="drive")
        self.results: list[TurnResult] = []

    def send(self, body: dict[str, Any]) -> TurnResult:
        options = PrepareOptions(engine=self.engine, session_id="drive")
        result = run_turn(self.state, self.api, body, options, pins={}, now=float(len(self.results)))
        self.state = result.state
        self.results.append(result)
        return result

    @property
    def breaks(self) -> list[tuple[int, str]]:
        return [(brk.request, brk.reason) for brk in self.state.recent_breaks]

    def system_bytes(self, turn: int) -> bytes:
        """The system segment as emitted on ``turn`` (Anthropic ``system``; OpenAI leading messages)."""
        body = self.results[turn].prepared.body
        if self.api == "anthropic":
            return json.dumps(body.get("system"), sort_keys=True).encode()
        lead = []
        for message in body["messages"]:
            if message["role"] not in ("system", "developer"):
                break
            lead.append(message)
        return json.dumps(lead, sort_keys=True).encode()


def history(turn: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t in range(turn + 1):
        messages.append({"role": "user", "content": user_text(t)})
        if t < turn:
            messages.append({"role": "assistant", "content": assistant_text(t)})
    return messages


def anthropic_body(system: Any, turn: int) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 16, "system": system, "messages": history(turn)}


def openai_body(leading: list[dict[str, Any]], turn: int) -> dict[str, Any]:
    return {"model": "gpt-4.1", "max_tokens": 16, "messages": [*leading, *history(turn)]}


__all__ = ["RULES", "Driver", "anthropic_body", "history", "openai_body"]

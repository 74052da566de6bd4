"""The reference TELOS implementation, ``telos-sdk`` from PyPI (import name ``telos``), as a strategy.

Each request becomes the body telos-sdk's own gateway (``telos.proxy.server``) would send
upstream, by the same calls its ``handle_messages`` / OpenAI-chat handler makes:

* Anthropic: harness resolution as ``_resolve_harness`` does it with no URL tag and no
  ``--harness`` (a confident content signal — ``_detect_harness_signal`` — pinned per client, else
  the client's remembered harness, else ``openclaw``; one client per session here), then
  ``process_anthropic_request(raw, session_id=…, session_state=…, harness_name=…)`` (harness →
  IR → ``Bridge`` → ``AnthropicAdapter.plan_marks/emit``), then the gateway's
  tool_result-first safety check;
* OpenAI: ``process_openai_request(raw, session_id=…, session_state=…, engine_name="openai")``.

One ``BridgeSessionState`` per session, keyed by the session id (as if the harness sent
``x-telos-session``: the most favourable setting; by default the gateway derives the id from
system + tools + first message, which a harness that rebuilds its system prompt every turn
changes on every request). When telos-sdk raises, the gateway sends the request unchanged
(fail-open); so does this strategy, and it counts how often (``fallbacks``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from telos_wrap.replay.runner import Strategy
from telos_wrap.replay.traces import TraceRequest

NAME = "telos-sdk"


def version() -> str | None:
    """The installed telos-sdk version, or ``None`` when it is not installed."""
    try:
        import telos.proxy.pipeline  # noqa: F401
    except ImportError:
        return None
    return metadata.version("telos-sdk")


@dataclass
class ReferenceStrategy:
    """Builds telos-sdk's wire body for each request; counts fall-backs by reason (over all runs)."""

    fallbacks: Counter[str] = field(default_factory=Counter)

    def strategy(self) -> Strategy:
        """A strategy with fresh per-session state (call it once per run)."""
        states: dict[str, Any] = {}
        harness: dict[str, str] = {}

        def rewrite(request: TraceRequest, kwargs: dict[str, Any]) -> dict[str, Any]:
            from telos.bridge import BridgeSessionState

            state = states.setdefault(request.session, BridgeSessionState())
            logging.getLogger("telos").setLevel(logging.CRITICAL)
            try:
                if request.api == "anthropic":
                    return self._anthropic(request.session, kwargs, state, harness)
                return self._openai(request.session, kwargs, state)
            except Exception as exc:  # the gateway's fail-open: send the request unchanged
                self.fallbacks[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
                return kwargs

        return Strategy(NAME, rewrite=rewrite)

    def _anthropic(
        self, session: str, raw: dict[str, Any], state: Any, remembered: dict[str, str]
    ) -> dict[str, Any]:
        from telos.proxy.pipeline import process_anthropic_request
        from telos.proxy.server import _wire_tool_result_first
        from telos.scripts.telos_anthropic_transport import _detect_harness_signal

        signal = _detect_harness_signal(raw, {})
        if signal is not None:
            remembered[session] = signal
        harness = signal or remembered.get(session) or "openclaw"
        result = process_anthropic_request(raw, session_id=session, session_state=state, harness_name=harness)
        wire: dict[str, Any] = dict(result.wire)
        if not _wire_tool_result_first(wire) and _wire_tool_result_first(raw):
            self.fallbacks["wire failed the gateway's tool_result-first check"] += 1
            return raw
        return wire

    def _openai(self, session: str, raw: Mapping[str, Any], state: Any) -> dict[str, Any]:
        from telos.proxy.pipeline import process_openai_request

        result = process_openai_request(raw, session_id=session, session_state=state, engine_name="openai")
        return dict(result.wire)

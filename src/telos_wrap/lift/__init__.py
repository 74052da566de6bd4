"""Layer 1 — lift: SDK request bodies → TELOS IR (one module per wire API)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api, TelosIR, TelosMessage
from telos_wrap.lift.anthropic_messages import REFPOOL_THRESHOLD, lift_anthropic_messages
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, SplitPatterns, TextSplit, split_text

__all__ = [
    "DEFAULT_PATTERNS",
    "REFPOOL_THRESHOLD",
    "SplitPatterns",
    "TextSplit",
    "lift_anthropic_messages",
    "lift_request",
    "split_text",
]


def lift_request(
    api: Api,
    body: Mapping[str, Any],
    *,
    session_id: str,
    hints: TelosHints | None = None,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
    refpool_threshold: int | None = REFPOOL_THRESHOLD,
    settled: Sequence[TelosMessage] = (),
) -> TelosIR:
    """Lift ``body`` of wire API ``api`` into a ``TelosIR`` (``settled``: reused history, Anthropic only)."""
    if api == "anthropic":
        return lift_anthropic_messages(
            body,
            session_id=session_id,
            hints=hints,
            patterns=patterns,
            refpool_threshold=refpool_threshold,
            settled=settled,
        )
    if settled:
        raise ValueError(f"the {api} lift does not reuse settled history")
    if api == "openai_chat":
        from telos_wrap.lift.openai_chat import lift_openai_chat

        lifted: TelosIR = lift_openai_chat(
            body, session_id=session_id, hints=hints, patterns=patterns, refpool_threshold=refpool_threshold
        )
        return lifted
    raise ValueError(f"no lift for api {api!r}")

"""Layer 1 — lift: SDK request bodies → TELOS IR (one module per wire API)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Api, TelosIR, TelosMessage
from telos_wrap.ir.refpool import OwnReferences
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


def conversation(api: Api, body: Mapping[str, Any]) -> tuple[int, list[Any]] | None:
    """``(offset, messages)``: the wire messages that lift one-to-one onto ``ir.messages``.

    They are ``body["messages"][offset:]``: the OpenAI lift takes the leading system/developer
    messages into ``ir.system``. ``None`` when the body has no message list.
    """
    raw = body.get("messages")
    if not isinstance(raw, list):
        return None
    if api == "openai_chat":
        from telos_wrap.lift.openai_chat import leading_system_count

        offset = leading_system_count(raw)
        return offset, raw[offset:]
    return 0, raw


_NO_OWN: OwnReferences = MappingProxyType({})


def lift_request(
    api: Api,
    body: Mapping[str, Any],
    *,
    session_id: str,
    hints: TelosHints | None = None,
    patterns: SplitPatterns = DEFAULT_PATTERNS,
    refpool_threshold: int | None = REFPOOL_THRESHOLD,
    settled: Sequence[TelosMessage] = (),
    own: OwnReferences = _NO_OWN,
) -> TelosIR:
    """Lift ``body`` of wire API ``api`` into a ``TelosIR``.

    ``settled``: history reused from an earlier turn of the session; it stands for the first
    ``len(settled)`` messages of ``conversation(api, body)``, which are not lifted again.
    ``own``: the ref-pool stubs and entries telos emitted in this session (by slug,
    ``refpool.emitted_references``): the only texts taken as references; text that merely looks
    like one is the caller's and is lifted as such (docs/security.md).
    """
    if api == "anthropic":
        return lift_anthropic_messages(
            body,
            session_id=session_id,
            hints=hints,
            patterns=patterns,
            refpool_threshold=refpool_threshold,
            settled=settled,
            own=own,
        )
    if api == "openai_chat":
        from telos_wrap.lift.openai_chat import lift_openai_chat

        lifted: TelosIR = lift_openai_chat(
            body,
            session_id=session_id,
            hints=hints,
            patterns=patterns,
            refpool_threshold=refpool_threshold,
            settled=settled,
            own=own,
        )
        return lifted
    if api == "openai_responses":
        from telos_wrap.lift.openai_responses import lift_openai_responses

        return lift_openai_responses(body, session_id=session_id, hints=hints, patterns=patterns)
    raise ValueError(f"no lift for api {api!r}")

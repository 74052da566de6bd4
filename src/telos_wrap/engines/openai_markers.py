"""The ``prompt_cache_breakpoint`` marker both OpenAI wires carry: its key, where it sits, how it is written.

Shared by the Chat Completions emit (``telos_wrap.engines._openai_compat``) and the Responses emit
(``telos_wrap.engines.responses_wire``); both import it from here, so imports run one way only.

* ``MARKER``: the part key (openai 3.54); a caller's own marker is always put back as sent.
* ``ORIGIN``: the block-extra key the chat lift records each block's wire message under.
* ``Location``: ``(segment, message index or None, block index)`` of a block in the IR.
* ``_with_marker``: a part payload with the caller's marker, else ours, added (keys sorted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from telos_wrap.engines.base import Breakpoint
from telos_wrap.ir.model import TelosBlock

__all__ = ["MARKER", "ORIGIN", "Location"]

# Shared with the lift (telos_wrap.lift.openai_chat); engines may not import the lift layer.
MARKER = "prompt_cache_breakpoint"
ORIGIN = "oai_message"

Location = tuple[Literal["system", "messages"], int | None, int]


def _ttl(marker: Any) -> str | None:
    ttl = marker.get("ttl") if isinstance(marker, Mapping) else None
    return ttl if isinstance(ttl, str) else None


def _our_marker(bp: Breakpoint) -> dict[str, Any]:
    return {"mode": "explicit", "ttl": bp.ttl} if bp.ttl else {"mode": "explicit"}


def _with_marker(payload: Any, block: TelosBlock, ours: Breakpoint | None) -> Any:
    marker = block.extra.get(MARKER) if MARKER in block.extra else None
    if marker is None and ours is not None:
        marker = _our_marker(ours)
    if marker is None or not isinstance(payload, Mapping):
        return payload
    return dict(sorted({**payload, MARKER: marker}.items()))

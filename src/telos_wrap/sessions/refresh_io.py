"""Sending a keep-alive refresh through an Anthropic client (the one place sessions call an SDK).

``send_refresh(session, client)`` asks ``session.refresh()`` whether a keep-alive pays (R8) and, if
it does, sends the pre-warm body with ``max_tokens: 0`` exactly as decided (``telos_hint`` disable,
so telos does not rewrite it again); the session counts it as a refresh, with its usage.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from telos_wrap.config import rewriting
from telos_wrap.sessions.core import Session
from telos_wrap.sessions.refresh import RefreshDecision

__all__ = ["asend_refresh", "send_refresh"]


def _kwargs(create: Any, body: Mapping[str, Any]) -> dict[str, Any]:
    accepted = inspect.signature(create).parameters
    kwargs = {key: value for key, value in body.items() if key in accepted}
    extra = {key: value for key, value in body.items() if key not in accepted}
    if extra:
        kwargs["extra_body"] = extra
    if rewriting():  # ``telos_wrap.patch.is_patched()``, read below the patch layer
        kwargs["telos_hint"] = {"disable": True}
    return kwargs


def send_refresh(session: Session, client: Any, *, margin: float = 60.0) -> tuple[RefreshDecision, Any]:
    """Refresh ``session``'s warm prefix through ``client`` (``anthropic.Anthropic``) if it pays.

    Returns ``(decision, message)``; ``message`` is ``None`` when nothing was sent.
    """
    decision = session.refresh(margin=margin)
    if not decision.send or decision.body is None:
        return decision, None
    with session:
        return decision, client.messages.create(**_kwargs(client.messages.create, decision.body))


async def asend_refresh(
    session: Session, client: Any, *, margin: float = 60.0
) -> tuple[RefreshDecision, Any]:
    """``send_refresh`` for ``anthropic.AsyncAnthropic``."""
    decision = session.refresh(margin=margin)
    if not decision.send or decision.body is None:
        return decision, None
    async with session:
        return decision, await client.messages.create(**_kwargs(client.messages.create, decision.body))

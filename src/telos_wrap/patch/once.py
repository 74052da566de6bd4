"""Each logical call is rewritten once, whatever wraps what.

The hooks on clients that bypass both SDKs (LiteLLM's ``completion``, DSPy's built-in client) can be
reached from inside one another: LiteLLM 1.110's ``litellm.completion`` is a dispatcher that calls
``litellm.main.completion``, and telos wraps both names; a framework may call one entry point
through another. The outermost hook that rewrites marks the call (``outermost()``); a hook that
finds the mark passes the call through as it is (``inside()``).

The SDK request layers do not read the mark: LiteLLM's ``openai/`` route calls the official
``openai`` client from inside ``litellm.completion``, which leaves that route to the client's own
hook.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["inside", "outermost"]

_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("telos_wrap_rewriting_call", default=False)


def inside() -> bool:
    """True while an outer hook's call is running: a hook reached now passes its call through."""
    return _inside.get()


@contextmanager
def outermost() -> Iterator[None]:
    """Mark the running call as rewritten by its outermost hook, for the duration of the block."""
    token = _inside.set(True)
    try:
        yield
    finally:
        _inside.reset(token)

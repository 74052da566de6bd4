"""Per-call plumbing: how a hint travels to the request layer, and what a call remembers.

Public entry points (``create``, ``stream``, ``parse``...) may build the HTTP request lazily — a
stream manager sends it in ``__enter__``, ``with_streaming_response`` on entering its context — so
a ContextVar set around the entry call would be gone by then. Instead an opaque token rides in a
private header of the request options the SDK captures at call time; the request layer looks the
validated hint up by it and removes the header before anything is sent.

The token is in the header's *name* (``x-telos-hint-<token>``) and its value is a ``HintToken``: an
instance of the SDKs' own ``Omit`` type, which both SDKs' header builders drop (``build_headers`` /
``_merge_headers``: "an ``Omit`` value removes the header"). A request built while patched but sent
after ``unpatch()`` — a stream manager entered later — therefore never sends the header: there is
nobody left to remove it, and nothing to remove. The name, not the value, carries the token because
some entry points merge their headers before capturing them (anthropic's beta resources:
``merge_headers``), which keeps every name but turns an ``Omit`` value into the SDK's plain ``omit``.
"""

from __future__ import annotations

import contextvars
import enum
import functools
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telos_wrap.engines.base import EngineAdapter
from telos_wrap.ir.hints import TelosHints, parse_hints
from telos_wrap.private_api import sdk_omit_type
from telos_wrap.sessions import Session, current_session
from telos_wrap.sessions.runtime import SessionRuntime

__all__ = [
    "BUILT_OUTSIDE",
    "HINT_HEADER",
    "BuiltIn",
    "BuiltOutside",
    "CallContext",
    "current_call",
    "hint_header_names",
    "hint_headers",
    "hint_token",
    "read_hint_header",
    "release_hint",
]

#: The private header carrying a call's hint from its entry point to the request layer: its name is
#: this, a dash and the call's token.
HINT_HEADER = "x-telos-hint"
_HINT_PREFIX = HINT_HEADER + "-"


def hint_header_names(headers: Mapping[Any, Any]) -> list[str]:
    """The names of ``headers`` that are telos' hint header (``x-telos-hint-<token>``)."""
    return [key for key in headers if isinstance(key, str) and key.startswith(_HINT_PREFIX)]


def hint_token(name: str) -> str:
    """The token a hint header's name carries."""
    return name[len(_HINT_PREFIX) :]


#: token → hint payload of calls whose request was not sent yet. An entry is taken out when the
#: request layer reads it (once per logical call: the SDKs retry inside ``request()``, with the
#: header already read) or when the entry point raises before sending (``release_hint``): a
#: finished call keeps nothing here. Bounded all the same: a stream manager that is never entered,
#: or a coroutine never awaited, leaves its entry until newer calls push it out. The payload holds
#: the ``Session`` the call was built in itself — a strong reference for as long as the entry
#: lives — never its id: a request belongs to the session it was built in, whatever happens before
#: it is sent (the block exited, the application dropped the object, another store holds a session
#: with the same id; docs/security.md).
_pending: OrderedDict[str, dict[str, Any]] = OrderedDict()
_pending_lock = threading.Lock()
_PENDING_LIMIT = 4096


class _Token:
    """What every ``HintToken`` class is besides the SDKs' ``Omit`` types: a value whose repr says
    what it is (the token itself rides in the header's name, module docstring)."""

    def __repr__(self) -> str:
        return "HintToken(...)"


_SDKS = ("anthropic", "openai")


def _token_type() -> type:
    """A class that is the ``Omit`` of every SDK imported so far and carries a token (module docstring).

    Only imported SDKs count: importing one here would load it into an application that never uses
    it (``patch``). An SDK imported later gets a new class that is its ``Omit`` too, before any of its
    calls can carry a token (its entry points are patched on import).
    """
    return _token_type_for(tuple(sdk for sdk in _SDKS if sdk in sys.modules))


@functools.cache
def _token_type_for(sdks: tuple[str, ...]) -> type:
    bases: list[type] = [_Token]
    for sdk in sdks:
        try:
            omit = sdk_omit_type(sdk)
        except Exception:  # the SDK has no Omit: nothing of it to satisfy
            continue
        if isinstance(omit, type):
            bases.append(omit)
    return type("HintToken", tuple(bases), {})


@dataclass(slots=True)
class CallContext:
    """What the response side needs to know about one request telos handled.

    Attributes:
        engine: the engine adapter (normalizes usage).
        session: the runtime of the session the request belongs to (``sessions.core.runtime_of``).
        index: the request's index in the session (``-1`` for token counts, which are not turns).
        strict: raise instead of failing open.
        hide_usage_chunk: telos asked for stream usage the caller did not: swallow the usage-only chunk.
        stream_failed: the stream observer failed once and stopped observing.
        telemetry: the call's ``telemetry.call.CallTelemetry`` when a provider is configured.
    """

    engine: EngineAdapter
    session: SessionRuntime
    index: int
    strict: bool
    hide_usage_chunk: bool = False
    stream_failed: bool = False
    telemetry: Any = None


#: The call whose request is in flight (lets ``parse()`` inside ``request()`` find its context).
current_call: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "telos_wrap_call", default=None
)


def hint_headers(kwargs: dict[str, Any]) -> str | None:
    """Move ``telos_hint`` (validated) and the active session into ``kwargs["extra_headers"]``.

    Raises ``TelosHintError`` for an invalid hint, before any network I/O. An outer entry point's
    header wins over an inner one (``chat.completions.stream`` calls ``create`` inside). Returns the
    token it added (``None``: an outer entry point's header was kept), for ``release_hint``.
    """
    hint = parse_hints(kwargs.pop("telos_hint")) if "telos_hint" in kwargs else None
    active = current_session()
    headers = kwargs.get("extra_headers")
    if isinstance(headers, Mapping) and hint_header_names(headers):
        return None
    payload: dict[str, Any] = {}
    if hint is not None:
        payload["hint"] = hint.model_dump(mode="json", exclude_defaults=True, exclude={"output_filter"})
        if hint.output_filter is not None:  # a caller's OutputFilter is an object: kept as it is
            payload["hint"]["output_filter"] = hint.output_filter
    # Always recorded, even "no session": a request built outside any session and sent inside one
    # (a stream manager entered in another tenant's block) must not join the session open then.
    payload["session"] = active
    # Only an opaque token travels in the header; the hint itself stays in this process. A request
    # built while patched but sent after unpatch() then leaks nothing but a random token.
    token = os.urandom(16).hex()  # 128 random bits, as uuid4's, without making a UUID object
    with _pending_lock:
        _pending[token] = payload
        while len(_pending) > _PENDING_LIMIT:
            _pending.popitem(last=False)
    value = _token_type()()
    kwargs["extra_headers"] = {
        **(headers if isinstance(headers, Mapping) else {}),
        _HINT_PREFIX + token: value,
    }
    return token


def release_hint(token: str) -> None:
    """Forget the entry of a call that ended without its request being read (its entry point raised)."""
    with _pending_lock:
        _pending.pop(token, None)


#: The hints of a call without ``telos_hint`` (frozen: one instance serves every call).
_NO_HINTS = TelosHints()


class BuiltOutside(enum.Enum):
    """Where a call was built, when not in a session: outside any (and it stays outside when sent)."""

    OUTSIDE = "outside"


#: ``read_hint_header``'s answer for a call built outside any session (it stays outside).
BUILT_OUTSIDE = BuiltOutside.OUTSIDE
#: The session a call was built in, as the request layer learns it: a ``Session``, ``BUILT_OUTSIDE``,
#: or ``None`` (no token: unknown, so the session active when it is sent).
BuiltIn = Session | BuiltOutside | None


def read_hint_header(value: str | None) -> tuple[TelosHints, BuiltIn]:
    """The hints of the call whose header token is ``value``, and the session it was built in:
    a ``Session``, ``BUILT_OUTSIDE`` (built outside any session), or ``None`` (no token: unknown).

    Takes the entry out: the request layer reads a call's header once (the header is stripped
    before the SDK's retries), so a finished call holds no session here (issue 44: a per-request
    session object was kept alive by every finished call until 4,096 newer ones pushed it out)."""
    if not value:
        return _NO_HINTS, None
    with _pending_lock:
        payload = _pending.pop(value, None)
    if payload is None:
        # Built through an entry point, but its entry was pushed out by newer calls: the session it
        # was built in is unknown, and the one active now may be another tenant's. Outside, then.
        return _NO_HINTS, BUILT_OUTSIDE
    hints = TelosHints(**payload["hint"]) if "hint" in payload else _NO_HINTS
    carried = payload.get("session")
    return hints, (carried if isinstance(carried, Session) else BUILT_OUTSIDE)

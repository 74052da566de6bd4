"""Exceptions raised by telos_wrap.

The tree::

    TelosError                      base of everything telos_wrap raises itself
    ├── TelosInvariantError         a band-order / IR invariant was violated
    ├── RefPoolError                bad slug, duplicate registration, or a dangling [ref:slug]
    ├── TelosHintError (+TypeError) a ``telos_hint=`` / session option has a wrong type or key
    ├── TelosOptionError (+ValueError) a ``patch()`` option is invalid (raised before anything is patched)
    ├── TelosStageError             a stage failed; raised only with ``strict=True`` (else fail open)
    ├── TelosBudgetError            preparing a request took longer than ``patch(time_budget=)``
    ├── NotPlainJSON (+TypeError)   a body value is not plain JSON (then read as the SDK serializes it)
    ├── TelosUnreadableError (+ValueError) a request shape the lift cannot read faithfully (sent as built)
    ├── StoreConflictError          a session store update lost an optimistic-concurrency race too many times
    ├── StoreEntryError             the store holds a malformed entry for one session (reset, never a trip)
    └── StoreUnavailableError       the session store's circuit breaker is open (strict mode only)

Vendor and SDK exceptions (``anthropic.APIStatusError``, ``openai.APITimeoutError``, ...) are never
wrapped or mapped: they reach the caller exactly as the SDK raised them.
"""

from __future__ import annotations

__all__ = [
    "NotPlainJSON",
    "RefPoolError",
    "StoreConflictError",
    "StoreEntryError",
    "StoreUnavailableError",
    "TelosBudgetError",
    "TelosError",
    "TelosHintError",
    "TelosInvariantError",
    "TelosOptionError",
    "TelosStageError",
    "TelosUnreadableError",
]


class TelosError(Exception):
    """Base class of every exception telos_wrap raises itself."""


class TelosInvariantError(TelosError):
    """A TELOS invariant does not hold (I1 band order, tools all PIN, ...).

    Attributes:
        segment: where the violation is (``"tools"``, ``"system"``, ``"messages[3]"``, ``"prompt"``).
        index: the offending block's index within that segment, or ``None``.
    """

    def __init__(self, message: str, *, segment: str, index: int | None = None) -> None:
        super().__init__(message)
        self.segment = segment
        self.index = index


class RefPoolError(TelosError):
    """A ref-pool operation was refused: invalid or duplicate slug, wrong band, unknown reference."""


class TelosHintError(TelosError, TypeError):
    """A ``telos_hint=`` (or session option) is invalid.

    It is also a ``TypeError`` because, like a wrong keyword argument, it is raised before any
    network I/O and means the call itself was written wrong. The message lists the valid keys.
    """


class TelosOptionError(TelosError, ValueError):
    """A ``patch()`` option is invalid: raised by ``patch()`` before anything is patched.

    The message names the option, what was given and what is valid. A typo found here never
    reaches a call, where telos could only fail open.
    """


class TelosStageError(TelosError):
    """A telos_wrap pipeline stage failed while ``strict=True``.

    Without ``strict`` the same failure is logged once per call site and the original request is
    sent unchanged (fail-open). ``stage`` names the stage (``"lift"``, ``"bridge.canonicalize"``,
    ``"emit"``, ``"usage"``, ``"stream-usage"``, ``"store.read"``, ...); the original exception is
    chained as ``__cause__``.
    """

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"telos_wrap stage {stage!r} failed: {type(cause).__name__}: {cause}")
        self.stage = stage
        # Set here, not left to ``raise ... from``: every raise site then keeps the original.
        self.__cause__ = cause


class TelosBudgetError(TelosError):
    """Preparing one request took longer than ``patch(time_budget=...)``: the request goes out as the
    SDK built it (chained in ``TelosStageError("budget", ...)``; docs/reliability.md)."""


class NotPlainJSON(TelosError, TypeError):
    """A request body holds a value that is not plain JSON where telos reads it: an SDK response
    model passed back as a param, a ``str`` Enum, a tuple, a ``Mapping`` that is not a dict...

    Raised by the lift (``lift.plain``) before telos reads such a value; the patch layer then reads
    the body the way the SDK serializes it and prepares it again (``patch/sdk_json.py``). ``path``
    says where (``messages[2].content[0]``), ``kind`` the value's type name.
    """

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is a {kind}, not plain JSON")
        self.path = path
        self.kind = kind


class TelosUnreadableError(TelosError, ValueError):
    """The request has a shape the lift cannot read faithfully (``lift/readable.py``): a message
    without content or with content of a wrong type, a block of a type the API does not define, a
    role it does not know, a tool result answering no tool call...

    Raised by the lift, before anything is rewritten: the request then goes out exactly as the SDK
    built it, so the vendor answers it with its own error (counted in ``failure_counts()`` under
    ``"lift"``, one log line; never raised to the caller, not even with ``strict=True``). ``path``
    says where (``messages[0].content``), ``what`` what is wrong there; neither quotes the caller's
    text, so the message may be logged.
    """

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path
        self.what = what


class StoreConflictError(TelosError):
    """A session-store update kept losing the compare-and-set race (another worker wrote in between)."""


class StoreEntryError(TelosError):
    """The store answered, but its entry for one session is malformed (a revision that is not a
    number, JSON that is not a session state). Store contents are not trusted (docs/security.md):
    that session starts again from a fresh state, the reason is recorded (``StoreEvent("reset")``)
    and its next write replaces the entry. The store's circuit breaker is not involved."""


class StoreUnavailableError(TelosError):
    """The session store failed recently and is left alone for a back-off window (its circuit breaker
    is open); chained in the ``TelosStageError("session.store", ...)`` a ``strict`` call raises."""


class StoreBusyError(StoreUnavailableError):
    """Every connection of this process' pool to the store stayed in use for the store's ``timeout``.

    The process is saturated, not the store: the call goes on with the state this process holds,
    and the store's circuit breaker does not open (docs/sessions.md, "When the store is unavailable").
    """

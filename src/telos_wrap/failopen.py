"""Fail open: a telos failure is logged once per call site and counted, and the call goes on.

With ``strict=True`` the ``TelosStageError`` is raised instead. Vendor exceptions never pass
through here: the wrappers only guard telos' own code.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable

from telos_wrap.config import current_config
from telos_wrap.errors import TelosStageError, TelosUnreadableError

__all__ = ["FAILURE_LISTENERS", "failure_counts", "report_failure", "reset_failures"]

logger = logging.getLogger("telos_wrap")
_lock = threading.Lock()
_failures: Counter[str] = Counter()
#: Called with every failure counted here (``telos_wrap.telemetry`` adds one while it records);
#: a listener must not raise. Empty, it costs one list check per failure.
FAILURE_LISTENERS: list[Callable[[TelosStageError], None]] = []
#: The (stage, error type, call site) keys already warned about, least recently seen first: at most
#: ``_WARNED_LIMIT`` (a key pushed out warns once more if it comes back; ~200 bytes each).
_warned: OrderedDict[tuple[str, str, str], None] = OrderedDict()
_WARNED_LIMIT = 1024
_SKIP = (
    "telos_wrap",
    "anthropic",
    "openai",
    "wrapt",
    "httpx2",
    "httpx",
    "asyncio",
    "contextlib",
    "concurrent",
    "threading",
)


def _call_site() -> str:
    """``file:line`` of the first frame outside telos_wrap, the SDKs and the event loop machinery:
    the caller's line that made the call, so a failure warns once per place in the caller's code.

    Walked from this frame with ``inspect.currentframe()`` (public; ``None`` on an interpreter
    without frames: then ``<unknown>``): this module's own frames are telos_wrap's, skipped."""
    frame = inspect.currentframe()
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in _SKIP:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def report_failure(error: TelosStageError, *, strict: bool | None = None, warn: bool = True) -> None:
    """Count ``error`` and log it (once per stage, error type and call site); raise it if strict.

    A ``TelosUnreadableError`` (a request shape the lift cannot read) is never raised: the request
    goes out as the SDK built it and the vendor answers it.

    ``warn=False``: count it and log it at DEBUG only, for failures that warn on their own schedule
    (the session store's circuit breaker warns once per back-off window).
    """
    if FAILURE_LISTENERS:
        for listener in list(FAILURE_LISTENERS):
            try:
                listener(error)
            except Exception:
                logger.debug("telos_wrap: a failure listener raised", exc_info=True)
    cause = error.__cause__ or error
    # A request the lift cannot read is the caller's to fix and the vendor's to answer: it goes out
    # as the SDK built it even with ``strict=True``, so the caller sees the vendor's own error.
    unreadable = isinstance(cause, TelosUnreadableError)
    if not unreadable and (strict if strict is not None else current_config().strict):
        raise error
    if not warn:
        with _lock:
            _failures[error.stage] += 1
        logger.debug("telos_wrap stage %r failed: %r", error.stage, error.__cause__ or error)
        return
    key = (error.stage, type(cause).__name__, _call_site())
    with _lock:
        _failures[error.stage] += 1
        first = key not in _warned
        _warned[key] = None
        _warned.move_to_end(key)
        while len(_warned) > _WARNED_LIMIT:
            _warned.popitem(last=False)
    if first and unreadable:
        # The message names a path and a type, never the caller's text (``lift/readable.py``).
        logger.warning(
            "telos_wrap sent the request as the SDK built it (the vendor answers it): %s, at %s; "
            "further requests like it here too",
            cause,
            key[2],
        )
    elif first:
        # Type and stage only at WARNING: an exception's message can quote the request (Python's
        # own KeyError/ValueError messages do), and request content is never logged above DEBUG.
        logger.warning(
            "telos_wrap fell back to the original request: stage %r failed (%s) at %s; details at DEBUG, "
            "further failures of this kind here too",
            error.stage,
            type(cause).__name__,
            key[2],
        )
    logger.debug("telos_wrap stage %r failed at %s: %r", error.stage, key[2], cause, exc_info=cause)


def failure_counts() -> dict[str, int]:
    """How many times each stage failed (and was bypassed) since the process started."""
    with _lock:
        return dict(_failures)


def reset_failures() -> None:
    """Forget failure counts and which call sites were warned about (tests)."""
    with _lock:
        _failures.clear()
        _warned.clear()

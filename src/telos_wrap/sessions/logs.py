"""Log lines an operator can keep: no raw session id, and nothing above DEBUG per session.

A session id may be a user's or a ticket's id, so a log line names a session by
``hashed.session_hash``: 16 hex digits of its SHA-256, the value of the ``telos.session`` span
attribute (``telemetry``), so a log line and a span of one session can still be matched;
``hashed.scrub`` replaces an id inside a text (an exception's message) the same way.

Events that happen once per session — a cache break (the first change of a live value, one per new
conversation), a session's in-process state reconciled or merged after a store outage, a malformed
entry reset, a conversation that keeps falling back — go through ``note``: the first event of each
*kind* in the process is logged at its level, saying that later ones are counted; later ones are
logged at DEBUG (their detail) and counted, and one INFO line per ``SUMMARY_WINDOW`` seconds gives
the counts of every kind seen in that window (``summarize``; a daemon timer, and at exit). So the
number of lines above DEBUG depends on the kinds and on time, never on the number of sessions. A
kind marked ``per_window`` (a telos bug, discarded state) is said at its level once per window.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass

__all__ = ["SUMMARY_WINDOW", "note", "summarize"]

#: Seconds between two summaries of the events logged at DEBUG.
SUMMARY_WINDOW = 60.0

_summary_logger = logging.getLogger("telos_wrap.sessions")


@dataclass(slots=True)
class _Kind:
    label: str
    level: int
    per_window: bool
    said_at: float | None = None  # when it was last logged at its level


class _Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.kinds: dict[str, _Kind] = {}
        self.counts: Counter[str] = Counter()  # events since the last summary, by kind
        self.since = time.monotonic()
        self.timer: threading.Timer | None = None


_tally = _Tally()


def note(
    logger: logging.Logger,
    level: int,
    kind: str,
    label: str,
    message: str,
    *args: object,
    per_window: bool = False,
    exc_info: BaseException | bool | None = None,
) -> None:
    """Log one per-session event of ``kind`` (see the module docstring).

    ``label`` names the kind in a summary (``"cache breaks (system_changed)"``); ``message`` and
    ``args`` are the event's own line, which must hold no raw session id (``session_hash``).
    """
    now = time.monotonic()
    with _tally.lock:
        found = _tally.kinds.get(kind)
        if found is None:
            found = _tally.kinds[kind] = _Kind(label, level, per_window)
        loud = found.said_at is None or (found.per_window and now - found.said_at >= SUMMARY_WINDOW)
        if loud:
            found.said_at = now
        else:
            _tally.counts[kind] += 1
            if _tally.timer is None:
                _tally.timer = threading.Timer(SUMMARY_WINDOW, summarize)
                _tally.timer.daemon = True
                _tally.timer.start()
    if loud:
        logger.log(
            level,
            message + " (the first of its kind%s: later ones are logged at DEBUG and counted in one INFO "
            "line per %.0f s)",
            *args,
            " in this window" if per_window else " in this process",
            SUMMARY_WINDOW,
            exc_info=exc_info,
            stacklevel=2,
        )
    else:
        logger.debug(message, *args, exc_info=exc_info, stacklevel=2)


def summarize() -> None:
    """Log the counts of the events logged at DEBUG since the last summary (one INFO line), now."""
    with _tally.lock:
        counts, _tally.counts = _tally.counts, Counter()
        since, _tally.since = _tally.since, time.monotonic()
        timer, _tally.timer = _tally.timer, None
        labels = {kind: _tally.kinds[kind].label for kind in counts}
    if timer is not None and timer is not threading.current_thread():
        timer.cancel()
    if not counts:
        return
    parts = ", ".join(f"{counts[kind]} {labels[kind]}" for kind in sorted(counts, key=lambda k: -counts[k]))
    _summary_logger.info(
        "telos_wrap: in the last %.0f s, besides what was logged above DEBUG: %s (each at DEBUG)",
        time.monotonic() - since,
        parts,
    )


def _reset() -> None:
    """Forget every kind and count (tests)."""
    with _tally.lock:
        timer, _tally.timer = _tally.timer, None
        _tally.kinds.clear()
        _tally.counts.clear()
        _tally.since = time.monotonic()
    if timer is not None:
        timer.cancel()


atexit.register(summarize)

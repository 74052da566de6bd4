"""A circuit breaker per session store: a sick store costs one timeout per back-off window, not one per call.

When a store call fails (an error or a timeout), the breaker *opens*: for ``backoff`` seconds no
session calls the store (on a Redis Cluster: no session whose slot the failed node serves — each
node has its own breaker, ``node_breakers.py``); every call goes on with the state this process holds (see
``docs/sessions.md``, "When the store is unavailable"). One ``logging`` warning is written per
window, and every call that could not use the store is counted. When the window ends, the next call
*probes* the store (the others keep skipping it until the probe answers): success closes the
breaker, failure opens a new window twice as long (up to ``max_backoff``). What sessions did
meanwhile is written with compare-and-set on their next write, and added to the stored state if
another worker wrote since (``sessions/durable/merge.py``; a recorded ``StoreEvent`` either way).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from telos_wrap.sessions.hashed import scrub, session_hash
from telos_wrap.sessions.logs import note

__all__ = ["BreakerStats", "StoreBreaker", "StoreEvent"]

logger = logging.getLogger("telos_wrap.sessions")


@dataclass(frozen=True, slots=True)
class StoreEvent:
    """Something that happened to a session's state because its store was unavailable or lost it.

    ``kind`` is ``"reconciled"`` (state kept in-process during an outage was written with
    compare-and-set), ``"merged"`` (another worker wrote meanwhile: this worker's outage work was
    added to the stored state, ``sessions/durable/merge.py``), ``"restored"`` (the store had lost the
    session; this process's copy was written back), ``"dropped"`` (the in-process state was
    discarded; ``reason`` says why), or
    ``"reset"`` (the store's entry for the session was malformed: the session started again from a
    fresh state, and its next write replaces the entry; never a trip of the breaker).
    """

    kind: str
    session_id: str
    requests: int
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class BreakerStats:
    """Counters of one breaker since it was made (``abandoned``: async store calls cut short by a trip;
    ``busy``: calls that found every pooled connection in use for the store's timeout, which do not
    open the breaker)."""

    state: str
    failures: int
    trips: int
    skipped: int
    probes: int
    abandoned: int
    events: Counter[str]
    recent: tuple[StoreEvent, ...]
    busy: int = 0
    #: Of ``failures``: calls that were already waiting on the store when an earlier failure opened
    #: the window they failed in. They waited alongside the call that opened it, not after it, and
    #: open no window of their own (``failures - late`` is how many waits the process paid in turn).
    late: int = 0


class StoreBreaker:
    """Open / half-open / closed, shared by every session using one store object (thread-safe).

    Args:
        backoff: seconds the store is left alone after a failure (the first window).
        max_backoff: longest window; each failed probe doubles the previous one up to it.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        backoff: float = 5.0,
        max_backoff: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if backoff <= 0 or max_backoff < backoff:
            raise ValueError("need 0 < backoff <= max_backoff")
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.clock = clock
        self._lock = threading.Lock()
        self._open_until = 0.0
        self._window = backoff
        self._is_open = False
        self._probing = False
        self._failures = 0
        self._trips = 0
        self._skipped = 0
        self._probes = 0
        self._events: Counter[str] = Counter()
        self._recent: deque[StoreEvent] = deque(maxlen=64)
        #: Per event loop, a future resolved at the next trip: async store calls in flight race it,
        #: so a store that hangs costs the process one timeout, not one per call already waiting.
        self._trip_futures: dict[asyncio.AbstractEventLoop, asyncio.Future[None]] = {}
        self._abandoned = 0
        self._busy = 0
        self._late = 0
        self._opened_at = float("-inf")  # when the current (or last) window opened
        self._expedited = False  # the window was cut short by ``expedite``

    @property
    def is_open(self) -> bool:
        """Whether calls currently skip the store (open, or half-open with a probe in flight)."""
        return self._is_open

    def allow(self) -> bool:
        """May this call use the store? (Counts it as skipped if not.)"""
        if not self._is_open:  # the hot path: one attribute read, no lock
            return True
        with self._lock:
            if not self._is_open:
                return True
            if not self._probing and self.clock() >= self._open_until:
                self._probing = True
                self._probes += 1
                return True
            self._skipped += 1
            return False

    def ready(self) -> bool:
        """Would ``allow`` let a call through now? (Closed, or the window is over and no probe is in
        flight.) Counts nothing: the background flush asks before it writes (``sync/flusher.py``)."""
        if not self._is_open:
            return True
        with self._lock:
            return not self._is_open or (not self._probing and self.clock() >= self._open_until)

    def expedite(self) -> None:
        """Let the next call probe the store now if the window has lasted ``backoff`` seconds (the
        first window's length) and no probe is in flight. The background flush asks this each
        round (``sync/flusher.py``): however long the doubled window has grown, a store that
        answers again is seen within about ``backoff`` seconds, and what sessions kept during the
        outage is written then, not a minute later. A failed expedited probe does not double the
        window again and is logged at DEBUG (the window's warning was given when it opened)."""
        if not self._is_open:
            return
        with self._lock:
            now = self.clock()
            lasted = now - self._opened_at >= self.backoff
            if self._is_open and not self._probing and now < self._open_until and lasted:
                self._open_until = now
                self._expedited = True

    def success(self) -> None:
        """A store call answered: if it was the probe, close the breaker (the store is back)."""
        if not self._is_open:
            return
        with self._lock:
            if not self._probing:
                return  # a late answer to a call made before the trip: the window stands
            was_open, self._is_open, self._probing = self._is_open, False, False
            self._window = self.backoff
            self._expedited = False
        if was_open:
            logger.info("telos_wrap: the session store answers again; sessions use it from now on")

    def close(self) -> None:
        """The store answered a call this breaker did not gate (a cluster's node breakers took over
        from the store's own once the slot map was read): close it, so its state is true."""
        with self._lock:
            was_open, self._is_open, self._probing = self._is_open, False, False
            self._window = self.backoff
            self._expedited = False
        if was_open:
            logger.info("telos_wrap: the session store answers again; sessions use it from now on")

    def busy(self) -> None:
        """A call found no free pooled connection in time: counted, and the breaker stays as it is."""
        with self._lock:
            self._busy += 1

    def unused(self) -> None:
        """A call ``allow`` let through was never made (the call's store time ran out before it:
        ``stores/budget.py``). It says nothing of the store: no window; if it was the probe, the
        probe is given back, so the next call makes it (else the breaker would stay half-open)."""
        if not self._is_open:
            return
        with self._lock:
            self._probing = False

    def failure(self, exc: BaseException, *, started: float | None = None) -> None:
        """A store call failed or timed out: open a window (warn once per window).

        ``started``: when the call began (this breaker's clock). A call that began before the last
        window opened says nothing new about the store (it was waiting alongside the call that
        opened it): it is counted as ``late``, and counts neither as a failed probe nor, once the
        window closed, as a new failure.
        """
        with self._lock:
            self._failures += 1
            if started is not None and started < self._opened_at:
                self._late += 1  # (even once the window closed: a probe made after it succeeded)
                return
            if self._is_open and not self._probing:
                return  # an older call failing inside the window it already opened
            quiet = self._probing and self._expedited
            if self._probing and not self._expedited:
                self._window = min(self._window * 2, self.max_backoff)
            self._probing = self._expedited = False
            self._is_open = True
            self._opened_at = self.clock()
            self._open_until = self._opened_at + self._window
            self._trips += 1
            window = self._window
            waiting, self._trip_futures = self._trip_futures, {}
        for loop, future in waiting.items():
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)
        logger.log(
            logging.DEBUG if quiet else logging.WARNING,
            "telos_wrap: stage 'session.store' failed (%s): sessions go on with this process's state "
            "and leave the store alone for %.1f s, then probe it again (one warning per window)",
            type(exc).__name__,
            window,
        )

    def trip_future(self) -> asyncio.Future[None]:
        """A future of the running loop that is resolved when the breaker next trips."""
        loop = asyncio.get_running_loop()
        with self._lock:
            future = self._trip_futures.get(loop)
            if future is None or future.done():
                future = self._trip_futures[loop] = loop.create_future()
            return future

    def abandoned(self) -> None:
        """Count an async store call cut short because the breaker tripped while it waited."""
        with self._lock:
            self._abandoned += 1

    def record(self, event: StoreEvent) -> None:
        """Count and keep an event (dropped state is also a warning: it never goes unnoticed)."""
        with self._lock:
            self._events[event.kind] += 1
            self._recent.append(event)
        # Outage recovery happens per session and per worker: one line per kind, then a periodic
        # count (sessions/logs.py), never one INFO line per session.
        dropped = event.kind == "dropped"
        note(
            logger,
            logging.WARNING if dropped or event.kind == "reset" else logging.INFO,
            f"store:{event.kind}",
            f"sessions' in-process state {event.kind} after a store outage or loss",
            "telos_wrap: session %s: in-process state %s (%d requests): %s",
            session_hash(event.session_id),
            event.kind,
            event.requests,
            scrub(event.reason, event.session_id),
            per_window=dropped,
        )

    def stats(self) -> BreakerStats:
        """A consistent snapshot of the breaker's counters since it was made, and its state now: ``closed``,
        ``open``, or ``half-open`` (open with a probe in flight). Taken under the breaker's lock; the caller
        may keep it."""
        with self._lock:
            state = "closed" if not self._is_open else ("half-open" if self._probing else "open")
            return BreakerStats(
                state,
                self._failures,
                self._trips,
                self._skipped,
                self._probes,
                self._abandoned,
                Counter(self._events),
                tuple(self._recent),
                self._busy,
                self._late,
            )


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_breakers_lock = threading.Lock()
#: Breakers of stores that take no ``breaker`` attribute (``breaker_of``).
_held: weakref.WeakKeyDictionary[object, StoreBreaker] = weakref.WeakKeyDictionary()
_unweakable: dict[int, tuple[object, StoreBreaker]] = {}
_UNWEAKABLE_LIMIT = 64


def breaker_of(store: object, session_id: str | None = None) -> StoreBreaker:
    """The breaker of ``store`` for ``session_id``'s calls: the store's ``breaker_for(session_id)``
    if it routes breakers by key (a Redis Cluster: per node), else its ``breaker`` attribute if it
    has one, else one made for it once. Events are recorded on ``breaker_of(store)``."""
    if session_id is not None:
        route = getattr(store, "breaker_for", None)
        if route is not None:
            routed = route(session_id)
            if isinstance(routed, StoreBreaker):
                return routed
    found = getattr(store, "breaker", None)
    if isinstance(found, StoreBreaker):
        return found
    with _breakers_lock:
        found = getattr(store, "breaker", None)
        if isinstance(found, StoreBreaker):
            return found
        try:
            return _held[store]
        except (KeyError, TypeError):
            pass
        kept = _unweakable.get(id(store))
        if kept is not None and kept[0] is store:
            return kept[1]
        made = StoreBreaker()
        try:
            store.breaker = made  # type: ignore[attr-defined]
        except AttributeError:
            # A store that takes no attribute (``__slots__``) still gets one breaker, not one per
            # call: else every call would fail, warn and count as if the window had just opened.
            try:
                _held[store] = made
            except TypeError:  # not weak-referenceable either: held (with the store) by its id
                if len(_unweakable) >= _UNWEAKABLE_LIMIT:
                    _unweakable.pop(next(iter(_unweakable)))
                _unweakable[id(store)] = (store, made)
        return made

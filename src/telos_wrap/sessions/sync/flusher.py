"""The background flush: what sessions hold and their store lacks is written without waiting for a
conversation's next request or for the interpreter's exit.

A session folds the usage of its last response into its next write, and keeps the state it computed
while the store could not be used until it can write it (``plans.StateSync``). A conversation that
ended never writes again, and uvicorn or gunicorn workers are killed without running exit hooks: its
stored stats stayed short by what the process held. One daemon thread per process, started when a
session first holds something unwritten, looks every ``INTERVAL`` seconds at the held sessions
(``live.held_for``) and writes those

* holding outage state (``dirty``), as soon as their store's circuit breaker lets a call through
  (this also probes a store nobody else is calling, so its breaker closes when it answers again).
  Each round cuts a breaker's window short once it lasted its first length (``backoff``, 5 s by
  default: ``StoreBreaker.expedite``), so a window doubled to a minute during a long outage does
  not keep a store that answers again unused for that minute;
* holding only usage, once it waited ``DELAY`` seconds (a conversation's next turn usually comes
  sooner, and folds it into its own write: no extra round trip then).

A session last used from an event loop is written through that loop (a task made on that loop:
its async client, under its plan lock), never from this thread beside it; otherwise with the
store's sync client under the session's lock. At most ``BATCH`` sessions per round. Fail open:
a failed write leaves the session held (its breaker opens; the next round tries once it allows).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from typing import Any

from telos_wrap.sessions import live
from telos_wrap.sessions.stores.breaker import breaker_of

__all__ = ["BATCH", "DELAY", "INTERVAL", "ensure_running", "flush_due"]

logger = logging.getLogger("telos_wrap.sessions")

#: Seconds between two rounds.
INTERVAL = 1.0
#: Seconds usage alone waits for the conversation's next write before the flush writes it.
DELAY = 5.0
#: Sessions written per round, at most.
BATCH = 256

_lock = threading.Lock()
_thread: threading.Thread | None = None


def ensure_running() -> None:
    """Start the flush thread if this process has none (cheap when it runs: one read)."""
    global _thread
    if _thread is not None:
        return
    with _lock:
        if _thread is None:
            thread = threading.Thread(target=_loop, name="telos-wrap-session-flush", daemon=True)
            thread.start()
            _thread = thread


def _after_fork() -> None:
    global _thread, _lock
    _thread = None  # threads do not survive a fork: the child starts its own on its first hold
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _loop() -> None:
    while True:
        time.sleep(INTERVAL)
        try:
            flush_due()
        except Exception:  # never let the thread die: the next round tries again
            logger.debug("telos_wrap: background session flush failed", exc_info=True)


def flush_due(now: float | None = None, *, delay: float | None = None) -> int:
    """Write the held sessions that are due (see the module docstring); returns how many were tried."""
    now = time.monotonic() if now is None else now
    wait = DELAY if delay is None else delay
    tried = 0
    expedited: set[int] = set()
    for held, since in live.held_for():
        if tried >= BATCH:
            break
        sync = getattr(held, "sync", None)
        dirty = sync is not None and sync.dirty is not None
        if not dirty and now - since < wait:
            continue
        breaker = breaker_of(held.store, held.store_key)
        if id(breaker) not in expedited:
            expedited.add(id(breaker))
            breaker.expedite()  # a store that answers again is probed within its first window
        if not breaker.ready():
            continue
        tried += 1
        _flush_one(held)
    return tried


def _flush_one(held: Any) -> None:
    ref = getattr(held, "loop", None)
    loop = ref() if ref is not None else None
    if loop is not None and not loop.is_closed() and loop.is_running():
        # The coroutine is made on the loop itself: a loop that stops before it runs the callback
        # leaves no coroutine behind that was never awaited.
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def start() -> None:
            if _ending(loop):
                done.set_result(None)  # a later round flushes it once the loop is closed
                return
            task = loop.create_task(held.aflush())
            task.add_done_callback(finished)

        def finished(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                logger.debug("telos_wrap: background flush failed", exc_info=task.exception())
            done.set_result(None)

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop closed meanwhile: its client went with it
            held.flush()
            return
        timeout = getattr(held.store, "timeout", 1.0)
        try:
            done.result(timeout=4 * float(timeout) + 1.0)
        except concurrent.futures.TimeoutError:
            logger.debug("telos_wrap: background flush through the event loop did not finish in time")
        return
    held.flush()


#: ``BaseEventLoop``'s marks of its last steps (``shutdown_asyncgens``, ``shutdown_default_executor``).
_SHUTDOWN_FLAGS = ("_asyncgens_shutdown_called", "_executor_shutdown_called")


def _ending(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is being shut down (``asyncio.run`` after its main task: cancelling what is
    left, then closing async generators and the default executor). A task made then may never run
    (destroyed pending, its coroutine never awaited): the session is flushed from this thread once
    the loop is closed instead. Called on the loop."""
    if any(getattr(loop, flag, False) for flag in _SHUTDOWN_FLAGS):
        return True
    live = [task for task in asyncio.all_tasks(loop) if not task.done()]
    # Every task left is being cancelled: asyncio.run's first step once its main task ended
    # (``Task.cancelling`` is Python 3.11's; on 3.10 only the steps above are seen).
    return bool(live) and all(_cancelling(task) for task in live)


def _cancelling(task: asyncio.Task[Any]) -> bool:
    cancelling = getattr(task, "cancelling", None)
    return cancelling is not None and bool(cancelling())

"""The store time of one call, bounded: a store's ``timeout`` is a bound on the user's call, not per
store command.

One async call may make several store round trips (fleet learning's lookup, the session's load and
compare-and-set, a publish), and a client may retry a command (a cluster client after a timeout, on a
refreshed slot map). Each was bounded by the store's timeout, so a Redis that stopped answering
(``DEBUG SLEEP 2``) cost a call up to twice or three times it (1.87 s, 2.45 s with two sleeps, for a
1 s timeout: issue 44). ``SessionRuntime.prepare_request_async`` opens a budget of the store's ``timeout``
(``opened``); every awaited store call of that call takes what is left (``bounded``; the session
drivers race theirs against it too), and a call that runs out is given up as a timeout of the store
(the circuit breaker opens: docs/sessions.md, "When the store is unavailable"). A call with no
store time left sends nothing more (``StoreTimeSpent``): that says nothing of the store, so no
window opens. A call whose budget ran out before its session's plan (or while it waited for the
plan's lock) is still counted: the patch layer records it without the store
(``SessionRuntime.note_passthrough_deferred``), written with the session's next write.

The sync path cannot cut a blocking socket read short without a thread per call: it is bounded per
command by the client's socket timeout, and the breaker skips the store for the rest of the call
once one command failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["GRACE", "StoreBudgetExceeded", "StoreTimeSpent", "acquire", "bounded", "opened", "remaining"]

T = TypeVar("T")

#: Seconds past the store's timeout before the budget cuts a call: the client's own timeouts (the
#: socket's, the pool's wait for a free connection) fire first and say what went wrong (a slow
#: store is a failure, a saturated pool is not: ``StoreBreaker.busy``); the budget bounds what a
#: client would add after them (its retries, a second command, a wait for the session's lock).
GRACE = 0.05

#: The running call's deadline on its event loop's clock (``None``: no budget open).
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "telos_wrap_store_deadline", default=None
)


class StoreBudgetExceeded(TimeoutError):
    """The call's store time budget (the store's timeout) ran out: the store is too slow to wait for."""


class StoreTimeSpent(StoreBudgetExceeded):
    """The call had no store time left before a store call was sent: nothing reached the store."""


@contextlib.contextmanager
def opened(store: object) -> Iterator[None]:
    """A budget of ``store.timeout`` seconds (plus ``GRACE``) for the store calls of the call in
    this block (none if the store has no numeric timeout, or a budget is open already: the outer
    one bounds the call)."""
    timeout = getattr(store, "timeout", None)
    if _deadline.get() is not None or not isinstance(timeout, (int, float)) or timeout <= 0:
        yield
        return
    token = _deadline.set(asyncio.get_running_loop().time() + float(timeout) + GRACE)
    try:
        yield
    finally:
        try:
            _deadline.reset(token)
        except ValueError:
            # Closed from another context: a task's coroutine closed when its loop went away
            # (``GeneratorExit``); that context ends with it.
            pass


def remaining() -> float | None:
    """Seconds left in the running call's budget (``None``: unbounded; never below 0)."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())


async def bounded(call: Coroutine[Any, Any, T]) -> T:
    """Await a store call within what is left of the budget; ``StoreBudgetExceeded`` past it.

    The call is cancelled and *not* waited for (``asyncio.wait_for`` would wait until the client
    finished cancelling, which may itself wait on the store)."""
    left = remaining()
    if left is None:
        return await call
    if left <= 0:
        call.close()
        raise StoreTimeSpent("the call's store time budget ran out before this store call")
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait((task,), timeout=left)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        return task.result()
    task.cancel()
    task.add_done_callback(_retrieve)
    raise StoreBudgetExceeded("the call's store time budget ran out")


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def acquire(lock: asyncio.Lock) -> None:
    """Acquire ``lock`` within what is left of the budget (another call of the session holds it
    while it waits on the store); ``StoreBudgetExceeded`` past it."""
    left = remaining()
    if left is None:
        await lock.acquire()
        return
    try:
        await asyncio.wait_for(lock.acquire(), max(left, 0.0))
    except asyncio.TimeoutError:
        raise StoreBudgetExceeded("the call's store time budget ran out waiting for its session") from None

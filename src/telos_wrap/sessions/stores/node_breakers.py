"""Circuit breakers per Redis Cluster node: a dead primary turns the store off only for its slots.

A cluster store (``RedisStore`` on ``redis+cluster://``) asks ``NodeBreakers.get`` for the breaker
of the node that serves a session's slot, by the node's name (``host:port``) as redis-py's own
slot map has it at that moment. redis-py re-reads that map after a connection error, a timeout or
a ``MOVED`` answer, so once a replica is promoted the failed primary's sessions are routed to the
new primary's breaker (closed) by the same lookup; the failed node's breaker, no longer asked for,
ages out of the table. Sessions on healthy primaries never see the failed node's breaker
(docs/sessions.md, "Failover").

The table is bounded in bytes (``max_bytes``; each breaker costs ``BREAKER_BYTES`` plus its name):
the least recently used breaker is dropped first, its counters folded into ``retired`` so the
totals (``total()``) never go backwards. A dropped breaker that is asked for again starts closed:
at worst one more call pays the store's timeout and opens it again.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import replace

from telos_wrap.ir.shared import ENTRY_OVERHEAD, size_of
from telos_wrap.sessions.stores.breaker import BreakerStats, StoreBreaker, StoreEvent

__all__ = ["BREAKER_BYTES", "DEFAULT_BREAKER_BYTES", "NodeBreakers", "sum_stats"]

#: Bytes one node's ``StoreBreaker`` holds (its lock, counters, empty event deque and trip table),
#: rounded up from ``tracemalloc`` (``tests/sessions/test_node_breakers.py`` checks it holds).
BREAKER_BYTES = 2048
#: The default bound of a store's table: room for about 470 nodes (a Redis Cluster is advised to
#: stay under 1,000 nodes, half of them replicas that serve no slot here).
DEFAULT_BREAKER_BYTES = 1 << 20


def sum_stats(stats: list[BreakerStats]) -> BreakerStats:
    """Counters of several breakers added up (state: ``open`` if any is open, else ``half-open`` if
    any is, else ``closed``; events and recent events joined)."""
    states = {s.state for s in stats}
    state = "open" if "open" in states else "half-open" if "half-open" in states else "closed"
    events: Counter[str] = Counter()
    recent: list[StoreEvent] = []
    for s in stats:
        events.update(s.events)
        recent.extend(s.recent)
    return BreakerStats(
        state,
        sum(s.failures for s in stats),
        sum(s.trips for s in stats),
        sum(s.skipped for s in stats),
        sum(s.probes for s in stats),
        sum(s.abandoned for s in stats),
        events,
        tuple(sorted(recent, key=lambda e: e.at))[-64:],
        sum(s.busy for s in stats),
        sum(s.late for s in stats),
    )


class NodeBreakers:
    """One ``StoreBreaker`` per node name, made on first use, bounded in bytes (thread-safe).

    Args:
        make: makes a breaker (the store's windows and clock).
        max_bytes: bytes the table may hold, about (``BREAKER_BYTES`` + the name, per node).
    """

    def __init__(self, make: Callable[[], StoreBreaker], max_bytes: int = DEFAULT_BREAKER_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.make = make
        self.max_bytes = max_bytes
        self._table: OrderedDict[str, tuple[StoreBreaker, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Counters of the breakers dropped from the table (so totals never go backwards).
        self.retired: list[BreakerStats] = []

    def get(self, node: str) -> StoreBreaker:
        """The breaker of ``node`` (made closed if the table has none)."""
        with self._lock:
            found = self._table.get(node)
            if found is not None:
                self._table.move_to_end(node)
                return found[0]
            breaker = self.make()
            cost = BREAKER_BYTES + size_of(node) + ENTRY_OVERHEAD
            self._table[node] = (breaker, cost)
            self._bytes += cost
            while self._bytes > self.max_bytes and len(self._table) > 1:
                _, (dropped, dropped_cost) = self._table.popitem(last=False)
                self._bytes -= dropped_cost
                # One entry, however many nodes were ever dropped: the sum of their counters.
                self.retired = [replace(sum_stats([*self.retired, dropped.stats()]), state="closed")]
            return breaker

    def stats(self) -> dict[str, BreakerStats]:
        """Each node's breaker's counters, by node name (least recently used first)."""
        with self._lock:
            held = [(name, breaker) for name, (breaker, _) in self._table.items()]
        return {name: breaker.stats() for name, breaker in held}

    def total(self) -> BreakerStats:
        """The counters of every breaker the table ever held, added up."""
        with self._lock:
            retired = list(self.retired)
        return sum_stats([*retired, *self.stats().values()])

    @property
    def bytes_held(self) -> int:
        """About how many bytes the table holds now (what ``max_bytes`` bounds: ``BREAKER_BYTES`` plus the
        node's name and the entry's overhead, per node)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._table)

"""Cache regressions caught in a project's own tests: the ``telos_cache`` fixture and marker.

pytest loads the thin, import-free ``telos_wrap_pytest`` module through the ``pytest11`` entry
point; it imports this module only when a test uses the fixture or the marker (the package
``telos_wrap.testing`` holds the rest of the feature).

* ``telos_cache`` **fixture** — the test runs with ``telos_wrap.patch()`` in effect (the previous
  patch state is put back afterwards) inside one ``telos_wrap.session`` of its own (private store).
  It exposes that session (``session``, ``stats``, ``cache_breaks``, ``explain``), the requests the
  test sent as the application built them (``requests``), and ``report()`` / ``check()``: those
  requests replayed through telos and the built-in emulator (``telos_wrap.testing.budget``).
* ``@pytest.mark.telos_cache(min_hit_ratio=..., max_breaks=..., max_cost_ratio=..., engine=...,
  learn_volatility=True)`` — uses the fixture, and after the test body passed, fails the test with
  the replay's own explanation when the budget is not met.
* ``replay_cassette(path, ...)`` — a recorded vcrpy cassette's requests through telos and the
  emulator, with the same budget (``telos_wrap.testing.cassettes``).

Hit ratios never come from the answers the test got (a cassette, a mock, a vendor): the test's
requests are replayed against a fresh emulator, offline. See ``docs/testing.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import pytest

import telos_wrap
from telos_wrap.config import current_config, set_config
from telos_wrap.failopen import failure_counts
from telos_wrap.replay.traces import TraceRequest
from telos_wrap.sessions import CacheBreak, MemoryStore, Session, SessionStats
from telos_wrap.testing.budget import Budget, CacheBudgetError, CacheReport, replay_requests
from telos_wrap.testing.capture import RequestCapture
from telos_wrap.testing.cassettes import load_cassette, replay_cassette

__all__ = [
    "MARKER_OPTIONS",
    "Budget",
    "CacheBudgetError",
    "CacheReport",
    "TelosCache",
    "check_marker",
    "load_cassette",
    "replay_cassette",
]

#: Keyword arguments ``@pytest.mark.telos_cache`` accepts.
MARKER_OPTIONS = ("min_hit_ratio", "max_breaks", "max_cost_ratio", "engine", "learn_volatility")


def _marker_options(marker: pytest.Mark | None) -> dict[str, Any]:
    if marker is None:
        return {}
    if marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.telos_cache takes keyword arguments only ({', '.join(MARKER_OPTIONS)}), "
            f"got positional {marker.args!r}"
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_OPTIONS))
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.telos_cache: unknown option(s) {unknown}; valid: {', '.join(MARKER_OPTIONS)}"
        )
    return dict(marker.kwargs)


class TelosCache:
    """What the ``telos_cache`` fixture gives a test.

    Attributes:
        session: the test's ``telos_wrap.Session`` (calls made outside any session of their own land
            in it).
        capture: the ``RequestCapture`` holding every request telos handled during the test.
        engine / learn_volatility: the marker's options (``None`` / ``True`` without a marker).
    """

    def __init__(self, session_id: str, *, engine: str | None = None, learn_volatility: bool = True) -> None:
        self.engine = engine
        self.learn_volatility = learn_volatility
        self.session: Session = telos_wrap.session(
            session_id, store=MemoryStore(), learn_volatility=learn_volatility
        )
        self.capture = RequestCapture()
        self._report: tuple[tuple[int, str | None, bool], CacheReport] | None = None
        self._restore: Any = None
        self._failures_before: dict[str, int] = {}

    @classmethod
    def for_node(cls, node: pytest.Item) -> TelosCache:
        """The fixture value for test ``node`` (its ``telos_cache`` marker options applied)."""
        options = _marker_options(node.get_closest_marker("telos_cache"))
        digest = hashlib.sha256(node.nodeid.encode("utf-8")).hexdigest()[:12]
        cache = cls(
            f"pytest-{digest}",
            engine=options.get("engine"),
            learn_volatility=bool(options.get("learn_volatility", True)),
        )
        Budget(**{k: v for k, v in options.items() if k in ("min_hit_ratio", "max_breaks", "max_cost_ratio")})
        return cache

    # -- lifetime ----------------------------------------------------------------------------------

    def __enter__(self) -> TelosCache:
        was_patched, previous = telos_wrap.is_patched(), current_config()
        if was_patched:
            set_config(dataclasses.replace(previous, enabled=True))
        else:
            telos_wrap.patch()
        self._restore = (was_patched, previous)
        self._failures_before = failure_counts()
        self.session.__enter__()
        self.capture.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.capture.__exit__(exc_type, exc, tb)
        try:
            self.session.__exit__(exc_type, exc, tb)
        finally:
            was_patched, previous = self._restore
            if not was_patched:
                telos_wrap.unpatch()
            elif not telos_wrap.is_patched():  # the test unpatched what it found patched: put it back
                telos_wrap.patch(
                    strict=previous.strict,
                    engines=previous.engines,
                    enabled=previous.enabled,
                    refpool_threshold=previous.refpool_threshold,
                    keep_past_drop=previous.keep_past_drop,
                    only_what_pays=previous.only_what_pays,
                )
            set_config(previous)

    # -- the live session ----------------------------------------------------------------------------

    @property
    def stats(self) -> SessionStats:
        """The test session's counters (usage as the test's answers reported it)."""
        return self.session.stats

    @property
    def fallbacks(self) -> dict[str, int]:
        """Stage failures during the test, by stage (``telos_wrap.failure_counts()`` since it started):
        each is a request that went out as the SDK built it, with no saving."""
        now = failure_counts()
        return {
            stage: count - self._failures_before.get(stage, 0)
            for stage, count in now.items()
            if count > self._failures_before.get(stage, 0)
        }

    @property
    def cache_breaks(self) -> tuple[CacheBreak, ...]:
        """The test session's cache breaks (its last 16)."""
        return self.session.cache_breaks

    def explain(self, n: int = -1) -> str:
        """``Session.explain(n)`` of the test session."""
        return self.session.explain(n)

    @property
    def requests(self) -> list[TraceRequest]:
        """Every request telos handled during the test, as the application built it."""
        return list(self.capture.requests)

    # -- the emulator's verdict ----------------------------------------------------------------------

    def report(self, *, engine: str | None = None, learn_volatility: bool | None = None) -> CacheReport:
        """The test's requests so far, replayed through telos and a fresh emulator (offline).

        ``engine`` / ``learn_volatility`` default to the marker's options.
        """
        engine = engine if engine is not None else self.engine
        learn = self.learn_volatility if learn_volatility is None else learn_volatility
        requests = self.requests
        key = (len(requests), engine, learn)
        if self._report is not None and self._report[0] == key:
            return self._report[1]
        with self._paused():
            report = replay_requests(requests, engine=engine, learn_volatility=learn)
        self._report = (key, report)
        return report

    def check(
        self,
        *,
        min_hit_ratio: float | None = None,
        max_breaks: int | None = None,
        max_cost_ratio: float | None = None,
        engine: str | None = None,
        learn_volatility: bool | None = None,
    ) -> CacheReport:
        """Raise ``CacheBudgetError`` (an ``AssertionError``, explained) unless the budget is met."""
        budget = Budget(min_hit_ratio, max_breaks, max_cost_ratio)
        report = self.report(engine=engine, learn_volatility=learn_volatility)
        report.check(budget)
        return report

    @contextmanager
    def _paused(self) -> Iterator[None]:
        # The replay's own requests must not be captured as the test's.
        self.capture.__exit__(None, None, None)
        try:
            yield
        finally:
            self.capture.__enter__()


def check_marker(cache: TelosCache | None, marker: pytest.Mark) -> None:
    """After a marked test passed: fail it, with the replay's explanation, unless its budget is met."""
    if cache is None:
        raise pytest.UsageError("@pytest.mark.telos_cache: the telos_cache fixture was not set up")
    options: Mapping[str, Any] = _marker_options(marker)
    fallbacks = cache.fallbacks
    if fallbacks:
        # A request that fell back was sent without telos: the budget would be judged on a replay
        # of requests the application never got a saving on.
        stages = ", ".join(f"{stage!r} x{count}" for stage, count in sorted(fallbacks.items()))
        pytest.fail(
            f"telos fell back to the original request during this test ({stages}): those requests "
            "went out as the SDK built them, with no cache saving. The log says why (WARNING, "
            "details at DEBUG); telos_wrap.patch(strict=True) raises the error where it happens.",
            pytrace=False,
        )
    budget = Budget(options.get("min_hit_ratio"), options.get("max_breaks"), options.get("max_cost_ratio"))
    report = cache.report()
    try:
        report.check(budget)
    except CacheBudgetError as exc:
        message = str(exc)
    else:
        return
    pytest.fail(message, pytrace=False)

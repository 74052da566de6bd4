"""Cache regressions as failing tests: telos_wrap's testing feature, in one package.

Nothing in the library imports this package (an import-linter contract): it sits on top of the
public API, the sessions, ``replay`` and the emulator, and only tests and benchmarks use it.

* ``pytest_plugin`` — the ``telos_cache`` fixture and marker (needs pytest). pytest itself loads
  the inert ``telos_wrap_pytest`` module (entry point ``pytest11``, outside this package so that
  a session which never uses it imports nothing of telos_wrap), which imports this only when a
  test uses the fixture or the marker.
* ``budget`` — ``Budget``, ``CacheReport``, ``replay_requests``: a test's requests replayed
  through telos and the built-in emulator, and judged; ``capture`` (``RequestCapture``, what a test
  sent), ``conversations`` (which requests form one conversation), ``changes`` (a break in the
  application's terms) are its parts.
* ``cassettes`` — ``replay_cassette``: a vcrpy cassette's requests as a cache test.
* ``vcr_matcher`` — the ``telos_body`` matcher: cassettes recorded with telos keep matching.
* ``harnesses`` — the zoo of careless harnesses: named, seeded ways of rebuilding a recorded
  request every turn, the inputs a budget is checked against (and the styles of the cache-efficiency
  benchmark, ``BENCHMARKS.md``).

The names below are importable from here and loaded on first use, so ``import telos_wrap.testing``
costs nothing until one is asked for (the budget imports the SDKs through the emulator's replay).
See ``docs/testing.md``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telos_wrap.testing.budget import BreakReport, Budget, CacheBudgetError, CacheReport, replay_requests
    from telos_wrap.testing.capture import RequestCapture
    from telos_wrap.testing.cassettes import load_cassette, replay_cassette
    from telos_wrap.testing.harnesses import rewrite_session, style_names
    from telos_wrap.testing.vcr_matcher import telos_body

__all__ = [
    "BreakReport",
    "Budget",
    "CacheBudgetError",
    "CacheReport",
    "RequestCapture",
    "load_cassette",
    "replay_cassette",
    "replay_requests",
    "rewrite_session",
    "style_names",
    "telos_body",
]

_HOMES = {
    "BreakReport": "budget",
    "Budget": "budget",
    "CacheBudgetError": "budget",
    "CacheReport": "budget",
    "replay_requests": "budget",
    "RequestCapture": "capture",
    "load_cassette": "cassettes",
    "replay_cassette": "cassettes",
    "rewrite_session": "harnesses",
    "style_names": "harnesses",
    "telos_body": "vcr_matcher",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

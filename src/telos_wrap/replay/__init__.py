"""Replay recorded agent sessions through the real SDKs and the engine emulator, and compare strategies."""

from telos_wrap.replay.comparison import Comparison, compare, run_demo
from telos_wrap.replay.results import Prices, ReplayedTurn, RunResult, prices_for
from telos_wrap.replay.runner import (
    AS_SENT,
    AUTO_CACHING,
    ENGINES,
    TELOS,
    Progress,
    Strategy,
    create_kwargs,
    demo_path,
    load_sessions,
    patched,
    replay,
)

__all__ = [
    "AS_SENT",
    "AUTO_CACHING",
    "ENGINES",
    "TELOS",
    "Comparison",
    "Prices",
    "Progress",
    "ReplayedTurn",
    "RunResult",
    "Strategy",
    "compare",
    "create_kwargs",
    "demo_path",
    "load_sessions",
    "patched",
    "prices_for",
    "replay",
    "run_demo",
]

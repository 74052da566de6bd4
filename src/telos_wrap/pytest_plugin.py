"""Deprecated alias of ``telos_wrap.testing.pytest_plugin`` (moved in issue 28, with the testing feature into
``telos_wrap.testing``): importing this module warns once (``DeprecationWarning``)."""

from telos_wrap._deprecated import moved
from telos_wrap.testing.pytest_plugin import (
    MARKER_OPTIONS,
    Budget,
    CacheBudgetError,
    CacheReport,
    TelosCache,
    check_marker,
    load_cassette,
    replay_cassette,
)

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

moved(__name__, "telos_wrap.testing.pytest_plugin")

"""Deprecated alias of ``telos_wrap.testing.budget`` (moved in issue 28, with the testing feature into
``telos_wrap.testing``): importing this module warns once (``DeprecationWarning``)."""

from telos_wrap._deprecated import moved
from telos_wrap.testing.budget import BreakReport, Budget, CacheBudgetError, CacheReport, replay_requests
from telos_wrap.testing.capture import RequestCapture
from telos_wrap.testing.conversations import conversation_key

__all__ = [
    "BreakReport",
    "Budget",
    "CacheBudgetError",
    "CacheReport",
    "RequestCapture",
    "conversation_key",
    "replay_requests",
]

moved(__name__, "telos_wrap.testing.budget")

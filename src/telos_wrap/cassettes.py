"""Deprecated alias of ``telos_wrap.testing.cassettes`` (moved in issue 28, with the testing feature into
``telos_wrap.testing``): importing this module warns once (``DeprecationWarning``)."""

from telos_wrap._deprecated import moved
from telos_wrap.testing.cassettes import api_of_path, load_cassette, replay_cassette

__all__ = ["api_of_path", "load_cassette", "replay_cassette"]

moved(__name__, "telos_wrap.testing.cassettes")

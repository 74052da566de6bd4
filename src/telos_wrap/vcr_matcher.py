"""Deprecated alias of ``telos_wrap.testing.vcr_matcher`` (moved in issue 28, with the testing feature into
``telos_wrap.testing``): importing this module warns once (``DeprecationWarning``)."""

from telos_wrap._deprecated import moved
from telos_wrap.testing.vcr_matcher import MATCH_ON, NAME, normalize_body, register, telos_body

__all__ = ["MATCH_ON", "NAME", "normalize_body", "register", "telos_body"]

moved(__name__, "telos_wrap.testing.vcr_matcher")

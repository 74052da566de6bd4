"""Deprecated alias of ``telos_wrap.testing.harnesses`` (moved in issue 28, with the testing feature into
``telos_wrap.testing``): importing this module warns once (``DeprecationWarning``)."""

from telos_wrap._deprecated import moved
from telos_wrap.testing.harnesses import (
    SHAPES,
    STYLES,
    HarnessRequest,
    HarnessStyle,
    Shape,
    apply_style,
    rewrite_session,
    style_names,
)

__all__ = [
    "SHAPES",
    "STYLES",
    "HarnessRequest",
    "HarnessStyle",
    "Shape",
    "apply_style",
    "rewrite_session",
    "style_names",
]

moved(__name__, "telos_wrap.testing.harnesses")

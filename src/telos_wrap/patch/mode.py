"""Whether the installed wrappers rewrite requests (``patch()``) or only observe them.

``record()`` without ``patch()`` installs the request and response wrappers in observe-only mode:
requests go out exactly as the SDK built them and the observers (the recorder) still see each body
and its usage. ``patch()`` switches the same wrappers to rewriting; ``unpatch()`` switches back.
"""

from __future__ import annotations

__all__ = ["rewriting", "set_rewriting"]

_rewriting = False


def rewriting() -> bool:
    """True while ``patch()`` is in effect (the wrappers may rewrite); False when only observing."""
    return _rewriting


def set_rewriting(value: bool) -> None:
    """Set by ``patch()`` / ``unpatch()``."""
    global _rewriting
    _rewriting = value

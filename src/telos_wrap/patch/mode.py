"""Whether the installed wrappers rewrite requests (``patch()``) or only observe them.

``record()`` without ``patch()`` installs the request and response wrappers in observe-only mode:
requests go out exactly as the SDK built them and the observers (the recorder) still see each body
and its usage. ``patch()`` switches the same wrappers to rewriting; ``unpatch()`` switches back.

The flag itself lives in ``telos_wrap.config`` (below both ``patch`` and ``sessions``, so the sessions
layer reads it without importing ``patch``); this module re-exports it under its old name.
"""

from __future__ import annotations

from telos_wrap.config import rewriting, set_rewriting

__all__ = ["rewriting", "set_rewriting"]

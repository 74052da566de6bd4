"""Old import paths kept as deprecation aliases when a module moves (the public API never just breaks).

An alias module re-exports the moved module's public names (the same objects) and calls ``moved``
once, when it is first imported: only code that imports the old path explicitly sees the
``DeprecationWarning``; nothing in telos_wrap imports an alias (an import-linter contract), so the
normal path emits no warning.
"""

from __future__ import annotations

import warnings

__all__ = ["moved"]


def moved(old: str, new: str) -> None:
    """Warn that module ``old`` is now ``new``; call it at the top level of the alias module ``old``.

    The warning points at the line that imported ``old`` (the import system's own frames are skipped
    by ``warnings``), so ``-W error::DeprecationWarning:yourmodule`` filters work.
    """
    warnings.warn(
        f"{old} is deprecated: it moved to {new}; import from {new} instead",
        DeprecationWarning,
        stacklevel=3,
    )

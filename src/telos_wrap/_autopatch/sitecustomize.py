"""Run by Python at start-up when this directory is on ``PYTHONPATH`` (``telos-wrap run``).

With ``TELOS_WRAP_PATCH=1`` it calls ``telos_wrap.patch()`` with the options of
``TELOS_WRAP_OPTIONS`` (``telos_wrap.autopatch``); then it runs the ``sitecustomize`` this one hides,
if the environment has one further down ``sys.path``. It never stops the application from starting:
whatever goes wrong is said on stderr and the application runs unpatched.
"""

import os
import sys


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (this directory put first hides it)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _start() -> None:
    if os.environ.get("TELOS_WRAP_PATCH", "").strip().lower() in ("1", "true", "yes", "on"):
        try:
            from telos_wrap.autopatch import patch_from_environment
        except ImportError as exc:
            sys.stderr.write(
                f"telos-wrap: this Python cannot import telos_wrap ({exc}); install telos-wrap in the "
                "application's environment. The application runs unpatched.\n"
            )
        else:
            patch_from_environment()
    try:
        _chain()
    except Exception as exc:  # the hidden sitecustomize failed: Python would only have warned too
        sys.stderr.write(f"telos-wrap: the application's own sitecustomize failed: {exc!r}\n")


_start()

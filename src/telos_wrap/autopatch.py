"""Zero-code adoption: ``patch()`` at interpreter start-up, from the environment.

``telos-wrap run -- python app.py`` (as ``opentelemetry-instrument`` does) starts the command with
the ``telos_wrap/_autopatch`` directory first on ``PYTHONPATH``, ``TELOS_WRAP_PATCH=1`` and the
``patch()`` options as JSON in ``TELOS_WRAP_OPTIONS``; the ``sitecustomize`` there calls
:func:`patch_from_environment` before the application's first line. A process manager that only
sets environment variables uses the three that ``telos-wrap run --print-env`` prints.

The options are checked by ``telos-wrap run`` before the command starts; a bad value that reaches a
process through the environment is said on stderr and the application runs unpatched — a start-up
hook must never stop it (``strict: true`` in the options makes it raise instead).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from telos_wrap.ir.canon import canonical_json

__all__ = [
    "OPTIONS_VARIABLE",
    "PATCH_VARIABLE",
    "autopatch_dir",
    "environment",
    "options_from_environment",
    "patch_from_environment",
]

#: ``1`` (or ``true``/``yes``/``on``): patch at start-up.
PATCH_VARIABLE = "TELOS_WRAP_PATCH"
#: ``patch()``'s options as a JSON object, e.g. ``{"engines": {"http://gpu-box:8000/v1": "vllm"}}``.
OPTIONS_VARIABLE = "TELOS_WRAP_OPTIONS"


def autopatch_dir() -> Path:
    """The directory whose ``sitecustomize`` patches at start-up (to put first on ``PYTHONPATH``)."""
    return Path(__file__).resolve().parent / "_autopatch"


def options_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``patch()``'s options from ``TELOS_WRAP_OPTIONS`` (``{}`` when unset), checked.

    Raises ``TelosOptionError`` (a ``ValueError``) saying what is wrong.
    """
    from telos_wrap.config import PatchConfig, updated
    from telos_wrap.errors import TelosOptionError

    text = (os.environ if environ is None else environ).get(OPTIONS_VARIABLE, "").strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError as exc:
        raise TelosOptionError(
            f"{OPTIONS_VARIABLE} is not JSON ({exc}); expected an object such as "
            '{"strict": false, "engines": {"http://gpu-box:8000/v1": "vllm"}}'
        ) from None
    if not isinstance(options, dict):
        raise TelosOptionError(f"{OPTIONS_VARIABLE} must be a JSON object of patch() options, not {text!r}")
    updated(PatchConfig(), options)  # raises for an unknown option or a bad value
    return options


def environment(options: Mapping[str, Any], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process' environment) plus what patches a Python process at start-up."""
    env = dict(os.environ if base is None else base)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(autopatch_dir()), *([path] if path else [])])
    env[PATCH_VARIABLE] = "1"
    if options:
        env[OPTIONS_VARIABLE] = canonical_json(dict(options))
    else:
        env.pop(OPTIONS_VARIABLE, None)
    return env


def patch_from_environment() -> bool:
    """``telos_wrap.patch(**options_from_environment())``; whether the process is patched.

    Never raises unless the options ask for ``strict``: a problem is written to stderr and the
    application runs unpatched.
    """
    try:
        options = options_from_environment()
    except Exception as exc:
        sys.stderr.write(f"telos-wrap: not patched: {exc}\n")
        return False
    try:
        import telos_wrap

        telos_wrap.patch(**options)
    except Exception as exc:
        if options.get("strict") is True:
            raise
        sys.stderr.write(f"telos-wrap: not patched: {type(exc).__name__}: {exc}\n")
        return False
    return True

"""Zero-code adoption: ``patch()`` at interpreter start-up, from the environment.

``telos-wrap run -- python app.py`` (as ``opentelemetry-instrument`` does) starts the command with
the ``telos_wrap/_autopatch`` directory first on ``PYTHONPATH``, ``TELOS_WRAP_PATCH=1`` and the
``patch()`` options as JSON in ``TELOS_WRAP_OPTIONS``; the ``sitecustomize`` there calls
:func:`patch_from_environment` before the application's first line. A process manager that only
sets environment variables uses the ones that ``telos-wrap run --print-env`` prints.

``telos-wrap run --store URL`` (or ``TELOS_STORE_URL`` in the environment) also makes the store that
URL names the default store of every process it starts (``set_default_store``;
``sessions.stores.from_url``): sessions made without ``store=`` — implicit ones, hint-named ones —
are shared by every worker of the application, with no code change.

The options are checked by ``telos-wrap run`` before the command starts; a bad value that reaches a
process through the environment is said on stderr and the application runs unpatched — a start-up
hook must never stop it (``strict: true`` in the options makes it raise instead). A bad store URL
is said the same way; the application then runs patched, its sessions in this process' store.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telos_wrap.ir.canon import canonical_json

if TYPE_CHECKING:
    from telos_wrap.sessions.stores.store import SessionStore

__all__ = [
    "OPTIONS_VARIABLE",
    "PATCH_VARIABLE",
    "STORE_VARIABLE",
    "autopatch_dir",
    "environment",
    "options_from_environment",
    "patch_from_environment",
    "store_from_environment",
]

#: ``1`` (or ``true``/``yes``/``on``): patch at start-up.
PATCH_VARIABLE = "TELOS_WRAP_PATCH"
#: ``patch()``'s options as a JSON object, e.g. ``{"engines": {"http://gpu-box:8000/v1": "vllm"}}``.
OPTIONS_VARIABLE = "TELOS_WRAP_OPTIONS"
#: The default session store's URL, e.g. ``redis://redis:6379/0`` (``sessions.stores.from_url``).
STORE_VARIABLE = "TELOS_STORE_URL"


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


def store_from_environment(environ: Mapping[str, str] | None = None) -> SessionStore | None:
    """The store ``TELOS_STORE_URL`` names (``None`` when unset), checked.

    Raises ``TelosOptionError`` (a ``ValueError``) saying what a good URL looks like.
    """
    from telos_wrap.sessions.stores.from_url import store_from_url

    url = (os.environ if environ is None else environ).get(STORE_VARIABLE, "").strip()
    if not url:
        return None
    try:
        return store_from_url(url)
    except ValueError as exc:
        raise type(exc)(f"{STORE_VARIABLE}: {exc}") from None


def environment(
    options: Mapping[str, Any], base: Mapping[str, str] | None = None, *, store: str | None = None
) -> dict[str, str]:
    """``base`` (default: this process' environment) plus what patches a Python process at start-up
    (and, with ``store``, what makes that URL its default session store)."""
    env = dict(os.environ if base is None else base)
    if store is not None:
        env[STORE_VARIABLE] = store
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(autopatch_dir()), *([path] if path else [])])
    env[PATCH_VARIABLE] = "1"
    if options:
        env[OPTIONS_VARIABLE] = canonical_json(dict(options))
    else:
        env.pop(OPTIONS_VARIABLE, None)
    return env


def patch_from_environment() -> bool:
    """``telos_wrap.patch(**options_from_environment())`` and ``set_default_store`` of
    ``store_from_environment()``; whether the process is patched.

    Never raises unless the options ask for ``strict``: a problem is written to stderr and the
    application runs unpatched (a bad store URL: patched, its sessions in this process' store).
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
    try:
        store = store_from_environment()
    except Exception as exc:
        if options.get("strict") is True:
            raise
        sys.stderr.write(
            f"telos-wrap: {exc}. Sessions stay in this process (not shared with other workers) until "
            f"{STORE_VARIABLE} is fixed or unset.\n"
        )
        return True
    if store is not None:
        from telos_wrap.sessions.stores.store import set_default_store

        set_default_store(store)
    return True

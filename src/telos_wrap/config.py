"""Install-time configuration of ``patch()``, read by the wrappers at call time.

Every option is checked here (``updated``) before ``patch()`` installs anything: a typo raises
``TelosOptionError`` at the ``patch()`` line, never later at a call, where telos could only fail
open.

It also holds whether the installed wrappers rewrite (``rewriting()``, set by ``patch()`` /
``unpatch()``), here rather than in ``telos_wrap.patch`` so that lower layers (``sessions``) can read
it without importing the patch layer.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from telos_wrap.engines.registry import engine_names
from telos_wrap.errors import TelosOptionError
from telos_wrap.ir.context import ContextPolicy, ContextPolicyError, parse_context
from telos_wrap.ir.hints import check_output_filter

__all__ = [
    "OPTION_NAMES",
    "PatchConfig",
    "current_config",
    "rewriting",
    "set_config",
    "set_rewriting",
    "updated",
]


@dataclass(frozen=True, slots=True)
class PatchConfig:
    """What ``patch()`` was told.

    Attributes:
        strict: raise ``TelosStageError`` instead of failing open (for tests and CI).
        enabled: when False every call passes through untouched (a kill switch that needs no unpatch).
        engines: ``{base_url or host: engine name}`` for OpenAI-compatible endpoints that cannot be
            recognised from their URL (self-hosted vLLM / SGLang are never guessed).
        refpool_threshold: system text longer than this many characters goes to the ref-pool
            (``None`` turns the ref-pool off).
        keep_past_drop: keep past turns' envelopes (as history) instead of pruning them.
        only_what_pays: leave a request exactly as the SDK built it when nothing in it can be cached
            (below the model's minimum cacheable prefix, docs/engines.md).
        time_budget: CPU seconds telos may spend preparing one request; past it the SDK's own request
            goes out (``None``: no budget). docs/reliability.md.
        fleet_learning: offer what one conversation learned about its system prompt's template to
            the next conversations of that template, through the session store (docs/sessions.md,
            "Fleet learning"); a session's own ``fleet_learning=`` overrides it.
        context: the context policy of every session without one of its own (``None``: never fold;
            docs/sessions.md, "Context under pressure").
    """

    strict: bool = False
    enabled: bool = True
    engines: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    refpool_threshold: int | None = 2048
    keep_past_drop: bool = False
    only_what_pays: bool = True
    time_budget: float | None = 2.0
    fleet_learning: bool = True
    #: The output filter for tool results (``"off"``, ``"safe"``, ``"aggressive"`` or an
    #: ``OutputFilter``); a session's or call's ``output_filter`` overrides it (docs/output-filter.md).
    output_filter: Any = "off"
    context: ContextPolicy | None = None


#: ``patch()``'s options, in the order of its signature.
OPTION_NAMES = (
    "strict",
    "engines",
    "enabled",
    "refpool_threshold",
    "keep_past_drop",
    "only_what_pays",
    "time_budget",
    "fleet_learning",
    "output_filter",
    "context",
)
_FLAGS = ("strict", "enabled", "keep_past_drop", "only_what_pays", "fleet_learning")


def updated(base: PatchConfig, changes: Mapping[str, Any]) -> PatchConfig:
    """``base`` with ``changes`` (option name → value) applied, every value checked first.

    Raises ``TelosOptionError`` naming the option, the value given and what is valid; ``base`` is
    never modified (frozen).
    """
    unknown = sorted(str(name) for name in changes if name not in OPTION_NAMES)
    if unknown:
        raise TelosOptionError(
            f"unknown patch() option(s) {unknown}{_did_you_mean(unknown[0], OPTION_NAMES)}; "
            f"valid options: {', '.join(OPTION_NAMES)}"
        )
    values: dict[str, Any] = {}
    for name, value in changes.items():
        if name in _FLAGS:
            if not isinstance(value, bool):
                raise TelosOptionError(f"patch({name}=...) must be True or False, not {value!r}")
            values[name] = value
        elif name == "refpool_threshold":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise TelosOptionError(
                    f"patch(refpool_threshold=...) must be a number of characters >= 0, or None to turn "
                    f"the ref-pool off; not {value!r}"
                )
            values[name] = value
        elif name == "time_budget":
            values[name] = _time_budget(value)
        elif name == "output_filter":
            try:
                values[name] = check_output_filter(value, "patch(output_filter=...)") or "off"
            except ValueError as exc:
                raise TelosOptionError(str(exc)) from None
        elif name == "context":
            try:
                values[name] = parse_context(value)
            except ContextPolicyError as exc:
                raise TelosOptionError(f"patch(context=...): {exc}") from None
        else:
            values[name] = MappingProxyType(_engines(value))
    return dataclasses.replace(base, **values)


def _time_budget(value: Any) -> float | None:
    """``patch(time_budget=...)`` checked: a positive, finite number of seconds, or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise TelosOptionError(
            f"patch(time_budget=...) takes a positive number of seconds, or None for no budget; not {value!r}"
        )
    return float(value)


def _engines(value: Any) -> dict[str, str]:
    """``patch(engines=...)`` checked: base URLs or host names mapped to registered engine names."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TelosOptionError(
            f"patch(engines=...) must be a dict {{base_url_or_host: engine}}, not {type(value).__name__}; "
            'e.g. patch(engines={"http://gpu-box:8000/v1": "vllm"})'
        )
    known = engine_names()
    checked: dict[str, str] = {}
    for key, engine in value.items():
        if not isinstance(engine, str) or engine not in known:
            raise TelosOptionError(
                f"patch(engines={{{key!r}: {engine!r}}}): no engine named {engine!r}"
                f"{_did_you_mean(engine, known)}; "
                f"known engines: {', '.join(known)} (or one added with telos_wrap.register_engine)"
            )
        if engine == "anthropic":
            raise TelosOptionError(
                f"patch(engines={{{key!r}: 'anthropic'}}): engines= names OpenAI-compatible servers "
                "(the OpenAI client's base URL); the anthropic engine is always used for the anthropic "
                "client. Engines for OpenAI-compatible servers: "
                + ", ".join(name for name in known if name != "anthropic")
            )
        if not isinstance(key, str) or not _is_endpoint(key):
            raise TelosOptionError(
                f"patch(engines={{{key!r}: {engine!r}}}): a key must be the client's base URL "
                '("http://gpu-box:8000/v1") or a host name ("gpu-box"), as the OpenAI client is given it'
            )
        checked[key] = engine
    return checked


def _did_you_mean(given: object, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(given, valid, n=1) if isinstance(given, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_endpoint(key: str) -> bool:
    """A base URL with a scheme and a host, or a bare host name (what routing compares keys with)."""
    if "://" in key:
        parts = urlsplit(key)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    return bool(key) and not any(char in key for char in "/: ")


_config = PatchConfig()


def current_config() -> PatchConfig:
    """The active configuration (the default one before ``patch()``)."""
    return _config


def set_config(config: PatchConfig) -> None:
    """Replace the active configuration (``patch()`` calls this)."""
    global _config
    _config = config


_rewriting = False


def rewriting() -> bool:
    """True while ``patch()`` is in effect (the wrappers may rewrite); False when only observing."""
    return _rewriting


def set_rewriting(value: bool) -> None:
    """Set by ``patch()`` / ``unpatch()``."""
    global _rewriting
    _rewriting = value

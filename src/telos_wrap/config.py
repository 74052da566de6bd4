"""Install-time configuration of ``patch()``, read by the wrappers at call time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["PatchConfig", "current_config", "set_config"]


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
        time_budget: seconds telos may spend preparing one request; past it the SDK's own request
            goes out (``None``: no budget). docs/reliability.md.
    """

    strict: bool = False
    enabled: bool = True
    engines: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    refpool_threshold: int | None = 2048
    keep_past_drop: bool = False
    only_what_pays: bool = True
    time_budget: float | None = 5.0


_config = PatchConfig()


def current_config() -> PatchConfig:
    """The active configuration (the default one before ``patch()``)."""
    return _config


def set_config(config: PatchConfig) -> None:
    """Replace the active configuration (``patch()`` calls this)."""
    global _config
    _config = config

"""Layer 3 — engine adapters: IR → wire body, wire usage → ``UsageReport``."""

from telos_wrap.engines.base import Breakpoint, EmitPlan, EngineAdapter, EngineProfile, ProbeResult
from telos_wrap.engines.registry import engine_names, get_engine, register_engine

__all__ = [
    "Breakpoint",
    "EmitPlan",
    "EngineAdapter",
    "EngineProfile",
    "ProbeResult",
    "engine_names",
    "get_engine",
    "register_engine",
]

"""telos_wrap — make prompt-cache reuse a structural property of every LLM call.

import telos_wrap
telos_wrap.patch()                      # anthropic + openai SDKs, no proxy
msg = client.messages.create(...)       # rewritten: canonical bytes, bands, breakpoints
telos_wrap.usage_of(msg)                # normalized UsageReport (cache read / write / uncached)
"""

from telos_wrap.engines.registry import register_engine
from telos_wrap.errors import (
    RefPoolError,
    StoreConflictError,
    TelosError,
    TelosHintError,
    TelosInvariantError,
    TelosOptionError,
    TelosStageError,
)
from telos_wrap.failopen import failure_counts
from telos_wrap.filters import OutputFilter
from telos_wrap.ir.context import ContextPolicy
from telos_wrap.ir.hints import TelosHints
from telos_wrap.ir.model import Band, UsageReport
from telos_wrap.patch import coverage, is_patched, patch, unpatch
from telos_wrap.replay.recording import record
from telos_wrap.sessions import Session, current_session, session
from telos_wrap.usage import usage_of

__version__ = "0.1.0"

__all__ = [
    "Band",
    "ContextPolicy",
    "OutputFilter",
    "RefPoolError",
    "Session",
    "StoreConflictError",
    "TelosError",
    "TelosHintError",
    "TelosHints",
    "TelosInvariantError",
    "TelosOptionError",
    "TelosStageError",
    "UsageReport",
    "coverage",
    "current_session",
    "failure_counts",
    "is_patched",
    "patch",
    "record",
    "register_engine",
    "session",
    "unpatch",
    "usage_of",
]

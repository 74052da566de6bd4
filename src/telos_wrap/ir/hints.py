"""``TelosHints``: the per-call / per-session options, validated before any network I/O."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from telos_wrap.errors import TelosHintError
from telos_wrap.ir.context import ContextPolicy, ContextPolicyError, parse_context

__all__ = [
    "ENGINE_NAMES",
    "OUTPUT_FILTER_MODES",
    "VALID_VALUES",
    "TelosHints",
    "check_output_filter",
    "parse_hints",
]

#: The output filter's modes (``telos_wrap.filters.MODES``; a value of the caller's may also be an
#: ``OutputFilter``, recognized by its ``filter_id`` and ``callable_for``: the IR imports no other room).
OUTPUT_FILTER_MODES = ("off", "safe", "aggressive")


def check_output_filter(value: Any, where: str) -> Any:
    """``value`` if it is an output filter setting, else ``ValueError`` saying what is valid."""
    if value is None or (isinstance(value, str) and value in OUTPUT_FILTER_MODES):
        return value
    if callable(getattr(value, "callable_for", None)) and isinstance(getattr(value, "filter_id", None), str):
        return value
    raise ValueError(
        f"{where}: {value!r} is not an output filter; valid: "
        + ", ".join(repr(mode) for mode in OUTPUT_FILTER_MODES)
        + " or a telos_wrap.OutputFilter(name, version, tools={...}, commands={...}, then=...)"
    )


#: The built-in engines (``telos_wrap.engines.registry``; a test keeps the two lists equal): what the
#: ``engine`` hint and ``session(engine=)`` accept, as ``patch(engines=...)`` does.
ENGINE_NAMES = ("anthropic", "openai", "deepseek", "vllm", "sglang", "generic", "openrouter", "litellm")
EngineName = Literal["anthropic", "openai", "deepseek", "vllm", "sglang", "generic", "openrouter", "litellm"]


class TelosHints(BaseModel):
    """What a caller can tell telos about one call (``telos_hint=``) or a whole session.

    Every field is optional; an unset field falls back to the session, then to ``patch()``'s options.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    session: str | None = Field(default=None, description="Session id this call belongs to.")
    engine: EngineName | None = Field(
        default=None, description="Engine adapter; required to name self-hosted vLLM/SGLang servers."
    )
    # strict: a bool or an int, never a string or number read as one ("yes", "3": TelosHintError).
    disable: bool = Field(
        default=False, strict=True, description="Send this request exactly as the caller built it."
    )
    ttl: Literal["5m", "1h", "30m", "12h"] | None = Field(
        default=None,
        description="Cache lifetime for the stable prefix: 5m/1h (Anthropic), 30m/12h (OpenAI gpt-5.6+).",
    )
    drop_patterns: tuple[str, ...] = Field(
        default=(), description="Extra regular expressions whose matches are per-turn volatile (DROP)."
    )
    drop_scope: Literal["system", "all"] = Field(
        default="system",
        description="Where drop_patterns apply: the system prompt only (default), or also every "
        "message ('all': past turns are then pruned of their matches too, each prune recorded).",
    )
    isolation: str | None = Field(
        default=None,
        description="Tenant or user key: hashed into vLLM/SGLang cache_salt so tenants never share KV.",
    )
    expected_turns: int | None = Field(
        default=None,
        ge=1,
        strict=True,
        description="How many requests the conversation is expected to make: from request N on, an "
        "engine whose cache writes cost extra writes nothing past what an earlier request wrote "
        "(docs/sessions.md, 'No write nobody reads').",
    )

    output_filter: Any = Field(
        default=None,
        description="The output filter for tool results: 'off', 'safe', 'aggressive', or a "
        "telos_wrap.OutputFilter (docs/output-filter.md); unset: the session's, then patch()'s.",
    )

    @field_validator("output_filter")
    @classmethod
    def _output_filter(cls, value: Any) -> Any:
        return check_output_filter(value, "telos_hint={'output_filter': ...}")

    context: ContextPolicy | None = Field(
        default=None,
        description="Fold old tool results (and thinking) under pressure: a dict written as Anthropic's "
        "clear_tool_uses_20250919 edit or context_management value, or a ContextPolicy (docs/sessions.md, "
        "'Context under pressure').",
    )

    @field_validator("context", mode="before")
    @classmethod
    def _context_parses(cls, value: Any) -> ContextPolicy | None:
        if isinstance(value, Mapping) and "trigger_tokens" in value:  # model_dump()'s form, re-read
            value = ContextPolicy(**{**value, "exclude_tools": tuple(value.get("exclude_tools", ()))})
        try:
            return parse_context(value)
        except ContextPolicyError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("drop_patterns")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"drop pattern {pattern!r} is not a valid regular expression: {exc}"
                ) from exc
        return value

    def merged_over(self, base: TelosHints | None) -> TelosHints:
        """These hints with unset fields taken from ``base`` (call hints over session hints)."""
        if base is None:
            return self
        if not self.model_fields_set:  # the common call: no telos_hint of its own
            return _every_field_set(base)
        data = base.model_dump()
        for name in self.model_fields_set:
            data[name] = getattr(self, name)
        if base.drop_patterns and "drop_patterns" in self.model_fields_set:
            data["drop_patterns"] = tuple(dict.fromkeys((*base.drop_patterns, *self.drop_patterns)))
        return TelosHints(**data)


@functools.lru_cache(maxsize=256)
def _every_field_set(base: TelosHints) -> TelosHints:
    """``TelosHints()`` merged over ``base``: a copy of ``base`` with every field set (memoized: the
    hints are frozen, and a session's are the same object on every call)."""
    return TelosHints(**base.model_dump())


_VALID_KEYS = ", ".join(TelosHints.model_fields)
#: What each key accepts, said in an error about it (``tests/reliability/test_options.py`` checks
#: that every key has an entry).
VALID_VALUES: Mapping[str, str] = {
    "session": "a session id (a string)",
    "engine": " or ".join(ENGINE_NAMES),
    "disable": "True or False",
    "ttl": "'5m' or '1h' (Anthropic), '30m' or '12h' (OpenAI gpt-5.6+)",
    "drop_patterns": "a list of regular expressions (strings)",
    "drop_scope": "'system' or 'all'",
    "isolation": "a tenant or user key (a string)",
    "expected_turns": "an integer of at least 1",
    "output_filter": "'off', 'safe', 'aggressive' or a telos_wrap.OutputFilter",
    "context": "a dict written as Anthropic's clear_tool_uses_20250919 edit or context_management value, "
    "or a telos_wrap.ContextPolicy",
}


def parse_hints(value: Any) -> TelosHints:
    """Validate a ``telos_hint=`` value (a ``TelosHints`` or a mapping). Raises ``TelosHintError``."""
    if value is None:
        return TelosHints()
    if isinstance(value, TelosHints):
        return value
    if not isinstance(value, Mapping):
        raise TelosHintError(
            f"telos_hint must be a dict or telos_wrap.TelosHints, not {type(value).__name__}; "
            f"valid keys: {_VALID_KEYS}"
        )
    unknown = sorted(str(key) for key in value if key not in TelosHints.model_fields)
    if unknown:
        raise TelosHintError(f"unknown telos_hint key(s) {unknown}; valid keys: {_VALID_KEYS}")
    try:
        return TelosHints(**value)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise TelosHintError(f"invalid telos_hint ({problems}); valid keys: {_VALID_KEYS}") from None


def _problem(error: Any) -> str:
    """One validation error: where, pydantic's message, and what the key accepts."""
    loc = error["loc"]
    valid = VALID_VALUES.get(str(loc[0])) if loc else None
    where = ".".join(map(str, loc))
    return f"{where}: {error['msg']}" + (f" (valid: {valid})" if valid else "")

"""Touch only what pays: the minimum cacheable prefix per engine and model, and the gate built on it.

A vendor caches a prefix only from a minimum length on; below it nothing is written or read, with
no error (vendor facts and sources in ``docs/engines.md``, *Minimum cacheable prefix*). A request
whose whole prompt is shorter than that minimum cannot be made cheaper by any marker, key order or
moved envelope, so telos leaves it exactly as the SDK built it (``untouched_reason``).

*Conservative* here means: never leave untouched a request that a vendor could cache. Where sources
disagree the table takes the **lower** minimum, a model it does not know gets the lowest minimum of
its vendor's family, and the token estimate **over**-counts (one token per 3 characters of every
string in the prompt, where the vendors' tokenizers average about 4 on English text). A request the
gate lets through may still be below the real minimum; a request it leaves untouched is below it.

Pure: no I/O, no SDK.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHARS_PER_TOKEN",
    "Minimum",
    "claude_model_id",
    "estimate_tokens_over",
    "minimum_for",
    "server_held",
    "untouched_reason",
]

#: Characters per token the estimate assumes (an over-count: real tokenizers average ~4 on English).
CHARS_PER_TOKEN = 3

# Anthropic, docs/vendor-facts.md §1.3 (longest matching model-name prefix wins). DISAGREE rows take
# the lower value: Sonnet 4.6 (1,024 vs 2,048), Opus 4.7 (2,048 vs 4,096).
_ANTHROPIC: tuple[tuple[str, int], ...] = (
    ("claude-opus-5", 512),
    ("claude-fable-5", 512),
    ("claude-mythos-5", 512),
    ("claude-opus-4-8", 1024),
    ("claude-sonnet-5", 1024),
    ("claude-sonnet-4-6", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4-0", 1024),
    ("claude-opus-4-2", 1024),
    ("claude-sonnet-4-0", 1024),
    ("claude-sonnet-4-2", 1024),
    ("claude-3-7-sonnet", 1024),
    ("claude-opus-4-7", 2048),
    ("claude-mythos-preview", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
)
#: An Anthropic model the table does not know: the lowest minimum any Claude model has.
ANTHROPIC_DEFAULT = 512
#: ``_ANTHROPIC`` with the longest prefixes first (a stable sort: ties keep the table's order).
_ANTHROPIC_LONGEST_FIRST = tuple(sorted(_ANTHROPIC, key=lambda row: -len(row[0])))
#: OpenAI: "caching is automatic for prompts >= 1024 tokens" (§2.1), every model.
OPENAI_MINIMUM = 1024
#: Engines whose servers cache from (almost) the first token: DeepSeek (no minimum on the current
#: page, §3), vLLM (one 16-token block, §4), SGLang (one page, default 1 token, §5), and any other
#: OpenAI-compatible server (unknown: assume it caches everything).
_NO_MINIMUM = {"deepseek": 0, "vllm": 16, "sglang": 1, "generic": 0}


@dataclass(frozen=True, slots=True)
class Minimum:
    """The minimum cacheable prefix of one engine and model.

    Attributes:
        tokens: the minimum, in tokens.
        model: the model it applies to (as the request named it).
        known: False when the model is not in the table (the family's lowest minimum is used).
    """

    tokens: int
    model: str
    known: bool = True


#: Bedrock's own minimums where they are lower than Anthropic's (docs/engines.md, *Routes*: Bedrock lists
#: Claude 3.5 models at 1,024). A Bedrock id names the model ``anthropic.claude-…``.
_BEDROCK_LOWER = {"claude-3-5-haiku": 1024}
#: Chat Completions routes that reach Claude (``engines.chat_breakpoints``): Claude's minimums there.
_CLAUDE_ROUTES = frozenset({"openrouter", "litellm"})


def claude_model_id(model: str) -> str:
    """The Anthropic model id inside any route's name for it (docs/engines.md, *Routes*).

    ``anthropic/claude-sonnet-4.5`` (OpenRouter; LiteLLM's provider prefix), ``claude-sonnet-4-5@20250929``
    (Vertex AI), ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` (Bedrock, with a cross-region
    prefix) and ``bedrock/...`` all give ``claude-sonnet-4-5...``; dots in a version become dashes.
    """
    bare = model.lower().split("@")[0].rsplit("/", 1)[-1]
    if "anthropic." in bare:
        bare = bare.split("anthropic.", 1)[1]
    return bare.replace(".", "-")


def minimum_for(engine: str, model: object) -> Minimum:
    """The minimum cacheable prefix for ``model`` on ``engine`` (see module docstring)."""
    # Asked on every request, with the same few models: a memo (a ``Minimum`` is immutable).
    return _minimum_of(engine, model if type(model) is str or isinstance(model, str) else "")


@functools.lru_cache(maxsize=256)
def _minimum_of(engine: str, name: str) -> Minimum:
    if engine in _CLAUDE_ROUTES and "claude" not in name.lower():
        return Minimum(0, name)  # another model behind the router: assumed to cache everything
    if engine == "anthropic" or engine in _CLAUDE_ROUTES:
        bare = claude_model_id(name)
        if "anthropic." in name.lower():
            lower = next(
                (tokens for prefix, tokens in _BEDROCK_LOWER.items() if bare.startswith(prefix)), None
            )
            if lower is not None:
                return Minimum(lower, name)
        for prefix, tokens in _ANTHROPIC_LONGEST_FIRST:
            if bare.startswith(prefix):
                return Minimum(tokens, name)
        return Minimum(ANTHROPIC_DEFAULT, name, known=False)
    if engine == "openai":
        return Minimum(OPENAI_MINIMUM, name)
    return Minimum(_NO_MINIMUM.get(engine, 0), name)


#: Body fields that hold what the model reads (everything else is a request option).
_PROMPT_FIELDS = ("tools", "system", "messages", "instructions", "input")


def estimate_tokens_over(body: Mapping[str, Any], limit: int) -> int:
    """An over-estimate of the prompt's tokens, exact enough to compare with ``limit``.

    Counts every string (text, tool schemas, arguments, keys) in the prompt fields at
    ``CHARS_PER_TOKEN`` characters a token plus one token per container; stops as soon as the count
    passes ``limit`` (a long conversation is never walked whole).
    """
    budget = limit * CHARS_PER_TOKEN
    chars = 0
    stack: list[Any] = [body.get(key) for key in _PROMPT_FIELDS if key in body]
    # The count is a sum (any walk order gives the same total), and the walk stops only once it
    # passes the budget: a string value of a mapping is counted on the spot instead of stacked.
    while stack and chars <= budget:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            chars += len(value)
        elif kind is dict or (kind is not list and isinstance(value, Mapping)):
            chars += CHARS_PER_TOKEN
            for key, item in value.items():
                if type(key) is str or isinstance(key, str):
                    chars += len(key)
                if type(item) is str:
                    chars += len(item)
                else:
                    stack.append(item)
        elif kind is list or isinstance(value, tuple):
            chars += CHARS_PER_TOKEN
            stack.extend(value)
        elif isinstance(value, str):
            chars += len(value)
        elif value is not None:
            chars += len(str(value))
    return -(-chars // CHARS_PER_TOKEN)


def untouched_reason(engine: str, body: Mapping[str, Any]) -> str | None:
    """Why telos leaves ``body`` exactly as the SDK built it, or ``None`` when touching it can pay.

    The whole prompt below the model's minimum cacheable prefix: no breakpoint telos could place
    would be cached, and no canonical order or moved envelope makes a prefix that does not exist
    hit. (Learned volatility is still learned from the request: the session sees it either way.)
    """
    minimum = minimum_for(engine, body.get("model"))
    if minimum.tokens <= 0:
        return None
    estimate = estimate_tokens_over(body, minimum.tokens)
    if estimate >= minimum.tokens:
        return None
    which = f"for {minimum.model}" if minimum.known else f"assumed for {minimum.model!r} (not in the table)"
    return (
        f"below the {minimum.tokens:,}-token minimum {which} (the minimum cacheable prefix): the whole "
        f"prompt is at most ~{estimate:,} tokens, so nothing in it can be cached and telos sends it as built"
    )


def server_held(api: str, body: Mapping[str, Any]) -> str | None:
    """What the vendor holds for this request, or ``None`` (see docs/engines.md, *Server-held state*).

    * Anthropic message threads (beta, ``thread: {"type": "create"}`` or ``{"type": "continue",
      "previous_message_id": ...}``, anthropic 2.12 ``BetaMessageThreadParam``): the server holds the
      conversation under the response id and its tools cannot change once the thread exists, so
      telos sends such a request as built (its system prompt and tools must stay what the thread was
      created with; a continued turn carries only the new messages).
    * OpenAI Responses with ``previous_response_id`` or ``conversation``: the earlier turns live on
      the server and the request carries only new input; telos stabilizes what the request sends
      (instructions, tools, the new items) and never adds or reorders anything the server holds
      (``docs/engines.md``, *OpenAI Responses*).
    """
    if api == "anthropic" and isinstance(body.get("thread"), Mapping):
        return "thread"
    if api == "openai_responses":
        if body.get("previous_response_id") is not None:
            return "previous_response_id"
        if body.get("conversation") is not None:
            return "conversation"
    return None

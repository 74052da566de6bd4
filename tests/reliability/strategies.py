"""Hypothesis strategies: valid Anthropic Messages and OpenAI Chat Completions request bodies.

Generated bodies cover what agents send: string vs block content, text with per-turn envelopes
(``<system-reminder>``, ``<environment_info>``, ``Current time:`` lines) in user and system text,
unicode (astral plane, combining marks, RTL, NUL), empty texts, images, documents, thinking and
redacted thinking, tool_use/tool_result (and tool_calls/tool messages), unsorted tool schemas,
large system documents (ref-pool), and the caller's own cache markers (Anthropic ``cache_control``,
≤ 4 in a valid TTL order; OpenAI ``prompt_cache_breakpoint``).

Every body is valid for the SDK's request types (the tests check that too). A user turn is mostly a
question with envelopes around it, sometimes envelopes only (``envelope_only_turns`` makes sure of one).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .content import cores

# Printable unicode, no surrogates (not encodable), from several scripts; NUL included on purpose.
_ALPHABET = st.characters(
    codec="utf-8",
    exclude_categories=("Cs",),
    include_characters="\x00\n\t é中文😀\u0301\u05d0\u200b[]<>/:",
)
WORDS = st.text(_ALPHABET, min_size=1, max_size=24)
PLAIN = st.text(_ALPHABET, max_size=40)
ENVELOPES = st.one_of(
    st.builds(lambda t: f"<system-reminder>{t}</system-reminder>", WORDS.filter(lambda t: "</" not in t)),
    st.builds(
        lambda t: f"<environment_info>cwd: /home/{t}</environment_info>",
        WORDS.filter(lambda t: "</" not in t),
    ),
    st.builds(
        lambda h, m: f"Current time: 2026-11-21T{h:02d}:{m:02d}:00", st.integers(0, 23), st.integers(0, 59)
    ),
)
_SEPARATORS = st.sampled_from(["", "\n", "\n\n", " ", "\t"])
_LINE_ENDS = st.sampled_from(["\n", "\n\n", " \n"])


@st.composite
def envelope_text(draw: st.DrawFn, *, must_have_content: bool = False) -> str:
    """Text with envelopes mixed in; ``must_have_content``: some non-envelope, non-blank text too.

    An envelope usually ends its line, as harnesses write them, and is sometimes glued to what follows.
    """
    pieces: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        envelope = draw(st.booleans())
        pieces.append(draw(ENVELOPES if envelope else PLAIN))
        pieces.append(draw(st.one_of(_LINE_ENDS, _SEPARATORS) if envelope else _SEPARATORS))
    if must_have_content:
        core = draw(WORDS.filter(lambda t: bool(t.strip()) and "Current time:" not in t))
        pieces.insert(draw(st.integers(0, len(pieces))), f"\n{core}\n")
    text = "".join(pieces)
    return text


def big_document(seed: str) -> str:
    """A system document longer than the 2,048-character ref-pool threshold."""
    return "".join(f"Section {i}: {seed} policy text, clause {i}.\n" for i in range(90))


SCHEMA_PROPS = st.dictionaries(
    st.sampled_from(["a", "b", "city", "zeta", "n", "Ω"]),
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "string", "enum": ["z", "a"]}]),
    max_size=4,
)
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), PLAIN),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(PLAIN, inner, max_size=3)),
    max_leaves=6,
)
TOOL_NAMES = ["get_weather", "search", "mcp__fs__read", "calc", "zeta_tool", "web_fetch"]


@st.composite
def _schema(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(SCHEMA_PROPS)
    required = draw(st.permutations(list(props))) if props else []
    required = required[: draw(st.integers(0, len(required)))]
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required or draw(st.booleans()):
        schema["required"] = list(required)
    return dict(draw(st.permutations(list(schema.items()))))


# -- Anthropic ------------------------------------------------------------------------------------


def _a_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


A_IMAGE = st.sampled_from(
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    ]
)
A_DOCUMENT = st.one_of(
    st.builds(
        lambda t: {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": t}},
        PLAIN,
    ),
    st.builds(
        lambda t: {
            "type": "document",
            "title": t,
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
        },
        WORDS,
    ),
)


@st.composite
def _a_thinking(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"type": "thinking", "thinking": draw(PLAIN), "signature": "sig-" + draw(WORDS)}
    return {"type": "redacted_thinking", "data": "opaque-" + draw(WORDS)}


@st.composite
def anthropic_requests(
    draw: st.DrawFn, *, big_system: bool | None = None, markers: bool = True
) -> dict[str, Any]:
    """A valid ``messages.create`` body (see module docstring)."""
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=4))
    tools = []
    for name in names:
        tool: dict[str, Any] = {"name": name, "input_schema": draw(_schema())}
        if draw(st.booleans()):
            tool["description"] = draw(PLAIN)
        tools.append(dict(draw(st.permutations(list(tool.items())))))
    body: dict[str, Any] = {"model": "claude-opus-5", "max_tokens": draw(st.integers(1, 4096))}
    if tools or draw(st.booleans()):
        body["tools"] = tools
    big = draw(st.integers(0, 5)) == 0 if big_system is None else big_system
    system_kind = (
        draw(st.sampled_from(["absent", "string", "list"]))
        if not big
        else draw(st.sampled_from(["string", "list"]))
    )
    if system_kind == "string":
        body["system"] = (big_document(draw(WORDS)) if big else "") + draw(envelope_text())
    elif system_kind == "list":
        blocks = [_a_text(draw(envelope_text())) for _ in range(draw(st.integers(1, 3)))]
        if big:
            blocks.insert(0, _a_text(big_document(draw(WORDS))))
        body["system"] = blocks
    messages: list[dict[str, Any]] = []
    pending_tool_ids: list[str] = []
    turns = draw(st.integers(1, 5))
    for turn in range(turns):
        blocks = [
            {"type": "tool_result", "tool_use_id": tid, **_tool_result_content(draw), **_maybe_error(draw)}
            for tid in pending_tool_ids
        ]
        # Images / documents after the tool results too (a computer-use screenshot): they must stay
        # behind them (test_properties.test_tool_results_stay_first_in_their_message).
        extra_user = draw(st.lists(st.one_of(A_IMAGE, A_DOCUMENT), max_size=2))
        # Mostly a real question; sometimes a turn of envelopes only (a slash command, a reminder).
        text = draw(envelope_text(must_have_content=draw(st.integers(0, 5)) > 0))
        if not text.strip():
            text = draw(ENVELOPES)
        if not blocks and not extra_user and draw(st.booleans()):
            messages.append({"role": "user", "content": text})
        else:
            content = blocks + extra_user + [_a_text(text)]
            if draw(st.booleans()):
                content.append(_a_text(draw(envelope_text())))
            messages.append({"role": "user", "content": content})
        pending_tool_ids = []
        if turn == turns - 1:
            break
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": draw(PLAIN.filter(lambda t: bool(t.strip())))})
            continue
        content = []
        if draw(st.booleans()):
            content.append(draw(_a_thinking()))
        if draw(st.booleans()) or not names:
            content.append(_a_text(draw(PLAIN)))
        for index in range(draw(st.integers(0, 2)) if names else 0):
            tid = f"toolu_{turn}_{index}"
            pending_tool_ids.append(tid)
            content.append(
                {
                    "type": "tool_use",
                    "id": tid,
                    "name": draw(st.sampled_from(names)),
                    "input": draw(st.dictionaries(PLAIN, JSONISH, max_size=3)),
                }
            )
        if not content:
            content.append(_a_text("ok"))
        messages.append({"role": "assistant", "content": content})
    body["messages"] = messages
    if draw(st.booleans()):
        body["stop_sequences"] = draw(st.lists(WORDS, max_size=2))
    if draw(st.booleans()):
        body["metadata"] = {"user_id": "user-" + draw(st.sampled_from(["1", "2"]))}
    if markers:
        _add_anthropic_markers(draw, body)
    return dict(draw(st.permutations(list(body.items()))))


def _tool_result_content(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "blocks", "absent"]))
    if kind == "string":
        return {"content": draw(PLAIN)}
    if kind == "blocks":
        return {"content": [_a_text(draw(WORDS)) for _ in range(draw(st.integers(1, 2)))]}
    return {}


def _maybe_error(draw: st.DrawFn) -> dict[str, Any]:
    return {"is_error": True} if draw(st.integers(0, 5)) == 0 else {}


_A_MARKABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})


def _add_anthropic_markers(draw: st.DrawFn, body: dict[str, Any]) -> None:
    """The caller's own markers: ≤ 4 with a top-level one, on markable blocks, 1h ones first."""
    top = draw(st.booleans()) and draw(st.integers(0, 3)) == 0
    if top:
        body["cache_control"] = {"type": "ephemeral"}
    spots: list[tuple[Any, Any]] = [(body["tools"], i) for i in range(len(body.get("tools") or []))]
    # Never on a text telos moves with its marker — one that is all envelope (band sort, or system →
    # latest turn) or a system document for the ref-pool (rendered after the PIN system blocks): that can
    # put a 1h marker after a 5m one (test_properties.test_a_moved_marker_keeps_the_ttl_order covers it).
    if isinstance(body.get("system"), list):
        spots += [
            (body["system"], i)
            for i, b in enumerate(body["system"])
            if cores(b["text"]) and len(b["text"]) <= 2048
        ]
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for i, block in enumerate(message["content"]):
                if block["type"] in _A_MARKABLE and (block["type"] != "text" or cores(block["text"])):
                    spots.append((message["content"], i))
    if not spots:
        return
    chosen = sorted(draw(st.sets(st.integers(0, len(spots) - 1), max_size=4 - top)))
    long_ones = draw(st.integers(0, len(chosen))) if not top else 0
    for rank, spot in enumerate(chosen):
        container, index = spots[spot]
        marker: dict[str, Any] = {"type": "ephemeral"}
        if rank < long_ones:
            marker["ttl"] = "1h"
        elif draw(st.booleans()):
            marker["ttl"] = "5m"
        marker = dict(draw(st.permutations(list(marker.items()))))
        container[index] = {**container[index], "cache_control": marker}


@st.composite
def envelope_only_turns(draw: st.DrawFn) -> dict[str, Any]:
    """A conversation whose earlier user turn is nothing but envelopes (a harness' slash command)."""
    envelope = draw(ENVELOPES)
    first: Any = envelope if draw(st.booleans()) else [_a_text(envelope)]
    return {
        "model": "claude-opus-5",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": "noted"},
            {
                "role": "user",
                "content": draw(WORDS.filter(lambda t: bool(t.strip()) and "Current time:" not in t)),
            },
        ],
    }


# -- OpenAI ---------------------------------------------------------------------------------------


def _o_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


O_PARTS = st.sampled_from(
    [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-abc123"}},
    ]
)


@st.composite
def _o_system(draw: st.DrawFn, big: bool) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer"]))
    text = (big_document(draw(WORDS)) if big else "") + draw(envelope_text())
    message: dict[str, Any] = {"role": role}
    if draw(st.booleans()):
        message["content"] = text
    else:
        message["content"] = [_o_text(text)] + [
            _o_text(draw(envelope_text())) for _ in range(draw(st.integers(0, 2)))
        ]
    if draw(st.booleans()):
        message["name"] = draw(st.sampled_from(["policy", "rules"]))
    return message


@st.composite
def openai_requests(
    draw: st.DrawFn, *, big_system: bool | None = None, markers: bool = True
) -> dict[str, Any]:
    """A valid ``chat.completions.create`` body (see module docstring)."""
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=4))
    tools = []
    for name in names:
        function: dict[str, Any] = {"name": name, "parameters": draw(_schema())}
        if draw(st.booleans()):
            function["description"] = draw(PLAIN)
        tools.append({"type": "function", "function": dict(draw(st.permutations(list(function.items()))))})
    model = draw(st.sampled_from(["gpt-4.1", "gpt-5.6", "gpt-5.6-mini"]))
    body: dict[str, Any] = {"model": model}
    if tools:
        body["tools"] = tools
    big = draw(st.integers(0, 5)) == 0 if big_system is None else big_system
    messages = [draw(_o_system(big and i == 0)) for i in range(draw(st.integers(1 if big else 0, 2)))]
    turns = draw(st.integers(1, 4))
    for turn in range(turns):
        text = draw(envelope_text(must_have_content=draw(st.integers(0, 5)) > 0))
        if not text.strip():
            text = draw(ENVELOPES)
        if draw(st.booleans()):
            messages.append({"role": "user", "content": text})
        else:
            parts = [*draw(st.lists(O_PARTS, max_size=2)), _o_text(text)]
            messages.append({"role": "user", "content": list(draw(st.permutations(parts)))})
        if turn == turns - 1 and draw(st.booleans()):
            break
        if names and draw(st.booleans()):
            calls = [
                {
                    "id": f"call_{turn}_{i}",
                    "type": "function",
                    "function": {"name": draw(st.sampled_from(names)), "arguments": '{"b": 1, "a": 2}'},
                }
                for i in range(draw(st.integers(1, 2)))
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for call in calls:
                content: Any = draw(PLAIN)
                if draw(st.booleans()):
                    content = [_o_text(draw(WORDS))]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            if turn == turns - 1:
                break
            messages.append({"role": "assistant", "content": draw(PLAIN.filter(lambda t: bool(t.strip())))})
        else:
            messages.append({"role": "assistant", "content": draw(PLAIN.filter(lambda t: bool(t.strip())))})
        if draw(st.integers(0, 6)) == 0:
            messages.append({"role": "system", "content": "Mid-conversation note. " + draw(PLAIN)})
    body["messages"] = messages
    if draw(st.booleans()):
        body["prompt_cache_key"] = "caller-key-" + draw(st.sampled_from(["a", "b"]))
    if draw(st.booleans()):
        body["temperature"] = draw(st.sampled_from([0, 0.5, 1]))
    if draw(st.integers(0, 3)) == 0:
        body["stream"] = True
        if draw(st.booleans()):
            body["stream_options"] = {"include_usage": draw(st.booleans())}
    if markers:
        _add_openai_markers(draw, body)
    return dict(draw(st.permutations(list(body.items()))))


def _add_openai_markers(draw: st.DrawFn, body: dict[str, Any]) -> None:
    """The caller's own ``prompt_cache_breakpoint`` on up to 3 markable parts (never assistant)."""
    spots: list[tuple[list[Any], int]] = []
    for message in body["messages"]:
        content = message.get("content")
        if message["role"] == "assistant" or not isinstance(content, list):
            continue
        for i, part in enumerate(content):
            if part["type"] == "text" and not part["text"].strip():
                continue
            if message["role"] in ("system", "developer", "tool") and part["type"] != "text":
                continue
            spots.append((content, i))
    if not spots:
        return
    for spot in sorted(draw(st.sets(st.integers(0, len(spots) - 1), max_size=3))):
        container, index = spots[spot]
        marker = {"mode": "explicit", **({"ttl": "30m"} if draw(st.booleans()) else {})}
        marker = dict(draw(st.permutations(list(marker.items()))))
        container[index] = {**container[index], "prompt_cache_breakpoint": marker}

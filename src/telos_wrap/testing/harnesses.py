"""A zoo of careless harnesses: named, seeded ways of rebuilding a recorded request every turn.

Each :class:`HarnessStyle` takes a recorded request (``create()`` kwargs of one API) and its turn
number and returns the request as that harness would send it, together with the exact strings it
put there that change from turn to turn (:attr:`HarnessRequest.volatile`): always whole lines (or
whole blocks of lines), never a value inside a line — what may move out of a prompt without being
cut apart (docs/sessions.md, *What telos moves*). The oracle bound of the cache-efficiency
benchmark removes the lines holding those strings (and nothing else) before it counts what could
have been read: content a harness changes every turn can never be cached; everything else can.

Styles are deterministic for a given ``seed`` (every random choice comes from
``random.Random(f"{seed}:{style}:{turn}")`` or, for per-message choices, from the message index),
and never modify their input. Each style is one habit seen in real harnesses, so a figure below the
bound points at one cause; ``kitchen-sink`` combines several.

Every style, what the harness does every turn, and what it declares volatile:

* ``tagged-envelope``: ``Current time:`` + ``<environment_info>`` prepended to the system prompt,
  tools and JSON keys reshuffled (``replay.traces.jitter``). Volatile: the clock line and the envelope.
* ``clock-first`` / ``clock-last``: an untagged clock line as the first / last line of the system
  prompt. Volatile: that line.
* ``clock-midline``: a date-time value inside the first line of the system prompt
  (``You are helpful. Date: 2026-11-23 10:02:17. Be brief.``). Volatile: that whole line.
* ``volatile-block``: Anthropic: a system block of its own first (``Today is …; clock …; n jobs
  running``); OpenAI: a leading system message of its own. Volatile: that text.
* ``system-reminder``: a ``<system-reminder>`` part appended to the newest user (or tool) message,
  string content turned into parts; on the next turn that message goes back to what it was.
  Volatile: the reminder.
* ``env-dump``: an ``Environment:`` dump first in the system prompt, stable lines mixed with 2-7
  live ones (a varying number of job lines). Volatile: the live lines.
* ``git-status``: a git status first in the system prompt whose counts change only on some turns
  (about one in four). Volatile: the line of the two counts (an oracle would have put it last from
  the start; telos can only learn it at its first change).
* ``shuffle``: tool order and every JSON object's key order reshuffled. Volatile: nothing.
* ``tool-result-shapes``: each text-only tool result sent as a string or as one text part, chosen
  once per message. Volatile: nothing.
* ``shape-flips``: every text-only tool result re-serialized as a string or as one text part,
  chosen anew every turn (the vendors render both alike; a cache keyed on bytes does not).
  Volatile: nothing.
* ``cleared-results``: every 8 turns the harness clears earlier tool results to save context: each
  tool result before the messages of the last 3 turns becomes ``[output elided]`` and stays so (a
  history rewrite at a new place every 8 turns, as context-hygiene passes do). Volatile: nothing;
  the bound counts only the prefix a request still shares with an earlier one.
* ``kitchen-sink``: ``clock-midline`` + ``env-dump`` + ``volatile-block`` + ``system-reminder`` +
  ``shuffle``. Volatile: the union.

The zoo lives in ``telos_wrap.testing`` and is
public: it is what a cache budget is checked against when no recording of a careless harness is at
hand — ``rewrite_session(trace, "clock-first")`` then ``testing.replay_requests`` (docs/testing.md)
— and the styles of the cache-efficiency benchmark (``BENCHMARKS.md``) and of the suite's zoo and
fidelity tests.

API shapes are adapters (:class:`Shape`): where the system text lives, how a leading block or
message is added, which message is the newest user turn, what a tool result is. The styles are
written against that interface only, so another API (e.g. the OpenAI Responses API, whose system
text is ``instructions`` and whose turns are ``input`` items) needs one more adapter in
:data:`SHAPES`, not new styles.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from telos_wrap.replay.traces import TraceRequest, envelope, jitter, shuffle_keys

__all__ = [
    "SHAPES",
    "STYLES",
    "HarnessRequest",
    "HarnessStyle",
    "Shape",
    "apply_style",
    "rewrite_session",
    "style_names",
]


@dataclass(frozen=True, slots=True)
class HarnessRequest:
    """A request as a harness sends it, and the strings it changes from turn to turn."""

    kwargs: dict[str, Any]
    volatile: tuple[str, ...] = ()


# -- API shapes -------------------------------------------------------------------------------------


class Shape(Protocol):
    """Where a style finds the parts of a request of one API (edits ``request`` in place)."""

    api: str

    def edit_system_text(self, request: dict[str, Any], edit: Callable[[str], str]) -> None:
        """Apply ``edit`` to the main system text (created empty if there is none)."""

    def add_leading_system(self, request: dict[str, Any], text: str) -> None:
        """Put ``text`` first, as a system block (or system message) of its own."""

    def newest_user_message(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The newest message a user or tool turn is in (its ``content`` may be rewritten)."""

    def tool_results(self, request: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(message index, holder)`` of every tool result; ``holder["content"]`` is its content."""


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _edit_first_text(blocks: list[Any], edit: Callable[[str], str]) -> bool:
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            blocks[i] = {**block, "text": edit(block["text"])}
            return True
    return False


class AnthropicShape:
    """Anthropic ``messages.create``: ``system`` (string or text blocks), ``tool_result`` blocks."""

    api = "anthropic"

    def edit_system_text(self, request: dict[str, Any], edit: Callable[[str], str]) -> None:
        system = request.get("system")
        if isinstance(system, str):
            request["system"] = edit(system)
        elif isinstance(system, list) and _edit_first_text(system, edit):
            return
        elif isinstance(system, list):
            system.insert(0, _text_part(edit("")))
        else:
            request["system"] = edit("")

    def add_leading_system(self, request: dict[str, Any], text: str) -> None:
        system = request.get("system")
        if isinstance(system, str):
            request["system"] = [_text_part(text), _text_part(system)]
        elif isinstance(system, list):
            system.insert(0, _text_part(text))
        else:
            request["system"] = [_text_part(text)]

    def newest_user_message(self, request: dict[str, Any]) -> dict[str, Any] | None:
        for message in reversed(request.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "user":
                return message
        return None

    def tool_results(self, request: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, message in enumerate(request.get("messages") or []):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        yield index, block


class ChatShape:
    """OpenAI Chat Completions: leading ``system``/``developer`` messages, ``tool`` messages."""

    api = "openai"

    def edit_system_text(self, request: dict[str, Any], edit: Callable[[str], str]) -> None:
        messages = request.setdefault("messages", [])
        first = messages[0] if messages else None
        if isinstance(first, dict) and first.get("role") in ("system", "developer"):
            content = first.get("content")
            if isinstance(content, str):
                messages[0] = {**first, "content": edit(content)}
                return
            if isinstance(content, list):
                parts = list(content)
                if _edit_first_text(parts, edit):
                    messages[0] = {**first, "content": parts}
                    return
        messages.insert(0, {"role": "system", "content": edit("")})

    def add_leading_system(self, request: dict[str, Any], text: str) -> None:
        request.setdefault("messages", []).insert(0, {"role": "system", "content": text})

    def newest_user_message(self, request: dict[str, Any]) -> dict[str, Any] | None:
        for message in reversed(request.get("messages") or []):
            if isinstance(message, dict) and message.get("role") in ("user", "tool"):
                return message
        return None

    def tool_results(self, request: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, message in enumerate(request.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "tool":
                yield index, message


#: One adapter per API a trace line may name (``TraceRequest.api``).
SHAPES: dict[str, Shape] = {"anthropic": AnthropicShape(), "openai": ChatShape()}


def _shape(api: str) -> Shape:
    try:
        return SHAPES[api]
    except KeyError:
        raise ValueError(
            f"no harness shape for api {api!r}; known: {', '.join(SHAPES)} (add a Shape to SHAPES)"
        ) from None


# -- the habits -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Turn:
    """What one habit sees: the request being rebuilt, the turn, a seeded rng, the shape."""

    request: dict[str, Any]
    turn: int
    seed: int
    rng: random.Random
    shape: Shape
    volatile: list[str] = field(default_factory=list)


def _now(turn: int, rng: random.Random) -> datetime:
    """A wall clock 40-55 s further on every turn, with a random sub-second part."""
    return datetime(2026, 11, 23, 10, 2, tzinfo=timezone.utc) + timedelta(
        seconds=47 * turn + rng.randrange(9), microseconds=rng.randrange(10**6)
    )


def _prepend_line(line: str) -> Callable[[str], str]:
    return lambda text: f"{line}\n{text}" if text else line


def _append_line(line: str) -> Callable[[str], str]:
    return lambda text: f"{text}\n{line}" if text else line


def _clock_first(t: _Turn) -> None:
    line = f"It is {_now(t.turn, t.rng):%A, %d %B %Y, %H:%M:%S.%f} UTC."
    t.volatile.append(line)
    t.shape.edit_system_text(t.request, _prepend_line(line))


def _clock_last(t: _Turn) -> None:
    line = f"(sent {_now(t.turn, t.rng):%Y-%m-%d %H:%M:%S.%f})"
    t.volatile.append(line)
    t.shape.edit_system_text(t.request, _append_line(line))


def _clock_midline(t: _Turn) -> None:
    value = f"{_now(t.turn, t.rng):%Y-%m-%d %H:%M:%S}"

    def edit(text: str) -> str:
        first, newline, rest = text.partition("\n")
        cut = first.find(". ")
        cut = cut + 1 if cut >= 0 else len(first) // 2
        line = f"Date: {value}." if not first.strip() else f"{first[:cut]} Date: {value}.{first[cut:]}"
        t.volatile.append(line)  # the whole line: what may move without being cut apart
        return f"{line}{newline}{rest}"

    t.shape.edit_system_text(t.request, edit)


def _volatile_block(t: _Turn) -> None:
    now = _now(t.turn, t.rng)
    text = f"Today is {now:%A %d %B %Y}; clock {now:%H:%M:%S.%f}; {t.rng.randrange(0, 12)} jobs running"
    t.volatile.append(text)
    t.shape.add_leading_system(t.request, text)


def _system_reminder(t: _Turn) -> None:
    message = t.shape.newest_user_message(t.request)
    if message is None:
        return
    now = _now(t.turn, t.rng)
    reminder = (
        "<system-reminder>\n"
        f"It is {now:%H:%M:%S}. {t.rng.randrange(1, 9)} todo items are open; "
        f"{t.rng.randrange(10_000, 90_000)} tokens used so far.\n"
        "</system-reminder>"
    )
    t.volatile.append(reminder)
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = (
            [_text_part(content), _text_part(reminder)] if content else [_text_part(reminder)]
        )
    elif isinstance(content, list):
        message["content"] = [*content, _text_part(reminder)]
    else:
        message["content"] = [_text_part(reminder)]


def _env_dump(t: _Turn) -> None:
    stable = ["Environment:", "HOME=/home/agent", "SHELL=/bin/bash", "LANG=C.UTF-8"]
    changing = [f"PWD=/tmp/run-{t.rng.randrange(16**6):06x}", f"UPTIME={40 * t.turn + t.rng.randrange(40)}s"]
    changing += [
        f"JOB_{k}=running (pid {t.rng.randrange(1000, 99999)})" for k in range(t.rng.randrange(0, 6))
    ]
    lines = stable[:2] + changing[:1] + stable[2:] + changing[1:]
    t.volatile.extend(changing)
    t.shape.edit_system_text(t.request, _prepend_line("\n".join(lines)))


def _git_status(t: _Turn) -> None:
    """Counts that keep their value until a seeded random turn changes them (every ~4 turns)."""
    changes = [turn for turn in range(1, t.turn + 1) if random.Random(f"{t.seed}:git:{turn}").random() < 0.25]
    epoch = len(changes)
    counts = random.Random(f"{t.seed}:git-epoch:{epoch}")
    modified = f"{counts.randrange(0, 12)} modified"
    untracked = f"{counts.randrange(0, 5)} untracked"
    t.volatile.append(f"  {modified}, {untracked}")
    block = f"git status:\n  branch: main\n  {modified}, {untracked}"
    t.shape.edit_system_text(t.request, _prepend_line(block))


def _shuffle(t: _Turn) -> None:
    tools = t.request.get("tools")
    if isinstance(tools, list):
        t.rng.shuffle(tools)
    shuffled = shuffle_keys(t.request, t.rng)
    t.request.clear()
    t.request.update(shuffled)


def _as_other_shape(content: Any, want_string: bool) -> Any:
    """Text-only content as a string or as one text part; anything else unchanged."""
    if isinstance(content, str):
        return content if want_string else [_text_part(content)]
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and set(content[0]) == {"type", "text"}
        and isinstance(content[0]["text"], str)
    ):
        return content[0]["text"] if want_string else content
    return content


def _tool_result_shapes(t: _Turn) -> None:
    for index, holder in t.shape.tool_results(t.request):
        want_string = random.Random(f"{t.seed}:shape:{index}").random() < 0.5
        holder["content"] = _as_other_shape(holder.get("content"), want_string)


def _shape_flips(t: _Turn) -> None:
    for _, holder in t.shape.tool_results(t.request):
        holder["content"] = _as_other_shape(holder.get("content"), t.rng.random() < 0.5)


#: ``cleared-results``: how often the harness clears tool results, and how many recent turns it keeps.
_ELIDE_EVERY, _ELIDE_KEEP_TURNS = 8, 3
ELIDED = "[output elided]"


def _cleared_results(t: _Turn) -> None:
    # Stateless per request: the last clearing happened at turn ``t.turn - t.turn % 8``; it cleared
    # what came before that turn's last 3 turns (two messages a turn in the traces' agents).
    cleared_at = t.turn - t.turn % _ELIDE_EVERY
    if cleared_at == 0:
        return
    cutoff = 2 * (cleared_at - _ELIDE_KEEP_TURNS)
    for index, holder in t.shape.tool_results(t.request):
        if index < cutoff:
            holder["content"] = ELIDED


Habit = Callable[[_Turn], None]


@dataclass(frozen=True, slots=True)
class HarnessStyle:
    """One named careless harness: habits applied in order to a copy of each request."""

    name: str
    description: str
    habits: tuple[Habit, ...]

    def apply(self, api: str, kwargs: Mapping[str, Any], turn: int, seed: int = 0) -> HarnessRequest:
        """The request as this harness sends it on ``turn`` (``kwargs`` is not modified)."""
        shape = _shape(api)
        t = _Turn(copy.deepcopy(dict(kwargs)), turn, seed, random.Random(f"{seed}:{self.name}:{turn}"), shape)
        for habit in self.habits:
            habit(t)
        return HarnessRequest(t.request, tuple(t.volatile))


class _TaggedEnvelope(HarnessStyle):
    """``replay.traces.jitter`` itself, with the envelope it inserts declared volatile."""

    def apply(self, api: str, kwargs: Mapping[str, Any], turn: int, seed: int = 0) -> HarnessRequest:
        _shape(api)
        clock, env = envelope(turn, random.Random(f"{seed}:{turn}"))  # the values jitter() draws first
        return HarnessRequest(jitter(api, dict(kwargs), turn, seed=seed), (clock, env))


def _styles() -> dict[str, HarnessStyle]:
    found: list[HarnessStyle] = [
        _TaggedEnvelope(
            "tagged-envelope",
            "live clock + <environment_info> prepended to the system prompt, tools and keys reshuffled",
            (),
        ),
        HarnessStyle("clock-first", "an untagged clock line first in the system prompt", (_clock_first,)),
        HarnessStyle("clock-last", "an untagged clock line last in the system prompt", (_clock_last,)),
        HarnessStyle(
            "clock-midline", "a date-time inside the first line of the system prompt", (_clock_midline,)
        ),
        HarnessStyle(
            "volatile-block",
            "a system block (Anthropic) / leading system message (OpenAI) of its own with live values",
            (_volatile_block,),
        ),
        HarnessStyle(
            "system-reminder",
            "a <system-reminder> part on the newest user/tool message, string content turned into parts",
            (_system_reminder,),
        ),
        HarnessStyle("env-dump", "an environment dump with a varying number of live lines", (_env_dump,)),
        HarnessStyle("git-status", "git status counts that change only on some turns", (_git_status,)),
        HarnessStyle("shuffle", "tool order and JSON key order reshuffled every turn", (_shuffle,)),
        HarnessStyle(
            "tool-result-shapes",
            "each tool result a string or one text part, chosen once per message",
            (_tool_result_shapes,),
        ),
        HarnessStyle(
            "shape-flips",
            "text-only tool results re-serialized as a string or one text part, anew every turn",
            (_shape_flips,),
        ),
        HarnessStyle(
            "cleared-results",
            "earlier tool results cleared every 8 turns to save context (history rewritten there)",
            (_cleared_results,),
        ),
        HarnessStyle(
            "kitchen-sink",
            "volatile-block + clock-midline + env-dump + system-reminder + shuffle",
            (_clock_midline, _env_dump, _volatile_block, _system_reminder, _shuffle),
        ),
    ]
    return {style.name: style for style in found}


#: Every style by name, in the order the benchmark reports them.
STYLES: dict[str, HarnessStyle] = _styles()


def style_names() -> list[str]:
    """Names of the styles in :data:`STYLES`."""
    return list(STYLES)


def apply_style(style: str, api: str, kwargs: Mapping[str, Any], turn: int, seed: int = 0) -> HarnessRequest:
    """``STYLES[style].apply(...)`` with a clear error for an unknown name."""
    try:
        chosen = STYLES[style]
    except KeyError:
        raise ValueError(f"unknown harness style {style!r}; known: {', '.join(STYLES)}") from None
    return chosen.apply(api, kwargs, turn, seed)


def rewrite_session(
    requests: Sequence[TraceRequest], style: str, seed: int = 0
) -> tuple[list[TraceRequest], list[tuple[str, ...]]]:
    """A session as ``style`` sends it: the rewritten requests and each one's volatile strings."""
    rewritten: list[TraceRequest] = []
    volatile: list[tuple[str, ...]] = []
    for request in requests:
        sent = apply_style(style, request.api, request.kwargs, request.turn, seed)
        rewritten.append(replace(request, kwargs=sent.kwargs))
        volatile.append(sent.volatile)
    return rewritten, volatile

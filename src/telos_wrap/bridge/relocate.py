"""Bridge pass: keep DROP out of the cached prefix (I1, I3) and make history turn-invariant.

* Every message before the latest turn (the last user or tool message) is history: its PIN blocks
  become FOLD and its DROP envelope is pruned (or, with ``keep_past_drop``, kept as FOLD history).
* DROP content found in the system prompt (a clock line, an environment block) moves to the tail
  of the latest turn (in an OpenAI tool loop, the last ``tool`` message), so the system prompt's
  bytes stop changing every turn.
* In each message the DROP blocks go last; PIN and FOLD blocks keep the caller's order (what the
  model reads in order: material first, question last). The move uses the bands the message had
  when it was the latest turn, so its bytes are the same on every later turn (I2).

Every prune, move and reorder is recorded as a ``Transformation``.
"""

from __future__ import annotations

from dataclasses import replace

from telos_wrap.ir.model import Band, ContentForm, TelosBlock, TelosIR, TelosMessage, Transformation
from telos_wrap.ir.order import drop_last, latest_turn_index

__all__ = ["relocate_drop"]


def _chars(block: TelosBlock) -> int:
    payload = block.payload
    text = payload.get("text") if isinstance(payload, dict) else None
    return len(text) if isinstance(text, str) else 0


def _moved(block: TelosBlock, where: str) -> TelosBlock:
    return replace(block, id=f"{block.id}->{where}", extra={**block.extra, "moved_from": block.id})


def relocate_drop(ir: TelosIR, *, keep_past_drop: bool = False, envelope_in_turn: bool = False) -> TelosIR:
    """Apply the DROP policy described in the module docstring.

    ``envelope_in_turn``: the route hoists every system message into the system prompt (a Chat
    Completions route to Claude), so the envelope never goes into a system message: it joins the
    latest user turn as its last part, or, after a ``tool`` message (whose parts the route puts inside
    one ``tool_result`` block, marker and all), follows it as a user message of its own, which the
    route merges into the same Anthropic user turn after the tool results. With no turn at all it
    goes into a trailing system message as elsewhere: hoisted, it ends the system prompt, after every
    block a marker covers.
    """
    latest = latest_turn_index(ir.messages)
    records = list(ir.records)
    # Settled history from an earlier turn is final as it is.
    messages: list[TelosMessage] = list(ir.messages[: ir.settled])
    for index in range(ir.settled, len(ir.messages)):
        message = ir.messages[index]
        blocks = drop_last(message.blocks)
        changed = blocks is not message.blocks and blocks != message.blocks
        if changed:
            records.append(
                Transformation(
                    kind="reordered",
                    where=f"messages[{index}]",
                    detail="the message's per-turn envelope (DROP) moved after its other blocks, which "
                    "keep the caller's order",
                )
            )
        if latest is not None and index < latest:
            kept: list[TelosBlock] = []
            pruned: list[TelosBlock] = []
            for block in blocks:
                if block.band is Band.DROP and not keep_past_drop:
                    pruned.append(block)
                elif block.band is Band.FOLD:
                    kept.append(block)
                else:
                    kept.append(block.with_band(Band.FOLD))
                    changed = True
            if pruned and not kept:
                # A turn that was nothing but envelopes (a slash command, a reminder): pruning it
                # would leave an empty message, which both APIs reject. It stays, as history.
                kept = [block.with_band(Band.FOLD) for block in pruned]
                pruned = []
                changed = True
            for block in pruned:
                records.append(
                    Transformation(
                        kind="drop-pruned",
                        where=block.id,
                        chars=_chars(block),
                        detail="envelope of a past turn pruned; the model saw it on its own turn",
                    )
                )
                changed = True
            blocks = tuple(kept)
        messages.append(message.with_blocks(blocks) if changed else message)

    system = ir.system
    moved = tuple(block for block in system if block.band is Band.DROP)
    # OpenAI Responses: the envelope always gets a message item of its own at the end of ``input``
    # (a tool output item has no content parts to extend, and a user message left as the caller
    # sent it keeps its wire form — string or parts — when it becomes history next turn: I2). That
    # also holds when ``input`` has no turn at all (only the model's items, or nothing).
    item_turn = ir.api == "openai_responses"
    # Chat Completions with no user or tool turn at all (only system and assistant messages, as a
    # LangGraph agent's first step can be): the envelope goes last in a system message of its own too.
    no_turn = ir.api == "openai_chat" and latest is None
    if moved and (latest is not None or item_turn or no_turn):
        system = tuple(block for block in system if block.band is not Band.DROP)
        trailing = latest is not None and latest < len(messages) - 1
        # Chat Completions: a latest turn whose content is a string keeps it (docs/engines.md, *Wire
        # shapes*): turned into parts for this turn only, the next turn would send it as a string again.
        string_turn = (
            ir.api == "openai_chat" and latest is not None and messages[latest].content_form == "string"
        )
        if envelope_in_turn:
            trailing = string_turn = False
        if envelope_in_turn and latest is not None and messages[latest].role == "tool":
            where = f"messages[{len(messages)}]"
            relocated = tuple(_moved(block, where) for block in moved)
            messages.append(TelosMessage(role="user", blocks=relocated, content_form="list"))
            how = (
                "appended as a user message after the latest tool results (the route hoists system messages)"
            )
        elif ir.api in ("openai_chat", "openai_responses") and (
            trailing or item_turn or string_turn or no_turn
        ):
            # The envelope goes last, in a system message of its own (OpenAI takes system messages
            # anywhere), so it never sits in front of bytes the next request repeats.
            where = f"messages[{len(messages)}]"
            relocated = tuple(_moved(block, where) for block in moved)
            form: ContentForm = "string" if len(relocated) == 1 else "list"
            messages.append(TelosMessage(role="system", blocks=relocated, content_form=form))
            after = (
                "the assistant messages that follow the latest turn"
                if trailing
                else "the last message (the request has no user or tool turn)"
                if no_turn
                else "the latest turn"
                if item_turn
                else "the latest turn (its content is a string)"
            )
            how = f"appended as a trailing system message after {after}"
        else:
            assert latest is not None  # relocating without a turn is always to a trailing message
            where = f"messages[{latest}]"
            relocated = tuple(_moved(block, where) for block in moved)
            target = messages[latest]
            content_form = "list" if target.content_form == "string" else target.content_form
            messages[latest] = replace(target, blocks=target.blocks + relocated, content_form=content_form)
            how = f"moved to the end of the latest turn ({where})"
        for block in moved:
            records.append(
                Transformation(
                    kind="drop-moved",
                    where=block.id,
                    chars=_chars(block),
                    detail=f"volatile system text {how}, so the system prompt stays byte-identical "
                    "across turns",
                )
            )
    return replace(ir, system=system, messages=tuple(messages), records=tuple(records))

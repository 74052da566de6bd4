"""Applying the session's pins and folds to a lifted IR (pure).

* **pins** (``session.pin(slug, text)``) are registered in the request's ref-pool (``register_or_skip``:
  a slug is frozen) and rendered with the other entries after the system PIN blocks;
* **slug folds** swap a ref-pool entry's content for its summary — the slug and every ``[ref:slug]``
  byte stay, so the prefix up to the entry survives;
* **range folds** replace application messages ``start..end-1`` with one user message holding the
  summary, but only while those messages are still the ones the fold was recorded for.

Each application is recorded as a ``Transformation`` so ``session.explain`` can say what the model saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from telos_wrap.errors import TelosError
from telos_wrap.ir.model import Band, BlockKind, TelosBlock, TelosIR, TelosMessage, Transformation
from telos_wrap.ir.refpool import SLUG_PATTERN, RefPool, entry_payload_text, make_entry
from telos_wrap.sessions.durable.records import RangeFold, SlugFold
from telos_wrap.sessions.durable.state import AppPrint, short_hash

__all__ = [
    "FoldError",
    "apply_pins_and_slug_folds",
    "apply_range_folds",
    "range_digest",
    "summary_text",
    "validate_range",
    "validate_slug",
]

#: Slugs the lift assigns itself (``system-doc-{i}``); ``pin`` refuses them.
RESERVED_SLUG_PREFIX = "system-doc-"


class FoldError(TelosError, ValueError):
    """A ``pin`` / ``fold`` request the session cannot honour (the message says why and what would work)."""


def summary_text(fold: RangeFold) -> str:
    """What the model sees in place of the folded messages."""
    return (
        f'<conversation-summary messages="{fold.start}-{fold.end - 1}">\n'
        f"{fold.summary}\n</conversation-summary>"
    )


def range_digest(hashes: Sequence[str]) -> str:
    """Hash of a run of message hashes."""
    return short_hash("".join(hashes).encode("ascii"))


def validate_slug(slug: str) -> None:
    """Raise ``FoldError`` for a slug ``pin`` may not register."""
    if not SLUG_PATTERN.match(slug):
        raise FoldError(f"invalid ref-pool slug {slug!r}: use letters, digits and _ - . / only")
    if slug.startswith(RESERVED_SLUG_PREFIX):
        raise FoldError(f"slug {slug!r} is reserved for system text the lift moves to the ref-pool")


def validate_range(app: AppPrint | None, start: int, end: int, existing: Sequence[RangeFold]) -> str:
    """Check ``message_range=(start, end)`` against the last request; returns the range's digest.

    The range must be history (end at or before the latest user message), start at a user message
    that is not a tool-result continuation, be followed by such a user message (so no tool_use /
    tool_result pair is cut), and not overlap an earlier range fold.
    """
    if app is None:
        raise FoldError("fold(message_range=...) needs a request of this session first")
    kinds = app.kinds
    if not 0 <= start < end < len(kinds):
        raise FoldError(
            f"message_range ({start}, {end}) must satisfy 0 <= start < end < {len(kinds)} "
            "(the last request's message count): the latest turn cannot be folded"
        )
    if kinds[start] != "u":
        raise FoldError(f"message_range must start at a user message without tool results (got {start})")
    if kinds[end] != "u":
        raise FoldError(
            f"message_range must end right before a user message without tool results (message {end} "
            "is not one), so no tool_use / tool_result pair is cut"
        )
    for fold in existing:
        if start < fold.end and fold.start < end:
            raise FoldError(f"message_range ({start}, {end}) overlaps the fold of ({fold.start}, {fold.end})")
    return range_digest(app.message_hashes()[start:end])


def _text_chars(message: TelosMessage) -> int:
    total = 0
    for block in message.blocks:
        payload = block.payload
        if isinstance(payload, Mapping) and isinstance(payload.get("text"), str):
            total += len(payload["text"])
    return total


def apply_range_folds(
    ir: TelosIR, folds: Sequence[RangeFold], hashes: Sequence[str]
) -> tuple[TelosIR, list[Transformation]]:
    """Replace each still-valid folded range of ``ir.messages`` (application indices) by its summary."""
    if not folds:
        return ir, []
    messages = list(ir.messages)
    records: list[Transformation] = []
    for fold in sorted(folds, key=lambda f: f.start, reverse=True):
        if fold.end >= len(messages) or range_digest(hashes[fold.start : fold.end]) != fold.digest:
            records.append(
                Transformation(
                    kind="fold-not-applied",
                    where=f"messages[{fold.start}:{fold.end}]",
                    detail="the application changed or removed these messages since the fold was "
                    "recorded, so its summary no longer describes them; sent as the application sent them",
                )
            )
            continue
        chars = sum(_text_chars(m) for m in messages[fold.start : fold.end])
        summary = TelosMessage(
            role="user",
            blocks=(
                TelosBlock(
                    id=f"summary[{fold.start}:{fold.end}]",
                    band=Band.FOLD,
                    kind=BlockKind.TEXT,
                    payload={"type": "text", "text": summary_text(fold)},
                    source_tag="session:fold",
                ),
            ),
            content_form="list",
        )
        messages[fold.start : fold.end] = [summary]
        records.append(
            Transformation(
                kind="summary",
                where=f"messages[{fold.start}:{fold.end}]",
                chars=chars,
                detail=f"messages {fold.start}..{fold.end - 1} replaced by the summary recorded with "
                f"session.fold(message_range=...) before request {fold.at}",
            )
        )
    return replace(ir, messages=tuple(messages)), records


def apply_pins_and_slug_folds(
    ir: TelosIR, pins: Mapping[str, str], folds: Sequence[SlugFold]
) -> tuple[TelosIR, list[Transformation]]:
    """Register pinned documents and apply slug folds to ``ir``'s ref-pool."""
    if not pins and not folds:
        return ir, []
    pool = RefPool(ir.ref_pool.values())
    records: list[Transformation] = []
    for slug in sorted(pins):
        if pool.register_or_skip(make_entry(slug, pins[slug], source="session:pin")):
            records.append(
                Transformation(
                    kind="pinned",
                    where=f"ref:{slug}",
                    chars=len(pins[slug]),
                    detail="document registered with session.pin(); rendered in the ref-pool after the "
                    "system PIN blocks",
                )
            )
    for fold in folds:
        entry = pool.get(fold.slug)
        if entry is None:
            records.append(
                Transformation(
                    kind="fold-not-applied",
                    where=f"ref:{fold.slug}",
                    detail="this request has no ref-pool entry with that slug",
                )
            )
            continue
        original = len(entry_payload_text(entry))
        pool.fold(fold.slug, fold.summary)
        records.append(
            Transformation(
                kind="fold",
                where=f"ref:{fold.slug}",
                chars=original,
                detail="ref-pool entry content replaced by the summary recorded with session.fold(slugs=...) "
                f"before request {fold.at}; its [ref:{fold.slug}] bytes are unchanged",
            )
        )
    return replace(ir, ref_pool=pool.snapshot()), records

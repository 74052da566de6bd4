"""Whether a request body is plain JSON where telos reads it: dicts, lists, str, int, float, bool, None.

The SDKs accept much more than plain JSON as params: their own response models passed back
(``response.content``, ``completion.choices[0].message``, ``response.output``), ``str`` Enums, tuples,
iterators, ``Mapping``s, ``Omit`` / ``NotGiven`` in nested fields. Each SDK turns those into JSON with
its own serializer when it sends the request. The lift reads plain JSON only: a value of another type
would be read wrong (a ``str`` Enum's ``str()`` is ``"MessageRole.SYSTEM"``, its JSON ``"system"``) or
not at all. :func:`require_plain` finds the first such value, so the patch layer reads the body as the
SDK serializes it instead (``patch/sdk_json.py``) and prepares that.

Exact types, not ``isinstance``: a subclass of ``str`` or ``dict`` may serialize differently from what
its methods return. Messages a session's history memo already holds are skipped (``skip``): the memo
compares each with its plain copy by ``==`` before reusing it, and a value equal to a plain one (an
equal ``str`` Enum, a ``dict`` subclass) serializes as that plain value. So a turn checks what is new
to it, not the whole conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

from telos_wrap.errors import NotPlainJSON

__all__ = ["require_plain"]

_SCALARS = frozenset({str, int, float, bool, type(None)})


def require_plain(body: Mapping[str, Any], *, skip: range = range(0)) -> None:
    """Raise ``NotPlainJSON`` at the first value of ``body`` that is not plain JSON.

    ``skip``: the indexes of ``messages`` known to be plain (a session's settled history).
    """
    for key, value in body.items():
        kind = type(value)
        if kind in _SCALARS:
            continue
        if key == "messages" and kind is list:
            for index in chain(range(min(skip.start, len(value))), range(max(skip.stop, 0), len(value))):
                _walk(value[index], f"messages[{index}]")
            continue
        _walk(value, key)


def _walk(value: Any, path: str) -> None:
    """Depth-first over containers; leaves are checked by exact type. The path is built only when
    something is found (the common case pays for one tuple per container)."""
    pending: list[tuple[Any, Any]] = [(value, None)]
    pop, push = pending.pop, pending.append
    while pending:
        item, where = pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(inner) not in _SCALARS:
                    push((inner, (where, key)))
        elif kind is list:
            for index, inner in enumerate(item):
                if type(inner) not in _SCALARS:
                    push((inner, (where, index)))
        elif kind not in _SCALARS:
            raise NotPlainJSON(_render(path, where), kind.__name__)


def _render(path: str, where: Any) -> str:
    steps: list[Any] = []
    while where is not None:
        where, step = where
        steps.append(step)
    rendered = path
    for step in reversed(steps):
        rendered += f"[{step}]" if isinstance(step, int) else f".{step}"
    return rendered

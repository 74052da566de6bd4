"""Read a request body the way the SDK serializes it: the SDK's own serializer, read back as plain JSON.

The request layer sees ``options.json_data`` before the SDK serializes it, and the SDKs accept far
more than plain JSON as params (``lift/plain.py``). Rather than a serializer of telos' own, a body
that is not plain JSON is turned into the JSON the SDK itself would send, by the SDK's own code, and
that plain body is what telos prepares — and what goes out, rewritten or not:

* anthropic >= 1 (its ``prepare_request_data`` helper: drops nested ``Omit`` / ``NotGiven``, lists
  iterators and tuples, dumps pydantic models, reads file inputs) then its JSON encoder
  (``openapi_dumps``, which writes a ``str`` Enum as its value) — both private, reached through
  ``private_api.sdk_helper``;
* anthropic 0.x and openai >= 3 without ``prepare_request_data``: ``openapi_dumps`` (pydantic models
  dumped with ``exclude_unset``, ``by_alias``, as JSON);
* openai 2.x: the HTTP library's ``json=`` encoding (the standard encoder, compact, no NaN), after the
  SDK's own ``maybe_transform`` already ran in the resource method.

File inputs (a ``pathlib.Path`` as a base64 source's ``data``, anthropic >= 1) are found first
(``with_file_inputs``) and read the way the SDK reads them, before the body is serialized: inline for
a sync client (``read_files``, its ``prepare_request_data``), in a worker thread for an async one
(``aread_files``, its ``async_prepare_request_data``), never on the event loop's thread.

The text is read back with the standard decoder. Read back, every value is what the SDK would have
sent, so sending the plain body gives the SDK's own bytes below the cacheable minimum, and the SDK
never has to read a one-shot value (a file object, an iterator) a second time. A value the SDK's
serializer rejects raises here: the caller falls back and the SDK raises its own error on sending.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from telos_wrap.ir.canon import compact_json_encoder
from telos_wrap.private_api import sdk_helper

__all__ = ["aread_files", "read_files", "sdk_plain", "with_file_inputs"]

#: The HTTP library's ``json=`` encoding (httpx >= 0.28: compact, UTF-8 kept, no NaN).
_HTTP_JSON = compact_json_encoder(sort_keys=False, allow_nan=False)


def _serializer(sdk: str) -> Callable[[Any], str | bytes]:
    """The SDK's own body serializer (module docstring), as a function of the body."""
    prepare = sdk_helper(sdk, "prepare_request_data")
    dumps = sdk_helper(sdk, "openapi_dumps")
    if callable(prepare) and callable(dumps):
        return lambda body: dumps(prepare(body, location="body"))
    if callable(dumps):
        return dumps  # type: ignore[no-any-return]
    return _HTTP_JSON


_serializers: dict[str, Callable[[Any], str | bytes]] = {}


def sdk_plain(sdk: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as the SDK ``sdk`` sends it, read back as plain JSON (a new dict; ``body`` untouched).

    Raises what the SDK's serializer raises (``TypeError`` for a value it cannot serialize,
    ``ValueError`` for a NaN or a cycle).
    """
    serialize = _serializers.get(sdk)
    if serialize is None:
        serialize = _serializers[sdk] = _serializer(sdk)
    plain = json.loads(serialize(dict(body)))
    if not isinstance(plain, dict):  # pragma: no cover - a mapping serializes as an object
        raise TypeError(f"the {sdk} SDK serialized the body as {type(plain).__name__}")
    return plain


def with_file_inputs(sdk: str, body: Mapping[str, Any]) -> tuple[Any, bool]:
    """``body`` copied as the SDK copies it before reading its file inputs (iterators and
    generators listed, once: the copy is what must be serialized from then on), and whether that
    would read a file input (anthropic >= 1 reads a path or file object found where a base64
    source's data goes; no other SDK reads files in a JSON body, and its body is returned as is)."""
    copy_tree = sdk_helper(sdk, "copy_tree")
    if not callable(copy_tree):
        return body, False
    root, slots = copy_tree(dict(body), location="body", keep_top_level_omit=False)
    return root[0], bool(slots)


def read_files(sdk: str, body: Mapping[str, Any]) -> Any:
    """``body`` (``with_file_inputs``' copy) with its file inputs read as the SDK reads them for a
    sync client (inline: its ``prepare_request_data``); the rest as the SDK prepares it."""
    prepare = sdk_helper(sdk, "prepare_request_data")
    return prepare(dict(body), location="body")


async def aread_files(sdk: str, body: Mapping[str, Any]) -> Any:
    """``read_files`` for an async client: the files read as the SDK reads them there (in a worker
    thread: its ``async_prepare_request_data``)."""
    prepare = sdk_helper(sdk, "async_prepare_request_data")
    return await prepare(dict(body), location="body")

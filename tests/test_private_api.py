"""Other libraries' private names appear in ``telos_wrap/private_api.py`` only.

The SDKs, OpenTelemetry, asyncio and wrapt change their private names without notice;
keeping every use in one module is what lets the next upgrade be checked by reading one file. This
test reads every other source file of the package (code, comments and docstrings alike) for the
private names telos uses and for any private module of those libraries. (DSPy's lm15 client is a
private, vendored module as a whole: ``patch/lm15.py`` is its adapter.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import telos_wrap
from telos_wrap import private_api

PACKAGE = Path(telos_wrap.__file__).resolve().parent
HOME = Path(private_api.__file__).resolve()

#: The private attributes and module names telos reads or sets (``private_api``'s entries), and a
#: private module of any of those libraries (``anthropic._x``, ``f"{sdk}._x"``, ``metrics._internal``).
FOREIGN = re.compile(
    r"""
      (?<![.\w])(?:anthropic|openai|opentelemetry(?:\.\w+)*|asyncio|wrapt|httpx2?)\._[a-z]\w*
    | \{(?:sdk|name)\}\._[a-z]
    | \b_utils\._[a-z]
    | \b_(?:iterator|custom_headers|raw_stream|parsed_by_type|self_parent|get_running_loop)\b
    | \b_(?:TRACER|METER)_PROVIDER\b
    | ["']_(?:stream|inner|utils|types|base_client|response|legacy_response|prepare|json)["']
    """,
    re.VERBOSE,
)


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.resolve() != HOME)


def test_private_names_live_in_one_module() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FOREIGN.search(line)
    ]
    assert not found, "private names of other libraries outside private_api.py:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        'base_client = importlib.import_module(f"{name}._base_client")',
        "original = stream._iterator",
        'defaults = getattr(client, "_custom_headers", None)',
        "if asyncio._get_running_loop() is None:",
        '"meter": ("opentelemetry.metrics._internal", "_METER_PROVIDER", "X")',
        'Target("anthropic", "anthropic._response", "APIResponse.parse", "parse")',
        'inner = getattr(instance, "_inner", None)',
    ],
)
def test_the_check_finds_what_private_api_replaced(line: str) -> None:
    """Each kind of use this room took in would be caught if it came back elsewhere."""
    assert FOREIGN.search(line)


def test_private_api_still_reaches_each_name() -> None:
    """The SDKs installed here still have what ``private_api`` reads (a renamed one fails here)."""
    import anthropic
    import openai

    for sdk in ("anthropic", "openai"):
        assert private_api.sdk_omit_type(sdk) is not None
        assert callable(private_api.sdk_helper(sdk, "openapi_dumps"))
    stream = anthropic.Stream.__new__(anthropic.Stream)
    private_api.set_stream_iterator(stream, iter(()))
    assert list(private_api.stream_iterator(stream)) == []
    client = openai.OpenAI(api_key="k", default_headers={"x-mine": "1"})
    try:
        assert dict(private_api.client_custom_headers(client)) == {"x-mine": "1"}
    finally:
        client.close()
    assert private_api.asyncio_loop_running() is False

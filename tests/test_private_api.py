"""Other libraries' private names appear in ``telos_wrap/private_api.py`` only.

The SDKs, OpenTelemetry, asyncio, wrapt and CPython itself (``sys._getframe``) change their
private names without notice; keeping every use in one module is what lets the next upgrade be
checked by reading one file. This test reads every other source file of the package (code,
comments and docstrings alike) for the private names telos uses and for any private module of
those libraries. (DSPy's lm15 client is a private, vendored module as a whole: ``patch/lm15.py`` is
its adapter.) Then, one case per name ``private_api`` reaches, named by it, checks that the
installed library still has it.
"""

from __future__ import annotations

import asyncio
import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import wrapt

import telos_wrap
from telos_wrap import private_api
from telos_wrap.emulator import Emulator
from tests.sdk_http import EmulatorTransport, sdk_http

PACKAGE = Path(telos_wrap.__file__).resolve().parent
HOME = Path(private_api.__file__).resolve()

#: The private attributes and module names telos reads or sets (``private_api``'s entries), a
#: private module of any of those libraries (``anthropic._x``, ``f"{sdk}._x"``, ``metrics._internal``),
#: and the interpreter's private ``sys`` names (``sys._getframe``: ``inspect.currentframe()`` is public).
FOREIGN = re.compile(
    r"""
      (?<![.\w])(?:anthropic|openai|opentelemetry(?:\.\w+)*|asyncio|wrapt|httpx2?)\._[a-z]\w*
    | \{(?:sdk|name)\}\._[a-z]
    | \b_utils\._[a-z]
    | \b_(?:iterator|custom_headers|raw_stream|parsed_by_type|self_parent|get_running_loop)\b
    | \b_(?:TRACER|METER)_PROVIDER\b
    | (?<![.\w])sys\._[a-z]\w* | \bfrom\s+sys\s+import\b.*\b_[a-z] | \b_getframe\b
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
        # CPython's own private names (failopen's call site walks frames with inspect.currentframe()).
        "frame = sys._getframe(2)",
        "from sys import _getframe",
        'getattr(sys, "_getframe")(1)',
    ],
)
def test_the_check_finds_what_private_api_replaced(line: str) -> None:
    """Each kind of use this room took in would be caught if it came back elsewhere."""
    assert FOREIGN.search(line)


# -- the installed libraries still have each name -------------------------------------------------
#
# One case per private name ``private_api`` reaches, named by it: a renamed or removed one fails here
# saying which, on the line that lacks it (the suite runs on the newest SDKs and, through
# ``nox -s tests_sdk``, on the 0x line). Where private_api documents a name as present on some lines
# only, the case says from which version it is required and is skipped elsewhere.


def _version(sdk: str) -> tuple[int, ...]:
    module = importlib.import_module(sdk)
    return tuple(int(part) for part in re.findall(r"\d+", module.__version__)[:3])


def _lacks(name: str, sdk: str = "") -> str:
    where = f"{sdk} {importlib.import_module(sdk).__version__}" if sdk else "this install"
    return f"{where} has no {name}, which private_api reaches (its entry says what for)"


def _client(sdk: str) -> Any:
    emu = Emulator()
    http = sdk_http.Client(transport=EmulatorTransport(emu))
    if sdk == "anthropic":
        return anthropic.Anthropic(api_key="x", http_client=http, max_retries=0)
    return openai.OpenAI(api_key="x", http_client=http, max_retries=0)


_ASK = {"model": "claude-opus-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
_ASK_OPENAI = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}


def _module_attribute(sdk: str, role: str, dotted: str) -> None:
    name = f"{private_api.sdk_module(sdk, role)}.{dotted}"
    try:
        owner: Any = importlib.import_module(private_api.sdk_module(sdk, role))
    except ImportError:
        pytest.fail(_lacks(name, sdk))
    for part in dotted.split("."):
        assert hasattr(owner, part), _lacks(name, sdk)
        owner = getattr(owner, part)


def _helper(sdk: str, name: str, since: tuple[int, ...]) -> None:
    if _version(sdk) < since:
        pytest.skip(f"{sdk} < {'.'.join(map(str, since))} has no {name}; private_api falls back")
    assert callable(private_api.sdk_helper(sdk, name)), _lacks(f"{sdk}._utils {name}", sdk)


def _legacy_parse(sdk: str, until: tuple[int, ...]) -> None:
    """``LegacyAPIResponse.parse``: what ``with_raw_response`` returns on the older lines."""
    if _version(sdk) >= until:
        pytest.skip(f"{sdk} >= {'.'.join(map(str, until))}: with_raw_response returns an APIResponse")
    _module_attribute(sdk, "legacy_response", "LegacyAPIResponse.parse")


def _stream_iterator(sdk: str) -> None:
    """``Stream._iterator``: what the stream pulls from is what telos replaces."""
    client = _client(sdk)
    try:
        if sdk == "anthropic":
            stream = client.messages.create(**_ASK, stream=True)
        else:
            stream = client.chat.completions.create(**_ASK_OPENAI, stream=True)
        assert private_api.has_stream_iterator(stream), _lacks("Stream._iterator", sdk)
        original = private_api.stream_iterator(stream)
        private_api.set_stream_iterator(stream, iter(["replaced"]))
        assert list(stream) == ["replaced"], _lacks("Stream._iterator (as what the stream pulls from)", sdk)
        assert hasattr(original, "__next__")
        stream.close()
    finally:
        client.close()


def _custom_headers(sdk: str) -> None:
    """``_custom_headers``: the caller's ``default_headers=`` as the client keeps them."""
    client = _client(sdk)
    try:
        client = client.with_options(default_headers={"x-mine": "1"})
        held = private_api.client_custom_headers(client)
        assert held is not None and dict(held).get("x-mine") == "1", _lacks("_custom_headers", sdk)
    finally:
        client.close()


def _parsed_by_type(sdk: str) -> None:
    """``_parsed_by_type``: an ``APIResponse`` holds what its ``parse()`` made."""
    client = _client(sdk)
    try:
        if sdk == "anthropic":
            raw = client.messages.with_raw_response.create(**_ASK)
        else:
            raw = client.chat.completions.with_raw_response.create(**_ASK_OPENAI)
        parsed = raw.parse()
        assert any(inner is parsed for inner in private_api.parsed_inner_responses(raw)), _lacks(
            "_parsed_by_type", sdk
        )
    finally:
        client.close()


def _raw_stream(sdk: str) -> None:
    """``_raw_stream``: a stream helper (``messages.stream`` / ``chat.completions.stream``) holds the
    SDK ``Stream`` it reads."""
    client = _client(sdk)
    try:
        manager: Any = (
            client.messages.stream(**_ASK)
            if sdk == "anthropic"
            else client.chat.completions.stream(**_ASK_OPENAI)
        )
        with manager as helper:
            inner = private_api.parsed_inner_responses(helper)
            assert any(isinstance(one, (anthropic.Stream, openai.Stream)) for one in inner), _lacks(
                "_raw_stream", sdk
            )
    finally:
        client.close()


def _otel_slot(kind: str) -> None:
    module_name, slot, _ = private_api.OTEL_PROVIDER_SLOTS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        pytest.skip("OpenTelemetry is not installed")
    assert slot in vars(module), _lacks(f"{module_name}.{slot}")


def _asyncio_probe() -> None:
    assert private_api.asyncio_loop_running() is False

    async def inside() -> bool:
        return private_api.asyncio_loop_running()

    assert asyncio.run(inside()) is True, _lacks("asyncio._get_running_loop")


def _wrapt_parent() -> None:
    """``_self_parent``: a wrapper read through its class is bound; its parent is the wrapper."""

    class Owner:
        def method(self) -> int:
            return 1

    wrapper = wrapt.FunctionWrapper(vars(Owner)["method"], lambda wrapped, instance, args, kwargs: 2)
    Owner.method = wrapper  # type: ignore[method-assign]
    assert private_api.wrapper_parent(Owner().method) is wrapper, _lacks("wrapt's _self_parent")


def _sdk_cases() -> list[Any]:
    cases = []
    for sdk in ("anthropic", "openai"):
        cases += [
            pytest.param(
                _module_attribute,
                (sdk, "base_client", "SyncAPIClient.request"),
                id=f"{sdk}._base_client.SyncAPIClient.request",
            ),
            pytest.param(
                _module_attribute,
                (sdk, "base_client", "AsyncAPIClient.request"),
                id=f"{sdk}._base_client.AsyncAPIClient.request",
            ),
            pytest.param(
                _module_attribute,
                (sdk, "response", "APIResponse.parse"),
                id=f"{sdk}._response.APIResponse.parse",
            ),
            pytest.param(
                _module_attribute,
                (sdk, "response", "AsyncAPIResponse.parse"),
                id=f"{sdk}._response.AsyncAPIResponse.parse",
            ),
            pytest.param(_module_attribute, (sdk, "types", "Omit"), id=f"{sdk}._types.Omit"),
            pytest.param(_stream_iterator, (sdk,), id=f"{sdk}.Stream._iterator"),
            pytest.param(_custom_headers, (sdk,), id=f"{sdk}._custom_headers"),
            pytest.param(_parsed_by_type, (sdk,), id=f"{sdk}._parsed_by_type"),
            pytest.param(_raw_stream, (sdk,), id=f"{sdk}._raw_stream"),
        ]
    cases.append(
        pytest.param(
            _legacy_parse, ("anthropic", (1,)), id="anthropic._legacy_response.LegacyAPIResponse.parse"
        )
    )
    cases.append(
        pytest.param(_legacy_parse, ("openai", (3,)), id="openai._legacy_response.LegacyAPIResponse.parse")
    )
    # private_api's _SDK_HELPERS: prepare_request_data and its kin from anthropic 1; openapi_dumps
    # on anthropic's 0.x line already, on openai's from 3.
    for name in ("prepare_request_data", "async_prepare_request_data", "copy_tree"):
        cases.append(pytest.param(_helper, ("anthropic", name, (1,)), id=f"anthropic._utils.{name}"))
    cases.append(
        pytest.param(_helper, ("anthropic", "openapi_dumps", (0,)), id="anthropic._utils.openapi_dumps")
    )
    cases.append(pytest.param(_helper, ("openai", "openapi_dumps", (3,)), id="openai._utils.openapi_dumps"))
    return cases


@pytest.mark.parametrize(("check", "args"), _sdk_cases())
def test_the_sdks_still_have_it(check: Callable[..., None], args: tuple[Any, ...]) -> None:
    """The SDKs installed here still have what ``private_api`` reaches (the case's id names it)."""
    check(*args)


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(lambda: _otel_slot("tracer"), id="opentelemetry.trace._TRACER_PROVIDER"),
        pytest.param(lambda: _otel_slot("meter"), id="opentelemetry.metrics._internal._METER_PROVIDER"),
        pytest.param(_asyncio_probe, id="asyncio._get_running_loop"),
        pytest.param(_wrapt_parent, id="wrapt._self_parent"),
    ],
)
def test_the_other_libraries_still_have_it(check: Callable[[], None]) -> None:
    """OpenTelemetry, asyncio and wrapt still have what ``private_api`` reaches."""
    check()

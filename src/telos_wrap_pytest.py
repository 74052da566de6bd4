"""telos_wrap's pytest plugin, as registered (entry point ``pytest11``: ``telos_wrap``).

This module is what pytest loads in *every* session of an environment where telos-wrap is
installed, so it is deliberately inert: it imports nothing of telos_wrap (importing the package
costs ~0.2 s), patches nothing and touches no warning filter. It only registers the
``telos_cache`` marker (so ``--strict-markers`` accepts it), defines the ``telos_cache`` fixture,
checks the marker's budget after a marked test, and gives pytest-recording's VCR a ``telos_body``
matcher *name* (used only when a ``vcr_config`` lists it) and, when a test uses a cassette, a
filter that keeps credential headers out of what it records (below). The work lives in the testing
package, ``telos_wrap.testing`` (``pytest_plugin``, ``vcr_matcher``), imported the first time a test uses the
fixture or the marker, or the matcher compares a request. Disable it with ``-p no:telos_wrap``.

It stays a top-level module, outside ``telos_wrap.testing``, for that inertness: Python runs a
package's ``__init__`` before any of its modules, and ``import telos_wrap`` costs ~0.4 s (the
public API; measured with ``python -X importtime -c "import telos_wrap"``), which every pytest run in
an environment with telos-wrap installed would pay. See ``docs/testing.md``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

MARKER = "telos_cache"
FIXTURE = "telos_cache"

_MARKER_HELP = (
    "telos_cache(min_hit_ratio=None, max_breaks=None, max_cost_ratio=None, engine=None, "
    "learn_volatility=True): run the test with telos_wrap.patch() and a session, replay the requests it "
    "sent through telos and the built-in emulator, and fail it when the cache budget is not met "
    "(docs/testing.md)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A marked test gets the fixture as if it had asked for it (like ``usefixtures``).
    for item in items:
        if item.get_closest_marker(MARKER) is None:
            continue
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and FIXTURE not in names:
            names.append(FIXTURE)


@pytest.fixture(name=FIXTURE)
def _telos_cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``telos_wrap.patch()`` and one session for this test (``testing.pytest_plugin.TelosCache``)."""
    from telos_wrap.testing.pytest_plugin import TelosCache

    with TelosCache.for_node(request.node) as cache:
        yield cache


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        funcargs = getattr(item, "funcargs", {})
        from telos_wrap.testing.pytest_plugin import check_marker

        check_marker(funcargs.get(FIXTURE), marker)
    return result


def _telos_body(r1: Any, r2: Any) -> Any:
    from telos_wrap.testing.vcr_matcher import telos_body

    return telos_body(r1, r2)


@pytest.hookimpl(optionalhook=True)
def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    """pytest-recording's hook: make ``"telos_body"`` a matcher name its VCR knows, and keep
    credential headers (API keys, cookies) out of every cassette it records
    (``telos_wrap.testing.credentials``)."""
    vcr.register_matcher("telos_body", _telos_body)
    keep_credentials_out(vcr)


# -- cassettes without secrets ------------------------------------------------------------------------
# A cassette recorded against a real vendor holds the request headers the SDK sent — the API key
# among them (``x-api-key``, ``authorization: Bearer …``, Azure's ``api-key``) — and it is committed
# with the tests. pytest-recording's VCR gets ``CREDENTIAL_HEADERS`` as its default
# ``filter_headers``, and its persister is wrapped in ``ScrubbingPersister``, which removes every
# header ``is_credential`` names from the requests and responses just before a cassette is written:
# a ``vcr_config`` that names a ``filter_headers`` of its own (which replaces vcrpy's default) or a
# ``before_record_request`` keeps no key either. Here, not in ``telos_wrap.testing``, so that a test
# using a cassette does not import telos_wrap. ``docs/testing.md``, "Cassettes without secrets".

#: Headers that carry a key, a token, a session or an account id (request and response side).
CREDENTIAL_HEADERS: tuple[str, ...] = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "anthropic-organization-id",
    "openai-organization",
    "openai-project",
    "x-amz-security-token",
    "cookie",
    "set-cookie",
)

_EXACT = frozenset(CREDENTIAL_HEADERS)
#: Any other header whose name says it carries a credential (``x-my-gateway-api-key``,
#: ``x-auth-token``, ``x-client-secret``); ``*-tokens-*`` rate-limit headers are counts, not tokens.
_CONTAINS = ("api-key", "apikey", "api_key", "authorization", "auth-token", "access-key", "cookie", "secret")
_SUFFIXES = ("-token", "-session")


def is_credential(name: str) -> bool:
    """Whether a header of this name is kept out of a cassette."""
    lowered = name.strip().lower()
    return lowered in _EXACT or any(part in lowered for part in _CONTAINS) or lowered.endswith(_SUFFIXES)


def _without(headers: Any) -> Any:
    """A copy of ``headers`` (a mapping) without credential headers, or ``headers`` itself."""
    if not isinstance(headers, Mapping) or not any(is_credential(str(name)) for name in headers):
        return headers
    return {name: value for name, value in headers.items() if not is_credential(str(name))}


def scrubbed(cassette: Mapping[str, Any]) -> dict[str, Any]:
    """A cassette dict (``{"requests": [Request], "responses": [dict]}``) without credential headers.

    The cassette's own objects are left as they are (a copy is changed where a header goes)."""
    requests = []
    for request in cassette.get("requests", []):
        headers = getattr(request, "headers", None)
        trimmed = _without(headers)
        if trimmed is not headers:
            request = copy.copy(request)
            request.headers = trimmed
        requests.append(request)
    responses = []
    for response in cassette.get("responses", []):
        if isinstance(response, Mapping):
            headers = response.get("headers")
            trimmed = _without(headers)
            if trimmed is not headers:
                response = {**response, "headers": trimmed}
        responses.append(response)
    return {**cassette, "requests": requests, "responses": responses}


class ScrubbingPersister:
    """A vcrpy persister that saves through ``inner`` with ``scrubbed`` cassettes (loads unchanged)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def load_cassette(self, cassette_path: Any, serializer: Any) -> Any:
        return self.inner.load_cassette(cassette_path, serializer)

    def save_cassette(self, cassette_path: Any, cassette_dict: Mapping[str, Any], serializer: Any) -> None:
        self.inner.save_cassette(cassette_path, scrubbed(cassette_dict), serializer=serializer)


def keep_credentials_out(vcr: Any) -> None:
    """Make ``vcr`` (a ``vcr.VCR``) keep no credential header: ``CREDENTIAL_HEADERS`` as its default
    ``filter_headers`` (a ``vcr_config`` that names its own replaces it) and its persister wrapped
    in ``ScrubbingPersister`` (whatever the config says)."""
    if not getattr(vcr, "filter_headers", ()):
        vcr.filter_headers = CREDENTIAL_HEADERS
    persister = getattr(vcr, "persister", None)
    if persister is not None and not isinstance(persister, ScrubbingPersister):
        vcr.register_persister(ScrubbingPersister(persister))

"""Cassettes without secrets (issue 44): a cassette recorded through the plugin keeps no key.

Each project records a real cassette — the real SDKs over real HTTP to the emulator — with fake keys
and credential headers, through pytest-recording, and the cassette file is then read as text: the
keys are not in it. The projects' ``vcr_config`` filter nothing themselves (the plugin's default
applies), or name a ``filter_headers`` of their own (which replaces vcrpy's default: the plugin's
persister still removes the credentials).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import vcr.request

from telos_wrap_pytest import CREDENTIAL_HEADERS, is_credential, scrubbed
from tests.plugin.project import HERE, INI

pytest_plugins = ["pytester"]

ANTHROPIC_KEY = "sk-ant-fake-4f1d9c2e"
OPENAI_KEY = "sk-proj-fake-77aa01"
SECRETS = (ANTHROPIC_KEY, OPENAI_KEY, "org-fake-5150", "proj-fake-0042", "sid=fake-cookie-9")

CONFTEST = """\
import pytest

from telos_wrap.emulator import Emulator, serve


@pytest.fixture(scope="module")
def vcr_config():
    return {VCR_CONFIG}


@pytest.fixture
def base_url():
    with serve(Emulator()) as url:
        yield url
"""

TEST = f"""\
import anthropic
import openai
import pytest

import agent


@pytest.mark.vcr
def test_both_vendors(base_url):
    extra = {{"cookie": "sid=fake-cookie-9", "openai-organization": "org-fake-5150",
              "openai-project": "proj-fake-0042"}}
    # Closed when done: an SDK client left to the garbage collector leaves its socket open (a
    # ResourceWarning in whichever later test collects it, on the httpx-based 0.x SDK line).
    with anthropic.Anthropic(api_key="{ANTHROPIC_KEY}", base_url=base_url, max_retries=0,
                             default_headers=extra) as claude:
        assert len(agent.run_anthropic(claude, questions=agent.QUESTIONS[:2])) == 2
    with openai.OpenAI(api_key="{OPENAI_KEY}", base_url=base_url + "/openai/v1", max_retries=0,
                       default_headers=extra) as gpt:
        assert len(agent.run_openai(gpt, questions=agent.QUESTIONS[:2])) == 2
"""


def _record(pytester: pytest.Pytester, vcr_config: str) -> str:
    shutil.copy(HERE / "project" / "agent.py", pytester.path / "agent.py")
    pytester.makefile(".ini", pytest=INI)
    pytester.makeconftest(CONFTEST.replace("{VCR_CONFIG}", vcr_config))
    pytester.makepyfile(test_agent=TEST)
    result = pytester.runpytest_inprocess("--record-mode=once")
    result.assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_agent" / "test_both_vendors.yaml"
    return cassette.read_text()


@pytest.mark.parametrize(
    "vcr_config",
    [
        '{"match_on": ["method", "path"]}',
        '{"match_on": ["method", "path"], "filter_headers": ["x-stainless-os"], '
        '"before_record_request": lambda request: request}',
    ],
    ids=["no-filter-of-its-own", "own-filter-and-hook"],
)
def test_a_recorded_cassette_holds_no_key(pytester: pytest.Pytester, vcr_config: str) -> None:
    text = _record(pytester, vcr_config)
    assert text.count("- request:") == 4
    assert "anthropic-version" in text and "x-stainless-lang" in text  # other headers are kept
    for secret in SECRETS:
        assert secret not in text
    lowered = text.lower()
    for header in ("authorization:", "x-api-key:", "cookie:", "openai-organization:", "openai-project:"):
        assert header not in lowered


def test_scrubbing_leaves_the_cassette_it_was_given_alone() -> None:
    request = vcr.request.Request(
        "POST", "https://api.example.com/v1/messages", b"{}", {"X-Api-Key": "k", "Accept": "json"}
    )
    response = {"status": {"code": 200}, "headers": {"Set-Cookie": ["a=b"], "Date": ["now"]}}
    cassette = {"requests": [request], "responses": [response]}
    clean = scrubbed(cassette)
    assert dict(clean["requests"][0].headers) == {"Accept": "json"}
    assert clean["responses"][0]["headers"] == {"Date": ["now"]}
    assert "X-Api-Key" in request.headers and "Set-Cookie" in response["headers"]  # originals unchanged


def test_which_headers_are_credentials() -> None:
    for name in (*CREDENTIAL_HEADERS, "X-Gateway-Api-Key", "x-auth-token", "x-client-secret"):
        assert is_credential(name), name
    for name in (
        "anthropic-version",
        "anthropic-ratelimit-tokens-remaining",
        "x-stainless-os",
        "idempotency-key",
    ):
        assert not is_credential(name), name


def test_committed_cassettes_hold_no_credential_header() -> None:
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in [*root.joinpath("cassettes").rglob("*.yaml"), *root.joinpath("tests").rglob("*.yaml")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            name = line.strip().split(":", 1)[0]
            if line.startswith("      ") and ":" in line and is_credential(name):
                found.append(f"{path.relative_to(root)}: {line.strip()[:60]}")
    assert found == []

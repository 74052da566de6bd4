"""Build ``pytester`` projects that use the plugin the way a user's project does.

A project gets the support agent (``project/agent.py``), a ``pytest.ini`` as strict as this
repository's (``filterwarnings = error``, ``--strict-markers``), and a ``conftest.py`` with the usual
pytest-recording settings and a ``base_url`` fixture: a real emulator HTTP server
(``telos_wrap.emulator.serve``) while recording, an address where nothing listens while replaying
(the cassette must answer).
"""

from __future__ import annotations

import shutil
from pathlib import Path

# Imported here, once, so that pytester's in-process runs reuse them: a run forgets the modules it
# imported, and re-importing the SDKs for every run is slow (and PyYAML's C loader does not survive it).
import anthropic  # noqa: F401
import openai  # noqa: F401
import pytest
import pytest_recording.plugin  # noqa: F401
import vcr  # noqa: F401
import yaml  # noqa: F401

import telos_wrap.emulator
import telos_wrap.testing.pytest_plugin
import telos_wrap.testing.vcr_matcher  # noqa: F401

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COMMITTED = ROOT / "cassettes" / "plugin"

INI = """\
[pytest]
addopts = --strict-markers --strict-config -p no:cacheprovider
filterwarnings = error
"""

CONFTEST = """\
import pytest

from telos_wrap.emulator import Emulator, serve


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "match_on": MATCH_ON,
        "filter_headers": ["authorization", "x-api-key", "api-key"],
        "decode_compressed_response": True,
    }


@pytest.fixture
def base_url(request):
    if request.config.getoption("--record-mode") in (None, "none"):
        yield "http://127.0.0.1:9"  # replaying: nothing listens here, the cassette must answer
        return
    with serve(Emulator()) as url:
        yield url
"""


def make_project(
    pytester: pytest.Pytester, tests: str, *, match_on: tuple[str, ...] = ("method", "path")
) -> Path:
    """A project with the agent, strict settings, the conftest above and ``test_agent.py``."""
    shutil.copy(HERE / "project" / "agent.py", pytester.path / "agent.py")
    pytester.makefile(".ini", pytest=INI)
    pytester.makeconftest(f"MATCH_ON = {list(match_on)!r}\n" + CONFTEST)
    pytester.makepyfile(test_agent=tests)
    return pytester.path


def copy_committed(pytester: pytest.Pytester, name: str, test: str) -> Path:
    """Copy a committed cassette where pytest-recording looks for ``test_agent.py::<test>``."""
    target = pytester.path / "cassettes" / "test_agent" / f"{test}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(COMMITTED / name, target)
    return target

"""The plugin adds nothing to a test session that does not use it (issue 13 acceptance).

Run in a subprocess: an in-process run would share this process' modules, where telos_wrap and the
SDKs are already imported (and the question is precisely what a fresh session imports).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

PROBE = """\
import sys
import warnings

import pytest

FILTERS_AT_IMPORT = list(warnings.filters)


def test_nothing_of_telos_is_there(request):
    # No warning filter added by the plugin: the same as with the plugin disabled (compared outside).
    print("FILTERS", warnings.filters == FILTERS_AT_IMPORT, len(warnings.filters))
    plugin = request.config.pluginmanager.get_plugin("telos_wrap")
    assert plugin is not None and plugin.__name__ == "telos_wrap_pytest"  # the plugin IS loaded
    assert any(m.startswith("telos_cache(") for m in request.config.getini("markers"))
    # Not imported: not telos_wrap, not the SDKs (so nothing can have been patched).
    assert not [m for m in sys.modules if m == "telos_wrap" or m.startswith("telos_wrap.")]
    assert "anthropic" not in sys.modules and "openai" not in sys.modules


def test_sdk_is_untouched_after_import():
    import anthropic.resources.messages.messages as messages

    import telos_wrap

    assert not telos_wrap.is_patched()
    assert type(vars(messages.Messages)["create"]).__name__ == "function"
"""


def _filters(result: pytest.RunResult) -> str:
    line = next(line for line in result.outlines if "FILTERS" in line)
    return line[line.index("FILTERS") :]


def test_a_session_that_does_not_use_the_plugin_gets_nothing(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".ini",
        pytest="[pytest]\naddopts = --strict-markers --strict-config -p no:cacheprovider\n"
        "filterwarnings = error\n",
    )
    pytester.makepyfile(test_probe=PROBE)
    used = pytester.runpytest_subprocess("-s")
    used.assert_outcomes(passed=2)
    # The same probe with the plugin disabled: the first test's own plugin check fails, and the
    # warning filters it prints are the same as with the plugin loaded.
    disabled = pytester.runpytest_subprocess("-s", "-p", "no:telos_wrap", "-k", "nothing_of_telos")
    disabled.assert_outcomes(failed=1)
    assert _filters(used) == _filters(disabled)


def test_the_marker_is_known_to_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest="[pytest]\naddopts = --strict-markers\n")
    pytester.makepyfile(
        test_marked="import pytest\n\n@pytest.mark.telos_cache\ndef test_marked():\n    pass\n"
    )
    pytester.runpytest_inprocess().assert_outcomes(passed=1)

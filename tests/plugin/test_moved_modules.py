"""The testing feature moved into ``telos_wrap.testing`` (issue 28); the old module paths are aliases.

Each old path still imports, gives the very objects of the new place, and warns (``DeprecationWarning``,
pointing at the importing line) once — on its first import only. The new paths and the plugin warn
never. Run in a fresh interpreter: in this process the modules are already imported (or not), and
whether a first import warns is precisely the question.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: old module -> (new module, names the old module exported)
MOVED = {
    "telos_wrap.cache_budget": (
        "telos_wrap.testing",
        ["BreakReport", "Budget", "CacheBudgetError", "CacheReport", "RequestCapture", "replay_requests"],
    ),
    "telos_wrap.cassettes": (
        "telos_wrap.testing.cassettes",
        ["api_of_path", "load_cassette", "replay_cassette"],
    ),
    "telos_wrap.vcr_matcher": (
        "telos_wrap.testing.vcr_matcher",
        ["MATCH_ON", "NAME", "normalize_body", "register", "telos_body"],
    ),
    "telos_wrap.pytest_plugin": (
        "telos_wrap.testing.pytest_plugin",
        ["MARKER_OPTIONS", "Budget", "TelosCache", "check_marker", "replay_cassette"],
    ),
    "telos_wrap.harnesses": (
        "telos_wrap.testing.harnesses",
        [
            "SHAPES",
            "STYLES",
            "HarnessRequest",
            "HarnessStyle",
            "apply_style",
            "rewrite_session",
            "style_names",
        ],
    ),
}

PROBE = """\
import importlib
import sys
import warnings

MOVED = {moved!r}
WARNS_AT = {warns_at}

with warnings.catch_warnings():
    warnings.simplefilter("error")  # the new places, and the plugin pytest loads, never warn
    import telos_wrap.testing
    import telos_wrap_pytest
    for new, _ in MOVED.values():
        importlib.import_module(new)

for old, (new, names) in MOVED.items():
    with warnings.catch_warnings(record=True) as first:
        warnings.simplefilter("always")
        __import__(old)  # WARNS HERE (an import statement: the same frames as `import telos_wrap.x`)
        module = sys.modules[old]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert importlib.import_module(old) is module
        exec(f"import {{old}}")
    assert [w.category for w in first] == [DeprecationWarning], (old, [str(w.message) for w in first])
    assert new.split(".")[:2] == ["telos_wrap", "testing"] and "telos_wrap.testing" in str(first[0].message)
    assert (first[0].filename, first[0].lineno) == (__file__, WARNS_AT), (first[0].filename, first[0].lineno)
    assert again == [], (old, [str(w.message) for w in again])
    target = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(target, name), (old, name)
    assert set(module.__all__) >= set(names)

# The old documented spelling of the matcher import still works.
from telos_wrap import vcr_matcher
assert vcr_matcher.telos_body is telos_wrap.testing.vcr_matcher.telos_body
print("ALIASES OK")
"""


def test_old_paths_are_the_new_objects_and_warn_once(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    warns_at = next(n for n, line in enumerate(PROBE.splitlines(), 1) if "# WARNS HERE" in line)
    probe.write_text(PROBE.format(moved=MOVED, warns_at=warns_at), encoding="utf-8")
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ALIASES OK" in done.stdout


@pytest.mark.parametrize("name", ["Budget", "replay_cassette", "telos_body", "style_names", "RequestCapture"])
def test_the_package_front_door_gives_the_modules_objects(name: str) -> None:
    import telos_wrap.testing as testing

    assert name in testing.__all__ and name in dir(testing)
    value = getattr(testing, name)
    assert value is getattr(sys.modules[value.__module__], name)
    assert value.__module__.startswith("telos_wrap.testing.")


def test_an_unknown_name_is_an_attribute_error() -> None:
    import telos_wrap.testing as testing

    with pytest.raises(AttributeError, match="no attribute 'replay_cassete'"):
        testing.replay_cassete  # noqa: B018

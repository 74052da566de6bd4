"""The bridge pass on each API's tool results, its rules of first sight and record, and the options."""

from __future__ import annotations

import json
from typing import Any

import pytest

import telos_wrap
from telos_wrap.bridge import BridgeOptions
from telos_wrap.bridge.output_filter import result_key
from telos_wrap.filters import decide
from telos_wrap.ir.hints import parse_hints
from telos_wrap.pipeline import PrepareOptions, SessionHooks, prepare

from .corpus import entries

PYTEST = next(e for e in entries() if e.name == "pytest_verbose")
PIP = next(e for e in entries() if e.name == "pip_install")
SYSTEM = "You are a coding agent.\n" * 200


class Recorded(SessionHooks):
    def __init__(self, recorded: dict[str, str]) -> None:
        self.recorded = recorded

    def filtered_outputs(self) -> dict[str, str]:
        return self.recorded


def _anthropic(outputs: list[tuple[str, str]], is_error: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n, (command, output) in enumerate(outputs):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": command}}
                ],
            }
        )
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{n}", "content": output}
        if is_error:
            result["is_error"] = True
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude-opus-5", "max_tokens": 8, "system": SYSTEM, "messages": messages}


def _sent(api: str, body: dict[str, Any], mode: Any, hooks: SessionHooks | None = None) -> Any:
    engine = "anthropic" if api == "anthropic" else "openai"
    return prepare(api, body, PrepareOptions(engine=engine, bridge=BridgeOptions(output_filter=mode)), hooks)


def test_anthropic_the_new_result_is_filtered_and_a_history_result_without_record_stays_whole() -> None:
    body = _anthropic(
        [("pip install -r requirements.txt", PIP.text), ("python -m pytest -v tests/", PYTEST.text)]
    )
    prepared = _sent("anthropic", body, "aggressive")
    messages = prepared.body["messages"]
    assert messages[2]["content"][0]["content"] == PIP.text  # history: sent whole before, stays whole
    assert messages[4]["content"][0]["content"] == decide(PYTEST.text, "aggressive", command="pytest -v").text
    (output,) = prepared.ir.outputs
    assert (output.where, output.tool, output.filter_id, output.fresh) == (
        "messages[4][0]",
        "bash",
        "aggressive/1",
        True,
    )
    assert output.key == result_key("t1", PYTEST.text)


def test_a_recorded_result_is_filtered_as_recorded_whatever_the_mode() -> None:
    body = _anthropic([("pip install -r requirements.txt", PIP.text), ("git status", "x" * 10)])
    recorded = {result_key("t0", PIP.text): "aggressive/1|1|1"}
    for mode in (None, "off", "safe", "aggressive"):
        prepared = _sent("anthropic", body, mode, Recorded(recorded))
        assert (
            prepared.body["messages"][2]["content"][0]["content"]
            == decide(PIP.text, "aggressive", command="pip install -r requirements.txt").text
        )
        assert [o.fresh for o in prepared.ir.outputs] == [False]
    unknown = {result_key("t0", PIP.text): "aggressive/99"}
    prepared = _sent("anthropic", body, "aggressive", Recorded(unknown))
    assert prepared.body["messages"][2]["content"][0]["content"] == PIP.text
    assert [o.fallback for o in prepared.ir.outputs] == [True]


def test_off_leaves_the_ir_as_it_was() -> None:
    body = _anthropic([("python -m pytest -v tests/", PYTEST.text)])
    assert _sent("anthropic", body, "off").body == _sent("anthropic", body, None).body
    assert _sent("anthropic", body, "off").ir.outputs == ()


def test_an_is_error_result_gets_only_safe() -> None:
    body = _anthropic([("python -m pytest -v tests/", PYTEST.text + "\x1b[0m" * 5)], is_error=True)
    content = _sent("anthropic", body, "aggressive").body["messages"][2]["content"][0]["content"]
    assert content == PYTEST.text


def test_openai_chat_tool_message() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": json.dumps({"cmd": "pytest -v"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": PYTEST.text},
        ],
    }
    prepared = _sent("openai_chat", body, "aggressive")
    assert (
        prepared.body["messages"][-1]["content"]
        == decide(PYTEST.text, "aggressive", command="pytest -v").text
    )
    assert prepared.body["messages"][-1]["tool_call_id"] == "c1"
    assert prepared.ir.outputs[0].tool == "shell"


def test_openai_responses_function_call_output() -> None:
    body = {
        "model": "gpt-4o",
        "instructions": SYSTEM,
        "input": [
            {"role": "user", "content": "go"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "bash",
                "arguments": json.dumps({"command": "pytest -v"}),
            },
            {"type": "function_call_output", "call_id": "c1", "output": PYTEST.text},
        ],
    }
    prepared = _sent("openai_responses", body, "aggressive")
    item = prepared.body["input"][-1]
    assert item == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": decide(PYTEST.text, "aggressive", command="pytest -v").text,
    }


def test_a_repeat_becomes_a_pointer_to_the_copy_above() -> None:
    listing = "\n".join(f"./src/module_{i}/file_{j}.py" for i in range(10) for j in range(10))
    body = _anthropic([("cat notes.txt", listing), ("cat notes.txt", listing)])
    messages = _sent("anthropic", body, "aggressive").body["messages"]
    assert messages[2]["content"][0]["content"] == listing
    assert messages[4]["content"][0]["content"].startswith("[telos: this output is byte-identical")
    assert _sent("anthropic", body, "safe").body["messages"][4]["content"][0]["content"] == listing


@pytest.mark.parametrize("value", ["agressive", 3, {"mode": "safe"}, lambda text: text])
def test_bad_values_are_refused_everywhere(value: Any) -> None:
    with pytest.raises(telos_wrap.TelosOptionError, match=r"patch\(output_filter=\.\.\.\)"):
        telos_wrap.patch(output_filter=value)
    assert not telos_wrap.is_patched()
    with pytest.raises(telos_wrap.TelosHintError, match=r"session\(output_filter=\.\.\.\)"):
        telos_wrap.session("s", output_filter=value)
    with pytest.raises(telos_wrap.TelosHintError, match="output_filter"):
        parse_hints({"output_filter": value})
    with pytest.raises(ValueError, match="then="):
        telos_wrap.OutputFilter("x", then=str(value))


def test_good_values_are_taken() -> None:
    mine = telos_wrap.OutputFilter("mine", 3, tools={"search": str.strip})
    assert parse_hints({"output_filter": mine}).output_filter is mine
    assert telos_wrap.session("s", output_filter="safe").hints.output_filter == "safe"
    try:
        telos_wrap.patch(output_filter=mine)
        from telos_wrap.config import current_config

        assert current_config().output_filter is mine
    finally:
        telos_wrap.unpatch()

"""``telos-wrap emulator``: the banner is docs/emulator.md's, and the model is scriptable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anthropic
import openai
import pytest

from telos_wrap.cli import main

from ..docs.fixtures import EMULATOR_PAGE, start_cli_emulator, stop_cli_emulator


def _documented_banner() -> list[str]:
    page = EMULATOR_PAGE.read_text(encoding="utf-8")
    block = re.search(r"```text\n(telos-wrap emulator serving on .*?)```", page, re.S)
    assert block is not None
    return block[1].rstrip("\n").splitlines()


def test_the_banner_is_the_documented_one_and_a_replies_file_scripts_the_model(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    steps = [
        {"text": "Checking.", "tool_calls": [{"name": "lookup", "arguments": {"id": 7}}]},
        {"text": "It ships today."},
    ]
    replies.write_text(json.dumps(steps), encoding="utf-8")
    process, url, banner = start_cli_emulator(["telos-wrap", "emulator", "--replies", str(replies)])
    try:
        documented = [line.replace("http://127.0.0.1:8790", url) for line in _documented_banner()]
        assert banner[: len(documented)] == documented
        assert any("scripted" in line and "2 replies" in line for line in banner)
        with anthropic.Anthropic(api_key="x", base_url=url, max_retries=0) as claude:
            first = claude.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "where?"}]
            )
            call = first.content[1]
            assert first.stop_reason == "tool_use" and call.type == "tool_use"
            assert (call.name, call.input) == ("lookup", {"id": 7})
            second = claude.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                messages=[
                    {"role": "user", "content": "where?"},
                    {"role": "assistant", "content": first.content},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "x"}],
                    },
                ],
            )
            assert second.content[0].type == "text" and second.content[0].text == "It ships today."
        with openai.OpenAI(api_key="x", base_url=f"{url}/groq/openai/v1", max_retries=0) as groq:
            message = (
                groq.chat.completions.create(
                    model="llama-3.3-70b-versatile", messages=[{"role": "user", "content": "where?"}]
                )
                .choices[0]
                .message
            )
            assert message.content == "Checking." and message.tool_calls is not None
            assert json.loads(message.tool_calls[0].function.arguments) == {"id": 7}
    finally:
        err = stop_cli_emulator(process)
    assert "Traceback" not in err, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--tool-call", "x:[1]"], "--tool-call 'x:[1]': the arguments must be a JSON object"),
        (["--tool-call", ":{}"], "expected NAME or NAME:JSON"),
        (["--replies", "/nonexistent/replies.json"], "--replies /nonexistent/replies.json: No such file"),
    ],
)
def test_a_bad_script_stops_the_command_with_one_line(argv: list[str], says: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["emulator", *argv])
    assert says in str(stopped.value)


def test_a_malformed_replies_file_is_named(tmp_path: Path) -> None:
    replies = tmp_path / "r.json"
    replies.write_text('[{"tool_calls": [{"arguments": {}}]}]', encoding="utf-8")
    with pytest.raises(SystemExit, match="a tool call is"):
        main(["emulator", "--replies", str(replies)])
    replies.write_text("not json", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"r\.json: Expecting value"):
        main(["emulator", "--replies", str(replies)])


def test_tool_call_and_replies_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["emulator", "--tool-call", "a", "--replies", "r.json"])
    assert "not allowed with argument" in capsys.readouterr().err

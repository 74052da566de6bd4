"""The PIN/FOLD/DROP splitter loses no character and finds every default envelope."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from telos_wrap.ir.model import Band
from telos_wrap.lift.user_split import DEFAULT_PATTERNS, split_text

pieces = st.sampled_from(
    [
        "hello ",
        "What is X?",
        "\n",
        "  ",
        "<system-reminder>todo: none</system-reminder>",
        "<environment_info>cwd=/repo\ngit: clean</environment_info>",
        "Current time: 2024-05-01 10:00:01\n",
        "<prev>earlier answer</prev>",
        "<command-name>/review</command-name>",
        "<command-message>x</command-message>",
        "naïve ☃ text",
        "<system-reminder>unclosed",
    ]
)


@given(st.lists(pieces, max_size=12).map("".join))
def test_split_tiles_the_input_exactly(text: str) -> None:
    split = split_text(text)
    assert "".join(span.text for span in split.spans) == text
    assert sorted(split.pin + split.fold + split.drop) == sorted(text)


@given(st.lists(pieces, max_size=12).map("".join))
def test_no_whitespace_only_pin_piece_when_anything_else_exists(text: str) -> None:
    split = split_text(text)
    if len(split.spans) > 1:
        assert all(span.text.strip() for span in split.spans if span.band is Band.PIN)


def test_default_envelopes_are_classified() -> None:
    text = (
        "<system-reminder>r</system-reminder>\n<prev>old</prev>\nWhat now?\n"
        "<environment_info>cwd=/x</environment_info>\nCurrent time: 12:00:01\n"
    )
    split = split_text(text)
    assert split.pin == "What now?\n"
    assert split.fold == "<prev>old</prev>\n"
    assert "<system-reminder>r</system-reminder>" in split.drop
    assert "Current time: 12:00:01" in split.drop
    assert "<environment_info>cwd=/x</environment_info>" in split.drop


def test_patterns_are_extensible() -> None:
    patterns = DEFAULT_PATTERNS.extended(drop=[r"^cwd: .*$"])
    split = split_text("Fix the bug\ncwd: /tmp/a\n", patterns)
    assert split.pin == "Fix the bug\n"
    assert split.drop == "cwd: /tmp/a\n"


def test_plain_text_is_one_pin_span() -> None:
    split = split_text("just a question")
    assert split.is_plain and split.pin == "just a question"


def test_system_mode_ignores_prev() -> None:
    split = split_text("<prev>x</prev> rest", with_fold=False)
    assert split.is_plain


def test_a_layer_applies_to_the_text_the_earlier_patterns_left() -> None:
    # Learned on "HOME=/h\nLANG=C\nJOB=1\nJOB=2\nRules" (the UPTIME line already cut): its anchor
    # "LANG=C\n" is followed by the job lines only once the first layer is cut.
    text = "HOME=/h\nLANG=C\nUPTIME=42s\nJOB=1\nJOB=2\nRules"
    first = DEFAULT_PATTERNS.layered([[r"^UPTIME=\S+$"]])
    both = first.layered([[r"(?<=LANG=C\n)^JOB[^\n]*(?:\n[^\n]*)*?$(?=\nRules)"]])
    assert split_text(text, first, with_fold=False).pin == "HOME=/h\nLANG=C\nJOB=1\nJOB=2\nRules"
    assert split_text(text, both, with_fold=False).pin == "HOME=/h\nLANG=C\nRules"
    # The same patterns matched on the text itself find nothing for the second one.
    flat = DEFAULT_PATTERNS.extended(
        drop=[r"^UPTIME=\S+$", r"(?<=LANG=C\n)^JOB[^\n]*(?:\n[^\n]*)*?$(?=\nRules)"]
    )
    assert split_text(text, flat, with_fold=False).pin == "HOME=/h\nLANG=C\nJOB=1\nJOB=2\nRules"


@given(
    st.lists(pieces, max_size=12).map("".join),
    st.lists(st.sampled_from([r"^\s*What[^\n]*$", r"x", r"(?<=\n)\S+", r"ï\w*", r"^$"]), max_size=3),
    st.lists(st.sampled_from([r"hello", r"\?", r"(?<=X)\S", r"[a-z]{3}"]), max_size=2),
)
def test_layers_tile_the_input_and_cut_only_pin_text(text: str, first: list[str], second: list[str]) -> None:
    plain = split_text(text, DEFAULT_PATTERNS)
    layered = split_text(text, DEFAULT_PATTERNS.layered([first, second]))
    assert "".join(span.text for span in layered.spans) == text
    # A layer only moves PIN text to DROP: FOLD is untouched, DROP only grows.
    assert layered.fold == plain.fold
    assert len(layered.drop) >= len(plain.drop) and len(layered.pin) <= len(plain.pin)

"""Escaping for every output medium, and the scenario-id / path rules (replay._untrusted)."""

from __future__ import annotations

import json
import signal
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from replay._untrusted import (
    check_id,
    confined,
    dumps_json,
    id_problem,
    json_chunks,
    md_code,
    md_fence,
    visible,
    xml_text,
)
from replay.errors import ReplayUsageError

DANGEROUS_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def test_every_control_format_and_separator_character_is_made_visible() -> None:
    """The hard-coded ranges cover every such character of this Python's Unicode database."""
    missed = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in DANGEROUS_CATEGORIES and visible(chr(cp)) == chr(cp)
    ]
    assert not missed


def test_visible_escapes() -> None:
    assert visible("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert visible("x\ny\r\tz") == "x\\ny\\r\\tz"
    assert visible("x\ny\r\tz", multiline=True) == "x\ny\\r\tz"
    assert visible("\u2028\u202e\x9b\U000e0041") == "\\u2028\\u202e\\x9b\\U000e0041"
    assert visible("plain é ✓ 日本") == "plain é ✓ 日本"


def test_json_keeps_values_and_escapes_what_a_terminal_acts_on() -> None:
    value = {"k\u2028": ["\x9b31m", "\U000e0001", "é", "\x1b[2J", "a\nb"]}
    for text in (dumps_json(value, indent=2), "".join(json_chunks(value, indent=2))):
        assert json.loads(text) == value
        assert visible(text, multiline=True) == text  # nothing raw left but indentation newlines
        assert "é" in text


def test_json_chunks_give_the_encoder_its_indent_as_text(monkeypatch) -> None:
    """Python 3.13 moved ``' ' * indent`` out of ``json.encoder._make_iterencode`` into ``JSONEncoder.iterencode``,
    which ``_StrictEncoder`` replaces: ``replay show --format json`` on 3.13 ended in ``TypeError: can only
    concatenate str (not "int") to str``. The 3.13 contract, checked on every Python: the indent arrives as text."""
    real = json.encoder._make_iterencode  # type: ignore[attr-defined]

    def as_in_313(markers, default, encoder, indent, *rest):  # type: ignore[no-untyped-def]
        if indent is not None and not isinstance(indent, str):
            raise TypeError('can only concatenate str (not "int") to str')
        return real(markers, default, encoder, indent, *rest)

    value = {"a": [1, 2.5, float("nan")], "b": {}}
    indents: list[int | str | None] = [2, "\t", None]
    expected = [json.dumps({"a": [1, 2.5, "NaN"], "b": {}}, indent=indent) for indent in indents]
    monkeypatch.setattr(json.encoder, "_make_iterencode", as_in_313)
    assert ["".join(json_chunks(value, indent=indent)) for indent in indents] == expected


def test_markdown_code_span_cannot_be_broken_out_of() -> None:
    span = md_code("a``b|<img src=x>\n")
    assert span.startswith("```") and span.endswith("```") and "\\|" in span and "\n" not in span
    assert md_fence(["```", "~~~~"])[0] == "`````"


def test_xml_text_is_well_formed() -> None:
    text = xml_text("bad \x00\x1b\x0c\ufffe chars\nkept")
    ET.fromstring(f"<a>{text}</a>")
    assert "\n" in text and "\\x1b" in text


@pytest.mark.parametrize("good", ["seed000/long", "a", "x/y/z", "test_a.py::test_b[1-2]", "a b/c.d"])
def test_good_ids(good: str) -> None:
    assert id_problem(good) is None and check_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", "..", "../x", "a/..", "/abs", "a//b", "a/", "a\\b", "a\x00b", "x\ny", "C:/x", "nul", "a/AUX.txt", "-x", "a.", "s" * 300]
)
def test_bad_ids(bad: str) -> None:
    assert id_problem(bad) is not None
    with pytest.raises(ReplayUsageError):
        check_id(bad)


def test_confined(tmp_path: Path) -> None:
    assert confined(tmp_path, "a/b.cassette") == tmp_path / "a/b.cassette"
    for bad in ("../x", "/etc/passwd", "a/../../x"):
        with pytest.raises(ReplayUsageError, match="outside|not a relative"):
            confined(tmp_path, bad)
    (tmp_path / "link").symlink_to("/tmp")
    with pytest.raises(ReplayUsageError, match="outside"):
        confined(tmp_path, "link/x.cassette")


def test_cassette_path_refuses_unsafe_ids(tmp_path: Path) -> None:
    from replay.cassette import cassette_path

    assert cassette_path(tmp_path, "a/b") == tmp_path / "a" / "b.cassette"
    for bad in ("../x", "/tmp/x", "a/../../x", "a\x00b"):
        with pytest.raises(ReplayUsageError):
            cassette_path(tmp_path, bad)


def test_json_output_is_strict_json_even_with_nan() -> None:
    """An observation of NaN printed bare ``NaN``, which a strict parser (jq, JSON.parse) refuses."""
    import json as std

    from replay._untrusted import dumps_json

    text = dumps_json({"score": float("nan"), "xs": [float("inf"), -float("inf"), 1.5], "ok": "NaN in text"})
    assert std.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))) == {
        "score": "NaN", "xs": ["Infinity", "-Infinity", 1.5], "ok": "NaN in text"}
    assert dumps_json({"a": 1.0}) == '{"a": 1.0}'  # the common case: unchanged


# dumps_json(indent=2) writes plain values with pydantic-core: the same text as json's own writer.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from replay._untrusted import _CONTROL_RANGES, _indented_plain, _json_char, on_use  # noqa: E402

_CHARS = st.one_of(st.characters(), st.sampled_from(list("\x00\x1b\x7f\x85\u2028\u202e\ufeff\"\\\n\t/é")))
_LEAF = st.one_of(st.text(_CHARS, max_size=8), st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.none(),
                  st.floats(allow_nan=False, allow_infinity=False))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(_CHARS, max_size=4), inner, max_size=4),
), max_leaves=25)


def _by_json(value: object) -> str:
    """What dumps_json wrote with the standard library's writer alone."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False, default=str, indent=2)
    unsafe = on_use(f"[{_CONTROL_RANGES}]")()
    return unsafe.sub(_json_char, text) if unsafe.search(text) else text


@settings(max_examples=1500, deadline=None)
@given(_VALUE)
def test_indented_json_is_what_the_standard_library_writes(value: object) -> None:
    assert dumps_json(value, indent=2) == _by_json(value)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(min_value=1e-6, max_value=1e17)))
def test_a_float_is_written_as_the_standard_library_writes_it(value: float) -> None:
    assert dumps_json({"x": [value]}, indent=2) == _by_json({"x": [value]})


def test_only_plain_values_take_the_fast_writer() -> None:
    assert _indented_plain({"a": [1, (2, "x")], "b": None, "c": True}) is not None
    assert _indented_plain({"a": 1e-05}) is None  # json writes 1e-05, pydantic-core 1e-5
    assert _indented_plain({"seconds": 10.546, "cost": [0.25, -0.0, 123456789012345.6]}) is not None  # a report's timing
    assert _indented_plain({1: "x"}) is None  # json turns the key into text
    assert _indented_plain({"a": "\ud800"}) is None  # a lone surrogate: pydantic-core refuses it
    assert dumps_json({"a": "\ud800\x7f\x85"}, indent=2) == _by_json({"a": "\ud800\x7f\x85"})


def test_del_is_the_only_ascii_character_screened() -> None:
    """dumps_json returns an ASCII text without DEL unscreened: no other character below 0x80 is in the class."""
    import re

    assert [c for c in range(128) if re.fullmatch(f"[{_CONTROL_RANGES}]", chr(c))] == [0x7F]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs SIGALRM")
def test_dumps_json_of_a_value_that_holds_itself_fails_as_json_does() -> None:
    """The plain-value walk (``indent=2``) went round a cycle forever; json refuses it, as before."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError("dumps_json went round the cycle")

    looped: list[object] = []
    looped.append(looped)
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        with pytest.raises((ValueError, RecursionError)):
            dumps_json({"x": looped}, indent=2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_no_escaped_line_starts_a_workflow_command() -> None:
    """GitHub Actions reads a log line whose first non-blank characters are ``::`` or ``##[`` as a workflow command.
    A role named ``::stop-commands::x`` in a pull request's cassette started the lines of `replay diff` (text,
    Markdown, JUnit: ``::stop-commands::x[0] changed``), which silenced the job's own ``::error`` annotations."""
    for text in ("::stop-commands::x[0] changed", "  ::add-mask::y", " ##[error]z", "##[warning]w"):
        shown = visible(text)
        assert not shown.lstrip().startswith(("::", "##[")), shown
        assert shown.lstrip().startswith(("\\x3a:", "\\x23#[")) and shown.endswith(text.lstrip()[1:])  # still legible
    block = visible("ok\n::error title=x::forged\n \t##[add-mask]s\nfine :: here", multiline=True)
    assert [ln for ln in block.splitlines() if ln.lstrip().startswith(("::", "##["))] == []
    assert block.endswith("\nfine :: here")  # only at the start of a line
    assert visible("a ::b ##[c") == "a ::b ##[c" and visible(":x") == ":x" and visible("#[x") == "#[x"
    body = xml_text("x\n::error::y")
    assert "\n\\x3a:error::y" in body and ET.fromstring(f"<a>{body}</a>") is not None

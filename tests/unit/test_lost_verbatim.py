"""content_lost settles most needles by a substring search (``_content_lost._Verbatim``) instead of tokens.

The search may only say "found" where the tokens say so too (``_Grams.has``), or a lost message
would read as kept; and ``_texts`` must give exactly the needles ``_words`` tokenises. Checked on
texts built from characters at token edges: word characters, marks, underscores, digits,
non-ASCII letters and whitespace of several kinds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.cassette import load
from replay.invariants import _content_lost, run_checks
from replay.invariants._content_lost import _bounded_end, _Verbatim
from replay.invariants._messages import _TOKEN, _Grams, _texts, _words

_ROOT = Path(__file__).resolve().parents[2]

_ALPHABET = st.sampled_from(list("ab1_é-.,:\n \t\u00a0\u2003ÅΣ٣"))
_TEXT = st.text(_ALPHABET, max_size=40)


@settings(max_examples=1000, deadline=None)
@given(_TEXT, _TEXT.filter(lambda s: s.strip() != ""))
def test_found_written_out_means_found_by_tokens(text: str, needle: str) -> None:
    needle = needle.strip()
    if _Verbatim(text).has(needle):
        assert _Grams(_TOKEN.findall(text)).has(_TOKEN.findall(needle))


@settings(max_examples=500, deadline=None)
@given(_TEXT, _TEXT, _TEXT.filter(lambda s: s.strip() != ""))
def test_a_needle_written_between_token_edges_is_found(before: str, after: str, needle: str) -> None:
    needle = needle.strip()
    text = f"{before} {needle} {after}"
    assert _Verbatim(text).has(needle)
    assert _Grams(_TOKEN.findall(text)).has(_TOKEN.findall(needle))


def test_a_word_inside_a_longer_word_is_not_found() -> None:
    assert not _Verbatim("U10 said so").has("U1")
    assert not _Verbatim("xab cd efg").has("ab cd ef")
    assert _Verbatim("U1, U10").has("U1")
    assert _Verbatim("(U1)").has("U1")
    assert _Verbatim("say -U1- now").has("-U1-")


def test_the_search_resumes_and_starts_over() -> None:
    text = _Verbatim("one two three one")
    assert text.has("three")
    assert text.has("one")  # after "three": the last one
    assert text.has("two")  # not after it: from the start again


def test_bounded_end_gives_up_after_the_tries() -> None:
    text = "xa " * (_content_lost._TRIES + 1) + "a"
    assert _bounded_end(text, "a", 0) == -1  # every early occurrence is inside a word: left to the tokens
    assert _Grams(_TOKEN.findall(text)).has(["a"])


_PART = st.fixed_dictionaries(
    {"part_kind": st.sampled_from(["user-prompt", "text", "tool-return", "system-prompt"])},
    optional={"content": st.one_of(
        _TEXT,
        st.lists(st.one_of(
            _TEXT,
            st.fixed_dictionaries({"kind": st.sampled_from(["text", "cache-point"]), "content": _TEXT}),
            st.fixed_dictionaries({"content": _TEXT, "metadata": st.just({"origin": "pydantic-ai-harness.bg"})}),
        ), max_size=3),
    )},
)
_MESSAGE = st.fixed_dictionaries({"kind": st.sampled_from(["request", "response"]), "parts": st.lists(_PART, max_size=4)},
                                 optional={"metadata": st.just({"__pydantic_ai__": {"request_scoped_tail": 1}})})


@settings(max_examples=500, deadline=None)
@given(_MESSAGE)
def test_texts_are_what_words_tokenises(message: dict) -> None:
    text, needles = _texts(message)
    tokens, needle_tokens = _words(message)
    assert _TOKEN.findall(text) == tokens
    assert [_TOKEN.findall(n) for n in needles] == needle_tokens
    assert all(n == n.strip() and n for n in needles)


def test_needles_written_nowhere_cost_a_bounded_search() -> None:
    """A hostile window: every needle missing from a long text was a whole read of it (a 17 MB
    cassette took 195 s to check where tokenising took 21 s); the reads are bounded, then the
    tokens answer."""
    text = _Verbatim("a" * 4_000_000 + " Q7 ")
    started = time.process_time()
    found = [text.has(f"Q{k}") for k in range(4000)]
    assert time.process_time() - started < 2.0  # 7.4 s when every miss read the whole text
    assert found[7] and sum(found) == 1


def test_a_spent_search_leaves_the_verdict_to_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no reads allowed at all, content_lost finds exactly what it finds with them."""
    paths = sorted((_ROOT / "cassettes" / "seed001").glob("*.cassette"))
    with_search = [[(v.message, v.evidence) for v in run_checks(load(p), ["content_lost"])] for p in paths]
    monkeypatch.setattr(_content_lost, "_SCANS", 0)
    monkeypatch.setattr(_content_lost, "_SCAN_SLACK", 0)
    assert [[(v.message, v.evidence) for v in run_checks(load(p), ["content_lost"])] for p in paths] == with_search
    assert any(with_search)

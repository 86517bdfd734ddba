"""`replay show`'s one-line-per-message view."""

from __future__ import annotations

from replay.show import _message


def test_whitespace_reads_as_python_spells_it() -> None:
    """Seed 002 is about a summary of ' \\t\\n ': a newline was escaped twice (``\\\\n``) beside a tab shown once."""
    line = _message({"kind": "response", "parts": [{"part_kind": "text", "content": " \t\n "}]})
    assert line == "response: text ' \\t\\n '"
    line = _message({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "a\nb\x1b[2J"}]})
    assert line == "request: user-prompt 'a\\nb\\x1b[2J'"  # escapes stay visible, never raw


def test_json_output_scrubs_and_serialises_only_what_it_writes(monkeypatch) -> None:
    """``show -f json`` scrubbed the whole expanded view before its output budget applied: 6.5 GB for a 1.7 MB
    cassette of 3,500 requests re-sending 1,000 messages. Items are now scrubbed as they are written."""
    import io

    from replay import scrub
    from replay._untrusted import json_chunks
    from replay.show import scrubbed_lazily, write_bounded

    seen: list[object] = []
    real = scrub.redactor

    def counting(*a: object, **k: object) -> object:  # the one scrubber of the document, each item it is given counted
        inner = real(*a, **k)  # type: ignore[arg-type]
        return lambda value: (seen.append(value), inner(value))[1]

    monkeypatch.setattr(scrub, "redactor", counting)
    doc = {"header": {"scenario_id": "s"}, "requests": [{"n": i, "text": "x" * 1000} for i in range(1000)]}
    out = io.StringIO()
    assert write_bounded(json_chunks(scrubbed_lazily(doc), indent=2), out.write, 10_000) == 10_000
    assert 5 < len(seen) < 20  # the header and the first few requests, not all 1,000
    whole = io.StringIO()
    write_bounded(json_chunks(scrubbed_lazily({"requests": [{"k": "ghp_" + "a1B2" * 9}]}), indent=2), whole.write, None)
    assert "ghp_" not in whole.getvalue() and "<secret:" in whole.getvalue()  # each item is still scrubbed

"""`replay show`'s one-line-per-message view."""

from __future__ import annotations

from replay.show import _message


def test_whitespace_reads_as_python_spells_it() -> None:
    """Seed 002 is about a summary of ' \\t\\n ': a newline was escaped twice (``\\\\n``) beside a tab shown once."""
    line = _message({"kind": "response", "parts": [{"part_kind": "text", "content": " \t\n "}]})
    assert line == "response: text ' \\t\\n '"
    line = _message({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "a\nb\x1b[2J"}]})
    assert line == "request: user-prompt 'a\\nb\\x1b[2J'"  # escapes stay visible, never raw

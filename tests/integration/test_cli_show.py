"""`replay show` and `replay ls`: readable and machine views of a cassette."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

LONG = ROOT / "cassettes" / "seed000" / "long.cassette"


def test_show_json_has_the_documented_shape(cli) -> None:
    doc = json.loads(cli("show", LONG, "--format", "json").out)
    assert {"header", "requests", "outcome", "observations"} <= set(doc)
    req = doc["requests"][0]
    assert {"role", "kind", "messages", "response"} <= set(req)
    assert isinstance(req["messages"], list) and req["messages"][0]["kind"] == "request"


def test_readable_view_is_one_line_per_message(cli) -> None:
    out = cli("show", ROOT / "cassettes" / "coverage" / "tool_call.cassette").out
    assert "  [0] request: user-prompt 'What is 2 + 3?'" in out
    assert "  [2] request: tool-return add #add-1 '5'" in out
    assert "  => response: text 'sum is 5'" in out


def test_normalized_view_drops_volatile_fields(cli) -> None:
    raw = cli("show", LONG, "--format", "json").out
    norm = cli("show", LONG, "--normalized").out
    assert "timestamp" in raw and "timestamp" not in norm
    assert "== main[0] request" in norm
    doc = json.loads(cli("show", LONG, "--normalized", "--format", "json").out)
    assert "main" in doc["requests"]


def test_ls_lists_cassettes(cli) -> None:
    out = cli("ls", ROOT / "cassettes").out
    assert "seed000/long" in out and "harness 0.62.0" in out


def test_show_bad_file_exit_2(cli, tmp_path: Path) -> None:
    p = tmp_path / "empty.cassette"
    p.write_bytes(b"")
    r = cli("show", p)
    assert r.code == 2 and "empty file" in r.err


def test_normalized_view_is_one_field_per_line_and_stable(cli) -> None:
    """The textconv layout: nested fields indented, a multi-line string one line per line behind a gutter."""
    target = ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette"
    out = cli("show", "--normalized", target).out
    assert out == cli("show", "--normalized", target).out
    lines = out.splitlines()
    assert "            | Write the summary under these exact section headings, omitting a section only if it has no content:" in lines
    assert any(line.strip() == 'part_kind: "user-prompt"' for line in lines)
    assert max(map(len, lines)) < 400  # no message squeezed onto one line

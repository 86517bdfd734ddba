"""Hostile cassettes through every command: escaped output, one error line per bad file, bounded show.

Regressions of issue 13: escape sequences, NUL, CR and newlines in cassette fields reached
the terminal raw (and forged output lines); JUnit became invalid XML; one bad cassette
aborted a whole ``replay run``/``check``; ``show`` printed 962 MB for a 2.3 MB file.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import hostile as h
import pytest
from conftest import ROOT

from replay._untrusted import visible

TOOL_CALL = ROOT / "cassettes" / "coverage" / "tool_call.cassette"
OSC = h.HOSTILE_TEXT[0]
FORGE = h.HOSTILE_TEXT[1]


def hostile_cassette() -> bytes:
    """tool_call with hostile text in the fields issue 13 names (roles, tool names and ids,
    model names, observation names, error messages, content, outputs)."""
    w = h.wire(TOOL_CALL.read_bytes())
    w["exchanges"][0]["role"] = "main" + OSC
    w["exchanges"][1]["index"] = 0  # now the first call of role "main" (the loader checks ordinals)
    w["exchanges"][1]["model_name"] = FORGE
    w["exchanges"][1]["error"] = {"type": "x.Err\r\x1b[1A", "message": FORGE + "\u2028\u202e"}
    w["messages"][1]["parts"][0]["tool_name"] = "add" + OSC
    w["messages"][1]["parts"][0]["tool_call_id"] = FORGE
    w["messages"][0]["parts"][0]["content"] = h.HOSTILE_TEXT[3] + FORGE + "\x00"
    w["header"]["harness_version"] = FORGE
    w["header"]["roles"]["main\x1b[2J"] = "evil\nFORGED"
    w["observations"] = [{"name": "obs" + FORGE, "value": OSC}]
    w["outcome"] = {"status": "ok", "output": FORGE + OSC}
    return h.pack(w)


def assert_clean(text: str, what: str) -> None:
    result = h.CommandResult((what,), 0, text, "", 0.0)
    assert not result.escapes(), (what, result.escapes()[:3])


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cassettes"
    (d / "coverage").mkdir(parents=True)
    (d / "coverage" / "tool_call.cassette").write_bytes(hostile_cassette())
    return d


def test_every_text_command_escapes_cassette_strings(cli, hostile_dir: Path, tmp_path: Path) -> None:
    bad = hostile_dir / "coverage" / "tool_call.cassette"
    runs: dict[str, Any] = {
        "show": cli("show", bad),
        "show --normalized": cli("show", "--normalized", bad),
        "show --format json": cli("show", "--format", "json", bad),
        "ls": cli("ls", hostile_dir),
        "check": cli("check", bad),
        "diff": cli("diff", TOOL_CALL, bad),
        "run": cli("run", "coverage/tool_call", "--cassettes", hostile_dir, "--out", tmp_path / "out", cwd=ROOT),
    }
    for what, r in runs.items():
        assert r.code in (0, 1), (what, r.err)
        assert_clean(r.out + r.err, what)
    assert "\\x1b]0;pwned" in runs["show"].out  # shown, not dropped
    assert json.loads(runs["show --format json"].out)["outcome"]["output"] == FORGE + OSC


@pytest.mark.parametrize("fmt", ["json", "markdown", "junit"])
def test_report_formats_escape_cassette_strings(cli, hostile_dir: Path, fmt: str, tmp_path: Path, monkeypatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = cli("diff", TOOL_CALL, hostile_dir / "coverage" / "tool_call.cassette", "--format", fmt)
    assert r.code == 1
    assert_clean(r.out, fmt)
    if summary.exists():  # `diff A B --format json` writes none
        assert_clean(summary.read_text(), "step summary")
    if fmt == "junit":
        ET.fromstring(r.out.split("\n", 1)[1])  # parses: no XML-illegal characters
    if fmt == "markdown":
        assert "<script>" not in r.out


def test_junit_of_a_run_is_valid_xml(cli, hostile_dir: Path, tmp_path: Path) -> None:
    r = cli("run", "coverage/tool_call", "--cassettes", hostile_dir, "--out", tmp_path / "o", "--format", "junit", cwd=ROOT)
    ET.fromstring(r.out.split("\n", 1)[1])
    assert_clean(r.out, "junit")


# --------------------------------------------------------------------------- one bad file


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Copies of three bundled cassettes, one of them then broken in shape (valid msgpack)."""
    d = tmp_path / "mixed"
    for sid in ("coverage/tool_call", "coverage/iter", "coverage/stream"):
        (d / sid).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "cassettes" / f"{sid}.cassette", d / f"{sid}.cassette")
    w = h.wire((d / "coverage/iter.cassette").read_bytes())
    w["messages"][0]["parts"] = None
    (d / "coverage/iter.cassette").write_bytes(h.pack(w))
    return d


def test_check_judges_the_others_and_exits_2(cli, mixed: Path) -> None:
    r = cli("check", mixed)
    assert r.code == 2
    assert "ERROR" in r.out and "messages[0].parts: expected an array" in r.out
    assert r.out.count("OK ") == 2 and "3 cassettes: 2 ok, 0 with violations, 1 error" in r.out


def test_diff_of_directories_judges_the_others_and_exits_2(cli, mixed: Path) -> None:
    r = cli("diff", ROOT / "cassettes", mixed, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2
    assert doc["scenarios"]["coverage/iter"]["status"] == "error"
    assert doc["scenarios"]["coverage/tool_call"]["status"] == "same"


def test_ls_and_show_of_several(cli, mixed: Path) -> None:
    r = cli("ls", mixed)
    assert r.code == 2 and r.out.count("\n") == 3 and "ERROR" in r.out
    r = cli("show", mixed / "coverage/tool_call.cassette", mixed / "coverage/iter.cassette", mixed / "coverage/stream.cassette")
    assert r.code == 2 and r.err.count("replay: error:") == 1 and "coverage/iter.cassette" in r.err
    assert "cassette: coverage/tool_call" in r.out and "cassette: coverage/stream" in r.out


def test_run_judges_the_others_and_exits_2(cli, mixed: Path, tmp_path: Path) -> None:
    r = cli("run", "coverage/tool_call", "coverage/iter", "--cassettes", mixed, "--out", tmp_path / "o", cwd=ROOT)
    assert r.code == 2, r.out + r.err
    assert "SAME     coverage/tool_call" in r.out and "ERROR    coverage/iter" in r.out
    assert "1 same, 0 changed, 1 error" in r.out


def test_unreadable_cassette_in_run_exits_2(cli, tmp_path: Path) -> None:
    d = tmp_path / "c" / "coverage"
    d.mkdir(parents=True)
    (d / "tool_call.cassette").write_bytes(b"\xc1replay\nnot msgpack")
    r = cli("run", "coverage/tool_call", "--cassettes", tmp_path / "c", "--out", tmp_path / "o", cwd=ROOT)
    assert r.code == 2 and "(corrupted)" in r.out


# --------------------------------------------------------------------------- bounded show


def expanding_cassette() -> bytes:
    """~40 KB on disk; each of 600 requests lists the same 200 messages: its views are megabytes."""
    messages = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"m{i} " * 20}]} for i in range(200)]
    return h.pack(
        {
            "format": "harness-replay",
            "version": 1,
            "header": {"scenario_id": "big/one"},
            "messages": messages,
            "exchanges": [{"seq": i, "role": "main", "index": i, "kind": "request", "messages": [0, 200]} for i in range(600)],
        }
    )


@pytest.mark.parametrize("args", [(), ("--normalized",), ("--format", "json")])
def test_show_output_is_bounded_and_says_so(cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    from replay.show import output_budget

    data = expanding_cassette()
    path = tmp_path / "big.cassette"
    path.write_bytes(data)
    r = cli("show", *args, path)
    assert len(r.out) <= output_budget(len(data)) + 200
    if "json" in args:
        assert r.code == 2 and "truncated" in r.err and "--full" in r.err
    else:
        assert r.code == 0 and r.out.rstrip().endswith("replay show --full prints all of it")


def test_show_full_prints_everything(cli, tmp_path: Path) -> None:
    path = tmp_path / "big.cassette"
    path.write_bytes(expanding_cassette())
    r = cli("show", "--full", path)
    assert r.code == 0 and "truncated" not in r.out and r.out.count("  [199] request") == 600


def test_secret_dense_cassettes_are_scrubbed_whole(cli, tmp_path: Path) -> None:
    """Thousands of distinct secrets, or of a replay's placeholders, in one text: every value scrubbed, every
    placeholder kept (`make reliability` runs 20,000 of each through every command within its CPU budget)."""
    import random
    import re

    (values, held, prefixes) = h.secret_dense(h.base_bytes(h.BASES[0]), random.Random(7), count=2_000)
    path = tmp_path / "dense.cassette"
    path.write_bytes(values[1])
    r = cli("show", "--format", "json", path)
    assert r.code == 0 and "password=" in r.out
    assert not re.search(r"password=[A-Za-z]{16}", r.out) and len(set(re.findall(r"<secret:password:\d+>", r.out))) == 2_000
    path.write_bytes(held[1])
    r = cli("show", "--format", "json", path)
    assert r.code == 0 and len(set(re.findall(r"<secret:password:\d+>", r.out))) == 2_000
    path.write_bytes(prefixes[1])
    r = cli("show", "--format", "json", path)
    assert r.code == 0 and "sk-sk-sk-" in r.out and "<secret:" not in r.out  # no digit: prose, not a key


def test_escape_helper_is_what_show_uses() -> None:
    from replay.cassette import loads
    from replay.show import render_text

    text = render_text(loads(hostile_cassette()))
    assert text == "".join(visible(line) + "\n" for line in text.splitlines())


def test_html_report_escapes_cassette_strings() -> None:
    from replay.reporter.html import render_html

    sid = "evil/<script>alert(1)</script>"
    doc = {
        "versions": [{"spec": "0.62.0", "label": "0.62.0\x1b[2J"}],
        "scenarios": {sid: {"0.62.0": {"status": "error", "error": "boom\x1b]0;x\x07 <img src=x>"}}},
    }
    page = render_html(doc)
    assert "<script>alert" not in page and "<img src" not in page
    assert_clean(page.replace("\n", ""), "html")


@pytest.mark.parametrize("fmt", ["text", "markdown", "junit"])
def test_no_output_line_starts_a_github_workflow_command(cli, tmp_path: Path, fmt: str, monkeypatch) -> None:
    """A role named ``::stop-commands::x`` started the lines of `replay diff` (``::stop-commands::x[0] changed``):
    GitHub Actions reads such a line as a workflow command, and this one silenced the job's own annotations."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    sides = []
    for n, suffix in enumerate(("", " changed")):
        w = h.wire(TOOL_CALL.read_bytes())
        for ex in w["exchanges"]:
            ex["role"] = "::stop-commands::x" if ex["role"] == "main" else ex["role"]
        w["header"]["roles"] = {"##[add-mask]y": "m"}
        w["messages"][0]["parts"][0]["content"] += suffix
        sides.append(tmp_path / f"{n}.cassette")
        sides[-1].write_bytes(h.pack(w))
    for args in (("diff", *sides, "--format", fmt), ("check", sides[1], "--format", fmt)):
        r = cli(*args)
        assert r.code == (1 if args[0] == "diff" else 0), (args, r.err)
        lines = [ln for ln in (r.out + r.err).splitlines() if ln.lstrip().startswith(("::", "##["))]
        assert all(ln.startswith("::error file=") for ln in lines), lines  # only the tool's own annotation
        assert "x3a:stop-commands::x[0]" in r.out or fmt == "junit" or args[0] == "check"  # still named

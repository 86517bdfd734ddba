"""`replay diff`: structural comparison of two cassettes, across harness versions without noise."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

OLD = ROOT / "tests" / "fixtures" / "harness-0.54.0"
NEW = ROOT / "cassettes"
NOISE = ("timestamp", "run_id", "conversation_id", "created_at", "provider_response_id", "pyd_ai_", "history_digest")


def test_identical_cassettes_exit_0(cli) -> None:
    r = cli("diff", NEW / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette")
    assert r.code == 0 and "SAME" in r.out


def test_versions_differ_for_real_without_noise(cli) -> None:
    r = cli("diff", OLD / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette", "--format", "json")
    assert r.code == 1
    doc = json.loads(r.out)
    assert doc["changed"] and doc["requests"]
    paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
    assert paths and not [p for p in paths if any(n in p for n in NOISE)]
    assert [m["estimate"][0] for m in doc["main_requests"]] != [m["estimate"][1] for m in doc["main_requests"]]


def test_schema_growth_and_ids_are_not_reported(cli) -> None:
    """Tool-calling and streamed runs change nothing semantic between 0.54 and 0.62."""
    for sid in ("coverage/tool_call", "coverage/stream"):
        r = cli("diff", OLD / f"{sid}.cassette", NEW / f"{sid}.cassette", "--format", "json")
        doc = json.loads(r.out)
        paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
        assert not [p for p in paths if any(n in p for n in NOISE)], paths


def test_ignore_rules_from_flag(cli) -> None:
    r = cli(
        "diff", OLD / "coverage/tool_call.cassette", NEW / "coverage/tool_call.cassette",
        "--ignore", "usage", "--ignore", "parameters", "--ignore", "model", "--format", "json",
    )
    doc = json.loads(r.out)
    paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
    assert not [p for p in paths if ".usage" in p or ".parameters" in p]


def test_markdown_is_pasteable(cli) -> None:
    r = cli("diff", OLD / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette", "--format", "markdown")
    assert r.out.startswith("### harness-replay diff") and "| `seed000/long` | ⚠️ changed |" in r.out


def test_bad_cassette_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.cassette"
    bad.write_bytes(b"\xc1replay\n\x00garbage")
    r = cli("diff", bad, NEW / "seed000" / "long.cassette")
    assert r.code == 2 and r.err.count("\n") == 1 and str(bad) in r.err and "Traceback" not in r.err


def test_directories_are_paired_by_scenario(cli, tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "other"
    shutil.copytree(OLD, other)
    (other / "seed000" / "long.cassette").unlink()
    r = cli("diff", OLD, other, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2  # a cassette missing on one side is an error (README: exit 2), the others still compared
    assert doc["scenarios"]["seed000/long"]["status"] == "error"
    assert doc["scenarios"]["coverage/tool_call"]["status"] == "same"
    assert cli("diff", OLD, OLD).code == 0
    mixed = cli("diff", OLD, NEW / "seed000" / "long.cassette")
    assert mixed.code == 2 and "directory" in mixed.err


def test_another_python_minor_is_a_warning_not_a_change(cli, tmp_path: Path) -> None:
    from replay.cassette import load, save

    c = load(NEW / "seed000" / "long.cassette")
    c.header.python_version = "3.12.1"
    other = save(c, tmp_path / "py312.cassette")
    r = cli("diff", NEW / "seed000" / "long.cassette", other)
    assert r.code == 0 and "SAME" in r.out
    assert "replayed on Python 3.12.1: a difference may come from the Python version" in r.out
    c.header.python_version = "3.11.99"  # same minor: nothing to say
    assert "Python" not in cli("diff", NEW / "seed000" / "long.cassette", save(c, tmp_path / "p.cassette")).out

"""`replay check`: invariants on one recording, with the seed figures computed by the tool."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

from replay import invariants
from replay.cassette import load

CAS = ROOT / "cassettes"


def violations(cli, *targets: str | Path) -> list[dict]:
    r = cli("check", *targets, "--format", "json")
    assert r.code in (0, 1), r.err
    return json.loads(r.out)["violations"]


def test_seed000_long_compaction_grew_the_request(cli) -> None:
    (v,) = [v for v in violations(cli, CAS / "seed000" / "long.cassette") if v["invariant"] == "compaction_grew_request"]
    c = load(CAS / "seed000" / "long.cassette")
    assert v["evidence"]["before"] == c.runs[0].estimate == 19
    assert v["evidence"]["after"] == [ex.estimate for ex in c.exchanges if ex.role == "main"] == [889, 887, 889]
    assert v["role"] == "main"


def test_seed001_content_lost_names_the_messages(cli) -> None:
    (v,) = violations(cli, "seed001/keep_user_messages_true")
    assert v["invariant"] == "content_lost" and v["evidence"]["lost"] == ["A9", "U10", "A10"]
    assert "A9, U10, A10" in cli("check", "seed001/keep_user_messages_true").out


def test_each_json_violation_names_its_scenario_and_file(cli) -> None:
    """Two files of one scenario (two versions' results, two trials) checked together stay apart."""
    old = ROOT / "tests" / "fixtures" / "harness-0.54.0" / "seed000" / "long.cassette"
    got = violations(cli, CAS / "seed000" / "long.cassette", old, CAS / "seed000" / "short.cassette")
    assert {v["cassette"] for v in got if v["scenario_id"] == "seed000/long"} == {str(CAS / "seed000" / "long.cassette"), str(old)}
    assert {v["cassette"] for v in got if v["scenario_id"] == "seed000/short"} == {str(CAS / "seed000" / "short.cassette")}


def test_controls_are_clean(cli) -> None:
    r = cli("check", "seed001/keep_user_messages_false", "seed000/below_trigger", "seed000/reminders_none")
    assert r.code == 0 and "3 ok" in r.out


def test_user_checks_from_pyproject(cli, project: Path) -> None:
    (project / "mychecks.py").write_text(
        "from replay.invariants import Violation, register\n"
        "@register('too_many_requests')\n"
        "def too_many(cassette):\n"
        "    if len(cassette.exchanges) > 2:\n"
        "        yield Violation('too_many_requests', 'main', None, f'{len(cassette.exchanges)} requests', {})\n"
    )
    (project / "pyproject.toml").write_text('[tool.replay]\nchecks = ["mychecks"]\n')
    try:
        found = violations(cli, CAS / "seed000" / "long.cassette")
    finally:  # the CLI runs in-process here: leave the registry as it was for the other tests
        invariants._REGISTRY.pop("too_many_requests", None)
    assert any(v["invariant"] == "too_many_requests" and v["message"] == "6 requests" for v in found)


def test_user_checks_load_from_the_project_root_below_it(cli, project: Path, monkeypatch) -> None:
    """From `tests/`, `[tool.replay] checks = ["mychecks"]` was `cannot import check module 'mychecks'`:
    the working directory was put on sys.path, not the project's folder, which every other setting means."""
    import sys

    (project / "rootchecks.py").write_text(
        "from replay.invariants import Violation, register\n"
        "@register('too_many_requests_below')\n"
        "def too_many(cassette):\n"
        "    yield Violation('too_many_requests_below', 'main', None, f'{len(cassette.exchanges)} requests', {})\n"
    )
    (project / "pyproject.toml").write_text('[tool.replay]\nchecks = ["rootchecks"]\n')
    (project / "tests").mkdir()
    monkeypatch.chdir(project / "tests")
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        found = violations(cli, CAS / "seed000" / "long.cassette")
    finally:
        invariants._REGISTRY.pop("too_many_requests_below", None)
        sys.modules.pop("rootchecks", None)
    assert any(v["invariant"] == "too_many_requests_below" and v["message"] == "6 requests" for v in found)


def test_unknown_target_exit_2(cli) -> None:
    r = cli("check", "nope/nothing")
    assert r.code == 2 and "nope/nothing" in r.err


def test_a_check_that_crashes_is_an_error_naming_file_and_check_not_a_violation(cli, project: Path) -> None:
    (project / "crashing.py").write_text(
        "from replay.invariants import register\n"
        "@register('crashes_on_everything')\n"
        "def crash(cassette):\n"
        "    raise KeyError('parts')\n"
    )
    (project / "pyproject.toml").write_text('[tool.replay]\nchecks = ["crashing"]\n')
    path = CAS / "seed000" / "long.cassette"
    try:
        text = cli("check", path)
        doc = cli("check", path, "--format", "json")
    finally:
        invariants._REGISTRY.pop("crashes_on_everything", None)
    assert text.code == 2 and doc.code == 2
    assert "seed000/long.cassette: check crashes_on_everything failed: KeyError: 'parts'" in text.out
    assert "ERROR" in text.out and "compaction_grew_request" in text.out  # the other checks still reported
    found = json.loads(doc.out)["violations"]
    assert [v["invariant"] for v in found] == ["compaction_grew_request"]


def test_ignore_leaves_named_invariants_out(cli) -> None:
    target = CAS / "seed001" / "keep_user_messages_true.cassette"
    found = {v["invariant"] for v in violations(cli, target)}
    assert "content_lost" in found
    left = {v["invariant"] for v in violations(cli, target, "--ignore", "content_lost")}
    assert left == found - {"content_lost"}
    r = cli("check", target, "--ignore", "*")
    assert r.code == 0 and "OK" in r.out


def test_user_checks_apply_to_a_replay_and_a_diff_too(cli, project: Path, write_scenario) -> None:
    """`[tool.replay] checks` were loaded by `check` only: `run` and `diff` graded the built-in checks and
    said SAME where the project's own check found a new violation (and the matrix runs `run` per cell)."""
    (project / "replaychecks_on_replays.py").write_text(
        "from replay.invariants import Violation, register\n"
        "@register('no_replays')\n"
        "def no_replays(cassette):\n"
        "    if cassette.header.mode == 'replay':\n"
        "        yield Violation('no_replays', 'main', None, 'a replay', {})\n"
    )
    write_scenario()
    assert cli("record").code == 0
    (project / "pyproject.toml").write_text('[tool.replay]\nchecks = ["replaychecks_on_replays"]\n')
    try:
        r = cli("run", "--out", project / "out")
        d = cli("diff", project / "cassettes" / "simple" / "compact.cassette", project / "out" / "simple" / "compact.cassette")
    finally:
        invariants._REGISTRY.pop("no_replays", None)
    assert r.code == 1 and "violation (new): no_replays main: a replay" in r.out, r.out
    assert d.code == 1 and "no_replays" in d.out, d.out
    (project / "pyproject.toml").write_text('[tool.replay]\nchecks = ["no_such_module_here"]\n')
    r = cli("run")
    assert r.code == 2 and "cannot import check module 'no_such_module_here'" in r.err


def test_one_scenario_in_two_folders_is_told_apart(cli, tmp_path: Path) -> None:
    """`check cassettes .replay/results` printed `VIOLATED seed000/long` twice, not saying which file was which."""
    import shutil

    for d in ("a", "b"):
        (tmp_path / d / "seed000").mkdir(parents=True)
        shutil.copy(CAS / "seed000" / "long.cassette", tmp_path / d / "seed000" / "long.cassette")
    r = cli("check", tmp_path / "a", tmp_path / "b")
    lines = [line for line in r.out.splitlines() if line.startswith("VIOLATED")]
    assert len(lines) == 2 and lines[0] != lines[1] and str(tmp_path / "a") in lines[0], r.out
    single = cli("check", CAS / "seed000" / "long.cassette").out.splitlines()[0]
    assert single.rstrip() == "VIOLATED seed000/long"  # one of each: as before


def test_a_folder_without_cassettes_is_bad_input_not_a_pass(cli, project: Path) -> None:
    """`replay run` on a folder without scenarios exits 2; `check` on one without cassettes said
    `0 cassettes: 0 ok, 0 with violations, 0 error` and exited 0, so a CI step given the wrong folder passed."""
    (project / "cassettes" / "empty").mkdir(parents=True)
    for args in (("cassettes",), ("cassettes/empty",), ("--format", "json", "cassettes/empty")):
        r = cli("check", *args)
        assert r.code == 2 and r.out == "", (args, r.out)
        assert r.err.strip().splitlines() == [f"replay: error: {args[-1]}: no cassettes in this directory"]


def test_ignoring_a_check_that_does_not_exist_is_bad_input(cli) -> None:
    """`check --ignore content_lsot` left content_lost on and said nothing of the typo."""
    r = cli("check", "--ignore", "content_lsot", "seed001/keep_user_messages_true")
    assert r.code == 2 and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert line.startswith("replay: error: --ignore 'content_lsot': no such check (known: ") and "content_lost" in line
    assert cli("check", "--ignore", "content_*", "seed001/keep_user_messages_true").code == 0  # a glob matching one


def test_a_cassette_that_cannot_be_checked_is_in_the_json_as_in_every_other_format(cli, tmp_path: Path) -> None:
    """An unreadable cassette beside a good one: text and Markdown said `1 error`, exit 2, but the JSON had
    no trace of it and said "changed": false."""
    import shutil

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bad.cassette").write_text("garbage")
    shutil.copy(CAS / "seed000" / "long.cassette", tmp_path / "s" / "long.cassette")
    r = cli("check", tmp_path, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2 and doc["changed"] is True
    (error,) = doc["errors"]
    assert error["cassette"] == str(tmp_path / "s" / "bad.cassette") and "not a harness-replay cassette" in error["error"]
    assert doc["summary"] == {"ok": 0, "violated": 1, "error": 1}
    assert "1 error" in cli("check", tmp_path, "--format", "markdown").out.splitlines()[0]

"""`replay check`: invariants on one recording, with the seed figures computed by the tool."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

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
    found = violations(cli, CAS / "seed000" / "long.cassette")
    assert any(v["invariant"] == "too_many_requests" and v["message"] == "6 requests" for v in found)


def test_unknown_target_exit_2(cli) -> None:
    r = cli("check", "nope/nothing")
    assert r.code == 2 and "nope/nothing" in r.err

"""`replay ls`: several paths (files or directories), --cassettes and --format like the other commands."""

from __future__ import annotations

import json

from conftest import ROOT

CAS = ROOT / "cassettes"


def test_several_paths_files_and_directories(cli) -> None:
    r = cli("ls", CAS / "seed000", CAS / "seed001" / "keep_user_messages_true.cassette")
    assert r.code == 0, r.err
    ids = [line.split()[1] for line in r.out.splitlines()]
    assert "seed001/keep_user_messages_true" in ids and "seed000/long" in ids
    assert not any(i.startswith("seed001/") and i != "seed001/keep_user_messages_true" for i in ids)


def test_cassettes_option_and_json(cli) -> None:
    rows = json.loads(cli("ls", "--cassettes", CAS / "seed000", "--format", "json").out)
    long = next(r for r in rows if r["scenario_id"] == "seed000/long")
    assert long["roles"] == {"main": 3, "summarizing_compaction": 3} and long["outcome"] == "ok"


def test_missing_path_is_one_line_exit_2(cli) -> None:
    r = cli("ls", "no/such/dir")
    assert r.code == 2 and r.err.count("\n") == 1 and "no/such/dir: no such cassette or directory" in r.err


def test_ls_scrubs_what_it_prints_as_show_does(cli, tmp_path) -> None:
    """A cassette whose header fields hold a key: `show` and `check` printed `<secret:…>`, `ls` the key."""
    from replay.cassette import load, save

    c = load(CAS / "seed000" / "long.cassette")
    token = "ghp_" + "Ab3d" * 9
    c.header.harness_version = token
    path = save(c, tmp_path / "s.cassette")
    for args in ((), ("--format", "json")):
        r = cli("ls", path, *args)
        assert r.code == 0 and token not in r.out and "<secret:" in r.out, r.out

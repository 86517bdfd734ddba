"""`replay record`: targets, overwrite protection, and one-line errors."""

from __future__ import annotations

from pathlib import Path

from replay.cassette import load


def test_records_a_scenario_file(cli, write_scenario, project: Path) -> None:
    path = write_scenario()
    r = cli("record", path)
    assert r.code == 0, r.err
    c = load(project / "cassettes" / "simple" / "compact.cassette")
    roles = {ex.role for ex in c.exchanges}
    assert roles == {"main", "summarizing_compaction"}
    assert c.header.scenario_id == "simple/compact" and c.header.harness_version
    assert c.observations[0].name == "final_messages"


def test_default_target_is_the_scenarios_directory_and_ids_work(cli, write_scenario, project: Path) -> None:
    write_scenario()
    assert cli("record").code == 0
    assert (project / "cassettes" / "simple" / "compact.cassette").exists()
    r = cli("record", "simple/compact", "--cassettes", "other")
    assert r.code == 0 and (project / "other" / "simple" / "compact.cassette").exists()


def test_refuses_to_overwrite_without_force(cli, write_scenario, project: Path) -> None:
    write_scenario()
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    before = target.read_bytes()
    r = cli("record")
    assert "skipped" in r.out and "--force" in r.out
    assert target.read_bytes() == before
    write_scenario(keep=3)
    r = cli("record", "--force")
    assert "recorded" in r.out and target.read_bytes() != before


def test_unknown_target_is_one_line_exit_2(cli, project: Path) -> None:
    r = cli("record", "no/such/scenario")
    assert r.code == 2
    assert r.err.strip().count("\n") == 0 and "no/such/scenario" in r.err and "Traceback" not in r.err


def test_broken_scenario_file_names_the_file(cli, project: Path) -> None:
    bad = project / "scenarios" / "broken.py"
    bad.write_text("def oops(:\n")
    r = cli("record", bad)
    assert r.code == 2 and "broken.py" in r.err and "SyntaxError" in r.err
    assert not (project / "cassettes").exists() or not any((project / "cassettes").rglob("*.cassette"))

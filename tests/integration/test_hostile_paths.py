"""Scenario ids name files: an unsafe one is refused where it is defined, and no write leaves its folder.

Regressions of issue 13: an id ``../../../x`` or ``/abs`` wrote outside ``cassettes/`` and
``--out`` in record, run and run --accept (a plain run overwrote the recording with the
replay); a NUL in an id was a traceback; an unwritable --out was a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SCENARIO = '''
from replay import Run, scenario

@scenario({sid!r})
async def s(run: Run) -> str:
    return "ok"
'''


@pytest.mark.parametrize("sid", ["../../../escaped", "/tmp/replay-abs-escape", "a\x00b", "a/../../b", "C:/x", "a\\\\b"])
def test_unsafe_scenario_ids_are_refused_at_definition(cli, project: Path, sid: str) -> None:
    (project / "scenarios" / "bad.py").write_text(SCENARIO.format(sid=sid))
    for cmd in ("record", "run"):
        r = cli(cmd)
        assert r.code == 2, (cmd, r.out, r.err)
        assert "scenario id" in r.out + r.err and "Traceback" not in r.out + r.err
    assert not [p for p in project.rglob("*") if p.suffix == ".cassette"]
    for escaped in (project.parents[2] / "escaped.cassette", project.parent / "b.cassette",
                    Path("/tmp/replay-abs-escape.cassette")):  # fmt: skip
        assert not escaped.exists()


def test_a_symlinked_folder_pointing_outside_is_not_written_through(cli, project: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (project / "scenarios" / "ok.py").write_text(SCENARIO.format(sid="linked/s"))
    (project / "cassettes").mkdir()
    (project / "cassettes" / "linked").symlink_to(outside, target_is_directory=True)
    r = cli("record")
    assert r.code == 2 and "outside" in r.err
    assert not list(outside.iterdir())


def test_unwritable_out_is_one_line(cli, project: Path) -> None:
    (project / "scenarios" / "ok.py").write_text(SCENARIO.format(sid="ok/s"))
    assert cli("record").code == 0
    r = cli("run", "--out", "/dev/null/x")  # refused before any replay (0e92bfc: folder options checked first)
    assert r.code == 2 and "Traceback" not in r.out + r.err
    assert r.err == "replay: error: /dev/null/x: cannot be created: /dev/null is not a directory\n" and not r.out

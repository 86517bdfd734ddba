"""A writer killed at any point leaves the previous or the new cassette, never a torn one.

``bench/reliability.py`` runs the same loop with at least 100 kills.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import hostile
import torture

from replay.cassette import load


def test_sigkill_during_saves_never_tears_the_cassette(tmp_path: Path) -> None:
    a, b = torture.two_cassettes(hostile.REAL)
    stats = torture.kill_loop(tmp_path, a, b, kills=12, seed=7)
    assert stats.kills == 12
    assert stats.intact == stats.kills
    assert stats.temps_left == 0
    assert stats.temps_cleaned == stats.mid_write


def test_next_record_removes_temps_a_killed_writer_left(
    write_scenario: Callable[..., Path], cli: Callable[..., Any], project: Path
) -> None:
    write_scenario()
    cassettes = project / "cassettes"
    cassettes.mkdir()
    (cassettes / "simple").mkdir()
    stale = [cassettes / ".compact.cassette.abc123.tmp", cassettes / "simple" / ".compact.cassette.x9.tmp"]
    for p in stale:
        p.write_bytes(b"half a cassette")
    result = cli("record")
    assert result.code == 0, result.err
    assert not any(p.exists() for p in stale)
    assert load(cassettes / "simple" / "compact.cassette").header.scenario_id == "simple/compact"


def test_the_pytest_plugin_removes_temps_a_killed_writer_left(tmp_path: Path) -> None:
    """Regression: a pytest run killed while saving left `.test_x.cassette.<pid>.<rand>.tmp` beside the cassettes,
    and every later pytest run left it there (only `replay record` / `run --accept` cleaned), in `git status` for good."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from replay import _pytest_cassette

    folder = tmp_path / "cassettes" / "test_mod"
    folder.mkdir(parents=True)
    stale = folder / ".test_y.cassette.999999999.abc123.tmp"  # a pid no process has: its writer is dead
    stale.write_bytes(b"half a cassette")
    test = _pytest_cassette.TestCassette("test_mod.py::test_x", folder / "test_x.cassette", "all")
    with test.active():
        Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run_sync("hi")
    assert test.finish(True) == ("recorded", [])
    assert load(folder / "test_x.cassette").exchanges
    assert not stale.exists()

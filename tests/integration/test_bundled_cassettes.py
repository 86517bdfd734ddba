"""The bundled cassettes match the bundled scenarios, so a fresh clone's ``make demo`` warns about nothing.

A scenario edited without re-recording (``make record``) fails here, naming the scenario.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT

from replay.cassette import cassette_path, load
from replay.scenario import discover


def test_every_bundled_cassette_is_recorded_from_its_scenarios_current_source() -> None:
    scenarios = discover([str(ROOT / "scenarios")], ROOT / "scenarios")
    assert len(scenarios) >= 20
    stale, missing = [], []
    for sc in scenarios:
        path = cassette_path(ROOT / "cassettes", sc.id)
        if not path.exists():
            missing.append(sc.id)
        elif load(path).header.source_hash != sc.source_hash:
            stale.append(sc.id)
    assert not missing, f"no bundled cassette for {missing}: run `make record`"
    assert not stale, f"bundled cassettes older than their scenario's source: {stale}: run `make record`"



@pytest.mark.parametrize("replaying", [False, True], ids=["record", "replay"])
@pytest.mark.parametrize(("slowed", "turns"), [("main", 6), ("main", 40), ("trajectory_judge", 6), ("trajectory_judge", 40)])
def test_trajectory_judge_scenario_does_not_depend_on_the_event_loops_pace(
    monkeypatch: pytest.MonkeyPatch, replaying: bool, slowed: str, turns: int
) -> None:
    """The judge runs in a background task: its steer landed in whichever main request came after the task
    finished. The loop turns each side takes differ between Python minors (3.12's ``asyncio`` needs fewer
    than 3.11's), so the cassette recorded on 3.11 replayed ``changed`` on 3.12 and 3.13 (the steer in
    main[5], not main[6]) with nothing changed but the interpreter. One role held back by ``turns`` loop
    turns per request stands for another Python: recording and replay must still give the committed cassette."""
    import asyncio

    from replay._determinism import describe_difference
    from replay.recorder import Session, record
    from replay.replayer import replay

    real = Session.on_request

    async def on_request(self: Session, call: Any) -> Any:
        if call.role == slowed:
            for _ in range(turns):
                await asyncio.sleep(0)
        return await real(self, call)

    monkeypatch.setattr(Session, "on_request", on_request)
    (sc,) = [s for s in discover([str(ROOT / "scenarios")], ROOT / "scenarios") if s.id == "coverage/trajectory_judge"]
    committed = load(cassette_path(ROOT / "cassettes", sc.id))
    fresh = replay(sc, committed).result if replaying else record(sc)
    said = describe_difference(committed, fresh, ("the cassette", "this run"))
    assert said == "same requests and outcome; only the numbering of generated ids differs", said

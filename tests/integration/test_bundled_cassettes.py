"""The bundled cassettes match the bundled scenarios, so a fresh clone's ``make demo`` warns about nothing.

A scenario edited without re-recording (``make record``) fails here, naming the scenario.
"""

from __future__ import annotations

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

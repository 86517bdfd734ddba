"""The checks file what is alive as old (``gc.freeze`` then ``gc.unfreeze``) around their work.

That must not file the process's own young garbage with it: a reference cycle an agent run left
(pytest plugin, ``replay run``: one per scenario, then a load and a diff) moved to the oldest
generation uncounted, so no full collection came for it and a loop of 200 load+diff stages kept
700 MB of such cycles where it had kept 90 MB. Nor may it thaw what a user froze themselves.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.cassette import load, paused_gc
from replay.invariants import run_checks

_CASSETTE = Path(__file__).resolve().parents[2] / "cassettes" / "seed001" / "keep_messages_20_30_turns.cassette"


class _Node:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _collector() -> Iterator[None]:
    if not gc.isenabled():
        pytest.skip("the collector is disabled")
    gc.collect()
    yield
    gc.collect()


def _young_cycle() -> weakref.ref[_Node]:
    node = _Node()
    return weakref.ref(node)  # the cycle is garbage from here on, still in a young generation


@pytest.mark.parametrize("stage", ["paused", "load", "checks", "comparison"])
def test_a_cycle_made_before_a_stage_is_still_collected_young(stage: str) -> None:
    from replay import _pipeline  # imported first: an import's allocations would collect the cycle

    other = _CASSETTE.parent / "keep_user_messages_false.cassette"
    cycle = _young_cycle()
    if stage == "paused":
        with paused_gc():
            pass
    elif stage == "load":
        load(_CASSETTE)
    elif stage == "checks":
        run_checks(load(_CASSETTE))
    else:  # `replay diff`: the checks freeze what is alive, with the collector paused around the comparison
        _pipeline.compare_files(_CASSETTE, other)
    gc.collect(1)
    assert cycle() is None


def _tracked(o: object) -> bool:
    """Whether ``o`` is in a generation the collector walks (a frozen object is in none of them)."""
    return any(x is o for x in gc.get_objects())


def test_a_users_frozen_objects_stay_frozen() -> None:
    mine = [_Node()]
    gc.freeze()
    try:
        assert not _tracked(mine)
        with paused_gc():
            pass
        assert not _tracked(mine)
        run_checks(load(_CASSETTE))
        assert not _tracked(mine)
    finally:
        gc.unfreeze()


def test_the_checks_ask_for_the_freeze_count_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gc.get_freeze_count`` walks every frozen object; inside the checks that is the whole heap,
    frozen by ``_results`` itself (≈ 5 ms in a test process, asked once per stage it had doubled the
    unit suite). Only ``_results`` asks, before it freezes."""
    c = load(_CASSETTE)
    real = gc.get_freeze_count
    asked: list[int] = []

    def counted() -> int:
        asked.append(1)
        return real()

    monkeypatch.setattr(gc, "get_freeze_count", counted)
    run_checks(c)
    assert len(asked) == 1


@pytest.mark.parametrize("stage", ["paused", "checks"])
def test_a_cycle_made_during_a_stage_is_collected_young(stage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Garbage a stage makes (a hostile cassette's errors) must stay where a young collection finds it:
    filed old uncounted, no full collection came for it (6,000 hostile commands in one process: 126 → 234 MB)."""
    made: list[weakref.ref[_Node]] = []
    if stage == "paused":
        with paused_gc():
            made.append(_young_cycle())
    else:
        import replay.invariants as inv

        monkeypatch.setitem(inv._REGISTRY, "cycle", lambda c: made.append(_young_cycle()) or [])
        inv._results(load(_CASSETTE), ["cycle"])
    gc.collect(1)
    assert made[0]() is None


def _in_generation(o: object, generation: int) -> bool:
    return any(x is o for x in gc.get_objects(generation))


def test_a_large_stage_leaves_nothing_young_and_its_cycles_collected() -> None:
    """A stage that built more than ``_PROMOTE_AFTER`` objects collects the young generations on its
    way out: its garbage cycles are gone at once, and what it built is filed old (counted, as any
    collection files it), so the next stages' young collections do not walk it again."""
    from replay.cassette import _PROMOTE_AFTER

    made: list[weakref.ref[_Node]] = []
    with paused_gc():
        built = [{"parts": [i]} for i in range(_PROMOTE_AFTER)]
        made.append(_young_cycle())
    assert made[0]() is None  # no collection asked for here: paused_gc's own
    assert gc.get_count()[0] < 1_000
    assert not _in_generation(built, 0) and not _in_generation(built, 1) and _in_generation(built, 2)
    assert not _in_generation(built[-1], 0) and _in_generation(built[-1], 2)


def test_a_small_stage_collects_nothing_on_its_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage of a few objects (a small cassette: a matrix of thousands) asks for no collection."""
    asked: list[int] = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: asked.append(1) or real(*a))
    with paused_gc():
        kept = [{"parts": [i]} for i in range(1_000)]
    assert not asked and kept


def test_a_comparison_pauses_the_collector_once_for_all_its_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replay diff` pauses the collector around the whole comparison, not stage by stage: each
    stage's own collection on its way out (two loads, two normalisations, each side's checks)
    walked the loaded cassettes again (0.4 s of a 10,000-request diff's 6 s). Of two small
    cassettes one collection is asked for: of the caller's young garbage, before the comparison."""
    from replay import _pipeline

    asked: list[int] = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: asked.append(1) or real(*a))
    other = _CASSETTE.parent / "keep_user_messages_false.cassette"
    report = _pipeline.compare_files(_CASSETTE, other)
    assert report.status in ("same", "changed") and len(asked) <= 1
    assert gc.isenabled()


def test_a_cycle_made_during_a_comparison_is_collected_young(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the collector paused around the comparison, the checks must not freeze what the loads and
    the diff left: a cycle made there (a hostile cassette's errors) was filed old uncounted, and
    `make reliability`'s diff workers peaked at 525 MB instead of 134 MB."""
    from replay import _pipeline

    made: list[weakref.ref[_Node]] = []
    real = _pipeline.diff

    def diff(*args: object, **kwargs: object) -> object:
        made.append(_young_cycle())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_pipeline, "diff", diff)
    _pipeline.compare_files(_CASSETTE, _CASSETTE.parent / "keep_user_messages_false.cassette")
    gc.collect(1)
    assert made and made[0]() is None

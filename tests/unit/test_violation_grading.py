"""Per-version violations: the replay's own violations, each graded against the recording's
(new / worse / unchanged / better / gone), on real recordings of harness 0.54.0 and 0.62.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay import invariants
from replay._pipeline import compare_files
from replay.cassette import Cassette, iter_cassettes, load
from replay.invariants import Compared, Violation, _history, _messages, compare, compare_cassettes
from replay.matrix import _finish, cell_from_run, cell_lines
from replay.reporter import diff_lines, report_json

ROOT = Path(__file__).resolve().parents[2]
NEW = ROOT / "cassettes"  # recorded on 0.62.0
OLD = ROOT / "tests" / "fixtures" / "harness-0.54.0"


def grew(after: list[int], requests: list[int] | None = None) -> Violation:
    requests = requests or list(range(len(after)))
    return Violation(
        "compaction_grew_request", "main", requests[0], f"after {after}", {"after": after, "requests": requests},
        identity=("requests",), pair=(), measure={f"main[{i}]": a - 19 for i, a in zip(requests, after)},
    )


def lost(labels: list[str], index: int = 0) -> Violation:
    return Violation(
        "content_lost", "main", index, f"lost {labels}", {"lost": labels}, identity=("lost",),
        measure={label: 1 for label in labels},
    )


def statuses(graded: list[Compared]) -> list[tuple[str, str]]:
    return [(c.status, c.violation.invariant) for c in graded]


# --------------------------------------------------------------------------- grading rules


def test_grading_by_measure_and_by_identity() -> None:
    assert statuses(compare([grew([889])], [grew([897, 1793])])) == [("worse", "compaction_grew_request")]
    assert statuses(compare([grew([889, 887])], [grew([50])])) == [("better", "compaction_grew_request")]
    assert statuses(compare([grew([889])], [grew([889])])) == [("unchanged", "compaction_grew_request")]
    # a role-wide violation pairs by role even when its first grown request moved
    assert statuses(compare([grew([50], [1])], [grew([50, 50], [0, 1])])) == [("worse", "compaction_grew_request")]
    assert statuses(compare([], [lost(["A9"])])) == [("new", "content_lost")]
    assert statuses(compare([lost(["A9"])], [])) == [("gone", "content_lost")]
    # per-request violations pair by request: another request is another violation
    assert statuses(compare([lost(["A9"], 0)], [lost(["A9"], 1)])) == [("new", "content_lost"), ("gone", "content_lost")]
    worse = compare([lost(["A9", "U10"])], [lost(["A9", "U10", "U11"])])[0]
    assert worse.status == "worse" and worse.violation.evidence["new"] == ["U11"] and worse.is_change
    # without a measure, the identity decides: same name is unchanged, otherwise new + gone
    a = Violation("expectation", "scenario", None, "x", {"name": "x"}, ("name",), pair=("x",))
    b = Violation("expectation", "scenario", None, "y", {"name": "y"}, ("name",), pair=("y",))
    assert statuses(compare([a], [a])) == [("unchanged", "expectation")]
    assert [c.status for c in compare([a], [b])] == ["new", "gone"]


def test_compared_json_carries_both_sides() -> None:
    (c,) = compare([grew([889])], [grew([897])])
    doc = c.as_json()
    assert doc["status"] == "worse" and doc["slot"] == "compaction_grew_request main"
    assert doc["replay"]["evidence"]["after"] == [897] and doc["recording"]["evidence"]["after"] == [889]
    assert doc["evidence"] == doc["replay"]["evidence"]
    (gone,) = compare([grew([889])], [])
    assert gone.as_json()["replay"] is None and gone.as_json()["recording"]["evidence"]["after"] == [889]


# --------------------------------------------------------------------------- real recordings


def test_seed000_long_on_054_names_its_own_growth_worse_than_the_062_recording() -> None:
    """The acceptance figure: 897, 1793, 2691 on 0.54.0 against the recording's 889, 887, 889."""
    graded = compare_cassettes(load(NEW / "seed000" / "long.cassette"), load(OLD / "seed000" / "long.cassette"))
    assert graded.failures == []
    (c,) = graded.violations
    assert c.status == "worse" and c.replay is not None and c.recording is not None
    assert c.replay.evidence["after"] == [897, 1793, 2691] and c.recording.evidence["after"] == [889, 887, 889]
    assert c.replay.evidence["uncompacted"] == c.recording.evidence["uncompacted"] == [19, 21, 25]
    assert [v.invariant for v in graded.new] == ["compaction_grew_request"]


def test_seed000_long_the_other_way_round_is_better_and_itself_unchanged() -> None:
    old, new = load(OLD / "seed000" / "long.cassette"), load(NEW / "seed000" / "long.cassette")
    assert statuses(compare_cassettes(old, new).violations) == [("better", "compaction_grew_request")]
    same = compare_cassettes(new, new)
    assert statuses(same.violations) == [("unchanged", "compaction_grew_request")] and same.new == []


def test_seed001_on_054_new_growth_and_worse_loss_and_back_gone() -> None:
    new = load(NEW / "seed001" / "keep_user_messages_true.cassette")
    old = load(OLD / "seed001" / "keep_user_messages_true.cassette")
    forward = {c.violation.invariant: c for c in compare_cassettes(new, old).violations}
    assert forward["compaction_grew_request"].status == "new"
    assert forward["content_lost"].status == "worse"
    assert forward["content_lost"].violation.evidence["new"] == ["U11"]
    back = {c.violation.invariant: c.status for c in compare_cassettes(old, new).violations}
    assert back == {"compaction_grew_request": "gone", "content_lost": "better"}


def test_diff_report_lists_the_replays_own_violations_in_text_and_json() -> None:
    report = compare_files(NEW / "seed000" / "long.cassette", OLD / "seed000" / "long.cassette")
    assert report.status == "changed" and report.diff is not None
    text = "\n".join(diff_lines(report.diff))
    assert "violation (worse): compaction_grew_request main[0]: compaction grew the request: 19 tokens before, " \
        "897, 1793, 2691 after" in text
    # the side graded against by its label: `replay diff` of two files has no "recording" (both may be replays)
    assert "(harness 0.62.0: compaction grew the request: 19 tokens before, 889, 887, 889 after" in text
    doc = report_json(report)
    (v,) = doc["violations"]
    assert v["status"] == "worse" and v["evidence"]["after"] == [897, 1793, 2691]
    assert v["recording"]["evidence"]["after"] == [889, 887, 889]
    assert [n["invariant"] for n in doc["new_violations"]] == ["compaction_grew_request"]
    # a replay equal to its recording: status same, its known violation still shown, as unchanged
    same = compare_files(NEW / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette")
    assert same.status == "same" and same.diff is not None
    assert [line.split(":")[0] for line in diff_lines(same.diff) if line.startswith("violation")] == [
        "violation (unchanged)"
    ]


def test_matrix_cell_shows_own_violations_and_those_in_every_version() -> None:
    run_054 = report_json(compare_files(NEW / "seed000" / "long.cassette", OLD / "seed000" / "long.cassette"))
    run_062 = report_json(compare_files(NEW / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette"))
    row = {"0.54.0": cell_from_run(run_054), "0.62.0": cell_from_run(run_062)}
    result = _finish({"scenarios": {"seed000/long": row}})
    cells = result["scenarios"]["seed000/long"]
    lines_054 = cell_lines(cells["0.54.0"])
    assert any(
        line.startswith("violation (worse, every version): compaction_grew_request main[0]: ")
        and "897, 1793, 2691 after" in line
        for line in lines_054
    ), lines_054
    assert any(line.startswith("violation (unchanged, every version): compaction_grew_request") for line in
               cell_lines(cells["0.62.0"]))
    assert cells["0.54.0"]["violations"][0]["every_version"] is True
    # on one version only: no "every version"
    seed001 = {
        "0.54.0": cell_from_run(report_json(compare_files(
            NEW / "seed001" / "keep_user_messages_true.cassette", OLD / "seed001" / "keep_user_messages_true.cassette"))),
        "0.62.0": cell_from_run(report_json(compare_files(
            NEW / "seed001" / "keep_user_messages_true.cassette", NEW / "seed001" / "keep_user_messages_true.cassette"))),
    }
    marked = _finish({"scenarios": {"s": seed001}})["scenarios"]["s"]
    grow = [v for v in marked["0.54.0"]["violations"] if v["invariant"] == "compaction_grew_request"]
    assert grow and not grow[0].get("every_version")
    lost_062 = [v for v in marked["0.62.0"]["violations"] if v["invariant"] == "content_lost"]
    assert lost_062[0]["every_version"] is True


@pytest.mark.parametrize("root", [NEW, OLD], ids=["0.62.0", "0.54.0"])
def test_reminders_and_planning_without_compaction_grow_nothing(root: Path) -> None:
    """A reminder kept in history but not re-sent, and a plan appended each request, are not compaction."""
    c = load(root / "controls" / "reminders_planning.cassette")
    assert invariants.run_checks(c) == []  # cache_prefix_broken too: the plan's tail sits behind a cache point
    index = _history._Index(c)
    views = index.views()["main"]
    assert len(views) == 6 and not any(index.compacted(v, False) for v in views)


def _recordings() -> list[Cassette]:
    return [load(p) for root in (NEW, OLD) for p in iter_cassettes(root)]


def test_incremental_estimates_equal_the_harness_estimate_of_each_request() -> None:
    """Per-message counts with prefix sums give exactly the harness's own figure (no re-estimation per request)."""
    checked = 0
    for c in _recordings():
        index = _history._Index(c)
        for ex in c.exchanges:
            assert index.estimate(ex.messages) == _messages._exact(c.expand(ex.messages)), (c.header.scenario_id, ex.seq)
            checked += 1
        for views in index.views().values():
            for v in views:
                logical = v.logical.ids[: v.length]
                assert v.logical.estimate(v.length) == _messages._exact(index.expand(logical))
    assert checked > 150


def test_a_sliding_window_without_summarizer_is_still_a_compaction() -> None:
    """Seed 000's control: SlidingWindowCompaction alone grows 19 to 46 (responses dropped, a receipt added)."""
    c = load(NEW / "seed000" / "window_only.cassette")
    (v,) = invariants.run_checks(c, only=["compaction_grew_request"])
    assert v.evidence["before"] == 19 and v.evidence["after"] == [46]
    index = _history._Index(c)
    (view,) = index.views()["main"]
    assert not index.window(-1, view.exchange.seq) and index.compacted(view, False)


def test_word_runs_are_found_whole_and_in_order() -> None:
    grams = _messages._Grams(_messages._TOKEN.findall("User: U1, then U10 and A10. retained note kept here"))
    tokens = _messages._TOKEN.findall
    assert grams.has(tokens("U1")) and grams.has(tokens("U10")) and not grams.has(tokens("U11"))
    assert grams.has(tokens("retained note kept here")) and grams.has(tokens("then U10 and A10."))
    assert not grams.has(tokens("note retained kept here"))  # the same words in another order
    assert not grams.has(tokens("U1 U10"))

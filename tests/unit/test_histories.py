"""Histories that never reach a model (``run.observe_messages``): stored, placed, and checked like sent requests."""

from __future__ import annotations

import msgpack
import pytest
from conftest import ROOT
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from replay.cassette import MAGIC, Cassette, CassetteBuilder, Exchange, HistoryRecord, dumps, loads
from replay.errors import CassetteError, ReplayUsageError
from replay.histories import as_requests
from replay.invariants import run_checks
from replay.recorder import dump_messages
from replay.scenario import Run

SEED001 = ROOT / "cassettes" / "seed001"


def test_observe_messages_dumps_and_places_the_history() -> None:
    calls = iter([0, 2])
    run = Run("t", calls=lambda: next(calls))
    history = [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("yo")])]
    run.observe_messages("first", history)
    run.observe_messages("second", history[1:], source=history)
    first, second = run.histories
    assert (first.name, first.after, first.source, second.after) == ("first", 0, [], 2)
    assert first.messages == dump_messages(history) and second.source == dump_messages(history)
    assert second.predicate is None and not run.observations


def test_judge_is_also_an_observation() -> None:
    run = Run("t")
    run.judge("is_provider_valid", True, [ModelRequest(parts=[UserPromptPart("hi")])])
    (h,) = run.histories
    assert (h.predicate, h.verdict) == ("is_provider_valid", True)
    assert [(o.name, o.value) for o in run.observations] == [("is_provider_valid", True)]


@pytest.mark.parametrize("bad", ["a string", 3, [object()], [{"kind": "request"}]])
def test_not_messages_is_a_usage_error(bad: object) -> None:
    with pytest.raises(ReplayUsageError, match=r"run.observe_messages\('x', ...\)"):
        Run("t").observe_messages("x", bad)


def test_judge_needs_a_predicate_name() -> None:
    with pytest.raises(ReplayUsageError, match="predicate"):
        Run("t").judge("", True, [])


def _cassette(*after: int) -> Cassette:
    b = CassetteBuilder()
    b.cassette.header.roles = {"main": "tests"}
    msg = b.messages(dump_messages([ModelRequest(parts=[UserPromptPart("q")])]))
    for i in range(3):
        b.cassette.exchanges.append(Exchange(seq=i, role="main", index=i, kind="request", messages=msg))
    for n, a in enumerate(after):
        b.cassette.histories.append(HistoryRecord(name=f"h{n}", messages=msg, after=a))
    return b.cassette


def test_as_requests_places_histories_after_the_calls_made_before_them() -> None:
    c = _cassette(0, 2, 2, 9)
    seen = as_requests(c)
    assert [(e.role, e.seq) for e in seen.exchanges] == [
        ("observed:h0", 0), ("main", 1), ("main", 2), ("observed:h1", 3), ("observed:h2", 4), ("main", 5), ("observed:h3", 6)
    ]
    assert seen.header.roles["observed:h0"] == "replay.observe_messages"
    assert [e.role for e in c.exchanges] == ["main"] * 3 and "observed:h0" not in c.header.roles  # input untouched
    assert as_requests(_cassette()) is not None


def test_dangling_call_in_an_observed_history_is_a_violation() -> None:
    b = CassetteBuilder()
    refs = b.messages(dump_messages([ModelResponse(parts=[ToolCallPart("add", {}, tool_call_id="c1")])]))
    b.cassette.histories.append(HistoryRecord(name="snapshot", messages=refs))
    (v,) = run_checks(b.cassette)
    assert v.describe() == "dangling_tool_call observed:snapshot[0]: 1 tool call(s) sent without a result: add (c1, message 0)"


def test_round_trip_and_unchanged_format_without_histories() -> None:
    c = _cassette(1)
    c.histories[0].source = [0]
    back = loads(dumps(c))
    assert back.histories == c.histories
    plain = _cassette()
    assert "histories" not in msgpack.unpackb(dumps(plain)[len(MAGIC):])  # written exactly as before histories existed


def test_history_reference_outside_the_table_is_refused() -> None:
    c = _cassette(1)
    raw = msgpack.unpackb(dumps(c)[len(MAGIC):])
    raw["histories"][0]["messages"] = [5, 1]
    with pytest.raises(CassetteError, match="outside the table"):
        loads(MAGIC + msgpack.packb(raw))


def test_seed001_direct_compact_probe_is_checked_without_an_expected_answer() -> None:
    """Seed 001's own probe calls compact() directly: no main request, yet content_lost finds A9, U10, A10."""
    from replay.cassette import load

    (v,) = run_checks(load(SEED001 / "compact_direct_keep_user_messages_true.cassette"))
    assert (v.invariant, v.role, v.evidence["lost"]) == ("content_lost", "observed:compacted", ["A9", "U10", "A10"])
    assert v.evidence["summarizer"] == ["summarizing_compaction[0]"]
    assert not run_checks(load(SEED001 / "compact_direct_keep_user_messages_false.cassette"))


def test_a_history_that_changes_is_a_diff_and_in_the_normalised_form() -> None:
    from replay.cassette import load
    from replay.differ import diff
    from replay.normaliser import normalise

    a = load(SEED001 / "compact_direct_keep_user_messages_true.cassette")
    b = a.model_copy(deep=True)
    b.histories[0].messages = b.histories[0].messages[:-1]  # as 0.54.0 does: U11 dropped from the result
    d = diff(a, b)
    assert d.changed
    (req,) = [r for r in d.requests if r.role == "history:compacted"]  # aligned like a request (trust-diff)
    assert [(e.kind, e.path) for e in req.entries] == [("removed", "messages[5]")] and req.lost == ["U11"]
    assert not d.observations
    assert normalise(a).as_json()["histories"][0]["name"] == "compacted"
    assert "histories" not in normalise(load(ROOT / "cassettes" / "seed000" / "long.cassette")).as_json()


def test_a_history_named_like_a_compaction_is_not_a_summarizer_call() -> None:
    from replay.invariants import _messages

    c = as_requests(_cassette(1).model_copy(update={"histories": [HistoryRecord(name="after_compaction", messages=[0], after=1)]}))
    (observed,) = [e for e in c.exchanges if e.role == "observed:after_compaction"]
    assert not _messages._is_compaction(c, observed)

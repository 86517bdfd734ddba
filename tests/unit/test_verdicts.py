"""Predicate verdicts (``run.judge``) against the tool's own pairing rules."""

from __future__ import annotations

from conftest import ROOT
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from replay.cassette import Cassette, CassetteBuilder, HistoryRecord, load
from replay.invariants import run_checks
from replay.recorder import dump_messages
from replay.verdicts import Judgement, provider_valid, rule, rule_for

SEED003 = ROOT / "cassettes" / "seed003"


def call(i: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool_name="add", args={}, tool_call_id=i)])


def ret(i: str) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(tool_name="add", content=1, tool_call_id=i)])


def judged(predicate: str, verdict: object, messages: list) -> Cassette:
    b = CassetteBuilder()
    refs = b.messages(dump_messages(messages))
    b.cassette.histories.append(HistoryRecord(name=predicate, messages=refs, predicate=predicate, verdict=verdict))
    return b.cassette


def test_provider_valid_rule_on_the_seed_histories() -> None:
    cases = {
        "reused id, one return": ([call("c1"), call("c1"), ret("c1")], False),
        "reused id, two returns": ([call("c1"), call("c1"), ret("c1"), ret("c1")], False),
        "distinct ids, one return": ([call("c1"), call("c2"), ret("c1")], False),
        "distinct ids, both returned": ([call("c1"), call("c2"), ret("c1"), ret("c2")], True),
    }
    got = {name: provider_valid(dump_messages(h)).valid for name, (h, _) in cases.items()}
    assert got == {name: valid for name, (_, valid) in cases.items()}
    reused = provider_valid(dump_messages(cases["reused id, one return"][0]))
    assert reused.evidence["dangling"] == [{"tool_name": "add", "tool_call_id": "c1", "message": 0}]
    assert reused.reasons == ["1 tool call (add, c1) has no result (message 0's call is shadowed by message 1 reusing id c1)"]


def test_orphaned_result_fails_the_rule() -> None:
    j = provider_valid(dump_messages([call("c1"), ret("c1"), ret("c9")]))
    assert not j.valid and j.reasons == ["1 tool result (add, c9) answers no earlier call"]


def test_a_second_result_for_an_answered_call_fails_the_rule() -> None:
    """is_provider_valid fails a duplicate result on purpose ("no orphans, duplicates, or out-of-order
    returns"); pydantic-ai sends it as it stands (its ordered walk answers nothing with it, and only a
    never-called id is dropped as an orphan). The rule took it for valid: a False verdict was flagged."""
    for history in ([call("c1"), ret("c1"), ret("c1")],
                    [call("c1"), ModelRequest(parts=[ToolReturnPart("add", 1, tool_call_id="c1")] * 2)]):
        j = provider_valid(dump_messages(history))
        assert not j.valid and j.reasons == ["1 tool result (add, c1) answers a call already answered"], j
        assert not run_checks(judged("is_provider_valid", False, history), only=["predicate_verdict"])
    # a reused id called again after its answer opens a new call: its result answers that one
    assert provider_valid(dump_messages([call("c1"), ret("c1"), call("c1"), ret("c1")])).valid


def test_duplicate_result_on_real_recordings() -> None:
    """is_provider_valid([call c1, return c1, return c1]) is False on 0.54.0 and 0.62.0, as the rule now says."""
    for version in ("0.54.0", "0.62.0"):
        c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "judge" / "duplicate_return.cassette")
        assert [h.verdict for h in c.histories] == [False]
        assert run_checks(c, only=["predicate_verdict"]) == []


def test_disagreement_names_both_verdicts_and_the_evidence() -> None:
    (v,) = run_checks(judged("is_provider_valid", True, [call("c1"), call("c1"), ret("c1")]), only=["predicate_verdict"])
    assert v.describe().startswith("predicate_verdict is_provider_valid[0]: is_provider_valid True, but 1 tool call (add, c1) has no result")
    assert v.evidence["verdict"] is True and v.evidence["tool_verdict"] is False


def test_false_verdict_on_a_valid_history_is_a_disagreement_too() -> None:
    (v,) = run_checks(judged("is_provider_valid", False, [call("c1"), ret("c1")]), only=["predicate_verdict"])
    assert v.message == "is_provider_valid False, but every tool call has a result and every result a call"


def test_agreement_unknown_predicate_and_dotted_name() -> None:
    assert not run_checks(judged("is_provider_valid", False, [call("c1")]), only=["predicate_verdict"])
    assert not run_checks(judged("my_lib.looks_fine", True, [call("c1")]), only=["predicate_verdict"])
    dotted = "pydantic_ai_harness.step_persistence.is_provider_valid"
    assert rule_for(dotted) is provider_valid
    assert run_checks(judged(dotted, True, [call("c1")]), only=["predicate_verdict"])


def test_non_boolean_verdict_is_reported() -> None:
    (v,) = run_checks(judged("is_provider_valid", "yes", [call("c1"), ret("c1")]), only=["predicate_verdict"])
    assert v.message == "is_provider_valid returned 'yes', not True or False"


def test_judged_histories_are_not_checked_as_sent_requests() -> None:
    """A dangling call in a judged history is what the predicate is asked about, not a violation of its own."""
    assert not run_checks(judged("is_provider_valid", False, [call("c1"), call("c2"), ret("c1")]))


def test_user_rule(monkeypatch) -> None:
    from replay import verdicts

    monkeypatch.setattr(verdicts, "_RULES", dict(verdicts._RULES))  # registered for this test only

    @rule("has_no_tools")
    def no_tools(messages: list[dict]) -> Judgement:
        calls = [p for m in messages for p in m.get("parts", []) if p.get("part_kind") == "tool-call"]
        return Judgement(not calls, [f"{len(calls)} tool call(s)"] if calls else [], passes="no tool calls")

    (v,) = run_checks(judged("has_no_tools", True, [call("c1"), ret("c1")]), only=["predicate_verdict"])
    assert v.message == "has_no_tools True, but 1 tool call(s)"


def test_bundled_seed003_recordings() -> None:
    """The real recordings (0.62.0): only the reused-id case disagrees; its verdict is also an observation."""
    found = {p.stem: run_checks(load(p)) for p in sorted(SEED003.glob("*.cassette"))}
    assert set(found) == {"reused_id_one_return", "reused_id_two_returns", "distinct_ids_one_return", "distinct_ids_both_returned"}
    (v,) = found.pop("reused_id_one_return")
    assert v.invariant == "predicate_verdict" and "is_provider_valid True, but 1 tool call (add, c1) has no result" in v.message
    assert all(not vs for vs in found.values())
    c = load(SEED003 / "reused_id_one_return.cassette")
    assert {o.name: o.value for o in c.observations} == {"is_provider_valid": True, "core_dangling_calls": 1}
    assert not c.exchanges and c.histories[0].predicate == "is_provider_valid"

"""Invariants over one cassette: each built-in check on a minimal hand-built cassette that
breaks it and one that does not, then on real recordings of the bundled seed scenarios."""

from __future__ import annotations

import importlib.metadata
import json
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from replay import invariants
from replay.cassette import AgentRunRecord, Cassette, CassetteBuilder, ErrorInfo, Exchange, Header, ObservationRecord
from replay.differ import message_label
from replay.errors import ReplayUsageError
from replay.invariants import (
    Violation,
    _content_lost,
    _history,
    _messages,
    _tool_calls,
    new_violations,
    register,
    run_checks,
)
from replay.recorder import dump_messages, estimate, record
from replay.scenario import discover

ROOT = Path(__file__).resolve().parents[2]
SUMMARIZER = "summarizing_compaction"
ROLES = {"main": "tests.scenario", SUMMARIZER: "pydantic_ai_harness.compaction._summarizing_compaction"}
HARNESS = importlib.metadata.version("pydantic-ai-harness")


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())


# --------------------------------------------------------------------------- building cassettes


class Build:
    """A cassette assembled from real pydantic-ai messages, the way the recorder stores them."""

    def __init__(self) -> None:
        self.b = CassetteBuilder(Header(scenario_id="unit/invariants", roles=dict(ROLES)))
        self.counts: dict[str, int] = {}

    @property
    def cassette(self) -> Cassette:
        return self.b.cassette

    def ids(self, messages: Sequence[ModelMessage]) -> list[int]:
        return self.b.messages(dump_messages(messages))

    def run(
        self,
        prompt: str | None,
        history: Sequence[ModelMessage],
        result: Sequence[ModelMessage],
        role: str = "main",
        output: Any = None,
        error: str | None = None,
    ) -> int:
        start = list(history) + ([ModelRequest(parts=[UserPromptPart(prompt)])] if prompt else [])
        self.cassette.runs.append(
            AgentRunRecord(
                role=role,
                prompt=prompt,
                history=self.ids(history),
                result=self.ids(result),
                output=output,
                error=ErrorInfo(type="UnexpectedModelBehavior", message=error) if error else None,
                estimate=estimate(start),
            )
        )
        return len(self.cassette.runs) - 1

    def request(
        self,
        role: str,
        run: int | None,
        sent: Sequence[ModelMessage],
        response: ModelResponse | None,
        error: str | None = None,
    ) -> Exchange:
        index = self.counts.get(role, 0)
        self.counts[role] = index + 1
        ex = Exchange(
            seq=len(self.cassette.exchanges),
            role=role,
            index=index,
            kind="request",
            messages=self.ids(sent),
            response=self.b.message(dump_messages([response])[0]) if response is not None else None,
            estimate=estimate(sent),
            run=run,
            error=ErrorInfo(type="ModelAPIError", message=error) if error else None,
        )
        self.cassette.exchanges.append(ex)
        return ex


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def reply(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def turns(n: int, answer: str = "A{}") -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for i in range(1, n + 1):
        out += [user(f"U{i}"), reply(answer.replace("{}", str(i)))]
    return out


def only(cassette: Cassette, name: str) -> list[Violation]:
    return run_checks(cassette, only=[name])


def summarize(build: Build, sent_text: str, summary: str, *, run_error: str | None = None) -> Exchange:
    """A summarizer agent run and its one request, as harness compaction makes them."""
    run = build.run(sent_text, [], [user(sent_text), reply(summary)], role=SUMMARIZER, output=summary, error=run_error)
    return build.request(SUMMARIZER, run, [user(sent_text)], reply(summary))


# --------------------------------------------------------------------------- Violation and the registry


def test_violation_describes_itself_in_one_line_and_keys_on_identity_not_figures() -> None:
    v = Violation("compaction_grew_request", "main", 0, "grew: 19 -> 889", {"before": 19, "requests": [0]}, ("requests",))
    assert v.describe() == "compaction_grew_request main[0]: grew: 19 -> 889"
    assert Violation("expectation", "scenario", None, "x: expected 1").describe() == "expectation scenario: x: expected 1"
    assert v.as_json() == {
        "invariant": "compaction_grew_request",
        "role": "main",
        "index": 0,
        "message": "grew: 19 -> 889",
        "evidence": {"before": 19, "requests": [0]},
    }
    same = Violation("compaction_grew_request", "main", 0, "grew: 21 -> 900", {"before": 21, "requests": [0]}, ("requests",))
    other = Violation("compaction_grew_request", "main", 0, "grew", {"before": 19, "requests": [0, 1]}, ("requests",))
    assert v.key() == same.key() and v.key() != other.key()
    hash(v)  # frozen and hashable despite the evidence dict


def test_user_checks_register_and_run_alone_and_crashes_are_errors_not_violations() -> None:
    seen: list[str] = []

    @register("unit_always")
    def always(c: Cassette) -> Iterator[Violation]:
        seen.append(c.header.scenario_id or "")
        yield Violation("unit_always", "main", None, "always")

    @register("unit_crash")
    def crash(c: Cassette) -> list[Violation]:
        raise RuntimeError("boom")

    try:
        assert "unit_always" in invariants.checks()
        assert [v.invariant for v in run_checks(Cassette(), only=["unit_always"])] == ["unit_always"]
        # a crash is an error of the cassette, never a violation; the other checks still run
        found = invariants.evaluate(Cassette(), only=["unit_crash", "unit_always"])
        assert [v.invariant for v in found.violations] == ["unit_always"]
        assert [f.describe() for f in found.failures] == ["check unit_crash failed: RuntimeError: boom"]
        with pytest.raises(invariants.CheckError, match="check unit_crash failed: RuntimeError: boom") as err:
            run_checks(Cassette(), only=["unit_always", "unit_crash"])
        assert [v.invariant for v in err.value.findings.violations] == ["unit_always"]
        with pytest.raises(ReplayUsageError, match="no_such_check"):
            run_checks(Cassette(), only=["no_such_check"])
        assert seen
    finally:
        invariants._REGISTRY.pop("unit_always", None)
        invariants._REGISTRY.pop("unit_crash", None)
    assert set(invariants.checks()) >= {
        "compaction_grew_request",
        "content_lost",
        "empty_summary",
        "dangling_tool_call",
        "expectation",
    }


def test_new_violations_are_those_the_recording_did_not_have() -> None:
    recorded, replayed = Cassette(), Cassette()
    recorded.expectations = {"a": 1, "b": 2}
    recorded.observations = [ObservationRecord(name="a", value=0), ObservationRecord(name="b", value=2)]
    replayed.expectations = {"a": 1, "b": 2}
    replayed.observations = [ObservationRecord(name="a", value=5), ObservationRecord(name="b", value=3)]
    fresh = new_violations(recorded, replayed)
    assert [v.evidence["name"] for v in fresh] == ["b"]  # "a" was already wrong, only its value changed
    assert new_violations(replayed, replayed) == []


# --------------------------------------------------------------------------- compaction_grew_request


def test_grew_request_flags_a_summary_larger_than_the_history_it_replaced() -> None:
    b = Build()
    history = turns(5, "noted {}")
    run = b.run("continue", history, [])
    summarize(b, "summarize U1..U5", "retained note " * 200)
    sent = [
        ModelRequest(parts=[UserPromptPart("U1"), SystemPromptPart("retained note " * 200)]),
        reply("noted 5"),
        user("continue"),
    ]
    main = b.request("main", run, sent, reply("ready"))
    b.cassette.runs[run].result = b.ids([*sent, reply("ready")])
    (v,) = only(b.cassette, "compaction_grew_request")
    assert (v.role, v.index) == ("main", 0)
    assert v.evidence["before"] == b.cassette.runs[run].estimate == estimate([*history, user("continue")])
    assert v.evidence["after"] == [main.estimate] and main.estimate is not None and main.estimate > v.evidence["before"]
    assert v.evidence["requests"] == [0]
    assert f"{v.evidence['before']} tokens before, {main.estimate} after (main[0])" in v.message


def test_grew_request_measures_both_sides_alike_where_this_version_cannot_load_the_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette of a later slim checked under an earlier one (a matrix cell) can hold part kinds the
    earlier cannot load: its history was then measured by hand without its instructions (37 tokens) and
    the compacted request by the harness (279): a phantom growth, or a real one read as gone. Now each
    side message by message, by the harness where it can and by hand where not."""
    from replay import _facts

    def build() -> Cassette:
        b = Build()
        run = b.run("continue", turns(5, "noted {}"), [])
        summarize(b, "summarize U1..U5", "retained note " * 200)
        sent = [ModelRequest(parts=[UserPromptPart("U1"), SystemPromptPart("retained note " * 200)]), reply("noted 5"),
                user("continue")]
        b.request("main", run, sent, reply("ready"))
        b.cassette.runs[run].result = b.ids([*sent, reply("ready")])
        return b.cassette

    (judged,) = only(build(), "compaction_grew_request")
    real = _facts._load
    monkeypatch.setattr(_facts, "_load", lambda m: None if "U3" in json.dumps(m) else real(m))  # a part kind it lacks
    (alike,) = only(build(), "compaction_grew_request")
    assert alike.evidence == judged.evidence  # the same figures: what can be counted is counted as the harness does
    # and where it must guess (an estimate of what it cannot load), the guess counts the instructions too
    monkeypatch.setattr(_messages, "load_messages", lambda messages: (_ for _ in ()).throw(ValueError("unknown part")))
    message = {"kind": "request", "instructions": "i" * 400, "parts": [{"part_kind": "user-prompt", "content": "u" * 40}]}
    assert _messages._exact([message]) == (40 + 400) // 4


def test_grew_request_ignores_real_shrinking_and_plain_additions() -> None:
    b = Build()
    history = turns(5, "noted {} " * 100)
    run = b.run("continue", history, [])
    summarize(b, "summarize", "brief")
    compacted = ModelRequest(parts=[UserPromptPart("U1"), SystemPromptPart("brief")])
    b.request("main", run, [compacted, user("continue")], reply("ok"))
    # a reminder adds a large part but drops nothing: that is not a compaction
    run2 = b.run("again", [], [])
    reminded = ModelRequest(parts=[UserPromptPart("again"), SystemPromptPart("reminder " * 300)])
    b.request("main", run2, [reminded], reply("ok"))
    b.cassette.runs[run2].result = b.ids([user("again"), reply("ok")])
    assert only(b.cassette, "compaction_grew_request") == []


_CHECKLIST = "Follow the deploy checklist: " + "every item must be verified by the on-call engineer. " * 55


def _carried_alone(extra: UserPromptPart, summary: str = "brief") -> tuple[Build, int]:
    """Five turns compacted to a summary, the request carrying ``extra`` for itself alone: the run keeps it
    nowhere (its result is the compacted history and the answer), as 0.55-0.60 send a reminder or a plan
    and 0.52-0.60 Memory's snapshot."""
    b = Build()
    run = b.run("continue", turns(5, "noted {} " * 20), [])
    summarize(b, "summarize U1..U5", summary)
    kept = ModelRequest(parts=[UserPromptPart("U1"), SystemPromptPart(summary)])
    b.request("main", run, [kept, ModelRequest(parts=[UserPromptPart("continue"), extra])], reply("ok"))
    b.cassette.runs[run].result = b.ids([kept, user("continue"), reply("ok")])
    return b, run


def test_grew_request_counts_what_a_request_carried_alone_on_both_sides() -> None:
    """A reminder (a user prompt opening with a cache point) or a memory snapshot sent with the request alone
    is in no history, so the uncompacted history lacked it while the compacted request had it: a compaction
    that shrank the history read as grown whenever the reminder outweighed what it saved. The uncompacted
    request would have carried it too."""
    from pydantic_ai.messages import CachePoint

    reminder = UserPromptPart([CachePoint(), f"<system-reminder>\n{_CHECKLIST}\n</system-reminder>"])
    snapshot = UserPromptPart([TextContent(f"<memory>\n{_CHECKLIST}\n</memory>", metadata="pydantic-ai-harness.memory.v1:0d6e")])
    for extra in (reminder, snapshot):
        b, _ = _carried_alone(extra)
        assert only(b.cassette, "compaction_grew_request") == [], extra
    # not a way out of real growth: a summary larger than the history still is one, measured against the
    # uncompacted history plus what the request carried alone
    b, run = _carried_alone(reminder, summary="retained note " * 200)
    (v,) = only(b.cassette, "compaction_grew_request")
    alone = len(f"<system-reminder>\n{_CHECKLIST}\n</system-reminder>")
    assert abs(v.evidence["before"] - (b.cassette.runs[run].estimate + alone // 4)) <= 1, v.evidence
    # nor a way out for any user text: without the cache point, or with another string for metadata, it is the
    # user's (the run would keep it) and counts on the sent side only, as before
    for other in (UserPromptPart(f"<system-reminder>\n{_CHECKLIST}\n</system-reminder>"),
                  UserPromptPart([TextContent(_CHECKLIST, metadata="my-app.memory.v1:0d6e")])):
        b, _ = _carried_alone(other)
        (v,) = only(b.cassette, "compaction_grew_request")
        assert v.evidence["requests"] == [0], other


def test_grew_request_measures_a_tool_loop_by_the_results_it_was_sent_not_the_cleared_ones() -> None:
    """TieredCompaction(ClearToolResults, SummarizingCompaction) in one tool loop: the summary comes once, on top
    of everything (a real growth), then the clearing tier blanks results in the run's history too. The uncompacted
    history read from the run's result had the blanks, and the summary, where the model had been sent the results:
    every later request, smaller than the real history, read as grown ("uncompacted 34, 45, 56, 164")."""
    full = {n: f"result {n}: " + "a matching line of the payments module " * 12 for n in range(3)}

    def call(n: int) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("grep", {"n": n}, tool_call_id=f"g{n}")])

    def ret(n: int, content: str | None = None) -> ModelRequest:
        return ModelRequest(parts=[ToolReturnPart("grep", full[n] if content is None else content, tool_call_id=f"g{n}")])

    cleared = "[tool result cleared]"
    summarized = ModelRequest(parts=[UserPromptPart("Find the markers."), SystemPromptPart("Summary of previous conversation:\n\nGrepping.")])
    b = Build()
    run = b.run("Find the markers.", [], [])
    b.request("main", run, [user("Find the markers.")], call(0))
    b.request("main", run, [user("Find the markers."), call(0), ret(0)], call(1))
    summarize(b, "User: Find the markers.", "Grepping.")
    b.request("main", run, [summarized, call(0), ret(0), call(1), ret(1)], call(2))
    b.request("main", run, [summarized, call(0), ret(0, cleared), call(1), ret(1), call(2), ret(2)], reply("done"))
    b.cassette.runs[run].result = b.ids([summarized, call(0), ret(0, cleared), call(1), ret(1, cleared), call(2), ret(2), reply("done")])
    (v,) = only(b.cassette, "compaction_grew_request")
    assert v.evidence["requests"] == [2], v.evidence  # main[3] is smaller than the history it was sent in place of
    assert v.evidence["uncompacted"] == [estimate([user("Find the markers."), call(0), ret(0), call(1), ret(1)])]


def _steered_window(resent: bool) -> Build:
    """A tool loop trimmed by a window, a judge's steering enqueued after the second tool result: re-sent by the
    next request and kept by the run when ``resent``, else each request's own, sent after its newest result alone
    (as a 0.56 reminder is)."""
    steer = UserPromptPart("A trajectory judge asks you to stop listing folders and open the failing test. " * 8)

    def call(n: int) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("ls", {"n": n}, tool_call_id=f"c{n}")])

    def ret(n: int, *extra: UserPromptPart) -> ModelRequest:
        return ModelRequest(parts=[ToolReturnPart("ls", f"folder {n}: a.py b.py", tool_call_id=f"c{n}"), *extra])

    later, last = (ret(2, steer), ret(3)) if resent else (ret(2), ret(3, steer))  # else a reminder on each request
    b = Build()
    run = b.run("Why does the test fail?", [], [])
    b.request("main", run, [user("Why does the test fail?")], call(1))
    b.request("main", run, [user("Why does the test fail?"), call(1), ret(1)], call(2))
    b.request("main", run, [user("Why does the test fail?"), call(1), ret(1), call(2), ret(2, steer)], call(3))
    b.request("main", run, [user("Why does the test fail?"), call(2), later, call(3), last], reply("Found it."))
    b.cassette.runs[run].result = b.ids([user("Why does the test fail?"), call(2), later, call(3), ret(3), reply("Found it.")])
    return b


def test_grew_request_keeps_what_a_tool_loop_enqueued_into_its_history() -> None:
    """A TrajectoryJudge's steering is enqueued into the run's history after a tool result, where the harness also
    appends what one request carries alone (a 0.56 reminder, unmarked). Rebuilt from the requests, the uncompacted
    history dropped it, and a window that trimmed one folder listing read as grown by the whole steering. Re-sent
    by a later request or kept in the run's result, it is history."""
    assert only(_steered_window(resent=True).cassette, "compaction_grew_request") == []
    # the control: sent with each request and never re-sent, it is each request's own, as before
    (v,) = only(_steered_window(resent=False).cassette, "compaction_grew_request")
    assert v.evidence["requests"] == [3], v.evidence


def test_a_runs_own_prompt_is_none_of_the_messages_it_was_handed() -> None:
    """Turns of one kind of prompt ("Read page N of the invoice."): a compaction inside the third turn summarizes
    its prompt away, and the run's result holds only the first turn's prompt, handed to it as history. That prompt,
    one word apart, was taken for this run's (a redacted copy of it), the receipt after it for the request being
    answered, and content_lost read it as left out."""
    b = Build()
    p1, p3 = user("Read page 1 of the invoice."), user("Read page 3 of the invoice.")
    summary = ModelRequest(parts=[SystemPromptPart("Summary of previous conversation:\n\nPages read.")])
    receipt = user("[History before this point (5 messages) was summarized.]")
    call = ModelResponse(parts=[ToolCallPart("fetch", {"n": 3}, tool_call_id="f3")])
    ret = ModelRequest(parts=[ToolReturnPart("fetch", "page 3: lines", tool_call_id="f3")])
    run = b.run("Read page 3 of the invoice.", [p1, reply("Page 1 read.")], [p1, summary, receipt, call, ret, reply("Page 3 read.")])
    ix = _history._index(b.cassette)
    new = [ix.msg(i) for i in ix._new_from_result(b.cassette.runs[run])]
    assert message_label(new[0]).startswith("Read page 3"), [message_label(m) for m in new]  # rebuilt from the prompt
    assert [m.get("kind") for m in new[1:]] == ["response", "request", "response"]
    # its own prompt, kept, is found where it is, also when an earlier turn asked the very same
    for handed in ([p1, reply("Page 1 read.")], [p3, reply("Page 3, first look.")]):
        b = Build()
        run = b.run("Read page 3 of the invoice.", handed, [*handed, p3, call, ret, reply("Page 3 read.")])
        ix = _history._index(b.cassette)
        assert ix._new_from_result(b.cassette.runs[run]) == b.cassette.runs[run].result[2:], handed


def _note_resent(sent_note: str) -> Build:
    """Two turns; the first kept a system note in its history (0.62's LLMReminder). A summarizer ran in the
    background before the second turn's request, which re-sends everything: the note as ``sent_note``."""
    b = Build()
    kept = [ModelRequest(parts=[UserPromptPart("U1 " + "about the invoices " * 10), SystemPromptPart("Stay on the invoice task.")]),
            reply("A1 " + "reconciled " * 10)]
    run = b.run("U2", kept, [])
    summarize(b, "User: U1", "Summary written in the background.")
    sent = [ModelRequest(parts=[UserPromptPart("U1 " + "about the invoices " * 10), UserPromptPart(sent_note)]), kept[1], user("U2")]
    b.request("main", run, sent, reply("A2"))
    b.cassette.runs[run].result = b.ids([*kept, user("U2"), reply("A2")])
    return b


def test_grew_request_a_system_note_sent_as_user_text_is_the_historys_note() -> None:
    """0.62 keeps an LLMReminder's note in the history as a system prompt, sent to a model with no
    mid-conversation system role as ``<system>…</system>`` user text. A request sent whole after a summarizer ran
    in the background (FallbackCompaction's ``background_start``) read as compacted — the note, differently
    wrapped, "not re-sent" — and as grown by the tags."""
    assert only(_note_resent("<system>Stay on the invoice task.</system>").cassette, "compaction_grew_request") == []
    # the control: a text that is no such block is another part: the history's note is not re-sent, a compaction
    (v,) = only(_note_resent("<system>Stay on the invoice task.</system> " + "and more " * 20).cassette, "compaction_grew_request")
    assert v.evidence["requests"] == [0], v.evidence


def test_grew_request_follows_chained_runs_back_to_the_uncompacted_history() -> None:
    b = Build()
    history = turns(5, "noted {}")
    big = SystemPromptPart("retained note " * 200)
    first_sent = [ModelRequest(parts=[UserPromptPart("U1"), big]), reply("noted 5"), user("continue")]
    first_result = [*first_sent, reply("ready")]
    r0 = b.run("continue", history, first_result)
    summarize(b, "summarize", "retained note " * 200)
    m0 = b.request("main", r0, first_sent, reply("ready"))
    second_sent = [ModelRequest(parts=[UserPromptPart("U1"), big]), reply("ready"), user("idle")]
    r1 = b.run("idle", first_result, [*second_sent, reply("ready")])
    summarize(b, "summarize again", "retained note " * 200)
    m1 = b.request("main", r1, second_sent, reply("ready"))
    (v,) = only(b.cassette, "compaction_grew_request")
    logical = [*history, user("continue"), reply("ready"), user("idle")]
    assert v.evidence["uncompacted"] == [b.cassette.runs[r0].estimate, estimate(logical)]
    assert v.evidence["after"] == [m0.estimate, m1.estimate] and v.evidence["requests"] == [0, 1]


_CI_LOG = " ".join(f"stage {k} finished green in {k + 2} seconds" for k in range(40))


def _resumed(summary: str) -> tuple[Build, list[ModelMessage]]:
    """A run that stops at an external tool's call, then a run resumed without a prompt
    (``deferred_tool_results``) whose request carries the tool's long result, compacted to ``summary``."""
    b = Build()
    history = turns(4, "noted {}")
    call = ModelResponse(parts=[ToolCallPart("run_ci", {"job": 5}, tool_call_id="ci5")])
    stopped = [*history, user("Run CI job 5."), call]
    r0 = b.run("Run CI job 5.", history, stopped)
    b.request("main", r0, [*history, user("Run CI job 5.")], call)
    results = ModelRequest(parts=[ToolReturnPart("run_ci", _CI_LOG, tool_call_id="ci5")])
    r1 = b.run(None, stopped, [])
    summarize(b, "summarize U1..U4, Run CI job 5.", summary)
    kept = ModelRequest(parts=[UserPromptPart("U1"), SystemPromptPart(summary)])
    b.request("main", r1, [kept, call, results], reply("Job 5 passed."))
    b.cassette.runs[r1].result = b.ids([kept, call, results, reply("Job 5 passed.")])
    return b, [*stopped, results]


def test_grew_request_counts_the_results_a_resumed_run_opens_with() -> None:
    """A run resumed with ``deferred_tool_results`` has no prompt: its own messages open with the request
    carrying the deferred results, before its first answer. Read from that answer on, every deferred result
    was missing from the uncompacted history, and a compaction that halved a resumed run's request read as
    grown (``trust/deferred_resume_compacted``: 30 tokens before, 229 after on 0.62)."""
    b, _ = _resumed("brief")
    assert only(b.cassette, "compaction_grew_request") == []
    # control: a summary larger than everything it replaced is still growth, measured against the history
    # with the deferred result in it
    b, logical = _resumed("retained note " * 400)
    (v,) = only(b.cassette, "compaction_grew_request")
    assert v.evidence["requests"] == [1] and v.evidence["uncompacted"] == [estimate(logical)], v.evidence


# --------------------------------------------------------------------------- content_lost


def _keep_user_case(kept: list[ModelMessage], summarizer_saw: str) -> Build:
    b = Build()
    run = b.run("U11", turns(10), [])
    summarize(b, summarizer_saw, "Summary.")
    sent = [ModelRequest(parts=[SystemPromptPart("Summary.")]), *kept]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    return b


def _copy(text: str) -> ModelRequest:
    """A kept user copy as harness 0.62 writes it: content is a list of TextContent."""
    return ModelRequest(parts=[UserPromptPart([TextContent(text)])])


def test_content_lost_names_messages_in_neither_summary_input_nor_kept_history() -> None:
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 9)) + " User: U9"
    b = _keep_user_case([*(_copy(f"U{i}") for i in range(6, 10)), user("U11")], saw)
    (v,) = only(b.cassette, "content_lost")
    assert (v.role, v.index) == ("main", 0)
    assert v.evidence["lost"] == ["A9", "U10", "A10"]
    assert v.evidence["summarizer"] == [f"{SUMMARIZER}[0]"]
    assert "A9, U10, A10" in v.message


def test_content_lost_control_and_word_boundaries() -> None:
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 10))
    assert only(_keep_user_case([user("U10"), reply("A10"), user("U11")], saw).cassette, "content_lost") == []
    # U1 must not be found inside U10/U11: only U1 is lost here
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(2, 10)) + " Assistant: A1"
    (v,) = only(_keep_user_case([user("U10"), reply("A10"), user("U11")], saw).cassette, "content_lost")
    assert v.evidence["lost"] == ["U1"]


def _noted_case(note: str, summarizer_saw: str) -> Build:
    """Ten turns whose fifth prompt carries ``note`` as a second user part (as pydantic-ai sends a system
    prompt to a model with no mid-conversation system role), summarized, then the last turn kept."""
    return _second_part_case(UserPromptPart(note), summarizer_saw)


def _second_part_case(part: UserPromptPart, summarizer_saw: str) -> Build:
    """Ten turns whose fifth prompt carries ``part`` too, summarized, then the last turn kept."""
    history = turns(10)
    history[8] = ModelRequest(parts=[UserPromptPart("U5"), part])
    b = Build()
    run = b.run("U11", history, [])
    summarize(b, summarizer_saw, "Summary.")
    sent = [ModelRequest(parts=[SystemPromptPart("Summary.")]), user("U10"), reply("A10"), user("U11")]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    return b


def test_content_lost_a_system_note_sent_as_user_text_is_system_text() -> None:
    """0.62 keeps an LLMReminder's note in the history as a system prompt; the summarizer's transcript gives
    it as ``<message role="system">``, without the ``<system>`` tags it was sent in: not a user's words."""
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 10)) + ' <message role="system">\nStay on task.\n</message>'
    assert only(_noted_case("<system>Stay on task.</system>", saw).cassette, "content_lost") == []
    assert only(_noted_case("  <system>Stay on task.</system>\n", saw).cassette, "content_lost") == []  # as stripped
    # a text the framework did not write this way is the user's: found nowhere, lost (pydantic-ai writes the
    # tag in lower case and escapes every other <system> tag of the body)
    for text in ("<system>Stay on task.</system> thanks", "<system>a</system> and <system>Stay on task.</system>",
                 "<SYSTEM>Stay on task.</SYSTEM>"):
        (v,) = only(_noted_case(text, saw).cassette, "content_lost")
        assert [label.split()[0] for label in v.evidence["lost"]] == ["U5"], (text, v.evidence)
    # the control: the note is no needle, but the prompt it came with still is
    (v,) = only(_noted_case("<system>Stay on task.</system>", saw.replace("U5 ", "U5x ")).cassette, "content_lost")
    assert [label.split()[0] for label in v.evidence["lost"]] == ["U5"], v.evidence


def _snapshot_case(metadata: object, summarizer_saw: str) -> Build:
    """Ten turns whose fifth request carries a store's text as ``Memory`` 0.52-0.60 inject it (a second user
    part, one ``TextContent`` with ``metadata``), summarized, then the last turn kept."""
    snapshot = UserPromptPart([TextContent("<memory>\nThe payments team owns the canary dashboard.\n</memory>", metadata=metadata)])
    return _second_part_case(snapshot, summarizer_saw)


def test_content_lost_a_memory_snapshot_marked_by_a_string_is_the_stores_text() -> None:
    """Memory up to 0.60 injects the store's contents into each request alone, marked by a bare string
    (``pydantic-ai-harness.memory.v1:<scope>``) rather than an ``origin``: not a user's words, so not lost
    when neither the summarizer nor the kept history has it (0.62 marks it with an origin)."""
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 10))
    for marker in ("pydantic-ai-harness.memory.v1:0d6e4079e36703eb", "pydantic-ai-harness.memory.v1",
                   {"origin": "pydantic-ai-harness.memory.v1", "scope": "0d6e4079e36703eb"}):
        assert only(_snapshot_case(marker, saw).cassette, "content_lost") == [], marker
    # any other string is no snapshot marker: the text is a user's, found nowhere (a pin is the user's content)
    for other in ("pydantic-ai-harness.memory.v10", "pydantic-ai-harness.compaction.pin.v1", "my-app.memory.v1:x", None):
        (v,) = only(_snapshot_case(other, saw).cassette, "content_lost")
        assert [label.split()[0] for label in v.evidence["lost"]] == ["U5"], (other, v.evidence)
    # the control: the snapshot is no needle, but the prompt it came with still is
    (v,) = only(_snapshot_case("pydantic-ai-harness.memory.v1:0d6e", saw.replace("U5 ", "U5x ")).cassette, "content_lost")
    assert [label.split()[0] for label in v.evidence["lost"]] == ["U5"], v.evidence


def test_content_lost_needs_a_summarizer_a_sliding_window_drops_by_design() -> None:
    b = Build()
    run = b.run("U11", turns(10), [])
    b.request("main", run, [user("U10"), reply("A10"), user("U11")], reply("Done."))
    b.cassette.runs[run].result = b.ids([user("U10"), reply("A10"), user("U11"), reply("Done.")])
    assert only(b.cassette, "content_lost") == []


def _tiered(summarizer_saw: str, kept: list[ModelMessage]) -> Build:
    """A window tier cut U2..A7 (the first prompt preserved), then a summarizing tier summarized the rest."""
    b = Build()
    run = b.run("U11", turns(10), [])
    summarize(b, summarizer_saw, "Summary.")
    sent = [ModelRequest(parts=[SystemPromptPart("Summary."), UserPromptPart("U1")]), *kept]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    return b


def test_content_lost_leaves_out_what_a_window_tier_dropped_before_the_summarizer() -> None:
    """TieredCompaction([SlidingWindowCompaction, SummarizingCompaction]): the summarizer is handed what
    the window left (the first prompt, then A7 on), so A1..U7 were dropped by design, not lost."""
    saw = "User: U1 Assistant: A7 User: U8 Assistant: A8 User: U9 Assistant: A9 User: U10"
    assert only(_tiered(saw, [reply("A10"), user("U11")]).cassette, "content_lost") == []
    # the same shape with a gap inside what the summarizing tier had (A8 neither summarized nor kept) is lost
    saw = "User: U1 Assistant: A7 User: U8 User: U9 Assistant: A9 User: U10"
    (v,) = only(_tiered(saw, [reply("A10"), user("U11")]).cassette, "content_lost")
    assert "A8" in v.evidence["lost"]


def test_content_lost_a_summarizer_that_skips_a_middle_run_is_still_a_loss() -> None:
    """Seed 001's shape: the lost run comes after what was summarized past the first prompt (not a window's cut)."""
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 9))
    (v,) = only(_keep_user_case([user("U11")], saw).cassette, "content_lost")
    assert v.evidence["lost"] == ["U9", "A9", "U10", "A10"]


@pytest.mark.parametrize("version", ["0.54.0", "0.62.0"])
def test_content_lost_tiered_window_tier_on_real_recordings(version: str) -> None:
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / "tiered_window_then_summary.cassette")
    assert [e.role for e in c.exchanges] == [SUMMARIZER, "main"]  # the summarizing tier did run
    assert only(c, "content_lost") == []


@pytest.mark.parametrize("version", ["0.54.0", "0.62.0"])
def test_content_lost_tiered_window_re_injects_a_pinned_request(version: str) -> None:
    """A pinned request among the turns the window tier drops is re-injected: the cut around it is still the window's."""
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / "tiered_window_pin.cassette")
    assert "zebra seven" in json.dumps(c.expand(c.exchanges[-1].messages))  # the pin was sent
    assert only(c, "content_lost") == []


def test_content_lost_a_window_that_drops_the_request_being_answered() -> None:
    """A sliding window (no summarizer) may drop old turns, never the newest message: 0.54's
    SlidingWindowCompaction(keep_messages=1, receipts=True) sent its receipt and the first prompt only."""
    b = Build()
    run = b.run("U6", turns(5), [])
    sent = [ModelRequest(parts=[UserPromptPart("[History before this point (10 messages) was dropped]"), UserPromptPart("U1")])]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    (v,) = only(b.cassette, "content_lost")
    assert (v.evidence["lost"], v.evidence["newest_unsent"], v.evidence["summarizer"]) == (["U6"], "U6", [])
    assert "left out the request being answered, U6" in v.message


def test_content_lost_a_summarized_current_prompt_is_not_an_answered_one() -> None:
    """Summarized but not sent: the model answers a summary, not the request (0.54, keep_messages=0)."""
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 11)) + " User: U11"
    (v,) = only(_keep_user_case([user("U1")], saw).cassette, "content_lost")
    assert v.evidence["lost"] == ["U11"] and "given to the summarizer" in v.message
    assert only(_keep_user_case([user("U1"), user("U11")], saw).cassette, "content_lost") == []


@pytest.mark.parametrize(
    ("version", "scenario_id", "flagged"),
    [
        ("0.54.0", "window_receipt_keep1", True),
        ("0.62.0", "window_receipt_keep1", False),
        ("0.54.0", "summary_keep0", True),
        ("0.62.0", "summary_keep0", False),
    ],
)
def test_content_lost_current_prompt_on_real_recordings(version: str, scenario_id: str, flagged: bool) -> None:
    """0.54 drops the current prompt with keep_messages=1 and receipts (kept from 0.55), or keep_messages=0
    (summarized; kept from 0.60); 0.62 always keeps the newest message."""
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / f"{scenario_id}.cassette")
    found = only(c, "content_lost")
    assert [v.evidence["newest_unsent"] for v in found] == (["question number 6 about topic6"] if flagged else [])


def test_content_lost_reads_the_summarizer_transcript_with_its_tag_escaping_undone() -> None:
    """0.59 on escape the ``<`` of the transcript's own tags inside a message (``&lt;/message>``) so no text
    forges an element: the message was summarized, not lost. Any other text still has to be there."""
    saw = ("<message role=\"user\">\nU1\n</message>\n<message role=\"assistant\">\nclose it with &lt;/message> "
           "and &lt;messages> now\n</message>")
    b = Build()
    run = b.run("U3", [user("U1"), reply("close it with </message> and <messages> now")], [])
    summarize(b, saw, "Summary.")
    sent = [ModelRequest(parts=[SystemPromptPart("Summary.")]), user("U3")]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    assert only(b.cassette, "content_lost") == []
    b.cassette.exchanges[0].messages = b.ids([user(saw.replace("close it", "open it"))])
    (v,) = only(b.cassette, "content_lost")
    assert v.evidence["lost"] == [message_label(dump_messages([reply("close it with </message> and <messages> now")])[0])]


@pytest.mark.parametrize("version", ["0.54.0", "0.60.0", "0.62.0"])
def test_content_lost_transcript_tags_on_real_recordings(version: str) -> None:
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / "transcript_tags.cassette")
    said = json.dumps(c.expand(c.exchanges[0].messages))
    assert ("&lt;/message>" in said) == (version != "0.54.0")  # the summarizer was sent the escaped text
    assert only(c, "content_lost") == []


def _applied_later(saw: str) -> Build:
    """A summarizer call made during the first turn whose summary is applied on the third (a background
    compaction): no summarizer call runs between the second and third requests."""
    b = Build()
    history = turns(10)
    first = b.run("U11", history, [])
    b.request("main", first, [*history, user("U11")], reply("A11"))
    summarize(b, saw, "Summary.")
    history = [*history, user("U11"), reply("A11")]
    b.cassette.runs[first].result = b.ids(history)
    second = b.run("U12", history, [])
    b.request("main", second, [*history, user("U12")], reply("A12"))
    history = [*history, user("U12"), reply("A12")]
    b.cassette.runs[second].result = b.ids(history)
    third = b.run("U13", history, [])
    summary = SystemPromptPart("Summary of previous conversation:\n\nSummary.")  # as 0.52-0.60 write one
    sent = [ModelRequest(parts=[summary, *(UserPromptPart(f"U{i}") for i in range(6, 10))]),
            user("U11"), reply("A11"), user("U12"), reply("A12"), user("U13")]
    b.request("main", third, sent, reply("A13"))
    b.cassette.runs[third].result = b.ids([*sent, reply("A13")])
    return b


def test_content_lost_of_a_summary_applied_turns_after_its_summarizer_ran() -> None:
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 9)) + " User: U9"
    (v,) = only(_applied_later(saw).cassette, "content_lost")
    assert (v.index, v.evidence["lost"], v.evidence["summarizer"]) == (2, ["A9", "U10", "A10"], [f"{SUMMARIZER}[0]"])
    saw = " ".join(f"User: U{i} Assistant: A{i}" for i in range(1, 11))
    assert only(_applied_later(saw).cassette, "content_lost") == []


def test_content_lost_background_compaction_on_real_recordings() -> None:
    """FallbackCompaction(background_start=0.5) on 0.62.0: started on the first turn, applied on the fourth."""
    from replay.cassette import load

    base = ROOT / "tests" / "fixtures" / "harness-0.62.0" / "intent"
    c = load(base / "background_keep_user_messages_true.cassette")
    roles = [f"{e.role}[{e.index}]" for e in c.exchanges]
    assert roles.index(f"{SUMMARIZER}[0]") < roles.index("main[2]")  # nothing summarized between main[2] and main[3]
    (v,) = only(c, "content_lost")
    assert v.index == 3 and v.evidence["summarizer"] == [f"{SUMMARIZER}[0]"]
    assert [label.split()[0] + label.split()[2] for label in v.evidence["lost"]] == ["answer9", "question10", "answer10"]
    assert only(load(base / "background_keep_user_messages_false.cassette"), "content_lost") == []


def test_content_lost_a_prompt_the_run_holds_redacted_is_not_lost() -> None:
    """An InputGuardrail `replace` rewrites the prompt in what is sent and in the run's history: the check
    rebuilt the original prompt from `run.prompt` as the newest message, and called it lost."""
    b = Build()
    run = b.run("my code is secret 12345 please store it", turns(5), [])
    sent = [user("U1"), reply("A5"), user("my code is [REDACTED] please store it")]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    assert only(b.cassette, "content_lost") == []
    # another prompt of the same shape is not the prompt edited in place: the window dropped the prompt
    b = Build()
    run = b.run("question 6 about topic6", [*turns(4), user("question 1 about topic1"), reply("A5")], [])
    sent = [user("question 1 about topic1")]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    (v,) = only(b.cassette, "content_lost")
    assert v.evidence["newest_unsent"] == "question 6 about topic6"


@pytest.mark.parametrize("version", ["0.54.0", "0.62.0"])
@pytest.mark.parametrize("compaction", ["window", "summary"])
def test_content_lost_redacted_prompt_on_real_recordings(version: str, compaction: str) -> None:
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / f"redacted_prompt_{compaction}.cassette")
    sent = json.dumps(c.expand(c.exchanges[-1].messages))
    assert "[REDACTED]" in sent and "secret 12345" not in sent
    assert only(c, "content_lost") == []


def _two_compactions_in_one_run(second_saw: str) -> Build:
    """One run of tool calls compacted twice: the second summarizer is given the first's summary."""
    b = Build()
    run = b.run("U3", turns(2), [])
    call = [ModelResponse(parts=[ToolCallPart("step", {"n": n}, tool_call_id=f"c{n}")]) for n in (1, 2)]
    ret = [ModelRequest(parts=[ToolReturnPart("step", f"ok {n}", tool_call_id=f"c{n}")]) for n in (1, 2)]
    b.request("main", run, [*turns(2), user("U3")], call[0])
    summarize(b, "User: U1 Assistant: A1 User: U2 Assistant: A2", "S1.")
    b.request("main", run, [ModelRequest(parts=[SystemPromptPart("S1.")]), user("U3"), call[0], ret[0]], call[1])
    summarize(b, second_saw, "S2.")
    kept = [ModelRequest(parts=[SystemPromptPart("S2.")]), call[1], ret[1]]
    b.request("main", run, kept, reply("Done."))
    b.cassette.runs[run].result = b.ids([*kept, reply("Done.")])
    return b


def test_content_lost_of_a_second_compaction_in_one_run_starts_from_the_first() -> None:
    """What the first compaction summarized is its summary by the second: not lost again (U1…A2 were
    flagged, and the run's final answer with them, since the compacted result no longer lined up)."""
    assert only(_two_compactions_in_one_run("S1. User: U3").cassette, "content_lost") == []
    (v,) = only(_two_compactions_in_one_run("S1.").cassette, "content_lost")  # the second one drops U3
    assert (v.index, v.evidence["lost"], v.evidence["summarizer"]) == (2, ["U3"], [f"{SUMMARIZER}[1]"])


def test_compaction_grew_request_knows_a_summary_written_as_a_system_prompt() -> None:
    """Up to 0.60 a summary is a system prompt opening with "Summary of previous conversation:". A compaction
    that summarized only the first prompt, which it also kept, added the summary and dropped nothing: it
    read as not compacted at all (as a plan appended would), so the growth went unflagged."""
    b = Build()
    run = b.run("U2", turns(1), [])
    summarize(b, "User: U1", "A summary of the whole conversation so far, longer than the conversation itself.")
    summary = SystemPromptPart("Summary of previous conversation:\n\nA summary of the whole conversation so far, "
                               "longer than the conversation itself.")
    sent = [ModelRequest(parts=[summary, UserPromptPart("U1")]), reply("A1"), user("U2")]
    b.request("main", run, sent, reply("Done."))
    b.cassette.runs[run].result = b.ids([*sent, reply("Done.")])
    (v,) = only(b.cassette, "compaction_grew_request")
    assert v.evidence["requests"] == [0]
    # the user's own system prompt is no summary: the same growth without a summarizer call is no compaction
    b = Build()
    run = b.run("U2", turns(1), [])
    sent = [ModelRequest(parts=[SystemPromptPart("You are helpful, thorough and kind to every user."),
                                UserPromptPart("U1")]), reply("A1"), user("U2")]
    b.request("main", run, sent, reply("Done."))
    assert only(b.cassette, "compaction_grew_request") == []


@pytest.mark.parametrize("version", ["0.54.0", "0.62.0"])
def test_compaction_grew_request_summary_of_the_first_prompt_on_real_recordings(version: str) -> None:
    from replay.cassette import load

    c = load(ROOT / "tests" / "fixtures" / f"harness-{version}" / "intent" / "summary_of_the_first_prompt.cassette")
    (v,) = only(c, "compaction_grew_request")
    assert v.evidence["requests"] == [0] and v.evidence["after"][0] > v.evidence["before"]


# --------------------------------------------------------------------------- empty_summary


def _empty_case(summary: str, *, run_error: str | None = None, compacted: bool = True) -> Build:
    b = Build()
    history = turns(5)
    run = b.run("continue", history, [])
    summarize(b, "summarize", summary, run_error=run_error)
    summary_request = ModelRequest(
        parts=[SystemPromptPart(f"Summary of previous conversation:\n\n{summary}"), UserPromptPart("U1")]
    )  # how harness 0.54 sends a summary
    sent = [summary_request, reply("A5"), user("continue")] if compacted else [*history, user("continue")]
    b.request("main", run, sent, reply("ready"))
    return b


def test_empty_summary_accepted_into_the_history_is_flagged() -> None:
    (v,) = only(_empty_case("   \n").cassette, "empty_summary")
    assert (v.role, v.index) == (SUMMARIZER, 0)
    assert v.evidence == {"summary": "   \n", "request": "main[0]", "source_messages": 11, "sent_messages": 3}


def test_empty_summary_rejected_or_real_is_not_flagged() -> None:
    assert only(_empty_case("Summary: five turns.").cassette, "empty_summary") == []
    # 0.62 retries a blank summary and fails the summarizer run: the history is left alone
    rejected = _empty_case("", run_error="Exceeded maximum output retries (1)", compacted=False)
    assert only(rejected.cassette, "empty_summary") == []
    assert only(_empty_case("", compacted=False).cassette, "empty_summary") == []


def test_empty_summary_in_a_compaction_part() -> None:
    b = Build()
    run = b.run("continue", turns(3), [])
    summarize(b, "summarize", " ")
    main = b.request("main", run, [user("continue")], reply("ok"))
    # 0.62 sends the summary as a CompactionPart in a request (0.54 only allows it in responses)
    summary = b.b.message({"kind": "request", "parts": [{"part_kind": "compaction", "content": " "}]})
    main.messages = [summary, *main.messages]
    (v,) = only(b.cassette, "empty_summary")
    assert v.evidence["sent_messages"] == 2


# --------------------------------------------------------------------------- dangling_tool_call


def _sent(*messages: ModelMessage, response: ModelResponse | None = None) -> Cassette:
    b = Build()
    b.request("main", None, list(messages), response or reply("ok"))
    return b.cassette


CALL = ModelResponse(parts=[ToolCallPart("add", {"a": 1}, tool_call_id="c1")])
RETURN = ModelRequest(parts=[ToolReturnPart("add", 2, tool_call_id="c1")])


def test_dangling_tool_call_without_result_and_with_a_reused_id() -> None:
    (v,) = only(_sent(user("add"), CALL, user("never mind")), "dangling_tool_call")
    assert v.evidence["calls"] == [{"tool_name": "add", "tool_call_id": "c1", "message": 1}]
    assert "add (c1" in v.message
    # the id is reused: one return cannot answer two calls
    (v,) = only(_sent(user("add"), CALL, RETURN, CALL, user("again")), "dangling_tool_call")
    assert [c["message"] for c in v.evidence["calls"]] == [3]


def test_paired_calls_retries_and_the_exchanges_own_response_are_not_dangling() -> None:
    with warnings.catch_warnings():  # deprecated on 2.62 in favour of ToolReturnPart(outcome=...), still accepted
        warnings.simplefilter("ignore")
        retry = ModelRequest(parts=[RetryPromptPart("bad args", tool_name="add", tool_call_id="c1")])
    assert only(_sent(user("add"), CALL, RETURN), "dangling_tool_call") == []
    assert only(_sent(user("add"), CALL, retry), "dangling_tool_call") == []
    assert only(_sent(user("add"), response=CALL), "dangling_tool_call") == []
    # two calls sharing an id inside one response, both answered (FIFO, as pydantic-ai 2.62 pairs them)
    twin = ModelResponse(parts=[ToolCallPart("add", {}, tool_call_id="c1"), ToolCallPart("add", {}, tool_call_id="c1")])
    assert only(_sent(user("add"), twin, ModelRequest(parts=[RETURN.parts[0], RETURN.parts[0]])), "dangling_tool_call") == []


@pytest.mark.parametrize(
    "messages",
    [
        [user("add"), CALL, user("never mind")],
        [user("add"), CALL, RETURN],
        [user("add"), CALL, RETURN, CALL, user("again")],
        [user("add"), RETURN, CALL, user("late")],
    ],
)
def test_dangling_rule_agrees_with_pydantic_ai(messages: list[ModelMessage]) -> None:
    helper = pytest.importorskip("pydantic_ai.messages")._dangling_tool_calls_by_response  # private: may move
    theirs = sorted((i, c.tool_call_id) for i, calls in helper(messages).items() for c in calls)
    ours = [(i, p["tool_call_id"]) for i, p in _tool_calls._dangling(dump_messages(messages))]
    assert ours == theirs


# --------------------------------------------------------------------------- expectation


def test_expectation_mismatch_and_missing_observation() -> None:
    c = Cassette(
        observations=[ObservationRecord(name="lost", value=["A9"]), ObservationRecord(name="output", value="ready")],
        expectations={"lost": [], "output": "ready", "calls": 1},
    )
    got = {v.evidence["name"]: v for v in only(c, "expectation")}
    assert set(got) == {"lost", "calls"}
    assert got["lost"].evidence == {"name": "lost", "expected": [], "observed": ["A9"]}
    assert got["calls"].message == "calls: expected 1, never observed"
    # as JSON, as every other line shows an observation: it read `expected True, observed False`, `['A9']`
    assert got["lost"].message == 'lost: expected [], observed ["A9"]'
    flag = only(Cassette(observations=[ObservationRecord(name="paired", value=False)], expectations={"paired": True}),
                "expectation")
    assert [v.message for v in flag] == ["paired: expected true, observed false"]
    assert only(Cassette(observations=[ObservationRecord(name="x", value=1)], expectations={"x": 1}), "expectation") == []


# --------------------------------------------------------------------------- real recordings


@pytest.fixture(scope="module")
def seeds() -> dict[str, Cassette]:
    files = [str(ROOT / "scenarios/seed000_compaction.py"), str(ROOT / "scenarios/seed001_keep_user_messages.py")]
    wanted = {"seed000/long", "seed000/short", "seed000/below_trigger", "seed000/short_large",
              "seed001/keep_user_messages_true", "seed001/keep_user_messages_false"}
    return {s.id: record(s) for s in discover(files) if s.id in wanted}


def _mains(c: Cassette) -> list[Exchange]:
    return [e for e in c.exchanges if e.role == "main" and e.kind == "request"]


def test_seed000_long_grew_request_figures(seeds: dict[str, Cassette]) -> None:
    c = seeds["seed000/long"]
    grown = only(c, "compaction_grew_request")
    if _version(HARNESS) >= (0, 63):  # fixed: compaction only applies when it shrinks
        assert grown == []
        return
    (v,) = grown
    mains = _mains(c)
    assert v.evidence["after"] == [e.estimate for e in mains]
    assert v.evidence["before"] == c.runs[0].estimate == v.evidence["uncompacted"][0]
    assert v.evidence["requests"] == [e.index for e in mains]
    assert v.evidence["uncompacted"] == sorted(v.evidence["uncompacted"])  # the conversation grows run by run
    if HARNESS == "0.62.0":
        assert v.evidence == {"before": 19, "after": [889, 887, 889], "uncompacted": [19, 21, 25], "requests": [0, 1, 2]}
        assert v.message == (
            "compaction grew the request: 19 tokens before, 889, 887, 889 after (main[0], main[1], main[2]); "
            "uncompacted 19, 21, 25"
        )


def test_grew_request_names_its_ruler_when_it_is_not_the_recordings(seeds: dict[str, Cassette]) -> None:
    """A 0.62 recording checked under 0.54 read "889, 888, 890 after" where the seed and ``replay show`` say
    889, 887, 889 (each harness estimates a little differently; both sides of the check use the installed
    one). The message now says which estimator counted and what the recording's own figures were."""
    c = seeds["seed000/long"]
    if not only(c, "compaction_grew_request"):
        pytest.skip(f"harness {HARNESS} does not grow seed000/long: nothing to word")
    elsewhere = c.model_copy(deep=True)
    elsewhere.header.harness_version = "0.1.0"
    for ex in _mains(elsewhere):
        ex.estimate = (ex.estimate or 0) + 1  # as another harness's estimator counted them when recording
    (v,) = only(elsewhere, "compaction_grew_request")
    recorded = ", ".join(str(e.estimate) for e in _mains(elsewhere))
    assert v.message.endswith(f" (estimated by the installed harness {HARNESS}; harness 0.1.0 recorded {recorded})")
    (same,) = only(c, "compaction_grew_request")
    assert "estimated by" not in same.message  # recorded here: the figures are the recording's own


def test_seed000_controls(seeds: dict[str, Cassette]) -> None:
    assert run_checks(seeds["seed000/below_trigger"]) == []
    assert run_checks(seeds["seed000/short_large"]) == []
    short = only(seeds["seed000/short"], "compaction_grew_request")
    if HARNESS == "0.62.0":
        assert [v.evidence for v in short] == [{"before": 19, "after": [50], "uncompacted": [19], "requests": [0]}]


def test_seed001_keep_user_messages_loses_a9_u10_a10(seeds: dict[str, Cassette]) -> None:
    c = seeds["seed001/keep_user_messages_true"]
    (v,) = only(c, "content_lost")
    final = {name for o in c.observations if o.name == "history_turns" for name in o.value}
    assert v.evidence["lost"] and not final & set(v.evidence["lost"])  # lost ones are not in the run's final history
    if HARNESS == "0.62.0":
        assert v.evidence["lost"] == ["A9", "U10", "A10"]
    elif HARNESS == "0.54.0":  # the current prompt is dropped too
        assert v.evidence["lost"] == ["A9", "U10", "A10", "U11"]
    assert only(seeds["seed001/keep_user_messages_false"], "content_lost") == []
    if HARNESS == "0.62.0":  # on 0.54 the control's tiny summary still grows the request (11 -> 13)
        assert run_checks(seeds["seed001/keep_user_messages_false"]) == []


def test_replaying_the_same_recording_adds_no_violation(seeds: dict[str, Cassette]) -> None:
    c = seeds["seed001/keep_user_messages_true"]
    assert run_checks(c) and new_violations(c, c) == []


def test_a_worse_known_violation_names_what_is_new() -> None:
    """Seed 001 recorded on 0.62 loses A9, U10, A10; on 0.54 also U11: the new violation says U11."""
    from pathlib import Path

    from replay.cassette import load
    from replay.invariants import new_violations

    root = Path(__file__).resolve().parents[2]
    recorded = load(root / "cassettes" / "seed001" / "keep_user_messages_true.cassette")
    older = load(root / "tests" / "fixtures" / "harness-0.54.0" / "seed001" / "keep_user_messages_true.cassette")
    (lost,) = [v for v in new_violations(recorded, older) if v.invariant == "content_lost"]
    assert lost.evidence["new"] == ["U11"] and "new since the recording: U11" in lost.message


def _all_recordings() -> list[Path]:
    from replay.cassette import iter_cassettes

    root = Path(__file__).resolve().parents[2]
    return sorted([*iter_cassettes(root / "cassettes"), *iter_cassettes(root / "tests" / "fixtures")])


def test_dangling_calls_resumed_from_the_previous_request_equal_a_walk_of_each_request() -> None:
    """The resumable walk (a request continuing its role's previous one) finds exactly what walking
    each request from its first message finds, on every bundled and fixture recording."""
    from replay.cassette import load

    checked = found = 0
    for path in _all_recordings():
        c = load(path)
        for ex, calls in _tool_calls._dangling_per_request(c):
            assert calls == _reference_dangling(c.expand(ex.messages)), (path, ex.role, ex.index)
            checked += 1
            found += bool(calls)
    assert checked > 100


def _reference_dangling(messages: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The pairing walk as first written (pydantic-ai 2.62's rule), kept here as the reference."""
    open_calls: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    dangling: list[tuple[int, dict[str, Any]]] = []
    for index, message in enumerate(messages):
        for part in message.get("parts", []):
            kind = part.get("part_kind")
            call_id = part.get("tool_call_id")
            if message.get("kind") == "response" and kind == "tool-call":
                pending = open_calls.setdefault(call_id, [])
                if pending and pending[-1][0] != index:
                    dangling += pending
                    pending.clear()
                pending.append((index, part))
            elif message.get("kind") == "request" and (
                kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None)
            ):
                if open_calls.get(call_id):
                    open_calls[call_id].pop(0)
    dangling += [call for calls in open_calls.values() for call in calls]
    return sorted(dangling, key=lambda d: d[0])


def test_dangling_calls_resumed_on_random_histories_equal_a_walk_of_each_request() -> None:
    """Reused ids, retries, results without calls, histories that grow and then restart (compaction)."""
    import random

    rng = random.Random(12)
    checked = found = 0
    for _ in range(300):
        table: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 12)):
            ids = [f"c{rng.randint(1, 3)}" for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.5:
                parts = [{"part_kind": "tool-call", "tool_name": "f", "tool_call_id": i} for i in ids]
                table.append({"kind": "response", "parts": parts})
            else:
                kinds = ["tool-return", "retry-prompt", "user-prompt"]
                parts = [{"part_kind": rng.choice(kinds), "tool_name": rng.choice(["f", None]), "tool_call_id": i} for i in ids]
                table.append({"kind": "request", "parts": parts})
        exchanges, history = [], []
        for n in range(rng.randint(1, 8)):
            if history and rng.random() < 0.2:
                history = history[rng.randint(0, len(history)) :]  # compacted: no longer a prefix
            history = history + [rng.randrange(len(table)) for _ in range(rng.randint(0, 3))]
            role = rng.choice(["main", "main", "other"])
            exchanges.append(Exchange(seq=n, role=role, index=n, kind="request", messages=list(history)))
        c = Cassette(messages=table, exchanges=exchanges)
        for ex, calls in _tool_calls._dangling_per_request(c):
            assert calls == _reference_dangling(c.expand(ex.messages))
            checked += 1
            found += bool(calls)
    assert checked > 500 and found > 100


def test_characters_by_the_len_tokenizer_equal_four_copies_floored() -> None:
    """Each message's count the checks use (one copy, ``len`` as tokenizer) is the four-copy estimate it replaces."""
    from replay.cassette import load

    checked = 0
    for path in _all_recordings():
        for message in load(path).messages:
            if not _messages._additive(message):
                continue
            bare = {**message, "instructions": None} if message.get("instructions") else message
            try:
                loaded = _messages.load_messages([bare])
            except Exception:
                continue
            assert _messages._message_chars(message, _messages.load_messages([message])) == estimate(loaded * 4)
            checked += 1
    assert checked > 500


def test_counting_by_hand_is_the_harness_ruler() -> None:
    """Where the installed pydantic-ai cannot load a message (a later slim's part kind), its characters are
    counted by hand. That count joined parts with spaces, which the harness does not: seed000/long checked
    under 0.54 read "889, 888, 890 after" where the recording says 889, 887, 889, and a history of five
    requests merged into one request "grew" from 5 to 6 tokens."""
    from replay.cassette import load
    from replay.invariants._messages import _hand_chars, _parts
    from replay.recorder import load_messages

    c = load(ROOT / "cassettes" / "seed000" / "long.cassette")
    texts = [m for m in c.messages if not m.get("instructions") and _parts(m) and all(p.get("part_kind") in ("user-prompt", "text", "system-prompt", "compaction") for p in _parts(m))]
    multi = [m for m in texts if len(_parts(m)) > 1]
    assert multi, "the check needs messages of several parts"
    for m in texts:
        assert _messages.estimate(load_messages([m]) * 4) == _hand_chars(m), m


def _run_per_turn(turns: int) -> Cassette:
    """``turns`` agent runs of one conversation, each with a summarizer call inside it (its run's parent) before its
    one main request: what a long chat compacted every turn looks like to the checks."""
    b = CassetteBuilder(Header(scenario_id="unit/run_per_turn"))
    c = b.cassette
    c.header.roles = {"main": "scenarios.x", "summarizing_compaction": "pydantic_ai_harness.compaction"}
    history: list[dict[str, Any]] = []
    for t in range(turns):
        main_run, summary_run = 2 * t, 2 * t + 1
        c.runs += [AgentRunRecord(role="main"), AgentRunRecord(role="summarizing_compaction", parent=main_run)]
        ask = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"Summarize turn {t}."}]}
        said = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": f"Summary {t}."}]})
        c.exchanges.append(Exchange(seq=2 * t, role="summarizing_compaction", index=t, kind="request",
                                    messages=b.messages([ask]), response=said, run=summary_run))
        history = [*history, {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"question {t}"}]}]
        answer = {"kind": "response", "parts": [{"part_kind": "text", "content": f"answer {t}"}]}
        c.exchanges.append(Exchange(seq=2 * t + 1, role="main", index=t, kind="request", messages=b.messages(history),
                                    response=b.message(answer), run=main_run))
        history.append(answer)
    return c


def test_each_request_reads_the_compaction_calls_near_it_not_all_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work counted, not timed: every compaction call a check weighs for a main request is asked whether its run
    failed. With one agent run per turn, a request's own earlier summarizer calls were once looked for among every
    call since the start (quadratic: bench line 9 read 5.77x for 4x the requests); each is now found among its own
    run's calls."""
    counted = 0
    real = _messages._run_failed

    def counting(c: Cassette, ex: Exchange) -> bool:
        nonlocal counted
        counted += 1
        return real(c, ex)

    for module in (_history, _content_lost):  # every caller of it among the checks
        monkeypatch.setattr(module, "_run_failed", counting)
    turns = 150
    run_checks(_run_per_turn(turns))
    assert 0 < counted <= 10 * turns, counted  # ≈ 3 a turn; every call before each request: ≈ turns² / 2

"""Differ: identical requests skipped, changes named by role/request/path, semantic summary."""

from __future__ import annotations

from typing import Any

from replay.cassette import Cassette, CassetteBuilder, Exchange, Header, ObservationRecord, Outcome
from replay.differ import diff


def cassette(contents: list[list[str]], output: str = "ok", harness: str = "0.62.0") -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/d", harness_version=harness, roles={"main": "scenarios.x"}))
    for i, texts in enumerate(contents):
        msgs = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": t}]} for t in texts]
        resp = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "r"}]})
        b.cassette.exchanges.append(
            Exchange(seq=i, role="main", index=i, kind="request", messages=b.messages(msgs), response=resp,
                     estimate=sum(len(t) for t in texts))
        )
    b.cassette.outcome = Outcome(status="ok", output=output)
    return b.cassette


def test_identical_is_unchanged() -> None:
    d = diff(cassette([["U1"], ["U1", "U2"]]), cassette([["U1"], ["U1", "U2"]]))
    assert not d.changed and d.requests == []


def test_a_different_message_is_a_loss_and_a_gain() -> None:
    d = diff(cassette([["U1"], ["U1", "U2"]]), cassette([["U1"], ["U1", "U9"]]))
    assert d.changed
    (req,) = d.requests
    assert req.label == "main[1]"
    assert [(e.kind, e.path, e.label) for e in req.entries] == [
        ("removed", "messages[1]", "U2"), ("inserted", "messages[1]", "U9")
    ]
    assert req.changes == [] and req.lost == ["U2"] and req.gained == ["U9"]


def test_an_edited_message_is_named_by_role_index_and_path() -> None:
    d = diff(cassette([["U1"], ["U1", "please add two and three"]]), cassette([["U1"], ["U1", "please add two and four"]]))
    (req,) = d.requests
    assert [(e.kind, e.path) for e in req.entries] == [("changed", "messages[1]")]
    assert [c.path for c in req.changes] == ["main[1].messages[1].parts[0].content"]
    assert req.lost == [] and req.gained == []


def test_counts_estimates_and_outcome() -> None:
    d = diff(cassette([["U1"]], output="a"), cassette([["U1"], ["U1", "U2"]], output="b"))
    assert [(r.role, r.a, r.b) for r in d.roles] == [("main", 1, 2)]
    assert [r.status for r in d.requests] == ["added"]
    assert [(m.estimate_a, m.estimate_b) for m in d.main_requests] == [(2, 2), (None, 4)]
    assert d.outcome is not None and d.outcome[0]["output"] == "a"


def test_timestamps_do_not_count() -> None:
    a, b = cassette([["U1"]]), cassette([["U1"]])
    a.messages[0]["timestamp"] = "2026-01-01T00:00:00Z"
    b.messages[0]["timestamp"] = "2027-01-01T00:00:00Z"
    assert not diff(a, b).changed


def test_an_instructions_only_change_is_a_field_diff_not_a_loss_with_the_same_text() -> None:
    from replay.reporter import diff_lines

    long_prompt = "You are a context summarization assistant. " * 4
    a, b = cassette([[long_prompt + "U1"]]), cassette([[long_prompt + "U1"]])
    a.messages[a.exchanges[0].messages[0]]["instructions"] = "Summarise. Keep names."
    b.messages[b.exchanges[0].messages[0]]["instructions"] = "Summarise. Keep names and paths."
    (req,) = diff(a, b).requests
    assert req.lost == [] and req.gained == []
    assert [c.path for c in req.changes] == ["main[0].messages[0].instructions"]
    lines = diff_lines(diff(a, b))
    assert "  main[0].messages[0].instructions: Summarise. Keep names. → Summarise. Keep names and paths." in lines
    assert not [ln for ln in lines if "lost" in ln or "gained" in ln or "summarization" in ln]


def _words(n: int, tag: str) -> list[str]:
    return [f"{tag} message {k} " + " ".join(f"{tag}{k}w{j}" for j in range(20)) for k in range(n)]


def test_a_history_pair_is_aligned_once_however_many_requests_resend_it(monkeypatch) -> None:
    """A crafted 1.7 MB cassette of 3,500 requests re-sending 1,000 changed messages took 10 minutes and 4.3 GB:
    each request aligned (and scored) the same two histories again."""
    import replay.differ as differ_module
    from replay.differ import _align

    calls: list[int] = []
    real = _align.align
    monkeypatch.setattr(differ_module, "align", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    a, b = _words(30, "x"), _words(30, "y")
    d = diff(cassette([a] * 40), cassette([b] * 40))
    assert len(d.requests) == 40 and all(len(r.entries) == 60 for r in d.requests)
    assert len([c for c in calls]) <= 2  # the messages once (parts inside a changed pair would be more)


def test_past_the_pair_budget_unmatched_messages_are_removed_and_inserted(monkeypatch) -> None:
    from replay.differ import _align

    a = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": t}]} for t in ("alpha beta gamma one",)]
    b = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": t}]} for t in ("alpha beta gamma two",)]
    found = _align.align(a, b, [b"a"], [b"b"], _align.Memo())
    assert [p.kind for p in found] == ["changed"]  # 3 of 4 words shared: one changed message
    spent = _align.Memo(budget=0)
    assert [p.kind for p in _align.align(a, b, [b"a"], [b"b"], spent)] == ["removed", "inserted"] and spent.exhausted


def test_past_the_detail_bound_further_requests_are_listed_without_details(monkeypatch) -> None:
    import replay.differ as differ_module
    from replay.reporter import diff_json, diff_lines

    monkeypatch.setattr(differ_module, "DETAIL_BOUND", 10)  # each request here makes 2 (an entry and a change)
    d = diff(cassette([[f"U{i}", f"please add {i}"] for i in range(20)]), cassette([[f"U{i}", f"please sum {i}"] for i in range(20)]))
    detailed = [r for r in d.requests if r.detailed]
    assert len(d.requests) == 20 and 0 < len(detailed) < 20  # every differing request still listed
    assert all(not r.entries and not r.changes for r in d.requests if not r.detailed)
    (warning,) = [w for w in d.warnings if "detail bound" in w]
    assert f"{20 - len(detailed)} more requests differ" in warning
    assert diff_json(d)["requests"][-1]["detailed"] is False and "detailed" not in diff_json(d)["requests"][0]
    assert any("details left out" in line for line in diff_lines(d))


def test_a_nan_observation_equals_itself() -> None:
    """NaN is unequal to itself: a cassette with ``score: nan`` was CHANGED against itself and its expectation
    ``score: nan`` failed forever."""
    from replay import invariants
    from replay.cassette import ObservationRecord

    c = cassette([["U1"]])
    c.observations = [ObservationRecord(name="score", value=float("nan")), ObservationRecord(name="xs", value=[1.0, float("nan")])]
    c.expectations = {"score": float("nan")}
    assert not diff(c, c.model_copy(deep=True)).changed
    assert [v for v in invariants.evaluate(c).violations if v.invariant == "expectation"] == []
    other = c.model_copy(deep=True)
    other.observations[0].value = 1.0
    assert [o.path for o in diff(c, other).observations] == ["observations.score"]


def test_a_value_that_changed_type_is_a_change() -> None:
    """`==` has True == 1 and 5 == 5.0: an output converter returning float instead of int, an observation
    True becoming 1, replayed SAME (the replay equal "but for stamps" took the same shortcut)."""
    from replay.cassette import ObservationRecord, Outcome

    c = cassette([["U1"]])
    c.outcome = Outcome(status="ok", output={"total": 5})
    c.observations = [ObservationRecord(name="flag", value=True)]
    other = c.model_copy(deep=True)
    other.outcome = Outcome(status="ok", output={"total": 5.0})
    other.observations = [ObservationRecord(name="flag", value=1)]
    d = diff(c, other)
    assert d.changed and d.outcome is not None
    assert [(o.path, o.kind) for o in d.observations] == [("observations.flag", "type")]
    assert not diff(c, c.model_copy(deep=True)).changed


def test_a_cancelled_calls_message_is_not_compared() -> None:
    """A parallel guardrail cancelling a streamed call: anyio's message names the cancel scope and the task by
    id ("Cancelled via cancel scope 7f28648b4860 by <Task cancelling name='Task-41' …"), new in every run, so
    the scenario was `changed` against itself and `--check-determinism` said its recordings differ."""
    from replay.cassette import ErrorInfo

    a, b = cassette([["U1"]]), cassette([["U1"]])
    a.exchanges[0].error = ErrorInfo(type="asyncio.exceptions.CancelledError", message="Cancelled via cancel scope 7f28648b4860 by <Task-41>")
    b.exchanges[0].error = ErrorInfo(type="asyncio.exceptions.CancelledError", message="Cancelled via cancel scope 7f26b3e15d00 by <Task-39>")
    assert not diff(a, b).changed
    b.exchanges[0].error = ErrorInfo(type="pydantic_ai.exceptions.ModelHTTPError", message="Cancelled via cancel scope 7f28648b4860 by <Task-41>")
    assert diff(a, b).changed


def test_a_tool_return_that_became_validation_errors_is_changed_not_rewrapped() -> None:
    """A tool returning `0` whose call now fails validation: the part's words were only its tool name (a number
    and a list of error mappings gave none), so the diff said `~ rewrapped (tool-return → tool-return[])`."""
    def one(content: Any) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/d", harness_version="0.62.0", roles={"main": "scenarios.x"}))
        ret = {"part_kind": "tool-return", "tool_name": "lim", "tool_call_id": "c1", "content": content}
        msgs = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
                {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "lim", "tool_call_id": "c1", "args": {"k": 0}}]},
                {"kind": "request", "parts": [ret]}]
        resp = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "r"}]})
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages(msgs), response=resp))
        b.cassette.outcome = Outcome(status="ok", output="r")
        return b.cassette

    errors = [{"type": "greater_than_equal", "loc": ["k"], "msg": "Input should be greater than or equal to 1", "input": 0}]
    d = diff(one(0), one(errors))
    (req,) = d.requests
    assert [e.kind for e in req.entries] == ["changed"], req.entries
    (change,) = req.changes
    assert change.path == "main[0].messages[2].parts[0].content" and change.old == 0 and change.new == errors


def test_large_user_values_are_not_paired_field_by_field() -> None:
    """DeepDiff pairs list items one by one: two 500 x 500 grids in an observation (a 565 KB cassette from a pull
    request) cost 40 s of CPU and 2.3 GB. Past FIELD_DIFF_NODES a mapping is compared key by key and anything
    else is one change of the whole value."""
    from replay.cassette import ObservationRecord
    from replay.differ import FIELD_DIFF_NODES

    side = int(FIELD_DIFF_NODES ** 0.5) + 10
    a, b = cassette([["U1"]]), cassette([["U1"]])
    a.observations = [ObservationRecord(name="grid", value=[[i] * side for i in range(side)]), ObservationRecord(name="n", value=1)]
    b.observations = [ObservationRecord(name="grid", value=[[i + 1] * side for i in range(side)]), ObservationRecord(name="n", value=2)]
    d = diff(a, b)
    assert [(c.path, c.kind) for c in d.observations] == [("observations.grid", "changed"), ("observations.n", "changed")]
    small = cassette([["U1"]])
    small.observations = [ObservationRecord(name="grid", value=[[0, 1], [2, 3]])]
    other = small.model_copy(deep=True)
    other.observations = [ObservationRecord(name="grid", value=[[0, 1], [2, 4]])]
    assert [c.path for c in diff(small, other).observations] == ["observations.grid[1][1]"]  # small: field by field


# --------------------------------------------------------------------------- one edited text without DeepDiff

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import replay.differ as _differ  # noqa: E402

_KEYS = st.sampled_from(["content", "parts", "x01", "x1", "__private", "_own", "a.b", "[0]", "kind"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, width=16), st.text(max_size=4))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
                       max_leaves=12)


def _deepdiff_only(prefix: str, a: Any, b: Any, monkeypatch: Any) -> list[Any]:
    with monkeypatch.context() as m:
        m.setattr(_differ, "_one_text_change", lambda *args: None)
        return _differ._changes(prefix, a, b)


def _edited(value: Any, path: list[Any], text: str) -> Any:
    """``value`` with the text at ``path`` replaced (maps copied on the way down)."""
    if not path:
        return text
    out = dict(value) if isinstance(value, dict) else list(value)
    out[path[0]] = _edited(value[path[0]], path[1:], text)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=st.dictionaries(_KEYS, _VALUES, max_size=5), b=st.dictionaries(_KEYS, _VALUES, max_size=5), prefix=st.sampled_from(["", "parts[1]"]))
@example(a={"content": "old", "kind": "text"}, b={"content": "new", "kind": "text"}, prefix="parts[0]")
@example(a={"__private": "old", "kind": "text"}, b={"__private": "new", "kind": "text"}, prefix="")
@example(a={"parts": {"x01": "a", "x1": "b"}}, b={"parts": {"x01": "c", "x1": "b"}}, prefix="")
@example(a={"parts": [{"content": "a"}, "b"]}, b={"parts": [{"content": "c"}, "b"]}, prefix="response")
@example(a={"parts": ["a", "b"]}, b={"parts": ["c", "b"]}, prefix="")
@example(a={"parts": [{"content": "a"}, 1]}, b={"parts": [{"content": "c"}, True]}, prefix="")
def test_one_edited_text_is_reported_as_deepdiff_reports_it(a: Any, b: Any, prefix: str, monkeypatch: Any) -> None:
    """Whatever ``_one_text_change`` answers is exactly DeepDiff's report (it answers None otherwise)."""
    for x, y in ((a, b), (a, a), (a, _edited_first_text(a))):
        fast = _differ._changes(prefix, x, y)
        slow = _deepdiff_only(prefix, x, y, monkeypatch)
        # NaN != NaN: two reports holding NaN are equal when they read alike (on 3.13 the two paths hold two
        # NaN objects, where 3.11's held one and the identity shortcut made them equal)
        assert fast == slow or repr(fast) == repr(slow), (fast, slow)


def _edited_first_text(value: Any) -> Any:
    """``value`` with its first text (depth first) made longer: the rerun's one edited answer."""
    def find(v: Any, path: list[Any]) -> list[Any] | None:
        if isinstance(v, str):
            return path
        for k, item in v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ():
            found = find(item, [*path, k])
            if found is not None:
                return found
        return None

    path = find(value, [])
    return value if not path else _edited(value, path, "edited " + str(_get(value, path)))


def _get(value: Any, path: list[Any]) -> Any:
    for k in path:
        value = value[k]
    return value


def test_the_rerun_shape_is_answered_without_deepdiff(monkeypatch: Any) -> None:
    """The common change, one answer's text edited, never reaches DeepDiff (the assumption above holds for it)."""
    import deepdiff

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("DeepDiff asked")

    monkeypatch.setattr(deepdiff, "DeepDiff", refused)
    a = {"kind": "response", "parts": [{"part_kind": "text", "content": "r"}, {"part_kind": "text", "content": "s"}]}
    b = {**a, "parts": [a["parts"][0], {"part_kind": "text", "content": "s (revised)"}]}
    assert _differ._changes("response", a, b) == [_differ.Change("response.parts[1].content", "changed", "s", "s (revised)")]
    assert _differ._changes("", {"k": 1, "response": a}, {"k": 1, "response": b}) == [
        _differ.Change("response.parts[1].content", "changed", "s", "s (revised)")]


def _parts_cassette(requests: list[list[list[str]]]) -> Cassette:
    """Each request a list of messages, each message a list of user-prompt texts (its parts)."""
    b = CassetteBuilder(Header(scenario_id="unit/d", harness_version="0.62.0", roles={"main": "scenarios.x"}))
    for i, msgs in enumerate(requests):
        body = [
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": t} for t in texts]} if texts[0][0] == "U"
            else {"kind": "response", "parts": [{"part_kind": "text", "content": t} for t in texts]}
            for texts in msgs
        ]
        resp = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "r"}]})
        b.cassette.exchanges.append(Exchange(seq=i, role="main", index=i, kind="request", messages=b.messages(body), response=resp))
    b.cassette.outcome = Outcome(status="ok", output="ok")
    return b.cassette


def test_a_prompt_merged_into_another_message_is_moved_not_lost() -> None:
    """A sliding window that drops an answer merges the user prompts around it into one request
    message: U2 is still sent, only in another message, so it is neither lost nor gained."""
    from replay.reporter import diff_lines

    a = _parts_cassette([[["U0 hello"], ["A fine"], ["U2 there"], ["A fine"], ["U3 more"]]])
    b = _parts_cassette([[["U0 hello", "U2 there"], ["A fine"], ["U3 more"]]])
    (req,) = diff(a, b).requests
    assert req.lost == ["A fine"] and req.gained == []
    assert ("moved", "messages[2→0].parts[0→1]", "U2 there") in [(e.kind, e.path, e.label) for e in req.entries]
    lines = diff_lines(diff(a, b))
    assert "  ~ moved messages[2→0].parts[0→1]: U2 there" in lines
    assert not [ln for ln in lines if "U2 there" in ln and ("removed" in ln or "inserted" in ln)]


def test_a_part_moved_out_of_a_message_that_keeps_others_is_moved() -> None:
    a = _parts_cassette([[["U0 hello", "U2 there"], ["A fine"], ["U3 more"]]])
    b = _parts_cassette([[["U0 hello"], ["A fine"], ["U3 more", "U2 there"]]])
    (req,) = diff(a, b).requests
    assert req.lost == [] and req.gained == []
    assert [(e.kind, e.path) for e in req.entries if e.kind != "changed"] == [("moved", "messages[0→2].parts[1]")]


def test_a_removed_message_only_partly_found_elsewhere_is_still_lost() -> None:
    a = _parts_cassette([[["U0 hello"], ["A fine"], ["U2 there", "U9 gone"], ["A fine"], ["U3 more"]]])
    b = _parts_cassette([[["U0 hello", "U2 there"], ["A fine"], ["U3 more"]]])
    (req,) = diff(a, b).requests
    assert "U2 there U9 gone" in " ".join(req.lost) or any("U9 gone" in x for x in req.lost)


def test_one_tool_call_held_as_text_and_as_a_dict_is_the_same_request() -> None:
    """Regression: one side streamed (pydantic-ai keeps the arguments' text), the other did not (a dict):
    `changed`, with `args: {"a": 1, "b": 2} → {"a": 1, "b": 2}`."""

    def one(args: Any) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/d", harness_version="0.62.0", roles={"main": "scenarios.x"}))
        msgs = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "add"}]},
                {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "add", "args": args, "tool_call_id": "c1"}]},
                {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "add", "content": 3, "tool_call_id": "c1"}]}]
        resp = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "3"}]})
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages(msgs), response=resp))
        b.cassette.outcome = Outcome(status="ok", output="3")
        return b.cassette

    assert not diff(one('{"a":1,"b":2}'), one({"a": 1, "b": 2})).changed
    d = diff(one('{"a":1,"b":2}'), one({"a": 1, "b": 5}))
    assert d.changed and [c.path for r in d.requests for c in r.changes] == ["main[0].messages[1].parts[0].args.b"]


def test_a_key_that_starts_with_two_underscores_is_compared() -> None:
    """DeepDiff leaves out ``__``-keys by default (its "private variables"): a GraphQL tool's return
    ``{"__typename": "User"}`` sent as ``"Admin"``, and an observation of it, read ``same``."""

    def with_return(typename: str) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/d", roles={"main": "scenarios.x"}))
        call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "user", "args": {"id": 1}, "tool_call_id": "g1"}]}
        sent = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "who?"}]}, call,
                {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "user", "tool_call_id": "g1",
                                               "content": {"__typename": typename, "id": 1}}]}]
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages(sent),
                                             response=b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]})))
        b.cassette.outcome = Outcome(status="ok", output="ok")
        b.cassette.observations = [ObservationRecord(name="node", value={"__typename": typename})]
        return b.cassette

    d = diff(with_return("User"), with_return("Admin"))
    assert d.changed
    (req,) = d.requests
    assert [c.path for c in req.changes] == ["main[0].messages[2].parts[0].content.__typename"]
    assert [(c.path, c.old, c.new) for c in d.observations] == [("observations.node.__typename", "User", "Admin")]


def test_request_fields_beside_the_messages_compare_by_type() -> None:
    """A tool schema's ``"default": 0`` sent as ``false`` is another schema (values compare by type): the
    request's fields beside its messages were compared with ``!=``, where ``0 == False``, and read ``same``."""

    def with_default(default: object) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/d", roles={"main": "scenarios.x"}))
        schema = {"type": "object", "properties": {"deep": {"default": default}}}
        params = {"function_tools": [{"name": "search", "parameters_json_schema": schema}], "output_mode": "text"}
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", parameters=b.blob(params),
                                             messages=b.messages([{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "q"}]}])))
        b.cassette.outcome = Outcome(status="ok", output="ok")
        return b.cassette

    d = diff(with_default(0), with_default(False))
    assert d.changed
    (req,) = d.requests
    assert [(c.path, c.kind, c.old, c.new) for c in req.changes] == [
        ("main[0].parameters.function_tools[0].parameters_json_schema.properties.deep.default", "type", 0, False)]


def test_messages_that_differ_only_in_a_values_type_are_no_equivalent_pair() -> None:
    """Two cassettes whose messages are ``==`` (``1 == True == 1.0``) took the fast path for recordings that
    differ only in stamps (``Facts.equivalent``): a tool's ``{"enabled": 1}`` sent as ``{"enabled": true}``
    read ``same`` whenever the two token estimates agreed."""

    def with_return(value: object) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/d", roles={"main": "scenarios.x"}))
        call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "enabled", "args": {}, "tool_call_id": "e1"}]}
        sent = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "on?"}]}, call,
                {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "enabled", "tool_call_id": "e1",
                                               "content": {"enabled": value}}]}]
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages(sent), estimate=7,
                                             response=b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]})))
        b.cassette.outcome = Outcome(status="ok", output="ok")
        return b.cassette

    for old, new in ((1, True), (0, False), (1, 1.0)):
        d = diff(with_return(old), with_return(new))
        assert d.changed, (old, new)
        assert [(c.path, c.kind) for r in d.requests for c in r.changes] == [("main[0].messages[2].parts[0].content.enabled", "type")]
    assert not diff(with_return(1), with_return(1)).changed


def test_a_request_only_one_side_made_says_what_it_sent() -> None:
    """A turn added to (or dropped from) a scenario: the report said only `main[2] added` / `main[2] removed`,
    not which turn it was."""
    from replay.reporter import diff_lines

    three = cassette([["hello"], ["hello", "how are you"], ["hello", "how are you", "again"]])
    two = cassette([["hello"], ["hello", "how are you"]])
    lines = diff_lines(diff(two, three))
    at = lines.index("main[2] added, 3 messages, estimate 21")
    assert lines[at + 1] == "  last message: again", lines
    lines = diff_lines(diff(three, two))
    at = lines.index("main[2] removed, 3 messages, estimate 21")
    assert lines[at + 1] == "  last message: again", lines


def test_a_tool_return_that_is_no_text_is_labelled_by_its_value() -> None:
    """A tool edited to return 6 instead of 5: the report said `- removed messages[0]: tool-return:add` and
    `+ inserted messages[0]: tool-return:add`, the same words on both lines."""
    from replay.differ import message_label

    def ret(value: Any) -> dict[str, Any]:
        return {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "add", "content": value}]}

    assert message_label(ret(5)) == "tool-return:add 5"
    assert message_label(ret(6)) == "tool-return:add 6"
    assert message_label(ret({"total": 6, "n": 2})) == 'tool-return:add {"n": 2, "total": 6}'
    assert message_label(ret({"items": list(range(99))})) == "tool-return:add"  # a large value: its kind only
    assert message_label(ret(None)) == "tool-return:add"
    assert message_label(ret("six")) == "six"  # text is the label, as before
    call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "add", "args": {"a": 2}}]}
    assert message_label(call) == "tool-call:add"  # a call's arguments change as a field diff


def test_a_request_only_one_side_made_says_what_it_sent_in_a_pytest_failure_too() -> None:
    """The pytest plugin's failure lists requests with its own lines: `main[2] added` alone there too."""
    from replay._pytest_report import failure_lines

    three = cassette([["hello"], ["hello", "how are you"], ["hello", "how are you", "again"]])
    two = cassette([["hello"], ["hello", "how are you"]])
    lines = failure_lines(diff(two, three))
    at = lines.index("main[2] added, 3 messages, estimate 21")
    assert lines[at + 1] == "  last message: again", lines

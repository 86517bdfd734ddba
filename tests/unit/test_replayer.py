"""Replayer: responses served per role in order, exhaustion policies, no model or network touched."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay.recorder import record
from replay.replayer import replay
from replay.scenario import Run, Scenario


def text(s: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(s)])


def make(func: Any, sid: str = "unit/replayer") -> Scenario:
    return Scenario(id=sid, func=func, path=None, doc="", source_hash="0")


CALLS: list[str] = []


def responders(extra_turns: int = 0) -> Any:
    async def scenario(run: Run) -> str:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            CALLS.append("main")
            return text(f"ready {len(messages)}")

        def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            CALLS.append("summ")
            return text("a summary")

        agent = Agent(
            FunctionModel(answer),
            capabilities=[SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=2)],
        )
        hist: list[ModelMessage] = [
            m for n in range(3) for m in (ModelRequest(parts=[UserPromptPart(f"t{n}")]), text(f"n{n}"))
        ]
        for turn in range(2 + extra_turns):
            result = await agent.run(f"turn {turn}", message_history=hist)
            hist = result.all_messages()
        run.observe("length", len(hist))
        return result.output

    return scenario


def test_replay_serves_recorded_responses_without_calling_models() -> None:
    sc = make(responders())
    recorded = record(sc)
    CALLS.clear()
    result = replay(sc, recorded)
    assert CALLS == []
    assert result.divergences == []
    assert result.result.outcome == recorded.outcome
    assert [(e.role, e.index) for e in result.result.exchanges] == [(e.role, e.index) for e in recorded.exchanges]


def test_exhausted_fail_stops_the_run_and_names_the_role() -> None:
    recorded = record(make(responders()))
    longer = make(responders(extra_turns=1))
    result = replay(longer, recorded, "fail")
    assert result.result.outcome.status == "error"
    exhausted = [d for d in result.divergences if d.kind == "exhausted"]
    assert exhausted and exhausted[0].role in {"main", "summarizing_compaction"}
    assert "cassette holds" in exhausted[0].detail


def test_exhausted_repeat_serves_the_last_response_again() -> None:
    recorded = record(make(responders()))
    result = replay(make(responders(extra_turns=1)), recorded, "repeat")
    assert result.result.outcome.status == "ok"
    assert any(d.kind == "exhausted" and "repeated" in d.detail for d in result.divergences)


def test_exhausted_fake_calls_the_scenarios_own_model() -> None:
    recorded = record(make(responders()))
    CALLS.clear()
    result = replay(make(responders(extra_turns=1)), recorded, "fake")
    assert result.result.outcome.status == "ok"
    assert CALLS  # the fake responders answered what the cassette could not


def test_fewer_requests_than_recorded_is_reported() -> None:
    recorded = record(make(responders(extra_turns=1)))
    result = replay(make(responders()), recorded)
    unused = [d for d in result.divergences if d.kind == "unused"]
    assert unused and "never made" in unused[0].detail


def test_streams_replay_as_streams() -> None:
    async def streaming(run: Run) -> str:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
            for word in ("the ", "sum ", "is 5"):
                yield word

        agent = Agent(FunctionModel(lambda m, i: text("x"), stream_function=stream))
        async with agent.run_stream("sum?") as r:
            chunks = [c async for c in r.stream_text(delta=True, debounce_by=None)]
        run.observe("chunks", chunks)
        return "".join(chunks)

    sc = make(streaming, "unit/stream")
    recorded = record(sc)
    result = replay(sc, recorded)
    assert result.result.observations == recorded.observations
    assert recorded.observations[0].value == ["the ", "sum ", "is 5"]
    assert result.result.exchanges[0].kind == "request_stream"


async def _six_chunks(messages: list[ModelMessage], info: AgentInfo) -> Any:
    for i in range(6):
        yield f"chunk{i} "


async def _left_unread(run: Run) -> str:
    async with Agent(FunctionModel(stream_function=_six_chunks)).run_stream("talk"):
        pass
    return "left"


async def _events_break(run: Run) -> list[str]:
    kinds: list[str] = []
    async with Agent(FunctionModel(stream_function=_six_chunks)).run_stream_events("talk") as stream:
        async for ev in stream:
            kinds.append(ev.event_kind)
            if len(kinds) == 3:
                break
    return kinds


async def _node_stream_break(run: Run) -> list[str]:
    agent = Agent(FunctionModel(stream_function=_six_chunks))
    got: list[str] = []
    async with agent.iter("talk") as r:
        async for node in r:
            if Agent.is_model_request_node(node):
                async with node.stream(r.ctx) as s:
                    async for ev in s:
                        got.append(ev.event_kind)
                        if len(got) == 2:
                            break
    return got


@pytest.mark.parametrize("func", [_left_unread, _events_break, _node_stream_break], ids=lambda f: f.__name__)
def test_a_stream_its_reader_left_early_is_no_model_error(func: Any) -> None:
    """Leaving `run_stream` unread, breaking out of its events: the GeneratorExit that closed the stream was
    recorded as the model's error, and the replay raised it before any event: `ok → error` on every version."""
    from replay.differ import diff

    sc = make(func, f"unit/{func.__name__}")
    recorded = record(sc)
    assert recorded.outcome.status == "ok" and [ex.error for ex in recorded.exchanges] == [None]
    result = replay(sc, recorded)
    assert result.result.outcome == recorded.outcome
    assert not diff(recorded, result.result).changed


def test_a_model_error_after_some_events_is_raised_after_them_on_replay() -> None:
    """The provider failed mid-stream: the replay raised the error before serving the two chunks the reader saw."""
    from pydantic_ai.exceptions import ModelHTTPError

    from replay.differ import diff

    async def failing(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield "partial "
        yield "answer"
        raise ModelHTTPError(503, "fn", body="overloaded")

    async def scenario(run: Run) -> str:
        seen: list[str] = []
        try:
            async with Agent(FunctionModel(stream_function=failing)).run_stream("hi") as r:
                async for t in r.stream_text(delta=True, debounce_by=None):
                    seen.append(t)
        finally:
            run.observe("seen", seen)
        return "unreachable"

    sc = make(scenario, "unit/midstream")
    recorded = record(sc)
    assert recorded.observations[0].value == ["partial ", "answer"] and recorded.outcome.status == "error"
    result = replay(sc, recorded)
    assert result.result.observations == recorded.observations
    assert result.result.outcome == recorded.outcome
    assert not diff(recorded, result.result).changed


def test_provider_model_replays_without_key_or_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette for 'openai:gpt-4o' is built by hand here; the replay must not need a key or a socket."""
    from replay.cassette import CassetteBuilder, Exchange, Header
    from replay.recorder import dump_messages

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    async def provider(run: Run) -> str:
        agent = Agent("openai:gpt-4o")
        return (await agent.run("hello")).output

    b = CassetteBuilder(Header(scenario_id="unit/provider"))
    resp = b.message(dump_messages([ModelResponse(parts=[TextPart("hi from the cassette")], model_name="gpt-4o")])[0])
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", response=resp))
    result = replay(make(provider, "unit/provider"), b.cassette, allow_loopback=False)
    assert result.result.outcome.output == "hi from the cassette"
    assert not [d for d in result.divergences if d.kind == "network"]
    import os

    assert "OPENAI_API_KEY" not in os.environ


def test_replay_is_stable_in_process() -> None:
    sc = make(responders())
    recorded = record(sc)
    from replay.differ import diff

    for _ in range(3):
        assert not diff(recorded, replay(sc, recorded).result).changed


def _two_roles(a_done: int, b_done: int) -> Any:
    from replay.cassette import CassetteBuilder, Exchange, Header
    from replay.recorder import dump_messages

    b = CassetteBuilder(Header(scenario_id="unit/order"))
    for seq, (role, done) in enumerate((("a", a_done), ("b", b_done))):
        resp = b.message(dump_messages([text(role)])[0])
        b.cassette.exchanges.append(
            Exchange(seq=seq, role=role, index=0, kind="request", response=resp, done=done, after=2)
        )
    return b.cassette


def _call(role: str) -> Any:
    from replay.recorder._interception import Call

    return Call("request", None, role, (), {}, lambda *a, **k: None)


def _exchange(role: str) -> Any:
    from replay.cassette import Exchange

    return Exchange(seq=0, role=role, index=0, kind="request")


def test_answers_are_delivered_in_the_recorded_order() -> None:
    """A background role's answer waits until the answers recorded before it were delivered."""
    from replay.replayer import CassetteSource

    source = CassetteSource(_two_roles(a_done=1, b_done=0))
    delivered: list[str] = []

    async def ask(role: str, delay: float) -> None:
        await asyncio.sleep(delay)
        response = await source.respond(_call(role), _exchange(role))
        delivered.append(response.parts[0].content)

    async def both() -> None:
        await asyncio.gather(ask("a", 0), ask("b", 0.02))

    asyncio.run(both())
    assert delivered == ["b", "a"] and source.divergences == []


def test_order_is_given_up_when_the_replay_stops_following_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import replay.replayer as replayer

    monkeypatch.setattr(replayer, "ORDER_TIMEOUT", 0.05)
    source = replayer.CassetteSource(_two_roles(a_done=1, b_done=0))
    response = asyncio.run(source.respond(_call("a"), _exchange("a")))  # "b" is never asked
    assert response.parts[0].content == "a"
    assert [d.kind for d in source.divergences] == ["order"]


def test_offline_from_two_threads_restores_the_switch_and_keys() -> None:
    """Issue 13: entering offline() from two threads left ALLOW_MODEL_REQUESTS wrong afterwards."""
    import os
    import threading

    from pydantic_ai import models

    from replay._placeholders import KEYS
    from replay.replayer import offline

    key = next(k for k in KEYS if not os.environ.get(k))
    before = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = True
    entered = [threading.Event(), threading.Event()]
    leave = [threading.Event(), threading.Event()]
    seen: list[tuple[str, bool, bool]] = []

    def worker(i: int) -> None:
        with offline():
            entered[i].set()
            leave[i].wait(5)
        seen.append((f"t{i} left", models.ALLOW_MODEL_REQUESTS, bool(os.environ.get(key))))

    try:
        t0 = threading.Thread(target=worker, args=(0,))
        t1 = threading.Thread(target=worker, args=(1,))
        t0.start()
        entered[0].wait(5)
        t1.start()
        entered[1].wait(5)
        leave[0].set()  # the first in leaves first: the second must stay offline
        t0.join(5)
        assert models.ALLOW_MODEL_REQUESTS is False and os.environ.get(key)
        leave[1].set()
        t1.join(5)
        assert seen == [("t0 left", False, True), ("t1 left", True, False)]
        assert models.ALLOW_MODEL_REQUESTS is True and not os.environ.get(key)
    finally:
        models.ALLOW_MODEL_REQUESTS = before


def test_a_replayed_http_error_keeps_what_handlers_branch_on() -> None:
    """A 503 retried or fallen back from in the scenario must be a 503 on replay: the recorded error's
    plain public values (status code, body, model name) are kept and set on the rebuilt exception."""
    from pydantic_ai.exceptions import ModelHTTPError

    from replay.cassette import dumps, loads

    seen: list[tuple[int, object]] = []

    async def scenario(run: Run) -> str:
        def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise ModelHTTPError(status_code=503, model_name="m", body={"error": "overloaded"})

        try:
            await Agent(FunctionModel(fail)).run("hi")
        except ModelHTTPError as exc:
            seen.append((exc.status_code, exc.body))
            return f"fell back after {exc.status_code}"
        return "no error"

    sc = make(scenario, "unit/http_error")
    recorded = loads(dumps(record(sc)))
    (ex,) = recorded.exchanges
    assert ex.error is not None and ex.error.attributes is not None
    assert ex.error.attributes["status_code"] == 503 and "headers" not in ex.error.attributes
    result = replay(sc, recorded)
    assert seen == [(503, {"error": "overloaded"})] * 2
    assert result.result.outcome == recorded.outcome and result.divergences == []


def test_a_categorised_http_error_is_still_a_model_http_error_on_replay() -> None:
    """Slim 2.60+ raises a 500 as a private class that is both ``ModelHTTPError`` and ``ModelServerError``
    and is named ``ModelServerError``: rebuilt from that name alone, ``except ModelHTTPError`` missed it."""
    from pydantic_ai.exceptions import ModelHTTPError, ModelServerError

    from replay.cassette import Outcome, dumps, loads

    seen: list[str] = []

    async def scenario(run: Run) -> str:
        def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise ModelHTTPError.for_category(ModelServerError, status_code=500, model_name="m", body={"e": 1})

        try:
            await Agent(FunctionModel(fail)).run("hi")
        except ModelHTTPError as exc:
            seen.append(f"{type(exc).__name__} {exc.status_code} {isinstance(exc, ModelServerError)}")
            return "handled"
        return "not handled"

    sc = make(scenario, "unit/categorised_http_error")
    recorded = loads(dumps(record(sc)))
    assert recorded.exchanges[0].error.type == "pydantic_ai.exceptions.ModelServerError"  # type: ignore[union-attr]
    result = replay(sc, recorded)
    assert seen == ["ModelServerError 500 True"] * 2
    assert result.result.outcome == recorded.outcome == Outcome(output="handled")


def test_an_http_error_of_a_category_the_installed_slim_lacks_is_its_http_error() -> None:
    """Recorded on slim 2.60+ (``ModelServerError``), replayed where that class does not exist: the slim
    of the replay raises a 500 as a plain ``ModelHTTPError``, so that is what the scenario gets, not a stand-in."""
    from pydantic_ai.exceptions import ModelHTTPError

    from replay.cassette import ErrorInfo
    from replay.replayer import _rebuild_error, error_kinds

    info = ErrorInfo(type="pydantic_ai.exceptions.ModelGoneInThisSlimError", message="status_code: 500, model_name: m, body: x",
                     attributes={"status_code": 500, "model_name": "m", "body": "x"})
    error = _rebuild_error(info)
    assert type(error) is ModelHTTPError and error.status_code == 500 and str(error) == info.message
    assert "pydantic_ai.exceptions.ModelHTTPError" in error_kinds(info)
    assert error_kinds(ErrorInfo(type="nowhere.Error", message="m")) == ["nowhere.Error"]


def test_expect_error_names_a_class_the_error_is_an_instance_of() -> None:
    from replay.scenario import Scenario

    def sc(expect: str) -> Scenario:
        return Scenario(id="u/s", func=lambda run: None, path=None, doc="", source_hash="", expect_error=expect)  # type: ignore[arg-type,return-value]

    kinds = ["pydantic_ai.exceptions.ModelServerError", "pydantic_ai.exceptions.ModelHTTPError", "builtins.Exception"]
    assert sc("ModelHTTPError").error_expected("pydantic_ai.exceptions.ModelServerError", kinds)
    assert sc("pydantic_ai.exceptions.ModelServerError").error_expected("pydantic_ai.exceptions.ModelServerError")
    assert not sc("ModelHTTPError").error_expected("pydantic_ai.exceptions.ModelServerError")
    assert not sc("HTTPError").error_expected("x.ModelServerError", kinds)  # names, not substrings


def test_errors_are_written_as_before_without_values_of_their_own_and_never_compared() -> None:
    from replay.cassette import Cassette, ErrorInfo, Outcome, dumps, loads
    from replay.differ import diff

    plain = Cassette(outcome=Outcome(status="error", error=ErrorInfo(type="builtins.ValueError", message="m")))
    assert b"attributes" not in dumps(plain)
    rich = Cassette(outcome=Outcome(status="error", error=ErrorInfo(type="builtins.ValueError", message="m",
                                                                    attributes={"code": 7})))
    assert loads(dumps(rich)).outcome.error.attributes == {"code": 7}  # type: ignore[union-attr]
    assert not diff(plain, rich).changed  # a cassette written before they were kept is not a change


def test_an_answer_an_older_slim_rejects_for_a_stamp_is_served_without_it() -> None:
    """Slim 2.57 accepts only core kinds in a part's ``tool_kind``; a 0.62 streamed answer holding the
    agent graph's stamp (``file_system.read_file``) failed the whole replay with a ValidationError."""
    from replay.replayer import _older_slim_tolerant

    def strict(data: dict) -> dict:  # what slim 2.57's validation does with a kind it has not got
        if any(p.get("tool_kind") not in (None, "tool-search", "capability-load") for p in data["parts"]):
            raise ValueError("tool_kind: Input should be 'tool-search' or 'capability-load'")
        return data

    answer = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "read_file", "tool_kind": "file_system.read_file"},
                                            {"part_kind": "tool-call", "tool_name": "search", "tool_kind": "tool-search"}]}
    served = _older_slim_tolerant(strict, answer)
    assert served["parts"] == [{"part_kind": "tool-call", "tool_name": "read_file"},
                               {"part_kind": "tool-call", "tool_name": "search", "tool_kind": "tool-search"}]
    assert _older_slim_tolerant(lambda d: d, answer) is answer  # accepted as recorded: untouched


    def broken(data: dict) -> dict:
        raise ValueError("another problem")

    with pytest.raises(ValueError, match="another problem"):  # nothing to strip: the error stands
        _older_slim_tolerant(broken, {"kind": "response", "parts": [{"part_kind": "text", "content": "x"}]})


def test_two_instances_sharing_a_role_each_get_their_own_models_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two TrajectoryJudges (one module: one role), each with its own model: a version that calls them in the
    other order was served by ordinal, so the "evidence" judge got "scope"'s steer — behaviour that never happens."""
    order = ["scope", "evidence"]

    async def scenario(run: Run) -> list[str]:
        judges = {name: Agent(FunctionModel(lambda m, i, n=name: ModelResponse(parts=[TextPart(f"verdict of {n}")]),
                                            model_name=f"{name}-model"), name="judge") for name in ("scope", "evidence")}
        return [f"{name}: {(await judges[name].run('look')).output}" for name in order]

    sc = make(scenario, "unit/two_judges")
    recorded = record(sc)
    assert recorded.outcome.output == ["scope: verdict of scope", "evidence: verdict of evidence"]
    order.reverse()  # another version calls them the other way round
    result = replay(sc, recorded)
    assert result.result.outcome.output == ["evidence: verdict of evidence", "scope: verdict of scope"]


def test_a_recorded_error_type_is_read_from_a_modules_namespace_not_its_getattr(monkeypatch: pytest.MonkeyPatch) -> None:
    """`getattr(module, name)` ran a module-level `__getattr__` for a name a cassette chose: pydantic's moved-name
    errors escaped the lookup, and `concurrent.futures.ProcessPoolExecutor` imported multiprocessing."""
    import sys
    import types

    from replay.replayer import _imported_class

    called: list[str] = []
    module = types.ModuleType("lazy_errors")

    class Defined(Exception):
        pass

    module.Defined = Defined  # type: ignore[attr-defined]
    module.__getattr__ = lambda name: called.append(name) or Exception  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "lazy_errors", module)
    assert _imported_class("lazy_errors.Defined") is Defined
    assert _imported_class("lazy_errors.Moved") is None and called == []


def test_a_fallback_model_whose_every_model_failed_raises_its_group_again(tmp_path: Any) -> None:
    """Every model of a ``FallbackModel`` failing raises ``FallbackExceptionGroup``, an exception group that is
    built from its errors: the recording kept only its message, the replay raised a ``ReplayedModelError`` no
    ``except FallbackExceptionGroup`` caught, and a scenario handling the outage read ``changed`` on the version it
    was recorded on. ``record --force`` rewrites a cassette recorded before the group's errors were kept."""
    from pydantic_ai.exceptions import FallbackExceptionGroup, ModelHTTPError
    from pydantic_ai.models.fallback import FallbackModel

    from replay._pipeline import _same_recording
    from replay.cassette import DEFAULT_LIMITS, load, save
    from replay.differ import diff

    async def down(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(503, "one", body={"e": "overloaded"})

    async def limited(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(429, "two", body={"e": "rate"})

    async def outage(run: Run) -> str:
        try:
            await Agent(FallbackModel(FunctionModel(down), FunctionModel(limited))).run("hi")
        except FallbackExceptionGroup as group:
            run.observe("statuses", [getattr(e, "status_code", None) for e in group.exceptions])
            return "fell through"
        return "answered"

    sc = Scenario(id="u/outage", func=outage, path=None, doc="", source_hash="0")
    recorded = record(sc)
    assert recorded.outcome.output == "fell through" and recorded.observations[0].value == [503, 429]
    result = replay(sc, recorded)
    assert result.result.outcome.output == "fell through" and result.result.observations[0].value == [503, 429]
    assert not diff(recorded, result.result).changed

    from replay.recorder import GROUPED

    path = tmp_path / "outage.cassette"
    old = recorded.model_copy(deep=True)
    for ex in old.exchanges:
        assert ex.error is not None and GROUPED in (ex.error.attributes or {})
        ex.error.attributes = None  # as recorded before
    save(old, path)
    assert not _same_recording(path, load(path, DEFAULT_LIMITS).model_copy(update={"exchanges": recorded.exchanges}), DEFAULT_LIMITS)


def test_a_role_the_cassette_never_had_is_named_as_such() -> None:
    """An agent renamed since the recording (`name="bot"`): the divergence read "request #1 of role 'bot', but
    the cassette holds 0", as if a recording of `bot` had run short; it has no such role."""

    def named(name: str | None) -> Any:
        async def scenario(run: Run) -> str:
            agent = Agent(FunctionModel(lambda messages, info: text("hi")), name=name)
            return (await agent.run("hello")).output

        return scenario

    recorded = record(make(named(None)))
    for policy in ("fail", "repeat", "fake"):
        result = replay(make(named("bot")), recorded, policy)  # type: ignore[arg-type]
        (exhausted,) = [d for d in result.divergences if d.kind == "exhausted"]
        assert exhausted.detail.startswith(
            "request #1 of role 'bot', but the cassette has no request of that role (it holds main 1)"
        ), exhausted.detail

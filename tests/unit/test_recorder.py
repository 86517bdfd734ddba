"""Recorder: every model request of a run is caught, tagged by role, and stored compactly."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from pydantic_ai_harness import SystemReminders
from pydantic_ai_harness.compaction import SummarizingCompaction
from pydantic_ai_harness.system_reminders import LLMReminder

import replay
from replay.cassette import dumps, load
from replay.recorder import Session, session_scope


def text(s: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(s)])


def roles(session: Session) -> dict[str, int]:
    out: dict[str, int] = {}
    for ex in session.cassette.exchanges:
        out[ex.role] = out.get(ex.role, 0) + 1
    return out


def history(turns: int) -> list[ModelMessage]:
    return [m for n in range(turns) for m in (ModelRequest(parts=[UserPromptPart(f"topic {n}")]), text(f"noted {n}"))]


def test_capability_requests_are_tagged_by_their_inner_agent() -> None:
    calls = {"main": 0, "summ": 0, "gen": 0}

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["main"] += 1
        return text("ready")

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["summ"] += 1
        return text("summary")

    def gen(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["gen"] += 1
        return text("KEEP")

    agent = Agent(
        FunctionModel(answer),
        capabilities=[
            SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=2),
            SystemReminders(dynamic_reminders=[LLMReminder(model=FunctionModel(gen))]),
        ],
    )
    session = Session()
    with session_scope(session):
        asyncio.run(agent.run("go", message_history=history(5)))
    assert roles(session) == {"main": calls["main"], "summarizing_compaction": calls["summ"], "system_reminders": calls["gen"]}
    assert calls["summ"] >= 1 and calls["gen"] >= 1
    assert session.cassette.header.roles["summarizing_compaction"].startswith("pydantic_ai_harness")


def test_inherited_model_is_still_tagged_by_inner_agent() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return text("summary" if info.instructions and "summar" in info.instructions.lower() else "ready")

    agent = Agent(FunctionModel(answer), capabilities=[SummarizingCompaction(max_messages=4, keep_messages=2)])
    session = Session()
    with session_scope(session):
        asyncio.run(agent.run("go", message_history=history(5)))
    got = roles(session)
    assert got.get("summarizing_compaction", 0) >= 1 and got["main"] >= 1


def test_every_run_style_is_recorded() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return text("ok")

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield "o"
        yield "k"

    class Counting(FunctionModel):
        async def count_tokens(self, messages: Any, settings: Any, params: Any) -> RequestUsage:
            return RequestUsage(input_tokens=len(messages))

    async def scenario() -> None:
        agent = Agent(FunctionModel(answer, stream_function=stream))
        await agent.run("a")
        async with agent.run_stream("b") as r:
            await r.get_output()
        async with agent.iter("c") as run:
            async for _ in run:
                pass
        counted = Agent(Counting(answer))
        await counted.run("d", usage_limits=UsageLimits(count_tokens_before_request=True))

    session = Session()
    with session_scope(session):
        asyncio.run(scenario())
    kinds = [(ex.role, ex.kind) for ex in session.cassette.exchanges]
    assert kinds == [
        ("main", "request"),
        ("main", "request_stream"),
        ("main", "request"),
        ("main", "count_tokens"),
        ("main", "request"),
    ]
    streamed = session.cassette.exchanges[1]
    assert streamed.events and streamed.response is not None
    assert session.cassette.exchanges[3].usage == {"input_tokens": 1} or session.cassette.exchanges[3].usage
    assert len(session.cassette.runs) == 4


def test_named_agent_keeps_its_name_but_inferred_names_do_not_count() -> None:
    session = Session()
    with session_scope(session):
        planner = Agent(FunctionModel(lambda m, i: text("p")), name="planner")
        helper = Agent(FunctionModel(lambda m, i: text("h")))
        asyncio.run(planner.run("x"))
        asyncio.run(helper.run("x"))
        asyncio.run(helper.run("y"))  # second run: pydantic-ai has inferred the name "helper" by now
    assert [ex.role for ex in session.cassette.exchanges] == ["planner", "main", "main"]


support_agent = Agent(FunctionModel(lambda m, i: text("s")))  # built at import, before any session
named_agent = Agent(FunctionModel(lambda m, i: text("n")), name="named_agent")


def test_an_agent_built_before_the_session_is_main_whatever_its_variable() -> None:
    """Under the pytest plugin a module-level agent is built at collection, outside any session: the name
    pydantic-ai infers from its variable on the first run must not become its role (renaming the variable
    broke every replay); a name given at construction still does."""
    session = Session()
    with session_scope(session):
        support_agent.run_sync("x")  # infers "support_agent" from this module's globals
        named_agent.run_sync("x")
    assert support_agent.name == "support_agent"  # pydantic-ai's own behaviour is untouched
    assert [ex.role for ex in session.cassette.exchanges] == ["main", "named_agent"]


def test_an_unnamed_agent_the_scenario_hands_to_a_capability_is_the_capabilitys() -> None:
    """``TrajectoryJudge(agent=Agent(...))``: the scenario built the judge, but only the harness runs it, in
    a conversation of its own; its request was tagged ``main`` and counted as the main agent's."""
    from pydantic_ai_harness.trajectory_judge import TrajectoryJudge

    async def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        name = next(t.name for t in info.output_tools if "AllGood" in t.name)
        return ModelResponse(parts=[ToolCallPart(name, {}, tool_call_id="good")])

    async def ticker(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages for p in m.parts if p.part_kind == "tool-return")
        return ModelResponse(parts=[ToolCallPart("tick", {}, tool_call_id=f"t{done}")]) if done < 4 else text("done")

    from pydantic_ai_harness.trajectory_judge import AllGood, Steer

    async def scenario() -> None:
        judge_agent = Agent(FunctionModel(judge))
        await judge_agent.run("direct", output_type=[AllGood, Steer])  # run by the scenario itself: main
        agent = Agent(FunctionModel(ticker), capabilities=[TrajectoryJudge(agent=judge_agent, every=2)])

        @agent.tool_plain
        async def tick() -> str:
            return "ticked"

        await agent.run("tick")  # five requests, the judge run after the second
        await agent.run("again")  # five more, a second judge run: the main agent stays main

    session = Session()
    with session_scope(session):
        asyncio.run(scenario())
    # per run, not once per agent: which run came first (another scenario's, in one process) does not matter
    assert [ex.role for ex in session.cassette.exchanges][0] == "main"
    assert roles(session) == {"main": 11, "trajectory_judge": 2}
    assert session.cassette.header.roles["trajectory_judge"].startswith("pydantic_ai_harness.trajectory_judge")


def test_the_main_agent_delegating_to_itself_stays_main() -> None:
    """``SubAgents(include_self=True)`` runs the main agent again from harness code: still the scenario's agent."""
    from pydantic_ai_harness import SubAgents

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if "sub" in str(messages[0].parts[-1].content):
            return text("sub done")
        if messages[-1].parts[-1].part_kind != "tool-return":
            return ModelResponse(parts=[ToolCallPart("delegate_task", {"agent_name": "self", "task": "sub"}, tool_call_id="s")])
        return text("top done")

    session = Session()
    with session_scope(session):
        asyncio.run(Agent(FunctionModel(model), capabilities=[SubAgents(include_self=True)]).run("top"))
    assert roles(session) == {"main": 3}


def test_patches_are_undone_after_the_session() -> None:
    from pydantic_ai.models import Model

    before = FunctionModel.__dict__["request"]
    with session_scope(Session()):
        assert FunctionModel.__dict__["request"] is not before
    assert FunctionModel.__dict__["request"] is before
    assert "__replay_wrapped__" not in Model.__dict__["request_stream"].__dict__


def test_wrapper_models_are_recorded_once() -> None:
    from pydantic_ai.models.fallback import FallbackModel

    agent = Agent(FallbackModel(FunctionModel(lambda m, i: text("inner"))))
    session = Session()
    with session_scope(session):
        asyncio.run(agent.run("x"))
    assert len(session.cassette.exchanges) == 1


def test_recording_context_manager_writes_a_cassette(tmp_path: Path) -> None:
    path = tmp_path / "adhoc.cassette"
    agent = Agent(FunctionModel(lambda m, i: text("hi")))
    with replay.recording(path, scenario_id="adhoc"):
        asyncio.run(agent.run("hello"))
    c = load(path)
    assert [ex.role for ex in c.exchanges] == ["main"] and c.header.scenario_id == "adhoc"


def test_the_header_keeps_only_the_folders_the_recording_names(tmp_path: Path) -> None:
    """The environment's folders are the normaliser's business only where the recording quotes one; a cassette goes
    into a pull request, so one that names none carries no home folder (its user name), checkout or venv path."""
    import tempfile

    quiet, quoting = tmp_path / "quiet.cassette", tmp_path / "quoting.cassette"
    agent = Agent(FunctionModel(lambda m, i: text("hi")))
    with replay.recording(quiet, scenario_id="quiet"):
        asyncio.run(agent.run("hello"))
    assert load(quiet).header.paths == {}
    assert b"paths" not in quiet.read_bytes()  # not written at all: the file is as it was before the field existed

    where = Path(tempfile.mkdtemp()) / "notes.txt"
    tool = Agent(FunctionModel(lambda m, i: text("done") if len(m) > 1 else ModelResponse(parts=[ToolCallPart("save", {})])))

    @tool.tool_plain
    def save() -> str:
        return f"saved to {where}"

    with replay.recording(quoting, scenario_id="quoting"):
        asyncio.run(tool.run("save it"))
    paths = load(quoting).header.paths
    assert tempfile.gettempdir() in paths["tempdir"] and not {"home", "prefix"} & set(paths), paths


def _chat(turns: int) -> int:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return text(f"answer number {len(messages)} with some words in it")

    async def go() -> None:
        agent = Agent(FunctionModel(answer))
        hist: list[ModelMessage] = []
        for t in range(turns):
            hist = (await agent.run(f"question {t} about something", message_history=hist)).all_messages()

    session = Session()
    with session_scope(session):
        asyncio.run(go())
    return len(dumps(session.cassette))


def test_cassette_size_grows_linearly_with_conversation_length() -> None:
    fifty, hundred = _chat(50), _chat(100)
    assert hundred <= 2.2 * fifty, (fifty, hundred)


def test_concurrent_scenarios_in_one_process_stay_separate() -> None:
    async def one(word: str) -> Session:
        session = Session()
        with session_scope(session):
            agent = Agent(FunctionModel(lambda m, i: text(word)))
            for _ in range(3):
                await agent.run(word)
                await asyncio.sleep(0)
        return session

    async def both() -> list[Session]:
        return list(await asyncio.gather(one("alpha"), one("beta")))

    a, b = asyncio.run(both())
    for session, word in ((a, "alpha"), (b, "beta")):
        c = session.cassette
        assert len(c.exchanges) == 3
        assert all(c.messages[ex.response]["parts"][0]["content"] == word for ex in c.exchanges)


def test_tool_calls_are_recorded_with_parameters() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c1")])
        return text("3")

    agent = Agent(FunctionModel(answer))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    session = Session()
    with session_scope(session):
        asyncio.run(agent.run("add"))
    c = session.cassette
    params = c.blob(c.exchanges[0].parameters)
    assert [t["name"] for t in params["function_tools"]] == ["add"]
    assert len(c.exchanges) == 2 and len(c.exchanges[1].messages) == 3


def test_compact_messages_is_recorded_and_replayed() -> None:
    """Provider-side compaction (OpenAI Responses, Anthropic) goes through Model.compact_messages."""
    from pydantic_ai.models import ModelRequestContext, ModelRequestParameters

    from replay.replayer import CassetteSource

    class Compacting(FunctionModel):
        async def compact_messages(self, request_context: Any, *, instructions: str | None = None) -> ModelResponse:
            return text(f"compacted {len(request_context.messages)} ({instructions})")

    model = Compacting(lambda m, i: text("x"))
    history_msgs = [ModelRequest(parts=[UserPromptPart("a")]), text("b")]
    ctx = ModelRequestContext(model=model, messages=history_msgs, model_settings=None,
                              model_request_parameters=ModelRequestParameters())

    session = Session()
    with session_scope(session):
        got = asyncio.run(model.compact_messages(ctx, instructions="keep facts"))
    (ex,) = session.cassette.exchanges
    assert ex.kind == "compact_messages" and ex.instructions == "keep facts" and len(ex.messages) == len(history_msgs)
    assert got.parts[0].content == "compacted 2 (keep facts)"

    class Unreachable(FunctionModel):
        async def compact_messages(self, request_context: Any, *, instructions: str | None = None) -> ModelResponse:
            raise AssertionError("replay must not call the model")

    replayed = Session(source=CassetteSource(session.cassette))
    with session_scope(replayed):
        again = asyncio.run(Unreachable(lambda m, i: text("x")).compact_messages(ctx, instructions="keep facts"))
    assert again.parts[0].content == "compacted 2 (keep facts)"


def test_bundled_recordings_tag_unnamed_and_named_inner_agents() -> None:
    """TrajectoryJudge's agent has no name (role from its harness package); ToolCallJudge's has one."""
    root = Path(__file__).resolve().parents[2] / "cassettes" / "coverage"
    judge = load(root / "trajectory_judge.cassette")
    assert {ex.role for ex in judge.exchanges} == {"main", "trajectory_judge"}
    assert judge.header.roles["trajectory_judge"].startswith("pydantic_ai_harness.trajectory_judge")
    tool_judge = load(root / "tool_call_judge.cassette")
    assert sorted(ex.role for ex in tool_judge.exchanges).count("tool_call_judge") == 2


def _sent(session: Session, request: int) -> list[dict[str, Any]]:
    c = session.cassette
    return c.expand(c.exchanges[request].messages)


def test_messages_changed_in_place_between_requests_are_recorded_as_sent() -> None:
    """The recorder reuses a message's earlier dump only when nothing reachable from it changed.

    pydantic-ai and capabilities do change messages after a request (a part's content rewritten,
    metadata dicts updated in place, fields reassigned), so each kind of change must show up
    in the next request that sends the message.
    """
    agent = Agent(FunctionModel(lambda messages, info: text("ok")))
    past = history(2)
    session = Session()
    with session_scope(session):
        agent.run_sync("first", message_history=past)
        past[0].parts[0].content = "rewritten in place"  # type: ignore[union-attr]
        agent.run_sync("second", message_history=past)
        past[1].metadata = {"note": {"depth": 1}}
        agent.run_sync("third", message_history=past)
        past[1].metadata["note"]["depth"] = 2  # nested dict changed in place
        agent.run_sync("fourth", message_history=past)
        past[0].parts.append(UserPromptPart("appended part"))  # type: ignore[arg-type]
        agent.run_sync("fifth", message_history=past)
    first, second, third, fourth, fifth = (_sent(session, i) for i in range(5))
    assert first[0]["parts"][0]["content"] == "topic 0"
    assert second[0]["parts"][0]["content"] == "rewritten in place"
    assert third[1]["metadata"] == {"note": {"depth": 1}}
    assert fourth[1]["metadata"] == {"note": {"depth": 2}}
    assert [p["content"] for p in fifth[0]["parts"]] == ["rewritten in place", "appended part"]
    assert session.cache.hits > 0  # unchanged messages were not dumped again


def test_unchanged_history_is_dumped_once() -> None:
    agent = Agent(FunctionModel(lambda messages, info: text("ok")))
    past = history(10)
    session = Session()
    with session_scope(session):
        for turn in range(5):
            past = agent.run_sync(f"turn {turn}", message_history=past).all_messages()
    # every message object is dumped once, plus once more for a response pydantic-ai stamps
    # with its run id after the request (same stored message: the stamp is not part of it)
    assert session.cache.misses <= len(past) + 5
    assert len(session.cassette.messages) == len(past)


def test_messages_the_cache_cannot_watch_are_dumped_every_time() -> None:
    """A tool result holding a pydantic model (slotted: its changes cannot be watched cheaply)
    is never served from the cache: a change made to it between requests is recorded."""
    from pydantic import BaseModel
    from pydantic_ai.messages import ToolReturnPart

    class Box(BaseModel):
        value: str

    box = Box(value="before")
    past: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("look it up")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("lookup", box, tool_call_id="c1")]),
        text("found"),
    ]
    agent = Agent(FunctionModel(lambda messages, info: text("ok")))
    session = Session()
    with session_scope(session):
        agent.run_sync("first", message_history=past)
        box.value = "after"
        agent.run_sync("second", message_history=past)
    first, second = _sent(session, 0), _sent(session, 1)
    assert first[2]["parts"][0]["content"] == {"value": "before"}
    assert second[2]["parts"][0]["content"] == {"value": "after"}


def _estimates_scenario(turns: int) -> Session:
    """Instructions, a tool, compaction and a reminder: every kind of message the estimate counts."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(p.part_kind == "tool-return" for p in messages[-1].parts):
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": f"m{len(messages)}"}, tool_call_id=f"c{len(messages)}")])
        return text(f"answer after {len(messages)} messages: " + "words " * 30)

    agent = Agent(
        FunctionModel(answer),
        instructions="Be brief.",
        capabilities=[
            SummarizingCompaction(model=FunctionModel(lambda m, i: text("summary " * 20)), max_messages=8, keep_messages=3),
            SystemReminders(dynamic_reminders=[lambda ctx: "remember the budget"]),
        ],
    )

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q}"

    session = Session()
    with session_scope(session):
        hist: list[ModelMessage] = []
        for n in range(turns):
            hist = agent.run_sync(f"question {n}", message_history=hist).all_messages()
    return session


def test_request_estimates_are_the_harness_estimate_of_what_was_sent() -> None:
    """The per-message sums the recorder keeps equal the harness's own estimate of every request."""
    from replay.recorder import estimate, load_messages

    session = _estimates_scenario(8)
    c = session.cassette
    assert not session.cache.estimates.exact_only
    assert len({ex.estimate for ex in c.exchanges}) > 5
    for ex in c.exchanges:
        assert ex.estimate == estimate(load_messages(c.expand(ex.messages))), (ex.role, ex.index)
    for run in c.runs:
        if run.role == "main":
            start = load_messages(c.expand(run.history))
            assert run.estimate == estimate([*start, ModelRequest(parts=[UserPromptPart(run.prompt)])])


def test_a_harness_that_does_not_sum_per_message_is_estimated_whole(monkeypatch: Any) -> None:
    """If per-message counts ever disagree with the installed estimator, the session stops using them."""
    from replay import recorder
    from replay.recorder import estimate, load_messages

    real = recorder._message_chars
    monkeypatch.setattr(recorder, "_message_chars", lambda m, d: None if (n := real(m, d)) is None else n + 1)
    session = _estimates_scenario(4)
    c = session.cassette
    assert session.cache.estimates.exact_only
    for ex in c.exchanges:
        assert ex.estimate == estimate(load_messages(c.expand(ex.messages)))


def test_a_run_without_streams_never_builds_the_stream_event_adapter() -> None:
    """Building the adapter of ``ModelResponseStreamEvent`` is ≈ 16 ms of schema work a process spent on its
    first message dump, whether or not anything streamed; built when a stream is recorded or replayed."""
    from replay.recorder import event_adapter

    event_adapter.cache_clear()
    agent = Agent(FunctionModel(lambda messages, info: text("plain")))
    session = Session()
    with session_scope(session):
        agent.run_sync("hi")
    assert session.cassette.exchanges and event_adapter.cache_info().currsize == 0

    async def chunks(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield "streamed"

    async def stream() -> None:
        async with Agent(FunctionModel(stream_function=chunks)).run_stream("hi") as result:
            await result.get_output()

    with session_scope(Session()):
        asyncio.run(stream())
    assert event_adapter.cache_info().currsize == 1


def test_set_typed_request_parameters_are_recorded_in_one_order() -> None:
    """``deferred_capability_ids`` is a ``set[str]``: recorded in the process's hash order, a replay under
    another PYTHONHASHSEED read the same skills as CHANGED (``Skills`` with two skills)."""
    import dataclasses

    from replay.normaliser._unsent import sent_parameters
    from replay.recorder import parameters_json

    @dataclasses.dataclass
    class Params:
        function_tools: list[str]
        deferred_capability_ids: set[str]

    names = {f"skill-{n:02d}" for n in range(40)}  # 40 names: their hash order is never the sorted one
    assert list(names) != sorted(names)
    assert parameters_json(Params(["b", "a"], names))["deferred_capability_ids"] == sorted(names)
    assert parameters_json(Params(["b", "a"], set()))["function_tools"] == ["b", "a"]  # lists keep their order
    # cassettes recorded before: compared in one order too
    recorded = {"deferred_capability_ids": ["release-notes", "code-review"], "function_tools": [{"name": "b"}, {"name": "a"}]}
    assert sent_parameters(recorded) == {"deferred_capability_ids": ["code-review", "release-notes"],
                                         "function_tools": [{"name": "b"}, {"name": "a"}]}


def test_slotted_classes_are_told_apart_by_the_class_itself() -> None:
    """The per-class memo of ``__slots__`` answers for that class only: a slotted class and an unslotted
    one of the same name, made one after the other, are each watched (or not) as they are."""
    import pytest

    from replay.recorder import _Opaque, _Watched

    def made(slotted: bool) -> Any:
        namespace: dict[str, Any] = {"__slots__": ("x", "__dict__")} if slotted else {}
        cls = type("Part", (), namespace)
        obj = cls()
        obj.x = 1
        obj.y = 2
        return obj

    for _ in range(2):
        _Watched().add(made(False))
        with pytest.raises(_Opaque):
            _Watched().add(made(True))


def test_a_watched_message_changed_in_a_nested_object_is_dumped_again() -> None:
    """The inline check of a re-sent message still sees a change deep in it (a part's content)."""
    from replay.cassette import CassetteBuilder
    from replay.recorder import MessageCache

    cache = MessageCache(CassetteBuilder())
    message = ModelRequest(parts=[UserPromptPart("first")])
    first = cache.indices([message])
    assert cache.indices([message]) == first
    message.parts[0].content = "second"
    again = cache.indices([message])
    assert again != first
    assert cache.builder.cassette.messages[again[0]]["parts"][0]["content"] == "second"


def test_request_parameters_are_interned_by_content_never_conflated() -> None:
    """The memo of request parameters by their JSON text gives each distinct content its own blob
    (1 and 1.0 in a schema stay apart), and equal content built anew the blob it had."""
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from replay.recorder import parameters_json

    def params(default: Any, description: str = "d") -> ModelRequestParameters:
        schema = {"type": "object", "properties": {"n": {"type": "number", "default": default}}}
        return ModelRequestParameters(function_tools=[ToolDefinition(name="t", description=description, parameters_json_schema=schema)])

    session = Session()
    a, b, c = session._parameters_blob(params(1)), session._parameters_blob(params(1.0)), session._parameters_blob(params(1, "e"))
    assert len({a, b, c}) == 3
    assert session._parameters_blob(params(1)) == a and session._parameters_blob(params(1.0)) == b
    blobs = session.builder.cassette.blobs
    assert [blobs[i] for i in (a, b, c)] == [parameters_json(params(1)), parameters_json(params(1.0)), parameters_json(params(1, "e"))]


def test_a_new_message_at_a_freed_message_address_is_its_own() -> None:
    """The cache is keyed by a number derived from the object's address: a message freed and another
    made in its place (CPython reuses the memory at once) is checked by identity, never taken for it."""
    from replay.cassette import CassetteBuilder
    from replay.recorder import MessageCache

    cache = MessageCache(CassetteBuilder())
    for n in range(20):
        message = ModelRequest(parts=[UserPromptPart(f"text {n}")])
        [index] = cache.indices([message])
        assert cache.builder.cassette.messages[index]["parts"][0]["content"] == f"text {n}"
        del message


# --------------------------------------------------------------------------- values a cassette cannot hold

BROKEN = "a broken emoji: \ud83d, end"
"""A lone surrogate: what a truncated stream's JSON escape decodes to, and what UTF-8 cannot encode."""


def test_a_value_a_cassette_cannot_hold_refuses_the_run_even_when_the_run_catches_it() -> None:
    """Regression: the encoder's UnicodeEncodeError surfaced inside the agent's run and the scenario was
    reported as raising it ('declare it with expect_error'); a run that caught it was recorded without the call."""
    from replay.recorder import UnrecordableValue, execute
    from replay.scenario import Scenario

    async def caught(run: Any) -> str:
        try:
            await Agent(FunctionModel(lambda m, i: text(BROKEN))).run("hello")
        except Exception:
            return "recovered"
        return "not reached"

    sc = Scenario(id="u/broken", func=caught, path=None, doc="", source_hash="0")
    with pytest.raises(UnrecordableValue, match=r"the response to main\[0\] holds a value a cassette cannot hold "
                                                r"\(UnicodeEncodeError: .*surrogates not allowed\)"):
        execute(sc, Session())


def test_the_recording_context_writes_nothing_for_a_value_it_cannot_hold(tmp_path: Path) -> None:
    from replay.recorder import UnrecordableValue

    path = tmp_path / "adhoc.cassette"
    agent = Agent(FunctionModel(lambda m, i: text("fine")))
    with pytest.raises(UnrecordableValue, match="a request of main"):
        with replay.recording(path, scenario_id="adhoc"):
            try:
                asyncio.run(agent.run(BROKEN))
            except UnrecordableValue:
                pass  # the caller's own handling: the recording is still refused
    assert not path.exists() and not list(tmp_path.iterdir())


def test_the_recording_context_writes_nothing_the_loader_would_refuse(tmp_path: Path) -> None:
    from replay.errors import CassetteError

    def deep(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("tree", {}, tool_call_id="t-1")])
        return text("done")

    agent = Agent(FunctionModel(deep))

    @agent.tool_plain
    def tree() -> dict[str, Any]:
        node: dict[str, Any] = {}
        for _ in range(250):
            node = {"child": node}
        return node

    path = tmp_path / "deep.cassette"
    with pytest.raises(CassetteError, match="the loader would refuse this recording .*nesting deeper than 200"):
        with replay.recording(path, scenario_id="deep"):
            asyncio.run(agent.run("go"))
    assert not list(tmp_path.iterdir())


_SETS_PROBE = """
import dataclasses, json
from pydantic import BaseModel
from replay.recorder import jsonable
from replay.scenario import Run

class Tags(BaseModel):
    tags: set[str]

@dataclasses.dataclass
class Seen:
    names: frozenset

run = Run("sets")
run.observe("tools", {"search", "fetch", "summarize", "plan", "ask"})
run.observe("nested", {"by_turn": [frozenset({"alpha", "beta", "gamma", "delta"})]})
print(json.dumps([o.value for o in run.observations]
                 + [jsonable(Tags(tags={"red", "green", "blue", "cyan"})), jsonable(Seen(frozenset({"x1", "y2", "z3", "w4"})))]))
"""


def test_an_observed_or_returned_set_lists_in_one_order_whatever_the_hash_seed() -> None:
    """A set of text iterates in the order of the process's hash seed: an observed set of tool names, or a
    structured output with a ``set[str]`` field, came out in another order in the next process, and a replay
    on the recording's own version read ``changed`` (one time in two)."""
    import subprocess
    import sys

    outs = {
        subprocess.run(
            [sys.executable, "-c", _SETS_PROBE], env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outs) == 1
    assert json.loads(outs.pop()) == [
        ["ask", "fetch", "plan", "search", "summarize"],
        {"by_turn": [["alpha", "beta", "delta", "gamma"]]},
        {"tags": ["blue", "cyan", "green", "red"]},
        {"names": ["w4", "x1", "y2", "z3"]},
    ]


def test_values_holding_no_set_are_converted_as_before() -> None:
    from pydantic import BaseModel

    from replay.recorder import jsonable
    from replay.scenario import sets_in_order

    class Point(BaseModel):
        x: int

    point, listed = Point(x=1), {"a": [1, (2, 3)]}
    assert sets_in_order(point) is point and sets_in_order(listed) is listed
    assert jsonable({"p": point, "t": (1, 2)}) == {"p": {"x": 1}, "t": [1, 2]}


def test_a_scenario_returning_or_observing_bytes_that_are_not_text_is_recorded() -> None:
    """A scenario returning the file its agent made (``b"\\x89PNG…"``) was refused as having raised
    ``UnicodeDecodeError`` — the recorder's conversion raised it, not the scenario — and told to declare it
    with ``expect_error``. Bytes that are not UTF-8 are held as base64 (as pydantic writes them when asked);
    bytes that are text as before."""
    from replay.recorder import execute, jsonable
    from replay.scenario import Scenario

    png = b"\x89PNG\r\n\x1a\n\x00\xff"

    async def made_a_file(run: replay.Run) -> bytes:
        run.observe("thumbnail", {"bytes": png})
        return png

    c = execute(Scenario(id="u/file", func=made_a_file, path=None, doc="", source_hash="0"), Session())
    assert c.outcome.status == "ok" and c.outcome.output == "iVBORw0KGgoA_w=="
    assert c.observations[0].value == {"bytes": "iVBORw0KGgoA_w=="}
    assert jsonable(b"plain text") == "plain text" and jsonable({"k": [b"ab"]}) == {"k": ["ab"]}


def test_a_timeout_setting_is_recorded_by_its_values() -> None:
    """``ModelSettings(timeout=httpx.Timeout(...))`` was written as ``"<Timeout>"``: a timeout changed from 30 s
    to 60 s (by a release's capability, or by the scenario) was no change in the settings compared."""
    import httpx

    from replay.differ import diff

    def recorded(read: float) -> Any:
        session = Session()
        with session_scope(session):
            Agent(FunctionModel(lambda m, i: text("ok"))).run_sync("hi", model_settings={"timeout": httpx.Timeout(read, connect=5)})
        return session.cassette

    thirty = recorded(30)
    (ex,) = thirty.exchanges
    assert ex.settings is not None
    assert thirty.blobs[ex.settings] == {"timeout": {"<Timeout>": {"connect": 5, "read": 30, "write": 30, "pool": 30}}}
    assert diff(thirty, recorded(60)).changed and not diff(thirty, recorded(30)).changed


def _assorted_messages() -> list[Any]:
    from pydantic_ai.messages import (
        BinaryContent,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    return [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart(["look", BinaryContent(b"\x00\xffpng", media_type="image/png")])]),
        ModelResponse(parts=[ThinkingPart("hmm"), ToolCallPart("lookup", {"q": 1.5, "b": b"raw"}, tool_call_id="c1")], usage=RequestUsage(input_tokens=3)),
        ModelRequest(parts=[ToolReturnPart("lookup", {"rows": [1, 2], "blob": b"\x01"}, tool_call_id="c1")], instructions="x"),
        ModelResponse(parts=[TextPart("done")], model_name="m", provider_details={"k": [1, None]}),
    ]


def test_messages_dumped_by_class_are_the_union_adapters_dump() -> None:
    """dump_messages dumps requests and responses each by their class's adapter: the same JSON, key order
    and base64 bytes included, as ModelMessagesTypeAdapter writes, in the order given; a subclass or an
    object that is no message takes the union adapter."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

    from replay.recorder import dump_messages

    messages = _assorted_messages()
    for chosen in (messages, messages[::-1], messages[:1], messages[1:2], [messages[0], messages[2]], []):
        expected = ModelMessagesTypeAdapter.dump_python(chosen, mode="json")
        assert json.dumps(dump_messages(chosen)) == json.dumps(expected)

    class Custom(ModelRequest):
        pass

    odd = [*messages, Custom(parts=[UserPromptPart("sub")])]
    assert json.dumps(dump_messages(odd)) == json.dumps(ModelMessagesTypeAdapter.dump_python(odd, mode="json"))

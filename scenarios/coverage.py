"""Coverage: one small scenario per request path harness-replay has to intercept.

Not tied to a seed. Exercises SlidingWindowCompaction alone, FallbackCompaction whose
summarizer fails, a tool call with a fixed tool_call_id, streamed text and a streamed
tool call (``run_stream``), ``agent.iter``, ``count_tokens`` before a request, an agent
with an explicit ``name``, a predicate pinned with ``run.expect``, and a
SummarizingCompaction with ``model=None`` that borrows the main model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage, UsageLimits
from pydantic_ai_harness.compaction import (
    FallbackCompaction,
    SlidingWindowCompaction,
    SummarizingCompaction,
    estimate_token_count,
)

from replay import Run, scenario


def _history(turns: int = 5) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for n in range(1, turns + 1):
        messages += [ModelRequest(parts=[UserPromptPart(f"question {n}")]), ModelResponse(parts=[TextPart(f"answer {n}")])]
    return messages


def _ready(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("ready")])


def _has_tool_return(messages: list[ModelMessage]) -> bool:
    last = messages[-1]
    return isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts)


def _add_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call ``add`` once with a fixed id, then answer with what the tool returned."""
    if not _has_tool_return(messages):
        return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="add-1")])
    returned = [p.content for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(f"sum is {returned[0]}")])


def _add_agent(model: FunctionModel, **kwargs: object) -> Agent[None, str]:
    agent = Agent(model, **kwargs)  # type: ignore[call-overload]

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


@scenario("coverage/sliding_window")
async def sliding_window(run: Run) -> str:
    """SlidingWindowCompaction alone (no receipts) trims a 5-turn history to the last messages."""
    agent = Agent(FunctionModel(_ready), capabilities=[SlidingWindowCompaction(max_messages=4, keep_messages=2)])
    result = await agent.run("continue", message_history=_history())
    run.observe("result_messages", len(result.all_messages()))
    return result.output


@scenario("coverage/fallback")
async def fallback(run: Run) -> str:
    """FallbackCompaction: the summarizer raises ModelAPIError, the sliding window takes over."""

    def broken_summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelAPIError("broken-summarizer", "summarizer unavailable")

    chain = [
        SummarizingCompaction(model=FunctionModel(broken_summarizer), max_messages=4, keep_messages=2),
        SlidingWindowCompaction(max_messages=4, keep_messages=2),
    ]
    agent = Agent(FunctionModel(_ready), capabilities=[FallbackCompaction(max_tokens=1, fallback_chain=chain)])
    result = await agent.run("continue", message_history=_history())
    run.observe("result_part_kinds", [[p.part_kind for p in m.parts] for m in result.all_messages()])
    return result.output


@scenario("coverage/tool_call")
async def tool_call(run: Run) -> str:
    """A tool call with a fixed tool_call_id, then a text answer using the tool's result."""
    result = await _add_agent(FunctionModel(_add_then_answer)).run("What is 2 + 3?")
    run.expect("output", "sum is 5")
    run.observe("output", result.output)
    return result.output


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """Stream a tool call in two argument chunks, then the answer in three text chunks."""
    if not _has_tool_return(messages):
        yield {0: DeltaToolCall(name="add", json_args='{"a": 2, ', tool_call_id="add-1")}
        yield {0: DeltaToolCall(json_args='"b": 3}')}
        return
    for chunk in ("the ", "sum ", "is 5"):
        yield chunk


@scenario("coverage/stream")
async def stream(run: Run) -> str:
    """agent.run_stream: a streamed tool call, then streamed text chunks."""
    agent = _add_agent(FunctionModel(stream_function=_stream))
    async with agent.run_stream("What is 2 + 3?") as response:
        chunks = [text async for text in response.stream_text(delta=True, debounce_by=None)]
        output = await response.get_output()
    run.observe("chunks", chunks)
    return output


@scenario("coverage/iter")
async def iter_nodes(run: Run) -> str:
    """agent.iter over a tool-calling run, observing the node types in order."""
    agent = _add_agent(FunctionModel(_add_then_answer))
    nodes: list[str] = []
    async with agent.iter("What is 2 + 3?") as agent_run:
        async for node in agent_run:
            nodes.append(type(node).__name__)
    assert agent_run.result is not None
    run.observe("nodes", nodes)
    return agent_run.result.output


class CountingFunctionModel(FunctionModel):
    """FunctionModel with a deterministic count_tokens (FunctionModel has none)."""

    async def count_tokens(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> RequestUsage:
        return RequestUsage(input_tokens=estimate_token_count(messages))


@scenario("coverage/count_tokens")
async def count_tokens(run: Run) -> str:
    """UsageLimits(count_tokens_before_request=True) counts tokens before each request."""
    model = CountingFunctionModel(_add_then_answer)
    limits = UsageLimits(count_tokens_before_request=True, input_tokens_limit=10_000)
    result = await _add_agent(model).run("What is 2 + 3?", usage_limits=limits)
    # The counts themselves are in the cassette (count_tokens exchanges); observe the run's own usage.
    usage = result.usage() if callable(result.usage) else result.usage  # a property on newer pydantic-ai
    run.observe("usage_requests", usage.requests)
    return result.output


@scenario("coverage/named_agent")
async def named_agent(run: Run) -> str:
    """An agent with an explicit name="planner" (its requests get the role "planner")."""
    agent = _add_agent(FunctionModel(_add_then_answer), name="planner")
    result = await agent.run("What is 2 + 3?")
    return result.output


@scenario("coverage/predicate")
async def predicate(run: Run) -> str:
    """Two parallel tool calls; observe and pin that every call in the history has its return."""

    def two_calls(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not _has_tool_return(messages):
            return ModelResponse(
                parts=[
                    ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="add-1"),
                    ToolCallPart("add", {"a": 3, "b": 4}, tool_call_id="add-2"),
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    result = await _add_agent(FunctionModel(two_calls)).run("Add 1+2 and 3+4.")
    calls = {p.tool_call_id for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)}
    run.observe("tool_calls_paired", calls == returns)
    run.expect("tool_calls_paired", True)
    return result.output


@scenario("coverage/summarizer_inherits_model")
async def summarizer_inherits_model(run: Run) -> str:
    """SummarizingCompaction(model=None): the main model also answers the summarizer's request."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if "summarization assistant" in (info.instructions or ""):
            return ModelResponse(parts=[TextPart("Summary: five questions were answered.")])
        return ModelResponse(parts=[TextPart("ready")])

    compaction = SummarizingCompaction(max_messages=4, keep_messages=2)
    agent = Agent(FunctionModel(answer), capabilities=[compaction])
    result = await agent.run("continue", message_history=_history())
    run.observe("result_part_kinds", [[p.part_kind for p in m.parts] for m in result.all_messages()])
    return result.output


@scenario("coverage/trajectory_judge")
async def trajectory_judge(run: Run) -> str:
    """TrajectoryJudge: an unnamed inner agent in a background task (role ``trajectory_judge``).

    Responders and the tool are async: a sync FunctionModel or tool runs in a thread, and the
    judge's verdict would then race the main agent (``replay record --check-determinism`` shows it).
    Async alone still left the race to the event loop's pace, which differs between Python minors:
    recorded on 3.11 the steer landed in main[6], replayed on 3.12 or 3.13 in main[5]. So the tool
    waits for a judge in flight, the judge started after a main request ends before the next one
    is built, on every Python, in recording and in replay (tools run in both; responders only when
    recording).
    """
    from pydantic_ai_harness import TrajectoryJudge

    verdicts = iter(["steer", "good", "good", "good"])

    async def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = {t.name: t for t in info.output_tools}
        verdict = next(verdicts, "good")
        name = next((n for n in tools if ("Steer" if verdict == "steer" else "AllGood") in n), next(iter(tools)))
        args = {"message": "Report progress after each tick."} if "Steer" in name else {}
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"judge-{verdict}")])

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages for p in m.parts if p.part_kind == "tool-return")
        if done < 6:
            return ModelResponse(parts=[ToolCallPart("tick", {}, tool_call_id=f"tick-{done}")])
        return ModelResponse(parts=[TextPart("finished")])

    agent = Agent(FunctionModel(answer), capabilities=[TrajectoryJudge(model=FunctionModel(judge), every=2)])

    @agent.tool_plain
    async def tick() -> str:
        judging = [t for t in asyncio.all_tasks() if t.get_name().startswith("trajectory-judge") and not t.done()]
        if judging:
            await asyncio.wait(judging)
        return "ticked"

    result = await agent.run("Tick six times.")
    run.observe("messages", len(result.all_messages()))
    return result.output


@scenario("coverage/tool_call_judge")
async def tool_call_judge(run: Run) -> str:
    """ToolCallJudge: a named inner agent asked about each tool call (role ``tool_call_judge``)."""
    from pydantic_ai_harness import ToolCallJudge

    async def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
        answer = "yes" if "/etc" in text else "no"
        tool = info.output_tools[0]
        return ModelResponse(parts=[ToolCallPart(tool.name, {"response": answer}, tool_call_id="verdict")])

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[
                ToolCallPart("delete_file", {"path": "/etc/passwd"}, tool_call_id="del-1"),
                ToolCallPart("delete_file", {"path": "/tmp/scratch"}, tool_call_id="del-2"),
            ])
        return ModelResponse(parts=[TextPart("done")])

    judge_cap = ToolCallJudge(FunctionModel(judge), question="Would running this destroy important data?")
    agent = Agent(FunctionModel(answer), capabilities=[judge_cap])

    @agent.tool_plain
    async def delete_file(path: str) -> str:
        return f"deleted {path}"

    result = await agent.run("Clean up.")
    returns = [str(p.content) for m in result.all_messages() for p in m.parts if p.part_kind in ("tool-return", "retry-prompt")]
    run.observe("tool_results", returns)
    return result.output

"""The benchmark scenario: a FunctionModel main agent in a tool loop, with a summarizing
compaction and an LLM reminder, so every kind of inner agent the recorder must tag is busy.

Everything is built inside the scenario function (as real scenarios do), so the recorder
sees the harness's inner agents being constructed and tags their roles.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import SystemReminders
from pydantic_ai_harness.compaction import SummarizingCompaction
from pydantic_ai_harness.system_reminders import LLMReminder

from replay.scenario import Run, Scenario

TICKS = 4


async def _summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("Summary: the user asked for ticks; several are done.")])


async def _remind(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("Stay on task: finish the ticks, then report.")])


async def bench_run(run: Run) -> Any:
    compaction = SummarizingCompaction(model=FunctionModel(_summarize), max_messages=6, keep_messages=2)
    reminders = SystemReminders(dynamic_reminders=[LLMReminder(FunctionModel(_remind))])
    calls = 0

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # A per-run counter, not the tool returns seen: compaction summarises those away.
        nonlocal calls
        calls += 1
        if calls <= TICKS:
            return ModelResponse(parts=[ToolCallPart("tick", {"n": calls}, tool_call_id=f"tick-{calls}")])
        return ModelResponse(parts=[TextPart("complete")])

    agent = Agent(FunctionModel(answer), capabilities=[compaction, reminders])

    @agent.tool_plain
    async def tick(n: int) -> str:
        return f"tick {n} completed"

    result = await agent.run(f"Use tick {TICKS} times then finish.")
    run.observe("output", result.output)
    return result.output


SCENARIO = Scenario(id="bench/tool_loop", func=bench_run, path=None, doc="benchmark scenario", source_hash="bench")

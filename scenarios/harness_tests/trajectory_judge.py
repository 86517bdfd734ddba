"""Ported from pydantic-ai-harness tests/trajectory_judge: a background judge steering the run."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.trajectory_judge import TrajectoryJudge

from replay import Run, scenario
from scenarios.harness_tests._common import tool_calls_then


@scenario("harness_tests/trajectory_judge/all_good_changes_nothing")
async def all_good_changes_nothing(run: Run) -> str:
    """A judge that answers AllGood every time leaves the main history without feedback."""

    async def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        name = next((t.name for t in info.output_tools if "AllGood" in t.name), info.output_tools[0].name)
        return ModelResponse(parts=[ToolCallPart(name, {}, tool_call_id="judge-good")])

    agent = Agent(
        FunctionModel(tool_calls_then([("tick", {})] * 4)),
        capabilities=[TrajectoryJudge(model=FunctionModel(judge), every=2)],
    )

    @agent.tool_plain
    async def tick() -> str:
        return "ticked"

    result = await agent.run("Tick four times.")
    return result.output

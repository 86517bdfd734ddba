"""Ported from pydantic-ai-harness tests/repair_tool_arguments/test_capability.py."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.repair_tool_arguments import RepairToolArguments

from replay import Run, scenario
from scenarios.harness_tests._common import returns


@scenario("harness_tests/repair_tool_arguments/repairs_malformed_json")
async def repairs_malformed_json(run: Run) -> str:
    """Arguments with a trailing comma and single quotes are repaired instead of retried."""

    async def main(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(p.part_kind in ("tool-return", "retry-prompt") for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart("add", "{'a': 2, 'b': 3,}", tool_call_id="add-1")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(main), capabilities=[RepairToolArguments()])

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        return a + b

    result = await agent.run("Add 2 and 3.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

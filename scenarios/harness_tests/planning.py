"""Ported from pydantic-ai-harness tests/planning (the plan tools and the injected plan)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.planning import Planning

from replay import Run, scenario
from scenarios.harness_tests._common import returns, tool_calls_then


@scenario("harness_tests/planning/write_then_read_plan")
async def write_then_read_plan(run: Run) -> str:
    """write_plan with two steps, then read_plan: the plan is stored and shown back."""
    items = [{"id": "step0001", "content": "Write the migration"}, {"id": "step0002", "content": "Run the tests"}]
    main = tool_calls_then([("write_plan", {"items": items}), ("read_plan", {})])
    result = await Agent(FunctionModel(main), capabilities=[Planning()]).run("Plan the change.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

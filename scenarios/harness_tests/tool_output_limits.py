"""Ported from pydantic-ai-harness tests/tool_output_limits (Truncate band)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.tool_output_limits import Band, ToolOutputLimits, Truncate

from replay import Run, scenario
from scenarios.harness_tests._common import returns, tool_calls_then


@scenario("harness_tests/tool_output_limits/truncates_large_return")
async def truncates_large_return(run: Run) -> str:
    """A return over the band's threshold is truncated once, and stays truncated in history."""
    cap = ToolOutputLimits(bands=[Band(over=200, action=Truncate(max_chars=120))])
    agent = Agent(FunctionModel(tool_calls_then([("dump", {}), ("dump", {})])), capabilities=[cap])

    @agent.tool_plain
    async def dump() -> str:
        return "\n".join(f"line {n}: " + "x" * 20 for n in range(40))

    result = await agent.run("Dump twice.")
    run.observe("return_sizes", [len(r) for r in returns(result.all_messages())])
    return result.output

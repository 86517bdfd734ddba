"""Ported from pydantic-ai-harness tests/tool_call_judge (absent in 0.52.0: this file then fails to import)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.tool_call_judge import ToolCallJudge

from replay import Run, scenario
from scenarios.harness_tests._common import returns, tool_calls_then, verdict


def _judge() -> FunctionModel:
    return FunctionModel(verdict(lambda seen: "yes" if "/etc" in seen else "no"))


@scenario("harness_tests/tool_call_judge/blocks_risky_call")
async def blocks_risky_call(run: Run) -> str:
    """A 'yes' to the risk question blocks the call; a 'no' lets the next one run."""
    main = tool_calls_then([("delete_file", {"path": "/etc/passwd"}), ("delete_file", {"path": "/tmp/x"})])
    agent = Agent(FunctionModel(main), capabilities=[ToolCallJudge(_judge(), question="Would this destroy data?")])

    @agent.tool_plain
    async def delete_file(path: str) -> str:
        return f"deleted {path}"

    result = await agent.run("Clean up.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output


@scenario("harness_tests/tool_call_judge/unselected_tool_not_judged")
async def unselected_tool_not_judged(run: Run) -> str:
    """tools=[...] limits judging to the named tools; the others run without a judge call."""
    main = tool_calls_then([("list_files", {"path": "/etc"}), ("delete_file", {"path": "/etc/hosts"})])
    judge = ToolCallJudge(_judge(), question="Would this destroy data?", tools=["delete_file"])
    agent = Agent(FunctionModel(main), capabilities=[judge])

    @agent.tool_plain
    async def delete_file(path: str) -> str:
        return f"deleted {path}"

    @agent.tool_plain
    async def list_files(path: str) -> str:
        return f"{path}: a b c"

    result = await agent.run("Tidy /etc.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

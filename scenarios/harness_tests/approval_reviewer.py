"""Ported from pydantic-ai-harness tests/approval_reviewer (added in 0.56.0: older versions fail to import this file)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.approval_reviewer import ApprovalReviewer

from replay import Run, scenario
from scenarios.harness_tests._common import returns, tool_calls_then, verdict


@scenario("harness_tests/approval_reviewer/no_risk_approves")
async def no_risk_approves(run: Run) -> str:
    """A 'no' to the risk question approves a requires_approval call on the person's behalf."""
    reviewer = ApprovalReviewer(FunctionModel(verdict(lambda seen: "no")), question="Could this cause harm?")
    agent = Agent(FunctionModel(tool_calls_then([("restart", {"service": "web"})])), capabilities=[reviewer])

    @agent.tool_plain(requires_approval=True)
    async def restart(service: str) -> str:
        return f"restarted {service}"

    result = await agent.run("Restart web.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

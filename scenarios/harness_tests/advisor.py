"""Ported from pydantic-ai-harness tests/advisor/test_advisor.py (local advisor mode)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.advisor import Advisor

from replay import Run, scenario
from scenarios.harness_tests._common import returns, text, tool_calls_then


@scenario("harness_tests/advisor/forwards_history")
async def forwards_history(run: Run) -> str:
    """test_local_advisor_optionally_forwards_history (True): the advisor sees the original request too."""
    executor = tool_calls_then([("advisor", {"prompt": "What should I do?"})])
    agent = Agent(FunctionModel(executor), capabilities=[Advisor(FunctionModel(text("advice")), forward_history=True)])
    result = await agent.run("Original request.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output


@scenario("harness_tests/advisor/max_uses_resets_per_request")
async def max_uses_resets_per_request(run: Run) -> str:
    """test_max_uses_resets_for_each_executor_request: max_uses=1 counts per executor request."""
    executor = tool_calls_then([("advisor", {"prompt": "question 1"}), ("advisor", {"prompt": "question 2"})])
    agent = Agent(FunctionModel(executor), capabilities=[Advisor(FunctionModel(text("advice")), max_uses=1)])
    result = await agent.run("Ask on consecutive requests.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

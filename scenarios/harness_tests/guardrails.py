"""Ported from pydantic-ai-harness tests/guardrails (input and tool guardrails)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.guardrails import InputGuardrail, ToolGuardrail

from replay import Run, scenario
from scenarios.harness_tests._common import returns, text, tool_calls_then


@scenario("harness_tests/guardrails/input_allowed_passes")
async def input_allowed_passes(run: Run) -> str:
    """An input guard returning True lets the prompt through to the model."""
    agent = Agent(FunctionModel(text("hello back")), capabilities=[InputGuardrail(lambda prompt: "password" not in prompt)])
    return (await agent.run("hello")).output


@scenario("harness_tests/guardrails/tool_guard_blocks_call")
async def tool_guard_blocks_call(run: Run) -> str:
    """A tool guard returning False blocks the call; the model sees it was blocked."""
    guard = ToolGuardrail(guard=lambda call: call.args.get("path") != "/etc/passwd")
    main = tool_calls_then([("read", {"path": "/etc/passwd"}), ("read", {"path": "notes.txt"})])
    agent = Agent(FunctionModel(main), capabilities=[guard])

    @agent.tool_plain
    async def read(path: str) -> str:
        return f"contents of {path}"

    result = await agent.run("Read files.")
    run.observe("tool_returns", returns(result.all_messages()))
    return result.output

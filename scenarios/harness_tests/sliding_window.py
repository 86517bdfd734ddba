"""Ported from pydantic-ai-harness tests/compaction/test_compaction.py (SlidingWindowCompaction)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.compaction import SlidingWindowCompaction

from replay import Run, scenario
from scenarios.harness_tests._common import text


def _history(turns: int) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for n in range(1, turns + 1):
        out += [ModelRequest(parts=[UserPromptPart(f"question {n}")]), ModelResponse(parts=[TextPart(f"answer {n}")])]
    return out


@scenario("harness_tests/compaction/sliding_window_keeps_recent")
async def sliding_window_keeps_recent(run: Run) -> str:
    """Sliding window over max_messages keeps the last keep_messages (and the first user prompt)."""
    agent = Agent(FunctionModel(text("ok")), capabilities=[SlidingWindowCompaction(max_messages=6, keep_messages=4)])
    result = await agent.run("question 6", message_history=_history(5))
    return result.output


@scenario("harness_tests/compaction/sliding_window_without_first_prompt")
async def sliding_window_without_first_prompt(run: Run) -> str:
    """preserve_first_user_message=False: only the window survives."""
    cap = SlidingWindowCompaction(max_messages=6, keep_messages=4, preserve_first_user_message=False)
    result = await Agent(FunctionModel(text("ok")), capabilities=[cap]).run("question 6", message_history=_history(5))
    return result.output


@scenario("harness_tests/compaction/sliding_window_under_limit_untouched")
async def sliding_window_under_limit_untouched(run: Run) -> str:
    """Below max_messages nothing is dropped."""
    cap = SlidingWindowCompaction(max_messages=20, keep_messages=4)
    result = await Agent(FunctionModel(text("ok")), capabilities=[cap]).run("question 4", message_history=_history(3))
    return result.output

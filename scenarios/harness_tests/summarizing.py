"""Ported from pydantic-ai-harness tests/compaction/test_compaction.py (SummarizingCompaction)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario
from scenarios.harness_tests._common import text


def _history(turns: int) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for n in range(1, turns + 1):
        detail = " ".join(f"detail {k} of turn {n}." for k in range(8))
        out += [ModelRequest(parts=[UserPromptPart(f"U{n}: {detail}")]), ModelResponse(parts=[TextPart(f"A{n}: {detail}")])]
    return out


@scenario("harness_tests/compaction/summarizing_replaces_old_messages")
async def summarizing_replaces_old_messages(run: Run) -> str:
    """Over max_messages the older messages go to the summarizer and its summary replaces them."""
    cap = SummarizingCompaction(model=FunctionModel(text("Summary of U1-A4.")), max_messages=8, keep_messages=4)
    result = await Agent(FunctionModel(text("ok")), capabilities=[cap]).run("U6", message_history=_history(5))
    return result.output


@scenario("harness_tests/compaction/summarizing_below_trigger_no_call")
async def summarizing_below_trigger_no_call(run: Run) -> str:
    """Below the trigger the summarizer is never called."""
    cap = SummarizingCompaction(model=FunctionModel(text("unused")), max_messages=40, keep_messages=4)
    result = await Agent(FunctionModel(text("ok")), capabilities=[cap]).run("U3", message_history=_history(2))
    return result.output

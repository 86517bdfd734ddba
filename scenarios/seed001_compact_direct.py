"""Seed 001 as its probe ran it: ``SummarizingCompaction.compact()`` called directly, no main model.

The seed's probe never runs an agent: it hands U1, A1 .. U10, A10, U11 to ``compact()`` with a
summarizer answering "Summary." (``max_messages=1, keep_messages=4,
preserve_first_user_message=False``) and compares what the summarizer saw with what came back.
Only the summarizer's request reaches a model, so the compacted history is handed to the
checks with ``run.observe_messages("compacted", result, source=history)``: ``replay check``
then finds A9, U10, A10 in neither (``content_lost``) with ``keep_user_messages=True`` and
nothing with the control, without the scenario writing the expected answer down.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RunUsage
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario


async def _compact(run: Run, keep_user_messages: bool, turns: int = 10) -> int:
    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Summary.")])

    history: list[ModelMessage] = []
    for i in range(1, turns + 1):
        history += [ModelRequest(parts=[UserPromptPart(f"U{i}")]), ModelResponse(parts=[TextPart(f"A{i}")])]
    history.append(ModelRequest(parts=[UserPromptPart(f"U{turns + 1}")]))
    kwargs: dict[str, Any] = {}
    if "preserve_first_user_message" in inspect.signature(SummarizingCompaction).parameters:
        kwargs["preserve_first_user_message"] = False
    model = FunctionModel(summarize)
    compaction = SummarizingCompaction(
        model=model, max_messages=1, keep_messages=4, keep_user_messages=keep_user_messages, **kwargs
    )
    ctx = RunContext(deps=None, model=model, usage=RunUsage(), messages=history)
    result = await compaction.compact(history, ctx)
    run.observe_messages("compacted", result, source=history)
    return len(result)


@scenario("seed001/compact_direct_keep_user_messages_true")
async def compact_direct_keep_user_messages_true(run: Run) -> int:
    """compact() with keep_user_messages=True: A9, U10, A10 reach neither the summary nor the result."""
    return await _compact(run, True)


@scenario("seed001/compact_direct_keep_user_messages_false")
async def compact_direct_keep_user_messages_false(run: Run) -> int:
    """Control: keep_user_messages=False loses nothing."""
    return await _compact(run, False)

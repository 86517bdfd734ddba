"""Seed 001: SummarizingCompaction(keep_user_messages=True) loses recent messages.

History U1, A1 .. U10, A10 and the current prompt U11 go through a real agent run with
``SummarizingCompaction(max_messages=1, keep_messages=4, preserve_first_user_message=False)``
and a summarizer answering "Summary.". Seed 001 reports (on 0.63.0) that with
``keep_user_messages=True`` A9, U10 and A10 reach neither the summarizer nor the main
model; ``keep_user_messages=False`` is the control. The last scenario is the 30-turn,
``keep_messages=20`` variant. The scenario observes only the run's final history
(``result.all_messages()``): which U/A turns it still holds and whether the current prompt
is among them. What the summarizer and the main model were actually sent is captured in
the cassette, and the invariant checks compute lost messages from that traffic.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario


def _text(messages: list[ModelMessage]) -> str:
    """All text the model saw; kept user copies carry a list of ``TextContent`` on 0.62.0."""
    chunks: list[str] = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", "")
            items = content if isinstance(content, list) else [content]
            chunks += [str(getattr(item, "content", item)) for item in items]
    return " ".join(chunks)


def _names(text: str) -> set[str]:
    return set(re.findall(r"\b[UA]\d+\b", text))


def _ordered(names: set[str]) -> list[str]:
    return sorted(names, key=lambda name: (int(name[1:]), name[0] == "A"))


async def _keep_user_case(run: Run, keep_messages: int, keep_user_messages: bool, turns: int = 10) -> str:
    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Summary.")])

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Done.")])

    history: list[ModelMessage] = []
    for i in range(1, turns + 1):
        history += [ModelRequest(parts=[UserPromptPart(f"U{i}")]), ModelResponse(parts=[TextPart(f"A{i}")])]

    kwargs: dict[str, Any] = {}
    if "preserve_first_user_message" in inspect.signature(SummarizingCompaction).parameters:
        kwargs["preserve_first_user_message"] = False
    compaction = SummarizingCompaction(
        model=FunctionModel(summarize),
        max_messages=1,
        keep_messages=keep_messages,
        keep_user_messages=keep_user_messages,
        **kwargs,
    )
    agent = Agent(FunctionModel(answer), capabilities=[compaction])
    current = f"U{turns + 1}"
    result = await agent.run(current, message_history=history)

    # Only what the run returns: the final (compacted) history, never what a responder saw.
    in_history = _names(_text(result.all_messages()))
    run.observe("history_turns", _ordered(in_history))
    run.observe("current_prompt_in_history", current in in_history)
    return result.output


@scenario("seed001/keep_user_messages_true")
async def keep_user_messages_true(run: Run) -> str:
    """keep_messages=4, keep_user_messages=True over 10 turns (seed: A9, U10, A10 lost)."""
    return await _keep_user_case(run, keep_messages=4, keep_user_messages=True)


@scenario("seed001/keep_user_messages_false")
async def keep_user_messages_false(run: Run) -> str:
    """Control: keep_messages=4, keep_user_messages=False over 10 turns (nothing lost)."""
    return await _keep_user_case(run, keep_messages=4, keep_user_messages=False)


@scenario("seed001/keep_messages_20_30_turns")
async def keep_messages_20_30_turns(run: Run) -> str:
    """keep_messages=20, keep_user_messages=True over 30 turns (seed: A21, U22..A30 lost)."""
    return await _keep_user_case(run, keep_messages=20, keep_user_messages=True, turns=30)

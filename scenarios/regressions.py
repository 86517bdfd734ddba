"""Regressions named in the mission that the seeds do not cover.

- ``regressions/whitespace_summary``: the summarizer answers with whitespace only. A harness that
  accepts it wipes the history (``replay check`` flags *empty_summary*); 0.62 rejects it and the
  run fails instead, which ``replay run`` reports as an outcome change.
- ``regressions/reused_tool_call_id``: a history whose second tool call reuses the first call's
  ``tool_call_id``. A naive "every called id has a return" predicate calls it paired (observed and
  pinned with ``run.expect``); pydantic-ai's own pairing sees the dangling call and refuses a new
  prompt (the recorded outcome). A release that changes either verdict shows up in ``replay run``.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario


def _history() -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for n in range(5):
        out += [ModelRequest(parts=[UserPromptPart(f"topic {n}")]), ModelResponse(parts=[TextPart(f"noted {n}")])]
    return out


@scenario("regressions/whitespace_summary")
async def whitespace_summary(run: Run) -> str:
    """A whitespace-only summary must not replace the history."""

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("   \n")])

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ready")])

    agent = Agent(
        FunctionModel(answer),
        capabilities=[SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=2)],
    )
    result = await agent.run("continue", message_history=_history())
    run.observe("history_messages", len(result.all_messages()))
    return result.output


def _ids_paired(messages: list[ModelMessage]) -> bool:
    """The naive predicate: every tool_call_id that was called also has a return."""
    called = {p.tool_call_id for m in messages for p in m.parts if p.part_kind == "tool-call"}
    returned = {p.tool_call_id for m in messages for p in m.parts if p.part_kind == "tool-return"}
    return called <= returned


@scenario("regressions/reused_tool_call_id")
async def reused_tool_call_id(run: Run) -> str:
    """A history reusing one tool_call_id: the naive predicate says paired, pydantic-ai says dangling."""
    from pydantic_ai.messages import ToolReturnPart

    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("look a up")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="t1")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "value of a", tool_call_id="t1")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"key": "b"}, tool_call_id="t1")]),
    ]
    run.observe("naive_ids_paired", _ids_paired(history))
    run.expect("naive_ids_paired", True)

    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("done")])))

    @agent.tool_plain
    def lookup(key: str) -> str:
        return f"value of {key}"

    result = await agent.run("and now?", message_history=history)
    return result.output

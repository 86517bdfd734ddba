"""Seed 002: harness 0.54.0 accepts a whitespace-only summary; 0.55+ retry it and raise.

The seed's probe: four short turns (setup, an observation ``NOTE=alpha`` to reuse later, an
idle turn, then the reuse question) through ``SummarizingCompaction(max_messages=4,
keep_messages=1)`` whose summarizer answers ``' \\t\\n '``; the main model always answers
``ACK``. On 0.54.0 the blank summary is accepted: four main calls, the compacted requests carry
only ``Summary of previous conversation:`` and ``NOTE=alpha`` is gone (``replay check``:
*empty_summary*). On 0.55+ the summarizer is called twice and the idle turn raises
``UnexpectedModelBehavior``: two main calls, no reuse call.

Controls, as in the seed: an empty-string summary (two summarizer calls and
``UnexpectedModelBehavior`` on every version), a padded non-empty summary (stripped, keeps
``NOTE=alpha``, one summarizer call, four main calls) and no compaction (four main calls).

Each scenario observes ``turns`` (prompt and output, or the error type and message, as the
probe printed them) and ``note_alpha_in_history`` (whether ``NOTE=alpha`` is still in the
history the last successful turn returned); the requests each model was sent are the
cassette's. A failing turn is recorded, then re-raised, so the error is the outcome. Every
model is a ``FunctionModel``, so a version that makes more calls than were recorded gets
the answers it would get live (``on_exhausted="fake"``).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario

PROMPTS = [
    "Task setup: retain synthetic observations.",
    "Observation to reuse later: NOTE=alpha.",
    "Idle turn: acknowledge only.",
    "Now answer the current question about NOTE.",
]


def _text(messages: list[ModelMessage]) -> str:
    return "\n".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)


async def _drive(run: Run, summary: str | None) -> str:
    """The probe's ``trial``: four turns, each on the history the previous one returned."""

    async def ack(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ACK")])

    async def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(summary or "")])

    capabilities: list[Any] = []
    if summary is not None:
        capabilities.append(SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=1))
    agent = Agent(FunctionModel(ack), capabilities=capabilities)
    history: list[ModelMessage] = []
    turns: list[dict[str, str]] = []
    output = ""
    try:
        for prompt in PROMPTS:
            try:
                result = await agent.run(prompt, message_history=history)
            except Exception as exc:
                turns.append({"prompt": prompt, "error": type(exc).__name__, "message": str(exc)})
                raise
            history = result.all_messages()
            output = result.output
            turns.append({"prompt": prompt, "output": output})
    finally:
        run.observe("turns", turns)
        run.observe("note_alpha_in_history", "NOTE=alpha" in _text(history))
    return output


@scenario("seed002/whitespace", on_exhausted="fake", expect_error="UnexpectedModelBehavior")
async def whitespace(run: Run) -> str:
    """The summarizer answers ' \\t\\n ': accepted on 0.54.0 (NOTE=alpha gone), UnexpectedModelBehavior on 0.55+."""
    return await _drive(run, " \t\n ")


@scenario("seed002/empty_string", on_exhausted="fake", expect_error="UnexpectedModelBehavior")
async def empty_string(run: Run) -> str:
    """Control: the summarizer answers '': two summarizer calls, then UnexpectedModelBehavior on every version."""
    return await _drive(run, "")


@scenario("seed002/padded_summary", on_exhausted="fake")
async def padded_summary(run: Run) -> str:
    """Control: ' NOTE=alpha was recorded. ' is stripped and kept: one summarizer call, four main calls."""
    return await _drive(run, " NOTE=alpha was recorded. ")


@scenario("seed002/no_compaction", on_exhausted="fake")
async def no_compaction(run: Run) -> str:
    """Control: no compaction capability: four main calls, the observation stays in the raw history."""
    return await _drive(run, None)

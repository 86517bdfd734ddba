"""Seed 000: automatic SummarizingCompaction can grow a tiny request instead of shrinking it.

Rebuilds the probe's ``compact_case(mode)``: a 5-turn "topic n" / "noted n" history,
``SummarizingCompaction(max_messages=4, keep_messages=2, receipts=True)`` with a fake
summarizer, and a main agent that always answers "ready". On harness 0.62.0 the long
summary is accepted and the first request grows from an estimate of 19 to 889; 0.63.0
rejects it. The short / below-trigger / fallback / window-only / large-history cases are
the seed's controls.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.compaction import (
    FallbackCompaction,
    SlidingWindowCompaction,
    SummarizingCompaction,
    estimate_token_count,
)

from replay import Run, scenario


def _history(large: bool = False) -> list[ModelMessage]:
    """Five user/assistant turns; ``large`` repeats each answer 120 times (estimate ~1060)."""
    messages: list[ModelMessage] = []
    for n in range(5):
        messages.append(ModelRequest(parts=[UserPromptPart(f"topic {n}")]))
        messages.append(ModelResponse(parts=[TextPart(f"noted {n}" * (120 if large else 1))]))
    return messages


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("ready")])


def _kinds(messages: list[ModelMessage]) -> list[list[str]]:
    return [[part.part_kind for part in message.parts] for message in messages]


async def _compact_case(run: Run, mode: str) -> str:
    base = _history(large=mode == "short_large")
    summary_text = "brief" if mode in ("short", "short_large") else "retained note " * 240

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(summary_text)])

    summary = SummarizingCompaction(
        model=FunctionModel(summarize),
        max_messages=200 if mode == "below_trigger" else 4,
        keep_messages=2,
        receipts=True,
    )
    window = SlidingWindowCompaction(max_messages=4, keep_messages=2, receipts=True)
    if mode == "window_only":
        capability = window
    elif mode == "fallback":
        capability = FallbackCompaction(max_tokens=1, fallback_chain=[summary, window])
    else:
        capability = summary

    agent = Agent(FunctionModel(_answer), capabilities=[capability])
    run.observe(
        "original_estimate_with_current",
        estimate_token_count(base + [ModelRequest(parts=[UserPromptPart("continue")])]),
    )
    result = await agent.run("continue", message_history=base)
    run.observe("first_result_part_kinds", _kinds(result.all_messages()))
    if mode in ("long", "fallback"):
        idle = await agent.run("idle", message_history=result.all_messages())
        result = await agent.run("reuse topic", message_history=idle.all_messages())
    run.expect("output", "ready")
    run.observe("output", result.output)
    return result.output


@scenario("seed000/long")
async def long(run: Run) -> str:
    """Oversized summary (240x "retained note") over three turns: continue, idle, reuse topic."""
    return await _compact_case(run, "long")


@scenario("seed000/short")
async def short(run: Run) -> str:
    """One-word summary with receipts on the tiny history (0.62.0: estimate 19 -> 50)."""
    return await _compact_case(run, "short")


@scenario("seed000/below_trigger")
async def below_trigger(run: Run) -> str:
    """Control: max_messages=200, so compaction never triggers and the summarizer is never called."""
    return await _compact_case(run, "below_trigger")


@scenario("seed000/fallback")
async def fallback(run: Run) -> str:
    """FallbackCompaction(summarizer, then sliding window) over three turns."""
    return await _compact_case(run, "fallback")


@scenario("seed000/window_only")
async def window_only(run: Run) -> str:
    """Control: SlidingWindowCompaction alone with receipts (no summarizer)."""
    return await _compact_case(run, "window_only")


@scenario("seed000/short_large")
async def short_large(run: Run) -> str:
    """One-word summary on a large history (estimate ~1060), where compaction really shrinks."""
    return await _compact_case(run, "short_large")

"""The benchmark workload: a realistic long conversation, not a toy loop.

A main agent with one tool and ``SummarizingCompaction(max_messages=40, keep_messages=10)``;
each turn the model calls the tool, then answers in about 200 words. An ``LLMReminder``
fires every ``REMIND_EVERY`` main requests, so three roles are busy (``main``,
``summarizing_compaction``, ``system_reminders``). Responders are async ``FunctionModel``s:
the plain run is almost pure pydantic-ai + harness work, the harshest denominator for the
recorder's overhead.

Importable (``make_scenario(turns)`` for in-process benchmarks), a scenario file
(``replay record bench/_scenario.py``: ``REPLAY_BENCH_TURNS`` sets the length) and a plain
program (``python bench/_scenario.py``: the same conversation with no harness-replay at all,
the whole-process baseline of ``replay run``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai_harness import SystemReminders
from pydantic_ai_harness.compaction import SummarizingCompaction
from pydantic_ai_harness.system_reminders import LLMReminder

TURNS = int(os.environ.get("REPLAY_BENCH_TURNS", "200"))
REMIND_EVERY = 20
"""Main requests between two generated reminders (an LLM reminder on every request would double the calls)."""

_WORDS = (
    "the deploy pipeline runs tests builds an image pushes it to the registry and rolls it out "
    "gradually while the health checks watch error rates latency and saturation so that a bad "
    "release is caught early and rolled back before most users see it the team reviews each "
    "incident writes down what happened and which signal would have caught it sooner"
).split()


def _words(seed: int, n: int) -> str:
    return " ".join(_WORDS[(seed * 7 + k * 3) % len(_WORDS)] for k in range(n))


def answer_text(turn: int) -> str:
    """About 200 words, different every turn (so every answer is its own message)."""
    return f"Turn {turn}: here is what I found. " + _words(turn, 196) + "."


def _turn_of(messages: list[ModelMessage]) -> tuple[int, bool]:
    """(turn number, whether the tool already answered) from the requests since the last response."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                return int(re.findall(r"\d+", str(part.content))[0]), True
            if isinstance(part, UserPromptPart):
                return int(re.findall(r"\d+", str(part.content))[0]), False
    return 0, False


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn, looked_up = _turn_of(messages)
    if looked_up:
        return ModelResponse(parts=[TextPart(answer_text(turn))])
    return ModelResponse(parts=[ToolCallPart("lookup", {"topic": f"topic {turn}", "turn": turn}, tool_call_id=f"call-{turn}")])


CHUNK = 4
"""Characters per streamed text event: about a token, as providers stream."""


async def _answer_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """``_answer`` as a provider streams it: the tool call in one event, the answer a token at a time."""
    turn, looked_up = _turn_of(messages)
    if not looked_up:
        args = json.dumps({"topic": f"topic {turn}", "turn": turn})
        yield {0: DeltaToolCall(name="lookup", json_args=args, tool_call_id=f"call-{turn}")}
        return
    text = answer_text(turn)
    for start in range(0, len(text), CHUNK):
        yield text[start : start + CHUNK]


async def _summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("Summary: " + _words(len(messages), 90) + ".")])


async def _remind(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("Stay on the deploy question; answer from the lookup results.")])


async def conversation(turns: int = TURNS, models: tuple[Any, Any, Any] | None = None, *, stream: bool = False) -> tuple[str, int]:
    """The whole conversation; returns the last answer and the final history length.

    ``models`` (main, summarizer, reminder) replaces the FunctionModel responders, e.g. with
    provider models over HTTP (``_wire_scenario``). ``stream``: the main agent's requests are
    streamed (an event handler, as a chat front end has), each answer about a token an event.
    """
    main_model = FunctionModel(_answer, stream_function=_answer_stream) if stream else FunctionModel(_answer)
    main, summarizer, reminder = models or (main_model, FunctionModel(_summarize), FunctionModel(_remind))
    llm_reminder = LLMReminder(reminder)
    requests = 0

    async def every_few(ctx: RunContext[Any]) -> Any:
        nonlocal requests
        requests += 1
        return await llm_reminder(ctx) if requests % REMIND_EVERY == 0 else None

    agent = Agent(
        main,
        instructions="You are a site-reliability assistant. Use the lookup tool before answering.",
        capabilities=[
            SummarizingCompaction(model=summarizer, max_messages=40, keep_messages=10),
            SystemReminders(dynamic_reminders=[every_few]),
        ],
    )

    @agent.tool_plain
    async def lookup(topic: str, turn: int) -> str:
        """Look a topic up in the runbooks."""
        return f"turn {turn}: runbook entry for {topic}: check the rollout dashboard, then the error budget."

    history: list[ModelMessage] = []
    output = ""
    for turn in range(1, turns + 1):
        result = await agent.run(f"Turn {turn}: what should we check next about the deploy?", message_history=history,
                                 event_stream_handler=_drain if stream else None)
        history = result.all_messages()
        output = result.output
    return output, len(history)


async def _drain(ctx: RunContext[Any], events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


def make_scenario(turns: int = TURNS, *, stream: bool = False) -> Any:
    """The workload as a ``Scenario`` record, for in-process benchmarks."""
    from replay.scenario import Scenario

    async def bench_run(run: Run) -> Any:
        output, length = await conversation(turns, stream=stream)
        run.observe("final_history", length)
        return output

    name = f"bench/realistic_{turns}" + ("_streamed" if stream else "")
    return Scenario(id=name, func=bench_run, path=None, doc="benchmark workload", source_hash="bench")


if __name__ != "__main__":  # a scenario file too; the plain baseline imports nothing of harness-replay
    from replay import Run, scenario

    @scenario("bench/realistic")
    async def realistic(run: Run) -> Any:
        """The benchmark conversation (REPLAY_BENCH_TURNS turns, default 200)."""
        output, length = await conversation(TURNS)
        run.observe("final_history", length)
        return output


if __name__ == "__main__":  # the plain baseline: the same conversation, nothing recorded
    out, length = asyncio.run(conversation(TURNS))
    print(f"{TURNS} turns, final history {length} messages, last answer {len(out.split())} words")

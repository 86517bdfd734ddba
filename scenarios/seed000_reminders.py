"""Seed 000: LLMReminder inside SystemReminders over a 20-tool-call run.

Rebuilds the probe's ``reminders(mode)``: the main model calls ``tick`` 20 times (fixed
tool_call_ids ``tick-1`` .. ``tick-20``) and then answers "complete"; an ``LLMReminder``
with a fake generator ("KEEP_PLAN_4") is evaluated on every request (default), only on
every tenth run step (wrapper), or not at all (none). The legacy variant passes
``interval=1`` when ``LLMReminder`` still accepts it and is otherwise the default case.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import SystemReminders
from pydantic_ai_harness.system_reminders import LLMReminder

from replay import Run, scenario

TICKS = 20


def _generate(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("KEEP_PLAN_4")])


async def _reminders(run: Run, mode: str) -> str:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Derived from the messages, not a counter: tool returns seen so far decide the next call.
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done < TICKS:
            return ModelResponse(parts=[ToolCallPart("tick", {}, tool_call_id=f"tick-{done + 1}")])
        return ModelResponse(parts=[TextPart("complete")])

    kwargs: dict[str, Any] = {"model": FunctionModel(_generate)}
    interval_supported = "interval" in inspect.signature(LLMReminder).parameters
    if interval_supported and mode in ("legacy", "wrapper"):
        kwargs["interval"] = 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reminder = LLMReminder(**kwargs)
        if mode == "none":
            capabilities = []
        elif mode == "wrapper":

            async def gate(ctx: RunContext[None]) -> Any:
                return await reminder(ctx) if ctx.run_step % 10 == 0 else None

            capabilities = [SystemReminders(dynamic_reminders=[gate])]
        else:
            capabilities = [SystemReminders(dynamic_reminders=[reminder])]

        agent = Agent(FunctionModel(answer), capabilities=capabilities)

        @agent.tool_plain
        def tick() -> str:
            return "tick completed"

        result = await agent.run(f"Use tick {TICKS} times then finish.")

    if mode == "legacy":
        run.observe("interval_supported", interval_supported)
        run.observe("interval_attribute", getattr(reminder, "interval", None))
    run.observe("warning_types", sorted({type(w.message).__name__ for w in caught}))
    run.observe("history_messages", len(result.all_messages()))
    run.expect("output", "complete")
    run.observe("output", result.output)
    return result.output


@scenario("seed000/reminders_default")
async def reminders_default(run: Run) -> str:
    """LLMReminder evaluated on every main request of a 21-request tool loop."""
    return await _reminders(run, "default")


@scenario("seed000/reminders_legacy")
async def reminders_legacy(run: Run) -> str:
    """LLMReminder(interval=1) where the argument exists; the default case where it does not."""
    return await _reminders(run, "legacy")


@scenario("seed000/reminders_wrapper")
async def reminders_wrapper(run: Run) -> str:
    """LLMReminder gated by a wrapper to every tenth run step."""
    return await _reminders(run, "wrapper")


@scenario("seed000/reminders_none")
async def reminders_none(run: Run) -> str:
    """Control: the same tool loop without SystemReminders."""
    return await _reminders(run, "none")

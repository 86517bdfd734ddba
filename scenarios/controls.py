"""Controls for the invariant checks: scenarios on which no check may report anything.

- ``controls/reminders_planning``: ``SystemReminders`` and ``Planning`` without any compaction. The
  reminder stays in the history but (request-scoped on 0.62) is sent with its own request only,
  and the plan is appended to each request without being kept: neither is a compaction, so
  ``compaction_grew_request`` must stay silent (it once reported 178 -> 216 tokens here).
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from replay import Run, scenario


@scenario("controls/reminders_planning")
async def reminders_planning(run: Run) -> str:
    """SystemReminders and Planning without any compaction: nothing may be called a compaction.

    The reminder fires on every request and stays in the history, but (request-scoped on 0.62)
    is sent with its own request only; Planning appends the plan to each request without
    keeping it. Neither is a compaction, so ``compaction_grew_request`` must stay silent.
    """
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai_harness import Planning, SystemReminders
    from pydantic_ai_harness.system_reminders import Reminder

    plan = [{"id": "p1", "content": "Count the ticks"}, {"id": "p2", "content": "Report the total"}]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        if done == 0:
            return ModelResponse(parts=[ToolCallPart("write_plan", {"items": plan}, tool_call_id="plan-1")])
        if done < 4:
            return ModelResponse(parts=[ToolCallPart("tick", {}, tool_call_id=f"tick-{done}")])
        return ModelResponse(parts=[TextPart(f"done after {done} tool calls")])

    agent = Agent(
        FunctionModel(answer),
        capabilities=[
            SystemReminders(reminders=[Reminder("Stay focused on the plan.", interval=1, tag=None)]),
            Planning(),
        ],
    )

    @agent.tool_plain
    def tick() -> str:
        return "tick completed"

    first = await agent.run("Tick three times, with a plan.")
    second = await agent.run("And once more?", message_history=first.all_messages())
    run.observe("history_messages", len(second.all_messages()))
    run.observe("output", second.output)
    return second.output

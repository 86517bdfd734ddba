"""Ported from pydantic-ai-harness tests/system_reminders/test_system_reminders.py.

The harness tests call ``wrap_model_request`` directly; here an agent makes the requests,
so the reminder cadence shows in what each main request carries.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.system_reminders import Reminder, SystemReminders

from replay import Run, scenario
from scenarios.harness_tests._common import tool_calls_then

TICKS = [("tick", {})] * 5


def _agent(cap: SystemReminders[None]) -> Agent[None, str]:
    agent = Agent(FunctionModel(tool_calls_then(TICKS)), capabilities=[cap])

    @agent.tool_plain
    async def tick() -> str:
        return "ticked"

    return agent


@scenario("harness_tests/system_reminders/interval_3_fires_on_third")
async def interval_3_fires_on_third(run: Run) -> str:
    """TestStaticCadence.test_interval_3_fires_on_third: a reminder every third request."""
    result = await _agent(SystemReminders(reminders=[Reminder("third", interval=3, tag=None)])).run("go")
    return result.output


@scenario("harness_tests/system_reminders/six_turn_matrix")
async def six_turn_matrix(run: Run) -> str:
    """TestStaticCadence.test_six_turn_matrix: two cadences (2 and 3) over six requests."""
    cap = SystemReminders(reminders=[Reminder("every 2", interval=2, tag=None), Reminder("every 3", interval=3, tag=None)])
    result = await _agent(cap).run("go")
    return result.output


@scenario("harness_tests/system_reminders/max_fires_caps")
async def max_fires_caps(run: Run) -> str:
    """TestMaxFires.test_caps_fires: a reminder with max_fires=2 fires on two requests only."""
    result = await _agent(SystemReminders(reminders=[Reminder("limited", max_fires=2, tag=None)])).run("go")
    return result.output


@scenario("harness_tests/system_reminders/static_and_dynamic_join")
async def static_and_dynamic_join(run: Run) -> str:
    """TestDynamicReminders.test_static_and_dynamic_join: static and dynamic texts joined in one reminder."""
    cap = SystemReminders(reminders=[Reminder("s", tag=None)], dynamic_reminders=[lambda ctx: "d"])
    result = await _agent(cap).run("go")
    return result.output

"""Seed 003: ``is_provider_valid`` calls a history with a dangling tool call valid when an id is reused.

``pydantic_ai_harness.step_persistence.is_provider_valid`` keeps open calls in a set keyed by
``tool_call_id``, so ``[call c1, call c1 (same id), return c1]`` passes, while pydantic-ai's own
pairing rule (``_dangling_tool_calls_by_response``) counts one dangling call: the first c1 can
never be answered. ``StepPersistence`` labels such a snapshot ``complete``.

The seed's probe, one scenario per history: the reused-id case and its three controls
(reused id with two returns, distinct ids with one return, distinct ids both returned). No model
is called. Each scenario observes what the probe printed — ``is_provider_valid`` (through
``run.judge``, which also hands the history to ``replay check``) and ``core_dangling_calls``
(pydantic-ai's private helper; ``null`` on slim releases without it, before 2.53) — and returns
both. ``replay check seed003`` flags the reused-id case only (``predicate_verdict``).

``step_persistence`` ships with every installable harness release here (0.52.0–0.62.0); on a
release without it this file fails to import, and only its own scenarios error.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai_harness.step_persistence import is_provider_valid

from replay import Run, scenario


def call(i: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool_name="add", args={}, tool_call_id=i)])


def ret(i: str) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(tool_name="add", content=1, tool_call_id=i)])


def core_dangling_calls(history: list[ModelMessage]) -> int | None:
    """pydantic-ai's own count (a private helper, as in the seed's probe); None where it does not exist."""
    import pydantic_ai.messages as messages

    helper = getattr(messages, "_dangling_tool_calls_by_response", None)
    if helper is None:
        return None
    return sum(len(v) for v in helper(history).values())


def probe(run: Run, history: list[ModelMessage]) -> dict[str, Any]:
    verdict = is_provider_valid(history)
    run.judge("is_provider_valid", verdict, history)
    dangling = core_dangling_calls(history)
    run.observe("core_dangling_calls", dangling)
    return {"core dangling calls": dangling, "is_provider_valid": verdict}


@scenario("seed003/reused_id_one_return")
async def reused_id_one_return(run: Run) -> dict[str, Any]:
    """[call c1, call c1, return c1]: one call is stranded by the reused id; the predicate says valid."""
    return probe(run, [call("c1"), call("c1"), ret("c1")])


@scenario("seed003/reused_id_two_returns")
async def reused_id_two_returns(run: Run) -> dict[str, Any]:
    """Control: [call c1, call c1, return c1, return c1]: still one dangling call; the predicate says invalid."""
    return probe(run, [call("c1"), call("c1"), ret("c1"), ret("c1")])


@scenario("seed003/distinct_ids_one_return")
async def distinct_ids_one_return(run: Run) -> dict[str, Any]:
    """Control: [call c1, call c2, return c1]: c2 dangles; both rules agree it is invalid."""
    return probe(run, [call("c1"), call("c2"), ret("c1")])


@scenario("seed003/distinct_ids_both_returned")
async def distinct_ids_both_returned(run: Run) -> dict[str, Any]:
    """Control: [call c1, call c2, return c1, return c2]: fully paired; both rules agree it is valid."""
    return probe(run, [call("c1"), call("c2"), ret("c1"), ret("c2")])

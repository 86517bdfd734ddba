"""Synthetic but realistically shaped cassettes for the load and diff benchmarks.

Messages are real pydantic-ai messages (dumped with ``ModelMessagesTypeAdapter``), and
requests re-send their history the way an agent with compaction does: the history grows
turn by turn until it is compacted to a summary plus the last few messages. Building a
10,000-request cassette by actually running an agent would take minutes; building it
here takes a second and gives the same shapes.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from replay.cassette import Cassette, CassetteBuilder, Exchange, Header

COMPACT_AT = 24
"""History length at which the synthetic conversation is compacted."""
KEEP = 4

_T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def _dump(message: Any) -> dict[str, Any]:
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def _turn(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One request/response pair: a tool call and its return, or a user prompt and text."""
    ts = _T0 + dt.timedelta(seconds=n)
    if n % 3:
        req = ModelRequest(
            parts=[ToolReturnPart("search", {"hits": [f"doc-{n}-{k}" for k in range(3)], "query": f"q{n}"},
                                  tool_call_id=f"call-{n}", timestamp=ts)]
        )
        resp = ModelResponse(
            parts=[ToolCallPart("search", {"query": f"q{n + 1}", "limit": 3}, tool_call_id=f"call-{n + 1}")],
            usage=RequestUsage(input_tokens=100 + n, output_tokens=12),
            model_name="function:answer",
            timestamp=ts,
        )
    else:
        req = ModelRequest(parts=[UserPromptPart(f"Step {n}: please continue with the plan and report.", timestamp=ts)])
        resp = ModelResponse(
            parts=[TextPart(f"Working on step {n}; results so far look consistent with the goal. " * 2)],
            usage=RequestUsage(input_tokens=100 + n, output_tokens=30),
            model_name="function:answer",
            timestamp=ts,
        )
    return _dump(req), _dump(resp)


def build(requests: int, *, seed_offset: int = 0) -> Cassette:
    """A cassette of ``requests`` main-agent requests (interned, as the recorder builds them)."""
    b = CassetteBuilder(Header(scenario_id="bench/synthetic", harness_version="0.62.0"))
    settings = b.blob({"temperature": 0.0, "max_tokens": 1024})
    params = b.blob(
        {
            "function_tools": [
                {"name": "search", "description": "Search the docs.", "parameters_json_schema": {
                    "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["query"]}},
            ],
            "output_mode": "text",
            "allow_text_output": True,
        }
    )
    history: list[int] = []
    for n in range(requests):
        req, resp = _turn(n + seed_offset)
        if len(history) >= COMPACT_AT:
            summary = b.message(_dump(ModelRequest(parts=[UserPromptPart(f"Summary of turns up to {n}.")])))
            history = [summary, *history[-KEEP:]]
        history.append(b.message(req))
        ex = Exchange(
            seq=n, role="main", index=n, kind="request", model_name="function:answer", model_system="function",
            messages=list(history), settings=settings, parameters=params, response=b.message(resp), estimate=50 * len(history),
        )
        b.cassette.exchanges.append(ex)
        history.append(ex.response)  # type: ignore[arg-type]
    return b.cassette


def expanded(cassette: Cassette, limit: int | None = None) -> list[dict[str, Any]]:
    """Each request stored whole (first ``limit`` only), as a naive (vcrpy-style) cassette stores it."""
    out = []
    for ex in cassette.exchanges[:limit]:
        out.append(
            {
                "request": {
                    "role": ex.role,
                    "kind": ex.kind,
                    "model": ex.model_name,
                    "messages": copy.deepcopy(cassette.expand(ex.messages)),
                    "settings": cassette.blob(ex.settings),
                    "parameters": cassette.blob(ex.parameters),
                },
                "response": copy.deepcopy(cassette.messages[ex.response]) if ex.response is not None else None,
            }
        )
    return out

"""Responders shared by the ported harness tests (a leading ``_``: not a scenario file).

Async everywhere: a sync FunctionModel runs in a worker thread, and a background
capability's verdict would then race the main agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo

Responder = Callable[[list[ModelMessage], AgentInfo], Awaitable[ModelResponse]]


def returns(messages: Sequence[ModelMessage]) -> list[str]:
    """Every tool return and retry prompt the history holds, as text, in order."""
    return [
        str(getattr(p, "content", ""))
        for m in messages
        for p in m.parts
        if p.part_kind in ("tool-return", "retry-prompt")
    ]


def tool_calls_then(calls: Sequence[tuple[str, dict[str, object]]], final: str = "done") -> Responder:
    """A main model that makes ``calls`` one per request (fixed ids), then answers ``final``."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(1 for m in messages for p in m.parts if p.part_kind == "tool-call")
        if made < len(calls):
            name, args = calls[made]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{made + 1}")])
        return ModelResponse(parts=[TextPart(final)])

    return respond


def text(reply: str) -> Responder:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(reply)])

    return respond


def verdict(answer_for: Callable[[str], str], field: str = "response") -> Responder:
    """A judge/reviewer model: calls its output tool with ``answer_for(everything it was sent)``."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
        tool = info.output_tools[0]
        return ModelResponse(parts=[ToolCallPart(tool.name, {field: answer_for(seen)}, tool_call_id="verdict")])

    return respond

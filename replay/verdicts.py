"""Predicate verdicts checked against the tool's own rules.

A library predicate such as ``pydantic_ai_harness.step_persistence.is_provider_valid`` says
something about a message history that no model ever sees: ``StepPersistence`` labels a
snapshot ``complete`` with it. A wrong verdict stays invisible, because pydantic-ai repairs
the pairing before every request, so no sent request shows the problem. ``run.judge(name,
verdict, messages)`` records the verdict with the history; the ``predicate_verdict`` check
judges the same history by the rule this tool already applies to sent requests and reports
a disagreement with both verdicts and the evidence (seed 003: ``is_provider_valid True, but
1 tool call (add, c1) has no result``).

A rule is a function from the history's JSON messages to a :class:`Judgement`, registered
under the predicate's name with :func:`rule`; a verdict for a predicate without a rule is
still observed (and compared across versions) but not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .cassette import Cassette
from .invariants import Violation, register
from .invariants._tool_calls import dangling_calls

Message = dict[str, Any]


@dataclass(frozen=True)
class Judgement:
    """The tool's own verdict about a history, with what makes it so."""

    valid: bool
    reasons: list[str] = field(default_factory=list)
    """Why the history fails the rule, one phrase each (empty when it passes)."""
    evidence: dict[str, Any] = field(default_factory=dict)
    passes: str = ""
    """What the rule checked, said when the history passes (for a predicate that says it fails)."""


Rule = Callable[[list[Message]], Judgement]
_RULES: dict[str, Rule] = {}


def rule(predicate: str) -> Callable[[Rule], Rule]:
    """Register the tool's rule for ``predicate`` (matched by full dotted name or its last component)."""

    def decorate(fn: Rule) -> Rule:
        _RULES[predicate] = fn
        return fn

    return decorate


def rule_for(predicate: str) -> Rule | None:
    return _RULES.get(predicate) or _RULES.get(predicate.rsplit(".", 1)[-1])


def _is_result(message: Message, part: dict[str, Any]) -> bool:
    kind = part.get("part_kind")
    return message.get("kind") == "request" and (
        kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None)
    )


def orphaned_results(messages: list[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Tool results whose id no earlier response called, as ``(message index, part)``.

    pydantic-ai's ``_drop_orphaned_tool_results`` rule (slim 2.62): providers reject a result
    without a call, so pydantic-ai removes these before sending.
    """
    seen: set[Any] = set()
    out: list[tuple[int, dict[str, Any]]] = []
    for index, message in enumerate(messages):
        for part in message.get("parts", []):
            if message.get("kind") == "response" and part.get("part_kind") == "tool-call":
                seen.add(part.get("tool_call_id"))
            elif _is_result(message, part) and part.get("tool_call_id") not in seen:
                out.append((index, part))
    return out


def answered_again(messages: list[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Tool results whose id was called before, but with no call left open to answer, as ``(message
    index, part)``: a second result for an answered call (a duplicate).

    pydantic-ai's ordered walk (``_dangling_tool_calls_by_response``, slim 2.62) lets such an
    out-of-place result answer nothing, and neither it nor ``_drop_orphaned_tool_results`` (which only
    drops results whose id was never called) removes it: it is sent as it stands, a result no open call
    asked for, which providers reject (Anthropic's ``tool_result`` must answer a ``tool_use`` of the
    message before). ``is_provider_valid`` fails it on purpose ("no orphans, duplicates, or out-of-order
    returns").
    """
    from .invariants._messages import _hashable

    pending: dict[Any, list[int]] = {}
    out: list[tuple[int, dict[str, Any]]] = []
    for index, message in enumerate(messages):
        for part in message.get("parts", []):
            call_id = _hashable(part.get("tool_call_id"))
            if message.get("kind") == "response" and part.get("part_kind") == "tool-call":
                calls = pending.setdefault(call_id, [])
                if calls and calls[-1] != index:
                    calls.clear()  # a later response reusing the id strands the earlier calls (dangling)
                calls.append(index)
            elif _is_result(message, part):
                waiting = pending.get(call_id)
                if waiting:
                    waiting.pop(0)
                elif waiting is not None:  # called before, all answered (a never-called id is an orphan)
                    out.append((index, part))
    return out


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _names(found: list[tuple[int, dict[str, Any]]]) -> str:
    return "; ".join(f"{p.get('tool_name')}, {p.get('tool_call_id')}" for _, p in found)


def _reused_later(messages: list[Message], index: int, call_id: Any) -> int | None:
    """The first later response that calls ``call_id`` again (which strands the call at ``index``)."""
    for later in range(index + 1, len(messages)):
        m = messages[later]
        if m.get("kind") == "response" and any(
            p.get("part_kind") == "tool-call" and p.get("tool_call_id") == call_id for p in m.get("parts", [])
        ):
            return later
    return None


@rule("is_provider_valid")
def provider_valid(messages: list[Message]) -> Judgement:
    """Sendable as it stands: no tool call without its result (``dangling_tool_call``), no result without its
    call (orphaned), nor one for a call already answered (:func:`answered_again`)."""
    dangling = dangling_calls(messages)
    orphans = orphaned_results(messages)
    again = answered_again(messages)
    reasons = []
    if dangling:
        why = []
        for index, part in dangling:
            reuse = _reused_later(messages, index, part.get("tool_call_id"))
            if reuse is not None:
                why.append(f"message {index}'s call is shadowed by message {reuse} reusing id {part.get('tool_call_id')}")
        verb = "has" if len(dangling) == 1 else "have"
        text = f"{_count(len(dangling), 'tool call', 'tool calls')} ({_names(dangling)}) {verb} no result"
        reasons.append(text + (f" ({'; '.join(why)})" if why else ""))
    if orphans:
        verb = "answers" if len(orphans) == 1 else "answer"
        reasons.append(f"{_count(len(orphans), 'tool result', 'tool results')} ({_names(orphans)}) {verb} no earlier call")
    if again:
        verb = "answers" if len(again) == 1 else "answer"
        reasons.append(f"{_count(len(again), 'tool result', 'tool results')} ({_names(again)}) {verb} a call already answered")
    return Judgement(
        valid=not reasons,
        reasons=reasons,
        evidence={
            "dangling": [{"tool_name": p.get("tool_name"), "tool_call_id": p.get("tool_call_id"), "message": i} for i, p in dangling],
            "orphaned": [{"tool_name": p.get("tool_name"), "tool_call_id": p.get("tool_call_id"), "message": i} for i, p in orphans],
            "answered_again": [{"tool_name": p.get("tool_name"), "tool_call_id": p.get("tool_call_id"), "message": i} for i, p in again],
        },
        passes="every tool call has a result and every result a call",
    )


@register("predicate_verdict")
def predicate_verdict(c: Cassette) -> Iterator[Violation]:
    """A predicate's recorded verdict (``run.judge``) that the tool's own rule contradicts."""
    ordinal: dict[str, int] = {}
    for h in c.histories:
        if h.predicate is None:
            continue
        index = ordinal[h.predicate] = ordinal.get(h.predicate, -1) + 1
        judge = rule_for(h.predicate)
        if judge is None:
            continue
        messages = c.expand(h.messages)
        own = judge(messages)
        base = {"predicate": h.predicate, "verdict": h.verdict, "tool_verdict": own.valid, "messages": len(messages)}
        if not isinstance(h.verdict, bool):
            yield Violation(
                "predicate_verdict",
                h.predicate,
                index,
                f"{h.predicate} returned {h.verdict!r}, not True or False",
                {**base, **own.evidence},
                identity=("predicate", "verdict"),
            )
            continue
        if h.verdict == own.valid:
            continue
        why = "; ".join(own.reasons) if own.reasons else own.passes
        yield Violation(
            "predicate_verdict",
            h.predicate,
            index,
            f"{h.predicate} {h.verdict}, but {why}",
            {**base, "reasons": own.reasons, **own.evidence},
            identity=("predicate", "verdict", "tool_verdict"),
        )

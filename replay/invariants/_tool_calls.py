"""``dangling_tool_call``: a request sending a tool call without its result (what providers
reject), by pydantic-ai's own pairing rule; ``replay.verdicts`` judges recorded predicate
verdicts by the same rule (seed 003).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from ..cassette import Cassette, Exchange
from . import Violation, register
from ._messages import Message, _hashable, _parts


def _dangling(messages: list[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Tool calls in ``messages`` that never get a result, as ``(message index, part)``.

    Mirrors pydantic-ai 2.62's ``messages._dangling_tool_calls_by_response`` (an ordered walk:
    a result answers the oldest open call with its id; a later response reusing an id
    strands the earlier calls). That helper is private and 2.54's differs for ids repeated
    within one response, so the rule is kept here, on dicts, to be the same whatever is installed.
    """
    return _dangling_in(enumerate(messages))


def _dangling_in(messages: Iterable[tuple[int, Message]]) -> list[tuple[int, dict[str, Any]]]:
    """:func:`_dangling` over ``(position, message)`` pairs, so messages without tool parts can be left out."""
    return _Calls().walk(messages).dangling()


Call = tuple[int, dict[str, Any]]


class _Calls:
    """The pairing walk of :func:`_dangling_in`, resumable: a request that re-sends the previous one's
    messages and adds some continues from the state the previous one ended in."""

    def __init__(self, open_calls: dict[Any, list[Call]] | None = None, stranded: list[Call] | None = None) -> None:
        self.open_calls: dict[Any, list[Call]] = {} if open_calls is None else open_calls
        """Calls still waiting for a result, by id in the order the ids were first called."""
        self.stranded: list[Call] = [] if stranded is None else stranded
        """Calls left without a result because a later response reused their id."""

    def copy(self) -> _Calls:
        return _Calls({k: list(v) for k, v in self.open_calls.items()}, list(self.stranded))

    def walk(self, messages: Iterable[tuple[int, Message]]) -> _Calls:
        open_calls, stranded = self.open_calls, self.stranded
        for index, message in messages:
            for part in _parts(message):
                kind = part.get("part_kind")
                call_id = _hashable(part.get("tool_call_id"))
                if message.get("kind") == "response" and kind == "tool-call":
                    pending = open_calls.setdefault(call_id, [])
                    if pending and pending[-1][0] != index:
                        stranded += pending
                        pending.clear()
                    pending.append((index, part))
                elif message.get("kind") == "request" and (
                    kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None)
                ):
                    answered = open_calls.get(call_id)
                    if answered:
                        answered.pop(0)  # an answered id stays (empty): its place orders the calls of one message
        return self

    def dangling(self) -> list[Call]:
        found = self.stranded + [call for calls in self.open_calls.values() for call in calls]
        return sorted(found, key=lambda d: d[0])


dangling_calls = _dangling
"""Public name of the pairing rule, for other rules built on it (``replay.verdicts``)."""


_TOOL_KINDS = frozenset({"tool-call", "tool-return", "retry-prompt"})


@register("dangling_tool_call")
def dangling_tool_call(c: Cassette) -> Iterator[Violation]:
    """A request sent with a tool call that has no result: providers reject such histories.

    pydantic-ai repairs these before sending, so one here means something rewrote the
    history afterwards (a compaction or history processor cutting between call and result).
    The exchange's own response is not part of what was sent, so its calls never count; only
    model requests are checked (a token count or a provider-side compaction of the same
    history would report the same calls twice).
    """
    for ex, found in _dangling_per_request(c):
        if not found:
            continue
        calls = [
            {"tool_name": p.get("tool_name"), "tool_call_id": p.get("tool_call_id"), "message": i} for i, p in found
        ]
        names = sorted(str(d["tool_name"]) for d in calls)
        yield Violation(
            "dangling_tool_call",
            ex.role,
            ex.index,
            f"{len(calls)} tool call(s) sent without a result: "
            + ", ".join(f"{d['tool_name']} ({d['tool_call_id']}, message {d['message']})" for d in calls),
            {"calls": calls, "tools": names},
            identity=("tools",),
            measure=dict(Counter(names)),
        )


def _dangling_per_request(c: Cassette) -> Iterator[tuple[Exchange, list[Call]]]:
    """:func:`_dangling_in` of every model request that sends a tool part, in exchange order.

    Linear in the requests' lengths: a request whose messages start with all of its role's
    previous request's continues that request's walk over the added messages only.
    """
    table = c.messages
    tools = {i for i, m in enumerate(table) if any(p.get("part_kind") in _TOOL_KINDS for p in _parts(m))}
    last: dict[str, tuple[list[int], _Calls]] = {}
    for ex in c.exchanges:
        if ex.kind not in ("request", "request_stream") or tools.isdisjoint(ex.messages):
            continue
        ids, start, calls = ex.messages, 0, _Calls()
        before = last.get(ex.role)
        if before is not None and len(before[0]) <= len(ids) and ids[: len(before[0])] == before[0]:
            start, calls = len(before[0]), before[1].copy()
        calls.walk((k, table[ids[k]]) for k in range(start, len(ids)) if ids[k] in tools)
        last[ex.role] = (ids, calls)
        yield ex, calls.dangling()



"""Histories that never reach a model, seen by the checks as requests sent where they were observed.

A probe that calls a capability directly (``compact()``) or builds a history by hand sends no
main request, so no invariant would ever look at what it produced. ``run.observe_messages``
stores such a history in the cassette; :func:`as_requests` turns each one into a request of
role ``observed:<name>`` placed after the model calls made before it, so every invariant runs
on it unchanged: ``dangling_tool_call`` on its messages, and — when the history it was made
from was given as ``source`` — ``content_lost``, ``compaction_grew_request`` and
``empty_summary`` as on a compacted main request (the source plays the run's starting history).

Histories recorded by ``run.judge`` are left out: they are the subject of a predicate's
verdict (see :mod:`replay.verdicts`), and a dangling call in them is what the predicate is
asked about, not a request anyone sent.
"""

from __future__ import annotations

from .cassette import AgentRunRecord, Cassette, Exchange

ROLE_PREFIX = "observed:"
ORIGIN = "replay.observe_messages"
"""What the role map says built an observed history's role: not a harness module, so a user role."""


def role_of(name: str) -> str:
    return f"{ROLE_PREFIX}{name}"


def as_requests(c: Cassette) -> Cassette:
    """``c`` with each observed history added as a request (and, with a source, an agent run); ``c`` is not changed."""
    observed = [h for h in c.histories if h.predicate is None]
    if not observed:
        return c
    runs = list(c.runs)
    roles = dict(c.header.roles)
    counts: dict[str, int] = {}
    inserted: list[tuple[int, Exchange]] = []
    for h in observed:
        role = role_of(h.name)
        index = counts[role] = counts.get(role, -1) + 1
        run = None
        if h.source:
            runs.append(AgentRunRecord(role=role, history=list(h.source), result=list(h.messages)))
            run = len(runs) - 1
        roles.setdefault(role, ORIGIN)
        inserted.append((h.after, Exchange(seq=0, role=role, index=index, kind="request", messages=list(h.messages), run=run)))
    merged: list[Exchange] = []
    pending = iter(sorted(inserted, key=lambda x: x[0]))  # stable: same point keeps observation order
    nxt = next(pending, None)
    for position, ex in enumerate([*c.exchanges, None]):
        while nxt is not None and (ex is None or nxt[0] <= position):
            merged.append(nxt[1])
            nxt = next(pending, None)
        if ex is not None:
            merged.append(ex)
    exchanges = [ex.model_copy(update={"seq": seq}) for seq, ex in enumerate(merged)]
    header = c.header.model_copy(update={"roles": roles})
    return c.model_copy(update={"exchanges": exchanges, "runs": runs, "header": header})

"""Which agent runs of a role make one conversation, so concurrent runs can be told apart.

A scenario that runs one agent on several prompts at once (``asyncio.gather``), or a model
that delegates three tasks to one ``SubAgents`` delegate in one response, interleaves the
requests of several conversations under one role, in an order set by each answer's latency.
Numbered per role in arrival order, the same conversations recorded twice (or replayed)
pair up wrongly. A conversation is a chain of agent runs: a run continues the run whose
result its history is (``message_history=result.all_messages()``); otherwise it starts a
conversation of its own. Conversations are ranked per role by the start of their first run
(runs are listed in the order they started, before any model answers), turns by the chain.
Where a role's conversations do not interleave (:func:`interleaved_roles`) nothing here
applies and the role keeps its arrival order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .cassette import AgentRunRecord, Cassette, Exchange

Turn = tuple[int, int]
"""(rank of the conversation among its role's, run within the conversation from 0)."""


def links(runs: Sequence[AgentRunRecord]) -> tuple[list[Turn], list[int | None]]:
    """Each run's conversation and turn, and the run it continues (None for a conversation's first),
    from the runs' histories and results (message indices)."""
    out: list[Turn] = []
    sources: list[int | None] = []
    # Keyed by (role, length, last message) and confirmed by comparing the lists: no tuple of
    # every history is built (thousands of runs of forty messages in a long recording).
    ended_with: dict[tuple[str, int, int], int] = {}
    started: dict[str, int] = {}
    for i, run in enumerate(runs):
        history = run.history
        source = ended_with.get((run.role, len(history), history[-1])) if history else None
        if source is not None and runs[source].result == history:
            root, turn = out[source]
            out.append((root, turn + 1))
            sources.append(source)
        else:
            out.append((started.get(run.role, 0), 0))
            sources.append(None)
            started[run.role] = started.get(run.role, 0) + 1
        if run.result:
            ended_with[(run.role, len(run.result), run.result[-1])] = i
    return out, sources


def handoffs(runs: Sequence[AgentRunRecord], sources: Sequence[int | None]) -> set[int]:
    """Runs that continue no run of their own role but were given another role's result as their history."""
    ended: dict[tuple[int, int], list[int]] = {}
    out: set[int] = set()
    for i, run in enumerate(runs):
        history = run.history
        if history and sources[i] is None:
            for j in ended.get((len(history), history[-1]), ()):
                if runs[j].role != run.role and runs[j].result == history:
                    out.add(i)
                    break
        if run.result:
            ended.setdefault((len(run.result), run.result[-1]), []).append(i)
    return out


def turns(runs: Sequence[AgentRunRecord]) -> list[Turn]:
    """Each run's conversation and turn (see :func:`links`)."""
    return links(runs)[0]


def links_of(c: Cassette) -> tuple[list[Turn], list[int | None]]:
    """:func:`links` of ``c``'s runs, once per cassette in a comparison (``replay._facts``)."""
    from ._facts import current

    found: tuple[list[Turn], list[int | None]] = current().per("links", c, lambda: links(c.runs))
    return found


def turns_of(c: Cassette) -> list[Turn]:
    """:func:`turns` of ``c``'s runs, once per cassette in a comparison."""
    return links_of(c)[0]


def interleaved_roles(c: Cassette, of_runs: Sequence[Turn] | None = None) -> set[str]:
    """Roles whose conversations interleave: their requests alternate between conversations (run
    concurrently, or one turn each in turn), or a run made its first request before a run of the
    role that started earlier made its own (one request each, answered out of order)."""
    if of_runs is None:
        from ._facts import current

        found_roles: set[str] = current().per("interleaved", c, lambda: interleaved_roles(c, turns_of(c)))
        return found_roles
    found = of_runs
    last: dict[str, int] = {}
    done: dict[str, set[int]] = {}
    first_seen: dict[str, int] = {}
    seen_runs: set[int] = set()
    out: set[str] = set()
    for ex in c.exchanges:
        run = ex.run
        if ex.role in out or run is None or not 0 <= run < len(found):
            continue
        if run not in seen_runs:
            seen_runs.add(run)
            if run < first_seen.get(ex.role, -1):
                out.add(ex.role)
                continue
            first_seen[ex.role] = run
        root = found[run][0]
        previous = last.get(ex.role)
        if previous is not None and previous != root:
            seen = done.setdefault(ex.role, set())
            if root in seen:
                out.add(ex.role)
                continue
            seen.add(previous)
        last[ex.role] = root
    return out


def in_conversations(exchanges: Sequence[Exchange], of_runs: Sequence[Turn]) -> list[Exchange]:
    """One role's requests conversation by conversation, turn by turn (calls without a run last)."""
    n = len(of_runs)

    def key(ex: Exchange) -> tuple[int, int, int, int]:
        if ex.run is not None and 0 <= ex.run < n:
            root, turn = of_runs[ex.run]
            return (0, root, turn, ex.seq)
        return (1, 0, 0, ex.seq)

    return sorted(exchanges, key=key)


class Predecessors:
    """Which earlier request of a role each request continues.

    One agent run's requests follow each other; a run started with the history another run
    ended with continues that run's last request (:func:`links`). Agent runs of one role made
    concurrently (``asyncio.gather`` over prompts) are separate conversations: compared with
    whichever request of the role came just before, each would look like a history edited from
    the start. Where the run is not known (no run record, or a history no earlier run ended
    with) :meth:`previous` takes the role's previous request, as for a single conversation.
    """

    def __init__(self, c: Cassette) -> None:
        self.sources = links_of(c)[1]
        self.handed = handoffs(c.runs, self.sources)
        self.last_of_run: dict[int, Exchange] = {}

    def previous(self, ex: Exchange, role_previous: Exchange | None) -> Exchange | None:
        """The request ``ex`` continues; call for each request of a role in order (``role_previous``: the one before).

        A run handed another role's result (a writer given the planner's) starts its role's conversation
        with that history: it continues none of its role's requests, and compared with the role's previous
        one (another topic's) it read as a prompt-cache prefix broken on every handoff."""
        found = self.continued(ex)
        if found is None and ex.run is not None and ex.run in self.handed:
            return None
        return role_previous if found is None else found

    def continued(self, ex: Exchange) -> Exchange | None:
        """The request ``ex`` continues in its own conversation, or None for a conversation's first
        (the same bookkeeping as :meth:`previous`: call one of them once per request, in order)."""
        run = ex.run
        if run is None or not 0 <= run < len(self.sources):
            return None
        found = self.last_of_run.get(run)
        if found is None:
            source = self.sources[run]
            found = self.last_of_run.get(source) if source is not None else None
        self.last_of_run[run] = ex
        return found


def paired_ordinals(a: Cassette, b: Cassette) -> dict[tuple[str, int], int]:
    """``b``'s request ordinal → ``a``'s, for roles either side ran concurrently: the k-th request of
    the role listed conversation by conversation on one side is the k-th on the other (as the diff
    pairs them), so a violation is compared with the recording's in the same conversation."""
    roles = interleaved_roles(a) | interleaved_roles(b)
    if not roles:
        return {}
    by_a, by_b = a.by_role(), b.by_role()
    runs_a, runs_b = turns_of(a), turns_of(b)
    out: dict[tuple[str, int], int] = {}
    for role in roles:
        xs = in_conversations(by_a.get(role, []), runs_a)
        ys = in_conversations(by_b.get(role, []), runs_b)
        out.update(((role, y.index), x.index) for x, y in zip(xs, ys))
    return out

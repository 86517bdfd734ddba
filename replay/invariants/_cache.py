"""``cache_prefix_broken``: a request that re-sent less of the previous request than it held,
with no compaction between: the harness editing messages in place, paid in full instead of
from the provider's prompt cache. The prefix arithmetic lives in ``replay.wire.cache``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..cassette import Cassette
from . import Violation, register


@register("cache_prefix_broken")
def cache_prefix_broken(c: Cassette) -> Iterator[Violation]:
    """A request whose cacheable prefix shrank although no compaction happened: cached input paid in full.

    A history that only grows re-sends the previous request unchanged at its start, and a
    provider serves that part from its prompt cache. A harness that edits earlier messages
    (a reminder inserted, then taken out) breaks the prefix on every turn (``replay.wire.cache``).
    """
    from ..wire.cache import broken_prefixes

    broken: dict[str, list[tuple[int, int, int]]] = {}
    for cost, previous in broken_prefixes(c):
        broken.setdefault(cost.role, []).append((cost.index, cost.cached, previous))
    for role, items in broken.items():
        lost = sum(previous - cached for _, cached, previous in items)
        where = ", ".join(f"{role}[{i}] {cached:,}/{previous:,}" for i, cached, previous in items[:6])
        more = f", … {len(items) - 6} more" if len(items) > 6 else ""
        yield Violation(
            "cache_prefix_broken",
            role,
            None,
            f"{len(items)} request{'s' * (len(items) != 1)} re-sent less of the previous request than it held, "
            f"editing its messages in place, none dropped and no summarizer between (cacheable/previous tokens: {where}{more}); "
            f"{lost:,} token{'s' * (lost != 1)} that could have come from the prompt cache {'were' if lost != 1 else 'was'} sent in full",
            evidence={"requests": [i for i, _, _ in items], "cached": [x for _, x, _ in items],
                      "previous": [p for _, _, p in items], "uncached": lost},
            identity=("requests",),
            pair=(),
            # What a role pays: how often the cache is busted and how much input it costs. Per request,
            # a release that clears in batches (fewer, larger busts) read as worse than one busting every turn.
            measure={"busts": len(items), "uncached tokens": lost},
        )

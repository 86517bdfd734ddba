"""``compaction_grew_request``: a compaction that made the request it was meant to shrink
larger (seed 000: a 19-token request sent as 889 after its "summary").
"""

from __future__ import annotations

from collections.abc import Iterator

from ..cassette import Cassette, Exchange
from ..recorder import _static_header
from . import Violation, register
from ._history import _index, _labels, _Windows


@register("compaction_grew_request")
def compaction_grew_request(c: Cassette) -> Iterator[Violation]:
    """A compacted main request larger than the uncompacted conversation it replaced.

    Compaction exists to shrink requests; harness 0.62 accepted summaries longer than the
    history (seed 000: estimate 19 grew to 889). Only requests a compaction shaped count (see
    ``_Index.compacted``): a plan or reminder appended to a request grows it by design. One
    violation per role lists every grown request. Both sides are estimated by the installed
    harness, so the comparison is like for like even on a cassette recorded by another version
    (on the same version the sent side equals the recorded ``Exchange.estimate``).
    """
    ix = _index(c)
    windows = _Windows(c, ix)
    for role, views in ix.views().items():
        grown: list[tuple[int, int, int]] = []
        grown_exchanges: list[Exchange] = []
        for v in views:
            window = bool(windows.of(role, v))
            if not ix.compacted(v, window):
                continue
            sent = v.exchange.messages
            # what the request carried for itself alone (a reminder, a plan, a memory snapshot) the uncompacted
            # request would have carried too: the history it is measured against never has it
            alone = ix.request_only(sent)
            if ix.newer_slim and (v.logical.unloadable_to(v.length) or not ix.loadable(sent)):
                # a later slim's part kinds under an earlier one: both sides message by message, each by the
                # harness where it can load it and by hand where not — one ruler for the two sides
                before = ix.estimate(v.logical.ids[: v.length], per_message=True) + alone // 4
                after = ix.estimate(sent, per_message=True)
            else:
                before = v.logical.estimate(v.length, alone)
                after = ix.estimate(sent) if sent else (v.exchange.estimate or 0)
            if after > before:
                grown.append((v.exchange.index, before, after))
                grown_exchanges.append(v.exchange)
        if not grown:
            continue
        requests = [g[0] for g in grown]
        uncompacted = [g[1] for g in grown]
        after_list = [g[2] for g in grown]
        yield Violation(
            "compaction_grew_request",
            role,
            requests[0],
            f"compaction grew the request: {uncompacted[0]} tokens before, {_labels(after_list)} after "
            f"({', '.join(f'{role}[{i}]' for i in requests)}); uncompacted {_labels(uncompacted)}"
            + _ruler(c, grown_exchanges, after_list),
            {"before": uncompacted[0], "after": after_list, "uncompacted": uncompacted, "requests": requests},
            identity=("requests",),
            pair=(),
            measure={f"{role}[{i}]": after - before for i, before, after in grown},
        )


def _ruler(c: Cassette, exchanges: list[Exchange], after: list[int]) -> str:
    """Which estimator gave the figures, when they are not the ones the cassette recorded.

    Both sides are measured by the installed harness (like for like); a harness whose estimate
    counts other segments than the recording's (instructions, thinking) gives other figures for
    the same request than ``replay show`` and the seed report: say so, with the recorded ones.
    """
    installed = _static_header()["harness_version"]  # read once per process
    if c.header.harness_version in (None, installed):
        return ""
    recorded = [ex.estimate for ex in exchanges]
    if recorded == after or any(r is None for r in recorded):
        return ""
    return (f" (estimated by the installed harness {installed}; harness {c.header.harness_version} "
            f"recorded {_labels(r for r in recorded if r is not None)})")

"""Compare two cassettes: per role, request by request, then what it means.

Requests are aligned per role by ordinal. Identical requests are recognised by digest
and skipped; only the rest go through DeepDiff. The result is data (a :class:`Diff`);
the reporter decides how it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deepdiff import DeepDiff

from .cassette import Cassette
from .normaliser import NormalCassette, NormalRequest, Rules, digest, normalise
from .wire.cache import CacheChange, Price, RequestCost, Tokens, request_costs, total
from .wire.cache import compare as compare_cache
from .wire.compare import WireChange
from .wire.compare import compare as compare_wire

ChangeKind = Literal["changed", "added", "removed", "type"]


@dataclass(frozen=True)
class Change:
    path: str
    kind: ChangeKind
    old: Any = None
    new: Any = None


@dataclass
class RequestDiff:
    """One request that differs; ``status`` says whether it exists on both sides."""

    role: str
    index: int
    status: Literal["changed", "added", "removed"]
    changes: list[Change] = field(default_factory=list)
    estimate_a: int | None = None
    estimate_b: int | None = None
    messages_a: int | None = None
    messages_b: int | None = None
    lost: list[str] = field(default_factory=list)
    """Messages sent in A's request that B's request no longer carries (short labels)."""
    gained: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.role}[{self.index}]"


@dataclass(frozen=True)
class RoleCount:
    role: str
    a: int
    b: int


@dataclass(frozen=True)
class MainRequest:
    """Size of one main-agent request on both sides: the figures users track."""

    role: str
    index: int
    messages_a: int | None
    messages_b: int | None
    estimate_a: int | None
    estimate_b: int | None


@dataclass
class Diff:
    scenario_id: str | None
    a_label: str
    b_label: str
    roles: list[RoleCount]
    requests: list[RequestDiff]
    main_requests: list[MainRequest]
    outcome: tuple[dict[str, Any], dict[str, Any]] | None
    observations: list[Change]
    notes: list[str] = field(default_factory=list)
    """Divergences from the replay (exhausted roles, unused recorded requests, blocked network)."""
    new_violations: list[Any] = field(default_factory=list)
    versions: tuple[str, str] = ("", "")
    """``harness X, slim Y`` of each side, so a report says what it compared."""
    warnings: list[str] = field(default_factory=list)
    """Worth knowing, not a behavioural change (e.g. the scenario's source was edited since recording)."""
    wire: list[WireChange] = field(default_factory=list)
    """Differences in what provider models put on the wire (HTTP request bodies), beside the message level."""
    cache: list[CacheChange] = field(default_factory=list)
    """Requests whose cacheable prompt prefix moved (a consequence of message changes, not a change itself)."""
    tokens: tuple[Tokens, Tokens] | None = None
    """Input (cached and not) and output tokens of each side, from the same estimate."""
    cost: tuple[float | None, float | None] | None = None
    """Estimated dollars of each side, where ``[tool.replay] prices`` knows the models (see :meth:`price`)."""
    request_costs: tuple[list[RequestCost], list[RequestCost]] = field(default=([], []), repr=False)

    def price(self, prices: dict[str, Price]) -> None:
        """Turn both sides' token figures into dollars with a price table."""
        if prices:
            self.cost = (total(self.request_costs[0], prices), total(self.request_costs[1], prices))

    @property
    def changed(self) -> bool:
        return bool(
            self.requests
            or self.outcome
            or self.observations
            or self.notes
            or self.new_violations
            or self.wire
            or any(r.a != r.b for r in self.roles)
        )


def _path(role: str, index: int, parts: list[Any]) -> str:
    out = f"{role}[{index}]"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _changes(role: str, index: int, a: Any, b: Any) -> list[Change]:
    dd = DeepDiff(a, b, view="tree", verbose_level=2, threshold_to_diff_deeper=0)
    out: list[Change] = []
    kinds: dict[str, ChangeKind] = {
        "values_changed": "changed",
        "type_changes": "type",
        "dictionary_item_added": "added",
        "dictionary_item_removed": "removed",
        "iterable_item_added": "added",
        "iterable_item_removed": "removed",
    }
    for report, items in dd.tree.items():
        kind = kinds.get(report, "changed")
        for item in items:
            old = None if kind == "added" else item.t1
            new = None if kind == "removed" else item.t2
            out.append(Change(_path(role, index, item.path(output_format="list")), kind, old, new))
    out.sort(key=lambda c: c.path)
    return out


def message_label(message: dict[str, Any]) -> str:
    """A short human label for a message: its text, or its part kinds."""
    texts: list[str] = []
    for part in message.get("parts", []):
        content = part.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("content", c)) if isinstance(c, dict) else str(c) for c in content)
        if isinstance(content, str) and content.strip():
            texts.append(content.strip())
        elif part.get("tool_name"):
            texts.append(f"{part.get('part_kind', 'part')}:{part['tool_name']}")
    text = " ".join(" ".join(texts).split()) or message.get("kind", "message")
    return text if len(text) <= 40 else text[:37] + "..."


def _lost(a: NormalRequest, b: NormalRequest) -> tuple[list[str], list[str]]:
    a_msgs = a.body.get("messages", [])
    b_msgs = b.body.get("messages", [])
    a_keys = [digest(m) for m in a_msgs]
    b_keys = [digest(m) for m in b_msgs]
    b_set, a_set = set(b_keys), set(a_keys)
    lost = [message_label(m) for m, k in zip(a_msgs, a_keys) if k not in b_set]
    gained = [message_label(m) for m, k in zip(b_msgs, b_keys) if k not in a_set]
    return lost, gained


def diff(
    a: Cassette | NormalCassette,
    b: Cassette | NormalCassette,
    rules: Rules = Rules(),
    a_label: str = "recorded",
    b_label: str = "replayed",
) -> Diff:
    na = a if isinstance(a, NormalCassette) else normalise(a, rules)
    nb = b if isinstance(b, NormalCassette) else normalise(b, rules)
    roles = sorted(set(na.requests) | set(nb.requests))
    counts = [RoleCount(r, len(na.requests.get(r, [])), len(nb.requests.get(r, []))) for r in roles]
    user_roles = na.source.user_roles() | nb.source.user_roles()
    requests: list[RequestDiff] = []
    mains: list[MainRequest] = []
    ex_a = {(e.role, e.index): e for e in na.source.exchanges}
    ex_b = {(e.role, e.index): e for e in nb.source.exchanges}
    for role in roles:
        ra, rb = na.requests.get(role, []), nb.requests.get(role, [])
        for i in range(max(len(ra), len(rb))):
            qa = ra[i] if i < len(ra) else None
            qb = rb[i] if i < len(rb) else None
            ea, eb = ex_a.get((role, i)), ex_b.get((role, i))
            if role in user_roles and (qa is None or qa.kind != "count_tokens") and (qb is None or qb.kind != "count_tokens"):
                mains.append(
                    MainRequest(
                        role,
                        i,
                        len(qa.body.get("messages", [])) if qa else None,
                        len(qb.body.get("messages", [])) if qb else None,
                        ea.estimate if ea else None,
                        eb.estimate if eb else None,
                    )
                )
            if qa is not None and qb is not None and qa.digest == qb.digest:
                continue
            rd = RequestDiff(role, i, "changed" if qa and qb else ("removed" if qa else "added"))
            rd.estimate_a = ea.estimate if ea else None
            rd.estimate_b = eb.estimate if eb else None
            rd.messages_a = len(qa.body.get("messages", [])) if qa else None
            rd.messages_b = len(qb.body.get("messages", [])) if qb else None
            if qa and qb:
                rd.changes = [c for c in _changes(role, i, qa.body, qb.body) if not rules.ignores(c.path)]
                if not rd.changes:
                    continue
                rd.lost, rd.gained = _lost(qa, qb)
            requests.append(rd)
    outcome = (na.outcome, nb.outcome) if na.outcome != nb.outcome else None
    costs_a, costs_b = request_costs(na.source), request_costs(nb.source)
    observations = _changes("observations", 0, _obs(na), _obs(nb)) if _obs(na) != _obs(nb) else []
    observations = [
        Change(c.path.replace("observations[0]", "observations", 1), c.kind, c.old, c.new)
        for c in observations
        if not rules.ignores(c.path.replace("observations[0]", "observations", 1))
    ]
    return Diff(
        scenario_id=na.scenario_id or nb.scenario_id,
        a_label=a_label,
        b_label=b_label,
        roles=counts,
        requests=requests,
        main_requests=mains,
        outcome=outcome,
        observations=observations,
        versions=(_version(na.source), _version(nb.source)),
        warnings=_warnings(na.source, nb.source),
        wire=compare_wire(na.source, nb.source, rules),
        cache=compare_cache(costs_a, costs_b),
        tokens=(Tokens.of(costs_a), Tokens.of(costs_b)),
        request_costs=(costs_a, costs_b),
    )


def _version(c: Cassette) -> str:
    return f"harness {c.header.harness_version}, slim {c.header.slim_version}"


def _warnings(a: Cassette, b: Cassette) -> list[str]:
    ha, hb = a.header, b.header
    if ha.source_hash and hb.source_hash and ha.source_hash != hb.source_hash:
        return ["the scenario's source changed since the recording: a difference may come from the edit, not the harness"]
    return []


def _obs(n: NormalCassette) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for o in n.observations:
        out.setdefault(o["name"], []).append(o["value"])
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}

"""Compare two cassettes: per role, request by request, then message by message.

Requests are paired per role by ordinal; identical requests are recognised by digest and
skipped. Inside a request that differs, messages are aligned by content (``_align``): an
inserted message is one "inserted" entry, not a cascade of changed paths, and a summary that
changed wrapper is "rewrapped", not lost. Field diffs (DeepDiff) are computed only inside
messages and parts that changed, once per distinct pair (memoised by digest), so a change
repeated in every request costs one comparison. The result is data (a :class:`Diff`); the
reporter decides how it reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import _facts
from .._conversations import in_conversations, interleaved_roles, turns_of
from ..cassette import Cassette, Exchange, paused_gc
from ..normaliser import NormalCassette, NormalRequest, Rules, digest, env_paths, normalise, schema_for
from ..wire.cache import CacheChange, Price, RequestCost, Tokenizer, Tokens, equivalent_costs, request_costs, total
from ..wire.cache import compare as compare_cache
from ..wire.compare import WireChange
from ..wire.compare import compare as compare_wire
from ._align import PAIR_BUDGET, EntryKind, Memo, align, shape_of, text_of

ChangeKind = Literal["changed", "added", "removed", "type"]


@dataclass(frozen=True)
class Change:
    path: str
    kind: ChangeKind
    old: Any = None
    new: Any = None


@dataclass(frozen=True)
class Entry:
    """A message or part that is not in the same place with the same content on both sides.

    ``path`` is relative to the request (``messages[3]``, ``messages[0].parts[1→2]``: an arrow
    joins A's index to B's where they differ). ``detail`` names the wrappers of a rewrapped item.
    """

    kind: EntryKind
    path: str
    label: str
    detail: str = ""


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
    entries: list[Entry] = field(default_factory=list)
    """Messages and parts removed, inserted, moved, rewrapped or changed (aligned by content)."""
    detailed: bool = True
    """False past the diff's :data:`DETAIL_BOUND`: known to differ (its digests do), details not computed."""
    last: str | None = None
    """For a request only one side made: its last message's label (the turn an edited scenario added or dropped)."""

    @property
    def label(self) -> str:
        return f"{self.role}[{self.index}]"

    @property
    def lost(self) -> list[str]:
        """What A's request carried and B's no longer does: removed messages and parts only
        (a moved or rewrapped one is still there)."""
        return [e.label for e in self.entries if e.kind == "removed"]

    @property
    def gained(self) -> list[str]:
        return [e.label for e in self.entries if e.kind == "inserted"]


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
    violations: list[Any] = field(default_factory=list)
    """The replay's own violations graded against the recording's (``replay.invariants.Compared``)."""
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
    paired: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)
    """A's call (role, index) → B's index where the two differ: a role's concurrent conversations are
    paired by conversation and turn (each side its own ordinal). A call missing here has one index on
    both sides."""

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


_DIGITS = re.compile(r"(\d+)")


def natural_key(path: str) -> list[Any]:
    """Sort key that puts ``messages[2]`` before ``messages[10]``."""
    return [int(t) if t.isdigit() else t for t in _DIGITS.split(path)]


def _index(a: int | None, b: int | None) -> str:
    if a is None or b is None or a == b:
        return f"[{a if b is None else b}]"
    return f"[{a}→{b}]"


def _join(prefix: str, parts: list[Any]) -> str:
    out = prefix
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}" if out else str(p)
    return out


_KINDS: dict[str, ChangeKind] = {
    "values_changed": "changed",
    "type_changes": "type",
    "dictionary_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_added": "added",
    "iterable_item_removed": "removed",
}


FIELD_DIFF_NODES = 2_000
"""Values (containers and scalars) two sides may hold together for DeepDiff to pair them field by field.

DeepDiff pairs list items one by one and through difflib: two 500 x 500 grids of numbers in an
observation (a 565 KB cassette) cost 40 s of CPU and 2.3 GB. Past the bound a mapping is compared
key by key and anything else is one change of the whole value (shown around its first difference)."""


def _nodes(value: Any, limit: int) -> int:
    """How many values ``value`` holds, counting no further than ``limit``."""
    count, todo = 0, [value]
    while todo and count <= limit:
        item = todo.pop()
        count += 1
        if type(item) is dict:
            todo.extend(item.values())
        elif type(item) is list:
            todo.extend(item)
    return count


def _changes(prefix: str, a: Any, b: Any) -> list[Change]:
    """Field diffs of two values, paths under ``prefix``."""
    if same_value(a, b):
        return []
    if _nodes(a, FIELD_DIFF_NODES) + _nodes(b, FIELD_DIFF_NODES) > FIELD_DIFF_NODES:
        if type(a) is dict and type(b) is dict:
            out: list[Change] = []
            for key in [*a, *(k for k in b if k not in a)]:
                where = _join(prefix, [key])
                if key not in b:
                    out.append(Change(where, "removed", a[key], None))
                elif key not in a:
                    out.append(Change(where, "added", None, b[key]))
                else:
                    out += _changes(where, a[key], b[key])
            return out
        return [Change(prefix, "changed" if type(a) is type(b) else "type", a, b)]
    one = _one_text_change(prefix, a, b)
    if one is not None:
        return [one]
    from deepdiff import DeepDiff  # imported when something differs: an all-same diff never pays for it

    # ignore_private_variables: DeepDiff's default leaves out every dict key that starts with ``__``, so a
    # tool's ``{"__typename": "User"}`` that became ``"Admin"`` was no change, and the request read ``same``.
    dd = DeepDiff(a, b, view="tree", verbose_level=2, threshold_to_diff_deeper=0, ignore_private_variables=False)
    out = []
    for report, items in dd.tree.items():
        kind = _KINDS.get(report, "changed")
        for item in items:
            old = None if kind == "added" else item.t1
            new = None if kind == "removed" else item.t2
            out.append(Change(_join(prefix, item.path(output_format="list")), kind, old, new))
    if not out:  # values that differ (``same_value``) in a way DeepDiff does not report: the whole value changed
        out.append(Change(prefix, "changed" if type(a) is type(b) else "type", a, b))
    return out


def _one_text_change(prefix: str, a: Any, b: Any) -> Change | None:
    """What DeepDiff reports for two maps that differ in one text alone, without asking it, or None.

    The common change of a rerun (an answer edited: one ``content`` of one part) took DeepDiff a
    millisecond each. Only the shape whose report is certain is answered here: maps of the same
    text keys, none of them private to DeepDiff (``__`` ahead: it leaves those out), that differ
    (``same_value``) under exactly one key, or lists of the same length that differ at one
    position, in two maps there (such a list DeepDiff pairs item by item), followed down to two
    texts, which DeepDiff reports as one ``values_changed`` at that path. Anything else is left
    to DeepDiff.
    """
    path: list[Any] = []
    while True:
        differing: Any = None
        if type(a) is list and type(b) is list and len(a) == len(b):
            # DeepDiff pairs a list holding maps item by item, by position (not through difflib)
            for i, (x, y) in enumerate(zip(a, b)):
                if not same_value(x, y):
                    if differing is not None or type(x) is not dict or type(y) is not dict:
                        return None
                    differing = i
        elif type(a) is dict and type(b) is dict and a.keys() == b.keys():
            for key, value in a.items():
                if type(key) is not str or key[:2] == "__":
                    return None
                if not same_value(value, b[key]):
                    if differing is not None:
                        return None
                    differing = key
        else:
            return None
        if differing is None:
            return None
        path.append(differing)
        a, b = a[differing], b[differing]
        if type(a) is str and type(b) is str:
            return Change(_join(prefix, path), "changed", a, b)


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
            if content is not None and not isinstance(content, str) and _nodes(content, 64) <= 64:
                # a tool's value that is no text (5, {"total": 6}): without it a tool edited to return 6
                # instead of 5 read `- removed …: tool-return:add` and `+ inserted …: tool-return:add`
                texts.append(json.dumps(content, sort_keys=True, default=str))
    text = " ".join(" ".join(texts).split()) or message.get("kind", "message")
    return text if len(text) <= 40 else text[:37] + "..."


def _part_label(part: Any) -> str:
    return message_label({"parts": [part]}) if isinstance(part, dict) else _short_text(part)


def _short_text(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= 40 else text[:37] + "..."


Pair = tuple[list[Entry], list[Change]]
"""Entries and field changes of one aligned pair, paths relative to the pair."""


DETAIL_BOUND = 200_000
"""Entries and field changes one diff computes before it only lists the further requests that differ:
a crafted cassette of 3,500 requests, each re-sending 1,000 changed messages, made 7 M entries (a
minute to build, print and scrub). A real 10,000-request diff makes a few thousand."""


class _Differ:
    """Compares aligned items, memoising every distinct (digest A, digest B) pair."""

    def __init__(self) -> None:
        self._messages: dict[tuple[bytes, bytes], Pair] = {}
        self._rest: dict[tuple[bytes, bytes], list[Change]] = {}
        self._memo = Memo()
        self._alignments: dict[bytes, list[Any]] = {}
        """Pairings per (history A, history B): a request that re-sends what an earlier one sent on both sides
        is aligned once (the common case: only the newest messages differ from request to request)."""

    @property
    def bounded(self) -> bool:
        """Whether the alignment work bound was reached (``Memo``): some pairs were not searched for."""
        return self._memo.exhausted

    def message_pair(self, a: dict[str, Any], b: dict[str, Any], key: tuple[bytes, bytes]) -> Pair:
        found = self._messages.get(key)
        if found is None:
            found = self._messages[key] = self._message_pair(a, b)
        return found

    def _message_pair(self, a: dict[str, Any], b: dict[str, Any]) -> Pair:
        pa, pb = a.get("parts"), b.get("parts")
        if not isinstance(pa, list) or not isinstance(pb, list):
            return [], _changes("", a, b)
        changes = _changes("", {k: v for k, v in a.items() if k != "parts"}, {k: v for k, v in b.items() if k != "parts"})
        entries: list[Entry] = []
        for p in align(pa, pb, [digest(x) for x in pa], [digest(x) for x in pb], self._memo):
            where = "parts" + _index(p.a, p.b)
            if p.kind == "changed":
                assert p.a is not None and p.b is not None
                changes += _changes(where, pa[p.a], pb[p.b])
            else:
                entries.append(_entry(p.kind, where, pa, pb, p.a, p.b, _part_label))
        return entries, changes

    def request(self, role: str, index: int, qa: NormalRequest, qb: NormalRequest, na: NormalCassette,
                nb: NormalCassette, rules: Rules) -> tuple[list[Entry], list[Change]]:
        prefix = f"{role}[{index}]"
        ma, mb = qa.body.get("messages", []), qb.body.get("messages", [])
        ka, kb = [na.message_digests[i] for i in qa.message_ids], [nb.message_digests[i] for i in qb.message_ids]
        entries: list[Entry] = []
        changes: list[Change] = []
        history = hashlib.blake2b(b"".join(ka) + b"|" + b"".join(kb), digest_size=16).digest()
        pairings = self._alignments.get(history)
        if pairings is None:
            pairings = self._alignments[history] = align(ma, mb, ka, kb, self._memo)
        refs: dict[int, tuple[int, int | None]] = {}
        """Entry position → (message, part or None) on its own side, for removed and inserted entries."""
        for p in pairings:
            where = "messages" + _index(p.a, p.b)
            if p.kind == "changed":
                assert p.a is not None and p.b is not None
                sub_entries, sub_changes = self.message_pair(ma[p.a], mb[p.b], (ka[p.a], kb[p.b]))
                entries.append(Entry("changed", where, message_label(ma[p.a])))
                for e in sub_entries:
                    if e.kind in ("removed", "inserted"):
                        refs[len(entries)] = (p.a if e.kind == "removed" else p.b, int(e.path[6:-1]))
                    entries.append(Entry(e.kind, f"{where}.{e.path}", e.label, e.detail))
                changes += [Change(f"{prefix}.{where}{_dot(c.path)}", c.kind, c.old, c.new) for c in sub_changes]
            else:
                if p.kind in ("removed", "inserted"):
                    refs[len(entries)] = (p.a if p.kind == "removed" else p.b, None)  # type: ignore[assignment]
                entries.append(_entry(p.kind, where, ma, mb, p.a, p.b, message_label))
        if refs:
            entries = _moved_across_messages(entries, refs, ma, mb)
        rest_a = {k: v for k, v in qa.body.items() if k != "messages"}
        rest_b = {k: v for k, v in qb.body.items() if k != "messages"}
        if not same_value(rest_a, rest_b):  # by type too: ``!=`` has ``0 == False`` (a tool schema's default)
            key = (digest(rest_a), digest(rest_b))
            rest = self._rest.get(key)
            if rest is None:
                rest = self._rest[key] = _changes("", rest_a, rest_b)
            changes += [Change(f"{prefix}{_dot(c.path)}", c.kind, c.old, c.new) for c in rest]
        changes = [c for c in changes if not rules.ignores(c.path)]
        entries = [e for e in entries if not rules.ignores(f"{prefix}.{e.path}")]
        # A changed message whose every field diff was ignored is not worth an entry.
        touched = {c.path for c in changes}
        entries = [
            e for e in entries
            if e.kind != "changed" or any(t.startswith(f"{prefix}.{e.path}.") or t.startswith(f"{prefix}.{e.path}[")
                                          for t in touched)
            or any(o.path.startswith(e.path + ".") for o in entries if o is not e)
        ]
        changes.sort(key=lambda c: natural_key(c.path))
        return entries, changes


def _parts_of(message: Any) -> list[Any]:
    parts = message.get("parts") if isinstance(message, dict) else None
    return parts if isinstance(parts, list) else []


def _moved_across_messages(
    entries: list[Entry], refs: dict[int, tuple[int, int | None]], ma: list[Any], mb: list[Any]
) -> list[Entry]:
    """A part that left one message for another is moved, not removed from one and inserted in the other.

    Messages are aligned first and parts only inside a pair, so a prompt a sliding window merged
    into the message before it (``[U0], [A], [U2]`` → ``[U0, U2]``) came out as ``U2`` removed and
    inserted — and listed as lost although it is still sent. A removed message counts as moved only
    when every one of its parts is sent elsewhere; an inserted message is dropped once all of its parts
    came from A.
    """
    pool: dict[bytes, list[tuple[int, int, int]]] = {}  # part digest → (entry, message B, part B)
    for pos, (j, k) in refs.items():
        if entries[pos].kind != "inserted":
            continue
        parts = _parts_of(mb[j])
        for kk in range(len(parts)) if k is None else (k,):
            if kk < len(parts):
                pool.setdefault(digest(parts[kk]), []).append((pos, j, kk))
    if not pool:
        return entries
    replaced: dict[int, list[Entry]] = {}
    taken: dict[int, int] = {}  # inserted entry → parts of it moved
    for pos, (i, k) in refs.items():
        if entries[pos].kind != "removed":
            continue
        parts = _parts_of(ma[i])
        wanted = list(range(len(parts))) if k is None else [k] if k < len(parts) else []
        found: list[tuple[int, tuple[int, int, int]]] = []
        for kk in wanted:
            spots = pool.get(digest(parts[kk]))
            if not spots:
                break
            found.append((kk, spots.pop(0)))
        if not wanted or len(found) < len(wanted):
            for kk, spot in reversed(found):  # not all of it is sent elsewhere: still removed
                pool[digest(parts[kk])].insert(0, spot)
            continue
        replaced[pos] = [
            Entry("moved", f"messages{_index(i, j)}.parts{_index(kk, kb)}", _part_label(parts[kk])) for kk, (_, j, kb) in found
        ]
        for _, (ins, _, _) in found:
            taken[ins] = taken.get(ins, 0) + 1
    if not replaced:
        return entries
    out: list[Entry] = []
    for pos, e in enumerate(entries):
        if pos in replaced:
            out += replaced[pos]
        elif pos in taken:
            j, k = refs[pos]
            if k is None and taken[pos] < len(_parts_of(mb[j])):
                out.append(e)  # an inserted message that also brings parts of its own
        else:
            out.append(e)
    return out


def _dot(path: str) -> str:
    return path if not path or path.startswith("[") else "." + path


def _entry(kind: EntryKind, where: str, a: list[Any], b: list[Any], ia: int | None, ib: int | None,
           label: Any) -> Entry:
    item = a[ia] if ia is not None else b[ib] if ib is not None else None
    detail = ""
    if kind == "rewrapped" and ia is not None and ib is not None:
        detail = f"{shape_of(a[ia])} → {shape_of(b[ib])}"
        if len(text_of(b[ib])) < len(text_of(a[ia])):  # label the content, not the framing around it
            item = b[ib]
    return Entry(kind, where, str(label(item)), detail)


def diff(
    a: Cassette | NormalCassette,
    b: Cassette | NormalCassette,
    rules: Rules = Rules(),
    a_label: str = "recorded",
    b_label: str = "replayed",
    tokenizer: Tokenizer | None = None,
) -> Diff:
    """Compare two cassettes; ``tokenizer`` (``[tool.replay] tokenizer``) sizes the prompt-cache figures."""
    with paused_gc(), _facts.shared():
        return _diff(a, b, rules, a_label, b_label, tokenizer)


def _diff(
    a: Cassette | NormalCassette,
    b: Cassette | NormalCassette,
    rules: Rules,
    a_label: str,
    b_label: str,
    tokenizer: Tokenizer | None,
) -> Diff:
    # Each side strips the defaults its own version declares, plus the other side's for
    # fields its version never had (schema growth in either direction).
    ca = a.source if isinstance(a, NormalCassette) else a
    cb = b.source if isinstance(b, NormalCassette) else b
    if not isinstance(a, NormalCassette) and not isinstance(b, NormalCassette) and _facts.current().equivalent(ca, cb):
        return _diff_equivalent(ca, cb, rules, a_label, b_label, tokenizer)
    # Roles with concurrent conversations on either side are listed conversation by conversation on both.
    conversations = interleaved_roles(ca) | interleaved_roles(cb)
    paths = env_paths(ca, cb)  # both sides' environment folders, read alike on both
    na = a if isinstance(a, NormalCassette) else normalise(a, rules, schema_for(a, cb), conversations, paths)
    nb = b if isinstance(b, NormalCassette) else normalise(b, rules, schema_for(b, ca), conversations, paths)
    differ = _Differ()
    roles = sorted(set(na.requests) | set(nb.requests))
    counts = [RoleCount(r, len(na.requests.get(r, [])), len(nb.requests.get(r, []))) for r in roles]
    user_roles = na.source.user_roles() | nb.source.user_roles()
    requests: list[RequestDiff] = []
    mains: list[MainRequest] = []
    ex_a = {(e.role, e.index): e for e in na.source.exchanges}
    ex_b = {(e.role, e.index): e for e in nb.source.exchanges}
    paired: dict[tuple[str, int], int] = {}
    details = 0
    for role in roles:
        ra: list[NormalRequest] = na.requests.get(role, [])
        rb: Sequence[NormalRequest | None] = nb.requests.get(role, [])
        if conversations and role not in conversations:
            rb = _same_first(ra, nb.requests.get(role, []))
        for i in range(max(len(ra), len(rb))):
            qa = ra[i] if i < len(ra) else None
            qb = rb[i] if i < len(rb) else None
            if conversations:  # paired by conversation and turn, or by content: each side's own ordinal
                ea = ex_a.get((role, qa.index)) if qa else None
                eb = ex_b.get((role, qb.index)) if qb else None
                if qa and qb:
                    paired[(role, qa.index)] = qb.index
                i = qa.index if qa else qb.index  # type: ignore[union-attr]
            else:
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
            sent = (qa or qb).body.get("messages") if not (qa and qb) else None  # type: ignore[union-attr]
            if sent and isinstance(sent[-1], dict):
                rd.last = message_label(sent[-1])
            if qa and qb:
                if details >= DETAIL_BOUND:
                    rd.detailed = False
                else:
                    rd.entries, rd.changes = differ.request(role, i, qa, qb, na, nb, rules)
                    if not rd.changes and not rd.entries:
                        continue
                    details += len(rd.entries) + len(rd.changes)
            requests.append(rd)
    requests += _histories(na, nb, differ, rules)
    outcome = (na.outcome, nb.outcome) if not same_value(na.outcome, nb.outcome) else None
    costs_a, costs_b = request_costs(na.source, tokenizer), request_costs(nb.source, tokenizer)
    observations = _changes("observations", _obs(na), _obs(nb)) if not same_value(_obs(na), _obs(nb)) else []
    observations = sorted((c for c in observations if not rules.ignores(c.path)), key=lambda c: natural_key(c.path))
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
        warnings=_warnings(na.source, nb.source) + (
            [f"the alignment bound ({PAIR_BUDGET:,} similarity checks) was reached: some messages that changed "
             "are listed as removed and inserted instead of paired"] if differ.bounded else []
        ) + (
            [f"the detail bound ({DETAIL_BOUND:,} entries and changes) was reached: "
             f"{sum(not r.detailed for r in requests):,} more requests differ, their details left out"]
            if details >= DETAIL_BOUND and any(not r.detailed for r in requests) else []
        ),
        wire=compare_wire(na.source, nb.source, rules, paired=paired),
        cache=compare_cache(costs_a, costs_b, paired=paired),
        tokens=(Tokens.of(costs_a), Tokens.of(costs_b)),
        request_costs=(costs_a, costs_b),
        paired={key: j for key, j in paired.items() if key[1] != j},
    )


def _same_first(ra: list[NormalRequest], rb: list[NormalRequest]) -> list[NormalRequest | None]:
    """``rb`` reordered so that a request identical to one of ``ra`` stands at its position.

    In a recording with concurrent conversations, a capability's calls (a summarizer compacting
    one of them) come in an order set by latency and belong to no conversation of their own:
    the same calls made in another order are the same. What is left pairs in order.
    """
    spare: dict[bytes, list[int]] = {}
    for j, q in enumerate(rb):
        spare.setdefault(q.digest, []).append(j)
    placed: list[NormalRequest | None] = [None] * max(len(ra), len(rb))
    used = [False] * len(rb)
    for i, q in enumerate(ra):
        js = spare.get(q.digest)
        if js:
            j = js.pop(0)
            placed[i], used[j] = rb[j], True
    rest = iter([q for j, q in enumerate(rb) if not used[j]])
    return [q if q is not None else next(rest, None) for q in placed]  # None: no request of b there


def _diff_equivalent(
    ca: Cassette, cb: Cassette, rules: Rules, a_label: str, b_label: str, tokenizer: Tokenizer | None
) -> Diff:
    """:func:`_diff` of two cassettes that differ only in timestamps and run ids (``Facts.equivalent``).

    Both normalise to the same thing, so no request, history, outcome or observation differs:
    only the figures of each side are left to compute, from the exchanges (what ``_diff`` reads
    from the normalised requests: their kind and message count) and the shared estimates.
    """
    by_role: dict[str, list[Exchange]] = {}
    for ex in ca.exchanges:
        by_role.setdefault(ex.role, []).append(ex)
    roles = sorted(by_role)
    user_roles = ca.user_roles() | cb.user_roles()
    indexed_a = {(e.role, e.index): e for e in ca.exchanges}
    indexed_b = {(e.role, e.index): e for e in cb.exchanges}
    mains: list[MainRequest] = []
    conversations = interleaved_roles(ca)  # as _diff lists them (equivalent: the same on both sides)
    of_runs = turns_of(ca) if conversations else []
    for role in roles:
        if role not in user_roles:
            continue
        xs = in_conversations(by_role[role], of_runs) if role in conversations else by_role[role]
        for i, q in enumerate(xs):
            if q.kind == "count_tokens":
                continue
            at = q.index if conversations else i
            ea, eb = indexed_a.get((role, at)), indexed_b.get((role, at))
            mains.append(MainRequest(role, at, len(q.messages), len(q.messages),
                                     ea.estimate if ea else None, eb.estimate if eb else None))
    costs_a = request_costs(ca, tokenizer)
    costs_b = equivalent_costs(cb, ca, tokenizer)
    return Diff(
        scenario_id=ca.header.scenario_id or cb.header.scenario_id,
        a_label=a_label,
        b_label=b_label,
        roles=[RoleCount(r, len(by_role[r]), len(by_role[r])) for r in roles],
        requests=[],
        main_requests=mains,
        outcome=None,
        observations=[],
        versions=(_version(ca), _version(cb)),
        warnings=_warnings(ca, cb),
        wire=compare_wire(ca, cb, rules),
        cache=compare_cache(costs_a, costs_b),
        tokens=(Tokens.of(costs_a), Tokens.of(costs_b)),
        request_costs=(costs_a, costs_b),
    )


def _version(c: Cassette) -> str:
    return f"harness {c.header.harness_version}, slim {c.header.slim_version}"


def source_edited(a: Cassette, b: Cassette) -> bool:
    """Whether the scenario's own code (its decorated function) differs between the two recordings."""
    ha, hb = a.header, b.header
    return bool(ha.source_hash and hb.source_hash and ha.source_hash != hb.source_hash)


EDITED = "the scenario's source changed since the recording: a difference may come from the edit, not the harness"
EDITED_SAME = ("the scenario's source changed since the recording, what it sends did not: `replay record --force` "
               "updates the cassette")
"""The edit warning of a replay that is ``same`` (:func:`replay._pipeline.replay_scenario`): no difference to explain."""


def _warnings(a: Cassette, b: Cassette) -> list[str]:
    ia, ib = a.header.scenario_id, b.header.scenario_id
    if ia and ib and ia != ib:  # `diff x.cassette y.cassette` of two scenarios read "the scenario's source changed"
        return [f"the cassettes hold two different scenarios ({ia!r}, {ib!r}): not one scenario on two versions"]
    if source_edited(a, b):
        return [EDITED]
    return []


def same_value(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout: Python's ``==`` has ``True == 1`` and ``5 == 5.0``, so an
    outcome that became a float or an observation that became an int read as unchanged."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(same_value(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _obs(n: NormalCassette) -> dict[str, Any]:
    """Observations by name (histories are compared as requests: :func:`_histories`)."""
    out: dict[str, Any] = {}
    for o in n.observations:
        out.setdefault(o["name"], []).append(o["value"])
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def _history_requests(n: NormalCassette) -> dict[tuple[str, int], NormalRequest]:
    """Histories handed to the checks (``run.observe_messages``), as requests of role ``history:<name>``."""
    out: dict[tuple[str, int], NormalRequest] = {}
    for h, record in zip(n.histories, n.source.histories, strict=False):
        role = f"history:{h['name']}"
        index = sum(1 for r, _ in out if r == role)
        ids = list(record.messages)
        body = {"kind": "history", "messages": h["messages"]}
        out[(role, index)] = NormalRequest(role, index, "history", body, digest([n.message_digests[i] for i in ids]), ids)
    return out


def _histories(na: NormalCassette, nb: NormalCassette, differ: _Differ, rules: Rules) -> list[RequestDiff]:
    """Observed histories aligned message by message like requests: a prompt a compaction
    dropped is one removed entry, a summary that changed wrapper is rewrapped, not lost."""
    ha, hb = _history_requests(na), _history_requests(nb)
    out: list[RequestDiff] = []
    for key in sorted(set(ha) | set(hb), key=lambda k: (natural_key(k[0]), k[1])):
        qa, qb = ha.get(key), hb.get(key)
        if qa is not None and qb is not None and qa.digest == qb.digest:
            continue
        rd = RequestDiff(key[0], key[1], "changed" if qa and qb else ("removed" if qa else "added"))
        rd.messages_a = len(qa.message_ids) if qa else None
        rd.messages_b = len(qb.message_ids) if qb else None
        if qa and qb:
            rd.entries, rd.changes = differ.request(key[0], key[1], qa, qb, na, nb, rules)
            if not rd.changes and not rd.entries:
                continue
        out.append(rd)
    return out

"""Invariants over one cassette: properties every recording must have, whatever the version.

``replay check`` needs no second version: a cassette alone shows a compaction that grew the
request it was meant to shrink, messages that reached neither the summarizer nor the main
model, an empty summary that replaced real history, a tool call sent without its result,
or an observation that contradicts the scenario's own expectation. Each check is a plain
function ``Cassette -> Iterable[Violation]`` in a registry, so users can add their own.

Everything here works on the cassette's JSON message dicts (not pydantic-ai objects), so a
cassette recorded by another pydantic-ai version can be checked even when the installed one
cannot load its messages; only token estimates need loading, and they fall back to a
character count.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .cassette import AgentRunRecord, Cassette, Exchange, is_harness_module
from .differ import message_label
from .errors import ReplayUsageError
from .histories import as_requests
from .normaliser import Normaliser, digest
from .recorder import estimate, load_messages

Message = dict[str, Any]


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with the figures that show it."""

    invariant: str
    role: str
    index: int | None
    """Request ordinal within ``role`` (None when the violation is not about one request)."""
    message: str
    evidence: dict[str, Any] = field(default_factory=dict, hash=False)
    identity: tuple[str, ...] = ()
    """Evidence keys that identify the violation across versions (figures that merely change are left out)."""

    def describe(self) -> str:
        where = self.role if self.index is None else f"{self.role}[{self.index}]"
        return f"{self.invariant} {where}: {self.message}"

    def as_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "role": self.role,
            "index": self.index,
            "message": self.message,
            "evidence": self.evidence,
        }

    def key(self) -> tuple[Any, ...]:
        """What makes a replay's violation "the same" as the recording's: not its numbers."""
        return (self.invariant, self.role, self.index, tuple((k, _freeze(self.evidence.get(k))) for k in self.identity))


Check = Callable[[Cassette], Iterable[Violation]]
_REGISTRY: dict[str, Check] = {}


def register(name: str) -> Callable[[Check], Check]:
    """Add a check under ``name`` (re-registering a name replaces it, so modules can be re-imported)."""

    def decorate(check: Check) -> Check:
        _REGISTRY[name] = check
        return check

    return decorate


def checks() -> dict[str, Check]:
    return dict(_REGISTRY)


def run_checks(cassette: Cassette, only: Iterable[str] | None = None) -> list[Violation]:
    """Run the registered checks (or ``only`` these); a check that crashes is itself reported."""
    names = list(_REGISTRY) if only is None else list(only)
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        raise ReplayUsageError(f"unknown invariant {', '.join(unknown)} (known: {', '.join(sorted(_REGISTRY))})")
    cassette = as_requests(cassette)  # histories that never reached a model are checked as if sent
    out: list[Violation] = []
    for name in names:
        try:
            out.extend(_REGISTRY[name](cassette))
        except Exception as exc:  # one broken (user) check must not hide the others' findings
            problem = f"{type(exc).__name__}: {exc}"
            out.append(Violation(name, "check", None, f"check failed: {problem}", {"error": problem}))
    return out


def new_violations(recorded: Cassette, replayed: Cassette) -> list[Violation]:
    """Violations of the replay that the recording did not already have (compared by :meth:`Violation.key`).

    When the recording broke the same invariant at the same place, the replay's violation is
    reported with what is new in it (``evidence["new"]``: e.g. the extra messages lost), so a
    release that makes a known loss worse names exactly what it adds.
    """
    before = run_checks(recorded)
    known = {v.key() for v in before}
    where = {(v.invariant, v.role, v.index): v for v in before}
    out: list[Violation] = []
    for v in run_checks(replayed):
        if v.key() in known:
            continue
        old = where.get((v.invariant, v.role, v.index))
        extra = _extra(old, v) if old is not None else []
        if extra:
            v = replace(
                v,
                message=f"{v.message} (new since the recording: {', '.join(map(str, extra))})",
                evidence={**v.evidence, "new": extra},
            )
        out.append(v)
    return out


def _extra(old: Violation, new: Violation) -> list[Any]:
    """Items of list-valued identity evidence that the newer violation has and the older lacks."""
    extra: list[Any] = []
    for key in new.identity:
        a, b = old.evidence.get(key), new.evidence.get(key)
        if isinstance(a, list) and isinstance(b, list):
            extra += [x for x in b if x not in a]
    return extra


# --------------------------------------------------------------------------- message helpers


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _ws(text: str) -> str:
    return " ".join(text.split())


def _part_text(part: dict[str, Any]) -> str:
    """A part's text; kept user copies (0.62) hold a list of ``TextContent`` dicts instead of a string."""
    content = part.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        items = [c if isinstance(c, str) else c.get("content") if isinstance(c, dict) else None for c in content]
        return " ".join(i for i in items if isinstance(i, str))
    return ""


def _text(message: Message) -> str:
    return " ".join(_part_text(p) for p in message.get("parts", []))


def _part_key(part: dict[str, Any]) -> tuple[Any, ...]:
    kind = part.get("part_kind")
    if part.get("tool_call_id") is not None:
        return (kind, part.get("tool_name"), part.get("tool_call_id"))
    return (kind, _ws(_part_text(part)))


def _dropped(source: list[Message], sent: list[Message]) -> list[tuple[Any, ...]]:
    """Parts of ``source`` that ``sent`` no longer carries, counting repeats.

    Parts are matched whole first; text that was re-wrapped (a reminder's system prompt sent
    as ``<system>...</system>`` user text, a kept user copy as ``TextContent``) still counts
    as carried when it occurs, word-bounded, as often in the sent text. Tool parts match by id.
    """
    need = Counter(_part_key(p) for m in source for p in m.get("parts", []))
    short = need - Counter(_part_key(p) for m in sent for p in m.get("parts", []))
    if not short:
        return []
    haystack = "\n\0\n".join(_ws(_part_text(p)) for m in sent for p in m.get("parts", []))
    out: list[tuple[Any, ...]] = []
    for key in short:
        if len(key) == 3 or (key[1] and len(re.findall(_word(key[1]), haystack)) < need[key]):
            out.append(key)
    return out


def _compacted(source: list[Message], sent: list[Message]) -> bool:
    """Whether ``sent`` is a compacted form of ``source``: something dropped or a new compaction part.

    Additions alone (system reminders injecting parts) are not compaction.
    """
    if _dropped(source, sent):
        return True
    source_keys = {_part_key(p) for m in source for p in m.get("parts", [])}
    return any(
        p.get("part_kind") == "compaction" and _part_key(p) not in source_keys for m in sent for p in m.get("parts", [])
    )


def _estimate(messages: list[Message]) -> int:
    """The harness estimate of ``messages``; a chars/4 count if this pydantic-ai cannot load them."""
    try:
        found = estimate(load_messages(messages))
    except Exception:
        found = None
    return found if found is not None else sum(len(_text(m)) for m in messages) // 4


def _word(text: str) -> str:
    """A pattern matching ``text`` only as whole words, so ``U1`` is not found inside ``U10``."""
    return r"(?<!\w)" + re.escape(text) + r"(?!\w)"


def _found(text: str, haystack: str) -> bool:
    return re.search(_word(text), haystack) is not None


# --------------------------------------------------------------------------- the cassette's structure


def _is_compaction(c: Cassette, ex: Exchange) -> bool:
    """A call that produces a summary: a harness compaction agent's request, or a provider-side compaction."""
    if ex.kind == "compact_messages":
        return True
    origin = c.header.roles.get(ex.role, "")
    return "compaction" in (origin if is_harness_module(origin) else ex.role)


def _is_main_request(ex: Exchange, user_roles: set[str]) -> bool:
    return ex.role in user_roles and ex.kind in ("request", "request_stream")


@dataclass
class _View:
    """One main request next to what it would have been."""

    exchange: Exchange
    run: AgentRunRecord
    source: list[Message]
    """The run's starting history plus its own messages up to this request: what a compaction got."""
    logical: list[Message]
    """The uncompacted conversation up to this request, following chained runs back to the first."""


def _new_messages(c: Cassette, run: AgentRunRecord, norm: list[bytes]) -> list[Message]:
    """What the run added to the conversation: its prompt request and everything after it.

    A compaction can drop the prompt from the run's result too (harness 0.54 with
    ``keep_user_messages=True``); then the prompt is rebuilt from ``run.prompt`` and the run's
    own messages start at its first new response.
    """
    result = run.result
    prompt = _ws(_part_text({"content": run.prompt})) if run.prompt is not None else ""
    if prompt:
        for i in range(len(result) - 1, -1, -1):
            m = c.messages[result[i]]
            if m.get("kind") == "request" and any(
                p.get("part_kind") == "user-prompt" and _ws(_part_text(p)) == prompt for p in m.get("parts", [])
            ):
                return c.expand(result[i:])
    before = {norm[i] for i in run.history}
    first = next(
        (k for k, i in enumerate(result) if c.messages[i].get("kind") == "response" and norm[i] not in before),
        len(result),
    )
    rebuilt: list[Message] = []
    if prompt:
        rebuilt.append({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": run.prompt}]})
    return rebuilt + c.expand(result[first:])


def _before_response(new: list[Message], ordinal: int) -> list[Message]:
    """``new`` up to its ``ordinal``-th response: what the run had when it made that request.

    Counted by responses, since capabilities may add request messages of their own (reminders).
    """
    seen = -1
    for pos, m in enumerate(new):
        if m.get("kind") == "response":
            seen += 1
            if seen == ordinal:
                return new[:pos]
    return list(new)


def _views(c: Cassette) -> dict[str, list[_View]]:
    """Main requests per user role, with their source and uncompacted (logical) histories.

    A run is chained when its ``message_history`` is an earlier run's result: then its
    logical history is that run's logical history, not the (possibly compacted) one it got.
    """
    user_roles = c.user_roles()
    n = Normaliser()
    norm = [digest(n.value(m)) for m in c.messages]
    by_run: dict[int, list[Exchange]] = {}
    for ex in c.exchanges:
        if ex.run is not None and _is_main_request(ex, user_roles):
            by_run.setdefault(ex.run, []).append(ex)
    logical_after: dict[int, list[Message]] = {}
    views: dict[str, list[_View]] = {}
    for r, run in enumerate(c.runs):
        if run.role not in user_roles:
            continue
        history = [norm[i] for i in run.history]
        base: list[Message] | None = None
        for p in sorted(logical_after, reverse=True):
            prior = c.runs[p]
            if run.history and prior.role == run.role and [norm[i] for i in prior.result] == history:
                base = logical_after[p]
                break
        before = c.expand(run.history) if base is None else base
        new = _new_messages(c, run, norm)
        logical_after[r] = before + new
        ordinal = 0
        for ex in by_run.get(r, []):
            upto = _before_response(new, ordinal)
            views.setdefault(ex.role, []).append(_View(ex, run, c.expand(run.history) + upto, before + upto))
            if ex.error is None:
                ordinal += 1
    for role_views in views.values():
        role_views.sort(key=lambda v: v.exchange.seq)
    return views


def _summary_text(c: Cassette, ex: Exchange) -> str:
    if ex.response is None:
        return ""
    return "".join(_part_text(p) for p in c.messages[ex.response].get("parts", []) if p.get("part_kind") == "text")


def _run_failed(c: Cassette, ex: Exchange) -> bool:
    return ex.run is not None and ex.run < len(c.runs) and c.runs[ex.run].error is not None


def _summarizer_calls(c: Cassette, after_seq: int, before_seq: int) -> list[Exchange]:
    """Compaction calls between two main requests whose answer reached the harness (no error)."""
    return [
        e
        for e in c.exchanges
        if after_seq < e.seq < before_seq
        and _is_compaction(c, e) and e.error is None and e.response is not None and not _run_failed(c, e)
    ]


def _labels(indices: Iterable[int]) -> str:
    return ", ".join(str(i) for i in indices)


# --------------------------------------------------------------------------- built-in checks


@register("compaction_grew_request")
def compaction_grew_request(c: Cassette) -> Iterator[Violation]:
    """A compacted main request larger than the uncompacted conversation it replaced.

    Compaction exists to shrink requests; harness 0.62 accepted summaries longer than the
    history (seed 000: estimate 19 grew to 889). One violation per role lists every grown
    request. Both sides are estimated by the installed harness, so the comparison is like
    for like even on a cassette recorded by another version (on the same version the sent
    side equals the recorded ``Exchange.estimate``).
    """
    for role, views in _views(c).items():
        grown: list[tuple[int, int, int]] = []
        for v in views:
            sent, logical = c.expand(v.exchange.messages), v.logical
            if not _compacted(logical, sent):
                continue
            before = _estimate(logical)
            after = _estimate(sent) if sent else (v.exchange.estimate or 0)
            if after > before:
                grown.append((v.exchange.index, before, after))
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
            f"({', '.join(f'{role}[{i}]' for i in requests)}); uncompacted {_labels(uncompacted)}",
            {"before": uncompacted[0], "after": after_list, "uncompacted": uncompacted, "requests": requests},
            identity=("requests",),
        )


@register("content_lost")
def content_lost(c: Cassette) -> Iterator[Violation]:
    """A user or assistant message a summarizing compaction neither summarized nor kept.

    Seed 001: with ``keep_user_messages=True`` the kept user copies take the tail's slots
    and A9, U10, A10 reach neither model. Only compactions with a summarizer are checked:
    a sliding window drops messages by design.
    """
    for role, views in _views(c).items():
        prev = -1
        for v in views:
            window = _summarizer_calls(c, prev, v.exchange.seq)
            prev = v.exchange.seq
            source, sent = v.source, c.expand(v.exchange.messages)
            if not window or not _compacted(source, sent):
                continue
            summarizer = _ws(
                " ".join([_text(m) for e in window for m in c.expand(e.messages)] + [e.instructions or "" for e in window])
            )
            kept = _ws(" ".join(_text(m) for m in sent))
            lost = [
                m
                for m in source
                if any(
                    p.get("part_kind") in ("user-prompt", "text")
                    and (t := _ws(_part_text(p)))
                    and not _found(t, summarizer)
                    and not _found(t, kept)
                    for p in m.get("parts", [])
                )
            ]
            if not lost:
                continue
            labels = [message_label(m) for m in lost]
            via = [f"{e.role}[{e.index}]" for e in window]
            yield Violation(
                "content_lost",
                role,
                v.exchange.index,
                f"compaction lost {', '.join(labels)}: in neither the summarizer input ({', '.join(via)}) "
                f"nor the kept history ({len(sent)} of {len(source)} messages sent)",
                {"lost": labels, "summarizer": via, "source_messages": len(source), "sent_messages": len(sent)},
                identity=("lost",),
            )


@register("empty_summary")
def empty_summary(c: Cassette) -> Iterator[Violation]:
    """An empty or whitespace summary that the next main request was compacted with.

    Harness 0.54 accepted a blank summary and replaced the history with it; 0.62 retries and
    fails the summarizer run instead, which is not a violation (the run's error shows it).
    """
    user_roles = c.user_roles()
    mains = sorted((v for vs in _views(c).values() for v in vs), key=lambda v: v.exchange.seq)
    last: dict[tuple[str, int], Exchange] = {}  # a summarizer run's last call carries its final answer
    for e in c.exchanges:
        if _is_compaction(c, e):
            own_run = e.run is not None and e.role not in user_roles
            last[("run", e.run) if own_run and e.run is not None else ("seq", e.seq)] = e
    for e in sorted(last.values(), key=lambda x: x.seq):
        if e.error is not None or e.response is None or _run_failed(c, e):
            continue
        run_output = c.runs[e.run].output if e.run is not None and e.run < len(c.runs) else None
        summary = run_output if isinstance(run_output, str) else _summary_text(c, e)
        if summary.strip():
            continue
        nxt = next((v for v in mains if v.exchange.seq > e.seq), None)
        if nxt is None:
            continue
        source, sent = nxt.source, c.expand(nxt.exchange.messages)
        summaries = [_part_text(p) for m in sent for p in m.get("parts", []) if p.get("part_kind") == "compaction"]
        other = [s for s in _summarizer_calls(c, e.seq, nxt.exchange.seq) if _summary_text(c, s).strip()]
        accepted = any(not s.strip() for s in summaries) or (
            _compacted(source, sent) and not any(s.strip() for s in summaries) and not other
        )
        if not accepted:
            continue
        target = f"{nxt.exchange.role}[{nxt.exchange.index}]"
        yield Violation(
            "empty_summary",
            e.role,
            e.index,
            f"empty summary {summary!r} accepted: {target} was sent {len(sent)} messages instead of {len(source)}",
            {"summary": summary, "request": target, "source_messages": len(source), "sent_messages": len(sent)},
        )


def _dangling(messages: list[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Tool calls in ``messages`` that never get a result, as ``(message index, part)``.

    Mirrors pydantic-ai 2.62's ``messages._dangling_tool_calls_by_response`` (an ordered walk:
    a result answers the oldest open call with its id; a later response reusing an id
    strands the earlier calls). That helper is private and 2.54's differs for ids repeated
    within one response, so the rule is kept here, on dicts, to be the same whatever is installed.
    """
    open_calls: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    dangling: list[tuple[int, dict[str, Any]]] = []
    for index, message in enumerate(messages):
        for part in message.get("parts", []):
            kind = part.get("part_kind")
            call_id = part.get("tool_call_id")
            if message.get("kind") == "response" and kind == "tool-call":
                pending = open_calls.setdefault(call_id, [])
                if pending and pending[-1][0] != index:
                    dangling += pending
                    pending.clear()
                pending.append((index, part))
            elif message.get("kind") == "request" and (
                kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None)
            ):
                if open_calls.get(call_id):
                    open_calls[call_id].pop(0)
    dangling += [call for calls in open_calls.values() for call in calls]
    return sorted(dangling, key=lambda d: d[0])


dangling_calls = _dangling
"""Public name of the pairing rule, for other rules built on it (``replay.verdicts``)."""


@register("dangling_tool_call")
def dangling_tool_call(c: Cassette) -> Iterator[Violation]:
    """A request sent with a tool call that has no result: providers reject such histories.

    pydantic-ai repairs these before sending, so one here means something rewrote the
    history afterwards (a compaction or history processor cutting between call and result).
    The exchange's own response is not part of what was sent, so its calls never count.
    """
    for ex in c.exchanges:
        found = _dangling(c.expand(ex.messages))
        if not found:
            continue
        calls = [
            {"tool_name": p.get("tool_name"), "tool_call_id": p.get("tool_call_id"), "message": i} for i, p in found
        ]
        yield Violation(
            "dangling_tool_call",
            ex.role,
            ex.index,
            f"{len(calls)} tool call(s) sent without a result: "
            + ", ".join(f"{d['tool_name']} ({d['tool_call_id']}, message {d['message']})" for d in calls),
            {"calls": calls, "tools": sorted(str(d["tool_name"]) for d in calls)},
            identity=("tools",),
        )


@register("expectation")
def expectation(c: Cassette) -> Iterator[Violation]:
    """An observation that differs from what the scenario declared with ``run.expect`` (or never made)."""
    observed: dict[str, list[Any]] = {}
    for o in c.observations:
        observed.setdefault(o.name, []).append(o.value)
    for name, expected in c.expectations.items():
        values = observed.get(name)
        if values is not None and all(v == expected for v in values):
            continue
        seen: Any = None if values is None else values[0] if len(values) == 1 else values
        what = "never observed" if values is None else f"observed {seen!r}"
        yield Violation(
            "expectation",
            "scenario",
            None,
            f"{name}: expected {expected!r}, {what}",
            {"name": name, "expected": expected, "observed": seen},
            identity=("name",),
        )


@register("cache_prefix_broken")
def cache_prefix_broken(c: Cassette) -> Iterator[Violation]:
    """A request whose cacheable prefix shrank although no compaction happened: cached input paid in full.

    A history that only grows re-sends the previous request unchanged at its start, and a
    provider serves that part from its prompt cache. A harness that edits earlier messages
    (a reminder inserted, then taken out) breaks the prefix on every turn (``replay.wire.cache``).
    """
    from .wire.cache import broken_prefixes

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
            f"with no compaction between (cacheable/previous tokens: {where}{more}); "
            f"{lost:,} tokens that could have come from the prompt cache were sent in full",
            evidence={"requests": [i for i, _, _ in items], "cached": [x for _, x, _ in items],
                      "previous": [p for _, _, p in items], "uncached": lost},
            identity=("requests",),
        )


# Built-in checks that live in their own modules register themselves on import.
from . import verdicts  # noqa: E402,F401  (imports Violation/register from here: keep last)

"""Prompt-cache prefixes and what each request costs.

Providers cache a request's longest prefix that an earlier request already sent
(OpenAI automatically, Anthropic up to its ``cache_control`` breakpoints), and bill cached
input at a fraction of the price. A harness release that rewrites history early in the
conversation (inserting a reminder, then taking it out) keeps the same token count and
quietly turns cached input into full-price input. Here each request of a role is compared
with the role's previous request: the messages they share from the start are the prefix a
provider can serve from its cache. Sizes are the harness's own estimate of each message
(the character heuristic compaction decides on), summed, so two versions are measured with
one ruler; the price table in ``[tool.replay] prices`` turns them into money.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._conversations import Predecessors
from .._facts import OnePass, counted, current, derive, volatile
from ..cassette import Cassette, Exchange
from ..errors import ReplayUsageError
from ..normaliser._unsent import auto_stated, kept_modes, sent_message, sent_parameters, sent_part, thinks

_SENDS = ("request", "request_stream")

Tokenizer = Callable[[str], int]
"""Token count of a text, as the harness's compaction accepts one (``estimate_token_count(tokenizer=)``)."""


def tokenizer_from(spec: Any, source: Path | None) -> Tokenizer | None:
    """``[tool.replay] tokenizer = "module:function"``: a callable from the project, or None for the heuristic."""
    if spec is None:
        return None
    where = f"{source or 'pyproject.toml'}: [tool.replay] tokenizer"
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ReplayUsageError(f"{where} must be \"module:function\" (a callable taking a str, returning an int)")
    module_name, _, attr = spec.partition(":")
    import importlib
    import sys

    root = str((source.parent if source else Path.cwd()).resolve())  # the project's own modules, as scenarios see them
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:
        raise ReplayUsageError(f"{where}: cannot import {spec!r}: {exc}") from None
    if not callable(fn):
        raise ReplayUsageError(f"{where}: {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


class Price(BaseModel):
    """Dollars per million tokens for one model."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0, alias="cached-input")
    output: float = Field(default=0.0, ge=0)


def prices_from(table: Any, source: Path | None) -> dict[str, Price]:
    """``[tool.replay] prices``: model name (or ``*``) → price; a bad entry is one line naming the file."""
    if table is None:
        return {}
    where = f"{source or 'pyproject.toml'}: [tool.replay] prices"
    if not isinstance(table, dict):
        raise ReplayUsageError(f"{where} must be a table of model = {{ input = …, cached-input = …, output = … }}")
    out = {}
    for model, value in table.items():
        try:
            out[str(model)] = Price.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "value"
            raise ReplayUsageError(f"{where}.{model}.{field}: {first['msg']}") from None
    return out


@dataclass(frozen=True)
class RequestCost:
    """One request's input split into the prefix a provider could serve from cache and the rest."""

    role: str
    index: int
    model: str | None
    tokens: int
    cached: int
    output: int
    breakpoints: int = 0
    """``cache_control`` markers in the request body as sent (Anthropic)."""
    compacted: bool = False
    """A compaction ran since the role's previous request: a shorter prefix is expected."""
    diverged_at: int = 0
    """Position of the first message that differs from the request this one continues."""
    previous: int | None = None
    """Index (same role) of the request this one continues (``replay._conversations.Predecessors``)."""

    @property
    def uncached(self) -> int:
        return self.tokens - self.cached

    def dollars(self, prices: dict[str, Price]) -> float | None:
        price = prices.get(self.model or "") or prices.get("*")
        if price is None:
            return None
        cached_price = price.input if price.cached_input is None else price.cached_input
        return (self.uncached * price.input + self.cached * cached_price + self.output * price.output) / 1e6


class _Sizes:
    """Per-message token estimates of one cassette, each message estimated once."""

    def __init__(self, cassette: Cassette, tokenizer: Tokenizer | None = None) -> None:
        self.cassette = cassette
        self.tokenizer = tokenizer
        self.memo: dict[int, int] = {}
        self.facts = current()
        """The comparison's shared facts (outside one: this cassette's own)."""

    def __call__(self, index: int) -> int:
        size = self.memo.get(index)
        if size is None:
            size = self.memo[index] = self._shared(index)
        return size

    def _shared(self, index: int) -> int:
        """Estimated once per distinct content in a comparison (``replay._facts``): both sides, diff and checks."""
        tokenizer = self.tokenizer
        try:
            kind = ("size", tokenizer)
            hash(kind)
        except TypeError:  # an unhashable tokenizer: not shared
            return _estimate_one(self.cassette.messages[index], tokenizer)
        facts, c = self.facts, self.cassette
        if tokenizer is None:  # the heuristic's: computed with the message's other facts from its load
            found: int = facts.from_loaded(_SIZE, c, index)
            return found
        size: int = facts.get(kind, c, index, lambda m: _estimate_one(m, tokenizer, facts.loaded(c, index)))
        return size

    def part_prefix(self, index: int, parts: int) -> int:
        """Size of a message's first ``parts`` parts."""
        message = self.cassette.messages[index]
        if parts >= len(message.get("parts") or ()):
            return self(index)
        return _estimate_one({**message, "parts": message["parts"][:parts]}, self.tokenizer)


_NOT_LOADED_YET: Any = object()


def _estimate_one(message: dict[str, Any], tokenizer: Tokenizer | None = None, loaded: Any = _NOT_LOADED_YET) -> int:
    """The harness estimate of one message (``loaded``: the message already loaded, None if it cannot be)."""
    from ..recorder import load_messages

    try:
        from pydantic_ai_harness.compaction import estimate_token_count

        if loaded is None:
            raise ValueError("not loadable")
        return int(estimate_token_count(load_messages([message]) if loaded is _NOT_LOADED_YET else loaded, tokenizer))
    except Exception:  # a message this version cannot read (or a failing tokenizer): its text length
        return len(json.dumps(message, default=str)) // 4


_SIZE = ("size", None)
_ONE_PASS = OnePass()


def _size(message: dict[str, Any], loaded: list[Any] | None) -> int:
    if loaded is None:
        return _estimate_one(message, None, loaded)

    def cheap() -> int | None:
        n = counted(loaded)
        return None if n is None else n // 4

    return _ONE_PASS.use(cheap, lambda: _estimate_one(message, None, loaded))


derive(_SIZE, _size)


def _output_tokens(c: Cassette, ex: Exchange, sizes: _Sizes) -> int:
    if ex.response is None:
        return 0
    usage = c.messages[ex.response].get("usage")
    reported = usage.get("output_tokens") if isinstance(usage, dict) else None
    return reported if type(reported) is int and reported > 0 else sizes(ex.response)


def _breakpoints(c: Cassette, ex: Exchange) -> int:
    if not ex.wire:
        return 0
    from .store import request_body

    return sum(json.dumps(request_body(c, w), default=str).count('"cache_control"') for w in ex.wire)


def _compaction_between(c: Cassette, before: Exchange, after: Exchange, user_roles: set[str]) -> bool:
    """A compaction between two requests of a role: history may shrink.

    A summarizer's call or a ``compact_messages`` shows in the cassette; a history processor
    that calls no model (``SlidingWindowCompaction``) shows only in what it leaves: a request
    that continues another re-sends all of it plus at least its answer, so one holding no more
    messages than the request it continues had messages dropped. An edit that keeps every
    message (old tool output trimmed in place) is what ``cache_prefix_broken`` is there to catch.
    """
    if len(after.messages) <= len(before.messages):
        return True
    for ex in c.exchanges[before.seq + 1 : after.seq]:
        if ex.kind == "compact_messages" or ("compact" in ex.role or "summar" in ex.role) and ex.role not in user_roles:
            return True
    return after.kind == "compact_messages"


def _part_key(part: Any) -> Any:
    """A part as the provider sees it: its timestamp and metadata are not sent."""
    part = _no_cache_points(sent_part(part))
    return {k: v for k, v in part.items() if k != "timestamp"} if isinstance(part, dict) else part


def _no_cache_points(part: Any) -> Any:
    """A prompt part without its ``CachePoint`` items: a cache breakpoint placed on text already sent (the
    planning capability marks the first prompt from the second request on) is a directive to the provider's
    cache, not an edit of the prefix it matches. Read as an edit, every such run was a cache bust."""
    content = part.get("content") if type(part) is dict else None
    if type(content) is not list or not any(type(c) is dict and c.get("kind") == "cache-point" for c in content):
        return part
    kept = [c for c in content if not (type(c) is dict and c.get("kind") == "cache-point")]
    return {**part, "content": kept[0] if len(kept) == 1 and type(kept[0]) is str else kept}


class _Sent:
    """Whether two messages, or two parameter sets, of a cassette are the same to the provider.

    Interned indices compare what was recorded; what pydantic-ai never sends (``_unsent``: an
    anonymous capability's run-local id on its tools, metadata) must not count as an edit of
    the prefix, or every run after the first of such an agent would read as a cache bust.
    """

    def __init__(self, c: Cassette) -> None:
        self.c = c
        self._params: dict[tuple[int, bool], Any] = {}
        self._messages: dict[int, Any] = {}

    def parameters(self, a: Exchange, b: Exchange) -> bool:
        """Whether two requests' parameters are the same to the provider: an ``auto`` output mode and a run's
        kept resolution of it (slim 2.58+, ``_unsent.kept_modes``) are, the model resolving ``auto`` alike."""
        if a.parameters == b.parameters:
            return True
        if a.parameters is None or b.parameters is None:
            return False
        return bool(self._param(a) == self._param(b))

    def _param(self, ex: Exchange) -> Any:
        i = ex.parameters
        assert i is not None
        raw = self.c.blobs[i]
        # a run's kept mode, or an ``auto`` that does not think (one that does may resolve to another mode)
        canon = ex.seq in self._kept or (_auto(raw) and not thinks(self.c.blobs[ex.settings] if ex.settings is not None else None))
        found = self._params.get((i, canon), _NOT_LOADED_YET)
        if found is _NOT_LOADED_YET:
            value = sent_parameters(raw)
            found = self._params[(i, canon)] = auto_stated(value) if canon else value
        return found

    @functools.cached_property
    def _kept(self) -> set[int]:
        blobs = self.c.blobs
        return kept_modes(self.c.exchanges, blobs.__getitem__, blobs.__getitem__)

    def message(self, a: int, b: int) -> bool:
        return a == b or self._message(a) == self._message(b)

    def shared_messages(self, prev: Exchange, ex: Exchange) -> int:
        """How many leading messages ``ex`` re-sends of ``prev`` as the provider is sent them."""
        pm, em = prev.messages, ex.messages
        n = 0
        while n < min(len(pm), len(em)) and self.message(pm[n], em[n]):
            n += 1
        return n

    def own_parameters_only(self, a: Exchange, b: Exchange) -> bool:
        """Whether two requests' parameters differ in nothing but what the agent itself was given: its own
        instructions (parts with no ``id``: ``instructions=``, ``@agent.instructions``; a capability's parts carry
        its id as their source) and its own tools (``capability_id`` None: ``@agent.tool``, a toolset the scenario
        passed, a ``prepare`` that offers a tool from some turn on; a capability's tools carry its id).

        Instructions and tools lead the prompt, so such a change re-sends everything uncached, but it is the
        scenario's edit of its own agent (the facts it learned so far, a checkout offered once the cart has items),
        not the harness's edit of the history.

        A toolset's instructions have no ``id`` either, and up to 0.59 ``ConversationSearch`` gives its (static)
        instructions through its toolset: a harness toolset whose instructions changed from turn to turn would be
        taken for the agent's own here. Its tools still carry the capability's id."""
        if a.parameters is None or b.parameters is None or self.parameters(a, b):
            return False
        return bool(self._without_own(a) == self._without_own(b))

    def _without_own(self, ex: Exchange) -> Any:
        raw, sent = self.c.blobs[ex.parameters] if ex.parameters is not None else None, self._param(ex)
        if type(raw) is not dict or type(sent) is not dict:
            return sent
        out = dict(sent)
        for key, owner in (("instruction_parts", "id"), ("function_tools", "capability_id")):
            parts, kept = raw.get(key), sent.get(key)
            if type(parts) is list and type(kept) is list and len(parts) == len(kept):
                # a field the slim never wrote (no such key) is nobody's: only an explicit None is the agent's own
                out[key] = [k for p, k in zip(parts, kept) if not (type(p) is dict and owner in p and p[owner] is None)]
        return out

    def _message(self, i: int) -> Any:
        found = self._messages.get(i, _NOT_LOADED_YET)
        if found is _NOT_LOADED_YET:
            found = self._messages[i] = _unstamped(_without_cache_points(sent_message(self.c.messages[i])))
        return found


def _auto(parameters: Any) -> bool:
    return type(parameters) is dict and parameters.get("output_mode") == "auto"


def _without_cache_points(message: Any) -> Any:
    parts = message.get("parts") if type(message) is dict else None
    if type(parts) is not list:
        return message
    kept = [_no_cache_points(p) for p in parts]
    return message if all(a is b for a, b in zip(kept, parts)) else {**message, "parts": kept}


def _unstamped(message: Any) -> Any:
    """A message without its own and its parts' stamps (``_facts.volatile``): none is sent."""
    if type(message) is not dict:
        return message
    out = {k: v for k, v in message.items() if not volatile(k)}
    parts = out.get("parts")
    if type(parts) is list:
        out["parts"] = [{k: v for k, v in p.items() if not volatile(k)} if type(p) is dict else p for p in parts]
    return out


def _leading_parts(a: dict[str, Any], b: dict[str, Any]) -> int:
    """How many leading parts two messages share (a kept prompt whose trailing reminder was taken out)."""
    pa, pb = a.get("parts"), b.get("parts")
    if not isinstance(pa, list) or not isinstance(pb, list) or a.get("kind") != b.get("kind"):
        return 0
    n = 0
    while n < min(len(pa), len(pb)) and _part_key(pa[n]) == _part_key(pb[n]):
        n += 1
    return n


def _left_out_only(before: Any, after: Any) -> bool:
    """Whether ``after`` is ``before`` with some parts left out and nothing else changed."""
    pa, pb = before.get("parts") if type(before) is dict else None, after.get("parts") if type(after) is dict else None
    if type(pa) is not list or type(pb) is not list or len(pb) >= len(pa) or before.get("kind") != after.get("kind"):
        return False
    kept = iter(_part_key(p) for p in pa)
    return all(any(k == q for k in kept) for q in (_part_key(p) for p in pb))


def request_costs(c: Cassette, tokenizer: Tokenizer | None = None) -> list[RequestCost]:
    """Every request that sends messages, with its cacheable prefix against the role's previous one.

    The prefix is what a provider's cache can match token by token: the messages both
    requests start with, then the leading parts of the first message that differs (a user
    prompt sent again without the reminder the previous request had appended to it).
    Computed once per cassette in a comparison (``replay._facts``): the diff and the
    ``cache_prefix_broken`` check both read it; treat the list as read-only.
    """
    try:
        kind = ("request_costs", tokenizer)
        hash(kind)
    except TypeError:
        return _request_costs(c, tokenizer)
    return current().per(kind, c, lambda: _request_costs(c, tokenizer))


def equivalent_costs(c: Cassette, same_as: Cassette, tokenizer: Tokenizer | None = None) -> list[RequestCost]:
    """The request costs of ``c``, which ``_facts.equivalent`` found equal to ``same_as`` but for
    stamps: every input of the costs (exchanges, parameters, wire records, usage, messages by
    content without part timestamps) is then the same, so ``same_as``'s are ``c``'s, and the
    checks that read them for ``c`` later in the comparison get them without a second walk."""
    costs = request_costs(same_as, tokenizer)
    try:
        kind = ("request_costs", tokenizer)
        hash(kind)
    except TypeError:
        return costs
    return current().per(kind, c, lambda: costs)


def _request_costs(c: Cassette, tokenizer: Tokenizer | None) -> list[RequestCost]:
    sizes = _Sizes(c, tokenizer)
    if tokenizer is None:  # every message sent or answered is estimated below: loaded in batches first
        sizes.facts.preload(c, {i for ex in c.exchanges if ex.kind in _SENDS for i in ex.messages})
    sent = _Sent(c)
    user_roles = c.user_roles()
    out: list[RequestCost] = []
    conversations = Predecessors(c)
    # The scenario's own agents first: their figures are the ones reports lead with.
    for role, xs in sorted(c.by_role().items(), key=lambda item: item[0] not in user_roles):
        role_previous: Exchange | None = None
        sums: list[int] = [0]  # prefix sums of the previous request's message sizes
        sums_of: Exchange | None = None
        for ex in xs:
            if ex.kind not in _SENDS:
                continue
            prev = conversations.previous(ex, role_previous)
            role_previous = ex
            if prev is not sums_of:  # another conversation's request: its sizes summed afresh
                sums = [0]
                for i in prev.messages if prev is not None else ():
                    sums.append(sums[-1] + sizes(i))
            shared, partial = 0, 0
            if prev is not None and sent.parameters(ex, prev):
                limit = min(len(prev.messages), len(ex.messages))
                pm, em = prev.messages, ex.messages
                while shared < limit and (pm[shared] == em[shared] or sent.message(pm[shared], em[shared])):
                    shared += 1
                if shared < limit:
                    message = c.messages[ex.messages[shared]]
                    parts = _leading_parts(c.messages[prev.messages[shared]], message)
                    if parts:
                        partial = sizes.part_prefix(ex.messages[shared], parts)
            sums = sums[: shared + 1]
            for i in ex.messages[shared:]:
                sums.append(sums[-1] + sizes(i))
            out.append(
                RequestCost(
                    role=role,
                    index=ex.index,
                    model=ex.model_name,
                    tokens=sums[-1],
                    cached=sums[shared] + partial,
                    output=_output_tokens(c, ex, sizes),
                    breakpoints=_breakpoints(c, ex),
                    compacted=prev is not None and _compaction_between(c, prev, ex, user_roles),
                    diverged_at=shared,
                    previous=prev.index if prev is not None else None,
                )
            )
            sums_of = ex
    return out


def broken_prefixes(c: Cassette, costs: Iterable[RequestCost] | None = None) -> Iterator[tuple[RequestCost, int]]:
    """Requests that re-send less of the previous request than it held, with no compaction.

    What the previous request appended to its own last message and the next request leaves
    out (a reminder or plan behind a cache point) was never going to be re-sent: the prefix
    up to it still matches. Any other edit is what turns cached input into full-price input,
    the previous request's last message included: ``ClearToolResults`` up to 0.57 blanked
    exactly that tool return on every request, which passed as a left-out reminder. Only the
    scenario's own agents carry a conversation from request to request; a capability's agent
    (summarizer, judge) starts afresh on every call.
    """
    by_key = {(x.role, x.index): x for x in c.exchanges}
    user_roles = c.user_roles()
    sent = _Sent(c)
    seen: dict[tuple[str, int], RequestCost] = {}
    for cost in costs if costs is not None else request_costs(c):
        if cost.role not in user_roles:
            continue
        seen[(cost.role, cost.index)] = cost
        prev = seen.get((cost.role, cost.previous)) if cost.previous is not None else None
        if prev is None or cost.compacted:
            continue
        ex_prev, ex = by_key[(prev.role, prev.index)], by_key[(cost.role, cost.index)]
        last = len(ex_prev.messages) - 1
        # The agent's own instructions or tools changed (the scenario's edit, not the harness's): the messages alone
        # say whether the history was edited in place; otherwise a parameter change re-sends nothing as cached.
        own = sent.own_parameters_only(ex, ex_prev)
        diverged = sent.shared_messages(ex_prev, ex) if own else cost.diverged_at
        edited_history = diverged < last or (
            diverged == last < len(ex.messages)
            and (own or sent.parameters(ex, ex_prev))  # else the tools moved, not the message
            and not _left_out_only(c.messages[ex_prev.messages[last]], c.messages[ex.messages[last]])
        )
        if len(ex.messages) >= len(ex_prev.messages) and edited_history and cost.cached < prev.tokens:
            yield cost, prev.tokens


@dataclass(frozen=True)
class CacheChange:
    """One request whose cacheable prefix (or its ``cache_control`` breakpoints) differs between two cassettes."""

    role: str
    index: int
    before: int
    after: int
    what: str = "prefix"
    """``prefix`` (tokens) or ``breakpoints`` (``cache_control`` markers sent)."""

    def describe(self) -> str:
        if self.what == "breakpoints":
            return f"cache breakpoints at {self.role}[{self.index}]: {self.before} → {self.after}"
        return f"cacheable prefix at {self.role}[{self.index}]: {self.before:,} → {self.after:,} tokens"


def compare(
    a: list[RequestCost], b: list[RequestCost], threshold: float = 0.1, paired: dict[tuple[str, int], int] | None = None
) -> list[CacheChange]:
    """Requests whose cached prefix moved by more than ``threshold`` of the larger figure, or whose breakpoints moved.

    ``paired``: the request of ``b`` each request of ``a`` was paired with, where the diff paired
    them by conversation rather than by ordinal (concurrent conversations).
    """
    cb = {(x.role, x.index): x for x in b}
    paired = paired or {}
    out = []
    for x in a:
        y = cb.get((x.role, paired.get((x.role, x.index), x.index)))
        if y is None:
            continue
        if x.cached != y.cached and abs(x.cached - y.cached) > threshold * max(x.cached, y.cached, 1):
            out.append(CacheChange(x.role, x.index, x.cached, y.cached))
        if x.breakpoints != y.breakpoints:
            out.append(CacheChange(x.role, x.index, x.breakpoints, y.breakpoints, "breakpoints"))
    return out


@dataclass(frozen=True)
class Tokens:
    """A cassette's input tokens (of which a cacheable prefix) and output tokens, over every request."""

    input: int
    cached: int
    output: int

    @classmethod
    def of(cls, costs: Iterable[RequestCost]) -> Tokens:
        xs = list(costs)
        return cls(sum(x.tokens for x in xs), sum(x.cached for x in xs), sum(x.output for x in xs))


def total(costs: Iterable[RequestCost], prices: dict[str, Price]) -> float | None:
    """Estimated dollars for all requests, or None when no request's model has a price."""
    values = [x.dollars(prices) for x in costs]
    known = [v for v in values if v is not None]
    return sum(known) if known else None

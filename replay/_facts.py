"""Per-message facts shared by both sides of a comparison, and by the diff and the checks.

A replay re-sends the recording's messages with new timestamps, run ids and conversation ids,
and a re-recording on another harness version re-sends most of them unchanged too. What the
diff and the invariant checks compute from a message (token estimates, its words) depends on
its content, not on those values, so it is keyed here by the message's *content key*: the
message with each such value reduced to its shape. Each distinct message is then estimated and
tokenised once per comparison, not once per side and per stage.

The reduction is exact, not a heuristic: a value is reduced only when it is well formed (a
timestamp pydantic-ai reads as a datetime, an id of plain characters), and the shape keeps its
length, so anything that could still depend on it (a message that fails to load, whose size is
then its JSON length) sees the same thing on both sides. Any other value stays in the key as is.

A scope (:func:`shared`) lives for one comparison; outside one, every call starts afresh.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import msgpack

from .cassette import Cassette
from .normaliser import pack

T = TypeVar("T")
Message = dict[str, Any]

VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})
"""Keys of a message or part whose value changes on every run and that no estimate or check reads
(as are keys ending in ``created_at``: the harness stamps its summaries' metadata with one)."""

def volatile(key: str) -> bool:
    """Whether a value under ``key`` may be reduced to its shape in a content key (anywhere: a superset)."""
    return key in VOLATILE or key.endswith("created_at")


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?\Z")
_ID = re.compile(r"[0-9A-Za-z_-]{1,128}\Z")


def _shape(key: str, value: Any) -> Any:
    """``value`` reduced to its shape when it is a well-formed volatile value, else ``value`` itself.

    The marker is a msgpack extension type, which no decoded cassette value can be, so a reduced
    value never collides with a real one.
    """
    if type(value) is not str:
        return value
    if key == "timestamp" or key.endswith("created_at"):
        if not _TIMESTAMP.match(value):
            return value
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return value
        return _marker(1, len(value))
    if _ID.match(value):
        return _marker(2, len(value))
    return value


@functools.cache
def _marker(kind: int, length: int) -> msgpack.ExtType:
    return msgpack.ExtType(kind, length.to_bytes(4, "big"))


def _reduced(value: Any) -> Any:
    """A message's or part's own volatile values (and its ``metadata``'s ``*created_at``) reduced to their shape."""
    if type(value) is not dict:
        return value
    out = dict(value)
    for k in VOLATILE:
        if k in out:
            out[k] = _shape(k, out[k])
    meta = out.get("metadata")
    if type(meta) is dict:
        out["metadata"] = {k: _shape(k, v) if type(k) is str and k.endswith("created_at") else v for k, v in meta.items()}
    details = out.get("provider_details")
    if type(details) is dict and "timestamp" in details:  # the provider's own stamp of its answer (never sent)
        out["provider_details"] = {**details, "timestamp": _shape("timestamp", details["timestamp"])}
    return out


def content_key(message: Any) -> bytes:
    """The message's content key: equal for two messages that differ only in well-formed volatile values."""
    if type(message) is dict:
        out = _reduced(message)
        parts = out.get("parts")
        if type(parts) is list:
            out["parts"] = [_reduced(p) for p in parts]
    else:
        out = message
    try:
        packed = pack(out)
    except (TypeError, ValueError, OverflowError):  # not plain data (a message built in memory): never shared
        return b"\x00unshared" + id(message).to_bytes(8, "big")
    return hashlib.blake2b(packed, digest_size=16).digest()


class Facts:
    """What one comparison computed per distinct message, and the content keys of its cassettes."""

    def __init__(self, private: bool = False) -> None:
        self.private = private
        """Facts of one cassette alone (``replay check``): nothing to share, so messages are keyed by
        their place in the table, not by a digest of their content."""
        self._keys: dict[int, tuple[list[Message], list[bytes | None]]] = {}
        self._memo: dict[tuple[Hashable, Hashable], Any] = {}
        self._equivalent: dict[tuple[int, int], tuple[Cassette, Cassette, bool]] = {}
        self._per: dict[tuple[Hashable, int], tuple[Any, Any]] = {}
        self._last: tuple[list[Message], list[bytes | None]] | None = None
        """The table looked up last (most lookups are of the same table as the one before)."""
        self.hits = 0
        """How many facts were found already computed (tests read it to prove the sharing happens)."""

    def key(self, c: Cassette, index: int) -> Hashable:
        """The content key of ``c.messages[index]`` (held per message table: a copy of the cassette shares it)."""
        table = c.messages
        last = self._last
        if last is not None and last[0] is table and not self.private and index < len(last[1]):
            # the common case, a key computed already of the table looked up last (what _table_keys
            # and the lines below would give, without their calls: this runs per message and fact)
            known = last[1][index]
            if known is not None:
                return known
        keys = self._table_keys(table)
        if self.private:
            return (id(table), index)  # the table is held by _table_keys, so its id stays its own
        found = keys[index]
        if found is None:
            found = keys[index] = content_key(table[index])
        return found

    def _table_keys(self, table: list[Message]) -> list[bytes | None]:
        last = self._last
        if last is not None and last[0] is table and len(last[1]) >= len(table):
            return last[1]
        held = self._keys.get(id(table))
        if held is None or held[0] is not table:
            held = self._keys[id(table)] = (table, [None] * len(table))
        keys = held[1]
        if len(keys) < len(table):  # the table grew since (a cassette being built): keep up
            keys.extend([None] * (len(table) - len(keys)))
        self._last = held
        return keys

    def get(self, kind: Hashable, c: Cassette, index: int, compute: Callable[[Message], T]) -> T:
        """``compute(c.messages[index])``, computed once per distinct content in this scope."""
        return self.of(kind, self.key(c, index), lambda: compute(c.messages[index]))

    def shareable(self, kind: Hashable, c: Cassette, index: int, compute: Callable[[Message], tuple[T, bool]]) -> T:
        """``compute(c.messages[index])``, which also says whether its value is a function of the
        message's content alone: only then is it shared by content (else each side computes its own).

        For values that can depend on what came before in the same cassette (a normalised message
        whose generated ids or uuids were aliased to ordinals): a message that needed no alias is
        the same on both sides, one that did is recomputed in its own cassette's order.
        """
        slot = (kind, self.key(c, index))
        found = self._memo.get(slot, _ABSENT)
        if found is not _ABSENT:
            self.hits += 1
            value: T = found
            return value
        value, content_only = compute(c.messages[index])
        if content_only:
            self._memo[slot] = value
        return value

    def loaded(self, c: Cassette, index: int) -> list[Any] | None:
        """``c.messages[index]`` loaded by the installed pydantic-ai (None if it cannot be), kept for the
        scope: what a size with the project's own tokenizer starts from. The built-in facts of a load
        are computed together and the load dropped (:meth:`from_loaded`)."""
        if self.private:
            return _load(c.messages[index])
        found: list[Any] | None = self.get("loaded", c, index, _load)
        return found

    def from_loaded(self, kind: Hashable, c: Cassette, index: int) -> Any:
        """``DERIVED[kind](message, loaded)`` of ``c.messages[index]`` (see :func:`derive`), computed once
        per distinct content in this scope (once per index for a cassette checked alone).

        The message is loaded once for every registered kind, each computed then, and the load
        is not kept: a comparison of 10,000 requests kept ~270,000 loaded pydantic-ai objects
        from the diff's estimates to the checks', which each young collection walked, to compute
        one more figure from each. A kind that raises is left for its own call (which raises then,
        where it did before); only ``kind`` itself raises here.
        """
        slot = (kind, self.key(c, index))
        found = self._memo.get(slot, _ABSENT)
        if found is not _ABSENT:
            self.hits += 1
            return found
        message = c.messages[index]
        loaded = _load(message)
        value = DERIVED[kind](message, loaded)  # the asked kind first: its error is the caller's
        self._memo[slot] = value
        for other, compute in list(DERIVED.items()):
            at = (other, slot[1])
            if at in self._memo:
                continue
            try:
                self._memo[at] = compute(message, loaded)
            except Exception:
                continue
        return value

    def preload(self, c: Cassette, indices: Iterable[int]) -> None:
        """Load every message of ``indices`` not loaded yet in this scope, many to one pydantic call, and
        compute their :data:`DERIVED` facts, as :meth:`from_loaded` would one by one.

        One validation of a list of messages costs about half what as many one-message validations
        do (31 against 57 µs a message of the realistic recording): a 10,000-request comparison loads
        ~23,000 distinct messages. A chunk that fails to load (one message this version cannot read)
        is loaded message by message, so each gets what :meth:`from_loaded` gives it.
        """
        wanted: dict[Hashable, int] = {}
        memo = self._memo
        for i in indices:
            key = self.key(c, i)
            if ("loadable", key) not in memo and key not in wanted:
                wanted[key] = i
        items = list(wanted.items())
        table = c.messages
        for start in range(0, len(items), _CHUNK):
            chunk = items[start : start + _CHUNK]
            try:
                loads: list[list[Any] | None] = [[m] for m in _load_many([table[i] for _, i in chunk])]
            except Exception:
                loads = [_load(table[i]) for _, i in chunk]
            for (key, i), loaded in zip(chunk, loads, strict=True):
                message = table[i]
                for kind, compute in list(DERIVED.items()):
                    try:
                        memo[(kind, key)] = compute(message, loaded)
                    except Exception:  # left for its own call, which raises there (as from_loaded does)
                        continue

    def of(self, kind: Hashable, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` for the content ``key`` (a :func:`content_key` or a tuple of them), computed once."""
        slot = (kind, key)
        if slot in self._memo:
            self.hits += 1
            found: T = self._memo[slot]
            return found
        value = self._memo[slot] = compute()
        return value

    def per(self, kind: Hashable, owner: Any, compute: Callable[[], T]) -> T:
        """``compute()`` once per ``owner`` object (a cassette) in this scope: e.g. its request costs,
        which the diff and the cache check both need."""
        held = self._per.get((kind, id(owner)))
        if held is not None and held[0] is owner:
            self.hits += 1
            found: T = held[1]
            return found
        value = compute()
        self._per[(kind, id(owner))] = (owner, value)
        return value

    def equivalent(self, a: Cassette, b: Cassette) -> bool:
        """Whether ``a`` and ``b`` are the same recording but for well-formed volatile values.

        Every table, run, exchange, observation, expectation and history equal; the header equal
        in what the checks and the normalisation read from it (roles, schema defaults: the rest,
        such as versions, the diff reports from each side's own header); each message equal by
        content key. A replay on another harness version that sends exactly what was recorded is
        equivalent too. Then both normalise to the same thing (the diff has no
        change to look for) and every check that reads messages only through their content gives
        both sides the same answer (``invariants._once``), so those are computed once.
        """
        memo = self._equivalent.get((id(a), id(b)))
        if memo is not None and memo[0] is a and memo[1] is b:
            return memo[2]
        found = self._equivalent_now(a, b)
        self._equivalent[(id(a), id(b))] = (a, b, found)
        return found

    def _equivalent_now(self, a: Cassette, b: Cassette) -> bool:
        if a is b:
            return True
        ha, hb = a.header, b.header
        if (ha.roles, ha.schema_defaults) != (hb.roles, hb.schema_defaults):
            return False
        if len(a.messages) != len(b.messages):
            return False
        if (a.blobs, a.outcome, a.observations, a.expectations, a.histories, a.runs, a.exchanges) != (
            b.blobs, b.outcome, b.observations, b.expectations, b.histories, b.runs, b.exchanges
        ):
            return False
        from .differ import same_value  # `==` has True == 1 and 5 == 5.0: the user's values compare by type too

        if not same_value([a.blobs, a.outcome.output, [o.value for o in a.observations], a.expectations],
                          [b.blobs, b.outcome.output, [o.value for o in b.observations], b.expectations]):
            return False
        ma, mb = a.messages, b.messages
        # By content key, which keeps types apart: ``==`` has ``1 == True == 1.0``, so a tool's return of
        # ``{"enabled": 1}`` sent as ``{"enabled": true}`` made the two equivalent, and the diff ``same``.
        if self.private:
            return all(ma[i] is mb[i] or content_key(ma[i]) == content_key(mb[i]) for i in range(len(ma)))
        if not all(ma[i] is mb[i] or self.key(a, i) == self.key(b, i) for i in range(len(ma))):
            return False
        # Equal keys index by index: one list serves both tables (a key computed for one side is the other's).
        keys_a, keys_b = self._table_keys(ma), self._table_keys(mb)
        merged = [x if x is not None else y for x, y in zip(keys_a, keys_b, strict=True)]
        self._keys[id(ma)], self._keys[id(mb)] = (ma, merged), (mb, merged)
        self._last = None
        return True


_ABSENT: Any = object()

DERIVED: dict[Hashable, Callable[[Message, list[Any] | None], Any]] = {}
"""Facts computed from a message and the message as loaded by the installed pydantic-ai (None if it
cannot be), all at once when a message is loaded (:meth:`Facts.from_loaded`)."""


def derive(kind: Hashable, compute: Callable[[Message, list[Any] | None], Any]) -> None:
    """Register a fact of each message computed from its load (a module registers its own on import).

    ``compute`` must be a function of the message's content and its load alone, like every fact."""
    DERIVED[kind] = compute


derive("loadable", lambda message, loaded: loaded is not None)


_COUNTED: tuple[Any, int | None] = (None, None)


def counted(loaded: list[Any]) -> int | None:
    """The characters the installed harness's estimate counts in ``loaded`` (one message as loaded,
    its instructions included: the estimate's tokenizer hook called with ``len``), or None if it
    cannot count them that way; computed once for the facts of one load that need it.

    Every harness 0.52-0.62 estimates a history as the characters of its segments over four and
    counts the last instructions as one segment, so a message's size (``wire.cache``) and its
    characters without instructions (``invariants``) are this figure over four and this figure
    less the instructions: one pass of the estimator over the message, not three (the size's, and
    the characters' over a copy made without instructions). Each use checks itself against its
    own full computation on the first messages of the process (:class:`OnePass`).
    """
    global _COUNTED
    held = _COUNTED
    if held[0] is loaded:
        return held[1]
    try:
        from pydantic_ai_harness.compaction import estimate_token_count

        found: int | None = int(estimate_token_count(loaded, len))
    except Exception:
        found = None
    _COUNTED = (loaded, found)
    return found


class OnePass:
    """Whether a fact computed from :func:`counted` still equals its full computation: checked on the
    first ``VERIFY`` messages of the process; one disagreement (a harness counting otherwise) and the
    full computation is used from then on."""

    VERIFY = 32

    def __init__(self) -> None:
        self.checked = 0
        self.ok = True

    def use(self, cheap: Callable[[], T | None], full: Callable[[], T]) -> T:
        if not self.ok:
            return full()
        value = cheap()
        if value is None:
            return full()
        if self.checked < self.VERIFY:
            self.checked += 1
            if value != full():
                self.ok = False
                return full()
        return value


_CHUNK = 512
"""Messages validated together by :meth:`Facts.preload`: one that fails costs its chunk a second pass."""


def _load_many(messages: list[Message]) -> list[Any]:
    from .recorder import load_messages

    return load_messages(messages)


def _load(message: Message) -> list[Any] | None:
    from .recorder import load_messages

    try:
        return load_messages([message])
    except Exception:
        return None


_SCOPE: contextvars.ContextVar[Facts | None] = contextvars.ContextVar("replay_facts", default=None)


@contextlib.contextmanager
def shared(private: bool = False) -> Iterator[Facts]:
    """The facts of the comparison in progress, or a new scope for one (nested scopes share the outer one);
    ``private``: the new scope is for one cassette alone (see :attr:`Facts.private`)."""
    found = _SCOPE.get()
    if found is not None:
        yield found
        return
    facts = Facts(private)
    token = _SCOPE.set(facts)
    try:
        yield facts
    finally:
        _SCOPE.reset(token)


def active() -> Facts | None:
    """The active scope's facts, or None outside a scope (where keying messages would only cost)."""
    return _SCOPE.get()


def current() -> Facts:
    """The active scope's facts, or a throwaway set (nothing shared) outside a scope."""
    return _SCOPE.get() or Facts()

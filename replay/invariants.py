"""Invariants over one cassette: properties every recording must have, whatever the version.

``replay check`` needs no second version: a cassette alone shows a compaction that grew the
request it was meant to shrink, messages that reached neither the summarizer nor the main
model, an empty summary that replaced real history, a tool call sent without its result,
or an observation that contradicts the scenario's own expectation. Each check is a plain
function ``Cassette -> Iterable[Violation]`` in a registry, so users can add their own.

``replay run``/``diff``/``matrix`` show the replay's *own* violations, each compared with the
recording's (:func:`compare`): new, worse, unchanged, better or gone. A known violation that
a release makes worse is therefore visible, not hidden because the recording had one too.

Everything here works on the cassette's JSON message dicts (not pydantic-ai objects), so a
cassette recorded by another pydantic-ai version can be checked even when the installed one
cannot load its messages; only token estimates need loading, and they fall back to a
character count. Work is linear in the cassette: per-message facts (token characters, text,
tool calls) are computed once per distinct message, the uncompacted history grows
incrementally with prefix sums, and a summarizer's input is tokenised once, not rescanned
per message.
"""

from __future__ import annotations

import contextvars
import dataclasses
import gc
import json
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from . import _facts
from ._conversations import Predecessors, interleaved_roles, paired_ordinals
from ._untrusted import finite
from .cassette import AgentRunRecord, Cassette, Exchange, is_harness_module, paused_gc
from .differ import message_label
from .errors import ReplayError, ReplayUsageError
from .histories import ORIGIN as OBSERVED
from .histories import as_requests
from .normaliser import ANY_CLASS, Normaliser, digest
from .recorder import _static_header, estimate, load_messages

Message = dict[str, Any]
Status = Literal["new", "worse", "unchanged", "better", "gone"]
STATUSES: tuple[Status, ...] = ("new", "worse", "unchanged", "better", "gone")


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
    pair: tuple[Any, ...] | None = None
    """What pairs this violation with another version's of the same invariant and role: by default
    its request (``index``); ``()`` for a violation about the whole role, an observation's name for
    an expectation."""
    measure: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    """How bad it is, item by item (a request's growth in tokens, a lost message): compared with
    another version's, any larger item makes it worse, any smaller one better."""

    def describe(self) -> str:
        where = self.role if self.index is None else f"{self.role}[{self.index}]"
        return f"{self.invariant} {where}: {self.message}"

    def slot(self) -> str:
        """Where the violation is, as a string the matrix can match across versions."""
        if self.pair is None:
            return f"{self.invariant} {self.role}" + ("" if self.index is None else f"[{self.index}]")
        return " ".join([self.invariant, self.role, *map(str, self.pair)])

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


@dataclass(frozen=True)
class Compared:
    """A violation of the replay next to the recording's at the same place (or the recording's, gone)."""

    status: Status
    replay: Violation | None
    recording: Violation | None

    @property
    def violation(self) -> Violation:
        found = self.replay or self.recording
        assert found is not None
        return found

    @property
    def is_change(self) -> bool:
        """New or worse: the replay broke the invariant more than the recording did."""
        return self.status in ("new", "worse")

    def describe(self, baseline: str = "recording") -> str:
        """``baseline`` names the side graded against (``replay diff`` of two replays has no recording)."""
        text = self.violation.describe()
        if self.status in ("worse", "better") and self.recording is not None:
            text += f" ({baseline}: {self.recording.message})"
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "slot": self.violation.slot(),
            **self.violation.as_json(),
            "replay": None if self.replay is None else self.replay.as_json(),
            "recording": None if self.recording is None else self.recording.as_json(),
        }


@dataclass(frozen=True)
class CheckFailure:
    """A check that raised: an error for the cassette (exit 2), never a violation."""

    check: str
    error: str

    def describe(self) -> str:
        return f"check {self.check} failed: {self.error}"


@dataclass
class Findings:
    violations: list[Violation] = field(default_factory=list)
    failures: list[CheckFailure] = field(default_factory=list)


class CheckError(ReplayError):
    """Raised by :func:`run_checks` when a check crashed (the other checks still ran)."""

    def __init__(self, findings: Findings) -> None:
        self.findings = findings
        super().__init__("; ".join(f.describe() for f in findings.failures))


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


def evaluate(cassette: Cassette, only: Iterable[str] | None = None) -> Findings:
    """Run the registered checks (or ``only`` these); a check that crashes is a failure, not a violation."""
    return _findings(_results(cassette, _names(only)))


def _names(only: Iterable[str] | None) -> list[str]:
    names = list(_REGISTRY) if only is None else list(only)
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        raise ReplayUsageError(f"unknown invariant {', '.join(unknown)} (known: {', '.join(sorted(_REGISTRY))})")
    return names


Result = list[Violation] | CheckFailure
"""What one check gave: its violations, or how it crashed."""


def _results(cassette: Cassette, names: list[str]) -> dict[str, Result]:
    """Each named check's result on ``cassette``, in registry order."""
    cassette = as_requests(cassette)  # histories that never reached a model are checked as if sent
    out: dict[str, Result] = {}
    shared: list[_Index] = []
    token = _CURRENT.set(shared)  # the checks of this call share one index of the cassette
    # No cyclic collection while checking: each one triggered by the checks' own allocations
    # (the per-message facts are many) walks the loaded cassettes and those facts again, which
    # made a 4x cassette cost ~5x instead of 4x. The one cycle built here (an index and its
    # views) is broken by ``release``; a user's check that builds others is collected afterwards.
    # Freezing first also files the (acyclic) loaded cassettes as old without a collection, so
    # the next stage's allocations do not trigger a full one over them (0.45 s at 10,000 requests).
    # Not while a user holds objects frozen (the unfreeze would thaw them), and not the process's
    # young cycles (collected first): filed old uncounted, no full collection ever came for them.
    # With the collector paused by the caller (``_pipeline.compare_files``) no collection can come to
    # walk anything: nothing is frozen, and what the caller's stages left young stays young for its
    # pause's own collection (frozen, a hostile cassette's cycles were filed old uncounted).
    thaw = gc.isenabled() and not gc.get_freeze_count()
    if thaw:
        gc.collect(1)
        gc.freeze()
    try:
        with paused_gc(), _facts.shared(private=True):
            for name in names:
                try:
                    out[name] = list(_REGISTRY[name](cassette))
                except Exception as exc:  # one broken check must not hide the others' findings
                    out[name] = CheckFailure(name, f"{type(exc).__name__}: {exc}")
    finally:
        for ix in shared:
            ix.release()
        if thaw:
            gc.unfreeze()
        _CURRENT.reset(token)
    return out


def _findings(results: dict[str, Result]) -> Findings:
    found = Findings()
    for result in results.values():
        if isinstance(result, CheckFailure):
            found.failures.append(result)
        else:
            found.violations.extend(result)
    return found


def _once(name: str) -> bool:
    """Whether the check under ``name`` gives equivalent cassettes the same result (run once for both).

    True for this package's own checks, which read messages only through their content and
    the normalised digests. Not for a user's check (it may read anything), nor for
    ``cache_prefix_broken``: it compares raw parts within one cassette, stamps included, so
    two stamps that are equal on one side and not on the other could change its answer.
    """
    return getattr(_REGISTRY[name], "__module__", None) in _BUILTIN_MODULES and name not in _PER_SIDE


_BUILTIN_MODULES = frozenset({__name__, f"{__package__}.verdicts"})
_PER_SIDE = frozenset({"cache_prefix_broken"})


def run_checks(cassette: Cassette, only: Iterable[str] | None = None) -> list[Violation]:
    """The violations of ``cassette``; raises :class:`CheckError` (after running them all) if a check crashed."""
    found = evaluate(cassette, only)
    if found.failures:
        raise CheckError(found)
    return found.violations


def compare(recorded: Sequence[Violation], replayed: Sequence[Violation]) -> list[Compared]:
    """Each violation of the replay marked against the recording's at the same place, then the gone ones.

    Violations pair by invariant, role and :attr:`Violation.pair`. With a :attr:`Violation.measure`
    the pair is graded (worse / better / unchanged); without one, a different identity is a new
    violation and the recording's is gone.
    """
    waiting: dict[tuple[str, str, str], list[Violation]] = {}
    for v in recorded:
        waiting.setdefault((v.invariant, v.role, v.slot()), []).append(v)
    out: list[Compared] = []
    for v in replayed:
        candidates = waiting.get((v.invariant, v.role, v.slot()), [])
        old = next((o for o in candidates if o.key() == v.key()), None)
        if old is None and candidates and (v.measure or candidates[0].measure):
            old = candidates[0]
        if old is None:
            out.append(Compared("new", v, None))
            continue
        candidates.remove(old)
        status = _grade(old, v)
        if status == "worse":
            v = _with_extra(old, v)
        out.append(Compared(status, v, old))
    out += [Compared("gone", None, v) for vs in waiting.values() for v in vs]
    return out


def _grade(old: Violation, new: Violation) -> Status:
    if not (old.measure or new.measure):
        return "unchanged"
    worse = any(x > old.measure.get(k, 0) for k, x in new.measure.items())
    better = any(x > new.measure.get(k, 0) for k, x in old.measure.items())
    return "worse" if worse else "better" if better else "unchanged"


def _with_extra(old: Violation, new: Violation) -> Violation:
    """The replay's violation naming the list items the recording's lacked (e.g. the extra messages lost)."""
    extra: list[Any] = []
    for key in new.identity:
        a, b = old.evidence.get(key), new.evidence.get(key)
        if isinstance(a, list) and isinstance(b, list):
            extra += [x for x in b if x not in a]
    if not extra:
        return new
    return replace(
        new,
        message=f"{new.message} (new since the recording: {', '.join(map(str, extra))})",
        evidence={**new.evidence, "new": extra},
    )


@dataclass
class Comparison:
    """The replay's violations graded against the recording's, and any check that crashed on either."""

    violations: list[Compared]
    failures: list[str]

    @property
    def new(self) -> list[Violation]:
        return [c.violation for c in self.violations if c.is_change]


def compare_cassettes(recorded: Cassette, replayed: Cassette) -> Comparison:
    """Both sides' violations, graded.

    A replay that only differs from its recording in timestamps and run ids
    (:meth:`replay._facts.Facts.equivalent`) gives the built-in checks the same input on both
    sides, so those run once and their result stands for both (see :func:`_once`).
    """
    names = _names(None)
    with _facts.shared() as facts:
        after = _results(replayed, names)
        if facts.equivalent(recorded, replayed):
            own = _results(recorded, [n for n in names if not _once(n)])
            before = _findings({n: own[n] if n in own else after[n] for n in names})
        else:
            before = _findings(_results(recorded, names))
    after_found = _findings(after)
    ordinals = paired_ordinals(recorded, replayed)
    if ordinals:  # concurrent conversations: the replay's requests named as the recording's in their conversation
        after_found.violations = [_as_recorded(v, ordinals) for v in after_found.violations]
    return _graded(before, after_found)


def _as_recorded(v: Violation, ordinals: dict[tuple[str, int], int]) -> Violation:
    """``v`` with its request, and the requests its measure grades (``main[17]``), named by the recording's
    ordinals: the same three conversations interleaved in another order put another conversation's turn
    at ``main[17]``, and a growth graded against that turn's read ``worse`` on one version."""

    def name(key: str) -> str:
        ordinal = key.removeprefix(f"{v.role}[").removesuffix("]")
        if key == f"{v.role}[{ordinal}]" and ordinal.isdigit():
            return f"{v.role}[{ordinals.get((v.role, int(ordinal)), int(ordinal))}]"
        return key

    index = ordinals.get((v.role, v.index), v.index) if v.index is not None else None
    return dataclasses.replace(v, index=index, measure={name(k): x for k, x in v.measure.items()})


def _graded(before: Findings, after: Findings) -> Comparison:
    failures = [f"recording: {f.describe()}" for f in before.failures]
    failures += [f"replay: {f.describe()}" for f in after.failures]
    return Comparison(compare(before.violations, after.violations), failures)


def new_violations(recorded: Cassette, replayed: Cassette) -> list[Violation]:
    """Violations of the replay that are new or worse than the recording's.

    When the recording broke the same invariant at the same place, the replay's violation
    says what is new in it (``evidence["new"]``: e.g. the extra messages lost), so a release
    that makes a known loss worse names exactly what it adds.
    """
    return compare_cassettes(recorded, replayed).new


# --------------------------------------------------------------------------- message helpers


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _ws(text: str) -> str:
    return " ".join(text.split())


def _parts(message: Message) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _segments(part: dict[str, Any]) -> list[str]:
    """A part's texts; kept user copies (0.62) hold a list of ``TextContent`` dicts instead of a string."""
    content = part.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        items = [c if isinstance(c, str) else c.get("content") if isinstance(c, dict) else None for c in content]
        return [i for i in items if isinstance(i, str)]
    return []


def _part_text(part: dict[str, Any]) -> str:
    return " ".join(_segments(part))


def _harness_data(item: Any) -> bool:
    """A prompt content item the harness put there as data (``metadata.origin`` ``pydantic-ai-harness.…``:
    a BackgroundTools result): "not a user message", capped for the summarizer like a tool return.

    Or ``Memory``'s snapshot as 0.52-0.60 mark it, with a bare string for metadata
    (``pydantic-ai-harness.memory.v1:<scope>``; "a known gap" of the origin rule, 0.60's compaction says):
    the store's contents injected into the request, never the user's words — 0.62 gives it an ``origin``."""
    if not isinstance(item, dict):
        return False
    meta = item.get("metadata")
    if isinstance(meta, str):
        return _memory_snapshot(meta)
    origin = meta.get("origin") if isinstance(meta, dict) else None
    return isinstance(origin, str) and origin.startswith("pydantic-ai-harness.")


_MEMORY_MARK = "pydantic-ai-harness.memory.v1"


def _memory_snapshot(meta: str) -> bool:
    """Whether a text item's string metadata is ``Memory``'s snapshot marker (0.52-0.60), scoped or bare."""
    return meta == _MEMORY_MARK or meta.startswith(_MEMORY_MARK + ":")


def _carries_harness_data(part: dict[str, Any]) -> bool:
    """Whether a part's content holds any of the harness's own data items (else its user text is its text)."""
    content = part.get("content")
    return isinstance(content, list) and any(_harness_data(c) for c in content)


_VOICE_TAG = re.compile(r"<(?=\s*(?:/\s*)?system(?=[\s/>]|$))", re.IGNORECASE)
"""The ``<`` of an opening or closing ``<system>`` tag, in every spelling pydantic-ai's ``_framing`` escapes."""


def _system_voiced(part: dict[str, Any]) -> bool:
    """Whether a user prompt is a system prompt as pydantic-ai sends one to a model with no
    mid-conversation system role: its whole text one ``<system>…</system>`` block (``_framing.wrap``,
    which escapes every other ``<system>`` tag in the body, so the block's own are its only two).

    Such a part is a ``SystemPromptPart`` of the run's history (a harness reminder kept there, an
    ``LLMReminder``'s note): system text, not a user's or the model's words, as the summarizer's
    transcript says too (``<message role="system">``, the tags gone). A model with that role is sent
    the very part as ``system-prompt``, which no check counts as lost either."""
    content = part.get("content")
    if not isinstance(content, str):
        return False
    text = content.strip()
    return text.startswith("<system>") and text.endswith("</system>") and len(_VOICE_TAG.findall(text)) == 2


def _user_text(part: dict[str, Any]) -> str:
    """A part's text as something a user or the model said: without the harness's own data items."""
    if _carries_harness_data(part):
        return _part_text({"content": [c for c in part["content"] if not _harness_data(c)]})
    return _part_text(part)


def _part_key(part: dict[str, Any]) -> tuple[Any, ...]:
    if part.get("tool_call_id") is not None:
        return (part.get("part_kind"), _hashable(part.get("tool_name")), _hashable(part.get("tool_call_id")))
    if part.get("part_kind") == "user-prompt" and _system_voiced(part):
        # a system prompt as sent to a model with no mid-conversation system role: the history's part, in the
        # <system> block pydantic-ai wraps it in (0.62 keeps an LLMReminder's note so: not an edit of the history)
        return ("text", _ws(str(part["content"]).strip()[len("<system>") : -len("</system>")]))
    return ("text", _ws(_part_text(part)))


def _text(message: Message) -> str:
    return " ".join(_part_text(p) for p in _parts(message))


def _hand_chars(message: Message) -> int:
    """The characters the harness's estimate counts, by hand: each text segment's length, nothing between
    them (``_count_segments``). ``len(_text())`` counted the spaces joining parts, so a history of five
    requests read 5 tokens and the same text merged into one request 6: a growth that never happened."""
    return sum(len(text) for part in _parts(message) for text in _segments(part))


_TOKEN = re.compile(r"\w+|[^\w\s]")
_GRAM = 3


def _tokens(message: Message) -> list[str]:
    return _TOKEN.findall(_text(message))


def _request_scoped(message: Message) -> set[int]:
    """Parts of a request sent with it alone, never kept in history (reminders, a plan): its trailing
    ``__pydantic_ai__.request_scoped_tail`` parts (slim 2.6x), and user prompts that open with a cache
    point — how the harness appends a reminder or a plan (0.55 on); a user's own prompt cannot open
    with one (Anthropic and Bedrock refuse a leading cache point, so the harness never writes one)."""
    parts = _parts(message)
    meta = message.get("metadata")
    inner = meta.get("__pydantic_ai__") if isinstance(meta, dict) else None
    tail = inner.get("request_scoped_tail") if isinstance(inner, dict) else None
    scoped = set(range(len(parts) - tail, len(parts))) if type(tail) is int and 0 < tail <= len(parts) else set()
    scoped.update(k for k, p in enumerate(parts) if p.get("part_kind") == "user-prompt" and _opens_with_cache_point(p))
    return scoped


def _opens_with_cache_point(part: dict[str, Any]) -> bool:
    content = part.get("content")
    return isinstance(content, list) and bool(content) and isinstance(content[0], dict) and content[0].get("kind") == "cache-point"


def _request_only_chars(message: Message) -> int:
    """Characters of what a request carried for itself alone and no history keeps, as the harness's estimate
    counts them: user prompts that open with a cache point (a reminder or a plan, 0.55 on) and ``Memory``'s
    snapshot as 0.52-0.60 inject it (:func:`_memory_snapshot`). Not a ``request_scoped_tail``: 0.62 keeps
    those reminders in the history, as system prompts, so the uncompacted history has them already."""
    if message.get("kind") != "request":
        return 0
    total = 0
    for part in _parts(message):
        if part.get("part_kind") != "user-prompt":
            continue
        content = part.get("content")
        if _opens_with_cache_point(part):
            total += sum(len(t) for t in _segments(part))
        elif isinstance(content, list):
            total += sum(len(c["content"]) for c in content if isinstance(c, dict) and isinstance(c.get("content"), str)
                         and isinstance(c.get("metadata"), str) and _memory_snapshot(c["metadata"]))
    return total


def _needles(message: Message) -> list[list[str]]:
    return _words(message)[1]


def _words(message: Message) -> tuple[list[str], list[list[str]]]:
    """``(_tokens(message), _needles(message))`` from one tokenisation of each part.

    The same: ``_text`` joins the part texts with a space, which no token contains or spans, so
    its tokens are each part's tokens one after the other; the needles are some parts' tokens:
    user and assistant texts, not the reminders a request carried for itself alone (the history a
    compaction is given never had them: README, "Reminders ... never counted as lost"), nor system
    prompts sent as ``<system>`` user text (:func:`_system_voiced`).
    """
    parts = _parts(message)
    per = [(p.get("part_kind"), _TOKEN.findall(_part_text(p))) for p in parts]
    scoped = _request_scoped(message) if message.get("kind") == "request" else ()
    needles = [
        # harness data is not a user's words; a prompt without any is its text, already tokenised
        _TOKEN.findall(_user_text(parts[k])) if kind == "user-prompt" and _carries_harness_data(parts[k]) else ts
        for k, (kind, ts) in enumerate(per)
        if ts and kind in ("user-prompt", "text") and k not in scoped and not (kind == "user-prompt" and _system_voiced(parts[k]))
    ]
    return [t for _, ts in per for t in ts], [ts for ts in needles if ts]


class _Grams:
    """A text tokenised once (words and single punctuation marks) for word-bounded lookups.

    Holds every run of 1 to 3 consecutive tokens, so a message of up to 3 tokens is found
    exactly where it occurs as whole words (``U1`` never inside ``U10``), and a longer one when
    every run of 3 of its tokens occurs. Building and each lookup are linear; no per-message
    rescan of the whole text. The runs of 3 and the shorter ones are built on first need: most
    texts looked for are longer than 3 tokens, and many texts are never looked in at all.
    """

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._triples: set[tuple[str, ...]] | None = None
        self._shorter: set[tuple[str, ...]] | None = None

    def has(self, needle: list[str]) -> bool:
        t = self.tokens
        if len(needle) >= _GRAM:
            if self._triples is None:
                self._triples = set(zip(t, t[1:], t[2:]))
            return self._triples.issuperset(zip(needle, needle[1:], needle[2:]))
        if self._shorter is None:
            self._shorter = set(zip(t))
            self._shorter.update(zip(t, t[1:]))
        return tuple(needle) in self._shorter


# --------------------------------------------------------------------------- token estimates


def _exact(messages: list[Message]) -> int:
    """The harness estimate of ``messages``; if this pydantic-ai cannot load them (a part kind a later
    slim added, checked under an older one), the same formula by hand: their characters plus the last
    instructions', over 4. Without the instructions, a history an older slim could not load measured
    37 tokens against 279 for the compacted request it could, and a recording's violation read as gone."""
    try:
        found = estimate(load_messages(messages))
    except Exception:
        found = None
    return found if found is not None else _by_hand(messages)


def _by_hand(messages: list[Message]) -> int:
    """The harness's estimate formula applied by hand: the messages' text plus the last instructions, over 4."""
    instructions = next((n for n in map(_instructions_chars, reversed(messages)) if n), 0)
    return (sum(_hand_chars(m) for m in messages) + instructions) // 4


def _additive(message: Message) -> bool:
    """Whether the harness counts this message on its own (instruction deltas depend on their neighbours)."""
    return not any(str(p.get("part_kind", "")).startswith("instruction") for p in _parts(message))


def _message_chars(message: Message, loaded: list[Any] | None = None) -> int | None:
    """Characters the harness estimate counts for ``message`` alone, instructions left out.

    The estimate is ``(message characters + the last instructions) // 4``; four copies of the
    message make the floor exact. None when the message cannot be counted on its own. Shared
    by both sides of a comparison through ``replay._facts`` (one estimate per distinct content);
    ``loaded`` is the message as loaded there, whose copy without instructions is what loading
    the message without them gives. The harness's estimate with ``len`` as its tokenizer counts
    the same segments' characters without the floor, so one copy gives the four copies' figure.
    """
    if not _additive(message):
        return None
    if loaded is not None:
        return _ONE_PASS.use(lambda: _one_pass_chars(message, loaded), lambda: _full_chars(message, loaded))
    return _full_chars(message, loaded)


_ONE_PASS = _facts.OnePass()


def _one_pass_chars(message: Message, loaded: list[Any]) -> int | None:
    n = _facts.counted(loaded)
    return None if n is None else n - _instructions_chars(message)


def _full_chars(message: Message, loaded: list[Any] | None) -> int | None:
    if loaded is not None:
        try:
            copies = [replace(loaded[0], instructions=None)] if message.get("instructions") else loaded
        except Exception:  # not a request after all: load it without instructions, as below
            copies = None
        if copies is not None:
            counted = _characters(copies)
            if counted is None:
                counted = estimate(copies * 4)
            return counted if counted is not None else _hand_chars(message)
    bare = {**message, "instructions": None} if message.get("instructions") else message
    found: int | None
    try:
        loaded = load_messages([bare])
        found = estimate(loaded * 4)
    except Exception:
        found = None
    if found is None:
        found = _hand_chars(message)
    return found


_facts.derive("chars", _message_chars)


def _characters(messages: list[Any]) -> int | None:
    """The characters the installed harness's estimate counts in ``messages`` (its tokenizer hook
    called with ``len`` on each segment), or None if it cannot count them that way."""
    try:
        from pydantic_ai_harness.compaction import estimate_token_count

        return int(estimate_token_count(messages, len))
    except Exception:
        return None


def _instructions_chars(message: Message) -> int:
    text = message.get("instructions")
    return len(text) if message.get("kind") == "request" and isinstance(text, str) and text else 0


# --------------------------------------------------------------------------- the cassette's structure


def _is_compaction(c: Cassette, ex: Exchange) -> bool:
    """A call that produces a summary: a harness compaction agent's request, or a provider-side compaction."""
    if ex.kind == "compact_messages":
        return True
    origin = c.header.roles.get(ex.role, "")
    if origin == OBSERVED:  # a history handed over with run.observe_messages, whatever its name
        return False
    return "compaction" in (origin if is_harness_module(origin) else ex.role)


def _is_main_request(ex: Exchange, user_roles: set[str]) -> bool:
    return ex.role in user_roles and ex.kind in ("request", "request_stream")


def _run_failed(c: Cassette, ex: Exchange) -> bool:
    return ex.run is not None and 0 <= ex.run < len(c.runs) and c.runs[ex.run].error is not None


_LEGACY_SUMMARY = "Summary of previous conversation:\n\n"
"""How harness releases up to 0.61 wrote a summary: a system prompt opening with this (their
``SUMMARY_PREFIX``; 0.62 still recognises one by it, ``is_legacy_summary``)."""


def _legacy_summary(part: dict[str, Any]) -> bool:
    if part.get("part_kind") != "system-prompt":  # asked of every part of every request: the cheap test first
        return False
    content = part.get("content")
    return isinstance(content, str) and content.startswith(_LEGACY_SUMMARY) and part.get("scope") != "request"


def _summary_part(part: dict[str, Any]) -> bool:
    """A part that carries a compaction's summary: a compaction part, one the harness marks as a summary,
    or a system prompt holding one the way releases up to 0.61 wrote it (:data:`_LEGACY_SUMMARY`)."""
    if part.get("part_kind") == "compaction" or _legacy_summary(part):
        return True
    meta = part.get("metadata")
    return isinstance(meta, dict) and any(isinstance(k, str) and ".compaction.summary" in k for k in meta)


def _summary_of(part: dict[str, Any]) -> str:
    """The summary a summary part carries, without the framing a legacy one opens with."""
    text = _part_text(part)
    return text[len(_LEGACY_SUMMARY):] if _legacy_summary(part) else text


_NOT_YET: Any = object()
"""A fact not computed yet (``None`` is one: a message not counted alone)."""


class _Seq:
    """An append-only uncompacted history shared by chained runs, with prefix sums for O(1) estimates."""

    def __init__(self, index: _Index) -> None:
        self.ix = index
        self.ids: list[int] = []
        self.chars = [0]
        self.instructions = [0]
        self.uncounted = [0]
        self.unloadable = [0]
        """Prefix counts of messages the installed pydantic-ai cannot load (``_Index.loadable``), filled
        on first use: only compacted requests ask, and a history's messages are looked up once."""
        self.responses = [0]
        self.at: dict[bytes, list[int]] = {}
        """Positions of each response message, to count those in a prefix."""

    def extend(self, ids: Iterable[int]) -> None:
        # Every message of every run goes through here: locals and the index's memos read directly.
        ix = self.ix
        chars_of, instr_of, response_ids = ix._chars, ix._instr, ix.response_ids
        own_ids, chars, uncounted, instructions, responses = self.ids, self.chars, self.uncounted, self.instructions, self.responses
        for i in ids:
            pos = len(own_ids)
            own_ids.append(i)
            ch = chars_of.get(i, _NOT_YET)
            if ch is _NOT_YET:
                ch = ix.chars(i)
            chars.append(chars[-1] + (ch or 0))
            uncounted.append(uncounted[-1] + (ch is None))
            n = instr_of.get(i)
            instructions.append((n if n is not None else ix.instr(i)) or instructions[-1])
            is_response = i in response_ids
            responses.append(responses[-1] + is_response)
            if is_response:
                self.at.setdefault(ix.norm[i], []).append(pos)

    def unloadable_to(self, length: int) -> int:
        marks = self.unloadable
        while len(marks) <= length:
            marks.append(marks[-1] + (not self.ix.loadable((self.ids[len(marks) - 1],))))
        return marks[length]

    def branch(self, length: int) -> _Seq:
        """This history up to ``length``, ready to be extended (a copy only when someone extended it further)."""
        if length == len(self.ids):
            return self
        out = _Seq(self.ix)
        out.extend(self.ids[:length])
        return out

    def estimate(self, length: int, extra: int = 0) -> int:
        """The first ``length`` messages' estimate, with ``extra`` characters sent along (request-only parts)."""
        if self.uncounted[length]:
            return _exact([self.ix.msg(i) for i in self.ids[:length]]) + extra // 4
        return (self.chars[length] + self.instructions[length] + extra) // 4

    def responses_missing(self, length: int, sent: list[int]) -> bool:
        """Whether a response of this history's first ``length`` messages is not in ``sent`` (counting repeats)."""
        want = self.responses[length]
        if not want:
            return False
        ix, have = self.ix, 0
        for d, n in Counter(ix.norm[i] for i in sent if i in ix.response_ids).items():
            if d in self.at:
                have += min(n, bisect_left(self.at[d], length))
        return have < want


@dataclass
class _View:
    """One main request next to what it would have been."""

    exchange: Exchange
    run: AgentRunRecord
    source_ids: list[int]
    """The run's starting history plus its own messages up to this request: what a compaction got."""
    logical: _Seq
    length: int
    """The uncompacted conversation up to this request is ``logical.ids[:length]`` (chained runs followed back)."""


_INSTALLED_SLIM: list[tuple[int, ...] | None] = []


def _release(text: str | None) -> tuple[int, ...] | None:
    found = re.match(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(x) for x in found.group().split(".")) if found else None


def _newer_than_installed(recorded: str | None) -> bool:
    """Whether a cassette's slim release is later than the installed one's (unknown either way: assume so)."""
    if not _INSTALLED_SLIM:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _INSTALLED_SLIM.append(_release(version("pydantic-ai-slim")))
        except PackageNotFoundError:
            _INSTALLED_SLIM.append(None)
    installed, theirs = _INSTALLED_SLIM[0], _release(recorded)
    return installed is None or theirs is None or theirs > installed


class _Index:
    """What the checks need from one cassette, each fact computed once."""

    def __init__(self, c: Cassette) -> None:
        self.c = c
        self.facts = _facts.current()
        """Per-message facts shared with the other side of a comparison (and the diff)."""
        self.user_roles = c.user_roles()
        self.extra: list[Message] = []
        """Messages rebuilt by the checks (a prompt a compaction dropped), numbered after the table."""
        self._chars: dict[int, int | None] = {}
        self._words: dict[int, tuple[list[str], list[list[str]]]] = {}
        self._texts: dict[int, tuple[str, list[str]]] = {}
        self._instr: dict[int, int] = {}
        self._request_only: dict[int, int] = {}
        self._loadable: dict[int, bool] = {}
        self.newer_slim = _newer_than_installed(c.header.slim_version)
        """Recorded by a later pydantic-ai-slim than this one: a message may hold what this one cannot load."""
        self._norm: list[bytes] | None = None
        self._views: dict[str, list[_View]] | None = None
        self._summary_ids: set[int] | None = None
        self._summary_texts: dict[int, frozenset[str]] = {}
        compactions = [e for e in c.exchanges if _is_compaction(c, e)]
        self.compactions = sorted(compactions, key=lambda e: e.seq)
        self.compaction_seqs = [e.seq for e in self.compactions]
        self._inside: dict[int, tuple[list[Exchange], list[int]]] | None = None
        self.response_ids = {i for i, m in enumerate(c.messages) if m.get("kind") == "response"}

    def release(self) -> None:
        """Drop the views: they refer back to this index, and such a cycle (holding every fact of the
        comparison) would wait for the next full collection, which then walks the loaded cassettes."""
        self._views = None

    def msg(self, i: int) -> Message:
        n = len(self.c.messages)
        return self.c.messages[i] if i < n else self.extra[i - n]

    def add(self, message: Message) -> int:
        self.extra.append(message)
        return len(self.c.messages) + len(self.extra) - 1

    def part_keys(self, ids: Iterable[int]) -> Counter[tuple[Any, ...]]:
        """The parts of these messages, by text (whatever part carries it) or by tool call id, counting repeats."""
        return Counter(_part_key(p) for i in ids for p in _parts(self.msg(i)))

    def expand(self, ids: Iterable[int]) -> list[Message]:
        return [self.msg(i) for i in ids]

    def _fact(self, kind: str, i: int, compute: Callable[[Message], Any]) -> Any:
        """``compute(message i)``, shared by content with the other side (a rebuilt message: computed here).

        Callers keep what it returns per index, so a cassette checked alone computes it directly."""
        if i < len(self.c.messages) and not self.facts.private:
            return self.facts.get(kind, self.c, i, compute)
        return compute(self.msg(i))

    def key(self, i: int) -> Hashable:
        """Message ``i``'s key in the facts (``replay._facts``)."""
        return self.facts.key(self.c, i) if i < len(self.c.messages) else _facts.content_key(self.msg(i))

    def tokens(self, i: int) -> list[str]:
        """The words and marks of a message's text, tokenised once."""
        return self.words(i)[0]

    def needles(self, i: int) -> list[list[str]]:
        """The tokens of each non-empty user or assistant text of a message: what a compaction must not lose."""
        return self.words(i)[1]

    def texts(self, i: int) -> tuple[str, list[str]]:
        """:func:`_texts` of a message (what :meth:`words` tokenises), built once."""
        found = self._texts.get(i)
        if found is None:
            found = self._texts[i] = self._fact("texts", i, _texts)
        return found

    def words(self, i: int) -> tuple[list[str], list[list[str]]]:
        """:meth:`tokens` and :meth:`needles` of a message, from one tokenisation (most messages need both)."""
        found = self._words.get(i)
        if found is None:
            found = self._words[i] = self._fact("words", i, _words)
        return found

    def chars(self, i: int) -> int | None:
        if i not in self._chars:
            if i < len(self.c.messages):  # computed from the message's load with its size (_facts.derive)
                self._chars[i] = self.facts.from_loaded("chars", self.c, i)
            else:
                self._chars[i] = _message_chars(self.msg(i))
        return self._chars[i]

    def loadable(self, ids: Iterable[int]) -> bool:
        """Whether the installed pydantic-ai can load every one of these messages. A cassette recorded by
        a later slim, checked under an earlier one (a matrix cell), can hold part kinds it does not know
        (``instruction-baseline``); the harness cannot estimate such a history, and one request measured
        by the harness on one side and by hand on the other read as grown (a recording's violation as gone)."""
        if not self.newer_slim:  # a slim reads what it and earlier ones wrote: nothing to look up
            return True
        ok = self._loadable
        for i in ids:
            found = ok.get(i)
            if found is None:
                c = self.c
                found = ok[i] = i >= len(c.messages) or self.facts.from_loaded("loadable", c, i)
            if not found:
                return False
        return True

    def request_only(self, ids: Iterable[int]) -> int:
        """:func:`_request_only_chars` of these messages, summed (each message's figure computed once)."""
        memo = self._request_only
        total = 0
        for i in ids:
            n = memo.get(i)
            if n is None:
                n = memo[i] = self._fact("request_only", i, _request_only_chars)
            total += n
        return total

    def instr(self, i: int) -> int:
        if i not in self._instr:
            self._instr[i] = _instructions_chars(self.msg(i))
        return self._instr[i]

    def estimate(self, ids: list[int], *, per_message: bool = False) -> int:
        """The harness's estimate of ``ids``: the sum of each message's characters plus the last
        instructions, over 4 — or, where a message is not counted alone (instruction deltas), the
        harness on the whole list. ``per_message``: every message alone, by hand where the harness
        cannot count it (a later slim's parts under an earlier one), so two sides share one ruler."""
        # Called for every main request over every message it sends: the per-index memos are read
        # here directly, the methods only called for an index not seen yet.
        chars_of, instr_of = self._chars, self._instr
        total, instructions = 0, 0
        for i in ids:
            ch = chars_of.get(i, _NOT_YET)
            if ch is _NOT_YET:
                ch = self.chars(i)
            if ch is None:
                if not per_message:
                    return _exact(self.expand(ids))
                ch = _hand_chars(self.msg(i))
            total += ch
            n = instr_of.get(i)
            instructions = (n if n is not None else self.instr(i)) or instructions
        return (total + instructions) // 4

    @property
    def norm(self) -> list[bytes]:
        if self._norm is None:
            n = Normaliser()
            facts, c = self.facts, self.c
            if facts.private:
                self._norm = [digest(n.value(m, ANY_CLASS)) for m in c.messages]
            else:  # one digest per content for both sides, unless an alias was needed (see Facts.shareable)
                aliases = n.aliases

                def compute(m: Message) -> tuple[bytes, bool]:
                    used = aliases.used
                    found = digest(n.value(m, ANY_CLASS))
                    return found, aliases.used == used

                self._norm = [facts.shareable("norm", c, i, compute) for i in range(len(c.messages))]
        return self._norm

    def has_summary(self, ids: list[int]) -> bool:
        if self._summary_ids is None:
            self._summary_ids = {i for i, m in enumerate(self.c.messages) if any(_summary_part(p) for p in _parts(m))}
        return not self._summary_ids.isdisjoint(ids)

    def window(self, after_seq: int, before_seq: int) -> list[Exchange]:
        """Compaction calls between two main requests whose answer reached the harness (no error)."""
        return self.answered(self.compactions, self.compaction_seqs, after_seq, before_seq)

    def answered(self, calls: list[Exchange], seqs: list[int], after_seq: int, before_seq: int) -> list[Exchange]:
        """Those of ``calls`` (in ``seq`` order, ``seqs`` theirs) strictly between two seqs whose answer reached
        the harness: a bisection, so a long conversation's requests each pay for their own window only."""
        lo = bisect_left(seqs, after_seq + 1)
        hi = bisect_left(seqs, before_seq)
        return [e for e in calls[lo:hi] if e.error is None and e.response is not None and not _run_failed(self.c, e)]

    def calls_inside(self) -> dict[int, tuple[list[Exchange], list[int]]]:
        """Each agent run's compaction calls made inside it (their run's ``parent``), in ``seq`` order."""
        if self._inside is None:
            runs = self.c.runs
            by_parent: dict[int, list[Exchange]] = {}
            for e in self.compactions:
                parent = runs[e.run].parent if e.run is not None and 0 <= e.run < len(runs) else None
                if parent is not None:
                    by_parent.setdefault(parent, []).append(e)
            self._inside = {p: (calls, [e.seq for e in calls]) for p, calls in by_parent.items()}
        return self._inside

    def compacted(self, v: _View, window: bool) -> bool:
        """Whether a compaction shaped this request: it carries a summary, it lacks earlier responses, or a
        compaction ran since the role's previous request and something the run had is not sent.

        Additions alone (a plan appended each request) and a request-scoped reminder kept in
        history but not re-sent are not compaction.
        """
        sent = v.exchange.messages
        if self.has_summary(sent) or v.logical.responses_missing(v.length, sent):
            return True
        if not window:
            return False
        return bool(self.part_keys(v.source_ids) - self.part_keys(sent))

    def views(self) -> dict[str, list[_View]]:
        if self._views is None:
            self._views = self._build_views()
        return self._views

    def _build_views(self) -> dict[str, list[_View]]:
        """Main requests per user role, with their source and uncompacted (logical) histories.

        A run is chained when its ``message_history`` is an earlier run's result: then its
        logical history is that run's logical history, not the (possibly compacted) one it got.
        """
        c, norm = self.c, self.norm
        by_run: dict[int, list[Exchange]] = {}
        for ex in c.exchanges:
            if ex.run is not None and _is_main_request(ex, self.user_roles):
                by_run.setdefault(ex.run, []).append(ex)
        # every message of these runs is sized below (``_Seq.extend``): loaded in batches first
        needed = {i for r, xs in by_run.items() for ex in xs for i in ex.messages}
        needed.update(i for run in c.runs if run.role in self.user_roles for i in (*run.history, *run.result))
        self.facts.preload(c, (i for i in needed if 0 <= i < len(c.messages)))
        ended: dict[tuple[str, tuple[bytes, ...]], tuple[_Seq, int]] = {}
        views: dict[str, list[_View]] = {}
        for r, run in enumerate(c.runs):
            if run.role not in self.user_roles:
                continue
            base = ended.get((run.role, tuple(norm[i] for i in run.history))) if run.history else None
            if base is None:
                seq = _Seq(self)
                seq.extend(run.history)
                start = len(seq.ids)
            else:
                seq = base[0].branch(base[1])
                start = base[1]
            new = self._new_messages(run, by_run.get(r, []))
            seq.extend(new)
            ended[(run.role, tuple(norm[i] for i in run.result))] = (seq, len(seq.ids))
            responses = [k for k, i in enumerate(new) if i in self.response_ids]
            ordinal = 0
            previous: _View | None = None
            for ex in by_run.get(r, []):
                upto = responses[ordinal] if ordinal < len(responses) else len(new)
                source = [*run.history, *new[:upto]]
                if previous is not None and self._compacted_shape(previous):
                    source = self._after_compaction(previous.exchange, ex)
                view = _View(ex, run, source, seq, start + upto)
                views.setdefault(ex.role, []).append(view)
                if ex.error is None:
                    ordinal += 1
                    previous = view
        for role_views in views.values():
            role_views.sort(key=lambda v: v.exchange.seq)
        return views

    def _compacted_shape(self, v: _View) -> bool:
        """Whether a request was sent compacted: it carries a summary or lacks an earlier response."""
        sent = v.exchange.messages
        return v.exchange.response is not None and (self.has_summary(sent) or v.logical.responses_missing(v.length, sent))

    def _after_compaction(self, previous: Exchange, ex: Exchange) -> list[int]:
        """What a compaction before ``ex`` got, when an earlier compaction in the same run already
        replaced the run's history: the previous request as sent, its answer, and what ``ex`` adds.

        Not the run's starting history plus its own messages: what the first compaction summarized
        is the summary now, and the second summarizer is given that (a second compaction in one
        run was flagged for losing what the first had summarized). Nor positions in the run's
        result, which the compactions shortened (a later answer was counted as already there).
        """
        before = {*previous.messages, previous.response}
        added = [i for i in ex.messages if i not in before and not self.has_summary([i])]
        sent = list(previous.messages)
        if sent:  # its last message as the run keeps it, not as that one request was sent
            sent[-1] = self._persisted(sent[-1])
        return [*sent, previous.response, *added]  # type: ignore[list-item]

    def _persisted(self, i: int, kept: Counter[tuple[Any, ...]] | None = None) -> int:
        """A tool loop's request without the user prompts appended after its tool results (a reminder,
        a plan: the harness adds them to the one request it sends, never to the run's history — 0.56
        marks neither with a cache point nor with metadata, so a loss check took them for lost).

        ``kept``: the parts the run is known to have kept (re-sent by a later request, or in its result);
        a prompt among them stays — a ``TrajectoryJudge``'s steering is enqueued into the run's history."""
        message = self.msg(i)
        parts = _parts(message)
        last_return = max((k for k, p in enumerate(parts) if p.get("part_kind") in ("tool-return", "retry-prompt")), default=None)
        if last_return is None or message.get("kind") != "request":
            return i
        if not any(p.get("part_kind") == "user-prompt" for p in parts[last_return + 1 :]):
            return i
        stays = [p for p in parts[last_return + 1 :] if kept and p.get("part_kind") == "user-prompt" and kept[_part_key(p)]]
        return self.add({**message, "parts": parts[: last_return + 1] + stays})

    def _new_messages(self, run: AgentRunRecord, exchanges: Sequence[Exchange] = ()) -> list[int]:
        """What the run added to the conversation: its prompt request and everything after it.

        A compaction can drop the prompt from the run's result too (harness 0.54 with
        ``keep_user_messages=True``); then the prompt is rebuilt from ``run.prompt`` and the run's
        own messages start at its first new response. A compaction inside the run (a long tool loop)
        can leave fewer of its answers in the result than it made requests: then the run is read
        from its requests instead — its prompt, and each answer followed by what the next request
        added (the tool results) — or the uncompacted history it is measured against is missing
        turns, and requests that only gained a reminder read as compacted and grown.
        """
        found = self._new_from_result(run)
        answered = [ex for ex in exchanges if ex.response is not None and ex.error is None]
        if len(answered) > sum(i in self.response_ids for i in found) and answered[0].messages:
            # what a later request re-sent (its earlier messages) or the run kept: history, not one request's own
            kept = self.part_keys([*run.result, *(i for ex in answered for i in ex.messages[:-1])])
            rebuilt = [answered[0].messages[-1]]
            for ex, nxt in zip(answered, [*answered[1:], None]):
                rebuilt.append(ex.response)  # type: ignore[arg-type]
                if nxt is not None and nxt.messages and nxt.messages[-1] not in (ex.response, *rebuilt):
                    rebuilt.append(self._persisted(nxt.messages[-1], kept))
            return rebuilt
        return self._without_summaries(self._as_first_sent(found, answered))

    def _without_summaries(self, ids: list[int]) -> list[int]:
        """The run's own messages without a summary a compaction inside the run put among them (0.62 keeps
        its compaction part in the prompt's request): the uncompacted history never had one, and counting it
        there hid a summary that only added to the request."""
        out = []
        for i in ids:
            message = self.msg(i)
            parts = _parts(message)
            if message.get("kind") == "request" and any(_summary_part(p) for p in parts):
                kept = [p for p in parts if not _summary_part(p)]
                if not kept:
                    continue
                i = self.add({**message, "parts": kept})
            out.append(i)
        return out

    def _as_first_sent(self, found: list[int], answered: list[Exchange]) -> list[int]:
        """The run's tool results as the model was first sent them, where the run's result holds them edited.

        A compaction tier that edits results in place (``ClearToolResults`` in a ``TieredCompaction``: "[tool
        result cleared]") edits the run's history too, and the uncompacted history read from it was missing
        what was cleared: a later request, compacted to less than the real history, read as grown. Each
        request that first carried a set of tool results is the last message of the request after it.
        """
        first: dict[tuple[Any, ...], int] = {}
        for ex in answered[1:]:
            if ex.messages:
                ids = self._return_ids(ex.messages[-1])
                if ids and ids not in first:
                    first[ids] = ex.messages[-1]
        if not first:
            return found
        out = []
        for i in found:
            ids = self._return_ids(i)
            sent = first.get(ids) if ids else None
            if sent is not None and sent != i and self._returns(sent) != self._returns(i):
                # the results as sent, in the message as the run keeps it (a reminder kept there stays)
                was = iter([p for p in _parts(self.msg(sent)) if p.get("part_kind") in ("tool-return", "retry-prompt")])
                message = self.msg(i)
                parts = [next(was) if p.get("part_kind") in ("tool-return", "retry-prompt") else p for p in _parts(message)]
                i = self.add({**message, "parts": parts})
            out.append(i)
        return out

    def _return_ids(self, i: int) -> tuple[Any, ...]:
        """The tool call ids a request's tool results answer, in order (empty for any other message)."""
        message = self.msg(i)
        if message.get("kind") != "request":
            return ()
        return tuple(_hashable(p.get("tool_call_id")) for p in _parts(message) if p.get("part_kind") in ("tool-return", "retry-prompt"))

    def _returns(self, i: int) -> list[Any]:
        return [_hashable(p.get("content")) for p in _parts(self.msg(i)) if p.get("part_kind") in ("tool-return", "retry-prompt")]

    def _new_from_result(self, run: AgentRunRecord) -> list[int]:
        result, norm = run.result, self.norm
        prompt = _ws(_part_text({"content": run.prompt})) if run.prompt is not None else ""
        if prompt:
            # The run's own prompt is none of the messages it was handed: a compaction can leave the run's
            # result without it (summarized) but holding an earlier turn's prompt alike ("Read page 1 of the
            # invoice." for "Read page 3 …", or the same "continue"), which is history, not this run's request.
            handed = Counter(norm[i] for i in run.history)
            old = set()
            for k, i in enumerate(result):
                if handed[norm[i]]:
                    handed[norm[i]] -= 1
                    old.add(k)
            for i in range(len(result) - 1, -1, -1):
                m = self.c.messages[result[i]]
                if i not in old and m.get("kind") == "request" and any(
                    p.get("part_kind") == "user-prompt" and _ws(_part_text(p)) == prompt for p in _parts(m)
                ):
                    return result[i:]
            # A capability may rewrite the prompt in the run's history as well as in what it sends (an
            # InputGuardrail's `replace`, a redaction): the run holds that prompt, edited inside.
            words = _TOKEN.findall(prompt)
            for i in range(len(result) - 1, -1, -1):
                m = self.c.messages[result[i]]
                if i not in old and m.get("kind") == "request" and any(
                    p.get("part_kind") == "user-prompt" and _rewritten(words, _TOKEN.findall(_part_text(p)))
                    for p in _parts(m)
                ):
                    return result[i:]
        before = {norm[i] for i in run.history}
        first = next(
            (k for k, i in enumerate(result) if self.c.messages[i].get("kind") == "response" and norm[i] not in before),
            len(result),
        )
        if not prompt:
            # A run resumed without a prompt (``deferred_tool_results``: an approval, an external tool's result)
            # opens with the request carrying those results, just before its first answer: the run's own, not
            # the history's. Starting at the answer left every deferred result out of the uncompacted history,
            # and a compaction that halved a resumed run's request read as grown (30 tokens before, 229 after).
            while first > 0 and self.c.messages[result[first - 1]].get("kind") == "request" and norm[result[first - 1]] not in before:
                first -= 1
            return result[first:]
        rebuilt = [self.add({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": run.prompt}]})]
        return rebuilt + result[first:]


def _rewritten(words: list[str], tokens: list[str]) -> bool:
    """Whether ``tokens`` are the prompt ``words`` edited in one place, as a redaction leaves them: the
    same opening and the same ending, together at least 60 % of either (the differ's share for a field
    edited inside). Another prompt of the same template (``question 1`` for ``question 6``) differs at
    more than one place, so it is not taken for the prompt."""
    if not tokens or tokens == words:
        return False
    most = min(len(words), len(tokens))
    head = next((k for k in range(most) if words[k] != tokens[k]), most)
    tail = next((k for k in range(most - head) if words[-1 - k] != tokens[-1 - k]), most - head)
    return head + tail >= 0.6 * max(len(words), len(tokens))


_CURRENT: contextvars.ContextVar[list[_Index] | None] = contextvars.ContextVar("replay_invariants", default=None)


def _index(c: Cassette) -> _Index:
    """The index of ``c``, shared by the checks of one :func:`evaluate` call (built afresh outside one)."""
    shared = _CURRENT.get()
    if shared and shared[0].c is c:
        return shared[0]
    built = _Index(c)
    if shared is not None:
        shared[:] = [built]
    return built


def _summary_text(c: Cassette, ex: Exchange) -> str:
    if ex.response is None:
        return ""
    return "".join(_part_text(p) for p in _parts(c.messages[ex.response]) if p.get("part_kind") == "text")


def _labels(indices: Iterable[int]) -> str:
    return ", ".join(str(i) for i in indices)


# --------------------------------------------------------------------------- built-in checks


class _Windows:
    """The compaction calls each main request of a role may have been compacted by.

    One conversation per role: the calls since the role's previous request. A role whose
    requests alternate between concurrent conversations (``replay._conversations``): the calls
    since the request this one continues, made inside this request's own agent run (a run's
    ``parent``; a call whose run does not say is kept) -- another conversation's summarizer
    is not this one's, and taking it for one flagged losses that were none.
    """

    def __init__(self, c: Cassette, ix: _Index) -> None:
        self.c, self.ix = c, ix
        self.concurrent = interleaved_roles(c)
        self.predecessors = Predecessors(c) if self.concurrent else None
        self.last: dict[str, Exchange] = {}
        self.own_last: dict[int, int] = {}
        """Each agent run's latest request so far (seq), for :meth:`_own_earlier`."""

    def of(self, role: str, v: _View) -> list[Exchange]:
        ex = v.exchange
        before = self.last.get(role)
        self.last[role] = ex
        if self.predecessors is None or role not in self.concurrent:
            found = self.ix.window(before.seq if before is not None else -1, ex.seq)
            return self._own_earlier(ex, before) + found if before is not None and ex.run is not None else found
        prev = self.predecessors.continued(ex)  # a conversation's first request: since the start, its run's calls only
        runs = self.c.runs
        return [
            e for e in self.ix.window(prev.seq if prev is not None else -1, ex.seq)
            if e.run is None or not 0 <= e.run < len(runs) or runs[e.run].parent in (None, ex.run)
        ]


    def _own_earlier(self, ex: Exchange, before: Exchange) -> list[Exchange]:
        """Compaction calls made inside ``ex``'s own agent run (a run's ``parent``) before the role's previous
        request, and after this run's own previous request: runs of one agent started together whose
        summarizers all answered before the first of them reached the model (``asyncio.gather`` over three
        conversations, each compacted once) do not interleave, so the role keeps one window per request, and
        the second and third requests' windows, since the first, held none of their own summarizer calls:
        their losses went unflagged, and whether they were flagged hung on the order the answers took."""
        run = ex.run
        if run is None or not 0 <= run < len(self.c.runs):
            return []
        own = self.own_last.get(run, -1)
        self.own_last[run] = ex.seq
        inside = self.ix.calls_inside().get(run)
        # bisected among this run's own calls: a run's first request (``own`` -1) scanned every call since the
        # start, once per run, and a 10,000-request recording of one run per turn took 7.7 s instead of 1 s
        return [] if inside is None else self.ix.answered(*inside, own, min(before.seq, ex.seq))


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


class _Verbatim:
    """A text (tokenised, :func:`_tokens`, it would be a ``_Grams``' tokens) searched for a needle as written.

    A needle written out in the text with a token edge at both ends (no word character on either
    side of an end that is one) has its tokens one after the other among the text's: a word is a
    maximal run of word characters and every other mark outside whitespace is a token of its own,
    so tokenising the text tokenises that stretch exactly as the needle alone. ``_Grams.has`` is
    then true of it. Most of what a compaction got is written out in its summarizer's input or its
    kept history, so most needles are settled by a substring search, and the text is tokenised only
    when one is not (``_lost_positions``). The search resumes where the last needle was found (a
    history is written out in its order), then starts over; a needle found only at token-splitting
    places within ``_TRIES`` occurrences is left to the tokens.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.budget = _SCANS * len(text) + _SCAN_SLACK
        """Characters the searches may still read: a needle written nowhere reads the whole text,
        so a hostile window of many such needles made every one of them a scan of it (quadratic:
        a 17 MB cassette took 195 s to check, against 21 s tokenising). Once spent, every needle
        is left to the tokens, which answer the same; the search is only a shortcut."""

    def has(self, needle: str) -> bool:
        if self.budget <= 0:
            return False
        text, start = self.text, self.at
        end = _bounded_end(text, needle, start)
        self.budget -= (end if end >= 0 else len(text)) - start
        if end < 0 and start:
            end = _bounded_end(text, needle, 0)
            self.budget -= end if end >= 0 else len(text)
        if end < 0:
            return False
        self.at = end
        return True


_WORD = re.compile(r"\w")
"""A word character as ``_TOKEN`` reads one."""
_TRIES = 8
_SCANS = 16
"""Whole-text reads one ``_Verbatim`` may spend on its needles before it leaves them to the tokens:
a history written out in its order is found in one read, so this is a bound for hostile input."""
_SCAN_SLACK = 1 << 16


def _bounded_end(text: str, needle: str, start: int) -> int:
    """The end of an occurrence of ``needle`` (not empty) in ``text`` at or after ``start`` whose ends are
    token edges, or -1 (none within the first ``_TRIES`` occurrences)."""
    word_head = _WORD.match(needle) is not None
    word_tail = _WORD.match(needle, len(needle) - 1) is not None
    at = text.find(needle, start)
    for _ in range(_TRIES):
        if at < 0:
            return -1
        end = at + len(needle)
        if not (word_head and at > 0 and _WORD.match(text, at - 1)) and not (
            word_tail and end < len(text) and _WORD.match(text, end)
        ):
            return end
        at = text.find(needle, at + 1)
    return -1


def _texts(message: Message) -> tuple[str, list[str]]:
    """:func:`_words` untokenised: the text whose tokens are the message's (its part texts, one per
    line: a newline is no token and joins none), and each needle's text, stripped (its tokens are
    that needle: whitespace is no token, and a text with anything else has a token)."""
    parts = _parts(message)
    texts = [_part_text(p) for p in parts]
    scoped = _request_scoped(message) if message.get("kind") == "request" else ()
    needles: list[str] = []
    for k, (part, text) in enumerate(zip(parts, texts, strict=True)):
        kind = part.get("part_kind")
        if kind not in ("user-prompt", "text") or k in scoped or not text.strip() or (kind == "user-prompt" and _system_voiced(part)):
            continue
        needle = (_user_text(part) if kind == "user-prompt" and _carries_harness_data(part) else text).strip()
        if needle:
            needles.append(needle)
    return "\n".join(texts), needles


def _unfound(ix: _Index, source: list[int], texts: list[_Verbatim], grams: Callable[[], list[_Grams]]) -> list[int]:
    """Positions in ``source`` of messages with a user or assistant text found in none of ``texts``
    (each needle checked once): written out in one of them, or else (``grams``: the same texts
    tokenised, built on first need) every run of its tokens found in one."""
    verdict: dict[str, bool] = {}

    def lost(needle: str) -> bool:
        found = verdict.get(needle)
        if found is None:
            if any(t.has(needle) for t in texts):
                found = False
            else:
                tokens = _TOKEN.findall(needle)
                found = not any(g.has(tokens) for g in grams())
            verdict[needle] = found
        return found

    return [k for k, i in enumerate(source) if any(lost(t) for t in ix.texts(i)[1])]


_ESCAPED_TAG = re.compile(r"&lt;(?=\s*(?:/\s*)?(?:messages?|previous-summary|harness_data)(?:[\s/>]|$))", re.IGNORECASE)
"""How the summarizer's transcript (0.59 on: ``<message role=…>`` elements) writes a ``<`` that opens or
closes one of its own tags inside a message's text (``_neutralize_transcript_tags``), so a user's
``</message>`` cannot forge an element: that text was given to the summarizer, escaped on purpose."""


def _unescaped(text: str) -> str:
    """A summarizer input's text with the transcript's own tag escaping undone (:data:`_ESCAPED_TAG`)."""
    return _ESCAPED_TAG.sub("<", text) if "&lt;" in text else text


def _said(ix: _Index, window: list[Exchange]) -> tuple[list[str], Callable[[], list[str]]]:
    """What the summarizer calls of ``window`` were given, as text (one per message, then the instructions)
    and, built on call, as tokens: with the transcript's escaping undone."""
    texts = [ix.texts(i)[0] for e in window for i in e.messages]
    said = [_unescaped(t) for t in texts] + [e.instructions or "" for e in window]

    def tokens() -> list[str]:
        out: list[str] = []
        for e in window:
            for i in e.messages:
                text = ix.texts(i)[0]
                out += ix.tokens(i) if "&lt;" not in text else _TOKEN.findall(_unescaped(text))
        for e in window:
            out += _TOKEN.findall(e.instructions or "")
        return out

    return said, tokens


def _lost_positions(ix: _Index, window: list[Exchange], sent: list[int], source: list[int]) -> list[int]:
    """:func:`_unfound` of a compaction: what the summarizer got (``window``) and what was kept (``sent``).

    A function of those messages' contents alone, so a compaction the other side of a comparison
    made from the same contents (a replay: new timestamps, same words) is not searched again.
    """

    def compute() -> list[int]:
        said, said_tokens = _said(ix, window)
        kept = [ix.texts(i)[0] for i in sent]
        built: list[_Grams] = []

        def grams() -> list[_Grams]:
            if not built:  # each message's tokens one after the other (lists joined in C: ~10,000 tokens a window)
                tokens = said_tokens()
                kept_tokens: list[str] = []
                for i in sent:
                    kept_tokens += ix.tokens(i)
                built.extend((_Grams(tokens), _Grams(kept_tokens)))
            return built

        return _unfound(ix, source, [_Verbatim("\n".join(said)), _Verbatim("\n".join(kept))], grams)

    key = _facts.content_key([
        [[ix.key(i) for i in e.messages] for e in window],
        [e.instructions for e in window],
        [ix.key(i) for i in sent],
        [ix.key(i) for i in source],
    ])
    found: list[int] = ix.facts.of("content_lost", key, compute)
    return found


def _pinned(message: Message) -> bool:
    """Whether a message holds pinned content (``pydantic_ai_harness.compaction.pin``: a text item whose
    metadata marks it), which every compaction strategy keeps or re-injects, the window too."""
    for part in _parts(message):
        content = part.get("content")
        if isinstance(content, list) and any(isinstance(c, dict) and _pin_mark(c.get("metadata")) for c in content):
            return True
    return False


def _pin_mark(meta: Any) -> bool:
    if isinstance(meta, str):
        return ".compaction.pin" in meta
    return isinstance(meta, dict) and any(isinstance(k, str) and ".compaction.pin" in k for k in meta)


def _dropped_ahead(ix: _Index, window: list[Exchange], source: list[int], lost: list[int]) -> bool:
    """Whether the messages lost at positions ``lost`` of ``source`` were dropped before the summarizing
    compaction ran, by a window in front of it (``TieredCompaction(tiers=[SlidingWindowCompaction, …,
    SummarizingCompaction])``): the summarizer is handed the history its compaction was given, so
    what the recording shows is that history — the source from some message on, behind the preserved
    first user message — and nothing of it lost.

    True when the lost messages are one run of the source (but for pinned messages the window
    re-injected) that starts right after its first request with a user prompt (or at its start) and
    ends right where the summarizer's input picks up
    (its message found in the summarizer input), everything after it summarized or kept. A summarizing
    compaction alone never leaves that shape (it summarizes from the start), so what it loses in the
    middle (seed 001: A9, U10, A10 between the summarized head and the kept tail) is still lost.
    """
    a, b = lost[0], lost[-1] + 1
    found = set(range(a, b)) - set(lost)
    if b >= len(source) or any(not _pinned(ix.msg(source[k])) for k in found):
        return False  # a gap the window kept: only pinned content, which every strategy re-injects
    head = next(
        (k for k, i in enumerate(source) if ix.msg(i).get("kind") == "request"
         and any(p.get("part_kind") == "user-prompt" for p in _parts(ix.msg(i)))),
        -1,
    )
    if a > head + 1:
        return False  # something was summarized or kept past the head before the lost run: not a window's cut
    said, said_tokens = _said(ix, window)

    def grams() -> list[_Grams]:
        return [_Grams(said_tokens())]

    picked_up = ix.texts(source[b])[1]
    if not picked_up or _unfound(ix, [source[b]], [_Verbatim("\n".join(said))], grams):
        return False
    # and the summarizer's input starts there: the message after it is not written out before it
    text = "\n".join(said)
    at = _bounded_end(text, picked_up[0], 0)
    after = next((n for i in source[b + 1:] for n in ix.texts(i)[1][:1]), None)
    later = _bounded_end(text, after, 0) if after else -1
    return at < 0 or later < 0 or at - len(picked_up[0]) < later - len(after or "")


def _newest_unsent(ix: _Index, sent: list[int], source: list[int]) -> bool:
    """Whether the newest message of ``source`` — the request being answered: the run's prompt, or what
    a tool loop's request added — has a user or assistant text the compacted request does not carry.
    Every compaction keeps it (0.60 on: "the newest message is always kept, since in a run it is the
    request being answered"; 0.55's window already: "keeping zero messages would drop the newest
    message"); a summary of it is no answer to it."""
    if not source or source[-1] in sent or not ix.texts(source[-1])[1]:  # sent as it is: kept, no search
        return False
    kept = [ix.texts(i)[0] for i in sent]

    def grams() -> list[_Grams]:
        tokens: list[str] = []
        for i in sent:
            tokens += ix.tokens(i)
        return [_Grams(tokens)]

    return bool(_unfound(ix, [source[-1]], [_Verbatim("\n".join(kept))], grams))


def _summaries(ix: _Index, sent: list[int]) -> set[str]:
    """The summaries a request carries (their text, whitespace folded): asked of every main request,
    which re-sends the same summary message until the next compaction, so each message's are kept."""
    if not ix.has_summary(sent):
        return set()
    assert ix._summary_ids is not None  # filled by has_summary
    out: set[str] = set()
    for i in sent:
        if i in ix._summary_ids:
            found = ix._summary_texts.get(i)
            if found is None:
                found = ix._summary_texts[i] = frozenset(_ws(_summary_of(p)) for p in _parts(ix.msg(i)) if _summary_part(p))
            out |= found
    return out


def _writer(ix: _Index, ex: Exchange, new: set[str]) -> list[Exchange]:
    """The summarizer call that wrote a summary ``ex`` is the first of its role to carry, when none ran
    since the role's previous request: a compaction started ahead of its trigger
    (``FallbackCompaction(background_start=…)``, 0.62) summarizes a snapshot while the conversation goes
    on, and its summary is applied requests later. The call whose answer the summary is (or ends with:
    a cross-model bridge note goes before it), the latest before ``ex``."""
    for e in reversed(ix.window(-1, ex.seq)):
        said = _ws(_summary_text(ix.c, e))
        if said and any(s.endswith(said) for s in new):
            return [e]
    return []


@register("content_lost")
def content_lost(c: Cassette) -> Iterator[Violation]:
    """A user or assistant message a summarizing compaction neither summarized nor kept, or the
    request being answered left out of a compacted request by any compaction.

    Seed 001: with ``keep_user_messages=True`` the kept user copies take the tail's slots
    and A9, U10, A10 reach neither model. Otherwise only compactions with a summarizer are checked:
    a sliding window drops messages by design, also as a tier ahead of a summarizer
    (:func:`_dropped_ahead`) — but never the newest message (0.54's
    ``SlidingWindowCompaction(keep_messages=1, receipts=True)`` sent the receipt and the first prompt
    without the current one).
    """
    ix = _index(c)
    windows = _Windows(c, ix)
    for role, views in ix.views().items():
        carried: set[str] = set()
        for v in views:
            window = windows.of(role, v)
            before, carried = carried, _summaries(ix, v.exchange.messages)
            if not window and carried - before:
                window = _writer(ix, v.exchange, carried - before)
            if not ix.compacted(v, bool(window)):
                continue
            sent, source = v.exchange.messages, v.source_ids
            positions = _lost_positions(ix, window, sent, source) if window else []
            if positions and _dropped_ahead(ix, window, source, positions):
                positions = []
            newest = len(source) - 1 not in positions and _newest_unsent(ix, sent, source)
            lost = [ix.msg(source[k]) for k in positions]
            current = message_label(ix.msg(source[-1])) if newest else None
            if not lost and current is None:
                continue
            labels = [message_label(m) for m in lost]
            missing = labels + ([current] if current is not None else [])
            via = [f"{e.role}[{e.index}]" for e in window]
            said = [f"compaction lost {', '.join(labels)}: in neither the summarizer input ({', '.join(via)}) nor the kept history"] if labels else []
            if current is not None:
                said.append(f"{'' if labels else 'compaction '}left out the request being answered, {current}"
                            + (f" (given to the summarizer, {', '.join(via)}, but not sent)" if window else ""))
            yield Violation(
                "content_lost",
                role,
                v.exchange.index,
                f"{'; '.join(said)} ({len(sent)} of {len(source)} messages sent)",
                {"lost": missing, "summarizer": via,
                 "source_messages": len(source), "sent_messages": len(sent), "newest_unsent": current},
                identity=("lost",),
                measure=dict(Counter(missing)),
            )


@register("empty_summary")
def empty_summary(c: Cassette) -> Iterator[Violation]:
    """An empty or whitespace summary that the next main request was compacted with.

    Harness 0.54 accepted a blank summary and replaced the history with it; 0.62 retries and
    fails the summarizer run instead, which is not a violation (the run's error shows it).
    """
    ix = _index(c)
    mains = sorted((v for vs in ix.views().values() for v in vs), key=lambda v: v.exchange.seq)
    main_seqs = [v.exchange.seq for v in mains]
    last: dict[tuple[str, int], Exchange] = {}  # a summarizer run's last call carries its final answer
    for e in ix.compactions:
        own_run = e.run is not None and e.role not in ix.user_roles
        last[("run", e.run) if own_run and e.run is not None else ("seq", e.seq)] = e
    for e in sorted(last.values(), key=lambda x: x.seq):
        if e.error is not None or e.response is None or _run_failed(c, e):
            continue
        run_output = c.runs[e.run].output if e.run is not None and 0 <= e.run < len(c.runs) else None
        if run_output is not None and not isinstance(run_output, str) or run_output is None and _structured(c, e):
            continue  # a structured answer (RelevanceCompaction's judge scoring steps) is no summary
        summary = run_output if isinstance(run_output, str) else _summary_text(c, e)
        if summary.strip():
            continue
        at = bisect_left(main_seqs, e.seq + 1)
        if at == len(mains):
            continue
        nxt = mains[at]
        sent = ix.expand(nxt.exchange.messages)
        summaries = [_summary_of(p) for m in sent for p in _parts(m) if _summary_part(p)]
        other = [s for s in ix.window(e.seq, nxt.exchange.seq) if _summary_text(c, s).strip()]
        accepted = any(not s.strip() for s in summaries) or (
            ix.compacted(nxt, True) and not any(s.strip() for s in summaries) and not other
        )
        if not accepted:
            continue
        source = len(nxt.source_ids)
        target = f"{nxt.exchange.role}[{nxt.exchange.index}]"
        yield Violation(
            "empty_summary",
            e.role,
            e.index,
            f"empty summary {summary!r} accepted: {target} was sent {len(sent)} message{'s' * (len(sent) != 1)} instead of {source}",
            {"summary": summary, "request": target, "source_messages": source, "sent_messages": len(sent)},
            measure={"messages_dropped": source - len(sent)},
        )


def _structured(c: Cassette, e: Exchange) -> bool:
    """Whether a compaction call answered with a tool call and no text: a structured output, not a summary."""
    response = c.messages[e.response] if e.response is not None and 0 <= e.response < len(c.messages) else None
    parts = _parts(response) if isinstance(response, dict) else []
    kinds = [p.get("part_kind") for p in parts if isinstance(p, dict)]  # a list: a hostile kind may be unhashable
    return "tool-call" in kinds and "text" not in kinds


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


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


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


def _as_json(value: Any) -> str:
    """An observed or expected value as every other line shows observations: JSON (``true``, ``"x"``, ``null``)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@register("expectation")
def expectation(c: Cassette) -> Iterator[Violation]:
    """An observation that differs from what the scenario declared with ``run.expect`` (or never made)."""
    observed: dict[str, list[Any]] = {}
    for o in c.observations:
        observed.setdefault(o.name, []).append(o.value)
    for name, expected in c.expectations.items():
        values = observed.get(name)
        if values is not None and all(finite(v) == finite(expected) for v in values):
            continue
        seen: Any = None if values is None else values[0] if len(values) == 1 else values
        what = "never observed" if values is None else f"observed {_as_json(seen)}"
        yield Violation(
            "expectation",
            "scenario",
            None,
            f"{name}: expected {_as_json(expected)}, {what}",
            {"name": name, "expected": expected, "observed": seen},
            identity=("name",),
            pair=(name,),
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


# Built-in checks that live in their own modules register themselves on import.
from . import verdicts  # noqa: E402,F401  (imports Violation/register from here: keep last)

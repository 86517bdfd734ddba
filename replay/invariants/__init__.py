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

Layout: this module is the registry, ``evaluate`` and the grading across versions; each family
of built-in checks is a private module (``_compaction``, ``_content_lost``, ``_tool_calls``,
``_expectations``, ``_cache``), reading messages through ``_messages`` and the rebuilt
uncompacted histories through ``_history``.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .. import _facts
from .._conversations import paired_ordinals
from ..cassette import Cassette, paused_gc
from ..errors import ReplayError, ReplayUsageError
from ..histories import as_requests
from ._history import _CURRENT, _Index
from ._messages import _freeze

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


_CHECK_MODULES = ("_compaction", "_content_lost", "_tool_calls", "_expectations", "_cache")
"""The built-in checks' modules, in the order their checks run and their findings are listed."""
_BUILTIN_MODULES = frozenset({*(f"{__name__}.{m}" for m in _CHECK_MODULES), f"{__name__.rpartition('.')[0]}.verdicts"})
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


# The built-in checks register themselves on import, in ``_CHECK_MODULES`` order; ``replay.verdicts``
# (public: its rules are a documented extension point) imports ``Violation``/``register`` from here.
# isort: off
from . import _compaction, _content_lost, _tool_calls, _expectations, _cache  # noqa: E402,F401
from .. import verdicts  # noqa: E402,F401
# isort: on

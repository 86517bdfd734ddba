"""Glue from the stages to the fronts: the CLI, the pytest plugin and the matrix all call these."""

from __future__ import annotations

import contextlib
import gc
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec

from . import _facts, invariants
from ._deadline import ReplayTimeout
from .cassette import (
    DEFAULT_LIMITS,
    RAISE_LIMIT,
    Cassette,
    Limits,
    cassette_path,
    clean_stale_temps,
    encode_readable,
    head_problem,
    iter_cassettes,
    load,
    paused_gc,
    save,
    save_readable,
    write_atomic,
)
from .config import Config
from .differ import EDITED, EDITED_SAME, Diff, diff, same_value, source_edited
from .errors import CassetteError, ReplayError
from .normaliser import Rules
from .recorder import UnrecordableValue, record
from .replayer import WARNING_KINDS, Level, OnExhausted, error_kinds, replay
from .reporter import ScenarioReport, Status
from .scenario import Scenario, stable_name
from .wire.cache import Price, Tokenizer, prices_from, tokenizer_from


@dataclass(frozen=True)
class RecordOutcome:
    scenario_id: str
    path: Path
    status: str  # "recorded" | "unchanged" | "skipped" | "error"
    detail: str = ""


def plural(n: int, word: str) -> str:
    """``1 request``, ``2 requests``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def record_scenarios(
    scenarios: Sequence[Scenario], cassettes: Path, *, force: bool = False, limits: Limits = DEFAULT_LIMITS
) -> list[RecordOutcome]:
    """Record each scenario to ``<cassettes>/<id>.cassette``; existing cassettes are kept unless forced.

    A run that ends with an error the scenario did not declare (``@scenario(expect_error=...)``)
    is a mistake in the scenario, not a baseline: nothing is written (an existing cassette stays),
    so the next ``record`` tries again instead of skipping a broken recording.
    """
    out: list[RecordOutcome] = []
    if cassettes.is_dir():
        clean_stale_temps(cassettes)
    for sc in scenarios:
        path = cassette_path(cassettes, sc.id)
        if (path.exists() or path.is_symlink()) and not force:
            problem = head_problem(path)
            if problem is not None:  # `skipped … exists`, exit 0, for a file every later `run` refuses
                out.append(RecordOutcome(sc.id, path, "error", f"{problem}; not recorded over it: use --force"))
            else:
                out.append(RecordOutcome(sc.id, path, "skipped", "exists; use --force to overwrite"))
            continue
        try:
            cassette = record(sc)
        except UnrecordableValue as exc:
            out.append(RecordOutcome(sc.id, path, "error", f"{exc}; nothing written"))
            continue
        error = cassette.outcome.error
        detail = f"{plural(len(cassette.exchanges), 'request')}, outcome {cassette.outcome.status}"
        if error is not None:  # the author should see it now, whether expected or not
            message = textwrap.shorten(error.message.splitlines()[0], 120, placeholder=" …") if error.message else ""
            detail += f" {error.type.rsplit('.', 1)[-1]}: {message}"
        undeclared = not_as_declared(sc, cassette)
        if undeclared is not None:
            out.append(RecordOutcome(sc.id, path, "error", f"{undeclared}; nothing written"))
            continue
        try:
            data, again = encode_readable(cassette, path, limits)
        except CassetteError as exc:  # an observation only the encoding refuses, or a recording over the loader's limits
            out.append(RecordOutcome(sc.id, path, "error", f"{exc.problem}; nothing written"))
            continue
        if path.exists() and _same_recording(path, again, limits):
            out.append(RecordOutcome(sc.id, path, "unchanged", f"{detail}; as the cassette there but for stamps, kept"))
            continue
        try:
            write_atomic(path, data)
        except CassetteError as exc:  # a full disk, a read-only sub-folder: this one is an error, the others go on
            out.append(RecordOutcome(sc.id, path, "error", exc.problem))
            continue
        out.append(RecordOutcome(sc.id, path, "recorded", detail))
    return out


_STAMPS = frozenset({"created_at", "roles", "paths"})
"""Header fields not compared as they stand: the recording time, the roles (compared by their stable
module names below) and the environment's folders (the content is compared with each side's own read as
``<tempdir>``, ``<project>``…, and a kept file keeps the ones its content was recorded under); every other
one (versions, source hash, schema defaults) must match."""


def _same_recording(path: Path, again: Cassette, limits: Limits) -> bool:
    """Whether ``record --force`` would only move stamps: the file then stays, so re-recording a project
    leaves its unchanged cassettes out of the pull request (a binary file's every rewrite is a diff).
    ``again``: the fresh recording as it reads back from disk."""
    from .normaliser import env_paths, normalise

    try:
        old = load(path, limits)
    except (ReplayError, OSError):
        return False
    if {r: stable_name(m) for r, m in old.header.roles.items()} != again.header.roles:
        return False  # a cassette written before roles named a scenario file by its place held a path-and-bytes hash
    if any(getattr(old.header, k) != getattr(again.header, k) for k in type(old.header).model_fields if k not in _STAMPS):
        return False
    if again.header.paths and not old.header.paths:
        return False  # recorded before the header named the environment's folders: rewritten once, to gain them
    if _error_keys(old) != _error_keys(again):
        return False  # what a replay raises an error with (not compared: kept for the replay) was recorded anew
    paths = env_paths(old, again)  # both sides' folders read alike, as the differ reads them
    if not same_value(normalise(old, paths=paths).as_json(), normalise(again, paths=paths).as_json()):  # by type, as the differ compares
        return False
    if [bool(ex.wire) for ex in old.exchanges] != [bool(ex.wire) for ex in again.exchanges]:
        return False  # HTTP exchanges kept now and not then (a cassette from before wire capture): rewritten
    from .wire.compare import compare

    return not compare(old, again)  # the HTTP requests too: the message level holds none (a query, a body field)


def _error_keys(c: Cassette) -> list[list[str]]:
    """Which values each recorded error holds for a replay to raise it with (an exception group's own errors,
    an HTTP error's status): a cassette recorded before one was kept replays the error as another."""
    errors = [ex.error for ex in c.exchanges] + [c.outcome.error]
    return [sorted(e.attributes or ()) if e is not None else [] for e in errors]


def not_as_declared(sc: Scenario, cassette: Cassette) -> str | None:
    """Why a recording is no baseline: it ended with an error the scenario did not declare, or without
    the one it declared (``@scenario(expect_error=...)``); None when it ended as declared."""
    error = cassette.outcome.error
    if sc.error_expected(error.type if error else None, error_kinds(error) if error else ()):
        return None
    why = (
        f"raised {error.type.rsplit('.', 1)[-1]}: {(error.message.splitlines() or [''])[0][:120]}"
        if error is not None
        else "returned normally"
    )
    expected = f"expected {sc.expect_error}" if sc.expect_error else "declare it with @scenario(expect_error=...) if intended"
    if error is not None and error.type == "replay.errors.ReplayUsageError":  # run.observe(123, …): no outcome to declare
        expected = "a mistake in the scenario's use of harness-replay, not an outcome"
    return f"{why}; {expected}"


def located(report: ScenarioReport, sc: Scenario, seconds: float) -> ScenarioReport:
    """Add what CI outputs point at: the time the verdict took and the scenario's file and line."""
    report.seconds = seconds
    code = getattr(sc.func, "__code__", None)
    if sc.path is not None:
        report.file, report.line = str(sc.path), code.co_firstlineno if code is not None else None
    return report


def python_warning(recorded: Cassette, replayed: Cassette) -> list[str]:
    """A warning when the two sides ran on different Python minors: some libraries behave differently.

    Not a change by itself (the diff decides that), but a verdict can then come from the
    interpreter rather than the harness, so the report says so.
    """
    a, b = recorded.header.python_version, replayed.header.python_version
    if a and b and a.split(".")[:2] != b.split(".")[:2]:
        return [f"recorded on Python {a}, replayed on Python {b}: a difference may come from the Python version"]
    return []


def did_not_run(recorded: Cassette, replayed: Cassette, where: str = "on this version") -> str | None:
    """Why a replay is no verdict: the scenario raised before its first model request where the recording
    made some (a capability argument this version lacks: ``TypeError: unexpected keyword argument``).

    As a file that fails to import, it is an error cell; as ``changed`` it listed every recorded request
    as removed and every violation of the recording as ``gone``, a fix that never happened.
    """
    error = replayed.outcome.error
    if error is None or recorded.outcome.error is not None or not recorded.exchanges or replayed.exchanges:
        return None
    first = (error.message.splitlines() or [""])[0][:200]
    why = f"the scenario stopped before its first model request {where}: {error.type.rsplit('.', 1)[-1]}: {first}"
    if source_edited(recorded, replayed):  # a typo in the edit, not the version: say which could be the cause
        why += " (the scenario was edited since the recording: the edit may be the cause)"
    return why


def _environment(a: Cassette, b: Cassette) -> list[str]:
    """What else than the harness and slim differs between the two sides and can change what is sent: pydantic (a
    tool's JSON schema, serialisation), a provider SDK or HTTP client both loaded (the request it builds)."""
    ha, hb = a.header, b.header
    out = []
    if ha.python_version and hb.python_version and ha.python_version.split(".")[:2] != hb.python_version.split(".")[:2]:
        out.append(f"Python {ha.python_version} → {hb.python_version}")
    if ha.pydantic_version and hb.pydantic_version and ha.pydantic_version != hb.pydantic_version:
        out.append(f"pydantic {ha.pydantic_version} → {hb.pydantic_version}")
    sa, sb = ha.sdk_versions, hb.sdk_versions
    out += [f"{dist} {sa[dist]} → {sb[dist]}" for dist in sorted(set(sa) & set(sb)) if sa[dist] != sb[dist]]
    return out


def environment_warning(a: Cassette, b: Cassette, d: Diff) -> list[str]:
    """A change where a library that builds the request differs between the sides: say it may be the library's."""
    moved = [m for m in _environment(a, b) if not m.startswith("Python ")]  # `python_warning` names the Python
    if not d.changed or not moved:
        return []
    return [f"the two sides ran other versions of {', '.join(moved)}: a difference may come from them (the request "
            "they build, a tool's JSON schema), not the harness"]


def same_versions_warning(a: Cassette, b: Cassette, d: Diff) -> list[str]:
    """A change between two runs of one harness and one pydantic-ai is not the harness's doing: say where to look.

    A scenario's helper edited (the source hash covers the decorated function only), a set
    iterated in hash order, the clock or ``random`` in a tool: all read as ``changed`` with
    nothing naming a cause, on the very version that was recorded.
    """
    ha, hb = a.header, b.header
    if not d.changed or None in (ha.harness_version, ha.slim_version) or \
            (ha.harness_version, ha.slim_version) != (hb.harness_version, hb.slim_version):
        return []
    if source_edited(a, b):
        return []  # the differ's own warning names the edit; `--check-determinism` would find nothing
    if _environment(a, b):
        return []  # `environment_warning`, `python_warning` name what differs: not necessarily the scenario
    return [f"both sides ran harness {ha.harness_version} and pydantic-ai-slim {ha.slim_version}: the change comes from "
            "the scenario (its code or helpers, its inputs, or something unseeded: set order, the clock, random), "
            "not the harness; `replay record --check-determinism 3` tells the two apart"]


def carried_over_warning(cassette: Cassette, label: str) -> list[str]:
    """Name the answers an ``--accept`` carried over, so nobody mistakes them for the provider's."""
    marked = [f"{ex.role}[{ex.index}]" for ex in cassette.exchanges if ex.carried_over]
    if not marked:
        return []
    return [f"{label}: answer carried over from a different request at {', '.join(marked)} (accepted, not re-recorded)"]


def clean_results(results: Path | None) -> None:
    """Remove temp files a killed earlier run left in a results folder (not those of live writers)."""
    if results is not None and results.is_dir():
        clean_stale_temps(results)


def replay_scenario(
    sc: Scenario,
    cassettes: Path,
    results: Path | None,
    *,
    rules: Rules = Rules(),
    on_exhausted: OnExhausted = "fail",
    allow_hosts: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    level: Level = "wire",
    timeout: float | None = None,
    give_up: Callable[[str], object] | None = None,
) -> ScenarioReport:
    """Replay one scenario against its cassette and report what changed, never raising for one bad cassette."""
    path = cassette_path(cassettes, sc.id)
    again = f"replay record {sc.id}" + (f" --cassettes {cassettes}" if cassettes != Path("cassettes") else "")
    if not path.exists():
        return ScenarioReport(sc.id, "error", error=f"{path}: no cassette (record it with: {again})")
    try:
        recorded = load(path, limits)
    except CassetteError as exc:
        return ScenarioReport(sc.id, "error", error=str(exc), cassette=str(path))
    held = recorded.header.scenario_id
    if held is not None and held != sc.id:  # copied or moved by hand: another scenario's requests are no baseline
        return ScenarioReport(
            sc.id, "error", error=f"{path}: holds scenario {held!r}, not {sc.id!r} (record it with: {again} --force)",
            cassette=str(path),
        )
    try:
        result = replay(sc, recorded, on_exhausted, allow_hosts=allow_hosts, level=level, timeout=timeout, give_up=give_up)
    except ReplayTimeout as exc:
        return ScenarioReport(sc.id, "error", error=f"{path}: the replay {exc}", cassette=str(path))
    except ReplayError as exc:
        return ScenarioReport(sc.id, "error", error=str(exc), cassette=str(path))
    result_path = None
    if results is not None:
        result_path = save(result.result, cassette_path(results, sc.id))
    stopped = did_not_run(recorded, result.result)
    if stopped is not None:
        return ScenarioReport(sc.id, "error", error=f"{path}: {stopped}", cassette=str(path),
                              result=str(result_path) if result_path else None)
    with _facts.shared():  # the diff and both sides' checks estimate each distinct message once
        d = diff(recorded, result.result, rules, tokenizer=tokenizer())
        failures = _grade_violations(d, recorded, result.result)
    d.notes = [div.describe() for div in result.divergences if div.kind not in WARNING_KINDS]
    d.warnings += [div.describe() for div in result.divergences if div.kind in WARNING_KINDS]
    d.warnings += python_warning(recorded, result.result)
    d.warnings += environment_warning(recorded, result.result, d)
    d.warnings += same_versions_warning(recorded, result.result, d)
    d.warnings += carried_over_warning(recorded, "the recording")
    if not d.changed and not failures:  # a refactor sending the same: nothing came from the edit, say how to catch up
        d.warnings = [EDITED_SAME if w == EDITED else w for w in d.warnings]
    d.price(prices())
    return ScenarioReport(
        sc.id,
        "error" if failures else "changed" if d.changed else "same",
        diff=d,
        error=f"{path}: {failures}" if failures else None,
        cassette=str(path),
        result=str(result_path) if result_path else None,
    )


def _grade_violations(d: Diff, recorded: Cassette, replayed: Cassette) -> str:
    """Put both sides' violations, graded, into ``d``; returns the checks that crashed (an error), if any."""
    graded = invariants.compare_cassettes(recorded, replayed)
    d.violations = graded.violations
    d.new_violations = graded.new
    return "; ".join(graded.failures)


P = ParamSpec("P")
INTERNAL = "internal error (a harness-replay bug, please report it)"


def isolated(label: str, judge: Callable[P, ScenarioReport], *args: P.args, **kwargs: P.kwargs) -> ScenarioReport:
    """``judge(*args, **kwargs)``, with any failure turned into an error verdict for ``label`` alone.

    One bad cassette must not take the verdicts of the others with it: a known problem is
    its one-line message; anything else is a bug, said as such (the reliability fuzz counts
    these like tracebacks) instead of aborting the whole command.
    """
    try:
        return judge(*args, **kwargs)
    except ReplayError as exc:
        return ScenarioReport(label, "error", error=str(exc))
    except Exception as exc:
        return ScenarioReport(label, "error", error=f"{INTERNAL}: {type(exc).__name__}: {exc}")


IN_PROCESS_SYSTEMS = frozenset({"function", "test"})
"""``Model.system`` of pydantic-ai's in-process models (FunctionModel, TestModel): their answers are code."""


def in_process_only(cassette: Cassette) -> bool:
    """Whether every answer in the recording came from an in-process model, so recording again is exact."""
    return all(ex.model_system in IN_PROCESS_SYSTEMS for ex in cassette.exchanges)


@dataclass(frozen=True)
class AcceptOutcome:
    scenario_id: str
    status: str  # "accepted" | "not accepted" | "unchanged"
    detail: str = ""

    def line(self) -> str:
        return f"{self.status:12} {self.scenario_id}" + (f": {self.detail}" if self.detail else "")


def _violations_text(found: Sequence[invariants.Violation], flag: str = "--accept-violations") -> str:
    names = ", ".join(dict.fromkeys(f"{v.invariant} {v.role}" + ("" if v.index is None else f"[{v.index}]") for v in found))
    return f"{len(found)} new violation(s) ({names}); pass {flag} to accept them"


def changed_calls(d: Diff) -> set[tuple[str, int]]:
    """The replay's calls (its own indices) that sent another request than recorded: in its messages,
    or only in the bytes its provider mapping built (``reasoning_effort: low → minimal``, another query
    string). The diff labels a pair by the recording's index; concurrent conversations replayed in
    another interleaving put the same call at another index in the replay."""
    changed = {(q.role, q.index) for q in d.requests if q.status == "changed"} | {(w.role, w.index) for w in d.wire}
    added = {(q.role, q.index) for q in d.requests if q.status == "added"}  # numbered by the replay already
    return {_in_replay(d, key) for key in changed} | added


def _in_replay(d: Diff, key: tuple[str, int]) -> tuple[str, int]:
    return key[0], d.paired.get(key, key[1])


def _mark_carried_over(
    recorded: Cassette, result: Cassette, changed: set[tuple[str, int]], d: Diff | None = None
) -> int:
    """Flag the answers the replay served to a request other than the one they were recorded for
    (``changed``: the replay's own indices, :func:`changed_calls`); a mark the recording had moves with
    its call."""
    before = {(ex.role, ex.index) for ex in recorded.exchanges if ex.carried_over}
    if d is not None:
        before = {_in_replay(d, key) for key in before}
    marked = 0
    for ex in result.exchanges:
        key = (ex.role, ex.index)
        if key in changed or key in before:
            ex.carried_over = True
            marked += key in changed
    return marked


def accept(
    reports: Sequence[ScenarioReport],
    scenarios: dict[str, Scenario],
    *,
    violations: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> list[AcceptOutcome]:
    """Make each changed replay the new baseline, honestly; one outcome per scenario.

    * Recorded only with in-process models (FunctionModel, TestModel): the responders are
      code, so the scenario is recorded again on the installed harness. Exact, even when
      the replay diverged.
    * Recorded with a provider: no model is called. The replay's cassette is kept, but an
      exchange whose request changed got the answer recorded for the old request, which
      the provider might not give; it is marked "answer carried over from a different
      request" (``show`` and ``diff`` say so). A replay that diverged (more or fewer calls)
      is not accepted: re-record it.
    * New invariant violations are a regression until someone says otherwise: not accepted
      unless ``violations`` (``--accept-violations``).
    """
    out: list[AcceptOutcome] = []
    for r in reports:
        sid = r.scenario_id
        if r.status == "error" or r.cassette is None:
            out.append(AcceptOutcome(sid, "not accepted", f"error: {r.error or 'no cassette'}"))
            continue
        if r.status == "same" or r.diff is None:
            edited = r.diff is not None and EDITED_SAME in r.diff.warnings  # --accept takes changed replays only
            out.append(AcceptOutcome(sid, "unchanged", "the scenario's source changed since the recording: "
                                     "`replay record --force` updates the cassette" if edited else ""))
            continue
        path = Path(r.cassette)
        try:
            recorded = load(path, limits)
        except CassetteError as exc:
            out.append(AcceptOutcome(sid, "not accepted", str(exc)))
            continue
        sc = scenarios.get(sid)
        if sc is not None and in_process_only(recorded):
            fresh = record(sc)
            undeclared = not_as_declared(sc, fresh)
            if undeclared is not None:  # what `replay record` would refuse is no baseline either
                out.append(AcceptOutcome(sid, "not accepted", undeclared))
                continue
            found = invariants.new_violations(recorded, fresh)
            if found and not violations:
                out.append(AcceptOutcome(sid, "not accepted", _violations_text(found)))
                continue
            try:
                save_readable(fresh, path, limits)
            except CassetteError as exc:
                out.append(AcceptOutcome(sid, "not accepted", exc.problem))
                continue
            out.append(AcceptOutcome(sid, "accepted", f"re-recorded (in-process models) -> {path}"))
            continue
        if r.diff.notes:
            out.append(AcceptOutcome(sid, "not accepted", f"the replay diverged ({r.diff.notes[0]}); re-record it"))
            continue
        if r.diff.new_violations and not violations:
            out.append(AcceptOutcome(sid, "not accepted", _violations_text(r.diff.new_violations)))
            continue
        if r.result is None:
            out.append(AcceptOutcome(sid, "not accepted", "no replay result was written (--out)"))
            continue
        try:
            result = load(Path(r.result), limits)
        except CassetteError as exc:  # the replay holds what the loader refuses (a tool result nested deeper now)
            out.append(AcceptOutcome(sid, "not accepted", f"{exc}; {RAISE_LIMIT}"))
            continue
        undeclared = not_as_declared(sc, result) if sc is not None else None
        if undeclared is not None:
            out.append(AcceptOutcome(sid, "not accepted", undeclared))
            continue
        changed = changed_calls(r.diff)
        marked = _mark_carried_over(recorded, result, changed, r.diff)
        try:
            save(result, path)  # read with these limits already (above): readable as it stands
        except CassetteError as exc:  # a full disk, a read-only folder: this one is not accepted, the others still are
            out.append(AcceptOutcome(sid, "not accepted", exc.problem))
            continue
        note = f"; {marked} answer(s) carried over from a different request" if marked else ""
        out.append(AcceptOutcome(sid, "accepted", f"-> {path}{note}"))
    return out


def compare_files(a: Path, b: Path, rules: Rules = Rules(), limits: Limits = DEFAULT_LIMITS) -> ScenarioReport:
    """Load, diff and check both sides, with the cyclic collector paused for all of it at once.

    The comparison builds plain, acyclic data (decoded tables, normalised messages, facts): each
    stage collecting on its way out (:func:`paused_gc` per load, per normalisation, per side's
    checks) walked both loaded cassettes again, 0.4 s of a 10,000-request diff. Nested, the stages'
    pauses collect nothing; this one collects once, after the cassettes are dropped. The caller's
    young garbage is collected first: the checks file everything alive as old (``invariants._results``),
    and with the collector paused they no longer collect before they do.
    """
    if gc.isenabled():
        gc.collect(1)
    with paused_gc():
        return _compare_files(a, b, rules, limits)


def _compare_files(a: Path, b: Path, rules: Rules, limits: Limits) -> ScenarioReport:
    ca, cb = load(a, limits), load(b, limits)
    sid = ca.header.scenario_id or cb.header.scenario_id or f"{a} vs {b}"
    for side, ran, stopped in ((b, ca, cb), (a, cb, ca)):  # as `run` and `matrix` call it: no verdict, an error
        why = did_not_run(ran, stopped, f"on harness {stopped.header.harness_version}")
        if why is not None:
            return ScenarioReport(sid, "error", error=f"{side}: {why}", cassette=str(a), result=str(b))
    la, lb = str(a), str(b)
    if ca.header.harness_version != cb.header.harness_version:
        la, lb = f"harness {ca.header.harness_version}", f"harness {cb.header.harness_version}"
    with _facts.shared():  # the diff and both sides' checks estimate each distinct message once
        d = diff(ca, cb, rules, a_label=la, b_label=lb, tokenizer=tokenizer())
        failures = _grade_violations(d, ca, cb)
    d.warnings += python_warning(ca, cb)
    d.warnings += environment_warning(ca, cb, d)
    d.warnings += same_versions_warning(ca, cb, d)
    d.warnings += carried_over_warning(ca, la) + carried_over_warning(cb, lb)
    d.price(prices())
    status: Status = "error" if failures else "changed" if d.changed else "same"
    error = f"{a} vs {b}: {failures}" if failures else None
    return ScenarioReport(sid, status, diff=d, error=error, cassette=str(a), result=str(b))


def compare_dirs(a: Path, b: Path, rules: Rules = Rules(), limits: Limits = DEFAULT_LIMITS) -> list[ScenarioReport]:
    """Pair the cassettes of two directories by relative path; one present on one side only is an error."""
    left = {p.relative_to(a): p for p in iter_cassettes(a)}
    right = {p.relative_to(b): p for p in iter_cassettes(b)}
    if left and right and not set(left) & set(right):
        one, other = min(left), min(right)
        raise ReplayError(
            f"{a}, {b}: no cassette has a counterpart at the same path below the other directory "
            f"({one} vs {other}): give both directories at the same level of the scenario ids"
        )
    reports = []
    for rel in sorted(set(left) | set(right)):
        sid = str(rel.with_suffix(""))
        if rel not in left or rel not in right:
            missing, present = (a, right[rel]) if rel not in left else (b, left[rel])
            with contextlib.suppress(CassetteError):  # its scenario id, as the compared rows are named (below the top
                sid = load(present, limits).header.scenario_id or sid  # folder, the path is not the id)
            reports.append(ScenarioReport(sid, "error", error=f"{missing / rel}: no such cassette", file=str(present)))
            continue
        started = time.perf_counter()
        report = isolated(sid, compare_files, left[rel], right[rel], rules, limits)
        report.seconds, report.file = time.perf_counter() - started, report.file or str(right[rel])  # JUnit's
        reports.append(report)
    if not reports:
        raise ReplayError(f"{a}, {b}: no cassettes in either directory")
    return reports


def check_cassette(path: Path, cassette: Cassette | None = None, limits: Limits = DEFAULT_LIMITS) -> ScenarioReport:
    """Run every check on one cassette; a check that crashes makes it an error naming the file and the check."""
    c = cassette or load(path, limits)
    found = invariants.evaluate(c)
    sid = c.header.scenario_id or str(path)
    status: Status = "error" if found.failures else "changed" if found.violations else "same"
    error = "; ".join(f"{path}: {f.describe()}" for f in found.failures) or None
    return ScenarioReport(sid, status, violations=found.violations, error=error, cassette=str(path))


def prices() -> dict[str, Price]:
    """``[tool.replay] prices`` of the project in the working directory (empty when none is set)."""
    from .config import load_config

    config = load_config()
    return prices_from(config.extra.get("prices"), config.source)


def tokenizer() -> Tokenizer | None:
    """``[tool.replay] tokenizer`` of the project in the working directory (None: the harness heuristic)."""
    from .config import load_config

    config = load_config()
    return tokenizer_from(config.extra.get("tokenizer"), config.source)


def rules_from(config: Config, extra: Iterable[str] = ()) -> Rules:
    return Rules.of([*config.ignore, *extra])

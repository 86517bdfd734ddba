"""Glue behind the pytest plugin: one test's cassette, from choosing what to do to the verdict.

It calls the same stages as the CLI (recorder, CassetteSource, differ, invariants, reporter),
so a test fails with the very lines ``replay diff`` prints. Imported lazily by the plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._determinism import deterministic_ids
from ._pytest import Action, Mode, Status, same_test, scenario_id, shown
from ._pytest_report import Paint, _plain, failure_lines
from ._untrusted import id_problem, visible
from .cassette import DEFAULT_LIMITS, Cassette, Exchange, Limits, clean_stale_temps, encode_readable, load, write_atomic
from .differ import Diff, diff
from .errors import CassetteError
from .guard import NetworkGuard, network_guard
from .invariants import new_violations
from .normaliser import Rules
from .recorder import Session, base_header, finalize
from .recorder._interception import Call, session_scope
from .replayer import (
    WARNING_KINDS,
    CassetteSource,
    Divergence,
    OnExhausted,
    ReplayExhausted,
    guard_divergences,
    offline,
)
from .wire.serve import WireSource


class _TestSource(WireSource):
    """The CLI's replay source (provider models build their HTTP requests for real, answered from the
    cassette, so a changed provider mapping shows) whose exhaustion error speaks pytest: test, role,
    cassette and the flag to record."""

    def __init__(self, recorded: Cassette, on_exhausted: OnExhausted, test: TestCassette) -> None:
        super().__init__(recorded, on_exhausted)
        self.test = test

    async def respond(self, call: Call, exchange: Exchange) -> Any:
        try:
            return await super().respond(call, exchange)
        except ReplayExhausted:
            raise ReplayExhausted(visible(self.test.unrecorded(self.divergences[-1]))) from None

    def stream(self, call: Call, exchange: Exchange) -> Any:
        try:
            return super().stream(call, exchange)
        except ReplayExhausted:
            raise ReplayExhausted(visible(self.test.unrecorded(self.divergences[-1]))) from None


_CLEANED: set[Path] = set()


def _clean_once(folder: Path) -> None:
    """Remove the temp files a killed earlier writer left in ``folder`` (not a live writer's), once per process:
    the CLI's ``record`` and ``run --accept`` did, a pytest run never did, so they stayed for good."""
    if folder not in _CLEANED and folder.is_dir():
        _CLEANED.add(folder)
        clean_stale_temps(folder)


@dataclass
class TestCassette:
    """The ``replay_cassette`` fixture's value: where the test's cassette is and what this run does with it."""

    nodeid: str
    path: Path
    mode: Mode
    mode_is_default: bool = False
    on_exhausted: OnExhausted = "fail"
    rules: Rules = field(default_factory=Rules)
    allow_hosts: tuple[str, ...] = ()
    accept: bool = False
    """``--replay-accept``: a changed replay that followed the recording becomes the cassette."""
    accept_violations: bool = False
    """``--replay-accept-violations``: also one with new invariant violations (``replay run --accept-violations``)."""
    limits: Limits = DEFAULT_LIMITS
    """``[tool.replay] max-*``, as ``replay run`` reads and ``replay record`` writes with them."""
    action: Action = "record"
    recorded: Cassette | None = None
    """The cassette as found on disk (None when recording)."""
    session: Session = field(init=False)
    """Captures what the test sends: the new recording, or the replay's result to compare."""
    source: CassetteSource | None = field(init=False, default=None)
    guard: NetworkGuard | None = field(init=False, default=None)
    refused: list[str] = field(init=False, default_factory=list)
    """Connections the network guard refused during the replay (their notes), set by :meth:`compare`."""
    real_models: list[str] = field(init=False, default_factory=list)
    """Provider models (not FunctionModel/TestModel) this run called to record: worth saying out loud."""
    wrote: bool = field(init=False, default=False)
    """Whether :meth:`finish` changed the file (saved, accepted, appended or removed it): :meth:`rollback` undoes that."""
    _before: bytes | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        exists = self.path.is_file()
        # rewrite, as pytest-recording's: a failing test leaves no stale cassette. It is removed once the test has
        # failed (see _finish), not as the test starts: a Ctrl-C, a kill or a CI timeout during it lost the cassette.
        if self.mode in ("all", "rewrite") or (self.mode in ("once", "new") and not exists):
            self.action = "record"
        else:
            self.action = "append" if self.mode == "new" else "replay"
            self.recorded = load(self.path, self.limits) if exists else Cassette()
            policy: OnExhausted = "fake" if self.action == "append" else self.on_exhausted
            self.source = _TestSource(self.recorded, policy, self)
        # The ids a test's capabilities generate are seeded by the scenario id its recording holds, not by the
        # node id of this run: that one changes with pytest's rootdir (a monorepo's root vs the package) and with
        # a renamed test that keeps its cassette by the marker's name, and every spill handle with it.
        recorded_id = self.recorded.header.scenario_id if self.recorded is not None else None
        header = base_header(
            scenario_id=recorded_id or scenario_id(self.nodeid), mode="record" if self.action == "record" else "replay"
        )
        self.session = Session(header, self.source)

    @contextmanager
    def active(self) -> Iterator[TestCassette]:
        """Capture the model traffic made inside; a replay also has real models and the network locked."""
        with ExitStack() as stack:
            if self.action == "replay":
                stack.enter_context(offline())
                self.guard = stack.enter_context(network_guard(self.nodeid, allow=self.allow_hosts))
            else:  # recording is the one moment a model may be called, whatever the conftest switched off
                stack.enter_context(_model_requests_allowed())
            stack.enter_context(session_scope(self.session, process_wide=True))
            # as `replay record`/`run` do for a scenario: ids a harness puts in prompts (spill handles, plan
            # step ids) repeat, and the harness's temporary files are the test's own
            stack.enter_context(deterministic_ids(self.session.cassette.header.scenario_id or self.nodeid))
            yield self

    # ----------------------------------------------------------------- messages

    def _flag_hint(self) -> str:
        if self.recorded is not None and not self.path.is_file():
            return "record it with --replay-mode=once"
        return "append it with --replay-mode=new, or re-record the test with --replay-mode=all"

    def unrecorded(self, divergence: Divergence) -> str:
        where = f"request #{divergence.index + 1} of role {divergence.role!r}"
        hint = self._flag_hint()
        if not self.path.is_file():
            missing = f"it has no cassette ({shown(self.path)})"
        else:
            roles = self.recorded.by_role() if self.recorded else {}
            held = len(roles.get(divergence.role, []))
            missing = f"{shown(self.path)} holds {held} request(s) of that role"
            if not held and roles:  # an agent renamed since: appending its calls leaves the old role's never made
                others = ", ".join(f"{r} {len(xs)}" for r, xs in roles.items())
                missing = f"{shown(self.path)} has no request of that role (it holds {others})"
                hint = "re-record the test with --replay-mode=all"
        if self.mode == "none":
            why = " (the default when CI is set)" if self.mode_is_default else ""
            policy = f"--replay-mode=none{why} only replays"
        else:
            policy = f"--replay-mode={self.mode} only replays an existing cassette"
        return f"harness-replay: test {self.nodeid} made {where}, but {missing} and {policy}; {hint}"

    def scrubbed_note(self) -> str | None:
        """Why a test failing on its own may have: a recorded answer holds a scrubbed secret, and a test
        asserting on it is given ``<secret:…>`` on replay where the recording saw the value."""
        c = self.recorded
        if c is None or self.action == "record":
            return None
        answers = {ex.response for ex in c.exchanges if ex.response is not None}
        if not any("<secret:" in str(c.messages[i]) for i in answers if 0 <= i < len(c.messages)):
            return None
        return (f"{shown(self.path)} holds answers with scrubbed secrets (<secret:…>): replayed, the test is given "
                "the placeholder, not the value it saw while recording; exempt a path with [tool.replay] "
                "scrub-exempt, or assert on something else")

    # ----------------------------------------------------------------- verdict

    @property
    def extra_ok(self) -> bool:
        """Appending (mode new) asks for requests beyond the recording.

        ``on_exhausted="repeat"``/``"fake"`` does not: it only decides how the run goes on past the recording,
        and the extra request is still a change, as ``replay run`` reports it under the same policy (a test
        passed as replayed while the harness made more model calls than recorded)."""
        return self.action == "append"

    def compare(self) -> Diff:
        """The replay against the recording, with divergences and new invariant violations, like ``replay diff``."""
        assert self.recorded is not None and self.source is not None
        result = finalize(self.session.cassette)
        d = diff(self.recorded, result, self.rules, a_label="recorded", b_label="this run")
        divergences = self.source.divergences + self.source.unused()
        if self.guard is not None:
            divergences += guard_divergences(self.guard)
        d.notes = [
            dv.describe()
            for dv in divergences
            if dv.kind not in WARNING_KINDS and not (self.extra_ok and dv.kind == "exhausted")
        ]
        d.warnings += [dv.describe() for dv in divergences if dv.kind in WARNING_KINDS]
        d.new_violations = new_violations(self.recorded, result)
        self.refused = [dv.describe() for dv in divergences if dv.kind == "network"]
        return d

    def _save_recording(self) -> Status:
        cassette = finalize(self.session.cassette)
        if not cassette.exchanges:
            if self.path.is_file():
                # --replay-mode=all: the test calls no model any more, and the cassette it had would fail every replay
                # with "recorded request #1 was never made" (and a re-record that left it there, round and round)
                try:
                    self._remember()
                    self.path.unlink()
                except OSError as exc:
                    raise CassetteError(self.path, f"cannot write: {exc.strerror or exc}") from None
                return "removed"
            return "empty"  # a test that calls no model gets no cassette (and replays fine without one)
        self.real_models = sorted(
            {f"{ex.model_system}:{ex.model_name}" for ex in cassette.exchanges if ex.model_system not in _FAKE_SYSTEMS}
        )
        self._write(cassette)
        return "recorded"

    def _write(self, cassette: Cassette) -> None:
        """Save, refusing what the loader would refuse: a cassette that cannot load again is worse than none."""
        problem = id_problem(cassette.header.scenario_id) if cassette.header.scenario_id is not None else None
        if problem is not None:
            raise CassetteError(self.path, f"cannot write: {problem}")
        data, _ = encode_readable(cassette, self.path, self.limits)
        try:
            self._remember()
        except OSError as exc:
            raise CassetteError(self.path, f"cannot read: {exc.strerror or exc}") from None
        _clean_once(self.path.parent)
        write_atomic(self.path, data)

    def _remember(self) -> None:
        """Keep what the file held before this test changed it, for :meth:`rollback`."""
        if not self.wrote:
            self._before = self.path.read_bytes() if self.path.is_file() else None
            self.wrote = True

    def rollback(self) -> None:
        """Put the cassette back as it was before this test: its teardown failed after the body passed, and a
        test that did not pass leaves no baseline (a fixture checking the agent's answer after the test)."""
        if not self.wrote:
            return
        if self._before is None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CassetteError(self.path, f"cannot write: {exc.strerror or exc}") from None
        else:
            write_atomic(self.path, self._before)
        self.wrote = False

    def finish(
        self, passed: bool, *, interrupted: bool = False, verbosity: int = 0, paint: Paint = _plain
    ) -> tuple[Status, list[str]]:
        """Save or compare once the test body is done; returns the status and, if the test must fail, why.

        A cassette that cannot be written (read-only folder, say) fails the test with the one line
        the CLI prints, not a traceback.
        """
        try:
            return self._finish(passed, interrupted=interrupted, verbosity=verbosity, paint=paint)
        except CassetteError as exc:
            return "unsaved", [f"harness-replay: {exc}"]

    def _finish(self, passed: bool, *, interrupted: bool, verbosity: int, paint: Paint) -> tuple[Status, list[str]]:
        if self.session.fault is not None:  # a call is missing from what was captured: neither saved nor compared
            return "unsaved", [visible(f"harness-replay: test {self.nodeid}: {self.session.fault}; nothing written")]
        if self.action == "record":
            if not passed:
                if self.mode == "rewrite" and not interrupted and self.path.is_file():
                    try:
                        self.path.unlink()  # the failed test's old cassette is no baseline either (rewrite)
                    except OSError as exc:  # one line naming the file, as cassette.save words it
                        raise CassetteError(self.path, f"cannot write: {exc.strerror or exc}") from None
                return "unsaved", []
            return self._save_recording(), []
        exhausted = [dv for dv in self.source.divergences if dv.kind == "exhausted"] if self.source else []
        if exhausted and self.action == "replay" and self.on_exhausted == "fail":
            return "unrecorded", [visible(self.unrecorded(exhausted[0]))]
        if not self.path.is_file() and not self.session.cassette.exchanges:
            # replay-only without a cassette, and no model call: nothing was replayed, so say what once would
            return ("empty" if passed else "unsaved"), []
        d = self.compare()
        if _changed_besides_additions(d) if self.extra_ok else d.changed:
            # with its additions: beside `main[0] removed`, the `bot[0] added` of an agent renamed since
            return self._changed(d, passed, verbosity=verbosity, paint=paint)
        if self.action == "append" and exhausted:
            if not passed:
                return "unsaved", []
            self._save_recording()
            return "appended", []
        return "replayed", []

    def _changed(self, d: Diff, passed: bool, *, verbosity: int, paint: Paint) -> tuple[Status, list[str]]:
        """The verdict on a replay that sent other requests: accepted (``--replay-accept``), or why the test fails
        and what would take the change (accept, accept with its violations, or re-record)."""
        blocked = self.refused
        if blocked and blocked == d.notes and not (d.requests or d.outcome or d.observations or d.new_violations):
            # no model request changed: the test reached for the network, which a replay refuses
            return "changed", [
                visible(f"harness-replay: test {self.nodeid} opened a connection the replay refused ({blocked[0]})"),
                "a model's calls are answered from the cassette; a host the test itself needs goes in "
                "[tool.replay] allow-hosts",
            ]
        head = visible(f"harness-replay: test {self.nodeid} sent different model requests than {shown(self.path)} holds")
        body = ["  " + line for line in failure_lines(d, verbosity=verbosity, paint=paint)]
        owner = self.recorded.header.scenario_id if self.recorded is not None else None
        if owner and not same_test(owner, scenario_id(self.nodeid)):  # one marker name on several tests
            body.insert(0, visible(f"  it holds the recording of {owner}: tests that share a cassette name replay each "
                                   "other's calls; give each its own @pytest.mark.replay name"))
        # new invariant violations are a regression, not made the baseline unless asked, as `replay run --accept`
        regression = bool(d.new_violations) and not self.accept_violations
        if self.accept and not d.notes and passed and not regression and self.recorded is not None:
            from ._pipeline import _mark_carried_over, changed_calls

            accepted = finalize(self.session.cassette)
            # an answer served to a request it was not recorded for: marked, as `replay run --accept` does for
            # a provider's (the CLI re-records in-process models; a test cannot be re-run from here)
            _mark_carried_over(self.recorded, accepted, changed_calls(d), d)
            self._write(accepted)
            return "accepted", [f"harness-replay: accepted {self.nodeid} -> {shown(self.path)}"]
        if self.accept and not d.notes and passed and regression:
            from ._pipeline import _violations_text

            tail = f"not accepted: {_violations_text(d.new_violations, '--replay-accept-violations')}"
        elif self.accept:
            why = f"the replay diverged ({d.notes[0]})" if d.notes else "the test failed"
            tail = f"not accepted: {why}; re-record it with --replay-mode=all"
        elif d.notes:  # --replay-accept refuses a diverged replay: pointing at it only sent the user round once more
            tail = "the replay diverged, which --replay-accept cannot take; if the change is intended, re-record it with --replay-mode=all"
        elif regression:
            tail = ("if the change is intended, new violations included, accept it with --replay-accept "
                    "--replay-accept-violations (or re-record with --replay-mode=all)")
        else:
            tail = "if the change is intended, accept it with --replay-accept (or re-record with --replay-mode=all)"
        return "changed", [head, *body, visible(tail)]


_FAKE_SYSTEMS = frozenset({"function", "test"})
"""``model_system`` of pydantic-ai's FunctionModel and TestModel: recording them costs nothing."""


@contextmanager
def _model_requests_allowed() -> Iterator[None]:
    """Lift ``pydantic_ai.models.ALLOW_MODEL_REQUESTS`` (pydantic-ai's advice for test suites) while recording."""
    from pydantic_ai import models

    previous = models.ALLOW_MODEL_REQUESTS
    models.ALLOW_MODEL_REQUESTS = True
    try:
        yield
    finally:
        models.ALLOW_MODEL_REQUESTS = previous


def _changed_besides_additions(d: Diff) -> bool:
    """What --replay-mode=new does not append over: any change but requests the recording never had."""
    return bool(any(r.status != "added" for r in d.requests) or d.outcome or d.observations or d.notes
                or d.new_violations or any(r.a > r.b for r in d.roles))




"""pytest plugin: hooks and fixtures only (glue lives in replay._pytest).

Mark a test ``@pytest.mark.replay`` (or request the ``replay_cassette`` fixture) and the
model traffic of its body goes to ``<test dir>/cassettes/<module>/<test>.cassette``: recorded
the first time, replayed and compared afterwards. ``--replay-mode`` follows pytest-recording's
``--record-mode`` (none, once, new_episodes, all, rewrite); the default is ``none`` when ``CI`` is set.

Registered as ``harness_replay`` (pyproject's ``pytest11`` entry point): pytest-replay owns the
name ``replay``, and pytest silently keeps one plugin per name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from ._pytest import (
    MODES,
    ON_EXHAUSTED,
    Tally,
    canonical_mode,
    cassette_name,
    default_dir,
    default_mode,
    shown,
)
from .errors import ReplayError

if TYPE_CHECKING:
    from ._pytest_cassette import TestCassette
    from .replayer import OnExhausted

_TALLY = pytest.StashKey[Tally]()
_ACTIVE = pytest.StashKey["TestCassette"]()
_HEADLINE = pytest.StashKey[str]()
_WROTE = pytest.StashKey["tuple[TestCassette, str, str | None]"]()
"""A test whose call changed its cassette: (the cassette, its status, its --replay-accept line), until its teardown passes."""
_PLACEHOLDERS = pytest.StashKey[bool]()
"""A collector collected again with placeholder provider keys (once: its first try failed for want of one)."""
_REAL_NOTE = pytest.StashKey[str]()
"""The note that the test's recording called a provider model, for its report (see pytest_runtest_logreport)."""
_OWN_COLOUR = tuple(pytest.version_tuple[:2]) >= (8, 4)
"""Before 8.4 pytest highlights a ``pytrace=False`` failure message as Python code itself (and garbles ours)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replay", "harness-replay cassettes")
    group.addoption(
        "--replay-mode",
        choices=MODES,
        default=None,
        help="none: replay only; once: record missing cassettes; new (or new_episodes): append requests beyond "
        "the recording; all: re-record; rewrite: delete and re-record. Default: none if CI is set (and not "
        "'false' or '0'), else once.",
    )
    group.addoption(
        "--replay-accept",
        action="store_true",
        default=False,
        help="make each changed replay that followed its recording the new cassette (a reviewed change; "
        "like syrupy's --snapshot-update). No model is called.",
    )
    group.addoption(
        "--replay-accept-violations",
        action="store_true",
        default=False,
        help="with --replay-accept, also accept a change that brings new invariant violations (a regression is "
        "not made the baseline unless asked; replay run's --accept-violations).",
    )
    group.addoption(
        "--replay-unused",
        choices=("warn", "fail"),
        default="warn",
        help="cassettes no collected test uses: warn (default) or fail the session.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replay(name=None, *, on_exhausted='fail'): record the test's model traffic into a cassette, replay and compare it",
    )
    option = config.getoption("replay_mode")
    config.stash[_TALLY] = Tally(
        canonical_mode(option) if option else default_mode(),
        module_patterns=tuple(str(p) for p in config.getini("python_files")),
    )
    if getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(_WorkerNotes(config), "harness_replay_worker_notes")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """In replay-only mode, a module-level ``Agent("openai:...")`` imports without a key.

    The provider is built at import, before any test runs; with ``--replay-mode=none`` no
    test can call it. A module (or conftest) that failed to import for an unset provider key is
    collected once more with placeholder keys for the unset ones. Only then: set for every
    import, they made a live test's guard (``skipif(not os.environ.get("OPENAI_API_KEY"))``)
    see a key, and the live test ran in CI.
    """
    report = yield
    if not report.failed or collector.config.stash[_TALLY].mode != "none" or collector.stash.get(_PLACEHOLDERS, False):
        return report
    from ._placeholders import missing_key, placeholder_keys

    if not missing_key(str(report.longrepr)):
        return report
    collector.stash[_PLACEHOLDERS] = True
    with placeholder_keys():
        again: pytest.CollectReport = collector.ihook.pytest_make_collect_report(collector=collector)
    return again


def pytest_report_header(config: pytest.Config) -> str:
    return f"harness-replay: --replay-mode={config.stash[_TALLY].mode}"


def pytest_itemcollected(item: pytest.Item) -> None:
    if isinstance(item, pytest.Function):
        item.config.stash[_TALLY].expect(item.path, _name(item))


@pytest.fixture
def replay_cassette_dir(request: pytest.FixtureRequest) -> Path:
    """Where this test's cassette lives; override it (per module or conftest) like ``vcr_cassette_dir``."""
    return default_dir(request.node.path)


@pytest.fixture
def replay_cassette(request: pytest.FixtureRequest, replay_cassette_dir: Path) -> Generator[TestCassette, None, None]:
    """The test's cassette; the body's model traffic is recorded or replayed around the test call."""
    item = request.node
    marker = item.get_closest_marker("replay")
    problem = _marker_problem(marker) if marker else None
    if problem:
        pytest.fail(f"@pytest.mark.replay: {problem}", pytrace=False)
    # an override may return text, as pytest-recording's vcr_cassette_dir does (os.path.join)
    if not isinstance(replay_cassette_dir, (str, os.PathLike)):
        pytest.fail(f"replay_cassette_dir: {replay_cassette_dir!r} is {type(replay_cassette_dir).__name__}; "
                    "it returns a folder path (str or pathlib.Path)", pytrace=False)
    replay_cassette_dir = Path(replay_cassette_dir)
    from ._pytest_cassette import TestCassette  # heavy: only for tests that use a cassette
    from .config import limits
    from .normaliser import Rules

    tally = item.config.stash[_TALLY]
    path = replay_cassette_dir / f"{_name(item)}.cassette"
    error: ReplayError | None = None
    try:
        # a bad [tool.replay] is one line naming pyproject.toml, as the CLI prints it (not config.py's traceback)
        project = tally.config(item.config.rootpath, item.path)
        # the marker's own policy, else [tool.replay] on-exhausted, as `replay run` reads it
        on_exhausted = (marker.kwargs.get("on_exhausted") if marker else None) or project.on_exhausted
        test = TestCassette(
            item.nodeid,
            path,
            tally.mode,
            mode_is_default=item.config.getoption("replay_mode") is None,
            on_exhausted=cast("OnExhausted", on_exhausted),
            rules=Rules.of(project.ignore),
            allow_hosts=project.allow_hosts,
            accept=bool(item.config.getoption("replay_accept")),
            accept_violations=bool(item.config.getoption("replay_accept_violations")),
            limits=limits(project),
        )
    except ReplayError as exc:
        error = exc
    if error is not None:  # raised outside the except block, or pytest prints the line twice (chained)
        pytest.fail(f"harness-replay: {error}", pytrace=False)
    tally.used.add(path.resolve())
    item.stash[_ACTIVE] = test
    from ._placeholders import placeholder_keys

    # a replay calls no model, but the fixtures set up after this one (an ``agent`` fixture building
    # Agent("openai:...")) build providers that refuse to exist without a key: unset keys get placeholders
    with placeholder_keys() if test.action == "replay" else contextlib.nullcontext():
        yield test
    del item.stash[_ACTIVE]


@pytest.fixture(autouse=True)
def _replay_marker(request: pytest.FixtureRequest) -> None:
    """Turn ``@pytest.mark.replay`` into the ``replay_cassette`` fixture, as pytest-recording does for ``vcr``."""
    if request.node.get_closest_marker("replay") is not None:
        request.getfixturevalue("replay_cassette")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    test = item.stash.get(_ACTIVE, None)
    if test is None:
        return (yield)
    tally = item.config.stash[_TALLY]
    error: BaseException | None = None
    try:
        with test.active():
            return (yield)
    except BaseException as exc:
        error = exc
        raise
    finally:
        if not isinstance(error, pytest.skip.Exception):
            writer = item.config.get_terminal_writer()
            status, failure = test.finish(
                error is None,
                interrupted=isinstance(error, (KeyboardInterrupt, pytest.exit.Exception)),  # Ctrl-C, pytest.exit()
                verbosity=item.config.get_verbosity(),
                paint=(lambda text, colour: writer.markup(text, **{colour: True})) if _OWN_COLOUR else (lambda text, colour: text),
            )
            tally.statuses[status] += 1
            if test.real_models:
                said = tally.announce_real_call(item.config, item.nodeid, test.real_models, shown(test.path), test.action == "append")
                item.stash[_REAL_NOTE] = said  # a pytest-xdist worker's report carries it to the controller
            text = "\n".join(failure)
            if test.wrote:  # a baseline only once the teardown passed too (see pytest_runtest_teardown)
                item.stash[_WROTE] = (test, status, text if status == "accepted" else None)
            if status == "accepted":
                tally.accepted.append(text)
            elif failure and (error is None or status == "unrecorded"):
                item.stash[_HEADLINE] = failure[0]
                raise pytest.fail.Exception(text, pytrace=False) from None
            elif failure:  # the test failed on its own: keep its error, show what changed beside it
                item.add_report_section("call", "harness-replay", text)
            elif error is not None and (note := test.scrubbed_note()) is not None:
                item.add_report_section("call", "harness-replay", note)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A fixture's teardown that fails (a check of the agent's answer after the test) fails the test: the
    cassette its body recorded, accepted or appended is put back as it was, as for a test failing in its body."""
    wrote = item.stash.get(_WROTE, None)
    if wrote is None:
        return (yield)
    del item.stash[_WROTE]
    try:
        return (yield)
    except BaseException:
        test, status, accepted = wrote
        tally = item.config.stash[_TALLY]
        note = f"harness-replay: {shown(test.path)} not saved: the test's teardown failed"
        try:
            test.rollback()
        except ReplayError as exc:
            note = f"harness-replay: {exc}"
        tally.statuses[status] -= 1
        tally.statuses["unsaved"] += 1
        if accepted is not None and accepted in tally.accepted:
            tally.accepted.remove(accepted)
        item.add_report_section("teardown", "harness-replay", note)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The report is shown once: the short summary (which pytest prints whole with -vv or on CI) gets its headline."""
    report = yield
    note = item.stash.get(_REAL_NOTE, None)
    if note is not None and report.when == "call" and getattr(item.config, "workerinput", None) is not None:
        report.harness_replay_real_call = note  # type: ignore[attr-defined]  # plain data: xdist sends it with the report
    headline = item.stash.get(_HEADLINE, None)
    crash = getattr(report.longrepr, "reprcrash", None)
    if headline is not None and report.failed and crash is not None:
        crash.message = headline
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    config.stash[_TALLY].release()
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: the controller sums up and looks for orphans
        workeroutput["harness_replay"] = config.stash[_TALLY].to_worker_output()
        return
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return
    if any("::" in str(arg) for arg in config.args) or config.getoption("lf", False):
        return  # only part of a module was collected: its other tests' cassettes would look unused
    orphans = config.stash[_TALLY].find_orphans()
    if orphans and config.getoption("replay_unused") == "fail" and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


class _WorkerNotes:
    """pytest-xdist's controller: says a worker's note on a real model call as its report arrives (workers have no terminal)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        note = getattr(report, "harness_replay_real_call", None)
        if isinstance(note, str):
            self.config.stash[_TALLY].say_real_call(self.config, note)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist: fold each worker's tally into the controller's."""
    data = getattr(node, "workeroutput", {}).get("harness_replay")
    if data:
        node.config.stash[_TALLY].merge(data)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    tally = config.stash[_TALLY]
    for accepted in tally.accepted:
        terminalreporter.write_line(accepted, green=True)
    line = tally.summary()
    if line:
        terminalreporter.write_line(line)
    if tally.orphans:
        fail = config.getoption("replay_unused") == "fail"
        terminalreporter.write_line(
            f"harness-replay: {len(tally.orphans)} unused cassette(s), no collected test uses them"
            + (" (--replay-unused=fail)" if fail else ""),
            red=fail,
            yellow=not fail,
        )
        for path in tally.orphans:
            terminalreporter.write_line(f"  {shown(path)}")


def _marker_problem(marker: pytest.Mark) -> str | None:
    """What is wrong with ``@pytest.mark.replay(...)``'s arguments, as the one line the test fails with."""
    unknown = sorted(set(marker.kwargs) - {"name", "on_exhausted"})
    if unknown:
        return f"unknown option(s) {', '.join(unknown)}; it takes name= and on_exhausted="
    if len(marker.args) > 1 or (marker.args and "name" in marker.kwargs):
        return "takes one cassette name (positional or name=)"
    name = _explicit_name(marker)
    if name is not None and not isinstance(name, str):
        return f"name={name!r} is {type(name).__name__}; a cassette name is text"
    on_exhausted = marker.kwargs.get("on_exhausted", "fail")
    if on_exhausted not in ON_EXHAUSTED:
        return f"on_exhausted={on_exhausted!r}; choose one of {', '.join(ON_EXHAUSTED)}"
    return None


def _explicit_name(marker: pytest.Mark) -> object:
    return marker.args[0] if marker.args else marker.kwargs.get("name")


def _name(item: pytest.Item) -> str:
    """The cassette's name; a marker name that is not text is ignored here (collection must not crash)
    and reported by the fixture as a usage error."""
    marker = item.get_closest_marker("replay")
    explicit = _explicit_name(marker) if marker is not None else None
    classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
    return cassette_name(item.name, classes, explicit if isinstance(explicit, str) else None)

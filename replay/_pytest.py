"""Glue behind the pytest plugin, the light half: modes, naming and the session tally.

``replay.plugin`` only declares hooks and fixtures (as pytest-recording does). The plugin is
loaded by every pytest run of a project that installs harness-replay, so this half imports
nothing heavy; one test's cassette (``replay._pytest_cassette``) pulls in pydantic-ai,
deepdiff and rich only when a test actually uses one.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

if TYPE_CHECKING:
    from .config import Config

SUFFIX = ".cassette"  # replay.cassette.SUFFIX, without importing the cassette stack

Mode = Literal["none", "once", "new", "all", "rewrite"]
ALIASES: dict[str, Mode] = {"new_episodes": "new"}
"""pytest-recording's (and VCR.py's) spelling, so its users' habits work here."""
MODES: tuple[str, ...] = (*get_args(Mode), *ALIASES)
Action = Literal["record", "replay", "append"]
Status = Literal["recorded", "replayed", "appended", "accepted", "changed", "unrecorded", "unsaved", "empty"]
ON_EXHAUSTED: tuple[str, ...] = ("fail", "repeat", "fake")  # replay.replayer.OnExhausted
_FALSE = frozenset({"", "0", "false", "no", "off", "n", "f"})


def is_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """``CI`` set to anything but a false word (``CI=false`` and ``CI=0`` are how people switch it off)."""
    return environ.get("CI", "").strip().lower() not in _FALSE


def default_mode(environ: Mapping[str, str] = os.environ) -> Mode:
    """``none`` on CI (a missing recording must fail there, never call a paid model), else ``once``."""
    return "none" if is_ci(environ) else "once"


def canonical_mode(mode: str) -> Mode:
    """``new_episodes`` is ``new``; every other choice is its own name."""
    return ALIASES.get(mode) or cast(Mode, mode)


def cassette_name(test_name: str, class_name: str | None = None, marker_name: str | None = None) -> str:
    """pytest-recording's naming: the marker's name, else ``Class.test``, else the test (ids included)."""
    name = marker_name or (f"{class_name}.{test_name}" if class_name else test_name)
    return name.replace("/", "_").replace(os.sep, "_")


def default_dir(test_file: Path) -> Path:
    """``<test dir>/cassettes/<module stem>/``, like pytest-recording's ``cassettes/{module}/``."""
    return test_file.parent / "cassettes" / test_file.stem


def shown(path: Path) -> str:
    """A path as the user typed it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- the session


@dataclass
class Tally:
    """What the whole pytest session did with cassettes: the summary line and orphan detection."""

    mode: Mode
    statuses: Counter[str] = field(default_factory=Counter)
    expected: set[Path] = field(default_factory=set)
    """Default cassette path of every collected test, selected or not (so ``-k`` makes no orphans)."""
    used: set[Path] = field(default_factory=set)
    """Paths tests actually used (covers an overridden ``replay_cassette_dir``)."""
    dirs: set[Path] = field(default_factory=set)
    orphans: list[Path] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    """One line per cassette ``--replay-accept`` replaced, printed in the terminal summary."""
    _config: Config | None = None
    _resolved: dict[Path, Path] = field(default_factory=dict)

    def config(self, root: Path) -> Config:
        """``[tool.replay]`` of the project, read once: ``ignore`` and ``allow-hosts`` apply as in ``replay run``."""
        if self._config is None:
            from .config import load_config  # only once a test uses a cassette

            self._config = load_config(root)
        return self._config

    def expect(self, test_file: Path, name: str) -> None:
        directory = self._resolved.get(test_file)
        if directory is None:
            directory = self._resolved[test_file] = default_dir(test_file).resolve()
        self.dirs.add(directory)
        self.expected.add(directory / f"{name}{SUFFIX}")

    def announce_real_call(self, config: Any, nodeid: str, models: list[str], path: str) -> None:
        """The first recording that called a provider model says so at once; the summary counts them all.

        ``once`` (the default outside CI) records a missing cassette with whatever model the
        test builds, which may be a paid one: nobody should learn that from the invoice.
        """
        self.statuses["real"] += 1
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.statuses["real"] > 1 or reporter is None:
            return
        reporter.ensure_newline()
        reporter.write_line(
            f"harness-replay: {nodeid} called {', '.join(models)} to record {path} "
            f"(--replay-mode={self.mode} records missing cassettes with the test's own models; "
            "--replay-mode=none, the default when CI is set, never calls one)",
            yellow=True,
        )

    def find_orphans(self) -> list[Path]:
        known = self.expected | self.used
        self.orphans = sorted(
            p for d in self.dirs if d.is_dir() for p in d.glob(f"*{SUFFIX}") if p.resolve() not in known
        )
        return self.orphans

    def to_worker_output(self) -> dict[str, object]:
        """What a pytest-xdist worker hands the controller (plain data: it crosses a process)."""
        return {
            "statuses": dict(self.statuses),
            "expected": sorted(map(str, self.expected)),
            "used": sorted(map(str, self.used)),
            "dirs": sorted(map(str, self.dirs)),
        }

    def merge(self, data: Mapping[str, object]) -> None:
        """Add a worker's tally, so the controller's summary and orphan check cover the whole run."""
        statuses = data.get("statuses")
        if isinstance(statuses, dict):
            self.statuses.update({str(k): int(v) for k, v in statuses.items()})
        for name, target in (("expected", self.expected), ("used", self.used), ("dirs", self.dirs)):
            paths = data.get(name)
            if isinstance(paths, list):
                target.update(Path(p) for p in paths)

    def summary(self) -> str | None:
        if not self.statuses:
            return None
        words = {"unsaved": "not saved (test failed)", "empty": "not written (no model call)"}
        order = ("recorded", "appended", "replayed", "accepted", "changed", "unrecorded", "unsaved", "empty")
        parts = [f"{self.statuses[s]} {words.get(s, s)}" for s in order if self.statuses[s] or s in ("recorded", "replayed", "changed")]
        real = f" ({self.statuses['real']} called a real model)" if self.statuses["real"] else ""
        return f"harness-replay (--replay-mode={self.mode}): cassettes " + ", ".join(parts) + real

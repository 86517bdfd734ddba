"""Glue behind the pytest plugin, the light half: modes, naming and the session tally.

``replay.plugin`` only declares hooks and fixtures (as pytest-recording does). The plugin is
loaded by every pytest run of a project that installs harness-replay, so this half imports
nothing heavy; one test's cassette (``replay._pytest_cassette``) pulls in pydantic-ai,
deepdiff and rich only when a test actually uses one.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from ._untrusted import _DRIVE, _RESERVED, _UNSAFE_LINE, id_problem

if TYPE_CHECKING:
    from .config import Config

SUFFIX = ".cassette"  # replay.cassette.SUFFIX, without importing the cassette stack

Mode = Literal["none", "once", "new", "all", "rewrite"]
ALIASES: dict[str, Mode] = {"new_episodes": "new"}
"""pytest-recording's (and VCR.py's) spelling, so its users' habits work here."""
MODES: tuple[str, ...] = (*get_args(Mode), *ALIASES)
Action = Literal["record", "replay", "append"]
Status = Literal["recorded", "replayed", "appended", "accepted", "changed", "unrecorded", "unsaved", "empty", "removed"]
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


def cassette_name(test_name: str, classes: Sequence[str] = (), marker_name: str | None = None) -> str:
    """pytest-recording's naming: the marker's name, else ``Class.test``, else the test (ids included).

    Nested classes give the whole chain (``Outer.Inner.test``): two ``Inner`` classes in one
    module must not share a cassette. Then :func:`safe_name` makes it a file name that loads again.
    """
    return safe_name(marker_name or ".".join([*classes, test_name]))


MAX_NAME_BYTES = 200
"""A cassette name's bound in UTF-8 bytes: within ``id_problem``'s segment limit, and with ``.cassette``
and ``write_atomic``'s temp-file affixes (~31 bytes) still under the usual 255-byte file-name limit."""
_TAG = 8
"""Hex digits of the hash that keeps sanitised names apart (``a/b`` and ``a_b`` must not share a file)."""


def _clean_segment(text: str) -> str:
    """``text`` with what ``id_problem`` refuses in a path segment replaced by ``_`` (length not bounded)."""
    seg = _UNSAFE_LINE.sub("_", text.replace("/", "_").replace("\\", "_").replace(os.sep, "_"))
    if seg.startswith("-"):
        seg = "_" + seg[1:]
    if seg.endswith((".", " ")):
        seg = seg[:-1] + "_"
    if seg.split(".")[0].strip().lower() in _RESERVED or _DRIVE.match(seg):
        seg = "_" + seg
    return seg


def safe_name(raw: str) -> str:
    """``raw`` as one file name the cassette loader accepts as a scenario id.

    A name that needs no change is kept as it is, so existing cassettes are still found. Any other
    (``/`` or ``\\`` in a parametrize id, a control character, a leading ``-``, over
    :data:`MAX_NAME_BYTES`) is cleaned, cut to fit and tagged with a hash of ``raw``: two distinct
    raw names never share a cassette, and the same test always gets the same one. The hash is of the
    name within its module, not of the node id, which changes with pytest's rootdir.
    """
    cleaned = _clean_segment(raw) or "_"
    if cleaned == raw and len(raw.encode()) <= MAX_NAME_BYTES:
        return raw
    tag = "-" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_TAG]
    head = cleaned.encode()[: MAX_NAME_BYTES - len(tag)].decode("utf-8", "ignore")
    return head + tag


def scenario_id(nodeid: str) -> str:
    """The id written into a test's cassette header: the node id when the loader accepts it.

    pytest ids hold what a scenario id may not (``Z\\xfcrich``, ``a//b``, ``x/../y``): then the
    file's folders are cleaned one by one and the rest (``file.py::test[id]``) becomes one
    :func:`safe_name`; if even that is refused (a very deep path), the whole node id does.
    """
    if id_problem(nodeid) is None:
        return nodeid
    path, sep, rest = nodeid.partition("::")
    folders, _, file = path.rpartition("/")
    candidate = "/".join([*(_clean_segment(d) for d in folders.split("/") if d), safe_name(file + sep + rest)])
    return candidate if id_problem(candidate) is None else safe_name(nodeid)


def default_dir(test_file: Path) -> Path:
    """``<test dir>/cassettes/<module stem>/``, like pytest-recording's ``cassettes/{module}/``."""
    return test_file.parent / "cassettes" / test_file.stem


def shown(path: Path) -> str:
    """A path as the user typed it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def same_test(a: str, b: str) -> bool:
    """Whether two node ids name one test as seen from two rootdirs (``pkg/tests/test_x.py::t`` and
    ``tests/test_x.py::t``: a monorepo's root and the package), or are one id."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)

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
    roots: set[Path] = field(default_factory=set)
    """The ``cassettes/`` folder beside every collected test file: where a deleted module's folder is left behind."""
    module_patterns: tuple[str, ...] = ("test_*.py",)
    """pytest's ``python_files``: a folder below a root named like a test module that no longer exists is stale."""
    orphans: list[Path] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    """One line per cassette ``--replay-accept`` replaced, printed in the terminal summary."""
    real_said: bool = False
    """Whether the note on a real model call was printed (only the first is)."""
    _configs: dict[Path, Config] = field(default_factory=dict)
    _projects: dict[Path, Path] = field(default_factory=dict)
    _resolved: dict[Path, Path] = field(default_factory=dict)

    def config(self, root: Path, test_file: Path | None = None) -> Config:
        """``[tool.replay]`` of the test's project, read once per project: ``ignore`` and ``allow-hosts`` apply
        as in ``replay run``, and the scrubber, finalize and outputs read the same project (see ``pin_project``).

        The test's project is the nearest folder between its file and the rootdir whose pyproject.toml has a
        ``[tool.replay]`` table, else the rootdir. In a uv workspace the root's pyproject.toml holds pytest's
        settings (so it is the rootdir) and a package's its own ``scrub-patterns``: read from the rootdir
        alone, the package's declared secret was written into its tests' cassettes. A pyproject.toml without
        the table (a package's build settings) does not hide the root's.
        """
        from .config import load_config, pin_project  # only once a test uses a cassette

        project = self._project(root, test_file)
        found = self._configs.get(project)
        if found is None:
            found = self._configs[project] = load_config(project)
        pin_project(project)
        return found

    def _project(self, root: Path, test_file: Path | None) -> Path:
        if test_file is None:
            return root
        folder = test_file.parent
        found = self._projects.get(folder)
        if found is None:
            found = root
            for candidate in (folder, *folder.parents):
                if candidate == root or not candidate.is_relative_to(root):
                    break
                if _has_replay_table(candidate / "pyproject.toml"):
                    found = candidate
                    break
            self._projects[folder] = found
        return found

    def release(self) -> None:
        """The session is over: argument-less configuration lookups start from the working directory again."""
        if self._configs:
            from .config import pin_project

            pin_project(None)

    def expect(self, test_file: Path, name: str) -> None:
        directory = self._resolved.get(test_file)
        if directory is None:
            directory = self._resolved[test_file] = default_dir(test_file).resolve()
        self.dirs.add(directory)
        self.roots.add(directory.parent)
        self.expected.add(directory / f"{name}{SUFFIX}")

    def announce_real_call(self, config: Any, nodeid: str, models: list[str], path: str, appended: bool = False) -> str:
        """The first recording that called a provider model says so at once; the summary counts them all.

        ``once`` (the default outside CI) records a missing cassette with whatever model the
        test builds, which may be a paid one: nobody should learn that from the invoice. Returns the
        note; a pytest-xdist worker (no terminal of its own) hands it to the controller to say instead.
        """
        self.statuses["real"] += 1
        does = _MODE_RECORDS.get(self.mode, "records")
        note = (
            f"harness-replay: {nodeid} called {', '.join(models)} to {'append to' if appended else 'record'} {path} "
            f"(--replay-mode={self.mode} {does} with the test's own models; "
            "--replay-mode=none, the default when CI is set, never calls one)"
        )
        if getattr(config, "workerinput", None) is None:
            self.say_real_call(config, note)
        return note

    def say_real_call(self, config: Any, note: str) -> None:
        """Print ``note`` if it is the session's first (the controller's, under pytest-xdist)."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.real_said or reporter is None:
            return
        self.real_said = True
        # said while the test's output is captured: without lifting the capture, the line went to the test's
        # captured stdout, which pytest shows only for a test that fails (live logging lifts it the same way)
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(note, yellow=True)

    def find_orphans(self) -> list[Path]:
        known = self.expected | self.used
        dirs = self.dirs | self._stale_module_dirs()
        self.orphans = sorted(
            p for d in dirs if d.is_dir() for p in d.glob(f"*{SUFFIX}") if p.resolve() not in known
        )
        return self.orphans

    def _stale_module_dirs(self) -> set[Path]:
        """``cassettes/<module>/`` folders of test modules deleted or renamed: no test of theirs is ever collected
        again, so looking only in collected modules' folders never reported them. A folder counts when it is named
        as ``python_files`` names a test module and that module is not beside ``cassettes/`` (a module that exists
        but was not collected, ``pytest tests/test_a.py``, keeps its cassettes)."""
        stale: set[Path] = set()
        for root in self.roots:
            try:
                subs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
            except OSError:
                continue
            for sub in subs:
                module = f"{sub.name}.py"
                if sub not in self.dirs and any(fnmatch.fnmatch(module, pat) for pat in self.module_patterns) \
                        and not (root.parent / module).exists():
                    stale.add(sub)
        return stale

    def to_worker_output(self) -> dict[str, object]:
        """What a pytest-xdist worker hands the controller (plain data: it crosses a process)."""
        return {
            "statuses": dict(self.statuses),
            "expected": sorted(map(str, self.expected)),
            "used": sorted(map(str, self.used)),
            "dirs": sorted(map(str, self.dirs)),
            "roots": sorted(map(str, self.roots)),
            "accepted": list(self.accepted),
        }

    def merge(self, data: Mapping[str, object]) -> None:
        """Add a worker's tally, so the controller's summary and orphan check cover the whole run."""
        statuses = data.get("statuses")
        if isinstance(statuses, dict):
            self.statuses.update({str(k): int(v) for k, v in statuses.items()})
        for name, target in (("expected", self.expected), ("used", self.used), ("dirs", self.dirs), ("roots", self.roots)):
            paths = data.get(name)
            if isinstance(paths, list):
                target.update(Path(p) for p in paths)
        accepted = data.get("accepted")
        if isinstance(accepted, list):  # the controller prints these lines: the workers have no terminal
            self.accepted.extend(map(str, accepted))

    def summary(self) -> str | None:
        if not self.statuses:
            return None
        words = {"unsaved": "not saved (test failed)", "empty": "not written (no model call)", "removed": "removed (no model call)"}
        order = ("recorded", "appended", "replayed", "accepted", "changed", "unrecorded", "unsaved", "empty", "removed")
        parts = [f"{self.statuses[s]} {words.get(s, s)}" for s in order if self.statuses[s] or s in ("recorded", "replayed", "changed")]
        real = f" ({self.statuses['real']} called a real model)" if self.statuses["real"] else ""
        return f"harness-replay (--replay-mode={self.mode}): cassettes " + ", ".join(parts) + real


_MODE_RECORDS = {
    "once": "records missing cassettes",
    "new": "records missing cassettes and appends the requests a cassette lacks",
    "all": "records every test again",
    "rewrite": "records every test again",
}
"""What each mode records, as the note on a real model call says it (``new_episodes`` is ``new``)."""


def _has_replay_table(path: Path) -> bool:
    """Whether ``path`` is a pyproject.toml with a ``[tool.replay]`` table (an unreadable one: no)."""
    if not path.is_file():
        return False
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    tool = data.get("tool")
    return isinstance(tool, dict) and "replay" in tool

"""Project settings from ``[tool.replay]`` in pyproject.toml; command-line flags win over them."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ReplayUsageError

if TYPE_CHECKING:
    from .cassette import Limits


@dataclass(frozen=True)
class Config:
    cassettes: Path = Path("cassettes")
    scenarios: Path = Path("scenarios")
    results: Path = Path(".replay/results")
    ignore: tuple[str, ...] = ()
    on_exhausted: str = "fail"
    allow_hosts: tuple[str, ...] = ()
    scrub_patterns: tuple[str, ...] = ()
    scrub_exempt: tuple[str, ...] = ()
    max_bytes: int | None = None
    loader_limits: tuple[tuple[str, int], ...] = ()
    """``max-*`` settings for the cassette loader (``replay.cassette.Limits`` field → value)."""
    matrix_with: tuple[str, ...] = ()
    timeout: float = 300.0
    """Seconds one scenario's replay may take (``replay._deadline``); 0: no bound. Replays of the bundled
    scenarios take well under a second each, the 200-turn benchmark scenario 3 s."""
    source: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_KNOWN = {
    "cassettes": "cassettes",
    "scenarios": "scenarios",
    "results": "results",
    "ignore": "ignore",
    "on-exhausted": "on_exhausted",
    "on_exhausted": "on_exhausted",
    "allow-hosts": "allow_hosts",
    "allow_hosts": "allow_hosts",
    "scrub-patterns": "scrub_patterns",
    "scrub_patterns": "scrub_patterns",
    "scrub-exempt": "scrub_exempt",
    "scrub_exempt": "scrub_exempt",
    "max-bytes": "max_bytes",
    "max_bytes": "max_bytes",
    "max-items": "max_items",
    "max-string": "max_string",
    "max-depth": "max_depth",
    "max-references": "max_references",
    "max-expanded": "max_expanded",
    "matrix-with": "matrix_with",
    "matrix_with": "matrix_with",
    "timeout": "timeout",
}


_READ_ELSEWHERE = frozenset({"checks", "prices", "tokenizer"})
"""Settings the stage that uses them reads and checks (``replay.cli``, ``replay.wire.cache``)."""


def limits(config: Config) -> Limits:
    """Loader limits with ``[tool.replay] max-*`` applied."""
    from .cassette import DEFAULT_LIMITS, Limits

    values = dict(config.loader_limits)
    return Limits(**values) if values else DEFAULT_LIMITS


MAX_DEPTH_CEILING = 400
"""The deepest nesting ``max-depth`` may allow: measured, 450 levels of tool arguments already hit the
recursion limit in ``show --normalized``, ``diff`` and ``check``."""

_PROJECT: list[Path] = []
"""Where a lookup without ``start`` begins instead of the working directory (:func:`pin_project`)."""


def pin_project(root: Path | None) -> None:
    """Make ``root`` the project every argument-less :func:`load_config` reads (None: the working directory again).

    The pytest plugin pins its rootdir: the recorder's scrubber reads ``scrub-patterns`` without
    being told where the project is, and ``cd /tmp && pytest /repo/tests`` read none at all — a
    secret the project declared was written to the cassette.
    """
    _PROJECT[:] = [root] if root is not None else []


MAX_TIMEOUT = 10**7
"""Seconds: past this an alarm cannot be set (``timestamp out of range for platform time_t``); 0 is no bound."""


def find_pyproject(start: Path | None = None) -> Path | None:
    here = (start or (_PROJECT[0] if _PROJECT else Path.cwd())).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None) -> Config:
    """Read ``[tool.replay]``; a malformed table is a usage error naming the file."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _load(path, stamp, Path.cwd())


@functools.lru_cache(maxsize=16)
def _load(path: Path, stamp: int, cwd: Path) -> Config:
    """Parsed once per file version: the recorder reads the settings at every cassette it writes."""
    import tomllib  # here: `replay --help` reads no configuration

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ReplayUsageError(f"{path}: cannot read: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ReplayUsageError(f"{path}: [tool] must be a table")
    table = tool.get("replay", {})
    if not isinstance(table, dict):
        raise ReplayUsageError(f"{path}: [tool.replay] must be a table")
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    loader: dict[str, int] = {}
    base = path.parent
    for key, value in table.items():
        name = _KNOWN.get(key)
        if name is None:
            if key not in _READ_ELSEWHERE:  # a typo ("casettes") silently left the default in force
                import difflib
                import sys

                near = difflib.get_close_matches(key, [*_KNOWN, *_READ_ELSEWHERE], n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                print(f"replay: warning: {path}: [tool.replay] {key!r} is not a setting{hint}; ignored", file=sys.stderr)
            extra[key] = value
            continue
        if name in ("cassettes", "scenarios", "results"):
            if not isinstance(value, str):
                raise ReplayUsageError(f"{path}: [tool.replay] {key} must be a string path")
            p = Path(value)
            kwargs[name] = p if p.is_absolute() else _relative(base / p)
        elif name in ("ignore", "allow_hosts", "scrub_patterns", "scrub_exempt", "matrix_with"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ReplayUsageError(f"{path}: [tool.replay] {key} must be a list of strings")
            if name == "allow_hosts":
                for entry in value:
                    problem = allow_host_problem(entry)
                    if problem is not None:
                        raise ReplayUsageError(f"{path}: [tool.replay] {key}: {entry!r}: {problem}")
            if name == "scrub_patterns":
                from .scrub import compile_patterns

                compile_patterns(value, path)  # a bad regex is one line naming this file, before any work
            kwargs[name] = tuple(value)
        elif name == "on_exhausted":
            if value not in ("fail", "repeat", "fake"):
                raise ReplayUsageError(f"{path}: [tool.replay] {key} must be fail, repeat or fake")
            kwargs[name] = value
        elif name == "timeout":
            if type(value) not in (int, float) or not 0 <= value < MAX_TIMEOUT:
                raise ReplayUsageError(f"{path}: [tool.replay] {key} must be a number of seconds (0 for no bound)")
            kwargs[name] = float(value)
        elif name.startswith("max_"):
            if type(value) is not int or value <= 0:
                raise ReplayUsageError(f"{path}: [tool.replay] {key} must be a positive integer")
            if name == "max_depth" and value > MAX_DEPTH_CEILING:
                raise ReplayUsageError(
                    f"{path}: [tool.replay] {key} must be at most {MAX_DEPTH_CEILING} (the stages after the loader "
                    "walk a value recursively; deeper nesting would end in Python's recursion limit)"
                )
            loader[name] = value
    if "max_bytes" in loader:
        kwargs["max_bytes"] = loader["max_bytes"]
    for name in ("cassettes", "scenarios", "results"):  # defaults are the project's folders too, wherever it is run from
        kwargs.setdefault(name, _relative(base / getattr(Config, name)))
    return Config(source=path, extra=extra, loader_limits=tuple(sorted(loader.items())), **kwargs)


def allow_host_problem(entry: str) -> str | None:
    """What is wrong with an ``--allow-host`` / ``allow-hosts`` entry, or None.

    The guard matches a host name (glob), an address or a network, never a port: the refusal line
    says ``connect to api.example.com:443``, and ``--allow-host api.example.com:443`` copied from it
    (or a URL) matched nothing, silently, so the replay went on being refused.
    """
    import ipaddress
    import re

    text = entry.strip()
    if not text:
        return "empty"
    try:
        ipaddress.ip_network(text, strict=False)
        return None
    except ValueError:
        pass
    if "://" in text:
        return "a URL; give its host name alone"
    if re.fullmatch(r"[^\s:/@\[\]]+:\d+|\[[0-9a-fA-F:.]+\]:\d+", text):
        return "has a port; give the host alone (an allowed host is allowed on every port)"
    if not re.fullmatch(r"[^\s:/@]+", text):
        return "not a host name, address or network"
    return None


def _relative(p: Path) -> Path:
    try:
        return p.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return p

"""Scenarios: the unit harness-replay records, replays and diffs.

A scenario is an ``async def`` taking a :class:`Run` handle, decorated with
:func:`scenario`. It builds ordinary pydantic-ai agents and drives them with plain
pydantic-ai code; harness-replay only watches the model traffic around it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from pydantic_core import to_jsonable_python

from .errors import ReplayUsageError

Mode = Literal["record", "replay"]
ScenarioFunc = Callable[["Run"], Awaitable[Any]]


@dataclass(frozen=True)
class Scenario:
    """A registered scenario function and what identifies it across versions."""

    id: str
    func: ScenarioFunc
    path: Path | None
    doc: str
    source_hash: str


@dataclass
class Observation:
    name: str
    value: Any


@dataclass
class Run:
    """Handle passed to a scenario: where it reports what it saw and what it expects.

    Observations end up in the cassette, so a predicate's answer (for example
    ``is_provider_valid(history)``) is compared across versions like the payloads are.
    """

    scenario_id: str
    mode: Mode = "record"
    observations: list[Observation] = field(default_factory=list)
    expectations: dict[str, Any] = field(default_factory=dict)

    def observe(self, name: str, value: Any) -> None:
        """Record a JSON-able value under ``name``; repeated names are kept in order."""
        try:
            jsonable = to_jsonable_python(value)
        except Exception as exc:  # pydantic_core raises PydanticSerializationError
            raise ReplayUsageError(f"run.observe({name!r}, ...): value is not JSON-able: {exc}") from exc
        self.observations.append(Observation(name, jsonable))

    def expect(self, name: str, value: Any) -> None:
        """Declare the value the observation ``name`` must have; ``replay check`` enforces it."""
        self.expectations[name] = to_jsonable_python(value)

    @property
    def recording(self) -> bool:
        return self.mode == "record"


_REGISTRY: dict[str, Scenario] = {}


def _source_hash(func: Callable[..., Any]) -> str:
    """Hash of the whole file: module-level constants and helpers shape a scenario as much as its body."""
    try:
        file = inspect.getsourcefile(func)
        source = Path(file).read_bytes() if file else func.__qualname__.encode()
    except (OSError, TypeError):
        source = func.__qualname__.encode()
    return hashlib.blake2b(source, digest_size=8).hexdigest()


def _module_stem(func: Callable[..., Any]) -> str:
    file = inspect.getsourcefile(func)
    if file:
        return Path(file).stem
    return func.__module__.rsplit(".", 1)[-1]


@overload
def scenario(func: ScenarioFunc, /) -> ScenarioFunc: ...
@overload
def scenario(id: str | None = None, /) -> Callable[[ScenarioFunc], ScenarioFunc]: ...


def scenario(arg: ScenarioFunc | str | None = None, /) -> Any:
    """Register an ``async def f(run)`` as a scenario.

    Use bare (``@scenario``: id ``<module>/<function>``) or with an id
    (``@scenario("seed000/long")``): an explicit id keeps cassettes attached when a
    file is renamed.
    """

    def register(func: ScenarioFunc, scenario_id: str | None) -> ScenarioFunc:
        if not inspect.iscoroutinefunction(func):
            raise ReplayUsageError(f"@scenario needs an async def, got {func.__qualname__}")
        sid = scenario_id or f"{_module_stem(func)}/{func.__name__}"
        file = inspect.getsourcefile(func)
        _REGISTRY[sid] = Scenario(
            id=sid,
            func=func,
            path=Path(file).resolve() if file else None,
            doc=inspect.getdoc(func) or inspect.getdoc(sys.modules.get(func.__module__)) or "",
            source_hash=_source_hash(func),
        )
        func.__replay_scenario_id__ = sid  # type: ignore[attr-defined]
        return func

    if callable(arg):
        return register(arg, None)
    return lambda func: register(func, arg)


def _import_file(path: Path) -> list[Scenario]:
    """Import a scenario file under a private module name and return what it registered.

    The module name hashes the file's path and content, so an edited file is imported
    afresh (its old registrations dropped) while an unchanged one is imported once.
    """
    path = path.resolve()
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ReplayUsageError(f"{path}: cannot read: {exc.strerror}") from None
    digest = hashlib.blake2b(str(path).encode() + b"\0" + source, digest_size=8).hexdigest()
    name = f"replay_scenarios.{path.stem}_{digest}"
    if name not in sys.modules:
        for sid in [sid for sid, s in _REGISTRY.items() if s.path == path]:
            del _REGISTRY[sid]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ReplayUsageError(f"{path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise ReplayUsageError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
    return sorted((s for s in _REGISTRY.values() if s.path == path), key=lambda s: s.id)


def _scenario_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if not p.name.startswith("_"))


def discover(targets: Iterable[str], default_dir: Path = Path("scenarios")) -> list[Scenario]:
    """Resolve command-line TARGETs: scenario files, directories, or scenario ids.

    An id is looked up among the scenarios of ``default_dir`` (ids may also be
    prefixes ending in ``/``, selecting a whole module).
    """
    targets = list(targets) or [str(default_dir)]
    chosen: dict[str, Scenario] = {}
    for target in targets:
        path = Path(target)
        if path.is_dir():
            for file in _scenario_files(path):
                chosen.update((s.id, s) for s in _import_file(file))
        elif path.is_file():
            chosen.update((s.id, s) for s in _import_file(path))
        else:
            if default_dir.is_dir():
                for file in _scenario_files(default_dir):
                    _import_file(file)
            matches = [s for sid, s in _REGISTRY.items() if sid == target or sid.startswith(target.rstrip("/") + "/")]
            if not matches:
                raise ReplayUsageError(f"{target}: no such scenario file, directory or scenario id")
            chosen.update((s.id, s) for s in matches)
    return sorted(chosen.values(), key=lambda s: s.id)


def get(scenario_id: str) -> Scenario | None:
    return _REGISTRY.get(scenario_id)

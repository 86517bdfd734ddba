"""harness-replay: record, replay and diff the model traffic of pydantic-ai agents.

The public API is re-exported here, lazily (PEP 562): the pytest plugin is loaded in every
pytest run of a project that installs this tool, and should not pay for deepdiff and
pydantic-ai imports until a test actually uses a cassette. Modules are the pipeline's stages
(scenario → recorder → cassette → replayer → normaliser → differ → reporter).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Cassette": "cassette",
    "Limits": "cassette",
    "load": "cassette",
    "loads": "cassette",
    "save": "cassette",
    "Diff": "differ",
    "diff": "differ",
    "Rules": "normaliser",
    "normalise": "normaliser",
    "Session": "recorder",
    "record": "recorder",
    "recording": "recorder",
    "ReplayResult": "replayer",
    "replay": "replayer",
    "Violation": "invariants",
    "register": "invariants",
    "run_checks": "invariants",
    "Run": "scenario",
    "Scenario": "scenario",
    "discover": "scenario",
    "scenario": "scenario",
}

from .errors import CassetteError, ReplayError, ReplayUsageError  # noqa: E402


class _Package(types.ModuleType):
    """``replay`` itself: ``replay.scenario`` is the decorator, never the module of that name.

    Importing the submodule ``replay.scenario`` (``from replay.scenario import discover``, or
    this package's lazy ``__getattr__``) binds it on the package; the decorator is bound in its
    place, as an eager ``from .scenario import scenario`` here once did. Lazy because every
    ``replay`` command and pytest run imports this package, and most never define a scenario.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scenario" and isinstance(value, types.ModuleType):
            value = value.scenario
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "Cassette",
    "CassetteError",
    "Diff",
    "Limits",
    "ReplayError",
    "ReplayResult",
    "ReplayUsageError",
    "Rules",
    "Run",
    "Scenario",
    "Session",
    "Violation",
    "diff",
    "discover",
    "load",
    "loads",
    "normalise",
    "record",
    "recording",
    "register",
    "replay",
    "run_checks",
    "save",
    "scenario",
]

if TYPE_CHECKING:
    from .cassette import Cassette, Limits, load, loads, save
    from .differ import Diff, diff
    from .invariants import Violation, register, run_checks
    from .normaliser import Rules, normalise
    from .recorder import Session, record, recording
    from .replayer import ReplayResult, replay
    from .scenario import Run, Scenario, discover, scenario


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

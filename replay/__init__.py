"""harness-replay: record, replay and diff the model traffic of pydantic-ai agents.

The public API is re-exported here, lazily (PEP 562): the pytest plugin is loaded in every
pytest run of a project that installs this tool, and should not pay for deepdiff and
pydantic-ai imports until a test actually uses a cassette. Modules are the pipeline's stages
(scenario → recorder → cassette → replayer → normaliser → differ → reporter).
"""

from __future__ import annotations

import importlib
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
}

# Eager and light: the ``scenario`` function shares its name with its module, and must win.
from .errors import CassetteError, ReplayError, ReplayUsageError  # noqa: E402
from .scenario import Run, Scenario, discover, scenario  # noqa: E402

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

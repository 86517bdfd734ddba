"""harness-replay: record, replay and diff the model traffic of pydantic-ai agents.

The public API is re-exported here; modules are the pipeline's stages
(scenario → recorder → cassette → replayer → normaliser → differ → reporter).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .cassette import Cassette, Limits, load, loads, save  # noqa: E402
from .differ import Diff, diff  # noqa: E402
from .errors import CassetteError, ReplayError, ReplayUsageError  # noqa: E402
from .normaliser import Rules, normalise  # noqa: E402
from .recorder import Session, record, recording  # noqa: E402
from .replayer import ReplayResult, replay  # noqa: E402
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
    "diff",
    "discover",
    "load",
    "loads",
    "normalise",
    "record",
    "recording",
    "replay",
    "save",
    "scenario",
]

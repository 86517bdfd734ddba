"""harness-replay: record, replay and diff the model traffic of pydantic-ai agents."""

from __future__ import annotations

from .errors import CassetteError, ReplayError, ReplayUsageError
from .scenario import Run, Scenario, scenario

__all__ = [
    "CassetteError",
    "ReplayError",
    "ReplayUsageError",
    "Run",
    "Scenario",
    "scenario",
]
__version__ = "0.1.0"

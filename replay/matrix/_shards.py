"""Shard results (``replay matrix --shard K/N --format json``) as ``replay merge`` and ``replay report`` read them.

A shard file arrives from another CI job, so it is untrusted input like a cassette: read
with a bound, refused unless it is a regular file, and checked against a schema of every
field the merge and the renderers use. Anything else is one line naming the file (exit 2),
never a traceback from deep inside the table code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CassetteError, ReplayUsageError

__all__ = ["MAX_BYTES", "load_shard"]

MAX_BYTES = 64 * 1024 * 1024
"""A whole matrix of thousands of cells is a few MB; more is not a results file."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Violation(_Open):
    invariant: str = "?"
    role: str | None = None
    index: int | None = None
    status: str | None = None
    message: Any = None
    every_version: bool | None = None


class _ObservationChange(_Open):
    path: str
    old: Any = None
    new: Any = None


class _Cell(_Open):
    status: Literal["same", "changed", "error"]
    error: str | None = None
    result: str | None = None
    violations: list[_Violation] = Field(default_factory=list)
    new_violations: list[_Violation] = Field(default_factory=list)
    wire: list[str] = Field(default_factory=list)
    cost: tuple[float | None, float | None] | None = None
    warnings: list[str] = Field(default_factory=list)
    changed_roles: list[str] = Field(default_factory=list)
    changed_requests: list[str] = Field(default_factory=list)
    roles: dict[str, tuple[Any, Any]] = Field(default_factory=dict)
    estimates: list[tuple[Any, Any]] = Field(default_factory=list)
    estimate_deltas: str = ""
    lost: list[str] = Field(default_factory=list)
    lost_parts: list[str] = Field(default_factory=list)
    requests: list[dict[str, Any]] = Field(default_factory=list)
    outcome: tuple[Any, Any] | None = None
    observations: list[str] = Field(default_factory=list)
    observation_changes: list[_ObservationChange] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """JUnit's ``time``: a number (``float("abc")`` was a traceback), finite (``time="inf"`` no reader takes)."""


class _Version(_Open):
    spec: str
    label: str | None = None
    status: str | None = None
    error: str | None = None
    harness: str | None = None
    slim: str | None = None
    python: str | None = None
    setup_seconds: float | None = None


class _Grid(_Open):
    scenarios: list[str]
    versions: list[str]


class _Summary(_Open):
    same: int = 0
    changed: int = 0
    error: int = 0


class _Results(_Open):
    matrix: Literal[1]
    grid: _Grid
    versions: list[_Version]
    scenarios: dict[str, dict[str, _Cell]]
    shard: str | None = None
    merged: list[str] = Field(default_factory=list)
    changed: bool = False
    summary: _Summary = Field(default_factory=_Summary)


def _where(error: Any) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ()))
    return f"{loc}: {error.get('msg', 'invalid')}" if loc else str(error.get("msg", "invalid"))


def check_results(doc: Any, name: str) -> dict[str, Any]:
    """``doc`` if it is matrix results whose cells belong to its own grid, else one :class:`ReplayUsageError`."""
    if not isinstance(doc, dict) or "matrix" not in doc:
        raise ReplayUsageError(f"{name}: not a replay matrix JSON result (no 'matrix' field)")
    try:
        results = _Results.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ReplayUsageError(f"{name}: not a valid replay matrix result: {_where(errors[0])}{more}") from None
    except (RecursionError, ValueError, TypeError) as exc:
        raise ReplayUsageError(f"{name}: not a valid replay matrix result: {type(exc).__name__}") from None
    scenarios, versions = set(results.grid.scenarios), set(results.grid.versions)
    for sid, row in results.scenarios.items():
        if sid not in scenarios:
            raise ReplayUsageError(f"{name}: scenario {sid!r} has cells but is not in the grid")
        stray = sorted(set(row) - versions)
        if stray:
            raise ReplayUsageError(f"{name}: scenario {sid!r} has a cell for {stray[0]!r}, which is not in the grid")
    stray = sorted({v.spec for v in results.versions} - versions)
    if stray:
        raise ReplayUsageError(f"{name}: version row {stray[0]!r} is not in the grid")
    return doc


def load_shard(path: Path) -> dict[str, Any]:
    """One results file, read with a bound and checked: what ``replay merge``/``report`` may trust."""
    from ..cassette import read_bounded

    try:
        data = read_bounded(path, MAX_BYTES)
    except CassetteError as exc:
        problem = exc.problem.replace("no such cassette", "no such file").replace("not a cassette", "not a results file")
        raise ReplayUsageError(f"{path}: cannot read matrix results: {problem}") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ReplayUsageError(f"{path}: cannot read matrix results: not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise ReplayUsageError(f"{path}: cannot read matrix results: nested too deeply") from None
    except ValueError as exc:
        raise ReplayUsageError(f"{path}: cannot read matrix results: {exc}") from None
    if isinstance(doc, dict) and "matrix" in doc:
        return check_results(doc, str(path))
    if not isinstance(doc, dict):
        raise ReplayUsageError(f"{path}: not a results object (a JSON {type(doc).__name__})")
    return doc  # `replay run --format json`, which `replay report` also reads

"""Line 10 of ``make bench``: the README's "At scale" section, from figures measured in this run.

10,000 cassettes x 11 harness versions in CI is too large to run here, so it is computed, but
from per-cassette figures this module measures, never typed in: the CPU of replaying each
bundled cassette in-process (what ``replay run`` does per scenario: load, guard, replay, save,
diff, checks), of a long conversation's cassette, of a replay process's start-up (importing
pydantic-ai and the harness), and the wall time of making one harness environment ready (uv
from its wheel cache, then its first process compiling what it imports). :func:`project` is the
arithmetic, kept apart so that it is tested on its own.
"""

from __future__ import annotations

import importlib.metadata
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASSETTES = 10_000
VERSIONS = 11
"""0.52.0 ... 0.62.0: the releases a user of this tool can install."""


@dataclass(frozen=True)
class Figures:
    """Per-unit costs, in seconds (CPU unless named wall)."""

    typical: float
    """Mean CPU of replaying one typical cassette (the bundled ones)."""
    long: float
    """CPU of replaying one long conversation's cassette (bench/_scenario.py)."""
    start: float
    """CPU of one replay process's start-up: paid once per version and runner (``replay matrix``
    runs one process per version, more only when cores are idle)."""
    env: float
    """Wall time of making one version's environment ready (uv, wheels cached; its first process's compiling)."""


@dataclass(frozen=True)
class Projection:
    """The slowest runner's share of the work (it decides the job's wall time)."""

    cells: int
    """Cassette x version replays it does."""
    envs: int
    """Environments it builds: one per version its slice spans."""
    seconds: float
    """Its wall time."""


def slices(total: int, runners: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each runner's cells: ``replay.matrix.shard_cells``'s contiguous slices."""
    return [((k - 1) * total // runners, k * total // runners) for k in range(1, runners + 1)]


def project(per_cassette: float, f: Figures, cores: int, runners: int = 1,
            cassettes: int = CASSETTES, versions: int = VERSIONS) -> Projection:
    """The slowest runner of ``cassettes x versions`` replays split over ``runners`` (``--shard K/N``).

    Cells are ordered version-major, so a runner builds the environments of the versions its
    slice spans and starts one replay process per version; its replays and process starts
    spread over its cores, its environments are built one per core at a time.
    """
    worst = Projection(0, 0, 0.0)
    for lo, hi in slices(cassettes * versions, runners):
        if hi <= lo:
            continue
        envs = (hi - 1) // cassettes - lo // cassettes + 1
        seconds = ((hi - lo) * per_cassette + envs * f.start) / cores + math.ceil(envs / cores) * f.env
        if seconds > worst.seconds:
            worst = Projection(hi - lo, envs, seconds)
    return worst


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def cpu(fn: Callable[[], Any]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def bundled(root: Path) -> list[float]:
    """CPU of ``replay_scenario`` for every bundled scenario whose replay gives a verdict (after one warm-up pass)."""
    from replay import _pipeline
    from replay.scenario import discover

    scenarios = discover([str(root / "scenarios")])
    out = Path(tempfile.mkdtemp(prefix="replay-bench-scale-"))
    try:
        for sc in scenarios:  # warm: each scenario's own imports and the adapters
            _pipeline.replay_scenario(sc, root / "cassettes", out)
        took: list[float] = []
        for sc in scenarios:
            t = time.process_time()
            report = _pipeline.replay_scenario(sc, root / "cassettes", out)
            if report.status != "error":
                took.append(time.process_time() - t)
        return took
    finally:
        shutil.rmtree(out, ignore_errors=True)


IMPORTS = "import replay.cli, replay._pipeline, pydantic_ai, pydantic_ai_harness, pydantic_ai_harness.compaction"
"""What a ``replay run`` process imports before its first scenario."""


def start_up(rounds: int) -> float:
    """Median CPU of a process that imports what a ``replay run`` process imports before its first scenario."""
    from run import _children_clock

    samples = []
    for _ in range(rounds):
        before = _children_clock()
        subprocess.run([sys.executable, "-c", IMPORTS], check=True)
        samples.append(_children_clock() - before)
    return statistics.median(samples)


def env_build(rounds: int) -> float | None:
    """Median wall time of making the installed harness version's environment ready in a fresh cache: the
    uv install, then its first process compiling the bytecode of what it imports (None without uv)."""
    from replay.matrix import _envs

    installer = _envs.find_installer()
    if installer.name != "uv":
        return None
    spec = _envs.parse_versions([importlib.metadata.version("pydantic-ai-harness")])[0]
    tool_hash = _envs.tool_source_hash()
    samples = []
    for _ in range(rounds):
        cache = Path(tempfile.mkdtemp(prefix="replay-bench-scale-env-"))
        try:
            t = time.perf_counter()
            info = _envs.ensure_env(spec, cache, installer, tool_hash)
            if info.status != "created":
                raise RuntimeError(f"{spec.spec}: {info.status} {info.error}")
            py = info.python_exe
            subprocess.run([str(py), "-c", IMPORTS], check=True, env=_envs.cell_environ(py))
            samples.append(time.perf_counter() - t)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return statistics.median(samples)

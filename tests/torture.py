"""Kill a cassette writer with SIGKILL at random points; shared by the tests and ``bench/reliability.py``.

The writer is a forked child (cheap, so a hundred kills take seconds) that saves two
different complete cassettes to one path in turn through :func:`replay.cassette.save`,
the same call ``replay record`` makes. After each kill the path must hold one of the two
complete cassettes, byte for byte.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from replay.cassette import Cassette, clean_stale_temps, dumps, load, save


@dataclass
class KillStats:
    kills: int = 0
    intact: int = 0
    """Kills after which the target loaded and equalled one of the two cassettes."""
    mid_write: int = 0
    """Kills that left a temp file behind, i.e. landed inside a write."""
    temps_cleaned: int = 0
    temps_left: int = 0
    """Temp files still present after ``clean_stale_temps`` (must be 0)."""


def two_cassettes(real: Path) -> tuple[Cassette, Cassette]:
    """A real cassette and a larger variant of it: different bytes, both complete and valid."""
    a = load(real)
    b = a.model_copy(deep=True)
    b.blobs.append({"padding": "x" * (2 * 1024 * 1024)})  # a write long enough to be interrupted
    b.header.scenario_id = f"{a.header.scenario_id}-variant"
    return a, b


def _writer(path: Path, a: Cassette, b: Cassette, ready: int) -> None:
    """Child: save a, signal, then alternate b, a, b, ... until killed."""
    try:
        save(a, path)
        os.write(ready, b"1")
        n = 0
        while True:
            n += 1
            save(b if n % 2 else a, path)
    finally:
        os._exit(0)


def kill_loop(directory: Path, a: Cassette, b: Cassette, kills: int, seed: int = 0) -> KillStats:
    """Fork a writer ``kills`` times and SIGKILL it after a random delay; check the file each time."""
    rng = random.Random(seed)
    path = directory / "target.cassette"
    expected = {dumps(a), dumps(b)}
    started = time.perf_counter()
    save(b, path)
    write_time = max(time.perf_counter() - started, 0.001)
    stats = KillStats()
    left_before = len(_temps(directory))
    for _ in range(kills):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            os.close(read_fd)
            _writer(path, a, b, write_fd)
        os.close(write_fd)
        try:
            os.read(read_fd, 1)  # the first save is done: the loop is running
            time.sleep(rng.uniform(0, 3 * write_time))
            os.kill(pid, signal.SIGKILL)
        finally:
            os.close(read_fd)
            os.waitpid(pid, 0)
        stats.kills += 1
        if path.read_bytes() in expected and load(path) in (a, b):
            stats.intact += 1
        temps = len(_temps(directory))
        stats.mid_write += temps - left_before
        left_before = temps
    stats.temps_cleaned = clean_stale_temps(directory)
    stats.temps_left = len(_temps(directory))
    return stats


def _temps(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]

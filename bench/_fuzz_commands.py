"""Hostile cassettes through every command (issue 13), for ``make reliability``.

Each case is a cassette file (valid msgpack of the wrong shape, hostile text in every text
field, random JSON-shaped values in random places; generators in tests/hostile.py). Two
worker processes run the commands in-process (``replay.cli.main`` with a prebuilt click
command: ~1 ms a command instead of ~0.5 s for a fresh interpreter) and count:

* crashes — a traceback, a built-in check that raised ("check failed: ..."), or an
  exception a command caught per scenario and reported as an internal error;
* escapes — a raw control character (ESC, C1, CR, NUL, U+2028, bidi...) or a forged line
  in what a command printed;
* bad exits — an unreadable cassette not exiting 2, any exit outside 0/1/2;
* slow — a command over 5 s of CPU (wall time is no measure on a shared machine; each
  command also has a 30 s wall-clock alarm, counted as slow).

A sample also goes through real ``python -m replay`` processes on a pseudo-terminal.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import os
import pty
import random
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostile

ROOT = hostile.ROOT
SLOW = 5.0
ALARM = 30
COMMANDS = ("show", "show --normalized", "show --format json", "ls", "check", "diff", "run", "merge")


@dataclass
class Tally:
    cases: int = 0
    runs: collections.Counter[str] = field(default_factory=collections.Counter)
    crashes: collections.Counter[str] = field(default_factory=collections.Counter)
    escapes: collections.Counter[str] = field(default_factory=collections.Counter)
    bad_exit: collections.Counter[str] = field(default_factory=collections.Counter)
    slow: collections.Counter[str] = field(default_factory=collections.Counter)
    slowest: tuple[float, str] = (0.0, "")
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.cases += other.cases
        for name in ("runs", "crashes", "escapes", "bad_exit", "slow"):
            getattr(self, name).update(getattr(other, name))
        self.slowest = max(self.slowest, other.slowest)
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)


class _Alarm(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Alarm()


_WORK: Path | None = None


def _init() -> None:
    global _WORK
    _WORK = Path(tempfile.mkdtemp(prefix="replay-fuzz-"))
    signal.signal(signal.SIGALRM, _on_alarm)
    sys.setrecursionlimit(10_000)


def judge(tally: Tally, command: str, label: str, result: hostile.CommandResult, refused: bool) -> None:
    """Count what one command did with one case."""
    tally.runs[command] += 1
    if result.crashed():
        tally.crashes[command] += 1
        first = (result.traceback or "").strip().splitlines()[-1:] or [result.out[-200:] + result.err[-200:]]
        tally.examples.setdefault(f"crash {command}", f"{label}: {first[0][:300]}")
    found = result.escapes()
    if found:
        tally.escapes[command] += 1
        tally.examples.setdefault(f"escape {command}", f"{label}: {found[:2]}")
    wrong = result.code not in (0, 1, 2) or (refused and command != "merge" and result.code != 2)
    if wrong:
        tally.bad_exit[command] += 1
        tally.examples.setdefault(f"exit {command}", f"{label}: exit {result.code} {result.err[:200]!r}")
    cost = result.cpu or result.seconds  # CPU time in-process (robust to a loaded machine), wall time on the pty
    if cost > SLOW:
        tally.slow[command] += 1
        tally.examples.setdefault(f"slow {command}", f"{label}: {cost:.1f}s CPU, {result.seconds:.1f}s wall")
    tally.slowest = max(tally.slowest, (cost, f"{command} {label}"))


def _run(*args: str | Path, cwd: Path = ROOT) -> hostile.CommandResult:
    signal.alarm(ALARM)
    try:
        return hostile.run_command(*args, cwd=cwd, reraise=(_Alarm,))
    except _Alarm:
        return hostile.CommandResult(tuple(map(str, args)), -9, "", "", float(ALARM), None, float(ALARM))
    finally:
        signal.alarm(0)


def work(batch: list[tuple[str, str, bytes, bool]]) -> Tally:
    """Every command on each case of ``batch`` (``run`` only where flagged: it replays the scenario)."""
    from replay.cassette import loads
    from replay.errors import CassetteError

    assert _WORK is not None
    tally = Tally()
    cassettes = _WORK / "cassettes"
    for label, sid, data, with_run in batch:
        tally.cases += 1
        target = cassettes / f"{sid}.cassette"
        for stale in cassettes.rglob("*.cassette") if cassettes.exists() else ():
            stale.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        try:
            loads(data)
            refused = False
        except CassetteError:
            refused = True
        base = ROOT / "cassettes" / f"{sid}.cassette"
        plan: list[tuple[str, tuple[str | Path, ...]]] = [
            ("show", ("show", target)),
            ("show --normalized", ("show", "--normalized", target)),
            ("show --format json", ("show", "--format", "json", target)),
            ("ls", ("ls", cassettes)),
            ("check", ("check", target)),
            ("diff", ("diff", base, target)),
        ]
        if with_run:
            plan.append(("run", ("run", sid, "--cassettes", cassettes, "--out", _WORK / "out")))
        for command, args in plan:
            judge(tally, command, label, _run(*args), refused)
    return tally


def work_merge(batch: list[tuple[str, str]]) -> Tally:
    assert _WORK is not None
    tally = Tally()
    good = _WORK / "shard2.json"
    if not good.exists():
        good.write_text(json.dumps(hostile.shard_docs()[1]))
    for label, text in batch:
        tally.cases += 1
        bad = _WORK / "shard1.json"
        bad.write_text(text, encoding="utf-8", errors="surrogatepass")
        judge(tally, "merge", label, _run("merge", bad, good), refused=False)
    return tally


def work_special(_: int) -> Tally:
    """Devices, FIFOs, directories and symlink loops under a cassette's name, through every command."""
    assert _WORK is not None
    tally = Tally()
    folder = _WORK / "special"
    folder.mkdir()
    for label, path in hostile.special_files(folder):
        tally.cases += 1
        for command, args in [
            ("show", ("show", path)),
            ("show --normalized", ("show", "--normalized", path)),
            ("show --format json", ("show", "--format", "json", path)),
            ("check", ("check", path)),
            ("diff", ("diff", ROOT / "cassettes" / "coverage" / "tool_call.cassette", path)),
            ("merge", ("merge", path)),
        ]:
            # check of a directory checks the cassettes in it (none): not a refusal
            refused = command != "merge" and not (label == "directory" and command == "check")
            judge(tally, command, label, _run(*args), refused=refused)
    judge(tally, "ls", "special folder", _run("ls", folder), refused=True)
    return tally


def _batches(cases: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for case in cases:
        batch.append(case)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


SYSTEMATIC_SPACE = 50_000
"""About how many systematic cases (every field x every hostile value) the bases give."""


def fuzz_commands(total: int, run_share: float, merges: int, seed: int, workers: int = 2) -> tuple[Tally, float]:
    """Returns the tally and the peak RSS (MB) of the worker processes. Three quarters of
    ``total`` are a sample of the systematic cases, the rest random placements."""
    systematic = min(1.0, 0.75 * total / SYSTEMATIC_SPACE)
    rng = random.Random(seed)
    flag = random.Random(seed + 1)
    cases = ((label, sid, data, flag.random() < run_share) for label, sid, data in hostile.command_cases(rng, total, systematic))
    tally = Tally()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init, maxtasksperchild=None) as pool:
        for part in pool.imap_unordered(work, _batches(cases, 40)):
            tally.add(part)
        for part in pool.imap_unordered(work_merge, _batches(hostile.merge_cases(rng, merges), 100)):
            tally.add(part)
        tally.add(pool.apply(work_special, (0,)))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return tally, peak


# --------------------------------------------------------------------------- real processes on a pty

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def on_pty(args: list[str], cwd: Path, timeout: float = 60) -> tuple[int, str, float]:
    """Run ``python -m replay ARGS`` with a pseudo-terminal as stdout and stderr; return code and output.

    rich colours its own labels on a terminal (SGR ``ESC[...m``); those are removed before
    counting, every other control character counts.
    """
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = start + timeout
    while True:
        ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.perf_counter()))
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    code = proc.wait()
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return code, _SGR.sub("", text), time.perf_counter() - start


def pty_sample(cases: int, seed: int) -> Tally:
    """``cases`` hostile cassettes through show/ls/check/diff (and a few through run) as real processes."""
    rng = random.Random(seed)
    everything = list(hostile.command_cases(random.Random(seed), 0, systematic=0.02))
    texts = [c for c in everything if ":text@" in c[0]]
    chosen = rng.sample(texts, min(cases // 2, len(texts))) + rng.sample(everything, min(cases - cases // 2, len(everything)))
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="replay-pty-") as tmp:
        work_dir = Path(tmp)
        for n, (label, sid, data) in enumerate(chosen):
            cassettes = work_dir / f"c{n}"
            target = cassettes / f"{sid}.cassette"
            target.parent.mkdir(parents=True)
            target.write_bytes(data)
            tally.cases += 1
            plan = [
                ("show", ["show", str(target)]),
                ("show --normalized", ["show", "--normalized", str(target)]),
                ("ls", ["ls", str(cassettes)]),
                ("check", ["check", str(target)]),
                ("diff", ["diff", str(ROOT / "cassettes" / f"{sid}.cassette"), str(target)]),
            ]
            if n % 8 == 0:
                plan.append(("run", ["run", sid, "--cassettes", str(cassettes), "--out", str(work_dir / "out")]))
            for command, args in plan:
                code, text, seconds = on_pty(args, ROOT)
                tb = "Traceback" if "Traceback (most recent call last)" in text else None
                result = hostile.CommandResult(tuple(args), code, text, "", seconds, tb)
                judge(tally, command, label, result, refused=False)
    return tally

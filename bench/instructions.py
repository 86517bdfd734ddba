"""Instruction counts of record and replay against the plain run: ``python bench/instructions.py [TURNS]``.

CPU time on a shared VM moves the same run by ±15 %, which hides a change of a few per cent;
an instruction count under cachegrind does not move (with ``PYTHONHASHSEED`` fixed: a random seed
changes set orders and dict sizes, ±30 M instructions a run). It shows the direction of a change,
not its CPU share: object-heavy pydantic-ai code retires ≈ 2 G instructions per CPU-second, the
checks' set and regex work ≈ 10 G. ``make bench`` stays the measure; this is the lens for a step.

Each figure is one child process under ``valgrind --tool=cachegrind --cache-sim=no``: imports and a
3-turn warm-up of every path (``none``), then one of the plain run, a record (capture, scrub, write)
or ``_pipeline.replay_scenario`` of the ``TURNS``-turn workload (default 60); the warm-up alone is
subtracted. Needs valgrind; prints one line per mode and the ratios.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODES = ("none", "plain", "record", "replay")


def child(mode: str, turns: int, work: Path) -> None:
    """One measured process: the warm-up, then ``mode`` once (the cassette to replay already on disk)."""
    sys.path[:0] = [str(HERE), str(ROOT)]
    os.chdir(ROOT)  # finalize() reads [tool.replay] from the project's pyproject
    from _scenario import conversation, make_scenario

    from replay import _pipeline
    from replay import cassette as cas
    from replay.recorder import Session, execute_async, finalize

    def record(sc: object, to: Path) -> None:
        cas.save(finalize(asyncio.run(execute_async(sc, Session()))), cas.cassette_path(to, sc.id))  # type: ignore[attr-defined]

    warm = make_scenario(3)
    asyncio.run(conversation(3))
    record(warm, work / "warm")
    assert _pipeline.replay_scenario(warm, work / "warm", work / "warm-results").status == "same"
    sc = make_scenario(turns)
    if mode == "plain":
        asyncio.run(conversation(turns))
    elif mode == "record":
        record(sc, work / "measured")
    elif mode == "replay":
        report = _pipeline.replay_scenario(sc, work / "cassettes", work / "results")
        assert report.status == "same", report.status


def instructions(mode: str, turns: int, work: Path) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
           sys.executable, __file__, "--child", mode, str(turns), str(work)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{mode}: the measured process failed: {done.stderr.strip()[-400:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instructions.py: valgrind is not installed (it counts the instructions)")
    work = Path(tempfile.mkdtemp(prefix="replay-bench-instructions-"))
    try:
        sys.path[:0] = [str(HERE), str(ROOT)]
        os.chdir(ROOT)
        from _scenario import make_scenario

        from replay import cassette as cas
        from replay.recorder import Session, execute_async, finalize

        sc = make_scenario(turns)  # the cassette line "replay" re-runs, recorded outside the measured processes
        cas.save(finalize(asyncio.run(execute_async(sc, Session()))), cas.cassette_path(work / "cassettes", sc.id))
        counts = {mode: instructions(mode, turns, work) for mode in MODES}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain = counts["plain"] - counts["none"]
    print(f"{turns} turns, PYTHONHASHSEED=0, instructions after the warm-up ({counts['none'] / 1e6:,.0f} M) is subtracted:")
    for mode in MODES[1:]:
        work_done = counts[mode] - counts["none"]
        print(f"  {mode:<7} {work_done / 1e6:>9,.1f} M   {work_done / plain:.3f}x the plain run")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()

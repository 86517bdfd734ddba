"""`make bench` itself: a line that crashes measures nothing (4b once died on a renamed private helper).

Only the cheap lines run here, once each, and only their shape is checked: figures belong to
`make bench`, never to assertions in tests.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_cheap_bench_lines_run_to_the_end() -> None:
    done = subprocess.run(  # 40 turns, not 200: the lines' shape is what is checked here
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "3,4"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "REPLAY_BENCH_TURNS": "40"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    for name in ("3 cassette size", "4a load vs vcrpy YAML", "4b load vs same JSON"):
        assert any(line.startswith(name) for line in done.stdout.splitlines()), done.stdout
    assert "structural schema + limits" in done.stdout  # 4b's "of which" steps are timed, not skipped
    assert "40 turns, " in done.stdout  # the workload the line names is the one it measured


def test_instruction_counts_measure_each_mode(tmp_path: object) -> None:
    """bench/instructions.py's measured processes (valgrind left out: what runs under it must run)."""
    from pathlib import Path

    work = Path(str(tmp_path))
    script = str(ROOT / "bench" / "instructions.py")
    for mode in ("none", "plain", "record"):
        done = subprocess.run([sys.executable, script, "--child", mode, "2", str(work)], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
        assert done.returncode == 0, f"{mode}: {done.stderr[-2000:]}"
    assert list((work / "measured").rglob("*.cassette")), "the record mode wrote no cassette"
    (work / "measured").rename(work / "cassettes")  # where main() leaves the recording the replay mode re-runs
    done = subprocess.run([sys.executable, script, "--child", "replay", "2", str(work)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert done.returncode == 0, f"replay: {done.stderr[-2000:]}"


def test_instruction_counts_without_valgrind_say_so_in_one_line() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "instructions.py"), "3"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PATH": "/nonexistent"})
    assert done.returncode != 0
    assert done.stderr.strip() == "bench/instructions.py: valgrind is not installed (it counts the instructions)"

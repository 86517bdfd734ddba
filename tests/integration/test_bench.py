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

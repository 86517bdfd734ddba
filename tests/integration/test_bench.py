"""`make bench` itself: a line that crashes measures nothing (4b once died on a renamed private helper).

Only the cheap lines run here, once each, and only their shape is checked: figures belong to
`make bench`, never to assertions in tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def test_cheap_bench_lines_run_to_the_end() -> None:
    done = subprocess.run(  # 40 turns, not 200: the lines' shape is what is checked here
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "3,4,10"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "REPLAY_BENCH_TURNS": "40"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    for name in ("3 cassette size", "3b streamed cassette", "4a load vs vcrpy YAML", "4b load vs same JSON"):
        assert any(line.startswith(name) for line in done.stdout.splitlines()), done.stdout
    assert "structural schema + limits" in done.stdout  # 4b's "of which" steps are timed, not skipped
    assert "40 turns, " in done.stdout  # the workload the line names is the one it measured
    assert "the same 40 turns with the main agent's requests streamed" in done.stdout and " 0 events" not in done.stdout
    # 10 (the README's "At scale"): every figure it projects from is measured in the run
    out = done.stdout
    assert "10 at scale" in out, out
    assert "55 bundled cassettes median" in out, out  # every bundled cassette replayed to a verdict
    assert "bench/_scenario.py at 40 turns" in out, out
    assert "environment " in out and "wall (uv install, wheels cached" in out, out
    assert "--shard K/11:" in out and "--shard K/100:" in out, out


def test_instruction_counts_measure_each_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/instructions.py's measured processes (valgrind left out: what runs under it must run).

    The warm-up alone (``none``, which every mode runs first) goes through the ``--child`` process valgrind
    measures; the modes after it call that process's ``child()`` here (a process each only imported
    pydantic-ai again). ``child`` moves into the checkout and onto bench/'s path: both put back after."""
    script = str(ROOT / "bench" / "instructions.py")
    done = subprocess.run([sys.executable, script, "--child", "none", "2", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert done.returncode == 0, f"none: {done.stderr[-2000:]}"
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import instructions

    for mode in ("plain", "record"):
        instructions.child(mode, 2, tmp_path)
    assert list((tmp_path / "measured").rglob("*.cassette")), "the record mode wrote no cassette"
    (tmp_path / "measured").rename(tmp_path / "cassettes")  # where main() leaves the recording the replay mode re-runs
    instructions.child("replay", 2, tmp_path)  # asserts the replay is same


def test_instruction_counts_without_valgrind_say_so_in_one_line() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "instructions.py"), "3"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PATH": "/nonexistent"})
    assert done.returncode != 0
    assert done.stderr.strip() == "bench/instructions.py: valgrind is not installed (it counts the instructions)"


def test_at_scale_slices_are_the_matrix_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The projection's runners get exactly the cells `replay matrix --shard K/N` gives them, and build
    one environment per version those cells span."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import at_scale

    from replay.matrix import shard_cells

    scenarios = [f"s{i:02d}" for i in range(7)]
    versions = ["0.52.0", "0.53.0", "0.54.0"]
    figures = at_scale.Figures(typical=10.0, long=10.0, start=0.001, env=0.5)  # the most cells, then the most envs
    for runners in range(1, 25):
        spans = []
        for k, (lo, hi) in enumerate(at_scale.slices(len(scenarios) * len(versions), runners), start=1):
            cells = shard_cells(scenarios, versions, (k, runners))
            assert hi - lo == len(cells)
            spans.append((hi - lo, len({v for v, _ in cells})))
        worst = at_scale.project(10.0, figures, cores=1, runners=runners, cassettes=len(scenarios), versions=len(versions))
        assert (worst.cells, worst.envs) == max(spans)


def test_at_scale_projection_adds_replays_starts_and_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import at_scale

    f = at_scale.Figures(typical=0.02, long=1.0, start=1.0, env=4.0)
    one = at_scale.project(0.02, f, cores=2, runners=1, cassettes=100, versions=3)
    # 300 replays of 20 ms and 3 process starts over 2 cores; 3 environments, 2 at a time
    assert (one.cells, one.envs) == (300, 3)
    assert abs(one.seconds - ((300 * 0.02 + 3 * 1.0) / 2 + 2 * 4.0)) < 1e-9


def test_scrub_linearity_lines_run(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/scrub_cost.py's linearity lines (at a fiftieth of their size: their shape is what is checked here)."""
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import scrub_cost  # it puts bench/ on the path itself: put it back as it was
    finally:
        sys.path[:] = saved
    scrub_cost.linear(scale=0.02)
    out = capsys.readouterr().out
    for name in ("values learned one by one", "placeholders in one text", "'sk-' prefixes in one text"):
        assert any(line.strip().startswith(name) and "ratio" in line for line in out.splitlines()), out


def test_the_diff_floor_process_loads_both_files_as_replay_diff_does(tmp_path: Path) -> None:
    """5d's floor (start-up, imports and the untrusted load of both files) runs and reads the project's limits."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import _diffload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    a = ROOT / "cassettes" / "coverage" / "tool_call.cassette"
    b = ROOT / "cassettes" / "coverage" / "fallback.cassette"
    done = subprocess.run([sys.executable, "-c", _diffload.FLOOR, str(a), str(b)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from replay.cassette import load

    assert done.stdout.strip() == str(len(load(a).exchanges) + len(load(b).exchanges))
    (tmp_path / "pyproject.toml").write_text("[tool.replay]\nmax-expanded = 10\n")  # the same bound `replay diff` would apply
    refused = subprocess.run([sys.executable, "-c", _diffload.FLOOR, str(a), str(b)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120)
    assert refused.returncode != 0 and "CassetteError" in refused.stderr and "max" in refused.stderr.lower(), refused.stderr[-2000:]

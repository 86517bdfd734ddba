"""`--timeout` / `[tool.replay] timeout`: a replay that never finishes is that scenario's error, and the
command still ends with a full report (run, matrix), even when the stuck code cannot be interrupted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HANGING = '''
import asyncio
import time

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def answer(messages, info):
    return ModelResponse(parts=[TextPart("ok")])


def tool_then_answer(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("slow", {}, tool_call_id="s1")])
    return ModelResponse(parts=[TextPart("ok")])


@scenario("hang/fine")
async def fine(run: Run) -> str:
    return (await Agent(FunctionModel(answer)).run("go")).output


@scenario("hang/spin")
async def spin(run: Run) -> str:
    """A loop that never awaits and never asks the model again: only the alarm stops it."""
    out = (await Agent(FunctionModel(answer)).run("go")).output
    while run.mode == "replay":
        pass
    return out


@scenario("hang/wait")
async def wait(run: Run) -> str:
    out = (await Agent(FunctionModel(answer)).run("go")).output
    if run.mode == "replay":
        await asyncio.Event().wait()
    return out


@scenario("hang/tool_thread")
async def tool_thread(run: Run) -> str:
    """A sync tool blocked in its worker thread: the run unwinds, the thread stays (Python waits for it at exit)."""
    agent = Agent(FunctionModel(tool_then_answer))

    @agent.tool_plain
    def slow() -> str:
        if run.mode == "replay":
            time.sleep(600)
        return "done"

    return (await agent.run("go")).output
'''

STUCK = '''
import asyncio
import time

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


@scenario("stuck/executor")
async def executor(run: Run) -> str:
    """asyncio.run joins its default executor before it returns: this run cannot be unwound at all."""
    out = (await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run("go")).output
    if run.mode == "replay":
        await asyncio.get_running_loop().run_in_executor(None, time.sleep, 600)
    return out


@scenario("stuck/later")
async def later(run: Run) -> str:
    return (await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run("go")).output
'''


@pytest.fixture
def hanging(cli, project: Path) -> Path:
    (project / "scenarios" / "hang.py").write_text(HANGING)
    assert cli("record").code == 0
    return project


def _replay(project: Path, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "replay", *args], cwd=project, capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)
    return proc, time.perf_counter() - started


def test_run_past_its_timeout_is_that_scenarios_error(cli, hanging: Path) -> None:
    r = cli("run", "hang/fine", "hang/spin", "hang/wait", "--timeout", "0.5", "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2, r.err
    rows = doc["scenarios"]
    assert rows["hang/fine"]["status"] == "same"
    for sid in ("hang/spin", "hang/wait"):
        assert rows[sid]["status"] == "error"
        assert rows[sid]["error"] == (f"cassettes/{sid}.cassette: the replay did not finish within 0.5 s "
                                      "(--timeout, [tool.replay] timeout; 0 for no bound)"), rows[sid]


def test_the_projects_timeout_applies_and_the_flag_wins(cli, hanging: Path) -> None:
    (hanging / "pyproject.toml").write_text("[tool.replay]\ntimeout = 0.5\n")
    r = cli("run", "hang/spin", "--format", "json")
    assert r.code == 2 and "within 0.5 s" in json.loads(r.out)["scenarios"]["hang/spin"]["error"], r.out
    r = cli("run", "hang/wait", "--timeout", "0.3", "--format", "json")
    assert "within 0.3 s" in json.loads(r.out)["scenarios"]["hang/wait"]["error"], r.out


@pytest.mark.parametrize("value", ["-1", '"soon"', "true", "nan", "inf"])
def test_a_bad_timeout_is_one_line_naming_the_file(cli, project: Path, value: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.replay]\ntimeout = {value}\n")
    r = cli("run")
    assert r.code == 2 and "pyproject.toml: [tool.replay] timeout must be a number of seconds (0 for no bound)" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_negative_flag_is_refused(cli, project: Path) -> None:
    r = cli("run", "--timeout", "-1")
    assert r.code == 2 and "--timeout" in r.err and "Traceback" not in r.err, r.err


@pytest.mark.parametrize("command", [("run",), ("matrix", "--harness", "0.62.0"), ("report", "x/y", "--harness", "0.62.0")])
@pytest.mark.parametrize("value", ["1e10", "inf", "10000000"])
def test_a_flag_past_what_an_alarm_can_hold_is_refused(cli, project: Path, command: tuple[str, ...], value: str) -> None:
    """`run --timeout 1e10` (or `inf`) was `internal error (a harness-replay bug, please report it): OverflowError:
    timestamp out of range for platform time_t` on every scenario; `[tool.replay] timeout` was bounded, the flag not."""
    (project / "scenarios" / "x.py").write_text("from replay import scenario\n@scenario('x/y')\nasync def y(run): ...\n")
    r = cli(*command, "--timeout", value)
    assert r.code == 2 and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert line.startswith("replay: error: --timeout ") and line.endswith(": give fewer than 10,000,000 seconds (0 for no bound)")


def test_a_thread_left_running_does_not_keep_the_process_alive(hanging: Path) -> None:
    """Regression: the run timed out, the report was printed, and the process then waited 600 s for the
    tool's thread at exit."""
    # 3 s, not 1: hang/fine, this fresh process's first replay, took over a second on a loaded machine (as in the
    # matrix test below: an error where the bound on hang/tool_thread was the point)
    proc, took = _replay(hanging, "run", "hang/fine", "hang/tool_thread", "--timeout", "3", "--format", "json")
    assert proc.returncode == 2, proc.stderr
    rows = json.loads(proc.stdout)["scenarios"]
    assert rows["hang/fine"]["status"] == "same" and "within 3 s" in rows["hang/tool_thread"]["error"]
    assert proc.stderr.strip() == ("replay: warning: hang/tool_thread: timed out with a thread still running (blocked "
                                   "in a call); exiting without waiting for it"), proc.stderr
    assert took < 60


def test_a_run_that_cannot_be_stopped_ends_the_command_with_the_report_of_what_is_done(cli, hanging: Path) -> None:
    (hanging / "scenarios" / "stuck.py").write_text(STUCK)
    assert cli("record", "stuck").code == 0
    proc, took = _replay(hanging, "run", "hang/fine", "stuck", "--timeout", "3", "--format", "json")  # 3 s: see above
    assert proc.returncode == 2
    rows = json.loads(proc.stdout)["scenarios"]
    assert rows["hang/fine"]["status"] == "same"
    assert rows["stuck/executor"]["error"] == ("cassettes/stuck/executor.cassette: the replay is still running 8 s after it "
                                               "started, past its 3 s bound, and it could not be stopped (a thread blocked "
                                               "in a call?)")
    assert rows["stuck/later"]["error"] == "not replayed: the run ended at stuck/executor, which could not be stopped"
    assert proc.stderr.strip().splitlines()[-1] == (
        "replay: error: stuck/executor: still running 8 s after it started, past its 3 s bound, and it could not be "
        "stopped (a thread blocked in a call?); the scenarios after it were not replayed"), proc.stderr
    assert took < 60


def test_matrix_passes_the_timeout_to_each_version(cli, hanging: Path, matrix_envs, monkeypatch: pytest.MonkeyPatch) -> None:
    (hanging / "scenarios" / "stuck.py").write_text(STUCK)
    assert cli("record", "stuck").code == 0
    monkeypatch.setenv("REPLAY_ENV_DIR", str(matrix_envs.env_dir))
    monkeypatch.setenv("CI", "1")
    # 3 s, not 1: in a version's own process the first replay pays pydantic-ai's first validations, and on a
    # loaded CI machine hang/fine alone took over a second (an error cell where the bound was the point)
    r = cli("matrix", "--harness", "0.62.0", "hang/fine", "hang/spin", "stuck", "--timeout", "3",
            "--jobs", "1", "--format", "json")
    cells = {sid: row["0.62.0"] for sid, row in json.loads(r.out)["scenarios"].items()}
    assert cells["hang/fine"]["status"] == "same", cells
    assert "the replay did not finish within 3 s" in cells["hang/spin"]["error"], cells
    assert "the replay is still running 8 s after it started" in cells["stuck/executor"]["error"], cells
    assert cells["stuck/later"]["error"] == "not replayed: the run ended at stuck/executor, which could not be stopped"

"""Shared fixtures: an in-process CLI runner, paths to the bundled material, and what the
whole session shares (bytecode, the matrix's environments) so the suite pays for it once."""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `import fake_openai`


# --------------------------------------------------------------------------- bytecode, once
# The suite starts ~100 Python processes (replay commands, matrix replays, pytester runs). Under
# PYTHONDONTWRITEBYTECODE (set in many CI images, and on the machine this was measured on) each one
# compiled every module it imported again: ≈1 s CPU per process for pydantic-ai alone, and each
# xdist worker re-ran assertion rewriting of every test module. `make setup` installs the venv with
# compiled bytecode; here the project's own sources are compiled, and collection may cache the
# rewritten test modules. The matrix's environments keep their own bytecode (replay.matrix._envs.cell_environ);
# scenario files never run from a .pyc (replay.scenario), so one rewritten within the same second is never stale.


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller compiled them and put the uv below on PATH before starting the workers
    for folder in ("replay", "scenarios", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=2, workers=1)
    _offline_first_uv()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _UV_SHIM and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(_UV_SHIM, ignore_errors=True)


# --------------------------------------------------------------------------- uv, from its cache first
# Each harness environment the suite builds (replay.matrix._envs: the shared 0.54.0/0.62.0 pair, the
# --with, --python, wheel and concurrency tests' own, their `uv pip install` of this checkout) spent
# ≈ 3 s of its ≈ 4.4 s revalidating uv's cached index pages with the index, one round trip after
# another; from the cache alone it takes ≈ 1 s. `UV_OFFLINE=1` for the whole session would break a
# machine whose cache lacks a package (a fresh one, a new --python), so the session gets a `uv` on
# PATH (found first by replay.matrix._envs.find_installer, and by the tests that run uv) that tries
# each command offline and, when that fails for any reason, runs it again exactly as asked: a
# command is never answered worse than before, only sooner. Nothing changes where the caller has set
# UV_OFFLINE either way, or has no uv (the matrix then falls back to venv + pip, as before).

_UV_SHIM: str | None = None

_UV_SHIM_SCRIPT = """#!/bin/sh
# uv for the test session (tests/conftest.py): offline (from uv's cache) first, then as asked.
uv={uv}
tmp=$(mktemp -d {dir}/run.XXXXXX) || exec "$uv" "$@"
if UV_OFFLINE=1 "$uv" "$@" >"$tmp/out" 2>"$tmp/err"; then
  cat "$tmp/out"; cat "$tmp/err" >&2; rm -rf "$tmp"; exit 0
fi
rm -rf "$tmp"
exec "$uv" "$@"
"""


def _offline_first_uv() -> None:
    global _UV_SHIM
    if "UV_OFFLINE" in os.environ or os.name != "posix":
        return
    real = shutil.which("uv")
    if real is None:
        try:
            from uv import find_uv_bin  # the `uv` the matrix would run as `python -m uv`
        except ImportError:
            return
        real = find_uv_bin()
    _UV_SHIM = tempfile.mkdtemp(prefix="replay-tests-uv-")
    shim = Path(_UV_SHIM) / "uv"
    shim.write_text(_UV_SHIM_SCRIPT.format(uv=shlex.quote(os.path.realpath(real)), dir=shlex.quote(_UV_SHIM)))
    shim.chmod(0o755)
    os.environ["PATH"] = f"{_UV_SHIM}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, None, None]:
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


# --------------------------------------------------------------------------- shared by every worker


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of this session that every xdist worker sees (their basetemps share a parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(directory: Path, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` run by the first worker that asks; the others wait for it and read its JSON result.

    A session-scoped fixture runs once per xdist worker; this is how the suite pays for an
    expensive setup (building harness environments) once per session instead.
    """
    result = directory / f"{name}.json"
    with open(directory / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            tmp = result.with_suffix(".tmp")
            tmp.write_text(json.dumps(make()))
            tmp.replace(result)
    return json.loads(result.read_text())


MATRIX_SCENARIOS = ["seed000/long", "seed001/keep_user_messages_true"]


@dataclass(frozen=True)
class MatrixEnvs:
    env_dir: Path
    """REPLAY_ENV_DIR holding the 0.54.0 and 0.62.0 environments, built by ``cold``."""
    out_dir: Path
    """The cold run's ``--out``: each version's result cassettes."""
    cold: subprocess.CompletedProcess[str]
    """The first ``replay matrix`` run on an empty cache: it built both environments."""


@pytest.fixture(scope="session")
def matrix_envs(session_dir: Path) -> MatrixEnvs:
    """Harness 0.54.0 and 0.62.0 environments, built once per session by a cold ``replay matrix``.

    Every test that replays on those two releases (matrix, report, seeds) uses this cache, so
    they are built once per session rather than once per module and worker. Only plain release
    specs may go here: an env of the same label with ``--with`` or ``--python`` has another key,
    and building it would prune these (such tests use a directory of their own).
    """
    env_dir, out_dir = session_dir / "replay-envs", session_dir / "matrix-cold"

    def cold() -> dict[str, Any]:
        """In-process, as the ``cli`` fixture runs it: the versions' replay processes are the fresh ones, and a
        process of its own for the command only paid again for importing pydantic-ai (every worker waits for it)."""
        from replay.cli import main

        args = ["matrix", "--harness", "0.54.0", "--harness", "0.62.0", *MATRIX_SCENARIOS, "--format", "json", "--out", str(out_dir)]
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as m, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            m.setenv("REPLAY_ENV_DIR", str(env_dir))
            m.setenv("CI", "1")
            m.delenv("GITHUB_STEP_SUMMARY", raising=False)
            m.chdir(ROOT)
            m.setattr(sys, "argv", ["replay", *args])
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
        return {"args": ["replay", *args], "returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}

    done = once(session_dir, "matrix-cold", cold)
    proc = subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])
    return MatrixEnvs(env_dir, out_dir, proc)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run ``replay ARGS`` in-process (fast) exactly as the console script does."""
    from replay.cli import main

    def run(*args: str, cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", ["replay", *map(str, args)])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


SPILL_AGENT = '''
"""An agent whose tool output is spilled to the harness's default store (LocalFileStore) and read back."""
import re
import tempfile
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.tool_output_limits import Band, LocalFileStore, Spill, ToolOutputLimits, Truncate


def answer(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("rows", {}, tool_call_id="c1")])
    if len(returns) == 1:
        handle = re.search(r"stored to handle '([^']+)'", str(returns[0].content)).group(1)
        return ModelResponse(parts=[ToolCallPart("read_tool_result", {"handle": handle}, tool_call_id="c2")])
    return ModelResponse(parts=[TextPart(f"read back {len(str(returns[1].content))} chars")])


def spilling_agent():
    limits = ToolOutputLimits(bands=[Band(over=200, action=Spill(then=Truncate(max_chars=80)))], store=LocalFileStore())
    agent = Agent(FunctionModel(answer), capabilities=[limits])

    @agent.tool_plain
    def rows() -> str:
        return "\\n".join(f"row {i}: green" for i in range(60))

    return agent
'''
"""Shared by a scenario (tests/integration/test_determinism.py) and a pytest test (test_pytest_plugin.py)."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory (own pyproject) to record into; cwd is set to it."""
    (tmp_path / "pyproject.toml").write_text("[tool.replay]\n")
    (tmp_path / "scenarios").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


SIMPLE_SCENARIO = '''
"""A scenario file written by the tests."""
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

from replay import Run, scenario

KEEP = {keep}


def answer(messages, info):
    return ModelResponse(parts=[TextPart("ready")])


def summarize(messages, info):
    return ModelResponse(parts=[TextPart("a summary")])


@scenario("simple/compact")
async def compact(run: Run) -> str:
    """Two turns through SummarizingCompaction."""
    agent = Agent(
        FunctionModel(answer),
        capabilities=[SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=KEEP)],
    )
    history = []
    for turn in range(4):
        result = await agent.run(f"turn {{turn}}", message_history=history)
        history = result.all_messages()
    run.observe("final_messages", len(history))
    return result.output
'''


@pytest.fixture
def write_scenario(project: Path) -> Callable[..., Path]:
    def write(keep: int = 2, name: str = "simple.py") -> Path:
        path = project / "scenarios" / name
        path.write_text(SIMPLE_SCENARIO.format(keep=keep))
        return path

    return write


# A tool result nested 250 deep: past the loader's default max-depth (200), so only a project that raises
# it in [tool.replay] can record and replay it; every command reading its files must use that limit.
DEEP_SCENARIO = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def answer(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("tree", {}, tool_call_id="t-1")])
    return ModelResponse(parts=[TextPart("done")])


@scenario("deep/tree")
async def tree(run: Run) -> str:
    agent = Agent(FunctionModel(answer))

    @agent.tool_plain
    def tree() -> dict:
        node: dict = {}
        for _ in range(250):
            node = {"child": node}
        return node

    return (await agent.run("go")).output
'''

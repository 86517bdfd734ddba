"""Shared fixtures: an in-process CLI runner and paths to the bundled material."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `import fake_openai`


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

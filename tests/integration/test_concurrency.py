"""Concurrent recordings stay apart: in one process (asyncio.gather) and across processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import hostile
import pytest

from replay.cassette import Cassette, cassette_path, clean_stale_temps, load, save
from replay.normaliser import normalise
from replay.recorder import Session, execute, execute_async, record
from replay.scenario import discover

SCENARIOS = '''
"""Two scenarios that interleave when run together: every model call yields to the loop."""
import asyncio
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def make(name: str) -> Agent:
    async def model(messages, info):
        await asyncio.sleep(0.005)
        if not any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[ToolCallPart("lookup", {"who": name})])
        return ModelResponse(parts=[TextPart(f"{name} done")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def lookup(who: str) -> str:
        await asyncio.sleep(0.005)
        return f"record of {who}"

    return agent


async def turns(run: Run, name: str) -> str:
    agent, history = make(name), []
    for turn in range(4):
        result = await agent.run(f"{name} turn {turn} id {uuid.uuid4()}", message_history=history)
        history = result.all_messages()
    run.observe("messages", len(history))
    return result.output


@scenario("conc/alpha")
async def alpha(run: Run) -> str:
    return await turns(run, "ALPHA")


@scenario("conc/beta")
async def beta(run: Run) -> str:
    return await turns(run, "BETA")
'''


def _normal(c: Cassette) -> dict[str, Any]:
    return normalise(c).as_json()


def _texts(c: Cassette) -> str:
    return repr(c.messages) + repr([r.prompt for r in c.runs])


def test_two_scenarios_recorded_concurrently_in_one_process(project: Path) -> None:
    (project / "scenarios" / "conc.py").write_text(SCENARIOS)
    a, b = discover(["conc/"], project / "scenarios")

    async def both() -> list[Cassette]:
        return list(await asyncio.gather(execute_async(a, Session()), execute_async(b, Session())))

    ca, cb = asyncio.run(both())
    assert (ca.header.scenario_id, cb.header.scenario_id) == ("conc/alpha", "conc/beta")
    assert "ALPHA" in _texts(ca) and "BETA" not in _texts(ca)
    assert "BETA" in _texts(cb) and "ALPHA" not in _texts(cb)
    assert len(ca.exchanges) == len(cb.exchanges) == 8
    assert [ex.seq for ex in ca.exchanges] == list(range(8))
    # exactly what each records alone, including the seeded ids in its prompts
    alone_a, alone_b = execute(a, Session()), execute(b, Session())
    assert _normal(ca) == _normal(alone_a) and _normal(cb) == _normal(alone_b)
    assert [r.prompt for r in ca.runs] == [r.prompt for r in alone_a.runs]


@pytest.mark.slow
def test_two_processes_record_into_one_directory(project: Path) -> None:
    (project / "scenarios" / "conc.py").write_text(SCENARIOS)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "replay", "record", sid], cwd=project, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for sid in ("conc/alpha", "conc/beta")
    ]  # fmt: skip
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    cassettes = project / "cassettes"
    for sid in ("conc/alpha", "conc/beta"):
        on_disk = load(cassette_path(cassettes, sid))
        assert on_disk.header.scenario_id == sid
        [sc] = discover([sid], project / "scenarios")
        assert _normal(on_disk) == _normal(record(sc))
    assert sorted(p.name for p in (cassettes / "conc").iterdir()) == ["alpha.cassette", "beta.cassette"]


def test_cleaning_temps_never_breaks_a_live_writer(tmp_path: Path) -> None:
    """Regression: a second ``replay record`` cleaning the directory deleted a live writer's temp file,
    so that writer's ``os.replace`` failed and its recording was lost."""
    cassette = load(hostile.SMALL_REAL)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            for _ in range(100):
                save(cassette, tmp_path / "live.cassette")
        except BaseException:
            code = 1
        os._exit(code)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        clean_stale_temps(tmp_path)
    assert os.waitstatus_to_exitcode(status) == 0, "the writer failed while another process cleaned"
    assert load(tmp_path / "live.cassette") == cassette
    assert [p.name for p in tmp_path.iterdir()] == ["live.cassette"]

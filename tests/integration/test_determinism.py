"""Recording the same scenario twice gives the same cassette; ``--check-determinism`` says when not."""

from __future__ import annotations

import secrets
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay._determinism import deterministic_ids, first_difference
from replay.recorder import record
from replay.replayer import replay
from replay.scenario import discover

SCENARIOS = '''
"""Scenarios whose prompts carry run-to-run ids, as some harness capabilities generate."""
import random
import secrets
import uuid
from uuid import uuid4  # imported by name, as pydantic_ai_harness.planning does

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def echo(messages, info):
    # Runs inside the model call: a provider SDK's ids there stay random on purpose.
    return ModelResponse(parts=[TextPart(f"ok {uuid.uuid4()}")])


@scenario("ids/uuid_prompt")
async def uuid_prompt(run: Run) -> str:
    agent = Agent(FunctionModel(echo))
    prompt = (
        f"step {uuid.uuid4()} task {uuid4().hex} nonce {secrets.token_hex(8)} "
        f"ref {secrets.token_urlsafe(9)} raw {secrets.token_bytes(4).hex()}"
    )
    result = await agent.run(prompt)
    run.observe("prompt", prompt)
    return result.output


@scenario("ids/random_prompt")
async def random_prompt(run: Run) -> str:
    agent = Agent(FunctionModel(echo))
    return (await agent.run(f"draw {random.random()}")).output
'''


def _prompt(cassette: Any) -> str:
    return cassette.observations[0].value


def test_uuid_and_secrets_ids_in_prompts_repeat(project: Path) -> None:
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    [sc] = discover(["ids/uuid_prompt"], project / "scenarios")
    first, second = record(sc), record(sc)
    assert _prompt(first) == _prompt(second)
    assert first.runs[0].prompt == second.runs[0].prompt == _prompt(first)
    # ids generated inside the model call are the SDK's: still random
    assert first.outcome.output != second.outcome.output
    # a replay regenerates the same ids, so it sends exactly what was recorded
    replayed = replay(sc, first).result
    assert replayed.runs[0].prompt == first.runs[0].prompt


def test_outside_a_scenario_ids_stay_random() -> None:
    original = uuid.uuid4
    with deterministic_ids("x"):
        inside = [uuid.uuid4(), secrets.token_hex()]
        assert uuid.uuid4 is not original
    with deterministic_ids("x"):
        assert [uuid.uuid4(), secrets.token_hex()] == inside
    assert uuid.uuid4 is original
    assert uuid.uuid4() != uuid.uuid4()
    assert inside[0].version == 4 and len(inside[1]) == 64



def _draw() -> uuid.UUID:
    return uuid.uuid4()


def _unrelated() -> uuid.UUID:
    return uuid.uuid4()


def test_ids_do_not_shift_when_another_caller_draws_first() -> None:
    """pydantic-graph draws ids only on the first run in a process: that must not move a scenario's ids."""
    with deterministic_ids("s"):
        plain = [_draw(), _draw()]
    with deterministic_ids("s"):
        _unrelated()
        shifted = [_draw(), _draw()]
    assert plain == shifted


def test_first_difference() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) is None
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "a[1].b"
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == "a[1]"
    assert first_difference({"a": 1}, {"b": 1}) == "a"
    assert first_difference(1, "1") == "<root>"


@pytest.mark.slow
def test_check_determinism_cli(project: Path) -> None:
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    proc = subprocess.run(
        [sys.executable, "-m", "replay", "record", "--check-determinism", "2"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "identical ids/uuid_prompt (2 recordings)" in lines
    [different] = [line for line in lines if line.startswith("DIFFERENT ids/random_prompt")]
    assert "first differ at " in different and "content" in different, different
    assert not (project / "cassettes").exists()  # never writes into the real cassette dir


def test_check_determinism_needs_two_runs(cli: Callable[..., Any], project: Path) -> None:
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    result = cli("record", "--check-determinism", "1")
    assert result.code == 2


def test_all_bundled_scenarios_are_deterministic_over_three_recordings() -> None:
    """The issue's bar: every bundled scenario, N=3 fresh processes, byte-identical normalised cassettes."""
    from conftest import ROOT

    proc = subprocess.run(
        [sys.executable, "-m", "replay", "record", "--check-determinism", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert sum(ln.startswith("identical ") for ln in lines) >= 24, proc.stdout

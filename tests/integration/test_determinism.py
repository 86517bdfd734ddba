"""Recording the same scenario twice gives the same cassette; ``--check-determinism`` says when not."""

from __future__ import annotations

import json
import secrets
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import SPILL_AGENT

from replay._determinism import deterministic_ids, first_difference
from replay.cassette import DEFAULT_LIMITS
from replay.recorder import record
from replay.replayer import replay
from replay.scenario import discover

SCENARIOS = '''
"""Scenarios whose prompts carry run-to-run ids, as some harness capabilities generate."""
import random
import json
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
def test_check_determinism_cli(cli: Callable[..., Any], project: Path) -> None:
    """The recordings are fresh processes (``check`` starts them); the command that starts them runs in-process."""
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    proc = cli("record", "--check-determinism", "2")
    assert proc.code == 1, proc.err
    lines = proc.out.splitlines()
    assert "identical ids/uuid_prompt (2 recordings)" in lines
    [different] = [line for line in lines if line.startswith("DIFFERENT ids/random_prompt")]
    assert "recording 1 and 2: main[0] differs at messages[0].parts[0].content: " in different, different
    assert lines[-1].startswith("a scenario must send the same requests on every run: seed `random`, sort what comes from a set")
    assert not (project / "cassettes").exists()  # never writes into the real cassette dir


def test_check_determinism_needs_two_runs(cli: Callable[..., Any], project: Path) -> None:
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    result = cli("record", "--check-determinism", "1")
    assert result.code == 2


def test_check_determinism_with_force_is_refused(cli: Callable[..., Any], project: Path) -> None:
    """``--check-determinism`` writes no cassette, so ``--force`` beside it was silently ignored."""
    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    result = cli("record", "--force", "--check-determinism", "2")
    assert result.code == 2
    assert "--force and --check-determinism do not go together" in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert not (project / "cassettes").exists()


def test_all_bundled_scenarios_are_deterministic_over_three_recordings(cli: Callable[..., Any]) -> None:
    """The issue's bar: every bundled scenario, N=3 fresh processes, byte-identical normalised cassettes.

    The three recordings are the fresh processes; the command that starts and compares them runs
    in-process (a process of its own only paid for importing pydantic-ai and the scenarios again).
    """
    from conftest import ROOT

    proc = cli("record", "--check-determinism", "3", cwd=ROOT)
    assert proc.code == 0, proc.out + proc.err
    lines = [ln for ln in proc.out.splitlines() if ln.strip()]
    assert sum(ln.startswith("identical ") for ln in lines) >= 24, proc.out


def _swap(c: Any, role: str, i: int, j: int) -> Any:
    """A copy of ``c`` whose role's calls ``i`` and ``j`` sent (and got) what the other did."""
    d = c.model_copy(deep=True)
    x = next(ex for ex in d.exchanges if ex.role == role and ex.index == i)
    y = next(ex for ex in d.exchanges if ex.role == role and ex.index == j)
    for attr in ("messages", "response", "estimate", "parameters", "settings"):
        a, b = getattr(x, attr), getattr(y, attr)
        setattr(x, attr, b)
        setattr(y, attr, a)
    return d


def test_report_names_a_swap_not_the_first_renumbered_alias() -> None:
    """#11 item 12: with generated tool-call ids, a swap renumbers every alias after it; the
    report must name main[2]/main[3], not the first tool_call_id whose ordinal moved."""
    from conftest import ROOT

    from replay._determinism import describe_difference
    from replay.cassette import load

    c = load(ROOT / "cassettes" / "coverage" / "trajectory_judge.cassette")
    for m in c.messages:  # give every tool call a generated id, as real runs have
        for p in m.get("parts", []):
            if p.get("tool_call_id"):
                p["tool_call_id"] = "pyd_ai_" + p["tool_call_id"].replace("-", "") + "0" * 24
    assert describe_difference(c, c) == "same requests and outcome; only the numbering of generated ids differs"
    swapped = _swap(c, "main", 2, 3)
    assert describe_difference(c, swapped) == "main[2] and main[3] swapped places (each sent what the other sent)"


def test_report_says_what_differs_in_the_first_differing_call() -> None:
    from conftest import ROOT

    from replay._determinism import describe_difference
    from replay.cassette import load

    c = load(ROOT / "cassettes" / "coverage" / "trajectory_judge.cassette")
    other = c.model_copy(deep=True)
    ex = next(e for e in other.exchanges if e.role == "trajectory_judge")
    first = other.messages[ex.messages[0]]
    other.messages.append({**first, "parts": [{**first["parts"][0], "content": "something else"}, *first["parts"][1:]]})
    ex.messages = [len(other.messages) - 1, *ex.messages[1:]]
    said = describe_difference(c, other)
    assert said.startswith("trajectory_judge[0] differs at messages[0].parts[0].content: "), said
    assert said.endswith("→ something else"), said
    fewer = c.model_copy(deep=True)
    fewer.exchanges = [e for e in fewer.exchanges if not (e.role == "main" and e.index == 6)]
    assert describe_difference(c, fewer) == "main[6] is only in recording 1"


def test_a_difference_from_the_committed_cassette_names_the_cassette(tmp_path: Path) -> None:
    """The committed cassette holds a call the fresh recordings do not make: the line said
    ``main[6] is only in recording 1`` (the cassette was "recording 1"), naming a recording that
    had no such call; each side is now named for what it is."""
    from conftest import ROOT

    from replay._determinism import DeterminismResult, _against_committed, describe_difference
    from replay.cassette import load, save

    c = load(ROOT / "cassettes" / "coverage" / "trajectory_judge.cassette")
    fewer = c.model_copy(deep=True)
    fewer.exchanges = [e for e in fewer.exchanges if not (e.role == "main" and e.index == 6)]
    save(c, tmp_path / "committed" / "coverage" / "trajectory_judge.cassette")
    save(fewer, tmp_path / "fresh" / "coverage" / "trajectory_judge.cassette")
    result = _against_committed(DeterminismResult("coverage/trajectory_judge", 2, True), tmp_path / "fresh",
                                tmp_path / "committed", DEFAULT_LIMITS)
    assert not result.identical
    assert result.detail.endswith(": main[6] is only in the cassette"), result.detail
    assert describe_difference(fewer, c, ("recording 1", "recording 3")) == "main[6] is only in recording 3"


def test_run_ids_are_seeded_and_stay_time_ordered() -> None:
    """pydantic-ai's run ids (its own ``uuid7``) reach prompts through spill handles and step-persistence
    results, which the model then quotes back: a replay must draw the ones the recording drew."""
    from pydantic_ai import _uuid

    def draw() -> list[uuid.UUID]:
        return [_uuid.uuid7() for _ in range(3)]

    with deterministic_ids("s"):
        first = draw()
    with deterministic_ids("s"):
        again = draw()
    with deterministic_ids("t"):
        other = draw()
    assert first == again and first != other
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in first)
    assert first == sorted(first)  # creation order, as real uuid7s sort
    assert _uuid.uuid7() != _uuid.uuid7()  # outside a scenario: the real function


def _ids(in_comprehension: bool) -> list[str]:
    if in_comprehension:
        return [secrets.token_hex(8) for _ in range(3)] + [str(u) for u in {uuid.uuid4() for _ in range(1)}]
    out = []
    for _ in range(3):
        out.append(secrets.token_hex(8))
    return out + [str(uuid.uuid4())]


def test_an_id_drawn_in_a_comprehension_is_the_same_on_every_python() -> None:
    """3.12 runs a list, dict or set comprehension in its function's own frame (PEP 709), 3.11 in a frame of
    its own: ids drawn in one came from another generator on each, so a cassette recorded on 3.11 replayed
    ``changed`` on 3.12 and 3.13 (``refs bf9d357c… → refs 458c7fba…``). Both now draw as 3.12 does."""
    with deterministic_ids("s"):
        in_comprehension = _ids(True)
    with deterministic_ids("s"):
        in_loop = _ids(False)
    assert in_comprehension == in_loop


def _here() -> str:
    from replay._determinism import site_name

    return site_name(sys._getframe(1).f_code.co_qualname)


class _InClass:
    site = [_here() for _ in range(1)][0]


_AT_MODULE = ([_here() for _ in range(1)][0], [(lambda: _here())() for _ in range(1)][0])


def test_call_sites_are_named_as_python_3_12_names_them() -> None:
    """The names 3.12 and 3.13 give (the comprehension's frame is its function's), on every Python."""
    from replay._determinism import site_name

    assert [_here() for _ in range(1)] == [{k: _here() for k in range(1)}[0]] == [[[_here()] for _ in range(1)][0][0]]
    assert [_here() for _ in range(1)][0] == _here() == "test_call_sites_are_named_as_python_3_12_names_them"
    here = "test_call_sites_are_named_as_python_3_12_names_them.<locals>"
    assert [(lambda: _here())() for _ in range(1)][0] == f"{here}.<lambda>"
    assert next(_here() for _ in range(1)) == f"{here}.<genexpr>"  # a generator keeps its own frame on 3.12
    assert _InClass.site == "_InClass" and _AT_MODULE == ("<module>", "<lambda>")
    assert site_name("f.<locals>.<listcomp>.<listcomp>") == "f" and site_name("C.m") == "C.m"


def test_a_run_id_bound_by_name_is_seeded_too() -> None:
    """``from pydantic_ai._uuid import uuid7`` copies the function into the importing module (_agent_graph)."""
    from pydantic_ai import _agent_graph, _uuid

    original = _agent_graph.uuid7
    with deterministic_ids("s"):
        assert _agent_graph.uuid7 is not original
        seeded = _agent_graph.uuid7()
    with deterministic_ids("s"):
        assert _agent_graph.uuid7() == seeded
    assert _agent_graph.uuid7 is original is _uuid.uuid7


def test_check_determinism_speaks_json_and_escapes_text(cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`record -f json --check-determinism N` printed text; and the detail (what the recordings sent) went
    to the terminal unescaped."""
    from replay import _determinism

    (project / "scenarios" / "ids.py").write_text(SCENARIOS)
    found = [_determinism.DeterminismResult("ids/uuid_prompt", 2, True),
             _determinism.DeterminismResult("ids/random_prompt", 2, False, "main[0] differs at x: a\x1b[2J → b")]
    monkeypatch.setattr(_determinism, "check", lambda scenarios, n, where, committed=None, limits=None: found)
    r = cli("record", "--check-determinism", "2", "--format", "json")
    assert r.code == 1 and json.loads(r.out)["ids/random_prompt"] == {
        "identical": False, "recordings": 2, "detail": "main[0] differs at x: a\x1b[2J → b"}
    text = cli("record", "--check-determinism", "2").out
    assert "\x1b" not in text and "DIFFERENT ids/random_prompt" in text


LEFTOVER = '''
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


@scenario("state/memory")
async def memory(run: Run) -> str:
    marker = Path("notes") / "seen.txt"  # a fixed folder, as a real project keeps its agent's memory
    first = not marker.exists()
    marker.parent.mkdir(exist_ok=True)
    marker.write_text("seen")
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])))
    return (await agent.run("first visit" if first else "welcome back")).output
'''


@pytest.mark.slow
def test_check_determinism_compares_with_the_committed_cassette(cli: Callable[..., Any], project: Path) -> None:
    """A scenario keeping state in a fixed folder: every probe sees what the recording left, so the probes agree
    with each other and the check said `identical` while every replay read `changed`.

    What is left behind is a file, so the recording and the command run in-process; the probes are
    fresh processes (``check`` starts them)."""
    (project / "scenarios" / "state.py").write_text(LEFTOVER)
    assert cli("record", "state/memory").code == 0
    proc = cli("record", "--check-determinism", "2", "state/memory")
    assert proc.code == 1, proc.out + proc.err
    (line,) = [ln for ln in proc.out.splitlines() if ln.startswith("DIFFERENT state/memory")]
    assert "the recordings agree with each other but not with cassettes/state/memory.cassette" in line, line
    assert "first visit" in line and "welcome back" in line


SPILL = SPILL_AGENT + '''
from replay import Run, scenario


@scenario("spill/read_back")
async def read_back(run: Run) -> str:
    run.observe("tmp", tempfile.gettempdir())  # the scenario's own: paths it sends stay as recorded
    return (await spilling_agent().run("Read every row.")).output
'''


def test_a_scenario_writes_its_temporary_files_in_a_directory_of_its_own(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded run ids made every run of a scenario spill to one path in the shared temp directory
    (``<tmp>/pyai_harness_overflow-<uid>/<run id>/``): a replay could read what another version or a
    concurrent matrix cell wrote there, and every run left its files behind. Only the harness's files
    move: a path the scenario's own code builds from the temp directory is sent as recorded."""
    import tempfile

    system_tmp = project / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    (project / "scenarios" / "spill.py").write_text(SPILL)
    [sc] = discover(["spill/read_back"], project / "scenarios")
    recorded = record(sc)
    assert recorded.outcome.status == "ok" and recorded.outcome.output.startswith("read back "), recorded.outcome
    assert list(system_tmp.iterdir()) == []  # nothing left behind
    assert recorded.observations[0].value == str(system_tmp)
    replayed = replay(sc, recorded).result
    assert replayed.outcome == recorded.outcome
    # the network guard's folder for Python children is the process's, removed when it exits
    assert [p.name for p in system_tmp.iterdir() if not p.name.startswith("replay-guard-")] == []


FLAKY = '''
import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from replay import Run, scenario


@scenario("flaky/every_other")
async def every_other(run: Run) -> str:
    """Fails on every other recording (a counter in a file): the nondeterminism the check exists for."""
    counter = Path(os.environ["FLAKY_COUNTER"])
    with counter.open("a") as f:
        f.write("x")
    if len(counter.read_text()) % 2 == 0:
        raise RuntimeError("flaky failure")
    return (await Agent(TestModel()).run("hi")).output


@scenario("flaky/steady")
async def steady(run: Run) -> str:
    return (await Agent(TestModel()).run("hello")).output
'''


def test_a_recording_that_fails_once_is_that_scenarios_difference_not_the_end_of_the_check(
    cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One scenario raising in one of the N recordings stopped the whole check (`replay: error: determinism
    check: recording 2 failed: …`, exit 2): no verdict for any other scenario, though a scenario that fails
    on some runs only is exactly what the check is for."""
    monkeypatch.setenv("FLAKY_COUNTER", str(project / "counter.txt"))
    (project / "scenarios" / "flaky.py").write_text(FLAKY)
    proc = cli("record", "--check-determinism", "2")
    assert proc.code == 1, proc.out + proc.err
    lines = proc.out.splitlines()
    assert "identical flaky/steady (2 recordings)" in lines, proc.out + proc.err
    [flaky] = [line for line in lines if line.startswith("DIFFERENT flaky/every_other")]
    assert "failed" in flaky and "flaky failure" in flaky, flaky


def test_concurrent_conversations_whose_summaries_trade_places_are_identical(tmp_path: Path) -> None:
    """Three conversations at once, each with a summarizer: latency decides which summarizer call comes first,
    so from one recording to the next two of them trade places. ``replay run`` pairs them by conversation and
    content and says ``same`` every time; ``--check-determinism`` compared bytes and said ``DIFFERENT …
    summarizing_compaction[0] and summarizing_compaction[1] swapped places``, a nondeterminism no replay shows.
    A recording whose summaries really differ is still ``DIFFERENT``."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai_harness.compaction import SummarizingCompaction

    from replay._determinism import _compare
    from replay.cassette import cassette_path, save
    from replay.recorder import finalize, record
    from replay.scenario import Scenario

    def scenario(slow: str, summary: str = "sum") -> Scenario:
        async def summ(messages: Any, info: Any) -> ModelResponse:
            return ModelResponse(parts=[TextPart(summary)])

        async def main(messages: Any, info: Any) -> ModelResponse:
            first = str(messages[0].parts[-1].content) if messages and messages[0].parts else ""
            await asyncio.sleep(0.03 if first.startswith(slow) else 0)
            return ModelResponse(parts=[TextPart(f"r{len(messages)}")])

        async def func(run: Any) -> list[str]:
            agent = Agent(FunctionModel(main), capabilities=[
                SummarizingCompaction(model=FunctionModel(summ), max_messages=4, keep_messages=2)])

            async def convo(tag: str) -> str:
                history: list[Any] = []
                for i in range(3):
                    result = await agent.run(f"{tag}{i}", message_history=history)
                    history = result.all_messages()
                return result.output

            return list(await asyncio.gather(*(convo(t) for t in "abc")))

        return Scenario(id="conc/summaries", func=func, path=None, doc="", source_hash="0")

    dirs = [tmp_path / f"run{i}" for i in (1, 2, 3)]
    for d, c in zip(dirs, (record(scenario("a")), record(scenario("b")), record(scenario("a", "another")))):
        save(finalize(c), cassette_path(d, "conc/summaries"))
    from replay._determinism import normalised_bytes

    first, second = (cassette_path(d, "conc/summaries") for d in dirs[:2])
    assert normalised_bytes(first) != normalised_bytes(second)  # the calls did trade places
    assert _compare("conc/summaries", dirs[:2], DEFAULT_LIMITS).identical
    assert not _compare("conc/summaries", [dirs[0], dirs[2]], DEFAULT_LIMITS).identical

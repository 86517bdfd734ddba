"""`replay run --accept`: a new baseline the installed harness would really record, or an honest refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from replay.cassette import load

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

KEY = "sk-proj-accepttest00c0ffee1234"

PROVIDER = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario

TURNS = 2
INSTRUCTIONS = "Answer briefly."


@scenario("prov/chat")
async def chat(run: Run) -> str:
    provider = OpenAIProvider(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider), instructions=INSTRUCTIONS)
    history = []
    for turn in range(TURNS):
        result = await agent.run(f"turn {turn}", message_history=history)
        history = result.all_messages()
    return result.output
'''

EXPECTING = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario

PROMPT = "Is it ready?"


@scenario("exp/answer")
async def answer(run: Run) -> str:
    async def respond(messages, info):
        return ModelResponse(parts=[TextPart("yes")])

    result = await Agent(FunctionModel(respond)).run(PROMPT)
    run.expect("asked", "Is it ready?")
    run.observe("asked", PROMPT)
    return result.output
'''


def test_in_process_recording_is_re_recorded_even_when_the_replay_diverged(
    cli: Callable[..., Any], write_scenario: Callable[..., Path], project: Path
) -> None:
    path = write_scenario()
    assert cli("record").code == 0
    target = project / "cassettes" / "simple" / "compact.cassette"
    path.write_text(path.read_text().replace("range(4)", "range(5)"))  # one more main request than recorded
    r = cli("run", "--accept", "--on-exhausted", "repeat")
    assert r.code == 0, r.err
    assert "accepted     simple/compact: re-recorded (in-process models)" in r.err
    c = load(target)
    assert c.header.mode == "record" and not any(ex.carried_over for ex in c.exchanges)
    assert len(c.by_role()["main"]) == 5
    assert cli("run").code == 0  # the new baseline replays unchanged


def test_one_line_per_scenario(cli: Callable[..., Any], write_scenario: Callable[..., Path], project: Path) -> None:
    write_scenario()
    write_scenario(name="other.py").write_text(
        (project / "scenarios" / "other.py").read_text().replace("simple/compact", "simple/other")
    )
    assert cli("record").code == 0
    r = cli("run", "--accept")
    assert r.code == 0
    assert sorted(r.err.splitlines()) == ["unchanged    simple/compact", "unchanged    simple/other"]


def _recorded_then_edited(cli: Callable[..., Any], project: Path, sid: str, source: str, edit: tuple[str, str]) -> tuple[Path, bytes]:
    """``source`` recorded as ``scenarios/<file>.py``, then edited: the cassette and its bytes before the edit."""
    scenario = project / "scenarios" / f"{sid.split('/')[0]}.py"
    scenario.write_text(source)
    assert cli("record").code == 0
    target = project / "cassettes" / f"{sid}.cassette"
    before = target.read_bytes()
    scenario.write_text(source.replace(*edit))
    return target, before


def test_new_violations_are_not_accepted_unless_asked(cli: Callable[..., Any], project: Path) -> None:
    target, before = _recorded_then_edited(cli, project, "exp/answer", EXPECTING, ('PROMPT = "Is it ready?"', 'PROMPT = "Is it done?"'))
    r = cli("run", "--accept")
    assert r.code == 1
    assert "not accepted exp/answer: 1 new violation(s) (expectation scenario)" in r.err
    assert "--accept-violations" in r.err and target.read_bytes() == before
    r = cli("run", "--accept-violations")
    assert r.code == 0 and "accepted     exp/answer" in r.err and target.read_bytes() != before


DECLARED = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario

RAISE_ON = "ok"


@scenario("err/declared", expect_error="ValueError")
async def declared(run: Run) -> str:
    result = await Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")]))).run("go")
    if result.output == RAISE_ON:
        raise ValueError("the harness accepted a blank summary")
    return result.output
'''


def test_a_replay_that_no_longer_ends_as_declared_is_not_accepted(cli: Callable[..., Any], project: Path) -> None:
    """`replay record` refuses a run that ends without the error it declares; `--accept` wrote it."""
    target, before = _recorded_then_edited(cli, project, "err/declared", DECLARED, ('RAISE_ON = "ok"', 'RAISE_ON = "nope"'))
    assert cli("record", "--force").code == 2 and target.read_bytes() == before
    for flag in ("--accept", "--accept-violations"):
        r = cli("run", flag)
        assert r.code == 1, r.out + r.err
        assert "not accepted err/declared: returned normally; expected ValueError" in r.err, r.err
        assert target.read_bytes() == before


@pytest.fixture
def provider_project(project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    (project / "scenarios" / "prov.py").write_text(PROVIDER)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(["first answer", "second answer"]) as srv:
        monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
        assert cli("record").code == 0
    monkeypatch.delenv("OPENAI_API_KEY")
    return project


def test_provider_answers_to_changed_requests_are_marked_carried_over(
    provider_project: Path, cli: Callable[..., Any]
) -> None:
    scenario = provider_project / "scenarios" / "prov.py"
    target = provider_project / "cassettes" / "prov" / "chat.cassette"
    old = provider_project / "old.cassette"
    old.write_bytes(target.read_bytes())
    scenario.write_text(PROVIDER.replace('"Answer briefly."', '"Answer in one word."'))
    r = cli("run", "--accept")
    assert r.code == 0, r.err
    assert "accepted     prov/chat: -> " in r.err and "2 answer(s) carried over from a different request" in r.err
    c = load(target)
    assert [ex.carried_over for ex in c.exchanges] == [True, True]
    shown = cli("show", target).out
    assert shown.count("(answer carried over from a different request)") == 2
    diffed = cli("diff", old, target)
    assert "answer carried over from a different request at main[0], main[1]" in diffed.out
    # Replaying the accepted baseline is same, and still says whose answers these are.
    again = cli("run")
    assert again.code == 0 and "carried over" in again.out


def test_provider_replay_that_diverged_is_refused(provider_project: Path, cli: Callable[..., Any]) -> None:
    scenario = provider_project / "scenarios" / "prov.py"
    target = provider_project / "cassettes" / "prov" / "chat.cassette"
    before = target.read_bytes()
    scenario.write_text(PROVIDER.replace("TURNS = 2", "TURNS = 3"))
    r = cli("run", "--accept", "--on-exhausted", "repeat")
    assert r.code == 1 and "not accepted prov/chat: the replay diverged" in r.err and "re-record it" in r.err
    assert target.read_bytes() == before


def test_kill_9_during_accept_leaves_no_torn_or_temp_files(
    cli: Callable[..., Any], write_scenario: Callable[..., Path], project: Path
) -> None:
    """Issue 13: SIGKILL at several points of `run --accept`; every cassette loads, the next run leaves no temps."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from replay.cassette import iter_cassettes

    for name in ("a.py", "b.py", "c.py"):
        path = write_scenario(name=name)
        path.write_text(path.read_text().replace("simple/compact", f"simple/{name[0]}"))
    assert cli("record").code == 0
    for name in ("a.py", "b.py", "c.py"):
        path = project / "scenarios" / name
        path.write_text(path.read_text().replace("KEEP = 2", "KEEP = 3"))
    args = [sys.executable, "-m", "replay", "run", "--accept-violations"]
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    for delay in (1.0, 2.0, 3.0):
        proc = subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for path in iter_cassettes(project):
            load(path)  # never torn
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert [p for p in project.rglob("*.tmp")] == []
    assert len(list(iter_cassettes(project / "cassettes"))) == 3


def _provider_cassette(sid: str, depth: int, text: str) -> Any:
    from replay.cassette import CassetteBuilder, Exchange, Header

    b = CassetteBuilder(Header(scenario_id=sid))
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"c": node}
    ids = b.messages([{"kind": "request", "parts": [{"part_kind": "tool-return", "content": node, "tool_name": "t"}]},
                      {"kind": "response", "parts": [{"part_kind": "text", "content": text}]}])
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", model_system="openai",
                                         messages=ids[:1], response=ids[1]))
    return b.cassette


def test_a_replay_the_loader_refuses_is_not_accepted_and_the_others_still_are(tmp_path: Path) -> None:
    """Regression: a provider recording's replay that the loader refuses (a tool's result now nested past
    max-depth) raised out of accept, so `run --accept` ended on one 'replay: error' line and accepted none
    of the other scenarios."""
    from replay import _pipeline
    from replay.cassette import save
    from replay.differ import diff
    from replay.reporter import ScenarioReport

    reports = []
    for sid, depth in (("a/deep", 250), ("b/fine", 3)):
        recorded, replayed = _provider_cassette(sid, 3, "old"), _provider_cassette(sid, depth, "new")
        name = sid.replace("/", "_") + ".cassette"
        (tmp_path / "c").mkdir(exist_ok=True)
        (tmp_path / "r").mkdir(exist_ok=True)
        kept, result = save(recorded, tmp_path / "c" / name), save(replayed, tmp_path / "r" / name)
        reports.append(ScenarioReport(sid, "changed", diff=diff(recorded, replayed), cassette=str(kept), result=str(result)))
    before = (tmp_path / "c" / "a_deep.cassette").read_bytes()
    out = {o.scenario_id: o for o in _pipeline.accept(reports, {})}
    assert out["a/deep"].status == "not accepted" and "nesting deeper than 200" in out["a/deep"].detail
    assert "raise that limit" in out["a/deep"].detail and "\n" not in out["a/deep"].detail
    assert out["b/fine"].status == "accepted", out
    assert (tmp_path / "c" / "a_deep.cassette").read_bytes() == before  # the baseline is left as it was


def test_a_baseline_that_cannot_be_written_is_not_accepted_and_the_others_still_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a provider recording whose new baseline could not be written (a full disk, a read-only
    folder) raised out of accept, so `run --accept` ended on one 'replay: error' line: the scenarios accepted
    before it were never said to be, and those after it were never accepted."""
    from replay import _pipeline
    from replay.cassette import CassetteError, save
    from replay.differ import diff
    from replay.reporter import ScenarioReport

    reports = []
    for sid in ("a/first", "b/full", "c/last"):
        recorded, replayed = _provider_cassette(sid, 3, "old"), _provider_cassette(sid, 3, "new")
        name = sid.replace("/", "_") + ".cassette"
        (tmp_path / "c").mkdir(exist_ok=True)
        (tmp_path / "r").mkdir(exist_ok=True)
        kept, result = save(recorded, tmp_path / "c" / name), save(replayed, tmp_path / "r" / name)
        reports.append(ScenarioReport(sid, "changed", diff=diff(recorded, replayed), cassette=str(kept), result=str(result)))
    full = tmp_path / "c" / "b_full.cassette"
    before = full.read_bytes()

    def save_on_a_full_disk(cassette: Any, path: Any) -> Path:
        if Path(path) == full:
            raise CassetteError(path, "cannot write: No space left on device")
        return save(cassette, path)

    monkeypatch.setattr(_pipeline, "save", save_on_a_full_disk)
    out = {o.scenario_id: o for o in _pipeline.accept(reports, {})}
    assert out["b/full"].status == "not accepted" and out["b/full"].detail == "cannot write: No space left on device"
    assert out["a/first"].status == "accepted" and out["c/last"].status == "accepted", out
    assert full.read_bytes() == before

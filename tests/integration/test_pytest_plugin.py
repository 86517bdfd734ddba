"""The pytest plugin, driven through pytester: record, replay, diff failures, record modes, unused cassettes.

Runs are in-process (pydantic-ai is imported once, here), and the test file written for
them reads its knobs from environment variables so its source never changes between runs
(a rewritten file of the same size in the same second could be served from a stale pyc).
"""

from __future__ import annotations

import re
from pathlib import Path

import pydantic_ai  # noqa: F401  imported here so in-process runs don't re-import it each time
import pydantic_ai_harness.compaction  # noqa: F401
import pytest
from conftest import SPILL_AGENT

from replay.cassette import load

pytest_plugins = ["pytester"]

AGENT_TEST = '''
import asyncio
import os

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

KEEP = int(os.environ.get("KEEP", "2"))
TURNS = int(os.environ.get("TURNS", "2"))
BROKEN = bool(os.environ.get("BROKEN"))  # the models raise: a passing run proves none was called


def answer(messages, info):
    if BROKEN:
        raise AssertionError("the main model was called")
    return ModelResponse(parts=[TextPart(f"ready {len(messages)}")])


def summarize(messages, info):
    if BROKEN:
        raise AssertionError("the summarizer was called")
    return ModelResponse(parts=[TextPart("a summary")])


def make_agent():
    compaction = SummarizingCompaction(model=FunctionModel(summarize), max_messages=4, keep_messages=KEEP)
    return Agent(FunctionModel(answer), capabilities=[compaction])


HISTORY = [m for n in range(3) for m in (ModelRequest(parts=[UserPromptPart(f"t{n}")]), ModelResponse(parts=[TextPart(f"n{n}")]))]


@pytest.mark.replay
def test_compacts():
    agent, history = make_agent(), list(HISTORY)
    for turn in range(TURNS):
        result = agent.run_sync(f"turn {turn}", message_history=history)
        history = result.all_messages()
    assert result.output.startswith("ready")


def test_async_body(replay_cassette):
    async def main():
        return await make_agent().run("hello", message_history=list(HISTORY))

    assert asyncio.run(main()).output.startswith("ready")
    assert replay_cassette.path.name == "test_async_body.cassette"


@pytest.mark.replay("shared-name")
def test_named():
    assert make_agent().run_sync("hi").output.startswith("ready")


def test_plain():
    assert make_agent().run_sync("no cassette here").output.startswith("ready")
'''

CASSETTES = Path("cassettes/test_agent")


@pytest.fixture
def agent_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("CI", "KEEP", "TURNS", "BROKEN"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_agent=AGENT_TEST)
    return pytester


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str, **env: str) -> pytest.RunResult:
    """One in-process pytest run with ``env`` set just for it (``CI=""`` unsets CI)."""
    with monkeypatch.context() as m:
        for key, value in env.items():
            if value:
                m.setenv(key, value)
            else:
                m.delenv(key, raising=False)
        return pytester.runpytest("-p", "no:cacheprovider", *args)


def output(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def test_once_records_then_ci_replays_without_calling_any_model(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(agent_test, monkeypatch)
    first.assert_outcomes(passed=4)
    assert "harness-replay: --replay-mode=once" in output(first)
    assert "cassettes 3 recorded, 0 replayed, 0 changed" in output(first)
    path = agent_test.path / CASSETTES / "test_compacts.cassette"
    cassette = load(path)
    assert cassette.header.scenario_id == "test_agent.py::test_compacts"
    assert {"main", "summarizing_compaction"} <= set(cassette.by_role())
    assert sorted(p.name for p in (agent_test.path / CASSETTES).iterdir()) == [
        "shared-name.cassette",
        "test_async_body.cassette",
        "test_compacts.cassette",
    ]

    again = run(agent_test, monkeypatch, "-k", "not plain", CI="1", BROKEN="1")
    again.assert_outcomes(passed=3, deselected=1)
    assert "harness-replay: --replay-mode=none" in output(again)
    assert "cassettes 0 recorded, 3 replayed, 0 changed" in output(again)
    assert "unused" not in output(again)  # -k left test_plain out, but nothing is reported as unused


def test_a_changed_parameter_fails_with_the_replay_diff(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    run(agent_test, monkeypatch, "-k", "compacts").assert_outcomes(passed=1, deselected=3)
    changed = run(agent_test, monkeypatch, "-k", "compacts", KEEP="1", BROKEN="1")
    changed.assert_outcomes(failed=1, deselected=3)
    text = output(changed)
    assert "test test_agent.py::test_compacts sent different model requests than cassettes/test_agent/test_compacts.cassette holds" in text
    assert "requests per role: main 2" in text
    assert "main[0] changed, messages 3→1" in text
    # one summarizer call fewer: a divergence, which --replay-accept refuses, so the hint is to re-record
    assert "divergence: summarizing_compaction[1]: recorded request #2 was never made" in text
    assert "the replay diverged, which --replay-accept cannot take; if the change is intended, re-record it with --replay-mode=all" in text
    assert "--format" not in text  # an option pytest has not got
    assert "0 replayed, 1 changed" in text
    assert "the main model was called" not in text


def test_mode_none_without_a_cassette_names_test_role_cassette_and_flag(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(agent_test, monkeypatch, "-k", "compacts", CI="1")
    result.assert_outcomes(failed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "harness-replay: test test_agent.py::test_compacts made request #1 of role 'summarizing_compaction', "
            "but it has no cassette (cassettes/test_agent/test_compacts.cassette) and --replay-mode=none "
            "(the default when CI is set) only replays; record it with --replay-mode=once",
        ]
    )
    assert "1 unrecorded" in output(result)
    assert not (agent_test.path / CASSETTES).exists()


def test_a_request_beyond_the_recording_fails_then_new_appends_it(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    run(agent_test, monkeypatch, "-k", "compacts").assert_outcomes(passed=1, deselected=3)
    path = agent_test.path / CASSETTES / "test_compacts.cassette"
    before = len(load(path).exchanges)

    longer = run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=none", TURNS="3")
    longer.assert_outcomes(failed=1, deselected=3)
    assert "made request #3 of role 'summarizing_compaction', but cassettes/test_agent/test_compacts.cassette holds 2 request(s) of that role and --replay-mode=none only replays; append it with --replay-mode=new, or re-record the test with --replay-mode=all" in output(longer)

    appended = run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=new", TURNS="3")
    appended.assert_outcomes(passed=1, deselected=3)
    assert "1 appended" in output(appended)
    after = load(path)
    assert len(after.by_role()["main"]) == 3 and len(after.exchanges) > before

    run(agent_test, monkeypatch, "-k", "compacts", CI="1", TURNS="3", BROKEN="1").assert_outcomes(passed=1, deselected=3)


def test_all_and_rewrite_record_again(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    run(agent_test, monkeypatch, "-k", "compacts").assert_outcomes(passed=1, deselected=3)
    path = agent_test.path / CASSETTES / "test_compacts.cassette"

    rerecorded = run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=all", KEEP="1")
    rerecorded.assert_outcomes(passed=1, deselected=3)
    assert "1 recorded, 0 replayed" in output(rerecorded)
    run(agent_test, monkeypatch, "-k", "compacts", CI="1", KEEP="1", BROKEN="1").assert_outcomes(passed=1, deselected=3)

    # rewrite starts from nothing: a run that fails leaves no cassette behind (all would keep the old one)
    failed = run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=rewrite", BROKEN="1")
    failed.assert_outcomes(failed=1, deselected=3)
    assert "1 not saved (test failed)" in output(failed)
    assert not path.exists()
    run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=rewrite").assert_outcomes(passed=1, deselected=3)
    assert path.exists()


def test_a_test_failing_on_its_own_keeps_its_error_and_shows_the_diff(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_test.makepyfile(
        test_fails="""
        import os
        import pytest
        from test_agent import make_agent

        @pytest.mark.replay
        def test_it():
            prompt = os.environ.get("PROMPT", "hello")
            assert make_agent().run_sync(prompt).output == "ready 1"
            assert prompt == "hello", "the test's own assertion"
        """
    )
    run(agent_test, monkeypatch, "test_fails.py").assert_outcomes(passed=1)
    result = run(agent_test, monkeypatch, "test_fails.py", CI="1", PROMPT="bye")
    result.assert_outcomes(failed=1)
    text = output(result)
    assert "the test's own assertion" in text
    assert "Captured harness-replay call" in text
    # two unrelated prompts: one removed, one inserted (an edit of the same prompt would be a field diff)
    assert "- removed messages[0]: hello" in text and "+ inserted messages[0]: bye" in text


def test_unused_cassettes_warn_or_fail_the_session(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    run(agent_test, monkeypatch).assert_outcomes(passed=4)
    orphan = agent_test.path / CASSETTES / "test_removed.cassette"
    orphan.write_bytes((agent_test.path / CASSETTES / "test_compacts.cassette").read_bytes())

    warned = run(agent_test, monkeypatch, CI="1")
    warned.assert_outcomes(passed=4)
    assert warned.ret == 0
    warned.stdout.fnmatch_lines(
        ["harness-replay: 1 unused cassette(s), no collected test uses them", "  cassettes/test_agent/test_removed.cassette"]
    )

    failed = run(agent_test, monkeypatch, "--replay-unused=fail", CI="1")
    failed.assert_outcomes(passed=4)
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    assert "(--replay-unused=fail)" in output(failed)

    # one test picked by node id: the module's other cassettes are not judged
    single = run(agent_test, monkeypatch, "test_agent.py::test_named", "--replay-unused=fail", CI="1")
    single.assert_outcomes(passed=1)
    assert single.ret == 0


def test_bad_marker_options_fail_clearly(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_test.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.replay(on_exhausted="never")
        def test_it():
            pass
        """
    )
    result = run(agent_test, monkeypatch, "test_bad.py")
    result.assert_outcomes(errors=1)
    assert "on_exhausted='never'" in output(result)


def test_async_tests_run_by_anyio_are_captured_too(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        test_async="""
        import pytest
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        @pytest.mark.replay
        async def test_it(replay_cassette):
            agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")])))
            assert (await agent.run("hi")).output == "ok"
            assert [e.role for e in replay_cassette.session.cassette.exchanges] == ["main"]
        """
    )
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    assert (pytester.path / "cassettes/test_async/test_it.cassette").is_file()


def test_an_async_test_with_an_async_fixture_or_a_thread_is_captured(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """anyio runs such a test in a runner task started at fixture setup, before the test's call began:
    its context had no session, so the body's model calls went unrecorded and, in CI, to the model."""
    pytester.makepyfile(
        test_async_fixture="""
        import os
        import pytest
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel

        def answer(messages, info):
            assert not os.environ.get("BROKEN"), "the model was called"
            return ModelResponse(parts=[TextPart("ok")])

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.fixture
        async def ready():
            yield 1

        @pytest.mark.anyio
        @pytest.mark.replay
        async def test_it(ready):
            assert (await Agent(FunctionModel(answer)).run("hi")).output == "ok"

        @pytest.mark.replay
        def test_in_a_thread():  # a plain thread carries no context at all
            import threading
            out = []
            worker = threading.Thread(target=lambda: out.append(Agent(FunctionModel(answer)).run_sync("hi").output))
            worker.start()
            worker.join()
            assert out == ["ok"]
        """
    )
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=2)
    for name in ("test_it", "test_in_a_thread"):
        cassette = pytester.path / f"cassettes/test_async_fixture/{name}.cassette"
        assert [ex.role for ex in load(cassette).exchanges] == ["main"]
    monkeypatch.setenv("BROKEN", "1")
    result = run(pytester, monkeypatch, CI="1")
    result.assert_outcomes(passed=2)
    assert "2 replayed" in output(result)


@pytest.mark.slow
def test_xdist_workers_tally_into_one_summary(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """With pytest-xdist the controller prints one summary and sees orphans across all workers."""
    pytest.importorskip("xdist", reason="needs pytest-xdist (dev extra)")
    with monkeypatch.context() as m:
        m.delenv("CI", raising=False)
        # The recording run needs a worker, not two: the replay below is the run whose tally and orphans
        # span two workers (a second worker here only imported pydantic-ai again).
        first = agent_test.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    first.assert_outcomes(passed=4)
    assert "cassettes 3 recorded, 0 replayed, 0 changed" in output(first)
    stale = agent_test.path / CASSETTES / "test_removed.cassette"
    stale.write_bytes((agent_test.path / CASSETTES / "test_compacts.cassette").read_bytes())
    with monkeypatch.context() as m:
        m.setenv("CI", "1")
        m.setenv("BROKEN", "1")
        again = agent_test.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--replay-unused=fail")
    text = output(again)
    assert "cassettes 0 recorded, 3 replayed, 0 changed" in text
    assert "1 unused cassette(s)" in text and "test_removed.cassette" in text
    assert again.ret == pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------- fitting in with other plugins and habits


def test_registered_under_its_own_name_beside_pytest_replay(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-replay registers its plugin as ``replay``; pytest keeps one plugin per name, so ours must differ."""
    site = pytester.mkdir("site")
    (site / "pytest_replay_standin.py").write_text("def pytest_addoption(parser):\n    parser.addoption('--replay-record-dir')\n")
    dist = site / "pytest_replay-1.5.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-replay\nVersion: 1.5.3\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nreplay = pytest_replay_standin\n")
    pytester.makepyfile(
        test_both="""
        def test_both_loaded(request):
            plugins = request.config.pluginmanager
            assert plugins.get_plugin("replay").__name__ == "pytest_replay_standin"
            assert plugins.get_plugin("harness_replay").__name__ == "replay.plugin"
            assert request.config.getoption("replay_mode") == "none"
        """
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--replay-mode=none", "--replay-record-dir=x")
    result.assert_outcomes(passed=1)


PROVIDER_CONFTEST = """
from pydantic_ai import models

models.ALLOW_MODEL_REQUESTS = False  # pydantic-ai's advice for test suites
"""

PROVIDER_TEST = """
import os

import pytest
from pydantic_ai import Agent, models

agent = Agent("openai-chat:gpt-4o-mini")  # built at import: needs a key at collection


@pytest.mark.replay
def test_agent():
    assert models.ALLOW_MODEL_REQUESTS is (os.environ.get("EXPECT_ALLOWED") == "1")
    assert agent.run_sync("hi").output == "hello there"


def test_switch_is_back_off():
    assert models.ALLOW_MODEL_REQUESTS is False
    assert os.environ.get("OPENAI_API_KEY") in (None, "sk-test")  # placeholders only lived during collection
"""


def test_records_past_allow_model_requests_and_collects_in_ci_without_a_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_openai import FakeOpenAI, Reply
    from pydantic_ai import models

    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", models.ALLOW_MODEL_REQUESTS)  # the conftest sets it in this process
    pytester.makeconftest(PROVIDER_CONFTEST)
    pytester.makepyfile(test_provider=PROVIDER_TEST)
    with FakeOpenAI([Reply.text("hello there")]) as server:
        recorded = run(
            pytester, monkeypatch, CI="false", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url, EXPECT_ALLOWED="1"
        )
    recorded.assert_outcomes(passed=2)
    text = output(recorded)
    assert "harness-replay: --replay-mode=once" in text  # CI=false is not CI
    assert text.count("called openai:gpt-4o-mini to record cassettes/test_provider/test_agent.cassette") == 1
    assert "(1 called a real model)" in text
    assert len(server.requests) == 1

    # CI: no key, the server gone; the module-level agent still imports, and the test replays
    replayed = run(pytester, monkeypatch, CI="true", OPENAI_API_KEY="", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    replayed.assert_outcomes(passed=2)
    assert "cassettes 0 recorded, 1 replayed, 0 changed" in output(replayed)
    assert "called" not in output(replayed)


def test_marker_takes_name_as_its_help_says(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        test_named="""
        import pytest
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel

        @pytest.mark.replay(name="by-keyword", on_exhausted="fail")
        def test_it():
            Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run_sync("hi")

        @pytest.mark.replay(nmae="typo")
        def test_typo():
            pass
        """
    )
    result = run(pytester, monkeypatch, CI="")
    result.assert_outcomes(passed=1, errors=1)
    assert (pytester.path / "cassettes/test_named/by-keyword.cassette").is_file()
    assert "unknown option(s) nmae; it takes name= and on_exhausted=" in output(result)
    help_text = output(pytester.runpytest("--markers"))
    assert "@pytest.mark.replay(name=None, *, on_exhausted='fail')" in help_text


def test_new_episodes_is_new(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-recording users type ``new_episodes``; it appends like ``new``."""
    run(agent_test, monkeypatch, "-k", "compacts").assert_outcomes(passed=1, deselected=3)
    appended = run(agent_test, monkeypatch, "-k", "compacts", "--replay-mode=new_episodes", TURNS="3")
    appended.assert_outcomes(passed=1, deselected=3)
    assert "harness-replay: --replay-mode=new" in output(appended)
    assert "1 appended" in output(appended)
    run(agent_test, monkeypatch, "-k", "compacts", CI="1", TURNS="3", BROKEN="1").assert_outcomes(passed=1, deselected=3)


def test_a_test_without_model_calls_writes_no_cassette(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        test_quiet="""
        import pytest

        @pytest.mark.replay
        def test_nothing_to_record():
            assert 1 + 1 == 2
        """
    )
    first = run(pytester, monkeypatch, CI="")
    first.assert_outcomes(passed=1)
    assert "1 not written (no model call)" in output(first)
    assert not (pytester.path / "cassettes").exists()
    run(pytester, monkeypatch, CI="1").assert_outcomes(passed=1)  # and replays without one


ACCEPT_TEST = """
import os

import pytest
from test_agent import make_agent


@pytest.mark.replay
def test_prompt():
    for turn in range(int(os.environ.get("TURNS", "1"))):
        make_agent().run_sync(os.environ.get("PROMPT", "hello"))
"""


def test_accept_makes_a_reviewed_change_the_cassette(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_test.makepyfile(test_accept=ACCEPT_TEST)
    run(agent_test, monkeypatch, "test_accept.py").assert_outcomes(passed=1)
    path = agent_test.path / "cassettes/test_accept/test_prompt.cassette"
    before = path.read_bytes()
    run(agent_test, monkeypatch, "test_accept.py", CI="1", PROMPT="bye", BROKEN="1").assert_outcomes(failed=1)

    accepted = run(agent_test, monkeypatch, "test_accept.py", "--replay-accept", CI="1", PROMPT="bye", BROKEN="1")
    accepted.assert_outcomes(passed=1)
    text = output(accepted)
    assert text.count("harness-replay: accepted test_accept.py::test_prompt -> cassettes/test_accept/test_prompt.cassette") == 1
    assert "1 accepted" in text
    after = path.read_bytes()
    assert after != before
    # the recorded answer went to a request it was not recorded for: marked, as `replay run --accept` does
    assert [ex.carried_over for ex in load(path).exchanges if ex.role == "main"] == [True]
    run(agent_test, monkeypatch, "test_accept.py", CI="1", PROMPT="bye", BROKEN="1").assert_outcomes(passed=1)

    # a replay that asked for more answers than recorded is not accepted: only a re-recording can answer it
    refused = run(agent_test, monkeypatch, "test_accept.py", "--replay-accept", CI="1", TURNS="2", BROKEN="1")
    refused.assert_outcomes(failed=1)
    assert "accepted test_accept" not in output(refused)
    assert path.read_bytes() == after


GROWING_TEST = """
import os

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.compaction import SummarizingCompaction

KEEP = int(os.environ.get("KEEP", "2"))


@pytest.mark.replay
def test_compacted():
    agent = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ready")])),
        capabilities=[SummarizingCompaction(
            model=FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("a summary")])), max_messages=4, keep_messages=KEEP)],
    )
    history = []
    for turn in range(4):
        history = agent.run_sync(f"turn {turn}", message_history=history).all_messages()
"""


def test_accept_refuses_a_change_with_new_violations_unless_asked(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: --replay-accept made a change that brings a new invariant violation (a summary that grows
    the request, as keep_messages 2 → 3 does) the baseline, where `replay run --accept` refuses it without --accept-violations."""
    pytester.makepyfile(test_growing=GROWING_TEST)
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    path = pytester.path / "cassettes/test_growing/test_compacted.cassette"
    before = path.read_bytes()
    failed = run(pytester, monkeypatch, CI="1", KEEP="3")
    failed.assert_outcomes(failed=1)
    assert "violation (new): compaction_grew_request" in output(failed)
    assert "accept it with --replay-accept --replay-accept-violations" in output(failed)

    refused = run(pytester, monkeypatch, "--replay-accept", CI="1", KEEP="3")
    refused.assert_outcomes(failed=1)
    assert "not accepted: " in output(refused) and "new violation(s) (compaction_grew_request main[" in output(refused)
    assert "pass --replay-accept-violations to accept them" in output(refused)
    assert path.read_bytes() == before

    accepted = run(pytester, monkeypatch, "--replay-accept", "--replay-accept-violations", CI="1", KEEP="3")
    accepted.assert_outcomes(passed=1)
    assert path.read_bytes() != before
    run(pytester, monkeypatch, CI="1", KEEP="3").assert_outcomes(passed=1)

LONG_TEST = '''
import os

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

INSTRUCTIONS = os.environ.get("INSTRUCTIONS", "Answer briefly. " * 12)


@pytest.mark.replay
def test_long():
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])), instructions=INSTRUCTIONS)
    history = None
    for turn in range(12):
        history = agent.run_sync(f"turn {turn}{os.environ.get('SUFFIX', '')}", message_history=history).all_messages()
'''


def test_failure_reads_like_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_long=LONG_TEST)
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    changed = {"CI": "1", "SUFFIX": "!", "INSTRUCTIONS": "Answer briefly. " * 11 + "Answer in French."}

    short = run(pytester, monkeypatch, "--color=no", **changed)
    short.assert_outcomes(failed=1)
    text = output(short)
    assert text.count("requests per role: main 12") == 1  # the report once; the short summary has only its headline
    assert "FAILED test_long.py::test_long - harness-replay: test test_long.py::test_long sent different" in text
    assert "...Full output truncated (" in text and "use '-vv' to show" in text
    assert "--format" not in text and "\x1b[" not in text
    # a long string is a diff around its difference, not two truncated halves
    lines = [ln.strip() for ln in text.splitlines()]
    assert any(ln.startswith("Skipping ") and ln.endswith(" identical leading characters") for ln in lines)
    assert any(ln.startswith("- ") and ln.endswith("briefly. Answer briefly.") and len(ln) < 60 for ln in lines)
    assert any(ln.startswith("+ ") and ln.endswith("briefly. Answer in French.") and len(ln) < 60 for ln in lines)

    full = run(pytester, monkeypatch, "-vv", "--color=yes", **changed)
    full.assert_outcomes(failed=1)
    text = output(full)
    assert "Full output truncated" not in text
    assert "\x1b[" in text  # colour, since the terminal (here: --color=yes) has it
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    last = [ln.strip() for ln in plain.splitlines() if ln.strip().startswith("main[11].messages[")]
    indexes = [int(ln.split("messages[")[1].split("]")[0]) for ln in last]
    assert indexes == sorted(indexes) and 10 in indexes and 2 in indexes  # natural order: 2 before 10


# --------------------------------------------------------------------------- awkward names, bad input, unwritable places

AWKWARD_TEST = '''
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


def ask(prompt):
    assert Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run_sync(prompt).output == "ok"


WORDS = ["Zürich", "x/../y", "a//b", "a/-b", "C:\\\\dir", "a/b", "a_b", "plain"]


@pytest.mark.replay
@pytest.mark.parametrize("word", WORDS)
def test_word(word):
    ask(word)


@pytest.mark.replay
@pytest.mark.parametrize("word", ["x" * 300, "x" * 299 + "y"], ids=lambda w: w)
def test_long(word):
    ask(word)


class TestOuterA:
    class TestInner:
        @pytest.mark.replay
        def test_x(self):
            ask("A")


class TestOuterB:
    class TestInner:
        @pytest.mark.replay
        def test_x(self):
            ask("B")


class TestFlat:
    @pytest.mark.replay
    def test_y(self):
        ask("flat")
'''


def test_any_test_that_records_replays_under_its_own_cassette(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parametrize ids pytest escapes or that hold ``/``, ``..`` or ``-``, very long ids and nested
    classes: each test gets a cassette of its own that loads again (the prompts differ, so a shared
    cassette would fail the second test as changed)."""
    pytester.makepyfile(test_awkward=AWKWARD_TEST)
    first = run(pytester, monkeypatch, CI="")
    first.assert_outcomes(passed=13)
    assert "13 recorded" in output(first)
    directory = pytester.path / "cassettes/test_awkward"
    names = sorted(p.name for p in directory.iterdir())
    assert len(names) == 13
    for name in names:  # readable, bounded, and loadable
        assert len(name.encode()) <= 200 + len(".cassette")
        load(directory / name)
    # names that need no change are as before; the others get a hash of their original
    assert {"test_word[plain].cassette", "test_word[a_b].cassette", "TestFlat.test_y.cassette"} <= set(names)
    assert {"TestOuterA.TestInner.test_x.cassette", "TestOuterB.TestInner.test_x.cassette"} <= set(names)
    assert any(re.fullmatch(r"test_word\[a_b\]-[0-9a-f]{8}\.cassette", n) for n in names)
    assert any(re.fullmatch(r"test_word\[Z_xfcrich\]-[0-9a-f]{8}\.cassette", n) for n in names)
    assert load(directory / "test_word[plain].cassette").header.scenario_id == "test_awkward.py::test_word[plain]"

    again = run(pytester, monkeypatch, CI="1")
    again.assert_outcomes(passed=13)
    assert "0 recorded, 13 replayed, 0 changed" in output(again)
    assert "unused" not in output(again)


def test_a_cassette_the_loader_would_refuse_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a scenario id ever slip past the sanitising, the test fails in one line and writes nothing."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from replay import _pytest_cassette

    monkeypatch.setattr(_pytest_cassette, "scenario_id", lambda nodeid: "t.py::test_x[a//b]")
    path = tmp_path / "test_x.cassette"
    test = _pytest_cassette.TestCassette("t.py::test_x", path, "once")
    with test.active():
        Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))).run_sync("hi")
    status, failure = test.finish(True)
    assert (status, failure) == (
        "unsaved",
        [f"harness-replay: {path}: cannot write: scenario id 't.py::test_x[a//b]' has an empty path segment"],
    )
    assert not path.exists()


def test_a_marker_name_that_is_not_text_is_a_usage_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(
        test_intname="""
        import pytest

        @pytest.mark.replay(2024)
        def test_int_name():
            pass

        def test_unrelated():
            pass
        """
    )
    result = run(pytester, monkeypatch, CI="")
    result.assert_outcomes(passed=1, errors=1)
    text = output(result)
    assert "INTERNALERROR" not in text
    assert "@pytest.mark.replay: name=2024 is int; a cassette name is text" in text


def test_a_corrupt_cassette_is_reported_once(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (agent_test.path / CASSETTES).mkdir(parents=True)
    (agent_test.path / CASSETTES / "test_compacts.cassette").write_bytes(b"not a cassette")
    result = run(agent_test, monkeypatch, "-k", "compacts", "-rN", CI="1")
    result.assert_outcomes(errors=1, deselected=3)
    text = output(result)
    assert "During handling of the above exception" not in text
    assert text.count("test_compacts.cassette: not a harness-replay cassette (wrong magic bytes)") == 1
    assert "harness-replay: " in text


READ_ONLY_CONFTEST = """
import errno
import os
import pathlib

import pytest


@pytest.fixture
def read_only(monkeypatch):
    \"\"\"With READ_ONLY set, writing or deleting a cassette fails as on a read-only mount.\"\"\"
    if os.environ.get("READ_ONLY"):
        def refuse(*args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(os, "replace", refuse)
        monkeypatch.setattr(pathlib.Path, "unlink", refuse)
"""

READ_ONLY_TEST = """
import os

from test_agent import make_agent


def test_prompt(read_only, replay_cassette):
    make_agent().run_sync(os.environ.get("PROMPT", "hello"))
"""


@pytest.mark.parametrize("args", [("--replay-mode=all",), ("--replay-mode=rewrite",), ("--replay-accept", "--replay-mode=none")])
def test_a_cassette_that_cannot_be_written_fails_the_test_in_one_line(
    agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    agent_test.makeconftest(READ_ONLY_CONFTEST)
    agent_test.makepyfile(test_ro=READ_ONLY_TEST)
    run(agent_test, monkeypatch, "test_ro.py").assert_outcomes(passed=1)
    path = agent_test.path / "cassettes/test_ro/test_prompt.cassette"
    before = path.read_bytes()
    result = run(agent_test, monkeypatch, "test_ro.py", "-rN", *args, READ_ONLY="1", PROMPT="bye")
    text = output(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert f"harness-replay: {path}: cannot write: Read-only file system" in text.splitlines()
    assert "Traceback" not in text and "OSError" not in text and "During handling" not in text
    assert path.read_bytes() == before


@pytest.mark.slow
def test_xdist_prints_the_accepted_lines(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--replay-accept`` under pytest-xdist names each accepted cassette, as a run without it does."""
    pytest.importorskip("xdist", reason="needs pytest-xdist (dev extra)")
    agent_test.makepyfile(test_accept=ACCEPT_TEST)
    run(agent_test, monkeypatch, "test_accept.py").assert_outcomes(passed=1)
    with monkeypatch.context() as m:
        for key, value in {"CI": "1", "PROMPT": "bye", "BROKEN": "1"}.items():
            m.setenv(key, value)
        # One worker: the accepted line still travels from a worker to the controller, which is what is checked
        # (one test gives a second worker nothing to run, only pydantic-ai to import).
        accepted = agent_test.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1", "--replay-accept", "test_accept.py")
    accepted.assert_outcomes(passed=1)
    text = output(accepted)
    assert "harness-replay: accepted test_accept.py::test_prompt -> cassettes/test_accept/test_prompt.cassette" in text
    assert "1 accepted" in text


def test_replay_only_counts_a_test_without_cassette_or_model_call_honestly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In CI such a test replayed nothing: it reads as ``once`` would put it, not as ``replayed``."""
    pytester.makepyfile(
        test_quiet="""
        import pytest

        @pytest.mark.replay
        def test_nothing_to_record():
            pass

        @pytest.mark.replay
        def test_fails_before_any_call():
            assert False, "broken before the agent ran"
        """
    )
    for env in ({"CI": ""}, {"CI": "1"}):
        result = run(pytester, monkeypatch, **env)
        result.assert_outcomes(passed=1, failed=1)
        text = output(result)
        assert "cassettes 0 recorded, 0 replayed, 0 changed, 1 not saved (test failed), 1 not written (no model call)" in text
        assert not (pytester.path / "cassettes").exists()


def _sends(prompt: str) -> str:
    """A test module whose one replay test sends ``prompt`` to a FunctionModel agent."""
    return (
        "import pytest\n"
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.models.function import FunctionModel\n"
        "from pydantic_ai.messages import ModelResponse, TextPart\n\n\n"
        "@pytest.mark.replay\n"
        "def test_token():\n"
        "    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('ok')])))\n"
        f"    assert agent.run_sync({prompt!r}).output == 'ok'\n"
    )


def test_the_projects_scrub_patterns_apply_when_pytest_runs_from_elsewhere(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cd /tmp && pytest /repo/tests``: the scrubber looked for ``[tool.replay] scrub-patterns`` from the
    working directory, found none, and wrote the project's declared secret into the cassette."""
    project = pytester.mkdir("proj")
    (project / "pyproject.toml").write_text('[tool.replay]\nscrub-patterns = ["acme-[A-Za-z]{20}"]\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_acme.py").write_text(_sends("token is acme-QwertyUiopAsdfGhjkLz ok"))
    outside = pytester.mkdir("elsewhere")
    monkeypatch.chdir(outside)
    result = run(pytester, monkeypatch, str(project / "tests" / "test_acme.py"), f"--rootdir={project}", CI="")
    result.assert_outcomes(passed=1)
    (cassette,) = (project / "tests" / "cassettes").rglob("*.cassette")
    assert b"QwertyUiop" not in cassette.read_bytes()
    assert "<secret:" in str(load(cassette).messages)
    from replay.config import _PROJECT

    assert _PROJECT == []  # released with the session: the next command reads its own working directory


def test_a_packages_own_replay_table_applies_to_its_tests_in_a_monorepo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A uv workspace: the root's pyproject.toml holds pytest's settings (so it is the rootdir), a package's
    holds ``[tool.replay] scrub-patterns``. The plugin read only the rootdir's: the package's declared secret
    was written into its tests' cassettes, which ``replay run`` from the package would have scrubbed. A test
    takes the nearest ``[tool.replay]`` table between its file and the rootdir; a pyproject.toml without one
    (a package's build settings) does not hide the root's."""
    pkg = pytester.mkdir("pkg")
    (pkg / "pyproject.toml").write_text('[tool.replay]\nscrub-patterns = ["acme-[A-Za-z]{20}"]\n')
    other = pytester.mkdir("other")
    (other / "pyproject.toml").write_text('[project]\nname = "other"\n')  # no [tool.replay]: the root's applies
    (pytester.path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = ""\n\n'
                                                  '[tool.replay]\nscrub-patterns = ["root-[A-Za-z]{20}"]\n')
    test = _sends("tokens acme-QwertyUiopAsdfGhjkLz root-ZxcvbnmAsdfgQwertYui ok")
    for folder in (pkg, other):
        (folder / "tests").mkdir()
        (folder / "tests" / f"test_{folder.name}.py").write_text(test)
    result = run(pytester, monkeypatch, "pkg/tests", "other/tests", f"--rootdir={pytester.path}", CI="")
    result.assert_outcomes(passed=2)
    (in_pkg,) = (pkg / "tests" / "cassettes").rglob("*.cassette")
    (in_other,) = (other / "tests" / "cassettes").rglob("*.cassette")
    assert b"QwertyUiop" not in in_pkg.read_bytes() and b"ZxcvbnmAsdfg" in in_pkg.read_bytes()  # the package's table only
    assert b"ZxcvbnmAsdfg" not in in_other.read_bytes() and b"QwertyUiop" in in_other.read_bytes()  # the root's


WIRE_TEST = """
import os

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider


@pytest.mark.replay
def test_role():
    role = os.environ.get("ROLE")  # stands in for a pydantic-ai release that maps instructions differently
    profile = OpenAIModelProfile(openai_system_prompt_role=role) if role else None
    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY") or "sk-x")
    model = OpenAIChatModel("gpt-4o-mini", provider=provider, profile=profile)
    assert Agent(model, instructions="Be brief.").run_sync("hi").output == "hello there"
"""


def test_a_changed_provider_mapping_fails_the_test_as_replay_run_reports_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin replayed at the model boundary only: what the provider is sent (the README's "what breaks in
    production") was stored but never compared, so a mapping change passed. It replays at the wire, as the CLI."""
    pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")
    from fake_openai import FakeOpenAI, Reply
    from pydantic_ai import models

    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", models.ALLOW_MODEL_REQUESTS)
    pytester.makepyfile(test_provider_role=WIRE_TEST)  # a name no module of this suite has (in-process runs)
    with FakeOpenAI([Reply.text("hello there")]) as server:
        run(pytester, monkeypatch, CI="false", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url).assert_outcomes(passed=1)
    gone = "http://127.0.0.1:9/v1"
    run(pytester, monkeypatch, CI="true", OPENAI_API_KEY="", OPENAI_BASE_URL=gone).assert_outcomes(passed=1)
    changed = run(pytester, monkeypatch, CI="true", OPENAI_API_KEY="", OPENAI_BASE_URL=gone, ROLE="developer")
    changed.assert_outcomes(failed=1)
    text = output(changed)
    assert "sent different model requests" in text and "wire" in text and "developer" in text, text


def test_a_blocked_connection_that_is_no_model_call_says_so(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that also probes another host during replay: the guard refuses it (a change), but no model request
    changed, and --replay-accept (which refuses divergences) was the wrong advice: allow-hosts is the fix."""
    pytester.makepyfile(test_probe="""
import socket

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


@pytest.mark.replay
def test_probe():
    try:
        socket.create_connection(("198.51.100.7", 9), timeout=0.2).close()
    except OSError:
        pass
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])))
    assert agent.run_sync("hi").output == "ok"
""")
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    replayed = run(pytester, monkeypatch, CI="1")
    replayed.assert_outcomes(failed=1)
    text = output(replayed)
    assert "opened a connection the replay refused (network[0]: blocked connection to 198.51.100.7:9)" in text
    assert "allow-hosts" in text and "--replay-accept" not in text and "sent different model requests" not in text


def test_a_hostile_cassette_cannot_drive_the_terminal_through_a_failure(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cassettes arrive in pull requests: the plugin printed their text raw (an OSC title, a screen clear, a
    carriage return and a forged "PASSED" line reached the terminal), where ``replay run`` escapes it."""
    import msgpack

    run(agent_test, monkeypatch, "test_agent.py::test_compacts", CI="").assert_outcomes(passed=1)
    path = agent_test.path / "cassettes/test_agent/test_compacts.cassette"
    raw = path.read_bytes()
    doc = msgpack.unpackb(raw[8:], raw=False, strict_map_key=False)
    evil = "\x1b]0;PWNED\x07\x1b[2J\u202eevil\r\nFAKE PASSED "
    for message in doc["messages"]:
        for part in message.get("parts", []):
            if isinstance(part.get("content"), str):
                part["content"] = evil + part["content"]
    path.write_bytes(raw[:8] + msgpack.packb(doc, use_bin_type=True))
    result = run(agent_test, monkeypatch, "test_agent.py::test_compacts", "-vv", CI="1", BROKEN="1")
    result.assert_outcomes(failed=1)
    text = output(result)
    assert "sent different model requests" in text
    assert "\\x1b]0;PWNED" in text or "\\x1b" in text
    assert not any(ch in text for ch in ("\x1b]", "\x07", "\u202e", "\r")), [ln for ln in text.splitlines() if "PWNED" in ln]
    assert not any(line.lstrip().startswith("FAKE PASSED") for line in text.splitlines())


def test_the_projects_on_exhausted_applies_as_in_replay_run(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[tool.replay] on-exhausted = "repeat"` was ignored by the plugin: only the marker's own counted."""
    run(agent_test, monkeypatch, "test_agent.py::test_compacts", CI="", TURNS="1").assert_outcomes(passed=1)
    strict = run(agent_test, monkeypatch, "test_agent.py::test_compacts", CI="1", TURNS="2", BROKEN="1")
    strict.assert_outcomes(failed=1)  # one more turn than recorded: unrecorded under the default policy
    (agent_test.path / "pyproject.toml").write_text('[tool.replay]\non-exhausted = "repeat"\n')
    lenient = run(agent_test, monkeypatch, "test_agent.py::test_compacts", CI="1", TURNS="2", BROKEN="1")
    assert "made request #" not in output(lenient)  # answered by repeating the last recorded answer


def test_a_test_failing_on_a_scrubbed_answer_is_told_why(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model echoed a password; recording passed, the replay gave the test ``<secret:password:1>`` and it
    failed with no word from the plugin."""
    pytester.makepyfile(test_echo="""
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


@pytest.mark.replay
def test_echo_password():
    echo = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("echo: " + messages[-1].parts[-1].content)]))
    assert "tr0ub4dor" in Agent(echo).run_sync("set password=tr0ub4dor").output
""")
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    replayed = run(pytester, monkeypatch, CI="1")
    replayed.assert_outcomes(failed=1)
    assert "holds answers with scrubbed secrets (<secret:…>)" in output(replayed) and "scrub-exempt" in output(replayed)


SPILL_TEST = SPILL_AGENT + '''
import pytest


@pytest.mark.replay
def test_spill():
    assert spilling_agent().run_sync(f"Read every row. ({uuid.uuid4()})").output.startswith("read back ")
'''


def test_a_tests_ids_repeat_and_its_harness_files_are_its_own(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The plugin ran a test's model traffic without the seeded ids `replay run` gives a scenario: a spill
    handle (`<run id>/c1.0`) was new in every run, so a ToolOutputLimits test never replayed as the same,
    and read its content back only while the recording's file was still in the shared /tmp."""
    import tempfile

    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    pytester.makepyfile(test_spill=SPILL_TEST)
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    assert [p.name for p in system_tmp.iterdir() if not p.name.startswith("replay-guard-")] == []
    again = run(pytester, monkeypatch, CI="1")
    again.assert_outcomes(passed=1)
    assert "cassettes 0 recorded, 1 replayed, 0 changed" in output(again)


UNENCODABLE_TEST = '''
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


@pytest.mark.replay
def test_half_an_emoji():
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("half an emoji: \\ud83d")])))
    try:
        agent.run_sync("go")
    except Exception:
        pass  # the test's own handling does not make a recording of a call that is missing
'''


def test_a_value_no_cassette_can_hold_fails_the_test_and_writes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_odd=UNENCODABLE_TEST)
    result = run(pytester, monkeypatch, CI="")
    result.assert_outcomes(failed=1)
    text = output(result)
    assert "test_odd.py::test_half_an_emoji: the response to main[0] holds a value a cassette cannot hold" in text, text
    assert not list(pytester.path.rglob("*.cassette"))


DEEP_TEST = '''
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel


def answer(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("tree", {}, tool_call_id="t-1")])
    return ModelResponse(parts=[TextPart("done")])


@pytest.mark.replay
def test_deep():
    agent = Agent(FunctionModel(answer))

    @agent.tool_plain
    def tree() -> dict:
        node = {}
        for _ in range(250):
            node = {"child": node}
        return node

    assert agent.run_sync("go").output == "done"
'''


def test_the_plugin_writes_and_reads_with_the_projects_loader_limits(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording past max-depth is not saved (every later replay would refuse it); with the limit raised
    in [tool.replay], as `replay record` and `replay run` read it, it is saved and replays."""
    pytester.makepyfile(test_deep=DEEP_TEST)
    refused = run(pytester, monkeypatch, CI="")
    refused.assert_outcomes(failed=1)
    assert "the loader would refuse this recording (invalid cassette: messages[2]: nesting deeper than 200)" in output(refused)
    assert not list(pytester.path.rglob("*.cassette"))
    pytester.makepyprojecttoml("[tool.replay]\nmax-depth = 300\n")
    run(pytester, monkeypatch, CI="").assert_outcomes(passed=1)
    assert len(list(pytester.path.rglob("*.cassette"))) == 1
    replayed = run(pytester, monkeypatch, CI="1")
    replayed.assert_outcomes(passed=1)
    assert "0 recorded, 1 replayed, 0 changed" in output(replayed)


@pytest.mark.parametrize("setting", ['ignore = 5', 'on-exhausted = "bogus"', 'max-depth = "x"'])
def test_a_bad_tool_replay_setting_is_one_line_naming_pyproject(
    agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """A bad ``[tool.replay]`` value errored every marked test with config.py's traceback, not the CLI's one line."""
    agent_test.makepyprojecttoml(f"[tool.replay]\n{setting}\n")
    result = run(agent_test, monkeypatch, "-k", "compacts", "-rN", CI="1")
    result.assert_outcomes(errors=1, deselected=3)
    text = output(result)
    assert any(line.startswith("harness-replay: ") and "pyproject.toml: [tool.replay] " in line for line in text.splitlines()), text
    assert "config.py" not in text and "raise ReplayUsageError" not in text


def test_a_tests_ids_do_not_depend_on_pytests_rootdir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids were seeded by the node id of the run, which changes with the rootdir: recorded from a package
    (`test_spill.py::test_spill`), replayed from the monorepo's root (`pkg/test_spill.py::test_spill`), the
    spill handle changed and the test failed as `changed` on an unchanged harness."""
    pkg = pytester.mkpydir("pkg")
    (pkg / "test_spill.py").write_text(SPILL_TEST)
    run(pytester, monkeypatch, "pkg", f"--rootdir={pkg}", CI="").assert_outcomes(passed=1)
    assert load(pkg / "cassettes/test_spill/test_spill.cassette").header.scenario_id == "test_spill.py::test_spill"
    again = run(pytester, monkeypatch, "pkg", f"--rootdir={pytester.path}", CI="1")
    again.assert_outcomes(passed=1)
    assert "cassettes 0 recorded, 1 replayed, 0 changed" in output(again)


@pytest.mark.parametrize("policy", ["marker", "project"])
def test_a_request_beyond_the_recording_is_a_change_under_repeat_as_in_replay_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    """`on_exhausted="repeat"` (the marker's or `[tool.replay]`'s) passed a test whose harness made more model
    calls than recorded as `replayed, 0 changed`, where `replay run` under the same policy reports CHANGED."""
    marker = '@pytest.mark.replay(on_exhausted="repeat")' if policy == "marker" else "@pytest.mark.replay"
    if policy == "project":
        pytester.makepyprojecttoml('[tool.replay]\non-exhausted = "repeat"\n')
    pytester.makepyfile(test_turns=f'''
import os
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


{marker}
def test_turns():
    agent, history = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))), []
    for turn in range(int(os.environ["TURNS"])):
        history = agent.run_sync(f"turn {{turn}}", message_history=history).all_messages()
''')
    run(pytester, monkeypatch, CI="", TURNS="2").assert_outcomes(passed=1)
    more = run(pytester, monkeypatch, CI="1", TURNS="3")
    more.assert_outcomes(failed=1)
    text = output(more)
    assert "divergence: main[2]: request #3 of role 'main', but the cassette holds 2 (repeated the last)" in text
    assert "requests per role: main 2→3" in text and "0 replayed, 1 changed" in text


def test_a_diverged_replay_does_not_point_at_replay_accept(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay that made fewer calls than recorded said `accept it with --replay-accept`, which then refused it."""
    run(agent_test, monkeypatch, "-k", "compacts", TURNS="2").assert_outcomes(passed=1, deselected=3)
    fewer = run(agent_test, monkeypatch, "-k", "compacts", CI="1", TURNS="1", BROKEN="1")
    fewer.assert_outcomes(failed=1, deselected=3)
    text = output(fewer)
    assert "was never made" in text
    assert "--replay-accept cannot take; if the change is intended, re-record it with --replay-mode=all" in text
    assert "accept it with --replay-accept" not in text
    agent_test.makepyfile(test_accept=ACCEPT_TEST)
    run(agent_test, monkeypatch, "test_accept.py").assert_outcomes(passed=1)
    edited = run(agent_test, monkeypatch, "test_accept.py", CI="1", PROMPT="bye", BROKEN="1")
    edited.assert_outcomes(failed=1)  # the same calls, one prompt edited: that one --replay-accept takes
    assert "if the change is intended, accept it with --replay-accept (or re-record with --replay-mode=all)" in output(edited)


def test_the_cassettes_of_a_deleted_test_module_are_unused(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the folders of collected modules were looked in: a deleted or renamed test file's cassettes stayed
    forever, never reported, where the cassettes of a deleted test function were."""
    agent_test.makepyfile(test_accept=ACCEPT_TEST, test_other=ACCEPT_TEST)
    run(agent_test, monkeypatch).assert_outcomes(passed=6)
    (agent_test.path / "test_accept.py").unlink()

    failed = run(agent_test, monkeypatch, "--replay-unused=fail", CI="1")
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    failed.stdout.fnmatch_lines(
        ["harness-replay: 1 unused cassette(s), no collected test uses them (--replay-unused=fail)",
         "  cassettes/test_accept/test_prompt.cassette"]
    )
    # a module that is there but not collected this time keeps its cassettes
    one_file = run(agent_test, monkeypatch, "test_agent.py", "--replay-unused=fail", CI="1")
    assert "test_other" not in output(one_file)
    assert "cassettes/test_accept/test_prompt.cassette" in output(one_file)


def test_replay_cassette_dir_may_return_text_as_vcr_cassette_dir_does(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An override written as pytest-recording's `vcr_cassette_dir` (`os.path.join(...)`, a str) errored every
    marked test with `TypeError: unsupported operand type(s) for /: 'str' and 'str'`."""
    agent_test.makeconftest('''
import os
import pytest

@pytest.fixture
def replay_cassette_dir(request):
    if os.environ.get("DIR_IS_NUMBER"):
        return 5
    return os.path.join(os.path.dirname(str(request.node.fspath)), "my_cassettes")
''')
    run(agent_test, monkeypatch, "-k", "named").assert_outcomes(passed=1, deselected=3)
    assert (agent_test.path / "my_cassettes" / "shared-name.cassette").is_file()
    run(agent_test, monkeypatch, "-k", "named", CI="1", BROKEN="1").assert_outcomes(passed=1, deselected=3)
    bad = run(agent_test, monkeypatch, "-k", "named", "-rN", CI="1", DIR_IS_NUMBER="1")
    bad.assert_outcomes(errors=1, deselected=3)
    assert "replay_cassette_dir: 5 is int; it returns a folder path (str or pathlib.Path)" in output(bad).splitlines()
    assert "TypeError" not in output(bad)


def test_re_recording_a_test_that_calls_no_model_any_more_removes_its_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure of a test that stopped calling its model says to re-record with --replay-mode=all, which wrote
    nothing and left the old cassette, so the next replay failed the same way: round and round."""
    pytester.makepyfile(test_maybe='''
import os
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


@pytest.mark.replay
def test_maybe():
    if os.environ.get("CALL"):
        Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")]))).run_sync("hi")
''')
    run(pytester, monkeypatch, CI="", CALL="1").assert_outcomes(passed=1)
    path = pytester.path / "cassettes/test_maybe/test_maybe.cassette"
    assert path.is_file()
    stale = run(pytester, monkeypatch, CI="1", CALL="")
    stale.assert_outcomes(failed=1)
    assert "re-record it with --replay-mode=all" in output(stale)
    again = run(pytester, monkeypatch, "--replay-mode=all", CI="", CALL="")
    again.assert_outcomes(passed=1)
    assert "1 removed (no model call)" in output(again)
    assert not path.exists()
    run(pytester, monkeypatch, CI="1", CALL="").assert_outcomes(passed=1)


def test_a_test_whose_teardown_fails_leaves_no_baseline(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixture that checks the agent's answer after the test failed in teardown, and the recording (or the
    --replay-accept) its body made was kept as the baseline: the next run replayed the wrong answer."""
    agent_test.makepyfile(test_checked='''
import os
import pytest
from test_agent import make_agent


@pytest.fixture
def answers():
    seen = []
    yield seen
    assert not os.environ.get("BAD_ANSWER"), f"the agent answered {seen}"


@pytest.mark.replay
def test_prompt(answers):
    answers.append(make_agent().run_sync(os.environ.get("PROMPT", "hello")).output)
''')
    path = agent_test.path / "cassettes/test_checked/test_prompt.cassette"
    first = run(agent_test, monkeypatch, "test_checked.py", CI="", BAD_ANSWER="1")
    first.assert_outcomes(passed=1, errors=1)
    assert not path.exists()
    assert "not saved: the test's teardown failed" in output(first) and "1 not saved (test failed)" in output(first)
    run(agent_test, monkeypatch, "test_checked.py", CI="").assert_outcomes(passed=1)
    before = path.read_bytes()
    accepted = run(agent_test, monkeypatch, "test_checked.py", "--replay-accept", CI="1", PROMPT="bye", BAD_ANSWER="1")
    accepted.assert_outcomes(passed=1, errors=1)
    assert path.read_bytes() == before
    assert "harness-replay: accepted" not in output(accepted)


def test_two_tests_of_one_cassette_name_are_told_so(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: two tests marked with one name share one cassette; the second replayed the first's
    recording and failed as changed with no word of why."""
    pytester.makepyfile(
        test_shared="""
        import pytest
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel

        def agent():
            return Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])))

        @pytest.mark.replay("shared")
        def test_first():
            agent().run_sync("first prompt")

        @pytest.mark.replay("shared")
        def test_second():
            agent().run_sync("second prompt")
        """
    )
    result = run(pytester, monkeypatch, CI="")
    result.assert_outcomes(passed=1, failed=1)
    assert ("it holds the recording of test_shared.py::test_first: tests that share a cassette name replay each "
            "other's calls; give each its own @pytest.mark.replay name") in output(result), output(result)



def test_a_real_model_call_is_said_at_once_under_pytests_own_capture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as users run pytest (a process of its own, output captured per test): the note that a recording called a
    provider model reached only the test's captured stdout, shown nowhere for a passing test."""
    from fake_openai import FakeOpenAI, Reply

    pytester.makeconftest(PROVIDER_CONFTEST)
    pytester.makepyfile(test_provider=PROVIDER_TEST)
    with FakeOpenAI([Reply.text("hello there")]) as server, monkeypatch.context() as m:
        for key, value in (("CI", "false"), ("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", server.base_url), ("EXPECT_ALLOWED", "1")):
            m.setenv(key, value)
        recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=2)
    text = output(recorded)
    assert text.count("called openai:gpt-4o-mini to record cassettes/test_provider/test_agent.cassette") == 1
    assert "(1 called a real model)" in text


LIVE_TEST = """
import os

import pytest

HAS_KEY = bool(os.environ.get("OPENAI_API_KEY"))


@pytest.mark.skipif(not HAS_KEY, reason="needs OPENAI_API_KEY")
def test_live_api():
    raise AssertionError("a live test ran without a key")


def test_the_module_saw_the_environment():
    assert not HAS_KEY
"""


def test_replay_only_collection_leaves_a_live_tests_key_guard_alone(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A live test skipped without a provider key (``skipif(not os.environ.get("OPENAI_API_KEY"))``, read at import)
    ran in CI and failed: the placeholder keys were set for every module's import, not only for a module that
    cannot import without one. Such a module (a module-level ``Agent("openai:...")``) still imports."""
    from pydantic_ai import models

    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", models.ALLOW_MODEL_REQUESTS)  # the conftest sets it in this process
    pytester.makeconftest(PROVIDER_CONFTEST)
    pytester.makepyfile(test_live=LIVE_TEST, test_provider=PROVIDER_TEST)
    result = run(pytester, monkeypatch, CI="1", OPENAI_API_KEY="")
    result.assert_outcomes(passed=2, skipped=1, failed=1)  # test_agent has no cassette: it fails as unrecorded
    text = output(result)
    assert "no cassette" in text and "needs OPENAI_API_KEY" not in text
    result = run(pytester, monkeypatch, "-rs", CI="1", OPENAI_API_KEY="")
    assert "SKIPPED [1] test_live.py:8: needs OPENAI_API_KEY" in output(result)


FIXTURE_AGENT_TEST = """
import pytest
from pydantic_ai import Agent


@pytest.fixture
def agent():
    return Agent("openai-chat:gpt-4o-mini")  # the provider needs a key when the fixture builds it


@pytest.mark.replay
def test_agent(agent):
    assert agent.run_sync("hi").output == "hello there"
"""


def test_an_agent_built_by_a_fixture_replays_without_a_key(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI without a key: a replayed test whose agent a fixture builds errored at setup ("Set the
    `OPENAI_API_KEY` environment variable"), while the same agent built in the test body replayed."""
    from fake_openai import FakeOpenAI, Reply

    pytester.makepyfile(test_fixture_agent=FIXTURE_AGENT_TEST)
    with FakeOpenAI([Reply.text("hello there")]) as server:
        recorded = run(pytester, monkeypatch, CI="false", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
    recorded.assert_outcomes(passed=1)
    replayed = run(pytester, monkeypatch, CI="true", OPENAI_API_KEY="", OPENAI_BASE_URL="")  # as on CI: no key, no URL
    replayed.assert_outcomes(passed=1)
    assert "cassettes 0 recorded, 1 replayed, 0 changed" in output(replayed)
    import os

    assert "OPENAI_API_KEY" not in os.environ  # the placeholder lived only while the test replayed


@pytest.mark.slow
def test_a_real_model_call_is_said_at_once_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest -n auto``: a worker's note that a recording called a provider model reached no terminal, so the
    user learnt of it from the final count only, however long the paid recordings took."""
    pytest.importorskip("xdist", reason="needs pytest-xdist (dev extra)")
    from fake_openai import FakeOpenAI, Reply

    pytester.makeconftest(PROVIDER_CONFTEST)
    pytester.makepyfile(test_provider=PROVIDER_TEST)
    with FakeOpenAI([Reply.text("hello there")]) as server, monkeypatch.context() as m:
        for key, value in (("CI", "false"), ("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", server.base_url), ("EXPECT_ALLOWED", "1")):
            m.setenv(key, value)
        # One worker: the note still travels from a worker to the controller, which is what is checked (a
        # second worker only imported pydantic-ai and the openai client again for the test that calls no model).
        recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    recorded.assert_outcomes(passed=2)
    text = output(recorded)
    assert text.count("called openai:gpt-4o-mini to record cassettes/test_provider/test_agent.cassette") == 1
    assert text.index("called openai:gpt-4o-mini") < text.index("(1 called a real model)")


RENAMED_TEST = '''
import os

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


@pytest.mark.replay
def test_named():
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])), name=os.environ.get("AGENT_NAME"))
    assert agent.run_sync("hello").output == "hi"
'''


def test_an_agent_renamed_since_the_recording_is_not_told_to_append(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """`name="bot"` given to the test's agent: the failure said the cassette "holds 0 request(s) of that role"
    and to append it with --replay-mode=new, which records bot's calls and then fails on main's never made."""
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_renamed=RENAMED_TEST)
    run(pytester, monkeypatch, AGENT_NAME="").assert_outcomes(passed=1)
    renamed = run(pytester, monkeypatch, "--replay-mode=none", AGENT_NAME="bot")
    renamed.assert_outcomes(failed=1)
    assert ("made request #1 of role 'bot', but cassettes/test_renamed/test_named.cassette has no request of that role "
            "(it holds main 1) and --replay-mode=none only replays; re-record the test with --replay-mode=all") in output(renamed)


def test_a_renamed_agent_appended_lists_its_new_role_beside_the_removed_one(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --replay-mode=new the requests the replay added were dropped from the failure it reported for what
    else changed: a renamed agent read `main[0] removed` and nothing of `bot`'s request that replaced it."""
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_renamed=RENAMED_TEST)
    run(pytester, monkeypatch, AGENT_NAME="").assert_outcomes(passed=1)
    appended = run(pytester, monkeypatch, "--replay-mode=new", AGENT_NAME="bot")
    appended.assert_outcomes(failed=1)
    text = output(appended)
    assert "main[0] removed" in text and "bot[0] added" in text, text


INTERRUPTED_TEST = """
import os

from test_agent import make_agent


def test_prompt(replay_cassette):
    make_agent().run_sync("hello")
    if os.environ.get("INTERRUPT"):
        raise KeyboardInterrupt  # Ctrl-C while the test runs
"""


def test_rewrite_interrupted_or_killed_keeps_the_cassette(agent_test: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: `--replay-mode=rewrite` deleted each cassette as its test started, so Ctrl-C (or a kill, a
    CI timeout) during a test lost that test's cassette; a test that fails still leaves none."""
    from replay import _pytest_cassette

    agent_test.makepyfile(test_int=INTERRUPTED_TEST)
    run(agent_test, monkeypatch, "test_int.py").assert_outcomes(passed=1)
    path = agent_test.path / "cassettes/test_int/test_prompt.cassette"
    before = path.read_bytes()
    with monkeypatch.context() as m:
        m.setenv("INTERRUPT", "1")
        interrupted = agent_test.runpytest_inprocess(
            "-p", "no:cacheprovider", "test_int.py", "--replay-mode=rewrite", no_reraise_ctrlc=True
        )
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED, output(interrupted)
    assert path.read_bytes() == before
    # killed while the test runs: the test is set up and never finishes
    _pytest_cassette.TestCassette("test_int.py::test_prompt", path, "rewrite")
    assert path.read_bytes() == before


WORKSPACE_TEST = """
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_harness import FileSystem


@pytest.mark.replay
def test_coder():
    root = Path(tempfile.mkdtemp(prefix="replay-pt-ws-"))
    try:
        (root / "app.py").write_text("x = 1\\n")
        model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="k"))
        assert Agent(model, capabilities=[LocalWorkspace(root), FileSystem()]).run_sync("Look.").output == "looked"
    finally:
        shutil.rmtree(root, ignore_errors=True)
"""


def test_a_provider_test_in_a_fresh_workspace_replays_as_passed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real OpenAIChatModel in a LocalWorkspace on a fresh temp dir: FileSystem's refusal of ../outside.txt sends
    the provider the root's path, a new one in every run. The test failed on its own version with
    'main[1] wire: messages[2].content: … /tmp/replay-pt-ws-qlb46nmp … → … /tmp/replay-pt-ws-li475hdb …'
    where the messages were the same, as ``replay run`` read it ``changed``."""
    from fake_openai import FakeOpenAI, Reply

    pytester.makepyfile(test_ws=WORKSPACE_TEST)
    with FakeOpenAI([Reply.tool_call("read_file", {"path": "../outside.txt"}, id="call_w0"), Reply.text("looked")]) as server:
        recorded = run(pytester, monkeypatch, CI="false", OPENAI_BASE_URL=server.base_url)
    recorded.assert_outcomes(passed=1)
    replayed = run(pytester, monkeypatch, CI="true", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    replayed.assert_outcomes(passed=1)
    assert "cassettes 0 recorded, 1 replayed, 0 changed" in output(replayed)
    # control: what the test itself changed is still a change at the wire
    (pytester.path / "test_ws.py").write_text(WORKSPACE_TEST.replace("Look.", "Look again."))
    changed = run(pytester, monkeypatch, CI="true", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    changed.assert_outcomes(failed=1)
    assert "main[0] wire: messages[0].content: Look. → Look again." in output(changed)

"""OpenAI Responses at the wire level: streamed (SSE events, parallel tool calls) and ``count_tokens``.

``FakeOpenAI`` serves ``/v1/responses`` streamed and ``/v1/responses/input_tokens`` (what
``OpenAIResponsesModel.count_tokens`` asks before each request under
``UsageLimits(count_tokens_before_request=True)``); the replay runs with the server stopped and no key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply, ToolCall

from replay.cassette import cassette_path, load

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

SCENARIOS = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

from replay import Run, scenario


def agent():
    provider = OpenAIProvider(base_url=os.environ["FAKE_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    a = Agent(OpenAIResponsesModel("gpt-4o-mini", provider=provider), instructions="Be brief.")

    @a.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny, 21C in {city}"

    return a


@scenario("responses/stream")
async def stream(run: Run) -> str:
    async with agent().run_stream("Weather in Paris and Oslo?") as s:
        out = await s.get_output()
    run.observe("messages", len(s.all_messages()))
    return out


@scenario("responses/count_tokens")
async def count_tokens(run: Run) -> str:
    limits = UsageLimits(input_tokens_limit=5000, count_tokens_before_request=True)
    return (await agent().run("Weather in Rome?", usage_limits=limits)).output
'''

PARALLEL = Reply.tool_calls(ToolCall("get_weather", {"city": "Paris"}, "call_pa1"), ToolCall("get_weather", {"city": "Oslo"}, "call_os1"))
SCRIPTS: dict[str, list[Reply | str]] = {
    "responses/stream": [PARALLEL, "Both sunny."],
    "responses/count_tokens": [Reply.tool_call("get_weather", {"city": "Rome"}, id="call_ro1"), "Rome: sunny."],
}


def test_streamed_responses_and_count_tokens_replay_same_offline(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "responses.py").write_text(SCENARIOS)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-responsestest4f7c1d9e2b8a6035")
    for sid, turns in SCRIPTS.items():
        with FakeOpenAI(turns) as srv:
            monkeypatch.setenv("FAKE_BASE_URL", srv.base_url)
            res = cli("record", sid)
            assert res.code == 0 and "outcome ok" in res.out, res.out + res.err
            assert srv.remaining == 0
        if sid == "responses/stream":
            assert all(body.get("stream") for body in srv.requests)
    streamed = load(cassette_path(project / "cassettes", "responses/stream"))
    assert [ex.kind for ex in streamed.exchanges] == ["request_stream"] * 2
    assert all(w.stream and "response.completed" in w.response for ex in streamed.exchanges for w in ex.wire or ())
    counted = load(cassette_path(project / "cassettes", "responses/count_tokens"))
    assert [ex.kind for ex in counted.exchanges] == ["count_tokens", "request"] * 2
    assert [w.url.rsplit("/v1", 1)[1] for ex in counted.exchanges for w in ex.wire or ()] == [
        "/responses/input_tokens", "/responses"] * 2

    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("FAKE_BASE_URL", "http://198.51.100.7:9/v1")
    for _ in range(2):
        res = cli("run")
        assert res.code == 0 and "2 scenarios: 2 same, 0 changed, 0 error" in res.out, res.out + res.err

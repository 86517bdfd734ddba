"""Replay never reaches a server, not even one on this machine, and never resolves a name.

The guard is configured to refuse loopback too (``allow_loopback=False``), and the
cassette is one response short with ``on_exhausted='fake'``, so the replay really does
try to call the provider: the guard must stop it before the FakeOpenAI server sees a byte.
"""

from __future__ import annotations

import asyncio.base_events
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply

from replay import guard, replayer
from replay.recorder import record
from replay.replayer import replay
from replay.scenario import Run, Scenario

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

SID = "network/two_turns"
BASE_URL: dict[str, str] = {}
"""Where the scenario's provider points; set by each test before it records or replays."""


async def two_turns(run: Run) -> str:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=BASE_URL["url"], api_key="test-key", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    first = await agent.run("Weather in Paris?")
    async with agent.run_stream("And again, streamed.", message_history=first.all_messages()) as s:
        return await s.get_output()


SCENARIO = Scenario(id=SID, func=two_turns, path=None, doc="", source_hash="0")
SCRIPT: list[Reply | str] = [Reply.tool_call("get_weather", {"city": "Paris"}), "Sunny.", "Still sunny."]


@pytest.fixture
def recorded(project: Path) -> Any:
    with FakeOpenAI(SCRIPT) as srv:
        BASE_URL["url"] = srv.base_url
        cassette = record(SCENARIO)
        assert len(srv.requests) == 3
    assert cassette.outcome.status == "ok", cassette.outcome
    return cassette


@pytest.fixture
def refusals(monkeypatch: pytest.MonkeyPatch) -> list[guard.NetworkBlocked]:
    """Every refusal the guard raises, even ones the SDK wraps or swallows."""
    seen: list[guard.NetworkBlocked] = []
    original = guard._blocked

    def spy(scenario_id: str, host: str, port: object) -> guard.NetworkBlocked:
        seen.append(original(scenario_id, host, port))
        return seen[-1]

    monkeypatch.setattr(guard, "_blocked", spy)
    return seen


def _one_short(recorded: Any) -> Any:
    short = recorded.model_copy(deep=True)
    short.exchanges.pop()  # the streamed answer: the replay now has to ask the real model
    return short


def test_loopback_provider_is_refused_when_the_cassette_runs_out(
    recorded: Any, refusals: list[guard.NetworkBlocked], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket guard on its own: pydantic-ai's ALLOW_MODEL_REQUESTS switch is left on, as for
    a model or SDK call that does not consult it, so only the guard stands between replay and the server."""
    monkeypatch.setattr(replayer, "offline", contextlib.nullcontext)
    with FakeOpenAI(["I should never be asked."] * 3) as srv:
        BASE_URL["url"] = srv.base_url
        result = replay(SCENARIO, _one_short(recorded), "fake", allow_loopback=False)
        assert srv.requests == []
    assert result.result.outcome.status == "error"
    kinds = {d.kind for d in result.divergences}
    assert {"exhausted", "network"} <= kinds, result.divergences
    assert refusals, "the guard was never asked"
    message = str(refusals[0])
    assert f"network access blocked during replay of scenario {SID!r}" in message
    assert "127.0.0.1" in message


def test_both_layers_keep_the_server_untouched(recorded: Any, refusals: list[guard.NetworkBlocked]) -> None:
    """As shipped: pydantic-ai's switch refuses first, the guard stays armed behind it."""
    with FakeOpenAI(["I should never be asked."] * 3) as srv:
        BASE_URL["url"] = srv.base_url
        result = replay(SCENARIO, _one_short(recorded), "fake", allow_loopback=False)
        assert srv.requests == []
    assert result.result.outcome.status == "error"
    assert "not allowed" in (result.result.outcome.error.message if result.result.outcome.error else "")


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every name resolution attempted (the guard wraps these, so it sees them first)."""
    calls: list[object] = []
    real = socket.getaddrinfo
    real_loop = asyncio.base_events.BaseEventLoop.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(host)
        return real(host, *args, **kwargs)

    async def loop_getaddrinfo(self: Any, host: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(host)
        return await real_loop(self, host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", loop_getaddrinfo)
    yield calls


def test_provider_replay_needs_no_dns_lookup(
    recorded: Any, lookups: list[object], refusals: list[guard.NetworkBlocked]
) -> None:
    BASE_URL["url"] = "http://api.replay-needs-no-dns.invalid/v1"  # a lookup would be needed to reach it
    result = replay(SCENARIO, recorded, "fail", allow_loopback=False)
    assert result.result.outcome.status == "ok", result.result.outcome
    assert result.result.outcome.output == "Still sunny."
    assert result.divergences == []
    assert lookups == [] and refusals == []


async def swallowing(run: Run) -> str:
    """A tool fetches a URL with httpx.AsyncClient (what the OpenAI/Anthropic SDKs use) and swallows any error."""
    import httpx
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: Any, info: Any) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("fetch", {})])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def fetch() -> str:
        try:
            async with httpx.AsyncClient(timeout=2) as client:
                await client.get(BASE_URL["url"] + "/models")
        except Exception:  # noqa: BLE001 - swallowed on purpose: the guard must still report it
            pass
        return "fetched"

    return (await agent.run("go")).output


SWALLOWING = Scenario(id="network/swallowing", func=swallowing, path=None, doc="", source_hash="0")


def test_attempt_swallowed_by_a_tool_still_changes_the_verdict(project: Path) -> None:
    """The issue's case: with httpx.AsyncClient the guard raised UnicodeError, nothing was recorded, SAME."""
    from replay.differ import diff
    from replay.replayer import WARNING_KINDS

    with FakeOpenAI(["unused"]) as srv:
        BASE_URL["url"] = srv.base_url
        recorded = record(SWALLOWING)
        port = BASE_URL["url"].split(":")[-1].split("/")[0]
        seen = len(srv.requests)  # the recording fetched once
        result = replay(SWALLOWING, recorded, "fail", allow_loopback=False)
        assert len(srv.requests) == seen  # the replay never reached the server
    assert result.result.outcome.status == "ok", result.result.outcome
    network = [d for d in result.divergences if d.kind == "network"]
    assert [d.detail for d in network] == [f"blocked connection to 127.0.0.1:{port}"]
    d = diff(recorded, result.result)
    d.notes = [div.describe() for div in result.divergences if div.kind not in WARNING_KINDS]
    assert d.changed and "127.0.0.1" in d.notes[0]

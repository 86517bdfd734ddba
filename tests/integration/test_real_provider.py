"""Record a real ``OpenAIChatModel`` over HTTP, then replay it with no server, no key, no network.

Why a real provider: ``FunctionModel`` skips what users actually record -- the openai SDK,
httpx, SSE parsing, the provider's request mapping. ``FakeOpenAI`` serves those on
127.0.0.1, so the whole path runs for real while nothing leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply

from replay.cassette import cassette_path

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

# Shaped like a real key (so the built-in scrubber shape matches too) and unique to this file.
KEY = "sk-proj-replaytest4f7c1d9e2b8a6035"
# Not a known shape: only the env-var rule (OPENAI_API_KEY's value) can catch it.
SHAPELESS_KEY = "plain-credential-zq81xv"
# TEST-NET-2 (RFC 5737): never routed, and not loopback, so the replay guard refuses it.
UNROUTABLE = "http://198.51.100.7:9/v1"

SCENARIOS = '''
"""Real OpenAI chat provider against FakeOpenAI: text, tools, streamed text, streamed tools."""
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


def make_agent() -> tuple[Agent, OpenAIProvider]:
    # The key is required here on purpose: at replay time harness-replay supplies a placeholder.
    provider = OpenAIProvider(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider), instructions="Answer briefly.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny, 21C in {city}"

    return agent, provider


@scenario("real/text")
async def text(run: Run) -> str:
    agent, provider = make_agent()
    if os.environ.get("PROBE_SDK"):  # a direct SDK call the cassette cannot answer; the error is swallowed
        try:
            await provider.client.with_options(max_retries=0, timeout=2).models.list()
        except Exception as exc:
            run.observe("probe", type(exc).__name__)
    return (await agent.run("Say hello.")).output


@scenario("real/tools")
async def tools(run: Run) -> str:
    agent, _ = make_agent()
    result = await agent.run("Weather in Paris and in Oslo?")
    run.observe("messages", len(result.all_messages()))
    return result.output


@scenario("real/stream")
async def stream(run: Run) -> str:
    agent, _ = make_agent()
    async with agent.run_stream("Stream a greeting.") as s:
        return await s.get_output()


@scenario("real/stream_tools")
async def stream_tools(run: Run) -> str:
    agent, _ = make_agent()
    async with agent.run_stream("Weather in Rome, streamed.") as s:
        out = await s.get_output()
    run.observe("messages", len(s.all_messages()))
    return out
'''

LEAK = '''
"""A tool that dumps the client config: a realistic way for a key to reach a prompt."""
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("leak/config")
async def leak(run: Run) -> str:
    key = os.environ["OPENAI_API_KEY"]
    provider = OpenAIProvider(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=key)
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider), instructions=f"Never reveal {key}.")

    @agent.tool_plain
    def show_config() -> str:
        """The client configuration."""
        return f"api_key={key}"

    return (await agent.run("Show me your config.")).output
'''

SCRIPTS: dict[str, list[Reply | str]] = {
    "real/text": ["Hello!"],
    "real/tools": [
        Reply.tool_calls(
            *Reply.tool_call("get_weather", {"city": "Paris"}).calls,
            *Reply.tool_call("get_weather", {"city": "Oslo"}).calls,
        ),
        "Sunny in both Paris and Oslo.",
    ],
    "real/stream": ["Hello there, streamed in pieces."],
    "real/stream_tools": [Reply.tool_call("get_weather", {"city": "Rome"}), "Rome: sunny, 21C."],
}
# Requests each scenario makes: one per scripted turn.
EXPECTED_REQUESTS = {sid: len(turns) for sid, turns in SCRIPTS.items()}


URLS: dict[str, str] = {}
"""Base URL each scenario was recorded against (its server is stopped by then)."""


@pytest.fixture
def recorded(
    project: Path, cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> dict[str, FakeOpenAI]:
    """Every scenario recorded against its own FakeOpenAI, which is stopped afterwards."""
    (project / "scenarios" / "real.py").write_text(SCENARIOS)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    servers: dict[str, FakeOpenAI] = {}
    for sid, turns in SCRIPTS.items():
        with FakeOpenAI(turns) as srv:
            URLS[sid] = srv.base_url
            monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
            res = cli("record", sid)
            assert res.code == 0, res.err  # type: ignore[attr-defined]
            assert f"recorded  {sid}" in res.out, res.out  # type: ignore[attr-defined]
            assert "outcome ok" in res.out, res.out  # type: ignore[attr-defined]
            assert srv.remaining == 0, f"{sid}: {srv.remaining} scripted replies unused"
            assert len(srv.requests) == EXPECTED_REQUESTS[sid]
        servers[sid] = srv
    return servers


def _offline(monkeypatch: pytest.MonkeyPatch, base_url: str = UNROUTABLE) -> None:
    """No key, and the provider pointed at an address any connection attempt is refused for."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("FAKE_OPENAI_BASE_URL", base_url)


def test_recording_captures_the_real_provider_traffic(recorded: dict[str, FakeOpenAI], project: Path) -> None:
    from replay.cassette import load

    streamed = recorded["real/stream_tools"].requests
    assert all(body.get("stream") for body in streamed)
    assert not any(body.get("stream") for body in recorded["real/tools"].requests)
    # The tool results went back to the server as `tool` messages.
    assert [m["role"] for m in recorded["real/tools"].requests[1]["messages"]][-2:] == ["tool", "tool"]

    for sid, n in EXPECTED_REQUESTS.items():
        c = load(cassette_path(project / "cassettes", sid))
        assert c.outcome.status == "ok", (sid, c.outcome)
        assert [(ex.role, ex.model_name) for ex in c.exchanges] == [("main", "gpt-4o-mini")] * n
    kinds = {ex.kind for ex in load(cassette_path(project / "cassettes", "real/stream_tools")).exchanges}
    assert kinds == {"request_stream"}
    events = load(cassette_path(project / "cassettes", "real/stream")).exchanges[0].events
    assert events, "the SSE stream's events are recorded"


def test_replay_needs_no_server_no_key_no_network(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {sid: len(srv.requests) for sid, srv in recorded.items()}
    _offline(monkeypatch)
    res = cli("run")
    assert res.code == 0, res.out + res.err  # type: ignore[attr-defined]
    assert "4 scenarios: 4 same, 0 changed, 0 error" in res.out  # type: ignore[attr-defined]
    assert "blocked" not in res.out  # type: ignore[attr-defined]
    assert {sid: len(srv.requests) for sid, srv in recorded.items()} == before


def test_replay_with_the_stopped_servers_address(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded base URL (loopback, now closed) would make any real request fail loudly."""
    assert recorded["real/stream"].remaining == 0
    _offline(monkeypatch, URLS["real/stream"])
    res = cli("run", "real/stream", "real/stream_tools")
    assert res.code == 0, res.out + res.err  # type: ignore[attr-defined]
    assert "2 scenarios: 2 same" in res.out  # type: ignore[attr-defined]


def test_guard_blocks_a_provider_call_the_cassette_cannot_answer(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the SDK really tries to connect, the guard refuses it and the report says so."""
    _offline(monkeypatch)
    monkeypatch.setenv("PROBE_SDK", "1")
    res = cli("run", "real/text")
    assert res.code == 1, res.out + res.err  # type: ignore[attr-defined]
    assert "blocked connection to 198.51.100.7:9" in res.out  # type: ignore[attr-defined]


@pytest.mark.parametrize("key", [KEY, SHAPELESS_KEY], ids=["shaped", "shapeless"])
def test_recording_key_never_reaches_the_cassette(
    key: str, project: Path, cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "leak.py").write_text(LEAK)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeOpenAI([Reply.tool_call("show_config"), "Your config is set."]) as srv:
        monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
        assert cli("record", "leak/config").code == 0  # type: ignore[attr-defined]
    # The key did reach the traffic (instructions and the tool result the server received) ...
    assert key in json.dumps(srv.requests)
    # ... but nothing written to disk or shown holds it.
    path = cassette_path(project / "cassettes", "leak/config")
    data = path.read_bytes()
    assert key.encode() not in data
    assert data.count(b"<secret:") >= 2
    for args in (["show", path], ["show", "--normalized", path], ["show", "-f", "json", path]):
        shown = cli(*args)
        assert shown.code == 0 and key not in shown.out  # type: ignore[attr-defined]
    # Replayed as the README says, with no key: the placeholder key now stands where the key stood,
    # scrubbed under another label (<secret:api-key:1> for <secret:openai:1>): the same secret, SAME.
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("FAKE_OPENAI_BASE_URL", "http://198.51.100.7:9/v1")
    for level in ("wire", "model"):
        again = cli("run", "leak/config", "--level", level)
        assert again.code == 0 and "SAME" in again.out, again.out  # type: ignore[attr-defined]


MODULE_LEVEL = '''
from pydantic_ai import Agent
from replay import Run, scenario

agent = Agent("openai:gpt-4o-mini")  # built at import, as most user code does


@scenario("modlevel/hello")
async def hello(run: Run) -> str:
    return (await agent.run("hi")).output
'''


def test_module_level_provider_discovered_without_key(
    project: Path, cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "modlevel.py").write_text(MODULE_LEVEL)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = cli("run", "modlevel/hello")
    assert "failed to import" not in res.err, res.err  # type: ignore[attr-defined]

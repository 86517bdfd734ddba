"""Concurrent conversations at the wire level: the message-level diff pairs a role's requests conversation by
conversation (README, Concurrent conversations); the wire comparison paired them by arrival ordinal, so the
same three conversations replayed in another interleaving read `changed` with their prompts crossed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

SCENARIO = '''
import asyncio
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("conc/gather")
async def gather(run: Run) -> list:
    provider = OpenAIProvider(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider))

    @agent.tool_plain
    async def get_weather(city: str) -> str:
        """Current weather for a city."""
        await asyncio.sleep(float(os.environ.get(f"TOOL_SECONDS_{city}", "0")))  # how long the tool took: not replayed
        return f"sunny in {city}" + os.environ.get(f"TOOL_SUFFIX_{city}", "")

    async def one(city: str) -> str:
        async with agent.run_stream(f"Weather in {city}?") as s:
            return await s.get_output()

    return list(await asyncio.gather(*(one(c) for c in ["Paris", "Oslo", "Rome"])))
'''


def _answer(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    city = messages[0]["content"].removeprefix("Weather in ").removesuffix("?")
    if messages[-1]["role"] == "tool":
        return Reply.text(f"{city}: sunny.")
    return Reply.tool_call("get_weather", {"city": city}, id=f"call_{city.lower()}")


def test_concurrent_conversations_in_another_interleaving_are_same_on_the_wire(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "conc.py").write_text(SCENARIO)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-conctest4f7c1d9e2b8a6035")
    monkeypatch.setenv("TOOL_SECONDS_Paris", "0.5")  # Paris's tool was slow: its second request came last
    with FakeOpenAI(responder=_answer) as srv:
        monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
        assert cli("record", "conc/gather").code == 0
    second_turns = [b["messages"][0]["content"] for b in srv.requests if b["messages"][-1]["role"] == "tool"]
    assert second_turns[-1] == "Weather in Paris?", second_turns  # recorded: Paris's second request came last
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("TOOL_SECONDS_Paris")  # now it is quick: Paris's second request comes first
    monkeypatch.setenv("FAKE_OPENAI_BASE_URL", "http://198.51.100.7:9/v1")
    res = cli("run", "conc/gather")
    assert res.code == 0 and "SAME" in res.out, res.out + res.err


def test_accept_marks_the_changed_conversation_when_the_interleaving_moved(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --accept` marks the answer served to a changed request as carried over. The diff labels a call
    by the recording's index; with the conversations interleaved another way the replay's call of that
    index was another city's, and Paris's untouched request got Oslo's mark."""
    from replay.cassette import cassette_path, load

    (project / "scenarios" / "conc.py").write_text(SCENARIO)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-conctest4f7c1d9e2b8a6035")
    monkeypatch.setenv("TOOL_SECONDS_Paris", "0.5")
    with FakeOpenAI(responder=_answer) as srv:
        monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
        assert cli("record", "conc/gather").code == 0
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("TOOL_SECONDS_Paris")  # Paris's second request now comes first
    monkeypatch.setenv("TOOL_SUFFIX_Oslo", " (windy)")  # and only Oslo's second request changes
    monkeypatch.setenv("FAKE_OPENAI_BASE_URL", "http://198.51.100.7:9/v1")
    res = cli("run", "conc/gather", "--accept")
    assert res.code == 0 and "1 answer(s) carried over" in res.err, res.out + res.err
    c = load(cassette_path(project / "cassettes", "conc/gather"))
    marked = [ex for ex in c.exchanges if ex.carried_over]
    assert len(marked) == 1
    (message,) = (m for m in c.expand(marked[0].messages)[-1:] if m.get("kind") == "request" and
                  any(p.get("part_kind") == "tool-return" for p in m.get("parts", [])))
    (tool_return,) = (p for p in message["parts"] if p.get("part_kind") == "tool-return")
    assert tool_return["content"] == "sunny in Oslo (windy)"
    res = cli("run", "conc/gather")  # the accepted baseline replays as itself, its mark where it was put
    assert res.code == 0 and "SAME" in res.out, res.out + res.err

"""The query string is part of what a provider is sent: Azure OpenAI picks its API by ``api-version``,
the Anthropic SDK's beta endpoints add ``?beta=true``. The wire comparison left it out with the host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

KEY = "sk-proj-querytest4f7c1d9e2b8a6035"

SCENARIO = '''
import os

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("q/version")
async def version(run: Run) -> str:
    client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"],
                         default_query={"api-version": os.environ["API_VERSION"], "key": os.environ["OPENAI_API_KEY"]})
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)))
    return (await agent.run("Hello?")).output
'''


def _record(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Record ``target`` against a fake OpenAI server with the real-looking key."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(["Hi."]) as srv:
        monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
        assert cli("record", target).code == 0


def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, and a base URL nothing answers (TEST-NET-2): a replay that reached for it would fail."""
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("FAKE_OPENAI_BASE_URL", "http://198.51.100.7:9/v1")

def test_a_changed_query_string_is_a_change_on_the_wire(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "q.py").write_text(SCENARIO)
    monkeypatch.setenv("API_VERSION", "2024-02-01")
    _record(cli, monkeypatch, "q/version")
    assert KEY.encode() not in (project / "cassettes" / "q" / "version.cassette").read_bytes()
    _offline(monkeypatch)  # the placeholder key stands in the query where the key stood
    same = cli("run", "q/version")
    assert same.code == 0 and "SAME" in same.out, same.out + same.err
    monkeypatch.setenv("API_VERSION", "2025-01-01")
    changed = cli("run", "q/version")
    assert changed.code == 1 and "CHANGED" in changed.out, changed.out + changed.err
    assert "api-version=2024-02-01" in changed.out and "api-version=2025-01-01" in changed.out, changed.out
    assert KEY not in changed.out


def test_accepting_a_wire_only_change_marks_the_answer_carried_over(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's own cases (reasoning_effort low → minimal, system → developer) change only the bytes sent,
    not the messages: `run --accept` made the replay the baseline with the answer given to the old request, and
    did not mark it carried over, so show, diff and run never said the answer was not the provider's."""
    (project / "scenarios" / "q.py").write_text(SCENARIO)
    monkeypatch.setenv("API_VERSION", "2024-02-01")
    _record(cli, monkeypatch, "q/version")
    _offline(monkeypatch)
    monkeypatch.setenv("API_VERSION", "2025-01-01")
    accepted = cli("run", "q/version", "--accept")
    assert "accepted" in accepted.err and "carried over" in accepted.err, accepted.out + accepted.err
    shown = cli("show", project / "cassettes" / "q" / "version.cassette")
    assert "(answer carried over from a different request)" in shown.out, shown.out
    again = cli("run", "q/version")
    assert again.code == 0 and "carried over from a different request at main[0]" in again.out, again.out


BETA = '''
import os

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("q/beta")
async def beta(run: Run) -> str:
    client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"],
                         default_headers={"OpenAI-Beta": os.environ["BETA"]})
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client)))
    return (await agent.run("Hello?")).output
'''


def test_a_changed_behaviour_header_is_a_change_on_the_wire(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README lists the request headers kept because they change what a provider does (`anthropic-beta`:
    slim turns features on with it); they were recorded but never compared, so a slim that sent another beta
    flag replayed `same`."""
    (project / "scenarios" / "q.py").write_text(BETA)
    monkeypatch.setenv("BETA", "assistants=v1")
    _record(cli, monkeypatch, "q/beta")
    _offline(monkeypatch)
    same = cli("run", "q/beta")
    assert same.code == 0 and "SAME" in same.out, same.out + same.err
    monkeypatch.setenv("BETA", "assistants=v2")
    changed = cli("run", "q/beta")
    assert changed.code == 1, changed.out + changed.err
    assert "main[0] wire: headers.openai-beta: assistants=v1 → assistants=v2" in changed.out, changed.out

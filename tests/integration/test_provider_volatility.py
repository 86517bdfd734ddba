"""Two recordings of one unchanged scenario against a provider whose answers differ only in what a real
provider makes fresh on every call (its item ids, request ids) are ``same``.

``FakeOpenAI`` numbers its ids by request, so two recordings agree by construction; a real provider
does not: OpenAI's Responses API names every output item (``msg_<48 hex>``, ``fc_<48 hex>``) anew.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

KEY = "sk-proj-volatiletest4f7c1d9e2b8a6035"

RESPONSES = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("vol/responses")
async def responses(run: Run) -> str:
    provider = OpenAIProvider(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    agent = Agent(OpenAIResponsesModel("gpt-4o-mini", provider=provider), instructions="Answer briefly.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    first = await agent.run("Weather in Oslo?")
    return (await agent.run("Thanks!", message_history=first.all_messages())).output
'''


class FreshIds(FakeOpenAI):
    """Responses API items named as OpenAI names them: fresh hex ids on every call."""

    def response_object(self, number: int, model: str, turn: Reply) -> dict[str, Any]:
        out = super().response_object(number, model, turn)
        out["id"] = "resp_" + secrets.token_hex(24)
        for item in out["output"]:
            item["id"] = ("msg_" if item["type"] == "message" else "fc_") + secrets.token_hex(24)
        return out


def _script() -> list[Reply | str]:
    return [Reply.tool_call("get_weather", {"city": "Oslo"}, id="call_o1"), "Oslo: sunny.", "You are welcome."]


def test_responses_item_ids_are_not_a_change(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "scenarios" / "vol.py").write_text(RESPONSES)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for folder in ("a", "b"):
        with FreshIds(_script()) as srv:
            monkeypatch.setenv("FAKE_OPENAI_BASE_URL", srv.base_url)
            res = cli("record", "--cassettes", folder, "vol/responses")
            assert res.code == 0, res.out + res.err
    a, b = project / "a" / "vol" / "responses.cassette", project / "b" / "vol" / "responses.cassette"
    assert b"msg_" in a.read_bytes() and a.read_bytes() != b.read_bytes()  # the ids did differ
    res = cli("diff", a, b)
    assert res.code == 0 and "SAME" in res.out, res.out + res.err
    # the git textconv shows no difference either
    assert cli("show", "--normalized", a).out.splitlines()[3:] == cli("show", "--normalized", b).out.splitlines()[3:]

"""The benchmark workload over a real provider model: what wire capture costs.

The same conversation as ``_scenario`` (a tool call then a ~200-word answer per turn,
``SummarizingCompaction(max_messages=40, keep_messages=10)``, an LLM reminder every
``REMIND_EVERY`` main requests), but every role is an ``OpenAIChatModel`` talking HTTP to a
loopback server (``tests/fake_openai.py``) that answers from the request body. So the plain
run pays for the openai SDK, httpx and JSON both ways, as a user's does, and recording
captures each HTTP exchange beside its model call.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from _scenario import _words, answer_text
from _scenario import conversation as _conversation
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_openai import FakeOpenAI, Reply  # noqa: E402


def respond(body: dict[str, Any]) -> Reply:
    """Answer by role (the model name) and, for the main agent, by where the turn is."""
    model = body.get("model")
    if model == "bench-summarizer":
        return Reply.text("Summary: " + _words(len(body.get("messages", [])), 90) + ".")
    if model == "bench-reminder":
        return Reply.text("Stay on the deploy question; answer from the lookup results.")
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    text = " ".join(str(m.get("content") or "") for m in messages[-3:])
    turn = int((re.findall(r"Turn (\d+)", text) or re.findall(r"turn (\d+)", text) or ["0"])[-1])
    if last.get("role") == "tool":
        return Reply.text(answer_text(turn))
    return Reply.tool_call("lookup", {"topic": f"topic {turn}", "turn": turn}, id=f"call_{turn:06d}")


def server() -> FakeOpenAI:
    return FakeOpenAI(responder=respond)


if __name__ == "__main__":  # the server alone, in its own process: its CPU is not the client's
    import time

    with server() as srv:
        print(srv.base_url, flush=True)
        while True:
            time.sleep(3600)


async def conversation(base_url: str, turns: int) -> tuple[str, int]:
    """``_scenario.conversation`` with every role an ``OpenAIChatModel`` talking to ``base_url``."""
    provider = OpenAIProvider(base_url=base_url, api_key="sk-bench-placeholder")
    models = tuple(OpenAIChatModel(f"bench-{role}", provider=provider) for role in ("main", "summarizer", "reminder"))
    return await _conversation(turns, models)  # type: ignore[arg-type]


def make_scenario(base_url: str, turns: int) -> Any:
    from replay.scenario import Run, Scenario

    async def bench_wire(run: Run) -> Any:
        output, length = await conversation(base_url, turns)
        run.observe("final_history", length)
        return output

    return Scenario(id=f"bench/wire_{turns}", func=bench_wire, path=None, doc="wire benchmark", source_hash="bench")

"""Cassettes shaped like the realistic workload, for the ``replay check`` linearity benchmark.

What the invariants walk: one agent run per turn chained through ``message_history``, each turn
a tool call then a ~200-word answer, and a ``SummarizingCompaction``-style summarizer call whenever
the history passes ``COMPACT_AT`` messages (its input the dropped messages' text, its summary sent
back as a compaction part before the last ``KEEP`` messages). Built from real pydantic-ai messages
(the checks load them for token estimates) without running an agent, so 10,000 requests take
seconds to build. ``hostile`` builds the shape that made ``content_lost`` quadratic: thousands of
short messages and one large summarizer input.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from replay.cassette import AgentRunRecord, Cassette, CassetteBuilder, Exchange, Header

COMPACT_AT = 40
KEEP = 10
SUMMARIZER = "summarizing_compaction"
ROLES = {"main": "bench.checks", SUMMARIZER: "pydantic_ai_harness.compaction._summarizing_compaction"}
_T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
_WORDS = "the plan step result tool check value report answer summary history model request token note".split()


def _dump(message: Any) -> dict[str, Any]:
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


class _Build:
    def __init__(self) -> None:
        self.b = CassetteBuilder(Header(scenario_id="bench/checks", harness_version="0.62.0", roles=dict(ROLES)))
        self.counts: dict[str, int] = {}

    @property
    def c(self) -> Cassette:
        return self.b.cassette

    def ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return [self.b.message(m) for m in messages]

    def request(self, role: str, run: int, sent: list[int], response: int) -> None:
        index = self.counts.get(role, 0)
        self.counts[role] = index + 1
        self.c.exchanges.append(
            Exchange(seq=len(self.c.exchanges), role=role, index=index, kind="request", messages=list(sent),
                     response=response, run=run)
        )

    def run(self, role: str, prompt: str | None, history: list[int], result: list[int], output: Any) -> int:
        self.c.runs.append(AgentRunRecord(role=role, prompt=prompt, history=list(history), result=list(result), output=output))
        return len(self.c.runs) - 1


def build(requests: int, seed: int = 0) -> Cassette:
    """About ``requests`` model requests (two main requests per turn plus the summarizer's)."""
    rng = random.Random(seed)
    w = _Build()
    history: list[int] = []
    turn = 0
    while len(w.c.exchanges) < requests:
        ts = _T0 + dt.timedelta(seconds=turn)
        prompt = f"Turn {turn}: {_words(rng, 8)}"
        sent = list(history)
        if len(sent) >= COMPACT_AT:  # the summarizer sees the dropped messages' text, the request gets the summary
            dropped = sent[:-KEEP]
            text = "\n".join(" ".join(str(p.get("content", "")) for p in w.c.messages[i].get("parts", [])) for i in dropped)
            summary = f"Summary of turns up to {turn}: {_words(rng, 60)}"
            s_in = w.ids([_dump(ModelRequest(parts=[UserPromptPart(f"Summarize:\n{text}", timestamp=ts)]))])
            s_out = w.b.message(_dump(ModelResponse(parts=[TextPart(summary)], timestamp=ts)))
            s_run = w.run(SUMMARIZER, None, [], [*s_in, s_out], summary)
            w.request(SUMMARIZER, s_run, s_in, s_out)
            part = {"part_kind": "compaction", "content": summary, "metadata": {"pydantic-ai-harness.compaction.summary.v1": True}}
            sent = [w.b.message({"kind": "request", "parts": [part]}), *sent[-KEEP:]]
        user = w.b.message(_dump(ModelRequest(parts=[UserPromptPart(prompt, timestamp=ts)])))
        call = w.b.message(_dump(ModelResponse(parts=[ToolCallPart("search", {"q": f"q{turn}"}, tool_call_id=f"c{turn}")], timestamp=ts)))
        ret = w.b.message(_dump(ModelRequest(parts=[ToolReturnPart("search", _words(rng, 20), tool_call_id=f"c{turn}", timestamp=ts)])))
        answer_text = _words(rng, 200)
        answer = w.b.message(_dump(ModelResponse(parts=[TextPart(answer_text)], timestamp=ts)))
        result = [*sent, user, call, ret, answer]
        r = w.run("main", prompt, history, result, answer_text)
        w.request("main", r, [*sent, user], call)
        w.request("main", r, [*sent, user, call, ret], answer)
        history = result
        turn += 1
    return w.c


def hostile(messages: int, summary_kb: int) -> Cassette:
    """One compaction: ``messages`` short user/assistant messages, a ``summary_kb`` KB summarizer input, one kept."""
    rng = random.Random(1)
    w = _Build()
    history = w.ids([_dump(m) for k in range(messages // 2)
                     for m in (ModelRequest(parts=[UserPromptPart(f"U{k} {_words(rng, 3)}")]),
                               ModelResponse(parts=[TextPart(f"A{k} {_words(rng, 3)}")]))])
    big = (_words(rng, 200) + "\n") * max(1, summary_kb * 1024 // 1200)
    s_in = w.ids([_dump(ModelRequest(parts=[UserPromptPart(big)]))])
    s_out = w.b.message(_dump(ModelResponse(parts=[TextPart("summary")])))
    w.request(SUMMARIZER, w.run(SUMMARIZER, None, [], [*s_in, s_out], "summary"), s_in, s_out)
    user = w.b.message(_dump(ModelRequest(parts=[UserPromptPart("continue")])))
    part = {"part_kind": "compaction", "content": "summary", "metadata": {"pydantic-ai-harness.compaction.summary.v1": True}}
    sent = [w.b.message({"kind": "request", "parts": [part]}), user]
    done = w.b.message(_dump(ModelResponse(parts=[TextPart("ok")])))
    r = w.run("main", "continue", history, [*sent, done], "ok")
    w.request("main", r, sent, done)
    return w.c

"""Prompt-cache prefixes, the cache_prefix_broken invariant and cost, on real recordings of two versions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from replay.cassette import Cassette, CassetteBuilder, Exchange, Header, load
from replay.differ import diff
from replay.errors import ReplayUsageError
from replay.invariants import run_checks
from replay.reporter import diff_lines
from replay.wire.cache import Price, prices_from, request_costs

ROOT = Path(__file__).resolve().parents[2]
REMINDERS_062 = ROOT / "cassettes/seed000/reminders_default.cassette"
REMINDERS_054 = ROOT / "tests/fixtures/harness-0.54.0/seed000/reminders_default.cassette"
LONG_062 = ROOT / "cassettes/seed000/long.cassette"


def test_a_growing_history_is_cacheable_up_to_the_previous_request() -> None:
    """0.62 keeps reminders in history: every main request starts with the whole previous one."""
    c = load(REMINDERS_062)
    mains = [x for x in request_costs(c) if x.role == "main"]
    assert len(mains) == 21
    assert mains[0].cached == 0
    assert all(x.cached == prev.tokens for prev, x in zip(mains, mains[1:]))
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]


def test_a_reminder_taken_out_of_the_last_message_keeps_the_prefix() -> None:
    """0.54 appends the reminder to the latest request and leaves it out next turn: only that tail is lost.

    The user prompt it was appended to is sent again unchanged, so a provider's cache still
    matches everything before the reminder; that is no broken prefix.
    """
    c = load(REMINDERS_054)
    assert c.header.harness_version == "0.54.0"
    mains = [x for x in request_costs(c) if x.role == "main"]
    for prev, x in zip(mains, mains[1:]):
        assert 0 < prev.tokens - x.cached < prev.tokens / 2  # the reminder's few tokens, not the history
        assert x.diverged_at == len(load(REMINDERS_054).by_role()["main"][prev.index].messages) - 1
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]


HISTORY_EDIT = """
from dataclasses import replace

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def answer(messages, info):
    last = messages[-1]
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("fetch", {{}}, tool_call_id=f"c{{len(messages)}}")])


def trim_old_tool_output(messages):
    # A common cost-saving processor: tool returns older than the last turn are cut short. It rewrites history.
    keep = len(messages) - 4

    def trim(m):
        if not isinstance(m, ModelRequest):
            return m
        parts = [replace(p, content=str(p.content)[:20] + " [trimmed]")
                 if isinstance(p, ToolReturnPart) and len(str(p.content)) > 40 else p for p in m.parts]
        return replace(m, parts=parts)

    return [trim(m) for m in messages[:keep]] + messages[keep:]


def make_agent():
    agent = Agent(FunctionModel(answer), capabilities=[{processors}])

    @agent.tool_plain
    def fetch() -> str:
        \"\"\"Fetch the log.\"\"\"
        return "log line " * 40

    return agent


@scenario("edit/history")
async def history(run: Run) -> int:
    agent = make_agent()
    messages = []
    for turn in range(4):
        messages = (await agent.run(f"turn {{turn}}", message_history=messages)).all_messages()
    return len(messages)
"""


@pytest.mark.parametrize(("processors", "broken"), [("ProcessHistory(trim_old_tool_output)", True), ("", False)])
def test_a_processor_that_rewrites_old_messages_breaks_the_prefix(
    processors: str, broken: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded here on the installed version: trimming old tool output re-sends the history edited."""
    from replay.recorder import record
    from replay.scenario import discover

    (tmp_path / "edit.py").write_text(HISTORY_EDIT.format(processors=processors))
    monkeypatch.chdir(tmp_path)
    (sc,) = discover([str(tmp_path / "edit.py")])
    c = record(sc)
    assert c.outcome.status == "ok", c.outcome
    found = [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]
    if not broken:
        assert not found
        return
    (v,) = found
    assert v.role == "main" and v.evidence["requests"] and v.evidence["uncached"] > 0
    assert "re-sent less of the previous request than it held" in v.message


CONCURRENT = """

async def conversation(agent, name, pause):
    import asyncio

    messages = []
    for turn in range(4):
        await asyncio.sleep(pause)
        messages = (await agent.run(f"{{name}} turn {{turn}}", message_history=messages)).all_messages()
    return len(messages)


@scenario("edit/concurrent")
async def concurrent(run: Run) -> int:
    import asyncio

    agent = make_agent()
    sizes = await asyncio.gather(conversation(agent, "a", 0.0), conversation(agent, "b", 0.001), conversation(agent, "c", 0.002))
    return sum(sizes)
"""


@pytest.mark.parametrize(("processors", "broken"), [("ProcessHistory(trim_old_tool_output)", True), ("", False)])
def test_concurrent_conversations_of_one_role_are_each_checked_against_their_own(
    processors: str, broken: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three conversations of one agent at once (``asyncio.gather``), their requests interleaved: each request
    continues its own conversation's previous one (its agent run's, or the run whose result its history is).
    Compared with whichever request of the role came just before, every request looked edited from the start."""
    from replay.recorder import record
    from replay.scenario import discover

    (tmp_path / "edit.py").write_text(HISTORY_EDIT.format(processors=processors) + CONCURRENT.format(processors=processors))
    monkeypatch.chdir(tmp_path)
    (sc,) = [s for s in discover([str(tmp_path / "edit.py")]) if s.id == "edit/concurrent"]
    c = record(sc)
    assert c.outcome.status == "ok", c.outcome
    assert len({ex.run for ex in c.exchanges}) == 12 and [ex.run for ex in c.exchanges] != sorted(ex.run for ex in c.exchanges)
    found = [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]
    if not broken:
        assert not found, found[0].message
        return
    (v,) = found
    firsts = {ex.index for ex in c.exchanges if c.runs[ex.run].history == []}
    assert not set(v.evidence["requests"]) & firsts  # a conversation's first request edits nothing
    assert len(v.evidence["requests"]) >= 3  # every conversation's trimmed history is found


def test_a_compaction_between_requests_is_not_a_broken_prefix() -> None:
    c = load(LONG_062)
    mains = [x for x in request_costs(c) if x.role == "main"]
    assert [x.compacted for x in mains] == [False, True, True]
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]


def test_diff_names_the_cacheable_prefix_per_request_and_the_tokens() -> None:
    d = diff(load(REMINDERS_062), load(REMINDERS_054), a_label="0.62.0", b_label="0.54.0")
    lines = diff_lines(d)
    assert "cacheable prefix at main[1]: 89 → 7 tokens" in [c.describe() for c in d.cache]
    a, b = d.tokens  # type: ignore[misc]
    assert a.cached > b.cached and a.input > b.input
    assert any(line.startswith(f"input tokens {a.input:,} → {b.input:,}") for line in lines)


def test_cost_uses_cached_input_price_for_the_prefix() -> None:
    d = diff(load(REMINDERS_062), load(REMINDERS_054))
    prices = prices_from({"*": {"input": 3.0, "cached-input": 0.3, "output": 15.0}}, None)
    d.price(prices)
    assert d.cost is not None
    a_costs = d.request_costs[0]
    expected = sum((x.tokens - x.cached) * 3.0 + x.cached * 0.3 + x.output * 15.0 for x in a_costs) / 1e6
    assert d.cost[0] == pytest.approx(expected)
    assert any(line.startswith("estimated cost $") for line in diff_lines(d))
    # No price for the model: no figure rather than a made-up one.
    d.cost = None
    d.price({"some-other-model": Price(input=1.0)})
    assert d.cost == (None, None)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("cheap", "must be a table"),
        ({"gpt": {"input": -1}}, "prices.gpt.input: Input should be greater than or equal to 0"),
        ({"gpt": {"input": 1, "bogus": 2}}, "prices.gpt.bogus: Extra inputs are not permitted"),
    ],
)
def test_a_bad_price_table_is_one_line_naming_the_file(table: object, problem: str) -> None:
    with pytest.raises(ReplayUsageError) as err:
        prices_from(table, Path("pyproject.toml"))
    assert str(err.value).startswith("pyproject.toml: [tool.replay] prices")
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_a_configured_tokenizer_sizes_the_cache_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replay import _pipeline

    (tmp_path / "words.py").write_text("def count(text: str) -> int:\n    return len(text.split())\n")
    (tmp_path / "pyproject.toml").write_text('[tool.replay]\ntokenizer = "words:count"\n')
    monkeypatch.chdir(tmp_path)
    tok = _pipeline.tokenizer()
    assert tok is not None and tok("a b c") == 3
    c = load(REMINDERS_062)
    by_words, by_chars = request_costs(c, tok), request_costs(c)
    assert [x.tokens for x in by_words] != [x.tokens for x in by_chars]
    mains = [x for x in by_words if x.role == "main"]
    assert len(mains) == 21 and all(x.cached == prev.tokens for prev, x in zip(mains, mains[1:]))


@pytest.mark.parametrize(
    ("spec", "problem"),
    [("words", 'must be "module:function"'), ("nosuchmodule_x:count", "cannot import 'nosuchmodule_x:count'")],
)
def test_a_bad_tokenizer_is_one_line_naming_the_file(spec: str, problem: str) -> None:
    from replay.wire.cache import tokenizer_from

    with pytest.raises(ReplayUsageError) as err:
        tokenizer_from(spec, Path("pyproject.toml"))
    assert str(err.value).startswith("pyproject.toml: [tool.replay] tokenizer") and problem in str(err.value)


def _structured_turns(later_settings: dict[str, object] | None = None) -> Cassette:
    """Two runs of one conversation: each an ``auto`` request, then the run's kept ``tool`` (slim 2.58+)."""
    b = CassetteBuilder(Header(scenario_id="unit/turns"))
    auto = b.blob({"function_tools": [{"name": "weather"}], "output_tools": [{"name": "final_result"}],
                   "output_mode": "auto", "allow_text_output": True})
    kept = b.blob({"function_tools": [{"name": "weather"}], "output_tools": [{"name": "final_result"}],
                   "output_mode": "tool", "allow_text_output": False})
    history: list[dict[str, object]] = []
    for turn, (run, params) in enumerate([(0, auto), (0, kept), (1, auto), (1, kept)]):
        history = history + [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"prompt {turn} " * 20}]}]
        settings = b.blob(later_settings) if later_settings is not None and turn == 2 else None
        b.cassette.exchanges.append(Exchange(seq=turn, role="main", index=turn, kind="request", model_name="function:m:",
                                             messages=b.messages(history), parameters=params, settings=settings, run=run))
        history = history + [{"kind": "response", "parts": [{"part_kind": "text", "content": f"answer {turn}"}]}]
    b.cassette.header.roles = {"main": "scenarios.x"}
    return b.cassette


def test_a_runs_kept_output_mode_and_the_next_runs_auto_share_the_prefix() -> None:
    """Slim 2.58+ states a structured run's kept mode (``tool``, ``allow_text_output=False``) on its later
    requests and ``auto`` on the next run's first; the model resolves that ``auto`` to the same, so the tools
    sent did not move: the whole previous request is cacheable, no ``cache_prefix_broken``."""
    c = _structured_turns()
    mains = request_costs(c)
    assert all(x.cached == prev.tokens for prev, x in zip(mains, mains[1:]))
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]
    thinking = _structured_turns({"thinking": "high"})  # an ``auto`` that thinks may resolve to another mode
    assert [x.cached for x in request_costs(thinking)][2] == 0


def _three_turns(name: str, params_of: Callable[[int], dict[str, object]], edit_first: bool) -> Cassette:
    """Three turns of one conversation, each sent with ``params_of(turn)``; ``edit_first`` rewrites the first prompt
    in place at the third."""
    b = CassetteBuilder(Header(scenario_id=f"unit/{name}"))
    history: list[dict[str, object]] = []
    for turn in range(3):
        if edit_first and turn == 2:
            history[0] = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "prompt 0 (trimmed)"}]}
        history = history + [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"prompt {turn} " * 20}]}]
        b.cassette.exchanges.append(Exchange(seq=turn, role="main", index=turn, kind="request", model_name="function:m:",
                                             messages=b.messages(history), parameters=b.blob(params_of(turn)), run=turn))
        history = history + [{"kind": "response", "parts": [{"part_kind": "text", "content": f"answer {turn}"}]}]
    b.cassette.header.roles = {"main": "scenarios.x"}
    return b.cassette


def _instructed_turns(ids: list[object], edit_first: bool = False) -> Cassette:
    """Instructions that grow each turn (the facts learned so far), contributed by ``ids`` (``None``: the agent's
    own ``@agent.instructions``)."""
    def params(turn: int) -> dict[str, object]:
        facts = "Facts learned so far:\n" + "\n".join(f"fact {k}: " + "service depends on component " * 8 for k in range(turn))
        return {"function_tools": [], "output_mode": "text", "allow_text_output": True,
                "instruction_parts": [{"content": facts, "dynamic": True, "id": i, "part_kind": "instruction"} for i in ids]}

    return _three_turns("instructed", params, edit_first)


def test_the_agents_own_instructions_changing_is_no_broken_prefix() -> None:
    """Instructions that grow each turn (``@agent.instructions`` listing what was learned) lead every prompt, so
    nothing is cached: but it is the scenario's edit of its own agent, with the history re-sent as it was, and it
    read as the harness editing messages in place (``cache_prefix_broken`` on every uncompacted turn)."""
    c = _instructed_turns([None])
    assert [x.cached for x in request_costs(c)][1:] == [0, 0]  # the figures stay what the provider caches
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]
    # controls: a capability's instructions changing (its id as their source) is still the harness's bust, and a
    # history edited in place is one whatever the instructions did
    for case in (_instructed_turns([{"source": {"id": "memory"}}]), _instructed_turns([None], edit_first=True)):
        (v,) = [v for v in run_checks(case) if v.invariant == "cache_prefix_broken"]
        assert v.evidence["requests"][-1] == 2, v.evidence


def _gated_turns(capability_id: object, edit_first: bool = False) -> Cassette:
    """A ``checkout`` tool (from ``capability_id``, ``None``: the agent's own) offered from the third turn on."""
    def params(turn: int) -> dict[str, object]:
        tools = [{"name": "add", "toolset_id": "<agent>", "capability_id": None}]
        if turn == 2:
            tools.append({"name": "checkout", "toolset_id": "<agent>" if capability_id is None else "shop", "capability_id": capability_id})
        return {"function_tools": tools, "output_mode": "text", "allow_text_output": True}

    return _three_turns("gated", params, edit_first)


def test_the_agents_own_tool_offered_from_some_turn_on_is_no_broken_prefix() -> None:
    """A ``prepare`` that offers the agent's own checkout tool once the cart has items: the tools lead the prompt,
    nothing is cached at that turn, but the scenario changed its own agent and the history was re-sent as it was."""
    c = _gated_turns(None)
    assert [x.cached for x in request_costs(c)][2] == 0
    assert not [v for v in run_checks(c) if v.invariant == "cache_prefix_broken"]
    # controls: a capability's tool appearing is still the harness's bust, and so is a history edited in place
    for case in (_gated_turns("shop"), _gated_turns(None, edit_first=True)):
        (v,) = [v for v in run_checks(case) if v.invariant == "cache_prefix_broken"]
        assert v.evidence["requests"] == [2], v.evidence

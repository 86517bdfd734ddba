"""Concurrent conversations under one role: which runs chain, which roles interleave, how they are listed."""

from __future__ import annotations

from replay._conversations import Predecessors, in_conversations, interleaved_roles, turns
from replay.cassette import AgentRunRecord, Cassette, CassetteBuilder, Exchange, Header
from replay.differ import diff


def _cassette(order: list[tuple[str, int]], answers: dict[str, str] | None = None, sequential: bool = False) -> Cassette:
    """Conversations a, b of role main, two turns each (a run per turn, the second given the first's result),
    each turn one request; ``order`` lists (conversation, turn) in the order the requests were made. The runs
    start turn by turn, a before b (both conversations at once), or (``sequential``) each just before its request."""
    b = CassetteBuilder(Header(scenario_id="unit/c", roles={"main": "scenarios.x"}))
    c = b.cassette
    prompt = {name: b.message({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"{name} 0"}]})
              for name in "ab"}
    reply = {name: b.message({"kind": "response", "parts": [{"part_kind": "text", "content": (answers or {}).get(name, f"{name} ok")}]})
             for name in "ab"}
    follow = {name: b.message({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"{name} 1"}]})
              for name in "ab"}
    runs: dict[tuple[str, int], int] = {}
    for name, turn in order if sequential else sorted(order, key=lambda x: (x[1], x[0])):
        history = [] if turn == 0 else [prompt[name], reply[name]]
        result = [prompt[name], reply[name]] if turn == 0 else [prompt[name], reply[name], follow[name], reply[name]]
        runs[(name, turn)] = len(c.runs)
        c.runs.append(AgentRunRecord(role="main", history=history, result=result))
    for seq, (name, turn) in enumerate(order):
        sent = [prompt[name]] if turn == 0 else [prompt[name], reply[name], follow[name]]
        c.exchanges.append(Exchange(seq=seq, role="main", index=seq, kind="request", messages=sent,
                                    response=reply[name], run=runs[(name, turn)]))
    return c


def test_a_run_given_another_runs_result_continues_its_conversation() -> None:
    c = _cassette([("a", 0), ("b", 0), ("a", 1), ("b", 1)])
    assert turns(c.runs) == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_conversations_that_alternate_or_overlap_interleave() -> None:
    assert interleaved_roles(_cassette([("a", 0), ("a", 1), ("b", 0), ("b", 1)], sequential=True)) == set()
    # alternating conversations, even one run after the other: listed by conversation either way
    assert interleaved_roles(_cassette([("a", 0), ("b", 0), ("a", 1), ("b", 1)], sequential=True)) == {"main"}
    assert interleaved_roles(_cassette([("a", 0), ("b", 0), ("a", 1), ("b", 1)])) == {"main"}
    # b's run started before a's second, but asked first: one request each, answered out of order
    assert interleaved_roles(_cassette([("a", 0), ("a", 1), ("b", 0), ("b", 1)])) == {"main"}


def test_listed_conversation_by_conversation() -> None:
    c = _cassette([("b", 0), ("a", 0), ("b", 1), ("a", 1)])
    got = [(ex.seq, ex.run) for ex in in_conversations(c.exchanges, turns(c.runs))]
    assert [c.runs[run].history == [] for _, run in got] == [True, False, True, False]
    assert [seq for seq, _ in got] == [1, 3, 0, 2]  # a's conversation (its first run started first), then b's


def test_each_request_continues_its_own_conversation() -> None:
    c = _cassette([("a", 0), ("b", 0), ("b", 1), ("a", 1)])
    p, last, found = Predecessors(c), None, []
    for ex in c.exchanges:
        prev, last = p.previous(ex, last), ex
        found.append(prev.seq if prev is not None else None)
    assert found == [None, 0, 1, 0]  # b's turn 1 continues b's turn 0, a's turn 1 continues a's (not b's)


def test_the_same_conversations_in_another_interleaving_are_the_same() -> None:
    one = _cassette([("a", 0), ("b", 0), ("a", 1), ("b", 1)])
    other = _cassette([("b", 0), ("a", 0), ("b", 1), ("a", 1)])
    assert not diff(one, other).changed
    changed = diff(one, _cassette([("b", 0), ("a", 0), ("b", 1), ("a", 1)], answers={"b": "b changed"}))
    assert changed.changed
    assert {r.label for r in changed.requests} == {"main[1]", "main[3]"}  # b's two requests, by a's ordinals


def test_a_handoff_to_another_role_starts_its_conversation_live_as_in_the_cassette() -> None:
    """A planner's result handed to a writer (``writer.run(..., message_history=planner_result.all_messages())``),
    four topics at once: the recording session counted the writer's run as the planner's next turn, the cassette
    (``links``) as a writer conversation of its own, so a replay looked each writer call up under another
    conversation than the recording's and answered them crossed (``changed`` on every replay of an unchanged
    harness: ``essay on tls → essay on bgp``). Live and recorded conversations must be the same."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from replay.recorder import Session, session_scope
    from replay.replayer import CassetteSource

    delays = {"tls": 0.012, "dns": 0.0, "bgp": 0.008, "ntp": 0.004}

    async def plan(messages: object, info: object) -> ModelResponse:
        topic = str(messages[-1].parts[-1].content)  # type: ignore[index]
        await asyncio.sleep(delays[topic])
        return ModelResponse(parts=[TextPart(f"plan for {topic}")])

    async def write(messages: object, info: object) -> ModelResponse:
        topic = str(messages[0].parts[-1].content)  # type: ignore[index]
        await asyncio.sleep(delays.get(topic, 0.002) / 2)
        return ModelResponse(parts=[TextPart(f"essay on {topic} after {len(messages)} messages")])  # type: ignore[arg-type]

    async def scenario() -> list[str]:
        planner, writer = Agent(FunctionModel(plan)), Agent(FunctionModel(write), name="writer")

        async def one(topic: str) -> str:
            r1 = await planner.run(topic)
            r2 = await writer.run("write it", message_history=r1.all_messages())
            return (await writer.run("shorter", message_history=r2.all_messages())).output

        return list(await asyncio.gather(*(one(t) for t in delays), writer.run("standalone")))  # type: ignore[arg-type]

    recording = Session()
    with session_scope(recording):
        asyncio.run(scenario())
    assert recording.turns == turns(recording.cassette.runs)
    replaying = Session(source=CassetteSource(recording.cassette))
    with session_scope(replaying):
        asyncio.run(scenario())
    assert replaying.turns == turns(recording.cassette.runs)
    assert not diff(recording.cassette, replaying.cassette).changed


def test_a_handoff_is_no_prompt_cache_prefix_broken() -> None:
    """A writer handed the planner's result starts its own conversation with that history: compared with the
    writer's previous request (another piece of writing) it read as ``cache_prefix_broken`` on every handoff."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from replay.invariants import evaluate
    from replay.recorder import Session, session_scope

    def answer(messages: object, info: object) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"answer {len(messages)} " + "words " * 20)])  # type: ignore[arg-type]

    async def scenario() -> None:
        planner, writer = Agent(FunctionModel(answer)), Agent(FunctionModel(answer), name="writer")
        await writer.run("a standalone piece about ships " * 3)
        for topic in ("tls", "dns"):
            plan = await planner.run(f"plan {topic}")
            await writer.run("write it", message_history=plan.all_messages())

    session = Session()
    with session_scope(session):
        asyncio.run(scenario())
    c = session.cassette
    assert [v.invariant for v in evaluate(c, ["cache_prefix_broken"]).violations] == []
    handed = [ex for ex in c.exchanges if ex.role == "writer"][1:]
    predecessors = Predecessors(c)
    assert [predecessors.previous(ex, None) for ex in handed] == [None, None]

"""Wire level: real provider models record their HTTP exchanges, and replay builds them again for real.

Every provider here is a real pydantic-ai model (openai / anthropic SDK, httpx2) talking to
``FakeOpenAI`` on 127.0.0.1 while recording; replays run with the server stopped, no key,
and the network guard on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from fake_openai import FakeOpenAI, HttpError, Reply

from replay.cassette import cassette_path, load
from replay.wire.store import request_body

pytest.importorskip("pydantic_ai.models.openai", reason="needs pydantic-ai-slim[openai]")

UNROUTABLE = "http://198.51.100.7:9"

SCENARIOS = '''
"""Provider models over HTTP: OpenAI Chat (JSON, SSE, tools), OpenAI Responses, Anthropic Messages (SSE, tools), Groq, Mistral."""
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


def weather(agent):
    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny, 21C in {city}"
    return agent


def openai_provider():
    return OpenAIProvider(base_url=os.environ["FAKE_BASE_URL"] + "/v1", api_key=os.environ["OPENAI_API_KEY"])


@scenario("wire/chat")
async def chat(run: Run) -> str:
    # The system-prompt role comes from the model profile: what a slim upgrade can change under you.
    profile = OpenAIModelProfile(openai_system_prompt_role=os.environ.get("SYSTEM_ROLE", "system"))
    agent = weather(Agent(OpenAIChatModel("gpt-4o-mini", provider=openai_provider(), profile=profile),
                          system_prompt="Be brief."))
    return (await agent.run("Weather in Paris?")).output


@scenario("wire/chat_stream")
async def chat_stream(run: Run) -> str:
    agent = weather(Agent(OpenAIChatModel("gpt-4o-mini", provider=openai_provider()), instructions="Be brief."))
    async with agent.run_stream("Weather in Rome, streamed.") as s:
        return await s.get_output()


@scenario("wire/responses")
async def responses(run: Run) -> str:
    agent = weather(Agent(OpenAIResponsesModel("gpt-4o-mini", provider=openai_provider()), instructions="Be brief."))
    return (await agent.run("Weather in Oslo?")).output


@scenario("wire/groq")
async def groq(run: Run) -> str:
    # The groq SDK sends through `httpx`, the others through `httpx2`: both clients are captured.
    from pydantic_ai.models.groq import GroqModel
    from pydantic_ai.providers.groq import GroqProvider

    provider = GroqProvider(base_url=os.environ["FAKE_BASE_URL"], api_key=os.environ["GROQ_API_KEY"])
    agent = weather(Agent(GroqModel("llama-3.3-70b-versatile", provider=provider), instructions="Be brief."))
    return (await agent.run("Weather in Quito?")).output


@scenario("wire/mistral")
async def mistral(run: Run) -> str:
    from pydantic_ai.models.mistral import MistralModel
    from pydantic_ai.providers.mistral import MistralProvider

    provider = MistralProvider(base_url=os.environ["FAKE_BASE_URL"], api_key=os.environ["MISTRAL_API_KEY"])
    agent = weather(Agent(MistralModel("mistral-small-latest", provider=provider), instructions="Be brief."))
    return (await agent.run("Weather in Nice?")).output


@scenario("wire/reasoning")
async def reasoning(run: Run) -> str:
    # pydantic-ai's unified `thinking` setting: each slim maps it to the provider's reasoning effort.
    agent = Agent(OpenAIChatModel("o3-mini", provider=openai_provider()), instructions="Be brief.",
                  model_settings={"thinking": "minimal"})
    return (await agent.run("Two plus two?")).output


@scenario("wire/server_error")
async def server_error(run: Run) -> str:
    # The SDK's default retries: a 500 that says `x-should-retry: false` is not retried. A replay that
    # dropped the header retried, found no second answer in the cassette and diverged.
    from pydantic_ai.exceptions import ModelHTTPError

    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=openai_provider()))
    try:
        return (await agent.run("Hello?")).output
    except ModelHTTPError as exc:
        return f"handled {exc.status_code}"


@scenario("wire/anthropic")
async def anthropic(run: Run) -> str:
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(base_url=os.environ["FAKE_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"])
    settings = AnthropicModelSettings(anthropic_cache_instructions=True)
    agent = weather(Agent(AnthropicModel("claude-fake", provider=provider), instructions="Be brief.",
                          model_settings=settings))
    async with agent.run_stream("Weather in Lima?") as s:
        return await s.get_output()
'''

SCRIPTS: dict[str, list[Reply | str]] = {
    "wire/chat": [Reply.tool_call("get_weather", {"city": "Paris"}, id="call_p1"), "Sunny in Paris."],
    "wire/chat_stream": [Reply.tool_call("get_weather", {"city": "Rome"}, id="call_r1"), "Rome: sunny."],
    "wire/responses": [Reply.tool_call("get_weather", {"city": "Oslo"}, id="call_o1"), "Oslo: sunny."],
    "wire/anthropic": [Reply.tool_call("get_weather", {"city": "Lima"}, id="toolu_l1"), "Lima: sunny."],
    "wire/reasoning": ["Four."],
    "wire/server_error": [],  # the script is empty: HTTP 500, x-should-retry: false
    "wire/groq": [Reply.tool_call("get_weather", {"city": "Quito"}, id="call_q1"), "Quito: sunny."],
    "wire/mistral": [Reply.tool_call("get_weather", {"city": "Nice"}, id="call_n1"), "Nice: sunny."],
}


KEYS = {
    "OPENAI_API_KEY": "sk-proj-wiretest4f7c1d9e2b8a6035",
    "ANTHROPIC_API_KEY": "sk-ant-api03-wiretest4f7c1d9e2b8a6035",
    "GROQ_API_KEY": "gsk_wiretest4f7c1d9e2b8a6035wiretest4f7c1d9e2b8a60",
    "MISTRAL_API_KEY": "wiretest4f7c1d9e2b8a6035",
}


@pytest.fixture(scope="module")
def wire_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, FakeOpenAI]]:
    """Every wire scenario recorded once per module (and worker) against its FakeOpenAI, in-process.

    The tests below each get a copy (``recorded``): several edit their cassettes.
    """
    import contextlib
    import io
    import sys

    from replay.cli import main

    for sdk in ("anthropic", "groq", "mistralai"):
        pytest.importorskip(sdk, reason=f"needs the {sdk} SDK (pydantic-ai-slim's extra; the dev extra installs it)")
    root = tmp_path_factory.mktemp("wire-recording")
    (root / "pyproject.toml").write_text("[tool.replay]\n")
    (root / "scenarios").mkdir()
    (root / "scenarios" / "wire.py").write_text(SCENARIOS)
    servers = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name, value in KEYS.items():
            mp.setenv(name, value)
        for sid, turns in SCRIPTS.items():
            with FakeOpenAI(turns) as srv:
                mp.setenv("FAKE_BASE_URL", srv.root_url)
                mp.setattr(sys, "argv", ["replay", "record", sid])
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
                    main()
                assert done.value.code in (0, None) and "outcome ok" in out.getvalue(), out.getvalue() + err.getvalue()
                assert srv.remaining == 0
            servers[sid] = srv
    return root, servers


@pytest.fixture
def recorded(
    wire_recording: tuple[Path, dict[str, FakeOpenAI]], project: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, FakeOpenAI]:
    """This test's copy of the wire recordings; the servers are stopped, no key is set, the URL unroutable."""
    import shutil

    root, servers = wire_recording
    (project / "scenarios" / "wire.py").write_text(SCENARIOS)
    shutil.copytree(root / "cassettes", project / "cassettes")
    for var in KEYS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FAKE_BASE_URL", UNROUTABLE)
    return servers


def test_each_call_keeps_the_exact_body_the_provider_received(recorded: dict[str, FakeOpenAI], project: Path) -> None:
    for sid, srv in recorded.items():
        c = load(cassette_path(project / "cassettes", sid))
        sent = [request_body(c, w) for ex in c.exchanges for w in ex.wire or ()]
        assert sent == srv.requests, sid
        for ex in c.exchanges:
            (w,) = ex.wire or ()
            assert w.status == (500 if sid == "wire/server_error" else 200) and w.method == "POST"
            assert "authorization" not in w.request_headers and "x-api-key" not in w.request_headers
            assert w.response, "the raw answer is kept"
    stream = load(cassette_path(project / "cassettes", "wire/chat_stream")).exchanges[0].wire
    assert stream and stream[0].stream and stream[0].response.startswith("data: ")
    (failed,) = load(cassette_path(project / "cassettes", "wire/server_error")).exchanges[0].wire or ()
    assert failed.response_headers.get("x-should-retry") == "false"  # what the SDK decides retries by
    anthropic = load(cassette_path(project / "cassettes", "wire/anthropic"))
    first = request_body(anthropic, anthropic.exchanges[0].wire[0])  # type: ignore[index]
    assert "cache_control" in json.dumps(first["system"]), first["system"]
    assert anthropic.exchanges[0].wire[0].request_headers.get("anthropic-version")  # type: ignore[index]


def test_wire_replay_is_same_with_no_server_no_key(recorded: dict[str, FakeOpenAI], cli: Callable[..., Any]) -> None:
    before = {sid: len(srv.requests) for sid, srv in recorded.items()}
    res = cli("run")
    assert res.code == 0, res.out + res.err
    assert "8 scenarios: 8 same" in res.out, res.out
    assert {sid: len(srv.requests) for sid, srv in recorded.items()} == before


def test_replay_builds_the_request_with_the_installed_provider_mapping(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the wire level sees a change of the system-prompt role: the messages are the same."""
    monkeypatch.setenv("SYSTEM_ROLE", "developer")
    res = cli("run", "wire/chat", "--out", project / "results")
    assert res.code == 1, res.out + res.err
    assert "main[0] wire: messages[0].role: system → developer" in res.out, res.out
    assert "main[1] wire: messages[0].role: system → developer" in res.out, res.out
    replayed = load(cassette_path(project / "results", "wire/chat"))
    assert request_body(replayed, replayed.exchanges[0].wire[0])["messages"][0]["role"] == "developer"  # type: ignore[index]
    as_json = json.loads(cli("run", "wire/chat", "-f", "json").out)
    wire = as_json["scenarios"]["wire/chat"]["wire"]
    assert {"role": "main", "index": 0, "path": "messages[0].role", "kind": "changed",
            "before": "system", "after": "developer"} in wire
    # At the model boundary the provider mapping never runs: the same replay looks unchanged.
    blind = cli("run", "wire/chat", "--level", "model")
    assert blind.code == 0, blind.out


def test_http_requests_that_do_not_match_the_recording_are_a_divergence(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path
) -> None:
    from replay.cassette import save

    path = cassette_path(project / "cassettes", "wire/chat")
    c = load(path)
    c.exchanges[0].wire = [*(c.exchanges[0].wire or []), *(c.exchanges[0].wire or [])]  # recorded: a retry
    save(c, path)
    res = cli("run", "wire/chat")
    assert res.code == 1, res.out + res.err
    assert "main[0]: made 1 HTTP request where the recording has 2" in res.out, res.out


def _rate_limited(first: Any, retry_after: str) -> Any:
    """``first`` as a 429 the SDK was told to wait ``retry_after`` seconds after."""
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    return first.model_copy(update={
        "status": 429, "response": json.dumps(error), "stream": False,
        "response_headers": {"content-type": "application/json", "retry-after": retry_after},
    })


def test_a_recorded_retry_is_replayed_without_its_wait(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path
) -> None:
    """The SDK slept a recorded ``retry-after: 30`` before asking again on every replay; whether it asks
    again is the behaviour, how long it waited is not: the served answer says 1 ms."""
    from replay.cassette import save

    path = cassette_path(project / "cassettes", "wire/chat")
    c = load(path)
    (ok,) = c.exchanges[0].wire or ()
    c.exchanges[0].wire = [_rate_limited(ok, "30"), ok]  # recorded: a 429, the SDK's retry answered
    save(c, path)
    res = cli("run", "wire/chat", "--timeout", "10", "--out", project / "results")
    assert res.code == 0, res.out + res.err
    replayed = load(cassette_path(project / "results", "wire/chat"))
    assert [w.status for w in replayed.exchanges[0].wire or ()] == [429, 200]
    # What the replay captured is the answer as recorded, not the one served.
    assert (replayed.exchanges[0].wire or ())[0].response_headers["retry-after"] == "30"


def test_an_answer_the_sdk_gave_up_on_keeps_its_wait(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last answer of a call is served as recorded: the openai SDK refuses to retry past 120 s, and
    a shortened wait would have made the replay ask again (a divergence the harness did not cause)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    with FakeOpenAI([HttpError(429, {"retry-after": "3600"}, "Rate limit reached")]) as srv:
        monkeypatch.setenv("FAKE_BASE_URL", srv.root_url)
        res = cli("record", "--force", "wire/server_error")
        assert res.code == 0 and "outcome ok" in res.out, res.out + res.err
        assert len(srv.requests) == 1, "the SDK gave up at once"
    monkeypatch.setenv("FAKE_BASE_URL", UNROUTABLE)
    c = load(cassette_path(project / "cassettes", "wire/server_error"))
    assert c.outcome.output == "handled 429"
    res = cli("run", "wire/server_error", "--timeout", "10")
    assert res.code == 0, res.out + res.err


def test_cassettes_without_wire_records_replay_at_the_model_level(
    recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path
) -> None:
    """Recordings made before wire capture (or of in-process models) keep replaying as before."""
    from replay.cassette import save

    path = cassette_path(project / "cassettes", "wire/chat")
    c = load(path)
    for ex in c.exchanges:
        ex.wire = None
    save(c, path)
    res = cli("run", "wire/chat")
    assert res.code == 0, res.out + res.err


def test_wire_storage_grows_linearly(project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request re-sends the history; bodies are interned element by element, so size stays linear."""
    (project / "scenarios" / "long.py").write_text(LONG)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-wiretest4f7c1d9e2b8a6035")
    sizes = {}
    for turns in (20, 40):
        monkeypatch.setenv("TURNS", str(turns))
        with FakeOpenAI([f"answer {i} " + "lorem ipsum " * 30 for i in range(turns)]) as srv:
            monkeypatch.setenv("FAKE_BASE_URL", srv.root_url)
            assert cli("record", "--force", "wire/long").code == 0
        sizes[turns] = cassette_path(project / "cassettes", "wire/long").stat().st_size
    assert sizes[40] / sizes[20] < 2.3, sizes


LONG = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


@scenario("wire/long")
async def long(run: Run) -> int:
    provider = OpenAIProvider(base_url=os.environ["FAKE_BASE_URL"] + "/v1", api_key=os.environ["OPENAI_API_KEY"])
    agent = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider), instructions="Be brief.")
    history = []
    for turn in range(int(os.environ["TURNS"])):
        history = (await agent.run(f"turn {turn}", message_history=history)).all_messages()
    return len(history)
'''


@pytest.mark.slow
def test_matrix_shows_what_an_older_slim_puts_on_the_wire(
    recorded: dict[str, FakeOpenAI], project: Path, tmp_path: Path, cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded on 0.62.0 (slim 2.62 sends reasoning_effort 'low' for o3-mini's 'minimal'), replayed on 0.54.0.

    No server, no key, no network: the 0.54.0 environment's own OpenAI mapping builds the
    request and the cassette answers it. The command runs in-process; the versions' replay
    processes (which inherit its environment) are what is checked.
    """
    import os

    body = request_body(c := load(cassette_path(project / "cassettes", "wire/reasoning")), c.exchanges[0].wire[0])  # type: ignore[index]
    assert body["reasoning_effort"] == "low"
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("REPLAY_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("FAKE_BASE_URL", UNROUTABLE)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    proc = cli("matrix", "--harness", "0.54.0", "--harness", "0.62.0", "wire/reasoning",
               "--with", "pydantic-ai-slim[openai]", "--format", "json", cwd=project)
    doc = json.loads(proc.out or "null") or {}
    cells = doc.get("scenarios", {}).get("wire/reasoning", {})
    assert cells.get("0.62.0", {}).get("status") == "same", proc.out + proc.err
    old = cells.get("0.54.0", {})
    assert old.get("status") == "changed", proc.out + proc.err
    assert "main[0] wire: reasoning_effort: low → minimal" in old.get("wire", []), old


def test_anthropic_cache_breakpoints_are_counted_and_compared(
    recorded: dict[str, FakeOpenAI], project: Path, cli: Callable[..., Any]
) -> None:
    """Where `cache_control` lands is part of what a version sends: a breakpoint fewer is reported."""
    from replay.cassette import save
    from replay.wire.cache import request_costs

    path = cassette_path(project / "cassettes", "wire/anthropic")
    c = load(path)
    assert [x.breakpoints for x in request_costs(c)] == [1, 1]  # anthropic_cache_instructions: the system block
    # As if the recording version had put no breakpoint on the first request's system prompt.
    record = c.exchanges[0].wire[0]  # type: ignore[index]
    (block,) = c.blobs[record.body_lists["system"][0]]  # list elements are stored wrapped: [element]
    c.blobs.append([{k: v for k, v in block.items() if k != "cache_control"}])
    record.body_lists["system"] = [len(c.blobs) - 1]
    save(c, path)
    res = cli("run", "wire/anthropic")
    assert "cache breakpoints at main[0]: 0 → 1" in res.out, res.out
    assert "main[0] wire: + system[0].cache_control" in res.out, res.out


def test_show_prints_what_the_wire_comparison_compares(recorded: dict[str, FakeOpenAI], cli: Callable[..., Any], project: Path) -> None:
    """``show --normalized`` is the git textconv: a cassette whose only change is on the wire (a setting
    slim maps to a body field) must not read as identical there while ``replay diff`` says CHANGED."""
    path = cassette_path(project / "cassettes", "wire/reasoning")
    text = cli("show", "--normalized", path).out
    assert "  wire[0] POST /v1/chat/completions:" in text and "reasoning_effort:" in text, text
    doc = json.loads(cli("show", "--format", "json", path).out)
    (w,) = doc["requests"][0]["wire"]
    assert w["body"] == recorded["wire/reasoning"].requests[0] and w["status"] == 200 and w["response"]
    plain = cli("show", "--normalized", cassette_path(ROOT / "cassettes", "coverage/tool_call")).out
    assert "wire[" not in plain  # in-process models have no wire


FLAKY_SCENARIOS = '''
import asyncio
import os

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from replay import Run, scenario


def _model(retries: int) -> OpenAIChatModel:
    client = AsyncOpenAI(base_url=os.environ["FLAKY_URL"], api_key="sk-dummy", max_retries=retries)
    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))


@scenario("flaky/dropped_then_retried")
async def dropped_then_retried(run: Run) -> str:
    return (await Agent(_model(2)).run("hi")).output


@scenario("flaky/cut_mid_stream")
async def cut_mid_stream(run: Run) -> str:
    got: list[str] = []
    try:
        async with Agent(_model(0)).run_stream("hello") as result:
            async for text in result.stream_text(delta=True, debounce_by=None):
                got.append(text)
    except Exception as exc:
        run.observe("error", type(exc).__name__)
    run.observe("got", got)
    return "".join(got)
'''


class _Flaky:
    """An OpenAI-compatible server that closes its first connection without answering, then answers; a
    streamed answer it cuts after two chunks (the transport failures a provider's network has)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake, state = FakeOpenAI(), {"n": 0}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                import socket

                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                state["n"] += 1
                if state["n"] == 1:  # dropped: no answer at all
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if not body.get("stream"):
                    data = json.dumps(fake.completion(state["n"], body["model"], Reply.text("fine"))).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                chunks = list(fake.chunks(state["n"], body["model"], Reply.text("one two three four five six"), False))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for c in chunks[:2]:
                    d = f"data: {json.dumps(c)}\n\n".encode()
                    self.wfile.write(b"%x\r\n" % len(d) + d + b"\r\n")
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_transport_failure_is_replayed_as_one(project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A dropped connection (the SDK retried it) was kept as a 200 with an empty body, so the replay failed with
    "expected JSON data"; a stream cut mid-answer was served whole, so the replay did not raise. Both are the
    network's behaviour in the recording: the replay fails where it failed."""
    (project / "scenarios" / "flaky.py").write_text(FLAKY_SCENARIOS)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    server = _Flaky()
    try:
        monkeypatch.setenv("FLAKY_URL", server.url)
        assert cli("record", "flaky/dropped_then_retried").code == 0
        assert cli("record", "flaky/cut_mid_stream").code == 0
    finally:
        server.close()
    dropped = load(project / "cassettes" / "flaky" / "dropped_then_retried.cassette")
    (first, second) = dropped.exchanges[0].wire
    assert first.status == 0 and first.response.startswith(("RemoteProtocolError: ", "ReadError: ", "ConnectError: ")), first
    assert second.status == 200 and dropped.outcome.output == "fine"
    cut = load(project / "cassettes" / "flaky" / "cut_mid_stream.cassette")
    assert {o.name: o.value for o in cut.observations}["got"], "the two chunks were read"
    r = cli("run", "--format", "json")  # the server is gone: only the cassette answers
    doc = json.loads(r.out)
    assert r.code == 0 and {s["status"] for s in doc["scenarios"].values()} == {"same"}, r.out

"""Secrets must never reach a cassette file.

The fake secrets are assembled at run time from a seeded RNG so that this file holds
no literal credential-shaped strings for secret scanners to flag.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import random
import re
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_shapes import leaks

from replay.scrub import Scrubber, ScrubConfig

_rng = random.Random(20240611)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(n: int, alphabet: str = ALNUM) -> str:
    """Random body that always contains a digit and a letter, like real keys do."""
    letters = [c for c in alphabet if c.isalpha()] or list(alphabet)
    body = [_rng.choice(alphabet) for _ in range(n - 2)] + [_rng.choice(string.digits), _rng.choice(letters)]
    _rng.shuffle(body)
    return "".join(body)


def b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def pem() -> str:
    lines = "\n".join(rand(64, B64) for _ in range(6))
    kind = "RSA " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{lines}\n{rand(20, B64)}==\n-----END {kind}-----"


def same(s: str) -> str:
    return s


ENV_SECRET = rand(28, ALNUM + "!@#%")
KEYED_SECRET = rand(26)  # no recognisable shape: only the key name gives it away
KEYED_SECRET_2 = rand(30)

# (name, secret, how it is carried in free text)
CASES: list[tuple[str, str, Callable[[str], str]]] = [
    ("openai-classic", "sk-" + rand(48), same),
    ("openai-project", "sk-" + "proj-" + rand(156, URLSAFE), same),
    ("anthropic", "sk-" + "ant-api03-" + rand(93, URLSAFE) + "AA", same),
    ("google", "AI" + "za" + "Sy" + rand(33, URLSAFE), same),
    ("aws-access-key", "AK" + "IA" + rand(16, UPPER_DIGITS), same),
    ("aws-secret", rand(40, B64), lambda s: f"aws_secret_access_key = {s}"),
    ("github-classic", "gh" + "p_" + rand(36), same),
    ("github-oauth", "gh" + "o_" + rand(36), same),
    ("github-server", "gh" + "s_" + rand(36), same),
    ("github-fine-grained", "github" + "_pat_" + rand(22) + "_" + rand(59), same),
    ("slack-bot", "xo" + "xb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24), same),
    ("slack-user", "xo" + "xp-" + rand(12, string.digits) + "-" + rand(12, string.digits) + "-" + rand(32), same),
    ("huggingface", "h" + "f_" + rand(34), same),
    ("groq", "gs" + "k_" + rand(52), same),
    ("stripe-secret", "sk" + "_live_" + rand(24), same),
    ("stripe-restricted", "rk" + "_live_" + rand(24), same),
    (
        "jwt",
        ".".join([b64url({"alg": "HS256", "typ": "JWT"}), b64url({"sub": "1234567890"}), rand(43, URLSAFE)]),
        same,
    ),
    ("bearer-opaque", rand(32), lambda s: f"Authorization: Bearer {s}"),
    ("basic-auth", base64.b64encode(b"alice:" + rand(14).encode()).decode(), lambda s: f"Authorization: Basic {s}"),
    ("private-key", pem(), same),
    ("url-password", rand(18), lambda s: f"postgres://app:{s}@db.internal:5432/app"),
    ("logfire", "py" + "lf_v1_us_" + rand(44), same),
    ("gitlab", "gl" + "pat-" + rand(20), same),
    ("env-value", ENV_SECRET, same),
]
SECRETS = [secret for _, secret, _ in CASES] + [KEYED_SECRET, KEYED_SECRET_2]
ENV = {"MY_SERVICE_TOKEN": ENV_SECRET, "DEBUG": "1", "SHORT_KEY": "abc", "HOME": "/home/someone/projects"}


def scrubber(**kwargs: Any) -> Scrubber:
    kwargs.setdefault("env", ENV)
    return Scrubber(ScrubConfig(**kwargs))


def cassette(case: tuple[str, str, Callable[[str], str]]) -> dict[str, Any]:
    name, secret, carry = case
    return {
        "scenario": name,
        "requests": [
            {
                "messages": [
                    {
                        "kind": "request",
                        "parts": [
                            {
                                "part_kind": "user-prompt",
                                "content": f"Please use {carry(secret)} to call the weather API, thanks.",
                            }
                        ],
                    }
                ],
                "settings": {
                    "temperature": 0.2,
                    "max_tokens": 512,
                    "extra_headers": {
                        "Authorization": f"Bearer {secret}" if name != "basic-auth" else f"Basic {secret}",
                        "api-key": KEYED_SECRET,
                        "X-Api-Key": KEYED_SECRET_2,
                        "User-Agent": "pydantic-ai/1.0",
                    },
                },
            }
        ],
        "responses": [
            {
                "parts": [
                    {
                        "part_kind": "tool-return",
                        "tool_name": "read_config",
                        "content": f"config loaded:\n  credential: {carry(secret)}\n  region: eu-west-1",
                    },
                    {"part_kind": "text", "content": ["Done.", f"echo {carry(secret)} end"]},
                ],
                "usage": {"input_tokens": 120, "output_tokens": 8},
            }
        ],
    }


def test_at_least_twenty_distinct_shapes() -> None:
    assert len({name for name, _, _ in CASES}) >= 20
    assert len(set(SECRETS)) == len(SECRETS)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_no_secret_survives_serialisation(case: tuple[str, str, Callable[[str], str]]) -> None:
    out = scrubber().scrub(cassette(case))
    data = json.dumps(out).encode()
    assert leaks(data, SECRETS) == []
    assert b"<secret:" in data


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_surrounding_text_is_kept(case: tuple[str, str, Callable[[str], str]]) -> None:
    out = scrubber().scrub(cassette(case))
    prompt = out["requests"][0]["messages"][0]["parts"][0]["content"]
    assert prompt.startswith("Please use ")
    assert prompt.endswith(" to call the weather API, thanks.")
    tool = out["responses"][0]["parts"][0]["content"]
    assert tool.startswith("config loaded:\n  credential: ")
    assert tool.endswith("\n  region: eu-west-1")
    settings_ = out["requests"][0]["settings"]
    assert settings_["temperature"] == 0.2
    assert settings_["max_tokens"] == 512
    assert settings_["extra_headers"]["User-Agent"] == "pydantic-ai/1.0"
    assert out["responses"][0]["usage"] == {"input_tokens": 120, "output_tokens": 8}
    assert out["scenario"] == case[0]


def test_scheme_user_and_host_stay_readable() -> None:
    s = scrubber()
    assert s.scrub_text("Authorization: Bearer abc123def456ghi") == "Authorization: Bearer <secret:bearer:1>"
    url = s.scrub_text("postgres://app:hunter2hunter2@db.internal:5432/app")
    assert url.startswith("postgres://app:<secret:url-password:")
    assert url.endswith(">@db.internal:5432/app")


def test_ordinary_text_is_untouched() -> None:
    payload = {
        "prompt": (
            "Use sklearn or sk-learn; run task-1234567890abcdefghijklmnop; commit "
            "3f786850e387550fdab836ed7e6dc881de23001b; id 123e4567-e89b-12d3-a456-426614174000; "
            "a basic understanding; the bearer of bad news; https://example.com/path?q=1; "
            "email me at bob@example.com; draws 0123456789abcdefABCDEF0123456789abcdefAB"
        ),
        "settings": {"temperature": 0.7, "max_tokens": 100, "stop_sequences": ["\n\n"], "seed": 1},
        "usage": {"input_tokens": 5, "cache_read_tokens": 0},
        "flags": [True, False, None, 1.5],
    }
    assert scrubber().scrub(payload) == payload


def test_input_is_not_mutated() -> None:
    payload = cassette(CASES[0])
    before = copy.deepcopy(payload)
    scrubber().scrub(payload)
    assert payload == before


def test_placeholders_are_shape_and_ordinal() -> None:
    """Same secret, same placeholder; the ordinal counts per kind; nothing of the secret is kept."""
    secret, other = CASES[0][1], CASES[1][1]
    s = scrubber()
    a = s.scrub({"p": f"key {secret} here", "h": {"Authorization": f"Bearer {secret}"}, "q": f"and {other}"})
    assert a["p"] == "key <secret:openai:1> here"
    assert a["h"]["Authorization"] == "Bearer <secret:openai:1>"
    assert a["q"] == "and <secret:openai:2>"
    # A fresh scrubber (another cassette) numbers from 1 again, whatever the secret.
    assert Scrubber(ScrubConfig(env={})).scrub_text(f"again {other}") == "again <secret:openai:1>"


def test_placeholders_do_not_depend_on_the_environment() -> None:
    """The issue's flip: with the value in an env var it was <secret:env:…>, without it <secret:bearer:…> or raw."""
    value = rand(30)
    texts = [f"Authorization: Bearer {value}", f"password={value}", f"also {value} alone"]
    with_env = Scrubber(ScrubConfig(env={"MY_TOKEN": value}))
    without = Scrubber(ScrubConfig(env={}))
    assert [with_env.scrub_text(t) for t in texts[:2]] == [without.scrub_text(t) for t in texts[:2]]
    assert with_env.scrub_text(texts[0]) == "Authorization: Bearer <secret:bearer:1>"
    # The value learned from its context is scrubbed wherever else it appears, env or not.
    assert with_env.scrub_text(texts[2]) == without.scrub_text(texts[2]) == "also <secret:bearer:1> alone"


def test_values_under_secret_keys_are_scrubbed_whatever_their_shape() -> None:
    out = scrubber().scrub(
        {
            "extra_headers": {"Authorization": "Token hunter2", "x-api-key": "hunter2", "Proxy-Authorization": "x"},
            "api_key": "short",
            "apiKey": "camelCase1",
            "client_secret": "abc",
            "password": ["p4ss", "w0rd"],
            "max_tokens": 5,
            "token_count": 3,
            "keyboard": "qwerty-layout",
        }
    )
    for value in (
        out["extra_headers"]["Authorization"],
        out["extra_headers"]["x-api-key"],
        out["extra_headers"]["Proxy-Authorization"],
        out["api_key"],
        out["apiKey"],
        out["client_secret"],
        *out["password"],
    ):
        assert value.startswith("<secret:"), value
    assert out["max_tokens"] == 5 and out["token_count"] == 3
    assert out["keyboard"] == "qwerty-layout"


def test_user_pattern() -> None:
    s = scrubber(patterns=[r"ACME-[0-9]{6}"])
    assert s.scrub_text("ticket ACME-123456 is open") == "ticket <secret:custom:1> is open"
    assert scrubber().scrub_text("ticket ACME-123456 is open") == "ticket ACME-123456 is open"


def test_user_pattern_does_not_eat_placeholders() -> None:
    s = scrubber(patterns=[r"[0-9a-f]{8}"])
    once = s.scrub_text(f"key {CASES[0][1]} and deadbeef")
    assert once == s.scrub_text(once)
    assert "deadbeef" not in once


def test_exempt_path() -> None:
    secret = CASES[0][1]
    payload = {
        "requests": [
            {"settings": {"note": f"keep {secret}", "api_key": "hunter2", "other": secret}},
            {"settings": {"note": f"keep {secret}"}},
        ]
    }
    out = scrubber(exempt_paths=["requests.*.settings.note", "requests.0.settings.api_key"]).scrub(payload)
    assert out["requests"][0]["settings"]["note"] == f"keep {secret}"
    assert out["requests"][1]["settings"]["note"] == f"keep {secret}"
    assert out["requests"][0]["settings"]["api_key"] == "hunter2"
    assert out["requests"][0]["settings"]["other"] == "<secret:openai:1>"


def test_env_values_are_scrubbed_but_not_trivial_ones() -> None:
    s = scrubber()
    text = f"debug=1 abc home=/home/someone/projects value={ENV_SECRET}!"
    assert s.scrub_text(text) == "debug=1 abc home=/home/someone/projects value=<secret:env:1>!"


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    value = rand(20)
    monkeypatch.setenv("HARNESS_REPLAY_TEST_API_KEY", value)
    assert value not in Scrubber().scrub_text(f"the value is {value}.")
    assert value in Scrubber(ScrubConfig(env={})).scrub_text(f"the value is {value}.")


def test_truncated_private_key_is_still_scrubbed() -> None:
    block = pem()
    truncated = block[: len(block) // 2]
    out = scrubber().scrub_text(f"file says: {truncated}")
    assert out.startswith("file says: <secret:private-key:")
    assert truncated[-20:] not in out


def test_large_text_is_scrubbed() -> None:
    """Speed is measured in bench/ (ratios), not asserted here: this checks the long-text path is correct."""
    text = ("The quick brown fox jumps over the lazy dog 0123456789. " * 20000) + CASES[0][1]
    out = scrubber().scrub_text(text)
    assert CASES[0][1] not in out and out.endswith("<secret:openai:1>")


def test_paths_in_the_environment_are_not_secrets() -> None:
    """PWD is the working directory: scrubbing it would turn every printed path into a placeholder."""
    env = {"PWD": "/home/someone/project", "OLDPWD": "/tmp/x/y/z", "SSH_AUTH_SOCK": "/run/user/1000/agent.sock",
           "GOOGLE_APPLICATION_CREDENTIALS": "/home/someone/key.json", "MY_TOKEN": ENV_SECRET}
    s = Scrubber(ScrubConfig(env=env))
    text = "/home/someone/project/.replay/results/a.cassette /run/user/1000/agent.sock /home/someone/key.json"
    assert s.scrub_text(text) == text
    assert s.scrub_text(f"t {ENV_SECRET}") == "t <secret:env:1>"


# --- properties --------------------------------------------------------------------

_fragments = st.sampled_from(
    [carry(secret) for _, secret, carry in CASES]
    + ["Bearer ", "Basic ", "https://u:", "@host", "aws ", "AKIA", "sk-", "<secret:", ">", "eyJ", ".", " "]
)
_text = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(_fragments, st.text(max_size=10)), max_size=6).map("".join),
)
_keys = st.one_of(st.text(max_size=12), st.sampled_from(["Authorization", "api_key", "token", "password", "content"]))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text),
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(_keys, children, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_scrub_never_raises_and_is_idempotent(value: Any) -> None:
    s = scrubber(patterns=[r"ACME-[0-9]+"])
    once = s.scrub(value)
    json.dumps(once)
    assert s.scrub(once) == once


def test_scrub_cassette_round_trips_the_model() -> None:
    cassette_mod = pytest.importorskip("replay.cassette")
    secret = CASES[2][1]
    c = cassette_mod.Cassette(
        messages=[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"key {secret}"}]}],
        blobs=[{"extra_headers": {"Authorization": f"Bearer {secret}"}, "temperature": 0.5}],
        outcome=cassette_mod.Outcome(output=f"echo {secret}"),
    )
    from replay.scrub import scrub_cassette

    out = scrub_cassette(c, ScrubConfig(env={}))
    assert isinstance(out, cassette_mod.Cassette)
    assert secret not in cassette_mod.dumps(out).decode("latin-1")
    assert secret in c.messages[0]["parts"][0]["content"]  # the original is untouched
    assert out.blobs[0]["temperature"] == 0.5
    assert out.messages[0]["parts"][0]["content"] == "key <secret:anthropic:1>"


def test_bad_user_pattern_is_one_line_naming_the_file() -> None:
    from replay.errors import ReplayUsageError

    with pytest.raises(ReplayUsageError, match=r"^pyproject.toml: \[tool.replay\] scrub-patterns: '\(unclosed' is not a valid"):
        Scrubber(ScrubConfig(patterns=["(unclosed"]))


def test_bad_user_pattern_in_pyproject_exits_2(project: Any, cli: Any) -> None:
    (project / "pyproject.toml").write_text('[tool.replay]\nscrub-patterns = ["ok_[0-9]+", "([a-z"]\n')
    for args in (("ls",), ("run",), ("record",)):
        result = cli(*args)
        assert result.code == 2, (args, result)
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and "pyproject.toml" in lines[0] and "scrub-patterns" in lines[0], result.err
        assert "Traceback" not in result.err


def test_outputs_are_scrubbed_whatever_the_report_holds() -> None:
    """A report built from an unscrubbed (old or hostile) cassette: no renderer prints the secret."""
    from replay.differ import Change, Diff, RequestDiff, RoleCount
    from replay.reporter import ScenarioReport, junit, markdown, reports_json
    from replay.scrub import redact

    secret = CASES[0][1]
    keyed = rand(24)
    change = Change("main[0].messages[0].content", "changed", f"use {secret}", f"password={keyed}")
    d = Diff("s", "recorded", "replay", [RoleCount("main", 1, 1)], [RequestDiff("main", 0, "changed", [change])], [], None, [])
    d.notes = [f"blocked connection to https://u:{keyed}@example.com"]
    report = ScenarioReport("s", "changed", diff=d, error=None)
    clean = redact([report], ScrubConfig(env={}))
    outputs = [json.dumps(reports_json(clean), default=str), markdown(clean), junit(clean)]
    for text in outputs:
        assert leaks(text.encode(), [secret, keyed]) == [], text
        assert "secret:" in text
    assert report.diff is d and secret in str(d.requests[0].changes[0].old)  # the input is untouched


def test_every_cassette_field_is_scrubbed_but_header_ids() -> None:
    """Wire records, names, errors: a field added to the model is covered without listing it."""
    from replay.cassette import (
        Cassette,
        ErrorInfo,
        Exchange,
        Header,
        HistoryRecord,
        ObservationRecord,
        Outcome,
        WireRecord,
        dumps,
    )
    from replay.scrub import scrub_cassette

    secret, keyed = CASES[3][1], rand(26)
    wire = WireRecord(
        method="POST",
        url=f"https://example.openai.azure.com/v1/chat?api-key={keyed}",
        request_headers={"api-key": keyed, "content-type": "application/json"},
        body_text=f"raw {secret}",
        response_headers={"x-request-id": "abc"},
        response=f'{{"choices": [{{"message": {{"content": "your key is {secret}"}}}}]}}',
    )
    c = Cassette(
        header=Header(scenario_id="s/1", roles={f"agent-{secret}": "mod"}),
        exchanges=[
            Exchange(seq=0, role=f"agent-{secret}", index=0, kind="request", model_name=f"m {secret}", wire=[wire],
                     error=ErrorInfo(type="ValueError", message=f"password={keyed}"))
        ],
        observations=[ObservationRecord(name=f"obs {secret}", value=1)],
        histories=[HistoryRecord(name=f"h {secret}", predicate="p", verdict={"why": f"password={keyed}"})],
        outcome=Outcome(output="ok"),
    )
    out = scrub_cassette(c, ScrubConfig(env={}))
    assert leaks(dumps(out), [secret, keyed]) == []
    assert out.header.scenario_id == "s/1"
    assert out.exchanges[0].wire is not None and out.exchanges[0].wire[0].request_headers["content-type"] == "application/json"
    assert out.exchanges[0].role == out.exchanges[0].role and out.exchanges[0].role in out.header.roles


def test_value_learned_late_is_scrubbed_earlier_too() -> None:
    """Found by hypothesis: a value seen raw before its context showed up stayed raw on the first scrub."""
    aws = rand(40, B64)
    value = [["sk-" + rand(30) + f"_secret_access_key = {aws}"], f"aws_secret_access_key = {aws}"]
    s = scrubber()
    once = s.scrub(value)
    assert aws not in json.dumps(once)
    assert s.scrub(once) == once


def test_a_replay_screens_only_what_its_recording_does_not_hold() -> None:
    """finalize(result, known=recording): messages the recording holds (stamps aside) are not
    screened again; anything new still is, stamps and run outputs included."""
    from replay import cassette as cm
    from replay.scrub import _screen_text, scrub_cassette

    secret = CASES[2][1]

    def msg(text: str, stamp: str, conversation: str = "c-1") -> dict[str, Any]:
        part = {"part_kind": "user-prompt", "content": text, "timestamp": stamp}
        return {"kind": "request", "parts": [part], "timestamp": stamp, "run_id": "r-" + stamp, "conversation_id": conversation}

    known = cm.Cassette(messages=[msg("what changed?", "2026-01-01T00:00:00Z")],
                        runs=[cm.AgentRunRecord(role="main", output="all good")])
    again = msg("what changed?", "2026-12-01T00:00:00Z")  # the same message, re-stamped by the re-run
    text = _screen_text(cm.Cassette(messages=[again], runs=[cm.AgentRunRecord(role="main", output="all good")]), known)
    assert "what changed?" not in text and "all good" not in text and "r-2026-12-01T00:00:00Z" in text

    for result in (
        cm.Cassette(messages=[again, msg(f"key {secret}", "2026-12-01T00:00:01Z")]),  # a new message
        cm.Cassette(messages=[msg("what changed?", "2026-12-01T00:00:00Z", conversation=secret)]),  # in a stamp
        cm.Cassette(messages=[again], runs=[cm.AgentRunRecord(role="main", output=f"echo {secret}")]),  # a new run output
        cm.Cassette(messages=[{**again, "parts": [{**again["parts"][0], "content": f"what changed? {secret}"}]}]),
    ):
        out = scrub_cassette(result, ScrubConfig(env={}), known)
        assert secret not in cm.dumps(out).decode("latin-1")
        assert out == scrub_cassette(result, ScrubConfig(env={}))  # the same result as screening everything


@dataclasses.dataclass
class _Report:
    """Stands in for a report object: redact reads dataclasses and models through their fields."""

    name: str
    body: Any


_outputs = st.recursive(
    st.one_of(st.none(), st.integers(), _text),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_keys, children, max_size=4),
        st.builds(_Report, _text, children),
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_outputs)
def test_redact_screens_first_but_gives_what_the_walk_gives(value: Any) -> None:
    """redact skips the walk when the screen of the value's JSON finds nothing: never a different result."""
    from replay.scrub import redact

    config = ScrubConfig(env={}, patterns=[r"ACME-[0-9]+"])
    assert redact(value, config) == Scrubber(config).scrub_any(value)


def test_redact_returns_a_clean_report_as_it_is() -> None:
    from replay.scrub import redact

    report = _Report("seed000/long", {"requests": [{"role": "main", "text": "turn 3: check the rollout dashboard"}] * 50})
    assert redact(report, ScrubConfig(env={})) is report
    leaky = _Report("x", {"text": f"key {CASES[2][1]}"})
    assert CASES[2][1] not in json.dumps(dataclasses.asdict(redact(leaky, ScrubConfig(env={}))))


_RUN_REFERENCE = re.compile(r"[A-Za-z0-9_\-.~+/=:]{15,}")
"""What the screen's run scan must find: the regex it replaced (``scrub._token_runs``)."""


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="aZ09_-.~+/=:", min_size=10, max_size=30),
            st.text(min_size=0, max_size=6),  # any characters: separators, non-ASCII, lone surrogates
            st.sampled_from([" ", "é", "\ud800", "\x00", "😀", "\\n"]),
        ),
        max_size=30,
    )
)
def test_token_runs_are_the_regex_runs(pieces: list[str]) -> None:
    """The byte-level run scan finds exactly the runs the regex finds, whatever surrounds them."""
    from replay.scrub import _token_runs

    text = "".join(pieces)
    found = _token_runs(text)
    assert set(found.split(" ")) - {""} == set(_RUN_REFERENCE.findall(text))
    assert len(found.split(" ")) == len(set(found.split(" ")))  # each distinct run once


_VALUE = st.text(alphabet="ab<:>", min_size=8, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    learned=st.sets(_VALUE, max_size=6),
    env=st.sets(_VALUE, max_size=4),
    use_env=st.booleans(),
    pieces=st.lists(st.one_of(_VALUE, st.text(alphabet="ab<:> ", max_size=6), st.just("<secret:env:1>")), max_size=12),
)
def test_literals_replace_what_the_whole_set_alternation_replaces(
    learned: set[str], env: set[str], use_env: bool, pieces: list[str]
) -> None:
    """Only the values a text holds go into its pattern (found by `in` or by the prefix index); the result is the
    whole set's, overlaps and placeholders included."""

    def scrubber() -> Scrubber:
        s = Scrubber(ScrubConfig(env={}))
        s._learned.update(learned)
        s._env_values = frozenset(env)
        s._use_env = use_env
        return s

    text = "".join(pieces)
    every = learned | (env if use_env else set())
    reference = scrubber()
    if every:
        whole = re.compile(
            r"(?P<ph><secret:[a-z0-9._-]{1,40}:[0-9a-f]{1,16}>)|(?P<lit>"
            + "|".join(map(re.escape, sorted(every, key=len, reverse=True)))
            + ")"
        )
        expected = whole.sub(lambda m: m.group() if m.lastgroup == "ph" else reference.placeholder(m.group(), "env"), text)
    else:
        expected = text
    import replay.scrub as module

    for index_from in (module._INDEX_FROM, 0):  # each value tested with `in`, and the prefix index
        saved, module._INDEX_FROM = module._INDEX_FROM, index_from
        try:
            assert scrubber()._literals(text) == expected
        finally:
            module._INDEX_FROM = saved


def test_learning_values_one_by_one_compiles_linear_pattern_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each learned value used to recompile an alternation of every value learned so far: quadratic in the secrets."""
    import replay.scrub as module

    compiled: list[int] = []

    class _Re:
        def __getattr__(self, name: str) -> Any:
            return getattr(re, name)

        @staticmethod
        def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
            compiled.append(len(pattern))
            return re.compile(pattern, flags)

    monkeypatch.setattr(module, "re", _Re())
    values = [f"{i:04d}-{'x' * 12}" for i in range(400)]
    texts = [f"password={v}" for v in values] + [f"the value {v} again" for v in values]
    s = Scrubber(ScrubConfig(env={}))
    out = s.scrub(texts)
    assert len(s._learned) == 400
    assert all("<secret:" in t and "x" * 12 not in t for t in out)
    assert sum(compiled) < 400 * 200  # each text's own value, linear (the whole set after each learned one: 1.55 M characters)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.one_of(st.just("<secret:openai:1>"), st.just("<secret:env:12>"), st.text(alphabet="<>:secrt a", max_size=8)), max_size=20),
    start=st.integers(min_value=0, max_value=200),
    length=st.integers(min_value=0, max_value=30),
)
def test_placeholder_lookups_are_the_scans_they_replaced(pieces: list[str], start: int, length: int) -> None:
    """Bisection over the text's placeholders answers what testing every placeholder answered."""
    from replay.scrub import PLACEHOLDER_RE, _Placeholders

    text = "".join(pieces)
    spans = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    found = _Placeholders(text)
    assert bool(found) == bool(spans)
    assert found.holds(start) == any(s <= start < e for s, e in spans)
    assert found.overlaps(start, start + length) == any(start < e and s < start + length for s, e in spans)



def test_a_key_digit_is_looked_for_in_its_first_256_characters() -> None:
    """The openai/anthropic shapes need a digit in the key (English words with a dash have none), looked
    for within 256 characters: unbounded, "sk-sk-sk-…" made the lookahead quadratic."""
    s = Scrubber(ScrubConfig(env={}))
    assert s.scrub_text("key sk-" + "a" * 250 + "1b") == "key <secret:openai:1>"
    assert s.scrub_text("key sk-ant-" + "a" * 250 + "1b") == "key <secret:anthropic:1>"
    assert s.scrub_text("key sk-" + "a" * 300 + "1b").startswith("key sk-aaa")  # past the bound: not a key shape
    assert s.scrub_text("sk-" * 5000) == "sk-" * 5000


def test_a_text_scanned_again_after_a_new_value_is_learned_finds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The learned values a text holds are remembered per text (one text is screened, walked and written: a
    hostile one with 20,000 values was scanned 12 times), but only while no value has been learned since."""
    import replay.scrub as module

    monkeypatch.setattr(module, "_INDEX_FROM", 0)
    s = Scrubber(ScrubConfig(env={}))
    s._learn("alphaSECRET1")
    text = "x alphaSECRET1 y betaSECRET22 z"
    assert s._learned_in(text) == ["alphaSECRET1"]
    assert s._learned_in(text) is s._learned_in(text)  # remembered
    s._learn("betaSECRET22")
    assert sorted(s._learned_in(text)) == ["alphaSECRET1", "betaSECRET22"]
    monkeypatch.setattr(module, "_MEMO_CHARS", 10)  # past its bound the memo starts over: one text held at most
    s._learned_memo.clear()
    s._learned_memo_chars = 0
    assert s._learned_in(text) == s._learned_in(text) and len(s._learned_memo) == 1


def test_a_function_key_in_a_url_query_is_scrubbed() -> None:
    """Azure Functions take their key as ``?code=``: a provider behind one (``base_url=…/api?code=…``) sent it in
    every request's URL, which a cassette keeps (the query is compared), and it was written verbatim: ``code`` was
    a query credential to ``secret_class`` but never looked for. ``code`` elsewhere is left alone."""
    from replay.scrub import Scrubber

    key = "Zx81abcdEFGHijklMNop2345=="
    for url in (f"https://fn.azurewebsites.net/api/v1/chat/completions?code={key}",
                f"http://127.0.0.1:4000/v1/chat/completions?api-version=2024-06-01&code={key}"):
        out = Scrubber().scrub(url)
        assert key.rstrip("=") not in out and "code=<secret:" in out, out
    for text in ("exit code=1 after 3 retries", "the code=done marker", "see https://h/x?mode=code&lang=py"):
        assert Scrubber().scrub(text) == text


def _find_context_reference(text: str, low: str, *, screen: bool = False) -> list[Any]:
    """``scrub._find_context`` as it was before the hex pre-check and the early return (the reference
    the fast path is compared with)."""
    from replay import scrub as sc

    taken = sc._Placeholders(text)
    spans: list[Any] = []
    last = 0
    n = len(text)
    cleared: set[str] = set()
    for hs, he in sc._word_hits(text, low):
        if hs < last or (taken and taken.holds(hs)):
            continue
        if screen:
            window = text[hs - 41 : he + 60] if hs >= 41 else f"{hs}:{text[: he + 60]}"
            if window in cleared:
                continue
            cleared.add(window)
        left, right = text[max(0, hs - 40) : hs], text[he : he + 40]
        s = hs - len(left) + len(left.rstrip(sc._NAME_STR))
        e = he + len(right) - len(right.lstrip(sc._NAME_STR))
        kind = sc.secret_class(text[s:e], s > 0 and text[s - 1] in "?&")
        if screen and kind is not None:
            return [sc._Span(s, e, text[s:e], kind)]
        if kind is not None:
            vm = sc._VALUE_RE().match(text, e)
            if vm is not None:
                group = "qv" if vm.group("qv") is not None else "v"
                value = vm.group(group)
                if group == "v":
                    value = value.rstrip(".,!?:")
                if sc._credible(value, kind):
                    start = vm.start(group)
                    spans.append(sc._Span(start, start + len(value), value, kind))
                    last = start + len(value)
                    continue
        if low[hs:he] in sc._HEX_WORDS:
            hm = sc._HEX_NEAR_RE().search(text, he, min(n, he + 60))
            if hm is not None and not taken.holds(hm.start()):
                spans.append(sc._Span(hm.start(), hm.end(), hm.group(), "hex-token"))
                last = hm.end()
    return spans


_CONTEXT_PIECES = st.one_of(
    st.sampled_from(
        ["token", "input_tokens", "sig", "signal", "key", "Key", "api_key", "secret", "pass", "session", "?code=",
         "&code=", "auth", "<secret:token:1>", "<secret:", "=", ": ", '":"', " ", "_", "-", ".", "İ", "é", "\ud800"]
    ),
    st.text(alphabet="0123456789abcdefABCDEF", min_size=1, max_size=40),  # hex runs, of every length around 32
    st.text(alphabet="0123456789abcdef", min_size=30, max_size=34),
    st.text(max_size=5),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_CONTEXT_PIECES, max_size=25))
def test_context_finder_is_the_reference_with_or_without_the_hex_precheck(pieces: list[str]) -> None:
    """``_find_context`` skips the hex search where the text holds no 32 hex digits in a row, and looks
    for context words before placeholders: the spans (walk) and the verdict (screen) are the reference's."""
    from replay.scrub import _find_context, _has_hex_run, _token_runs

    text = "".join(pieces)
    low = text.lower()
    assert _find_context(text, low) == _find_context_reference(text, low)
    verdict = bool(_find_context_reference(text, low, screen=True))
    assert bool(_find_context(text, low, screen=True)) == verdict
    assert bool(_find_context(text, low, screen=True, runs=_token_runs(text))) == verdict  # as the screen calls it
    assert _has_hex_run(text) == (re.search(r"[0-9a-fA-F]{32}", text) is not None)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="0123456789abcdefABCDEF", min_size=1, max_size=40),
            st.text(alphabet="0123456789abcdef", min_size=30, max_size=34),
            st.text(alphabet="aZ09_-.~+/=:", min_size=1, max_size=20),  # run characters that are not all hex
            st.sampled_from([" ", '"', ",", "é", "\ud800", "\x00", "😀", "g", "G", "z"]),
            st.text(max_size=4),
        ),
        max_size=20,
    )
)
def test_the_token_runs_hold_a_hex_run_exactly_when_the_text_does(pieces: list[str]) -> None:
    """The screen's hex pre-check reads the token runs instead of the whole text (``_find_context(runs=)``):
    a run of 32 hex digits is in the runs exactly when it is in the text, whatever stands around it."""
    from replay.scrub import _has_hex_run, _token_runs

    text = "".join(pieces)
    expected = re.search(r"[0-9a-fA-F]{32}", text) is not None
    assert _has_hex_run(_token_runs(text)) == expected == _has_hex_run(text)


def test_the_screen_reads_a_hex_token_inside_a_longer_run() -> None:
    """A usage key's ``…_tokens`` names no credential, but 32 hex digits right after it are a hex token, glued
    to other run characters (``sk_live_…``, ``id=…``) or not: the screen's pre-check on the runs finds them
    among a recording's other runs, as on the whole text; 31 in a row are not a hex run, there or in the text."""
    from replay.scrub import _find_context, _has_hex_run, _token_runs

    hex_token = "0123456789abcdef0123456789abcdef"
    usage = ", ".join(f'"cache_{k}_{n}_tokens": {n}' for k in ("read", "write", "audio") for n in range(12))  # other runs
    for glued in (hex_token, f"sk_live_{hex_token}", f"id={hex_token}:x", f"{hex_token}-tail"):
        text = f'{{"usage": {{{usage}}}, "trace": "{glued}"}}'
        low = text.lower()
        assert _has_hex_run(_token_runs(text))
        assert _find_context(text, low, screen=True, runs=_token_runs(text)) == _find_context(text, low, screen=True)
        assert Scrubber(ScrubConfig(env={}))._text_might_hold(text)
        assert not Scrubber(ScrubConfig(env={}))._text_might_hold(text.replace(glued, "fine"))
    assert not _has_hex_run(_token_runs(f"the token sk_live_{hex_token[:31]}g"))


def test_the_screen_still_finds_a_hex_token_after_a_context_word() -> None:
    """The hex pre-check only skips texts with no 32 hex digits in a row: one after "token" is still found,
    and one cut short by the window's end too."""
    hex_token = "0123456789abcdef0123456789abcdef01"
    assert Scrubber(ScrubConfig(env={}))._text_might_hold('{"usage": {"input_tokens": 3}, "note": "the token ' + hex_token + '"}')
    assert not Scrubber(ScrubConfig(env={}))._text_might_hold('{"usage": {"input_tokens": 3}, "note": "the signal is fine"}')
    out = Scrubber(ScrubConfig(env={})).scrub_text(f"token {hex_token}")
    assert hex_token not in out and "<secret:hex-token:1>" in out

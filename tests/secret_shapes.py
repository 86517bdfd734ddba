"""Fake credentials of many shapes, seeded in many places, for the secrets tests and the reliability figures.

Assembled at run time from a seeded RNG so that no file holds a literal credential-shaped
string for secret scanners to flag. Every secret is either shaped (``sk-ant-…``) or carried
with the context that marks it (``password=…``, ``Authorization: Bearer …``): a value
with neither is indistinguishable from prose, and the scrubber promises nothing for it
beyond the environment net.

:func:`check` records the leaky scenario, replays it with and without the environment
variables, and scans every file and output the tool produced; the integration test and
``make reliability`` both call it, with an in-process or a subprocess CLI.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
ENV_NAME = "MY_SERVICE_TOKEN"


@dataclass(frozen=True)
class Shape:
    name: str
    secret: str
    carried: str
    """How the secret appears in free text (some shapes are only recognisable with context)."""


def shapes(seed: int = 20240611) -> list[Shape]:
    """Sixty-odd distinct credential shapes: provider keys, connection strings, context-only values."""
    rng = random.Random(seed)

    def rand(n: int, alphabet: str = ALNUM) -> str:
        letters = [c for c in alphabet if c.isalpha()] or list(alphabet)
        digits = [c for c in alphabet if c.isdigit()] or list(alphabet)
        body = [rng.choice(alphabet) for _ in range(n - 2)] + [rng.choice(digits), rng.choice(letters)]
        rng.shuffle(body)
        return "".join(body)

    def b64url(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    def pem(kind: str) -> str:
        return f"-----BEGIN {kind}-----\n" + "\n".join(rand(64, B64) for _ in range(5)) + f"\n-----END {kind}-----"

    basic = base64.b64encode(b"alice:" + rand(14).encode()).decode()
    ctx: dict[str, str] = {}

    def keep(name: str, secret: str, carried: str) -> str:
        ctx[name] = carried
        return secret

    raw: list[tuple[str, str]] = [
        ("openai-classic", "sk-" + rand(48)),
        ("openai-project", "sk-" + "proj-" + rand(156, URLSAFE)),
        ("anthropic", "sk-" + "ant-api03-" + rand(93, URLSAFE) + "AA"),
        ("anthropic-admin", "sk-" + "ant-admin01-" + rand(93, URLSAFE) + "AA"),
        ("openrouter", "sk-" + "or-v1-" + rand(64)),
        ("google", "AI" + "za" + "Sy" + rand(33, URLSAFE)),
        ("google-oauth", "ya" + "29." + rand(120, URLSAFE)),
        ("aws-access-key", "AK" + "IA" + rand(16, UPPER_DIGITS)),
        ("github-classic", "gh" + "p_" + rand(36)),
        ("github-oauth", "gh" + "o_" + rand(36)),
        ("github-fine-grained", "github" + "_pat_" + rand(22) + "_" + rand(59)),
        ("gitlab", "gl" + "pat-" + rand(20)),
        ("slack-bot", "xo" + "xb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24)),
        ("discord-bot", "M" + rand(25) + "." + rand(6, URLSAFE) + "." + rand(38, URLSAFE)),
        ("telegram-bot", rand(10, string.digits) + ":AA" + rand(33, URLSAFE)),
        ("sendgrid", "S" + "G." + rand(22, URLSAFE) + "." + rand(43, URLSAFE)),
        ("npm", "np" + "m_" + rand(36)),
        ("pypi", "py" + "pi-AgEIcHlwaS5vcmc" + rand(70, URLSAFE)),
        ("huggingface", "h" + "f_" + rand(34)),
        ("groq", "gs" + "k_" + rand(52)),
        ("xai", "x" + "ai-" + rand(80)),
        ("perplexity", "pp" + "lx-" + rand(48)),
        ("replicate", "r" + "8_" + rand(37)),
        ("stripe-secret", "sk" + "_live_" + rand(24)),
        ("stripe-restricted", "rk" + "_live_" + rand(24)),
        ("stripe-webhook", "wh" + "sec_" + rand(32)),
        ("jwt", ".".join([b64url({"alg": "HS256", "typ": "JWT"}), b64url({"sub": rand(10)}), rand(43, URLSAFE)])),
        ("private-key-rsa", pem("RSA " + "PRIVATE KEY")),
        ("private-key-openssh", pem("OPENSSH " + "PRIVATE KEY")),
        ("logfire", "py" + "lf_v1_us_" + rand(44)),
        ("mailgun", "ke" + "y-" + rand(32, HEX)),
        ("twilio", "S" + "K" + rand(32, HEX)),
        ("shopify", "sh" + "pat_" + rand(32, HEX)),
        ("databricks", "da" + "pi" + rand(32, HEX)),
        ("digitalocean", "do" + "p_v1_" + rand(64, HEX)),
        ("linear", "lin" + "_api_" + rand(40)),
        ("notion", "nt" + "n_" + rand(46)),
        ("vault", "hv" + "s." + rand(90, URLSAFE)),
        ("age", "AGE-" + "SECRET-KEY-1" + rand(58, UPPER_DIGITS)),
        ("langsmith", "ls" + "v2_pt_" + rand(32, HEX) + "_" + rand(10, HEX)),
        ("pinecone", "pc" + "sk_" + rand(60)),
        ("tavily", "tv" + "ly-" + rand(32)),
        ("doppler", "dp" + ".pt." + rand(43)),
        ("azure-ad-client-secret", rand(3) + "8Q" + "~" + rand(34, ALNUM + "_~.-")),
        (
            "slack-webhook",
            keep("slack-webhook", s := "T" + rand(10, UPPER_DIGITS) + "/B" + rand(10, UPPER_DIGITS) + "/" + rand(24),
                 f"https://hooks.slack.com/services/{s}"),
        ),
        (
            "discord-webhook",
            keep("discord-webhook", s := rand(18, string.digits) + "/" + rand(68, URLSAFE),
                 f"https://discord.com/api/webhooks/{s}"),
        ),
        ("aws-secret", keep("aws-secret", s := rand(40, B64), f"aws_secret_access_key = {s}")),
        ("bearer-opaque", keep("bearer-opaque", s := rand(32), f"Authorization: Bearer {s}")),
        ("basic-auth", keep("basic-auth", basic, f"Authorization: Basic {basic}")),
        ("url-password", keep("url-password", s := rand(18), f"postgres://app:{s}@db.internal:5432/app")),
        ("mongodb-uri", keep("mongodb-uri", s := rand(20), f"mongodb+srv://svc:{s}@cluster0.example.net/db")),
        ("redis-uri", keep("redis-uri", s := rand(24), f"redis://:{s}@cache.internal:6379/0")),
        ("url-query-key", keep("url-query-key", s := rand(32), f"https://api.example.com/v1/search?q=x&api-key={s}&n=3")),
        ("azure-openai-header", keep("azure-openai-header", s := rand(32, HEX), f"api-key: {s}")),
        (
            "azure-storage-connstr",
            keep("azure-storage-connstr", s := rand(86, B64) + "==",
                 f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net"),
        ),
        (
            "azure-sas-url",
            keep("azure-sas-url", s := rand(43, ALNUM + "%"),
                 f"https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&sig={s}"),
        ),
        (
            "mssql-connstr",
            keep("mssql-connstr", s := rand(16, ALNUM + "!@#%^*"),
                 f"Server=tcp:db.internal,1433;Database=app;User Id=sa;Password={s};Encrypt=true"),
        ),
        ("dotenv-password", keep("dotenv-password", s := rand(14), f"DB_PASSWORD={s}")),
        ("yaml-password", keep("yaml-password", s := rand(12, ALNUM + "!#%"), f'password: "{s}"')),
        ("json-api-key", keep("json-api-key", s := rand(30), f'{{"api_key": "{s}"}}')),
        ("hex-near-auth", keep("hex-near-auth", s := rand(40, HEX), f"the auth token is {s}, keep it safe")),
        ("sentry-dsn", keep("sentry-dsn", s := rand(32, HEX), f"https://{s}@o123456.ingest.example.io/4504")),
        ("cookie-header", keep("cookie-header", s := rand(40, URLSAFE), f"Cookie: sessionid={s}")),
        ("env-value", keep("env-value", s := rand(28, ALNUM + "!@#%"), f"{ENV_NAME}={s}")),
    ]
    return [Shape(name, secret, ctx.get(name, secret)) for name, secret in raw]


def header_secrets(seed: int = 20240611) -> dict[str, str]:
    """Values with no recognisable shape: only the header name says they are credentials."""
    rng = random.Random(seed + 1)
    names = ("api-key", "X-Api-Key", "x-goog-api-key", "Ocp-Apim-Subscription-Key", "X-Auth-Token")
    return {name: "".join(rng.choice(ALNUM) for _ in range(26)) for name in names}


PLACES = (
    "prompt", "instructions", "system_prompt", "extra_headers", "tool_args", "tool_return_text",
    "tool_return_dict", "model_text", "thinking", "provider_details", "retry_prompt", "run_output",
    "observation_value", "observation_name", "expectation", "model_name", "agent_name", "tool_name",
    "binary_env_file", "binary_json", "binary_yaml", "document_url",
)  # fmt: skip
"""Where the scenario puts each shape; every place gets its own secrets (seed + place index)."""


def corpus() -> dict[str, list[Shape]]:
    """Place → the shapes seeded there, each with secrets of its own."""
    return {place: shapes(20240611 + i) for i, place in enumerate(PLACES)}


_B64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{16,}={0,2}")


def _decoded(data: bytes) -> bytes:
    """Base64 runs decoded (files sent to a model are stored that way), so a secret inside one is found."""
    out = []
    for m in _B64_RUN.finditer(data):
        run = m.group()
        for decode in (base64.urlsafe_b64decode, base64.b64decode):
            try:
                out.append(decode(run + b"=" * (-len(run) % 4)))
            except (binascii.Error, ValueError):
                continue
    return b"\n".join(out)


def leaks(data: bytes, secrets: list[str]) -> list[str]:
    """Secrets found in ``data`` verbatim, JSON-escaped, inside base64, or as a recognisable middle slice."""
    haystack = data + b"\n" + _decoded(data)
    found = []
    for secret in secrets:
        forms = {secret, json.dumps(secret)[1:-1]}
        if len(secret) >= 24:
            middle = len(secret) // 2
            forms.add(secret[middle - 6 : middle + 6])
        if any(form.encode() in haystack for form in forms):
            found.append(secret)
    return found


SCENARIO = '''
"""Leaks every secret it is given, everywhere it can."""
import json
import os

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    BinaryContent, DocumentUrl, ModelResponse, TextPart, ThinkingPart, ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from replay import Run, scenario

P = json.loads(open(os.environ["REPLAY_TEST_PAYLOAD"]).read())


def j(place):
    return "\\n".join(P["places"][place])


def model(messages, info: AgentInfo):
    calls = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
    if calls < 2:  # the first call is refused with ModelRetry, the second answered
        return ModelResponse(parts=[ToolCallPart("read_config", {"note": j("tool_args"), "fail": calls == 0})])
    return ModelResponse(
        parts=[ThinkingPart(j("thinking")), TextPart("echo: " + j("model_text"))],
        provider_details={"debug": P["places"]["provider_details"]},
    )


@scenario("secrets/leaky")
async def leaky(run: Run) -> dict:
    agent = Agent(
        FunctionModel(model, model_name="fn " + " | ".join(P["places"]["model_name"])),
        name="agent " + " | ".join(P["places"]["agent_name"]),
        instructions=j("instructions"),
        system_prompt=j("system_prompt"),
    )

    @agent.tool_plain
    def read_config(note: str, fail: bool) -> dict:
        if fail:
            raise ModelRetry("retry with these: " + j("retry_prompt"))
        return {"text": "config loaded:\\n" + j("tool_return_text"), "config": P["places"]["tool_return_dict"]}

    for name in P["tool_names"]:
        agent.tool_plain(name=name)(lambda: "unused")

    files = [
        BinaryContent(j("binary_env_file").encode(), media_type="text/plain"),
        BinaryContent(json.dumps({"settings": P["places"]["binary_json"]}).encode(), media_type="application/json"),
        BinaryContent(("conf: |\\n  " + j("binary_yaml").replace("\\n", "\\n  ")).encode(), media_type="application/yaml"),
    ]
    urls = [DocumentUrl(url=u, media_type="application/pdf") for u in P["urls"]]
    headers = {"Authorization": "Bearer " + P["bearer"], **P["headers"]}
    headers.update({f"X-Debug-{i}": c for i, c in enumerate(P["places"]["extra_headers"])})
    result = await agent.run(
        ["Please use these: " + j("prompt"), *files, *urls],
        model_settings={"extra_headers": headers, "temperature": 0.0},
    )
    run.observe("output", result.output)
    run.observe("values", P["places"]["observation_value"])
    for c in P["places"]["observation_name"]:
        run.observe("seen " + c, 1)
    run.expect("values", P["places"]["expectation"])
    return {"output": result.output, "carried": P["places"]["run_output"]}
'''

_NAME_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def prepare(project: Path) -> dict[str, str]:
    """Write the leaky scenario and its payload into ``project``; returns the env vars a laptop would have.

    The variables hold the prompt's secrets (as ``OPENAI_API_KEY`` would), under credential names.
    """
    places = corpus()
    payload = {
        "places": {place: [s.carried for s in found] for place, found in places.items()},
        "bearer": places["prompt"][0].secret,
        "headers": header_secrets(),
        # A tool name is an identifier: only shaped secrets fit, with nothing around them.
        "tool_names": [
            f"t_{s.secret}" for s in places["tool_name"] if s.carried == s.secret and _NAME_SAFE.fullmatch(s.secret)
        ],
        "urls": [f"https://files.example.com/doc.pdf?token={s.secret}" for s in places["document_url"] if _NAME_SAFE.fullmatch(s.secret)]
        + [s.carried for s in places["document_url"] if s.carried.startswith(("https://", "postgres://", "mongodb"))],
    }
    (project / "payload.json").write_text(json.dumps(payload))
    (project / "scenarios").mkdir(exist_ok=True)
    (project / "scenarios" / "leaky.py").write_text(SCENARIO)
    env = {"REPLAY_TEST_PAYLOAD": str(project / "payload.json")}
    env.update({f"SHAPE_{i}_API_KEY": s.secret for i, s in enumerate(places["prompt"]) if "\n" not in s.secret})
    env[ENV_NAME] = next(s.secret for s in places["prompt"] if s.name == "env-value")
    return env


def seeded() -> list[str]:
    """Every secret value :func:`prepare` puts into the scenario."""
    return [s.secret for found in corpus().values() for s in found] + list(header_secrets().values())


# --------------------------------------------------------------------------- the whole check

Runner = Callable[[list[str], dict[str, str | None]], tuple[int, str, str]]
"""Runs ``replay ARGS`` with environment changes (None removes a variable); returns code, stdout, stderr."""


@dataclass
class Figures:
    shapes: int = 0
    places: int = 0
    seeded: int = 0
    verdicts: dict[str, str] = field(default_factory=dict)
    """Run label → the scenario's status in that run."""
    leaks: dict[str, list[str]] = field(default_factory=dict)
    """File or output → the shapes found in it (empty when clean)."""
    files: int = 0
    outputs: int = 0

    @property
    def found(self) -> int:
        return sum(len(v) for v in self.leaks.values())


def check(project: Path, replay_cli: Runner) -> Figures:
    """Record with the environment set, replay in every format with and without it, scan everything written."""
    env = prepare(project)
    names = {s.secret: f"{place}/{s.name}" for place, found in corpus().items() for s in found}
    names.update({v: f"header/{k}" for k, v in header_secrets().items()})
    secrets = list(names)
    fig = Figures(shapes=len(shapes()), places=len(PLACES), seeded=len(secrets))
    without: dict[str, str | None] = {k: None for k in env if k != "REPLAY_TEST_PAYLOAD"}
    summary = project / "step-summary.md"
    outputs: dict[str, str] = {}

    def scan(label: str, data: bytes) -> None:
        fig.leaks[label] = [names[s] for s in leaks(data, secrets)]

    code, out, err = replay_cli(["record", "secrets/leaky", "--force"], dict(env))
    if code != 0:
        raise RuntimeError(f"recording failed ({code}): {err.strip()[-400:]}")
    for mode, extra in (("with env", dict(env)), ("without env", {**env, **without})):
        for fmt in ("text", "json", "markdown", "junit"):
            code, out, err = replay_cli(
                ["run", "secrets/leaky", "--format", fmt], {**extra, "GITHUB_STEP_SUMMARY": str(summary)}
            )
            outputs[f"run {fmt} ({mode})"] = out + err
            status = "same" if code == 0 else "changed" if code == 1 else f"error {code}"
            fig.verdicts[f"{fmt} ({mode})"] = status
        code, out, err = replay_cli(["show", "cassettes/secrets/leaky.cassette"], extra)
        outputs[f"show ({mode})"] = out + err
    for label, text in outputs.items():
        scan(label, text.encode())
    fig.outputs = len(outputs)
    scan("step summary", summary.read_bytes() if summary.exists() else b"")
    for path in sorted(p for p in project.rglob("*") if p.is_file() and p.name != "payload.json" and "scenarios" not in p.parts):
        if path.name == "step-summary.md":
            continue
        fig.files += 1
        scan(str(path.relative_to(project)), path.read_bytes())
    return fig

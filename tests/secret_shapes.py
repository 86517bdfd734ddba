"""Fake credentials of every common shape, for the secrets-on-disk test and the reliability figures.

Assembled at run time from a seeded RNG (as tests/unit/test_scrub.py does) so that no
file holds a literal credential-shaped string for secret scanners to flag.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
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
    """Twenty-odd distinct credential shapes, plus an unshaped value for ``MY_SERVICE_TOKEN``."""
    rng = random.Random(seed)

    def rand(n: int, alphabet: str = ALNUM) -> str:
        letters = [c for c in alphabet if c.isalpha()] or list(alphabet)
        body = [rng.choice(alphabet) for _ in range(n - 2)] + [rng.choice(string.digits), rng.choice(letters)]
        rng.shuffle(body)
        return "".join(body)

    def b64url(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    kind = "RSA " + "PRIVATE KEY"
    pem = f"-----BEGIN {kind}-----\n" + "\n".join(rand(64, B64) for _ in range(6)) + f"\n-----END {kind}-----"
    basic = base64.b64encode(b"alice:" + rand(14).encode()).decode()
    aws_secret, bearer, url_pw = rand(40, B64), rand(32), rand(18)
    raw: list[tuple[str, str, str | None]] = [
        ("openai-classic", "sk-" + rand(48), None),
        ("openai-project", "sk-" + "proj-" + rand(156, URLSAFE), None),
        ("anthropic", "sk-" + "ant-api03-" + rand(93, URLSAFE) + "AA", None),
        ("openrouter", "sk-" + "or-v1-" + rand(64), None),
        ("google", "AI" + "za" + "Sy" + rand(33, URLSAFE), None),
        ("aws-access-key", "AK" + "IA" + rand(16, UPPER_DIGITS), None),
        ("aws-secret", aws_secret, f"aws_secret_access_key = {aws_secret}"),
        ("github-classic", "gh" + "p_" + rand(36), None),
        ("github-oauth", "gh" + "o_" + rand(36), None),
        ("github-fine-grained", "github" + "_pat_" + rand(22) + "_" + rand(59), None),
        ("gitlab", "gl" + "pat-" + rand(20), None),
        ("slack-bot", "xo" + "xb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24), None),
        ("huggingface", "h" + "f_" + rand(34), None),
        ("groq", "gs" + "k_" + rand(52), None),
        ("xai", "x" + "ai-" + rand(80), None),
        ("stripe-secret", "sk" + "_live_" + rand(24), None),
        ("stripe-restricted", "rk" + "_live_" + rand(24), None),
        ("jwt", ".".join([b64url({"alg": "HS256", "typ": "JWT"}), b64url({"sub": "1234567890"}), rand(43, URLSAFE)]), None),
        ("bearer-opaque", bearer, f"Authorization: Bearer {bearer}"),
        ("basic-auth", basic, f"Authorization: Basic {basic}"),
        ("private-key", pem, None),
        ("url-password", url_pw, f"postgres://app:{url_pw}@db.internal:5432/app"),
        ("logfire", "py" + "lf_v1_us_" + rand(44), None),
        ("env-value", rand(28, ALNUM + "!@#%"), None),
    ]
    return [Shape(name, secret, carried or secret) for name, secret, carried in raw]


def header_secrets(seed: int = 20240611) -> dict[str, str]:
    """Values with no recognisable shape: only the header name says they are credentials."""
    rng = random.Random(seed + 1)
    return {name: "".join(rng.choice(ALNUM) for _ in range(26)) for name in ("api-key", "X-Api-Key", "x-goog-api-key")}


def leaks(data: bytes, secrets: list[str]) -> list[str]:
    """Secrets found in ``data`` verbatim, JSON-escaped, or as a recognisable middle slice."""
    found = []
    for secret in secrets:
        forms = {secret, json.dumps(secret)[1:-1]}
        if len(secret) >= 24:
            middle = len(secret) // 2
            forms.add(secret[middle - 6 : middle + 6])
        if any(form.encode() in data for form in forms):
            found.append(secret)
    return found


SCENARIO = '''
"""Leaks every secret it is given, everywhere it can."""
import json
import os

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario

PAYLOAD = json.loads(open(os.environ["REPLAY_TEST_PAYLOAD"]).read())


def model(messages, info):
    if not any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[ToolCallPart("read_config", {})])
    return ModelResponse(parts=[TextPart("echo: " + " | ".join(PAYLOAD["carried"]))])


@scenario("secrets/leaky")
async def leaky(run: Run) -> str:
    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def read_config() -> str:
        return "config loaded:\\n" + "\\n".join(f"  credential: {c}" for c in PAYLOAD["carried"])

    headers = {"Authorization": "Bearer " + PAYLOAD["bearer"], **PAYLOAD["headers"]}
    prompt = "Please use these to call the weather API: " + " ; ".join(PAYLOAD["carried"])
    prompt += " and the service token " + os.environ["MY_SERVICE_TOKEN"]
    result = await agent.run(prompt, model_settings={"extra_headers": headers, "temperature": 0.0})
    run.observe("output", result.output)
    return result.output
'''


def prepare(project: Path) -> dict[str, str]:
    """Write the leaky scenario and its payload into ``project``; returns the env vars to set."""
    found = shapes()
    payload = {
        "carried": [s.carried for s in found if s.name != "env-value"],
        "bearer": found[0].secret,
        "headers": header_secrets(),
    }
    (project / "payload.json").write_text(json.dumps(payload))
    (project / "scenarios").mkdir(exist_ok=True)
    (project / "scenarios" / "leaky.py").write_text(SCENARIO)
    env_secret = next(s.secret for s in found if s.name == "env-value")
    return {"REPLAY_TEST_PAYLOAD": str(project / "payload.json"), ENV_NAME: env_secret}


def seeded() -> list[str]:
    """Every secret value :func:`prepare` puts into the scenario."""
    return [s.secret for s in shapes()] + list(header_secrets().values())


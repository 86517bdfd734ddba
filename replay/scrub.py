"""Scrub credentials out of everything harness-replay writes or prints.

Cassettes are committed to version control, but they are recorded with real API keys in
the environment, in request headers and sometimes in prompts, tool results or files sent
to the model. Everything written to a cassette, and everything the tool prints or writes
about a replay, therefore passes through a :class:`Scrubber` first.

Secrets are found by what they look like and where they stand, never by what happens to
be in the environment: provider key shapes (``sk-ant-…``, ``AKIA…``, ``SG.…``), context
(``password=``, ``api-key:``, ``Authorization: Bearer``, a URL's ``user:password@`` or
``?sig=``, a hex run after "token"), and values under credential-like keys. A placeholder
is ``<secret:KIND:N>``: the secret's shape and its ordinal among the secrets of that kind
in the cassette. It carries no bits of the secret (a hash of a short password can be
brute-forced), and it is the same with or without the environment variables set, so a
replay in CI gets the verdict a laptop gets. Values of credential-named environment
variables remain an extra net, applied last, with the placeholder their shape gives.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import dataclasses
import functools
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, NamedTuple, TypeVar

from ._untrusted import on_use as _on_use
from .errors import ReplayUsageError

__all__ = ["PLACEHOLDER_RE", "ScrubConfig", "Scrubber", "compile_patterns", "redact", "scrub_cassette"]

_MIN_LEN = 8  # no secret we can recognise hides in a shorter string
_MAX_PASSES = 4  # re-scan until nothing changes, so scrub() is idempotent
_MEMO_CHARS = 64 << 20
"""Characters of text :meth:`Scrubber._learned_in` may keep alive for its memo."""
_LEARN_MIN = 8  # a value found by context is scrubbed everywhere else only if this long
_INDEX_FROM = 64  # learned values past which a text's own prefixes are looked up instead of testing each value
_MAX_VALUE = 2048


# Older cassettes carry an 8-hex-digit hash in place of the ordinal; both are placeholders.
_PLACEHOLDER = r"<secret:[a-z0-9._-]{1,40}:[0-9a-f]{1,16}>"
PLACEHOLDER_RE = re.compile(_PLACEHOLDER)
_ORDINAL_RE = _on_use(r"<secret:([a-z0-9._-]{1,40}):([0-9a-f]{1,16})>")

# A token may not start in the middle of a word ("task-...", "mask-..."), but it may
# follow an underscore or punctuation ("OPENAI_API_KEY=sk-...").
_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
# Real keys hold a digit; English words with a dash do not. Looked for in the key's first 256
# characters: unbounded, the lookahead scanned the rest of the run from every "sk-" in it, and
# "sk-sk-sk-…" (no digit) made the scan quadratic — 8,000 of them took 1 s, a 1 MB text hours.
# A random base-62 key has no digit in 256 characters with a probability of about 1e-20.
_D = r"(?=[A-Za-z0-9_-]{0,256}[0-9])"


class _Shape(NamedTuple):
    kind: str
    gates: tuple[str | re.Pattern[str], ...]
    """What every match contains: the regex runs only on text holding one. Substrings (C-speed
    scans) where the shape has a distinctive literal, else a short regex led by a literal or class."""
    pattern: str
    inner: str | None = None
    """Group holding the secret when the match also holds readable context (a URL's host)."""


# Order matters only where two shapes can start at the same place: the more specific one
# (sk-ant-, sk-or-) comes before the generic sk-.
_SHAPES: list[_Shape] = [
    _Shape(
        "private-key",
        ("-----BEGIN",),
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    _Shape("anthropic", ("sk-ant-",), _B + r"sk-ant-" + _D + r"[A-Za-z0-9_-]{20,}"),
    _Shape("openrouter", ("sk-or-",), _B + r"sk-or-v\d+-[A-Za-z0-9]{20,}"),
    _Shape("openai", ("sk-",), _B + r"sk-(?:proj-|svcacct-|admin-)?" + _D + r"[A-Za-z0-9_-]{20,}"),
    _Shape(
        "stripe",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        _B + r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/]{24,})",
    ),
    _Shape("elevenlabs", ("sk_",), _B + r"sk_[a-f0-9]{40,}" + _E),
    _Shape("google", ("AIza",), _B + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    _Shape("google-oauth", ("ya29.", "GOCSPX-"), _B + r"(?:ya29\.[A-Za-z0-9_-]{20,}|GOCSPX-[A-Za-z0-9_-]{20,})"),
    _Shape("aws-access-key", ("AKIA", "ASIA", "ABIA", "ACCA"), _B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}" + _E),
    _Shape(
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    _Shape(
        "gitlab", ("glpat-", "gldt-", "glptt-", "glrt-", "glsoat-"), _B + r"gl(?:pat|dt|ptt|rt|soat)-[A-Za-z0-9_-]{20,}"
    ),
    _Shape("slack", ("xox", "xapp-"), _B + r"(?:xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})"),
    _Shape(
        "slack-webhook",
        ("hooks.slack.com/",),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<slack_v>[A-Za-z0-9_/-]{16,})",
        "slack_v",
    ),
    _Shape(
        "discord-webhook",
        ("/api/webhooks/",),
        r"discord(?:app)?\.com/api/webhooks/(?P<discord_v>[0-9]+/[A-Za-z0-9_-]{20,})",
        "discord_v",
    ),
    _Shape("discord", (re.compile(r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\."),), r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _E),
    _Shape("telegram", (":AA",), r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{30,34}(?![A-Za-z0-9_-])"),
    _Shape("sendgrid", ("SG.",), _B + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    _Shape("npm", ("npm_",), _B + r"npm_[A-Za-z0-9]{36}" + _E),
    _Shape("pypi", ("pypi-AgE",), _B + r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    _Shape("huggingface", ("hf_", "api_org_"), _B + r"(?:hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,})"),
    _Shape("groq", ("gsk_",), _B + r"gsk_[A-Za-z0-9]{20,}"),
    _Shape("xai", ("xai-",), _B + r"xai-[A-Za-z0-9]{40,}"),
    _Shape("perplexity", ("pplx-",), _B + r"pplx-[A-Za-z0-9]{40,}"),
    _Shape("replicate", ("r8_",), _B + r"r8_[A-Za-z0-9]{30,}"),
    _Shape("logfire", ("pylf_",), _B + r"pylf_[A-Za-z0-9_]{20,}"),
    _Shape("azure", ("JQQJ9",), _B + r"[A-Za-z0-9]{40,60}JQQJ9[9DH][A-Za-z0-9]{18,32}" + _E),
    _Shape("azure-ad", ("8Q~",), r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}8Q~[A-Za-z0-9_~.-]{31,34}"),
    _Shape("mailchimp", (re.compile(r"-us[0-9]"),), _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E),
    _Shape("twilio", (re.compile(r"SK[0-9a-fA-F]{32}"),), _B + r"SK[0-9a-fA-F]{32}" + _E),
    _Shape("mailgun", ("key-",), _B + r"key-[0-9a-f]{32}" + _E),
    _Shape("shopify", ("shpat_", "shpca_", "shppa_", "shpss_"), _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _Shape("databricks", ("dapi",), _B + r"dapi[0-9a-f]{32}(?:-[0-9])?" + _E),
    _Shape("digitalocean", ("_v1_",), _B + r"do[opr]_v1_[a-f0-9]{64}"),
    _Shape("linear", ("lin_api_",), _B + r"lin_api_[A-Za-z0-9]{40}"),
    _Shape("notion", ("secret_", "ntn_"), _B + r"(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})" + _E),
    _Shape("atlassian", ("ATATT",), _B + r"ATATT[A-Za-z0-9_=-]{100,}"),
    _Shape("vault", ("hvs.", "hvb."), _B + r"hv[sb]\.[A-Za-z0-9_-]{24,}"),
    _Shape("age", ("AGE-SECRET-KEY-",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _Shape("postman", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _Shape("langsmith", ("lsv2_",), _B + r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    _Shape("pinecone", ("pcsk_",), _B + r"pcsk_[A-Za-z0-9_]{40,}"),
    _Shape("tavily", ("tvly-",), _B + r"tvly-(?:dev-)?[A-Za-z0-9]{24,}"),
    _Shape("firecrawl", (re.compile(r"fc-[a-f0-9]{32}"),), _B + r"fc-[a-f0-9]{32}" + _E),
    _Shape("supabase", ("sbp_",), _B + r"sbp_[a-f0-9]{40}"),
    _Shape("newrelic", ("NRAK-",), r"NRAK-[A-Z0-9]{27}"),
    _Shape("grafana", ("glsa_", "glc_"), _B + r"(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})"),
    _Shape("doppler", ("dp.",), _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    _Shape("cerebras", ("csk-",), _B + r"csk-[a-z0-9]{40,}"),
    _Shape("airtable", (re.compile(r"pat[A-Za-z0-9]{14}\."),), _B + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _E),
    _Shape("figma", ("figd_",), _B + r"figd_[A-Za-z0-9_-]{30,}"),
    _Shape("square", ("sq0",), _B + r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    _Shape("razorpay", ("rzp_",), _B + r"rzp_(?:live|test)_[A-Za-z0-9]{14,}"),
    _Shape("heroku", ("HRKU-",), _B + r"HRKU-[A-Za-z0-9_-]{30,}"),
    _Shape("fireworks", ("fw_",), _B + r"fw_[A-Za-z0-9]{24,}"),
    _Shape("openai-session", ("sess-",), _B + r"sess-[A-Za-z0-9]{40}" + _E),
    _Shape("jwt", ("eyJ",), _B + r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
]
_GROUP = {i: f"s{i}" for i in range(len(_SHAPES))}
_KIND_OF_GROUP = {f"s{i}": s.kind for i, s in enumerate(_SHAPES)}
_INNER_OF_GROUP = {f"s{i}": s.inner for i, s in enumerate(_SHAPES) if s.inner}
_GATES: list[tuple[str | re.Pattern[str], int]] = [(g, i) for i, s in enumerate(_SHAPES) for g in s.gates]


def _present(gates: list[tuple[str | re.Pattern[str], int]], text: str) -> list[tuple[str | re.Pattern[str], int]]:
    return [(g, i) for g, i in gates if (g in text if isinstance(g, str) else g.search(text) is not None)]


@functools.cache
def _all_shapes_re() -> re.Pattern[str]:
    """Every shape in one regex: compiled on first use (7 ms, a fortieth of ``replay show``)."""
    return re.compile("|".join(f"(?P<s{i}>{s.pattern})" for i, s in enumerate(_SHAPES)))


@functools.lru_cache(maxsize=256)
def _shapes_re(active: tuple[int, ...]) -> re.Pattern[str]:
    """One regex for the shapes whose gates a text holds; placeholders are matched first and kept."""
    alternatives = [f"(?P<ph>{_PLACEHOLDER})"] + [f"(?P<{_GROUP[i]}>{_SHAPES[i].pattern})" for i in active]
    return re.compile("|".join(alternatives))


@functools.lru_cache(maxsize=4096)
def _shape_kind(secret: str) -> str | None:
    """The kind a whole value has by its shape alone, so every detector labels it alike."""
    m = _all_shapes_re().fullmatch(secret)
    if m is None or m.lastgroup is None or m.lastgroup in _INNER_OF_GROUP:
        return None
    return _KIND_OF_GROUP[m.lastgroup]


# --------------------------------------------------------------------------- context

# Credential-like key names, by word (so ``max_tokens`` or ``input_tokens`` stay readable).
_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_CLASS_OF_WORD = {
    "password": "password", "passwd": "password", "passphrase": "password", "pwd": "password",
    "secret": "secret", "token": "token", "accesstoken": "token", "apikey": "api-key",
    "authorization": "auth", "auth": "auth", "credential": "credential", "credentials": "credential",
    "cookie": "cookie", "sig": "signature", "session": "session",
    "sessionid": "session", "passcode": "password",
}  # fmt: skip
_CLASS_OF_PAIR = {
    ("api", "key"): "api-key", ("access", "key"): "key", ("private", "key"): "key", ("secret", "key"): "key",
    ("auth", "key"): "key", ("account", "key"): "key", ("subscription", "key"): "key", ("master", "key"): "key",
    ("signing", "key"): "key", ("encryption", "key"): "key", ("client", "key"): "key", ("service", "key"): "key",
    ("shared", "key"): "key", ("app", "key"): "key", ("license", "key"): "key", ("admin", "key"): "key",
    ("access", "signature"): "signature", ("request", "signature"): "signature",
}  # fmt: skip
# A credential word followed by one of these names something about the credential, not it.
_NOT_SECRET_LAST = frozenset(
    {
        "count", "counts", "limit", "limits", "type", "types", "name", "names", "url", "uri", "file", "path",
        "length", "len", "size", "usage", "endpoint", "env", "var", "prefix", "format", "hint", "field", "header",
        "expires", "expiry", "expiration", "ttl", "host", "location", "policy", "required", "provider",
        "version", "store", "manager", "helper", "dir", "kind", "mode", "tokens", "budget", "window", "id",
        "ids", "timeout", "scope", "scopes", "source", "method", "encoding", "rotation", "label", "description",
        "set", "present", "valid", "enabled", "max", "min", "total",
    }
)  # fmt: skip
_NOT_VALUES = frozenset(
    {
        "true", "false", "null", "none", "nil", "undefined", "n/a", "yes", "no", "empty", "required",
        "optional", "string", "str", "int", "bool", "redacted", "hidden", "masked", "secret", "password",
        "token", "bearer", "basic", "here", "your",
    }
)  # fmt: skip
_REFERENCE_STARTS = ("$", "{{", "%(", "<", "os.environ", "os.getenv", "env(", "process.env", "/", "./", "~/", "../")
_NAME_STR = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
_CONTEXT_WORD_RE = _on_use(r"(?i:pass|pwd|secret|token|key|auth|credential|cookie|sig|session|(?<=[?&])code(?==))")
_CONTEXT_GATES = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "sig", "session", "?code=", "&code=")
"""Where a credential-like name may stand. ``code`` only as a URL query's parameter (an Azure Functions key,
``?code=…``; :func:`secret_class` with ``query``): anywhere else it is a word of every coding transcript."""
_VALUE_RE = _on_use(
    r"[\"']?[ \t]*(?::=|=>|[:=])[ \t]*"
    r"(?:(?i:bearer|basic|token|digest|apikey|key|sso-key|otp|sharedaccesssignature)[ \t]+)?"
    r"(?:(?P<o>[\"'`])(?P<qv>[^\"'`\r\n]{1,2048})(?P=o)|(?P<v>[^\s\"'`,;&<>(){}\[\]|]{1,2048}))"
)
_HEX_NEAR_RE = _on_use(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])(?:[0-9a-f]{32,}|[0-9A-F]{32,})(?![0-9A-Za-z])")
_HEX_WORDS = frozenset({"token", "key", "secret", "password", "auth", "credential", "sig", "session", "pass"})

_AUTH_RE = _on_use(
    f"(?P<ph>{_PLACEHOLDER})"
    r"|(?i:\bbearer)\s+(?P<bearer>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*)"
    r"|(?i:\bbasic)\s+(?P<basic>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
)
_URL_RE = _on_use(
    f"(?P<ph>{_PLACEHOLDER})"
    r"|://[^\s/:@<>\"']*:(?P<url_password>[^\s/@<>\"']+)@"
    r"|://(?P<url_token>(?=[A-Za-z0-9._~-]*[0-9])[A-Za-z0-9._~-]{16,})@"
)
# An AWS secret access key is just 40 base64 characters; only its surroundings give it
# away, so it is looked for only in strings that talk about AWS.
_AWS_CONTEXT_RE = _on_use(r"(?i:(?<![a-z])aws|secret_?access_?key)|(?:AKIA|ASIA)[0-9A-Z]{16}")
_AWS_SECRET_RE = _on_use(f"(?P<ph>{_PLACEHOLDER})" + r"|(?<![A-Za-z0-9/+])(?P<aws>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")

_PEM_GATE = "-----BEGIN"  # the one gate with a space after it: not inside a run
_JSON_ESCAPE_RE = _on_use(r"\\(?:u[0-9a-fA-F]{4}|.)")
_ENV_NAME_RE = re.compile(r"key|token|secret|passw|auth|credential|cookie", re.IGNORECASE)
_ENV_NOT_SECRET = frozenset({"PWD", "OLDPWD", "GPG_AGENT_INFO", "SSH_AUTH_SOCK", "XAUTHORITY", "KEYTIMEOUT"})
_RUN_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.~+/=:"
_RUN_MASK = bytes(0x61 if b in _RUN_CHARS else 0x20 for b in range(256))  # run character -> "a", else " "
_RUN_MIN = b"a" * 15


def _token_runs(text: str) -> str:
    """Every distinct run of 15+ token characters (``[A-Za-z0-9_\\-.~+/=:]{15,}``), joined by spaces.

    A regex ``findall`` restarts at every character of every shorter word: a fifth of a
    recording's screen. The run characters are ASCII, so in UTF-8 a run is the same bytes
    and any other character is bytes outside the set; masked to two letters, C-speed
    ``bytes.find`` jumps from run to run (≈ 4x faster on a recording's JSON).
    """
    data = text.encode("utf-8", "surrogatepass")
    mask = data.translate(_RUN_MASK)
    runs: set[bytes] = set()
    start = mask.find(_RUN_MIN)
    while start >= 0:  # a hit is a run's first character: one further left would have been found first
        end = mask.find(b" ", start + len(_RUN_MIN))
        if end < 0:
            end = len(mask)
        runs.add(data[start:end])
        start = mask.find(_RUN_MIN, end)
    return " ".join(run.decode("ascii") for run in runs)


_HEX_MASK = bytes(0x61 if b in b"0123456789abcdefABCDEF" else 0x20 for b in range(256))
_HEX_RUN = b"a" * 32


def _has_hex_run(text: str) -> bool:
    """Whether ``text`` holds 32 hex digits in a row: what every ``_HEX_NEAR_RE`` match holds (an
    ``endpos`` cut shortens a run, never lengthens one). Hex digits are ASCII, so in UTF-8 any
    other character is bytes outside the set (``_token_runs``' trick): one C-speed pass."""
    return _HEX_RUN in text.encode("utf-8", "surrogatepass").translate(_HEX_MASK)


def _env_secret(name: str, value: str) -> bool:
    """Whether an environment variable's value is a credential to scrub verbatim.

    By name (``*_API_KEY``, ``*TOKEN*``…), never a path (``SSH_AUTH_SOCK``, a key *file*):
    a directory would turn every path the tool prints into a placeholder.
    """
    if name.upper() in _ENV_NOT_SECRET or not _ENV_NAME_RE.search(name) or len(value) < _MIN_LEN:
        return False
    if value.strip() != value or value.startswith(("/", "~", "./", "../")) or value[1:3] in (":\\", ":/"):
        return False
    return value.lower() not in _NOT_VALUES
_TEXT_MEDIA = ("text/", "application/json", "application/yaml", "application/x-yaml", "application/xml",
               "application/toml", "application/x-sh", "application/javascript", "application/x-www-form-urlencoded",
               "+json", "+xml", "+yaml")  # fmt: skip


@functools.lru_cache(maxsize=8192)
def secret_class(name: str, query: bool = False) -> str | None:
    """The kind of credential a key name announces (``DB_PASSWORD`` → password), or None.

    ``query`` marks a URL query parameter, where a bare ``key`` or ``sig`` is a credential too.
    """
    words = [w.lower() for w in _WORD_RE.findall(name)]
    if not words:
        return None
    if query and words[-1] in ("key", "sig", "code", "signature"):
        return "api-key" if words[-1] == "key" else "signature"
    if words[-1] in _NOT_SECRET_LAST and not (words[-1] == "id" and "session" in words):
        return None
    for a, b in itertools.pairwise(words):
        kind = _CLASS_OF_PAIR.get((a, b))
        if kind:
            return kind
    for w in words:
        kind = _CLASS_OF_WORD.get(w)
        if kind:
            return kind
    if words[-1] == "pass":  # DB_PASS, but not "bypass" or "pass: 3"
        return "password"
    return None


def _credible(value: str, kind: str) -> bool:
    """Whether a value after ``name=`` looks like a credential rather than prose or a reference."""
    v = value.strip()
    if len(v) < 4 or len(v) > _MAX_VALUE or v.lower() in _NOT_VALUES or PLACEHOLDER_RE.search(v):
        return False
    if v.startswith(_REFERENCE_STARTS) or not set(v) - set("*x•.-_ X"):
        return False
    if kind == "password":
        return True
    if len(v) < 8 or any(c.isspace() for c in v) or v.isdigit():
        return False
    has_digit = any(c.isdigit() for c in v)
    has_symbol = not v.isalnum()
    mixed = any(c.isupper() for c in v) and any(c.islower() for c in v) and len(v) >= 16
    return has_digit or has_symbol or mixed


def _looks_like_basic(token: str) -> bool:
    """'Basic' is also an English word; only a base64 ``user:password`` is a credential."""
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


def compile_patterns(patterns: Iterable[str], source: object = "pyproject.toml") -> list[re.Pattern[str]]:
    """User ``scrub-patterns``; a bad one is a one-line error naming where it came from."""
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except (re.error, TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ReplayUsageError(
                f"{source}: [tool.replay] scrub-patterns: {p!r} is not a valid regular expression ({exc})"
            ) from None
    return out


@dataclass
class ScrubConfig:
    """What to scrub beyond the built-in shapes, and what to leave alone."""

    patterns: list[str] = field(default_factory=list)
    """Extra regular expressions; every match is replaced."""
    exempt_paths: list[str] = field(default_factory=list)
    """fnmatch patterns on dotted paths (``requests.*.settings.temperature``) never scrubbed."""
    env: Mapping[str, str] | None = None
    """Where to find secret values to scrub verbatim; ``None`` means ``os.environ``."""
    source: str = "pyproject.toml"
    """Where ``patterns`` came from, for the error a bad one gives."""


class _Span(NamedTuple):
    start: int
    end: int
    secret: str
    kind: str


class Scrubber:
    """Replaces every credential in a JSON-like value with ``<secret:KIND:N>``.

    One scrubber per cassette (or per output): ordinals count within it, and a secret
    seen twice gets the same placeholder both times.
    """

    def __init__(self, config: ScrubConfig | None = None) -> None:
        config = config or ScrubConfig()
        env = os.environ if config.env is None else config.env
        # Values of variables such as OPENAI_API_KEY are scrubbed wherever they appear,
        # whatever their shape; short values ("1", "true") would scrub ordinary text.
        self._env_values = frozenset(v for k, v in env.items() if _env_secret(k, v))
        self._user = compile_patterns(config.patterns, config.source)
        self._exempt = list(config.exempt_paths)
        self._placeholders: dict[str, str] = {}
        self._counts: Counter[str] = Counter()
        self._learned: set[str] = set()
        """Values found by context (``password=…``): scrubbed wherever else they appear."""
        self._use_env = True
        self._gates = _GATES
        """Shape gates worth testing: all, or those a cassette's whole text holds (see :func:`scrub_cassette`)."""
        self._learned_memo: dict[str, list[str]] = {}
        """What :meth:`_learned_in` found in a text, while no value has been learned since."""
        self._learned_memo_chars = 0
        self._learned_index: dict[str, list[str]] | None = None
        """Learned values by their first ``_LEARN_MIN`` characters, once there are many (see :meth:`_learned_in`)."""
        self._literal_res: dict[frozenset[str], re.Pattern[str]] = {}
        """The literal alternation for each set of values a text holds (see :meth:`_literals`)."""
        self._seen: dict[str, str] = {}
        """Scrubbed form of every text seen: keys and repeated history text recur constantly."""

    # ------------------------------------------------------------------ placeholders

    def placeholder(self, secret: str, kind: str) -> str:
        """The stand-in for ``secret``: its shape (else ``kind``) and an ordinal; stable within this scrubber."""
        known = self._placeholders.get(secret)
        if known is not None:
            return known
        label = _shape_kind(secret) or kind
        label = re.sub(r"[^a-z0-9._-]+", "-", label.lower()).strip("-")[:40] or "value"
        self._counts[label] += 1
        ph = self._placeholders[secret] = f"<secret:{label}:{self._counts[label]}>"
        return ph

    def _learn(self, secret: str) -> None:
        if len(secret) >= _LEARN_MIN and secret not in self._learned:
            self._learned.add(secret)
            self._learned_memo.clear()
            self._learned_memo_chars = 0
            if self._learned_index is not None:
                self._learned_index.setdefault(secret[:_LEARN_MIN], []).append(secret)

    def _learned_in(self, text: str) -> list[str]:
        """The learned values ``text`` holds.

        Testing each value with ``in`` is quickest for a few, but a recording's replies may hold
        thousands (``password=…`` in every answer of an untrusted cassette): past
        ``_INDEX_FROM`` values, the text's own ``_LEARN_MIN``-character prefixes are looked up in
        an index of the values' prefixes instead, linear in the text whatever their number.
        """
        if len(self._learned) <= _INDEX_FROM:
            return [lit for lit in self._learned if lit in text]
        memo = self._learned_memo.get(text)
        if memo is not None:  # one text is screened, then walked, then written: each scan is a pass over all of it
            return memo
        if len(self._learned_memo) >= 1024 or self._learned_memo_chars + len(text) > _MEMO_CHARS:
            self._learned_memo.clear()  # what it holds alive stays bounded, however large the texts
            self._learned_memo_chars = 0
        found = self._learned_memo[text] = self._learned_scan(text)
        self._learned_memo_chars += len(text)
        return found

    def _learned_scan(self, text: str) -> list[str]:
        index = self._learned_index
        if index is None:
            index = self._learned_index = {}
            for lit in self._learned:
                index.setdefault(lit[:_LEARN_MIN], []).append(lit)
        starts: dict[str, list[int]] = {}
        for i in [i for i in range(len(text) - _LEARN_MIN + 1) if text[i : i + _LEARN_MIN] in index]:
            starts.setdefault(text[i : i + _LEARN_MIN], []).append(i)
        found: list[str] = []
        for gram, at in starts.items():
            if len(at) > 64:  # a prefix the text repeats: one scan per value beats a check per place
                found += [lit for lit in index[gram] if lit in text]
            else:  # where the prefix stands: `lit in text` for each of thousands of values was quadratic
                found += [lit for lit in index[gram] if any(text.startswith(lit, i) for i in at)]
        return found

    # ------------------------------------------------------------------ values

    def scrub(self, value: Any, path: str = "") -> Any:
        """Return a scrubbed copy of ``value``; ``path`` is its dotted location (for exempt paths).

        A value found by context late in the walk may stand raw earlier: then walk again.
        """
        learned = len(self._learned)
        out = self._walk(value, path if self._exempt else None)
        if len(self._learned) != learned:
            self._seen.clear()
            out = self._walk(value, path if self._exempt else None)
        return out

    def scrub_any(self, value: Any, _depth: int = 0) -> Any:
        """Like :meth:`scrub`, also through dataclasses and pydantic models (reports, results)."""
        if _depth == 0:
            learned = len(self._learned)
            out = self.scrub_any(value, 1)
            if len(self._learned) != learned:
                self._seen.clear()
                out = self.scrub_any(value, 1)
            return out
        if _depth > 64:
            return value
        if isinstance(value, (str, list, tuple, Mapping)) and not _has_objects(value, 0):
            return self._walk(value, None)
        if isinstance(value, Mapping):
            return {self.scrub_any(k, _depth + 1): self.scrub_any(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            items = [self.scrub_any(v, _depth + 1) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            new = copy.copy(value)
            for f in dataclasses.fields(value):
                object.__setattr__(new, f.name, self.scrub_any(getattr(value, f.name), _depth + 1))
            return new
        fields_ = getattr(type(value), "model_fields", None)
        if isinstance(fields_, dict) and hasattr(value, "model_copy"):
            update = {name: self.scrub_any(getattr(value, name), _depth + 1) for name in fields_}
            return value.model_copy(update=update)
        return value

    def _walk(self, value: Any, path: str | None) -> Any:
        if path is not None and self._exempt and self._is_exempt(path):
            return _copy(value)
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            binary = _binary_data(value)
            for key, item in value.items():
                child = None if path is None else (f"{path}.{key}" if path else str(key))
                if not isinstance(key, str):
                    out[key] = self._walk(item, child)
                    continue
                new_key = self.scrub_text(key)
                kind = secret_class(key)
                if key == "data" and binary is not None:
                    out[new_key] = self._scrub_binary(item, binary)
                elif kind is not None and not (child is not None and self._is_exempt(child)):
                    out[new_key] = self._scrub_by_key(item, kind, child)
                else:
                    out[new_key] = self._walk(item, child)
            return out
        if isinstance(value, (list, tuple)):
            if path is None:
                items = [self._walk(item, None) for item in value]
            else:
                items = [self._walk(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        return value

    def _is_exempt(self, path: str) -> bool:
        return any(fnmatchcase(path, p) for p in self._exempt)

    def _scrub_by_key(self, value: Any, kind: str, path: str | None) -> Any:
        """Under ``Authorization`` or ``api_key`` every string is a secret, even 'hunter2'."""
        if isinstance(value, str):
            found = self.scrub_text(value)
            if not value or found != value or PLACEHOLDER_RE.search(found):
                return found
            self._learn(value)
            return self.placeholder(value, kind)
        if isinstance(value, (list, tuple)):
            items = [self._scrub_by_key(item, kind, None if path is None else f"{path}.{i}") for i, item in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        return self._walk(value, path)

    def _scrub_binary(self, data: str, media_type: str) -> str:
        """A file sent to the model (``BinaryContent``) is base64: decode text-like data, scrub, re-encode."""
        urlsafe = "-" in data or "_" in data or not ("+" in data or "/" in data)
        try:
            raw = (base64.urlsafe_b64decode if urlsafe else base64.b64decode)(data.encode("ascii"))
        except (binascii.Error, ValueError, UnicodeEncodeError):
            return self.scrub_text(data)
        textlike = media_type.startswith(_TEXT_MEDIA) or media_type.endswith(_TEXT_MEDIA[-3:])
        try:
            text = raw.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            if not textlike:
                return data  # an image or a PDF: nothing readable to scrub
            text, encoding = raw.decode("latin-1"), "latin-1"
        new = self.scrub_text(text)
        if new == text:
            return data
        encoded = new.encode(encoding, "replace")
        return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(encoded).decode("ascii")

    # ------------------------------------------------------------------ text

    def scrub_text(self, text: str) -> str:
        """Replace the credentials inside ``text``, keeping the words around them."""
        if len(text) < _MIN_LEN:
            return text
        done = self._seen.get(text)
        if done is not None:
            return done
        original = text
        if "<secret:" in text:
            self._count_existing(text)
        for _ in range(_MAX_PASSES):
            new = self._pass(text)
            if new == text:
                break
            text = new
        self._seen[original] = text
        return text

    def _count_existing(self, text: str) -> None:
        """Placeholders already in the text (a replay serves scrubbed answers) take their ordinals.

        The recording numbered those secrets at this point of the walk; counting them keeps
        the replay's later secrets on the numbers the recording gave them.
        """
        for m in _ORDINAL_RE().finditer(text):
            n = m.group(2)
            if n.isdigit() and len(n) <= 6:
                self._counts[m.group(1)] = max(self._counts[m.group(1)], int(n))

    def _pass(self, text: str) -> str:
        active = tuple(sorted({i for _, i in _present(self._gates, text)}))
        if active:
            text = _shapes_re(active).sub(self._replace_shape, text)
        low = text.lower()
        if "bearer" in low or "basic" in low:
            text = _AUTH_RE().sub(self._replace_group, text)
        if "://" in text and "@" in text:
            text = _URL_RE().sub(self._replace_group, text)
        if any(g in low for g in _CONTEXT_GATES):
            text = self._context(text, low)
        if ("aws" in low or "access" in low or "AKIA" in text or "ASIA" in text) and _AWS_CONTEXT_RE().search(text):
            text = _AWS_SECRET_RE().sub(self._replace_group, text)
        text = self._literals(text)
        for pattern in self._user:
            text = self._sub_user(pattern, text)
        return text

    def _replace_shape(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        if group == "ph" or group is None:
            return m.group()
        inner = _INNER_OF_GROUP.get(group)
        if inner is None:
            return self.placeholder(m.group(), _KIND_OF_GROUP[group])
        start, end = m.span(inner)
        secret = m.group(inner)
        self._learn(secret)
        return m.string[m.start() : start] + self.placeholder(secret, _KIND_OF_GROUP[group]) + m.string[end : m.end()]

    def _replace_group(self, m: re.Match[str]) -> str:
        """A context match (``Bearer x``, ``://u:p@``, an AWS secret): only the named group is replaced."""
        kind = m.lastgroup
        if kind == "ph" or kind is None:
            return m.group()
        secret = m.group(kind)
        if kind == "basic" and not _looks_like_basic(secret):
            return m.group()
        if PLACEHOLDER_RE.fullmatch(secret):
            return m.group()
        start, end = m.span(kind)
        self._learn(secret)
        label = {"url_password": "url-password", "url_token": "url-token", "aws": "aws-secret"}.get(kind, kind)
        return m.string[m.start() : start] + self.placeholder(secret, label) + m.string[end : m.end()]

    def _context(self, text: str, low: str) -> str:
        """``password=…``, ``"api_key": "…"``, ``?sig=…``, ``Password=…;`` and hex runs after an auth word."""
        spans = _find_context(text, low)
        if not spans:
            return text
        out, pos = [], 0
        for sp in spans:
            out += [text[pos : sp.start], self.placeholder(sp.secret, sp.kind)]
            self._learn(sp.secret)
            pos = sp.end
        out.append(text[pos:])
        return "".join(out)

    def _literals(self, text: str) -> str:
        """The learned values and (when enabled) the environment's: replaced wherever they appear."""
        present = frozenset(
            self._learned_in(text) + ([lit for lit in self._env_values if lit in text] if self._use_env else [])
        )
        if not present:
            return text
        # Only the literals this text holds: one that is not in it cannot match anywhere, so the
        # alternation gives what the whole set's would. Compiling the whole set again on every
        # newly learned value was quadratic in the secrets a recording holds (≈ 15 ms a compile
        # at 500 values); the few present in one text compile in ≈ 80 µs, and recur.
        pattern = self._literal_res.get(present)
        if pattern is None:
            if len(self._literal_res) >= 256:
                self._literal_res.clear()
            ordered = sorted(present, key=len, reverse=True)  # longest first: a value containing another wins
            pattern = self._literal_res[present] = re.compile(
                f"(?P<ph>{_PLACEHOLDER})|(?P<lit>" + "|".join(map(re.escape, ordered)) + ")"
            )

        def replace(m: re.Match[str]) -> str:
            if m.lastgroup == "ph":
                return m.group()
            return self.placeholder(m.group(), "env")

        return pattern.sub(replace, text)

    def _sub_user(self, pattern: re.Pattern[str], text: str) -> str:
        # A broad user pattern must not eat into placeholders already written.
        taken = _Placeholders(text)

        def replace(m: re.Match[str]) -> str:
            s, e = m.span()
            if s == e or taken.overlaps(s, e):
                return m.group()
            return self.placeholder(m.group(), "custom")

        return pattern.sub(replace, text)

    def _scrub_cassette(self, c: Any) -> Any:
        """What the scenario produced first, what the model answered last.

        A replay serves the recorded answers, already scrubbed: their secrets arrive as
        placeholders, which count (:meth:`_count_existing`) but teach no value. Numbering
        the live data (requests, names, runs, outcome) first gives every secret the
        ordinal the recording gave it, whichever answer also carried it.
        """
        answers = {ex.response for ex in c.exchanges if ex.response is not None}
        served = {"events", "usage", "error", "wire"}
        messages = list(c.messages)
        for i, m in enumerate(c.messages):
            if i not in answers:
                messages[i] = self._walk(m, f"messages.{i}" if self._exempt else None)
        first = self._scrub_model(c, "", skip={"messages", "exchanges"})
        exchanges = [self._scrub_model(ex, f"exchanges.{i}", skip=served) for i, ex in enumerate(c.exchanges)]
        for i in sorted(answers):
            if 0 <= i < len(messages):
                messages[i] = self._walk(c.messages[i], f"messages.{i}" if self._exempt else None)
        exchanges = [
            done.model_copy(update=self._model_update(ex, f"exchanges.{i}", only=served))
            for i, (ex, done) in enumerate(zip(c.exchanges, exchanges, strict=True))
        ]
        return first.model_copy(update={"messages": messages, "exchanges": exchanges})

    def _scrub_model(
        self, obj: Any, path: str, *, skip: frozenset[str] | set[str] = frozenset(), only: set[str] | None = None
    ) -> Any:
        return obj.model_copy(update=self._model_update(obj, path, skip=skip, only=only))

    def _model_update(
        self, obj: Any, path: str, *, skip: frozenset[str] | set[str] = frozenset(), only: set[str] | None = None
    ) -> dict[str, Any]:
        """A pydantic record's scrubbed fields; of the header only the role names (ids and versions stay)."""
        update: dict[str, Any] = {}
        header = type(obj).__name__ == "Header"
        for name in type(obj).model_fields:
            if (header and name != "roles") or name in skip or (only is not None and name not in only):
                continue
            value = getattr(obj, name)
            child = f"{path}.{name}" if path else name
            if header:
                update[name] = {self.scrub_text(k): self.scrub_text(v) for k, v in value.items()}
            elif _is_model(value):
                update[name] = self._scrub_model(value, child)
            elif isinstance(value, list) and value and _is_model(value[0]):
                update[name] = [self._scrub_model(v, f"{child}.{i}") for i, v in enumerate(value)]
            elif isinstance(value, (str, list, dict, tuple)):
                update[name] = self._walk(value, child if self._exempt else None)
        return update

    # ------------------------------------------------------------------ screening

    def _might_hold(self, text: str | None) -> bool:
        """Whether scrubbing the values whose JSON text is ``text`` could change anything (None: unknown, yes).

        Most cassettes hold no credential, and walking every node costs more than the
        recording it protects. Every detector needs a fixed substring (a shape's prefix,
        a context word, ``://``, a binary part), which JSON escaping leaves intact, so
        C-speed substring scans decide: a yes may be needless, a no is never wrong.
        """
        return text is None or self._text_might_hold(text) or self._env_in(text)

    def _text_might_hold(self, text: str) -> bool:
        """The screen, on a JSON text: run every detector once over the whole of it.

        JSON escapes become spaces first, so ``\\npassword=`` still starts a word. Keys are
        checked by name (a value under ``api_key`` is a secret whatever it looks like). On
        the way, the shape gates the text holds are kept: the walk then tests only those.
        """
        if self._user or '"kind": "binary"' in text or '"kind":"binary"' in text:
            return True  # user patterns can match anything; files are base64 until decoded
        if "\\" in text:
            text = _JSON_ESCAPE_RE().sub(" ", text)
        # Every shape is a run of 15+ token characters: look for gates in those runs only.
        runs = _token_runs(text)  # each distinct run once: keys and ids repeat
        present = _present(_GATES, runs) + ([(_PEM_GATE, 0)] if _PEM_GATE in text else [])
        self._gates = present
        if present and _shapes_re(tuple(sorted({i for _, i in present}))).search(text) is not None:
            return True
        low = text.lower()
        if ("bearer" in low or "basic" in low) and _AUTH_RE().search(text):
            return True
        if "://" in text and "@" in text and _URL_RE().search(text):
            return True
        if ("aws" in low or "access" in low or "AKIA" in text or "ASIA" in text) and _AWS_CONTEXT_RE().search(text):
            if _AWS_SECRET_RE().search(text):
                return True
        # Any credential-like name counts, whatever follows: a JSON key's value is a secret whatever it looks like.
        # (No pre-check that a context word occurs: finding none is the same scans as finding where they stand.)
        return bool(_find_context(text, low, screen=True, runs=runs))

    def _env_in(self, text: str) -> bool:
        return any(v in text or json.dumps(v, ensure_ascii=False)[1:-1] in text for v in self._env_values)


_T = TypeVar("_T")


def _word_hits(text: str, low: str) -> list[tuple[int, int]]:
    """Where the context words stand, found with C-speed ``str.find`` on the lower-cased text."""
    if len(low) != len(text):  # a few characters change length when lower-cased: positions would drift
        return [m.span() for m in _CONTEXT_WORD_RE().finditer(text)]
    hits = []
    for word in _CONTEXT_GATES:
        pos = low.find(word)
        inner = 1 if word[0] in "?&" else 0  # "?code=": the hit is the name between
        while pos >= 0:
            hits.append((pos + inner, pos + len(word) - inner))
            pos = low.find(word, pos + 1)
    hits.sort()
    return hits


class _Placeholders:
    """The placeholders already in a text, for "is this position / span inside one?".

    A replay's result holds the recording's placeholders, thousands of them in a long one;
    testing every hit against every placeholder was quadratic. They come from ``finditer``,
    so they are sorted and never overlap: a bisection finds the only one that can contain
    a position, or overlap a span.
    """

    def __init__(self, text: str) -> None:
        self.spans = [m.span() for m in PLACEHOLDER_RE.finditer(text)] if "<secret:" in text else []
        self.starts = [s for s, _ in self.spans]

    def __bool__(self) -> bool:
        return bool(self.spans)

    def holds(self, pos: int) -> bool:
        i = bisect.bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.spans[i][1]

    def overlaps(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` overlaps one (ends are sorted too: the last one starting before ``end`` decides)."""
        i = bisect.bisect_left(self.starts, end) - 1
        return i >= 0 and self.spans[i][1] > start


def _find_context(text: str, low: str, *, screen: bool = False, runs: str | None = None) -> list[_Span]:
    """The values a credential-like name announces, and hex runs right after an auth word.

    ``screen`` stops at the first credential-like name, value or not (see ``_text_might_hold``).
    ``runs``: the text's token runs (``_token_runs(text)``) when the caller has them. Hex digits are
    run characters, so 32 of them in a row lie inside one run of the text and the runs hold them
    exactly when the text does: the hex pre-check reads the runs (a recording's screen: ≈ 16 K
    characters instead of ≈ 536 K at 60 turns, one encode and mask of the whole text fewer).
    """
    hits = _word_hits(text, low)
    if not hits:
        return []
    taken = _Placeholders(text)
    spans: list[_Span] = []
    last = 0
    n = len(text)
    hexy: bool | None = None
    """Whether the text holds 32 hex characters in a row anywhere, asked once: a hex token needs them."""
    cleared: set[str] = set()
    """Surroundings a screen already found nothing in: it meets the same key names thousands of
    times. A hit's outcome depends only on ``text[hs - 41 : he + 60]`` (the name, the character
    before it, the hex window), so an identical window gives the identical nothing."""
    for hs, he in hits:
        if hs < last or (taken and taken.holds(hs)):
            continue
        if screen:
            window = text[hs - 41 : he + 60] if hs >= 41 else f"{hs}:{text[: he + 60]}"
            if window in cleared:
                continue
            cleared.add(window)
        left, right = text[max(0, hs - 40) : hs], text[he : he + 40]
        s = hs - len(left) + len(left.rstrip(_NAME_STR))
        e = he + len(right) - len(right.lstrip(_NAME_STR))
        kind = secret_class(text[s:e], s > 0 and text[s - 1] in "?&")
        if screen and kind is not None:
            return [_Span(s, e, text[s:e], kind)]
        if kind is not None:
            vm = _VALUE_RE().match(text, e)
            if vm is not None:
                group = "qv" if vm.group("qv") is not None else "v"
                value = vm.group(group)
                if group == "v":  # "the secret: patience." ends a sentence, not a password
                    value = value.rstrip(".,!?:")
                if _credible(value, kind):
                    start = vm.start(group)
                    spans.append(_Span(start, start + len(value), value, kind))
                    last = start + len(value)
                    continue
        if low[hs:he] in _HEX_WORDS:
            if hexy is None:
                hexy = _has_hex_run(text if runs is None else runs)
            if not hexy:  # a recording's usage keys: a regex search after every "…_tokens" finding nothing
                continue
            hm = _HEX_NEAR_RE().search(text, he, min(n, he + 60))
            if hm is not None and not taken.holds(hm.start()):
                spans.append(_Span(hm.start(), hm.end(), hm.group(), "hex-token"))
                last = hm.end()
    return spans


def _has_objects(value: Any, depth: int) -> bool:
    """Whether plain data holds a dataclass or model somewhere (then :meth:`Scrubber.scrub_any` recurses itself)."""
    if depth > 64:
        return False
    if isinstance(value, Mapping):
        return any(_has_objects(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_objects(v, depth + 1) for v in value)
    return not (value is None or isinstance(value, (str, int, float, bool, bytes)))


def _is_model(value: Any) -> bool:
    """A pydantic model, told without importing pydantic (``replay show`` starts without it)."""
    return isinstance(getattr(type(value), "model_fields", None), dict) and hasattr(value, "model_copy")


def _binary_data(d: Mapping[Any, Any]) -> str | None:
    """The media type of a dumped ``BinaryContent`` (``{"kind": "binary", "data": <base64>}``), else None."""
    if isinstance(d.get("data"), str) and (d.get("kind") == "binary" or "media_type" in d):
        media = d.get("media_type")
        return media.lower() if isinstance(media, str) else ""
    return None


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value


# --------------------------------------------------------------------------- cassettes

_M = TypeVar("_M")


_STAMPS = ("timestamp", "run_id", "conversation_id")


def _stamp_free(message: Any) -> bytes:
    """A message's identity without the stamps a re-run gives it anew (its and its parts' time, run ids)."""
    import msgpack

    if not isinstance(message, dict):
        return msgpack.packb(message, use_bin_type=True, default=str)  # type: ignore[no-any-return]
    # Copied in C and the stamps deleted, rather than rebuilt key by key: a replay keys every
    # message of both cassettes (606 in a 60-turn one). Same keys in the same order as before.
    bare = dict(message)
    for stamp in _STAMPS:
        if stamp in bare:
            del bare[stamp]
    parts = bare.get("parts")
    if isinstance(parts, list):
        free = []
        for part in parts:
            if isinstance(part, dict) and "timestamp" in part:
                part = dict(part)
                del part["timestamp"]
            free.append(part)
        bare["parts"] = free
    return msgpack.packb(bare, use_bin_type=True, default=str)  # type: ignore[no-any-return]


_INDEX_LISTS: dict[str, Any] = {
    "header": True,
    "exchanges": {"__all__": {"messages"}},
    "runs": {"__all__": {"history", "result"}},
}
"""Left out of the screen: the header (ids and versions) and the message index runs, typed
``list[int]`` by the cassette model, which hold nothing but numbers yet were a fifth of the text."""


def _screen_text(c: Any, known: Any) -> str:
    """What the screen reads: the whole cassette, but a message the recording ``known`` already
    holds (stamps aside) only by its stamps. Such a message can tell nothing the recording
    does not; a replay re-sends almost only those, so screening them again cost a replay as
    much as the recording's whole screen."""
    if known is None:
        return c.model_dump_json(exclude=_INDEX_LISTS) + json.dumps(c.header.roles, ensure_ascii=False)  # type: ignore[no-any-return]
    seen = {_stamp_free(m) for m in known.messages}
    fresh: list[Any] = []
    stamps: set[str] = set()
    for m in c.messages:
        if _stamp_free(m) in seen:
            stamps.update(str(m.get(k)) for k in ("run_id", "conversation_id") if m.get(k) is not None)
        else:
            fresh.append(m)
    outputs = {r.output for r in known.runs if isinstance(r.output, str)}
    fresh_outputs = [r.output for r in c.runs if not (isinstance(r.output, str) and r.output in outputs)]
    runs_without: dict[str, Any] = {"__all__": {"history", "result", "output"}}
    rest: str = c.model_dump_json(exclude={**_INDEX_LISTS, "messages": True, "runs": runs_without})
    return rest + json.dumps([fresh, fresh_outputs, sorted(stamps), c.header.roles], ensure_ascii=False, default=str)


def scrub_cassette(cassette: _M, config: ScrubConfig | None = None, known: Any = None) -> _M:
    """A scrubbed copy of a cassette model, for the recorder's last step before writing.

    Every field is scrubbed (fields added later, such as wire records, included) except
    the header's ids and versions; exempt paths are dotted paths into the model's dump
    (``messages.*.parts.*.content``). The first walk finds secrets by shape and context
    only; if it found values by context, or environment values occur, a second walk
    replaces those wherever else they stand, with the placeholders the first walk gave.
    So placeholders and ordinals never depend on the environment. ``known``: the recording a
    replayed cassette re-ran (see :func:`_screen_text`).
    """
    scrubber = Scrubber(config)
    c: Any = cassette
    try:
        text = _screen_text(c, known)
    except (TypeError, ValueError):
        text = None
    if not scrubber._might_hold(text):
        return cassette
    scrubber._use_env = False
    out = scrubber._scrub_cassette(c)
    if scrubber._learned or (scrubber._env_values and (text is None or scrubber._env_in(text))):
        scrubber._use_env = True
        scrubber._seen.clear()
        out = scrubber._scrub_cassette(c)
    return out  # type: ignore[no-any-return]


def name_key(name: str) -> str:
    """A name (an agent's, a role's) as a recording and its replay both see it: secrets by kind only.

    The cassette holds role names scrubbed, while a replay meets the live names; ordinals
    count within a cassette, so the key keeps the kind and drops the ordinal.
    """
    scrubbed = Scrubber(ScrubConfig(patterns=list(_user_patterns()))).scrub_text(name)
    return _ORDINAL_RE().sub(r"<secret:\1>", scrubbed) if "<secret:" in scrubbed else scrubbed


def _user_patterns() -> tuple[str, ...]:
    from .config import load_config

    return load_config().scrub_patterns


# --------------------------------------------------------------------------- outputs


def output_config() -> ScrubConfig:
    """The project's scrub settings, for outputs: the same patterns the cassettes were scrubbed with."""
    from .config import load_config

    config = load_config()
    return ScrubConfig(patterns=list(config.scrub_patterns), source=str(config.source or "pyproject.toml"))


def redact(value: _T, config: ScrubConfig | None = None) -> _T:
    """Scrub anything about to be printed or written (reports, matrix results, HTML input).

    The one funnel for outputs: replay text/json/markdown/junit, the step summary, the
    HTML report and merged matrix results all pass their data here before rendering, so
    each renderer escapes placeholders for its medium like any other text.
    """
    return redactor(config)(value)


def redactor(config: ScrubConfig | None = None) -> Callable[[_T], _T]:
    """:func:`redact` for the parts of one output written one by one (``show --format json`` scrubs each
    request as it writes it): one scrubber for all, so a text several parts hold is scrubbed once (a
    cassette from a pull request re-sending 1.8 MB of ``password=…`` text was scrubbed six times, 18 s of
    CPU) and a secret keeps one placeholder across the whole output."""
    scrubber = Scrubber(config if config is not None else output_config())

    def scrub(value: _T) -> _T:
        if not isinstance(value, str):  # a report: screen its JSON first, walk it only when that finds something
            text = _output_text(value)
            if not scrubber._might_hold(text):
                return value
        return scrubber.scrub_any(value)  # type: ignore[no-any-return]

    return scrub


def _output_text(value: Any) -> str | None:
    """Everything an output value holds, as JSON text for the screen (``pydantic_core`` reads
    dataclasses and models natively, and anything else as its ``str``).

    A 10,000-request diff report is 320,000 values: walking each cost ``replay diff --format
    json`` a second, the screen a tenth of that; a no from it is never wrong (see
    :meth:`Scrubber._might_hold`)."""
    try:
        from pydantic_core import to_json
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return None
    try:
        return to_json(value, fallback=str, serialize_unknown=True).decode("utf-8", "replace")
    except Exception:  # a value pydantic-core cannot serialise: walk it
        return None

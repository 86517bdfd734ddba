"""Scrub credentials out of a payload before it becomes a cassette.

Cassettes are committed to version control, but they are recorded with real API
keys in the environment, in request headers and sometimes echoed back in prompts
or tool results. Everything written to a cassette therefore passes through a
:class:`Scrubber` first. A secret is replaced by a placeholder such as
``<secret:openai:3f2a1c9b>``: the label says what was there, and the suffix is a
keyed hash, so the same secret always gives the same placeholder (cassette diffs
stay stable across recordings) while the secret itself cannot be recovered.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import itertools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, TypeVar

__all__ = ["ScrubConfig", "Scrubber", "placeholder", "scrub_cassette"]

# Fixed, public salt: it does not make the hash secret, it only keeps our
# placeholders from being looked up in tables of plain blake2b hashes of known keys.
_SALT = b"harness-replay/scrub/v1"
_MIN_LEN = 8  # nothing we detect by shape is shorter; most strings in a payload are
_MAX_PASSES = 4  # re-scan until nothing changes, so scrub() is idempotent

_PLACEHOLDER = r"<secret:[a-z0-9._-]+:[0-9a-f]{8}>"
_PLACEHOLDER_RE = re.compile(_PLACEHOLDER)

# A token may not start in the middle of a word ("task-...", "mask-..."), but it may
# follow an underscore or punctuation ("OPENAI_API_KEY=sk-...").
_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
_HAS_DIGIT = r"(?=[A-Za-z0-9_-]*[0-9])"

# Order matters only where two shapes can start at the same place: the more
# specific one (sk-ant-, sk-or-) must come before the generic sk-.
_BUILTIN: list[tuple[str, str]] = [
    ("private-key", r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)"),
    ("anthropic", _B + r"sk-ant-" + _HAS_DIGIT + r"[A-Za-z0-9_-]{20,}"),
    ("openrouter", _B + r"sk-or-v\d+-[A-Za-z0-9]{20,}"),
    ("openai", _B + r"sk-(?:proj-|svcacct-|admin-)?" + _HAS_DIGIT + r"[A-Za-z0-9_-]{20,}"),
    ("stripe", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("google", _B + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    ("aws-access-key", _B + r"(?:AKIA|ASIA)[0-9A-Z]{16}" + _E),
    ("github", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("gitlab", _B + r"glpat-[A-Za-z0-9_-]{20,}"),
    ("slack", _B + r"xox[baprs]-[A-Za-z0-9-]{10,}"),
    ("huggingface", _B + r"hf_[A-Za-z0-9]{30,}"),
    ("groq", _B + r"gsk_[A-Za-z0-9]{20,}"),
    ("xai", _B + r"xai-[A-Za-z0-9]{40,}"),
    ("perplexity", _B + r"pplx-[A-Za-z0-9]{40,}"),
    ("replicate", _B + r"r8_[A-Za-z0-9]{30,}"),
    ("logfire", _B + r"pylf_[A-Za-z0-9_]{20,}"),
    ("jwt", _B + r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    # Only the credential is replaced; the scheme, user name and host stay readable.
    ("bearer", r"(?i:\bbearer)\s+(?P<bearer_v>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*)"),
    ("basic", r"(?i:\bbasic)\s+(?P<basic_v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
    ("url-password", r"://[^\s/:@<>]*:(?P<url_v>[^\s/@<>]+)@"),
]
# Every alternative above starts with one of these characters. Python's regex engine
# would otherwise try all twenty alternatives at every position of every string;
# checking the first character up front makes scanning several times faster.
_FIRST_CHARS = "-<:sSrAgxhpebB"
_INNER = {"bearer": "bearer_v", "basic": "basic_v", "url-password": "url_v"}
_KIND_GROUP = {kind: "k" + str(i) for i, (kind, _) in enumerate(_BUILTIN)}
_GROUP_KIND = {g: k for k, g in _KIND_GROUP.items()}
_BUILTIN_RE = re.compile("|".join(f"(?P<{_KIND_GROUP[k]}>{p})" for k, p in _BUILTIN))

# An AWS secret access key is just 40 base64 characters; only its surroundings give it
# away, so it is looked for only in strings that talk about AWS.
_AWS_CONTEXT_RE = re.compile(r"(?i:(?<![a-z])aws|secret_?access_?key)|(?:AKIA|ASIA)[0-9A-Z]{16}")
_AWS_SECRET_RE = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

# has_secrets' screen: the literal each built-in shape starts with (keep in step with _BUILTIN;
# tests seed every shape and grep the written bytes, so a missing literal fails them).
_SCREEN_LITERALS = (
    "-----BEGIN", "sk-", "sk_", "rk_", "AIza", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "github_pat_", "glpat-", "xox", "hf_", "gsk_", "xai-", "pplx-", "r8_", "pylf_", "eyJ",
)
_SCREEN_AUTH_RE = re.compile(r"\b(?:bearer|basic)\s+[a-z0-9._~+/=-]{8,}")

_ENV_NAME_RE = re.compile(r"key|token|secret|password", re.IGNORECASE)
_SECRET_WORDS = frozenset(
    {
        "authorization", "token", "secret", "password", "passwd", "passphrase",
        "apikey", "cookie", "credential", "credentials",
    }
)
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")})
_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def placeholder(secret: str, kind: str) -> str:
    """The stand-in written instead of ``secret``: same secret, same placeholder."""
    digest = hashlib.blake2b(secret.encode("utf-8", "surrogatepass"), key=_SALT, digest_size=4).hexdigest()
    label = re.sub(r"[^a-z0-9._-]+", "-", kind.lower()).strip("-")[:40] or "value"
    return f"<secret:{label}:{digest}>"


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    """Header and settings names that carry credentials whatever their value looks like.

    Words rather than substrings, so ``max_tokens`` or ``input_tokens`` stay readable.
    """
    words = [w.lower() for w in _WORD_RE.findall(key)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def _looks_like_basic(token: str) -> bool:
    """'Basic' is also an English word; only a base64 ``user:password`` is a credential."""
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


@dataclass
class ScrubConfig:
    """What to scrub beyond the built-in shapes, and what to leave alone."""

    patterns: list[str] = field(default_factory=list)
    """Extra regular expressions; every match is replaced."""
    exempt_paths: list[str] = field(default_factory=list)
    """fnmatch patterns on dotted paths (``requests.*.settings.temperature``) never scrubbed."""
    env: Mapping[str, str] | None = None
    """Where to find secret values to scrub verbatim; ``None`` means ``os.environ``."""


class Scrubber:
    """Replaces every credential in a JSON-like value with a stable placeholder."""

    def __init__(self, config: ScrubConfig | None = None) -> None:
        config = config or ScrubConfig()
        env = os.environ if config.env is None else config.env
        # Values of variables such as OPENAI_API_KEY are scrubbed wherever they appear,
        # whatever their shape; short values ("1", "true") would scrub ordinary text.
        self._env_values = frozenset(
            v for k, v in env.items() if _ENV_NAME_RE.search(k) and len(v) >= _MIN_LEN
        )
        alternatives = [f"(?P<ph>{_PLACEHOLDER})"]
        if self._env_values:
            literals = sorted(self._env_values, key=len, reverse=True)
            alternatives.append("(?P<env>" + "|".join(map(re.escape, literals)) + ")")
        alternatives.append(_BUILTIN_RE.pattern)
        first = "".join(sorted(set(_FIRST_CHARS).union(v[0] for v in self._env_values)))
        self._re = re.compile(f"(?=[{re.escape(first)}])(?:" + "|".join(alternatives) + ")")
        self._user = [re.compile(p) for p in config.patterns]
        self._exempt = list(config.exempt_paths)
        self._seen: dict[str, str] = {}
        """Scrubbed form of every text seen: keys and repeated history text recur constantly."""

    def scrub(self, value: Any, path: str = "") -> Any:
        """Return a scrubbed copy of ``value``; ``path`` is its dotted location."""
        if not self._exempt:
            return self._scrub_fast(value)
        if any(fnmatchcase(path, p) for p in self._exempt):
            return _copy(value)
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                new_key = self.scrub_text(key) if isinstance(key, str) else key
                if isinstance(key, str) and _is_secret_key(key) and not self._is_exempt(child):
                    out[new_key] = self._scrub_by_key(item, key, child)
                else:
                    out[new_key] = self.scrub(item, child)
            return out
        if isinstance(value, (list, tuple)):
            items = [self.scrub(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        return value

    def has_secrets(self, values: Any) -> bool:
        """Whether scrubbing ``values`` could change anything, decided on their JSON text.

        Most cassettes hold no credential, and walking every node costs more than the
        recording it protects. Every built-in shape starts with a fixed literal (``sk-``,
        ``AIza``, ``-----BEGIN``, ``bearer ``…), so the screen looks for those (C-speed
        substring scans), for environment secrets, and for secret-looking key names. It
        may say yes needlessly (``task-`` holds ``sk-``), never no wrongly: a yes takes the
        full per-string walk.
        """
        if self._user:
            return True
        try:
            text = json.dumps(values, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return True
        if any(lit in text for lit in _SCREEN_LITERALS):
            return True
        low = text.lower()
        if (("bearer" in low or "basic" in low) and _SCREEN_AUTH_RE.search(low)) or ("://" in text and "@" in text):
            return True
        if ("aws" in low or "secret_access_key" in low or "secretaccesskey" in low) and _AWS_SECRET_RE.search(text):
            return True
        for value in self._env_values:
            if value in text or json.dumps(value, ensure_ascii=False)[1:-1] in text:
                return True
        # Every key is written as `"key": `; anything else caught this way only adds candidates.
        keys = {piece[piece.rfind('"') + 1 :] for piece in text.split('": ')[:-1]}
        return any(_is_secret_key(k) for k in keys)

    def _scrub_fast(self, value: Any) -> Any:
        """``scrub`` without exempt paths: no dotted path is built for every node."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    new_key = self.scrub_text(key)
                    out[new_key] = self._scrub_by_key(item, key, "") if _is_secret_key(key) else self._scrub_fast(item)
                else:
                    out[key] = self._scrub_fast(item)
            return out
        if isinstance(value, list):
            return [self._scrub_fast(item) for item in value]
        if isinstance(value, (tuple, Mapping)):
            return self.scrub(value, "") if isinstance(value, Mapping) else tuple(self._scrub_fast(v) for v in value)
        return value

    def scrub_text(self, text: str) -> str:
        """Replace the credentials inside ``text``, keeping the words around them."""
        if len(text) < _MIN_LEN:
            return text
        done = self._seen.get(text)
        if done is not None:
            return done
        original = text
        for _ in range(_MAX_PASSES):
            new = self._pass(text)
            if new == text:
                break
            text = new
        self._seen[original] = text
        return text

    def _is_exempt(self, path: str) -> bool:
        return any(fnmatchcase(path, p) for p in self._exempt)

    def _scrub_by_key(self, value: Any, key: str, path: str) -> Any:
        """Under ``Authorization`` or ``api_key`` every string is a secret, even 'hunter2'."""
        if isinstance(value, str):
            found = self.scrub_text(value)
            if not value or found != value or _PLACEHOLDER_RE.search(found):
                return found
            return placeholder(value, self._kind(value, key))
        if isinstance(value, (list, tuple)):
            items = [self._scrub_by_key(item, key, f"{path}.{i}") for i, item in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        return self.scrub(value, path)

    def _pass(self, text: str) -> str:
        text = self._re.sub(self._replace, text)
        if _AWS_CONTEXT_RE.search(text):
            text = _AWS_SECRET_RE.sub(self._replace_aws, text)
        for pattern in self._user:
            text = self._sub_user(pattern, text)
        return text

    def _replace(self, m: re.Match[str]) -> str:
        group = m.lastgroup
        if group == "ph":
            return m.group()
        kind = "env" if group == "env" else _GROUP_KIND[group or ""]
        inner = _INNER.get(kind)
        if inner is None:
            return placeholder(m.group(), self._kind(m.group(), kind))
        secret = m.group(inner)
        start, end = m.span(inner)
        prefix = m.string[m.start() : start]
        if kind == "basic" and not _looks_like_basic(secret):
            return prefix + self.scrub_text(secret) + m.string[end : m.end()]
        if _PLACEHOLDER_RE.fullmatch(secret):
            return m.group()
        return prefix + placeholder(secret, self._kind(secret, kind)) + m.string[end : m.end()]

    def _replace_aws(self, m: re.Match[str]) -> str:
        return placeholder(m.group(), self._kind(m.group(), "aws-secret"))

    def _sub_user(self, pattern: re.Pattern[str], text: str) -> str:
        # A broad user pattern must not eat into placeholders already written.
        taken = [p.span() for p in _PLACEHOLDER_RE.finditer(text)] if "<secret:" in text else []

        def replace(m: re.Match[str]) -> str:
            s, e = m.span()
            if s == e or any(s < te and ts < e for ts, te in taken):
                return m.group()
            return placeholder(m.group(), self._kind(m.group(), "custom"))

        return pattern.sub(replace, text)

    def _kind(self, secret: str, default: str) -> str:
        """Label by what the secret is, not where it was seen, so one secret has one placeholder."""
        m = _BUILTIN_RE.fullmatch(secret)
        if m is not None and m.lastgroup is not None:
            kind = _GROUP_KIND[m.lastgroup]
            if kind not in _INNER:
                return kind
        if secret in self._env_values:
            return "env"
        return default


_M = TypeVar("_M")


def scrub_cassette(cassette: _M, config: ScrubConfig | None = None) -> _M:
    """A scrubbed copy of a cassette model, for the recorder's last step before writing.

    Exempt paths are dotted paths into the model's plain-data dump
    (``messages.*.parts.*.content``); without any, the fields holding recorded data are
    scrubbed directly, skipping a dump and re-validation of the whole cassette.
    """
    scrubber = Scrubber(config)
    if scrubber._exempt:
        data = cassette.model_dump(mode="python")  # type: ignore[attr-defined]
        return type(cassette).model_validate(scrubber.scrub(data))  # type: ignore[attr-defined,no-any-return]
    s = scrubber._scrub_fast
    c: Any = cassette
    recorded = [c.messages, c.blobs, c.expectations, c.outcome.output, c.outcome.error and c.outcome.error.message]
    recorded += [(ex.events, ex.usage, ex.instructions, ex.error and ex.error.message) for ex in c.exchanges]
    recorded += [(r.prompt, r.output, r.error and r.error.message) for r in c.runs]
    recorded += [o.value for o in c.observations]
    if not scrubber.has_secrets(recorded):
        return cassette

    def error(e: Any) -> Any:
        return None if e is None else e.model_copy(update={"message": s(e.message)})

    exchanges = [
        ex.model_copy(
            update={
                "events": s(ex.events),
                "usage": s(ex.usage),
                "instructions": s(ex.instructions),
                "error": error(ex.error),
            }
        )
        for ex in c.exchanges
    ]
    runs = [
        r.model_copy(update={"prompt": s(r.prompt), "output": s(r.output), "error": error(r.error)}) for r in c.runs
    ]
    return c.model_copy(  # type: ignore[no-any-return]
        update={
            "messages": [s(m) for m in c.messages],
            "blobs": [s(b) for b in c.blobs],
            "exchanges": exchanges,
            "runs": runs,
            "outcome": c.outcome.model_copy(update={"output": s(c.outcome.output), "error": error(c.outcome.error)}),
            "observations": [o.model_copy(update={"value": s(o.value)}) for o in c.observations],
            "expectations": s(c.expectations),
        }
    )


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value

"""Placeholder provider keys: a replay (or a replay-only pytest session) never sends one anywhere.

Provider constructors refuse to build without a key, and a test module or scenario file often
builds its agent at import (``agent = Agent("openai:gpt-4o-mini")``). Light on purpose: the
pytest plugin uses it during collection, before anything heavy is imported.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "CO_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "CEREBRAS_API_KEY",
    "HF_TOKEN",
)


def value(key: str) -> str:
    """One placeholder per variable: two keys a recording held apart stay two secrets in the replay."""
    return "replay-placeholder-" + key.lower().replace("_", "-")


@contextmanager
def placeholder_keys() -> Iterator[None]:
    """Set each key that is unset (or empty) to a placeholder, and remove exactly those afterwards."""
    added = [k for k in KEYS if not os.environ.get(k)]
    for k in added:
        os.environ[k] = value(k)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def missing_key(error: str) -> bool:
    """Whether ``error`` (an import's traceback) names a provider key that is unset: placeholders would cure it."""
    return any(k in error for k in KEYS if not os.environ.get(k))

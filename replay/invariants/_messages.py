"""Facts about one JSON message dict that every check reads: its text, tokens and needles, the
summary and harness-data parts it carries, its character count by the installed harness's own
estimator. Pure functions of the message (or of one exchange of the cassette), so they can be
memoised per distinct message and shared between the two sides of a diff (``replay._facts``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .. import _facts
from ..cassette import Cassette, Exchange, is_harness_module
from ..histories import ORIGIN as OBSERVED
from ..recorder import estimate, load_messages

Message = dict[str, Any]


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _ws(text: str) -> str:
    return " ".join(text.split())


def _parts(message: Message) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _segments(part: dict[str, Any]) -> list[str]:
    """A part's texts; kept user copies (0.62) hold a list of ``TextContent`` dicts instead of a string."""
    content = part.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        items = [c if isinstance(c, str) else c.get("content") if isinstance(c, dict) else None for c in content]
        return [i for i in items if isinstance(i, str)]
    return []


def _part_text(part: dict[str, Any]) -> str:
    return " ".join(_segments(part))


def _harness_data(item: Any) -> bool:
    """A prompt content item the harness put there as data (``metadata.origin`` ``pydantic-ai-harness.…``:
    a BackgroundTools result): "not a user message", capped for the summarizer like a tool return.

    Or ``Memory``'s snapshot as 0.52-0.60 mark it, with a bare string for metadata
    (``pydantic-ai-harness.memory.v1:<scope>``; "a known gap" of the origin rule, 0.60's compaction says):
    the store's contents injected into the request, never the user's words — 0.62 gives it an ``origin``."""
    if not isinstance(item, dict):
        return False
    meta = item.get("metadata")
    if isinstance(meta, str):
        return _memory_snapshot(meta)
    origin = meta.get("origin") if isinstance(meta, dict) else None
    return isinstance(origin, str) and origin.startswith("pydantic-ai-harness.")


_MEMORY_MARK = "pydantic-ai-harness.memory.v1"


def _memory_snapshot(meta: str) -> bool:
    """Whether a text item's string metadata is ``Memory``'s snapshot marker (0.52-0.60), scoped or bare."""
    return meta == _MEMORY_MARK or meta.startswith(_MEMORY_MARK + ":")


def _carries_harness_data(part: dict[str, Any]) -> bool:
    """Whether a part's content holds any of the harness's own data items (else its user text is its text)."""
    content = part.get("content")
    return isinstance(content, list) and any(_harness_data(c) for c in content)


_VOICE_TAG = re.compile(r"<(?=\s*(?:/\s*)?system(?=[\s/>]|$))", re.IGNORECASE)
"""The ``<`` of an opening or closing ``<system>`` tag, in every spelling pydantic-ai's ``_framing`` escapes."""


def _system_voiced(part: dict[str, Any]) -> bool:
    """Whether a user prompt is a system prompt as pydantic-ai sends one to a model with no
    mid-conversation system role: its whole text one ``<system>…</system>`` block (``_framing.wrap``,
    which escapes every other ``<system>`` tag in the body, so the block's own are its only two).

    Such a part is a ``SystemPromptPart`` of the run's history (a harness reminder kept there, an
    ``LLMReminder``'s note): system text, not a user's or the model's words, as the summarizer's
    transcript says too (``<message role="system">``, the tags gone). A model with that role is sent
    the very part as ``system-prompt``, which no check counts as lost either."""
    content = part.get("content")
    if not isinstance(content, str):
        return False
    text = content.strip()
    return text.startswith("<system>") and text.endswith("</system>") and len(_VOICE_TAG.findall(text)) == 2


def _user_text(part: dict[str, Any]) -> str:
    """A part's text as something a user or the model said: without the harness's own data items."""
    if _carries_harness_data(part):
        return _part_text({"content": [c for c in part["content"] if not _harness_data(c)]})
    return _part_text(part)


def _part_key(part: dict[str, Any]) -> tuple[Any, ...]:
    if part.get("tool_call_id") is not None:
        return (part.get("part_kind"), _hashable(part.get("tool_name")), _hashable(part.get("tool_call_id")))
    if part.get("part_kind") == "user-prompt" and _system_voiced(part):
        # a system prompt as sent to a model with no mid-conversation system role: the history's part, in the
        # <system> block pydantic-ai wraps it in (0.62 keeps an LLMReminder's note so: not an edit of the history)
        return ("text", _ws(str(part["content"]).strip()[len("<system>") : -len("</system>")]))
    return ("text", _ws(_part_text(part)))


def _text(message: Message) -> str:
    return " ".join(_part_text(p) for p in _parts(message))


def _hand_chars(message: Message) -> int:
    """The characters the harness's estimate counts, by hand: each text segment's length, nothing between
    them (``_count_segments``). ``len(_text())`` counted the spaces joining parts, so a history of five
    requests read 5 tokens and the same text merged into one request 6: a growth that never happened."""
    return sum(len(text) for part in _parts(message) for text in _segments(part))


_TOKEN = re.compile(r"\w+|[^\w\s]")
_GRAM = 3


def _tokens(message: Message) -> list[str]:
    return _TOKEN.findall(_text(message))


def _request_scoped(message: Message) -> set[int]:
    """Parts of a request sent with it alone, never kept in history (reminders, a plan): its trailing
    ``__pydantic_ai__.request_scoped_tail`` parts (slim 2.6x), and user prompts that open with a cache
    point — how the harness appends a reminder or a plan (0.55 on); a user's own prompt cannot open
    with one (Anthropic and Bedrock refuse a leading cache point, so the harness never writes one)."""
    parts = _parts(message)
    meta = message.get("metadata")
    inner = meta.get("__pydantic_ai__") if isinstance(meta, dict) else None
    tail = inner.get("request_scoped_tail") if isinstance(inner, dict) else None
    scoped = set(range(len(parts) - tail, len(parts))) if type(tail) is int and 0 < tail <= len(parts) else set()
    scoped.update(k for k, p in enumerate(parts) if p.get("part_kind") == "user-prompt" and _opens_with_cache_point(p))
    return scoped


def _opens_with_cache_point(part: dict[str, Any]) -> bool:
    content = part.get("content")
    return isinstance(content, list) and bool(content) and isinstance(content[0], dict) and content[0].get("kind") == "cache-point"


def _request_only_chars(message: Message) -> int:
    """Characters of what a request carried for itself alone and no history keeps, as the harness's estimate
    counts them: user prompts that open with a cache point (a reminder or a plan, 0.55 on) and ``Memory``'s
    snapshot as 0.52-0.60 inject it (:func:`_memory_snapshot`). Not a ``request_scoped_tail``: 0.62 keeps
    those reminders in the history, as system prompts, so the uncompacted history has them already."""
    if message.get("kind") != "request":
        return 0
    total = 0
    for part in _parts(message):
        if part.get("part_kind") != "user-prompt":
            continue
        content = part.get("content")
        if _opens_with_cache_point(part):
            total += sum(len(t) for t in _segments(part))
        elif isinstance(content, list):
            total += sum(len(c["content"]) for c in content if isinstance(c, dict) and isinstance(c.get("content"), str)
                         and isinstance(c.get("metadata"), str) and _memory_snapshot(c["metadata"]))
    return total


def _needles(message: Message) -> list[list[str]]:
    return _words(message)[1]


def _words(message: Message) -> tuple[list[str], list[list[str]]]:
    """``(_tokens(message), _needles(message))`` from one tokenisation of each part.

    The same: ``_text`` joins the part texts with a space, which no token contains or spans, so
    its tokens are each part's tokens one after the other; the needles are some parts' tokens:
    user and assistant texts, not the reminders a request carried for itself alone (the history a
    compaction is given never had them: README, "Reminders ... never counted as lost"), nor system
    prompts sent as ``<system>`` user text (:func:`_system_voiced`).
    """
    parts = _parts(message)
    per = [(p.get("part_kind"), _TOKEN.findall(_part_text(p))) for p in parts]
    scoped = _request_scoped(message) if message.get("kind") == "request" else ()
    needles = [
        # harness data is not a user's words; a prompt without any is its text, already tokenised
        _TOKEN.findall(_user_text(parts[k])) if kind == "user-prompt" and _carries_harness_data(parts[k]) else ts
        for k, (kind, ts) in enumerate(per)
        if ts and kind in ("user-prompt", "text") and k not in scoped and not (kind == "user-prompt" and _system_voiced(parts[k]))
    ]
    return [t for _, ts in per for t in ts], [ts for ts in needles if ts]


class _Grams:
    """A text tokenised once (words and single punctuation marks) for word-bounded lookups.

    Holds every run of 1 to 3 consecutive tokens, so a message of up to 3 tokens is found
    exactly where it occurs as whole words (``U1`` never inside ``U10``), and a longer one when
    every run of 3 of its tokens occurs. Building and each lookup are linear; no per-message
    rescan of the whole text. The runs of 3 and the shorter ones are built on first need: most
    texts looked for are longer than 3 tokens, and many texts are never looked in at all.
    """

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self._triples: set[tuple[str, ...]] | None = None
        self._shorter: set[tuple[str, ...]] | None = None

    def has(self, needle: list[str]) -> bool:
        t = self.tokens
        if len(needle) >= _GRAM:
            if self._triples is None:
                self._triples = set(zip(t, t[1:], t[2:]))
            return self._triples.issuperset(zip(needle, needle[1:], needle[2:]))
        if self._shorter is None:
            self._shorter = set(zip(t))
            self._shorter.update(zip(t, t[1:]))
        return tuple(needle) in self._shorter


# --------------------------------------------------------------------------- token estimates


def _exact(messages: list[Message]) -> int:
    """The harness estimate of ``messages``; if this pydantic-ai cannot load them (a part kind a later
    slim added, checked under an older one), the same formula by hand: their characters plus the last
    instructions', over 4. Without the instructions, a history an older slim could not load measured
    37 tokens against 279 for the compacted request it could, and a recording's violation read as gone."""
    try:
        found = estimate(load_messages(messages))
    except Exception:
        found = None
    return found if found is not None else _by_hand(messages)


def _by_hand(messages: list[Message]) -> int:
    """The harness's estimate formula applied by hand: the messages' text plus the last instructions, over 4."""
    instructions = next((n for n in map(_instructions_chars, reversed(messages)) if n), 0)
    return (sum(_hand_chars(m) for m in messages) + instructions) // 4


def _additive(message: Message) -> bool:
    """Whether the harness counts this message on its own (instruction deltas depend on their neighbours)."""
    return not any(str(p.get("part_kind", "")).startswith("instruction") for p in _parts(message))


def _message_chars(message: Message, loaded: list[Any] | None = None) -> int | None:
    """Characters the harness estimate counts for ``message`` alone, instructions left out.

    The estimate is ``(message characters + the last instructions) // 4``; four copies of the
    message make the floor exact. None when the message cannot be counted on its own. Shared
    by both sides of a comparison through ``replay._facts`` (one estimate per distinct content);
    ``loaded`` is the message as loaded there, whose copy without instructions is what loading
    the message without them gives. The harness's estimate with ``len`` as its tokenizer counts
    the same segments' characters without the floor, so one copy gives the four copies' figure.
    """
    if not _additive(message):
        return None
    if loaded is not None:
        return _ONE_PASS.use(lambda: _one_pass_chars(message, loaded), lambda: _full_chars(message, loaded))
    return _full_chars(message, loaded)


_ONE_PASS = _facts.OnePass()


def _one_pass_chars(message: Message, loaded: list[Any]) -> int | None:
    n = _facts.counted(loaded)
    return None if n is None else n - _instructions_chars(message)


def _full_chars(message: Message, loaded: list[Any] | None) -> int | None:
    if loaded is not None:
        try:
            copies = [replace(loaded[0], instructions=None)] if message.get("instructions") else loaded
        except Exception:  # not a request after all: load it without instructions, as below
            copies = None
        if copies is not None:
            counted = _characters(copies)
            if counted is None:
                counted = estimate(copies * 4)
            return counted if counted is not None else _hand_chars(message)
    bare = {**message, "instructions": None} if message.get("instructions") else message
    found: int | None
    try:
        loaded = load_messages([bare])
        found = estimate(loaded * 4)
    except Exception:
        found = None
    if found is None:
        found = _hand_chars(message)
    return found


_facts.derive("chars", _message_chars)


def _characters(messages: list[Any]) -> int | None:
    """The characters the installed harness's estimate counts in ``messages`` (its tokenizer hook
    called with ``len`` on each segment), or None if it cannot count them that way."""
    try:
        from pydantic_ai_harness.compaction import estimate_token_count

        return int(estimate_token_count(messages, len))
    except Exception:
        return None


def _instructions_chars(message: Message) -> int:
    text = message.get("instructions")
    return len(text) if message.get("kind") == "request" and isinstance(text, str) and text else 0


# --------------------------------------------------------------------------- the cassette's structure


def _is_compaction(c: Cassette, ex: Exchange) -> bool:
    """A call that produces a summary: a harness compaction agent's request, or a provider-side compaction."""
    if ex.kind == "compact_messages":
        return True
    origin = c.header.roles.get(ex.role, "")
    if origin == OBSERVED:  # a history handed over with run.observe_messages, whatever its name
        return False
    return "compaction" in (origin if is_harness_module(origin) else ex.role)


def _is_main_request(ex: Exchange, user_roles: set[str]) -> bool:
    return ex.role in user_roles and ex.kind in ("request", "request_stream")


def _run_failed(c: Cassette, ex: Exchange) -> bool:
    return ex.run is not None and 0 <= ex.run < len(c.runs) and c.runs[ex.run].error is not None


_LEGACY_SUMMARY = "Summary of previous conversation:\n\n"
"""How harness releases up to 0.61 wrote a summary: a system prompt opening with this (their
``SUMMARY_PREFIX``; 0.62 still recognises one by it, ``is_legacy_summary``)."""


def _legacy_summary(part: dict[str, Any]) -> bool:
    if part.get("part_kind") != "system-prompt":  # asked of every part of every request: the cheap test first
        return False
    content = part.get("content")
    return isinstance(content, str) and content.startswith(_LEGACY_SUMMARY) and part.get("scope") != "request"


def _summary_part(part: dict[str, Any]) -> bool:
    """A part that carries a compaction's summary: a compaction part, one the harness marks as a summary,
    or a system prompt holding one the way releases up to 0.61 wrote it (:data:`_LEGACY_SUMMARY`)."""
    if part.get("part_kind") == "compaction" or _legacy_summary(part):
        return True
    meta = part.get("metadata")
    return isinstance(meta, dict) and any(isinstance(k, str) and ".compaction.summary" in k for k in meta)


def _summary_of(part: dict[str, Any]) -> str:
    """The summary a summary part carries, without the framing a legacy one opens with."""
    text = _part_text(part)
    return text[len(_LEGACY_SUMMARY):] if _legacy_summary(part) else text


_NOT_YET: Any = object()
"""A fact not computed yet (``None`` is one: a message not counted alone)."""


def _texts(message: Message) -> tuple[str, list[str]]:
    """:func:`_words` untokenised: the text whose tokens are the message's (its part texts, one per
    line: a newline is no token and joins none), and each needle's text, stripped (its tokens are
    that needle: whitespace is no token, and a text with anything else has a token)."""
    parts = _parts(message)
    texts = [_part_text(p) for p in parts]
    scoped = _request_scoped(message) if message.get("kind") == "request" else ()
    needles: list[str] = []
    for k, (part, text) in enumerate(zip(parts, texts, strict=True)):
        kind = part.get("part_kind")
        if kind not in ("user-prompt", "text") or k in scoped or not text.strip() or (kind == "user-prompt" and _system_voiced(part)):
            continue
        needle = (_user_text(part) if kind == "user-prompt" and _carries_harness_data(part) else text).strip()
        if needle:
            needles.append(needle)
    return "\n".join(texts), needles


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value

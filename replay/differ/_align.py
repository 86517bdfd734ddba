"""Align two lists of messages (or of parts) by content, not by index.

Comparing request histories index by index turns one inserted message into a cascade of
"changed" paths, and a summary that moved from a system-prompt part to a compaction part into
a loss plus a gain. Here items are matched by digest first (difflib on digests: the longest
common subsequence), then what is left is classified:

- **moved**: the same item (same digest) at another place;
- **rewrapped**: the same text in a different wrapper (another part kind or message shape,
  a string become a list of text parts, a framing line such as ``Summary of previous
  conversation:`` added or dropped) — representation, not content;
- **changed**: the same kind of item at the same place with mostly the same words: field
  diffs are computed inside it, and only inside it;
- **removed** / **inserted**: the rest.

Everything is keyed by digests, so the differ can memoise per pair and skip equal items
without looking inside them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal

EntryKind = Literal["removed", "inserted", "moved", "rewrapped", "changed"]

FRAMING_MAX = 80
"""Longest text a wrapper may add around the same content and still count as rewrapped."""
SIMILAR = 0.6
"""Word overlap from which two items of the same kind are one changed item (not a loss and a gain)."""
_PAIR_SCAN = 64
"""Longest run of unmatched items searched pairwise; longer runs pair only in order (bounded time)."""


@dataclass(frozen=True)
class Pairing:
    """How one item of A relates to one of B (either may be None: removed or inserted)."""

    kind: EntryKind
    a: int | None
    b: int | None


def text_of(value: Any) -> str:
    """The words an item carries, whatever its wrapper: part contents, tool names and arguments."""
    out: list[str] = []
    _collect(value, out)
    return " ".join(" ".join(out).split())


def _collect(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect(item, out)
    elif isinstance(value, dict):
        if "parts" in value:
            _collect(value["parts"], out)
            return
        if not value.keys() & _WRAPPER_KEYS:  # the user's own mapping (a validation error a retry sends back)
            out.append(_unescaped(json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)))
            return
        if value.get("tool_name"):
            out.append(str(value["tool_name"]))
        for key in ("content", "args"):
            item = value.get(key)
            if isinstance(item, (dict, list)) and key == "args":
                out.append(json.dumps(item, sort_keys=True, default=str))
            elif item is not None:
                _collect(item, out)
    elif isinstance(value, (bool, int, float)):  # a tool that returned 0: its words are "0", not none at all
        out.append(json.dumps(value))


_ESCAPE = re.compile(r"\\(.)")


def _unescaped(text: str) -> str:
    """JSON text whose escaped line breaks and tabs are whitespace again: a text inside a tool's
    mapping then has the words (and the substring) it has as a part's own content."""
    return _ESCAPE.sub(lambda m: " " if m.group(1) in "nrt" else m.group(0), text)


_WRAPPER_KEYS = frozenset({"part_kind", "kind", "content", "args", "tool_name"})
"""Keys of pydantic-ai's parts and content items, whose words are their content (other mappings are data)."""


def shape_of(value: Any) -> str:
    """The wrapper: message kind and part kinds, with ``[]`` for content given as a list."""
    if isinstance(value, dict) and "parts" in value:
        parts = value.get("parts") or []
        return f"{value.get('kind', 'message')}[{', '.join(shape_of(p) for p in parts)}]"
    if isinstance(value, dict):
        kind = str(value.get("part_kind") or value.get("kind") or "part")
        return kind + ("[]" if isinstance(value.get("content"), list) else "")
    return type(value).__name__


def _speaker_kept(a: Any, b: Any) -> bool:
    """A new wrapper may not change who speaks: a request's text that became a response's is not rewrapped."""
    if isinstance(a, dict) and isinstance(b, dict) and ("parts" in a or "parts" in b):
        return a.get("kind") == b.get("kind")
    return True


def _messages(a: Sequence[Any], b: Sequence[Any]) -> bool:
    first = a[0] if a else b[0] if b else None
    return isinstance(first, dict) and "parts" in first


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("part_kind") or value.get("kind") or "")
    return type(value).__name__


_WORD = re.compile(r"\w+")


def similarity(a: str, b: str) -> float:
    """Share of the shorter text's words found in the other (order-free, so reordered parts
    still look alike, and a message that grew or shrank by whole parts is still the same one)."""
    if a == b:
        return 1.0
    return _overlap(Counter(_WORD.findall(a)), Counter(_WORD.findall(b)))


def _overlap(wa: Counter[str], wb: Counter[str]) -> float:
    smaller = min(wa.total(), wb.total())
    if not smaller:
        return 1.0 if wa == wb else 0.0
    return (wa & wb).total() / smaller


class Memo:
    """What the requests of one diff share: each item's text and word counts by digest, each
    (digest A, digest B) similarity verdict, and a bound on computing new verdicts.

    Histories repeat from request to request, so the same pairs are scored again and again: a
    crafted 1.7 MB cassette of 3,500 requests re-sending 1,000 messages made ``replay diff``
    score 224 M pairs (10 minutes, 4.3 GB). Scored once per pair, then bounded in total: past
    :data:`PAIR_BUDGET` new verdicts, unmatched items are reported removed and inserted rather
    than searched for a similar partner (``exhausted`` says so).
    """

    def __init__(self, budget: int | None = None) -> None:
        self.texts: dict[bytes, tuple[str, Counter[str]]] = {}
        self.similar: dict[tuple[bytes, bytes], bool] = {}
        self.left = PAIR_BUDGET if budget is None else budget
        self.exhausted = False

    def alike(self, ka: bytes, kb: bytes, wa: Counter[str], wb: Counter[str]) -> bool:
        key = (ka, kb)
        found = self.similar.get(key)
        if found is None:
            if self.left <= 0:
                self.exhausted = True
                return False
            self.left -= 1
            found = self.similar[key] = _overlap(wa, wb) >= SIMILAR
        return found


PAIR_BUDGET = 1_000_000
"""New similarity verdicts one diff may compute (≈ 3 s of CPU); a real 10,000-request diff needs a few thousand."""


def _text(item: Any, key: bytes, memo: Memo) -> tuple[str, Counter[str]]:
    found = memo.texts.get(key)
    if found is None:
        text = text_of(item)
        found = memo.texts[key] = (text, Counter(_WORD.findall(text)))
    return found


def rewrapped(ta: str, tb: str) -> bool:
    """Same content, at most a short framing line added or dropped around it (for single parts:
    a message that gained or lost a whole part is changed, not rewrapped)."""
    if not ta or not tb:
        return False
    if ta == tb:
        return True
    short, long = (ta, tb) if len(ta) < len(tb) else (tb, ta)
    if len(long) - len(short) > FRAMING_MAX:
        return False
    if len(short) >= 8:
        return short in long or _framed_both_ways(short, long)
    # a short text (a one-word summary) only behind a framing line that ends in a colon: "Summary of
    # previous conversation:\n\nbrief" is "brief" rewrapped; "brief" inside other words is not
    return long.endswith(short) and long[: len(long) - len(short)].rstrip().endswith(":") and (
        long[len(long) - len(short) - 1].isspace()
    )


CORE_MIN = 32
"""Shortest text two items must share to be one content framed differently on both sides."""


def _framed_both_ways(short: str, long: str) -> bool:
    """One text inside two wrappers, each adding at most :data:`FRAMING_MAX` characters around it
    (``<system><context …>body</context></system>`` and a tool's ``{"instructions": "body"}``), the
    shared text longer than either frame."""
    core = _shared_core(short, long)
    frame = max(len(short) - core, len(long) - core)
    return core >= CORE_MIN and frame <= FRAMING_MAX and core > frame


def _shared_core(short: str, long: str) -> int:
    """Length of the longest text both share; linear for long texts, whose shared text must hold
    all of ``short`` but its first and last :data:`FRAMING_MAX` characters."""
    if len(short) <= 2 * FRAMING_MAX + CORE_MIN:
        return SequenceMatcher(None, short, long, autojunk=False).find_longest_match(0, len(short), 0, len(long)).size
    start, end = FRAMING_MAX, len(short) - FRAMING_MAX
    at = long.find(short[start:end])
    if at < 0:
        return 0
    i, j = start, at
    while i > 0 and j > 0 and short[i - 1] == long[j - 1]:
        i, j = i - 1, j - 1
    e, f = end, at + end - start
    while e < len(short) and f < len(long) and short[e] == long[f]:
        e, f = e + 1, f + 1
    return e - i


def align(
    a: Sequence[Any],
    b: Sequence[Any],
    a_keys: Sequence[bytes],
    b_keys: Sequence[bytes],
    memo: Memo | None = None,
) -> list[Pairing]:
    """Pair the items of ``a`` and ``b``; equal items in order are left out (nothing to say).

    ``a_keys``/``b_keys`` are the items' digests. A "changed" pair needs the same kind (a
    request never becomes a response, a tool call never a text part).
    """
    lo = 0
    n, m = len(a_keys), len(b_keys)
    while lo < n and lo < m and a_keys[lo] == b_keys[lo]:
        lo += 1
    hi_a, hi_b = n, m
    while hi_a > lo and hi_b > lo and a_keys[hi_a - 1] == b_keys[hi_b - 1]:
        hi_a -= 1
        hi_b -= 1
    if lo == hi_a and lo == hi_b:
        return []
    sm = SequenceMatcher(None, list(a_keys[lo:hi_a]), list(b_keys[lo:hi_b]), autojunk=False)
    free_a: set[int] = set()
    free_b: set[int] = set()
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            free_a.update(range(lo + i1, lo + i2))
            free_b.update(range(lo + j1, lo + j2))
    out: list[Pairing] = []

    # moved: the very same item elsewhere
    by_key: dict[bytes, list[int]] = {}
    for j in sorted(free_b):
        by_key.setdefault(b_keys[j], []).append(j)
    for i in sorted(free_a):
        js = by_key.get(a_keys[i])
        if js:
            j = js.pop(0)
            out.append(Pairing("moved", i, j))
            free_a.discard(i)
            free_b.discard(j)

    # rewrapped: the same text in another wrapper, anywhere in the request
    memo = Memo() if memo is None else memo
    words_a = {i: _text(a[i], a_keys[i], memo) for i in free_a}
    words_b = {j: _text(b[j], b_keys[j], memo) for j in free_b}
    texts_a = {i: w[0] for i, w in words_a.items()}
    texts_b = {j: w[0] for j, w in words_b.items()}
    by_text: dict[str, list[int]] = {}
    for j in sorted(free_b):
        if texts_b[j]:
            by_text.setdefault(texts_b[j], []).append(j)
    for i in sorted(free_a):
        js = by_text.get(texts_a[i])
        js = [j for j in js or () if j in free_b and shape_of(a[i]) != shape_of(b[j]) and _speaker_kept(a[i], b[j])]
        if js:
            out.append(Pairing("rewrapped", i, js[0]))
            free_a.discard(i)
            free_b.discard(js[0])
    if free_a and free_b and len(free_a) * len(free_b) <= _PAIR_SCAN * _PAIR_SCAN and not _messages(a, b):
        for i in sorted(free_a):
            for j in sorted(free_b):
                if shape_of(a[i]) != shape_of(b[j]) and _speaker_kept(a[i], b[j]) and rewrapped(texts_a[i], texts_b[j]):
                    out.append(Pairing("rewrapped", i, j))
                    free_a.discard(i)
                    free_b.discard(j)
                    break

    # changed: the same kind of item, in order, mostly the same words
    rest_a, rest_b = sorted(free_a), sorted(free_b)
    start = 0
    for i in rest_a[: _PAIR_SCAN * _PAIR_SCAN]:
        for k in range(start, min(len(rest_b), start + _PAIR_SCAN)):
            j = rest_b[k]
            if _kind(a[i]) == _kind(b[j]) and (
                texts_a[i] == texts_b[j] or memo.alike(a_keys[i], b_keys[j], words_a[i][1], words_b[j][1])
            ):
                out.append(Pairing("changed", i, j))
                free_a.discard(i)
                free_b.discard(j)
                start = k + 1
                break

    out += [Pairing("removed", i, None) for i in free_a]
    out += [Pairing("inserted", None, j) for j in free_b]
    out.sort(key=lambda p: (p.a if p.a is not None else p.b or 0, p.b if p.b is not None else -1))
    return out

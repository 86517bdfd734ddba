"""``content_lost`` and ``empty_summary``: what a compaction dropped that neither the summarizer
nor the main model was given (seed 001: ``keep_user_messages=True`` dropping A9, U10, A10), and a
blank summary that replaced real history (seed 002). A message counts as given when its text is
found verbatim, or token run by token run, in what the summarizer or the request received.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from .. import _facts
from ..cassette import Cassette, Exchange
from ..differ import message_label
from . import Violation, register
from ._history import _Index, _index, _summary_text, _Windows
from ._messages import _TOKEN, Message, _Grams, _parts, _run_failed, _summary_of, _summary_part, _ws


class _Verbatim:
    """A text (tokenised, :func:`_tokens`, it would be a ``_Grams``' tokens) searched for a needle as written.

    A needle written out in the text with a token edge at both ends (no word character on either
    side of an end that is one) has its tokens one after the other among the text's: a word is a
    maximal run of word characters and every other mark outside whitespace is a token of its own,
    so tokenising the text tokenises that stretch exactly as the needle alone. ``_Grams.has`` is
    then true of it. Most of what a compaction got is written out in its summarizer's input or its
    kept history, so most needles are settled by a substring search, and the text is tokenised only
    when one is not (``_lost_positions``). The search resumes where the last needle was found (a
    history is written out in its order), then starts over; a needle found only at token-splitting
    places within ``_TRIES`` occurrences is left to the tokens.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.budget = _SCANS * len(text) + _SCAN_SLACK
        """Characters the searches may still read: a needle written nowhere reads the whole text,
        so a hostile window of many such needles made every one of them a scan of it (quadratic:
        a 17 MB cassette took 195 s to check, against 21 s tokenising). Once spent, every needle
        is left to the tokens, which answer the same; the search is only a shortcut."""

    def has(self, needle: str) -> bool:
        if self.budget <= 0:
            return False
        text, start = self.text, self.at
        end = _bounded_end(text, needle, start)
        self.budget -= (end if end >= 0 else len(text)) - start
        if end < 0 and start:
            end = _bounded_end(text, needle, 0)
            self.budget -= end if end >= 0 else len(text)
        if end < 0:
            return False
        self.at = end
        return True


_WORD = re.compile(r"\w")
"""A word character as ``_TOKEN`` reads one."""
_TRIES = 8
_SCANS = 16
"""Whole-text reads one ``_Verbatim`` may spend on its needles before it leaves them to the tokens:
a history written out in its order is found in one read, so this is a bound for hostile input."""
_SCAN_SLACK = 1 << 16


def _bounded_end(text: str, needle: str, start: int) -> int:
    """The end of an occurrence of ``needle`` (not empty) in ``text`` at or after ``start`` whose ends are
    token edges, or -1 (none within the first ``_TRIES`` occurrences)."""
    word_head = _WORD.match(needle) is not None
    word_tail = _WORD.match(needle, len(needle) - 1) is not None
    at = text.find(needle, start)
    for _ in range(_TRIES):
        if at < 0:
            return -1
        end = at + len(needle)
        if not (word_head and at > 0 and _WORD.match(text, at - 1)) and not (
            word_tail and end < len(text) and _WORD.match(text, end)
        ):
            return end
        at = text.find(needle, at + 1)
    return -1


def _unfound(ix: _Index, source: list[int], texts: list[_Verbatim], grams: Callable[[], list[_Grams]]) -> list[int]:
    """Positions in ``source`` of messages with a user or assistant text found in none of ``texts``
    (each needle checked once): written out in one of them, or else (``grams``: the same texts
    tokenised, built on first need) every run of its tokens found in one."""
    verdict: dict[str, bool] = {}

    def lost(needle: str) -> bool:
        found = verdict.get(needle)
        if found is None:
            if any(t.has(needle) for t in texts):
                found = False
            else:
                tokens = _TOKEN.findall(needle)
                found = not any(g.has(tokens) for g in grams())
            verdict[needle] = found
        return found

    return [k for k, i in enumerate(source) if any(lost(t) for t in ix.texts(i)[1])]


_ESCAPED_TAG = re.compile(r"&lt;(?=\s*(?:/\s*)?(?:messages?|previous-summary|harness_data)(?:[\s/>]|$))", re.IGNORECASE)
"""How the summarizer's transcript (0.59 on: ``<message role=…>`` elements) writes a ``<`` that opens or
closes one of its own tags inside a message's text (``_neutralize_transcript_tags``), so a user's
``</message>`` cannot forge an element: that text was given to the summarizer, escaped on purpose."""


def _unescaped(text: str) -> str:
    """A summarizer input's text with the transcript's own tag escaping undone (:data:`_ESCAPED_TAG`)."""
    return _ESCAPED_TAG.sub("<", text) if "&lt;" in text else text


def _said(ix: _Index, window: list[Exchange]) -> tuple[list[str], Callable[[], list[str]]]:
    """What the summarizer calls of ``window`` were given, as text (one per message, then the instructions)
    and, built on call, as tokens: with the transcript's escaping undone."""
    texts = [ix.texts(i)[0] for e in window for i in e.messages]
    said = [_unescaped(t) for t in texts] + [e.instructions or "" for e in window]

    def tokens() -> list[str]:
        out: list[str] = []
        for e in window:
            for i in e.messages:
                text = ix.texts(i)[0]
                out += ix.tokens(i) if "&lt;" not in text else _TOKEN.findall(_unescaped(text))
        for e in window:
            out += _TOKEN.findall(e.instructions or "")
        return out

    return said, tokens


def _lost_positions(ix: _Index, window: list[Exchange], sent: list[int], source: list[int]) -> list[int]:
    """:func:`_unfound` of a compaction: what the summarizer got (``window``) and what was kept (``sent``).

    A function of those messages' contents alone, so a compaction the other side of a comparison
    made from the same contents (a replay: new timestamps, same words) is not searched again.
    """

    def compute() -> list[int]:
        said, said_tokens = _said(ix, window)
        kept = [ix.texts(i)[0] for i in sent]
        built: list[_Grams] = []

        def grams() -> list[_Grams]:
            if not built:  # each message's tokens one after the other (lists joined in C: ~10,000 tokens a window)
                tokens = said_tokens()
                kept_tokens: list[str] = []
                for i in sent:
                    kept_tokens += ix.tokens(i)
                built.extend((_Grams(tokens), _Grams(kept_tokens)))
            return built

        return _unfound(ix, source, [_Verbatim("\n".join(said)), _Verbatim("\n".join(kept))], grams)

    key = _facts.content_key([
        [[ix.key(i) for i in e.messages] for e in window],
        [e.instructions for e in window],
        [ix.key(i) for i in sent],
        [ix.key(i) for i in source],
    ])
    found: list[int] = ix.facts.of("content_lost", key, compute)
    return found


def _pinned(message: Message) -> bool:
    """Whether a message holds pinned content (``pydantic_ai_harness.compaction.pin``: a text item whose
    metadata marks it), which every compaction strategy keeps or re-injects, the window too."""
    for part in _parts(message):
        content = part.get("content")
        if isinstance(content, list) and any(isinstance(c, dict) and _pin_mark(c.get("metadata")) for c in content):
            return True
    return False


def _pin_mark(meta: Any) -> bool:
    if isinstance(meta, str):
        return ".compaction.pin" in meta
    return isinstance(meta, dict) and any(isinstance(k, str) and ".compaction.pin" in k for k in meta)


def _dropped_ahead(ix: _Index, window: list[Exchange], source: list[int], lost: list[int]) -> bool:
    """Whether the messages lost at positions ``lost`` of ``source`` were dropped before the summarizing
    compaction ran, by a window in front of it (``TieredCompaction(tiers=[SlidingWindowCompaction, …,
    SummarizingCompaction])``): the summarizer is handed the history its compaction was given, so
    what the recording shows is that history — the source from some message on, behind the preserved
    first user message — and nothing of it lost.

    True when the lost messages are one run of the source (but for pinned messages the window
    re-injected) that starts right after its first request with a user prompt (or at its start) and
    ends right where the summarizer's input picks up
    (its message found in the summarizer input), everything after it summarized or kept. A summarizing
    compaction alone never leaves that shape (it summarizes from the start), so what it loses in the
    middle (seed 001: A9, U10, A10 between the summarized head and the kept tail) is still lost.
    """
    a, b = lost[0], lost[-1] + 1
    found = set(range(a, b)) - set(lost)
    if b >= len(source) or any(not _pinned(ix.msg(source[k])) for k in found):
        return False  # a gap the window kept: only pinned content, which every strategy re-injects
    head = next(
        (k for k, i in enumerate(source) if ix.msg(i).get("kind") == "request"
         and any(p.get("part_kind") == "user-prompt" for p in _parts(ix.msg(i)))),
        -1,
    )
    if a > head + 1:
        return False  # something was summarized or kept past the head before the lost run: not a window's cut
    said, said_tokens = _said(ix, window)

    def grams() -> list[_Grams]:
        return [_Grams(said_tokens())]

    picked_up = ix.texts(source[b])[1]
    if not picked_up or _unfound(ix, [source[b]], [_Verbatim("\n".join(said))], grams):
        return False
    # and the summarizer's input starts there: the message after it is not written out before it
    text = "\n".join(said)
    at = _bounded_end(text, picked_up[0], 0)
    after = next((n for i in source[b + 1:] for n in ix.texts(i)[1][:1]), None)
    later = _bounded_end(text, after, 0) if after else -1
    return at < 0 or later < 0 or at - len(picked_up[0]) < later - len(after or "")


def _newest_unsent(ix: _Index, sent: list[int], source: list[int]) -> bool:
    """Whether the newest message of ``source`` — the request being answered: the run's prompt, or what
    a tool loop's request added — has a user or assistant text the compacted request does not carry.
    Every compaction keeps it (0.60 on: "the newest message is always kept, since in a run it is the
    request being answered"; 0.55's window already: "keeping zero messages would drop the newest
    message"); a summary of it is no answer to it."""
    if not source or source[-1] in sent or not ix.texts(source[-1])[1]:  # sent as it is: kept, no search
        return False
    kept = [ix.texts(i)[0] for i in sent]

    def grams() -> list[_Grams]:
        tokens: list[str] = []
        for i in sent:
            tokens += ix.tokens(i)
        return [_Grams(tokens)]

    return bool(_unfound(ix, [source[-1]], [_Verbatim("\n".join(kept))], grams))


def _summaries(ix: _Index, sent: list[int]) -> set[str]:
    """The summaries a request carries (their text, whitespace folded): asked of every main request,
    which re-sends the same summary message until the next compaction, so each message's are kept."""
    if not ix.has_summary(sent):
        return set()
    assert ix._summary_ids is not None  # filled by has_summary
    out: set[str] = set()
    for i in sent:
        if i in ix._summary_ids:
            found = ix._summary_texts.get(i)
            if found is None:
                found = ix._summary_texts[i] = frozenset(_ws(_summary_of(p)) for p in _parts(ix.msg(i)) if _summary_part(p))
            out |= found
    return out


def _writer(ix: _Index, ex: Exchange, new: set[str]) -> list[Exchange]:
    """The summarizer call that wrote a summary ``ex`` is the first of its role to carry, when none ran
    since the role's previous request: a compaction started ahead of its trigger
    (``FallbackCompaction(background_start=…)``, 0.62) summarizes a snapshot while the conversation goes
    on, and its summary is applied requests later. The call whose answer the summary is (or ends with:
    a cross-model bridge note goes before it), the latest before ``ex``."""
    for e in reversed(ix.window(-1, ex.seq)):
        said = _ws(_summary_text(ix.c, e))
        if said and any(s.endswith(said) for s in new):
            return [e]
    return []


@register("content_lost")
def content_lost(c: Cassette) -> Iterator[Violation]:
    """A user or assistant message a summarizing compaction neither summarized nor kept, or the
    request being answered left out of a compacted request by any compaction.

    Seed 001: with ``keep_user_messages=True`` the kept user copies take the tail's slots
    and A9, U10, A10 reach neither model. Otherwise only compactions with a summarizer are checked:
    a sliding window drops messages by design, also as a tier ahead of a summarizer
    (:func:`_dropped_ahead`) — but never the newest message (0.54's
    ``SlidingWindowCompaction(keep_messages=1, receipts=True)`` sent the receipt and the first prompt
    without the current one).
    """
    ix = _index(c)
    windows = _Windows(c, ix)
    for role, views in ix.views().items():
        carried: set[str] = set()
        for v in views:
            window = windows.of(role, v)
            before, carried = carried, _summaries(ix, v.exchange.messages)
            if not window and carried - before:
                window = _writer(ix, v.exchange, carried - before)
            if not ix.compacted(v, bool(window)):
                continue
            sent, source = v.exchange.messages, v.source_ids
            positions = _lost_positions(ix, window, sent, source) if window else []
            if positions and _dropped_ahead(ix, window, source, positions):
                positions = []
            newest = len(source) - 1 not in positions and _newest_unsent(ix, sent, source)
            lost = [ix.msg(source[k]) for k in positions]
            current = message_label(ix.msg(source[-1])) if newest else None
            if not lost and current is None:
                continue
            labels = [message_label(m) for m in lost]
            missing = labels + ([current] if current is not None else [])
            via = [f"{e.role}[{e.index}]" for e in window]
            said = [f"compaction lost {', '.join(labels)}: in neither the summarizer input ({', '.join(via)}) nor the kept history"] if labels else []
            if current is not None:
                said.append(f"{'' if labels else 'compaction '}left out the request being answered, {current}"
                            + (f" (given to the summarizer, {', '.join(via)}, but not sent)" if window else ""))
            yield Violation(
                "content_lost",
                role,
                v.exchange.index,
                f"{'; '.join(said)} ({len(sent)} of {len(source)} messages sent)",
                {"lost": missing, "summarizer": via,
                 "source_messages": len(source), "sent_messages": len(sent), "newest_unsent": current},
                identity=("lost",),
                measure=dict(Counter(missing)),
            )


@register("empty_summary")
def empty_summary(c: Cassette) -> Iterator[Violation]:
    """An empty or whitespace summary that the next main request was compacted with.

    Harness 0.54 accepted a blank summary and replaced the history with it; 0.62 retries and
    fails the summarizer run instead, which is not a violation (the run's error shows it).
    """
    ix = _index(c)
    mains = sorted((v for vs in ix.views().values() for v in vs), key=lambda v: v.exchange.seq)
    main_seqs = [v.exchange.seq for v in mains]
    last: dict[tuple[str, int], Exchange] = {}  # a summarizer run's last call carries its final answer
    for e in ix.compactions:
        own_run = e.run is not None and e.role not in ix.user_roles
        last[("run", e.run) if own_run and e.run is not None else ("seq", e.seq)] = e
    for e in sorted(last.values(), key=lambda x: x.seq):
        if e.error is not None or e.response is None or _run_failed(c, e):
            continue
        run_output = c.runs[e.run].output if e.run is not None and 0 <= e.run < len(c.runs) else None
        if run_output is not None and not isinstance(run_output, str) or run_output is None and _structured(c, e):
            continue  # a structured answer (RelevanceCompaction's judge scoring steps) is no summary
        summary = run_output if isinstance(run_output, str) else _summary_text(c, e)
        if summary.strip():
            continue
        at = bisect_left(main_seqs, e.seq + 1)
        if at == len(mains):
            continue
        nxt = mains[at]
        sent = ix.expand(nxt.exchange.messages)
        summaries = [_summary_of(p) for m in sent for p in _parts(m) if _summary_part(p)]
        other = [s for s in ix.window(e.seq, nxt.exchange.seq) if _summary_text(c, s).strip()]
        accepted = any(not s.strip() for s in summaries) or (
            ix.compacted(nxt, True) and not any(s.strip() for s in summaries) and not other
        )
        if not accepted:
            continue
        source = len(nxt.source_ids)
        target = f"{nxt.exchange.role}[{nxt.exchange.index}]"
        yield Violation(
            "empty_summary",
            e.role,
            e.index,
            f"empty summary {summary!r} accepted: {target} was sent {len(sent)} message{'s' * (len(sent) != 1)} instead of {source}",
            {"summary": summary, "request": target, "source_messages": source, "sent_messages": len(sent)},
            measure={"messages_dropped": source - len(sent)},
        )


def _structured(c: Cassette, e: Exchange) -> bool:
    """Whether a compaction call answered with a tool call and no text: a structured output, not a summary."""
    response = c.messages[e.response] if e.response is not None and 0 <= e.response < len(c.messages) else None
    parts = _parts(response) if isinstance(response, dict) else []
    kinds = [p.get("part_kind") for p in parts if isinstance(p, dict)]  # a list: a hostile kind may be unhashable
    return "tool-call" in kinds and "text" not in kinds

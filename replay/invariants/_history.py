"""The uncompacted history behind each main request: what the run had when the harness
compacted it, rebuilt from the run records (chained runs share one append-only sequence with
prefix sums), and which compaction calls each request may have been shaped by. Built once per
cassette (``_Index``) and shared by the checks of one ``evaluate`` call, so a 10,000-request
cassette is walked once, not once per check or per request.
"""

from __future__ import annotations

import contextvars
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _facts
from .._conversations import Predecessors, interleaved_roles
from ..cassette import AgentRunRecord, Cassette, Exchange
from ..normaliser import ANY_CLASS, Normaliser, digest
from ._messages import (
    _NOT_YET,
    _TOKEN,
    Message,
    _exact,
    _hand_chars,
    _hashable,
    _instructions_chars,
    _is_compaction,
    _is_main_request,
    _message_chars,
    _part_key,
    _part_text,
    _parts,
    _request_only_chars,
    _run_failed,
    _summary_part,
    _texts,
    _words,
    _ws,
)


class _Seq:
    """An append-only uncompacted history shared by chained runs, with prefix sums for O(1) estimates."""

    def __init__(self, index: _Index) -> None:
        self.ix = index
        self.ids: list[int] = []
        self.chars = [0]
        self.instructions = [0]
        self.uncounted = [0]
        self.unloadable = [0]
        """Prefix counts of messages the installed pydantic-ai cannot load (``_Index.loadable``), filled
        on first use: only compacted requests ask, and a history's messages are looked up once."""
        self.responses = [0]
        self.at: dict[bytes, list[int]] = {}
        """Positions of each response message, to count those in a prefix."""

    def extend(self, ids: Iterable[int]) -> None:
        # Every message of every run goes through here: locals and the index's memos read directly.
        ix = self.ix
        chars_of, instr_of, response_ids = ix._chars, ix._instr, ix.response_ids
        own_ids, chars, uncounted, instructions, responses = self.ids, self.chars, self.uncounted, self.instructions, self.responses
        for i in ids:
            pos = len(own_ids)
            own_ids.append(i)
            ch = chars_of.get(i, _NOT_YET)
            if ch is _NOT_YET:
                ch = ix.chars(i)
            chars.append(chars[-1] + (ch or 0))
            uncounted.append(uncounted[-1] + (ch is None))
            n = instr_of.get(i)
            instructions.append((n if n is not None else ix.instr(i)) or instructions[-1])
            is_response = i in response_ids
            responses.append(responses[-1] + is_response)
            if is_response:
                self.at.setdefault(ix.norm[i], []).append(pos)

    def unloadable_to(self, length: int) -> int:
        marks = self.unloadable
        while len(marks) <= length:
            marks.append(marks[-1] + (not self.ix.loadable((self.ids[len(marks) - 1],))))
        return marks[length]

    def branch(self, length: int) -> _Seq:
        """This history up to ``length``, ready to be extended (a copy only when someone extended it further)."""
        if length == len(self.ids):
            return self
        out = _Seq(self.ix)
        out.extend(self.ids[:length])
        return out

    def estimate(self, length: int, extra: int = 0) -> int:
        """The first ``length`` messages' estimate, with ``extra`` characters sent along (request-only parts)."""
        if self.uncounted[length]:
            return _exact([self.ix.msg(i) for i in self.ids[:length]]) + extra // 4
        return (self.chars[length] + self.instructions[length] + extra) // 4

    def responses_missing(self, length: int, sent: list[int]) -> bool:
        """Whether a response of this history's first ``length`` messages is not in ``sent`` (counting repeats)."""
        want = self.responses[length]
        if not want:
            return False
        ix, have = self.ix, 0
        for d, n in Counter(ix.norm[i] for i in sent if i in ix.response_ids).items():
            if d in self.at:
                have += min(n, bisect_left(self.at[d], length))
        return have < want


@dataclass
class _View:
    """One main request next to what it would have been."""

    exchange: Exchange
    run: AgentRunRecord
    source_ids: list[int]
    """The run's starting history plus its own messages up to this request: what a compaction got."""
    logical: _Seq
    length: int
    """The uncompacted conversation up to this request is ``logical.ids[:length]`` (chained runs followed back)."""


_INSTALLED_SLIM: list[tuple[int, ...] | None] = []


def _release(text: str | None) -> tuple[int, ...] | None:
    found = re.match(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(x) for x in found.group().split(".")) if found else None


def _newer_than_installed(recorded: str | None) -> bool:
    """Whether a cassette's slim release is later than the installed one's (unknown either way: assume so)."""
    if not _INSTALLED_SLIM:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _INSTALLED_SLIM.append(_release(version("pydantic-ai-slim")))
        except PackageNotFoundError:
            _INSTALLED_SLIM.append(None)
    installed, theirs = _INSTALLED_SLIM[0], _release(recorded)
    return installed is None or theirs is None or theirs > installed


class _Index:
    """What the checks need from one cassette, each fact computed once."""

    def __init__(self, c: Cassette) -> None:
        self.c = c
        self.facts = _facts.current()
        """Per-message facts shared with the other side of a comparison (and the diff)."""
        self.user_roles = c.user_roles()
        self.extra: list[Message] = []
        """Messages rebuilt by the checks (a prompt a compaction dropped), numbered after the table."""
        self._chars: dict[int, int | None] = {}
        self._words: dict[int, tuple[list[str], list[list[str]]]] = {}
        self._texts: dict[int, tuple[str, list[str]]] = {}
        self._instr: dict[int, int] = {}
        self._request_only: dict[int, int] = {}
        self._loadable: dict[int, bool] = {}
        self.newer_slim = _newer_than_installed(c.header.slim_version)
        """Recorded by a later pydantic-ai-slim than this one: a message may hold what this one cannot load."""
        self._norm: list[bytes] | None = None
        self._views: dict[str, list[_View]] | None = None
        self._summary_ids: set[int] | None = None
        self._summary_texts: dict[int, frozenset[str]] = {}
        compactions = [e for e in c.exchanges if _is_compaction(c, e)]
        self.compactions = sorted(compactions, key=lambda e: e.seq)
        self.compaction_seqs = [e.seq for e in self.compactions]
        self._inside: dict[int, tuple[list[Exchange], list[int]]] | None = None
        self.response_ids = {i for i, m in enumerate(c.messages) if m.get("kind") == "response"}

    def release(self) -> None:
        """Drop the views: they refer back to this index, and such a cycle (holding every fact of the
        comparison) would wait for the next full collection, which then walks the loaded cassettes."""
        self._views = None

    def msg(self, i: int) -> Message:
        n = len(self.c.messages)
        return self.c.messages[i] if i < n else self.extra[i - n]

    def add(self, message: Message) -> int:
        self.extra.append(message)
        return len(self.c.messages) + len(self.extra) - 1

    def part_keys(self, ids: Iterable[int]) -> Counter[tuple[Any, ...]]:
        """The parts of these messages, by text (whatever part carries it) or by tool call id, counting repeats."""
        return Counter(_part_key(p) for i in ids for p in _parts(self.msg(i)))

    def expand(self, ids: Iterable[int]) -> list[Message]:
        return [self.msg(i) for i in ids]

    def _fact(self, kind: str, i: int, compute: Callable[[Message], Any]) -> Any:
        """``compute(message i)``, shared by content with the other side (a rebuilt message: computed here).

        Callers keep what it returns per index, so a cassette checked alone computes it directly."""
        if i < len(self.c.messages) and not self.facts.private:
            return self.facts.get(kind, self.c, i, compute)
        return compute(self.msg(i))

    def key(self, i: int) -> Hashable:
        """Message ``i``'s key in the facts (``replay._facts``)."""
        return self.facts.key(self.c, i) if i < len(self.c.messages) else _facts.content_key(self.msg(i))

    def tokens(self, i: int) -> list[str]:
        """The words and marks of a message's text, tokenised once."""
        return self.words(i)[0]

    def needles(self, i: int) -> list[list[str]]:
        """The tokens of each non-empty user or assistant text of a message: what a compaction must not lose."""
        return self.words(i)[1]

    def texts(self, i: int) -> tuple[str, list[str]]:
        """:func:`_texts` of a message (what :meth:`words` tokenises), built once."""
        found = self._texts.get(i)
        if found is None:
            found = self._texts[i] = self._fact("texts", i, _texts)
        return found

    def words(self, i: int) -> tuple[list[str], list[list[str]]]:
        """:meth:`tokens` and :meth:`needles` of a message, from one tokenisation (most messages need both)."""
        found = self._words.get(i)
        if found is None:
            found = self._words[i] = self._fact("words", i, _words)
        return found

    def chars(self, i: int) -> int | None:
        if i not in self._chars:
            if i < len(self.c.messages):  # computed from the message's load with its size (_facts.derive)
                self._chars[i] = self.facts.from_loaded("chars", self.c, i)
            else:
                self._chars[i] = _message_chars(self.msg(i))
        return self._chars[i]

    def loadable(self, ids: Iterable[int]) -> bool:
        """Whether the installed pydantic-ai can load every one of these messages. A cassette recorded by
        a later slim, checked under an earlier one (a matrix cell), can hold part kinds it does not know
        (``instruction-baseline``); the harness cannot estimate such a history, and one request measured
        by the harness on one side and by hand on the other read as grown (a recording's violation as gone)."""
        if not self.newer_slim:  # a slim reads what it and earlier ones wrote: nothing to look up
            return True
        ok = self._loadable
        for i in ids:
            found = ok.get(i)
            if found is None:
                c = self.c
                found = ok[i] = i >= len(c.messages) or self.facts.from_loaded("loadable", c, i)
            if not found:
                return False
        return True

    def request_only(self, ids: Iterable[int]) -> int:
        """:func:`_request_only_chars` of these messages, summed (each message's figure computed once)."""
        memo = self._request_only
        total = 0
        for i in ids:
            n = memo.get(i)
            if n is None:
                n = memo[i] = self._fact("request_only", i, _request_only_chars)
            total += n
        return total

    def instr(self, i: int) -> int:
        if i not in self._instr:
            self._instr[i] = _instructions_chars(self.msg(i))
        return self._instr[i]

    def estimate(self, ids: list[int], *, per_message: bool = False) -> int:
        """The harness's estimate of ``ids``: the sum of each message's characters plus the last
        instructions, over 4 — or, where a message is not counted alone (instruction deltas), the
        harness on the whole list. ``per_message``: every message alone, by hand where the harness
        cannot count it (a later slim's parts under an earlier one), so two sides share one ruler."""
        # Called for every main request over every message it sends: the per-index memos are read
        # here directly, the methods only called for an index not seen yet.
        chars_of, instr_of = self._chars, self._instr
        total, instructions = 0, 0
        for i in ids:
            ch = chars_of.get(i, _NOT_YET)
            if ch is _NOT_YET:
                ch = self.chars(i)
            if ch is None:
                if not per_message:
                    return _exact(self.expand(ids))
                ch = _hand_chars(self.msg(i))
            total += ch
            n = instr_of.get(i)
            instructions = (n if n is not None else self.instr(i)) or instructions
        return (total + instructions) // 4

    @property
    def norm(self) -> list[bytes]:
        if self._norm is None:
            n = Normaliser()
            facts, c = self.facts, self.c
            if facts.private:
                self._norm = [digest(n.value(m, ANY_CLASS)) for m in c.messages]
            else:  # one digest per content for both sides, unless an alias was needed (see Facts.shareable)
                aliases = n.aliases

                def compute(m: Message) -> tuple[bytes, bool]:
                    used = aliases.used
                    found = digest(n.value(m, ANY_CLASS))
                    return found, aliases.used == used

                self._norm = [facts.shareable("norm", c, i, compute) for i in range(len(c.messages))]
        return self._norm

    def has_summary(self, ids: list[int]) -> bool:
        if self._summary_ids is None:
            self._summary_ids = {i for i, m in enumerate(self.c.messages) if any(_summary_part(p) for p in _parts(m))}
        return not self._summary_ids.isdisjoint(ids)

    def window(self, after_seq: int, before_seq: int) -> list[Exchange]:
        """Compaction calls between two main requests whose answer reached the harness (no error)."""
        return self.answered(self.compactions, self.compaction_seqs, after_seq, before_seq)

    def answered(self, calls: list[Exchange], seqs: list[int], after_seq: int, before_seq: int) -> list[Exchange]:
        """Those of ``calls`` (in ``seq`` order, ``seqs`` theirs) strictly between two seqs whose answer reached
        the harness: a bisection, so a long conversation's requests each pay for their own window only."""
        lo = bisect_left(seqs, after_seq + 1)
        hi = bisect_left(seqs, before_seq)
        return [e for e in calls[lo:hi] if e.error is None and e.response is not None and not _run_failed(self.c, e)]

    def calls_inside(self) -> dict[int, tuple[list[Exchange], list[int]]]:
        """Each agent run's compaction calls made inside it (their run's ``parent``), in ``seq`` order."""
        if self._inside is None:
            runs = self.c.runs
            by_parent: dict[int, list[Exchange]] = {}
            for e in self.compactions:
                parent = runs[e.run].parent if e.run is not None and 0 <= e.run < len(runs) else None
                if parent is not None:
                    by_parent.setdefault(parent, []).append(e)
            self._inside = {p: (calls, [e.seq for e in calls]) for p, calls in by_parent.items()}
        return self._inside

    def compacted(self, v: _View, window: bool) -> bool:
        """Whether a compaction shaped this request: it carries a summary, it lacks earlier responses, or a
        compaction ran since the role's previous request and something the run had is not sent.

        Additions alone (a plan appended each request) and a request-scoped reminder kept in
        history but not re-sent are not compaction.
        """
        sent = v.exchange.messages
        if self.has_summary(sent) or v.logical.responses_missing(v.length, sent):
            return True
        if not window:
            return False
        return bool(self.part_keys(v.source_ids) - self.part_keys(sent))

    def views(self) -> dict[str, list[_View]]:
        if self._views is None:
            self._views = self._build_views()
        return self._views

    def _build_views(self) -> dict[str, list[_View]]:
        """Main requests per user role, with their source and uncompacted (logical) histories.

        A run is chained when its ``message_history`` is an earlier run's result: then its
        logical history is that run's logical history, not the (possibly compacted) one it got.
        """
        c, norm = self.c, self.norm
        by_run: dict[int, list[Exchange]] = {}
        for ex in c.exchanges:
            if ex.run is not None and _is_main_request(ex, self.user_roles):
                by_run.setdefault(ex.run, []).append(ex)
        # every message of these runs is sized below (``_Seq.extend``): loaded in batches first
        needed = {i for r, xs in by_run.items() for ex in xs for i in ex.messages}
        needed.update(i for run in c.runs if run.role in self.user_roles for i in (*run.history, *run.result))
        self.facts.preload(c, (i for i in needed if 0 <= i < len(c.messages)))
        ended: dict[tuple[str, tuple[bytes, ...]], tuple[_Seq, int]] = {}
        views: dict[str, list[_View]] = {}
        for r, run in enumerate(c.runs):
            if run.role not in self.user_roles:
                continue
            base = ended.get((run.role, tuple(norm[i] for i in run.history))) if run.history else None
            if base is None:
                seq = _Seq(self)
                seq.extend(run.history)
                start = len(seq.ids)
            else:
                seq = base[0].branch(base[1])
                start = base[1]
            new = self._new_messages(run, by_run.get(r, []))
            seq.extend(new)
            ended[(run.role, tuple(norm[i] for i in run.result))] = (seq, len(seq.ids))
            responses = [k for k, i in enumerate(new) if i in self.response_ids]
            ordinal = 0
            previous: _View | None = None
            for ex in by_run.get(r, []):
                upto = responses[ordinal] if ordinal < len(responses) else len(new)
                source = [*run.history, *new[:upto]]
                if previous is not None and self._compacted_shape(previous):
                    source = self._after_compaction(previous.exchange, ex)
                view = _View(ex, run, source, seq, start + upto)
                views.setdefault(ex.role, []).append(view)
                if ex.error is None:
                    ordinal += 1
                    previous = view
        for role_views in views.values():
            role_views.sort(key=lambda v: v.exchange.seq)
        return views

    def _compacted_shape(self, v: _View) -> bool:
        """Whether a request was sent compacted: it carries a summary or lacks an earlier response."""
        sent = v.exchange.messages
        return v.exchange.response is not None and (self.has_summary(sent) or v.logical.responses_missing(v.length, sent))

    def _after_compaction(self, previous: Exchange, ex: Exchange) -> list[int]:
        """What a compaction before ``ex`` got, when an earlier compaction in the same run already
        replaced the run's history: the previous request as sent, its answer, and what ``ex`` adds.

        Not the run's starting history plus its own messages: what the first compaction summarized
        is the summary now, and the second summarizer is given that (a second compaction in one
        run was flagged for losing what the first had summarized). Nor positions in the run's
        result, which the compactions shortened (a later answer was counted as already there).
        """
        before = {*previous.messages, previous.response}
        added = [i for i in ex.messages if i not in before and not self.has_summary([i])]
        sent = list(previous.messages)
        if sent:  # its last message as the run keeps it, not as that one request was sent
            sent[-1] = self._persisted(sent[-1])
        return [*sent, previous.response, *added]  # type: ignore[list-item]

    def _persisted(self, i: int, kept: Counter[tuple[Any, ...]] | None = None) -> int:
        """A tool loop's request without the user prompts appended after its tool results (a reminder,
        a plan: the harness adds them to the one request it sends, never to the run's history — 0.56
        marks neither with a cache point nor with metadata, so a loss check took them for lost).

        ``kept``: the parts the run is known to have kept (re-sent by a later request, or in its result);
        a prompt among them stays — a ``TrajectoryJudge``'s steering is enqueued into the run's history."""
        message = self.msg(i)
        parts = _parts(message)
        last_return = max((k for k, p in enumerate(parts) if p.get("part_kind") in ("tool-return", "retry-prompt")), default=None)
        if last_return is None or message.get("kind") != "request":
            return i
        if not any(p.get("part_kind") == "user-prompt" for p in parts[last_return + 1 :]):
            return i
        stays = [p for p in parts[last_return + 1 :] if kept and p.get("part_kind") == "user-prompt" and kept[_part_key(p)]]
        return self.add({**message, "parts": parts[: last_return + 1] + stays})

    def _new_messages(self, run: AgentRunRecord, exchanges: Sequence[Exchange] = ()) -> list[int]:
        """What the run added to the conversation: its prompt request and everything after it.

        A compaction can drop the prompt from the run's result too (harness 0.54 with
        ``keep_user_messages=True``); then the prompt is rebuilt from ``run.prompt`` and the run's
        own messages start at its first new response. A compaction inside the run (a long tool loop)
        can leave fewer of its answers in the result than it made requests: then the run is read
        from its requests instead — its prompt, and each answer followed by what the next request
        added (the tool results) — or the uncompacted history it is measured against is missing
        turns, and requests that only gained a reminder read as compacted and grown.
        """
        found = self._new_from_result(run)
        answered = [ex for ex in exchanges if ex.response is not None and ex.error is None]
        if len(answered) > sum(i in self.response_ids for i in found) and answered[0].messages:
            # what a later request re-sent (its earlier messages) or the run kept: history, not one request's own
            kept = self.part_keys([*run.result, *(i for ex in answered for i in ex.messages[:-1])])
            rebuilt = [answered[0].messages[-1]]
            for ex, nxt in zip(answered, [*answered[1:], None]):
                rebuilt.append(ex.response)  # type: ignore[arg-type]
                if nxt is not None and nxt.messages and nxt.messages[-1] not in (ex.response, *rebuilt):
                    rebuilt.append(self._persisted(nxt.messages[-1], kept))
            return rebuilt
        return self._without_summaries(self._as_first_sent(found, answered))

    def _without_summaries(self, ids: list[int]) -> list[int]:
        """The run's own messages without a summary a compaction inside the run put among them (0.62 keeps
        its compaction part in the prompt's request): the uncompacted history never had one, and counting it
        there hid a summary that only added to the request."""
        out = []
        for i in ids:
            message = self.msg(i)
            parts = _parts(message)
            if message.get("kind") == "request" and any(_summary_part(p) for p in parts):
                kept = [p for p in parts if not _summary_part(p)]
                if not kept:
                    continue
                i = self.add({**message, "parts": kept})
            out.append(i)
        return out

    def _as_first_sent(self, found: list[int], answered: list[Exchange]) -> list[int]:
        """The run's tool results as the model was first sent them, where the run's result holds them edited.

        A compaction tier that edits results in place (``ClearToolResults`` in a ``TieredCompaction``: "[tool
        result cleared]") edits the run's history too, and the uncompacted history read from it was missing
        what was cleared: a later request, compacted to less than the real history, read as grown. Each
        request that first carried a set of tool results is the last message of the request after it.
        """
        first: dict[tuple[Any, ...], int] = {}
        for ex in answered[1:]:
            if ex.messages:
                ids = self._return_ids(ex.messages[-1])
                if ids and ids not in first:
                    first[ids] = ex.messages[-1]
        if not first:
            return found
        out = []
        for i in found:
            ids = self._return_ids(i)
            sent = first.get(ids) if ids else None
            if sent is not None and sent != i and self._returns(sent) != self._returns(i):
                # the results as sent, in the message as the run keeps it (a reminder kept there stays)
                was = iter([p for p in _parts(self.msg(sent)) if p.get("part_kind") in ("tool-return", "retry-prompt")])
                message = self.msg(i)
                parts = [next(was) if p.get("part_kind") in ("tool-return", "retry-prompt") else p for p in _parts(message)]
                i = self.add({**message, "parts": parts})
            out.append(i)
        return out

    def _return_ids(self, i: int) -> tuple[Any, ...]:
        """The tool call ids a request's tool results answer, in order (empty for any other message)."""
        message = self.msg(i)
        if message.get("kind") != "request":
            return ()
        return tuple(_hashable(p.get("tool_call_id")) for p in _parts(message) if p.get("part_kind") in ("tool-return", "retry-prompt"))

    def _returns(self, i: int) -> list[Any]:
        return [_hashable(p.get("content")) for p in _parts(self.msg(i)) if p.get("part_kind") in ("tool-return", "retry-prompt")]

    def _new_from_result(self, run: AgentRunRecord) -> list[int]:
        result, norm = run.result, self.norm
        prompt = _ws(_part_text({"content": run.prompt})) if run.prompt is not None else ""
        if prompt:
            # The run's own prompt is none of the messages it was handed: a compaction can leave the run's
            # result without it (summarized) but holding an earlier turn's prompt alike ("Read page 1 of the
            # invoice." for "Read page 3 …", or the same "continue"), which is history, not this run's request.
            handed = Counter(norm[i] for i in run.history)
            old = set()
            for k, i in enumerate(result):
                if handed[norm[i]]:
                    handed[norm[i]] -= 1
                    old.add(k)
            for i in range(len(result) - 1, -1, -1):
                m = self.c.messages[result[i]]
                if i not in old and m.get("kind") == "request" and any(
                    p.get("part_kind") == "user-prompt" and _ws(_part_text(p)) == prompt for p in _parts(m)
                ):
                    return result[i:]
            # A capability may rewrite the prompt in the run's history as well as in what it sends (an
            # InputGuardrail's `replace`, a redaction): the run holds that prompt, edited inside.
            words = _TOKEN.findall(prompt)
            for i in range(len(result) - 1, -1, -1):
                m = self.c.messages[result[i]]
                if i not in old and m.get("kind") == "request" and any(
                    p.get("part_kind") == "user-prompt" and _rewritten(words, _TOKEN.findall(_part_text(p)))
                    for p in _parts(m)
                ):
                    return result[i:]
        before = {norm[i] for i in run.history}
        first = next(
            (k for k, i in enumerate(result) if self.c.messages[i].get("kind") == "response" and norm[i] not in before),
            len(result),
        )
        if not prompt:
            # A run resumed without a prompt (``deferred_tool_results``: an approval, an external tool's result)
            # opens with the request carrying those results, just before its first answer: the run's own, not
            # the history's. Starting at the answer left every deferred result out of the uncompacted history,
            # and a compaction that halved a resumed run's request read as grown (30 tokens before, 229 after).
            while first > 0 and self.c.messages[result[first - 1]].get("kind") == "request" and norm[result[first - 1]] not in before:
                first -= 1
            return result[first:]
        rebuilt = [self.add({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": run.prompt}]})]
        return rebuilt + result[first:]


def _rewritten(words: list[str], tokens: list[str]) -> bool:
    """Whether ``tokens`` are the prompt ``words`` edited in one place, as a redaction leaves them: the
    same opening and the same ending, together at least 60 % of either (the differ's share for a field
    edited inside). Another prompt of the same template (``question 1`` for ``question 6``) differs at
    more than one place, so it is not taken for the prompt."""
    if not tokens or tokens == words:
        return False
    most = min(len(words), len(tokens))
    head = next((k for k in range(most) if words[k] != tokens[k]), most)
    tail = next((k for k in range(most - head) if words[-1 - k] != tokens[-1 - k]), most - head)
    return head + tail >= 0.6 * max(len(words), len(tokens))


_CURRENT: contextvars.ContextVar[list[_Index] | None] = contextvars.ContextVar("replay_invariants", default=None)


def _index(c: Cassette) -> _Index:
    """The index of ``c``, shared by the checks of one :func:`evaluate` call (built afresh outside one)."""
    shared = _CURRENT.get()
    if shared and shared[0].c is c:
        return shared[0]
    built = _Index(c)
    if shared is not None:
        shared[:] = [built]
    return built


def _summary_text(c: Cassette, ex: Exchange) -> str:
    if ex.response is None:
        return ""
    return "".join(_part_text(p) for p in _parts(c.messages[ex.response]) if p.get("part_kind") == "text")


def _labels(indices: Iterable[int]) -> str:
    return ", ".join(str(i) for i in indices)


class _Windows:
    """The compaction calls each main request of a role may have been compacted by.

    One conversation per role: the calls since the role's previous request. A role whose
    requests alternate between concurrent conversations (``replay._conversations``): the calls
    since the request this one continues, made inside this request's own agent run (a run's
    ``parent``; a call whose run does not say is kept) -- another conversation's summarizer
    is not this one's, and taking it for one flagged losses that were none.
    """

    def __init__(self, c: Cassette, ix: _Index) -> None:
        self.c, self.ix = c, ix
        self.concurrent = interleaved_roles(c)
        self.predecessors = Predecessors(c) if self.concurrent else None
        self.last: dict[str, Exchange] = {}
        self.own_last: dict[int, int] = {}
        """Each agent run's latest request so far (seq), for :meth:`_own_earlier`."""

    def of(self, role: str, v: _View) -> list[Exchange]:
        ex = v.exchange
        before = self.last.get(role)
        self.last[role] = ex
        if self.predecessors is None or role not in self.concurrent:
            found = self.ix.window(before.seq if before is not None else -1, ex.seq)
            return self._own_earlier(ex, before) + found if before is not None and ex.run is not None else found
        prev = self.predecessors.continued(ex)  # a conversation's first request: since the start, its run's calls only
        runs = self.c.runs
        return [
            e for e in self.ix.window(prev.seq if prev is not None else -1, ex.seq)
            if e.run is None or not 0 <= e.run < len(runs) or runs[e.run].parent in (None, ex.run)
        ]


    def _own_earlier(self, ex: Exchange, before: Exchange) -> list[Exchange]:
        """Compaction calls made inside ``ex``'s own agent run (a run's ``parent``) before the role's previous
        request, and after this run's own previous request: runs of one agent started together whose
        summarizers all answered before the first of them reached the model (``asyncio.gather`` over three
        conversations, each compacted once) do not interleave, so the role keeps one window per request, and
        the second and third requests' windows, since the first, held none of their own summarizer calls:
        their losses went unflagged, and whether they were flagged hung on the order the answers took."""
        run = ex.run
        if run is None or not 0 <= run < len(self.c.runs):
            return []
        own = self.own_last.get(run, -1)
        self.own_last[run] = ex.seq
        inside = self.ix.calls_inside().get(run)
        # bisected among this run's own calls: a run's first request (``own`` -1) scanned every call since the
        # start, once per run, and a 10,000-request recording of one run per turn took 7.7 s instead of 1 s
        return [] if inside is None else self.ix.answered(*inside, own, min(before.seq, ex.seq))

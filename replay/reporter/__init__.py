"""Render diffs and check results for people (text), machines (JSON, JUnit) and pull requests (Markdown)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from xml.sax.saxutils import escape, quoteattr

from .._untrusted import _pair, _short, dumps_json, md_code, md_fence, visible, xml_text
from ..differ import Change, Diff, Entry, MainRequest, RequestDiff

if TYPE_CHECKING:  # rich is imported where text is printed: a JSON run (every matrix cell's) never needs it (~40 ms)
    from rich.console import Console

Format = Literal["text", "json", "markdown", "junit"]
Status = Literal["same", "changed", "error"]


@dataclass
class ScenarioReport:
    """The verdict for one scenario: what the CLI, the matrix and the pytest plugin all print."""

    scenario_id: str
    status: Status
    diff: Diff | None = None
    error: str | None = None
    violations: list[Any] = field(default_factory=list)
    """``replay check``'s violations of one cassette (``replay.invariants.Violation``); a replay's own
    violations, graded against the recording's, are in ``diff.violations``."""
    cassette: str | None = None
    result: str | None = None
    seconds: float | None = None
    """Wall time the verdict took (JUnit ``time``)."""
    file: str | None = None
    """Where to point a person: the scenario's file (else the cassette), for JUnit and GitHub annotations."""
    line: int | None = None


# --------------------------------------------------------------------------- JSON


def change_json(c: Change) -> dict[str, Any]:
    return {"path": c.path, "kind": c.kind, "old": c.old, "new": c.new}


def entry_json(e: Entry) -> dict[str, Any]:
    return {"kind": e.kind, "path": e.path, "label": e.label, "detail": e.detail}


def request_json(r: RequestDiff) -> dict[str, Any]:
    return {
        "role": r.role,
        "index": r.index,
        "status": r.status,
        "messages": [r.messages_a, r.messages_b],
        "estimate": [r.estimate_a, r.estimate_b],
        "lost": r.lost,
        "gained": r.gained,
        "entries": [entry_json(e) for e in r.entries],
        "changes": [change_json(c) for c in r.changes],
        **({} if r.detailed else {"detailed": False}),
    }


def diff_json(d: Diff) -> dict[str, Any]:
    return {
        "scenario_id": d.scenario_id,
        "changed": d.changed,
        "labels": [d.a_label, d.b_label],
        "roles": {r.role: [r.a, r.b] for r in d.roles},
        "main_requests": [
            {
                "role": m.role,
                "index": m.index,
                "messages": [m.messages_a, m.messages_b],
                "estimate": [m.estimate_a, m.estimate_b],
            }
            for m in d.main_requests
        ],
        "requests": [request_json(r) for r in d.requests],
        "outcome": list(d.outcome) if d.outcome else None,
        "observations": [change_json(c) for c in d.observations],
        "notes": d.notes,
        "warnings": d.warnings,
        "versions": list(d.versions),
        "new_violations": [v.as_json() for v in d.new_violations],
        "wire": [w.as_json() for w in d.wire],
        "cache": [{"role": c.role, "index": c.index, c.what: [c.before, c.after]} for c in d.cache],
        "tokens": [vars(t) for t in d.tokens] if d.tokens else None,
        "cost": list(d.cost) if d.cost else None,
        "violations": [v.as_json() for v in d.violations],
    }


def report_json(r: ScenarioReport) -> dict[str, Any]:
    out: dict[str, Any] = {"status": r.status}
    if r.error:
        out["error"] = r.error
    if r.cassette:
        out["cassette"] = r.cassette
    if r.result:
        out["result"] = r.result
    if r.diff is not None:
        out.update({k: v for k, v in diff_json(r.diff).items() if k != "scenario_id"})
    if r.diff is None:
        out["violations"] = [v.as_json() for v in r.violations]
    if r.file:  # where CI points a person (the matrix's JUnit and annotations read them from here)
        out["file"] = _relative(r.file, Path.cwd())
        if r.line is not None:
            out["line"] = r.line
    if r.seconds is not None:
        out["seconds"] = round(r.seconds, 3)
    return out


def reports_json(reports: Sequence[ScenarioReport]) -> dict[str, Any]:
    """Scenarios keyed by id; an id held by several cassettes (a copy in one folder) is keyed
    ``<id> (<cassette>)`` per cassette, as the text tells them apart, each with its ``scenario_id``:
    keyed by id alone, the last verdict replaced the others while the summary still counted them."""
    seen = Counter(r.scenario_id for r in reports)
    scenarios: dict[str, Any] = {}
    for r in reports:
        if seen[r.scenario_id] == 1:
            scenarios[r.scenario_id] = report_json(r)
            continue
        key, n = f"{r.scenario_id} ({r.cassette})" if r.cassette else r.scenario_id, 1
        while key in scenarios:
            n += 1
            key = f"{r.scenario_id} ({r.cassette or ''} #{n})"
        scenarios[key] = {"scenario_id": r.scenario_id, **report_json(r)}
    return {
        "changed": any(r.status != "same" for r in reports),
        "summary": summary_counts(reports),
        "scenarios": scenarios,
    }


def checks_json(reports: Sequence[ScenarioReport]) -> dict[str, Any]:
    """``replay check``'s JSON: its violations in one list, each naming its cassette, in that command's words."""
    violations = [dict(v.as_json(), scenario_id=r.scenario_id, cassette=r.cassette) for r in reports for v in r.violations]
    # a cassette that could not be checked is said here too, as text, Markdown and JUnit say it (and exit 2)
    errors = [{"scenario_id": r.scenario_id, "cassette": r.cassette or r.file, "error": r.error}
              for r in reports if r.status == "error"]
    counts = summary_counts(reports)
    summary = {"ok": counts["same"], "violated": counts["changed"], "error": counts["error"]}
    return {"violations": violations, "errors": errors, "summary": summary,
            "checked": [r.scenario_id for r in reports], "changed": bool(violations or errors)}


def summary_counts(reports: Sequence[ScenarioReport]) -> dict[str, int]:
    out = {"same": 0, "changed": 0, "error": 0}
    for r in reports:
        out[r.status] += 1
    return out


# --------------------------------------------------------------------------- text


def _estimates_lines(d: Diff) -> list[str]:
    """One line per agent of the scenario whose requests moved: an orchestrator's and its
    sub-agents' figures are separate conversations, never one list."""
    by_role: dict[str, list[MainRequest]] = {}
    for m in d.main_requests:
        by_role.setdefault(m.role, []).append(m)
    lines = []
    for role, mains in by_role.items():
        if all(m.estimate_a == m.estimate_b and m.messages_a == m.messages_b for m in mains):
            continue
        a = ", ".join("-" if m.estimate_a is None else str(m.estimate_a) for m in mains)
        b = ", ".join("-" if m.estimate_b is None else str(m.estimate_b) for m in mains)
        order = [m.index for m in mains]
        which = ""
        if order != sorted(order):  # two conversations of one role (two unnamed agents): say whose figure is where
            shown = ", ".join(f"{role}[{i}]" for i in order[:12]) + (", …" if len(order) > 12 else "")
            which = f" (in conversation order: {shown})"
        lines.append(f"{role} request estimates{which}: {d.a_label} [{a}] → {d.b_label} [{b}]")
    return lines


def diff_lines(d: Diff, *, details: bool = True, max_changes: int = 12) -> list[str]:
    """Plain lines (rich markup) for one diff: the summary first, then the details."""
    lines: list[str] = []
    if d.versions[0] != d.versions[1]:
        # a label that is already the version ("harness 0.54.0", from `replay diff`) is not said twice
        sides = [v if v.startswith(label) else f"{label}: {v}" for label, v in zip((d.a_label, d.b_label), d.versions)]
        lines.append("; ".join(sides))
    lines += [f"warning: {w}" for w in d.warnings]
    counts = [f"{r.role} {r.a}→{r.b}" if r.a != r.b else f"{r.role} {r.a}" for r in d.roles]
    lines.append("requests per role: " + (", ".join(counts) or "none (no model was called)"))
    lines += _estimates_lines(d)
    if d.outcome:
        lines.append("outcome: {} → {}".format(*_pair(*_outcome_words(d.outcome[0], d.outcome[1]))))
    for c in d.observations:
        lines.append("observation {}: {} → {}".format(c.path.removeprefix("observations."), *_pair(c.old, c.new)))
    for note in d.notes:
        lines.append(f"divergence: {note}")
    lines += violation_lines(d)
    lines += [w.describe() for w in d.wire[:max_changes]]
    if len(d.wire) > max_changes:
        lines.append(f"… {len(d.wire) - max_changes} more wire changes")
    lines += _economics(d, max_changes)
    if not details:
        return lines
    last: dict[str, tuple[str, set[str]]] = {}
    for r in d.requests:
        lines += request_head(r)
        # Each request re-sends the history: what the previous changed request of the role
        # already showed is counted, not repeated, so each request shows what is new in it.
        body = request_lines(r)
        seen_label, seen = last.get(r.role, ("", set()))
        fresh = [text for key, text in body if key not in seen]
        last[r.role] = (r.label, {key for key, _ in body})
        lines += ["  " + text for text in fresh[:max_changes]]
        if len(fresh) > max_changes:
            lines.append(f"  … {len(fresh) - max_changes} more (--format json for all)")
        if len(fresh) < len(body):
            lines.append(f"  … {len(body) - len(fresh)} as in {seen_label}")
    return lines


def _outcome_words(a: Any, b: Any) -> tuple[Any, Any]:
    """Two outcomes as ``ok "its output"`` / ``error Class: message``, as ``record`` says them: their JSON,
    cut at 80 characters, hid the error's class behind its message (``{"error": {"message": "harness-replay:
    request #4 of role 'main', but the cas...``). The JSON when the words would read alike."""
    def words(o: Any, whole: bool) -> str | None:
        if not isinstance(o, dict):
            return None
        error = o.get("error")
        if isinstance(error, dict):
            kind = str(error.get("type") or "error")
            message = error.get("message")
            return f"error {kind if whole else kind.rsplit('.', 1)[-1]}" + (f": {message}" if message else "")
        if o.get("status") == "ok":
            return "ok " + json.dumps(o.get("output"), sort_keys=True, default=str)
        return None

    short = words(a, False), words(b, False)
    if short[0] is not None and short[0] == short[1]:
        short = words(a, True), words(b, True)
    if short[0] is None or short[1] is None or short[0] == short[1]:
        return a, b
    return short


def request_head(r: RequestDiff) -> list[str]:
    """``main[1] changed, estimate 7→10``; for a request one side only made, its size and then its last message
    (``main[3] added, 7 messages, estimate 11`` / ``  last message: again``): the turn an edit added or dropped."""
    head = f"{r.label} {r.status}"
    if r.messages_a is not None and r.messages_b is not None and r.messages_a != r.messages_b:
        head += f", messages {r.messages_a}→{r.messages_b}"
    if r.estimate_a is not None and r.estimate_b is not None and r.estimate_a != r.estimate_b:
        head += f", estimate {r.estimate_a}→{r.estimate_b}"
    if r.status == "changed":
        return [head]
    count, estimate = (r.messages_b, r.estimate_b) if r.status == "added" else (r.messages_a, r.estimate_a)
    head += "".join([f", {count} message{'' if count == 1 else 's'}" if count is not None else "",
                     f", estimate {estimate}" if estimate is not None else ""])
    return [head] + ([f"  last message: {_short(r.last)}"] if r.last is not None else [])


_INSTRUCTION_PART = re.compile(r"\.parameters\.instruction_parts\[\d+\]\.content$")
_MESSAGE_INSTRUCTIONS = re.compile(r"\.messages\[\d+\]\.instructions$")


def shown_changes(r: RequestDiff) -> list[Change]:
    """The request's changes less an instruction part's edit that its message's ``instructions`` already show.

    Slim 2.62 sends instructions twice over: joined on the last request message, and part by part in the
    parameters. One edit to the harness's instructions read as two lines saying the same thing. A part's edit is
    left out only where a message's instructions changed from a text holding the part's old content to one
    holding its new content; a part whose edit the joined text does not show (a flag, a split) stays. The JSON
    keeps every change."""
    joined = [
        (c.old, c.new) for c in r.changes
        if c.kind == "changed" and type(c.old) is str and type(c.new) is str and _MESSAGE_INSTRUCTIONS.search(c.path)
    ]
    if not joined:
        return list(r.changes)

    def said(c: Change) -> bool:
        return (
            c.kind == "changed" and type(c.old) is str and type(c.new) is str
            and _INSTRUCTION_PART.search(c.path) is not None
            and any(c.old in old and c.new in new for old, new in joined)
        )

    return [c for c in r.changes if not said(c)]


def request_lines(r: RequestDiff) -> list[tuple[str, str]]:
    """(key, line) per entry and field change of one request; the key leaves the request's ordinal out."""
    out = [(entry_line(e), entry_line(e)) for e in r.entries if e.kind != "changed"]
    if not r.detailed:
        out.append(("details left out (the diff's detail bound)", "details left out (the diff's detail bound)"))
    for c in shown_changes(r):
        if c.kind == "changed" or c.kind == "type":
            old, new = _pair(c.old, c.new)
            text = f"{c.path}: {old} → {new}"
        elif c.kind == "added":
            text = f"+ {c.path}: {_short(c.new)}"
        else:
            text = f"- {c.path}: {_short(c.old)}"
        out.append((text.replace(r.label, r.role, 1), text))
    return out


def dollars(value: float) -> str:
    """An estimated cost: four decimals, or two significant figures below a tenth of a cent (a cheap
    model's run costs millionths of a dollar, which four decimals showed as ``$0.0000``)."""
    import math

    if value == 0 or not math.isfinite(value) or abs(value) >= 0.001:
        return f"${value:,.4f}"
    return f"${value:.{1 - math.floor(math.log10(abs(value)))}f}"


def _economics(d: Diff, max_changes: int) -> list[str]:
    """Prompt-cache and cost lines: said only where the figures moved."""
    lines = [c.describe() for c in d.cache[:max_changes]]
    if len(d.cache) > max_changes:
        lines.append(f"… {len(d.cache) - max_changes} more cacheable-prefix changes")
    if d.tokens and d.tokens[0] != d.tokens[1]:
        a, b = d.tokens
        lines.append(
            f"input tokens {a.input:,} → {b.input:,} (cacheable {a.cached:,} → {b.cached:,}), output {a.output:,} → {b.output:,}"
        )
    a_cost, b_cost = d.cost or (None, None)
    if a_cost is not None and b_cost is not None and a_cost != b_cost:
        change = f" ({(b_cost - a_cost) / a_cost:+.0%})" if a_cost else ""
        lines.append(f"estimated cost {dollars(a_cost)} → {dollars(b_cost)}{change}")
    return lines


_ENTRY_VERB = {"removed": "- removed", "inserted": "+ inserted", "moved": "~ moved", "rewrapped": "~ rewrapped"}


def entry_line(e: Entry) -> str:
    """``- removed messages[3]: U2`` / ``~ rewrapped messages[0].parts[0→1] (system-prompt → compaction): …``."""
    detail = f" ({e.detail})" if e.detail else ""
    return f"{_ENTRY_VERB.get(e.kind, e.kind)} {e.path}{detail}: {_short(e.label)}"


def violation_lines(d: Diff) -> list[str]:
    """The replay's own violations, each marked new / worse / unchanged / better / gone against the recording."""
    if d.violations:
        baseline = "recording" if d.a_label == "recorded" else d.a_label
        return [f"violation ({c.status}): {c.describe(baseline)}" for c in d.violations]
    return [f"violation (new): {v.describe()}" for v in d.new_violations]


_STYLE = {"same": "green", "changed": "yellow", "error": "red"}


_CHECK_LABEL = {"same": "OK", "changed": "VIOLATED", "error": "ERROR"}


def _t(text: str) -> str:
    """Cassette text for the console: controls visible, rich markup inert."""
    from rich.markup import escape as rich_escape

    return rich_escape(visible(text))


def _shared_warnings(reports: Sequence[ScenarioReport]) -> dict[str, int]:
    """Warnings of a ``same`` verdict that several ``same`` verdicts share, with how many: said once, after the list.

    Replayed on another Python, every scenario of a run carries the same "recorded on Python 3.11.7, replayed on
    Python 3.13.0" line; printed under each, 55 bundled scenarios read as 110 lines and hid the one warning that was
    a scenario's own. A changed verdict keeps its warnings under it, where they explain that change; JSON keeps all."""
    counts = Counter(w for r in reports if r.status == "same" and r.diff is not None for w in dict.fromkeys(r.diff.warnings))
    return {w: n for w, n in counts.items() if n > 1}


def print_text(
    reports: Sequence[ScenarioReport], console: Console | None = None, *, details: bool = True, checks_only: bool = False
) -> None:
    """``checks_only``: ``replay check``'s wording (OK / VIOLATED, "cassettes"), whatever the reports hold —
    a run or diff whose every target errored has no diff either, and is still a run."""
    if console is None:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True, emoji=False)
    seen = Counter(r.scenario_id for r in reports)
    shared = _shared_warnings(reports)
    for r in reports:
        style = _STYLE[r.status]
        label = _CHECK_LABEL[r.status] if checks_only else r.status.upper()
        where = f"  {_t(r.cassette)}" if seen[r.scenario_id] > 1 and r.cassette else ""  # one id in two folders
        console.print(f"[{style}]{label:8}[/{style}] {_t(r.scenario_id)}{where}")
        if r.error:
            console.print(f"         {_t(r.error)}")
        if r.diff is not None and r.status != "same":
            for line in diff_lines(r.diff, details=details):
                console.print("         " + _t(line))
        elif r.diff is not None:
            for w in r.diff.warnings:
                if w not in shared:
                    console.print("         [yellow]warning[/yellow] " + _t(w))
            for line in violation_lines(r.diff):
                console.print("         " + _t(line))
        for v in r.violations:
            console.print("         [red]violation[/red] " + _t(v.describe()))
    for w, n in shared.items():
        console.print(f"[yellow]warning[/yellow] ({n} same verdicts) " + _t(w))
    c = summary_counts(reports)
    if checks_only:
        console.print(f"{len(reports)} cassettes: {c['same']} ok, {c['changed']} with violations, {c['error']} error")
    else:
        console.print(f"{len(reports)} scenarios: {c['same']} same, {c['changed']} changed, {c['error']} error")


# --------------------------------------------------------------------------- Markdown


def request_summaries(d: Diff, limit: int = 5) -> list[str]:
    """``main[0] changed (lost U11)`` for the first requests: the Markdown row and the annotation alike."""
    out = [f"{q.label} {q.status}" + (f" (lost {', '.join(q.lost)})" if q.lost else "") for q in d.requests[:limit]]
    if len(d.requests) > limit:  # the others counted: the text lists every one
        out.append(f"… {len(d.requests) - limit} more requests that differ")
    return out


def markdown(reports: Sequence[ScenarioReport], title: str = "harness-replay", *, checks_only: bool = False) -> str:
    """``checks_only`` (``replay check``): in that command's own words, ok / violated, as its text says."""
    c = summary_counts(reports)
    if checks_only:
        out = [f"### {title}: {c['same']} ok, {c['changed']} with violations, {c['error']} error", ""]
        out += ["| cassette | status | violations |", "|---|---|---|"]
        icon = {"same": "✅ ok", "changed": "⚠️ violated", "error": "❌ error"}
    else:
        out = [f"### {title}: {c['same']} same, {c['changed']} changed, {c['error']} error", ""]
        out += ["| scenario | status | what changed |", "|---|---|---|"]
        icon = {"same": "✅ same", "changed": "⚠️ changed", "error": "❌ error"}
    seen = Counter(r.scenario_id for r in reports)
    for r in reports:
        what: list[str] = []
        if r.error:
            what.append(r.error)
        if r.diff is not None and r.status != "same":
            what += diff_lines(r.diff, details=False)
            what += request_summaries(r.diff)
        elif r.diff is not None:  # as the text says of a same verdict: its warnings, then its violations
            what += [f"warning: {w}" for w in r.diff.warnings] + violation_lines(r.diff)
        what += [f"violation: {v.describe()}" for v in r.violations]
        where = f"  {r.cassette}" if seen[r.scenario_id] > 1 and r.cassette else ""  # one id in two folders, as the text says
        out.append(f"| {md_code(r.scenario_id + where)} | {icon[r.status]} | {'<br>'.join(md_code(w) for w in what)} |")
    details = [r for r in reports if r.diff is not None and r.diff.requests]
    for r in details:
        assert r.diff is not None
        out += ["", f"<details><summary><code>{escape(visible(r.scenario_id))}</code> details</summary>", ""]
        out += md_fence([visible(line) for line in diff_lines(r.diff)])
        out += ["</details>"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- JUnit


def junit(reports: Sequence[ScenarioReport], suite: str = "harness-replay") -> str:
    """One test case per scenario, so CI dashboards show replay results like test results.

    ``time`` and ``file``/``line`` are the attributes pytest's own JUnit XML carries, which
    dashboards use for durations and links to the source.
    """
    c = summary_counts(reports)
    total = sum(r.seconds or 0.0 for r in reports)
    out = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<testsuites><testsuite name={quoteattr(xml_text(suite))} tests="{len(reports)}" '
        f'failures="{c["changed"]}" errors="{c["error"]}" skipped="0" time="{total:.3f}">',
    ]
    for r in reports:
        classname, _, name = r.scenario_id.rpartition("/")
        classname, name = xml_text(classname or suite), xml_text(name or r.scenario_id)
        where = "".join(
            [
                f" file={quoteattr(xml_text(_relative(r.file, Path.cwd())))}" if r.file else "",
                f' line="{r.line}"' if r.line is not None else "",
            ]
        )
        out.append(f'<testcase classname={quoteattr(classname)} name={quoteattr(name)} time="{r.seconds or 0.0:.3f}"{where}>')
        body = "\n".join(visible(line) for line in diff_lines(r.diff)) if r.diff is not None else ""
        body += "".join(f"\nviolation: {visible(v.describe())}" for v in r.violations)
        if r.status == "error":
            out.append(f"<error message={quoteattr(xml_text(r.error or 'error'))}>{escape(xml_text(body))}</error>")
        elif r.status == "changed":
            out.append(f"<failure message={quoteattr(xml_text(_headline(r, body)))}>{escape(xml_text(body))}</failure>")
        out.append("</testcase>")
    out.append("</testsuite></testsuites>")
    return "\n".join(out) + "\n"


def _headline(r: ScenarioReport, body: str) -> str:
    first = diff_lines(r.diff, details=False)[0] if r.diff is not None else "changed"
    return next((ln for ln in body.splitlines() if ln.startswith(_FAILING)), first)


def _relative(file: str, root: Path) -> str:
    """``file`` relative to ``root`` when inside it (links and annotations resolve against the checkout);
    as given when it cannot be resolved (a merged shard's text)."""
    try:
        path, root = Path(file).resolve(), root.resolve()
    except (ValueError, OSError):
        return file
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else file


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A ``file=``/``title=`` value: one line, nothing a terminal acts on (a cassette's file name comes with
    the pull request: `bad\x1b]0;…\x07.cassette` reached the log raw through both)."""
    return _escape_data(visible(text)).replace(":", "%3A").replace(",", "%2C")


def github_annotations(reports: Sequence[ScenarioReport], *, checks_only: bool = False) -> list[str]:
    """``::error file=…,line=…,title=…::…`` for each changed or failed scenario, shown on the PR's diff.

    Paths are relative to the checkout (``GITHUB_WORKSPACE``, else the working directory), as
    GitHub matches them against the files of the commit.
    """
    out = []
    for r in reports:
        if r.status == "same":
            continue
        title = f"harness-replay: {r.scenario_id} {'error' if r.status == 'error' else 'violated' if checks_only else 'changed'}"
        if r.status == "error":
            lines = (r.error or "error").splitlines()
        else:
            lines = diff_lines(r.diff, details=False) + request_summaries(r.diff) if r.diff is not None else []
            lines = [*lines, *(f"violation: {v.describe()}" for v in r.violations)][:20] or ["changed"]
        out.append(annotation(title, lines, r.file, r.line))
    return out


def annotation(title: str, lines: Sequence[str], file: str | None = None, line: int | None = None) -> str:
    """One ``::error file=…,line=…,title=…::…`` workflow command, which GitHub shows on the pull request's diff.

    The path is made relative to the checkout (``GITHUB_WORKSPACE``, else the working directory), as
    GitHub matches it against the commit's files. Each line is made visible on its own, as text and
    JUnit do (a CRLF inside a value stays in its line): cassette text is untrusted.
    """
    props = []
    if file:
        root = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())
        props.append(f"file={_escape_property(_relative(file, root))}")
        if line is not None:
            props.append(f"line={line}")
    props.append(f"title={_escape_property(title)}")
    message = "\n".join(visible(text) for text in lines)
    return f"::error {','.join(props)}::{_escape_data(message)}"


_FAILING = ("violation:", "violation (new)", "violation (worse)")


STEP_SUMMARY_BYTES = 1024 * 1024
"""GitHub shows a step's summary only up to 1 MiB: past it, the upload of the whole file is aborted."""


def _fit_summary(text: str, room: int) -> str:
    """``text`` cut at a line so that it, the code block and ``<details>`` it leaves open closed, and a note saying
    so take at most ``room`` bytes (empty when not even the note fits)."""
    note = "\n_… harness-replay: step summary truncated (GitHub shows 1 MiB); run the command with `--format markdown` for all of it._\n"
    budget = room - len(note.encode()) - 64  # 64: the closing fence and tags (a fence is at most a few backticks)
    if budget <= 0:
        return ""
    kept: list[str] = []
    used = 0
    fence: str | None = None
    details = 0
    for line in text.splitlines():
        size = len(line.encode()) + 1
        closing = (len(fence) + 1 if fence else 0) + len("</details>\n") * details
        if used + size + closing > budget:
            break
        kept.append(line)
        used += size
        if fence is None and len(line) >= 3 and set(line) == {"`"}:
            fence = line
        elif fence is not None and line == fence:
            fence = None
        elif fence is None and line.startswith("<details>"):
            details += 1
        elif fence is None and line == "</details>" and details:
            details -= 1
    if fence is not None:
        kept.append(fence)
    kept += ["</details>"] * details
    return "\n".join(kept) + "\n" + note


def write_step_summary(text: str) -> None:
    """Append Markdown to GitHub's job summary when running in Actions.

    Each block starts on a blank line: two commands in one job (``run`` then ``check``) otherwise
    put the second heading right after the first's ``</details>``, where CommonMark reads it as
    part of the HTML block and shows ``### …`` literally. The file is kept within
    :data:`STEP_SUMMARY_BYTES` (a cassette of 80,000 expectations made 13.8 MB, and GitHub showed none of it).
    """
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    text = text if text.startswith("\n") else "\n" + text
    try:
        with open(path, "a", encoding="utf-8") as fh:
            room = STEP_SUMMARY_BYTES - fh.tell()
            if len(text.encode()) > room:
                text = _fit_summary(text, room)
                if not text:
                    print(visible(f"replay: warning: GITHUB_STEP_SUMMARY={path}: full (GitHub shows 1 MiB); "
                                  "this summary is not added"), file=sys.stderr)
                    return
            fh.write(text)
    except OSError as exc:  # the verdict is on stdout and in the exit code; a summary it cannot add was a traceback
        reason = exc.strerror or type(exc).__name__
        print(visible(f"replay: warning: GITHUB_STEP_SUMMARY={path}: cannot append the step summary: {reason}"),
              file=sys.stderr)


def emit(
    reports: Sequence[ScenarioReport],
    fmt: Format,
    console: Console | None = None,
    title: str = "harness-replay",
    *,
    checks_only: bool = False,
) -> None:
    """Print ``reports`` in ``fmt``; Markdown also goes to ``$GITHUB_STEP_SUMMARY`` when set."""
    from ..scrub import redact

    reports = redact(list(reports))  # every output passes the cassettes' scrubber, whatever its source
    if fmt == "json" and checks_only:
        print(dumps_json(checks_json(reports), indent=2))
    elif fmt == "json":
        print(dumps_json(reports_json(reports), indent=2, sort_keys=False))
    elif fmt == "markdown":
        print(markdown(reports, title, checks_only=checks_only), end="")
    elif fmt == "junit":
        print(junit(reports, title), end="")
    else:
        print_text(reports, console, checks_only=checks_only)
    ci_extras(reports, fmt, title, checks_only=checks_only)


def ci_extras(reports: Sequence[ScenarioReport], fmt: Format, title: str, *, checks_only: bool = False) -> None:
    """The step summary and the pull-request annotations of (redacted) ``reports``, whatever ``fmt`` printed."""
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(markdown(reports, title, checks_only=checks_only))
    if os.environ.get("GITHUB_ACTIONS") == "true":  # the runner reads workflow commands from stdout and stderr alike
        stream = sys.stdout if fmt == "text" else sys.stderr  # keep JSON/JUnit/Markdown on stdout parseable
        for line in github_annotations(reports, checks_only=checks_only):
            print(line, file=stream)

"""A changed replay as a pytest failure reads like pytest's own assertion output.

pytest users read failures a certain way: paths in their natural order (``messages[2]``
before ``messages[10]``), long strings as a diff rather than two truncated halves, colour
when the terminal has it, and a short report that says how to see the rest (``-vv``),
never an option pytest has not got. The CLI keeps its own text (``replay.reporter``); this
module only re-lays the same ``Diff`` for a test report. Every text from a cassette is escaped
(``visible``) before colour is added: a cassette arrives in a pull request, and a terminal must
not act on what it holds.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ._untrusted import _pair, _short, visible
from .differ import Change, Diff, RequestDiff, natural_key
from .reporter import diff_lines, entry_line, request_head, shown_changes

Paint = Callable[[str, str], str]
"""(text, colour) → text with the terminal's markup, or unchanged when it has none."""

SHORT_DETAIL_LINES = 16
"""Detail lines shown below ``-vv``; the summary lines above them are always shown."""

def _plain(text: str, colour: str) -> str:
    return text


def string_diff(old: str, new: str, *, verbose: bool) -> list[str]:
    """Two strings as ``-``/``+`` lines: a unified diff of lines when multi-line, else around the difference."""
    if "\n" in old or "\n" in new:
        lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1 if not verbose else 3)
        return [ln for ln in lines if not ln.startswith(("---", "+++"))]
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    context = 20
    start = max(0, prefix - context)
    out = [f"Skipping {start} identical leading characters"] if start else []
    width = None if verbose else 200
    for sign, text in (("-", old), ("+", new)):
        shown = text[start : len(text) - max(0, suffix - context)]
        if width is not None and len(shown) > width:
            shown = shown[: width - 1] + "…"
        out.append(f"{sign} {shown}")
    return out


def _is_long(c: Change) -> bool:
    if not (isinstance(c.old, str) and isinstance(c.new, str)):
        return False
    return "\n" in c.old or "\n" in c.new or max(len(c.old), len(c.new)) > 80


def change_lines(c: Change, *, verbose: bool, paint: Paint = _plain) -> list[str]:
    """One change: a line for short values, a path then a diff for long strings."""
    if c.kind in ("changed", "type") and _is_long(c):
        body = string_diff(c.old, c.new, verbose=verbose)
        return [visible(f"{c.path}:"), *("  " + _colour(visible(ln), paint) for ln in body)]
    if c.kind in ("changed", "type"):
        old, new = _pair(c.old, c.new)
        return [visible(f"{c.path}: {old} → {new}")]
    if c.kind == "added":
        return [paint(visible(f"+ {c.path}: {_short(c.new)}"), "green")]
    return [paint(visible(f"- {c.path}: {_short(c.old)}"), "red")]


def _colour(line: str, paint: Paint) -> str:
    if line.startswith("+"):
        return paint(line, "green")
    if line.startswith("-"):
        return paint(line, "red")
    return line


def request_lines(r: RequestDiff, *, verbose: bool, paint: Paint = _plain) -> list[str]:
    head, *last = request_head(r)
    out = [paint(visible(head), "bold"), *(visible(line) for line in last)]
    out += ["  " + _colour(visible(entry_line(e)), paint) for e in r.entries if e.kind != "changed"]
    for c in sorted(shown_changes(r), key=lambda c: natural_key(c.path)):
        out += ["  " + ln for ln in change_lines(c, verbose=verbose, paint=paint)]
    return out


def failure_lines(d: Diff, *, verbosity: int = 0, paint: Paint = _plain) -> list[str]:
    """The summary (always whole), then each changed request; below ``-vv`` the details are cut short."""
    verbose = verbosity >= 2
    summary = [visible(line) for line in diff_lines(d, details=False)]
    details = [ln for r in d.requests for ln in request_lines(r, verbose=verbose, paint=paint)]
    if not verbose and len(details) > SHORT_DETAIL_LINES:
        hidden = len(details) - SHORT_DETAIL_LINES
        details = [*details[:SHORT_DETAIL_LINES], f"...Full output truncated ({hidden} lines hidden), use '-vv' to show"]
    return [*summary, *details]

"""Text and names that come from a cassette, made safe for where they go.

Cassettes arrive in pull requests and are printed by ``git diff`` (textconv), CI logs,
JUnit dashboards, step summaries and HTML pages. Any string in them may carry terminal
escape sequences (ESC, C1 CSI, OSC), carriage returns or newlines that forge output lines,
bidi overrides that reorder what a reviewer reads, or ``../`` that points a write elsewhere.
Every front goes through these helpers, so a new output path cannot forget one of them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import ReplayUsageError

# Unicode categories Cc (controls; C0 added below), Cf (format: bidi overrides, zero-width, BOM), Zl, Zp and Cs
# (lone surrogates), as ranges: building the class from unicodedata at import would cost
# ~150 ms per command. tests/unit/test_untrusted.py checks it against unicodedata.
_CONTROL_RANGES = (
    "\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE_LINE = re.compile(f"[\x00-\x1f{_CONTROL_RANGES}]")


def on_use(pattern: str) -> Callable[[], re.Pattern[str]]:
    """``pattern`` compiled the first time it is needed: every command imports this module and
    the scrubber, and most texts reach few of their patterns (each costs a third of a millisecond)."""
    return functools.cache(functools.partial(re.compile, pattern))


_unsafe_block = on_use(f"[\x00-\x08\x0b-\x1f{_CONTROL_RANGES}]")
"""As ``_UNSAFE_LINE`` but keeping tab and newline: for text that is several lines by design."""
_unsafe_in_json = on_use(f"[{_CONTROL_RANGES}]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw: it escapes C0 in strings itself, and a
raw newline or space in its output is indentation, outside any string."""


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible_char(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_workflow_command = on_use(r"(?m)^([ \t]*)([:#])(?=:|#\[)")
"""A line that GitHub Actions reads as a workflow command: ``::`` or ``##[`` after blanks (the runner trims them)."""


def _not_a_command(match: re.Match[str]) -> str:
    return match.group(1) + ("\\x3a" if match.group(2) == ":" else "\\x23")


def visible(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control, format and line-separator character shown as an escape.

    The one escaping step for terminal text: ``\\x1b`` cannot start a sequence, ``\\r`` cannot
    overwrite a line and, unless ``multiline``, ``\\n`` cannot start a forged one. Nor can a line
    (``text``, or with ``multiline`` each of its lines) start with ``::`` or ``##[``, which the GitHub Actions
    runner reads as a workflow command (``::stop-commands::…`` silenced the job's annotations): its first
    character is shown as ``\\x3a`` / ``\\x23``.
    """
    pattern = _unsafe_block() if multiline else _UNSAFE_LINE
    if pattern.search(text) is not None:
        text = pattern.sub(_visible_char, text)
    if ("::" in text or "##[" in text) and _workflow_command().search(text) is not None:
        text = _workflow_command().sub(_not_a_command, text)
    return text


def _json_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON string spells astral characters as a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def dumps_json(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that keeps non-ASCII text readable but escapes what a terminal would act on.

    ``ensure_ascii=False`` leaves C1 controls, bidi overrides and U+2028 raw; they only occur
    inside string literals, where ``\\uXXXX`` means the same value, so the data is unchanged.
    """
    text = _indented_plain(value) if kwargs == {"indent": 2} else None
    if text is None:
        kwargs.setdefault("ensure_ascii", False)
        kwargs.setdefault("default", str)
        try:
            text = json.dumps(value, allow_nan=False, **kwargs)
        except ValueError:  # NaN or infinity (an observation): strict JSON has none, `jq` refuses bare NaN
            text = json.dumps(finite(value), **kwargs)
    if text.isascii() and "\x7f" not in text:  # DEL is the one character of _CONTROL_RANGES below 0x80:
        return text  # two scans at memory speed, where the class search read a 10 MB report in 0.15 s
    unsafe = _unsafe_in_json()
    return unsafe.sub(_json_char, text) if unsafe.search(text) else text


_UP: Any = object()
"""Marks the end of a container's items in :func:`_indented_plain`'s walk."""
_DEEPEST = 2000
"""Nesting past which :func:`_indented_plain` leaves a value to ``json`` (which refuses it)."""


def _indented_plain(value: Any) -> str | None:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, written by pydantic-core, for a value made
    only of maps with text keys, lists, tuples, text, booleans, None, integers and finite floats
    (see below); None for anything else.

    With ``indent`` the standard library encodes in Python: the 10 MB report of a 10,000-request
    ``replay diff --format json`` took 0.38 s of CPU to write, pydantic-core a tenth of that. For
    such values both write the same text (the same indentation, separators, empty ``[]`` and ``{}``,
    and escapes: the short forms, ``\\u00xx`` for other control characters, nothing else; shown
    by tests/unit/test_untrusted.py). Floats Python writes with an exponent (``1e-05`` against
    ``1e-5``), other types and text pydantic-core refuses (a lone surrogate) are left to ``json``:
    a float without one (a report's ``seconds``) is written alike, and one in the report sent the
    whole 10 MB report of a 10,000-request diff to ``json`` (0.35 s).
    """
    stack = [value]
    depth = 0  # of the containers being walked: a value that holds itself is endlessly deep
    while stack:
        item = stack.pop()
        if item is _UP:
            depth -= 1
            continue
        t = type(item)
        if t is str or t is bool or t is int or item is None:
            continue
        if t is float:  # written alike but where Python's repr takes an exponent (and NaN, infinity)
            if item - item != 0.0 or "e" in repr(item):
                return None
            continue
        if t is dict:
            if not all(type(k) is str for k in item):
                return None
            children: Any = item.values()
        elif t is list or t is tuple:
            children = item
        else:
            return None
        depth += 1
        if depth > _DEEPEST:  # deeper than json can write anyway, or a cycle: json says which
            return None
        stack.append(_UP)
        stack.extend(children)
    try:
        from pydantic_core import to_json

        return to_json(value, indent=2).decode("utf-8")
    except Exception:  # e.g. a lone surrogate, which pydantic-core cannot encode: json writes it
        return None


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float as its text (``"NaN"``, ``"Infinity"``, ``"-Infinity"``):
    what strict JSON can hold, and what compares equal to itself (NaN is unequal to itself, so an
    observation of one made a cassette differ from its own copy and its expectation fail forever)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class _StrictEncoder(json.JSONEncoder):
    """Writes NaN and infinity as text, as :func:`finite` does, while it writes: no walk of the value first
    (``show --format json`` of a large cassette streams). With ``indent`` the standard library encodes in
    Python anyway, through the same ``_make_iterencode`` given this ``floatstr``."""

    def iterencode(self, o: Any, _one_shot: bool = False) -> Iterator[str]:
        def floatstr(value: float) -> str:
            if value != value:
                return '"NaN"'
            if value in (float("inf"), float("-inf")):
                return '"Infinity"' if value > 0 else '"-Infinity"'
            return float.__repr__(value)

        encoder = json.encoder.encode_basestring_ascii if self.ensure_ascii else json.encoder.encode_basestring
        # Python 3.13 turns an int indent into spaces in JSONEncoder.iterencode, replaced here, no longer in
        # _make_iterencode: given 2, it failed on its first nested container (`'\n' + 2 * level`).
        indent = self.indent if self.indent is None or isinstance(self.indent, str) else " " * self.indent
        make = json.encoder._make_iterencode  # type: ignore[attr-defined]
        return make(  # type: ignore[no-any-return]
            {} if self.check_circular else None, self.default, encoder, indent, floatstr,
            self.key_separator, self.item_separator, self.sort_keys, self.skipkeys, _one_shot,
        )(o, 0)


def json_chunks(value: Any, **kwargs: Any) -> Iterator[str]:
    """:func:`dumps_json` in pieces, so a caller with an output budget can stop early."""
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("default", str)
    unsafe = _unsafe_in_json()
    for chunk in _StrictEncoder(**kwargs).iterencode(value):
        yield unsafe.sub(_json_char, chunk) if unsafe.search(chunk) else chunk


def md_code(text: str) -> str:
    """A Markdown code span showing ``text`` literally, safe inside a table cell."""
    text = visible(text).replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(lines: list[str]) -> list[str]:
    """A fenced code block around ``lines`` (already :func:`visible`), longer than any fence inside."""
    run = max((len(m) for line in lines for m in re.findall(r"`{3,}|~{3,}", line)), default=0)
    fence = "`" * max(3, run + 1)
    return [fence, *lines, fence]


_xml_illegal = on_use("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """Text for an XML document: controls visible (XML 1.0 cannot hold most of them at all)."""
    out = visible(text, multiline=True)
    illegal = _xml_illegal()
    return illegal.sub(_visible_char, out) if illegal.search(out) else out


# --------------------------------------------------------------------------- scenario ids and paths

MAX_ID = 512
MAX_SEGMENT = 200
_DRIVE = re.compile(r"[A-Za-z]:")
_RESERVED = frozenset(
    ["con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))]
)


def id_problem(scenario_id: object) -> str | None:
    """Why ``scenario_id`` cannot name a cassette file, or ``None`` when it can.

    An id becomes ``<cassettes>/<id>.cassette``: it must be a plain relative path of safe
    segments, so no id written in a scenario or read from a cassette header points a write
    outside its folder (``..``, absolute, drive letters) or breaks on another platform.
    """
    if not isinstance(scenario_id, str):
        return f"scenario id must be text, not {type(scenario_id).__name__}"
    if not scenario_id:
        return "scenario id is empty"
    if len(scenario_id) > MAX_ID:
        return f"scenario id is {len(scenario_id)} characters long (at most {MAX_ID})"
    if _UNSAFE_LINE.search(scenario_id):
        return f"scenario id {visible(scenario_id)!r} contains control characters"
    if "\\" in scenario_id:
        return f"scenario id {scenario_id!r} contains a backslash"
    if scenario_id.startswith("/") or _DRIVE.match(scenario_id):
        return f"scenario id {scenario_id!r} is an absolute path"
    for segment in scenario_id.split("/"):
        if not segment:
            return f"scenario id {scenario_id!r} has an empty path segment"
        if segment in (".", ".."):
            return f"scenario id {scenario_id!r} has a {segment!r} segment"
        if segment.startswith("-"):
            return f"scenario id {scenario_id!r} has a segment starting with '-' (read as an option)"
        if len(segment) > MAX_SEGMENT:
            return f"scenario id {scenario_id[:40]!r}… has a segment over {MAX_SEGMENT} characters"
        if segment.split(".")[0].strip().lower() in _RESERVED:
            return f"scenario id {scenario_id!r} has a segment {segment!r} reserved on Windows"
        if segment[-1] in ". ":
            return f"scenario id {scenario_id!r} has a segment ending in {segment[-1]!r} (Windows drops it)"
    return None


def check_id(scenario_id: str) -> str:
    """``scenario_id`` if it is safe (see :func:`id_problem`), else a usage error naming it."""
    problem = id_problem(scenario_id)
    if problem is not None:
        raise ReplayUsageError(problem)
    return scenario_id


def confined(directory: Path, relative: str) -> Path:
    """``directory / relative``, refused unless it resolves inside ``directory``.

    Checked on the resolved path, so a symlinked sub-folder pointing elsewhere is caught too.
    """
    if PurePosixPath(relative).is_absolute() or "\x00" in relative:
        raise ReplayUsageError(f"{visible(relative)!r}: not a relative path inside {directory}")
    target = directory / relative
    base = directory.resolve()
    resolved = target.resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise ReplayUsageError(f"{visible(str(target))}: resolves to {visible(str(resolved))}, outside {directory}")
    return target


# --------------------------------------------------------------------------- one value beside another


def _pair(old: Any, new: Any, limit: int = 80) -> tuple[str, str]:
    """Both sides of a change; long values are shown around their first difference (the reporter's and the
    wire comparison's lines alike).

    Two long texts that differ past the first ``limit`` characters would otherwise print as the
    same prefix on both sides of the arrow (an observation quoting a run id, a search result).
    """
    # an empty or blank text is quoted: "" → null, 0 → "" read as nothing on one side otherwise
    old, new = (v if isinstance(v, str) and v.strip() else json.dumps(v, sort_keys=True, default=str) for v in (old, new))
    old, new = old.replace("\n", "\\n"), new.replace("\n", "\\n")
    if max(len(old), len(new)) > limit:
        p = 0
        while p < min(len(old), len(new)) and old[p] == new[p]:
            p += 1
        start = max(0, p - 20)
        if start:
            return _short("…" + old[start:], limit), _short("…" + new[start:], limit)
    return _short(old, limit), _short(new, limit)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."

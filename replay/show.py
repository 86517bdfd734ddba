"""Readable views of one cassette: JSON for tools, text for people, normalised text for ``git diff``.

The plain text view is for reading (one line per message, parts and content only); the
normalised view keeps every compared field, one JSON line per message, so a line-based diff
points at exactly what changed; ``--format json`` has everything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ._untrusted import visible

if TYPE_CHECKING:  # at run time the normaliser is imported by the normalised views only
    from .cassette import Cassette
    from .normaliser import Rules


def render_json(cassette: Cassette, *, normalized: bool = False, rules: Rules | None = None) -> dict[str, Any]:
    """Everything in the cassette as JSON (tables expanded), or its normalised form."""
    if normalized:
        from .normaliser import Rules, normalise

        return normalise(cassette, rules or Rules()).as_json()
    c = cassette
    return {
        "header": c.header.model_dump(),
        "requests": [
            {
                "seq": ex.seq,
                "role": ex.role,
                "index": ex.index,
                "kind": ex.kind,
                "run": ex.run,
                "model": {"name": ex.model_name, "system": ex.model_system},
                "estimate": ex.estimate,
                "messages": c.expand(ex.messages),
                "settings": c.blob(ex.settings),
                "parameters": c.blob(ex.parameters),
                "instructions": ex.instructions,
                "response": c.messages[ex.response] if ex.response is not None else None,
                "usage": ex.usage,
                "events": ex.events,
                "error": ex.error.model_dump() if ex.error else None,
                **({"wire": [_wire_json(c, w) for w in ex.wire]} if ex.wire else {}),
                **({"carried_over": ex.carried_over} if ex.carried_over else {}),
            }
            for ex in c.exchanges
        ],
        "runs": [
            {
                "role": r.role,
                "prompt": r.prompt,
                "estimate": r.estimate,
                "history": c.expand(r.history),
                "result": c.expand(r.result),
                "output": r.output,
                "error": r.error.model_dump() if r.error else None,
            }
            for r in c.runs
        ],
        "outcome": c.outcome.model_dump(),
        "observations": [o.model_dump() for o in c.observations],
        "expectations": c.expectations,
        "histories": [
            {
                "name": h.name,
                "after": h.after,
                "predicate": h.predicate,
                "verdict": h.verdict,
                "messages": c.expand(h.messages),
                "source": c.expand(h.source),
            }
            for h in c.histories
        ],
    }


def _line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _part(part: dict[str, Any]) -> str:
    kind = part.get("part_kind", "?")
    bits = [kind]
    if part.get("tool_name"):
        bits.append(part["tool_name"])
    if part.get("tool_call_id"):
        bits.append(f"#{part['tool_call_id']}")
    if "args" in part and part["args"] is not None:
        bits.append(_line(part["args"]))
    content = part.get("content")
    if isinstance(content, list):
        content = " ".join(str(c.get("content", c)) if isinstance(c, dict) else str(c) for c in content)
    if content is not None and content != "":
        text = content if isinstance(content, str) else _line(content)
        bits.append(repr(text if len(text) <= 160 else text[:157] + "..."))
    return " ".join(bits)


def _sent_with(cassette: Cassette, ex: Any, messages: list[Any]) -> Iterator[str]:
    """What the model was sent besides the messages: the instructions, the tools and output mode, the
    settings (without them two cassettes that differ only in an instruction or an output mode read the same)."""
    instructions = next((m.get("instructions") for m in reversed(messages)
                         if isinstance(m, dict) and m.get("kind") == "request" and m.get("instructions")), None)
    if instructions:
        text = instructions if isinstance(instructions, str) else _line(instructions)
        yield f"  instructions {text if len(text) <= 160 else text[:157] + '...'!r}"
    params = cassette.blobs[ex.parameters] if ex.parameters is not None and ex.parameters < len(cassette.blobs) else None
    if isinstance(params, dict):
        def names(key: str) -> str:
            tools = params.get(key)
            return ", ".join(str(t.get("name")) for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ""

        bits = [f"tools {tools}" if (tools := names("function_tools")) else "",
                f"output tools {outs}" if (outs := names("output_tools")) else "",
                f"output mode {params['output_mode']}" if params.get("output_mode") not in (None, "text") else ""]
        if any(bits):
            yield "  " + "; ".join(b for b in bits if b)
    settings = cassette.blobs[ex.settings] if ex.settings is not None and ex.settings < len(cassette.blobs) else None
    if settings:
        yield f"  settings {_line(settings)}"


def _message(message: dict[str, Any]) -> str:
    """One line a person can read: the message kind, then each part's kind and content."""
    return f"{message.get('kind', '?')}: " + " | ".join(_part(p) for p in message.get("parts", []))


def render_text(cassette: Cassette, *, normalized: bool = False) -> str:
    """One line per message and per field, so a line-based ``git diff`` points at what changed."""
    return "".join(f"{line}\n" for line in text_lines(cassette, normalized=normalized))


def text_lines(cassette: Cassette, *, normalized: bool = False) -> Iterator[str]:
    """The text view, one escaped line at a time: a caller with an output budget stops early,
    so a cassette whose view would be gigabytes costs only what is printed."""
    for line in _raw_lines(cassette, normalized=normalized):
        yield visible(line)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$@][^:]*")


def _key(key: Any) -> str:
    """A map key as the normalised view prints it: plain when it starts with a letter, digit, ``_``, ``$`` or ``@``
    and holds no colon, JSON-quoted otherwise. A key is cassette text at the start of a line, where GitHub Actions
    reads ``::stop-commands::…``, ``::add-mask::…`` or ``##[error]…`` as a workflow command (after blanks)."""
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) and text == text.rstrip() else _line(text)


def _entry(head: str, value: Any, indent: str) -> Iterator[str]:
    """One field of the normalised view as lines: nested values indented (keys sorted), multi-line
    strings one line per line (behind a ``|`` gutter), so ``git diff`` of two cassettes marks the very field and line that
    changed rather than a whole message. Stable: the same cassette always gives the same lines."""
    if isinstance(value, dict) and value:
        yield head
        for key in sorted(value, key=str):
            yield from _entry(f"{indent}  {_key(key)}:", value[key], indent + "  ")
    elif isinstance(value, list) and value:
        yield head
        for item in value:
            yield from _entry(f"{indent}  -", item, indent + "  ")
    elif isinstance(value, str) and "\n" in value:
        yield head
        for line in value.split("\n"):  # each behind a gutter: text from a cassette never starts a line
            yield f"{indent}    | {line}"
    else:
        yield f"{head} {_line(value)}"


def _wire_json(c: Cassette, w: Any) -> dict[str, Any]:
    from .wire.store import request_body

    return {
        "method": w.method, "url": w.url, "request_headers": w.request_headers, "body": request_body(c, w),
        "status": w.status, "response_headers": w.response_headers, "response": w.response,
    }


def _raw_lines(cassette: Cassette, *, normalized: bool = False) -> Iterator[str]:
    h = cassette.header
    yield f"# harness-replay cassette: {h.scenario_id}"
    yield f"# harness {h.harness_version}, pydantic-ai-slim {h.slim_version}, python {h.python_version}"
    if not normalized:
        yield f"# recorded {h.created_at} on {h.platform}, tool {h.tool_version}"
    if normalized:
        from .normaliser import normalise

        n = normalise(cassette)
        wire = _normal_wire(cassette)
        for role, requests in n.requests.items():
            for i, req in enumerate(requests):
                yield f"== {role}[{i}] {req.kind}"
                for key, value in req.body.items():
                    if key == "messages":
                        for j, m in enumerate(value):
                            yield from _entry(f"  messages[{j}]:", m, "  ")
                    elif key != "kind":
                        yield from _entry(f"  {key}:", value, "  ")
                for k, (method, path, body) in enumerate(wire.of(role, req.index) if wire is not None else ()):
                    yield from _entry(f"  wire[{k}] {method} {path}:", body, "  ")
        yield from _entry("== outcome:", n.outcome, "")
        for o in n.observations:
            yield from _entry(f"== observation {o['name']}:", o["value"], "")
        for entry in n.histories:
            judged = f" judged {entry['predicate']} -> {_line(entry['verdict'])}" if entry["predicate"] else ""
            yield f"== history {entry['name']}{judged}"
            for j, m in enumerate(entry["source"]):
                yield from _entry(f"  source[{j}]:", m, "  ")
            for j, m in enumerate(entry["messages"]):
                yield from _entry(f"  messages[{j}]:", m, "  ")
        return
    for ex in cassette.exchanges:
        est = f" estimate {ex.estimate}" if ex.estimate is not None else ""
        carried = " (answer carried over from a different request)" if ex.carried_over else ""
        yield f"== {ex.role}[{ex.index}] {ex.kind} model {ex.model_name}{est}{carried}"
        messages = cassette.expand(ex.messages)
        yield from _sent_with(cassette, ex, messages)
        for j, m in enumerate(messages):
            yield f"  [{j}] {_message(m)}"
        if ex.response is not None:
            yield f"  => {_message(cassette.messages[ex.response])}"
        if ex.usage:
            yield f"  usage {_line(ex.usage)}"
        if ex.error:
            yield f"  error {ex.error.type}: {ex.error.message}"
    yield f"== outcome {_line(cassette.outcome.model_dump(exclude_none=True, exclude={'error': {'attributes'}}))}"
    for obs in cassette.observations:
        yield f"== observation {obs.name} {_line(obs.value)}"
    for hist in cassette.histories:
        what = f"judged {hist.predicate} -> {_line(hist.verdict)}" if hist.predicate else f"observed history {hist.name}"
        yield f"== {what} (after {hist.after} model calls)"
        for j, m in enumerate(cassette.expand(hist.source)):
            yield f"  source[{j}] {_message(m)}"
        for j, m in enumerate(cassette.expand(hist.messages)):
            yield f"  [{j}] {_message(m)}"


def _normal_wire(cassette: Cassette) -> Any:
    """The request bodies the wire comparison compares (none for in-process models: no import then)."""
    if not any(ex.wire for ex in cassette.exchanges):
        return None
    from .wire.compare import NormalBodies

    return NormalBodies(cassette)


# --------------------------------------------------------------------------- bounded output

OUTPUT_FLOOR = 1024 * 1024
OUTPUT_FACTOR = 16


def output_budget(cassette_bytes: int) -> int:
    """How many characters ``show`` prints for a cassette of this size unless asked for ``--full``.

    Each request re-sends its history, so a view can be quadratic in the file: a 2.3 MB
    cassette once printed 962 MB through ``git diff``. Real views are 1-4x the file (JSON
    up to ~22x for small files, under the floor).
    """
    return OUTPUT_FLOOR + OUTPUT_FACTOR * cassette_bytes


def line_chunks(lines: Iterable[str], size: int = 1 << 16) -> Iterator[str]:
    """Whole lines (newline-terminated) joined into pieces of about ``size`` characters: what
    is scrubbed and written at once, so a per-call cost is not paid per line."""
    batch: list[str] = []
    held = 0
    for line in lines:
        batch.append(line)
        batch.append("\n")
        held += len(line) + 1
        if held >= size:
            yield "".join(batch)
            batch, held = [], 0
    if batch:
        yield "".join(batch)


class _Scrubbed(list):  # type: ignore[type-arg]
    """A list whose items are scrubbed as the JSON encoder reaches them (``json`` with ``indent``
    iterates it in Python): output that stops at its budget never scrubs, nor serialises, the rest.
    Scrubbing the whole expanded view first cost 6.5 GB and a minute for a 1.7 MB cassette whose
    3,500 requests each re-send 1,000 messages."""

    def __init__(self, items: list[Any], scrub: Callable[[Any], Any]) -> None:
        super().__init__(items)
        self.scrub = scrub

    def __iter__(self) -> Iterator[Any]:
        return (self.scrub(item) for item in list.__iter__(self))


def scrubbed_lazily(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (``render_json``) with its long lists scrubbed item by item as they are written, by one
    scrubber for the whole document (NaN and infinity are written as text by ``json_chunks``: strict
    JSON, as every other JSON output)."""
    from .scrub import redactor

    scrub = redactor()
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, list):
            out[key] = _Scrubbed(value, scrub)
        elif key == "header" and isinstance(value, dict) and isinstance(value.get("roles"), dict):
            # role → module: a role is no key name of a credential (``session_namer`` is no ``session``),
            # so the map is scrubbed as text, as the cassette's own scrubbing treats it
            out[key] = {
                k: {scrub(str(r)): scrub(str(m)) for r, m in v.items()} if k == "roles" else scrub(v)
                for k, v in value.items()
            }
        elif isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
            out[key] = {scrub(k): _Scrubbed(v, scrub) for k, v in value.items()}  # requests by role
        else:
            out[key] = scrub(value)
    return out


def write_bounded(chunks: Iterable[str], write: Callable[[str], Any], budget: int | None) -> int | None:
    """Write ``chunks`` until ``budget`` characters; returns how many were written if it ran out."""
    written = 0
    for chunk in chunks:
        if budget is not None and written + len(chunk) > budget:
            write(chunk[: budget - written])
            return budget
        write(chunk)
        written += len(chunk)
    return None

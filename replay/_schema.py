"""What the cassette loader accepts: a schema for every field, checked before anything uses it.

Code after the loader (show, normaliser, differ, checks, replayer, reporter) reads message
dicts with ``.get`` and trusts the types it finds; a cassette is untrusted input, so the
types are pinned here, once: every value is JSON-shaped (text map keys, no bytes, bounded
depth), messages and parts have the fields those stages read with the types they expect,
records (exchanges, runs, header) have theirs, references point inside their tables, and
the text reachable once ``[start, count]`` runs are expanded is bounded.

The schema is structural, not pydantic-ai's own: a cassette recorded with one pydantic-ai
release is loaded by another (``replay matrix``), which may not know its part kinds or
fields. pydantic-ai's ``TypeAdapter`` would refuse those, and it is ~10x slower on large
cassettes; unknown fields and part kinds are accepted as long as they are JSON-shaped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack

from ._untrusted import id_problem, visible

if TYPE_CHECKING:
    from .cassette import Limits

MAX_NAME = 4096
"""Longest role, tool, model, observation or error type name: these are printed whole on one line."""
MAX_INT = 2**63 - 1

_SCALARS = (str, int, float, bool, type(None))


class SchemaError(ValueError):
    """One problem, with where it is (``messages[3].parts[0].tool_name``)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)


def _kind(value: Any) -> str:
    if isinstance(value, msgpack.Timestamp):  # ext -1: msgpack decodes it itself, bypassing ext_hook
        return "msgpack extension type -1 (timestamp)"
    return {str: "text", int: "integer", float: "number", bool: "boolean", type(None): "null", dict: "map", list: "array",
            bytes: "binary"}.get(type(value), type(value).__name__)  # fmt: skip


def json_weight(value: Any, where: str, max_depth: int) -> int:
    """Check that ``value`` is JSON-shaped and return its weight: characters of text plus nodes.

    Level by level, touching each value once (this runs over every loaded value, so it must
    not cost more than unpacking did). Every dict value and every list element is one level
    further down.
    """
    if type(value) is not dict and type(value) is not list:
        if type(value) is str:
            return len(value) + 1
        if type(value) in _SCALARS:
            return 1
        raise SchemaError(where, f"{_kind(value)} value is not allowed in a cassette")
    weight = 1
    level = [value]
    depth = 0
    while level:
        if depth >= max_depth:
            raise SchemaError(where, f"nesting deeper than {max_depth}")
        nxt: list[Any] = []
        for node in level:
            if type(node) is dict:
                for key, item in node.items():
                    if type(key) is not str:
                        raise SchemaError(where, f"map key {visible(repr(key))[:60]} is not text")
                    t = type(item)
                    if t is str:
                        weight += len(key) + len(item) + 2
                    elif t is dict or t is list:
                        weight += len(key) + 1
                        nxt.append(item)
                    elif t in _SCALARS:
                        weight += len(key) + 2
                    else:
                        raise SchemaError(where, f"{_kind(item)} value under {visible(key)[:60]!r} is not allowed")
            else:
                for item in node:
                    t = type(item)
                    if t is str:
                        weight += len(item) + 1
                    elif t is dict or t is list:
                        weight += 1
                        nxt.append(item)
                    elif t in _SCALARS:
                        weight += 1
                    else:
                        raise SchemaError(where, f"{_kind(item)} value is not allowed in a cassette")
        depth += 1
        level = nxt
    return weight


# --------------------------------------------------------------------------- field types

Check = Callable[[Any], bool]


def _text(v: Any) -> bool:
    return type(v) is str


def _opt_text(v: Any) -> bool:
    return v is None or type(v) is str


def _name(v: Any) -> bool:
    return type(v) is str and len(v) <= MAX_NAME


def _opt_name(v: Any) -> bool:
    return v is None or (type(v) is str and len(v) <= MAX_NAME)


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= MAX_INT


def _opt_count(v: Any) -> bool:
    return v is None or (type(v) is int and 0 <= v <= MAX_INT)


def _opt_map(v: Any) -> bool:
    return v is None or type(v) is dict


def _args(v: Any) -> bool:
    return v is None or type(v) is str or type(v) is dict


_WHAT: dict[Check, str] = {
    _text: "text",
    _opt_text: "text or null",
    _name: f"text of at most {MAX_NAME} characters",
    _opt_name: f"null or text of at most {MAX_NAME} characters",
    _count: "a non-negative integer",
    _opt_count: "null or a non-negative integer",
    _opt_map: "a map or null",
    _args: "text, a map or null",
}

# Fields the later stages read, with the types they rely on. Other fields (newer pydantic-ai
# releases add some) only have to be JSON-shaped.
_MESSAGE_FIELDS: dict[str, Check] = {
    "kind": _name,
    "instructions": _opt_text,
    "model_name": _opt_name,
    "provider_name": _opt_name,
    "timestamp": _opt_name,
    "run_id": _opt_name,
    "conversation_id": _opt_name,
    "usage": _opt_map,
}
_PART_FIELDS: dict[str, Check] = {
    "part_kind": _name,
    "tool_name": _opt_name,
    "tool_call_id": _opt_name,
    "id": _opt_name,
    "args": _args,
    "timestamp": _opt_name,
}
_ERROR_FIELDS: dict[str, Check] = {"type": _name, "message": _text}
_EXCHANGE_FIELDS: dict[str, Check] = {
    "seq": _count,
    "role": _name,
    "index": _count,
    "model_name": _opt_name,
    "model_system": _opt_name,
    "settings": _opt_count,
    "parameters": _opt_count,
    "instructions": _opt_text,
    "response": _opt_count,
    "usage": _opt_map,
    "estimate": _opt_count,
    "run": _opt_count,
    "done": _opt_count,
    "after": _opt_count,
}
_RUN_FIELDS: dict[str, Check] = {"role": _name, "estimate": _opt_count}
_HISTORY_FIELDS: dict[str, Check] = {"name": _name, "after": _count, "predicate": _opt_name}
_WIRE_FIELDS: dict[str, Check] = {
    "method": _name,
    "url": _text,
    "body": _opt_count,
    "body_text": _opt_text,
    "status": _count,
    "response": _text,
}


def _text_map(value: Any, where: str) -> None:
    if type(value) is not dict or any(type(v) is not str for v in value.values()):
        raise SchemaError(where, "expected a map of text to text")


def _wire_record(record: Any, where: str, blobs: int) -> None:
    """An HTTP exchange (``replay.wire``): its body lives in the blob table, by reference."""
    _fields(record, where, _WIRE_FIELDS, ("method", "url"))
    if type(record.get("stream", False)) is not bool:
        raise SchemaError(f"{where}.stream", f"expected a boolean, got {_kind(record['stream'])}")
    for key in ("request_headers", "response_headers"):
        if key in record:
            _text_map(record[key], f"{where}.{key}")
    refs = [record.get("body")]
    lists = record.get("body_lists", {})
    if type(lists) is not dict:
        raise SchemaError(f"{where}.body_lists", f"expected a map, got {_kind(lists)}")
    for name, ids in lists.items():
        if type(ids) is not list or not all(_count(i) for i in ids):
            raise SchemaError(f"{where}.body_lists.{visible(name)[:60]}", "expected an array of blob references")
        refs += ids
    for ref in refs:
        if ref is not None and ref >= blobs:
            raise SchemaError(where, f"wire body reference {ref} outside the blob table of {blobs}")
_HEADER_TEXT = ("tool_version", "python_version", "platform", "created_at")
_HEADER_OPT_TEXT = ("source_hash", "harness_version", "slim_version", "pydantic_version")
_KINDS = frozenset({"request", "request_stream", "count_tokens", "compact_messages"})


def _fields(record: Any, where: str, fields: dict[str, Check], required: tuple[str, ...] = ()) -> dict[str, Any]:
    if type(record) is not dict:
        raise SchemaError(where, f"expected a map, got {_kind(record)}")
    for key in required:
        if key not in record:
            raise SchemaError(where, f"missing {key}")
    for key, check in fields.items():
        if key in record and not check(record[key]):
            value = record[key]
            raise SchemaError(f"{where}.{key}", f"expected {_WHAT[check]}, got {_kind(value)}"
                              + (f" of {len(value)} characters" if type(value) is str else ""))  # fmt: skip
    return record


def _list(value: Any, where: str, *, optional: bool = True) -> list[Any]:
    if value is None and optional:
        return []
    if type(value) is not list:
        raise SchemaError(where, f"expected an array, got {_kind(value)}")
    return value


def _error(value: Any, where: str) -> None:
    if value is not None:
        _fields(value, where, _ERROR_FIELDS, ("type", "message"))


def check_message(message: Any, where: str) -> None:
    _fields(message, where, _MESSAGE_FIELDS, ("kind",))
    if "parts" not in message:
        raise SchemaError(where, "missing parts")
    for j, part in enumerate(_list(message["parts"], f"{where}.parts", optional=False)):
        _fields(part, f"{where}.parts[{j}]", _PART_FIELDS, ("part_kind",))


def _check_header(header: Any) -> None:
    if header is None:
        return
    _fields(header, "header", {"format_version": _count, "mode": _name})
    for key in _HEADER_TEXT:
        if key in header and not _name(header[key]):
            raise SchemaError(f"header.{key}", f"expected {_WHAT[_name]}, got {_kind(header[key])}")
    for key in _HEADER_OPT_TEXT:
        if key in header and not _opt_name(header[key]):
            raise SchemaError(f"header.{key}", f"expected {_WHAT[_opt_name]}, got {_kind(header[key])}")
    sid = header.get("scenario_id")
    if sid is not None:
        problem = id_problem(sid)
        if problem is not None:
            raise SchemaError("header.scenario_id", problem)
    defaults = header.get("schema_defaults")
    if defaults is not None:
        _schema_defaults(defaults)
    roles = header.get("roles")
    if roles is not None:
        if type(roles) is not dict:
            raise SchemaError("header.roles", f"expected a map, got {_kind(roles)}")
        for role, module in roles.items():
            if not _name(role) or not _name(module):
                raise SchemaError(f"header.roles.{visible(str(role))[:60]}", "expected role → module name (text)")


def _str_lists(value: Any, where: str) -> None:
    if type(value) is not dict or not all(type(v) is list and all(type(x) is str for x in v) for v in value.values()):
        raise SchemaError(where, "expected a map of text to arrays of text")


def _schema_defaults(value: Any) -> None:
    """``header.schema_defaults`` (the normaliser's declared defaults of the recording version)."""
    where = "header.schema_defaults"
    if type(value) is not dict:
        raise SchemaError(where, f"expected a map, got {_kind(value)}")
    if "roots" in value:
        _str_lists(value["roots"], f"{where}.roots")
    classes = value.get("classes", {})
    if type(classes) is not dict:
        raise SchemaError(f"{where}.classes", f"expected a map, got {_kind(classes)}")
    for name, spec in classes.items():
        at = f"{where}.classes.{visible(name)[:60]}"
        if type(spec) is not dict:
            raise SchemaError(at, f"expected a map, got {_kind(spec)}")
        found = spec.get("defaults", {})
        if type(found) is not dict or any(type(v) is dict or type(v) is list for v in found.values()):
            raise SchemaError(f"{at}.defaults", "expected a map of field to scalar default")
        if "nested" in spec:
            _str_lists(spec["nested"], f"{at}.nested")
        tag = spec.get("tag")
        if tag is not None and (type(tag) is not list or len(tag) != 2 or not all(type(t) is str for t in tag)):
            raise SchemaError(f"{at}.tag", "expected [field, value] text")


def _prefix(weights: list[int]) -> list[int]:
    out = [0]
    total = 0
    for w in weights:
        total += w
        out.append(total)
    return out


def _runs(value: Any, where: str, table: int) -> list[tuple[int, int]]:
    """``[start, count, ...]`` pairs, each inside a table of ``table`` entries (not expanded yet)."""
    runs = _list(value, where)
    if len(runs) % 2:
        raise SchemaError(where, "message references must be a flat list of [start, count] pairs")
    out = []
    for k in range(0, len(runs), 2):
        start, count = runs[k], runs[k + 1]
        if type(start) is not int or type(count) is not int or start < 0 or count < 1:
            raise SchemaError(where, f"bad message reference run {start!r}, {count!r}")
        if start + count > table:
            raise SchemaError(where, f"message reference {start + count - 1} outside the table of {table}")
        out.append((start, count))
    return out


def validate(raw: dict[str, Any], limits: Limits) -> None:
    """Check the decoded map of a cassette (wire form: references still as runs), or raise :class:`SchemaError`."""
    depth = limits.max_depth
    for key in raw:
        if type(key) is not str:
            raise SchemaError("", f"top-level key {visible(repr(key))[:60]} is not text")
    _check_header(raw.get("header"))
    _check_header_json(raw.get("header"), depth)

    messages = _list(raw.get("messages"), "messages")
    weights = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        check_message(message, where)
        weights.append(json_weight(message, where, depth))
    blobs = _list(raw.get("blobs"), "blobs")
    blob_weights = [json_weight(blob, f"blobs[{i}]", depth) for i, blob in enumerate(blobs)]
    runs = _list(raw.get("runs"), "runs")
    msg_prefix = _prefix(weights)
    expanded = 0
    references = 0

    def add_runs(value: Any, where: str) -> None:
        nonlocal expanded, references
        for start, count in _runs(value, where, len(messages)):
            references += count
            expanded += msg_prefix[start + count] - msg_prefix[start]
        if references > limits.max_references:  # stop at once: a bomb's later runs cost time too
            raise SchemaError(where, f"over {limits.max_references:,} message references once expanded (Limits.max_references)")

    for i, ex in enumerate(_list(raw.get("exchanges"), "exchanges")):
        where = f"exchanges[{i}]"
        _fields(ex, where, _EXCHANGE_FIELDS, ("seq", "role", "index", "kind"))
        if ex["kind"] not in _KINDS:
            raise SchemaError(f"{where}.kind", f"unknown call kind {visible(str(ex['kind']))[:60]!r}")
        add_runs(ex.get("messages"), f"{where}.messages")
        for key, table in (("settings", blob_weights), ("parameters", blob_weights)):
            ref = ex.get(key)
            if ref is not None:
                if ref >= len(table):
                    raise SchemaError(f"{where}.{key}", f"{key} reference {ref} outside the table of {len(table)}")
                expanded += table[ref]
        response = ex.get("response")
        if response is not None:
            if response >= len(messages):
                raise SchemaError(f"{where}.response", f"response reference {response} outside the table of {len(messages)}")
            if messages[response].get("kind") != "response":
                raise SchemaError(f"{where}.response", f"refers to messages[{response}], which is not a response")
            expanded += weights[response]
        run = ex.get("run")
        if run is not None and run >= len(runs):
            raise SchemaError(f"{where}.run", f"run reference {run} outside the table of {len(runs)}")
        for j, event in enumerate(_list(ex.get("events"), f"{where}.events")):
            _fields(event, f"{where}.events[{j}]", {"event_kind": _name}, ("event_kind",))
        _error(ex.get("error"), f"{where}.error")
        for j, record in enumerate(_list(ex.get("wire"), f"{where}.wire")):
            _wire_record(record, f"{where}.wire[{j}]", len(blob_weights))
        expanded += json_weight({k: v for k, v in ex.items() if k != "messages"}, where, depth + 2)

    for i, run_ in enumerate(runs):
        where = f"runs[{i}]"
        _fields(run_, where, _RUN_FIELDS, ("role",))
        add_runs(run_.get("history"), f"{where}.history")
        add_runs(run_.get("result"), f"{where}.result")
        _error(run_.get("error"), f"{where}.error")
        json_weight({k: v for k, v in run_.items() if k not in ("history", "result")}, where, depth + 2)

    for i, history in enumerate(_list(raw.get("histories"), "histories")):
        where = f"histories[{i}]"
        _fields(history, where, _HISTORY_FIELDS, ("name",))
        add_runs(history.get("messages"), f"{where}.messages")
        add_runs(history.get("source"), f"{where}.source")
        json_weight({k: v for k, v in history.items() if k not in ("messages", "source")}, where, depth + 2)

    outcome = raw.get("outcome")
    if outcome is not None:
        _fields(outcome, "outcome", {"status": _name})
        _error(outcome.get("error"), "outcome.error")
        json_weight(outcome, "outcome", depth + 2)
    for i, obs in enumerate(_list(raw.get("observations"), "observations")):
        _fields(obs, f"observations[{i}]", {"name": _name}, ("name",))
        json_weight(obs, f"observations[{i}]", depth + 2)
    expectations = raw.get("expectations")
    if expectations is not None and type(expectations) is not dict:
        raise SchemaError("expectations", f"expected a map, got {_kind(expectations)}")
    for key, value in raw.items():
        if key not in _KNOWN_TOP:
            json_weight(value, key, depth + 3)
    if expectations is not None:
        json_weight(expectations, "expectations", depth + 2)

    if references > limits.max_references:
        raise SchemaError("", f"{references:,} message references once expanded (over Limits.max_references)")
    if expanded > limits.max_expanded:
        raise SchemaError(
            "",
            f"requests expand to {expanded:,} characters of messages (over Limits.max_expanded, "
            f"{limits.max_expanded:,}): every command walks each request's messages",
        )


_KNOWN_TOP = frozenset(
    {"header", "messages", "blobs", "exchanges", "runs", "outcome", "observations", "expectations", "histories"}
)


def _check_header_json(header: Any, depth: int) -> None:
    if header is not None:
        json_weight(header, "header", depth)

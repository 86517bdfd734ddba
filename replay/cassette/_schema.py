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
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack

from .._untrusted import id_problem, visible

if TYPE_CHECKING:
    from . import Limits

MAX_NAME = 4096
"""Longest role, tool, model, observation or error type name: these are printed whole on one line."""
MAX_INT = 2**63 - 1

_SCALARS = frozenset({str, int, float, bool, type(None)})
"""JSON scalar types (a set: ``type in`` a tuple compares with each in turn, and None is common)."""
_SMALL_INT = (-(2**63), 2**64 - 1)
"""Integers msgpack holds itself; one outside (a big integer, up to 4,300 digits) weighs its digits."""


def _big_weight(value: int) -> int:
    """Extra weight of an integer: its decimal digits (bounded above from its bits) when it is a big one.

    A big integer is written out, converted and packed digit by digit (quadratically) wherever its
    message is: weighed as 1, a message of them referenced by every request expanded past
    ``max_expanded`` thousands of times over."""
    if _SMALL_INT[0] <= value <= _SMALL_INT[1]:
        return 0
    return value.bit_length() * 30103 // 100000 + 2


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
            return 1 + _big_weight(value) if type(value) is int else 1
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
                        if t is int:
                            weight += _big_weight(item)
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
                        if t is int:
                            weight += _big_weight(item)
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
_ERROR_FIELDS: dict[str, Check] = {"type": _name, "message": _text, "attributes": _opt_map}
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
_EXCHANGE_REQUIRED = ("seq", "role", "index", "kind")
_EVENT_FIELDS: dict[str, Check] = {"event_kind": _name}
_RUN_FIELDS: dict[str, Check] = {"role": _name, "estimate": _opt_count, "parent": _opt_count}
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


def _wire_record(record: Any, where: str, blobs: int) -> list[int]:
    """An HTTP exchange (``replay.wire``): its body lives in the blob table, by reference (returned:
    each one counts against the loader's limits like a message reference)."""
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
    return [r for r in refs if r is not None]

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
        attributes = value.get("attributes")
        if attributes is not None:
            for key in attributes:  # set on the rebuilt exception: plain public names only
                if type(key) is not str or not key.isidentifier() or key.startswith("_") or len(key) > MAX_NAME:
                    raise SchemaError(f"{where}.attributes", f"{visible(repr(key))[:60]} is not a public attribute name")


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
    paths = header.get("paths")
    if paths is not None:
        _str_lists(paths, "header.paths")
    sdks = header.get("sdk_versions")
    if sdks is not None and (type(sdks) is not dict or not all(type(k) is str and type(v) is str for k, v in sdks.items())):
        raise SchemaError("header.sdk_versions", f"expected a map of text to text, got {_kind(sdks)}")
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
        for key in ("fields", "undeclared"):
            if key in spec and (type(spec[key]) is not list or not all(type(f) is str for f in spec[key])):
                raise SchemaError(f"{at}.{key}", "expected an array of field names")
        tag = spec.get("tag")
        if tag is not None and (type(tag) is not list or len(tag) != 2 or not all(type(t) is str for t in tag)):
            raise SchemaError(f"{at}.tag", "expected [field, value] text")


# --------------------------------------------------------------------------- record layouts

_NONE = type(None)
_TYPES: dict[Check, tuple[frozenset[type], str]] = {
    _text: (frozenset({str}), ""),
    _opt_text: (frozenset({str, _NONE}), ""),
    _name: (frozenset({str}), "length"),
    _opt_name: (frozenset({str, _NONE}), "length"),
    _count: (frozenset({int}), "range"),
    _opt_count: (frozenset({int, _NONE}), "range"),
    _opt_map: (frozenset({dict, _NONE}), ""),
    _args: (frozenset({str, dict, _NONE}), ""),
}
"""Each check as the value types it accepts, and what it bounds beyond the type (the length of
text, the range of an integer): what :class:`_Layouts` decides once per record layout."""

_MAX_LAYOUTS = 64
"""Distinct layouts remembered per record kind and load; a real recording has a handful, and a
file with more only loses the fast path (each record is then checked field by field)."""


class _Layout(NamedTuple):
    """What :func:`_fields` and :func:`json_weight` do with records of one layout (the same keys
    in the same order, each value of the same type), worked out once: per record only the text
    lengths and integer ranges are left to check, and only the text lengths and nested values to
    weigh, each as one call over a precomputed mask of the record's values."""

    base: int
    """Weight of the record without its skipped keys, less its text values and nested contents."""
    names: tuple[bool, ...] | None
    """Values that must be text of at most :data:`MAX_NAME` characters."""
    counts: tuple[bool, ...] | None
    """Values that must be integers from 0 to :data:`MAX_INT`."""
    texts: tuple[bool, ...] | None
    """Text values the weight counts the length of."""
    nested: tuple[bool, ...] | None
    """Maps and arrays the weight walks."""
    ints: tuple[bool, ...] | None = None
    """Integer values outside ``counts``, which weigh their digits when big (:func:`_big_weight`)."""


def _mask(flags: list[bool]) -> tuple[bool, ...] | None:
    return tuple(flags) if any(flags) else None


class _Layouts:
    """Record checks (:func:`_fields`) and weights (:func:`json_weight` of the record without
    ``skip``) by layout. An exchange was a Python call per field, then a copy and a walk of the
    copy (8 us each, 18 % of loading the 200-turn recording), and exchanges all look alike;
    messages and their parts use it too (:class:`_Messages`). Runs do not: with two checked
    fields, working out the layout costs more than it saves.

    Only answers for records the field-by-field check accepts; anything else (not a map, a key
    missing, a wrong type, a value out of bounds, a value that is not JSON-shaped, too many
    layouts) gets ``None``, and the caller checks that record the old way, which raises the
    same error as before. The record comes from msgpack, so its keys are exactly ``str`` or
    ``bytes``: a key tuple equal to one of text is text (no ``str`` subclass).
    """

    def __init__(self, fields: dict[str, Check], required: tuple[str, ...], skip: tuple[str, ...]) -> None:
        self.fields = fields
        self.required = required
        self.skip = skip
        self.known: dict[tuple[tuple[Any, ...], tuple[type, ...]], _Layout | None] = {}

    def check(self, record: Any) -> tuple[_Layout, int] | None:
        """The record's layout and the length of its text values (outside ``skip``), if
        :func:`_fields` accepts the record, else ``None``."""
        if type(record) is not dict:
            return None
        values = record.values()
        key = (tuple(record), tuple(map(type, values)))
        layout = self.known.get(key, _UNKNOWN)
        if layout is _UNKNOWN:
            if len(self.known) >= _MAX_LAYOUTS:
                return None
            layout = self.known[key] = self._layout(*key)
        if layout is None:
            return None
        text = 0 if layout.texts is None else sum(map(len, compress(values, layout.texts)))
        if layout.ints is not None:
            text += sum(map(_big_weight, compress(values, layout.ints)))
        # names are among the texts: when all the text is short, so is each name
        if text > MAX_NAME and layout.names is not None and max(map(len, compress(values, layout.names))) > MAX_NAME:
            return None
        if layout.counts is not None:
            counts = sorted(compress(values, layout.counts))  # a few small integers: cheaper than min and max
            if counts[0] < 0 or counts[-1] > MAX_INT:
                return None
        return layout, text

    def _layout(self, keys: tuple[Any, ...], types: tuple[type, ...]) -> _Layout | None:
        if any(key not in keys for key in self.required) or any(self.fields.get(key) in (_name, _opt_name) for key in self.skip):
            return None  # (a name under a skipped key would not be among the texts)
        base = 1
        names, counts, texts, nested, ints = [], [], [], [], []
        for key, t in zip(keys, types):
            if type(key) is not str:
                return None
            check = self.fields.get(key)
            if check is not None and t not in _TYPES[check][0]:
                return None
            bound = _TYPES[check][1] if check is not None else ""
            names.append(bound == "length" and t is str)
            counts.append(bound == "range" and t is int)
            ints.append(t is int and bound != "range" and key not in self.skip)
            texts.append(t is str and key not in self.skip)
            nested.append((t is dict or t is list) and key not in self.skip)
            if key in self.skip:
                continue
            if t is dict or t is list:
                base += len(key) + 1
            elif t in _SCALARS:
                base += len(key) + 2
            else:
                return None  # not JSON-shaped: json_weight says so, after the record's other checks
        return _Layout(base, _mask(names), _mask(counts), _mask(texts), _mask(nested), _mask(ints))

    def weight(self, layout: _Layout, text: int, record: dict[str, Any], where: str, max_depth: int) -> int:
        """``json_weight`` of the record without ``skip`` (or the error it raises), given what
        :meth:`check` returned for it."""
        if max_depth <= 0:
            return self.slow_weight(record, where, max_depth)
        weight = layout.base + text
        if layout.nested is not None:
            try:
                # each nested value one level down: the same depth bound as in the walk of the record
                for node in compress(record.values(), layout.nested):
                    weight += json_weight(node, where, max_depth - 1) - 1
            except SchemaError:
                # the error the walk of the whole record meets first (level by level across values)
                return self.slow_weight(record, where, max_depth)
        return weight

    def slow_weight(self, record: dict[str, Any], where: str, max_depth: int) -> int:
        skip = self.skip
        return json_weight({k: v for k, v in record.items() if k not in skip}, where, max_depth)


_UNKNOWN: Any = object()


class _Messages:
    """:func:`check_message` and :func:`json_weight` of a message in one pass, by layout.

    The message table is most of a recording; a message's own fields and each part's were
    checked by a Python call per field and then walked again item by item for the weight.
    Message maps and part maps come in a few layouts, so the field checks and the weight of
    their scalar values are worked out once per layout (:class:`_Layouts`) and only the
    values nested in them (usage, tool arguments...) are walked. ``None`` for anything else,
    and the caller checks that message the old way, which raises the same error as before.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.messages = _Layouts(_MESSAGE_FIELDS, ("kind",), ("parts",))
        self.parts = _Layouts(_PART_FIELDS, ("part_kind",), ())

    def weight(self, message: Any) -> int | None:
        max_depth = self.max_depth
        if max_depth < 3:  # the message, its parts list and the parts themselves are three levels
            return None
        checked = self.messages.check(message)
        if checked is None:
            return None
        layout, weight = checked
        parts = message.get("parts", _UNKNOWN)
        if type(parts) is not list:
            return None
        weight += layout.base + 6  # (len("parts") + 1: the key and the list)
        try:
            if layout.nested is not None:
                for node in compress(message.values(), layout.nested):
                    weight += json_weight(node, "", max_depth - 1) - 1
            for part in parts:
                checked = self.parts.check(part)
                if checked is None:
                    return None
                part_layout, text = checked
                weight += part_layout.base + text  # (a map in a list: its node is in its base)
                if part_layout.nested is not None:
                    for node in compress(part.values(), part_layout.nested):
                        weight += json_weight(node, "", max_depth - 3) - 1
        except SchemaError:
            return None  # the old path raises it, in the order it meets it
        return weight


def _refs(value: Any, prefix: list[int], label: str, i: int, field: str) -> tuple[int, int]:
    """References and expanded weight of one ``[start, count, ...]`` list (not expanded), each run
    inside the message table (``len(prefix) - 1`` entries, ``prefix`` the running total of their
    weights), or :class:`SchemaError` at ``label[i].field``."""
    if value is None:
        return 0, 0
    table = len(prefix) - 1
    if type(value) is list and len(value) == 2:  # most lists are one run
        start, count = value
        if type(start) is int and type(count) is int and start >= 0 and count >= 1 and start + count <= table:
            return count, prefix[start + count] - prefix[start]
    if type(value) is not list:
        raise SchemaError(f"{label}[{i}].{field}", f"expected an array, got {_kind(value)}")
    if len(value) % 2:
        raise SchemaError(f"{label}[{i}].{field}", "message references must be a flat list of [start, count] pairs")
    references = weight = 0
    for k in range(0, len(value), 2):
        start = value[k]
        count = value[k + 1]
        if type(start) is not int or type(count) is not int or start < 0 or count < 1:
            raise SchemaError(f"{label}[{i}].{field}", f"bad message reference run {start!r}, {count!r}")
        end = start + count
        if end > table:
            raise SchemaError(f"{label}[{i}].{field}", f"message reference {end - 1} outside the table of {table}")
        references += count
        weight += prefix[end] - prefix[start]
    return references, weight


def _prefix(weights: list[int]) -> list[int]:
    out = [0]
    total = 0
    for w in weights:
        total += w
        out.append(total)
    return out


def _ordinals(ex: dict[str, Any], i: int, per_role: dict[str, int]) -> None:
    """An exchange is the ``index``-th call of its role and the ``seq``-th of the cassette, as every writer
    numbers them: the differ pairs requests by ordinal and the checks slice exchanges by ``seq``, so a
    duplicated or reordered ordinal (a hand edit) would pair one request with another's answer."""
    if ex["seq"] != i:
        raise SchemaError(f"exchanges[{i}].seq", f"is {ex['seq']}, not the exchange's position {i}")
    role = ex["role"]
    expected = per_role.get(role, 0)
    if ex["index"] != expected:
        raise SchemaError(
            f"exchanges[{i}].index",
            f"is {ex['index']}, but role {visible(role)[:60]!r} has {expected} earlier exchange(s): it must be {expected}",
        )
    per_role[role] = expected + 1


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
    by_layout = _Messages(depth)
    for i, message in enumerate(messages):
        weight = by_layout.weight(message)
        if weight is None:
            where = f"messages[{i}]"
            check_message(message, where)
            weight = json_weight(message, where, depth)
        weights.append(weight)
    blobs = _list(raw.get("blobs"), "blobs")
    blob_weights = [json_weight(blob, f"blobs[{i}]", depth) for i, blob in enumerate(blobs)]
    runs = _list(raw.get("runs"), "runs")
    msg_prefix = _prefix(weights)
    expanded = 0
    references = 0

    max_references = limits.max_references

    def add_refs(record: dict[str, Any], label: str, i: int, keys: tuple[str, ...]) -> None:
        nonlocal references, expanded
        for key in keys:
            count, weight = _refs(record.get(key), msg_prefix, label, i, key)
            references += count
            expanded += weight
            if references > max_references:  # raised at once: a bomb's later runs cost time too
                raise SchemaError(
                    f"{label}[{i}].{key}", f"over {max_references:,} message references once expanded (Limits.max_references)"
                )

    n_messages = len(messages)
    n_blobs = len(blob_weights)
    exchanges = _Layouts(_EXCHANGE_FIELDS, _EXCHANGE_REQUIRED, ("messages",))
    per_role: dict[str, int] = {}
    for i, ex in enumerate(_list(raw.get("exchanges"), "exchanges")):
        checked = exchanges.check(ex)
        if checked is None:
            _fields(ex, f"exchanges[{i}]", _EXCHANGE_FIELDS, _EXCHANGE_REQUIRED)
        _ordinals(ex, i, per_role)
        if ex["kind"] not in _KINDS:
            raise SchemaError(f"exchanges[{i}].kind", f"unknown call kind {visible(str(ex['kind']))[:60]!r}")
        add_refs(ex, "exchanges", i, ("messages",))
        ref = ex.get("settings")
        if ref is not None:
            if ref >= n_blobs:
                raise SchemaError(f"exchanges[{i}].settings", f"settings reference {ref} outside the table of {n_blobs}")
            expanded += blob_weights[ref]
        ref = ex.get("parameters")
        if ref is not None:
            if ref >= n_blobs:
                raise SchemaError(f"exchanges[{i}].parameters", f"parameters reference {ref} outside the table of {n_blobs}")
            expanded += blob_weights[ref]
        response = ex.get("response")
        if response is not None:
            if response >= n_messages:
                raise SchemaError(f"exchanges[{i}].response", f"response reference {response} outside the table of {n_messages}")
            if messages[response].get("kind") != "response":
                raise SchemaError(f"exchanges[{i}].response", f"refers to messages[{response}], which is not a response")
            expanded += weights[response]
        run = ex.get("run")
        if run is not None and run >= len(runs):
            raise SchemaError(f"exchanges[{i}].run", f"run reference {run} outside the table of {len(runs)}")
        if ex.get("events") is not None:
            for j, event in enumerate(_list(ex["events"], f"exchanges[{i}].events")):
                _fields(event, f"exchanges[{i}].events[{j}]", _EVENT_FIELDS, ("event_kind",))
        if ex.get("error") is not None:
            _error(ex["error"], f"exchanges[{i}].error")
        if ex.get("wire") is not None:
            for j, record in enumerate(_list(ex["wire"], f"exchanges[{i}].wire")):
                where = f"exchanges[{i}].wire[{j}]"
                refs = _wire_record(record, where, n_blobs)
                references += len(refs)  # one blob referenced 4,000 times: a 1 MB file `show` expanded to 4 GB
                expanded += sum(blob_weights[r] for r in refs)
                if references > max_references:
                    raise SchemaError(where, f"over {max_references:,} message references once expanded (Limits.max_references)")
        if checked is None:
            expanded += exchanges.slow_weight(ex, f"exchanges[{i}]", depth + 2)
        else:
            expanded += exchanges.weight(*checked, ex, f"exchanges[{i}]", depth + 2)

    for i, run_ in enumerate(runs):
        where = f"runs[{i}]"
        _fields(run_, where, _RUN_FIELDS, ("role",))  # (three fields: a layout costs more than it saves)
        parent = run_.get("parent")
        if parent is not None and parent >= len(runs):
            raise SchemaError(f"{where}.parent", f"run reference {parent} outside the table of {len(runs)}")
        add_refs(run_, "runs", i, ("history", "result"))
        _error(run_.get("error"), f"{where}.error")
        json_weight({k: v for k, v in run_.items() if k not in ("history", "result")}, where, depth + 2)

    for i, history in enumerate(_list(raw.get("histories"), "histories")):
        where = f"histories[{i}]"
        _fields(history, where, _HISTORY_FIELDS, ("name",))
        add_refs(history, "histories", i, ("messages", "source"))
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

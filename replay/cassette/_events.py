"""Stream events on disk (format 2): each event a row of values under a shared key layout.

A streamed answer is recorded event by event so replay hands the reader the same chunks, and a
provider streams about a token per event: as maps, a 200-word answer's 270 events carried the
same five or six key names each (``part_delta_kind``, ``provider_details``…), ≈ 130 bytes an event
around ≈ 6 bytes of text, and a 40,000-word streamed answer made a cassette 18× the size of its
text. As rows the key names are written once per layout and an event costs its values and a
few bytes.

``{"layouts": [layout, ...], "rows": [row, ...]}``: a layout is a list of the event's key names in
its own order, each written as

- ``"name"``: the value is in the row;
- ``["name"]``: the value is a map, in the row as a row of its own;
- ``{"name": value}``: the value is the layout's, not in the row — a null, or the text of a
  ``*_kind`` key (pydantic-ai's discriminators: ``part_delta``, ``text``), the same in every
  event of one kind.

A row is ``[layout index, value, ...]``, one value per name written in the row. Every other value
(text, numbers, lists, maps inside lists) is written as it is. Decoding gives back the very maps
that were encoded, key order included, so nothing downstream sees a difference.
"""

from __future__ import annotations

from typing import Any

from ._schema import SchemaError

_MAX_LAYOUTS = 10_000
"""More distinct layouts than any recording has (pydantic-ai has a dozen event and delta kinds)."""


_CONSTANT_TEXT = 64
"""Longest ``*_kind`` text a layout holds as a constant (pydantic-ai's are a dozen characters)."""


def _constant(key: str, value: Any) -> bool:
    return value is None or (type(value) is str and key.endswith("_kind") and len(value) <= _CONSTANT_TEXT)


def _rowable(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str for k in value)


class _TooMany(Exception):
    pass


def pack(events: list[Any]) -> dict[str, Any] | list[Any]:
    """``events`` as layouts and rows (see the module doc); the inverse of :func:`unpack`.

    ``events`` itself (written as maps, which format 2 reads too) when an event is not a map of text
    keys or the events need more layouts than a reader accepts: what is written always loads.
    """
    if not all(_rowable(e) for e in events):
        return events
    layouts: dict[tuple[Any, ...], int] = {}
    wire: list[list[Any]] = []

    def row(event: dict[str, Any]) -> list[Any]:
        # (key, 0, _) in the row, (key, 1, _) a nested row, (key, 2, value) the layout's constant
        shape = tuple(
            (k, 2, v) if _constant(k, v) else (k, 1, None) if _rowable(v) else (k, 0, None) for k, v in event.items()
        )
        at = layouts.get(shape)
        if at is None:
            if len(wire) == _MAX_LAYOUTS:
                raise _TooMany
            at = layouts[shape] = len(wire)
            wire.append([{s[0]: s[2]} if s[1] == 2 else [s[0]] if s[1] else s[0] for s in shape])
        out: list[Any] = [at]
        for s, v in zip(shape, event.values()):
            if s[1] == 0:
                out.append(v)
            elif s[1] == 1:
                out.append(row(v))
        return out

    try:
        rows = [row(e) for e in events]
    except (_TooMany, RecursionError):
        return events
    return {"layouts": wire, "rows": rows}


def unpack(packed: Any, where: str, max_depth: int) -> list[dict[str, Any]]:
    """The events of a packed ``events`` value, or :class:`SchemaError` naming what is wrong and where.

    Bounded like the rest of the loader: a row has exactly one value per name of its layout, so
    the maps built are never more than the file's own values; nesting stops at ``max_depth``.
    """
    if type(packed) is not dict or set(packed) != {"layouts", "rows"}:
        raise SchemaError(where, "expected a list of events or a map of layouts and rows")
    layouts = packed["layouts"]
    rows = packed["rows"]
    if type(layouts) is not list or type(rows) is not list:
        raise SchemaError(where, "layouts and rows must be arrays")
    if len(layouts) > _MAX_LAYOUTS:
        raise SchemaError(f"{where}.layouts", f"{len(layouts):,} layouts, over the {_MAX_LAYOUTS:,} a cassette may hold")
    parsed: list[tuple[tuple[str, ...], list[Any], tuple[int, ...], tuple[int, ...]]] = []
    for i, layout in enumerate(layouts):
        if type(layout) is not list:
            raise SchemaError(f"{where}.layouts[{i}]", "expected an array of key names")
        keys: list[str] = []
        template: list[Any] = []  # the layout's constants in place; the row's values fill the slots
        slots: list[int] = []  # positions the row's values go to, in order
        nested: list[int] = []  # those of them that are rows of their own
        for entry in layout:
            if type(entry) is str:
                slots.append(len(keys))
                keys.append(entry)
                template.append(None)
            elif type(entry) is list and len(entry) == 1 and type(entry[0]) is str:
                nested.append(len(keys))
                slots.append(len(keys))
                keys.append(entry[0])
                template.append(None)
            elif type(entry) is dict and len(entry) == 1 and type(next(iter(entry))) is str:
                (key, value), = entry.items()
                if value is not None and type(value) is not str:
                    raise SchemaError(f"{where}.layouts[{i}].{key}", "a layout's constant must be null or text")
                keys.append(key)
                template.append(value)
            else:
                raise SchemaError(f"{where}.layouts[{i}]", "a key name must be text, text in a one-element array, or a one-entry map")
        if len(set(keys)) != len(keys):
            raise SchemaError(f"{where}.layouts[{i}]", "a key name appears twice")
        parsed.append((tuple(keys), template, tuple(slots), tuple(nested)))
    count = len(parsed)

    def event(value: Any, depth: int) -> dict[str, Any]:
        # per row, work only for the values it holds (a delta: one or two): the constants come with the
        # template, and where a problem is gets spelled out only when there is one (:class:`_Bad`)
        if type(value) is not list or not value or type(value[0]) is not int or not 0 <= value[0] < count:
            raise _Bad(f"expected a row: [layout index below {count}, value, ...]")
        keys, template, slots, nested = parsed[value[0]]
        if len(value) != len(slots) + 1:
            raise _Bad(f"{len(value) - 1} values for the {len(slots)} the row of layout {value[0]} holds")
        values = template.copy()
        for slot, item in zip(slots, value[1:]):
            values[slot] = item
        for slot in nested:
            if depth >= max_depth:
                raise _Bad(f"nested deeper than {max_depth} (Limits.max_depth)", keys[slot])
            try:
                values[slot] = event(values[slot], depth + 1)
            except _Bad as bad:
                bad.path.append(keys[slot])
                raise
        return dict(zip(keys, values))

    out = []
    for j, row in enumerate(rows):
        try:
            out.append(event(row, 1))
        except _Bad as bad:
            raise SchemaError(f"{where}.rows[{j}]" + "".join(f".{k}" for k in reversed(bad.path)), bad.problem) from None
    return out


class _Bad(Exception):
    """A row's problem, and the keys from that row down to it (innermost first), named once it is raised."""

    def __init__(self, problem: str, *path: str) -> None:
        self.problem = problem
        self.path = list(path)

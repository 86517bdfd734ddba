"""Stream events on disk (format 2, ``replay.cassette._events``): rows under shared layouts.

The codec must give back exactly the maps recorded (key order too: replay validates them into
pydantic-ai's events in that order), and a hostile packed value must end in one CassetteError
naming where it is, never another exception or an unbounded build.
"""

from __future__ import annotations

from typing import Any

import hostile as h
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.cassette import MAGIC, Limits, _events, dumps, load, loads
from replay.cassette._schema import SchemaError
from replay.errors import CassetteError

STREAM = h.ROOT / "cassettes" / "coverage" / "stream.cassette"
"""A real recording of ``agent.run_stream`` (written in format 1: events as maps)."""

_keys = st.sampled_from(["index", "part", "delta", "event_kind", "part_kind", "content", "id", "x_kind", "args", ""])
_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=80)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_events_st = st.lists(st.dictionaries(_keys, _values, max_size=6), max_size=8)


def _through_disk(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    packed = msgpack.unpackb(msgpack.packb(_events.pack(events), use_bin_type=True), raw=False, strict_map_key=True)
    return _events.unpack(packed, "events", 200)


def _ordered(value: Any) -> Any:
    """``value`` with every map as its list of items, so equality checks key order too."""
    if type(value) is dict:
        return [(k, _ordered(v)) for k, v in value.items()]
    if type(value) is list:
        return [_ordered(v) for v in value]
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events_st)
def test_packed_events_read_back_as_the_very_maps_recorded(events: list[dict[str, Any]]) -> None:
    back = _through_disk(events)
    assert _ordered(back) == _ordered(events)
    assert [type(v) for e in back for v in e.values()] == [type(v) for e in events for v in e.values()]


def test_a_real_stream_recording_is_written_in_format_2_and_reads_back_the_same() -> None:
    recorded = load(STREAM)
    assert any(ex.events for ex in recorded.exchanges)
    data = dumps(recorded)
    wire = msgpack.unpackb(data[len(MAGIC):])
    assert wire["version"] == 2
    assert all(type(ex["events"]) is dict for ex in wire["exchanges"] if ex.get("events") is not None)
    again = loads(data)
    assert again.header.format_version == 2 and recorded.header.format_version == 1  # the file's own format
    again.header.format_version = 1
    assert again == recorded
    assert _ordered([ex.events for ex in again.exchanges]) == _ordered([ex.events for ex in recorded.exchanges])


def test_events_as_rows_cost_a_fraction_of_events_as_maps() -> None:
    # what a provider's stream looks like: one small delta after another
    events: list[dict[str, Any]] = [{"index": 0, "part": {"content": "w0 ", "id": None, "provider_name": None,
                                     "provider_details": None, "part_kind": "text"}, "previous_part_kind": None,
                                     "event_kind": "part_start"}]
    events += [{"index": 0, "delta": {"content_delta": f"w{k} ", "provider_name": None, "provider_details": None,
                                      "citations_delta": None, "part_delta_kind": "text"}, "event_kind": "part_delta"}
               for k in range(1, 2_000)]
    as_maps = len(msgpack.packb(events))
    as_rows = len(msgpack.packb(_events.pack(events)))
    assert as_rows * 5 < as_maps, (as_rows, as_maps)


def test_a_cassette_without_stream_events_stays_format_1() -> None:
    c = load(h.REAL)
    assert not any(ex.events for ex in c.exchanges)
    assert msgpack.unpackb(dumps(c)[len(MAGIC):])["version"] == 1


def _v2_with_events(events: Any) -> bytes:
    wire = msgpack.unpackb(dumps(load(STREAM))[len(MAGIC):])
    for ex in wire["exchanges"]:
        if ex.get("events") is not None:
            ex["events"] = events
    return MAGIC + msgpack.packb(wire, use_bin_type=True)


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ({"layouts": []}, r": expected a list of events or a map of layouts and rows"),
        ({"layouts": {}, "rows": []}, r": layouts and rows must be arrays"),
        ({"layouts": [[1]], "rows": []}, r"\.layouts\[0\]: a key name must be text"),
        ({"layouts": [["a", "a"]], "rows": []}, r"\.layouts\[0\]: a key name appears twice"),
        ({"layouts": [[{"a": [1]}]], "rows": []}, r"\.layouts\[0\]\.a: a layout's constant must be null or text"),
        ({"layouts": [["a"]], "rows": [[1, 2]]}, r"\.rows\[0\]: expected a row: \[layout index below 1"),
        ({"layouts": [["a"]], "rows": [[0]]}, r"\.rows\[0\]: 0 values for the 1 the row of layout 0 holds"),
        ({"layouts": [["a"]], "rows": [[0, 1, 2]]}, r"\.rows\[0\]: 2 values"),
        ({"layouts": [[["a"]]], "rows": [[0, "x"]]}, r"\.rows\[0\]\.a: expected a row"),
        ({"layouts": [["a"]], "rows": ["x"]}, r"\.rows\[0\]: expected a row"),
        ({"layouts": [[{"event_kind": 5}]], "rows": [[0]]}, r"\.layouts\[0\]\.event_kind: a layout's constant must be null or text"),
    ],
)
def test_a_broken_packed_value_is_one_error_naming_where(events: Any, match: str) -> None:
    with pytest.raises(CassetteError, match=r"invalid cassette: exchanges\[\d+\]\.events" + match) as err:
        loads(_v2_with_events(events), "x.cassette")
    assert "\n" not in str(err.value)


def test_rows_nested_past_max_depth_are_refused() -> None:
    row: list[Any] = [0, "leaf"]
    for _ in range(50):
        row = [1, row]
    packed = {"layouts": [["a"], [["a"]]], "rows": [row]}
    assert _events.unpack(packed, "e", 60)[0]["a"]["a"]
    with pytest.raises(SchemaError, match="nested deeper than 20"):
        _events.unpack(packed, "e", 20)
    with pytest.raises(CassetteError, match="deeper"):
        loads(_v2_with_events(packed), limits=Limits(max_depth=20))


def test_format_1_keeps_events_as_maps_only() -> None:
    wire = msgpack.unpackb(dumps(load(STREAM))[len(MAGIC):])
    wire["version"] = 1
    with pytest.raises(CassetteError, match=r"events: expected an array, got map"):
        loads(MAGIC + msgpack.packb(wire, use_bin_type=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=20))
def test_any_value_under_packed_events_loads_or_is_refused(rows: Any) -> None:
    for events in ({"layouts": [["a", ["b"]], ["c"], [{"d": None}]], "rows": rows}, {"layouts": rows, "rows": [[0]]}):
        assert h.verdict(_v2_with_events(events)) in ("loaded", "refused")


_V2 = dumps(load(STREAM))
"""The real stream recording as format 2 writes it: the bit-flip fuzz's seed for the rows' decoder."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(len(MAGIC), len(_V2) - 1), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips_in_a_format_2_file_load_or_are_refused(flips: list[tuple[int, int]]) -> None:
    buf = bytearray(_V2)
    for pos, bit in flips:
        buf[pos] ^= 1 << bit
    assert h.verdict(bytes(buf), f"flip@{flips}") in ("loaded", "refused")


def test_every_truncation_of_a_format_2_file_is_refused() -> None:
    for label, data in h.truncations(_V2):
        assert h.verdict(data, label) == "refused", label


def test_events_rows_cannot_hold_are_written_as_maps_and_still_load() -> None:
    many = [{"index": 0, "event_kind": "part_delta", f"k{n}": n} for n in range(_events._MAX_LAYOUTS + 1)]
    assert _events.pack(many) is many  # a layout each: over what a reader accepts
    assert _through_disk(_events.pack(many[:-1])) == many[:-1]  # at the bound: rows, and they load
    odd: list[Any] = [{"index": 0, 1: "a key msgpack keeps as an integer"}]
    assert _events.pack(odd) is odd  # not a row (nor loadable in any format: keys are text)
    nested = _events.pack([{"index": 0, "delta": {2: "x"}}])
    assert isinstance(nested, dict) and nested["layouts"] == [["index", "delta"]]  # that map stays a map in the row

"""The loader's fast paths by record layout give exactly what the field-by-field checks and the walk give.

``replay.cassette._schema`` checks exchanges (:class:`_Layouts`) and messages (:class:`_Messages`) once per
layout of keys and value types instead of a Python call per field, and weighs them without copying
or walking their scalar values. A fast path may only say "accepted, weight W" when the old path
(``_fields`` / ``check_message`` and ``json_weight``) accepts with weight W; anything else goes the
old way, so the error stays the same. These properties compare the two on generated records (via
msgpack, as the loader gets them: bytes, empty bytes, binary and integer keys, deep nesting, long
names, out-of-range integers), and whole loads against a plain re-computation of the limits.
"""

from __future__ import annotations

from typing import Any

import hostile as h
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.cassette import Limits, loads
from replay.cassette import _schema as S
from replay.errors import CassetteError

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEPTHS = (-1, 0, 1, 2, 3, 4, 6, 200)


def via_msgpack(value: Any) -> Any:
    """What the loader would see (it unpacks with strict map keys; integer keys only get here in tests)."""
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False, strict_map_key=False)


def deep(depth: int, leaf: Any) -> Any:
    for n in range(depth):
        leaf = [leaf] if n % 2 else {"d": leaf}
    return leaf


_texts = st.one_of(
    st.text(max_size=6), st.sampled_from(["", "n" * S.MAX_NAME, "n" * (S.MAX_NAME + 1), "é" * 5000])
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.sampled_from([0, 1, -1, S.MAX_INT, S.MAX_INT + 1]),
    st.floats(allow_nan=False), _texts, st.binary(max_size=3),
)  # fmt: skip
_keys = st.one_of(st.text(max_size=6), st.binary(max_size=2), st.integers(-2, 2))
_values = st.one_of(
    st.recursive(
        _scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
        max_leaves=8,
    ),
    st.builds(deep, st.integers(1, 9), _scalars),
)


def _good(check: S.Check) -> st.SearchStrategy[Any]:
    """Values the check accepts."""
    types, bound = S._TYPES[check]
    options: list[st.SearchStrategy[Any]] = []
    if str in types:
        options.append(st.text(max_size=8) if bound else _texts)
    if int in types:
        options.append(st.integers(0, S.MAX_INT))
    if type(None) in types:
        options.append(st.none())
    if dict in types:
        options.append(st.dictionaries(st.text(max_size=4), _values, max_size=3))
    return st.one_of(options)


@st.composite
def records(
    draw: st.DrawFn, fields: dict[str, S.Check], extra: tuple[str, ...], fixed: dict[str, Any] | None = None
) -> dict[Any, Any]:
    """A record with mostly well-typed fields, then a few changes: a value replaced by anything,
    a key removed or added (also binary or integer), the keys shuffled; ``fixed`` values mostly set."""
    names = sorted(fields)
    record: dict[Any, Any] = {}
    for name in names:
        if draw(st.integers(0, 9)):
            record[name] = draw(_good(fields[name]))
    for name in extra:
        if draw(st.booleans()):
            record[name] = draw(_values)
    for name, value in (fixed or {}).items():
        if draw(st.integers(0, 9)):
            record[name] = value
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        change = draw(st.integers(0, 2))
        if change == 0 and record:
            record[draw(st.sampled_from(sorted(record, key=repr)))] = draw(_values)
        elif change == 1 and record:
            del record[draw(st.sampled_from(sorted(record, key=repr)))]
        else:
            record[draw(_keys)] = draw(_values)
    items = list(record.items())
    order = draw(st.permutations(range(len(items))))
    return via_msgpack(dict(items[i] for i in order))


def old_fields(record: Any, fields: dict[str, S.Check], required: tuple[str, ...]) -> str | None:
    try:
        S._fields(record, "r", fields, required)
    except S.SchemaError as exc:
        return str(exc)
    return None


def old_weight(record: dict[Any, Any], skip: tuple[str, ...], depth: int) -> int | str:
    """What the loader did before: the walk of a copy without the skipped keys."""
    try:
        return S.json_weight({k: v for k, v in record.items() if k not in skip}, "r", depth)
    except S.SchemaError as exc:
        return str(exc)


KINDS = [
    ("exchange", S._EXCHANGE_FIELDS, S._EXCHANGE_REQUIRED, ("messages",)),
    ("run", S._RUN_FIELDS, ("role",), ("history", "result")),
    ("history", S._HISTORY_FIELDS, ("name",), ("messages", "source")),
]


@pytest.mark.parametrize(("kind", "fields", "required", "skip"), KINDS, ids=[k[0] for k in KINDS])
@PROPERTY
@given(data=st.data())
def test_a_record_layout_agrees_with_the_field_checks_and_the_walk(
    kind: str, fields: dict[str, S.Check], required: tuple[str, ...], skip: tuple[str, ...], data: st.DataObject
) -> None:
    record = data.draw(records(fields, (*skip, "cost", "future"), {"kind": "request"} if kind == "exchange" else None))
    checked = S._Layouts(fields, required, skip).check(record)
    verdict = old_fields(record, fields, required)
    if checked is not None:
        assert verdict is None, (record, verdict)
    elif verdict is None and isinstance(old_weight(record, skip, 10**6), int):
        pytest.fail(f"a record the old path accepts missed the fast path: {record!r}")
    if checked is not None:
        for depth in DEPTHS:
            try:
                fast: int | str = S._Layouts(fields, required, skip).weight(*checked, record, "r", depth)
            except S.SchemaError as exc:
                fast = str(exc)
            assert fast == old_weight(record, skip, depth), (record, depth)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    message = draw(records(S._MESSAGE_FIELDS, ("metadata", "details")))
    if draw(st.integers(0, 9)):
        message["kind"] = draw(_good(S._name))
    if draw(st.integers(0, 9)):
        parts = draw(st.lists(records(S._PART_FIELDS, ("content", "provider_details")), max_size=3))
        for part in parts:
            if draw(st.integers(0, 9)):
                part["part_kind"] = draw(_good(S._name))
        message["parts"] = parts if draw(st.integers(0, 9)) else draw(_values)
    return via_msgpack(message) if draw(st.integers(0, 9)) else draw(_values)


@PROPERTY
@given(messages())
def test_a_message_by_layout_agrees_with_check_message_and_the_walk(message: Any) -> None:
    for depth in DEPTHS:
        try:
            S.check_message(message, "m")
            old: int | None = S.json_weight(message, "m", depth)
        except S.SchemaError:
            old = None
        fast = S._Messages(depth).weight(message)
        if fast is not None:
            assert fast == old, (message, depth)
        if old is not None and depth >= 3:
            assert fast is not None, (message, depth)  # every message the old path accepts is on the fast path


def test_the_fast_paths_are_taken_for_a_real_recording() -> None:
    wire = h.wire(h.REAL.read_bytes())
    by_layout = S._Messages(200)
    assert all(by_layout.weight(m) is not None for m in wire["messages"])
    exchanges = S._Layouts(S._EXCHANGE_FIELDS, S._EXCHANGE_REQUIRED, ("messages",))
    assert all(exchanges.check(ex) is not None for ex in wire["exchanges"])
    assert len(by_layout.messages.known) + len(by_layout.parts.known) + len(exchanges.known) < S._MAX_LAYOUTS


def test_past_the_layout_cap_records_are_checked_the_old_way() -> None:
    """A file with more layouts than remembered still loads, and its errors are the same."""
    wire = h.wire(h.SMALL_REAL.read_bytes())
    template = wire["exchanges"][0]
    wire["exchanges"] = [{**template, "seq": i, "index": i, f"extra{i}": i} for i in range(3 * S._MAX_LAYOUTS)]
    assert len(loads(h.pack(wire)).exchanges) == 3 * S._MAX_LAYOUTS
    wire["exchanges"][-1]["role"] = "r" * (S.MAX_NAME + 1)
    with pytest.raises(CassetteError, match=rf"exchanges\[{3 * S._MAX_LAYOUTS - 1}\]\.role: expected text of at most"):
        loads(h.pack(wire))


# --------------------------------------------------------------------------- whole loads


def expanded(wire: dict[str, Any]) -> tuple[int, int]:
    """References and expanded weight of a cassette, computed plainly (what the limits bound)."""
    weights = [S.json_weight(m, "", 200) for m in wire.get("messages") or []]
    blobs = [S.json_weight(b, "", 200) for b in wire.get("blobs") or []]
    references = total = 0

    def add(runs: list[int] | None) -> None:
        nonlocal references, total
        for start, count in zip((runs or [])[::2], (runs or [])[1::2]):
            references += count
            total += sum(weights[start : start + count])

    for ex in wire.get("exchanges") or []:
        add(ex.get("messages"))
        total += sum(blobs[ex[k]] for k in ("settings", "parameters") if ex.get(k) is not None)
        total += weights[ex["response"]] if ex.get("response") is not None else 0
        total += S.json_weight({k: v for k, v in ex.items() if k != "messages"}, "", 202)
        for record in ex.get("wire") or []:  # a wire body's blobs, by reference
            refs = [record["body"]] if record.get("body") is not None else []
            refs += [i for ids in (record.get("body_lists") or {}).values() for i in ids]
            references += len(refs)
            total += sum(blobs[i] for i in refs)
    for run in wire.get("runs") or []:
        add(run.get("history"))
        add(run.get("result"))
    for history in wire.get("histories") or []:
        add(history.get("messages"))
        add(history.get("source"))
    return references, total


CASSETTES = {
    "long": h.REAL.read_bytes(),
    "stream": h.base_bytes("coverage/stream"),
    "wire": h.with_wire(h.base_bytes("coverage/tool_call")),
    "histories": h.base_bytes("seed003/reused_id_two_returns"),
    "judge": h.base_bytes("coverage/trajectory_judge"),
}


@pytest.mark.parametrize("name", sorted(CASSETTES))
def test_limits_are_exact_at_their_bound(name: str) -> None:
    """``max_expanded`` and ``max_references`` refuse one unit over what the file really holds, not more or less."""
    data = CASSETTES[name]
    references, total = expanded(h.wire(data))
    assert references > 0 and total > 0
    loads(data, limits=Limits(max_expanded=total, max_references=references))
    with pytest.raises(CassetteError, match=f"requests expand to {total:,} characters"):
        loads(data, limits=Limits(max_expanded=total - 1))
    with pytest.raises(CassetteError, match="max_references"):
        loads(data, limits=Limits(max_references=references - 1))


def test_messages_are_the_table_as_stored() -> None:
    data = h.REAL.read_bytes()
    assert loads(data).messages == h.wire(data)["messages"]
    with pytest.raises(CassetteError, match="invalid cassette: messages: Input should be a valid list"):
        loads(h.pack({"format": "harness-replay", "version": 1, "messages": None}), "x.cassette")


def _exchange0(wire: dict[str, Any], **changes: Any) -> dict[str, Any]:
    wire["exchanges"][0].update(changes)
    return wire


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "telepathy"}, "exchanges[0].kind: unknown call kind 'telepathy'"),
        ({"settings": 99}, "exchanges[0].settings: settings reference 99 outside the table of "),
        ({"parameters": 99}, "exchanges[0].parameters: parameters reference 99 outside the table of "),
        ({"response": 10_000}, "exchanges[0].response: response reference 10000 outside the table of "),
        ({"messages": [0]}, "exchanges[0].messages: message references must be a flat list of [start, count] pairs"),
        ({"messages": [0, 0]}, "exchanges[0].messages: bad message reference run 0, 0"),
        ({"messages": [-1, 2]}, "exchanges[0].messages: bad message reference run -1, 2"),
        ({"messages": [0, 1, 0, True]}, "exchanges[0].messages: bad message reference run 0, True"),
        ({"messages": [0, 10_000]}, "exchanges[0].messages: message reference 9999 outside the table of "),
        ({"messages": "0-3"}, "exchanges[0].messages: expected an array, got text"),
        ({"seq": None}, "exchanges[0].seq: expected a non-negative integer, got null"),
        ({"index": 2**63}, "exchanges[0].index: expected a non-negative integer, got integer"),
        ({"model_name": "m" * 4097}, "exchanges[0].model_name: expected null or text of at most 4096 characters, got text of 4097"),
        ({"instructions": b""}, "exchanges[0].instructions: expected text or null, got binary"),
        ({"usage": []}, "exchanges[0].usage: expected a map or null, got array"),
        ({"events": {}}, "exchanges[0].events: expected an array, got map"),
        ({"error": {"type": "E"}}, "exchanges[0].error: missing message"),
        ({"cost": b""}, "exchanges[0]: binary value under 'cost' is not allowed"),
        ({"cost": deep(250, 1)}, "exchanges[0]: nesting deeper than 202"),
    ],
)  # fmt: skip
def test_exchange_errors_name_the_field(change: dict[str, Any], message: str) -> None:
    wire = _exchange0(h.wire(h.SMALL_REAL.read_bytes()), **change)
    with pytest.raises(CassetteError) as info:
        loads(h.pack(wire), "x.cassette")
    assert str(info.value).startswith(f"x.cassette: invalid cassette: {message}"), str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_required_field_is_named() -> None:
    wire = h.wire(h.SMALL_REAL.read_bytes())
    del wire["exchanges"][0]["role"]
    with pytest.raises(CassetteError, match=r"invalid cassette: exchanges\[0\]: missing role$"):
        loads(h.pack(wire), "x.cassette")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("runs", 0, "history"), [0, 10_000], "runs[0].history: message reference 9999 outside the table of "),
        (("runs", 0, "result"), [0], "runs[0].result: message references must be a flat list"),
        (("messages", 0, "parts", 0, "content"), b"", "messages[0]: binary value under 'content' is not allowed"),
        (("messages", 0, "parts", 0, "content"), deep(250, 1), "messages[0]: nesting deeper than 200"),
        (("messages", 0, "parts", 0, "tool_name"), "t" * 4097, "messages[0].parts[0].tool_name: expected null or text"),
        (("messages", 0, "kind"), "k" * 4097, "messages[0].kind: expected text of at most 4096 characters"),
        (("messages", 0, "run_id"), 5, "messages[0].run_id: expected null or text"),
    ],
)
def test_run_and_message_errors_name_the_field(path: tuple[Any, ...], value: Any, message: str) -> None:
    with pytest.raises(CassetteError) as info:
        loads(h.pack(h.replaced(h.wire(h.SMALL_REAL.read_bytes()), path, value)), "x.cassette")
    assert str(info.value).startswith(f"x.cassette: invalid cassette: {message}"), str(info.value)

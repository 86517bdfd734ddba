"""The load-time schema: a cassette that loads has the shapes every later stage relies on.

Regressions of issue 13: the loader used to accept message and part dicts of any shape,
binary map keys and binary values, and 865 tracebacks followed in show, diff and run.
"""

from __future__ import annotations

from typing import Any

import hostile as h
import msgpack
import pytest
from conftest import ROOT

from replay.cassette import MAGIC, Limits, encode_big_int, loads
from replay.errors import CassetteError

TOOL_CALL = (h.ROOT / "cassettes" / "coverage" / "tool_call.cassette").read_bytes()
STREAM = (h.ROOT / "cassettes" / "coverage" / "stream.cassette").read_bytes()


def refused(wire: dict[str, Any], match: str) -> None:
    with pytest.raises(CassetteError, match=match):
        loads(h.pack(wire), "x.cassette")


def base() -> dict[str, Any]:
    return h.wire(TOOL_CALL)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("messages", 0, "parts"), None, r"messages\[0\]\.parts: expected an array"),
        (("messages", 0, "parts", 0), "text", r"messages\[0\]\.parts\[0\]: expected a map"),
        (("messages", 0, "parts", 0, "part_kind"), 3, r"parts\[0\]\.part_kind: expected text"),
        (("messages", 1, "parts", 0, "tool_name"), ["add"], r"tool_name: expected null or text"),
        (("messages", 1, "parts", 0, "tool_call_id"), {"a": 1}, r"tool_call_id: expected null or text"),
        (("messages", 1, "parts", 0, "args"), [1, 2], r"args: expected text, a map or null"),
        (("messages", 0, "kind"), None, r"messages\[0\]\.kind: expected text"),
        (("messages", 0, "instructions"), 5, r"instructions: expected text or null"),
        (("messages", 0), [], r"messages\[0\]: expected a map"),
        (("exchanges", 0, "role"), "r" * 5000, r"exchanges\[0\]\.role: expected text of at most 4096"),
        (("exchanges", 0, "index"), -1, r"exchanges\[0\]\.index: expected a non-negative integer"),
        (("exchanges", 0, "seq"), True, r"exchanges\[0\]\.seq: expected a non-negative integer, got boolean"),
        (("exchanges", 0, "error"), {"type": 1, "message": "m"}, r"exchanges\[0\]\.error\.type"),
        (("exchanges", 0, "response"), 0, r"refers to messages\[0\], which is not a response"),
        (("runs", 0, "role"), None, r"runs\[0\]\.role: expected text"),
        (("runs", 0, "parent"), -1, r"runs\[0\]\.parent: expected null or a non-negative integer"),
        (("runs", 0, "parent"), 7, r"runs\[0\]\.parent: run reference 7 outside the table of 1"),
        (("outcome", "error"), {"type": "x"}, r"outcome\.error: missing message"),
        (("observations", 0, "name"), 7, r"observations\[0\]\.name: expected text"),
        (("header", "roles"), {"main": 1}, r"header\.roles\.main"),
        (("header", "harness_version"), 0.62, r"header\.harness_version"),
        (("expectations",), [1], r"expectations: expected a map"),
    ],
)
def test_wrong_shapes_are_one_error_naming_the_field(path: tuple[Any, ...], value: Any, match: str) -> None:
    refused(h.replaced(base(), path, value), match)


def test_stream_events_need_an_event_kind() -> None:
    wire = h.wire(STREAM)
    ex = next(i for i, e in enumerate(wire["exchanges"]) if e.get("events"))
    refused(h.replaced(wire, ("exchanges", ex, "events", 0), {"index": 0}), r"events\[0\]: missing event_kind")


@pytest.mark.parametrize(
    "scenario_id", ["../../../x", "/etc/x", "a/../b", "a//b", "a\\b", "a\x00b", "a\x1b[2Jb", "C:x", "con/x", "-rf", ""]
)
def test_header_scenario_id_must_be_a_safe_relative_path(scenario_id: str) -> None:
    refused(h.replaced(base(), ("header", "scenario_id"), scenario_id), r"header\.scenario_id: scenario id")


def test_binary_values_and_binary_map_keys_are_refused() -> None:
    refused(h.replaced(base(), ("messages", 0, "parts", 0, "content"), b"\x00raw"), "binary value")
    with pytest.raises(CassetteError, match="map key b'k' is not text"):
        loads(h._raw(base(), ("messages", 0, "metadata"), h._BYTES_KEY))


def test_non_utf8_text_is_refused() -> None:
    with pytest.raises(CassetteError, match="corrupted cassette"):
        loads(h._raw(base(), ("messages", 0, "parts", 0, "content"), h._BAD_UTF8))


def test_unknown_optional_fields_of_basic_types_are_kept() -> None:
    """Other versions add optional fields (schema defaults, a source hash per scenario...)."""
    wire = base()
    wire["header"]["future_hashes"] = {"main": ["abc"]}
    wire["header"]["note"] = "recorded on CI"
    wire["exchanges"][0]["cost"] = {"usd": 0.25, "source": "prices.json"}
    wire["messages"][0]["parts"][0]["future_field"] = [1, {"x": None}]
    c = loads(h.pack(wire))
    assert c.header.model_extra == {"future_hashes": {"main": ["abc"]}, "note": "recorded on CI"}
    assert c.exchanges[0].model_extra == {"cost": {"usd": 0.25, "source": "prices.json"}}
    wire["header"]["bad"] = {"k": b"bytes"}
    refused(wire, r"header: binary value under 'k'")


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"method": "POST", "url": "u", "body": 99}, "wire body reference 99 outside the blob table"),
        ({"method": "POST", "url": "u", "body_lists": {"messages": [0, 99]}}, "wire body reference 99"),
        ({"method": "POST", "url": "u", "body_lists": {"messages": "x"}}, "expected an array of blob references"),
        ({"method": "POST", "url": "u", "request_headers": {"a": 1}}, "request_headers: expected a map of text to text"),
        ({"method": "POST", "url": 5}, r"wire\[0\]\.url: expected text"),
        ({"method": "POST", "url": "u", "stream": "yes"}, r"wire\[0\]\.stream: expected a boolean"),
        ({"url": "u"}, "missing method"),
    ],
)
def test_wire_records_are_checked(record: dict[str, Any], match: str) -> None:
    wire = base()
    wire["exchanges"][0]["wire"] = [record]
    refused(wire, match)


def test_unknown_part_kinds_load() -> None:
    """A part kind from another pydantic-ai release is not refused: matrix loads across releases."""
    wire = base()
    wire["messages"][0]["parts"].append({"part_kind": "hologram", "content": {"any": ["json"]}})
    assert loads(h.pack(wire)).messages[0]["parts"][-1]["part_kind"] == "hologram"


def test_expanded_text_is_bounded() -> None:
    """A small file whose requests all re-send the same large messages: bounded by max_expanded."""
    message = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x" * 10_000}]}
    wire = {
        "format": "harness-replay",
        "version": 1,
        "messages": [message] * 10,
        "exchanges": [{"seq": i, "role": "main", "index": i, "kind": "request", "messages": [0, 10]} for i in range(500)],
    }
    data = h.pack(wire)
    assert len(data) < 200_000
    assert loads(data).exchanges[499].messages == list(range(10))  # 50 M characters: under the default
    with pytest.raises(CassetteError, match="max_expanded"):
        loads(data, limits=Limits(max_expanded=10_000_000))


def test_the_bundled_and_conformance_cassettes_load() -> None:
    paths = [*h.ROOT.glob("cassettes/**/*.cassette"), *h.ROOT.glob("tests/**/*.cassette")]
    assert len(paths) > 20
    for path in paths:
        if "-future" not in path.name:
            loads(path.read_bytes(), path)


def test_a_binary_top_level_key_is_refused() -> None:
    raw = MAGIC + b"\x82" + msgpack.packb("format") + msgpack.packb("harness-replay") + b"\xc4\x01k\x01"
    with pytest.raises(CassetteError):
        loads(raw)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"roots": {"message": [["x"]]}}, r"schema_defaults\.roots: expected a map of text to arrays of text"),
        ({"classes": {"ModelRequest": {"nested": {"parts": [{}]}}}}, r"classes\.ModelRequest\.nested"),
        ({"classes": {"TextPart": {"defaults": {"id": [1]}}}}, r"classes\.TextPart\.defaults"),
        ({"classes": {"TextPart": {"tag": "part_kind"}}}, r"classes\.TextPart\.tag"),
        ([1], r"header\.schema_defaults: expected a map"),
    ],
)
def test_malformed_schema_defaults_are_refused(value: Any, match: str) -> None:
    """Regression (make reliability, 620 cases): a list where the normaliser hashes text was a TypeError."""
    refused(h.replaced(base(), ("header", "schema_defaults"), value), match)


def test_exchange_ordinals_are_what_every_writer_writes() -> None:
    """The n-th exchange has ``seq`` n and is its role's ``index``-th call: a duplicated ordinal (a hand
    edit) was listed twice by ``show``, passed ``check`` and was paired by ordinal in one line of a diff
    and by position in the next."""
    recording = ROOT / "cassettes" / "coverage" / "tool_call.cassette"  # main[0], main[1]
    assert len(loads(recording.read_bytes()).exchanges) == 2
    for field, value, message in (
        ("index", 0, r"exchanges\[1\]\.index: is 0, but role 'main' has 1 earlier exchange\(s\): it must be 1"),
        ("index", 5, r"exchanges\[1\]\.index: is 5, .* it must be 1"),
        ("seq", 0, r"exchanges\[1\]\.seq: is 0, not the exchange's position 1"),
    ):
        wire = h.wire(recording.read_bytes())
        assert wire["exchanges"][1]["role"] == "main"
        wire["exchanges"][1][field] = value
        with pytest.raises(CassetteError, match=message):
            loads(h.pack(wire))


def test_an_errors_attributes_are_public_names_only() -> None:
    """They are set on the rebuilt exception: a ``__class__`` or ``_private`` key from a file is refused."""
    for key in ("__class__", "_x", "not a name", "x" * 5000):
        wire = h.wire(h.SMALL_REAL.read_bytes())
        wire["outcome"] = {"status": "error", "error": {"type": "builtins.ValueError", "message": "m", "attributes": {key: 1}}}
        with pytest.raises(CassetteError, match=r"outcome\.error\.attributes: .* is not a public attribute name"):
            loads(h.pack(wire))
    wire["outcome"]["error"]["attributes"] = {"status_code": 503}
    assert loads(h.pack(wire)).outcome.error.attributes == {"status_code": 503}  # type: ignore[union-attr]


def test_wire_body_references_count_against_the_limits() -> None:
    """A 1 MB file referencing one blob 4,000 times in a wire body: `show` expanded it to 4 GB; references
    and expanded text are counted as for messages."""
    w = h.wire(h.with_wire(h.SMALL_REAL.read_bytes()))
    w["blobs"].append("a" * 100_000)
    big = len(w["blobs"]) - 1
    w["exchanges"][0]["wire"][0]["body_lists"] = {}
    base = next(n for n in range(1, 10_000) if _loads_within(h.pack(w), n))  # the file's own references
    w["exchanges"][0]["wire"][0]["body_lists"] = {"messages": [big] * 50}
    data = h.pack(w)
    assert loads(data).exchanges[0].wire  # within the defaults
    assert _loads_within(data, base + 49) is False and _loads_within(data, base + 50)
    with pytest.raises(CassetteError, match=rf"over {base + 49} message references"):
        loads(data, limits=Limits(max_references=base + 49))
    with pytest.raises(CassetteError, match="max_expanded"):
        loads(data, limits=Limits(max_expanded=1_000_000))


def _loads_within(data: bytes, references: int) -> bool:
    try:
        loads(data, limits=Limits(max_references=references))
    except CassetteError:
        return False
    return True


BIG_INT = 10**4299  # 4,300 digits: written out, converted and packed digit by digit


@pytest.mark.parametrize(
    "message",
    [
        {"kind": "request", "parts": [{"part_kind": "tool-return", "content": BIG_INT}]},  # a part's own field
        {"kind": "request", "parts": [{"part_kind": "tool-return", "content": [BIG_INT] * 5}]},  # in an array
        {"kind": "request", "parts": [{"part_kind": "tool-call", "args": {"n": -BIG_INT}}]},  # in a map
        {"kind": "request", "size": BIG_INT, "parts": []},  # the message's own field
    ],
)
def test_a_big_integer_weighs_its_digits_in_the_expanded_text(message: dict[str, object]) -> None:
    """Weighed as one character, a message of big integers re-sent by every request expanded past
    max_expanded thousands of times over (a 9 MB file: `replay diff` ran for minutes at 3.4 GB)."""
    wire = {
        "format": "harness-replay",
        "version": 1,
        "messages": [message],
        "exchanges": [{"seq": i, "role": "main", "index": i, "kind": "request", "messages": [0, 1]} for i in range(500)],
    }
    data = MAGIC + msgpack.packb(wire, use_bin_type=True, default=encode_big_int)
    assert len(data) < 50_000
    loads(data)  # about 2 M characters: under the default
    with pytest.raises(CassetteError, match="max_expanded"):
        loads(data, limits=Limits(max_expanded=1_000_000))

"""Pins cassette formats 1 and 2 independently of the code: fixtures made from the description with plain msgpack."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from replay.cassette import MAGIC, dumps, load, loads
from replay.errors import CassetteError

HERE = Path(__file__).parent


def test_v1_fixture_loads_with_runs_expanded() -> None:
    c = load(HERE / "v1-minimal.cassette")
    assert c.header.scenario_id == "conformance/minimal"
    assert [ex.messages for ex in c.exchanges] == [[0], [0, 1, 2]]
    assert c.expand(c.exchanges[1].messages)[2]["parts"][0]["content"] == "again"
    assert c.messages[c.exchanges[1].response]["parts"][0]["content"] == "hi again"
    assert c.runs[0].history == [0, 1] and c.runs[0].result == [0, 1, 2, 3]
    assert c.outcome.output == "hi again" and c.expectations == {"turns": 2}


def test_shared_run_texts_resolve_to_the_messages_that_hold_them() -> None:
    c = load(HERE / "v1-shared-texts.cassette")
    assert c.runs[0].prompt == "again" and c.runs[0].output == "hi again"
    assert c.runs[1].prompt is None and c.runs[1].output == "hi"


def test_writer_shares_run_texts_and_reads_back_the_inline_form() -> None:
    c = load(HERE / "v1-minimal.cassette")
    c.runs[0].output = "hi again"
    wire = msgpack.unpackb(dumps(c)[len(MAGIC):])
    assert wire["runs"][0]["prompt_in"] == [2, 0] and "prompt" not in wire["runs"][0]
    assert wire["runs"][0]["output_text_of"] == 3 and "output" not in wire["runs"][0]
    assert loads(dumps(c)) == c


def test_writer_emits_the_same_wire_structure() -> None:
    data = (HERE / "v1-minimal.cassette").read_bytes()
    original = msgpack.unpackb(data[len(MAGIC):])
    rewritten = msgpack.unpackb(dumps(load(HERE / "v1-minimal.cassette"))[len(MAGIC):])
    assert rewritten["format"] == "harness-replay" and rewritten["version"] == 1
    for key in ("messages", "blobs", "observations", "expectations"):
        assert rewritten[key] == original[key]
    for ex_new, ex_old in zip(rewritten["exchanges"], original["exchanges"]):
        assert {k: ex_new[k] for k in ex_old} == ex_old


def test_future_format_is_refused_with_upgrade_hint() -> None:
    with pytest.raises(CassetteError, match="format 3.*upgrade"):
        load(HERE / "v3-future.cassette")


def test_v2_stream_events_load_as_the_maps_they_encode() -> None:
    c = load(HERE / "v2-stream-events.cassette")
    assert c.exchanges[0].events == [
        {"index": 0, "part": {"content": "h", "id": None, "part_kind": "text"}, "previous_part_kind": None,
         "event_kind": "part_start"},
        {"index": 0, "delta": {"content_delta": "i", "provider_name": None, "part_delta_kind": "text"},
         "event_kind": "part_delta"},
    ]
    assert [list(e) for e in c.exchanges[0].events] == [  # key order as the layouts give it
        ["index", "part", "previous_part_kind", "event_kind"], ["index", "delta", "event_kind"]]
    assert c.exchanges[1].events is None


def test_writer_emits_format_2_only_for_stream_events() -> None:
    rewritten = msgpack.unpackb(dumps(load(HERE / "v2-stream-events.cassette"))[len(MAGIC):])
    original = msgpack.unpackb((HERE / "v2-stream-events.cassette").read_bytes()[len(MAGIC):])
    assert rewritten["version"] == 2 and rewritten["header"]["format_version"] == 2
    assert rewritten["exchanges"][0]["events"] == original["exchanges"][0]["events"]
    minimal = msgpack.unpackb(dumps(load(HERE / "v1-minimal.cassette"))[len(MAGIC):])
    assert minimal["version"] == 1 and minimal["header"]["format_version"] == 1


def test_integers_past_64_bits_are_extension_type_0_with_their_digits() -> None:
    c = load(HERE / "v1-big-int.cassette")
    assert c.outcome.output == {"id": 2**70}
    assert [o.value for o in c.observations] == [2, -(2**63) - 1]
    rewritten = msgpack.unpackb(dumps(c)[len(MAGIC):])
    original = msgpack.unpackb((HERE / "v1-big-int.cassette").read_bytes()[len(MAGIC):])
    assert {k: rewritten["outcome"][k] for k in original["outcome"]} == original["outcome"]
    assert [{k: o[k] for k in ("name", "value")} for o in rewritten["observations"]] == original["observations"]

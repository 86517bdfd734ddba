"""Writes the conformance fixtures from the format description alone (plain msgpack, no replay code).

Run once when the format version changes; the files are committed and the tests read them.
"""

from pathlib import Path

import msgpack

MAGIC = b"\xc1replay\n"
HERE = Path(__file__).parent

minimal = {
    "format": "harness-replay",
    "version": 1,
    "header": {"format_version": 1, "scenario_id": "conformance/minimal", "mode": "record", "roles": {"main": "x"}},
    "messages": [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "again"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "hi again"}]},
    ],
    "blobs": [{"function_tools": []}],
    "exchanges": [
        {"seq": 0, "role": "main", "index": 0, "kind": "request", "messages": [0, 1], "parameters": 0, "response": 1},
        {"seq": 1, "role": "main", "index": 1, "kind": "request", "messages": [0, 3], "parameters": 0, "response": 3},
    ],
    "runs": [{"role": "main", "prompt": "again", "history": [0, 2], "result": [0, 4]}],
    "outcome": {"status": "ok", "output": "hi again"},
    "observations": [{"name": "turns", "value": 2}],
    "expectations": {"turns": 2},
}

# A run's prompt and text output stored as references into the message table (written since
# tool 0.1.0's shared-texts change; older v1 files carry them inline, as ``minimal`` does).
shared_texts = dict(
    minimal,
    runs=[
        {"role": "main", "prompt_in": [2, 0], "history": [0, 2], "result": [0, 4], "output_text_of": 3},
        {"role": "summarizing_compaction", "output_text_of": 1},
    ],
)

# Integers past msgpack's 64 bits (JSON has no bound: a tool argument, a tool's return) as extension
# type 0 holding their decimal digits; one encoding per value, so only where msgpack cannot hold it.
big_int = dict(
    minimal,
    outcome={"status": "ok", "output": {"id": msgpack.ExtType(0, b"1180591620717411303424")}},
    observations=[{"name": "turns", "value": 2}, {"name": "floor", "value": msgpack.ExtType(0, b"-9223372036854775809")}],
)

# Format 2: a streamed call's events as rows under shared layouts (README "Cassettes"). A layout
# names the keys in order: "name" (value in the row), ["name"] (a map, in the row as a row of
# its own), {"name": value} (the layout's constant: null, or a *_kind text). A row is
# [layout index, values...]. Files without events stay format 1.
stream_events = dict(
    minimal,
    version=2,
    header={**minimal["header"], "format_version": 2},
    exchanges=[
        {**minimal["exchanges"][0], "kind": "request_stream", "events": {
            "layouts": [
                ["index", ["part"], {"previous_part_kind": None}, {"event_kind": "part_start"}],
                ["content", {"id": None}, {"part_kind": "text"}],
                ["index", ["delta"], {"event_kind": "part_delta"}],
                ["content_delta", {"provider_name": None}, {"part_delta_kind": "text"}],
            ],
            "rows": [[0, 0, [1, "h"]], [2, 0, [3, "i"]]],
        }},
        minimal["exchanges"][1],
    ],
)

if __name__ == "__main__":
    (HERE / "v1-big-int.cassette").write_bytes(MAGIC + msgpack.packb(big_int, use_bin_type=True))
    (HERE / "v1-shared-texts.cassette").write_bytes(MAGIC + msgpack.packb(shared_texts, use_bin_type=True))
    (HERE / "v1-minimal.cassette").write_bytes(MAGIC + msgpack.packb(minimal, use_bin_type=True))
    (HERE / "v2-stream-events.cassette").write_bytes(MAGIC + msgpack.packb(stream_events, use_bin_type=True))
    future = dict(minimal, version=3)
    (HERE / "v3-future.cassette").write_bytes(MAGIC + msgpack.packb(future, use_bin_type=True))

"""Cassette format v1: round trips, content addressing, and one clear error per broken file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgpack
import pytest

from replay.cassette import (
    MAGIC,
    Cassette,
    CassetteBuilder,
    Exchange,
    Header,
    Limits,
    dumps,
    load,
    loads,
    save,
    to_wire,
)
from replay.errors import CassetteError


def sample() -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/sample", harness_version="0.62.0"))
    history = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"U{i}"}]} for i in range(5)]
    for n in range(1, 6):
        ids = b.messages(history[:n])
        resp = b.message({"kind": "response", "parts": [{"part_kind": "text", "content": f"A{n}"}]})
        b.cassette.exchanges.append(
            Exchange(seq=n - 1, role="main", index=n - 1, kind="request", messages=ids, response=resp,
                     settings=b.blob({"temperature": 0.0}), parameters=b.blob({"function_tools": []}), estimate=n)
        )
    return b.cassette


def test_round_trip_is_identity(tmp_path: Path) -> None:
    c = sample()
    path = save(c, tmp_path / "x.cassette")
    assert load(path) == c
    assert loads(dumps(c)) == c


def test_default_lists_and_dicts_are_not_shared() -> None:
    """The models' empty defaults are plain ``[]``/``{}`` (cheaper to import than default_factory):
    each instance must still get its own, or one cassette's messages would leak into the next."""
    first, second = Cassette(), Cassette()
    first.messages.append({"kind": "request"})
    first.header.roles["main"] = "m"
    first.expectations["k"] = 1
    assert second.messages == [] and second.header.roles == {} and second.expectations == {}
    a, b = (Exchange(seq=0, role="main", index=0, kind="request") for _ in range(2))
    a.messages.append(1)
    assert b.messages == []
    assert sample().messages is not sample().messages


def test_messages_and_blobs_are_stored_once() -> None:
    c = sample()
    assert len(c.messages) == 5 + 5  # five distinct requests, five responses
    assert len(c.blobs) == 2
    wire = msgpack.unpackb(dumps(c)[len(MAGIC):])
    # references are [start, count] runs, not one id per message
    assert wire["exchanges"][4]["messages"] == [0, 5] or len(wire["exchanges"][4]["messages"]) <= 10


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty file"),
        (b"PK\x03\x04 not ours", "wrong magic"),
        # a merge that wrote both sides with markers, and a clone without `git lfs pull`: said as such
        (b"<<<<<<< HEAD\n" + MAGIC + b"\x80\n=======\n" + MAGIC + b"\x81\n>>>>>>> other\n", "git merge conflict markers"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n", "Git LFS pointer"),
        (MAGIC + b"\x92\x01\x02", "no format marker"),
        (MAGIC + msgpack.packb({"format": "harness-replay", "version": 99}), "format 99"),
        (MAGIC + msgpack.packb({"format": "harness-replay", "version": 1, "exchanges": "x"}), "invalid cassette"),
        (MAGIC + msgpack.packb({"format": "harness-replay", "version": 1, "messages": [msgpack.ExtType(5, b"x")]}),
         "extension type"),
    ],
)
def test_broken_files_give_one_error(tmp_path: Path, data: bytes, problem: str) -> None:
    path = tmp_path / "bad.cassette"
    path.write_bytes(data)
    with pytest.raises(CassetteError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(str(path)) and problem in message
    assert "\n" not in message


def test_truncated_and_corrupted(tmp_path: Path) -> None:
    data = dumps(sample())
    for cut in (len(MAGIC) + 1, len(data) // 2, len(data) - 1):
        with pytest.raises(CassetteError, match="truncated|corrupted|invalid"):
            loads(data[:cut], "t.cassette")
    flipped = bytearray(data)
    flipped[len(MAGIC) + 3] ^= 0xFF
    with pytest.raises(CassetteError):
        loads(bytes(flipped), "f.cassette")


def test_references_outside_tables_are_refused() -> None:
    wire = msgpack.unpackb(dumps(sample())[len(MAGIC):])
    wire["exchanges"][0]["messages"] = [0, 999]
    with pytest.raises(CassetteError, match="outside the table"):
        loads(MAGIC + msgpack.packb(wire))
    wire = msgpack.unpackb(dumps(sample())[len(MAGIC):])
    wire["exchanges"][0]["response"] = 10_000
    with pytest.raises(CassetteError, match="outside the table"):
        loads(MAGIC + msgpack.packb(wire))


def _with_run(**run: object) -> bytes:
    wire = msgpack.unpackb(dumps(sample())[len(MAGIC):])
    wire["runs"] = [{"role": "main", **run}]
    return MAGIC + msgpack.packb(wire)


@pytest.mark.parametrize(
    "run",
    [
        {"output_text_of": 99},
        {"output_text_of": "1"},
        {"output_text_of": 0},  # a request: no text parts
        {"output_text_of": 1, "output": "A1"},  # both: which one holds?
        {"prompt_in": [0, 5]},
        {"prompt_in": [1, 0, 0]},
        {"prompt_in": [-1, 0]},
        {"prompt_in": "0"},
    ],
)
def test_bad_run_text_references_are_refused(run: dict[str, object]) -> None:
    with pytest.raises(CassetteError, match="invalid cassette: run (output|prompt) reference"):
        loads(_with_run(**run), "r.cassette")


def test_run_text_references_share_one_string() -> None:
    """A thousand runs naming one message cost one string, not a thousand copies."""
    wire = msgpack.unpackb(dumps(sample())[len(MAGIC):])
    wire["runs"] = [{"role": "main", "output_text_of": 1, "prompt_in": [0, 0]}] * 1000
    c = loads(MAGIC + msgpack.packb(wire))
    assert c.runs[0].output == "A1" and c.runs[0].prompt == "U0"
    assert all(r.output is c.runs[0].output and r.prompt is c.runs[0].prompt for r in c.runs)


def test_limits_are_enforced() -> None:
    data = dumps(sample())
    with pytest.raises(CassetteError, match="over the"):
        loads(data, limits=Limits(max_bytes=100))
    deep: object = "x"
    for _ in range(50):
        deep = {"a": deep}
    c = sample()
    c.messages.append({"kind": "request", "parts": [], "metadata": deep})
    with pytest.raises(CassetteError, match="nesting deeper"):
        loads(dumps(c), limits=Limits(max_depth=20))


def test_a_length_past_a_limit_names_the_setting_not_corruption() -> None:
    """`max-items = 5` in [tool.replay] made every cassette read `corrupted cassette: 10 exceeds
    max_map_len(5)`: a sound file called corrupted, under msgpack's name for the limit, not the setting."""
    data = dumps(sample())
    with pytest.raises(CassetteError) as items:
        loads(data, limits=Limits(max_items=3))
    assert "corrupted" not in str(items.value) and "over the max-items limit (3)" in str(items.value), items.value
    with pytest.raises(CassetteError) as string:
        loads(data, limits=Limits(max_string=2))
    assert "corrupted" not in str(string.value) and "over the max-string limit (2)" in str(string.value), string.value


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no such cassette"):
        load(tmp_path / "nope.cassette")
    with pytest.raises(CassetteError, match="directory"):
        load(tmp_path)


def test_atomic_save_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.cassette"
    save(sample(), target)
    save(sample(), target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.cassette"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_cassettes_are_written_like_other_project_files(tmp_path: Path, umask: int, mode: int) -> None:
    """0644 under the usual umask (mkstemp alone gives 0600, which a teammate's checkout cannot read)."""
    import stat

    from replay.cassette import write_atomic

    previous = os.umask(umask)
    try:
        path = write_atomic(tmp_path / "a" / "x.cassette", b"data")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_repr_is_a_summary_whatever_the_size() -> None:
    """asyncio formats a finished task's result (the cassette ``execute`` returns) into the task's
    repr when ``asyncio.run`` restores SIGINT: a repr of every message cost every run 3 %."""
    c = Cassette(messages=[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x" * 10_000}]}] * 50)
    c.header.scenario_id = "big/one"
    assert repr(c) == "Cassette(scenario_id='big/one', 0 requests, 50 messages, outcome='ok')"


@dataclasses.dataclass
class _Part:
    content: str


def test_dumps_writes_the_shared_message_table_as_the_copy_would() -> None:
    """``dumps`` packs the message table as it stands rather than a deep copy: the same bytes, and a
    value only the copy turns into data (a dataclass) is still written as that data."""
    c = sample()
    assert dumps(c) == MAGIC + msgpack.packb(to_wire(c), use_bin_type=True)
    plain = Cassette(messages=[{"kind": "request", "parts": [{"content": "hi"}]}])
    with_object = Cassette(messages=[{"kind": "request", "parts": [_Part("hi")]}])
    assert dumps(with_object) == dumps(plain)
    assert with_object.messages[0]["parts"][0] == _Part("hi")  # the cassette itself is left as it was


# --------------------------------------------------------------------------- integers past 64 bits


BIG = [2**64, 2**70, -(2**63) - 1, -(2**200), int("9" * 4300)]
NATIVE = [2**64 - 1, -(2**63), 0]


def test_integers_past_64_bits_round_trip_and_intern() -> None:
    """JSON has no integer bound (a tool argument, a tool's return): msgpack's 64 bits must not be one either."""
    b = CassetteBuilder(Header(scenario_id="unit/big"))
    messages = [{"kind": "request", "parts": [{"part_kind": "tool-return", "content": n}]} for n in BIG + NATIVE]
    first = b.messages(messages)
    assert b.messages(messages) == first  # equal big integers intern to the same entry
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=first))
    b.cassette.outcome.output = {"id": 2**70}
    back = loads(dumps(b.cassette))
    assert [m["parts"][0]["content"] for m in back.expand(back.exchanges[0].messages)] == BIG + NATIVE
    assert back.outcome.output == {"id": 2**70} and back == b.cassette
    wire = dumps(b.cassette)
    assert msgpack.packb(2**64 - 1) in wire and msgpack.ExtType(0, b"18446744073709551616") == msgpack.unpackb(
        msgpack.packb(msgpack.ExtType(0, str(2**64).encode())))  # the boundary: 2**64 - 1 native, 2**64 the extension


def test_an_integer_past_the_digit_bound_is_a_clear_encoding_error() -> None:
    b = CassetteBuilder(Header(scenario_id="unit/huge"))
    b.cassette.outcome.output = 10**4300
    with pytest.raises(CassetteError, match="unit/huge: cannot encode: an integer of 4301 digits is over the 4300"):
        dumps(b.cassette)


@pytest.mark.parametrize(("value", "count"), [(10**8599, "8600"), (-(10**8600), "about 8601"), (10**20000, "about 20001")],
    ids=["8600", "minus-8601", "20001"],
)
def test_an_integer_far_past_the_digit_bound_is_named_by_its_size(value: int, count: str) -> None:
    """Regression: past 8,600 digits the error was Python's own ('Exceeds the limit (4300 digits) for integer
    string conversion; use sys.set_int_max_str_digits()'), which counting the digits raised."""
    b = CassetteBuilder(Header(scenario_id="unit/huge"))
    b.cassette.outcome.output = value
    with pytest.raises(CassetteError, match=f"cannot encode: an integer of {count} digits is over the 4300 a cassette holds"):
        dumps(b.cassette)


@pytest.mark.parametrize(
    "payload",
    [b"", b"5", b"-5", str(2**64 - 1).encode(), str(-(2**63)).encode(), b"007" + b"0" * 20, b"-0", b"+" + b"1" * 25,
     b"1e30", b" " + b"1" * 25, "١".encode() * 25, b"1" * 4301, b"-" + b"1" * 4301],
)
def test_a_big_integer_extension_is_read_strictly(tmp_path: Path, payload: bytes) -> None:
    """One encoding per value: digits only, no leading zero, only where msgpack cannot hold the value itself."""
    data = MAGIC + msgpack.packb({"format": "harness-replay", "version": 1, "outcome": {"status": "ok",
                                  "output": msgpack.ExtType(0, payload)}}, use_bin_type=True)
    path = tmp_path / "bad.cassette"
    path.write_bytes(data)
    with pytest.raises(CassetteError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "big integer" in message and "\n" not in message

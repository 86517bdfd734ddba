"""Hostile cassette bytes, shared by the fuzz tests and ``bench/reliability.py``.

Every generator is deterministic given its ``random.Random`` so a failing case can be
reproduced from its label. :func:`verdict` is the property every case must satisfy:
``loads`` returns a cassette or raises ``CassetteError``, nothing else, in bounded time.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import random
import re
import struct
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from replay.cassette import MAGIC, Cassette, Limits, loads
from replay.errors import CassetteError

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "cassettes" / "seed000" / "long.cassette"
SMALL_REAL = ROOT / "cassettes" / "seed000" / "below_trigger.cassette"
CASE_SECONDS = 5.0
"""Upper bound for one case; a hostile file must cost bounded time."""

WRONG_VALUES: list[Any] = [
    None, True, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, float("nan"), "", "text", b"\x00bytes",
    [], [1, 2, 3], ["a"], {}, {"x": 1}, {"": None}, [[[]]], {"messages": [0, 99]},
]  # fmt: skip
"""One value of every msgpack type (and edge values of each), to put where another type belongs."""


class Escaped(AssertionError):
    """A case where something other than CassetteError left the loader."""


def verdict(data: bytes, label: str = "", limits: Limits | None = None) -> str:
    """``"loaded"`` or ``"refused"``; raises :class:`Escaped` for anything else or a slow case."""
    start = time.perf_counter()
    try:
        result = loads(data, label or "<fuzz>", limits) if limits is not None else loads(data, label or "<fuzz>")
        outcome = "loaded"
        assert isinstance(result, Cassette)
    except CassetteError:
        outcome = "refused"
    except BaseException as exc:  # noqa: BLE001 - that is the point
        raise Escaped(f"{label}: {type(exc).__name__}: {exc!r}"[:500]) from exc
    elapsed = time.perf_counter() - start
    if elapsed > CASE_SECONDS:
        raise Escaped(f"{label}: took {elapsed:.1f}s")
    return outcome


def wire(data: bytes) -> dict[str, Any]:
    """The unpacked msgpack map of a real cassette (still in on-disk form: runs, not indices)."""
    return msgpack.unpackb(data[len(MAGIC) :], raw=False, strict_map_key=False)


def pack(obj: Any) -> bytes:
    return MAGIC + msgpack.packb(obj, use_bin_type=True)


# --------------------------------------------------------------------------- categories


def truncations(data: bytes) -> Iterator[tuple[str, bytes]]:
    for i in range(len(data)):
        yield f"truncate@{i}", data[:i]


def bit_flips(data: bytes, rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """Single and multiple bit flips anywhere after the magic (a flipped magic is trivially refused)."""
    for n in range(count):
        buf = bytearray(data)
        flips = [(rng.randrange(len(MAGIC), len(buf)), rng.randrange(8)) for _ in range(1 + n % 4)]
        for pos, bit in flips:
            buf[pos] ^= 1 << bit
        yield "flip@" + ",".join(f"{p}.{b}" for p, b in flips), bytes(buf)


def random_bytes(rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """Noise, half of it behind the right magic so it reaches the msgpack decoder."""
    for n in range(count):
        body = rng.randbytes(rng.randrange(0, 512))
        yield f"random#{n}", (MAGIC + body) if n % 2 else body


def field_paths(obj: Any, path: tuple[Any, ...] = (), depth: int = 6) -> Iterator[tuple[Any, ...]]:
    """Every field of the wire map; of each list only the first and last element (shape repeats)."""
    if depth == 0:
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*path, key)
            yield from field_paths(value, (*path, key), depth - 1)
    elif isinstance(obj, list) and obj:
        for i in sorted({0, len(obj) - 1}):
            yield (*path, i)
            yield from field_paths(obj[i], (*path, i), depth - 1)


def replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def wrong_types(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Each field of a real cassette replaced by a value of every other type, repacked."""
    base = wire(data)
    for path in field_paths(base):
        for value in WRONG_VALUES:
            label = "wrongtype@" + ".".join(map(str, path)) + f"={value!r}"[:40]
            yield label, pack(replaced(base, path, value))
    for key in list(base):  # and each top-level field missing
        yield f"missing@{key}", pack({k: v for k, v in base.items() if k != key})


_HUGE = 2**31
_HEADERS: dict[str, bytes] = {
    "str32": b"\xdb" + struct.pack(">I", _HUGE),
    "bin32": b"\xc6" + struct.pack(">I", _HUGE),
    "array32": b"\xdd" + struct.pack(">I", _HUGE),
    "map32": b"\xdf" + struct.pack(">I", _HUGE),
    "ext32": b"\xc9" + struct.pack(">I", _HUGE) + b"\x05",
    "str32-max": b"\xdb\xff\xff\xff\xff",
    "array32-max": b"\xdd\xff\xff\xff\xff",
    "map32-max": b"\xdf\xff\xff\xff\xff",
    "array16-max": b"\xdc\xff\xff",
    "array32-under-limit": b"\xdd" + struct.pack(">I", 999_999),
    "map32-under-limit": b"\xdf" + struct.pack(">I", 999_999),
    "str32-under-limit": b"\xdb" + struct.pack(">I", 60 * 1024 * 1024),
}


def huge_lengths() -> Iterator[tuple[str, bytes]]:
    """Headers declaring 2**31-item strings, arrays and maps, bare and as a field of a valid map."""
    prefix = msgpack.packb({"format": "harness-replay", "version": 1})
    for name, header in _HEADERS.items():
        yield f"huge-{name}@top", MAGIC + header
        yield f"huge-{name}@top+data", MAGIC + header + b"\x00" * 64
        for field in ("messages", "exchanges", "blobs", "header"):
            # a 3-entry map: the two valid entries, then `field` holding the huge item
            body = b"\x83" + prefix[1:] + msgpack.packb(field) + header
            yield f"huge-{name}@{field}", MAGIC + body
            yield f"huge-{name}@{field}+data", MAGIC + body + b"\xc0" * 64


def deep_nesting() -> Iterator[tuple[str, bytes]]:
    """Arrays and maps nested far past the limits, at the top and inside fields of a valid cassette."""
    for depth in (50, 190, 199, 200, 201, 205, 300, 1000, 1023, 1024, 1025, 5000, 100_000):
        arrays = b"\x91" * depth + b"\xc0"
        maps = b"\x81\xa1k" * depth + b"\xc0"
        yield f"deep-array{depth}@top", MAGIC + arrays
        yield f"deep-map{depth}@top", MAGIC + maps
        for where, template in _SLOTS.items():
            packed = msgpack.packb(template, use_bin_type=True)
            marker = msgpack.packb(_SLOT)
            yield f"deep-array{depth}@{where}", MAGIC + packed.replace(marker, arrays)
            yield f"deep-map{depth}@{where}", MAGIC + packed.replace(marker, maps)


_SLOT = "\x00slot\x00"
_SLOTS: dict[str, dict[str, Any]] = {
    "message": {"format": "harness-replay", "version": 1, "messages": [{"parts": _SLOT}]},
    "blob": {"format": "harness-replay", "version": 1, "blobs": [_SLOT]},
    "output": {"format": "harness-replay", "version": 1, "outcome": {"status": "ok", "output": _SLOT}},
    "observation": {"format": "harness-replay", "version": 1, "observations": [{"name": "n", "value": _SLOT}]},
    "expectations": {"format": "harness-replay", "version": 1, "expectations": {"e": _SLOT}},
    "prompt": {"format": "harness-replay", "version": 1, "runs": [{"role": "main", "prompt": _SLOT}]},
    "events": {
        "format": "harness-replay",
        "version": 1,
        "exchanges": [{"seq": 0, "role": "main", "index": 0, "kind": "request", "events": [_SLOT]}],
    },
}


_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}


def ext_bytes(code: int, payload: bytes) -> bytes:
    """Hand-encoded, because ``msgpack.ExtType`` refuses the reserved negative codes."""
    tag = struct.pack(">b", code)
    if len(payload) in _FIXEXT:
        return bytes([_FIXEXT[len(payload)]]) + tag + payload
    if len(payload) < 256:
        return b"\xc7" + bytes([len(payload)]) + tag + payload
    return b"\xc8" + struct.pack(">H", len(payload)) + tag + payload


def ext_types(codes: range = range(-128, 128)) -> Iterator[tuple[str, bytes]]:
    """msgpack extension values (including -1, the timestamp type msgpack decodes itself) in every slot."""
    marker = msgpack.packb(_SLOT)
    for code in codes:
        payloads = [b"", b"x", b"\x00" * 4, b"\x00" * 8, b"\x00" * 12, b"\xff" * 2000]
        for n, payload in enumerate(payloads):
            ext = ext_bytes(code, payload)
            yield f"ext{code}#{n}@top", MAGIC + ext
            for where, template in _SLOTS.items():
                packed = msgpack.packb(template, use_bin_type=True)
                yield f"ext{code}#{n}@{where}", MAGIC + packed.replace(marker, ext)


def reference_bomb(entries: int) -> bytes:
    """A small file whose [start, count] runs expand to ``entries**2`` message references."""
    return pack(
        {
            "format": "harness-replay",
            "version": 1,
            "messages": [{"kind": "request", "parts": []}] * entries,
            "exchanges": [
                {"seq": i, "role": "main", "index": i, "kind": "request", "messages": [0, entries]}
                for i in range(entries)
            ],
        }
    )


def code_bait() -> dict[str, Any]:
    """A valid cassette whose strings look like code and whose ``type`` fields name modules."""
    evil = "__import__('os').system('touch PWNED')"
    return {
        "format": "harness-replay",
        "version": 1,
        "header": {"scenario_id": evil, "roles": {"main": "os", "evil": "replay_evil_bait_module"}},
        "messages": [
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": evil, "type": "os.system"}]},
            {"kind": "response", "parts": [{"part_kind": "text", "content": "{{7*7}} ${7*7} `id`"}]},
            {"kind": "request", "parts": [], "__reduce__": ["os.system", ["touch PWNED"]], "py/object": "subprocess.Popen", "!!python/object": "x"},
        ],
        "blobs": [{"type": "replay_evil_bait_module.Boom", "__class__": "os.system"}],
        "exchanges": [
            {
                "seq": 0, "role": "main", "index": 0, "kind": "request", "messages": [0, 1], "response": 1,
                "settings": 0, "error": {"type": "replay_evil_bait_module.Boom", "message": evil},
            }
        ],  # fmt: skip
        "outcome": {"status": "error", "error": {"type": "subprocess.Popen", "message": "touch PWNED"}},
        "observations": [{"name": "eval", "value": "eval(compile('1','x','exec'))"}],
    }


# --------------------------------------------------------------------------- every command (issue 13)

HOSTILE_TEXT: list[str] = [
    "\x1b]0;pwned\x07\x1b[2J\x1b[1;1H",  # OSC title + clear screen + cursor home
    "ok\nFORGED   seed000/long\n",  # a forged output line
    "\rFORGED \x1b[1A\x1b[K",  # carriage return, cursor up, erase line
    "\x9b31m\x9d0;c1\x9c",  # C1 CSI / OSC / ST: 8-bit escapes
    "\u2028FORGED\u2029\u202eevil\u202c\u200b\ufeff",  # line/paragraph separators, bidi override
    "nul\x00byte\x7f",
    "`|</testcase><script>alert(1)</script>&amp;]]>",  # Markdown, XML and HTML breakers
    "../../../../tmp/replay-escape",
    "/tmp/replay-absolute",
    "x" * 5000,
]
"""Strings a hostile cassette puts in any text field: each must come out escaped in every medium."""

ESCAPE_MARKERS = ("FORGED",)


def hostile_values() -> list[Any]:
    """Wrong types and hostile text: what goes into each field of a valid cassette."""
    return [*WRONG_VALUES, *HOSTILE_TEXT, {"k": "\x1b[2J"}, ["\x1b[2J"], 2**62, -5]


_BAD_UTF8 = b"\xa3\xff\xfe\xc0"  # a fixstr of 3 bytes that are not UTF-8
_BYTES_KEY = b"\x81\xc4\x01k\x01"  # {b"k": 1}: a binary map key
_MARK = "\x00mark\x00"


def _raw(base: dict[str, Any], path: tuple[Any, ...], raw: bytes) -> bytes:
    """``base`` with the value at ``path`` replaced by raw msgpack bytes (what msgpack cannot build)."""
    return MAGIC + msgpack.packb(replaced(base, path, _MARK), use_bin_type=True).replace(msgpack.packb(_MARK), raw, 1)


def shape_mutations(data: bytes, depth: int = 10, rng: random.Random | None = None) -> Iterator[tuple[str, bytes]]:
    """Valid msgpack, wrong shape: each field (down to message parts and stream events) of a real
    cassette replaced by every hostile value, by non-UTF-8 text and by a map with a binary key."""
    base = wire(data)
    for path in field_paths(base, depth=depth):
        where = ".".join(map(str, path))
        for n, value in enumerate(hostile_values()):
            yield f"shape@{where}#{n}", pack(replaced(base, path, value))
        yield f"shape@{where}#utf8", _raw(base, path, _BAD_UTF8)
        yield f"shape@{where}#binkey", _raw(base, path, _BYTES_KEY)


def hostile_text_cassettes(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every text field of a real cassette set to each hostile string: loads, must print escaped."""
    base = wire(data)
    for path in field_paths(base, depth=12):
        node: Any = base
        for key in path:
            node = node[key]
        if isinstance(node, str) and path[-1] not in ("format",):
            for n, text in enumerate(HOSTILE_TEXT):
                yield f"text@{'.'.join(map(str, path))}#{n}", pack(replaced(base, path, text))


@dataclass
class CommandResult:
    """What one in-process ``replay`` command did with a hostile cassette."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float
    traceback: str | None = None

    def escapes(self) -> list[str]:
        """Raw control characters and forged lines in the output (a terminal would act on them)."""
        text = (self.out + self.err).replace("\r\n", "\n")
        found = [f"{ch!r} at {m.start()}" for m in _UNSAFE.finditer(text) if (ch := m.group()) not in "\n\t"]
        found += [f"forged line {ln[:40]!r}" for ln in text.splitlines() if ln.lstrip().startswith(ESCAPE_MARKERS)]
        return found

    def crashed(self) -> bool:
        """A traceback, a built-in check that raised (reported as "check failed: ..."), or an
        exception a command caught per scenario and reported as an internal error."""
        text = self.out + self.err
        return self.traceback is not None or "check failed:" in text or "internal error (a harness-replay bug" in text


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


_COMMAND: Any = None


def run_command(*args: str | Path, cwd: Path | None = None) -> CommandResult:
    """Run ``replay ARGS`` in this process, exactly as the console script does, capturing everything."""
    from replay.cli import main

    global _COMMAND
    if _COMMAND is None:
        import typer.main

        from replay.cli import app

        _COMMAND = typer.main.get_command(app)
    argv = ["replay", *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    tb = None
    code = 0
    start = time.perf_counter()
    try:
        sys.argv = argv
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv[1:], _COMMAND)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:  # noqa: BLE001 - a traceback is what we are counting
        tb = traceback.format_exc()
        code = -1
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    return CommandResult(tuple(argv[1:]), code, out.getvalue(), err.getvalue(), time.perf_counter() - start, tb)

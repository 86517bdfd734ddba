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
from collections.abc import Callable, Iterator
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


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    """The field of the wire map at ``path``."""
    for key in path:
        obj = obj[key]
    return obj


def replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``obj`` with the field at ``path`` set to ``value``; ``obj`` itself untouched.

    Only the containers on the path are copied (the rest is shared, and nothing here
    mutates it): a deep copy per mutation was two thirds of the wrong-type fuzz's time.
    """
    out = copy.copy(obj)
    out[path[0]] = replaced(obj[path[0]], path[1:], value) if len(path) > 1 else value
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
    "::stop-commands::replay",  # a GitHub workflow command, were it to start a line
    "##[add-mask]replay",
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


def shape_mutations(
    data: bytes, depth: int = 10, keep: Callable[[], bool] = lambda: True
) -> Iterator[tuple[str, bytes]]:
    """Valid msgpack, wrong shape: each field (down to message parts and stream events) of a real
    cassette replaced by every hostile value, by non-UTF-8 text and by a map with a binary key
    (``keep`` samples: a case is only built when it says so)."""
    base = wire(data)
    for path in field_paths(base, depth=depth):
        where = ".".join(map(str, path))
        for n, value in enumerate(hostile_values()):
            if keep():
                yield f"shape@{where}#{n}", pack(replaced(base, path, value))
        if keep():
            yield f"shape@{where}#utf8", _raw(base, path, _BAD_UTF8)
        if keep():
            yield f"shape@{where}#binkey", _raw(base, path, _BYTES_KEY)


def hostile_text_cassettes(data: bytes, keep: Callable[[], bool] = lambda: True) -> Iterator[tuple[str, bytes]]:
    """Every text field of a real cassette set to each hostile string: loads, must print escaped."""
    base = wire(data)
    for path in field_paths(base, depth=12):
        node = _at(base, path)
        if isinstance(node, str) and path[-1] not in ("format",):
            for n, text in enumerate(HOSTILE_TEXT):
                if keep():
                    yield f"text@{'.'.join(map(str, path))}#{n}", pack(replaced(base, path, text))


def secret_dense(data: bytes, rng: random.Random, count: int = 20_000) -> Iterator[tuple[str, bytes]]:
    """A message text holding ``count`` distinct context secrets, or as many placeholders (a replay's result
    holds its recording's), or five times as many key prefixes: every command that scrubs must stay linear in
    them (each used to be quadratic)."""
    base = wire(data)
    path = next(p for p in field_paths(base, depth=12) if p[-1] == "content" and "messages" in p
                and isinstance(_at(base, p), str))
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    values = " ".join(f"password={''.join(rng.choices(letters, k=16))}" for _ in range(count))
    yield f"secret-dense@{'.'.join(map(str, path))}#values", pack(replaced(base, path, values))
    held = " ".join(f"password=<secret:password:{n}>" for n in range(1, count + 1))
    yield f"secret-dense@{'.'.join(map(str, path))}#placeholders", pack(replaced(base, path, held))
    # Key prefixes with no digit after them: the openai shape's digit lookahead once scanned the
    # rest of the run from each one (quadratic).
    yield f"secret-dense@{'.'.join(map(str, path))}#prefixes", pack(replaced(base, path, "sk-" * (count * 5)))


@dataclass
class CommandResult:
    """What one in-process ``replay`` command did with a hostile cassette."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float
    traceback: str | None = None
    cpu: float = 0.0
    """CPU seconds of this process while the command ran: what a hostile file costs, whatever the machine's load."""

    def escapes(self) -> list[str]:
        """Raw control characters and forged lines in the output (a terminal would act on them)."""
        text = (self.out + self.err).replace("\r\n", "\n")
        found = [f"{ch!r} at {m.start()}" for m in _UNSAFE.finditer(text) if (ch := m.group()) not in "\n\t"]
        found += [f"forged line {ln[:40]!r}" for ln in text.splitlines() if ln.lstrip().startswith(ESCAPE_MARKERS)]
        found += [  # GitHub Actions reads these as workflow commands (`::stop-commands::…`); the tool's own is `::error file=`
            f"workflow command {ln[:40]!r}" for ln in text.splitlines()
            if ln.lstrip().startswith(("::", "##[")) and not ln.startswith(("::error file=", "::error title="))
        ]
        return found

    def crashed(self) -> bool:
        """A traceback, a built-in check that raised (reported as "check failed: ..."), or an
        exception a command caught per scenario and reported as an internal error."""
        text = self.out + self.err
        return self.traceback is not None or "check failed:" in text or "internal error (a harness-replay bug" in text


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


_COMMAND: Any = None


def run_command(*args: str | Path, cwd: Path | None = None, reraise: tuple[type[BaseException], ...] = ()) -> CommandResult:
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
    start, cpu = time.perf_counter(), time.process_time()
    try:
        sys.argv = argv
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv[1:], _COMMAND)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except reraise:
        raise
    except BaseException:  # noqa: BLE001 - a traceback is what we are counting
        tb = traceback.format_exc()
        code = -1
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return CommandResult(tuple(argv[1:]), code, out.getvalue(), err.getvalue(), elapsed, tb, cpu)


# --------------------------------------------------------------------------- the command fuzz (bench/reliability.py)

BASES: list[str] = [
    "coverage/tool_call",
    "coverage/stream",  # stream events
    "coverage/count_tokens",
    "coverage/trajectory_judge",  # several roles, background capability
    "seed000/below_trigger",  # compaction
    "seed003/reused_id_two_returns",  # observed histories
]
"""Small bundled recordings whose mutations go through every command (``run`` replays their scenario)."""


def base_bytes(scenario_id: str) -> bytes:
    return (ROOT / "cassettes" / f"{scenario_id}.cassette").read_bytes()


def with_wire(data: bytes) -> bytes:
    """A recording with an HTTP exchange (``replay.wire``) added, so its fields are fuzzed too."""
    w = wire(data)
    w.setdefault("blobs", []).append({"model": "gpt-4o", "stream": False})
    w["exchanges"][0]["wire"] = [
        {
            "method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
            "request_headers": {"content-type": "application/json"}, "body": len(w["blobs"]) - 1,
            "body_lists": {"messages": [len(w["blobs"]) - 1]}, "body_text": None, "status": 200,
            "response_headers": {"content-type": "application/json"}, "response": '{"choices": []}', "stream": False,
        }
    ]  # fmt: skip
    return pack(w)


def random_json(rng: random.Random, depth: int = 3) -> Any:
    """A random JSON-shaped value, hostile strings included: valid msgpack of the wrong shape."""
    pick = rng.randrange(10 if depth > 0 else 6)
    if pick == 0:
        return rng.choice(HOSTILE_TEXT)
    if pick == 1:
        return rng.choice([None, True, False, 0, -1, 2**40, 1.5])
    if pick == 2:
        return "".join(rng.choice("ab\x1b\n\r\x00é\u2028/.`|<") for _ in range(rng.randrange(12)))
    if pick in (3, 4, 5):
        return rng.choice(WRONG_VALUES)
    if pick in (6, 7):
        return [random_json(rng, depth - 1) for _ in range(rng.randrange(4))]
    keys = ["kind", "parts", "part_kind", "content", "tool_name", "role", "x", "\x1b[2J", ""]
    return {rng.choice(keys): random_json(rng, depth - 1) for _ in range(rng.randrange(4))}


def random_placements(data: bytes, rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` cassettes, each with 1-3 random fields replaced by random JSON-shaped values."""
    base = wire(data)
    paths = list(field_paths(base, depth=12))
    for n in range(count):
        case = copy.deepcopy(base)
        where = []
        for _ in range(rng.randrange(1, 4)):
            path = rng.choice(paths)
            try:
                node = case
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = random_json(rng)
                where.append(".".join(map(str, path)))
            except (KeyError, IndexError, TypeError):
                continue  # an earlier replacement removed the path
        yield f"random#{n}@{'+'.join(where)}", pack(case)


def command_cases(rng: random.Random, total: int, systematic: float = 0.35) -> Iterator[tuple[str, str, bytes]]:
    """(label, scenario id of the base, bytes): a ``systematic`` sample of the shape mutations
    and hostile text of every base (one with a wire record added), then random placements
    until ``total``."""
    produced = 0
    sources = [(sid, base_bytes(sid)) for sid in BASES] + [(BASES[0], with_wire(base_bytes(BASES[0])))]

    def keep() -> bool:
        return rng.random() < systematic

    for sid, data in sources:
        for label, case in [*shape_mutations(data, keep=keep), *hostile_text_cassettes(data, keep=keep)]:
            yield f"{sid}:{label}", sid, case
            produced += 1
    for label, case in secret_dense(sources[0][1], rng):
        yield f"{sources[0][0]}:{label}", sources[0][0], case
        produced += 1
    per_base = max(0, total - produced) // len(sources) + 1
    for sid, data in sources:
        for label, case in random_placements(data, rng, per_base):
            yield f"{sid}:{label}", sid, case


def special_files(directory: Path) -> list[tuple[str, Path]]:
    """Files that are not cassettes at all, under a cassette's name: each must be one error line, fast."""
    out = []
    if Path("/dev/zero").exists():
        (directory / "zero.cassette").symlink_to("/dev/zero")
        out.append(("symlink to /dev/zero", directory / "zero.cassette"))
    if hasattr(os, "mkfifo"):
        os.mkfifo(directory / "fifo.cassette")
        out.append(("FIFO", directory / "fifo.cassette"))
    (directory / "dir.cassette").mkdir()
    out.append(("directory", directory / "dir.cassette"))
    (directory / "loop.cassette").symlink_to(directory / "loop.cassette")
    out.append(("symlink loop", directory / "loop.cassette"))
    (directory / "empty.cassette").write_bytes(b"")
    out.append(("empty", directory / "empty.cassette"))
    return out


def shard_docs() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two shards of a small matrix result, as ``replay matrix --shard K/2 --format json`` writes them."""
    from replay import matrix as mx

    scenarios, versions = ["coverage/tool_call", "seed000/long"], ["0.54.0", "0.62.0"]
    cells = {
        ("coverage/tool_call", "0.54.0"): {"status": "same"},
        ("seed000/long", "0.54.0"): {"status": "changed", "changed_requests": ["main[0]"], "roles": {"main": [3, 3]},
                                     "estimate_deltas": "889→897", "lost": ["U1"], "outcome": ["ok", "ok"]},
        ("coverage/tool_call", "0.62.0"): {"status": "error", "error": "boom"},
        ("seed000/long", "0.62.0"): {"status": "same"},
    }  # fmt: skip
    docs = []
    for k in (1, 2):
        mine = mx.shard_cells(scenarios, versions, (k, 2))
        out: dict[str, dict[str, Any]] = {}
        for v, s in mine:
            out.setdefault(s, {})[v] = {**cells[(s, v)], "violations": [], "new_violations": []}
        rows = [
            {"spec": v, "label": v, "status": "reused" if any(c[0] == v for c in mine) else "skipped", "harness": v}
            for v in versions
        ]
        docs.append(mx._finish({"matrix": mx.FORMAT_VERSION, "shard": f"{k}/2", "grid": {"scenarios": scenarios,
                                "versions": versions}, "versions": rows, "scenarios": out}))  # fmt: skip
    return docs[0], docs[1]


def merge_cases(rng: random.Random, count: int) -> Iterator[tuple[str, str]]:
    """Hostile shard files for ``replay merge``: every field of a real shard re-typed, random
    placements, and files that are not JSON."""
    import json

    one, _ = shard_docs()
    n = 0
    for path in field_paths(one, depth=8):
        for value in hostile_values():
            if n >= count:
                return
            yield f"merge@{'.'.join(map(str, path))}", json.dumps(replaced(one, path, value), default=repr)
            n += 1
    for text in ("", "[]", "null", "{", "\x1b[2J", '{"scenarios": 5}', json.dumps(random_json(rng, 4))):
        yield f"merge-raw#{n}", text
        n += 1
    while n < count:
        case = copy.deepcopy(one)
        path = rng.choice(list(field_paths(case, depth=8)))
        yield f"merge-random#{n}", json.dumps(replaced(case, path, random_json(rng)), default=repr)
        n += 1

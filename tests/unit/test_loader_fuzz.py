"""Hostile cassettes: whatever the bytes, loading ends in a Cassette or one CassetteError.

Cassettes are shared and loaded in CI, so the loader is an input boundary. Each category
of broken input gets a property test (hypothesis) and, where the space is small enough,
an exhaustive loop; ``bench/reliability.py`` runs the same generators at larger counts.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hostile as h
import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from replay.cassette import MAGIC, Limits, load, loads
from replay.errors import CassetteError

SMALL = h.SMALL_REAL.read_bytes()
BIG = h.REAL.read_bytes()
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_real_cassettes_load() -> None:
    assert h.verdict(SMALL) == h.verdict(BIG) == "loaded"


# --------------------------------------------------------------------------- random bytes


@FUZZ
@given(st.binary(max_size=4096), st.booleans())
@example(b"", True)
@example(b"\xc1", False)
def test_random_bytes(body: bytes, with_magic: bool) -> None:
    data = MAGIC + body if with_magic else body
    assert h.verdict(data, "random") in ("loaded", "refused")


# --------------------------------------------------------------------------- truncation


def test_truncation_at_every_offset_is_refused() -> None:
    for label, data in h.truncations(SMALL):
        assert h.verdict(data, label) == "refused", label


@FUZZ
@given(st.integers(0, len(BIG) - 1))
def test_truncation_of_a_large_cassette_is_refused(offset: int) -> None:
    assert h.verdict(BIG[:offset], f"truncate@{offset}") == "refused"


# --------------------------------------------------------------------------- bit flips


@FUZZ
@given(st.lists(st.tuples(st.integers(len(MAGIC), len(BIG) - 1), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips(flips: list[tuple[int, int]]) -> None:
    buf = bytearray(BIG)
    for pos, bit in flips:
        buf[pos] ^= 1 << bit
    h.verdict(bytes(buf), f"flip@{flips}")


# --------------------------------------------------------------------------- wrong types


def test_every_field_with_every_wrong_type() -> None:
    seen = {"loaded": 0, "refused": 0}
    for label, data in h.wrong_types(SMALL):
        seen[h.verdict(data, label)] += 1
    assert seen["refused"] > 500  # typed fields are checked, not just Any-valued ones accepted


_PATHS = list(h.field_paths(h.wire(SMALL)))
_any_value = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=20),
        st.binary(max_size=20),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)  # fmt: skip


@settings(FUZZ, max_examples=100)
@given(st.sampled_from(_PATHS), _any_value)
def test_any_value_in_any_field(path: tuple[object, ...], value: object) -> None:
    h.verdict(h.pack(h.replaced(h.wire(SMALL), path, value)), f"field@{path}={value!r}"[:200])


# --------------------------------------------------------------------------- huge lengths


def test_handcrafted_huge_lengths_are_refused_without_allocating() -> None:
    tracemalloc.start()
    try:
        for label, data in h.huge_lengths():
            tracemalloc.reset_peak()
            assert h.verdict(data, label) == "refused", label
            assert tracemalloc.get_traced_memory()[1] < 32 * 1024 * 1024, label
    finally:
        tracemalloc.stop()


@FUZZ
@given(st.sampled_from([b"\xdb", b"\xc6", b"\xdd", b"\xdf"]), st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_declared_length_never_trusted(tag: bytes, length: int, tail: bytes) -> None:
    prefix = b"\x83" + msgpack.packb({"format": "harness-replay", "version": 1})[1:] + msgpack.packb("messages")
    h.verdict(MAGIC + prefix + tag + struct.pack(">I", length) + tail, f"declared {tag!r} {length}")


# --------------------------------------------------------------------------- nesting


def test_deep_nesting_is_refused_past_the_limit() -> None:
    for label, data in h.deep_nesting():
        outcome = h.verdict(data, label)
        depth = int(label.split("@")[0].lstrip("deep-arraymap"))
        if depth > 205:
            assert outcome == "refused", label


@FUZZ
@given(st.integers(1, 3000), st.sampled_from(sorted(h._SLOTS)))
def test_nesting_anywhere(depth: int, where: str) -> None:
    packed = msgpack.packb(h._SLOTS[where]).replace(msgpack.packb(h._SLOT), b"\x91" * depth + b"\xc0")
    outcome = h.verdict(MAGIC + packed, f"deep{depth}@{where}")
    if depth > 210:
        assert outcome == "refused"


def test_depth_limit_applies_to_every_value_not_only_messages() -> None:
    """Regression: outputs and observations were not depth-checked (only messages and blobs)."""
    deep: object = "x"
    for _ in range(50):
        deep = [deep]
    for where in ("output", "observation", "expectations", "prompt"):
        data = msgpack.packb(h._SLOTS[where], use_bin_type=True).replace(
            msgpack.packb(h._SLOT), msgpack.packb(deep)
        )
        with pytest.raises(CassetteError, match="nesting deeper"):
            loads(MAGIC + data, limits=Limits(max_depth=20))
        assert loads(MAGIC + data) is not None  # within the default limit


# --------------------------------------------------------------------------- ext types


def test_every_ext_type_is_refused() -> None:
    for label, data in h.ext_types():
        assert h.verdict(data, label) == "refused", label


def test_timestamp_ext_is_refused() -> None:
    """Regression: msgpack decodes ext -1 (timestamp) itself, bypassing ext_hook, into a Timestamp object."""
    for value in (msgpack.Timestamp(5, 0), [msgpack.Timestamp(1, 2)], {"t": msgpack.Timestamp(0, 0)}):
        data = h.pack({"format": "harness-replay", "version": 1, "outcome": {"status": "ok", "output": value}})
        with pytest.raises(CassetteError, match="timestamp"):
            loads(data)


# --------------------------------------------------------------------------- amplification


def test_reference_runs_cannot_expand_quadratically() -> None:
    """Regression: 20k exchanges each referencing [0, 20000] (a 1 MB file) expanded to 4e8 ints (18 GB)."""
    tracemalloc.start()
    try:
        assert h.verdict(h.reference_bomb(1000), "bomb", Limits(max_references=50_000)) == "refused"
        assert tracemalloc.get_traced_memory()[1] < 32 * 1024 * 1024
    finally:
        tracemalloc.stop()
    with pytest.raises(CassetteError, match="max_references"):
        loads(h.reference_bomb(3000))  # 9e6 references: over the default limit


def test_dangling_run_reference_is_refused() -> None:
    data = h.wire(SMALL)
    data["exchanges"][0]["run"] = len(data.get("runs") or []) + 3
    with pytest.raises(CassetteError, match="run reference"):
        loads(h.pack(data))


# --------------------------------------------------------------------------- no code runs


BAIT_MODULE = "replay_evil_bait_module"


def test_loading_executes_no_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "IMPORTED"
    (tmp_path / f"{BAIT_MODULE}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Boom(Exception):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    data = h.pack(h.code_bait())
    loads(data)  # warm up lazy imports of the loader itself
    before = set(sys.modules)
    c = loads(data)
    assert set(sys.modules) == before
    assert c.header.scenario_id == "__import__('os').system('touch PWNED')"
    assert c.messages[0]["parts"][0]["type"] == "os.system"
    assert c.messages[2]["__reduce__"] == ["os.system", ["touch PWNED"]]
    assert c.header.roles == {"main": "os", "evil": BAIT_MODULE}
    assert not (tmp_path / "PWNED").exists() and not marker.exists()


def test_rebuilding_recorded_errors_imports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.cassette import ErrorInfo
    from replay.replayer import ReplayedModelError, _rebuild_error

    marker = tmp_path / "IMPORTED"
    (tmp_path / f"{BAIT_MODULE}.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Boom(Exception): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in (f"{BAIT_MODULE}.Boom", "os.system", "subprocess.Popen", "builtins.SystemExit", "builtins.eval"):
        error = _rebuild_error(ErrorInfo(type=name, message="touch PWNED"))
        assert type(error) is ReplayedModelError, name
    assert BAIT_MODULE not in sys.modules and not marker.exists()
    assert type(_rebuild_error(ErrorInfo(type="builtins.ValueError", message="m"))) is ValueError


# --------------------------------------------------------------------------- the CLI


def _bad_files(tmp: Path) -> dict[str, Path]:
    files = {
        "empty": b"",
        "random": os.urandom(300),
        "truncated": SMALL[: len(SMALL) // 2],
        "huge": MAGIC + b"\xdd\x80\x00\x00\x00",
        "ext": next(d for label, d in h.ext_types(range(5, 6)) if label.endswith("@output")),
        "deep": MAGIC + b"\x91" * 5000 + b"\xc0",
        "bomb": h.reference_bomb(3000),
    }
    out = {}
    for name, data in files.items():
        out[name] = tmp / f"{name}.cassette"
        out[name].write_bytes(data)
    out["missing"] = tmp / "missing.cassette"
    out["directory"] = tmp
    return out


def test_cli_show_bad_cassette_is_one_line_exit_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """In-process for every kind of bad file (fast), as a real subprocess for three of them."""
    files = _bad_files(tmp_path)
    for name, path in files.items():
        result = cli("show", str(path))
        assert result.code == 2, (name, result)
        assert result.out == "", name
        assert result.err == f"replay: error: {load_error(path)}\n", (name, result.err)
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "replay", "show", str(files[name])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for name in ("truncated", "ext", "bomb")
    }
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (name, err)
        assert out == "", name
        assert err == f"replay: error: {load_error(files[name])}\n", (name, err)
        assert err.startswith(f"replay: error: {files[name]}: ") and "Traceback" not in err, name


def load_error(path: Path) -> str:
    with pytest.raises(CassetteError) as info:
        load(path)
    return str(info.value)

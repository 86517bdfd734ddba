"""Only regular files are read, with a bound: a committed symlink to a device or a FIFO costs nothing.

Regressions of issue 13: ``x.cassette -> /dev/zero`` was read forever (3.6 GB RSS) and a
FIFO hung every command that listed the directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replay.cassette import Limits, load, read_bounded
from replay.errors import CassetteError


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero (a character device)")
def test_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "x.cassette"
    link.symlink_to("/dev/zero")
    with pytest.raises(CassetteError, match="character device, not a regular file"):
        load(link)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.cassette"
    os.mkfifo(fifo)
    with pytest.raises(CassetteError, match="FIFO, not a regular file"):
        load(fifo)  # would block forever in open() or read() without the checks


def test_symlink_to_a_regular_file_is_followed(tmp_path: Path) -> None:
    real = Path(__file__).resolve().parents[2] / "cassettes" / "coverage" / "tool_call.cassette"
    link = tmp_path / "x.cassette"
    link.symlink_to(real)
    assert load(link).header.scenario_id == "coverage/tool_call"


def test_read_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.cassette"
    big.write_bytes(b"\x00" * 5000)
    with pytest.raises(CassetteError, match="over the 4000-byte limit"):
        read_bounded(big, 4000)
    assert len(read_bounded(big, 5000)) == 5000
    with pytest.raises(CassetteError, match="over the 100-byte limit"):
        load(big, Limits(max_bytes=100))


def test_dangling_symlink_and_directory(tmp_path: Path) -> None:
    link = tmp_path / "gone.cassette"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(CassetteError, match="no such cassette"):
        load(link)
    with pytest.raises(CassetteError, match="is a directory"):
        load(tmp_path)

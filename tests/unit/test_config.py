"""[tool.replay] settings: read, validated with one-line errors, and applied by the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from replay.config import load_config
from replay.errors import ReplayUsageError


def test_settings_are_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.replay]\ncassettes = "recs"\nignore = ["usage"]\non-exhausted = "repeat"\nmax-bytes = 1000\n'
    )
    c = load_config(tmp_path)
    assert c.ignore == ("usage",) and c.on_exhausted == "repeat" and c.max_bytes == 1000
    assert c.cassettes.name == "recs"


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ('[tool.replay]\nignore = "usage"\n', "ignore must be a list"),
        ('[tool.replay]\non-exhausted = "maybe"\n', "fail, repeat or fake"),
        ("[tool.replay]\nmax-bytes = -1\n", "positive integer"),
        ("[tool.replay\n", "cannot read"),
    ],
)
def test_bad_settings_name_the_file(tmp_path: Path, toml: str, problem: str) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    with pytest.raises(ReplayUsageError, match=problem) as info:
        load_config(tmp_path)
    assert "pyproject.toml" in str(info.value)


def test_max_bytes_applies_to_the_cli(cli, project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.replay]\nmax-bytes = 100\n")
    r = cli("show", ROOT / "cassettes" / "seed000" / "long.cassette")
    assert r.code == 2 and "over the 100-byte limit" in r.err


def test_every_loader_limit_is_settable(tmp_path: Path) -> None:
    from replay.config import limits

    (tmp_path / "pyproject.toml").write_text("[tool.replay]\nmax-depth = 7\nmax-references = 99\nmax-items = 5\n")
    got = limits(load_config(tmp_path))
    assert (got.max_depth, got.max_references, got.max_items) == (7, 99, 5)

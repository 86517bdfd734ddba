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
        ("tool = 1\n", r"\[tool\] must be a table"),  # was an AttributeError traceback in every command
        ("[tool.replay]\nmax-depth = 520\n", "at most 400"),  # deeper nesting ended in RecursionError tracebacks
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


def test_default_folders_are_the_projects_from_any_subdirectory(cli, project: Path, write_scenario) -> None:
    """The nearest pyproject.toml is the project: from its ``tests/`` folder, ``replay run`` found no
    ``scenarios/`` (there was none there) and an explicit target wrote ``tests/.replay/``."""
    write_scenario()
    assert cli("record").code == 0
    sub = project / "tests"
    sub.mkdir()
    r = cli("run", cwd=sub)
    assert r.code == 0 and "SAME" in r.out, r.err
    assert not (sub / ".replay").exists() and (project / ".replay" / "results").is_dir()
    c = load_config(sub)
    assert [p.resolve() for p in (c.cassettes, c.scenarios, c.results)] == [
        project.resolve() / "cassettes", project.resolve() / "scenarios", project.resolve() / ".replay" / "results"]


def test_a_misspelt_setting_is_warned_about_not_silently_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.replay]\ncasettes = "recs"\nchecks = []\nprices = {}\n')
    c = load_config(tmp_path)
    err = capsys.readouterr().err
    assert c.cassettes.name == "cassettes"  # the typo sets nothing
    assert "[tool.replay] 'casettes' is not a setting (did you mean 'cassettes'?); ignored" in err
    assert "checks" not in err and "prices" not in err  # read by the stages that use them


def test_a_pyproject_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """Was a UnicodeDecodeError traceback, in `replay show` and the git textconv alike."""
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.replay]\ncassettes = "\xff"\n')
    with pytest.raises(ReplayUsageError, match="pyproject.toml: cannot read"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("api.example.com:443", "has a port; give the host alone (an allowed host is allowed on every port)"),
        ("https://api.example.com/v1", "a URL; give its host name alone"),
        ("", "empty"),
        ("a b", "not a host name, address or network"),
    ],
)
def test_an_allow_host_that_can_match_nothing_is_refused(cli, project: Path, write_scenario, entry: str, problem: str) -> None:
    """The guard's refusal line says `connect to api.example.com:443`; `--allow-host api.example.com:443` copied
    from it (or a URL) matched no connection, silently, so the replay went on being refused."""
    write_scenario()
    assert cli("record").code == 0
    r = cli("run", "--allow-host", entry)
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [f"replay: error: --allow-host {entry!r}: {problem}"]
    r = cli("matrix", "--harness", "0.62.0", "--allow-host", entry)
    assert r.code == 2 and r.err.strip().splitlines() == [f"replay: error: --allow-host {entry!r}: {problem}"]
    (project / "pyproject.toml").write_text(f"[tool.replay]\nallow-hosts = [{entry!r}]\n")
    r = cli("run")
    assert r.code == 2 and r.err.strip().splitlines() == [
        f"replay: error: {project / 'pyproject.toml'}: [tool.replay] allow-hosts: {entry!r}: {problem}"]


@pytest.mark.parametrize("entry", ["api.example.com", "*.example.com", "10.0.0.0/8", "::1", "192.168.1.7", "fe80::1%eth0"])
def test_hosts_addresses_and_networks_are_allowed(entry: str) -> None:
    from replay.config import allow_host_problem

    assert allow_host_problem(entry) is None


def test_a_scenarios_setting_naming_no_folder_says_where_it_is_set(cli, project: Path) -> None:
    """`[tool.replay] scenarios = "scenario"` (a typo) made `replay run` say `scenario: no such scenario file,
    directory or scenario id`, naming neither the setting nor the file that holds it."""
    (project / "pyproject.toml").write_text('[tool.replay]\nscenarios = "scenario"\n')
    for args in (("run",), ("record",), ("matrix", "--harness", "0.62.0")):
        r = cli(*args)
        assert r.code == 2 and r.out == "", args
        assert r.err.strip().splitlines() == [
            f"replay: error: scenario: no such scenarios folder, the default TARGET ([tool.replay] scenarios in "
            f"{project / 'pyproject.toml'}, default 'scenarios')"], args


@pytest.mark.parametrize(
    ("setting", "problem"),
    [('tokenizer = 3', 'tokenizer must be "module:function"'),
     ('tokenizer = "no_such_module:count"', "tokenizer: cannot import"),
     ('prices = 3', "prices must be a table")],
)
def test_a_bad_tokenizer_or_price_table_is_one_line_before_any_replay(
    cli, project: Path, write_scenario, setting: str, problem: str
) -> None:
    """`replay run` replayed every scenario and then reported the setting as each scenario's error
    (an ERROR row per scenario), where `diff` said it once; the README promises one line naming
    pyproject.toml, exit 2."""
    write_scenario()
    assert cli("record").code == 0
    (project / "pyproject.toml").write_text(f"[tool.replay]\n{setting}\n")
    r = cli("run")
    assert r.code == 2 and r.out == "", r.out
    (line,) = r.err.strip().splitlines()
    assert "pyproject.toml: [tool.replay] " in line and problem in line, line

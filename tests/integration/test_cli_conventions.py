"""Conventions every subcommand shares: --version, completion, readable value names, flags that parse as flags."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from replay.cli import build_command as command

COMMANDS = sorted(command().commands)


def test_version_names_the_tool_and_what_it_records_against(cli) -> None:
    r = cli("--version")
    assert r.code == 0
    assert r.out.startswith(f"harness-replay {version('harness-replay')} (pydantic-ai-harness {version('pydantic-ai-harness')}, ")


def _complete(**env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "replay"], capture_output=True, text=True, check=False, env={**os.environ, **env})


def test_shell_completion(cli) -> None:
    script = _complete(_REPLAY_COMPLETE="source_bash")
    assert script.returncode == 0 and "complete -o default -F _replay_completion replay" in script.stdout
    words = _complete(_REPLAY_COMPLETE="complete_bash", COMP_WORDS="replay ru", COMP_CWORD="1")
    assert words.stdout.split() == ["run"]
    options = _complete(_REPLAY_COMPLETE="complete_bash", COMP_WORDS="replay run --ign", COMP_CWORD="2")
    assert options.stdout.split() == ["--ignore"]
    assert "--install-completion" in cli("--help").out


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_readable_value_names(cli, name: str) -> None:
    r = cli(name, "--help")
    assert r.code == 0, r.err
    python_types = re.findall(r"<(?:list\[\w+\]|bool|str|int|path|int range)>", r.out)
    assert not python_types, f"replay {name} --help shows {python_types}"
    # typer 0.29 prints an option's value name from the hook that hides an argument's type: "--out None"
    nameless = re.findall(r"--[\w-]+ None\b", r.out)
    assert not nameless, f"replay {name} --help shows {nameless}"
    for param in command().commands[name].params:
        if param.param_type_name == "option" and not getattr(param, "is_flag", False):
            assert re.search(rf"{re.escape(max(param.opts, key=len))} (\[|<|[A-Z])", r.out), f"replay {name} --help: {param.opts}"


@pytest.mark.parametrize("name", COMMANDS)
def test_an_absent_flag_is_false(name: str) -> None:
    """typer 0.12.4-0.12.5 with click >= 8.2 parsed an absent --accept as the string 'False' (truthy)."""
    sub = command().commands[name]
    required = {"matrix": ["--harness", "0.54.0"], "report": ["x", "--harness", "0.54.0"], "diff": ["a", "b"], "show": ["c"], "merge": ["r"], "html": ["r", "--out", "x"]}
    ctx = sub.make_context(name, list(required.get(name, [])))
    flags = {p.name: ctx.params[p.name] for p in sub.params if getattr(p, "is_flag", False) and p.name in ctx.params}
    assert all(v is False for v in flags.values()), flags


def test_common_options_mean_the_same_everywhere() -> None:
    """--cassettes, --format and --ignore where they make sense, under the same names."""
    options = {name: {o for p in sub.params for o in getattr(p, "opts", [])} for name, sub in command().commands.items()}
    for name in ("record", "run", "check", "ls", "matrix"):
        assert "--cassettes" in options[name], name
    for name in ("record", "run", "diff", "check", "show", "ls", "matrix", "merge"):
        assert "--format" in options[name] and "-f" in options[name], name
    for name in ("run", "diff", "check", "matrix"):
        assert "--ignore" in options[name], name



def test_one_command_builds_only_its_own_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    """A run of `replay show` (the git textconv) must not make the click parameters of the other ten
    commands: that was a sixth of its own start-up. The group still knows every command."""
    from replay.cli import main

    cmd = command()
    with pytest.raises(SystemExit) as done:
        main(["show", "--help"], command=cmd)
    assert done.value.code == 0 and "CASSETTE" in capsys.readouterr().out
    assert set(cmd.commands._built) == {"show"}
    assert sorted(cmd.commands) == COMMANDS and len(COMMANDS) == 11


def test_a_refused_option_value_names_the_option(cli) -> None:
    """`--jobs 0` said only "Input should be greater than or equal to 1"."""
    for args, option in ((["matrix", "--harness", "0.62.0", "--jobs", "0"], "'--jobs'"),
                         (["record", "--check-determinism", "1"], "'--check-determinism'")):
        r = cli(*args)
        assert r.code == 2 and option in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err


def test_value_names_are_the_readmes(cli) -> None:
    """The README writes `--timeout SECONDS` everywhere (and says value names read as words); `--help` of
    run, matrix and report said `--timeout TIMEOUT`. Every `--option NAME` the README writes is what --help shows."""
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pairs = set(re.findall(r"(--[a-z-]+) ((?:[A-Z][A-Z/_]*[A-Z]|[A-Z]))\b(?![./\w])", readme))
    assert ("--timeout", "SECONDS") in pairs and ("--python", "VERSION") in pairs
    helps = {name: re.sub(r"\s+", " ", cli(name, "--help").out) for name in COMMANDS}
    for option, value in sorted(pairs):
        having = [name for name, text in helps.items() if re.search(rf"{re.escape(option)} [A-Z<\[]", text)]
        assert having, f"README: {option} {value}, an option no command has"
        assert any(re.search(rf"{re.escape(option)} {re.escape(value)}(?![\w/])", helps[name]) for name in having), (
            option, value, having)
    for name in ("run", "matrix", "report"):
        assert "--timeout SECONDS" in helps[name], name


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # click's own wording of a misspelt option and an extra argument moved between releases (8.1 at the floor)
        (["run", "--acept"], re.compile(r"replay: error: No such option(: --acept \(Possible options: --accept, --help\)|"
                                        r" '--acept'\. \(Did you mean one of: '--accept', '--help'\?\)); see 'replay run --help'")),
        (["runn"], "replay: error: No such command 'runn'. Did you mean 'run'?; see 'replay --help'"),
        (["init", "extra"], re.compile(r"replay: error: Got unexpected extra argument(\(s\))? \(extra\); see 'replay init --help'")),
        (["run", "--format"], "replay: error: Option '--format' requires an argument."),
        (["run", "--accept=3"], "replay: error: Option '--accept' does not take a value."),
        # typer 0.29 let pydantic's "Value error, " through; older typer (click) never said it
        (["run", "--format", "xml"],
         "replay: error: Invalid value for '--format' / '-f': 'xml' is not one of 'text', 'json', 'markdown', 'junit'."),
    ],
)
def test_every_usage_error_is_one_line(cli, args: list[str], line: str | re.Pattern[str]) -> None:
    """A misspelt option or command, or an extra argument, was click's three lines (usage, hint, `Error: …`), and a
    missing value one line without the `replay: error:` every other bad input has."""
    r = cli(*args)
    assert r.code == 2 and r.out == ""
    (said,) = r.err.splitlines()
    assert said == line if isinstance(line, str) else line.fullmatch(said), said


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["record", "--cassettes", ""], "replay: error: --cassettes '': an empty path (an unset variable?)"),
        (["run", "--out", ""], "replay: error: --out '': an empty path (an unset variable?)"),
        (["run", "--out="], "replay: error: --out '': an empty path (an unset variable?)"),
        (["matrix", "--harness", "0.62.0", "--env-dir", ""], "replay: error: --env-dir '': an empty path (an unset variable?)"),
        (["ls", ""], "replay: error: '': an empty argument where a file, folder or scenario id belongs (an unset variable?)"),
        (["run", ""], "replay: error: '': an empty argument where a file, folder or scenario id belongs (an unset variable?)"),
    ],
)
def test_an_empty_path_is_bad_input_not_the_working_directory(cli, project, write_scenario, args: list[str], line: str) -> None:
    """`record --cassettes "$DIR"` with DIR unset wrote the cassettes into the working directory (`""` is `.`);
    `run --out ""` wrote results among the project's files; `ls ""` listed every cassette below."""
    write_scenario()
    before = sorted(p.name for p in project.iterdir())
    r = cli(*args)
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines() == [line]
    assert sorted(p.name for p in project.iterdir()) == before


def test_run_help_names_the_defaults_the_readme_gives(cli) -> None:
    """`replay run --help` said `--out DIR  Where result cassettes go.` and `--on-exhausted` with no default,
    where the README gives `.replay/results/` and fail (the scenario's own, then [tool.replay], win over it)."""
    text = re.sub(r"(\w)- (\w)", r"\1-\2", re.sub(r"\s+", " ", cli("run", "--help").out))  # rich wraps at hyphens
    assert "Where result cassettes go (default: .replay/results/" in text, text
    assert "recorded (default: the scenario's on_exhausted, else [tool.replay] on-exhausted, else fail)" in text, text

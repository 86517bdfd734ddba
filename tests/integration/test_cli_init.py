"""``replay init`` in a real git repository: ``git diff`` of a re-recorded cassette is readable text."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from replay._git import ATTRIBUTE_LINE

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Works whether or not `replay` is on PATH (the venv may not be activated).
TEXTCONV = f"{shlex.quote(sys.executable)} -m replay show --normalized --textconv"

SCENARIO = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario

PROMPT = {prompt!r}


def answer(messages, info):
    return ModelResponse(parts=[TextPart("Madrid" if "Spain" in PROMPT else "Paris")])


@scenario("geo/capital")
async def capital(run: Run) -> str:
    agent = Agent(FunctionModel(answer), instructions="Answer with one word.")
    return (await agent.run(PROMPT)).output
'''


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(project: Path) -> Path:
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "test@example.com")
    git(project, "config", "user.name", "test")
    git(project, "config", "commit.gpgsign", "false")
    return project


def _record(cli: Callable[..., object], repo: Path, prompt: str) -> Path:
    (repo / "scenarios" / "geo.py").write_text(SCENARIO.format(prompt=prompt))
    res = cli("record", "--force", "geo/capital")
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    return repo / "cassettes" / "geo" / "capital.cassette"


def test_git_diff_of_a_cassette_is_readable(repo: Path, cli: Callable[..., object]) -> None:
    res = cli("init", "--git-config", "--textconv", TEXTCONV)
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    assert git(repo, "config", "diff.replay.textconv").strip() == TEXTCONV
    assert (repo / ".gitattributes").read_text() == ATTRIBUTE_LINE + "\n"

    cassette = _record(cli, repo, "What is the capital of France?")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "record")
    # Re-recording the same thing: `--force` keeps the file (only stamps would move) ...
    _record(cli, repo, "What is the capital of France?")
    assert git(repo, "diff", "--no-textconv", "--stat", "--", str(cassette)).strip() == ""
    # ... and a fresh recording's new timestamps and ids are not in the normalised text.
    cassette.unlink()
    _record(cli, repo, "What is the capital of France?")
    assert git(repo, "diff", "--", str(cassette)) == ""
    assert git(repo, "diff", "--no-textconv", "--stat", "--", str(cassette)).strip(), "the bytes did change"

    _record(cli, repo, "What is the capital of Spain?")
    diff = git(repo, "diff", "--", str(cassette))
    assert "Binary files" not in diff
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any("What is the capital of France?" in line for line in removed), diff
    assert any("What is the capital of Spain?" in line for line in added), diff
    assert any('"Madrid"' in line for line in added), diff  # the response and the outcome
    # Without the driver git has nothing readable to show.
    assert "Binary files" in git(repo, "diff", "--no-textconv", "--", str(cassette))


def test_a_corrupted_cassette_in_a_diff_is_shown_as_its_error_not_a_failed_diff(repo: Path, cli: Callable[..., object]) -> None:
    """git aborts a whole `git diff` / `git log -p` ("unable to read files to diff") when a textconv exits non-zero:
    one truncated cassette in a pull request cut off every other file's diff."""
    cli("init", "--git-config", "--textconv", TEXTCONV)
    cassette = _record(cli, repo, "What is the capital of France?")
    (repo / "notes.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "record")
    cassette.write_bytes(cassette.read_bytes()[:40])
    (repo / "notes.txt").write_text("two\n")
    diff = git(repo, "diff")  # check=True: git itself must succeed
    assert "+# harness-replay: cannot show this cassette: " in diff and "truncated" in diff, diff
    assert "+two" in diff  # the other files' diffs are all there


def test_a_broken_pyproject_is_shown_in_the_diff_not_a_failed_diff(repo: Path, cli: Callable[..., object]) -> None:
    """A pyproject.toml git left conflict markers in (a rebase) made `replay show --textconv` exit 2 on its
    unreadable [tool.replay]: git aborted the whole diff, the one command that shows the conflict."""
    cli("init", "--git-config", "--textconv", TEXTCONV)
    cassette = _record(cli, repo, "What is the capital of France?")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "record")
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "<<<<<<< HEAD\nmax-bytes = 5\n=======\n")
    cassette.write_bytes(cassette.read_bytes()[:40])
    res = cli("show", "--normalized", "--textconv", cassette)
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    assert res.out.startswith("# harness-replay: cannot show this cassette: ") and "pyproject.toml" in res.out  # type: ignore[attr-defined]
    diff = git(repo, "diff")  # check=True: git itself must succeed
    assert "+<<<<<<< HEAD" in diff, diff  # the other files' diffs are all there


def test_init_prints_the_git_config_command(repo: Path, cli: Callable[..., object]) -> None:
    res = cli("init")
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    assert "added to .gitattributes: *.cassette diff=replay" in res.out  # type: ignore[attr-defined]
    assert "git config diff.replay.textconv " in res.out  # type: ignore[attr-defined]
    assert "show --normalized" in res.out  # type: ignore[attr-defined]
    # Printing is all it does: nothing set in git config.
    done = subprocess.run(["git", "config", "diff.replay.textconv"], cwd=repo, capture_output=True)
    assert done.returncode == 1


def test_init_help_names_the_default_it_writes(repo: Path, cli: Callable[..., object]) -> None:
    """`replay init --help` said the default textconv was `replay show --normalized`; init writes
    `replay show --normalized --textconv` (the form that never fails a `git diff`)."""
    from replay._git import default_textconv

    res = cli("init", "--help")
    text = " ".join(res.out.split())  # type: ignore[attr-defined]
    assert f"(default: {default_textconv()})" in text, text
    done = cli("init")
    assert default_textconv() in done.out  # type: ignore[attr-defined]


def test_init_is_idempotent_and_keeps_other_lines(repo: Path, cli: Callable[..., object]) -> None:
    (repo / ".gitattributes").write_text("*.png binary\n*.cassette binary")  # no trailing newline
    assert cli("init", "--textconv", TEXTCONV).code == 0  # type: ignore[attr-defined]
    res = cli("init", "--textconv", TEXTCONV)
    assert "already in .gitattributes" in res.out  # type: ignore[attr-defined]
    assert (repo / ".gitattributes").read_text() == f"*.png binary\n*.cassette binary\n{ATTRIBUTE_LINE}\n"
    # The appended line wins over `binary` for the diff attribute.
    check = git(repo, "check-attr", "diff", "--", "cassettes/x.cassette")
    assert check.strip().endswith("diff: replay")


def test_git_config_outside_a_repository_is_a_usage_error(
    project: Path, cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(project.parent))
    res = cli("init", "--git-config", "--textconv", TEXTCONV)
    assert res.code == 2  # type: ignore[attr-defined]
    assert "not in a git repository (git init first); nothing written" in res.err  # type: ignore[attr-defined]
    # it wrote .gitattributes and .gitignore first, then failed
    assert not (project / ".gitattributes").exists() and not (project / ".gitignore").exists()


def test_init_writes_a_portable_textconv_and_ignores_dot_replay(repo: Path, cli: Callable[..., object]) -> None:
    (repo / ".gitignore").write_text("__pycache__/")  # no trailing newline
    res = cli("init", "--git-config")
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    command = git(repo, "config", "diff.replay.textconv").strip()
    assert command == "replay show --normalized --textconv"  # no interpreter path tied to one checkout
    assert "added to .gitignore: .replay/" in res.out  # type: ignore[attr-defined]
    assert (repo / ".gitignore").read_text() == "__pycache__/\n.replay/\n"
    assert (repo / ".gitattributes").read_text().endswith("\n")
    again = cli("init")
    assert "already in .gitignore: .replay/" in again.out  # type: ignore[attr-defined]
    assert (repo / ".gitignore").read_text() == "__pycache__/\n.replay/\n"
    (repo / ".replay" / "results").mkdir(parents=True)
    (repo / ".replay" / "results" / "x.cassette").write_bytes(b"x")
    assert ".replay" not in git(repo, "status", "--porcelain")


def test_git_diff_shows_the_changed_line_not_the_whole_message(repo: Path, cli: Callable[..., object]) -> None:
    cli("init", "--git-config", "--textconv", TEXTCONV)
    cassette = _record(cli, repo, "What is the capital of France?")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "record")
    _record(cli, repo, "What is the capital of France, please?")
    diff = git(repo, "diff", "-U0", "--", str(cassette))
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert 'content: "What is the capital of France?"' in removed, removed
    # besides the prompt only FunctionModel's usage figure moved (it counts the request's words)
    assert all(line == 'content: "What is the capital of France?"' or line.startswith("input_tokens: ") for line in removed), removed
    assert not any("part_kind" in line or "instructions" in line for line in diff.splitlines())


def test_init_refuses_links_devices_and_unreadable_files(project: Path, cli: Callable[..., object], tmp_path: Path) -> None:
    """A committed symlink made `init` append `.replay/` to a file outside the project, a FIFO made it hang,
    a non-UTF-8 file was a traceback."""
    import os

    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    (project / ".gitignore").symlink_to(outside)
    res = cli("init")
    assert res.code == 2 and ".gitignore: not a regular file" in res.err and len(res.err.strip().splitlines()) == 1  # type: ignore[attr-defined]
    assert outside.read_text() == "mine\n"
    assert not (project / ".gitattributes").exists()  # refused before anything was written
    (project / ".gitignore").unlink()
    os.mkfifo(project / ".gitattributes")
    res = cli("init")
    assert res.code == 2 and ".gitattributes: not a regular file" in res.err  # type: ignore[attr-defined]
    (project / ".gitattributes").unlink()
    (project / ".gitattributes").write_bytes(b"\xff\xfe*.bin binary\n")
    res = cli("init")
    assert res.code == 2 and ".gitattributes: cannot read" in res.err and "Traceback" not in res.err  # type: ignore[attr-defined]


def test_init_from_a_subfolder_writes_the_projects_own_files(repo: Path, cli: Callable[..., object]) -> None:
    """Every command takes the folder of the nearest pyproject.toml as the project; `init` wrote
    `tests/.gitattributes` (covering no cassette under `cassettes/`) and `tests/.gitignore` (leaving the
    project's `.replay/` to be committed) when run from `tests/`."""
    (repo / "tests").mkdir()
    res = cli("init", "--git-config", "--textconv", TEXTCONV, cwd=repo / "tests")
    assert res.code == 0, res.err  # type: ignore[attr-defined]
    assert not (repo / "tests" / ".gitattributes").exists() and not (repo / "tests" / ".gitignore").exists()
    assert (repo / ".gitattributes").read_text() == f"{ATTRIBUTE_LINE}\n"
    assert (repo / ".gitignore").read_text() == ".replay/\n"
    assert "added to ../.gitattributes: " in res.out and "added to ../.gitignore: " in res.out  # type: ignore[attr-defined]
    assert git(repo, "check-attr", "diff", "--", "cassettes/x.cassette").strip().endswith("diff: replay")
    (repo / ".replay" / "results").mkdir(parents=True)
    (repo / ".replay" / "results" / "x.cassette").write_bytes(b"x")
    assert ".replay" not in git(repo, "status", "--porcelain")


def test_init_names_a_directory_where_a_file_belongs(project: Path, cli: Callable[..., object]) -> None:
    (project / ".gitignore").mkdir()
    res = cli("init")
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1  # type: ignore[attr-defined]
    assert ".gitignore: not a regular file (a link, a directory or a device)" in res.err  # type: ignore[attr-defined]
    assert not (project / ".gitattributes").exists()


@pytest.mark.parametrize("textconv", ["", "  ", "replay show\nrm -rf x", "replay\tshow"])
def test_a_textconv_that_is_no_command_line_is_refused(repo: Path, cli: Callable[..., object], textconv: str) -> None:
    """`--textconv ""` fell back to the default without a word; one holding a newline was set in git config,
    where git's shell runs it as two commands."""
    res = cli("init", "--git-config", "--textconv", textconv)
    assert res.code == 2 and res.out == ""  # type: ignore[attr-defined]
    assert res.err.strip().splitlines() == [f"replay: error: --textconv {textconv!r}: give one command line"]  # type: ignore[attr-defined]
    assert not (repo / ".gitattributes").exists()
    assert subprocess.run(["git", "config", "diff.replay.textconv"], cwd=repo, capture_output=True).returncode == 1

"""``replay init``: make ``git diff`` show cassettes as readable text instead of "Binary files differ".

Cassettes are msgpack, so a reviewer of a re-recorded cassette sees nothing useful. Git
can run a textconv program on both sides of a diff: ``.gitattributes`` (committed, shared)
routes ``*.cassette`` to a diff driver named ``replay``, and the driver's command lives in
git config (per clone, never committed, because git will not run commands from a repo).
The command is ``replay show --normalized``: the normalised form drops timestamps and ids,
so a re-recording that changed nothing real shows no diff.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from .errors import ReplayUsageError

ATTRIBUTE_LINE = "*.cassette diff=replay"
CONFIG_KEY = "diff.replay.textconv"


def default_textconv() -> str:
    """``replay show --normalized --textconv``: portable, so the same line works in every clone and on every machine.

    An absolute interpreter path would tie the driver to one checkout's venv; git runs the
    command with the PATH of whoever runs ``git diff``, so ``replay`` must be on it then
    (an activated venv, ``uv run git diff``, or ``--textconv`` with a command of your own).
    """
    return "replay show --normalized --textconv"


IGNORE_LINE = ".replay/"
"""Replay results, matrix environments and caches: large (tens of MB) and rebuilt on demand."""


def _read(path: Path, line: str) -> str:
    """The project file ``init`` appends ``line`` to, refused unless it is a plain text file of the project:
    a committed symlink made ``init`` append to a file outside it, a FIFO made it hang."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ReplayUsageError(f"{path}: not a regular file (a link, a directory or a device); add {line!r} to it yourself")
    if not path.exists():
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayUsageError(f"{path}: cannot read: {exc}; add {line!r} to it yourself") from None


def check_files(directory: Path) -> None:
    """Before ``init`` writes anything: both files it appends to can be read (nothing half-done)."""
    _read(directory / ".gitattributes", ATTRIBUTE_LINE)
    _read(directory / ".gitignore", IGNORE_LINE)


def _append(path: Path, text: str, line: str) -> None:
    from .cassette import write_atomic

    if text and not text.endswith("\n"):
        text += "\n"
    write_atomic(path, (text + line + "\n").encode("utf-8"))


def ensure_gitignore(directory: Path) -> bool:
    """Add ``.replay/`` to ``directory/.gitignore`` unless an equivalent line is there; True when it changed."""
    path = directory / ".gitignore"
    text = _read(path, IGNORE_LINE)
    if any(line.strip() in (".replay", ".replay/", "/.replay", "/.replay/") for line in text.splitlines()):
        return False
    _append(path, text, IGNORE_LINE)
    return True


def _has_driver(line: str) -> bool:
    parts = line.split()
    return len(parts) >= 2 and parts[0] == "*.cassette" and "diff=replay" in parts[1:]


def ensure_gitattributes(directory: Path) -> bool:
    """Add ``*.cassette diff=replay`` to ``directory/.gitattributes``; True when the file changed.

    Appended (not inserted) because for the same pattern git lets the last line win, so a
    ``*.cassette binary`` above it is overridden without touching the user's lines.
    """
    path = directory / ".gitattributes"
    text = _read(path, ATTRIBUTE_LINE)
    if any(_has_driver(line) for line in text.splitlines()):
        return False
    _append(path, text, ATTRIBUTE_LINE)
    return True


def config_command(textconv: str) -> str:
    """The command a user runs once per clone (printed by ``replay init``)."""
    return f"git config {CONFIG_KEY} {shlex.quote(textconv)}"


def check_repository(directory: Path, textconv: str) -> None:
    """Before ``init --git-config`` writes anything: git is there and ``directory`` is in a repository
    (outside one it wrote .gitattributes and .gitignore, then failed)."""
    if shutil.which("git") is None:
        raise ReplayUsageError("git not found on PATH; run this yourself: " + config_command(textconv))
    done = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=directory, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ReplayUsageError(f"{directory}: not in a git repository (git init first); nothing written")


def set_git_config(directory: Path, textconv: str) -> None:
    """Run ``git config diff.replay.textconv ...`` in ``directory``'s repository."""
    if shutil.which("git") is None:
        raise ReplayUsageError("git not found on PATH; run this yourself: " + config_command(textconv))
    done = subprocess.run(
        ["git", "config", CONFIG_KEY, textconv], cwd=directory, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise ReplayUsageError(f"git config failed: {reason[-1] if reason else f'exit {done.returncode}'}")

"""Errors a user can act on. The CLI prints them as one line and exits 2."""

from __future__ import annotations


class ReplayError(Exception):
    """Base for errors harness-replay reports to the user without a traceback."""


class ReplayUsageError(ReplayError):
    """Bad input on the command line, in a scenario file or in configuration."""


class CassetteError(ReplayError):
    """A cassette that cannot be read or written: names the file and the problem."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

"""The pytest plugin's light glue: what counts as CI, mode names, and how a diff reads in a failure."""

from __future__ import annotations

import pytest

from replay._pytest import canonical_mode, default_mode, is_ci
from replay._pytest_report import string_diff


@pytest.mark.parametrize(
    ("value", "ci"),
    [("true", True), ("1", True), ("yes", True), ("woodpecker", True), ("false", False), ("False", False), ("0", False), ("", False), ("no", False), ("off", False)],
)
def test_ci_false_and_zero_are_not_ci(value: str, ci: bool) -> None:
    assert is_ci({"CI": value}) is ci
    assert default_mode({"CI": value}) == ("none" if ci else "once")


def test_unset_ci_is_not_ci() -> None:
    assert default_mode({}) == "once"


def test_new_episodes_is_pytest_recordings_name_for_new() -> None:
    assert canonical_mode("new_episodes") == "new"
    assert canonical_mode("all") == "all"


def test_multiline_strings_diff_by_line() -> None:
    old = "line 1\nline 2\nline 3\nline 4"
    new = "line 1\nline 2\nline three\nline 4"
    assert string_diff(old, new, verbose=False) == ["@@ -2,3 +2,3 @@", " line 2", "-line 3", "+line three", " line 4"]


def test_long_single_line_strings_show_the_difference_and_skip_the_rest() -> None:
    old, new = "x" * 500 + "old" + "y" * 500, "x" * 500 + "new" + "y" * 500
    lines = string_diff(old, new, verbose=False)
    assert lines[0] == "Skipping 480 identical leading characters"
    assert lines[1] == "- " + "x" * 20 + "old" + "y" * 20
    assert lines[2] == "+ " + "x" * 20 + "new" + "y" * 20

"""The pytest plugin's light glue: what counts as CI, mode names, and how a diff reads in a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay._pytest import (
    MAX_NAME_BYTES,
    Tally,
    canonical_mode,
    cassette_name,
    default_mode,
    is_ci,
    same_test,
    scenario_id,
)
from replay._pytest_report import string_diff
from replay._untrusted import id_problem


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


# --------------------------------------------------------------------------- cassette names and scenario ids

AWKWARD = [
    "test_p[Z\\xfcrich]",  # pytest's escape of a non-ASCII id
    "test_p[x/../y]",
    "test_p[a//b]",
    "test_p[a/-b]",
    "test_p[C:\\\\dir]",
    "-leading",
    "trailing.",
    "trailing ",
    ".",
    "..",
    "/",
    "con",
    "NUL.txt",
    "C:x",
    "tab\tnew\nline\x1besc\u202ebidi\ud800",
    "x" * 300,
    "é" * 300,
]


@pytest.mark.parametrize(
    "name", ["test_x", "test_x[1-2]", "test_x[plain words]", "test_x[a.b]", "shared-name", "by-keyword", "x" * MAX_NAME_BYTES]
)
def test_names_that_need_no_change_are_kept_as_before(name: str) -> None:
    assert cassette_name(name) == name
    assert cassette_name("test_x", ["TestCase"]) == "TestCase.test_x"
    assert cassette_name("test_x", ["TestCase"], "explicit") == "explicit"


@pytest.mark.parametrize("raw", AWKWARD)
def test_every_name_and_node_id_becomes_an_id_the_loader_accepts(raw: str) -> None:
    name = cassette_name(raw)
    assert id_problem(name) is None, name
    assert len(name.encode()) <= MAX_NAME_BYTES
    assert cassette_name(raw) == name  # stable: the next run finds it
    for nodeid in (f"tests/test_m.py::{raw}", f"tests/{raw}/test_m.py::test_x", f"{raw}::test_x", "d/" * 300 + f"t.py::{raw}"):
        assert id_problem(scenario_id(nodeid)) is None, nodeid


def test_distinct_ids_never_share_a_cassette() -> None:
    raws = {"test_p[a/b]", "test_p[a_b]", "test_p[a\\b]", "x" * 299 + "y", *AWKWARD}
    assert len({cassette_name(raw) for raw in raws}) == len(raws)
    assert cassette_name("test_p[a_b]") == "test_p[a_b]"
    assert cassette_name("test_p[a/b]").startswith("test_p[a_b]-")  # readable, then a hash of the original


def test_nested_classes_name_the_whole_chain() -> None:
    assert cassette_name("test_x", ["TestOuterA", "TestInner"]) == "TestOuterA.TestInner.test_x"
    assert cassette_name("test_x", ["TestOuterA", "TestInner"]) != cassette_name("test_x", ["TestOuterB", "TestInner"])


def test_a_valid_node_id_is_the_scenario_id_unchanged() -> None:
    assert scenario_id("tests/test_agent.py::TestA::test_x[a/b-1]") == "tests/test_agent.py::TestA::test_x[a/b-1]"
    assert scenario_id("tests/test_p.py::test_p[a//b]").startswith("tests/test_p.py::test_p[a__b]-")


def test_a_workers_accepted_lines_reach_the_controller() -> None:
    worker = Tally("none")
    worker.statuses["accepted"] += 1
    worker.accepted.append("harness-replay: accepted t.py::test_x -> cassettes/t/test_x.cassette")
    worker.expected.add(Path("/x/cassettes/t/test_x.cassette"))
    controller = Tally("none")
    controller.merge(worker.to_worker_output())
    assert controller.accepted == worker.accepted
    assert controller.statuses["accepted"] == 1


def test_the_note_on_a_real_model_call_says_what_the_mode_does() -> None:
    """`new_episodes` appending to an existing cassette said "called … to record … (--replay-mode=new records
    missing cassettes …)": the cassette existed, and the call was appended to it."""
    from replay._pytest import Tally

    lines: list[str] = []

    class Reporter:
        def ensure_newline(self) -> None:
            pass

        def write_line(self, line: str, **_: object) -> None:
            lines.append(line)

    class Config:
        class pluginmanager:  # noqa: N801 - pytest's attribute name
            @staticmethod
            def get_plugin(name: str) -> Reporter | None:
                return Reporter() if name == "terminalreporter" else None  # no capture manager here

    Tally(mode="new").announce_real_call(Config(), "t.py::test_a", ["openai:gpt-4o-mini"], "cassettes/t/test_a.cassette", True)
    assert lines == ["harness-replay: t.py::test_a called openai:gpt-4o-mini to append to cassettes/t/test_a.cassette "
                     "(--replay-mode=new records missing cassettes and appends the requests a cassette lacks with the "
                     "test's own models; --replay-mode=none, the default when CI is set, never calls one)"]


def test_a_deleted_modules_folder_is_found_through_a_workers_tally(tmp_path: Path) -> None:
    """Under pytest-xdist the controller collects nothing: the cassettes folders it looks in come from the workers."""
    (tmp_path / "test_kept.py").write_text("")
    for module in ("test_kept", "test_gone", "shared"):
        (tmp_path / "cassettes" / module).mkdir(parents=True)
        (tmp_path / "cassettes" / module / "test_x.cassette").write_bytes(b"")
    worker = Tally("none")
    worker.expect(tmp_path / "test_kept.py", "test_x")
    controller = Tally("none")
    controller.merge(worker.to_worker_output())
    # test_gone.py is no more; `shared` is named like no test module (an overridden replay_cassette_dir, say)
    assert controller.find_orphans() == [tmp_path.resolve() / "cassettes" / "test_gone" / "test_x.cassette"]


def test_one_test_seen_from_two_rootdirs_is_the_same_test() -> None:
    """A cassette recorded from a package and replayed from the monorepo's root holds another node id: not
    "another test's recording" (the hint for tests sharing one marker name)."""
    assert same_test("pkg/tests/test_x.py::test_a", "tests/test_x.py::test_a")
    assert same_test("tests/test_x.py::test_a", "pkg/tests/test_x.py::test_a")
    assert same_test("test_x.py::test_a", "test_x.py::test_a")
    assert not same_test("test_x.py::test_a", "test_x.py::test_b")
    assert not same_test("test_shared.py::test_first", "test_shared.py::test_second")
    assert not same_test("atests/test_x.py::test_a", "tests/test_x.py::test_a")


"""Scenario discovery and identity: per-scenario source hashes, static ids, import isolation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from replay.errors import ReplayUsageError
from replay.scenario import ImportFailure, declared, declared_ids, discover

TWO = '''
from replay import Run, scenario
import replay

HELPER = 1


@scenario("grp/first")
async def first(run: Run) -> None:
    run.observe("x", HELPER)


@replay.scenario
async def second(run: Run) -> None:
    run.observe("y", 2)
'''


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def _hashes(path: Path) -> dict[str, str]:
    return {s.id: s.source_hash for s in discover([str(path)])}


def test_source_hash_covers_the_function_not_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.py", TWO)
    before = _hashes(path)
    assert set(before) == {"grp/first", "two/second"}
    path.write_text(path.read_text().replace("HELPER = 1", "HELPER = 2  # edited") + "\n# trailing comment\n")
    assert _hashes(path) == before  # neither function changed
    path.write_text(path.read_text().replace('run.observe("y", 2)', 'run.observe("y", 3)'))
    after = _hashes(path)
    assert after["grp/first"] == before["grp/first"] and after["two/second"] != before["two/second"]


def test_source_hash_covers_decorator_arguments(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.py", TWO)
    before = _hashes(path)["grp/first"]
    path.write_text(path.read_text().replace('@scenario("grp/first")', '@scenario("grp/first2")'))
    assert _hashes(path)["grp/first2"] != before


def test_ids_are_read_without_importing(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.py", "import does_not_exist_anywhere\n" + TWO)
    assert declared_ids(path) == ["grp/first", "two/second"]
    computed = _write(tmp_path, "dyn.py", "from replay import scenario\nfor n in 'ab':\n    scenario(n)\n")
    assert declared_ids(computed) is None  # not a plain decorator: must be imported to know
    nonliteral = _write(tmp_path, "nl.py", "from replay import scenario\nID = 'x/y'\n@scenario(ID)\nasync def f(run): ...\n")
    assert declared_ids(nonliteral) is None
    assert declared_ids(_write(tmp_path, "bad.py", "def (:\n")) is None
    # keywords do not change the id: a README form, `@scenario("g/x", on_exhausted="fake")`, made the file
    # unreadable without importing it, and its failing import an error for every scenario of the matrix column
    keyed = _write(tmp_path, "kw.py", "import gone_in_this_version\nfrom replay import scenario\n\n"
                   "@scenario('g/x', on_exhausted='fake')\nasync def x(run): ...\n\n"
                   "@scenario(expect_error='ValueError')\nasync def y(run): ...\n")
    assert declared_ids(keyed) == ["g/x", "kw/y"]


def test_an_id_imports_only_the_file_that_declares_it(tmp_path: Path) -> None:
    home = tmp_path / "scenarios"
    _write(home, "good.py", "from replay import Run, scenario\n\n@scenario('iso/good')\nasync def good(run: Run) -> None: ...\n")
    _write(home, "broken.py", "import does_not_exist_anywhere\nfrom replay import scenario\n\n@scenario('iso/broken')\nasync def broken(run): ...\n")
    assert [s.id for s in discover(["iso/good"], home)] == ["iso/good"]  # broken.py never imported
    assert declared(["iso/"], home) == {"iso/broken": (home / "broken.py").resolve(), "iso/good": (home / "good.py").resolve()}


def test_a_file_that_fails_to_import_errors_only_its_own_scenarios(tmp_path: Path) -> None:
    home = tmp_path / "scenarios"
    _write(home, "good.py", "from replay import Run, scenario\n\n@scenario('iso2/good')\nasync def good(run: Run) -> None: ...\n")
    _write(
        home,
        "broken.py",
        "import does_not_exist_anywhere\nfrom replay import scenario\n\n@scenario('iso2/b1')\nasync def b1(run): ...\n"
        "\n@scenario('iso2/b2')\nasync def b2(run): ...\n",
    )
    with pytest.raises(ReplayUsageError, match="does_not_exist_anywhere"):
        discover(["iso2/"], home)  # without a failures list: the old all-or-nothing behaviour
    failures: list[ImportFailure] = []
    found = discover(["iso2/"], home, failures)
    assert [s.id for s in found] == ["iso2/good"]
    [failure] = failures
    assert failure.ids == ("iso2/b1", "iso2/b2")
    assert "failed to import: ModuleNotFoundError: No module named 'does_not_exist_anywhere'" in failure.reason
    failures.clear()
    assert discover(["iso2/b2"], home, failures) == [] and failures[0].ids == ("iso2/b2",)


def test_a_scenario_rewritten_within_a_second_to_the_same_size_runs_its_new_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytecode is checked by mtime in whole seconds and size: a scenario must run the bytes it was
    read as (generated variants are rewritten that fast), and none is written beside it."""
    import asyncio
    import os

    from replay.recorder import Session, execute_async

    monkeypatch.setattr("sys.dont_write_bytecode", False)  # as a user without PYTHONDONTWRITEBYTECODE runs it
    text = 'from replay import Run, scenario\n@scenario("gen/v")\nasync def v(run: Run) -> str:\n    return "{}"\n'
    path = _write(tmp_path / "scenarios", "gen.py", text.format("one"))
    stamp = path.stat().st_mtime_ns
    (first,) = discover([str(path)])
    assert asyncio.run(execute_async(first, Session())).outcome.output == "one"
    path.write_text(text.format("two"))
    os.utime(path, ns=(stamp, stamp))  # the same second, the same size
    (second,) = discover([str(path)])
    assert asyncio.run(execute_async(second, Session())).outcome.output == "two"
    assert not list(tmp_path.rglob("*.pyc"))


def test_two_scenarios_of_one_id_are_an_import_error_not_one_silently_dropped(tmp_path: Path) -> None:
    """A copied scenario whose id was not renamed replaced the first one: it was never recorded nor run."""
    home = tmp_path / "scenarios"
    body = "from replay import Run, scenario\n\n@scenario('dupid/x')\nasync def {0}(run: Run) -> None: ...\n"
    _write(home, "one.py", body.format("first") + "\n" + body.format("second").split("\n", 2)[2])
    failures: list[ImportFailure] = []
    assert discover(["dupid/"], home, failures) == []
    [failure] = failures
    assert "@scenario id 'dupid/x' is declared twice: by first and by second" in failure.reason
    _write(home, "one.py", body.format("first"))
    _write(home, "two.py", body.format("again"))
    failures.clear()
    # neither file's: the id is ambiguous, and one of them replayed under it read SAME with the other's error dropped
    assert discover([str(home)], home, failures) == []
    [failure] = failures
    assert failure.path == (home / "two.py").resolve() and failure.ids == ("dupid/x",)
    assert f"declared twice: by first in {(home / 'one.py').resolve()} and by again in {(home / 'two.py').resolve()}" in failure.reason
    with pytest.raises(ReplayUsageError, match="declared twice"):
        discover([str(home)], home)


@pytest.mark.parametrize("bad", [ValueError("boom"), 123, "", "  ", int])
def test_expect_error_that_names_no_exception_is_one_clear_error(bad: object) -> None:
    """`expect_error=ValueError("boom")` (an instance, not the class) failed with `AttributeError: 'ValueError'
    object has no attribute '__qualname__'`; `expect_error=""` matched no error, so the declared one never held."""
    from replay import scenario

    with pytest.raises(ReplayUsageError) as info:
        scenario("bad/expect", expect_error=bad)  # type: ignore[call-overload]
    assert str(info.value) == f"@scenario(expect_error={bad!r}): expected an exception class or its name"


@pytest.mark.parametrize("bad", ["", 5])
def test_an_id_that_is_empty_or_no_string_is_refused(bad: object) -> None:
    """`@scenario("")` was registered as `<file>/<function>` while the static scan (which plans `run ID` and
    `matrix`) read its id as `""`: by neither name was it found."""
    from replay import scenario

    with pytest.raises(ReplayUsageError) as info:
        scenario(bad)  # type: ignore[call-overload]
    assert str(info.value) == f"@scenario({bad!r}): the id is a non-empty 'group/name' string (or leave it out)"


def test_the_static_scan_reads_no_empty_id(tmp_path: Path) -> None:
    """The scan that plans `matrix` cells read `@scenario("")` as the id `""`; the import refuses it, so the scan
    leaves the file to the import (None: ids not readable statically)."""
    path = tmp_path / "s.py"
    path.write_text("from replay import scenario\n\n@scenario('')\nasync def f(run): ...\n")
    assert declared_ids(path) is None


def test_a_scenario_redefined_under_its_own_name_is_an_import_error_not_silently_dropped(tmp_path: Path) -> None:
    """A copied scenario whose function and id were both left as they were (bare `@scenario`): the second
    `def one` replaced the first without a word, which was never recorded nor replayed."""
    home = tmp_path / "scenarios"
    body = "@scenario\nasync def one(run: Run) -> int:\n    return {0}\n"
    _write(home, "dup.py", "from replay import Run, scenario\n\n" + body.format(1) + "\n\n" + body.format(2))
    failures: list[ImportFailure] = []
    assert discover([str(home)], home, failures) == []
    [failure] = failures
    assert "@scenario id 'dup/one' is declared twice: by one (line 3) and by one (line 8)" in failure.reason
    # a file imported again (edited back and forth) is no redefinition
    _write(home, "dup.py", "from replay import Run, scenario\n\n" + body.format(1))
    assert [s.id for s in discover([str(home)], home)] == ["dup/one"]
    _write(home, "dup.py", "from replay import Run, scenario\n\n" + body.format(3))
    assert [s.id for s in discover([str(home)], home)] == ["dup/one"]

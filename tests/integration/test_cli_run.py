"""`replay run`: replay on the installed harness, diff, exit codes and output formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def test_same_scenario_replays_clean(cli, write_scenario, project: Path) -> None:
    write_scenario()
    cli("record")
    r = cli("run")
    assert r.code == 0, r.out + r.err
    assert "1 same" in r.out
    assert (project / ".replay" / "results" / "simple" / "compact.cassette").exists()


def test_changed_parameter_exits_1_and_names_role_request_and_path(cli, write_scenario, project: Path) -> None:
    write_scenario(keep=2)
    cli("record")
    write_scenario(keep=3)
    r = cli("run", "--format", "json")
    assert r.code == 1
    doc = json.loads(r.out)
    cell = doc["scenarios"]["simple/compact"]
    assert doc["changed"] is True and cell["status"] == "changed"
    assert set(cell["roles"]) >= {"main", "summarizing_compaction"}
    paths = [c["path"] for req in cell["requests"] for c in req["changes"]]
    assert any(p.startswith(("main[", "summarizing_compaction[")) and ".messages[" in p for p in paths), paths
    text = cli("run").out
    assert "CHANGED" in text and "summarizing_compaction[" in text or "main[" in text
    assert "if a change is intended: `replay run --accept` makes the replay the new baseline" in cli("run").err
    assert "--accept" not in cli("run", "--format", "json").err  # machine formats: no advice on stderr
    # recorded and replayed on one harness and one pydantic-ai: the change is the scenario's, and the report says so
    (said,) = [w for w in cell["warnings"] if w.startswith("both sides ran harness ")]
    assert "not the harness" in said and "--check-determinism" in said


def test_a_change_across_versions_is_not_blamed_on_the_scenario(cli) -> None:
    fixtures = ROOT / "tests" / "fixtures"
    r = cli("diff", fixtures / "harness-0.56.0/trust/clear_tool_results.cassette",
            fixtures / "harness-0.62.0/trust/clear_tool_results.cassette", "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["changed"] and not any("both sides ran" in w for w in doc["warnings"])
    same = cli("diff", fixtures / "harness-0.62.0/trust/clear_tool_results.cassette",
               fixtures / "harness-0.62.0/trust/clear_tool_results.cassette", "--format", "json")
    assert same.code == 0 and json.loads(same.out)["warnings"] == []  # nothing changed: nothing to explain


def test_missing_cassette_is_an_error_cell(cli, write_scenario, project: Path) -> None:
    write_scenario()
    r = cli("run")
    assert r.code == 2 and "no cassette" in r.out and "replay record" in r.out  # README: a cassette error exits 2
    assert "(record it with: replay record simple/compact)" in r.out
    elsewhere = cli("run", "--cassettes", "other")  # the hint keeps the folder it was given
    assert "(record it with: replay record simple/compact --cassettes other)" in elsewhere.out


@pytest.mark.parametrize("policy", ["fail", "repeat", "fake"])
def test_on_exhausted_policies(cli, write_scenario, project: Path, policy: str) -> None:
    path = write_scenario()
    cli("record")
    path.write_text(path.read_text().replace("range(4)", "range(5)"))
    r = cli("run", "--on-exhausted", policy, "--format", "json")
    cell = json.loads(r.out)["scenarios"]["simple/compact"]
    assert r.code == 1
    assert any("cassette holds" in n for n in cell["notes"]), cell["notes"]
    if policy == "fail":
        assert cell["outcome"][1]["status"] == "error"
    else:
        assert cell["outcome"] is None or cell["outcome"][1]["status"] == "ok"


def test_junit_and_markdown(cli, write_scenario, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_scenario()
    cli("record")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = cli("run", "--format", "junit").out
    assert '<testcase classname="simple" name="compact" time="' in junit and "<failure" not in junit
    md = cli("run", "--format", "markdown").out
    assert "| `simple/compact` | ✅ same |" in md
    assert "simple/compact" in summary.read_text()
    cli("check")  # a second command in the same job: its heading must start a block of its own
    text = summary.read_text()
    headings = [i for i, line in enumerate(text.splitlines()) if line.startswith("### ")]
    assert len(headings) >= 3 and all(text.splitlines()[i - 1] == "" for i in headings if i), text


@pytest.mark.slow
def test_bundled_scenarios_replay_clean_in_fresh_processes_three_times() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-m", "replay", "run", "--format", "json", "--out", str(ROOT / ".replay" / "test-results")],
            cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
        )
        doc = json.loads(proc.stdout)
        assert proc.returncode == 0, {k: v for k, v in doc["scenarios"].items() if v["status"] != "same"}
        assert doc["summary"]["changed"] == 0 and doc["summary"]["error"] == 0
        assert len(doc["scenarios"]) >= 20


def test_edited_scenario_is_flagged_but_not_a_change(cli, write_scenario, project: Path) -> None:
    path = write_scenario()
    cli("record")
    path.write_text(path.read_text().replace('"""Two turns', '"""Four turns'))  # the scenario's own source
    r = cli("run")
    assert r.code == 0 and "1 same" in r.out
    assert "source changed since the recording" in r.out


def test_an_edited_scenario_that_replays_same_says_how_to_update_its_cassette(cli, write_scenario, project: Path) -> None:
    """A refactor of the scenario that sends the same requests: SAME, warned "a difference may come from the edit"
    (there was none) on every run, and `--accept` said `unchanged`, leaving the warning for good."""
    path = write_scenario()
    cli("record")
    path.write_text(path.read_text().replace('"""Two turns', '"""Four turns'))
    r = cli("run", "--accept")
    assert r.code == 0 and "1 same" in r.out
    said = "the scenario's source changed since the recording, what it sends did not: `replay record --force` updates the cassette"
    assert said in r.out and "a difference may come from the edit" not in r.out, r.out
    assert "unchanged    simple/compact: the scenario's source changed since the recording: `replay record --force` updates the cassette" in r.err
    assert cli("record", "--force").code == 0
    r = cli("run")
    assert r.code == 0 and "source changed" not in r.out, r.out

def test_an_edited_scenario_that_changed_is_blamed_on_the_edit_alone(cli, write_scenario, project: Path) -> None:
    """Both warnings came together: the edit, and "the change comes from the scenario ... `--check-determinism`
    tells the two apart", whose advice finds nothing when the scenario's own code was edited."""
    path = write_scenario()
    cli("record")
    path.write_text(path.read_text().replace('f"turn {turn}"', 'f"step {turn}"'))
    cell = json.loads(cli("run", "--format", "json").out)["scenarios"]["simple/compact"]
    assert cell["status"] == "changed"
    assert [w for w in cell["warnings"] if "source changed since the recording" in w]
    assert not [w for w in cell["warnings"] if w.startswith("both sides ran harness ")], cell["warnings"]


def test_editing_elsewhere_in_the_file_is_not_flagged(cli, write_scenario, project: Path) -> None:
    """The hash covers the scenario function and its decorator, not its neighbours in the file."""
    path = write_scenario()
    cli("record")
    sibling = '\n\n@scenario("simple/other")\nasync def other(run: Run) -> None:\n    run.observe("x", 1)\n'
    path.write_text(path.read_text() + sibling + "\n# a comment added after recording\n")
    r = cli("run", "simple/compact")
    assert r.code == 0 and "1 same" in r.out, r.out
    assert "source changed" not in r.out


def test_orphan_cassettes_are_named_on_stderr(cli, write_scenario, project: Path) -> None:
    write_scenario()
    cli("record")
    stale = project / "cassettes" / "old" / "gone.cassette"
    stale.parent.mkdir(parents=True)
    stale.write_bytes((project / "cassettes" / "simple" / "compact.cassette").read_bytes())
    r = cli("run")
    assert r.code == 0 and "belong to no scenario" in r.err and "gone.cassette" in r.err


def test_accept_makes_a_followed_replay_the_new_baseline(cli, write_scenario, project: Path) -> None:
    write_scenario(keep=2)
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    before = target.read_bytes()
    write_scenario(keep=3)  # same calls per role, different payloads, and a new compaction_grew_request
    r = cli("run", "--accept")
    assert r.code == 1 and "not accepted simple/compact: 1 new violation(s) (compaction_grew_request main[2])" in r.err
    assert target.read_bytes() == before
    r = cli("run", "--accept-violations")
    assert r.code == 0 and "accepted     simple/compact" in r.err and target.read_bytes() != before
    assert cli("run").code == 0  # the accepted cassette is the baseline now




def test_a_file_that_fails_to_import_errors_only_its_scenarios(cli, write_scenario, project: Path) -> None:
    """As on an older harness lacking a capability: the other files' scenarios still get verdicts."""
    write_scenario()
    assert cli("record").code == 0
    (project / "scenarios" / "newer.py").write_text(
        "from pydantic_ai_harness.not_in_this_version import Thing\n"
        "from replay import Run, scenario\n\n"
        "@scenario('newer/one')\nasync def one(run: Run) -> None: ...\n\n"
        "@scenario('newer/two')\nasync def two(run: Run) -> None: ...\n"
    )
    r = cli("run", "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2  # scenarios without a verdict: exit 2 (README), the others still judged
    assert doc["scenarios"]["simple/compact"]["status"] == "same"
    for sid in ("newer/one", "newer/two"):
        assert doc["scenarios"][sid]["status"] == "error"
        assert "failed to import: ModuleNotFoundError" in doc["scenarios"][sid]["error"]
        assert "not_in_this_version" in doc["scenarios"][sid]["error"]
    # where JUnit and annotations point: each scenario's @scenario line (they had no file or line)
    assert [(doc["scenarios"][s]["file"], doc["scenarios"][s]["line"]) for s in ("newer/one", "newer/two")] == [
        ("scenarios/newer.py", 4), ("scenarios/newer.py", 7)]
    # an id elsewhere never imports the broken file at all
    r = cli("run", "simple/compact")
    assert r.code == 0 and "1 same" in r.out and "newer" not in r.out + r.err


def test_a_run_whose_every_scenario_errored_still_speaks_as_a_run(cli, project: Path, write_scenario) -> None:
    """No scenario got a diff, but it is still a run: not check's "cassettes: 0 ok, 0 with violations"."""
    write_scenario()
    r = cli("run", "simple/compact")  # never recorded
    assert r.code == 2 and r.out.splitlines()[-1] == "1 scenarios: 0 same, 0 changed, 1 error", r.out
    assert r.out.startswith("ERROR    simple/compact")
    bad = project / "cassettes" / "bad.cassette"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"not a cassette")
    r = cli("check", bad)  # check keeps its own wording when every cassette errored
    assert r.code == 2 and r.out.splitlines()[-1] == "1 cassettes: 0 ok, 0 with violations, 1 error", r.out


def test_a_cassette_of_another_scenario_is_an_error_not_a_change(cli, project: Path, write_scenario) -> None:
    """A cassette copied to another scenario's place replayed as a harness change ("source changed")."""
    import shutil

    write_scenario()
    assert cli("record").code == 0
    other = project / "elsewhere"
    other.mkdir()
    (other / "simple").mkdir()
    shutil.copy(ROOT / "cassettes" / "coverage" / "tool_call.cassette", other / "simple" / "compact.cassette")
    r = cli("run", "simple/compact", "--cassettes", other)
    assert r.code == 2 and "holds scenario 'coverage/tool_call', not 'simple/compact'" in r.out, r.out


def test_a_scenario_that_cannot_start_on_this_version_is_an_error_not_a_change(cli, write_scenario, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a release without a capability argument (`TypeError: unexpected keyword argument`): the cell read
    `changed`, every recorded request removed and every violation of the recording `gone`."""
    path = write_scenario()
    source = path.read_text()
    marker = "async def "
    head, _, tail = source.partition(marker)
    fn_line, _, body = tail.partition("\n")
    path.write_text(head + marker + fn_line + "\n    import os\n    if os.environ.get('OLD_RELEASE'):\n"
                    "        raise TypeError(\"__init__() got an unexpected keyword argument 'background_start'\")\n" + body)
    assert cli("record", "--force").code == 0
    monkeypatch.setenv("OLD_RELEASE", "1")
    r = cli("run", "--format", "json", "--out", "results")
    cell = json.loads(r.out)["scenarios"]["simple/compact"]
    assert r.code == 2 and cell["status"] == "error"
    assert "stopped before its first model request on this version: TypeError: __init__() got an unexpected keyword" in cell["error"]
    # `replay diff` of that result (the README's `replay diff cassettes .replay/matrix/0.54.0`) says the same, either way round
    recorded, result = project / "cassettes" / "simple" / "compact.cassette", project / "results" / "simple" / "compact.cassette"
    for a, b in ((recorded, result), (result, recorded)):
        r = cli("diff", a, b, "--format", "json")
        doc = json.loads(r.out)
        assert r.code == 2 and doc["status"] == "error", r.out
        assert doc["error"].startswith(f"{result}: the scenario stopped before its first model request on harness "), doc["error"]



def test_a_scenario_an_edit_broke_before_its_first_request_does_not_blame_the_version(cli, write_scenario, project: Path) -> None:
    """An edit that raises before the first model call (a typo: NameError) read "the scenario stopped before its
    first model request on this version", on the very version it was recorded on."""
    path = write_scenario()
    assert cli("record").code == 0
    source = path.read_text()
    marker = "async def "
    head, _, tail = source.partition(marker)
    fn_line, _, body = tail.partition("\n")
    path.write_text(head + marker + fn_line + "\n    undefined_helper()\n" + body)
    r = cli("run", "--format", "json")
    cell = json.loads(r.out)["scenarios"]["simple/compact"]
    assert r.code == 2 and cell["status"] == "error"
    assert cell["error"].endswith("NameError: name 'undefined_helper' is not defined (the scenario was edited since "
                                  "the recording: the edit may be the cause)"), cell["error"]

OWN_ERRORS = '''
"""A model raising the scenario's own exception class, caught by the scenario; one declared as the outcome."""
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


class Overloaded(Exception):
    pass


class BadAnswer(Exception):
    pass


def broken(messages, info):
    raise Overloaded("try later")


@scenario("own/caught")
async def caught(run: Run) -> str:
    try:
        return (await Agent(FunctionModel(broken)).run("hi")).output
    except Overloaded:
        backup = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("backup")])), name="backup")
        return (await backup.run("hi")).output


@scenario("own/declared", expect_error="BadAnswer")
async def declared(run: Run) -> str:
    r = await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("nope")]))).run("hi")
    raise BadAnswer(r.output)
'''


def test_a_scenarios_own_exception_class_survives_an_edit_and_another_checkout(cli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The class was recorded under the scenario module's private name, which hashes the file's absolute path
    and bytes: a comment added anywhere, or a CI clone elsewhere, made the outcome `changed`, and a model's
    own exception came back as a ReplayedModelError the scenario's `except` no longer caught."""
    import shutil

    from replay.cassette import load, save

    path = project / "scenarios" / "own.py"
    path.write_text(OWN_ERRORS)
    assert cli("record").code == 0
    declared = load(project / "cassettes" / "own" / "declared.cassette")
    assert declared.outcome.error is not None and declared.outcome.error.type == "replay_scenarios.own.BadAnswer"
    path.write_text(OWN_ERRORS + "\n# an edit outside the scenarios\n")
    r = cli("run", "--format", "json")
    assert r.code == 0 and {s["status"] for s in json.loads(r.out)["scenarios"].values()} == {"same"}, r.out
    clone = tmp_path / "elsewhere"
    shutil.copytree(project, clone)
    monkeypatch.chdir(clone)
    r = cli("run", "--format", "json")
    assert r.code == 0 and {s["status"] for s in json.loads(r.out)["scenarios"].values()} == {"same"}, r.out
    # a cassette written before the stable name, holding a hash of another checkout, still replays same
    for sid in ("own/caught", "own/declared"):
        c = load(clone / "cassettes" / f"{sid}.cassette")
        for info in [c.outcome.error, *(ex.error for ex in c.exchanges)]:
            if info is not None:
                info.type = info.type.replace("replay_scenarios.own.", "replay_scenarios.own_0123456789abcdef.")
        save(c, clone / "cassettes" / f"{sid}.cassette")
    r = cli("run", "--format", "json")
    assert r.code == 0 and {s["status"] for s in json.loads(r.out)["scenarios"].values()} == {"same"}, r.out


def test_two_scenario_files_of_one_name_keep_their_own_exception_classes(cli, project: Path) -> None:
    """`scenarios/a/errs.py` and `scenarios/b/errs.py` both define `Overloaded`: recorded as one name, the replay
    of one raised the other file's class, which its `except` did not catch (`changed`, blamed on the scenario)."""
    for group in ("a", "b"):
        (project / "scenarios" / group).mkdir()
        (project / "scenarios" / group / "errs.py").write_text(OWN_ERRORS.replace('"own/', f'"{group}/'))
    assert cli("record").code == 0
    from replay.cassette import load

    caught = load(project / "cassettes" / "a" / "caught.cassette")
    assert {ex.error.type for ex in caught.exchanges if ex.error} == {"replay_scenarios.a.errs.Overloaded"}
    r = cli("run", "--format", "json")
    assert r.code == 0 and {s["status"] for s in json.loads(r.out)["scenarios"].values()} == {"same"}, r.out


def test_a_target_file_that_is_no_python_is_bad_input_never_run(cli, write_scenario, project: Path) -> None:
    """`replay run cassettes/x.cassette` (how vcrpy users name what to replay) reported the cassette's
    `SyntaxError: source code string cannot contain null bytes`, and `replay run notes.txt` executed the
    text file as Python."""
    write_scenario()
    assert cli("record").code == 0
    marker = project / "ran"
    notes = project / "notes.txt"
    notes.write_text(f"open({str(marker)!r}, 'w').close()\n")
    cassette = "cassettes/simple/compact.cassette"
    for command in ("run", "record", "matrix"):
        extra = ("--harness", "0.62.0") if command == "matrix" else ()
        r = cli(command, cassette, *extra)
        assert r.code == 2 and r.out == "", (command, r.out)
        assert r.err.strip().splitlines() == [
            f"replay: error: {cassette}: a cassette, not a scenario file: give the scenario's id, file or folder "
            "(`replay ls` names each cassette's scenario)"]
        r = cli(command, "notes.txt", *extra)
        assert r.code == 2 and r.out == "", (command, r.out)
        assert r.err.strip().splitlines() == [
            "replay: error: notes.txt: not a scenario file (a .py file), a directory or a scenario id"]
    assert not marker.exists()


def test_results_are_never_written_among_the_recordings(cli, write_scenario, project: Path) -> None:
    """`run --out cassettes` (or `[tool.replay] results = "cassettes"`) wrote each replay result over its
    recording, exit 0: a baseline replaced without `--accept` and its checks."""
    write_scenario()
    assert cli("record").code == 0
    cassette = project / "cassettes" / "simple" / "compact.cassette"
    before = cassette.read_bytes()
    cases = [
        (("run", "--out", "cassettes"), "--out cassettes: the cassettes folder; replay results would be written over the recordings, give another folder"),
        (("run", "--out", "cassettes/results"), "--out cassettes/results: inside the cassettes folder cassettes; replay results would be written among the recordings, give another folder"),
        (("matrix", "--harness", "0.62.0", "--out", "cassettes"), "--out cassettes: the cassettes folder; replay results would be written over the recordings, give another folder"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.code == 2 and r.out == "", (args, r.out)
        assert r.err.strip().splitlines() == [f"replay: error: {message}"], args
    (project / "pyproject.toml").write_text('[tool.replay]\nresults = "cassettes"\n')
    r = cli("run")
    assert r.code == 2 and r.err.strip().splitlines() == [
        f"replay: error: {project / 'pyproject.toml'}: [tool.replay] results cassettes: the cassettes folder; "
        "replay results would be written over the recordings, give another folder"]
    assert cassette.read_bytes() == before
    (project / "pyproject.toml").write_text("[tool.replay]\n")
    r = cli("run", "--cassettes", ".replay/results")  # the default results folder, set nowhere: said as that
    assert r.code == 2 and r.err.strip().splitlines() == [
        "replay: error: the results folder .replay/results: the cassettes folder; replay results would be written "
        "over the recordings, give another folder with --out"]
    assert cli("run", "--out", "elsewhere").code == 0  # beside the cassettes, as ever


def test_a_scenario_file_that_is_a_fifo_or_a_device_is_refused_not_read(cli, write_scenario, project: Path) -> None:
    """A FIFO named `x.py` in scenarios/ (or a committed link to one) hung `replay run` for good; a link to
    `/dev/zero` read until memory ran out. Either is that file's error; the other scenarios replay."""
    import os
    import signal

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("replay hung reading a scenario file")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        _fifo_and_device(cli, write_scenario, project, os)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _fifo_and_device(cli, write_scenario, project: Path, os) -> None:
    write_scenario()
    assert cli("record").code == 0
    os.mkfifo(project / "scenarios" / "fifo.py")
    (project / "scenarios" / "zero.py").symlink_to("/dev/zero")
    for command in ("run", "record"):
        r = cli(command)
        assert r.code == 2, (command, r.out, r.err)
        text = r.out + r.err
        assert f"{project / 'scenarios' / 'fifo.py'}: is a FIFO, not a regular file: refused" in text
        assert f"{project / 'scenarios' / 'zero.py'}: is a character device, not a regular file: refused" in text
    assert "SAME     simple/compact" in cli("run").out


def test_what_a_scenario_prints_of_a_cassette_reaches_the_terminal_escaped(cli, project: Path) -> None:
    """A scenario that prints its agent's answer prints, on replay, the cassette's text: a pull request that
    edits only a cassette put ``::stop-commands::`` (GitHub reads a line starting so as a workflow command)
    or a terminal escape into the CI log through the project's own, reviewed ``print``."""
    (project / "scenarios" / "echo.py").write_text(
        "import sys\n"
        "from replay import Run, scenario\n\n"
        "@scenario('echo/one')\nasync def one(run: Run) -> str:\n"
        "    print('::stop-commands::x' + chr(27) + '[2J')\n"
        "    print(':', end='')\n    print(':warning::split')\n"
        "    print('##[error]forged', file=sys.stderr)\n"
        "    print('plain text: a::b')\n"
        "    return 'ok'\n"
    )
    for command in ("record", "run"):
        r = cli(command)
        assert r.code == 0, r.err
        lines = r.err.splitlines()
        assert not any(line.lstrip().startswith(("::", "##[")) for line in lines), lines
        assert "\x1b" not in r.err and "plain text: a::b" in lines
        assert "stop-commands::x\\x1b[2J" in r.err and "warning::split" in r.err and "error]forged" in r.err


def test_what_a_scenario_prints_never_breaks_the_machine_formats(cli, project: Path) -> None:
    """A `print()` in a scenario (or at its import, or in an agent's tool) came out on stdout before the report:
    `run --format json` and `record --format json` were no JSON, `--format junit` no XML, and each matrix cell
    reads its version's `run --format json`."""
    import json
    import xml.etree.ElementTree as ET

    (project / "scenarios" / "noisy.py").write_text(
        "from replay import Run, scenario\nprint('imported')\n\n"
        "@scenario('noisy/one')\nasync def one(run: Run) -> str:\n    print('hello from the scenario')\n    return 'ok'\n"
    )
    r = cli("record", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["noisy/one"]["status"] == "recorded"
    assert "imported" in r.err and "hello from the scenario" in r.err  # shown, on stderr
    r = cli("run", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["summary"]["same"] == 1
    assert "hello from the scenario" in r.err
    r = cli("run", "--format", "junit")
    assert r.code == 0 and ET.fromstring(r.out).find("testsuite") is not None

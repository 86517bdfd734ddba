"""`replay run` in CI: JUnit carries time, file and line; GitHub annotations point at the scenario."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


@pytest.fixture
def changed(cli, write_scenario, project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    path = write_scenario(keep=2)
    assert cli("record").code == 0
    write_scenario(keep=3)
    return path


def _scenario_line(path: Path) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("@scenario"))


def test_junit_has_time_file_and_line(cli, changed: Path) -> None:
    r = cli("run", "--format", "junit")
    assert r.code == 1
    suite = ET.fromstring(r.out).find("testsuite")
    assert suite is not None and float(suite.get("time", "-1")) > 0
    (case,) = suite.findall("testcase")
    assert float(case.get("time", "-1")) > 0
    assert case.get("file") == "scenarios/simple.py"
    assert case.get("line") == str(_scenario_line(changed))
    assert case.find("failure") is not None


def test_github_annotations_point_at_the_scenario(cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project))
    text = cli("run")
    (annotation,) = [ln for ln in text.out.splitlines() if ln.startswith("::error ")]
    line = _scenario_line(changed)
    assert annotation.startswith(f"::error file=scenarios/simple.py,line={line},title=harness-replay%3A simple/compact changed::")
    # recorded and replayed on one version: the first line says the change is the scenario's, then the summary
    body = annotation.split("changed::", 1)[1]
    assert body.startswith("warning: both sides ran harness ") and "%0Arequests per role: " in body and "\n" not in annotation

    # machine formats stay parseable: the annotation goes to stderr
    junit = cli("run", "--format", "junit")
    ET.fromstring(junit.out)
    assert junit.err.startswith("::error file=scenarios/simple.py")


def test_no_annotations_outside_github_actions(cli, changed: Path) -> None:
    r = cli("run")
    assert "::error" not in r.out + r.err


def test_check_speaks_its_own_words_in_the_summary_and_annotations(cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`replay check` says OK / VIOLATED; its step summary and annotations said "same" and "changed"."""
    from conftest import ROOT

    cassettes = project / "cassettes" / "seed000"
    cassettes.mkdir(parents=True)
    (cassettes / "long.cassette").write_bytes((ROOT / "cassettes" / "seed000" / "long.cassette").read_bytes())
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = cli("check", cassettes)
    assert r.code == 1
    text = summary.read_text()
    assert "### harness-replay check: 0 ok, 1 with violations, 0 error" in text and "⚠️ violated" in text and "changed" not in text
    assert any(line.startswith("::error ") and "title=harness-replay%3A seed000/long violated" in line for line in r.out.splitlines())


@pytest.mark.parametrize("where", ["a directory", "a missing folder"])
def test_a_step_summary_that_cannot_be_written_is_a_warning_not_a_traceback(
    cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """$GITHUB_STEP_SUMMARY naming a directory or a path in a missing folder ended run, check and diff in an
    IsADirectoryError / FileNotFoundError traceback, exit 1, whatever the verdict."""
    summary = tmp_path if where == "a directory" else tmp_path / "missing" / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    cassette = project / "cassettes" / "simple" / "compact.cassette"
    for args, code in ((("run",), 1), (("check",), 0), (("diff", cassette, cassette), 0)):
        r = cli(*args)
        assert r.code == code, (args, r.err)
        assert "Traceback" not in r.err
        (warning,) = [line for line in r.err.splitlines() if "GITHUB_STEP_SUMMARY" in line]
        assert warning.startswith(f"replay: warning: GITHUB_STEP_SUMMARY={summary}: cannot append the step summary: ")


def test_annotation_properties_show_control_characters_of_a_file_name(cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The message of an annotation was made visible, its `file=` and `title=` were not: a cassette named
    `bad\\x1b]0;pwned\\x07.cassette` in a pull request set the CI log viewer's title through `replay check`."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    (project / "cassettes" / "simple" / "bad\x1b]0;pwned\x07.cassette").write_bytes(b"garbage")
    for fmt in ("text",):
        r = cli("check", "--format", fmt)
        assert r.code == 2
        lines = [ln for ln in (r.out + r.err).splitlines() if ln.startswith("::error ")]
        assert len(lines) == 1, (r.out, r.err)
        line = lines[0]
        assert "\x1b" not in line and "\x07" not in line, line
        assert "bad\\x1b]0;pwned\\x07.cassette" in line


def test_check_json_gets_the_annotations_and_summary_every_format_gets(
    cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The README: under GitHub Actions each failed scenario gets an annotation (on stderr with the machine formats)
    and Markdown goes to $GITHUB_STEP_SUMMARY; `check --format json` printed its JSON and neither."""
    import json

    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    (project / "cassettes" / "simple" / "broken.cassette").write_bytes(b"garbage")
    r = cli("check", "--format", "json")
    assert r.code == 2
    json.loads(r.out)  # stdout stays parseable
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("::error ")]
    assert "broken.cassette" in line
    assert "### harness-replay check: 1 ok, 0 with violations, 1 error" in summary.read_text()


def test_diff_of_two_files_has_junit_time_and_file_and_ci_extras_in_json(
    cli, changed: Path, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The README: every verdict's JUnit has `time`, `file` and `line`, and under GitHub Actions every format
    annotates and writes the step summary; `diff A B` wrote `time="0.000"` and no `file`, and with `--format json`
    neither annotation nor summary."""
    import json

    from conftest import ROOT

    old = ROOT / "tests" / "fixtures" / "harness-0.54.0" / "seed000" / "long.cassette"
    new = ROOT / "cassettes" / "seed000" / "long.cassette"
    r = cli("diff", old, new, "--format", "junit")
    assert r.code == 1
    (case,) = ET.fromstring(r.out).iter("testcase")
    assert case.get("file") == str(new) and float(case.get("time", "0")) > 0
    r = cli("diff", old.parent, new.parent, "--format", "junit")  # directories: each pair the same
    cases = {c.get("name"): c for c in ET.fromstring(r.out).iter("testcase")}
    assert cases["long"].get("file") == str(new) and float(cases["long"].get("time", "0")) > 0
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = cli("diff", old, new, "--format", "json")
    assert r.code == 1 and json.loads(r.out)["status"] == "changed"
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("::error ")]
    assert "seed000/long changed" in line
    assert "### harness-replay diff: 0 same, 1 changed, 0 error" in summary.read_text()

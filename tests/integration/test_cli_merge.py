"""`replay merge` (and `replay html`, which reads the same files): a malformed shard file is one line, exit 2.

Shard files come from other CI jobs: the issue found tracebacks on 4 of 9 malformed files.
Each kind below breaks one thing the merge or the renderers rely on.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _valid() -> dict[str, Any]:
    cell = {"status": "changed", "violations": [], "new_violations": [], "roles": {"main": [2, 3]}, "lost": ["m1"],
            "changed_requests": ["main[1]"], "outcome": [{"status": "ok"}, {"status": "ok"}],
            "observation_changes": [{"path": "observations.x", "old": 1, "new": 2}], "observations": ["x"]}
    return {
        "changed": True,
        "summary": {"same": 1, "changed": 1, "error": 0},
        "matrix": 1,
        "shard": "1/2",
        "grid": {"scenarios": ["a", "b"], "versions": ["0.54.0", "0.62.0"]},
        "versions": [{"spec": "0.54.0", "label": "0.54.0", "status": "reused", "harness": "0.54.0"},
                     {"spec": "0.62.0", "label": "0.62.0", "status": "skipped"}],
        "scenarios": {"a": {"0.54.0": cell}, "b": {"0.54.0": {"status": "same", "violations": [], "new_violations": []}}},
    }


def _mutate(fn: Callable[[dict[str, Any]], Any]) -> bytes:
    doc = copy.deepcopy(_valid())
    fn(doc)
    return json.dumps(doc).encode()


MALFORMED: dict[str, bytes] = {
    "not json": b"{\"matrix\": 1, \"grid\": ",
    "not utf-8": b"{\"matrix\": 1, \"x\": \"\xff\xfe\"}",
    "a json array": b"[1, 2, 3]",
    "no matrix field": _mutate(lambda d: d.pop("matrix")),
    "another format version": _mutate(lambda d: d.update(matrix=2)),
    "grid of the wrong type": _mutate(lambda d: d.update(grid="0.54.0")),
    "versions rows without spec": _mutate(lambda d: d["versions"][0].pop("spec")),
    "a cell that is not an object": _mutate(lambda d: d["scenarios"]["a"].update({"0.54.0": "same"})),
    "an unknown cell status": _mutate(lambda d: d["scenarios"]["a"]["0.54.0"].update(status="maybe")),
    "cell fields of the wrong type": _mutate(lambda d: d["scenarios"]["a"]["0.54.0"].update(roles={"main": 5}, lost="m1")),
    "observation change without path": _mutate(lambda d: d["scenarios"]["a"]["0.54.0"]["observation_changes"][0].pop("path")),
    "a cell outside the grid": _mutate(lambda d: d["scenarios"]["a"].update({"9.9.9": {"status": "same"}})),
    "a scenario outside the grid": _mutate(lambda d: d["scenarios"].update({"zzz": {}})),
    "nested too deeply": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("kind", list(MALFORMED), ids=list(MALFORMED))
@pytest.mark.parametrize("command", ["merge", "html"])
def test_malformed_shard_is_one_line_exit_2(kind: str, command: str, tmp_path: Path, cli: Callable[..., Any]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_valid()))
    bad = tmp_path / "bad.json"
    bad.write_bytes(MALFORMED[kind])
    args = (command, str(good), str(bad)) + (("--out", str(tmp_path / "r.html")) if command == "html" else ())
    result = cli(*args, cwd=tmp_path)
    assert result.code == 2, (kind, result)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"replay: error: {bad}"), result.err
    assert "Traceback" not in result.err + result.out
    assert not (tmp_path / "r.html").exists()  # nothing half-written


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX) for the FIFO case")
@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink to /dev/zero", "missing"])
def test_shard_that_is_not_a_regular_file_is_refused(kind: str, tmp_path: Path, cli: Callable[..., Any]) -> None:
    bad = tmp_path / "bad.json"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "directory":
        bad.mkdir()
    elif kind == "symlink to /dev/zero":
        bad.symlink_to("/dev/zero")
    result = cli("merge", str(bad), cwd=tmp_path)
    assert result.code == 2, result
    assert result.err.strip().startswith(f"replay: error: {bad}") and len(result.err.strip().splitlines()) == 1


def test_valid_shards_still_merge(tmp_path: Path, cli: Callable[..., Any]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_valid()))
    result = cli("merge", str(good), "--format", "json", cwd=tmp_path)
    assert result.code == 2, result.err  # one changed cell, and shard 2/2's cells missing: incomplete (it said 1)
    assert json.loads(result.out)["summary"]["changed"] == 1


def test_an_empty_shard_file_is_a_missing_shard_to_merge(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """`replay matrix … > shard-K.json || true` of a shard that failed leaves an empty file: merge said
    "Expecting value: line 1 column 1" and printed no table. Its cells are missing, as for an absent file."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_valid()))
    empty = tmp_path / "shard-2.json"
    empty.write_bytes(b"")
    result = cli("merge", str(good), str(empty), "--format", "json", cwd=tmp_path)
    assert result.code == 2 and json.loads(result.out)["summary"]["changed"] == 1  # its cells missing: no verdict
    assert f"replay: warning: {empty}: empty (its shard wrote no results" in result.err
    alone = cli("merge", str(empty), cwd=tmp_path)
    assert alone.code == 2 and "every results file is empty" in alone.err
    page = cli("html", str(good), str(empty), "--out", str(tmp_path / "r.html"), cwd=tmp_path)
    assert page.code == 2 and page.err.strip().startswith(f"replay: error: {empty}")  # html needs every file it is given



def test_a_shard_given_twice_is_said(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Shard 1/2's file and its re-run's beside it: the first's cells were used and the second's dropped unsaid."""
    first, again = tmp_path / "shard-1.json", tmp_path / "shard-1-rerun.json"
    first.write_text(json.dumps(_valid()))
    rerun = _valid()
    rerun["scenarios"]["b"]["0.54.0"] = {"status": "changed", "violations": [], "new_violations": []}
    again.write_text(json.dumps(rerun))
    result = cli("merge", str(first), str(again), "--format", "json", cwd=tmp_path)
    assert result.code == 2 and json.loads(result.out)["summary"]["changed"] == 1  # the first file's cells; 2/2 missing
    assert result.err == f"replay: warning: {again}: shard 1/2 again (first in {first}); its cells are not used\n"
    once = cli("merge", str(first), "--format", "json", cwd=tmp_path)
    assert once.err == ""


def test_html_reads_the_results_with_the_projects_limits(cli, project: Path, matrix_envs, monkeypatch) -> None:
    """Regression: each env's `replay run` wrote a result with the project's `max-depth = 300`, and
    `matrix --html` and `replay html` read it back with the default 200, silently: the page had no token
    chart for that scenario ("same, no estimates")."""
    from conftest import DEEP_SCENARIO

    (project / "scenarios" / "deep.py").write_text(DEEP_SCENARIO)
    (project / "pyproject.toml").write_text("[tool.replay]\nmax-depth = 300\n")
    assert cli("record").code == 0
    monkeypatch.setenv("REPLAY_ENV_DIR", str(matrix_envs.env_dir))
    monkeypatch.setenv("CI", "1")
    run = cli("matrix", "--harness", "0.62.0", "deep/tree", "--format", "json", "--html", "direct.html")
    assert run.code == 0, run.out + run.err
    (project / "matrix.json").write_text(run.out)
    page = cli("html", "matrix.json", "--out", "page.html")
    assert page.code == 0, page.err
    for name in ("direct.html", "page.html"):
        html = (project / name).read_text()
        assert "no estimates" not in html and "<svg" in html, (name, html[-2000:])


def test_text_summary_is_one_line_however_narrow_the_table(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """The summary was the table's title, wrapped to the table's width: `harness-replay matrix (shard 1/2): 1 same,
    1 changed, 0 error` came out over several lines (split mid-word when the shard had no cells), so a log search
    for it found nothing."""
    doc = _valid()
    doc["grid"], doc["versions"] = {"scenarios": ["a", "b"], "versions": ["0.54.0"]}, doc["versions"][:1]
    doc["scenarios"] = {"a": {}, "b": {}}  # a shard that had no cell of this grid
    doc["summary"] = {"same": 0, "changed": 0, "error": 0}
    doc["changed"] = False
    (tmp_path / "s.json").write_text(json.dumps(doc))
    result = cli("merge", "s.json", cwd=tmp_path)
    assert "harness-replay matrix: 0 same, 0 changed, 2 error" in result.out.splitlines(), result.out
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_valid()))
    one = cli("merge", str(good), cwd=tmp_path)
    assert "harness-replay matrix: 1 same, 1 changed, 2 error" in one.out.splitlines(), one.out


def test_html_of_a_run_json_among_others_says_why(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """A `replay run --format json` alone is a page; given with another file, html said
    `run.json: not a replay matrix JSON result` of the very file it had just rendered alone."""
    run = {"changed": False, "summary": {"same": 1, "changed": 0, "error": 0},
           "scenarios": {"a": {"status": "same", "changed": False}}}
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "good.json").write_text(json.dumps(_valid()))
    assert cli("html", "run.json", "--out", "alone.html", cwd=tmp_path).code == 0
    for files in (("run.json", "run.json"), ("good.json", "run.json")):
        page = cli("html", *files, "--out", "r.html", cwd=tmp_path)
        assert page.code == 2 and not (tmp_path / "r.html").exists()
        assert page.err.strip().splitlines() == [
            "replay: error: run.json: the JSON of `replay run` is one page on its own, not a matrix shard to merge "
            "with others: give it alone"]


def test_junit_suites_have_a_time_as_runs_has(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """The README: matrix and merge JUnit has one suite per version "with the same time, file and line" as run's;
    run's suite has `time`, the matrix's suites had none."""
    import xml.etree.ElementTree as ET

    doc = _valid()
    doc["scenarios"]["a"]["0.54.0"]["seconds"] = 1.25
    doc["scenarios"]["b"]["0.54.0"]["seconds"] = 0.5
    (tmp_path / "s.json").write_text(json.dumps(doc))
    r = cli("merge", "s.json", "--format", "junit", cwd=tmp_path)
    suites = {s.get("name"): s for s in ET.fromstring(r.out).iter("testsuite")}
    assert suites["harness 0.54.0"].get("time") == "1.750"


def test_html_never_writes_over_the_results_it_reads(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """`replay html shard.json --out shard.json` replaced the shard's JSON with the page."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_valid()))
    before = good.read_bytes()
    r = cli("html", "good.json", "--out", "./good.json", cwd=tmp_path)
    assert r.code == 2 and r.err.strip().splitlines() == [
        "replay: error: good.json: --out names one of the results files read; the page would replace it"]
    assert good.read_bytes() == before


def test_a_long_version_line_is_not_wrapped_into_a_workflow_command(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """A version row's error (environment output, from another job's shard file) was wrapped at 160 columns, and the
    wrap put ``::stop-commands::z`` at the start of a line: GitHub Actions reads it as a workflow command."""
    doc = _valid()
    doc["versions"][0].update(status="error", error="pip failed " + "e" * 150 + " ::stop-commands::z")
    shard = tmp_path / "shard.json"
    shard.write_text(json.dumps(doc))
    result = cli("merge", str(shard), cwd=tmp_path)
    assert result.code == 2, result.err  # this one shard leaves 0.62.0's cells without a verdict: error, exit 2
    assert not [ln for ln in result.out.splitlines() if ln.lstrip().startswith("::")], result.out
    assert "0.54.0: error: pip failed eee" in result.out and "eee ::stop-commands::z\n" in result.out  # one line


def test_text_table_shows_emoji_codes_as_written(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """rich replaced ``:white_check_mark:`` in a cell (a lost part, an observation quoting a cassette) by ✅: a shard's
    text could put a check mark beside a changed cell; `run`/`check` text already printed such codes as written."""
    doc = _valid()
    doc["scenarios"]["a"]["0.54.0"]["lost"] = [":white_check_mark: same"]
    shard = tmp_path / "shard.json"
    shard.write_text(json.dumps(doc))
    result = cli("merge", str(shard), cwd=tmp_path)
    assert result.code == 2, result.err  # this one shard leaves 0.62.0's cells without a verdict: error, exit 2
    assert ":white_check_mark: same" in result.out and "✅" not in result.out

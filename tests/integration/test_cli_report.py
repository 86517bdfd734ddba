"""`replay report`: a reproduction report built on the matrix machinery, trials in fresh processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, CliResult, MatrixEnvs


@pytest.fixture
def env_dir(matrix_envs: MatrixEnvs) -> Path:
    """The session's 0.54.0 and 0.62.0 environments (conftest), built once for matrix, report and seeds."""
    return matrix_envs.env_dir


@pytest.fixture
def report(cli: Callable[..., CliResult], env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``replay report ARGS`` on the session's environments, with CI's plain progress.

    In-process: the trials are the fresh processes (in the versions' environments), and the
    command that starts them only paid again for importing pydantic-ai in a process of its own.
    """
    monkeypatch.setenv("REPLAY_ENV_DIR", str(env_dir))
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return lambda *args: cli("report", *args, cwd=ROOT)


def _json(proc: CliResult) -> dict[str, Any]:
    try:
        return json.loads(proc.out)
    except ValueError:
        raise AssertionError(f"exit {proc.code}\nstdout: {proc.out}\nstderr: {proc.err}") from None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["seed003", "--harness", "0.62.0"], "seed003: matches 4 scenarios"),
        (["nope/x", "--harness", "0.62.0"], "nope/x: no such scenario"),
        (["seed000/long", "--harness", "0.60.0..0.62.0"], "ranges are not supported"),
        (["seed000/long", "--harness", "0.62.0", "--trials", "0"], "--trials"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, args: list[str], message: str) -> None:
    r = cli("report", *args)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err


@pytest.mark.parametrize(
    ("command", "option", "builds"),
    [("report", "--out", "replay.reproduction.build"), ("matrix", "--html", "replay.matrix.run_matrix")],
)
def test_an_output_file_that_cannot_be_is_refused_before_any_trial(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, option: str, builds: str
) -> None:
    """`report --out DIR` and `matrix --html DIR` built every environment and ran every trial, printed the
    table, then failed with `cannot write`: minutes of work for a typo the command could see at once."""
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the versions were run before the output file was checked")

    monkeypatch.setattr(builds, never)
    (tmp_path / "afile").write_text("x")
    for out, problem in ((tmp_path, f"{tmp_path}: is a directory; {option} takes the file to write"),
                         (tmp_path / "afile" / "r.md", f"{tmp_path / 'afile' / 'r.md'}: cannot write: {tmp_path / 'afile'} is not a directory")):
        r = cli(command, "seed000/long", "--harness", "0.62.0", option, str(out), cwd=ROOT)
        assert r.code == 2 and r.out == "", (r.out, r.err)
        assert r.err.strip().splitlines() == [f"replay: error: {problem}"]


def test_a_missing_control_is_bad_input_too(cli, tmp_path: Path) -> None:
    """The controls are half the evidence: a report without one exited 0, its row an error."""
    import shutil

    shutil.copytree(ROOT / "cassettes" / "seed002", tmp_path / "seed002")
    (tmp_path / "seed002" / "padded_summary.cassette").unlink()
    r = cli("report", "seed002/whitespace", "--harness", "0.62.0", "--cassettes", tmp_path)
    assert r.code == 2 and "padded_summary.cassette: control of seed002/whitespace: no cassette" in r.err, r.err
    assert "Traceback" not in r.err


def test_seed003_report_on_the_installed_release(report: Callable[..., CliResult], tmp_path: Path) -> None:
    """One version, two trials: the disagreement, the controls clean, trials byte-identical."""
    out = tmp_path / "seed003.md"
    proc = report("seed003/reused_id_one_return", "--harness", "0.62.0", "--trials", "2", "--out", str(out))
    assert proc.code == 0, proc.err
    md = out.read_text()
    assert "is_provider_valid True, but 1 tool call (add, c1) has no result" in md
    assert "| `seed003/reused_id_two_returns` |" in md and md.count("no violation") == 3
    assert "2 of 2 byte-identical" in md
    assert "from pydantic_ai_harness.step_persistence import is_provider_valid" in md  # the scenario source
    assert "replay report seed003/reused_id_one_return --harness 0.62.0 --trials 2" in md


@pytest.mark.slow
def test_seed000_long_on_two_versions_three_trials(report: Callable[..., CliResult]) -> None:
    proc = report("seed000/long", "--harness", "0.54.0", "--harness", "0.62.0", "--trials", "3", "--format", "json")
    doc = _json(proc)
    assert proc.code == 0, proc.err
    old, new = doc["versions"]
    assert (old["harness"], old["slim"], new["harness"], new["slim"]) == ("0.54.0", "2.54.0", "0.62.0", "2.62.0")
    assert old["scenarios"]["seed000/long"]["estimates"] == {"main": [897, 1793, 2691]}
    assert new["scenarios"]["seed000/long"]["estimates"] == {"main": [889, 887, 889]}
    for v in (old, new):
        assert v["identical"] and len(v["trials"]) == 3 and len({t["verdict"] for t in v["trials"]}) == 1
        assert v["freeze_sha256"] and v["pydantic"] and v["python"] and v["platform"]
        (grew,) = v["scenarios"]["seed000/long"]["violations"]
        assert grew["invariant"] == "compaction_grew_request"
    assert doc["controls"] == ["seed000/below_trigger", "seed000/fallback", "seed000/short", "seed000/short_large", "seed000/window_only"]
    assert doc["recording"]["harness"] == "0.62.0"


@pytest.mark.slow
def test_seed002_report_shows_the_accepted_blank_summary(report: Callable[..., CliResult], tmp_path: Path) -> None:
    out = tmp_path / "seed002.md"
    proc = report("seed002/whitespace", "--harness", "0.54.0", "--harness", "0.62.0", "--trials", "2", "--out", str(out))
    assert proc.code == 0, proc.err
    md = out.read_text()
    assert "| requests per role | main 4, summarizing_compaction 1 | main 2, summarizing_compaction 2 |" in md
    assert "| observation `note_alpha_in_history` | false | true |" in md
    assert "error: UnexpectedModelBehavior: Exceeded maximum output retries (1)" in md
    assert "empty_summary summarizing_compaction[0]" in md


def test_committed_example_reports_hold_the_seed_figures() -> None:
    """docs/reports/ are generated by `replay report` (the command is in each); they must still say what the seeds say."""
    docs = ROOT / "docs" / "reports"
    long = (docs / "seed000-long.md").read_text()
    assert "| main request estimates | 897, 1793, 2691 | 889, 887, 889 |" in long
    assert long.count("3 of 3 byte-identical") == 2
    blank = (docs / "seed002-whitespace.md").read_text()
    assert "| requests per role | main 4, summarizing_compaction 1 | main 2, summarizing_compaction 2 |" in blank
    # a newline shows as \n, as repr() spells it, like the tab beside it (it was escaped twice: \\n)
    assert "system-prompt 'Summary of previous conversation:\\n\\n' | user-prompt" in blank
    assert "text ' \\t\\n '" in blank
    pred = (docs / "seed003-reused_id_one_return.md").read_text()
    row = next(line for line in pred.splitlines() if line.startswith("| violations |"))
    assert row.count("predicate_verdict is_provider_valid[0]: is_provider_valid True, but 1 tool call (add, c1) has no result") == 2
    assert "### Controls: the other scenarios of `scenarios/seed003_is_provider_valid.py`" in pred
    # seed 001 is a one-command report too: A9, U10, A10 lost on 0.62 (the seed's 0.63 figure), U11 as well on 0.54
    lost = (docs / "seed001-keep_user_messages_true.md").read_text()
    row = next(line for line in lost.splitlines() if line.startswith("| violations |"))
    assert "content_lost main[0]: compaction lost A9, U10, A10: in neither" in row
    assert "content_lost main[0]: compaction lost A9, U10, A10, U11: in neither" in row
    assert '| observation `history_turns` | ["U6", "U7", "U8", "U9"] | ["U6", "U7", "U8", "U9", "U11"] |' in lost
    assert 'history_turns = ["A9", "U10", "A10", "U11"]<br>current_prompt_in_history = true<br>no violation' in lost
    assert lost.count("3 of 3 byte-identical") == 2
    for report in (long, blank, pred, lost):
        assert "replay report " in report and "/work/" not in report  # the command; no absolute paths


def test_a_project_that_raised_a_loader_limit_gets_its_report(
    cli: Callable[..., CliResult], project: Path, env_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: each env's `replay run` wrote the results with the project's `max-depth = 300`, and the
    report read them back with the default 200: the scenario's row was an error ('nesting deeper than 200')."""
    from conftest import DEEP_SCENARIO

    (project / "scenarios" / "deep.py").write_text(DEEP_SCENARIO)
    (project / "pyproject.toml").write_text("[tool.replay]\nmax-depth = 300\n")
    assert cli("record").code == 0
    monkeypatch.setenv("REPLAY_ENV_DIR", str(env_dir))
    monkeypatch.setenv("CI", "1")
    proc = cli("report", "deep/tree", "--harness", "0.62.0", "--trials", "2", "--format", "json")
    doc = _json(proc)
    assert proc.code == 0, proc.out + proc.err
    (version,) = doc["versions"]
    row = version["scenarios"]["deep/tree"]
    assert row["status"] == "same" and "error" not in row, row
    assert row["requests"] == {"main": 2} and version["identical"], row

"""`replay report`: a reproduction report built on the matrix machinery, trials in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report-envs")


def _report(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, REPLAY_ENV_DIR=str(env_dir), CI="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "replay", "report", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False,
    )


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}") from None


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


def test_seed003_report_on_the_installed_release(env_dir: Path, tmp_path: Path) -> None:
    """One version, two trials: the disagreement, the controls clean, trials byte-identical."""
    out = tmp_path / "seed003.md"
    proc = _report(env_dir, "seed003/reused_id_one_return", "--harness", "0.62.0", "--trials", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    md = out.read_text()
    assert "is_provider_valid True, but 1 tool call (add, c1) has no result" in md
    assert "| `seed003/reused_id_two_returns` |" in md and md.count("no violation") == 3
    assert "2 of 2 byte-identical" in md
    assert "from pydantic_ai_harness.step_persistence import is_provider_valid" in md  # the scenario source
    assert "replay report seed003/reused_id_one_return --harness 0.62.0 --trials 2" in md


@pytest.mark.slow
def test_seed000_long_on_two_versions_three_trials(env_dir: Path) -> None:
    proc = _report(env_dir, "seed000/long", "--harness", "0.54.0", "--harness", "0.62.0", "--trials", "3", "--format", "json")
    doc = _json(proc)
    assert proc.returncode == 0, proc.stderr
    old, new = doc["versions"]
    assert (old["harness"], old["slim"], new["harness"], new["slim"]) == ("0.54.0", "2.54.0", "0.62.0", "2.62.0")
    assert old["scenarios"]["seed000/long"]["main_estimates"] == [897, 1793, 2691]
    assert new["scenarios"]["seed000/long"]["main_estimates"] == [889, 887, 889]
    for v in (old, new):
        assert v["identical"] and len(v["trials"]) == 3 and len({t["verdict"] for t in v["trials"]}) == 1
        assert v["freeze_sha256"] and v["pydantic"] and v["python"] and v["platform"]
        (grew,) = v["scenarios"]["seed000/long"]["violations"]
        assert grew["invariant"] == "compaction_grew_request"
    assert doc["controls"] == ["seed000/below_trigger", "seed000/fallback", "seed000/short", "seed000/short_large", "seed000/window_only"]
    assert doc["recording"]["harness"] == "0.62.0"


@pytest.mark.slow
def test_seed002_report_shows_the_accepted_blank_summary(env_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "seed002.md"
    proc = _report(env_dir, "seed002/whitespace", "--harness", "0.54.0", "--harness", "0.62.0", "--trials", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    md = out.read_text()
    assert "| requests per role | main 4, summarizing_compaction 1 | main 2, summarizing_compaction 2 |" in md
    assert "| observation `note_alpha_in_history` | false | true |" in md
    assert "error: UnexpectedModelBehavior: Exceeded maximum output retries (1)" in md
    assert "empty_summary summarizing_compaction[0]" in md

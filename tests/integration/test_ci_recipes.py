"""The GitHub Actions workflow and the pre-commit hook in the README, read from it and run.

A recipe in a README rots silently; here its commands run against a freshly recorded project,
as the CI job or the hook would run them (CI=true, GITHUB_ACTIONS=true, no key).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT

BIN = Path(sys.executable).parent


def readme_yaml(first_line: str) -> Any:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return yaml.safe_load(block)


@pytest.fixture
def recorded(cli, write_scenario, project: Path) -> Path:
    write_scenario()
    assert cli("record").code == 0
    return project


def _shell(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}
    environ.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=environ, capture_output=True, text=True, timeout=600, check=False)


def test_github_workflow_steps_pass_on_a_recorded_project(recorded: Path) -> None:
    workflow = readme_yaml("# .github/workflows/replay.yml")
    assert workflow.get("on", workflow.get(True)) == ["pull_request"]  # YAML 1.1 reads a bare `on` as true
    steps = workflow["jobs"]["replay"]["steps"]
    assert {s.get("uses", "").split("@")[0] for s in steps} >= {"actions/checkout", "astral-sh/setup-uv", "actions/upload-artifact"}
    commands = [s["run"] for s in steps if "run" in s]
    install, *checks = commands
    assert install.startswith("uv venv && uv pip install")  # the project's own environment: ours stands in for it
    assert "--group dev" in install  # `-e .` alone skips the dependency group that holds harness-replay
    (recorded / ".venv").symlink_to(BIN.parent)
    for command in checks:
        done = _shell(command, recorded, CI="true", GITHUB_ACTIONS="true")
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    suite = ET.parse(recorded / upload["with"]["path"]).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "0"


def test_workflow_fails_the_job_on_a_change(recorded: Path, write_scenario) -> None:
    write_scenario(keep=3)
    (recorded / ".venv").symlink_to(BIN.parent)
    run_step = [s["run"] for s in readme_yaml("# .github/workflows/replay.yml")["jobs"]["replay"]["steps"] if "run" in s][1]
    done = _shell(run_step, recorded, CI="true", GITHUB_ACTIONS="true")
    assert done.returncode == 1
    assert done.stderr.startswith("::error file=scenarios/simple.py,line=")  # annotated on the PR


def test_pre_commit_hook(recorded: Path, write_scenario) -> None:
    (hook,) = readme_yaml("# .pre-commit-config.yaml")["repos"][0]["hooks"]
    assert hook["language"] == "system" and hook["pass_filenames"] is False
    files = re.compile(hook["files"])
    assert files.search("scenarios/simple.py") and files.search("cassettes/simple/compact.cassette")
    # a prompt edited in the agent's own code and a harness pin bump run it too; prose does not
    assert files.search("src/app.py") and files.search("pyproject.toml")
    assert not files.search("README.md") and not files.search("docs/pyproject.toml.md")
    assert _shell(shlex.join(shlex.split(hook["entry"])), recorded).returncode == 0
    write_scenario(keep=3)
    blocked = _shell(hook["entry"], recorded)
    assert blocked.returncode == 1 and "CHANGED" in blocked.stdout  # the commit is stopped, with the reason


def _attrs(line: str, tag: str) -> dict[str, str]:
    m = re.search(rf"<{tag}( [^>]*)?>", line)
    assert m is not None, (tag, line)
    return dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))


def test_shard_recipe_caches_each_shards_envs() -> None:
    """actions/cache keeps the first save of a key: with one key for every shard, the first shard to finish saved
    its one or two versions' envs and the others' saves were refused, so shards 2-4 built theirs on every run."""
    workflow = readme_yaml("jobs:\n  matrix:")
    (cache,) = [s for s in workflow["jobs"]["matrix"]["steps"] if str(s.get("uses", "")).startswith("actions/cache")]
    assert "${{ matrix.shard }}" in cache["with"]["key"]


def test_readme_junit_excerpt_is_what_run_writes(recorded: Path, cli) -> None:
    """The README's "real output" of `replay run --format junit | head -4` had lost the `time`, `file` and
    `line` attributes run has written since, and counted 24 test cases of a repository holding 55 cassettes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"\$ replay run --format junit \| head -4\n((?:.*\n){4})", text)
    assert m is not None
    shown = m.group(1).splitlines()
    res = cli("run", "--format", "junit")
    assert res.code == 0, res.err
    real = res.out.splitlines()[:4]
    assert shown[0] == real[0]
    for line_no, tag in ((1, "testsuite"), (2, "testcase")):
        assert _attrs(shown[line_no], tag).keys() == _attrs(real[line_no], tag).keys(), (shown[line_no], real[line_no])
    assert shown[3] == real[3]
    assert _attrs(shown[1], "testsuite")["tests"] == str(len(list((ROOT / "cassettes").rglob("*.cassette"))))

"""harness-replay installed from its wheel, as users get it: typed, licensed, described, and able to run a matrix.

Builds the wheel (hatchling via uv), installs it into a fresh venv and drives it from there;
`replay matrix` must install the very version that is running into its environments, though
that version is not on any package index.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # builds a wheel and two environments

UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def _run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode in (0, 1), f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path(UV).exists():
        pytest.skip("needs uv (dev extra) to build the wheel")
    out = tmp_path_factory.mktemp("dist")
    _run(UV, "build", "-q", "--wheel", "--out-dir", out, ROOT)
    (whl,) = out.glob("harness_replay-*.whl")
    return whl


def test_wheel_is_typed_licensed_and_described(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "replay/py.typed" in names  # users' mypy --strict sees the annotations
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        meta = email.message_from_bytes(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert meta["License-Expression"] == "MIT"
    assert "Typing :: Typed" in meta.get_all("Classifier") and "Framework :: Pytest" in meta.get_all("Classifier")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Repository"].startswith("https://github.com/")
    pytest11 = entry_points.split("[pytest11]", 1)[1]
    assert pytest11.split() == ["harness_replay", "=", "replay.plugin"]  # not "replay": pytest-replay owns that name
    readme = meta.get_payload()
    relative = [line for line in readme.splitlines() if "](" in line and "](http" not in line and "](#" not in line]
    assert not relative, relative[:3]  # links work on the package index too


def test_matrix_from_a_wheel_install_installs_the_running_version(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(UV, "venv", "-q", venv)
    _run(UV, "pip", "install", "-q", "--python", venv / "bin" / "python", wheel, "pydantic-ai-harness==0.62.0")
    project = tmp_path / "project"
    shutil.copytree(ROOT / "scenarios", project / "scenarios")
    shutil.copytree(ROOT / "cassettes" / "seed000", project / "cassettes" / "seed000")
    (project / "pyproject.toml").write_text("[tool.replay]\n")
    env = {**os.environ, "CI": "1", "PATH": f"{Path(UV).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.pop("PYTHONPATH", None)  # a checkout on it would be imported instead of the wheel (then installed from source)
    done = _run(
        venv / "bin" / "replay", "matrix", "--harness", "0.62.0", "seed000/long", "--format", "json",
        "--env-dir", tmp_path / "envs", cwd=project, env=env,
    )
    doc = json.loads(done.stdout)
    assert doc["scenarios"]["seed000/long"]["0.62.0"]["status"] == "same", done.stdout + done.stderr
    (self_wheel,) = (tmp_path / "envs").glob("_self/*/harness_replay-*.whl")
    assert self_wheel.name == wheel.name
    with zipfile.ZipFile(self_wheel) as built, zipfile.ZipFile(wheel) as original:
        for name in ("replay/cli.py", "replay/py.typed"):
            assert built.read(name) == original.read(name)

"""`replay matrix` for real: envs built with uv (or venv + pip), replays on 0.54.0 and 0.62.0.

The bundled cassettes were recorded on 0.62.0, so 0.62.0 replays them unchanged and 0.54.0
shows the compaction changes. One environment cache is shared by the whole session (the
``matrix_envs`` fixture in conftest): its first, cold run builds the envs (a few seconds each)
and the later tests reuse them, which is itself what one test checks. Tests that build an env
of the same label with another key (``--with``, ``--python``) use a cache of their own, since
that build prunes the shared one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import MATRIX_SCENARIOS, ROOT, CliResult, MatrixEnvs

from replay.matrix import render_markdown

pytestmark = pytest.mark.slow  # builds uv environments of several harness versions

SCENARIOS = MATRIX_SCENARIOS


def _json(proc: subprocess.CompletedProcess[str] | CliResult) -> dict[str, Any]:
    if isinstance(proc, CliResult):
        out, err, code = proc.out, proc.err, proc.code
    else:
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    try:
        return json.loads(out)
    except ValueError:
        raise AssertionError(f"exit {code}\nstdout: {out}\nstderr: {err}") from None


def _statuses(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(s, v): c["status"] for s, row in doc["scenarios"].items() for v, c in row.items()}


@pytest.fixture
def env_dir(matrix_envs: MatrixEnvs) -> Path:
    return matrix_envs.env_dir


@pytest.fixture
def out_dir(matrix_envs: MatrixEnvs) -> Path:
    return matrix_envs.out_dir


@pytest.fixture
def matrix_cli(
    cli: Callable[..., CliResult], env_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., CliResult]:
    """``replay ARGS`` in-process (from the checkout) on the session's environments, with CI's plain progress.

    The replays are the fresh processes here (one per version, in its environment); the command that
    starts them would only pay again for importing pydantic-ai in a process of its own. Tests whose
    point is the command's own process (kill -9, two concurrent runs, the parent's PYTHONPATH) start one.
    """
    monkeypatch.setenv("REPLAY_ENV_DIR", str(env_dir))
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)

    def run(*args: str, cwd: Path = ROOT) -> CliResult:
        return cli(*args, cwd=cwd)

    return run


@pytest.fixture
def cold(matrix_envs: MatrixEnvs) -> dict[str, Any]:
    """The first, cold run (``matrix --harness 0.54.0 --harness 0.62.0 SCENARIOS``): both envs are built there."""
    proc = matrix_envs.cold
    doc = _json(proc)
    assert proc.returncode == 1, proc.stderr
    return doc


def test_two_versions_against_the_recording(cold: dict[str, Any], out_dir: Path, cli: Callable[..., CliResult]) -> None:
    versions = {v["spec"]: v for v in cold["versions"]}
    assert list(versions) == ["0.54.0", "0.62.0"]
    for spec, slim in (("0.54.0", "2.54.0"), ("0.62.0", "2.62.0")):
        v = versions[spec]
        assert v["status"] == "created" and v["reused"] is False and v["error"] is None
        assert (v["harness"], v["slim"]) == (spec, slim)
        assert f"pydantic-ai-harness=={spec}" in v["freeze"]
        assert any(line.startswith("pydantic-ai-slim==") for line in v["freeze"])
        # every other dependency as where the matrix ran: a column differs by the harness alone
        import importlib.metadata as md

        assert v["pinned"] > 0 and v["unpinned"] is None, v
        for name in ("pydantic", "httpx", "msgpack"):
            assert f"{name}=={md.version(name)}" in v["freeze"], (name, v["freeze"])

    long = cold["scenarios"]["seed000/long"]
    assert long["0.62.0"]["status"] == "same"
    old = long["0.54.0"]
    assert old["status"] == "changed"
    # per-request estimate deltas of the main agent, computed by the replay
    assert len(old["estimates"]) == 3
    assert all(a != b for a, b in old["estimates"]), old["estimates"]
    assert old["estimate_deltas"] == ", ".join(f"{a}→{b}" for a, b in old["estimates"])
    assert any(r.startswith("main[") for r in old["changed_requests"])

    keep = cold["scenarios"]["seed001/keep_user_messages_true"]["0.54.0"]
    assert keep["status"] == "changed"
    assert "U11" in keep["lost"], keep["lost"]  # 0.54 drops the current prompt
    assert cold["changed"] is True and cold["summary"]["changed"] >= 2

    # each version's result cassettes, ready for `replay diff`
    a, b = out_dir / "0.54.0" / "seed000" / "long.cassette", out_dir / "0.62.0" / "seed000" / "long.cassette"
    assert a.is_file() and b.is_file()
    diff = cli("diff", b, a, "--format", "json")  # in-process: the result cassettes are what is checked here
    assert diff.code == 1 and json.loads(diff.out)["changed"] is True


def test_second_run_reuses_environments(
    cold: dict[str, Any], env_dir: Path, tmp_path: Path, matrix_cli: Callable[..., CliResult]
) -> None:
    stamps = {p: p.stat().st_mtime_ns for p in env_dir.glob("*/.replay-env.json")}
    assert len(stamps) == 2
    proc = matrix_cli("matrix", "--harness", "0.54.0,0.62.0", *SCENARIOS, "--format", "json", "--out", str(tmp_path))
    warm = _json(proc)
    assert [v["status"] for v in warm["versions"]] == ["reused", "reused"]
    assert all(v["reused"] and v["freeze"] for v in warm["versions"])
    assert {p: p.stat().st_mtime_ns for p in env_dir.glob("*/.replay-env.json")} == stamps
    assert _statuses(warm) == _statuses(cold)
    assert "env reused" in proc.err  # plain progress lines when CI is set


def test_uninstallable_version_is_an_error_column(
    cold: dict[str, Any], tmp_path: Path, matrix_cli: Callable[..., CliResult]
) -> None:
    proc = matrix_cli(
        "matrix",
        "--harness",
        "9.9.9",
        "--harness",
        "0.62.0",
        "seed000/long",
        "--format",
        "json",
        "--out",
        str(tmp_path),
    )
    doc = _json(proc)
    assert proc.code == 2  # no verdict for 9.9.9: not a change of the harness (it was 1, as for a change)
    bad = next(v for v in doc["versions"] if v["spec"] == "9.9.9")
    assert bad["status"] == "error" and "9.9.9" in bad["error"] and "\n" not in bad["error"]
    cell = doc["scenarios"]["seed000/long"]["9.9.9"]
    assert cell["status"] == "error" and cell["error"] == bad["error"]
    assert doc["scenarios"]["seed000/long"]["0.62.0"]["status"] == "same"
    assert next(v for v in doc["versions"] if v["spec"] == "0.62.0")["status"] == "reused"


def test_shards_merge_into_the_full_table(
    cold: dict[str, Any], tmp_path: Path, matrix_cli: Callable[..., CliResult]
) -> None:
    files = []
    for k in (1, 2):
        proc = matrix_cli(
            "matrix", "--harness", "0.54.0,0.62.0", *SCENARIOS,
            "--shard", f"{k}/2", "--format", "json", "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert [v["status"] for v in _json(proc)["versions"]] == (
            ["reused", "skipped"] if k == 1 else ["skipped", "reused"]
        )
        path = tmp_path / f"shard{k}.json"
        path.write_text(json.dumps(_json(proc)))
        files.append(str(path))
    merged = matrix_cli("merge", *files, "--format", "json")
    doc = _json(merged)
    assert merged.code == 1
    assert _statuses(doc) == _statuses(cold)
    deltas = [d["scenarios"]["seed000/long"]["0.54.0"]["estimate_deltas"] for d in (doc, cold)]
    assert deltas[0] == deltas[1]
    md = render_markdown(doc)
    assert "| scenario | `0.54.0` | `0.62.0` |" in md and "| `seed000/long` | ⚠️ changed" in md


def test_user_project_code_and_extra_requirements(
    env_dir: Path, tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scenarios import the project's own module (from its root) and a dependency given with --with.

    The recording runs in-process with the dependency on ``sys.path`` (it only sets the test up); the
    matrix commands are processes of their own, since their parent's PYTHONPATH is what is checked."""
    project = tmp_path / "proj"
    (project / "scenarios").mkdir(parents=True)
    (project / "cassettes").mkdir()
    (project / "pyproject.toml").write_text("[tool.replay]\n")
    (project / "myapp.py").write_text(
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.messages import ModelResponse, TextPart\n"
        "from pydantic_ai.models.function import FunctionModel\n"
        "def build():\n"
        "    return Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('hi')])))\n"
    )
    dep = tmp_path / "extra_dep"
    (dep / "extra_dep").mkdir(parents=True)
    (dep / "extra_dep" / "__init__.py").write_text("GREETING = 'hello'\n")
    (dep / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "extra-dep"\nversion = "1.0"\n'
    )
    (project / "scenarios" / "app.py").write_text(
        "import extra_dep\n"
        "from myapp import build\n"
        "from replay import Run, scenario\n"
        "@scenario('app/hello')\n"
        "async def hello(run: Run) -> str:\n"
        "    return (await build().run(extra_dep.GREETING)).output\n"
    )
    env = dict(os.environ, REPLAY_ENV_DIR=str(env_dir), CI="1")
    env.pop("GITHUB_STEP_SUMMARY", None)

    def replay_cli(*args: str, path: str | None = None, cache: Path = env_dir) -> subprocess.CompletedProcess[str]:
        run_env = dict(env, PYTHONPATH=path) if path else {k: v for k, v in env.items() if k != "PYTHONPATH"}
        run_env["REPLAY_ENV_DIR"] = str(cache)
        return subprocess.run([sys.executable, "-m", "replay", *args], cwd=project, env=run_env,
                              capture_output=True, text=True, timeout=900, check=False)

    with monkeypatch.context() as m:
        m.syspath_prepend(str(dep))
        assert cli("record", cwd=project).code == 0
    for name in ("myapp", "extra_dep"):  # the project's modules stay out of this worker's later tests
        sys.modules.pop(name, None)
    # The parent imports the scenarios with its own PYTHONPATH; the envs never see it.
    without = _json(replay_cli("matrix", "--harness", "0.62.0", "--format", "json", path=str(dep)))
    assert without["scenarios"]["app/hello"]["0.62.0"]["status"] == "error"  # extra_dep is not in the env
    # A cache of its own: this 0.62.0 env has another key, and building it prunes the shared one.
    doc = _json(replay_cli("matrix", "--harness", "0.62.0", "--with", str(dep), "--format", "json", path=str(dep),
                           cache=tmp_path / "envs"))
    assert doc["scenarios"]["app/hello"]["0.62.0"]["status"] == "same", doc["scenarios"]
    # The cells' bytecode is the env's own (compiled by the first process that imports a module, read by
    # every later one): the project's module and the harness are there, the scenario file never is, and
    # nothing is written into the project.
    (cache,) = [Path(v["path"]) / ".pycache" for v in doc["versions"]]
    cached = [p.relative_to(cache).as_posix() for p in cache.rglob("*.pyc")]
    for module in ("/proj/myapp.", "/pydantic_ai/agent/__init__.", "/pydantic_ai_harness/compaction/"):
        assert any(module in c for c in cached), (module, cached[:10])
    assert not any("/scenarios/" in c for c in cached)
    assert not list(project.rglob("__pycache__")), list(project.rglob("__pycache__"))


COUNTED = (
    "from pathlib import Path\n"
    "from pydantic_ai import Agent\n"
    "from pydantic_ai.messages import ModelResponse, TextPart\n"
    "from pydantic_ai.models.function import FunctionModel\n"
    "from replay import Run, scenario\n"
    "@scenario('iso/counted')\n"
    "async def counted(run: Run) -> str:\n"
    "    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('ok')])))\n"
    "    for turn in range(int(Path('turns.txt').read_text())):\n"
    "        result = await agent.run(f'turn {turn}')\n"
    "    return result.output\n"
)
NEWER = (
    "import pydantic_ai_harness.approval_reviewer  # absent before 0.56\n"
    "from replay import Run, scenario\n"
    "@scenario('iso/newer')\n"
    "async def newer(run: Run) -> None: ...\n"
)


def test_isolation_and_run_parity(
    tmp_path: Path, cli: Callable[..., CliResult], matrix_cli: Callable[..., CliResult]
) -> None:
    """A file that cannot import on 0.54.0 errors only its own cell; --on-exhausted reaches the envs.

    The recording and the matrix commands run in-process (the environments' processes are what is isolated here)."""
    project = tmp_path / "proj"
    (project / "scenarios").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.replay]\n")
    (project / "scenarios" / "counted.py").write_text(COUNTED)
    (project / "scenarios" / "newer.py").write_text(NEWER)
    (project / "turns.txt").write_text("1")

    def replay_cli(*args: str) -> CliResult:
        return matrix_cli(*args, cwd=project)

    assert cli("record", cwd=project).code == 0
    doc = _json(replay_cli("matrix", "--harness", "0.54.0,0.62.0", "--format", "json", "--jobs", "2"))
    row, newer = doc["scenarios"]["iso/counted"], doc["scenarios"]["iso/newer"]
    assert row["0.54.0"]["status"] == "same" and row["0.62.0"]["status"] == "same", row
    assert newer["0.62.0"]["status"] == "same"
    assert newer["0.54.0"]["status"] == "error"
    assert "failed to import: ModuleNotFoundError" in newer["0.54.0"]["error"]
    assert "approval_reviewer" in newer["0.54.0"]["error"]

    # Two turns now, one recorded: `fail` ends the run at the second request, `repeat` serves the answer again.
    (project / "turns.txt").write_text("2")
    failed = _json(replay_cli("matrix", "--harness", "0.62.0", "iso/counted", "--format", "json"))
    repeated = _json(replay_cli("matrix", "--harness", "0.62.0", "iso/counted", "--on-exhausted", "repeat",
                                "--format", "json"))
    f_cell, r_cell = failed["scenarios"]["iso/counted"]["0.62.0"], repeated["scenarios"]["iso/counted"]["0.62.0"]
    assert f_cell["status"] == r_cell["status"] == "changed"
    assert f_cell["outcome"] and not r_cell["outcome"]  # the exhausted error became the outcome only under fail
    assert r_cell["roles"] == {"main": [1, 2]}
    # the same from [tool.replay], as `run` reads it
    (project / "pyproject.toml").write_text('[tool.replay]\non-exhausted = "repeat"\n')
    configured = _json(replay_cli("matrix", "--harness", "0.62.0", "iso/counted", "--format", "json"))
    assert configured["scenarios"]["iso/counted"]["0.62.0"]["roles"] == {"main": [1, 2]}
    assert not configured["scenarios"]["iso/counted"]["0.62.0"]["outcome"]


def test_kill_9_during_matrix_leaves_no_torn_or_temp_files(cold: dict[str, Any], env_dir: Path, tmp_path: Path) -> None:
    """Issue 13: SIGKILL to the whole matrix (parent and its replays) at several points, then a normal run."""
    import signal
    import time

    from replay.cassette import iter_cassettes, load

    out = tmp_path / "out"
    args = [sys.executable, "-m", "replay", "matrix", "--harness", "0.62.0", "seed000", "seed001", "--out", str(out),
            "--format", "json", "--jobs", "2"]
    env = dict(os.environ, REPLAY_ENV_DIR=str(env_dir), CI="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    for delay in (0.8, 1.6, 2.4, 3.2):
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for path in iter_cassettes(out) if out.is_dir() else []:
            load(path)  # never torn: raises CassetteError if it were
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    assert _json(done)["summary"]["error"] == 0
    assert [p.name for p in out.rglob("*.tmp")] == []
    assert len(list(iter_cassettes(out))) == len(_json(done)["scenarios"])


@pytest.mark.slow
def test_python_is_an_axis(tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch) -> None:
    """`--python 3.12`: the cell is (python, harness), replayed on 3.12, and warns that the recording was 3.11.

    The command runs in-process: the 3.12 environment's replay process is the one that matters."""
    from replay.matrix import _envs

    try:
        _envs.find_python("3.12", _envs.find_installer())
    except Exception as exc:  # noqa: BLE001 - any failure to find one is a reason to skip
        pytest.skip(f"no Python 3.12 interpreter here: {exc}")
    monkeypatch.setenv("REPLAY_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    proc = cli("matrix", "--harness", "0.62.0", "--python", "3.12", "seed000/short", "--format", "json",
               "--out", str(tmp_path), cwd=ROOT)
    doc = _json(proc)
    assert doc["grid"]["versions"] == ["0.62.0@py3.12"]
    [row] = doc["versions"]
    assert row["python"].startswith("3.12.") and row["label"] == "0.62.0-py3.12"
    cell = doc["scenarios"]["seed000/short"]["0.62.0@py3.12"]
    assert cell["status"] == "same", cell
    assert any("replayed on Python 3.12" in w for w in cell.get("warnings", [])), cell
    assert (tmp_path / "0.62.0-py3.12" / "seed000" / "short.cassette").is_file()


@pytest.mark.slow
def test_two_runs_with_different_keys_share_the_env_cache(tmp_path: Path) -> None:
    """Issue 13: run A replays in its 0.62.0 env while run B (another key: --with) builds its own 0.62.0
    env and prunes the same label; A's env is held, so every cell of both runs gets a verdict.

    A cache of its own (A builds its env there too): B's prune would otherwise remove the session's
    shared 0.62.0 env whenever A had finished first."""
    env_dir = tmp_path / "envs"
    dep = tmp_path / "dep"
    (dep / "extra_dep").mkdir(parents=True)
    (dep / "extra_dep" / "__init__.py").write_text("")
    (dep / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "extra-dep"\nversion = "1.0"\n'
    )
    env = dict(os.environ, REPLAY_ENV_DIR=str(env_dir), CI="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    base = [sys.executable, "-m", "replay", "matrix", "--harness", "0.62.0", "--format", "json", "--jobs", "1"]
    a = subprocess.Popen([*base, "seed000", "seed001", "--out", str(tmp_path / "a")], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = subprocess.run([*base, "seed000/short", "--with", str(dep), "--out", str(tmp_path / "b")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900, check=False)
    out_a, err_a = a.communicate(timeout=900)
    for proc_out, err in ((out_a, err_a), (b.stdout, b.stderr)):
        doc = json.loads(proc_out)
        errors = {s: c for s, row in doc["scenarios"].items() for c in row.values() if c["status"] == "error"}
        assert not errors, (errors, err[-2000:])
    # two different keys of one label: B pruned only what nobody held, A never lost its env mid-run
    keys = {row["key"] for d in (json.loads(out_a), json.loads(b.stdout)) for row in d["versions"]}
    assert len(keys) == 2


def test_a_file_where_a_folder_belongs_is_one_line_before_any_install(cli, project: Path, tmp_path: Path) -> None:
    """`matrix --env-dir pyproject.toml` (or $REPLAY_ENV_DIR naming a file) ended in a FileExistsError traceback
    from the environment cache's lock; `run --out FILE` was one `cannot write` error per scenario."""
    (project / "scenarios" / "x.py").write_text("from replay import scenario\n@scenario('x/y')\nasync def y(run): ...\n")
    afile = project / "pyproject.toml"
    cases = [
        (("matrix", "--harness", "0.62.0", "--env-dir", "pyproject.toml"), "pyproject.toml: not a directory; --env-dir takes a folder"),
        (("matrix", "--harness", "0.62.0", "--env-dir", "pyproject.toml/envs"), "pyproject.toml/envs: cannot be created: pyproject.toml is not a directory"),
        (("matrix", "--harness", "0.62.0", "--out", "pyproject.toml"), "pyproject.toml: not a directory; --out takes a folder"),
        (("report", "x/y", "--harness", "0.62.0", "--env-dir", "pyproject.toml"), "pyproject.toml: not a directory; --env-dir takes a folder"),
        (("run", "--out", "pyproject.toml"), "pyproject.toml: not a directory; --out takes a folder"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.code == 2 and r.out == "", (args, r.out, r.err)
        assert r.err.strip().splitlines() == [f"replay: error: {message}"], args
    assert afile.read_text() == "[tool.replay]\n"

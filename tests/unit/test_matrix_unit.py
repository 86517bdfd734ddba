"""`replay matrix` without installing anything: spec parsing, shards, merge, cache keys, cells."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from replay import matrix as mx
from replay.errors import ReplayUsageError
from replay.matrix import _envs


def _an_env_at(info: _envs.EnvInfo) -> None:
    """What a fake ``_build`` leaves: an env folder with a ``python`` in it."""
    py = _envs.env_python(Path(info.path))
    py.parent.mkdir(parents=True)
    py.write_text("")


# --------------------------------------------------------------------------- version specs


def test_release_and_comma_lists_keep_order_and_drop_duplicates() -> None:
    specs = _envs.parse_versions(["0.54.0,0.62.0", "0.60.0", "0.54.0", " 0.63.0rc1 "])
    assert [s.spec for s in specs] == ["0.54.0", "0.62.0", "0.60.0", "0.63.0rc1"]
    assert specs[0].kind == "release"
    assert specs[0].requirement == "pydantic-ai-harness==0.54.0"
    assert specs[0].label == "0.54.0"
    assert _envs.parse_versions(["v0.62.0"])[0].requirement == "pydantic-ai-harness==0.62.0"
    # `0.54` is the release pip installs for `==0.54.0`: one env, one column (it built a second env labelled 0.54)
    assert [s.spec for s in _envs.parse_versions(["0.54", "0.54.0,0.56"])] == ["0.54.0", "0.56.0"]


def test_spellings_of_one_release_are_one_column() -> None:
    """``v0.54.0`` beside ``0.54.0`` was refused (two specs map to the same name); ``0.54.0.0`` and
    ``==0.54.0`` built envs and columns of their own for the release pip installs for ``0.54.0``."""
    specs = _envs.parse_versions(["v0.54.0,0.54.0", "0.54.0.0", "==0.54.0", "0.62.0"])
    assert [(s.spec, s.requirement) for s in specs] == [
        ("0.54.0", "pydantic-ai-harness==0.54.0"),
        ("0.62.0", "pydantic-ai-harness==0.62.0"),
    ]


def test_local_wheel_and_checkout(tmp_path: Path) -> None:
    wheel = tmp_path / "pydantic_ai_harness-0.63.0.dev1-py3-none-any.whl"
    wheel.write_bytes(b"not really a zip")
    checkout = tmp_path / "harness"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname='pydantic-ai-harness'\n")
    w, s = _envs.parse_versions([str(wheel), str(checkout)])
    assert (w.kind, w.requirement) == ("wheel", str(wheel.resolve()))
    assert w.label == "pydantic_ai_harness-0.63.0.dev1-py3-none-any"
    assert (s.kind, s.requirement, s.label) == ("source", str(checkout.resolve()), "src-harness")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0.60.0..0.62.0", "ranges are not supported"),
        ("latest", "not a release number"),
        ("./nowhere/harness.whl", "no such file"),
        (",", "at least one version"),
        # a specifier, as pip takes it: `~=0.60.0` was a traceback (Path.expanduser read it as `~user`)
        ("~=0.60.0", "version specifiers are not supported"),
        (">=0.60", "version specifiers are not supported"),
        ("0.60.*", "version specifiers are not supported"),
        ("!=0.61.0", "version specifiers are not supported"),
        ("~nobody-such-user/harness.whl", "no such file"),
    ],
)
def test_bad_specs_are_usage_errors(value: str, message: str) -> None:
    with pytest.raises(ReplayUsageError, match=message):
        _envs.parse_versions([value])


def test_directory_without_project_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReplayUsageError, match="not a wheel"):
        _envs.parse_versions([str(tmp_path)])


# --------------------------------------------------------------------------- cache keys


def _tool(tmp_path: Path, body: str = "x = 1\n") -> Path:
    root = tmp_path / "tool"
    (root / "replay").mkdir(parents=True, exist_ok=True)
    (root / "replay" / "a.py").write_text(body)
    (root / "pyproject.toml").write_text("[project]\nname='harness-replay'\n")
    return root


def test_cache_key_is_stable_and_tracks_its_inputs(tmp_path: Path) -> None:
    spec = _envs.parse_versions(["0.54.0"])[0]
    root = _tool(tmp_path)
    h1 = _envs.tool_source_hash(root)
    assert h1 == _envs.tool_source_hash(root)
    key = _envs.env_key(spec, h1, python="cpython-3.11.7")
    assert key == _envs.env_key(spec, h1, python="cpython-3.11.7")
    assert len(key) == 16
    # other version, other Python, edited tool source: each gets its own env
    assert key != _envs.env_key(_envs.parse_versions(["0.62.0"])[0], h1, python="cpython-3.11.7")
    assert key != _envs.env_key(spec, h1, python="cpython-3.12.1")
    (root / "replay" / "a.py").write_text("x = 2\n")
    assert _envs.tool_source_hash(root) != h1
    # caches and bytecode do not count
    h2 = _envs.tool_source_hash(root)
    (root / "replay" / "__pycache__").mkdir()
    (root / "replay" / "__pycache__" / "a.cpython-311.py").write_text("junk")
    (root / "README.md").write_text("docs")
    assert _envs.tool_source_hash(root) == h2


def test_a_project_with_a_dangling_link_or_a_fifo_still_has_a_key(tmp_path: Path) -> None:
    """`--with .` (or a harness checkout) whose tree holds a dangling `link.py` ended `replay matrix` in a
    FileNotFoundError traceback, and a FIFO named `x.py` hung it: only regular files count in the key."""
    import os

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    before = _envs.extras_fingerprint([str(project)])
    os.symlink(project / "gone.py", project / "link.py")
    os.mkfifo(project / "pipe.py")
    assert _envs.extras_fingerprint([str(project)]) == before
    spec = _envs.parse_versions([str(project)])[0]
    assert spec.kind == "source" and _envs.spec_fingerprint(spec).startswith("source:")
    (project / "real.py").write_text("x = 1\n")
    assert _envs.extras_fingerprint([str(project)]) != before


def test_local_wheel_key_follows_its_bytes(tmp_path: Path) -> None:
    wheel = tmp_path / "pydantic_ai_harness-1.0-py3-none-any.whl"
    wheel.write_bytes(b"one")
    spec = _envs.parse_versions([str(wheel)])[0]
    k1 = _envs.env_key(spec, "tool", python="p")
    wheel.write_bytes(b"two")
    assert _envs.env_key(spec, "tool", python="p") != k1


def test_the_env_cache_is_the_projects_from_any_subdirectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a subdirectory every folder built and kept its own environments."""
    (tmp_path / "pyproject.toml").write_text("[tool.replay]\n")
    (tmp_path / "tests").mkdir()
    monkeypatch.delenv("REPLAY_ENV_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "tests")
    assert _envs.env_cache_dir().resolve() == (tmp_path / ".replay" / "envs").resolve()
    monkeypatch.chdir(tmp_path)
    assert _envs.env_cache_dir() == Path(".replay/envs")
    monkeypatch.setenv("REPLAY_ENV_DIR", str(tmp_path / "shared"))
    assert _envs.env_cache_dir() == tmp_path / "shared" and _envs.env_cache_dir(Path("x")) == Path("x")


def test_results_are_the_projects_from_any_subdirectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a subfolder (a monorepo's package, `tests/`) the results went to a `.replay/matrix` of its own."""
    (tmp_path / "pyproject.toml").write_text("[tool.replay]\n")
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path / "tests")
    assert mx.results_dir().resolve() == (tmp_path / ".replay" / "matrix").resolve()
    monkeypatch.chdir(tmp_path)
    assert mx.results_dir() == Path(".replay/matrix") and mx.results_dir(Path("x")) == Path("x")


def test_stamped_env_is_reused_and_unstamped_one_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []

    def fake_build(
        info: _envs.EnvInfo, spec: _envs.VersionSpec, installer: _envs.Installer, root: Path, extras: Any = (),
        pins: Any = (),
    ) -> None:
        builds.append(spec.spec)
        _an_env_at(info)
        info.harness, info.slim, info.python, info.freeze = spec.spec, "2.0", "3.11", ["a==1"]

    monkeypatch.setattr(_envs, "_build", fake_build)
    spec = _envs.parse_versions(["0.54.0"])[0]
    inst = _envs.Installer("uv", ("uv",))
    first = _envs.ensure_env(spec, tmp_path, inst, "h")
    assert first.status == "created" and not first.reused and builds == ["0.54.0"]
    second = _envs.ensure_env(spec, tmp_path, inst, "h")
    assert second.status == "reused" and second.reused and second.freeze == ["a==1"] and builds == ["0.54.0"]
    (Path(first.path) / _envs.STAMP).unlink()  # an install killed before the stamp
    assert _envs.ensure_env(spec, tmp_path, inst, "h").status == "created" and len(builds) == 2
    # a new tool source builds a new env and prunes the stale one of the same version
    third = _envs.ensure_env(spec, tmp_path, inst, "h2")
    assert third.path != first.path and not Path(first.path).exists()


def test_ctrl_c_starts_nothing_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a matrix: the queued env builds and replays still ran, one after another, before the
    command ended (12 s after Ctrl-C for four warm versions; minutes of installs on a cold cache)."""
    import time

    started: list[str] = []

    def ensure_env(spec: _envs.VersionSpec, *args: Any, **kwargs: Any) -> _envs.EnvInfo:
        started.append(spec.spec)
        if len(started) == 1:
            raise KeyboardInterrupt  # the interrupt, as the main thread gets it from the first future
        time.sleep(0.3)
        return _envs.EnvInfo(spec.spec, spec.label, spec.kind, "k", str(tmp_path / spec.label), "reused")

    monkeypatch.setattr(_envs, "ensure_env", ensure_env)
    monkeypatch.setattr(mx, "_replay_chunk", lambda *a, **k: started.append("replay") or {})
    versions = _envs.parse_versions(["0.54.0,0.55.0,0.56.0,0.57.0"])
    with pytest.raises(KeyboardInterrupt):
        mx.run_matrix({"a/b": "a/b"}, versions, opts=mx.RunOptions(out=tmp_path / "out"), jobs=1, env_dir=tmp_path,
                      installer=_envs.Installer("uv", ("uv",)), progress=lambda totals: mx.PlainProgress(totals))
    assert len(started) <= 2, started  # the one running when it came may finish; nothing queued starts


def test_a_moved_env_cache_runs_its_own_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache moved with its project (a renamed folder, a CI cache restored under another workspace path):
    a reused env ran the Python at the path its stamp recorded, so every cell was `error: cannot start replay:
    No such file or directory` on every later run (or ran in the other copy's env, where that still existed)."""

    def fake_build(
        info: _envs.EnvInfo, spec: _envs.VersionSpec, installer: _envs.Installer, root: Path, extras: Any = (),
        pins: Any = (),
    ) -> None:
        _an_env_at(info)
        info.harness, info.slim, info.python = spec.spec, "2.0", "3.11"

    monkeypatch.setattr(_envs, "_build", fake_build)
    spec = _envs.parse_versions(["0.54.0"])[0]
    inst = _envs.Installer("uv", ("uv",))
    first = _envs.ensure_env(spec, tmp_path / "a", inst, "h")
    (tmp_path / "a").rename(tmp_path / "b")
    moved = _envs.ensure_env(spec, tmp_path / "b", inst, "h")
    assert moved.status == "reused"
    assert moved.path == str((tmp_path / "b" / Path(first.path).name).resolve())
    assert moved.python_exe.exists()


def test_a_file_outside_scenarios_is_replayed_by_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its scenarios are run by passing the file (an id outside scenarios/ is not found by `run`), so two chunks
    of one file each replayed all of it: `-j 2` took twice as long as `-j 1` (12.0 s against 6.3 s, 8 scenarios)."""
    calls: list[list[str]] = []

    def replay_chunk(py: Path, ids: list[str], targets: dict[str, str], out: Path, opts: Any) -> dict[str, Any]:
        calls.append(list(dict.fromkeys(targets.get(i, i) for i in ids)))
        return {i: {"status": "same", "violations": [], "new_violations": []} for i in ids}

    def ensure_env(spec: _envs.VersionSpec, *args: Any, **kwargs: Any) -> _envs.EnvInfo:
        return _envs.EnvInfo(spec.spec, spec.label, spec.kind, "k", str(tmp_path / spec.label), "reused")

    monkeypatch.setattr(_envs, "ensure_env", ensure_env)
    monkeypatch.setattr(mx, "_replay_chunk", replay_chunk)
    targets = {f"other/s{i}": "other/many.py" for i in range(8)} | {f"g/t{i}": f"g/t{i}" for i in range(8)}
    result = mx.run_matrix(targets, _envs.parse_versions(["0.62.0"]), opts=mx.RunOptions(out=tmp_path / "out"),
                           jobs=2, env_dir=tmp_path, installer=_envs.Installer("uv", ("uv",)),
                           progress=lambda totals: mx.PlainProgress(totals))
    assert result["summary"]["same"] == 16
    assert sum(c.count("other/many.py") for c in calls) == 1, calls  # the file once, not once per chunk
    assert sorted(t for c in calls for t in c if t != "other/many.py") == sorted(f"g/t{i}" for i in range(8))
    assert len(calls) == 2  # still two processes: the file in one, the ids in the other


def test_install_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(
        info: _envs.EnvInfo, spec: _envs.VersionSpec, installer: _envs.Installer, root: Path, extras: Any = (),
        pins: Any = (),
    ) -> None:
        Path(info.path).mkdir(parents=True)
        raise _envs._InstallError("install: no version 9.9.9")

    monkeypatch.setattr(_envs, "_build", failing)
    info = _envs.ensure_env(_envs.parse_versions(["9.9.9"])[0], tmp_path, _envs.Installer("pip"), "h")
    assert info.status == "error" and info.error == "install: no version 9.9.9"
    assert not Path(info.path).exists()


def test_an_env_cache_that_cannot_be_made_is_an_error_cell_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--env-dir` below a file, or on a read-only disk: the env's lock could not be created and the matrix
    ended in a FileNotFoundError traceback; ensure_env's failures come back as ``status='error'``. So does a
    stamp that cannot be written after the install (a full disk)."""
    (tmp_path / "file").write_text("")
    inst = _envs.Installer("uv", ("uv",))
    spec = _envs.parse_versions(["0.54.0"])[0]
    info = _envs.ensure_env(spec, tmp_path / "file" / "envs", inst, "h")
    assert info.status == "error" and str(tmp_path / "file") in (info.error or "")

    def built(
        info: _envs.EnvInfo, spec: _envs.VersionSpec, installer: _envs.Installer, root: Path, extras: Any = (), pins: Any = ()
    ) -> None:
        _an_env_at(info)

    def full(self: Path, *args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(_envs, "_build", built)
    monkeypatch.setattr(Path, "write_text", full)
    info = _envs.ensure_env(spec, tmp_path / "envs", inst, "h")
    assert info.status == "error" and "No space left on device" in (info.error or "")


def test_one_line_picks_the_reason() -> None:
    uv = (
        "Using Python 3.11.7 environment at: env\n"
        "error: No solution found when resolving dependencies\n"
        "  cause: Because there is no version of pydantic-ai-harness==9.9.9 and you require it, "
        "we can conclude that your requirements are unsatisfiable.\n"
        "hint: try something\n"
    )
    assert _envs.one_line(uv).startswith("Because there is no version of pydantic-ai-harness==9.9.9")
    assert _envs.one_line("  × Failed to build\n  ╰─▶ boom\n") == "Failed to build: boom"
    assert _envs.one_line("") == "failed (no message)"
    assert "\n" not in _envs.one_line("a\n" * 500) and len(_envs.one_line("x" * 1000)) <= 240


# --------------------------------------------------------------------------- shards


def test_shards_cover_every_cell_once_and_are_deterministic() -> None:
    scenarios = [f"s{i:02}" for i in range(13)]
    versions = ["0.54.0", "0.60.0", "0.62.0"]
    everything = mx.all_cells(scenarios, versions)
    for n in (1, 2, 3, 4, 7, 39, 50):
        parts = [mx.shard_cells(scenarios, versions, (k, n)) for k in range(1, n + 1)]
        flat = [c for p in parts for c in p]
        assert sorted(flat) == sorted(everything) and len(flat) == len(everything)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
        # same split whatever order the scenarios were discovered in
        again = [mx.shard_cells(list(reversed(scenarios)), versions, (k, n)) for k in range(1, n + 1)]
        assert again == parts
    # contiguous slices: with one shard per version, each runner needs one environment
    assert {v for v, _ in mx.shard_cells(scenarios, versions, (2, 3))} == {"0.60.0"}


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "", "  "])
def test_bad_shard(text: str) -> None:
    """``--shard ""`` (``--shard "$SHARD"`` with the variable unset) ran the whole matrix on every runner."""
    with pytest.raises(ReplayUsageError, match="--shard"):
        mx.parse_shard(text)


def test_parse_shard() -> None:
    assert mx.parse_shard("2/4") == (2, 4)
    assert mx.parse_shard(None) is None


# --------------------------------------------------------------------------- cells


RUN_CHANGED = {
    "status": "changed",
    "result": "out/0.54.0/seed001/x.cassette",
    "roles": {"main": [1, 1], "summarizing_compaction": [1, 2]},
    "main_requests": [{"role": "main", "index": 0, "messages": [1, 1], "estimate": [4, 12]}],
    "requests": [
        {
            "role": "main",
            "index": 0,
            "status": "changed",
            "messages": [1, 1],
            "estimate": [4, 12],
            "lost": ["Summary. U6 U11"],
            "gained": ["Summary of previous"],
            "changes": [
                {
                    "path": "main[0].messages[0].parts[5]",
                    "kind": "removed",
                    "old": {"content": "U11", "part_kind": "user-prompt"},
                },
                {"path": "main[0].messages[0].parts[0].content", "kind": "changed", "old": "a", "new": "b"},
            ],
        },
        {"role": "summarizing_compaction", "index": 1, "status": "added", "lost": [], "gained": [], "changes": []},
    ],
    "observations": [{"path": "observations.x", "kind": "changed", "old": 1, "new": 2}],
    "notes": [],
    "new_violations": [
        {"invariant": "content_lost", "role": "main", "index": 0, "message": "lost U11", "evidence": {}}
    ],
    "violations": [],
}


def test_changed_cell_names_requests_deltas_and_lost_parts() -> None:
    cell = mx.cell_from_run(RUN_CHANGED)
    assert cell["status"] == "changed"
    assert cell["changed_requests"] == ["main[0]", "summarizing_compaction[1]"]
    assert cell["roles"] == {"summarizing_compaction": [1, 2]}
    assert cell["estimate_deltas"] == "4→12"
    assert cell["lost"] == ["Summary. U6 U11", "U11"]
    assert cell["lost_parts"] == ["U11"]
    assert cell["new_violations"][0]["invariant"] == "content_lost"
    lines = mx.cell_lines(cell)
    assert (
        lines[0] == "changed"
        and "est 4→12" in lines
        and "lost U11" in lines
        and "requests summarizing_compaction 1→2" in lines
    )
    assert "new violation: content_lost main[0]" in lines


def test_a_cell_keeps_each_agents_estimates_apart() -> None:
    """An orchestrator and its SubAgents delegates: deltas named per agent that moved, the chart's pairs main's only."""
    run = json.loads(json.dumps(RUN_CHANGED))
    run["main_requests"] = [
        {"role": "main", "index": 0, "messages": [1, 1], "estimate": [76, 76]},
        {"role": "main", "index": 1, "messages": [3, 3], "estimate": [101, 140]},
        {"role": "researcher", "index": 0, "messages": [1, 1], "estimate": [6, 6]},
        {"role": "writer", "index": 0, "messages": [1, 1], "estimate": [3, 9]},
    ]
    cell = mx.cell_from_run(run)
    assert cell["estimate_deltas"] == "main 76, 101→140; writer 3→9"
    assert cell["estimates"] == [[76, 76], [101, 140]]


def test_same_and_error_cells() -> None:
    assert mx.cell_from_run({"status": "same", "requests": []})["status"] == "same"
    err = mx.cell_from_run({"status": "error", "error": "boom\nmore"})
    assert err == {"status": "error", "error": "boom: more", "violations": [], "new_violations": []}


def test_a_python_warning_reaches_the_cell() -> None:
    w = "recorded on Python 3.11.7, replayed on Python 3.12.1: a difference may come from the Python version"
    cell = mx.cell_from_run({"status": "same", "requests": [], "warnings": [w]})
    assert cell["warnings"] == [w] and mx.cell_lines(cell) == ["same", f"warning: {w}"]


# --------------------------------------------------------------------------- merge


def _shard_result(shard: tuple[int, int], statuses: dict[tuple[str, str], str]) -> dict:
    scenarios = ["a", "b"]
    versions = ["0.54.0", "0.62.0"]
    mine = mx.shard_cells(scenarios, versions, shard)
    out: dict[str, dict[str, dict]] = {}
    for v, s in mine:
        out.setdefault(s, {})[v] = {"status": statuses[(s, v)], "violations": [], "new_violations": []}
    rows = [
        {"spec": v, "label": v, "status": "reused" if any(c[0] == v for c in mine) else "skipped", "harness": v}
        for v in versions
    ]
    return mx._finish(
        {
            "matrix": mx.FORMAT_VERSION,
            "shard": f"{shard[0]}/{shard[1]}",
            "grid": {"scenarios": scenarios, "versions": versions},
            "versions": rows,
            "scenarios": out,
        }
    )


STATUSES = {("a", "0.54.0"): "changed", ("b", "0.54.0"): "same", ("a", "0.62.0"): "same", ("b", "0.62.0"): "same"}


def test_merged_shards_say_every_version_only_when_the_whole_row_has_it(tmp_path: Path) -> None:
    """A violation on 0.58.0 and 0.62.0 but not 0.54.0: shard 2/2 (those two cells) marked it "every version",
    and the merge kept that mark although the whole row (and the unsharded run) says otherwise."""
    versions = ["0.54.0", "0.58.0", "0.62.0"]

    def cell(version: str) -> dict[str, Any]:
        if version == "0.54.0":
            return {"status": "changed", "violations": [], "new_violations": []}
        grown = {"invariant": "content_lost", "role": "main", "index": 0, "slot": "content_lost main[0]",
                 "status": "unchanged", "message": "lost U1"}
        return {"status": "same", "violations": [grown], "new_violations": []}

    def doc(shard: tuple[int, int] | None) -> dict[str, Any]:
        mine = mx.shard_cells(["s"], versions, shard)
        return mx._finish({
            "matrix": mx.FORMAT_VERSION, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "grid": {"scenarios": ["s"], "versions": versions},
            "versions": [{"spec": v, "label": v, "status": "reused"} for v in versions],
            "scenarios": {"s": {v: cell(v) for v, _ in mine}},
        })

    whole = doc(None)
    paths = []
    for k in (1, 2):
        paths.append(tmp_path / f"shard-{k}.json")
        paths[-1].write_text(json.dumps(doc((k, 2))))
    merged = mx.merge_results(mx.load_results(paths))
    assert merged["scenarios"] == whole["scenarios"]
    assert not any("every version" in line for line in mx.cell_lines(merged["scenarios"]["s"]["0.62.0"]))
    # nor does the shard itself, which holds two of the row's three versions, say "every version"
    alone = doc((2, 2))["scenarios"]["s"]["0.62.0"]
    assert not any("every version" in line for line in mx.cell_lines(alone)), mx.cell_lines(alone)


def test_a_scenario_file_that_fails_to_import_points_at_its_scenarios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error cell of a file a version cannot import (a capability it lacks) had no file or line: its
    GitHub annotation landed on no file of the pull request, its JUnit case had no ``file``/``line``."""
    from replay.cli import _import_errors
    from replay.reporter import report_json
    from replay.scenario import ImportFailure

    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    newer = tmp_path / "scenarios" / "newer.py"
    newer.write_text("from pydantic_ai_harness.approval_reviewer import ApprovalReviewer\n"
                     "from replay import scenario\n\n\n@scenario('mine/newer')\nasync def newer(run):\n    ...\n")
    reason = f"{newer}: failed to import: ModuleNotFoundError: No module named 'pydantic_ai_harness.approval_reviewer'"
    (report,) = _import_errors([ImportFailure(newer, reason, ("mine/newer",))], [])
    cell = mx.cell_from_run(report_json(report))
    assert (cell["status"], cell.get("file"), cell.get("line")) == ("error", "scenarios/newer.py", 5)
    result = mx._finish({"grid": {"scenarios": ["mine/newer"], "versions": ["0.54.0"]}, "versions": [],
                         "scenarios": {"mine/newer": {"0.54.0": cell}}})
    (annotation,) = mx.github_annotations(result)
    assert annotation.startswith("::error file=scenarios/newer.py,line=5,title=")


def test_exit_code_tells_a_change_from_an_incomplete_matrix(tmp_path: Path) -> None:
    """Exit 1 is a harness that changed behaviour; a cell with no verdict (a version that would not
    install, a scenario that failed to import, a shard missing from the merge) is 2, as `run` exits 2 on
    an error verdict. Both were 1: a CI job could not tell an upgrade's regression from a broken install."""
    assert mx.exit_code(_shard_result((2, 2), STATUSES)) == 0
    assert mx.exit_code(_shard_result((1, 2), STATUSES)) == 1
    errored = _shard_result((1, 1), {**STATUSES, ("b", "0.62.0"): "error"})
    assert mx.exit_code(errored) == 2
    only_error = {k: "same" for k in STATUSES} | {("b", "0.62.0"): "error"}
    assert mx.exit_code(_shard_result((1, 1), only_error)) == 2
    path = tmp_path / "shard1.json"
    path.write_text(json.dumps(_shard_result((2, 2), STATUSES)))  # all same, but shard 1/2 never reported
    assert mx.exit_code(mx.merge_results(mx.load_results([path]))) == 2


def test_merge_of_two_shards_is_the_whole_table(tmp_path: Path) -> None:
    one, two = _shard_result((1, 2), STATUSES), _shard_result((2, 2), STATUSES)
    assert one["changed"] and not two["changed"]
    paths = []
    for i, doc in enumerate((two, one)):
        p = tmp_path / f"shard{i}.json"
        p.write_text(json.dumps(doc))
        paths.append(p)
    merged = mx.merge_results(mx.load_results(paths))
    assert {(s, v): c["status"] for s, row in merged["scenarios"].items() for v, c in row.items()} == STATUSES
    assert merged["summary"] == {"same": 3, "changed": 1, "error": 0}
    assert mx.exit_code(merged) == 1
    assert [r["status"] for r in merged["versions"]] == ["reused", "reused"]
    assert merged["merged"] == ["1/2", "2/2"]
    md = mx.render_markdown(merged)
    assert "| `a` | ⚠️ changed | ✅ same |" in md


def test_merge_reports_missing_shards_and_refuses_other_matrices() -> None:
    merged = mx.merge_results([("1", _shard_result((1, 2), STATUSES))])
    assert merged["scenarios"]["b"]["0.62.0"]["status"] == "error"
    assert "missing" in merged["scenarios"]["b"]["0.62.0"]["error"]
    other = _shard_result((2, 2), STATUSES)
    other["grid"] = {"scenarios": ["a"], "versions": ["0.62.0"]}
    with pytest.raises(ReplayUsageError, match="different matrix"):
        mx.merge_results([("1", _shard_result((1, 2), STATUSES)), ("2", other)])
    with pytest.raises(ReplayUsageError, match="not a replay matrix"):
        mx.merge_results([("x", {"changed": False, "scenarios": {}})])


def test_one_line_for_pip() -> None:
    pip = (
        "WARNING: Location 'file:///x' is ignored: it is neither a file nor a directory.\n"
        "ERROR: Could not find a version that satisfies the requirement pydantic-ai-harness==9.9.9 (from versions: 0.1)\n"
        "ERROR: No matching distribution found for pydantic-ai-harness==9.9.9\n"
    )
    assert _envs.one_line(pip) == "No matching distribution found for pydantic-ai-harness==9.9.9"


def test_one_line_for_uv_cause_chain() -> None:
    uv = (
        "error: Failed to build `pydantic-ai-harness @ file:///src`\n"
        "  cause: Failed to parse entry: `pydantic-ai-slim`\n"
        "  cause: `pydantic-ai-slim` references a workspace in `tool.uv.sources`, but is not a workspace member\n"
    )
    assert _envs.one_line(uv) == (
        "Failed to build `pydantic-ai-harness @ file:///src`: "
        "`pydantic-ai-slim` references a workspace in `tool.uv.sources`, but is not a workspace member"
    )


def test_python_axis_makes_one_column_per_python_and_harness() -> None:
    versions = _envs.with_pythons(_envs.parse_versions(["0.54.0,0.62.0"]), ["3.12", "3.13", "3.12"])
    assert [v.spec for v in versions] == ["0.54.0@py3.12", "0.62.0@py3.12", "0.54.0@py3.13", "0.62.0@py3.13"]
    assert [v.label for v in versions][0] == "0.54.0-py3.12" and versions[0].python == "3.12"
    assert _envs.with_pythons(_envs.parse_versions(["0.62.0"]), []) == _envs.parse_versions(["0.62.0"])


def test_find_python_prefers_pyenv_and_skips_broken_shims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    root = tmp_path / "pyenv"
    for v in ("3.12.1", "3.12.9", "3.13.0"):
        exe = root / "versions" / v / "bin" / "python"
        exe.parent.mkdir(parents=True)
        exe.write_text("")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    probed: list[str] = []

    def probe(exe: str) -> str | None:
        probed.append(exe)
        return None if "3.12.9" in exe else f"cpython-{Path(exe).parent.parent.name}"  # 3.12.9: a broken install

    monkeypatch.setattr(_envs, "_probe_python", probe)
    monkeypatch.setattr(_envs.shutil, "which", lambda name: None)
    exe, tag = _envs.find_python("3.12", _envs.Installer("pip"))
    assert tag == "cpython-3.12.1" and exe.endswith("3.12.1/bin/python") and "3.12.9" in probed[0]
    assert _envs.find_python("3.13", _envs.Installer("pip"))[1] == "cpython-3.13.0"
    assert _envs.find_python(None, _envs.Installer("pip"))[0] == sys.executable
    with pytest.raises(_envs._InstallError, match="--python 3.9: no such interpreter"):
        _envs.find_python("3.9", _envs.Installer("pip"))


def test_env_key_follows_the_interpreter() -> None:
    spec = _envs.parse_versions(["0.62.0"])[0]
    assert _envs.env_key(spec, "t", "cpython-3.12.1") != _envs.env_key(spec, "t", "cpython-3.13.0")


def test_prune_never_removes_an_env_another_run_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: two runs share .replay/envs with different keys; one's prune must not delete the other's env."""
    from contextlib import ExitStack

    def fake_build(
        info: _envs.EnvInfo, spec: _envs.VersionSpec, installer: _envs.Installer, root: Path, extras: Any = (), pins: Any = ()
    ) -> None:
        _an_env_at(info)
        info.harness = spec.spec

    monkeypatch.setattr(_envs, "_build", fake_build)
    spec = _envs.parse_versions(["0.54.0"])[0]
    inst = _envs.Installer("uv", ("uv",))
    with ExitStack() as hold:
        mine = _envs.ensure_env(spec, tmp_path, inst, "tool-a", hold=hold)
        other = _envs.ensure_env(spec, tmp_path, inst, "tool-b")  # builds, then prunes the same label
        assert other.status == "created" and Path(mine.path).is_dir() and (Path(mine.path) / _envs.STAMP).is_file()
        again = _envs.ensure_env(spec, tmp_path, inst, "tool-a", hold=hold)  # a shared lock twice is fine
        assert again.status == "reused" and again.path == mine.path
    _envs.ensure_env(spec, tmp_path, inst, "tool-c")  # nobody holds tool-a's env any more
    assert not Path(mine.path).exists() and not Path(other.path).exists()


def test_changed_cell_names_observations_and_the_outcome_error() -> None:
    """seed002/whitespace on 0.54.0: the telling facts, not 'outcome changed / 5 observations changed'."""
    run = {
        "status": "changed",
        "requests": [],
        "main_requests": [],
        "outcome": [
            {"status": "error", "error": {"type": "pydantic_ai.exceptions.UnexpectedModelBehavior", "message": "x"}},
            {"status": "ok", "output": "done"},
        ],
        "observations": [
            {"path": "observations.note_alpha_in_history", "kind": "changed", "old": True, "new": False},
            {"path": "observations.turns", "kind": "changed", "old": 3, "new": 4},
            {"path": "observations.a", "kind": "changed", "old": 1, "new": 2},
            {"path": "observations.b", "kind": "changed", "old": 1, "new": 2},
        ],
    }
    lines = mx.cell_lines(mx.cell_from_run(run))
    assert "outcome UnexpectedModelBehavior → ok" in lines
    assert "observation note_alpha_in_history true→false" in lines and "observation turns 3→4" in lines
    assert "2 more observations changed" in lines


def test_outcome_with_the_same_status_names_where_the_output_differs() -> None:
    """seed003/* on 0.52.0 printed `outcome ok → ok`: say which part of the output changed."""
    pair = [{"status": "ok", "output": {"core dangling calls": 1, "valid": True}},
            {"status": "ok", "output": {"core dangling calls": None, "valid": True}}]
    assert mx._outcome_line(pair) == "outcome output.core dangling calls 1→null"
    assert mx._outcome_line([{"status": "ok", "output": "a"}, {"status": "ok", "output": "b"}]) == "outcome output a→b"
    assert mx._outcome_line([{"status": "ok", "output": [1, 2]}, {"status": "ok", "output": [1, 3]}]) == "outcome output[1] 2→3"


def test_an_env_process_keeps_its_bytecode_inside_the_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the user's PYTHONDONTWRITEBYTECODE says: compiled once into the env, never beside their files."""
    for var in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "VIRTUAL_ENV", "GITHUB_STEP_SUMMARY", "PYTHONPYCACHEPREFIX"):
        monkeypatch.setenv(var, "1")
    env = _envs.cell_environ(_envs.env_python(tmp_path / "0.62.0-abc"))
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "0.62.0-abc" / ".pycache")
    assert not {"PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "VIRTUAL_ENV", "GITHUB_STEP_SUMMARY"} & env.keys()


def test_every_cell_iterates_sets_in_one_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario joining a set read as changed on 0.61 and same on 0.62 by each process's hash seed."""
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    assert _envs.cell_environ(_envs.env_python(tmp_path / "0.62.0-abc"))["PYTHONHASHSEED"] == "0"
    monkeypatch.setenv("PYTHONHASHSEED", "random")  # the user's own choice stands
    assert _envs.cell_environ(_envs.env_python(tmp_path / "0.62.0-abc"))["PYTHONHASHSEED"] == "random"


def test_matrix_junit_and_annotations_point_at_the_scenario_as_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --format junit` carried time, file and line and `run` annotated a PR; the matrix did neither."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    run = json.loads(json.dumps(RUN_CHANGED))
    run.update(file=str(tmp_path / "scenarios" / "chat.py"), line=12, seconds=1.25)
    changed = mx.cell_from_run(run)
    same = mx.cell_from_run({"status": "same", "requests": [], "file": "scenarios/chat.py", "line": 3, "seconds": 0.5})
    result = {"grid": {"scenarios": ["chat/a", "chat/b"], "versions": ["0.54.0"]},
              "versions": [{"spec": "0.54.0", "label": "0.54.0"}],
              "scenarios": {"chat/a": {"0.54.0": changed}, "chat/b": {"0.54.0": same}}}
    xml = mx.render_junit(result)
    assert '<testcase classname="chat" name="a" time="1.250" file="scenarios/chat.py" line="12">' in xml
    assert '<testcase classname="chat" name="b" time="0.500" file="scenarios/chat.py" line="3">' in xml
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    (note,) = mx.github_annotations(result)  # the changed cell only
    assert note.startswith("::error file=scenarios/chat.py,line=12,title=harness-replay%3A chat/a changed on harness 0.54.0::changed%0A")


def test_a_report_quotes_a_violation_whole_where_the_table_cuts_it() -> None:
    """The report's "vs the recording" row ended "(new since the re..." mid-word: it is the evidence pasted upstream."""
    long = "compaction lost A9, U10, A10, U11: in neither the summarizer input nor the kept history " * 3 + "(new since the recording: U11)"
    cell = {"status": "changed", "violations": [{"status": "worse", "invariant": "content_lost", "role": "main", "index": 0, "message": long}]}
    (cut,) = [ln for ln in mx.cell_lines(cell) if ln.startswith("violation")]
    assert cut.endswith("...") and len(cut) < len(long)
    (whole,) = [ln for ln in mx.cell_lines(cell, message_limit=None) if ln.startswith("violation")]
    assert whole.endswith("(new since the recording: U11)")


def test_markdown_cells_carry_no_html_or_links_of_a_cassette_or_shard() -> None:
    """The step summary is rendered by GitHub: an observation ``<img src=…>`` in a cassette and a version
    field of an untrusted shard became an image and a link there (only ``|`` and backticks were escaped)."""
    doc = _shard_result((1, 1), STATUSES)
    doc["versions"][0]["harness"] = "<img src=https://evil.example/p.png>"
    doc["versions"][0]["slim"] = "[click me](https://evil.example)"
    cell = doc["scenarios"]["a"]["0.54.0"]
    cell["observation_changes"] = [{"path": "observations.o", "old": "x", "new": "<img src=https://evil.example/q.png>"}]
    cell["changed_requests"] = ["main[0] <b>bold</b> a|b"]
    md = mx.render_markdown(doc)
    assert "<img" not in md and "<b>" not in md and not re.search(r"(?<!\\)\]\(https://evil", md), md
    assert "&lt;img src=https://evil.example/p.png&gt;" in md and "\\[click me\\](https://evil.example)" in md
    assert "a\\|b" in md  # still one cell


def test_a_cheap_runs_cost_keeps_its_figures() -> None:
    """gpt-4o-mini's price makes a run cost fractions of a cent: to four decimals a 5% cheaper run read
    ``cost $0.0000→$0.0000`` in the cell and ``estimated cost $0.0000 → $0.0000 (-5%)`` in the diff."""
    from replay.reporter import dollars

    cell = {"status": "changed", "changed_requests": ["main[1]"], "cost": [0.0000042, 0.0000040]}
    assert "cost $0.0000042→$0.0000040" in mx.cell_lines(cell)
    assert mx.cell_lines({"status": "same", "cost": [0.0000045, 0.0000045]})[1] == "cost $0.0000045"
    assert dollars(12.3456) == "$12.3456" and dollars(0.0) == "$0.0000" and dollars(0.0125) == "$0.0125"


def test_a_new_env_links_the_interpreters_compiled_standard_library(tmp_path: Path) -> None:
    """Where PYTHONPYCACHEPREFIX looks for them: <prefix>/<source dir>/<name>.<tag>.pyc, linked, not copied."""
    stdlib = tmp_path / "base" / "lib" / "python3.11"
    for folder in (stdlib / "__pycache__", stdlib / "json" / "__pycache__", stdlib / "test" / "__pycache__"):
        folder.mkdir(parents=True)
    (stdlib / "__pycache__" / "os.cpython-311.pyc").write_bytes(b"os")
    (stdlib / "__pycache__" / "os.cpython-311.opt-1.pyc").write_bytes(b"optimised: not what a cell reads")
    (stdlib / "__pycache__" / "os.cpython-312.pyc").write_bytes(b"another interpreter's")
    (stdlib / "json" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"json")
    (stdlib / "test" / "__pycache__" / "test_os.cpython-311.pyc").write_bytes(b"no replay imports the tests")
    env = tmp_path / "env"
    assert _envs._seed_stdlib_bytecode(env, str(stdlib), "cpython-311") == 2
    cache = env / _envs.PYCACHE / str(stdlib).lstrip("/")
    assert sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*.pyc")) == ["json/__init__.cpython-311.pyc", "os.cpython-311.pyc"]
    assert (cache / "os.cpython-311.pyc").stat().st_ino == (stdlib / "__pycache__" / "os.cpython-311.pyc").stat().st_ino
    assert _envs._seed_stdlib_bytecode(env, str(stdlib), "cpython-311") == 0  # already there: nothing to do
    assert _envs._seed_stdlib_bytecode(env, "relative/lib", "cpython-311") == 0


def test_a_new_env_links_the_bytecode_this_process_has_of_the_same_sources(tmp_path: Path) -> None:
    """uv installs a dependency at the version running here from one cache (often the very file): its bytecode
    exists already, and the env's first process compiled it again (≈ 1 s of CPU an env). Linked where Python
    would take it for the env's source (the header's mtime and size, or a hash Python checks), else left alone."""
    import importlib.util
    import os
    import py_compile

    ours, theirs = tmp_path / "ours" / "site-packages", tmp_path / "env" / "lib" / "site-packages"
    for site in (ours, theirs):
        (site / "pkg").mkdir(parents=True)
    for name, text in (("same.py", "A = 1\n"), ("edited.py", "B = 2\n"), ("hashed.py", "C = 3\n"), ("unchecked.py", "D = 4\n"),
                       ("uncompiled.py", "E = 5\n")):
        (ours / "pkg" / name).write_text(text)
        (theirs / "pkg" / name).write_text(text.replace("2", "22") if name == "edited.py" else text)
        os.utime(theirs / "pkg" / name, (1_700_000_000, 1_700_000_000))
        os.utime(ours / "pkg" / name, (1_700_000_000, 1_700_000_000))
    modes = {"same.py": py_compile.PycInvalidationMode.TIMESTAMP, "edited.py": py_compile.PycInvalidationMode.TIMESTAMP,
             "hashed.py": py_compile.PycInvalidationMode.CHECKED_HASH,
             "unchecked.py": py_compile.PycInvalidationMode.UNCHECKED_HASH}
    for name, mode in modes.items():
        py_compile.compile(str(ours / "pkg" / name), invalidation_mode=mode, doraise=True)
    tag = importlib.util.cache_from_source("x.py").rsplit(".", 2)[-2]
    env = tmp_path / "env"
    assert _envs._seed_site_bytecode(env, str(theirs), str(ours), tag) == 2
    cache = env / _envs.PYCACHE / str(theirs / "pkg").lstrip("/")
    assert sorted(p.name for p in cache.iterdir()) == [f"hashed.{tag}.pyc", f"same.{tag}.pyc"]
    same = Path(importlib.util.cache_from_source(str(ours / "pkg" / "same.py")))
    assert (cache / f"same.{tag}.pyc").stat().st_ino == same.stat().st_ino
    assert _envs._seed_site_bytecode(env, str(theirs), str(ours), tag) == 0  # already there: nothing to do
    assert _envs._seed_site_bytecode(tmp_path / "env2", str(theirs), str(ours), "another-311") == 0  # another interpreter


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_python_is_bad_input_not_dropped(blank: str) -> None:
    """`--python ""` (an unset CI variable, `--python $PY`) was dropped unsaid: the matrix ran on the default
    Python alone, where `--harness ""` is refused."""
    with pytest.raises(ReplayUsageError, match=r"^--python '': give a version \(e\.g\. 3\.12\) or an interpreter path$"):
        _envs.with_pythons(_envs.parse_versions(["0.62.0"]), ["3.12", blank])


def test_a_message_the_observed_history_lost_is_lost_in_the_cell_too() -> None:
    """seed001/compact_direct_keep_user_messages_true on 0.54.0: no main request, the kept history lost U11;
    `replay diff` (every format) says `lost U11`, the matrix cell said nothing was lost."""
    run = {
        "status": "changed",
        "roles": {"summarizing_compaction": [1, 1]},
        "main_requests": [],
        "requests": [
            {"role": "summarizing_compaction", "index": 0, "status": "changed", "lost": [], "gained": [], "changes": []},
            {"role": "history:compacted", "index": 0, "status": "changed", "messages": [6, 5], "estimate": [None, None],
             "lost": ["U11"], "gained": [], "changes": []},
        ],
        "violations": [],
        "new_violations": [],
    }
    cell = mx.cell_from_run(run)
    assert cell["lost"] == ["U11"]
    assert "lost U11" in mx.cell_lines(cell)


@pytest.mark.parametrize("seconds", ["abc", float("inf"), -1.0])
def test_a_results_file_with_a_bad_duration_is_one_line_not_a_broken_junit(tmp_path: Path, seconds: Any) -> None:
    """`replay merge --format junit` of a shard whose cell has ``"seconds": "abc"`` ended in a traceback
    (float('abc')); ``Infinity`` wrote ``time="inf"``, which no JUnit reader takes. The schema refuses both."""
    from replay.matrix._shards import load_shard

    cell = {"status": "same", "seconds": seconds}
    doc = {"matrix": 1, "grid": {"scenarios": ["s/a"], "versions": ["v"]}, "versions": [{"spec": "v"}],
           "scenarios": {"s/a": {"v": cell}}}
    path = tmp_path / "shard.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ReplayUsageError, match="seconds"):
        load_shard(path)


def test_a_cell_counts_the_divergences_it_does_not_quote() -> None:
    """Three divergences: `replay run` lists three, the cell quoted the first and said nothing of the other two
    (a cell's wire line says `+N` for those it leaves out)."""
    cell = {"status": "changed", "notes": ["main[1]: no recorded answer", "main[2]: extra call", "main[3]: extra call"]}
    assert "divergence: main[1]: no recorded answer +2" in mx.cell_lines(cell)


# --------------------------------------------------------------------------- the caller's dependency versions


def test_envs_hold_the_callers_dependency_versions_but_not_the_harness_family() -> None:
    """A column differs from where the matrix runs by the harness alone: a newer pydantic or SDK an
    index offers must not read as the harness having changed."""
    import importlib.metadata as md

    pins = _envs.caller_pins()
    assert f"pydantic=={md.version('pydantic')}" in pins and f"msgpack=={md.version('msgpack')}" in pins
    names = {p.split("==")[0] for p in pins}
    assert not names & {"pydantic-ai-slim", "pydantic-ai-harness", "pydantic-graph", "harness-replay"}
    # what --with asks for is the user's to choose, in any spelling
    assert "msgpack" not in {p.split("==")[0] for p in _envs.caller_pins(["MsgPack>=1.0"])}
    spec = _envs.parse_versions(["0.54.0"])[0]
    assert _envs.env_key(spec, "t", "cpython-3.11.0", pins) != _envs.env_key(spec, "t", "cpython-3.11.0", pins[1:])


def _fake_installer(monkeypatch: pytest.MonkeyPatch, refuse_pins: bool) -> list[list[str]]:
    import subprocess

    calls: list[list[str]] = []

    def run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if "install" in cmd and "--constraint" in cmd and refuse_pins and "pydantic==" in Path(cmd[cmd.index("--constraint") + 1]).read_text():
            return subprocess.CompletedProcess(cmd, 1, "", "  × No solution found\n  ╰─▶ Because pydantic-ai-slim==2.54.0 depends on pydantic>=2.15 and you require pydantic==2.14.4, we can conclude that your requirements are unsatisfiable.\n")
        if "-c" in cmd:  # the probe
            return subprocess.CompletedProcess(cmd, 0, json.dumps({"harness": "0.54.0", "slim": "2.54.0", "python": "3.11.0", "stdlib": "", "cache_tag": None}), "")
        return subprocess.CompletedProcess(cmd, 0, "pydantic==2.14.4\n" if "freeze" in cmd else "", "")

    monkeypatch.setattr(_envs, "_run", run)
    return calls


def _built(tmp_path: Path, installer: _envs.Installer, pins: list[str]) -> _envs.EnvInfo:
    """An env of 0.54.0 built with ``pins`` by the fake installer (this tool installed from its checkout)."""
    spec = _envs.parse_versions(["0.54.0"])[0]
    info = _envs.EnvInfo(spec.spec, spec.label, spec.kind, "k", str(tmp_path / "env"), "created")
    (tmp_path / "env").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    _envs._build(info, spec, installer, tmp_path, (), pins)
    return info


def test_an_env_is_installed_with_the_pins_as_constraints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_installer(monkeypatch, refuse_pins=False)
    info = _built(tmp_path, _envs.Installer("uv", ("uv",)), ["httpx==0.29.0", "pydantic==2.14.4"])
    installs = [c for c in calls if "install" in c]
    assert len(installs) == 1 and "--constraint" in installs[0]
    held = Path(installs[0][installs[0].index("--constraint") + 1])
    assert held.read_text() == "httpx==0.29.0\npydantic==2.14.4\n"
    assert info.pinned == 2 and info.unpinned is None


def test_a_harness_that_refuses_the_pins_resolves_afresh_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_installer(monkeypatch, refuse_pins=True)
    info = _built(tmp_path, _envs.Installer("pip"), ["pydantic==2.14.4"])
    installs = [c for c in calls if "install" in c]
    assert [("--constraint" in c) for c in installs] == [True, False]
    assert info.pinned == 0 and info.unpinned is not None and info.unpinned.startswith("Because pydantic-ai-slim==2.54.0")
    line = mx._version_line(info.as_json())
    assert "dependencies resolved afresh" in line and "Because pydantic-ai-slim==2.54.0" in line
    assert "dependencies held" in mx._version_line({**info.as_json(), "pinned": 2, "unpinned": None})


def test_a_refusal_lets_go_of_the_pins_it_names_and_keeps_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_installer(monkeypatch, refuse_pins=True)
    info = _built(tmp_path, _envs.Installer("uv", ("uv",)), ["httpx==0.29.0", "pydantic==2.14.4", "pydantic-core==2.50.5"])
    installs = [c for c in calls if "install" in c]
    assert [("--constraint" in c) for c in installs] == [True, True]  # no afresh install: httpx and pydantic-core stay held
    assert Path(installs[-1][installs[-1].index("--constraint") + 1]).read_text() == "httpx==0.29.0\npydantic-core==2.50.5\n"
    assert info.pinned == 2 and info.unpinned is not None
    line = mx._version_line(info.as_json())
    assert "held to the caller's versions (2 pins), some resolved afresh (Because pydantic-ai-slim==2.54.0" in line


def test_two_interpreter_paths_of_one_file_name_are_two_columns() -> None:
    """``--python ~/.pyenv/versions/3.12.1/bin/python --python …/3.13.0/bin/python``: both were ``pypython``, so one
    env, one results folder and one set of figures stood for both columns (each read ``replayed on Python 3.12.1``).
    A path is named by as many of its last components as tell it apart; a lone path and a version as before."""
    a, b = "/opt/pyenv/versions/3.12.1/bin/python", "/opt/pyenv/versions/3.13.0/bin/python"
    versions = _envs.with_pythons(_envs.parse_versions(["0.62.0"]), [a, b])
    assert [v.label for v in versions] == ["0.62.0-py3.12.1_bin_python", "0.62.0-py3.13.0_bin_python"]
    assert [v.python for v in versions] == [a, b]
    assert [v.label for v in _envs.with_pythons(_envs.parse_versions(["0.62.0"]), [a, "3.13"])] == [
        "0.62.0-pypython", "0.62.0-py3.13"]

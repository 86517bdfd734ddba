"""``replay matrix``: replay the cassettes on several harness versions, one isolated env each.

Why subprocesses: a harness version pins its own pydantic-ai-slim, so two versions can
never share an interpreter. Each version gets a cached env (see :mod:`replay.matrix._envs`) and
runs the ordinary ``python -m replay run --format json`` there; this module only plans
the cells, runs those processes in parallel and folds their JSON into a scenario ×
version table. The baseline of every cell is the recorded cassette.

Beyond one machine, ``--shard K/N`` keeps only the K-th of N contiguous slices of the
cells (sorted by version as given, then scenario id, so each runner needs few envs) and
``replay merge`` joins the shards' JSON. A GitHub Actions workflow::

    jobs:
      matrix:
        runs-on: ubuntu-latest
        strategy:
          fail-fast: false
          matrix:
            shard: [1, 2, 3, 4]
        steps:
          - uses: actions/checkout@v4
          - uses: astral-sh/setup-uv@v5
          - uses: actions/cache@v4
            with:
              path: .replay/envs
              key: replay-envs-${{ runner.os }}-shard${{ matrix.shard }}-${{ hashFiles('replay/**/*.py', 'pyproject.toml') }}
          - run: uv venv && uv pip install -e .
          - run: >
              .venv/bin/replay matrix --harness 0.54.0,0.60.0,0.62.0
              --shard ${{ matrix.shard }}/4 --format json > shard-${{ matrix.shard }}.json || true
          - uses: actions/upload-artifact@v4
            with:
              name: replay-shard-${{ matrix.shard }}
              path: shard-${{ matrix.shard }}.json
      report:
        needs: matrix
        if: always()
        runs-on: ubuntu-latest
        steps:
          - uses: actions/checkout@v4
          - uses: astral-sh/setup-uv@v5
          - run: uv venv && uv pip install -e .
          - uses: actions/download-artifact@v4
            with:
              pattern: replay-shard-*
              merge-multiple: true
          - run: .venv/bin/replay merge shard-*.json --format markdown

``merge`` appends its Markdown to ``$GITHUB_STEP_SUMMARY`` and exits 1 when a cell
changed, 2 when one errored or is missing (a shard that never reported).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from xml.sax.saxutils import escape, quoteattr

from ..cassette import clean_stale_temps
from ..differ import message_label
from ..errors import ReplayUsageError
from ..reporter import _relative, annotation, dollars, write_step_summary
from ..reporter.html import chart_role
from . import _envs

FORMAT_VERSION = 1
Cell = dict[str, Any]
Result = dict[str, Any]


# --------------------------------------------------------------------------- planning


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"K/N"`` with 1 <= K <= N, or None for the whole matrix."""
    if text is None:
        return None
    if not text.strip():  # `--shard "$SHARD"` with the variable unset: every runner ran the whole matrix
        raise ReplayUsageError("--shard '': expected K/N with 1 <= K <= N (e.g. 2/4); an unset variable?")
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ReplayUsageError(f"--shard {text}: expected K/N with 1 <= K <= N (e.g. 2/4)")
    return int(m.group(1)), int(m.group(2))


def all_cells(scenarios: Sequence[str], versions: Sequence[str]) -> list[tuple[str, str]]:
    """Every (version, scenario) cell in a fixed order: versions as given, scenario ids sorted."""
    return [(v, s) for v in versions for s in sorted(set(scenarios))]


def shard_cells(
    scenarios: Sequence[str], versions: Sequence[str], shard: tuple[int, int] | None
) -> list[tuple[str, str]]:
    """The K-th of N contiguous, near-equal slices of the cells; slices cover each cell once.

    Contiguous rather than round-robin so that a runner touches one or two versions and
    builds only those envs.
    """
    cells = all_cells(scenarios, versions)
    if shard is None:
        return cells
    k, n = shard
    return cells[(k - 1) * len(cells) // n : k * len(cells) // n]


# --------------------------------------------------------------------------- cells


def _indices(idx: list[int]) -> str:
    idx = sorted(set(idx))
    if len(idx) > 2 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"{idx[0]}-{idx[-1]}"
    return ",".join(map(str, idx))


def _arrow(pair: Sequence[Any]) -> str:
    a, b = ("-" if x is None else str(x) for x in pair)
    return a if a == b else f"{a}→{b}"


def _removed_parts(changes: Iterable[dict[str, Any]]) -> list[str]:
    """Labels of message parts a request no longer carries (e.g. a dropped user prompt)."""
    out = []
    for c in changes:
        if (
            c.get("kind") == "removed"
            and re.search(r"\.parts\[\d+\]$", c.get("path", ""))
            and isinstance(c.get("old"), dict)
        ):
            out.append(message_label({"parts": [c["old"]]}))
    return out


def cell_from_run(sc: dict[str, Any]) -> Cell:
    """Fold one scenario of ``replay run --format json`` into a matrix cell."""
    status = sc.get("status", "error")
    cell: Cell = {"status": status}
    if sc.get("error"):
        cell["error"] = _envs.one_line(str(sc["error"]))
    if sc.get("result"):
        cell["result"] = sc["result"]
    cell["violations"] = sc.get("violations", [])
    cell["new_violations"] = sc.get("new_violations", [])
    wire = [_wire_line(w) for w in sc.get("wire") or [] if isinstance(w, dict)]
    if wire:
        cell["wire"] = wire
    if sc.get("cost"):
        cell["cost"] = sc["cost"]
    if sc.get("warnings"):
        cell["warnings"] = list(sc["warnings"])  # e.g. another Python than the recording's
    for key, kind in (("file", str), ("line", int), ("seconds", float)):
        if isinstance(sc.get(key), kind) or (kind is float and isinstance(sc.get(key), int)):
            cell[key] = sc[key]
    if status != "changed":
        return cell
    reqs = sc.get("requests", [])
    mains = sc.get("main_requests", [])
    main_roles = {m["role"] for m in mains}
    roles = {r: ab for r, ab in (sc.get("roles") or {}).items() if ab[0] != ab[1]}
    by_role: dict[str, list[int]] = {}
    for r in reqs:
        by_role.setdefault(r["role"], []).append(r["index"])
    lost: list[str] = []
    lost_parts: list[str] = []
    requests = []
    for r in reqs:
        parts = _removed_parts(r.get("changes", []))
        r_lost = list(dict.fromkeys([*r.get("lost", []), *parts]))
        if r["role"] in main_roles or r["role"].startswith("history:"):  # the agent's requests, and the history it keeps
            lost += [x for x in r_lost if x not in lost]
            lost_parts += [x for x in parts if x not in lost_parts]
        requests.append(
            {
                "request": f"{r['role']}[{r['index']}]",
                "status": r["status"],
                "messages": r.get("messages"),
                "estimate": r.get("estimate"),
                "lost": r_lost,
                "gained": r.get("gained", []),
                "changes": len(r.get("changes", [])),
            }
        )
    # Per agent of the scenario: an orchestrator's SubAgents delegates are conversations of their own.
    per_role: dict[str, list[dict[str, Any]]] = {}
    for m in mains:
        per_role.setdefault(m["role"], []).append(m)
    deltas = {
        role: ", ".join(_arrow(m["estimate"]) for m in ms)
        for role, ms in per_role.items()
        if any(m["estimate"][0] != m["estimate"][1] or m["messages"][0] != m["messages"][1] for m in ms)
    }
    charted = per_role.get(chart_role(list(per_role)), [])
    cell.update(
        {
            "changed_roles": sorted(set(by_role) | set(roles)),
            "changed_requests": [f"{role}[{_indices(ix)}]" for role, ix in by_role.items()],
            "roles": roles,
            "estimates": [m["estimate"] for m in charted],
            "estimate_deltas": "; ".join(deltas.values()) if len(per_role) == 1 else "; ".join(f"{r} {d}" for r, d in deltas.items()),
            "lost": lost,
            "lost_parts": lost_parts,
            "requests": requests,
            "outcome": sc.get("outcome"),
            "observations": [c["path"] for c in sc.get("observations", [])],
            "observation_changes": [
                {"path": c["path"], "old": c.get("old"), "new": c.get("new")} for c in sc.get("observations", [])[:3]
            ],
            "notes": sc.get("notes", []),
        }
    )
    return cell


def _wire_line(w: dict[str, Any]) -> str:
    """``main[0] wire: reasoning_effort: low → minimal`` from a wire change of ``run --format json``."""
    from ..wire.compare import WireChange

    try:
        return WireChange(**w).describe(width=40)
    except TypeError:
        return "wire changed"


def error_cell(reason: str) -> Cell:
    return {"status": "error", "error": reason, "violations": [], "new_violations": []}


# --------------------------------------------------------------------------- running


class Progress(Protocol):
    def env(self, label: str, text: str) -> None: ...
    def advance(self, label: str, text: str) -> None: ...
    def close(self) -> None: ...


class PlainProgress:
    """One line per event on stderr: readable in CI logs, no control codes."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals = totals

    def env(self, label: str, text: str) -> None:
        print(f"matrix: {label}: {text}", file=sys.stderr, flush=True)

    advance = env

    def close(self) -> None:
        pass


class RichProgress:
    """A live bar per version on a terminal."""

    def __init__(self, totals: dict[str, int]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.p = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[label]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
        )
        from rich.markup import escape

        self.escape = escape
        self.tasks = {lab: self.p.add_task("waiting", total=n, label=escape(lab)) for lab, n in totals.items()}
        self.p.start()

    def env(self, label: str, text: str) -> None:
        self.p.update(self.tasks[label], description=self.escape(text))

    def advance(self, label: str, text: str) -> None:
        self.p.update(self.tasks[label], description=self.escape(text), advance=1)

    def close(self) -> None:
        self.p.stop()


def make_progress(totals: dict[str, int], force_plain: bool = False) -> Progress:
    if force_plain or os.environ.get("CI") or not sys.stderr.isatty():
        return PlainProgress(totals)
    return RichProgress(totals)


def results_dir(option: Path | None = None) -> Path:
    """``--out``, else ``.replay/matrix`` beside the nearest ``pyproject.toml`` (as the env cache and
    ``run``'s results are): run from a subfolder, each folder kept results of its own that
    ``replay diff .replay/matrix/<version>`` from the project's root did not see."""
    if option is not None:
        return option
    from ..config import _relative, find_pyproject

    project = find_pyproject()
    return _relative(project.parent / ".replay" / "matrix") if project is not None else Path(".replay/matrix")


@dataclass(frozen=True)
class RunOptions:
    cassettes: Path | None = None
    out: Path = Path(".replay/matrix")
    extra_args: tuple[str, ...] = ()
    """Passed to every ``replay run`` (e.g. ``--ignore`` rules)."""
    cwd: Path = Path(".")
    with_: tuple[str, ...] = ()
    """Extra requirements installed into every env (``--with .`` for the project the scenarios import)."""


def _replay_chunk(py: Path, ids: list[str], targets: dict[str, str], out: Path, opts: RunOptions) -> dict[str, Cell]:
    """Run ``replay run`` in one env for some scenarios; never raises, errors become cells."""
    args = list(dict.fromkeys(targets.get(i, i) for i in ids))
    cmd = [str(py), "-P", "-m", "replay", "run", *args, "--format", "json", "--out", str(out.resolve())]
    if opts.cassettes is not None:
        cmd += ["--cassettes", str(opts.cassettes)]
    cmd += list(opts.extra_args)
    try:
        proc = subprocess.run(
            cmd, cwd=opts.cwd, capture_output=True, text=True, env=_envs.cell_environ(py), stdin=subprocess.DEVNULL,
            check=False,
        )
    except OSError as exc:
        return {i: error_cell(f"cannot start replay: {exc}") for i in ids}
    data: dict[str, Any] | None = None
    if proc.returncode in (0, 1, 2):  # 2: some scenario errored; the JSON still has every verdict
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            data = None
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), dict):
        reason = _envs.one_line(proc.stderr or proc.stdout or f"replay exited {proc.returncode}")
        return {i: error_cell(reason) for i in ids}
    got = data["scenarios"]
    return {i: cell_from_run(got[i]) if i in got else error_cell("scenario not found on this version") for i in ids}


MIN_CHUNK = 4
"""Scenarios per extra process: each ``replay run`` pays about a second importing pydantic-ai."""


def _chunks(ids: list[str], n: int, targets: dict[str, str] | None = None) -> list[list[str]]:
    """Split one version's scenarios over ``n`` processes, but never into chunks too small to pay off.

    Scenarios run through one target (a file outside scenarios/, passed whole) stay in one chunk: a
    process given the file replays all of it, so splitting them replayed the file once per chunk."""
    n = max(1, min(n, -(-len(ids) // MIN_CHUNK)))
    groups: dict[str, list[str]] = {}
    for i in ids:
        groups.setdefault((targets or {}).get(i, i), []).append(i)
    out: list[list[str]] = [[] for _ in range(n)]
    for group in sorted(groups.values(), key=len, reverse=True):  # stable: single ids are dealt round-robin
        min(out, key=len).extend(group)
    return [c for c in out if c]


def run_matrix(
    targets: dict[str, str],
    versions: Sequence[_envs.VersionSpec],
    *,
    opts: RunOptions = RunOptions(),
    jobs: int | None = None,
    shard: tuple[int, int] | None = None,
    env_dir: Path | None = None,
    installer: _envs.Installer | None = None,
    progress: Callable[[dict[str, int]], Progress] = make_progress,
) -> Result:
    """Build or reuse each version's env and replay its cells; ``targets`` maps scenario id → run target."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    specs = [v.spec for v in versions]
    cells = shard_cells(list(targets), specs, shard)
    wanted: dict[str, list[str]] = {}
    for spec, sid in cells:
        wanted.setdefault(spec, []).append(sid)
    active = [v for v in versions if v.spec in wanted]
    per_version = max(1, jobs // max(1, len(active)))
    plan = {v.spec: _chunks(wanted[v.spec], per_version, targets) for v in active}
    installer = installer or _envs.find_installer()
    notice = _envs.fallback_notice(installer)
    if notice and active:
        print(notice, file=sys.stderr)
    cache = _envs.env_cache_dir(env_dir)
    tool_hash = _envs.tool_source_hash() + _envs.extras_fingerprint(opts.with_)
    infos: dict[str, _envs.EnvInfo] = {}
    timing: dict[str, float] = {}
    left = {v.spec: len(plan[v.spec]) for v in active}
    results: dict[str, dict[str, Cell]] = {}
    bar = progress({v.label: 1 + len(plan[v.spec]) for v in active})
    started = time.perf_counter()
    if opts.out.is_dir():
        clean_stale_temps(opts.out)  # what a killed earlier run left; live writers' files are kept
    try:
        # ``hold`` keeps a shared lock on every env in use until the replays end, so a
        # concurrent matrix run's prune cannot remove it under them.
        with ExitStack() as hold, ThreadPoolExecutor(max_workers=jobs) as pool:
            pending: dict[Future[Any], tuple[str, Any]] = {}
            for v in active:
                bar.env(v.label, "preparing environment")
                pending[pool.submit(_envs.ensure_env, v, cache, installer, tool_hash, None, opts.with_, hold)] = ("env", v)
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        kind, payload = pending.pop(fut)
                        if kind == "env":
                            v, info = payload, fut.result()
                            infos[v.spec] = info
                            if info.status == "error":
                                results[v.spec] = {s: error_cell(info.error or "install failed") for s in wanted[v.spec]}
                                bar.advance(v.label, f"error: {info.error}")
                                continue
                            bar.advance(
                                v.label, f"env {info.status} ({info.setup_seconds:.1f}s), harness {info.harness}; replaying"
                            )
                            timing[v.spec] = -time.perf_counter()
                            for chunk in plan[v.spec]:
                                f = pool.submit(_replay_chunk, info.python_exe, chunk, targets, opts.out / v.label, opts)
                                pending[f] = ("run", (v, len(chunk)))
                        else:
                            v, n = payload
                            got = fut.result()
                            results.setdefault(v.spec, {}).update(got)
                            counts = _counts(got.values())
                            left[v.spec] -= 1
                            if not left[v.spec]:
                                timing[v.spec] = round(timing[v.spec] + time.perf_counter(), 3)
                            bar.advance(
                                v.label,
                                f"{n} replayed: {counts['same']} same, {counts['changed']} changed, {counts['error']} error",
                            )
            except BaseException:  # Ctrl-C: the queued builds and replays still ran, one after another, before the command ended
                for fut in pending:
                    fut.cancel()  # those not started never start; a running one finishes (its process got the Ctrl-C too)
                raise
    finally:
        bar.close()
    wall = round(time.perf_counter() - started, 3)
    version_rows = []
    for v in versions:
        info = infos.get(v.spec) or _envs.EnvInfo(v.spec, v.label, v.kind, "", "", "skipped")
        row = info.as_json()
        row["out"] = str(opts.out / v.label) if v.spec in wanted else None
        row["replay_seconds"] = timing.get(v.spec)
        version_rows.append(row)
    scenarios: dict[str, dict[str, Cell]] = {}
    for spec, sid in sorted(cells, key=lambda c: (c[1], specs.index(c[0]))):
        scenarios.setdefault(sid, {})[spec] = results.get(spec, {}).get(sid) or error_cell("not run")
    return _finish(
        {
            "matrix": FORMAT_VERSION,
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "grid": {"scenarios": sorted(targets), "versions": specs},
            "versions": version_rows,
            "scenarios": scenarios,
            "seconds": wall,
            "jobs": jobs,
        }
    )


def _counts(cells: Iterable[Cell]) -> dict[str, int]:
    out = {"same": 0, "changed": 0, "error": 0}
    for c in cells:
        out[c["status"] if c["status"] in out else "error"] += 1
    return out


def _mark_every_version(row: dict[str, Cell], whole: bool = True) -> None:
    """Flag (``every_version``) a violation the replay has on every version of a row: no version's regression.

    Marked afresh from the whole row: a shard's cells arrive marked from the part of the row it held
    (two of three versions), and a merge that only added marks said "every version" of one the third lacks."""
    for c in row.values():
        for v in c.get("violations", []):
            if isinstance(v, dict):
                v.pop("every_version", None)
    cells = [c.get("violations", []) for c in row.values() if c.get("status") != "error"]
    if len(cells) < 2 or not whole:  # a shard's part of the row cannot speak for the versions it lacks
        return
    present = [{v.get("slot") for v in cell if v.get("status") not in (None, "gone")} for cell in cells]
    shared = set.intersection(*present) - {None}
    for cell in cells:
        for v in cell:
            if v.get("status") not in (None, "gone") and v.get("slot") in shared:
                v["every_version"] = True


def _finish(result: Result) -> Result:
    versions = len(result.get("grid", {}).get("versions", []))
    for row in result["scenarios"].values():
        _mark_every_version(row, whole=len(row) >= versions)
    counts = _counts(c for row in result["scenarios"].values() for c in row.values())
    head = {"changed": bool(counts["changed"] or counts["error"]), "summary": counts}
    return {**head, **{k: v for k, v in result.items() if k not in head}}


def exit_code(result: Result) -> int:
    """As ``run``: 2 when a cell has no verdict (an error, a shard missing from a merge), else 1 when one changed."""
    counts = result["summary"]
    return 2 if counts["error"] else 1 if counts["changed"] else 0


# --------------------------------------------------------------------------- merge


def merge_results(docs: Sequence[tuple[str, Result]]) -> Result:
    """Join shard results into one matrix; cells no shard reported become ``error``."""
    if not docs:
        raise ReplayUsageError("merge: give at least one results file")
    for name, doc in docs:
        if not isinstance(doc, dict) or doc.get("matrix") != FORMAT_VERSION or "grid" not in doc:
            raise ReplayUsageError(f"{name}: not a replay matrix JSON result")
    grid = docs[0][1]["grid"]
    for name, doc in docs[1:]:
        if doc["grid"] != grid:
            raise ReplayUsageError(f"{name}: from a different matrix (other scenarios or versions) than {docs[0][0]}")
    rows: dict[str, dict[str, Any]] = {}
    for _, doc in docs:
        for row in doc["versions"]:
            if row["spec"] not in rows or rows[row["spec"]].get("status") == "skipped":
                rows[row["spec"]] = row
    scenarios: dict[str, dict[str, Cell]] = {}
    for sid in grid["scenarios"]:
        for spec in grid["versions"]:
            cell = next((d["scenarios"][sid][spec] for _, d in docs if spec in d["scenarios"].get(sid, {})), None)
            scenarios.setdefault(sid, {})[spec] = cell or error_cell("no result: a shard is missing from the merge")
    shards = sorted({str(d["shard"]) for _, d in docs if d.get("shard")})
    return _finish(
        {
            "matrix": FORMAT_VERSION,
            "shard": None,
            "merged": shards,
            "grid": grid,
            "versions": [rows.get(s, {"spec": s, "label": s, "status": "skipped"}) for s in grid["versions"]],
            "scenarios": scenarios,
        }
    )


def load_results(paths: Sequence[Path]) -> list[tuple[str, Result]]:
    """Each file read with a bound and checked against the results schema (``replay.matrix._shards``)."""
    from ._shards import load_shard

    return [(str(p), load_shard(p)) for p in paths]


# --------------------------------------------------------------------------- rendering


def cell_lines(cell: Cell, message_limit: int | None = 160) -> list[str]:
    """Short lines for one cell: status, what changed, estimate deltas, lost messages.

    ``message_limit``: a violation's message is cut there for a table; a reproduction report
    (``None``) quotes it whole, since it is the evidence pasted upstream."""
    status = cell["status"]
    if status == "error":
        return [f"error: {cell.get('error', '')}"]
    lines = [status]
    if status == "changed":
        if cell.get("changed_requests"):
            lines.append(", ".join(cell["changed_requests"]))
        if cell.get("roles"):
            lines.append("requests " + ", ".join(f"{r} {_arrow(ab)}" for r, ab in cell["roles"].items()))
        if cell.get("estimate_deltas"):
            lines.append(f"est {cell['estimate_deltas']}")
        if cell.get("lost"):
            lost = cell.get("lost_parts") or cell["lost"]  # a dropped prompt says more than its rewrapped message
            text = ", ".join(lost[:4]) + (f" +{len(lost) - 4}" if len(lost) > 4 else "")
            lines.append(f"lost {text}")
        if cell.get("outcome"):
            lines.append(_outcome_line(cell["outcome"]))
        for c in cell.get("observation_changes", [])[:2]:
            name = c["path"].removeprefix("observations.").removeprefix("observations")
            lines.append(f"observation {name} {_short_value(c.get('old'))}→{_short_value(c.get('new'))}")
        extra = len(cell.get("observations", [])) - min(2, len(cell.get("observation_changes", [])))
        if extra > 0:
            lines.append(f"{extra} {'more ' if cell.get('observation_changes') else ''}observations changed")
        notes = cell.get("notes") or []
        if notes:  # the others counted, as the wire line counts its own
            lines.append(f"divergence: {notes[0]}" + (f" +{len(notes) - 1}" if len(notes) > 1 else ""))
        wire = cell.get("wire") or []
        if wire:
            lines.append(wire[0] + (f" +{len(wire) - 1}" if len(wire) > 1 else ""))
    cost = cell.get("cost")
    if isinstance(cost, list) and len(cost) == 2 and cost[1] is not None:
        lines.append(f"cost {dollars(cost[1])}" if cost[0] in (None, cost[1]) else f"cost {dollars(cost[0])}→{dollars(cost[1])}")
    lines += [f"warning: {w}" for w in cell.get("warnings", [])]
    graded = [v for v in cell.get("violations", []) if "status" in v]
    if graded:  # the replay's own violations, each marked against the recording's
        for v in graded:
            where = v.get("role", "") if v.get("index") is None else f"{v.get('role')}[{v.get('index')}]"
            mark = v["status"] + (", every version" if v.get("every_version") else "")
            text = " ".join(str(v.get("message", "")).split())
            if message_limit is not None and len(text) > message_limit:
                text = text[: message_limit - 3] + "..."
            lines.append(f"violation ({mark}): {v.get('invariant', '?')} {where}: {text}")
        return lines
    for key, word in (("new_violations", "new violation"), ("violations", "violation")):
        for v in cell.get(key, []):
            where = v.get("role", "") if v.get("index") is None else f"{v.get('role')}[{v.get('index')}]"
            lines.append(f"{word}: {v.get('invariant', '?')} {where}".rstrip())
    return lines


def _outcome_word(outcome: Any) -> str:
    """``ok``, or the error's class name: what a reader needs from an outcome in a table cell."""
    if not isinstance(outcome, dict):
        return "-"
    error = outcome.get("error")
    if outcome.get("status") != "ok" and isinstance(error, dict):
        return str(error.get("type") or "error").rsplit(".", 1)[-1]
    return str(outcome.get("status") or "-")


def _outcome_line(pair: Any) -> str:
    """``outcome UnexpectedModelBehavior → ok``; when the status is the same, where the output differs."""
    a, b = (pair[0], pair[1]) if isinstance(pair, (list, tuple)) and len(pair) == 2 else (None, None)
    wa, wb = _outcome_word(a), _outcome_word(b)
    if wa != wb or not isinstance(a, dict) or not isinstance(b, dict):
        return f"outcome {wa} → {wb}"
    from .._determinism import first_difference, value_at

    where = first_difference(a.get("output"), b.get("output"))
    if where is None:
        return "outcome changed"
    path = "output" if where == "<root>" else f"output.{where}".replace(".[", "[")
    old, new = value_at(a.get("output"), where, None), value_at(b.get("output"), where, None)
    return f"outcome {path} {_short_value(old)}→{_short_value(new)}"


def _short_value(value: Any, limit: int = 24) -> str:
    text = "null" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label_of(result: Result) -> dict[str, str]:
    return {row["spec"]: row.get("label") or row["spec"] for row in result["versions"]}


def _version_line(row: dict[str, Any]) -> str:
    if row.get("status") == "error":
        return f"{row['spec']}: error: {row.get('error')}"
    if row.get("status") == "skipped":
        return f"{row['spec']}: not in this shard"
    held = f"; dependencies held to the caller's versions ({row['pinned']} pins)" if row.get("pinned") else ""
    if row.get("unpinned"):
        held = (f"{held}, some resolved afresh" if held else "; dependencies resolved afresh") + f" ({row['unpinned']})"
    return (
        f"{row['spec']}: harness {row.get('harness')}, slim {row.get('slim')}, python {row.get('python')}, "
        f"env {row.get('status')} ({row.get('setup_seconds', 0):.1f}s){held}"
    )


def _title(result: Result) -> str:
    c = result["summary"]
    shard = f" (shard {result['shard']})" if result.get("shard") else ""
    return f"harness-replay matrix{shard}: {c['same']} same, {c['changed']} changed, {c['error']} error"


def render_text(result: Result) -> None:
    from rich.console import Console
    from rich.markup import escape as rich_escape
    from rich.table import Table

    from .._untrusted import visible

    def esc(text: str) -> str:  # cells quote cassettes and env output: controls visible, markup inert
        return rich_escape(visible(text))

    # emoji=False: cell text is shown as written (`:white_check_mark:` from a shard is not a check mark), as `run`'s is
    console = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)
    labels = _label_of(result)
    specs = [s for s in result["grid"]["versions"] if any(s in row for row in result["scenarios"].values())]
    # One line above the table, not its title: rich wraps a title to the table's width, and a narrow
    # table (one version, or a shard with no cells) split it, `harness-repl` / `ay matrix (shard 1/4):`.
    console.print(esc(_title(result)), soft_wrap=True)
    table = Table(show_lines=True)
    table.add_column("scenario", no_wrap=True)
    for s in specs:
        table.add_column(esc(labels.get(s, s)))
    style = {"same": "green", "changed": "yellow", "error": "red"}
    def styled(c: Cell, lines: list[str]) -> str:
        st = style.get(c["status"], "red")
        return f"[{st}]{esc(lines[0])}[/{st}]" + "".join("\n" + esc(x) for x in lines[1:])

    for sid, row in result["scenarios"].items():
        table.add_row(esc(sid), *_cells(row, specs, styled))
    console.print(table)
    for row in result["versions"]:  # one line each, unwrapped: a wrap would start a line with its text (`::…`)
        console.print(esc(_version_line(row)), soft_wrap=True)


def _cells(row: dict[str, Any], specs: list[str], render: Callable[[Cell, list[str]], str]) -> list[str]:
    """One rendered cell per version, blank where this shard has none."""
    return ["" if (c := row.get(s)) is None else render(c, cell_lines(c)) for s in specs]


def _md(text: str) -> str:
    """Cassette or environment text inside a Markdown table cell or code span: controls visible,
    no cell or span break-out."""
    from .._untrusted import visible

    return visible(text).replace("|", "\\|").replace("`", "'")


_MD_TEXT = str.maketrans({"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]",
                          "|": "\\|", "`": "'"})


def _md_text(text: str) -> str:
    """Cassette or shard text as plain Markdown cell text (outside a code span): also no HTML tag, entity
    or link of its own. The step summary is rendered by GitHub: an observation ``<img src=…>`` was an image."""
    from .._untrusted import visible

    return visible(text).translate(_MD_TEXT)


def render_markdown(result: Result) -> str:
    labels = _label_of(result)
    specs = result["grid"]["versions"]
    icon = {"same": "✅", "changed": "⚠️", "error": "❌"}
    out = [f"### {_title(result)}", ""]
    out.append("| scenario | " + " | ".join(f"`{_md(labels.get(s, s))}`" for s in specs) + " |")
    out.append("|---|" + "---|" * len(specs))
    def marked(c: Cell, lines: list[str]) -> str:
        return f"{icon.get(c['status'], '❌')} " + "<br>".join(_md_text(x) for x in lines)

    for sid, row in result["scenarios"].items():
        out.append(f"| `{_md(sid)}` | " + " | ".join(_cells(row, specs, marked)) + " |")
    out += ["", "| version | harness | slim | python | env |", "|---|---|---|---|---|"]
    for r in result["versions"]:
        env = r.get("status", "")
        if r.get("error"):
            env += f": {r['error']}"
        out.append(
            f"| `{_md(r['spec'])}` | {_md_text(str(r.get('harness') or ''))} | {_md_text(str(r.get('slim') or ''))} "
            f"| {_md_text(str(r.get('python') or ''))} | {_md_text(env)} |"
        )
    return "\n".join(out) + "\n"


def github_annotations(result: Result) -> list[str]:
    """``::error …`` for each changed or failed cell, as ``run`` gives one per scenario, on its file and line."""
    labels = _label_of(result)
    out = []
    for sid, row in result["scenarios"].items():
        for spec, cell in row.items():
            if not isinstance(cell, dict) or cell.get("status") not in ("changed", "error"):
                continue
            file = cell.get("file") if isinstance(cell.get("file"), str) else None
            line = cell.get("line") if isinstance(cell.get("line"), int) else None
            title = f"harness-replay: {sid} {cell['status']} on harness {labels.get(spec, spec)}"
            out.append(annotation(title, cell_lines(cell)[:20], file, line))
    return out


def render_junit(result: Result) -> str:
    """One suite per version, one case per scenario, so dashboards show the matrix as tests."""
    from .._untrusted import xml_text

    def _qa(text: str) -> str:
        return quoteattr(xml_text(text))

    labels = _label_of(result)
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>"]
    for spec in result["grid"]["versions"]:
        cells = [(sid, row[spec]) for sid, row in result["scenarios"].items() if spec in row]
        if not cells:
            continue
        c = _counts(cell for _, cell in cells)
        seconds = sum(float(cell.get("seconds") or 0.0) for _, cell in cells)  # as run's suite and pytest's have it
        out.append(
            f'<testsuite name={_qa("harness " + labels.get(spec, spec))} tests="{len(cells)}" '
            f'failures="{c["changed"]}" errors="{c["error"]}" skipped="0" time="{seconds:.3f}">'
        )
        for sid, cell in cells:
            classname, _, name = sid.rpartition("/")
            where = f' time="{float(cell.get("seconds") or 0.0):.3f}"'  # as `run --format junit` and pytest write them
            if isinstance(cell.get("file"), str):
                where += f" file={_qa(_relative(cell['file'], Path.cwd()))}"
                if isinstance(cell.get("line"), int):
                    where += f' line="{cell["line"]}"'
            out.append(f"<testcase classname={_qa(classname or 'replay')} name={_qa(name or sid)}{where}>")
            body = "\n".join(cell_lines(cell))
            if cell["status"] == "error":
                out.append(f"<error message={_qa(cell.get('error') or 'error')}>{escape(xml_text(body))}</error>")
            elif cell["status"] == "changed":
                out.append(
                    f"<failure message={_qa(' / '.join(cell_lines(cell)[1:3]) or 'changed')}>{escape(xml_text(body))}</failure>"
                )
            out.append("</testcase>")
        out.append("</testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def emit(result: Result, fmt: str) -> None:
    """Print ``result`` in ``fmt``; Markdown also goes to ``$GITHUB_STEP_SUMMARY`` when set."""
    from ..scrub import redact

    result = redact(result)  # cells carry replay output from other environments: scrub before any medium
    if fmt == "json":
        from .._untrusted import dumps_json

        print(dumps_json(result, indent=2))
    elif fmt == "markdown":
        print(render_markdown(result), end="")
    elif fmt == "junit":
        print(render_junit(result), end="")
    else:
        render_text(result)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(render_markdown(result))
    if os.environ.get("GITHUB_ACTIONS") == "true":  # on stderr unless text: JSON/JUnit/Markdown stay parseable
        stream = sys.stdout if fmt == "text" else sys.stderr
        for line in github_annotations(result):
            print(line, file=stream)

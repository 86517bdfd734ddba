"""``replay report``: a reproduction report for one scenario, ready to paste into an upstream issue.

A person writing up a regression gathers the same evidence every time (the seeds show it):
versions and pins per environment, Python and platform, what each version sent and how the
run ended, several fresh-process trials that agree byte for byte, the controls next to the
case, the probe's source and the commands to rerun it. This module gathers it with the matrix
machinery: each trial is one :func:`replay.matrix.run_matrix` over the scenario and its
controls (the other scenarios of its file), every version in its own cached environment, and
each version's own ``replay check`` judges that version's result cassettes. The facts are
read from the result cassettes, which the version that made them wrote.

The report holds no timestamps or absolute paths, so rerunning it on an unchanged setup gives
the same document.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import re
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from . import matrix as mx
from ._conversations import in_conversations, interleaved_roles, turns_of
from ._determinism import describe_difference, first_difference, normalised_bytes
from ._untrusted import dumps_json, md_code, md_fence, visible
from .cassette import DEFAULT_LIMITS, Cassette, Limits, cassette_path, load
from .errors import CassetteError, ReplayUsageError
from .matrix import _envs
from .scenario import ImportFailure, declared, discover

FORMAT_VERSION = 1
Report = dict[str, Any]


@dataclass(frozen=True)
class Subject:
    """The scenario a report is about, and its controls: the other scenarios of its file."""

    id: str
    file: Path
    controls: list[str]
    doc: str = ""


def locate(target: str, scenarios_dir: Path) -> Subject:
    """Find the one scenario ``target`` names and its file's other scenarios, without running any.

    Ids are read from the file's syntax where possible (as the matrix plans its cells), so a
    file the host's harness cannot import still gets a report from the versions that can.
    """
    found = declared([target], default_dir=scenarios_dir)
    if len(found) != 1:
        ids = ", ".join(list(found)[:6]) + (" …" if len(found) > 6 else "")
        raise ReplayUsageError(f"{target}: matches {len(found)} scenarios ({ids}); name one, its file's others are its controls")
    ((sid, file),) = found.items()
    controls = [i for i in declared([str(file)], default_dir=scenarios_dir) if i != sid]
    failures: list[ImportFailure] = []
    found_sc = discover([str(file)], default_dir=scenarios_dir, failures=failures)
    doc = next((s.doc for s in found_sc if s.id == sid), "")
    return Subject(sid, file, controls, doc)


@dataclass(frozen=True)
class Request:
    """What to reproduce and where: the subject, its controls and how each env replays them."""

    subject: Subject
    targets: dict[str, str]
    """Scenario id → what ``replay run`` is given in each env (see ``replay.cli._matrix_targets``)."""
    versions: Sequence[_envs.VersionSpec]
    trials: int = 3
    cassettes: Path = Path("cassettes")
    work: Path = Path(".replay/report")
    """Where each trial's result cassettes go: ``WORK/<subject id>/trial-K/<version>/<id>.cassette``."""
    cwd: Path = Path(".")
    with_: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    jobs: int | None = None
    env_dir: Path | None = None
    pythons: tuple[str, ...] = ()
    """``--python`` as given (the versions already carry it), to repeat in the commands."""
    limits: Limits = DEFAULT_LIMITS
    """The project's ``[tool.replay] max-*``: each env's ``replay run`` wrote the results with them."""


# --------------------------------------------------------------------------- facts


def _digest(data: bytes, n: int = 16) -> str:
    return hashlib.sha256(data).hexdigest()[:n]


def _portable(line: str) -> str:
    """A ``pip freeze`` line without a local install's path (it differs per checkout, and names a home)."""
    return line.split(" @ ", 1)[0] + " @ <local checkout>" if " @ file://" in line else line


def freeze_digest(freeze: Sequence[str]) -> str:
    """Digest of an env's ``pip freeze``; a local install's path is left out (it differs per checkout)."""
    lines = sorted(line.split(" @ ", 1)[0] + " @ <local>" if " @ file://" in line else line for line in freeze)
    return _digest("\n".join(lines).encode())


def _pin(freeze: Sequence[str], name: str) -> str | None:
    for line in freeze:
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1]
    return None


def _outcome(c: Cassette) -> dict[str, Any]:
    o = c.outcome
    if o.status == "error" and o.error is not None:
        return {"status": "error", "type": o.error.type.rsplit(".", 1)[-1], "message": o.error.message}
    return {"status": "ok", "output": o.output}


def _estimates_by_role(c: Cassette, user: set[str]) -> dict[str, list[int | None]]:
    """Each of the scenario's own agents' request estimates, in call order (an orchestrator and
    its sub-agents are separate conversations: one list would interleave them); a role whose
    conversations ran concurrently conversation by conversation, as the diff lists them (in call
    order the same requests of two trials or versions would read as different figures)."""
    interleaved = interleaved_roles(c)
    by_role = c.by_role()
    out: dict[str, list[int | None]] = {}
    for ex in sorted(c.exchanges, key=lambda e: e.seq):
        if ex.role in user and ex.role not in out:
            xs = in_conversations(by_role[ex.role], turns_of(c)) if ex.role in interleaved else by_role[ex.role]
            out[ex.role] = [x.estimate for x in xs if x.kind in ("request", "request_stream")]
    return out


def facts(c: Cassette) -> dict[str, Any]:
    """What a report says about one result cassette: requests, estimates, outcome, observations, verdicts."""
    roles = Counter(ex.role for ex in c.exchanges)
    user = c.user_roles()
    return {
        "requests": dict(sorted(roles.items())),
        "estimates": _estimates_by_role(c, user),
        "outcome": _outcome(c),
        "observations": [{"name": o.name, "value": o.value} for o in c.observations],
        "verdicts": [{"predicate": h.predicate, "verdict": h.verdict} for h in c.histories if h.predicate],
        "header": {
            "harness": c.header.harness_version,
            "slim": c.header.slim_version,
            "pydantic": c.header.pydantic_version,
            "python": c.header.python_version,
            "platform": c.header.platform,
        },
    }


def sent_text(c: Cassette) -> str:
    """Every request the version sent and what came back, one line per message (``replay show``).

    The header lines are left out: the report states versions once, and without the recording
    time the text is the same on every trial.
    """
    from .show import render_text

    return "".join(line + "\n" for line in render_text(c).splitlines() if not line.startswith("# "))


def _check_in_env(python: Path, paths: Sequence[Path], cwd: Path) -> dict[str, list[dict[str, Any]]]:
    """The version's own ``replay check`` on its result cassettes, every trial's in one process: path → violations.

    A violation the check does not place in one of ``paths``, and a check that could not run,
    go under ``""``: shown on every scenario rather than dropped.
    """
    if not paths:
        return {}
    cmd = [str(python), "-P", "-m", "replay", "check", *map(str, paths), "--format", "json"]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_envs.cell_environ(python),
                          stdin=subprocess.DEVNULL, check=False)
    try:
        data = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        problem = _envs.one_line(proc.stderr or proc.stdout or f"replay check exited {proc.returncode}")
        return {"": [{"invariant": "check", "role": "check", "index": None, "message": f"check failed: {problem}"}]}
    known = set(map(str, paths))
    out: dict[str, list[dict[str, Any]]] = {}
    for v in data.get("violations", []):
        v.pop("scenario_id", None)
        where = str(v.pop("cassette", ""))
        out.setdefault(where if where in known else "", []).append(v)
    return out


class _TrialProgress:
    """The matrix's progress lines, each saying which trial it belongs to."""

    def __init__(self, inner: mx.Progress, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def env(self, label: str, text: str) -> None:
        self.inner.env(label, self.prefix + text)

    def advance(self, label: str, text: str) -> None:
        self.inner.advance(label, self.prefix + text)

    def close(self) -> None:
        self.inner.close()


def _trials(req: Request, progress: Callable[[dict[str, int]], mx.Progress]) -> list[dict[str, dict[str, Any]]]:
    """Every trial; a version whose environment could not be made in trial 1 is not tried again (each
    attempt is an install, which an unreachable index makes slow): its later trials repeat that error."""
    first = _trial(req, 1, progress, req.versions)
    failed = {spec for spec, found in first.items() if found["env"].get("status") == "error"}
    tried = [v for v in req.versions if v.spec not in failed]
    later = [_trial(req, k, progress, tried) if tried else {} for k in range(2, req.trials + 1)]
    return [first, *({**t, **{spec: first[spec] for spec in failed}} for t in later)]


def _trial(
    req: Request, k: int, progress: Callable[[dict[str, int]], mx.Progress], versions: Sequence[_envs.VersionSpec],
) -> dict[str, dict[str, Any]]:
    """One fresh-process replay of every scenario on ``versions``: each version's env, cells and result files."""
    out = req.work / req.subject.id / f"trial-{k}"
    if out.resolve().is_relative_to(req.work.resolve()):  # a previous report's results must not be read as this one's
        shutil.rmtree(out, ignore_errors=True)
    opts = mx.RunOptions(
        cassettes=req.cassettes, out=out, extra_args=req.extra_args, cwd=req.cwd, with_=req.with_
    )
    prefix = f"trial {k}/{req.trials}: "
    result = mx.run_matrix(
        req.targets, versions, opts=opts, jobs=req.jobs, env_dir=req.env_dir,
        progress=lambda totals: _TrialProgress(progress(totals), prefix),
    )
    rows = {row["spec"]: row for row in result["versions"]}
    found: dict[str, dict[str, Any]] = {}
    for v in versions:
        cells = {sid: result["scenarios"].get(sid, {}).get(v.spec) or mx.error_cell("not run") for sid in sorted(req.targets)}
        # Where the env's `replay run` wrote each result (its JSON output is scrubbed, paths included).
        paths = {sid: p for sid in cells if cells[sid].get("result") and (p := cassette_path(out / v.label, sid)).is_file()}
        found[v.spec] = {"env": rows.get(v.spec, {}), "cells": cells, "paths": paths}
    return found


def _checked(req: Request, trials: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each version's violations of every trial's results, path → violations: one ``replay check`` per env.

    One process per version rather than per version and trial: a check process is mostly
    importing pydantic-ai (≈ 1 s), and the checks are a function of each file alone.
    """

    def per_version(v: _envs.VersionSpec) -> dict[str, list[dict[str, Any]]]:
        by_python: dict[Path, list[Path]] = {}
        for trial in trials:
            row, paths = trial[v.spec]["env"], trial[v.spec]["paths"]
            if row.get("path") and paths:
                by_python.setdefault(_envs.env_python(Path(row["path"])), []).extend(paths.values())
        merged: dict[str, list[dict[str, Any]]] = {}
        for python, paths in by_python.items():
            for where, found in _check_in_env(python, paths, req.cwd).items():
                merged.setdefault(where, []).extend(found)
        return merged

    with ThreadPoolExecutor(max_workers=max(1, min(len(req.versions), req.jobs or os.cpu_count() or 1))) as pool:
        return {v.spec: got for v, got in zip(req.versions, pool.map(per_version, req.versions))}


def _scenarios(req: Request, found: dict[str, Any], checked: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One trial on one version as the report shows it: each scenario's status, facts and violations."""
    cells, paths = found["cells"], found["paths"]
    scenarios: dict[str, Any] = {}
    for sid in sorted(req.targets):
        cell = cells[sid]
        entry: dict[str, Any] = {"status": cell["status"], "vs_recording": mx.cell_lines(cell, message_limit=None)[1:]}
        if cell["status"] == "error":
            entry["error"] = cell.get("error", "")
        if sid in paths:
            try:
                c = load(paths[sid], req.limits)
                entry.update(facts(c))
                entry["violations"] = checked.get(str(paths[sid]), []) + checked.get("", [])
                entry["normalised"] = normalised_bytes(paths[sid], req.limits).decode()
                entry["path"] = str(paths[sid])
                if sid == req.subject.id:
                    entry["sent"] = sent_text(c)
            except CassetteError as exc:
                entry.update(status="error", error=str(exc))
        scenarios[sid] = entry
    return {"env": found["env"], "scenarios": scenarios}


def _restate_interleaved(first: dict[str, Any], later: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> None:
    """Give ``later``'s violations trial 1's wording where they are trial 1's violations of the same run.

    Concurrent conversations of one role (``asyncio.gather``) arrive in the order their answers take,
    and a check names a request by its arrival (``main[0]``): three conversations that each lose the
    same messages read ``content_lost main[0]: … yA9`` in one trial and ``main[0]: … xA9`` in the next,
    and the report called trials DIFFERENT (exit 1) whose normalised cassettes were byte-identical and
    whose violations were the same, conversation by conversation. Where the normalised cassettes are
    equal, a role ran concurrently, each role has as many violations of each check, and the violations
    graded against trial 1's (as ``replay diff`` pairs them, by conversation, a growth's figures by the
    request they belong to) are all unchanged, ``later`` holds trial 1's list. Any other difference
    stays: a sequential scenario whose violations moved is a real non-determinism, and so is a
    normalised cassette that differs (requests that swapped places are said as such)."""
    from ._conversations import paired_ordinals
    from .invariants import compare_cassettes

    for sid, x in first.items():
        y = later.get(sid)
        if not y or x.get("violations") == y.get("violations") or not x.get("normalised") or x.get("normalised") != y.get("normalised"):
            continue
        if any(v.get("invariant") == "check" for v in [*(x.get("violations") or ()), *(y.get("violations") or ())]):
            continue  # a check that could not run is no violation to pair
        try:
            a, b = load(x["path"], limits), load(y["path"], limits)
        except (CassetteError, KeyError, OSError):
            continue
        if not paired_ordinals(a, b) or _kinds(x["violations"]) != _kinds(y["violations"]):
            continue
        graded = compare_cassettes(a, b)
        if not graded.failures and all(c.status == "unchanged" for c in graded.violations):
            y["violations"] = x["violations"]


def _kinds(violations: Sequence[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """How many violations of each check each role has: what a request's name cannot change."""
    return Counter((str(v.get("invariant")), str(v.get("role"))) for v in violations)


def _verdict(scenarios: dict[str, Any]) -> str:
    """Digest of one trial's verdict on one version: every normalised result cassette and its violations."""
    body = {sid: {"cassette": e.get("normalised"), "violations": e.get("violations"), "error": e.get("error")} for sid, e in scenarios.items()}
    return _digest(json.dumps(body, sort_keys=True, ensure_ascii=False).encode())


def _trial_difference(a: dict[str, Any], b: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> str:
    """Where a later trial first parts from trial 1: the call, by role and ordinal, and what differs."""
    for sid in sorted(a):
        x, y = a[sid], b.get(sid, {})
        if x.get("normalised") != y.get("normalised") and x.get("normalised") and y.get("normalised"):
            try:
                return f"{sid}: {describe_difference(load(x['path'], limits), load(y['path'], limits))}"
            except (CassetteError, KeyError):
                return f"{sid}: {first_difference(json.loads(x['normalised']), json.loads(y['normalised']))}"
        for key in ("violations", "error", "status"):
            if x.get(key) != y.get(key):
                return f"{sid}: {key}"
    return "<bytes>"


def build(req: Request, progress: Callable[[dict[str, int]], mx.Progress] = mx.make_progress) -> Report:
    """Run the trials and assemble the report's data (what ``--format json`` prints)."""
    if req.trials < 1:
        raise ReplayUsageError(f"--trials {req.trials}: give at least 1")
    subject = req.subject
    recorded_path = cassette_path(req.cassettes, subject.id)
    for sid in (subject.id, *subject.controls):  # the controls are half the evidence: none may be missing
        path = cassette_path(req.cassettes, sid)
        if not path.exists():
            what = "" if sid == subject.id else f"control of {subject.id}: "
            raise ReplayUsageError(f"{path}: {what}no cassette (record it with: replay record {sid})")
    recorded = load(recorded_path, req.limits)
    trials = _trials(req, progress)
    checked = _checked(req, trials)
    runs = [{v.spec: _scenarios(req, t[v.spec], checked[v.spec]) for v in req.versions} for t in trials]
    versions = []
    for v in req.versions:
        per_trial = [run[v.spec] for run in runs]
        for later in per_trial[1:]:
            _restate_interleaved(per_trial[0]["scenarios"], later["scenarios"], req.limits)
        env = per_trial[0]["env"]
        freeze = list(env.get("freeze") or [])
        digests = [_verdict(t["scenarios"]) for t in per_trial]
        first = per_trial[0]["scenarios"]
        differ = next((k for k, d in enumerate(digests) if d != digests[0]), None)
        header: dict[str, Any] = next((e["header"] for e in first.values() if e.get("header")), {})
        versions.append(
            {
                "spec": v.spec,
                "label": v.label,
                "env_status": env.get("status"),
                "env_error": env.get("error"),
                "harness": env.get("harness") or header.get("harness"),
                "slim": env.get("slim") or header.get("slim"),
                "pydantic": _pin(freeze, "pydantic") or header.get("pydantic"),
                "python": env.get("python") or header.get("python"),
                "platform": header.get("platform"),
                "freeze": [_portable(line) for line in freeze],
                "freeze_sha256": freeze_digest(freeze) if freeze else None,
                "trials": [{"trial": k + 1, "verdict": d} for k, d in enumerate(digests)],
                "identical": differ is None,
                "first_difference": None if differ is None else _trial_difference(first, per_trial[differ]["scenarios"], req.limits),
                "scenarios": {sid: {k: val for k, val in e.items() if k not in ("normalised", "path")} for sid, e in first.items()},
            }
        )
    try:
        source = subject.file.read_text(encoding="utf-8")
    except OSError:
        source = ""
    return {
        "report": FORMAT_VERSION,
        "tool_version": __version__,
        "scenario": subject.id,
        "doc": subject.doc,
        "controls": subject.controls,
        "file": _relative(subject.file, req.cwd),
        "source": source,
        "recording": {
            "cassette": _relative(recorded_path, req.cwd),
            "sha256": _digest(recorded_path.read_bytes()),
            "harness": recorded.header.harness_version,
            "slim": recorded.header.slim_version,
            "pydantic": recorded.header.pydantic_version,
            "python": recorded.header.python_version,
            "platform": recorded.header.platform,
        },
        "trials": req.trials,
        "versions": versions,
        "commands": commands(req),
    }


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return path.name


def commands(req: Request) -> list[str]:
    """The commands that redo this report, and one version by hand without this command."""
    harness = dict.fromkeys(v.spec.split("@", 1)[0] for v in req.versions)
    options = [f"--harness {h}" for h in harness] + [f"--python {p}" for p in req.pythons]
    cassettes = _relative(req.cassettes, req.cwd)
    where = [] if Path(cassettes) == Path("cassettes") else [f"--cassettes {shlex.quote(cassettes)}"]
    lines = [
        "# in the project; HARNESS_REPLAY = the harness-replay checkout (or wheel) to install",
        'uv venv && uv pip install -e "$HARNESS_REPLAY"',
        f"replay report {req.subject.id} {' '.join([*options, *where])} --trials {req.trials}",
        "# or one version by hand:",
    ]
    v = req.versions[0]
    ids = " ".join(sorted(req.targets.values()))
    interpreter = f" --python {v.python}" if v.python else ""
    lines += [
        f"uv venv{interpreter} /tmp/h-{v.label} && uv pip install --python /tmp/h-{v.label}/bin/python"
        f" -e \"$HARNESS_REPLAY\" '{v.requirement}'",
        f"/tmp/h-{v.label}/bin/replay run {ids} {' '.join(where)}".rstrip() + f" --out /tmp/h-{v.label}-results",
        f"/tmp/h-{v.label}/bin/replay check /tmp/h-{v.label}-results",
    ]
    return lines


# --------------------------------------------------------------------------- rendering


_MD_TEXT = str.maketrans({"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|"})
_LINK_CLOSE = re.compile(r"\](?=[(\[])")


def _md(text: str) -> str:
    """Cassette text as plain Markdown (a table cell, a sentence): one line, no HTML tag or entity, and no link or
    image: a ``]`` before ``(`` or ``[`` is escaped (an observation ``![x](https://…)`` was an image in the issue the
    report was pasted into), other brackets stay as they read (``main[0]``)."""
    return visible(_LINK_CLOSE.sub(r"\\]", str(text).translate(_MD_TEXT)))  # visible last: its backslashes are text


def _html(text: str) -> str:
    """Text inside an HTML element of the report (``<summary><code>…``), where Markdown escapes are not read."""
    return html.escape(visible(str(text)))


def _json(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _requests(e: dict[str, Any]) -> str:
    return ", ".join(f"{r} {n}" for r, n in e.get("requests", {}).items()) or "no model request"


def _estimates(e: dict[str, Any], role: str | None = None) -> str:
    """One role's estimates, or (``role`` None) every role's, each named when there are several."""
    by_role: dict[str, list[Any]] = e.get("estimates") or {}
    if role is not None:
        return ", ".join("-" if x is None else str(x) for x in by_role.get(role, [])) or "-"
    if len(by_role) == 1:
        return _estimates(e, next(iter(by_role)))
    return "; ".join(f"{r} {_estimates(e, r)}" for r in by_role) or "-"


def _outcome_text(e: dict[str, Any]) -> str:
    o = e.get("outcome") or {}
    if o.get("status") == "error":
        return f"error: {o.get('type')}: {o.get('message')}"
    return f"ok: {_json(o.get('output'))}"


def _violations(e: dict[str, Any]) -> list[str]:
    out = []
    for v in e.get("violations") or []:
        where = v.get("role", "") if v.get("index") is None else f"{v.get('role')}[{v.get('index')}]"
        out.append(f"{v.get('invariant')} {where}: {v.get('message')}")
    return out


def _rows(versions: list[dict[str, Any]], sid: str) -> list[tuple[str, list[str]]]:
    """(label, one cell per version) rows describing scenario ``sid``."""
    entries = [v["scenarios"].get(sid, {}) for v in versions]
    rows: list[tuple[str, list[str]]] = []

    def cells(fn: Callable[[dict[str, Any]], str], failed: str = "-") -> list[str]:
        """One cell per version; a version that could not replay says why once (in the outcome row)."""
        return [failed.format(e.get("error", "")) if e.get("status") == "error" and "outcome" not in e else fn(e) for e in entries]

    rows.append(("requests per role", cells(_requests)))
    roles = list(dict.fromkeys(r for e in entries for r in e.get("estimates") or {}))
    for role in roles or ["main"]:
        rows.append((f"{_md(role)} request estimates", cells(functools.partial(_estimates, role=role))))
    rows.append(("outcome", cells(_outcome_text, "not replayed: {}")))
    names = list(dict.fromkeys(o["name"] for e in entries for o in e.get("observations", [])))
    def observed(name: str) -> Callable[[dict[str, Any]], str]:
        return lambda e: "; ".join(_json(o["value"], 600) for o in e.get("observations", []) if o["name"] == name) or "-"

    for name in names:
        rows.append((f"observation {md_code(name)}", cells(observed(name))))
    rows.append(("violations", cells(lambda e: "<br>".join(map(_md, _violations(e))) or "none")))
    rows.append(("vs the recording", cells(lambda e: e.get("status", "") + (": " + "; ".join(e["vs_recording"]) if e.get("vs_recording") else ""))))
    return rows


def _table(header: list[str], rows: list[tuple[str, list[str]]], escape_cells: bool = True) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, cells in rows:
        body = [c if not escape_cells or label == "violations" else _md(c) for c in cells]
        out.append(f"| {label} | " + " | ".join(body) + " |")
    return out


def render_markdown(report: Report) -> str:
    """The report as Markdown for an issue: facts per version, trials, controls, source, commands."""
    versions = report["versions"]
    labels = [md_code(v["spec"]) for v in versions]
    sid = report["scenario"]
    rec = report["recording"]
    doc_first = (report.get("doc") or "").strip().split("\n\n")[0].replace("\n", " ")
    out = [f"## Reproduction: {md_code(sid)} on pydantic-ai-harness {_md(', '.join(v['spec'] for v in versions))}", ""]
    if doc_first:
        out += [f"> {doc_first}", ""]
    out += [
        f"Scenario {md_code(sid)} from {md_code(str(report.get('file')))}, recorded on harness {_md(rec['harness'])} "
        f"(pydantic-ai-slim {_md(rec['slim'])}, pydantic {_md(rec['pydantic'])}, Python {_md(rec['python'])}, "
        f"{_md(rec['platform'])}) into {md_code(rec['cassette'])} (sha256 {md_code(rec['sha256'])}), then replayed on each version in its own "
        f"environment without calling any model: {report['trials']} fresh-process trial(s) per version, "
        f"each version's result cassettes judged by that version's own `replay check`.",
        "",
        "### Environments",
        "",
        "| version | pydantic-ai-harness | pydantic-ai-slim | pydantic | Python | platform | `pip freeze` sha256 | trials |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in versions:
        n = len(v["trials"])
        same = sum(t["verdict"] == v["trials"][0]["verdict"] for t in v["trials"])
        trials = (
            f"{n} of {n} byte-identical ({md_code(v['trials'][0]['verdict'])})"
            if v["identical"]
            else _md(f"DIFFERENT: {same} of {n} match trial 1; first difference {v['first_difference']}")
        )
        freeze = f"`{v['freeze_sha256']}` ({len(v['freeze'])} packages)" if v.get("freeze_sha256") else "-"
        if v.get("env_error"):
            trials = _md(f"environment error: {v['env_error']}")
        out.append(
            f"| {md_code(v['spec'])} | {_md(v.get('harness') or '-')} | {_md(v.get('slim') or '-')} | {_md(v.get('pydantic') or '-')} "
            f"| {_md(v.get('python') or '-')} | {_md(v.get('platform') or '-')} | {freeze} | {trials} |"
        )
    out += ["", f"### {md_code(sid)}", ""]
    out += _table(["", *labels], _rows(versions, sid))
    controls = report.get("controls") or []
    if controls:
        out += ["", f"### Controls: the other scenarios of {md_code(str(report.get('file')))}", ""]
        rows = []
        for c in controls:
            cells = []
            for v in versions:
                e = v["scenarios"].get(c, {})
                if e.get("status") == "error" and "outcome" not in e:
                    cells.append(_md(f"error: {e.get('error', '')}"))
                    continue
                bits = [_requests(e), f"est {_estimates(e)}", _outcome_text(e)]
                bits += [f"{o['name']} = {_json(o['value'], 60)}" for o in e.get("observations", [])]
                bits += _violations(e) or ["no violation"]
                cells.append("<br>".join(_md(b) for b in bits))
            rows.append((md_code(c), cells))
        out += _table(["scenario", *labels], rows, escape_cells=False)
    sent = [(v, v["scenarios"].get(sid, {}).get("sent")) for v in versions]
    if any(text for _, text in sent):
        out += ["", f"### What each version sent ({md_code(sid)}, trial 1)", ""]
        for v, text in sent:
            if not text:
                continue
            block = md_fence(text.rstrip("\n").split("\n"))  # longer than any fence the cassette's text holds
            out += [f"<details><summary><code>{_html(v['spec'])}</code>: every request and answer</summary>", "",
                    block[0] + "text", *block[1:], "", "</details>", ""]
    out += ["", "### Environments in full", ""]
    for v in versions:
        if v.get("freeze"):
            out += [f"<details><summary><code>{_html(v['spec'])}</code>: pip freeze</summary>", "", "```text"]
            out += [_portable(line) for line in v["freeze"]]
            out += ["```", "", "</details>", ""]
    if report.get("source"):
        block = md_fence(report["source"].rstrip("\n").split("\n"))
        out += [f"### Scenario source: {md_code(str(report.get('file')))}", "", block[0] + "python", *block[1:], ""]
    out += ["### Reproduce", "", "```sh", *report["commands"], "```", ""]
    out.append(f"_Generated by harness-replay {report['tool_version']} (`replay report`)._")
    return "\n".join(out) + "\n"


def emit(report: Report, fmt: str, out: Path | None) -> str:
    """Render ``report`` as Markdown or JSON; write it to ``out`` (atomically) or return it for stdout."""
    from .cassette import write_atomic

    # cassette text reaches both (header fields, error messages): nothing a terminal acts on
    text = dumps_json(report, indent=2) + "\n" if fmt == "json" else visible(render_markdown(report), multiline=True)
    if out is not None:
        try:
            write_atomic(out, text.encode("utf-8"))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(out, 0o666 & ~umask)  # a document to share, not a private temp file
        except CassetteError as exc:  # write_atomic: the place is not writable
            raise ReplayUsageError(f"{out}: cannot write the report: {exc.problem.removeprefix('cannot write: ')}") from None
        except OSError as exc:
            raise ReplayUsageError(f"{out}: cannot write the report: {exc.strerror or exc}") from None
    return text


def exit_code(report: Report) -> int:
    """0 when every version's trials agree; 1 when they differ or a version could not run."""
    bad = any(not v["identical"] or v.get("env_error") for v in report["versions"])
    return 1 if bad else 0


__all__ = ["Request", "Subject", "build", "sent_text", "commands", "emit", "exit_code", "facts", "freeze_digest", "locate", "render_markdown"]

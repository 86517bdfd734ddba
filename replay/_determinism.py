"""Make recordings repeatable, and check that they are.

Two parts:

* :func:`deterministic_ids` — some harness capabilities put ``uuid4()`` or
  ``secrets.token_hex()`` ids into prompt text (plan step ids, subagent task ids), and some
  put pydantic-ai's run id (a ``uuid7()``) there (tool-output spill handles, step-persistence
  search results, which the model then quotes back). Those
  differ on every run, so two recordings of an unchanged scenario would differ and a
  replay would never send exactly what was recorded. While a scenario runs, these
  functions answer from a generator seeded by the scenario id instead. The harness's
  files go to a temporary directory of the run's own (``tempfile.gettempdir()`` asked from a
  harness module): seeded run ids make every run of a scenario name the same files
  (``ToolOutputLimits`` spills to ``<tmp>/pyai_harness_overflow-<uid>/<run id>/<call>``), so a
  shared one let a replay read what another version or a concurrent matrix cell wrote, and
  left files behind.
* :func:`check` — ``replay record --check-determinism N``: record every scenario N times
  in fresh processes and compare the normalised cassettes byte for byte.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from .errors import ReplayError

if TYPE_CHECKING:
    from .cassette import Cassette, Limits
    from .scenario import Scenario

__all__ = [
    "DeterminismResult",
    "check",
    "describe_difference",
    "deterministic_ids",
    "first_difference",
    "normalised_bytes",
]

# --------------------------------------------------------------------------- seeded ids

def _real(function: Any) -> Any:
    """The function a replacement stands for, from any copy of this module.

    A process can import this module twice (pytester's inline runs drop the modules first imported
    during them): the second copy, imported while the first had replaced ``tempfile.gettempdir``,
    took that replacement for the real function and never replaced it itself.
    """
    return getattr(function, "_replay_original", function)


_ORIGINALS: dict[str, Callable[..., Any]] = {
    "uuid4": _real(uuid.uuid4),
    "token_bytes": _real(secrets.token_bytes),
    "token_hex": _real(secrets.token_hex),
    "token_urlsafe": _real(secrets.token_urlsafe),
    "gettempdir": _real(tempfile.gettempdir),
}
_lock = threading.Lock()
_users = 0
_patched: list[tuple[object, str, Callable[..., Any]]] = []


class _Streams:
    """One seeded generator per call site (module and function) within a scenario run.

    A single shared sequence would shift whenever an unrelated caller draws one more id:
    pydantic-graph, for one, takes ids while it builds its graph on the first run in a
    process only, so a scenario's ids would depend on what ran before it in that process.
    """

    def __init__(self, scenario_id: str) -> None:
        self.scenario_id = scenario_id
        self._by_site: dict[str, random.Random] = {}
        self._ticks: dict[str, int] = {}
        self._tmp: str | None = None
        self._tmp_lock = threading.Lock()

    def tmp(self) -> str:
        """This run's temporary directory, made on first use (most scenarios never ask)."""
        with self._tmp_lock:  # the harness writes spills from worker threads
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix="replay-scenario-", dir=_ORIGINALS["gettempdir"]())
            return self._tmp

    def close(self) -> None:
        with self._tmp_lock:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    def at(self, frame: FrameType) -> random.Random:
        site = _site(frame)
        rng = self._by_site.get(site)
        if rng is None:
            rng = self._by_site[site] = random.Random(seed_for(f"{self.scenario_id}\0{site}"))
        return rng

    def tick(self, frame: FrameType) -> int:
        """How many time-ordered ids this call site drew before (its uuid7s stay in creation order)."""
        site = _site(frame)
        n = self._ticks.get(site, 0)
        self._ticks[site] = n + 1
        return n


_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>"})


def site_name(qualname: str) -> str:
    """A call site's function as Python 3.12 and later name it, whatever Python runs: list, dict and set
    comprehensions have no frame of their own there (PEP 709), while 3.11 runs each in a function of its
    own (``f.<locals>.<listcomp>``). Keyed by that name, an id drawn in a comprehension came from another
    generator on 3.11 than on 3.12: a cassette recorded on one replayed ``changed`` on the other."""
    out: list[str] = []
    for part in qualname.split("."):  # 3.11: `f.<locals>.<listcomp>`, `f.<locals>.<listcomp>.<lambda>`
        if part not in _COMPREHENSIONS and not (part == "<locals>" and (not out or out[-1] == "<locals>")):
            out.append(part)
    if out and out[-1] == "<locals>":
        out.pop()
    return ".".join(out) or "<module>"


def _site(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__')}:{site_name(frame.f_code.co_qualname)}"


_STREAMS: contextvars.ContextVar[_Streams | None] = contextvars.ContextVar("replay_id_streams", default=None)


def _rng(depth: int = 2) -> random.Random | None:
    """The seeded generator for the caller ``depth`` frames up, unless no scenario runs here.

    Code inside a model call is a provider SDK building a real request (idempotency keys,
    multipart boundaries): those must stay random, and their values never reach a prompt.
    """
    streams = _STREAMS.get()
    if streams is None:
        return None
    from .recorder._interception import _ACTIVE

    if _ACTIVE.get() is not None:
        return None
    return streams.at(sys._getframe(depth))


def _uuid4() -> uuid.UUID:
    rng = _rng()
    if rng is None:
        return _ORIGINALS["uuid4"]()  # type: ignore[no-any-return]
    return uuid.UUID(int=rng.getrandbits(128), version=4)


_UUID7_EPOCH_MS = 1_767_225_600_000
"""2026-01-01T00:00Z: where seeded uuid7 timestamps start (one millisecond per id a call site draws)."""


def _uuid7() -> uuid.UUID:
    """A seeded UUIDv7 whose timestamp counts this call site's draws, so ids sort in creation order as real ones do."""
    rng = _rng()
    if rng is None:
        return _ORIGINALS["uuid7"]()  # type: ignore[no-any-return]
    ms = _UUID7_EPOCH_MS + _STREAMS.get().tick(sys._getframe(1))  # type: ignore[union-attr]
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | rng.getrandbits(12) << 64 | rng.getrandbits(62)
    return uuid.UUID(int=value | 0x0000_0000_0000_7000_8000_0000_0000_0000)


def _gettempdir() -> str:
    """The run's own directory when the harness asks; anyone else (the scenario's code putting a path
    in a prompt, ``tempfile.mkdtemp`` for a workspace) gets the system's, so what they send is as recorded."""
    streams = _STREAMS.get()
    if streams is None or not str(sys._getframe(1).f_globals.get("__name__")).startswith("pydantic_ai_harness."):
        return _ORIGINALS["gettempdir"]()  # type: ignore[no-any-return]
    return streams.tmp()


def _token_bytes(nbytes: int | None = None) -> bytes:
    rng = _rng()
    if rng is None:
        return _ORIGINALS["token_bytes"](nbytes)  # type: ignore[no-any-return]
    return rng.randbytes(32 if nbytes is None else nbytes)


def _token_hex(nbytes: int | None = None) -> str:
    rng = _rng()
    if rng is None:
        return _ORIGINALS["token_hex"](nbytes)  # type: ignore[no-any-return]
    return rng.randbytes(32 if nbytes is None else nbytes).hex()


def _token_urlsafe(nbytes: int | None = None) -> str:
    rng = _rng()
    if rng is None:
        return _ORIGINALS["token_urlsafe"](nbytes)  # type: ignore[no-any-return]
    return base64.urlsafe_b64encode(rng.randbytes(32 if nbytes is None else nbytes)).rstrip(b"=").decode("ascii")


_REPLACEMENTS: dict[str, Callable[..., Any]] = {
    "uuid4": _uuid4,
    "token_bytes": _token_bytes,
    "token_hex": _token_hex,
    "token_urlsafe": _token_urlsafe,
    "uuid7": _uuid7,
    "gettempdir": _gettempdir,
}
for _name, _replacement in _REPLACEMENTS.items():
    if _name in _ORIGINALS:
        _replacement._replay_original = _ORIGINALS[_name]  # type: ignore[attr-defined]


def _learn_uuid7() -> None:
    """Add pydantic-ai's ``uuid7`` (its run and conversation ids; ``uuid.uuid7`` on Python 3.14+) to
    what is replaced, once it is imported: importing it here would import all of pydantic-ai."""
    if "uuid7" in _ORIGINALS:
        return
    found = getattr(sys.modules.get("pydantic_ai._uuid"), "uuid7", None) or getattr(uuid, "uuid7", None)
    if not callable(found):
        return
    found = _ORIGINALS["uuid7"] = _real(found)
    _uuid7._replay_original = found  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):  # modules scanned before now may have bound it
        if id(module) not in _scanned:
            continue
        try:
            namespace = vars(module)
        except Exception:
            continue
        if isinstance(namespace, dict) and _real(namespace.get("uuid7")) is found:
            _bindings.append((namespace, "uuid7"))


_bindings: list[tuple[dict[str, Any], str]] = []
"""Every (module namespace, name) found bound to an original, so re-entry needs no rescan."""
_scanned: set[int] = set()


def _patch_modules() -> None:
    """Replace the functions in ``uuid``/``secrets`` and wherever a module imported them by name.

    ``from uuid import uuid4`` (as several harness modules do) copies the function into
    the importing module, so patching ``uuid`` alone would miss it. A module that does so
    while a scenario runs binds the replacement and keeps it afterwards, which is harmless:
    outside a scenario it answers with the real function. Nothing else is touched:
    ``os.urandom``, ``random`` and ``ssl`` keep their real entropy. Only modules not seen
    before are scanned (a scan of every module costs about a millisecond per scenario).
    """
    _learn_uuid7()
    modules = list(sys.modules.values())
    for module in modules:
        if id(module) in _scanned:
            continue
        _scanned.add(id(module))
        try:
            namespace = vars(module)
        except Exception:  # odd objects some libraries put into sys.modules
            continue
        if not isinstance(namespace, dict):
            continue
        for name, original in _ORIGINALS.items():
            if name in namespace and _real(namespace[name]) is original:
                _bindings.append((namespace, name))
    for namespace, name in _bindings:
        original = _ORIGINALS[name]
        if namespace.get(name) is not _REPLACEMENTS[name] and _real(namespace.get(name)) is original:
            _patched.append((namespace, name, original))
            namespace[name] = _REPLACEMENTS[name]


def _restore() -> None:
    for namespace, name, original in reversed(_patched):
        if namespace.get(name) is _REPLACEMENTS[name]:
            namespace[name] = original
    _patched.clear()


def seed_for(scenario_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(scenario_id.encode(), digest_size=8).digest(), "big")


@contextmanager
def deterministic_ids(scenario_id: str) -> Iterator[None]:
    """Within this context (and tasks started from it), ids come from a generator seeded by ``scenario_id``.

    Per context rather than per process, so two scenarios running concurrently each get
    their own sequence; outside any such context the real functions answer. The context's
    temporary directory is its own too, and is removed when it ends (see the module's docstring).
    """
    global _users
    with _lock:
        _users += 1
        _patch_modules()  # every entry: also picks up modules imported since the last one
    streams = _Streams(scenario_id)
    token = _STREAMS.set(streams)
    try:
        yield
    finally:
        _STREAMS.reset(token)
        streams.close()
        with _lock:
            _users -= 1
            if _users == 0:
                _restore()


# --------------------------------------------------------------------------- checking


def normalised_bytes(path: Path, limits: Limits | None = None) -> bytes:
    """Canonical JSON of a cassette's normalised form: what 'byte-identical' compares (read with ``limits``,
    the project's ``[tool.replay] max-*``; the defaults when None)."""
    from .cassette import DEFAULT_LIMITS, load
    from .normaliser import normalise

    data = normalise(load(path, limits or DEFAULT_LIMITS)).as_json()
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr).encode()


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Dotted path of the first place two JSON-like values differ, or None when equal."""
    if type(a) is not type(b):
        return path or "<root>"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return sub
            found = first_difference(a[key], b[key], sub)
            if found is not None:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else f"{path}[{min(len(a), len(b))}]"
    return None if a == b else (path or "<root>")


_ALIAS = re.compile(r"<(id|uuid)#\d+>")


def _blind(value: Any) -> str:
    """Canonical JSON with alias ordinals erased: aliases are numbered in order of first
    appearance across the whole cassette, so two calls that swapped places renumber every
    id after them, and the first renumbered id is not where the recordings really differ."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    return _ALIAS.sub(lambda m: f"<{m.group(1)}>", text)




def value_at(value: Any, path: str, absent: Any = "<absent>") -> Any:
    """The value at a :func:`first_difference` path, or ``absent`` when that side lacks it."""
    for key, index in re.findall(r"\.?([^.\[\]]+)|\[(\d+)\]", "" if path == "<root>" else path):
        try:
            value = value[int(index)] if index else value[key]
        except (KeyError, IndexError, TypeError):
            return absent
    return value


def describe_difference(a: Cassette, b: Cassette, names: tuple[str, str] = ("recording 1", "recording 2")) -> str:
    """Where two recordings of one scenario first part ways, by role and ordinal, and what differs.

    Exchanges are visited in the order the first recording made them; each is compared
    with alias ordinals erased. Two calls of one role that traded places are named as a
    swap rather than as two changes. ``names`` are what ``a`` and ``b`` are called in the text.
    """
    from ._untrusted import _pair
    from .normaliser import normalise

    na, nb = normalise(a), normalise(b)
    bodies = [
        {(r.role, r.index): _blind(r.body) for reqs in n.requests.values() for r in reqs} for n in (na, nb)
    ]
    order = [(ex.role, ex.index) for ex in sorted(a.exchanges, key=lambda ex: ex.seq)]
    order += [(ex.role, ex.index) for ex in sorted(b.exchanges, key=lambda ex: ex.seq) if (ex.role, ex.index) not in bodies[0]]
    for key in order:
        label = f"{key[0]}[{key[1]}]"
        if key not in bodies[1] or key not in bodies[0]:
            return f"{label} is only in {names[0] if key in bodies[0] else names[1]}"
        x, y = bodies[0][key], bodies[1][key]
        if x == y:
            continue
        for other, ox in bodies[0].items():
            if other != key and other[0] == key[0] and bodies[1].get(other) == x and ox == y:
                return f"{label} and {other[0]}[{other[1]}] swapped places (each sent what the other sent)"
        va, vb = json.loads(x), json.loads(y)
        where = first_difference(va, vb) or "<root>"
        return "{} differs at {}: {} → {}".format(label, where, *_pair(value_at(va, where), value_at(vb, where), 60))
    seq = [[(ex.role, ex.index) for ex in sorted(c.exchanges, key=lambda ex: ex.seq)] for c in (a, b)]
    for i, (x, y) in enumerate(zip(*seq)):
        if x != y:
            return (
                f"same requests, made in another order: call #{i + 1} was {x[0]}[{x[1]}] in {names[0]}, "
                f"{y[0]}[{y[1]}] in {names[1]}"
            )
    for what, va, vb in (("outcome", na.outcome, nb.outcome), ("observations", na.observations, nb.observations)):
        if _blind(va) != _blind(vb):
            where = first_difference(json.loads(_blind(va)), json.loads(_blind(vb))) or "<root>"
            return f"{what} differ at {where}"
    return "same requests and outcome; only the numbering of generated ids differs"


@dataclass(frozen=True)
class DeterminismResult:
    scenario_id: str
    runs: int
    identical: bool
    detail: str = ""
    error: bool = False
    """Every recording failed: no verdict (the scenario's own error, as ``replay record`` reports it)."""

    def line(self) -> str:
        status = "identical" if self.identical else "ERROR" if self.error else "DIFFERENT"
        return f"{status:9} {self.scenario_id} ({self.runs} recordings)" + (f": {self.detail}" if self.detail else "")


def _record_in(directory: Path, targets: Sequence[str], cwd: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "replay", "record", *targets, "--cassettes", str(directory), "--force"]
    return subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )


def _compare(scenario_id: str, dirs: Sequence[Path], limits: Limits) -> DeterminismResult:
    from .cassette import cassette_path, load

    paths = [cassette_path(d, scenario_id) for d in dirs]
    blobs = [normalised_bytes(p, limits) for p in paths]
    reordered = False
    for k, blob in enumerate(blobs[1:], start=2):
        if blob != blobs[0]:
            a, b = load(paths[0], limits), load(paths[k - 1], limits)
            if _replays_alike(a, b):
                reordered = True
                continue
            where = describe_difference(a, b, ("recording 1", f"recording {k}"))
            return DeterminismResult(scenario_id, len(dirs), False, f"recording 1 and {k}: {where}")
    return DeterminismResult(scenario_id, len(dirs), True, _REORDERED if reordered else "")


_REORDERED = "the recordings differ only where a replay sees no change (concurrent calls in another order, a stamp or hash of a value it aliases)"


def _replays_alike(a: Cassette, b: Cassette) -> bool:
    """Whether two recordings that differ byte for byte are ones a replay of either reads as ``same``.

    Concurrent conversations (``asyncio.gather`` of runs with a summarizer each) arrive in an order set
    by latency: a capability's calls for two of them trade places from one recording to the next. The
    differ pairs them by conversation and by what they sent (``replay run`` says ``same`` every time), so
    calling such a scenario ``DIFFERENT`` sent its author hunting a nondeterminism no replay shows.
    """
    from .differ import diff

    return not diff(a, b).changed


def _scenario_errors(stderr: str, ids: Sequence[str]) -> dict[str, str]:
    """What ``replay record`` said of each scenario it wrote nothing for (``error     <id> -> <path>: <why>``)."""
    known, out = set(ids), {}
    for line in stderr.splitlines():
        if not line.startswith("error "):
            continue
        sid, sep, rest = line[len("error "):].lstrip().partition(" -> ")
        if not sep:
            sid, sep, rest = line[len("error "):].lstrip().partition(": ")
        if sid in known:
            out[sid] = rest.partition(": ")[2] if " -> " in line else rest
    return out


def _failed(scenario_id: str, reasons: dict[int, str], runs: int) -> DeterminismResult:
    """A scenario that raised in some recordings: a difference when the others recorded it, else its error."""
    first, why = min(reasons.items())
    if len(reasons) == runs:
        return DeterminismResult(scenario_id, runs, False, f"every recording failed: {why}", error=True)
    ok = min(set(range(1, runs + 1)) - set(reasons))
    return DeterminismResult(scenario_id, runs, False, f"recording {first} failed ({why}), recording {ok} did not")


def _targets(scenarios: Sequence[Scenario], scenarios_dir: Path) -> list[str]:
    """What to pass ``replay record`` in the child: the id, or the file when it lies outside scenarios/."""
    home = scenarios_dir.resolve()
    out = {sc.id if sc.path is None or sc.path.resolve().is_relative_to(home) else str(sc.path) for sc in scenarios}
    return sorted(out)


def check(
    scenarios: Sequence[Scenario], runs: int, scenarios_dir: Path, cwd: Path | None = None, committed: Path | None = None,
    limits: Limits | None = None,
) -> list[DeterminismResult]:
    """Record the scenarios ``runs`` times in fresh processes (in parallel) and compare each one.

    Recordings go to a temporary directory, never into the project's cassettes. ``committed``: the
    project's cassettes, which recordings that agree with each other must also match when made on the
    same harness and pydantic-ai (a scenario keeping state in a fixed folder sees the same leftovers in
    every probe, and only the cassette recorded before them tells). ``limits``: the project's
    ``[tool.replay] max-*``, which the recording children wrote with (the defaults when None).
    """
    from .cassette import DEFAULT_LIMITS

    limits = limits or DEFAULT_LIMITS
    if runs < 2:
        raise ReplayError("--check-determinism needs at least 2 recordings to compare")
    where = cwd or Path.cwd()
    targets = _targets(scenarios, scenarios_dir)
    with tempfile.TemporaryDirectory(prefix="replay-determinism-") as tmp:
        dirs = [Path(tmp) / f"run{i + 1}" for i in range(runs)]
        procs = [_record_in(d, targets, where) for d in dirs]
        outputs = [p.communicate() for p in procs]
        failed: dict[str, dict[int, str]] = {}  # scenario id -> recording -> why it wrote nothing
        for i, (proc, (_, err)) in enumerate(zip(procs, outputs), start=1):
            if proc.returncode == 0:
                continue
            reasons = _scenario_errors(err, [sc.id for sc in scenarios])
            if not reasons:  # the child itself failed (a usage error): no scenario's verdict is known
                last = (err.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
                raise ReplayError(f"determinism check: recording {i} failed: {last}")
            for sid, reason in reasons.items():
                failed.setdefault(sid, {})[i] = reason
        results = [_failed(sc.id, failed[sc.id], runs) if sc.id in failed else _compare(sc.id, dirs, limits)
                   for sc in scenarios]
        if committed is not None:
            results = [_against_committed(r, dirs[0], committed, limits) if r.identical else r for r in results]
        return results


def _against_committed(result: DeterminismResult, fresh_dir: Path, committed: Path, limits: Limits) -> DeterminismResult:
    from .cassette import cassette_path, load
    from .errors import CassetteError

    fresh, kept = cassette_path(fresh_dir, result.scenario_id), cassette_path(committed, result.scenario_id)
    if not kept.is_file():
        return result
    try:
        a, b = load(kept, limits), load(fresh, limits)
    except CassetteError:
        return result
    if (a.header.harness_version, a.header.slim_version) != (b.header.harness_version, b.header.slim_version):
        return result  # another version's recording: a difference may be the harness's
    if normalised_bytes(kept, limits) == normalised_bytes(fresh, limits) or _replays_alike(a, b):
        return result
    where = describe_difference(a, b, ("the cassette", "the recordings"))
    return DeterminismResult(result.scenario_id, result.runs, False,
                             f"the recordings agree with each other but not with {kept}, recorded on this same version "
                             f"(state an earlier run left behind, or an edit since?): {where}")

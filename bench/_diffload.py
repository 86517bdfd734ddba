"""Workload of the diff benchmark: a real recording of the realistic scenario, and a re-run of it.

A is ``replay record bench/_scenario.py`` at enough turns for 10,000 requests (main,
summarizing_compaction and system_reminders, a run record per agent run), recorded once and
cached under ``.replay/bench/`` (keyed by the scenario's source and the harness version:
recording it takes a minute or two). Smaller sizes are prefixes of it (the first N requests
in call order, re-interned: the cassette recording those N requests would give). B is A as a
second recording of a slightly different harness gives it: every timestamp, run id and
conversation id new (noise the normaliser must drop) and one answer in ``EDIT_EVERY`` edited
— every later request re-sends that answer until compaction drops it, so a few percent of the
requests really differ and must be aligned and diffed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from replay.cassette import AgentRunRecord, Cassette, CassetteBuilder, Exchange, Limits, dumps, loads
from replay.cassette import load as _load

LIMITS = Limits(max_expanded=2_000_000_000)
"""A 10,000-request realistic recording expands to ~420 M characters, over the default loader bound."""
CONFIG = "[tool.replay]\nmax-expanded = 2000000000\n"
"""The same bound for `replay diff` processes (run where this pyproject.toml is)."""


def load(path: Path) -> Cassette:
    return _load(path, LIMITS)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REQUESTS_PER_TURN = 2.23
"""Measured on the realistic scenario: 200 turns give 446 requests."""
EDIT_EVERY = 50
"""One main answer in this many is edited in B."""


def recording(requests: int) -> Cassette:
    """A real recording with at least ``requests`` requests (cached)."""
    import importlib.metadata

    scenario = HERE / "_scenario.py"
    key = hashlib.blake2b(scenario.read_bytes() + importlib.metadata.version("pydantic-ai-harness").encode(), digest_size=6).hexdigest()
    cache = ROOT / ".replay" / "bench"
    for found in sorted(cache.glob(f"realistic-*-{key}/bench/realistic.cassette")):
        cassette = load(found)
        if len(cassette.exchanges) >= requests:
            return cassette
    turns = int(requests / REQUESTS_PER_TURN) + 20
    out = cache / f"realistic-{turns}-{key}"
    env = {**os.environ, "REPLAY_BENCH_TURNS": str(turns)}
    replay = str(Path(sys.executable).parent / "replay")
    print(f"  (recording the diff workload once: {turns} turns of bench/_scenario.py, cached in {out})", flush=True)
    subprocess.run([replay, "record", "--force", str(scenario), "--cassettes", str(out)], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    cassette = load(out / "bench" / "realistic.cassette")
    if len(cassette.exchanges) < requests:
        raise RuntimeError(f"{out}: {len(cassette.exchanges)} requests recorded, {requests} wanted")
    return cassette


def prefix(cassette: Cassette, requests: int) -> Cassette:
    """The first ``requests`` calls (in call order) with the runs they belong to, tables rebuilt."""
    b = CassetteBuilder(cassette.header.model_copy())
    kept = sorted(cassette.exchanges, key=lambda e: e.seq)[:requests]
    runs: dict[int, int] = {}
    table = cassette.messages

    def ids(indices: list[int]) -> list[int]:
        return [b.message(table[i]) for i in indices]

    for ex in kept:
        if ex.run is not None and ex.run not in runs:
            run = cassette.runs[ex.run]
            runs[ex.run] = len(b.cassette.runs)
            b.cassette.runs.append(AgentRunRecord(role=run.role, prompt=run.prompt, history=ids(run.history),
                                                  result=ids(run.result), output=run.output, error=run.error, estimate=run.estimate))
        b.cassette.exchanges.append(Exchange(
            seq=ex.seq, role=ex.role, index=ex.index, kind=ex.kind, model_name=ex.model_name, model_system=ex.model_system,
            messages=ids(ex.messages), settings=b.blob(cassette.blob(ex.settings)), parameters=b.blob(cassette.blob(ex.parameters)),
            instructions=ex.instructions, response=b.message(table[ex.response]) if ex.response is not None else None,
            usage=ex.usage, error=ex.error, estimate=ex.estimate, run=runs.get(ex.run) if ex.run is not None else None,
        ))
    b.cassette.outcome = cassette.outcome
    return b.cassette


def rerun(cassette: Cassette) -> tuple[Cassette, int]:
    """B: new timestamps and run/conversation ids everywhere, one main answer in EDIT_EVERY edited.

    Returns the copy and how many answers were edited.
    """
    c = loads(dumps(cassette), limits=LIMITS)
    shift = dt.timedelta(days=1, seconds=17)
    ids: dict[str, str] = {}
    for message in c.messages:
        _restamp(message, shift, ids)
    answers = sorted({ex.response for ex in c.exchanges if ex.role == "main" and ex.response is not None})
    edited = 0
    for n, index in enumerate(answers):
        if n % EDIT_EVERY == EDIT_EVERY // 2:
            for part in c.messages[index].get("parts", []):
                if part.get("part_kind") == "text":
                    part["content"] += " (revised)"
                    edited += 1
    return c, edited


def _restamp(value: Any, shift: dt.timedelta, ids: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "timestamp" and isinstance(item, str):  # in pydantic's format, as a real recording has it
                stamp = (dt.datetime.fromisoformat(item.replace("Z", "+00:00")) + shift).isoformat()
                value[key] = stamp.replace("+00:00", "Z") if item.endswith("Z") else stamp
            elif key in ("run_id", "conversation_id") and isinstance(item, str):
                value[key] = ids.setdefault(item, str(uuid.uuid4()))
            else:
                _restamp(item, shift, ids)
    elif isinstance(value, list):
        for item in value:
            _restamp(item, shift, ids)


NAIVE = """\
import sys, msgpack
from deepdiff import DeepDiff
MAGIC = 8
a, b = (msgpack.unpackb(open(p, 'rb').read()[MAGIC:], raw=False, strict_map_key=False) for p in sys.argv[1:3])
d = DeepDiff(a, b, exclude_regex_paths=[r"\\['(timestamp|run_id|conversation_id|created_at)'\\]"])
print(len(d.get('values_changed', {})))
"""
"""The naive baseline, as a whole process: decode both files and DeepDiff them, leaving out the
volatile keys a user would know to exclude (timestamps, run and conversation ids)."""

FLOOR = """\
import sys
from pathlib import Path
import deepdiff, pydantic_ai, pydantic_ai_harness.compaction, replay.cli
from replay.cassette import load
from replay.config import limits, load_config
bound = limits(load_config())
a, b = (load(Path(p), bound) for p in sys.argv[1:3])
print(len(a.exchanges) + len(b.exchanges))
"""
"""What `replay diff` pays before it compares anything, as a whole process: start-up, the imports it
needs (pydantic-ai and the harness for their own estimates, deepdiff, the CLI) and both files
loaded as untrusted input (decoded, bounded, validated). Timed on its own, not subtracted: the
floor under any speed-up of the comparison itself."""


def stages(a: Path, b: Path) -> dict[str, float]:
    """CPU seconds of each stage of `replay diff A B --format json` after start-up (what compare_files does)."""
    import time

    from replay import _facts, invariants
    from replay.differ import diff
    from replay.reporter import ScenarioReport, reports_json

    out: dict[str, float] = {}
    t = time.process_time()
    import deepdiff  # noqa: F401  (a constant cost: timed apart, so the sizes compare work, not imports)
    import pydantic_ai  # noqa: F401
    import pydantic_ai_harness.compaction  # noqa: F401

    imports = time.process_time() - t
    t = time.process_time()
    ca, cb = load(a), load(b)
    out["load"] = time.process_time() - t
    with _facts.shared():  # as compare_files does: the checks reuse the diff's per-message estimates
        t = time.process_time()
        d = diff(ca, cb)
        out["normalise+diff"] = time.process_time() - t
        t = time.process_time()
        graded = invariants.compare_cassettes(ca, cb)
        d.violations, d.new_violations = graded.violations, graded.new
        out["checks"] = time.process_time() - t
    t = time.process_time()
    reports_json([ScenarioReport(ca.header.scenario_id or "s", "changed" if d.changed else "same", diff=d)])
    out["json"] = time.process_time() - t
    out["requests changed"] = len(d.requests)
    out["imports (not counted)"] = imports
    return out


if __name__ == "__main__":  # python bench/_diffload.py A B: the stages as one JSON line (run in a child with a timeout)
    import json

    print(json.dumps(stages(Path(sys.argv[1]), Path(sys.argv[2]))))

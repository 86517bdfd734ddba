"""harness-replay benchmarks: ``make bench``.

Every benchmark measures its own baseline in the same run and prints one line:
name, baseline, measured, ratio, target, PASS/FAIL. Nothing here asserts absolute
times. In-process timings are CPU time of this process (``time.process_time``): the
work is single-threaded and CPU-bound, and CPU time is far less disturbed than wall
time by other jobs on a shared machine; whole-process timings are wall time. The two
sides are interleaved (A B, B A, ...) and each prints ``median [min-max]``: the ratio is
of the medians. Components ("of which") are each timed on their own, never obtained by
subtraction, so none can come out negative.

Usage: python bench/run.py [--quick] [--only 1,2,...]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # finalize() reads [tool.replay] from the project's pyproject

RESULTS: list[tuple[str, bool | None]] = []


def line(name: str, baseline: str, measured: str, ratio: float | None, target: str, ok: bool | None, note: str = "") -> None:
    verdict = "PASS" if ok else ("FAIL" if ok is not None else "PENDING")
    r = f"{ratio:.3f}" if ratio is not None else "-"
    print(f"{name:<22} baseline={baseline:<18} measured={measured:<18} ratio={r:<7} target={target:<7} {verdict}", flush=True)
    if note:
        print(f"{'':<22} {note}", flush=True)
    RESULTS.append((name, ok))


def detail(text: str) -> None:
    print(f"{'':<22} {text}", flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}ms"


def fmt_bytes(n: int) -> str:
    return f"{n / 1024:.1f}KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f}MiB"


# --------------------------------------------------------------------------- timing


def spread(values: list[float], unit: Callable[[float], str]) -> str:
    """``median [min-max]`` of a side's samples: the median is the figure, the range its noise."""
    return f"{unit(statistics.median(values))} [{unit(min(values))}-{unit(max(values))}]"


def sec(seconds: float) -> str:
    return f"{seconds:.2f}s"


def interleave(sides: dict[str, Callable[[], Any]], rounds: int, clock: Callable[[], float] = time.process_time) -> dict[str, list[float]]:
    """One sample per side per round, the order rotating every round (A B, B A, ...), so slow
    drifts of a shared machine hit both sides alike. Each side is one call; returns all samples."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            gc.collect()
            t = clock()
            sides[name]()
            samples[name].append(clock() - t)
    return samples


def ratio_line(name: str, samples: dict[str, list[float]], a: str, b: str, target: float, unit: Callable[[float], str]) -> float:
    """Median of B over median of A; PASS when at most ``target``."""
    ratio = statistics.median(samples[b]) / statistics.median(samples[a])
    line(name, spread(samples[a], unit), spread(samples[b], unit), ratio, f"<={target}", ratio <= target)
    return ratio


def best_of(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t) / number)
    return best


# --------------------------------------------------------------------------- 1 + 2: record / replay overhead


def bench_overhead(quick: bool) -> None:
    """In-process record and replay of the realistic workload vs the plain run of it.

    Record is what ``replay record`` does after start-up: run under capture, scrub, encode,
    write. Replay is what ``replay run`` does after start-up: ``_pipeline.replay_scenario``
    (load, network guard, replay, save the result, diff, invariant checks).
    """
    from _scenario import TURNS, conversation, make_scenario

    from replay import _pipeline
    from replay import cassette as cas
    from replay.recorder import Session, execute_async, finalize

    sc = make_scenario(TURNS)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-overhead-"))
    cassettes, results = work / "cassettes", work / "results"
    path = cas.cassette_path(cassettes, sc.id)
    parts: dict[str, list[float]] = {"run under capture": [], "finalize (scrub)": [], "encode + write": []}

    def plain() -> None:
        asyncio.run(conversation(TURNS))

    def record() -> None:
        t0 = time.process_time()
        session = Session()
        cassette = asyncio.run(execute_async(sc, session))
        t1 = time.process_time()
        final = finalize(cassette)
        t2 = time.process_time()
        cas.save(final, path)
        t3 = time.process_time()
        for key, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            parts[key].append(value)

    def replay() -> None:
        report = _pipeline.replay_scenario(sc, cassettes, results)
        if report.status != "same":
            raise AssertionError(f"replay of the recording is not 'same': {report.status} {report.error or ''}")

    try:
        record()
        recorded = cas.load(path)
        assert recorded.outcome.status == "ok", recorded.outcome
        replay()  # warm: lazy imports, adapters
        rounds = 3 if quick else 5
        for v in parts.values():
            v.clear()
        samples = interleave({"plain": plain, "record": record}, rounds)
        roles = recorded.by_role()
        ratio_line("1 record", samples, "plain", "record", 1.10, sec)
        detail(f"workload: {TURNS} turns, {len(recorded.exchanges)} requests "
               f"({', '.join(f'{r} {len(x)}' for r, x in sorted(roles.items()))}), FunctionModel responders; "
               f"median [range] of {rounds} interleaved runs, CPU time")
        detail("of which (median): " + ", ".join(f"{k} {sec(statistics.median(v))}" for k, v in parts.items())
               + f"; plain run {sec(statistics.median(samples['plain']))}")
        samples = interleave({"plain": plain, "replay": replay}, rounds)
        ratio_line("2 replay", samples, "plain", "replay", 1.05, sec)
        detail("replay = _pipeline.replay_scenario, what `replay run` does per scenario: load, guard, replay, save, diff, checks")
        detail("of which: " + ", ".join(f"{k} {sec(v)}" for k, v in replay_parts(sc, path, results / "parts.cassette").items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def replay_parts(sc: Any, path: Path, out: Path) -> dict[str, float]:
    """The steps of one ``replay_scenario``, each timed on its own (one run: where the time goes)."""
    from replay import _facts, _pipeline
    from replay import cassette as cas
    from replay.differ import diff
    from replay.replayer import replay

    took: dict[str, float] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t = time.process_time()
        value = fn()
        took[name] = time.process_time() - t
        return value

    def diff_and_checks() -> None:
        with _facts.shared():  # as replay_scenario runs them: the checks reuse the diff's per-message facts
            d = diff(recorded, result.result)
            _pipeline._grade_violations(d, recorded, result.result)

    recorded = step("load", lambda: cas.load(path))
    result = step("replay (guard, run, finalize)", lambda: replay(sc, recorded))
    step("save", lambda: cas.save(result.result, out))
    step("diff + checks", diff_and_checks)
    return took


# --------------------------------------------------------------------------- 2b: `replay run`, whole process


def bench_process(quick: bool) -> None:
    """``replay run`` of the realistic scenario as a user runs it vs a plain python process running it."""
    scenario_file = HERE / "_scenario.py"
    work = Path(tempfile.mkdtemp(prefix="replay-bench-process-"))
    exe = Path(sys.executable).parent
    replay_cmd = [str(exe / "replay")]
    env = {**os.environ, "REPLAY_BENCH_TURNS": str(200)}
    try:
        subprocess.run([*replay_cmd, "record", str(scenario_file), "--cassettes", str(work / "c")],
                       check=True, env=env, capture_output=True, cwd=ROOT)

        def plain() -> None:
            subprocess.run([sys.executable, str(scenario_file)], check=True, env=env, capture_output=True, cwd=ROOT)

        def run() -> None:
            done = subprocess.run([*replay_cmd, "run", str(scenario_file), "--cassettes", str(work / "c"), "--out", str(work / "o")],
                                  env=env, capture_output=True, cwd=ROOT, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"replay run exited {done.returncode}: {done.stdout[-300:]} {done.stderr[-300:]}")

        samples = interleave({"plain": plain, "replay run": run}, 3 if quick else 5, clock=_children_clock)
        ratio_line("2b replay run process", samples, "plain", "replay run", 1.3, sec)
        detail("`replay run bench/_scenario.py` (200 turns) vs `python bench/_scenario.py`, whole processes, CPU (user+sys) "
               "of each: wall time on a shared VM moved this line by ±0.15 between runs; where the time goes: see the "
               "'of which' of 2, plus ≈ 0.07 s of imports (typer, rich, the pipeline's modules)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- 3: cassette size


@functools.cache
def realistic_recording() -> Any:
    """The realistic workload recorded (``TURNS`` turns, 200 unless ``REPLAY_BENCH_TURNS`` says), once for lines 3 and 4."""
    from _scenario import TURNS, make_scenario

    from replay.recorder import Session, execute_async, finalize

    return finalize(asyncio.run(execute_async(make_scenario(TURNS), Session())))


def bench_size(quick: bool) -> None:
    """The realistic cassette (200 turns) vs the JSON of its transcript (each distinct message once)."""
    import msgpack
    from _scenario import TURNS

    from replay import cassette as cas

    cassette = realistic_recording()
    data = cas.dumps(cassette)
    transcript = json.dumps(cassette.messages, separators=(",", ":")).encode()
    ratio = len(data) / len(transcript)
    line("3 cassette size", fmt_bytes(len(transcript)) + " json", fmt_bytes(len(data)), ratio, "<=1.5", ratio <= 1.5)
    wire = cas.to_wire(cassette)
    sections = {k: len(msgpack.packb(v, use_bin_type=True)) for k, v in wire.items() if k not in ("format", "version")}
    detail(f"{TURNS} turns, {len(cassette.exchanges)} requests, {len(cassette.messages)} distinct messages; baseline = "
           "json.dumps of those messages (compact separators)")
    detail("file by section: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(sections.items(), key=lambda kv: -kv[1]) if v > 64))

    # 3b: the same conversation streamed (the main agent's answers about a token an event), as a chat front end records it
    from _scenario import CHUNK, make_scenario

    from replay.recorder import Session, execute_async, finalize

    streamed = finalize(asyncio.run(execute_async(make_scenario(TURNS, stream=True), Session())))
    data = cas.dumps(streamed)
    transcript = json.dumps(streamed.messages, separators=(",", ":")).encode()
    as_maps = {**cas.to_wire(streamed), "version": 1}  # format 1: every event a map of its own
    for ex, recorded in zip(as_maps["exchanges"], streamed.exchanges, strict=True):
        if recorded.events is not None:
            ex["events"] = recorded.events
    format_1 = len(msgpack.packb(as_maps, use_bin_type=True, default=cas.encode_big_int)) + len(cas.MAGIC)
    ratio = len(data) / len(transcript)
    line("3b streamed cassette", fmt_bytes(len(transcript)) + " json", fmt_bytes(len(data)), ratio, "<=1.5", ratio <= 1.5)
    events = sum(len(ex.events or ()) for ex in streamed.exchanges)
    detail(f"the same {TURNS} turns with the main agent's requests streamed ({CHUNK} characters an event: {events:,} events "
           f"in {sum(ex.events is not None for ex in streamed.exchanges)} streamed calls); format 2 (events as rows under "
           f"shared layouts) against the JSON of the distinct messages; format 1 (each event a map) wrote "
           f"{fmt_bytes(format_1)}, {format_1 / len(transcript):.2f}x")


# --------------------------------------------------------------------------- 4: load speed


def bench_load(quick: bool) -> None:
    """Loading the realistic recording vs what a user would otherwise keep it in.

    4a: vcrpy's own layout (``{"interactions": [{"request": {"body": <str>, ...}, "response":
    {"body": {"string": <str>}, ...}}], "version": 1}``, each request body the JSON the provider
    is sent, i.e. the whole history every time), read as vcrpy reads it: ``yaml.load`` with
    libyaml's ``CLoader`` (vcrpy's own Request objects are not built, which flatters vcrpy).
    4b: the cassette's own layout (message table, index runs) as plain JSON, ``json.loads``
    (and ``orjson.loads`` when installed): the same data without msgpack, limits or validation.
    """
    import yaml

    from replay import cassette as cas

    c = realistic_recording()
    data = cas.dumps(c)
    interactions = []
    for ex in c.exchanges:
        body = {"model": ex.model_name, "messages": c.expand(ex.messages), "settings": c.blob(ex.settings),
                "tools": c.blob(ex.parameters)}
        response = c.messages[ex.response] if ex.response is not None else None
        interactions.append({
            "request": {"body": json.dumps(body), "headers": {"content-type": ["application/json"]}, "method": "POST",
                        "uri": "https://api.example.com/v1/chat/completions"},
            "response": {"body": {"string": json.dumps(response)}, "headers": {"content-type": ["application/json"]},
                         "status": {"code": 200, "message": "OK"}},
        })
    as_yaml = yaml.dump({"interactions": interactions, "version": 1}, Dumper=yaml.CDumper)
    del interactions
    same_layout = json.dumps(cas.to_wire(c), separators=(",", ":"))
    assert len(cas.loads(data).exchanges) == len(c.exchanges)
    rounds = 3 if quick else 7
    samples = interleave({
        "yaml": lambda: yaml.load(as_yaml, Loader=yaml.CLoader),
        "json": lambda: json.loads(same_layout),
        "cassette": lambda: cas.loads(data),
    }, rounds)
    speedup = statistics.median(samples["yaml"]) / statistics.median(samples["cassette"])
    line("4a load vs vcrpy YAML", spread(samples["yaml"], ms), spread(samples["cassette"], ms), speedup, ">=4", speedup >= 4,
         note="ratio = speed-up (vcrpy layout via yaml CLoader / cassette load)")
    detail(f"realistic recording, {len(c.exchanges)} requests: cassette {fmt_bytes(len(data))}, "
           f"vcrpy YAML {fmt_bytes(len(as_yaml))} (bodies as strings, whole history per request)")
    ratio = statistics.median(samples["cassette"]) / statistics.median(samples["json"])
    line("4b load vs same JSON", spread(samples["json"], ms), spread(samples["cassette"], ms), ratio, "<=3", ratio <= 3,
         note="ratio = cassette load time / json.loads of the same layout (the cassette also checks limits and validates)")
    import msgpack

    from replay.cassette import _schema

    body = data[len(cas.MAGIC):]
    raw = msgpack.unpackb(body, raw=False)
    structured = cas.loads(data).model_dump()
    records = {**structured, "messages": []}  # loads hands pydantic the records, not the message table the schema checked
    steps = {
        "msgpack unpack": lambda: msgpack.unpackb(body, raw=False),
        "structural schema + limits (replay.cassette._schema)": lambda: _schema.validate(raw, cas.DEFAULT_LIMITS),
        "pydantic validation of the records": lambda: cas.Cassette.model_validate(records),
    }
    detail("of which (each step timed alone, best of 5): "
           + ", ".join(f"{k} {ms(best_of(fn, 5))}" for k, fn in steps.items()))
    try:
        import orjson
    except ImportError:
        detail(f"same layout as JSON {fmt_bytes(len(same_layout))}; orjson not installed")
    else:
        t_or = statistics.median(interleave({"orjson": lambda: orjson.loads(same_layout)}, rounds)["orjson"])
        detail(f"same layout as JSON {fmt_bytes(len(same_layout))}; orjson.loads {ms(t_or)}")


# --------------------------------------------------------------------------- 5: diff speed


def bench_diff(quick: bool) -> None:
    import _synth
    from deepdiff import DeepDiff

    from replay import cassette as cas
    from replay.differ import diff

    n = 10_000
    a = _synth.build(n)
    data = cas.dumps(a)
    b, changed = cas.loads(data), cas.loads(data)  # same recording, two independent copies
    other = len(changed.blobs)
    changed.blobs.append({"temperature": 0.7, "max_tokens": 1024})
    for ex in changed.exchanges[::100]:  # 1% of requests sent with different settings
        ex.settings = other
    same = diff(a, b)
    assert not same.requests, "identical cassettes must not differ"
    d1 = diff(a, changed)
    assert len(d1.requests) == n // 100, len(d1.requests)

    t_same = best_of(lambda: diff(a, b), 2 if quick else 3)
    t_changed = best_of(lambda: diff(a, changed), 2 if quick else 3)

    subset = 100 if quick else 200
    ea, eb, ec = (_synth.expanded(x, subset) for x in (a, b, changed))
    assert not DeepDiff(ea, eb)
    t_dd_same = best_of(lambda: DeepDiff(ea, eb), 2) * n / subset
    t_dd_changed = best_of(lambda: DeepDiff(ea, ec), 2) * n / subset
    r_same = t_dd_same / t_same
    r_changed = t_dd_changed / t_changed
    line("5a diff identical", f"{t_dd_same:.1f}s*", ms(t_same), r_same, ">=50", r_same >= 50,
         note=f"ratio = speed-up; *naive DeepDiff measured on the first {subset} of {n} expanded requests, scaled x{n // subset}")
    line("5b diff 1% changed", f"{t_dd_changed:.1f}s*", ms(t_changed), r_changed, ">=10", r_changed >= 10)
    detail(f"replay.differ.diff includes normalising both cassettes; {len(d1.requests)} requests reported changed")


# --------------------------------------------------------------------------- 5c-5d: `replay diff` of a real recording at scale


def _child_cpu(cmd: list[str], timeout: float, cwd: Path, failures: list[str]) -> Callable[[], None]:
    def go() -> None:
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, cwd=cwd, timeout=timeout, text=True)
            if done.returncode not in (0, 1):
                failures.append(f"{Path(cmd[0]).name} exited {done.returncode}: {done.stderr.strip()[-200:]}")
        except subprocess.TimeoutExpired:
            failures.append(f"did not finish in {timeout:.0f}s")  # killed; what it used until then still counts
    return go


def _bytecode() -> str:
    """Whether the start-up lines compare compiled imports: with PYTHONDONTWRITEBYTECODE and no
    compiled files, every process compiles pydantic-ai again (≈2x its import), which flatters
    any ratio against ``import pydantic_ai``. ``make setup`` installs with --compile-bytecode."""
    import importlib.util

    found = {}
    for name in ("pydantic_ai", "typer", "replay"):
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        found[name] = bool(origin) and Path(importlib.util.cache_from_source(str(origin))).exists()
    return "bytecode compiled: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in found.items())


def _children_clock() -> float:
    """CPU time of finished child processes (user + system): whole processes, unmoved by other load."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


_NOT_TIME = ("requests changed", "imports (not counted)")
DIFF_TIMEOUT = 600.0
"""Seconds one `replay diff` of the 10k workload may take before its line fails as 'did not finish'."""


def bench_diff_scale(quick: bool) -> None:
    """`replay diff` of a real multi-role recording with run records: linear, and vs a naive DeepDiff.

    Workload (bench/_diffload.py): the realistic scenario recorded at 10,000 requests (three roles,
    a run record per agent run), 2,500 its prefix; B is a re-run of A (new timestamps and ids
    everywhere, one main answer in 50 edited, so every request re-sending it differs). Each sample
    is a child process (so a stage that does not finish is cut off by a timeout, not the bench).
    """
    import _diffload

    from replay import cassette as cas

    big = _diffload.recording(10_000)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-diff-"))
    try:
        paths: dict[int, tuple[str, str]] = {}
        for n in (2_500, 10_000):
            a = _diffload.prefix(big, n)
            b, _ = _diffload.rerun(a)
            paths[n] = (str(cas.save(a, work / f"a{n}.cassette")), str(cas.save(b, work / f"b{n}.cassette")))
        stages: dict[str, list[dict[str, float]]] = {"2.5k": [], "10k": []}

        def staged(n: int, name: str) -> Callable[[], None]:
            def go() -> None:
                try:
                    done = subprocess.run([sys.executable, str(HERE / "_diffload.py"), *paths[n]], capture_output=True,
                                          text=True, cwd=ROOT, timeout=DIFF_TIMEOUT)
                    stages[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                except (subprocess.TimeoutExpired, IndexError, ValueError):
                    stages[name].append({"did not finish": DIFF_TIMEOUT})
            return go

        rounds = 2 if quick else 3
        interleave({"2.5k": staged(2_500, "2.5k"), "10k": staged(10_000, "10k")}, rounds, clock=_children_clock)
        totals = {k: [sum(v for s, v in st.items() if s not in _NOT_TIME) for st in runs] for k, runs in stages.items()}
        finished = not any("did not finish" in st for runs in stages.values() for st in runs)
        ratio = statistics.median(totals["10k"]) / statistics.median(totals["2.5k"])
        line("5c diff linear 2.5k→10k", spread(totals["2.5k"], sec), spread(totals["10k"], sec), ratio, "<=4.5",
             finished and ratio <= 4.5, note="" if finished else f"a run did not finish in {DIFF_TIMEOUT:.0f}s")
        for k, runs in stages.items():
            keys = [s for s in runs[0] if s != "requests changed"]  # imports shown, not counted
            parts = ", ".join(f"{s} {sec(statistics.median(r.get(s, 0.0) for r in runs))}" for s in keys)
            detail(f"{k}: {parts}; {int(runs[0].get('requests changed', -1))} requests reported changed")
        detail("CPU of `replay diff` after start-up and imports (load both, normalise + align + diff, graded invariant "
               "checks, JSON), each sample in a child process; 4x the requests must cost <= 4.5x")

        replay_exe = str(Path(sys.executable).parent / "replay")
        a10, b10 = paths[10_000]
        (work / "pyproject.toml").write_text(_diffload.CONFIG)  # the loader bound a 10k realistic recording needs
        failed: list[str] = []
        samples = interleave({
            "naive DeepDiff": _child_cpu([sys.executable, "-c", _diffload.NAIVE, a10, b10], DIFF_TIMEOUT, work, []),
            "replay diff": _child_cpu([replay_exe, "diff", a10, b10, "--format", "json"], DIFF_TIMEOUT, work, failed),
            "floor": _child_cpu([sys.executable, "-c", _diffload.FLOOR, a10, b10], DIFF_TIMEOUT, work, failed),
        }, rounds, clock=_children_clock)
        naive, ours = statistics.median(samples["naive DeepDiff"]), statistics.median(samples["replay diff"])
        floor = statistics.median(samples["floor"])
        line("5d diff vs naive 10k", spread(samples["naive DeepDiff"], sec), spread(samples["replay diff"], sec),
             naive / ours, ">=10", not failed and naive / ours >= 10,
             note="ratio = speed-up; whole processes, CPU of the child (user+sys); naive = decode both files + DeepDiff "
                  "excluding timestamp/run_id/conversation_id/created_at" + (f"; replay diff FAILED: {failed[0]}" if failed else ""))
        detail(f"floor: a process that only starts, imports what `replay diff` imports and loads both files (untrusted: "
               f"decoded, bounded, validated) {spread(samples['floor'], sec)} = naive / {naive / floor:.1f}; >= 10x needs the whole "
               f"`replay diff` <= {sec(naive / 10)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- 6: matrix warm start


class _Quiet:
    def __init__(self, totals: dict[str, int]) -> None:
        pass

    def env(self, label: str, text: str) -> None:
        pass

    advance = env

    def close(self) -> None:
        pass


def bench_matrix(quick: bool) -> None:
    try:
        from replay import matrix as mx
        from replay.matrix import _envs
    except ImportError:
        line("6 matrix warm start", "-", "-", None, "<=0.1", None, note="pending: replay/matrix.py not there yet")
        return
    installer = _envs.find_installer()
    if installer.name != "uv":
        line("6 matrix warm start", "-", "-", None, "<=0.1", None, note="pending: uv not found")
        return
    versions = _envs.parse_versions(["0.62.0", "0.54.0"])
    tool_hash = _envs.tool_source_hash()
    scenarios = ["seed000/long", "seed000/short", "seed000/reminders_default", "seed001/keep_user_messages_true"]
    cache = Path(tempfile.mkdtemp(prefix="replay-bench-envs-"))
    out = Path(tempfile.mkdtemp(prefix="replay-bench-matrix-"))
    try:
        cold: dict[str, float] = {}
        for v in versions:
            t = time.perf_counter()
            info = _envs.ensure_env(v, cache, installer, tool_hash)
            cold[v.spec] = time.perf_counter() - t
            if info.status != "created":
                line("6a matrix warm start", "-", "-", None, "<=0.1", False, note=f"{v.spec}: {info.status} {info.error}")
                return
        warm = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            info = _envs.ensure_env(versions[0], cache, installer, tool_hash)
            warm = min(warm, time.perf_counter() - t)
            assert info.status == "reused", info.status
        ratio = warm / cold[versions[0].spec]
        line("6a matrix warm start", f"{cold[versions[0].spec]:.2f}s cold", ms(warm) + " warm", ratio, "<=0.1", ratio <= 0.1)
        detail("per-version env set-up (ensure_env) in a fresh cache; uv's own download cache is warm, so 'cold' "
               "is an install from cached wheels, not from the network")
        targets = {s: s for s in scenarios}
        opts = mx.RunOptions(out=out, cwd=ROOT)

        def wall(jobs: int) -> float:
            t = time.perf_counter()
            result = mx.run_matrix(targets, versions, opts=opts, jobs=jobs, env_dir=cache, installer=installer, progress=_Quiet)
            elapsed = time.perf_counter() - t
            bad = [(s, v, c.get("status")) for s, row in result["scenarios"].items() for v, c in row.items() if c.get("status") == "error"]
            if bad:
                raise RuntimeError(f"matrix cells errored: {bad[:3]}")
            return elapsed

        wall(2)  # warm-up, not a sample: each env's first processes compile the bytecode of what they import
        serial = parallel = float("inf")
        for _ in range(1 if quick else 2):
            serial = min(serial, wall(1))
            parallel = min(parallel, wall(2))
        ratio = parallel / serial
        line("6b matrix 2 cores", f"{serial:.2f}s serial", f"{parallel:.2f}s", ratio, "<=0.65", ratio <= 0.65)
        detail(f"run_matrix over {len(scenarios)} scenarios x {len(versions)} versions (warm envs), -j2 vs -j1 wall time; "
               f"nproc={os.cpu_count()}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def bench_matrix_command(quick: bool) -> None:
    """6c (trust-matrix): the whole ``replay matrix`` command, warm envs vs a fresh env cache.

    Cold: a new ``--env-dir`` each round (uv's own wheel cache stays warm, so "cold" is an
    install from cached wheels, not the network). Warm: one cache reused. Rounds are
    interleaved. What the warm run spends its time on comes from timers of its own: the
    matrix JSON's run_matrix wall time, each version's env check and replay process, and
    ``import pydantic_ai`` timed alone in an env (what every replay process pays first).
    """
    from replay.matrix import _envs

    if _envs.find_installer().name != "uv":
        line("6c matrix command warm/cold", "-", "-", None, "<=0.5", None, note="pending: uv not found")
        return
    versions = ["0.62.0", "0.54.0"]
    scenarios = ["seed000/short", "seed001/keep_user_messages_true", "coverage/tool_call"]
    warm_dir = Path(tempfile.mkdtemp(prefix="replay-bench-warm-"))
    scratch = Path(tempfile.mkdtemp(prefix="replay-bench-cmd-"))
    docs: list[dict[str, Any]] = []

    def command(env_dir: Path) -> None:
        cmd = [sys.executable, "-m", "replay", "matrix", *[a for v in versions for a in ("--harness", v)], *scenarios,
               "--format", "json", "--jobs", "2", "--out", str(scratch / "out")]
        env = dict(os.environ, REPLAY_ENV_DIR=str(env_dir), CI="1")
        env.pop("GITHUB_STEP_SUMMARY", None)
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        doc = json.loads(proc.stdout)
        if doc["summary"]["error"]:
            raise RuntimeError(f"matrix cells errored: {proc.stdout[:400]}")
        docs.append(doc)

    def cold() -> None:
        fresh = Path(tempfile.mkdtemp(prefix="replay-bench-cold-", dir=scratch))
        try:
            command(fresh)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)

    try:
        command(warm_dir)  # builds the warm cache (not a sample)
        docs.clear()
        samples = interleave({"cold": cold, "warm": lambda: command(warm_dir)}, 2 if quick else 3, clock=time.perf_counter)
        ratio_line("6c matrix command warm/cold", samples, "cold", "warm", 0.5, sec)
        warm_docs = [d for d in docs if all(v["status"] == "reused" for v in d["versions"])]
        run_s = statistics.median(d["seconds"] for d in warm_docs)
        checks = statistics.median(sum(v["setup_seconds"] for v in d["versions"]) for d in warm_docs)
        replays = {v["spec"]: statistics.median(
            next(x["replay_seconds"] for x in d["versions"] if x["spec"] == v["spec"]) for d in warm_docs)
            for v in warm_docs[0]["versions"]}
        py = _envs.env_python(Path(warm_docs[0]["versions"][0]["path"]))
        imports = statistics.median(
            interleave({"i": lambda: subprocess.run([str(py), "-c", "import pydantic_ai, pydantic_ai_harness"], check=True,
                                                    env=_envs.cell_environ(py))},  # as a cell runs: the env's bytecode
                       3, clock=time.perf_counter)["i"])
        cold_builds = [v["setup_seconds"] for d in docs for v in d["versions"] if v["status"] == "created"]
        detail(f"{len(scenarios)} scenarios x {len(versions)} versions, -j2, whole process. Warm run: "
               f"{sec(statistics.median(samples['warm']))} of which run_matrix {sec(run_s)} "
               f"(env checks {checks * 1000:.0f} ms in all; replay processes, in parallel: "
               + ", ".join(f"{k} {sec(v)}" for k, v in replays.items())
               + f"); a replay process's `import pydantic_ai, pydantic_ai_harness` alone takes {sec(imports)}; "
               f"the rest of the wall time is the parent's start-up and planning. Cold adds the env builds "
               f"(median {sec(statistics.median(cold_builds))} each, uv venv + install of the tool and the harness) and "
               f"the first processes' compiling of the bytecode of what they import.")
    finally:
        shutil.rmtree(warm_dir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


# --------------------------------------------------------------------------- 7: start-up (imports)


def bench_imports(quick: bool) -> None:
    """Commands that need no pydantic-ai must not pay for importing it; pytest must not pay for the plugin."""
    python = sys.executable
    replay_exe = str(Path(python).parent / "replay")
    small = ROOT / "cassettes" / "coverage" / "tool_call.cassette"
    work = Path(tempfile.mkdtemp(prefix="replay-bench-imports-"))
    (work / "pytest.ini").write_text("[pytest]\n")
    (work / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")

    def proc(*cmd: str) -> Callable[[], None]:
        def go() -> None:
            subprocess.run(list(cmd), check=True, capture_output=True, cwd=work if cmd[1:3] == ("-m", "pytest") else ROOT)
        return go

    rounds = 5 if quick else 9
    # As an installed wheel is: this checkout's own modules compiled (site-packages are, by
    # `make setup`); with PYTHONDONTWRITEBYTECODE every process would otherwise compile them again.
    subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "replay")], check=True, capture_output=True)
    # pytest rewrites the modules of plugins installed by entry point and caches the result beside
    # their bytecode; with PYTHONDONTWRITEBYTECODE set it would redo that in every run. One run
    # without the variable leaves the cache a user's first pytest run leaves.
    cache_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([python, "-m", "pytest", "-q", "test_plain.py"], check=True, capture_output=True, cwd=work, env=cache_env)
    try:
        samples = interleave({
            "import pydantic_ai": proc(python, "-c", "import pydantic_ai"),
            "replay --help": proc(replay_exe, "--help"),
            "replay show": proc(replay_exe, "show", str(small)),
        }, rounds, clock=_children_clock)
        ratio_line("7a replay --help", samples, "import pydantic_ai", "replay --help", 0.15, sec)
        ratio_line("7b replay show", samples, "import pydantic_ai", "replay show", 0.3, sec)
        detail(f"whole processes, CPU (user+sys) of each; baseline `python -c 'import pydantic_ai'`; show of a "
               f"{small.stat().st_size} B cassette; {_bytecode()}")
        samples = interleave({
            "without plugin": proc(python, "-m", "pytest", "-q", "-p", "no:harness_replay", "test_plain.py"),
            "with plugin": proc(python, "-m", "pytest", "-q", "test_plain.py"),
        }, rounds, clock=_children_clock)
        ratio_line("7c pytest + plugin", samples, "without plugin", "with plugin", 1.05, sec)
        detail("pytest on one test that uses no cassette, with the harness-replay plugin vs `-p no:harness_replay`, CPU")
        loaded = subprocess.run([python, "-c", "import sys, replay.plugin; print(sorted({m.split('.')[0] for m in sys.modules} & "
                                 "{'pydantic', 'pydantic_core', 'pydantic_ai', 'deepdiff', 'rich', 'msgpack'}))"],
                                capture_output=True, text=True, check=True).stdout.strip()
        detail(f"heavy modules imported by loading the plugin: {loaded}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- main



# --------------------------------------------------------------------------- 9: replay check is linear


def bench_checks(quick: bool) -> None:
    """``replay check`` (load + every invariant) on 4x the requests in at most 4.5x the time, up to 10,000.

    Workload: the realistic shape (bench/_checks_synth.py): one agent run per turn chained through
    message_history, a tool call then a ~200-word answer, a summarizer call whenever the history
    passes 40 messages. Each sample starts from the cassette's bytes, as a fresh ``replay check``
    process would (per-message facts live for one call, nothing is kept). A second line is the shape that made
    content_lost quadratic: N short messages and one large summarizer input, then 4x both.
    """
    import _checks_synth

    from replay import cassette as cas
    from replay import invariants

    def check(data: bytes) -> Callable[[], Any]:
        def run() -> None:
            found = invariants.evaluate(cas.loads(data))
            assert not found.failures, found.failures

        return run

    sizes = [625, 2500, 10_000]
    data = {n: cas.dumps(_checks_synth.build(n)) for n in sizes}
    samples = interleave({str(n): check(data[n]) for n in sizes}, 2 if quick else 3)
    for small, big in zip(sizes, sizes[1:]):
        ratio_line(f"9 check {small}->{big} req", samples, str(small), str(big), 4.5, sec)
    detail("realistic workload (chained runs, tool call + ~200-word answer, summarizer past 40 messages); "
           "load + all invariants, per-message cache cold; ratio = time of 4x the requests / time of 1x")
    hostile = {k: cas.dumps(_checks_synth.hostile(10_000 * k, 320 * k)) for k in (1, 4)}
    h = interleave({f"{k}": check(v) for k, v in hostile.items()}, 2 if quick else 3)
    ratio_line("9b content_lost 4x", h, "1", "4", 4.5, sec)
    detail("one compaction of 10,000 short messages with a 320 KB summarizer input, then 40,000 and 1.28 MB "
           "(was: 8 s CPU at 322 KB, a 5.6 MB cassette never finished)")

# --------------------------------------------------------------------------- 8: wire capture


def bench_wire(quick: bool) -> None:
    """Record and replay of the realistic workload over a real provider model, against the plain run.

    Every role is an ``OpenAIChatModel`` talking HTTP to a loopback server that runs in its own
    process (so its CPU is not counted on either side). Record captures every HTTP exchange
    beside its model call; replay (``--level wire``) lets the openai mapping build each request
    and answers it from the cassette, then saves, diffs wire bodies and checks.
    """
    import subprocess

    from _wire_scenario import conversation, make_scenario

    from replay import _pipeline
    from replay import cassette as cas
    from replay.recorder import Session, execute_async, finalize

    turns = 40 if quick else 100
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_wire_scenario.py"))],
                            stdout=subprocess.PIPE, text=True)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-wire-"))
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        sc = make_scenario(base_url, turns)
        cassettes, results = work / "cassettes", work / "results"
        path = cas.cassette_path(cassettes, sc.id)

        def plain() -> None:
            asyncio.run(conversation(base_url, turns))

        def record() -> None:
            cas.save(finalize(asyncio.run(execute_async(sc, Session()))), path)

        def replay() -> None:
            report = _pipeline.replay_scenario(sc, cassettes, results, level="wire")
            if report.status != "same":
                raise AssertionError(f"wire replay is not 'same': {report.status} {report.error or ''}")

        record()
        replay()  # warm
        rounds = 3 if quick else 5
        samples = interleave({"plain": plain, "record": record}, rounds)
        ratio_line("8 wire record", samples, "plain", "record", 1.10, sec)
        recorded = cas.load(path)
        http = sum(len(ex.wire or ()) for ex in recorded.exchanges)
        detail(f"workload: {turns} turns over OpenAIChatModel → loopback server (own process), "
               f"{len(recorded.exchanges)} model calls, {http} HTTP exchanges kept; cassette {fmt_bytes(path.stat().st_size)}")
        samples = interleave({"plain": plain, "replay": replay}, rounds)
        ratio_line("8 wire replay", samples, "plain", "replay", 1.05, sec)
        detail("replay = _pipeline.replay_scenario at --level wire: load, guard, the openai mapping builds every "
               "request, answered from the cassette (no socket), save, diff (messages and wire bodies), checks")
    finally:
        proc.kill()
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- 10: at scale, on paper


def bench_at_scale(quick: bool) -> None:
    """The README's "At scale": 10,000 cassettes x 11 harness versions, from figures measured here."""
    import at_scale
    from _scenario import TURNS, make_scenario

    from replay import _pipeline
    from replay import cassette as cas

    typical = at_scale.bundled(ROOT)
    sc = make_scenario(TURNS)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-scale-long-"))
    try:
        cas.save(realistic_recording(), cas.cassette_path(work / "c", sc.id))
        _pipeline.replay_scenario(sc, work / "c", work / "o")  # warm
        long = statistics.median(at_scale.cpu(lambda: _pipeline.replay_scenario(sc, work / "c", work / "o"))
                                 for _ in range(1 if quick else 3))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    start = at_scale.start_up(2 if quick else 3)
    env = at_scale.env_build(1 if quick else 2)
    if env is None:
        line("10 at scale", "-", "-", None, "-", None, note="pending: uv not found (it builds the environments)")
        return
    f = at_scale.Figures(typical=statistics.mean(typical), long=long, start=start, env=env)
    cores = os.cpu_count() or 1
    print(f"{'10 at scale':<22} {at_scale.CASSETTES:,} cassettes x {at_scale.VERSIONS} harness versions, computed from "
          f"figures measured in this run (not a target)", flush=True)
    detail(f"per cassette (CPU, in-process: load, guard, replay, save, diff, checks): {len(typical)} bundled cassettes "
           f"median {ms(statistics.median(typical))}, mean {ms(f.typical)}, max {ms(max(typical))}; "
           f"bench/_scenario.py at {TURNS} turns {sec(long)}")
    detail(f"per replay process: start-up {sec(start)} CPU (imports); per version: environment {sec(env)} wall "
           f"(uv install, wheels cached, and its first process compiling what it imports), reused in well under 1 ms (line 6a)")
    for label, per in (("typical", f.typical), (f"{TURNS}-turn", f.long)):
        one = at_scale.project(per, f, cores)
        shards = [at_scale.project(per, f, cores, n) for n in (11, 100)]
        detail(f"{label}: one runner, {cores} cores: {at_scale.duration(one.seconds)} ({one.envs} envs); "
               + "; ".join(f"--shard K/{n}: {at_scale.duration(p.seconds)} per runner ({p.cells:,} cells, {p.envs} env"
                           f"{'s' if p.envs > 1 else ''})" for n, p in zip((11, 100), shards, strict=True))
               + " + each runner's own boot, checkout and install")


def machine() -> str:
    cpu = "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = "load %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = ""
    from importlib.metadata import version

    return (f"machine: nproc={os.cpu_count()} cpu={cpu!r} python={platform.python_version()} "
            f"harness={version('pydantic-ai-harness')} slim={version('pydantic-ai-slim')} {load}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    parser.add_argument("--only", default="", help="comma list of benchmark numbers, e.g. 1,2")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    started = time.perf_counter()
    print(machine(), flush=True)

    def want(n: str) -> bool:
        return not only or n in only

    if want("1") or want("2"):
        bench_overhead(args.quick)
    if want("2b"):
        bench_process(args.quick)
    if want("3"):
        bench_size(args.quick)
    if want("4"):
        bench_load(args.quick)
    if want("5"):
        bench_diff(args.quick)
    if want("5") or want("5c"):
        bench_diff_scale(args.quick)
    if want("6"):
        bench_matrix(args.quick)
    if want("6") or want("6c"):
        bench_matrix_command(args.quick)
    if want("7"):
        bench_imports(args.quick)
    if want("8"):
        bench_wire(args.quick)
    if want("9"):
        bench_checks(args.quick)
    if want("10"):
        bench_at_scale(args.quick)
    failed = [name for name, ok in RESULTS if ok is False]
    print(f"total {time.perf_counter() - started:.0f}s; {len(RESULTS) - len(failed)}/{len(RESULTS)} not failing"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

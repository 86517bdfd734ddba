"""harness-replay benchmarks: ``make bench``.

Every benchmark measures its own baseline in the same run and prints one line:
name, baseline, measured, ratio, target, PASS/FAIL. Nothing here asserts absolute
times. In-process timings are CPU time of this process (``time.process_time``): the
work is single-threaded and CPU-bound, and CPU time is far less disturbed than wall
time by other jobs on a shared machine. Each side is timed in alternating blocks and
the fastest block counts (the least-disturbed estimate of its cost).

Usage: python bench/run.py [--quick] [--only 1,2,...]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
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


async def alternate_async(sides: dict[str, Callable[[], Awaitable[Any]]], rounds: int, per_block: int) -> dict[str, float]:
    """Fastest per-call CPU time of each side, over ``rounds`` blocks run in rotating order."""
    best = {name: float("inf") for name in sides}
    names = list(sides)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fn = sides[name]
            gc.collect()
            t = time.process_time()
            for _ in range(per_block):
                await fn()
            best[name] = min(best[name], (time.process_time() - t) / per_block)
    return best


def best_of(fn: Callable[[], Any], repeat: int, number: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t) / number)
    return best


def alternate(sides: dict[str, Callable[[], Any]], rounds: int, number: int = 1) -> dict[str, float]:
    best = {name: float("inf") for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            best[name] = min(best[name], best_of(fn, 1, number))
    return best


# --------------------------------------------------------------------------- 1 + 2: record / replay overhead


async def bench_overhead(quick: bool) -> None:
    from _scenario import SCENARIO

    from replay import cassette as cas
    from replay.recorder import Session, execute_async, finalize
    from replay.replayer import replay_async
    from replay.scenario import Run

    async def bare() -> None:
        await SCENARIO.func(Run(SCENARIO.id))

    async def record() -> bytes:
        cassette = await execute_async(SCENARIO, Session())
        return cas.dumps(finalize(cassette))

    recorded = cas.loads(await record())
    assert recorded.outcome.status == "ok", recorded.outcome
    requests = len(recorded.exchanges)

    async def replay() -> None:
        result = await replay_async(SCENARIO, recorded)
        if result.divergences:
            raise AssertionError(f"replay diverged: {result.divergences}")

    for fn in (bare, record, replay):  # warm caches, lazy imports, adapters
        for _ in range(5):
            await fn()
    rounds, per_block = (4, 5) if quick else (9, 8)
    best = await alternate_async({"bare": bare, "record": record, "replay": replay}, rounds, per_block)
    roles = sorted({e.role for e in recorded.exchanges})
    ratio = best["record"] / best["bare"]
    line("1 record overhead", ms(best["bare"]) + "/run", ms(best["record"]) + "/run", ratio, "<=1.05", ratio <= 1.05)
    detail(f"scenario: {requests} requests/run ({', '.join(roles)}); recording includes finalize (scrub) + dumps")
    fresh = await execute_async(SCENARIO, Session())
    t_final = best_of(lambda: finalize(fresh), 5, 10)
    t_dumps = best_of(lambda: cas.dumps(fresh), 5, 10)
    detail(f"of which finalize (scrub) {ms(t_final)} = {t_final / best['bare']:.1%} of bare, dumps {ms(t_dumps)}; "
           f"capture itself {ms(best['record'] - best['bare'] - t_final - t_dumps)}")
    ratio = best["replay"] / best["bare"]
    line("2 replay overhead", ms(best["bare"]) + "/run", ms(best["replay"]) + "/run", ratio, "<=1.02", ratio <= 1.02)
    detail("replay = replay_async from the loaded cassette, incl. finalize of the result; excludes process start")


# --------------------------------------------------------------------------- 3: cassette size growth


async def bench_size(quick: bool) -> None:
    import msgpack
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from replay import cassette as cas
    from replay.recorder import Session, finalize, session_scope

    turns = 200
    checkpoints = {50, 100, 200}

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"Answer {len(messages)}: noted, continuing with the plan as agreed.")])

    session = Session()
    sizes: dict[int, tuple[int, int, int]] = {}
    with session_scope(session):
        agent = Agent(FunctionModel(answer), instructions="You are a helpful assistant.")
        history: list[ModelMessage] = []
        for turn in range(1, turns + 1):
            result = await agent.run(f"Turn {turn}: what is the next step of the plan?", message_history=history)
            history = result.all_messages()
            if turn in checkpoints:
                c = session.cassette
                data = cas.dumps(finalize(c))
                alone = msgpack.packb(ModelMessagesTypeAdapter.dump_python(history, mode="json"), use_bin_type=True)
                naive = sum(
                    len(msgpack.packb([c.expand(ex.messages), c.messages[ex.response] if ex.response is not None else None], use_bin_type=True))
                    for ex in c.exchanges
                )
                sizes[turn] = (len(data), len(alone), naive)
    size, alone, naive = sizes[turns]
    ratio = size / alone
    line("3 cassette size", fmt_bytes(alone) + " hist", fmt_bytes(size), ratio, "<=1.5", ratio <= 1.5)
    for t in sorted(sizes):
        s, a, n = sizes[t]
        detail(f"{t:>3} turns: cassette {fmt_bytes(s):>9}  history alone {fmt_bytes(a):>9} ({s / a:.2f}x)  "
               f"naive per-request {fmt_bytes(n):>9} ({n / a:.0f}x)")


# --------------------------------------------------------------------------- 4: load speed


def bench_load(quick: bool) -> None:
    import _synth
    import yaml

    from replay import cassette as cas

    c = _synth.build(1000)
    data = cas.dumps(c)
    expanded = _synth.expanded(c)
    as_json = json.dumps({"interactions": expanded})
    as_yaml = yaml.dump({"interactions": expanded}, Dumper=yaml.CSafeDumper)
    del expanded
    Loader = getattr(yaml, "CSafeLoader", None) or yaml.CLoader
    assert len(cas.loads(data).exchanges) == 1000
    ours = best_of(lambda: cas.loads(data), 7 if quick else 15)
    naive_json = best_of(lambda: json.loads(as_json), 5 if quick else 9)
    yaml_t = best_of(lambda: yaml.load(as_yaml, Loader=Loader), 1 if quick else 2)
    ours = min(ours, best_of(lambda: cas.loads(data), 7 if quick else 15))
    r_yaml = yaml_t / ours
    r_json = naive_json / ours
    line("4a load vs YAML", ms(yaml_t), ms(ours), r_yaml, ">=4", r_yaml >= 4,
         note="ratio = speed-up (baseline time / cassette load time); YAML via CSafeLoader")
    line("4b load vs JSON", ms(naive_json), ms(ours), r_json, ">=2", r_json >= 2)
    detail(f"1000 requests, {len(c.messages)} distinct messages: cassette {fmt_bytes(len(data))}, "
           f"naive JSON {fmt_bytes(len(as_json))}, YAML {fmt_bytes(len(as_yaml))}")


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
        from replay import _envs
        from replay import matrix as mx
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


# --------------------------------------------------------------------------- main


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
        asyncio.run(bench_overhead(args.quick))
    if want("3"):
        asyncio.run(bench_size(args.quick))
    if want("4"):
        bench_load(args.quick)
    if want("5"):
        bench_diff(args.quick)
    if want("6"):
        bench_matrix(args.quick)
    failed = [name for name, ok in RESULTS if ok is False]
    print(f"total {time.perf_counter() - started:.0f}s; {len(RESULTS) - len(failed)}/{len(RESULTS)} not failing"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

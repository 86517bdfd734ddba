"""``make reliability``: the figures of issue 7, each with pass/fail.

* fuzz   — hostile bytes through the cassette loader (a freshly recorded cassette,
           truncated at every offset, bit-flipped, re-typed field by field, plus
           handcrafted huge lengths, deep nesting and every msgpack ext type): every
           case must end in a Cassette or CassetteError, within bounded time.
* kills  — a writer SIGKILLed at random points: the file is always one complete cassette.
* secrets — 45+ credential shapes in 20+ places, recorded with the env vars set, replayed in every
           format with and without them: none found on disk or in any output, verdict always same.
* guard  — every probe of tests/guard_probes.py refused (or answered locally / reported).
* determinism — ``replay record --check-determinism 3`` over every bundled scenario.
* commands — issue 13: 20,000+ hostile cassettes (wrong shapes, hostile text, random
           values; devices, FIFOs) through show, show --normalized, show --format json,
           ls, check, diff, run and merge: no traceback, no raw terminal escape, exit 2
           for what cannot be read, no command over 5 s CPU; a sample on a real pty.

The generators live in tests/ (hostile.py, torture.py, secret_shapes.py) so the unit
suite runs a fast subset of exactly the same cases.
"""

from __future__ import annotations

import collections
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import hostile  # noqa: E402
import secret_shapes  # noqa: E402
import torture  # noqa: E402

from replay.cassette import cassette_path  # noqa: E402

SEED = int(os.environ.get("RELIABILITY_SEED", "7"))
KILLS = int(os.environ.get("RELIABILITY_KILLS", "120"))
FLIPS = int(os.environ.get("RELIABILITY_FLIPS", "10000"))
NOISE = int(os.environ.get("RELIABILITY_NOISE", "10000"))
RESULTS: list[tuple[str, str, bool]] = []


def report(name: str, figure: str, ok: bool) -> None:
    RESULTS.append((name, figure, ok))
    print(f"  {'PASS' if ok else 'FAIL'}  {name:12} {figure}", flush=True)


def replay_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replay", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600
    )


def fresh_recording(tmp: Path, scenario: str = "seed000/long") -> bytes:
    """Record a bundled scenario now, so the fuzz starts from what this version writes."""
    proc = replay_cli("record", scenario, "--cassettes", str(tmp), "--force", cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"recording {scenario} failed: {proc.stderr.strip()}")
    return cassette_path(tmp, scenario).read_bytes()


def fuzz(tmp: Path) -> None:
    real = fresh_recording(tmp)
    streamed = fresh_recording(tmp, "coverage/stream")  # format 2: stream events as rows under layouts
    rng = random.Random(SEED)
    categories: dict[str, Iterable[tuple[str, bytes]]] = {
        "truncation": hostile.truncations(real),
        "bit flip": hostile.bit_flips(real, rng, FLIPS),
        "format 2 bit flip": hostile.bit_flips(streamed, rng, FLIPS // 4),
        "format 2 wrong type": hostile.wrong_types(streamed),
        "random bytes": hostile.random_bytes(rng, NOISE),
        "wrong type": hostile.wrong_types(real),
        "huge length": hostile.huge_lengths(),
        "deep nesting": hostile.deep_nesting(),
        "ext type": hostile.ext_types(),
        "ref bomb": [("bomb", hostile.reference_bomb(3000))],
    }
    counts: collections.Counter[str] = collections.Counter()
    escaped: list[str] = []
    slowest = 0.0
    started = time.perf_counter()
    for name, cases in categories.items():
        for label, data in cases:
            t0 = time.perf_counter()
            try:
                hostile.verdict(data, label)
            except hostile.Escaped as exc:
                escaped.append(str(exc))
            slowest = max(slowest, time.perf_counter() - t0)
            counts[name] += 1
    total = sum(counts.values())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    detail = " · ".join(f"{name} {n:,}" for name, n in counts.items())
    report(
        "fuzz",
        f"{total:,} cases, {len(escaped)} escaped anything but CassetteError; "
        f"slowest case {slowest:.2f}s, peak RSS {peak_mb:.0f} MB, {time.perf_counter() - started:.0f}s  ({detail})",
        not escaped and total >= 1000,
    )
    for line in escaped[:5]:
        print(f"        {line}")


def kills(tmp: Path) -> None:
    a, b = torture.two_cassettes(hostile.REAL)
    stats = torture.kill_loop(tmp, a, b, KILLS, seed=SEED)
    ok = stats.kills >= 100 and stats.intact == stats.kills and stats.temps_left == 0
    report(
        "kills",
        f"{stats.kills} SIGKILLs survived: {stats.intact} left a complete cassette "
        f"({stats.mid_write} landed mid-write); {stats.temps_cleaned} stale temps cleaned, {stats.temps_left} left",
        ok,
    )


def secrets(tmp: Path) -> None:
    """Seeded secrets (tests/secret_shapes.py): recorded with the variables set, replayed in every
    format with and without them; every file written and every output scanned (base64 decoded too)."""
    (tmp / "pyproject.toml").write_text("[tool.replay]\n")

    def runner(args: list[str], changes: dict[str, str | None]) -> tuple[int, str, str]:
        env = dict(os.environ)
        for name, value in changes.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        proc = replay_cli(*args, cwd=tmp, env=env)
        return proc.returncode, proc.stdout, proc.stderr

    started = time.perf_counter()
    try:
        fig = secret_shapes.check(tmp, runner)
    except RuntimeError as exc:
        report("secrets", str(exc)[-300:], False)
        return
    on_disk = sum(len(v) for k, v in fig.leaks.items() if not k.startswith(("run ", "show ", "step summary")))
    in_outputs = fig.found - on_disk
    same = sum(v == "same" for v in fig.verdicts.values())
    report(
        "secrets",
        f"{fig.shapes} shapes x {fig.places} places ({fig.seeded} values); found on disk {on_disk} "
        f"({fig.files} files), in outputs {in_outputs} ({fig.outputs} outputs + step summary), with and without "
        f"the env vars; verdict same in {same}/{len(fig.verdicts)} runs ({time.perf_counter() - started:.0f}s)",
        fig.shapes >= 45 and fig.places >= 20 and fig.found == 0 and same == len(fig.verdicts),
    )


def guard() -> None:
    """Every way tests/guard_probes.py knows to reach the network, each under a fresh guard."""
    import guard_probes

    results = guard_probes.run_all()
    refused = [name for name, ok, _ in results if ok]
    missed = [f"{name}: {why}" for name, ok, why in results if not ok]
    report(
        "guard",
        f"probes refused {len(refused)} of {len(results)} (resolvers, _socket, sendto/sendmsg, asyncio, httpx, "
        "swallowed errors, *.localhost, subprocesses)" + (f"; missed {missed[0][:200]}" if missed else ""),
        not missed,
    )


def determinism() -> None:
    started = time.perf_counter()
    proc = replay_cli("record", "--check-determinism", "3", cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("identical", "DIFFERENT"))]
    same = sum(line.startswith("identical") for line in lines)
    report(
        "determinism",
        f"N=3 across {len(lines)} bundled scenarios: {same} byte-identical, {len(lines) - same} differ "
        f"({time.perf_counter() - started:.0f}s)",
        proc.returncode == 0 and same == len(lines) > 0,
    )
    for line in [ln for ln in lines if not ln.startswith("identical")] + proc.stderr.splitlines()[-3:]:
        print(f"        {line}")


CLI_KILLS = int(os.environ.get("RELIABILITY_CLI_KILLS", "12"))
KILL_SCENARIO = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from replay import Run, scenario

@scenario("k/one")
async def one(run: Run) -> str:
    agent = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok " + "x" * 200000)])))
    return (await agent.run("PROMPT")).output[:10]
"""


def cli_kills(tmp: Path) -> None:
    """SIGKILL real `replay record --force` and `replay run --accept` processes at random points."""
    import signal

    rng = random.Random(SEED)
    (tmp / "scenarios").mkdir()
    (tmp / "pyproject.toml").write_text("[tool.replay]\n")
    scen = tmp / "scenarios" / "k.py"
    scen.write_text(KILL_SCENARIO.replace("PROMPT", "first"))
    if replay_cli("record", cwd=tmp).returncode != 0:
        report("cli kills", "could not record the scenario", False)
        return
    from replay.cassette import load
    from replay.errors import CassetteError

    target = cassette_path(tmp / "cassettes", "k/one")
    torn = kills = wrote = 0
    for n in range(2 * CLI_KILLS):
        before = target.read_bytes()
        accept = n % 2 == 1
        scen.write_text(KILL_SCENARIO.replace("PROMPT", f"prompt {n}"))
        args = ["run", "--accept"] if accept else ["record", "--force"]
        proc = subprocess.Popen([sys.executable, "-m", "replay", *args], cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.5, 4.0))  # start-up ~2 s, then the run and the write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        try:
            load(target)
            wrote += target.read_bytes() != before
        except CassetteError:
            torn += 1
    replay_cli("record", "--force", cwd=tmp)
    replay_cli("run", cwd=tmp)
    temps = [p for p in tmp.rglob("*.tmp")]
    report(
        "cli kills",
        f"{kills} SIGKILLs of real `replay record --force` / `replay run --accept` processes ({wrote} after the new cassette landed): {torn} torn cassettes, "
        f"{len(temps)} temp files left after the next record and run",
        kills >= 2 * CLI_KILLS and torn == 0 and not temps,
    )


CASES = int(os.environ.get("RELIABILITY_CASES", "20000"))
RUN_SHARE = float(os.environ.get("RELIABILITY_RUN_SHARE", "0.1"))
MERGES = int(os.environ.get("RELIABILITY_MERGES", "2000"))
PTY_CASES = int(os.environ.get("RELIABILITY_PTY", "24"))


def commands() -> None:
    """Issue 13: hostile cassettes through every command, in-process on two workers, then a pty sample."""
    import _fuzz_commands as fc

    started = time.perf_counter()
    tally, peak = fc.fuzz_commands(CASES, RUN_SHARE, MERGES, SEED)
    per = ", ".join(f"{c} {tally.runs[c]:,}" for c in fc.COMMANDS)
    bad = {k: sum(getattr(tally, k).values()) for k in ("crashes", "escapes", "bad_exit", "slow")}
    report(
        "commands",
        f"{tally.cases:,} hostile cassettes/files ({per}): tracebacks {bad['crashes']}, terminal escapes "
        f"{bad['escapes']}, wrong exit codes {bad['bad_exit']}, cases over {fc.SLOW:.0f} s CPU {bad['slow']}; "
        f"slowest {tally.slowest[0]:.2f}s CPU, peak RSS {peak:.0f} MB, {time.perf_counter() - started:.0f}s",
        tally.cases >= min(CASES, 20_000) and not any(bad.values()) and peak < 1024,
    )
    for key, example in list(tally.examples.items())[:8]:
        print(f"        {key}: {example[:300]}")
    started = time.perf_counter()
    sample = fc.pty_sample(PTY_CASES, SEED)
    bad = {k: sum(getattr(sample, k).values()) for k in ("crashes", "escapes", "bad_exit", "slow")}
    report(
        "pty",
        f"{sum(sample.runs.values())} real processes on a pseudo-terminal ({sample.cases} cassettes, "
        f"half with hostile text): tracebacks {bad['crashes']}, terminal escapes {bad['escapes']} "
        f"(rich's own colours excluded), over {fc.SLOW:.0f} s {bad['slow']}; {time.perf_counter() - started:.0f}s",
        not bad["crashes"] and not bad["escapes"],
    )
    for key, example in list(sample.examples.items())[:5]:
        print(f"        {key}: {example[:300]}")


def main() -> int:
    print("harness-replay reliability (issues 7 and 13)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="replay-reliability-") as tmp:
        base = Path(tmp)
        for sub in ("fuzz", "kills", "secrets"):
            (base / sub).mkdir()
        fuzz(base / "fuzz")
        commands()
        kills(base / "kills")
        (base / "cli-kills").mkdir()
        cli_kills(base / "cli-kills")
        secrets(base / "secrets")
    guard()
    determinism()
    failed = [name for name, _, ok in RESULTS if not ok]
    print(f"{'FAIL' if failed else 'PASS'}: {len(RESULTS) - len(failed)}/{len(RESULTS)} in {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""What scrubbing costs a recording: the 200-turn bench transcript, scrubbed as ``finalize`` does.

Two cases, as ratios to running the scenario under capture (same process, best of N CPU time):
no secret in the cassette (the screen over the whole cassette says so, no walk), and one
context secret in the first prompt (every string walked, twice: learn, then replace).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from _scenario import make_scenario  # noqa: E402

from replay.recorder import Session, execute_async  # noqa: E402
from replay.scrub import ScrubConfig, scrub_cassette  # noqa: E402


def best(fn: Callable[[], Any], repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        fn()
        out = min(out, time.process_time() - t)
    return out


def main() -> None:
    sc = make_scenario(200)
    cassette = asyncio.run(execute_async(sc, Session()))
    dirty = cassette.model_copy(deep=True)
    part = dirty.messages[0]["parts"][0]
    part["content"] = "use password=hunter2hunter2 " + str(part["content"])
    run = best(lambda: asyncio.run(execute_async(sc, Session())), 3)
    clean = best(lambda: scrub_cassette(cassette, ScrubConfig(env={})), 5)
    walk = best(lambda: scrub_cassette(dirty, ScrubConfig(env={})), 5)
    text = sum(len(str(m)) for m in cassette.messages) / 1e6
    print(f"200 turns ({len(cassette.messages)} messages, {text:.1f} MB): run under capture {run * 1000:.0f} ms")
    print(f"  scrub, no secret      {clean * 1000:6.1f} ms = {clean / run:5.1%} of the run")
    print(f"  scrub, secrets found  {walk * 1000:6.1f} ms = {walk / run:5.1%} of the run")
    linear()


def linear(scale: float = 1.0) -> None:
    """Scrubbing stays linear in what an untrusted recording can pile up: 4x the secrets in <= 4.5x the time.

    Each case was quadratic once: values learned one by one (every new one recompiled an
    alternation of all of them), placeholders already in a text (every name tested against every
    one), key prefixes with no key after them (the digit lookahead scanned the rest of the run).
    """
    from replay.scrub import Scrubber

    def learned(n: int) -> Callable[[], Any]:
        values = [f"{i:05d}-{'x' * 12}" for i in range(n)]
        texts = [f"password={v}" for v in values] + [f"the value {v} again" for v in values]
        return lambda: Scrubber(ScrubConfig(env={})).scrub(texts)

    def held(n: int) -> Callable[[], Any]:
        text = " ".join(f"password=<secret:password:{i}>" for i in range(1, n + 1))
        return lambda: Scrubber(ScrubConfig(env={})).scrub_text(text)

    def prefixes(n: int) -> Callable[[], Any]:
        text = "sk-" * n
        return lambda: Scrubber(ScrubConfig(env={})).scrub_text(text)

    print("  linear in what a recording piles up (best of 3, CPU; 4x the items must cost <= 4.5x):")
    for name, make, n in (("values learned one by one", learned, 1_600), ("placeholders in one text", held, 5_000),
                          ("'sk-' prefixes in one text", prefixes, 25_000)):
        n = max(10, int(n * scale))
        small, large = best(make(n), 3), best(make(4 * n), 3)
        ratio = large / small
        verdict = "PASS" if ratio <= 4.5 else "FAIL"
        print(f"    {name:28} {n:>7,} {small * 1000:7.1f} ms  {4 * n:>7,} {large * 1000:7.1f} ms  ratio {ratio:4.2f}  {verdict}")


if __name__ == "__main__":
    main()

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


if __name__ == "__main__":
    main()

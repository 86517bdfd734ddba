"""replay._deadline: a replay that never finishes is an error of its own, and everything is put back afterwards."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import anyio
import pytest

from replay._deadline import ReplayTimeout, bounded


def _spin() -> None:
    while True:
        pass


async def _wait_forever() -> None:
    await asyncio.Event().wait()


async def _in_a_task_group() -> None:
    async with anyio.create_task_group() as tg:  # as pydantic-ai runs tools: the alarm arrives in a group
        tg.start_soon(_wait_forever)
        tg.start_soon(_wait_forever)


@pytest.mark.parametrize(
    "body",
    [_spin, lambda: asyncio.run(_wait_forever()), lambda: asyncio.run(_in_a_task_group())],
    ids=["a loop that never awaits", "an await that never returns", "inside a task group"],
)
def test_a_block_past_its_bound_raises_replay_timeout(body) -> None:
    handler = signal.getsignal(signal.SIGALRM)
    started = time.perf_counter()
    with pytest.raises(ReplayTimeout, match=r"did not finish within 0\.2 s"), bounded(0.2, "x/y"):
        body()
    assert time.perf_counter() - started < 5
    assert signal.getsignal(signal.SIGALRM) is handler and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_block_within_its_bound_is_untouched_and_the_alarm_is_disarmed() -> None:
    handler = signal.getsignal(signal.SIGALRM)
    with bounded(5, "x/y"):
        value = sum(range(1000))
    assert value == 499500
    assert signal.getsignal(signal.SIGALRM) is handler and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_its_own_errors_pass_through() -> None:
    with pytest.raises(ValueError, match="own"), bounded(5, "x/y"):
        raise ValueError("own")


@pytest.mark.parametrize("seconds", [None, 0])
def test_no_bound_arms_nothing(seconds: float | None) -> None:
    with bounded(seconds, "x/y"):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_outside_the_main_thread_it_arms_nothing() -> None:
    """signal.signal() works only in the main thread: a replay in a worker thread runs unbounded, not broken."""
    seen: list[object] = []

    def worker() -> None:
        try:
            with bounded(0.1, "x/y"):
                time.sleep(0.3)
            seen.append("finished")
        except BaseException as exc:
            seen.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["finished"]

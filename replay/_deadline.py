"""A time bound on one scenario's replay, so a harness release that never finishes is a verdict, not a hung CI job.

A replay serves recorded answers, so a scenario whose run outlasts its cassette ends in an
exhausted-cassette error; what can still hang is code that never asks the model again — a
loop in the harness, an ``await`` on something that never comes, a tool blocked in a thread.
The bound is ``SIGALRM`` (the method pytest-timeout uses by default): the handler raises in the
main thread wherever it is, also in a loop that never awaits, and the scenario's run unwinds like
any other error. A run that cannot be unwound that way (a thread stuck in a blocking call, which
``asyncio.run`` joins before it returns) is given ``grace`` seconds more; then, where the caller
allows it (``replay run``, never the pytest plugin), the report of what is done is written, the
process says so in one line and exits with 2: a CI job ends instead of running until its own
time limit.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._untrusted import visible
from .errors import ReplayError


class ReplayTimeout(ReplayError):
    """The scenario's replay did not finish within its bound."""


class _Expired(BaseException):
    """Raised by the alarm: a BaseException, so a scenario's or a capability's ``except Exception`` does not swallow it."""


def _grace(seconds: float) -> float:
    return max(5.0, seconds)


@contextmanager
def bounded(seconds: float | None, what: str, *, give_up: Callable[[str], object] | None = None) -> Iterator[None]:
    """Raise :class:`ReplayTimeout` when the block runs past ``seconds`` (None or 0: no bound).

    Only in the main thread of a platform with ``setitimer``; elsewhere the block runs unbounded
    (a thread cannot be interrupted from outside). ``give_up`` enables the last resort described in
    the module's docstring: called from another thread with what happened (to write the report of
    what is done), then the process ends with 2.
    """
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    watchdog = _watchdog(seconds, what, give_up) if give_up is not None else None
    before = set(threading.enumerate())
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except BaseException as exc:  # raised in a task of a task group, the alarm arrives wrapped in a BaseExceptionGroup
        if isinstance(exc, _Expired) or (isinstance(exc, BaseExceptionGroup) and exc.subgroup(_Expired) is not None):
            if give_up is not None:
                _LEFT_BEHIND.extend((what, t) for t in threading.enumerate() if t not in before and not t.daemon)
            raise ReplayTimeout(
                f"did not finish within {seconds:g} s (--timeout, [tool.replay] timeout; 0 for no bound)"
            ) from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if watchdog is not None:
            watchdog.cancel()


_LEFT_BEHIND: list[tuple[str, threading.Thread]] = []
"""Threads a timed-out scenario started and left running (a tool blocked in a call): Python waits for
every such thread before the process ends, so :func:`exit_unless_stuck` does not."""


def exit_unless_stuck(code: int) -> None:
    """Return if no thread a timed-out scenario left is still running; else end the process now with ``code``."""
    stuck = [what for what, t in _LEFT_BEHIND if t.is_alive()]
    _LEFT_BEHIND.clear()
    if stuck:
        sys.stdout.flush()
        sys.stderr.write(f"replay: warning: {', '.join(map(visible, dict.fromkeys(stuck)))}: timed out with a thread still "
                         "running (blocked in a call); exiting without waiting for it\n")
        sys.stderr.flush()
        os._exit(code)


def _watchdog(seconds: float, what: str, give_up: Callable[[str], object]) -> threading.Timer:
    def fire() -> None:
        message = (f"still running {seconds + _grace(seconds):g} s after it started, past its {seconds:g} s bound, "
                   "and it could not be stopped (a thread blocked in a call?)")
        try:
            give_up(message)
        except BaseException:  # the report is a courtesy; the exit is the point
            pass
        finally:
            sys.stdout.flush()
            sys.stderr.write(f"replay: error: {visible(what)}: {message}; the scenarios after it were not replayed\n")
            sys.stderr.flush()
            os._exit(2)

    timer = threading.Timer(seconds + _grace(seconds), fire)
    timer.daemon = True
    timer.start()
    return timer

"""Every way code under replay can try to reach the network, each run under a fresh guard.

Shared by tests/unit/test_guard.py and ``make reliability`` ("guard probes refused N of N").
Targets are never reachable: TEST-NET-3 (203.0.113.0/24, never routed), 2001:db8::/32
(documentation) and names under ``.invalid`` (RFC 6761), so even a broken guard sends no
useful packet. A probe counts as refused when the attempt failed with the guard's message
(or was answered locally, for ``*.localhost``) and the guard recorded it by name.
"""

from __future__ import annotations

import _socket
import asyncio
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replay.guard import NetworkGuard, network_guard

TEST_NET = "203.0.113.7"
NAME = "api.replay-probe.invalid"
MESSAGE = "network access blocked during replay of scenario"
# Captured before any guard exists: code that imported the C functions early bypasses the wrappers.
C_GETADDRINFO = _socket.getaddrinfo
C_GETHOSTBYNAME = _socket.gethostbyname
C_CONNECT = _socket.socket.connect


@dataclass
class Probe:
    name: str
    target: str
    """What the guard must name (``host:port`` or ``host``); empty for reported programs."""
    run: Callable[[], Any]
    expect: str = "refused"
    """``refused`` (raises, recorded), ``swallowed`` (no error escapes, recorded), ``local``, ``reported``."""


def _tcp(family: int = socket.AF_INET) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1)
    return s


def _udp() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def _close_after(fn: Callable[[socket.socket], Any], make: Callable[[], socket.socket] = _tcp) -> Callable[[], Any]:
    def run() -> Any:
        with make() as s:
            return fn(s)

    return run


async def _async_open() -> None:
    await asyncio.open_connection(NAME, 443)


async def _async_getaddrinfo() -> None:
    await asyncio.get_running_loop().getaddrinfo(NAME, 443)


async def _async_sock_connect() -> None:
    with _tcp() as s:
        s.setblocking(False)
        await asyncio.get_running_loop().sock_connect(s, (TEST_NET, 443))


async def _async_create_connection() -> None:
    await asyncio.get_running_loop().create_connection(asyncio.Protocol, TEST_NET, 443)


def _httpx_sync() -> None:
    import httpx

    with httpx.Client(timeout=2) as client:
        client.get(f"https://{NAME}/v1/models")


async def _httpx_async() -> None:
    import httpx

    async with httpx.AsyncClient(timeout=2) as client:  # passes the host to the resolver as bytes
        await client.get(f"https://{NAME}/v1/models")


def _swallowed() -> None:
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{TEST_NET}:8080/", timeout=1)
    except Exception:  # noqa: BLE001 - the library (or tool) swallows it: the guard must still report it
        pass


_ASKED: list[Any] | None = None
"""Names the C resolver was asked for while :func:`_evil_localhost` listens (one hook for the process)."""


def _listen(event: str, args: tuple[Any, ...]) -> None:
    if _ASKED is not None and event in ("socket.getaddrinfo", "socket.gethostbyname"):
        _ASKED.append(args[0])


def _evil_localhost() -> Any:
    """Answered with loopback by the guard: the resolver never sees the name (no DNS query)."""
    global _ASKED
    if _ASKED is None:
        sys.addaudithook(_listen)
    _ASKED = []
    try:
        infos = socket.getaddrinfo("evil.localhost", 80, socket.AF_INET)
        name = socket.gethostbyname("api.evil.localhost")
        asked = [h for h in _ASKED if "localhost" in str(h)]
    finally:
        _ASKED = []
    if asked or name != "127.0.0.1" or infos[0][4][0] != "127.0.0.1":
        raise AssertionError(f"resolver asked for {asked}")
    return "local"


def _python_child() -> None:
    code = f"import socket; socket.create_connection(({TEST_NET!r}, 443), timeout=1)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if proc.returncode == 0 or MESSAGE not in proc.stderr:
        raise AssertionError(f"child not refused (exit {proc.returncode}): {proc.stderr[-300:]}")
    raise ConnectionRefusedError(f"harness-replay: {MESSAGE} (in the child): {proc.stderr.strip().splitlines()[-1]}")


def _python_child_env() -> None:
    code = f"import _socket; _socket.getaddrinfo({NAME!r}, 443)"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    if proc.returncode == 0 or MESSAGE not in proc.stderr:
        raise AssertionError(f"child not refused (exit {proc.returncode}): {proc.stderr[-300:]}")
    raise ConnectionRefusedError(f"harness-replay: {MESSAGE} (in the child)")


def probes() -> list[Probe]:
    tn = f"{TEST_NET}:443"
    return [
        Probe("socket.create_connection", tn, lambda: socket.create_connection((TEST_NET, 443), timeout=1)),
        Probe("socket.connect", tn, _close_after(lambda s: s.connect((TEST_NET, 443)))),
        Probe("socket.connect_ex", tn, _close_after(lambda s: s.connect_ex((TEST_NET, 443)))),
        Probe("socket.connect IPv6", "[2001:db8::1]:443", _close_after(lambda s: s.connect(("2001:db8::1", 443, 0, 0)), lambda: _tcp(socket.AF_INET6))),
        Probe("UDP sendto", f"{TEST_NET}:53", _close_after(lambda s: s.sendto(b"x", (TEST_NET, 53)), _udp)),
        Probe("UDP sendmsg", f"{TEST_NET}:53", _close_after(lambda s: s.sendmsg([b"x"], [], 0, (TEST_NET, 53)), _udp)),
        Probe("_socket.socket.connect", tn, lambda: _socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect((TEST_NET, 443))),
        Probe("_socket.socket.connect (unbound, on socket.socket)", tn, _close_after(lambda s: C_CONNECT(s, (TEST_NET, 443)))),
        Probe("socket.getaddrinfo", f"{NAME}:443", lambda: socket.getaddrinfo(NAME, 443)),
        Probe("socket.gethostbyname", NAME, lambda: socket.gethostbyname(NAME)),
        Probe("socket.gethostbyname_ex", NAME, lambda: socket.gethostbyname_ex(NAME)),
        Probe("socket.gethostbyaddr", TEST_NET, lambda: socket.gethostbyaddr(TEST_NET)),
        Probe("socket.getnameinfo", tn, lambda: socket.getnameinfo((TEST_NET, 443), 0)),
        Probe("_socket.getaddrinfo (imported early)", f"{NAME}:443", lambda: C_GETADDRINFO(NAME, 443)),
        Probe("_socket.gethostbyname (imported early)", NAME, lambda: C_GETHOSTBYNAME(NAME)),
        Probe("bytes host", f"{NAME}:443", lambda: socket.getaddrinfo(NAME.encode(), 443)),
        Probe("asyncio.open_connection", f"{NAME}:443", lambda: asyncio.run(_async_open())),
        Probe("asyncio loop.getaddrinfo", f"{NAME}:443", lambda: asyncio.run(_async_getaddrinfo())),
        Probe("asyncio loop.sock_connect", tn, lambda: asyncio.run(_async_sock_connect())),
        Probe("asyncio loop.create_connection", tn, lambda: asyncio.run(_async_create_connection())),
        Probe("urllib", f"{TEST_NET}:80", lambda: urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{TEST_NET}/", timeout=1)),
        Probe("httpx.Client", f"{NAME}:443", _httpx_sync),
        Probe("httpx.AsyncClient (bytes host)", f"{NAME}:443", lambda: asyncio.run(_httpx_async())),
        Probe("error swallowed by the caller", f"{TEST_NET}:8080", _swallowed, "swallowed"),
        Probe("evil.localhost answered locally", "", _evil_localhost, "local"),
        Probe("Python subprocess (inherits the guard)", f"{tn} (from a subprocess)", _python_child),
        Probe("Python subprocess, own env=", f"{NAME}:443 (from a subprocess)", _python_child_env),
        Probe("other executable (reported)", "", lambda: subprocess.run(["true"], check=False), "reported"),
        Probe("os.system (reported)", "", lambda: os.system("true"), "reported"),
    ]


def check(probe: Probe) -> tuple[bool, str]:
    """Run one probe under a fresh guard (loopback allowed, as in ``replay run``); whether it was refused, and why not."""
    guard: NetworkGuard
    error: BaseException | None = None
    result: Any = None
    with network_guard("probe/scenario") as guard:
        try:
            result = probe.run()
        except BaseException as exc:  # noqa: BLE001 - every outcome is judged below
            error = exc
    text = f"{type(error).__name__}: {error}" if error is not None else ""
    chain, cause = text, error
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
        chain += f" <- {type(cause).__name__}: {cause}"
    if probe.expect == "local":
        return (result == "local" and error is None and not guard.blocked), text or f"blocked {guard.blocked}"
    if probe.expect == "reported":
        return (bool(guard.unguarded) and error is None), text or "not reported"
    recorded = probe.target in guard.blocked
    if probe.expect == "swallowed":
        return (error is None and recorded), f"blocked {guard.blocked}; {text}"
    refused = error is not None and MESSAGE in chain and recorded
    return refused, f"blocked {guard.blocked}; {chain[:300]}"


def run_all() -> list[tuple[str, bool, str]]:
    return [(p.name, *check(p)) for p in probes()]

"""The replay network guard refuses connections before any packet leaves.

Only loopback traffic is ever sent here. Where a test needs a non-loopback address
or a DNS name, the real ``connect``/``getaddrinfo`` underneath the guard are first
replaced by tripwires, so even a broken guard could not reach the network.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from replay.errors import ReplayError
from replay.guard import NetworkBlocked, network_guard

SCENARIO = "weather-agent/happy-path"
TEST_NET = "203.0.113.1"  # TEST-NET-3, never routed


class Server:
    """A loopback TCP server that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Replace the real network calls underneath the guard with recorders that send nothing."""
    calls: list[tuple[str, Any]] = []

    def fake_connect(self: socket.socket, address: Any) -> None:
        calls.append(("connect", address))
        raise AssertionError("real connect reached")

    def fake_connect_ex(self: socket.socket, address: Any) -> int:
        calls.append(("connect_ex", address))
        raise AssertionError("real connect_ex reached")

    def fake_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(("getaddrinfo", host))
        raise AssertionError("real getaddrinfo reached")

    monkeypatch.setattr(socket.socket, "connect", fake_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", fake_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    return calls


def http_get(port: int) -> bytes:
    # No proxies: a proxy from the environment would turn a loopback URL into outside traffic.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/", timeout=5) as resp:
        return resp.read()


def plain_connect(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))


async def async_connect(port: int) -> None:
    _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    writer.close()
    await writer.wait_closed()


def expected_message(host: str, port: int) -> str:
    return (
        f"harness-replay: network access blocked during replay of scenario '{SCENARIO}': "
        f"connect to {host}:{port} (allow it with --allow-host)"
    )


def test_blocks_loopback_when_not_allowed(server: Server) -> None:
    with network_guard(SCENARIO, allow_loopback=False) as guard:
        with pytest.raises(NetworkBlocked) as exc:
            plain_connect(server.port)
        assert str(exc.value) == expected_message("127.0.0.1", server.port)
        assert "\n" not in str(exc.value)

        with pytest.raises(OSError, match=f"scenario '{SCENARIO}'"):
            asyncio.run(async_connect(server.port))

        with pytest.raises(urllib.error.URLError) as url_exc:
            http_get(server.port)
        assert isinstance(url_exc.value.reason, NetworkBlocked)
        assert SCENARIO in str(url_exc.value)

    time.sleep(0.3)
    assert server.accepted == 0
    assert guard.blocked == [f"127.0.0.1:{server.port}"] * 3


def test_blocked_is_an_oserror_and_a_replay_error() -> None:
    with network_guard(SCENARIO, allow_loopback=False):
        with pytest.raises(NetworkBlocked) as exc:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
    assert isinstance(exc.value, OSError)
    assert isinstance(exc.value, ReplayError)
    assert (exc.value.scenario_id, exc.value.host, exc.value.port) == (SCENARIO, "127.0.0.1", 9)


def test_loopback_allowed_by_default(server: Server) -> None:
    with network_guard(SCENARIO) as guard:
        plain_connect(server.port)
        asyncio.run(async_connect(server.port))
        assert http_get(server.port) == b"ok"
        with socket.create_connection(("localhost", server.port), timeout=5):
            pass
    assert guard.blocked == []
    deadline = time.monotonic() + 5
    while server.accepted < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.accepted == 4


def test_connections_work_again_after_exit(server: Server) -> None:
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo
    with network_guard(SCENARIO, allow_loopback=False):
        with pytest.raises(NetworkBlocked):
            plain_connect(server.port)
    assert socket.socket.connect is real_connect
    assert socket.getaddrinfo is real_getaddrinfo
    assert "connect" not in vars(socket.socket)
    plain_connect(server.port)
    asyncio.run(async_connect(server.port))
    assert http_get(server.port) == b"ok"


def test_dns_is_refused_without_a_lookup(tripwires: list[tuple[str, Any]]) -> None:
    with network_guard(SCENARIO) as guard:
        start = time.perf_counter()
        with pytest.raises(NetworkBlocked, match="connect to example.com:443"):
            socket.getaddrinfo("example.com", 443)
        assert time.perf_counter() - start < 0.5
        with pytest.raises(NetworkBlocked):
            socket.create_connection(("api.openai.com", 443), timeout=1)
        with pytest.raises(OSError, match=SCENARIO):
            asyncio.run(asyncio.open_connection("api.anthropic.com", 443))
    assert tripwires == []
    assert guard.blocked == ["example.com:443", "api.openai.com:443", "api.anthropic.com:443"]


def test_non_loopback_address_refused_before_connect(tripwires: list[tuple[str, Any]]) -> None:
    with network_guard(SCENARIO) as guard:
        with pytest.raises(NetworkBlocked):
            socket.getaddrinfo(TEST_NET, 443)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            with pytest.raises(NetworkBlocked, match=f"connect to {TEST_NET}:443"):
                s.connect((TEST_NET, 443))
            with pytest.raises(NetworkBlocked):
                s.connect_ex((TEST_NET, 80))
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
            with pytest.raises(NetworkBlocked, match=r"connect to \[2001:db8::1\]:443"):
                s6.connect(("2001:db8::1", 443, 0, 0))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            with pytest.raises(NetworkBlocked):
                u.sendto(b"x", (TEST_NET, 53))
    assert tripwires == []
    assert guard.blocked == [
        f"{TEST_NET}:443",
        f"{TEST_NET}:443",
        f"{TEST_NET}:80",
        "[2001:db8::1]:443",
        f"{TEST_NET}:53",
    ]


def test_allowed_hosts_pass_through_to_the_real_call(tripwires: list[tuple[str, Any]]) -> None:
    with network_guard(SCENARIO, allow=["203.0.113.0/24", "*.internal.example"], allow_loopback=False):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            with pytest.raises(AssertionError, match="real connect reached"):
                s.connect((TEST_NET, 443))
        with pytest.raises(AssertionError, match="real getaddrinfo reached"):
            socket.getaddrinfo("models.internal.example", 443)
        with pytest.raises(NetworkBlocked):
            socket.getaddrinfo("example.com", 443)
    assert tripwires == [("connect", (TEST_NET, 443)), ("getaddrinfo", "models.internal.example")]


def test_refusal_is_recorded_even_if_swallowed() -> None:
    with network_guard(SCENARIO, allow_loopback=False) as guard:
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open("http://127.0.0.1:9/", timeout=1)
        except Exception:
            pass
    assert guard.blocked == ["127.0.0.1:9"]


def test_blocks_other_threads(server: Server) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            plain_connect(server.port)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    with network_guard(SCENARIO, allow_loopback=False):
        t = threading.Thread(target=worker)
        t.start()
        t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], NetworkBlocked)
    assert server.accepted == 0


def test_unix_sockets_always_allowed() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
            srv.bind(path)
            srv.listen(1)
            with network_guard(SCENARIO, allow_loopback=False) as guard:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                    c.connect(path)
                    conn, _ = srv.accept()
                    conn.close()
    assert guard.blocked == []


def test_nesting_restores_only_when_the_last_guard_exits(server: Server) -> None:
    real_connect = socket.socket.connect
    with network_guard("outer", allow_loopback=True) as outer:
        patched = socket.socket.connect
        assert patched is not real_connect
        with network_guard("inner", allow_loopback=False) as inner:
            assert socket.socket.connect is patched
            with pytest.raises(NetworkBlocked, match="scenario 'inner'"):
                plain_connect(server.port)
        assert socket.socket.connect is patched
        plain_connect(server.port)  # only the outer, loopback-allowing guard is left
    assert socket.socket.connect is real_connect
    assert inner.blocked == [f"127.0.0.1:{server.port}"]
    assert outer.blocked == []


def test_exits_cleanly_on_exception() -> None:
    real_connect = socket.socket.connect
    with pytest.raises(RuntimeError):
        with network_guard(SCENARIO):
            raise RuntimeError("boom")
    assert socket.socket.connect is real_connect


def test_asyncio_low_level_paths(tripwires: list[tuple[str, Any]]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        with pytest.raises(NetworkBlocked):
            await loop.getaddrinfo("example.com", 443)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setblocking(False)
            with pytest.raises(NetworkBlocked):
                await loop.sock_connect(s, (TEST_NET, 443))

    with network_guard(SCENARIO) as guard:
        asyncio.run(main())
    assert tripwires == []
    assert guard.blocked == ["example.com:443", f"{TEST_NET}:443"]


def test_addresses_of_an_allowed_name_are_allowed(server: Server) -> None:
    with network_guard(SCENARIO, allow=["localhost"], allow_loopback=False) as guard:
        with socket.create_connection(("localhost", server.port), timeout=5):
            pass
        with pytest.raises(NetworkBlocked):
            socket.create_connection(("127.0.0.2", server.port), timeout=5)
    assert guard.blocked == [f"127.0.0.2:{server.port}"]


# --- every probe ---------------------------------------------------------------------

import guard_probes  # noqa: E402


@pytest.mark.parametrize("probe", guard_probes.probes(), ids=[p.name for p in guard_probes.probes()])
def test_probe_is_refused(probe: guard_probes.Probe) -> None:
    ok, why = guard_probes.check(probe)
    assert ok, why


def test_bytes_host_gives_the_usual_message_not_unicode_error() -> None:
    with network_guard(SCENARIO) as guard:
        with pytest.raises(NetworkBlocked, match=r"connect to bad\.\.name\.invalid:443 \(allow it with --allow-host\)"):
            socket.getaddrinfo(b"bad..name.invalid", 443)
    assert guard.blocked == ["bad..name.invalid:443"]


def test_children_are_not_armed_after_exit() -> None:
    before = {k: os.environ.get(k) for k in ("PYTHONPATH", "REPLAY_NETWORK_GUARD")}
    with network_guard(SCENARIO):
        assert "REPLAY_NETWORK_GUARD" in os.environ
    assert {k: os.environ.get(k) for k in before} == before


def test_the_standard_librarys_processor_lookup_is_not_reported() -> None:
    """``platform.processor()`` runs ``uname -p`` (provider SDKs send it in a header): not an unguarded program."""
    import subprocess

    with network_guard(SCENARIO) as guard:
        subprocess.run(["uname", "-p"], check=False, capture_output=True)
        assert guard.unguarded == []
        subprocess.run(["uname", "-a"], check=False, capture_output=True)  # anything else is still reported
        assert guard.unguarded == ["uname (not a Python interpreter; its network access is not guarded)"]


def test_programs_a_replay_started_are_one_warning() -> None:
    """A LocalWorkspace starts readlink, sh and mv in every run: three warnings in every matrix cell."""
    import subprocess

    from replay.replayer import guard_divergences

    with network_guard(SCENARIO) as guard:
        for cmd in (["readlink", "/"], ["true"], ["readlink", "/tmp"]):
            subprocess.run(cmd, check=False, capture_output=True)
    (warning,) = guard_divergences(guard)
    assert warning.kind == "unguarded"
    assert warning.detail == "started readlink, true (not Python interpreters: their network access is not guarded)"

"""Refuse every outgoing connection while a scenario replays.

A replay must be answered from the cassette alone. If code under replay reaches a
real model, the run silently costs money, depends on the network and stops being
reproducible, so :func:`network_guard` makes such an attempt fail loudly instead.

The guard patches the socket layer rather than an HTTP client because agents reach
the network through many clients (httpx, aiohttp, urllib, SDKs with their own
transports), and all of them end in ``getaddrinfo`` and ``socket.connect``. Name
resolution is refused too, so not even a DNS query leaves the machine.

The guard is process-wide, not per task or thread: asyncio resolves names in an
executor thread and SDKs open connections from worker threads, and those must be
refused as well. Connections made through C libraries that bypass Python's
``socket`` module (for example uvloop's own transports) are not seen.
"""

from __future__ import annotations

import asyncio.base_events
import fnmatch
import ipaddress
import socket
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self

from .errors import ReplayError

__all__ = ["NetworkBlocked", "NetworkGuard", "network_guard"]

_INET = (socket.AF_INET, socket.AF_INET6)
_lock = threading.RLock()
_active: list[NetworkGuard] = []
_saved: dict[tuple[object, str], Any] = {}
_MISSING = object()


class NetworkBlocked(ReplayError, OSError):
    """A connection refused during replay.

    An ``OSError`` so that clients treat it as the connection failure it is and clean
    up normally; a :class:`ReplayError` so the CLI prints it as one line.
    """

    scenario_id: str
    host: str
    port: object


def _blocked(scenario_id: str, host: str, port: object) -> NetworkBlocked:
    target = _target(host, port)
    exc = NetworkBlocked(
        f"harness-replay: network access blocked during replay of scenario {scenario_id!r}: "
        f"connect to {target} (allow it with --allow-host)"
    )
    exc.scenario_id, exc.host, exc.port = scenario_id, host, port
    return exc


def _target(host: str, port: object) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port not in (None, "", 0) else shown


def _host_str(host: object) -> str:
    if isinstance(host, bytes):
        return host.decode("idna", "replace")
    return str(host)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


class NetworkGuard:
    """One active refusal; records what it refused so a swallowed error is still reported."""

    def __init__(self, scenario_id: str, allow: Iterable[str] = (), allow_loopback: bool = True) -> None:
        self.scenario_id = scenario_id
        self.allow_loopback = allow_loopback
        self.allow = [a.strip().lower() for a in allow if a.strip()]
        self._networks = []
        for entry in self.allow:
            try:
                self._networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                pass
        self.blocked: list[str] = []
        # Addresses an allowed host name resolved to: connect() only sees the address.
        self._resolved: set[str] = set()

    def allows(self, host: str) -> bool:
        """Whether a connection to ``host`` (a name or an address) may go ahead."""
        name = host.lower().rstrip(".")
        addr = _ip(name)
        if self.allow_loopback:
            if name == "localhost" or name.endswith(".localhost"):
                return True
            # 0.0.0.0 and :: are this machine too.
            if addr is not None and (addr.is_loopback or addr.is_unspecified):
                return True
        if addr is not None:
            if str(addr) in self._resolved or any(addr in net for net in self._networks):
                return True
            return any(str(addr) == a for a in self.allow)
        return any(fnmatch.fnmatchcase(name, a) for a in self.allow)

    def __enter__(self) -> Self:
        with _lock:
            if not _active:
                _install()
            _active.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with _lock:
            if self in _active:
                _active.remove(self)
            if not _active:
                _uninstall()


def network_guard(scenario_id: str, allow: Iterable[str] = (), allow_loopback: bool = True) -> NetworkGuard:
    """Use as ``with network_guard("my-scenario") as guard:``; see :class:`NetworkGuard`."""
    return NetworkGuard(scenario_id, allow, allow_loopback)


def _check(host: object, port: object) -> None:
    """Raise for the innermost guard that refuses ``host``; every refusing guard records it."""
    name = _host_str(host)
    with _lock:
        guards = list(_active)
    refusing = [g for g in guards if not g.allows(name)]
    if not refusing:
        return
    target = _target(name, port)
    with _lock:
        for g in refusing:
            g.blocked.append(target)
    raise _blocked(refusing[-1].scenario_id, name, port)


def _note_resolved(host: object, infos: list[Any]) -> None:
    """Remember what an allowed name resolved to, so connecting to it is allowed too."""
    name = _host_str(host)
    with _lock:
        for g in _active:
            if _ip(name) is None and g.allows(name):
                g._resolved.update(str(_ip(str(info[4][0])) or info[4][0]) for info in infos)


def _inet_address(sock: socket.socket, address: Any) -> tuple[str, object] | None:
    if sock.family not in _INET or not isinstance(address, tuple) or not address:
        return None  # Unix sockets and other local families never leave the machine
    return _host_str(address[0]), address[1] if len(address) > 1 else None


def _install() -> None:
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex
    orig_sendto = socket.socket.sendto
    orig_getaddrinfo = socket.getaddrinfo
    orig_create_connection = socket.create_connection
    loop_cls = asyncio.base_events.BaseEventLoop
    orig_loop_create_connection = loop_cls.create_connection
    orig_loop_getaddrinfo = loop_cls.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        target = _inet_address(self, address)
        if target is not None:
            _check(*target)
        return orig_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        target = _inet_address(self, address)
        if target is not None:
            _check(*target)
        return orig_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        target = _inet_address(self, args[-1]) if args else None
        if target is not None:
            _check(*target)
        return orig_sendto(self, data, *args)

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host is not None:  # None asks for a local (bind) address: no lookup
            _check(host, port)
        infos = orig_getaddrinfo(host, port, *args, **kwargs)
        if host is not None:
            _note_resolved(host, infos)
        return infos

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check(address[0], address[1])
        return orig_create_connection(address, *args, **kwargs)

    async def loop_create_connection(
        self: Any, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any
    ) -> Any:
        if host is not None:
            _check(host, port)
        return await orig_loop_create_connection(self, protocol_factory, host, port, **kwargs)

    async def loop_getaddrinfo(self: Any, host: Any, port: Any, **kwargs: Any) -> Any:
        if host is not None:
            _check(host, port)
        return await orig_loop_getaddrinfo(self, host, port, **kwargs)

    patches: list[tuple[object, str, Any]] = [
        (socket.socket, "connect", connect),
        (socket.socket, "connect_ex", connect_ex),
        (socket.socket, "sendto", sendto),
        (socket, "getaddrinfo", getaddrinfo),
        (socket, "create_connection", create_connection),
        (loop_cls, "create_connection", loop_create_connection),
        (loop_cls, "getaddrinfo", loop_getaddrinfo),
    ]
    for owner, name, replacement in patches:
        # connect & co. are inherited from _socket.socket: remember that they were
        # absent from socket.socket so restoring deletes rather than shadows them.
        _saved[(owner, name)] = vars(owner).get(name, _MISSING)
        setattr(owner, name, replacement)


def _uninstall() -> None:
    for (owner, name), original in _saved.items():
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _saved.clear()

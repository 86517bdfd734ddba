"""Refuse every outgoing connection and name lookup while a scenario replays.

A replay must be answered from the cassette alone. If code under replay reaches a
real model, the run silently costs money, depends on the network and stops being
reproducible, so :func:`network_guard` makes such an attempt fail loudly instead.

Two layers, because agents reach the network through many clients (httpx, aiohttp,
urllib, SDKs with their own transports) and some go below the ``socket`` module:

* Python-level wrappers of ``socket``'s and ``_socket``'s resolvers (``getaddrinfo``,
  ``gethostbyname``, ``gethostbyname_ex``, ``gethostbyaddr``, ``getnameinfo``) and of
  ``socket.socket``'s ``connect``/``connect_ex``/``sendto``/``sendmsg``. They refuse
  before the C call, and answer names under ``localhost`` themselves (loopback), so
  ``evil.localhost`` never becomes a DNS query.
* An audit hook (``sys.addaudithook``) on the events CPython raises inside the C
  socket code: ``socket.connect`` (also ``connect_ex`` and asyncio's ``sock_connect``),
  ``socket.sendto``, ``socket.sendmsg`` and every resolver. It sees calls that bypass
  the wrappers (``_socket.socket.connect(s, addr)``, a function imported before the
  guard). A hook cannot be removed, so it is installed on first use and does nothing
  while no guard is active.

Subprocesses: a Python child started during a replay inherits the guard (a
``sitecustomize`` on its ``PYTHONPATH`` arms it from ``REPLAY_NETWORK_GUARD``; its
refusals come back through a log file); any other executable, or a Python started
with ``-I``/``-E``/``-S``, is reported as unguarded.

The guard is process-wide, not per task or thread: asyncio resolves names in an
executor thread and SDKs open connections from worker threads, and those must be
refused as well. Connections made by C libraries that bypass CPython's socket code
entirely (uvloop's own transports) are not seen.
"""

from __future__ import annotations

import asyncio.base_events
import atexit
import fnmatch
import ipaddress
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from .errors import ReplayError

__all__ = ["NetworkBlocked", "NetworkGuard", "network_guard"]

_INET = (socket.AF_INET, socket.AF_INET6)
_lock = threading.RLock()
_active: list[NetworkGuard] = []
_saved: dict[tuple[object, str], Any] = {}
_MISSING = object()
_ENV = "REPLAY_NETWORK_GUARD"
_hook_installed = False
_saved_env: list[dict[str, str | None]] = []


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
    """A host as text, whatever the client passed: httpx/anyio pass bytes, some IDNA bytes."""
    if isinstance(host, (bytes, bytearray, memoryview)):
        raw = bytes(host)
        try:
            return raw.decode("idna")
        except UnicodeError:  # the idna codec has no lenient mode; never fail on a name we refuse
            return raw.decode("ascii", "backslashreplace")
    return str(host)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _under_localhost(name: str) -> bool:
    """``*.localhost`` is loopback by RFC 6761, but a resolver may still ask DNS: answer it here."""
    n = name.lower().rstrip(".")
    return n.endswith(".localhost")


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
        """Refused attempts (``host:port``), in order, including those of Python subprocesses."""
        self.unguarded: list[str] = []
        """Programs started during the replay that the guard could not follow (reported, not refused)."""
        # Addresses an allowed host name resolved to: connect() only sees the address.
        self._resolved: set[str] = set()
        self._log: Path | None = None
        """Where Python subprocesses append their refusals (set while the guard is active)."""
        self.log_to: Path | None = None
        """In a subprocess: the parent's log, appended to at every refusal."""

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
            self._log = _arm_children(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with _lock:
            if self in _active:
                _active.remove(self)
            _disarm_children()
            if not _active:
                _uninstall()
        self._collect_children()

    def _collect_children(self) -> None:
        if self._log is None:
            return
        try:
            lines = self._log.read_text(encoding="utf-8", errors="replace").splitlines()
            self._log.unlink()
        except OSError:
            lines = []
        self.blocked += [f"{line} (from a subprocess)" for line in lines if line.strip()][:1000]
        self._log = None


def network_guard(scenario_id: str, allow: Iterable[str] = (), allow_loopback: bool = True) -> NetworkGuard:
    """Use as ``with network_guard("my-scenario") as guard:``; see :class:`NetworkGuard`."""
    return NetworkGuard(scenario_id, allow, allow_loopback)


def _check(host: object, port: object) -> None:
    """Raise for the innermost guard that refuses ``host``; every refusing guard records it."""
    guards = list(_active)
    if not guards:
        return
    name = _host_str(host)
    refusing = [g for g in guards if not g.allows(name)]
    if not refusing:
        return
    target = _target(name, port)
    with _lock:
        for g in refusing:
            g.blocked.append(target)
            if g.log_to is not None:
                try:
                    with open(g.log_to, "a", encoding="utf-8") as fh:
                        fh.write(target.replace("\n", " ") + "\n")
                except OSError:
                    pass
    raise _blocked(refusing[-1].scenario_id, name, port)


def _check_resolve(host: object, port: object) -> None:
    """A lookup the wrappers did not answer: names under ``localhost`` are refused too (no DNS query)."""
    name = _host_str(host)
    if _active and _under_localhost(name):
        exc = _blocked(_active[-1].scenario_id, name, port)
        with _lock:
            for g in _active:
                g.blocked.append(_target(name, port))
        raise exc
    _check(name, port)


def _note_resolved(host: object, infos: list[Any]) -> None:
    """Remember what an allowed name resolved to, so connecting to it is allowed too."""
    name = _host_str(host)
    with _lock:
        for g in _active:
            if _ip(name) is None and g.allows(name):
                g._resolved.update(str(_ip(str(info[4][0])) or info[4][0]) for info in infos)


def _inet_address(sock: Any, address: Any) -> tuple[str, object] | None:
    if getattr(sock, "family", None) not in _INET or not isinstance(address, tuple) or not address:
        return None  # Unix sockets and other local families never leave the machine
    return _host_str(address[0]), address[1] if len(address) > 1 else None


# --------------------------------------------------------------------------- the audit hook


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """CPython's own socket and process events: the net under the wrappers (see module doc)."""
    if not _active or not (event.startswith("socket.") or event.startswith(("subprocess.", "os."))):
        return
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        if len(args) >= 2 and args[1] is not None:
            target = _inet_address(args[0], args[1])
            if target is not None:
                _check(*target)
    elif event == "socket.getaddrinfo":
        if args and args[0] is not None:
            _check_resolve(args[0], args[1] if len(args) > 1 else None)
    elif event in ("socket.gethostbyname", "socket.gethostbyaddr"):
        if args and args[0] is not None and _host_str(args[0]) != "localhost":
            _check_resolve(args[0], None)
    elif event == "socket.getnameinfo":
        if args and isinstance(args[0], tuple) and args[0]:
            _check(args[0][0], args[0][1] if len(args[0]) > 1 else None)
    elif event == "subprocess.Popen":
        executable, argv, _cwd, env = (list(args) + [None] * 4)[:4]
        _child(executable, argv, env)
    elif event in ("os.exec", "os.posix_spawn", "os.spawn"):
        path, argv, env = (list(args) + [None] * 3)[:3]
        _child(path, argv, env)
    elif event == "os.system":
        _child(None, args[0] if args else "", None)


def _child(executable: object, argv: object, env: object) -> None:
    """A program started during a replay: a Python child gets the guard, anything else is reported."""
    if isinstance(argv, (str, bytes)):
        words = os.fsdecode(argv).split()
    elif isinstance(argv, (list, tuple)):
        words = [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in argv]
    else:
        words = []
    program = os.fsdecode(executable) if isinstance(executable, (str, bytes, os.PathLike)) else (words[0] if words else "?")
    base = os.path.basename(program)
    if words[1:] == ["-p"] and base == "uname" == os.path.basename(words[0]):
        # platform.processor() (the openai and anthropic SDKs send it in a header): without this,
        # every replay of a provider scenario in a fresh process warned about a program that
        # never opens a socket.
        return
    is_python = base.startswith("python") or os.path.realpath(program) == os.path.realpath(sys.executable)
    flags = {w for w in words[1:3] if w.startswith("-") and not w.startswith("--")}
    isolated = any(c in f for f in flags for c in "IES")  # -I, -E, -S, alone or combined (-IS, -uE)
    armed = env is None or isinstance(env, dict)
    if is_python and not isolated and armed:
        if isinstance(env, dict):
            _inject(env)
        return
    why = "a Python started with -I/-E/-S" if is_python and isolated else "not a Python interpreter"
    with _lock:
        for g in _active:
            g.unguarded.append(f"{base} ({why}; its network access is not guarded)")


# --------------------------------------------------------------------------- subprocesses

_child_dir: Path | None = None
_SITECUSTOMIZE = '''"""Written by harness-replay: a Python started during a replay inherits its network guard."""
import os as _os
import sys as _sys


def _arm():
    import json
    config = json.loads(_os.environ["REPLAY_NETWORK_GUARD"])
    if config.get("path") and config["path"] not in _sys.path:
        _sys.path.append(config["path"])
    from replay.guard import _inherit

    _inherit(config)


def _chain():
    """Run the sitecustomize this one shadows, if any."""
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in _sys.path if p and _os.path.abspath(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if _os.environ.get("REPLAY_NETWORK_GUARD"):
    try:
        _arm()
    except Exception as exc:  # never keep the child from starting; say why it is unguarded
        _sys.stderr.write(f"harness-replay: network guard not armed in this subprocess: {exc}\\n")
_chain()
'''


def _sitecustomize_dir() -> Path:
    global _child_dir
    if _child_dir is None or not (_child_dir / "sitecustomize.py").is_file():
        d = Path(tempfile.mkdtemp(prefix="replay-guard-"))
        (d / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        _child_dir = d
        atexit.register(shutil.rmtree, d, True)  # one small folder per process, gone with it
    return _child_dir


def _child_env(guard: NetworkGuard, log: Path) -> dict[str, str]:
    config = {
        "scenario": guard.scenario_id,
        "allow": guard.allow,
        "loopback": guard.allow_loopback,
        "log": str(log),
        "path": str(Path(__file__).resolve().parent.parent),
    }
    site = str(_sitecustomize_dir())
    path = os.environ.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p and p != site]
    return {_ENV: json.dumps(config), "PYTHONPATH": os.pathsep.join([site, *parts])}


def _inject(env: dict[str, Any]) -> None:
    """An explicit ``env=`` for a Python child: add the guard's variables to it."""
    if not _active:
        return
    guard = _active[-1]
    if guard._log is None:
        return
    values = _child_env(guard, guard._log)
    site = values["PYTHONPATH"].split(os.pathsep)[0]
    theirs = [p for p in str(env.get("PYTHONPATH") or "").split(os.pathsep) if p and p != site]
    env[_ENV] = values[_ENV]
    env["PYTHONPATH"] = os.pathsep.join([site, *theirs])


def _arm_children(guard: NetworkGuard) -> Path | None:
    """Set the variables a Python child reads, for as long as ``guard`` is the innermost one."""
    try:
        fd, name = tempfile.mkstemp(prefix="replay-guard-", suffix=".log")
        os.close(fd)
        log = Path(name)
        values = _child_env(guard, log)
    except OSError:
        return None
    _saved_env.append({k: os.environ.get(k) for k in values})
    os.environ.update(values)
    return log


def _disarm_children() -> None:
    if not _saved_env:
        return
    for key, value in _saved_env.pop().items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _inherit(config: dict[str, Any]) -> None:
    """In a Python subprocess (from its sitecustomize): the parent's guard, for the whole process."""
    guard = NetworkGuard(str(config.get("scenario", "?")), config.get("allow") or (), bool(config.get("loopback", True)))
    log = config.get("log")
    guard.log_to = Path(log) if isinstance(log, str) and log else None
    with _lock:  # for the whole life of the process: the parent decides when the replay is over
        if not _active:
            _install()
        _active.append(guard)


# --------------------------------------------------------------------------- install / uninstall


def _resolvers(module: Any) -> list[tuple[str, Callable[..., Any]]]:
    """Wrappers of ``module``'s resolvers: refuse, or answer names under ``localhost`` with loopback."""
    orig_getaddrinfo = module.getaddrinfo
    orig_gethostbyname = module.gethostbyname
    orig_gethostbyname_ex = module.gethostbyname_ex
    orig_gethostbyaddr = module.gethostbyaddr
    orig_getnameinfo = module.getnameinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, *args: Any, **kwargs: Any) -> Any:
        if host is None:  # a local (bind) address: no lookup
            return orig_getaddrinfo(host, port, family, *args, **kwargs)
        name = _host_str(host)
        _check(name, port)
        if _under_localhost(name):
            loopback = "::1" if family == socket.AF_INET6 else "127.0.0.1"
            return orig_getaddrinfo(loopback, port, family, *args, **kwargs)
        infos = orig_getaddrinfo(host, port, family, *args, **kwargs)
        _note_resolved(host, infos)
        return infos

    def by_name(orig: Callable[[Any], Any], local: Callable[[str], Any]) -> Callable[[Any], Any]:
        """``gethostbyname``-like: one host argument; ``local`` answers names under localhost."""

        def wrapper(host: Any) -> Any:
            name = _host_str(host)
            _check(name, None)
            return local(name) if _under_localhost(name) else orig(host)

        return wrapper

    def getnameinfo(sockaddr: Any, flags: int) -> Any:
        if isinstance(sockaddr, tuple) and sockaddr:
            _check(sockaddr[0], sockaddr[1] if len(sockaddr) > 1 else None)
        return orig_getnameinfo(sockaddr, flags)

    gethostbyname = by_name(orig_gethostbyname, lambda name: "127.0.0.1")
    gethostbyname_ex = by_name(orig_gethostbyname_ex, lambda name: (name, [], ["127.0.0.1"]))
    gethostbyaddr = by_name(orig_gethostbyaddr, lambda name: (name, [], ["127.0.0.1"]))
    return [
        ("getaddrinfo", getaddrinfo),
        ("gethostbyname", gethostbyname),
        ("gethostbyname_ex", gethostbyname_ex),
        ("gethostbyaddr", gethostbyaddr),
        ("getnameinfo", getnameinfo),
    ]


def _install() -> None:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
    import _socket

    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex
    orig_sendto = socket.socket.sendto
    orig_sendmsg = socket.socket.sendmsg
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

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        target = _inet_address(self, args[2]) if len(args) >= 3 and args[2] is not None else None
        if target is not None:
            _check(*target)
        return orig_sendmsg(self, buffers, *args)

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
        (socket.socket, "sendmsg", sendmsg),
        (socket, "create_connection", create_connection),
        (loop_cls, "create_connection", loop_create_connection),
        (loop_cls, "getaddrinfo", loop_getaddrinfo),
    ]
    # `_socket` holds the C functions `socket` re-exports: code calling them from there is wrapped too.
    patches += [(module, name, fn) for module in (socket, _socket) for name, fn in _resolvers(module)]
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

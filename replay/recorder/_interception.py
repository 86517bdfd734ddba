"""Where model calls are caught: wrappers on every ``Model`` subclass and on ``Agent``.

Harness capabilities (summarizer, reminder, judges, ...) build private ``Agent``s, so
wrapping the user's model sees a fraction of the traffic. Every request does pass
through the public ``Model`` methods, called on the outermost model object; while a
session is active those methods are wrapped on every ``Model`` subclass (including ones
defined meanwhile) and dispatched to the session of the current context, which records
or serves the call. Patching is reference-counted and undone when the last session ends.
Private: the recorder's ``Session`` is the public face of all this.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..cassette import Kind, is_harness_module

if TYPE_CHECKING:
    from pydantic_ai.models import Model

_METHODS: tuple[Kind, ...] = ("request", "request_stream", "count_tokens", "compact_messages")


class SessionLike(Protocol):
    """What the wrappers hand calls to (``replay.recorder.Session``)."""

    async def on_request(self, call: Call) -> Any: ...
    def on_stream(self, call: Call) -> Any: ...
    def on_run_start(self, agent: Any, history: Any = None) -> int: ...
    def on_run_end(self, slot: int, agent: Any, prompt: Any, history: Any, agent_run: Any, exc: BaseException | None) -> None: ...




@dataclass(frozen=True)
class AgentOrigin:
    explicit_name: str | None
    module: str


_ORIGIN_ATTR = "__replay_origin__"
_SKIP_PREFIXES = ("pydantic_ai.", "pydantic_graph.", "replay.", "contextlib", "asyncio.", "anyio.", "typing")


def _caller_module(depth: int = 2) -> str:
    frame = sys._getframe(depth)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith(_SKIP_PREFIXES) or module in ("pydantic_ai", "replay", "contextlib", "asyncio")):
            return str(module)
        frame = frame.f_back  # type: ignore[assignment]
    return "__main__"


def _remember(agent: Any, depth: int = 3) -> AgentOrigin:
    origin = _origin(agent)
    if origin is None:
        name = getattr(agent, "name", None)
        if name is not None and getattr(agent, _INFERRED_ATTR, None) == name:
            name = None  # the variable it is bound to, not a name given at construction
        origin = AgentOrigin(name, _caller_module(depth))
        try:
            object.__setattr__(agent, _ORIGIN_ATTR, origin)
        except (AttributeError, TypeError):  # slotted or frozen: answer without caching
            pass
    return origin


_RUNNER: contextvars.ContextVar[tuple[int, AgentOrigin] | None] = contextvars.ContextVar("replay_runner", default=None)
"""The agent whose run this context is in, when a capability started that run for an agent it did not build."""


def _runner_origin(agent: Any, origin: AgentOrigin) -> AgentOrigin | None:
    """The origin a run of ``agent`` takes when a harness capability starts it for an unnamed agent the scenario built.

    ``TrajectoryJudge(agent=Agent(judge_model))``, ``SubAgent(Agent(model), name="researcher")``: the
    scenario built the agent, but the harness runs it, in a conversation of its own; tagged ``main``,
    its calls were counted and diffed as the main agent's. Such a run is the capability's: the
    package of the harness module that started it is its role, as for an agent the harness built
    itself. Decided per run, not once per agent, so a module-level agent's role does not depend on
    which scenario ran it first in the process; a run of the agent of the run it is started in
    (``SubAgents(include_self=True)`` runs the main agent again) stays that run's.
    """
    if origin.explicit_name is not None or is_harness_module(origin.module):
        return None
    runner = _caller_module(1)
    if not is_harness_module(runner):
        return None
    enclosing, _ = _current_agent()
    return None if enclosing is agent else AgentOrigin(None, runner)


def _origin(agent: Any) -> AgentOrigin | None:
    runner = _RUNNER.get()
    if runner is not None and runner[0] == id(agent):
        return runner[1]
    origin = getattr(agent, _ORIGIN_ATTR, None)
    return origin if isinstance(origin, AgentOrigin) else None


def role_for(agent: Any) -> str:
    """The role of an agent's requests: its explicit name, else its builder's harness package, else ``main``.

    Only a name given at construction counts: pydantic-ai infers a name from the variable
    an agent is bound to on its first run, which would make ``agent`` a role.
    """
    if agent is None:
        return "direct"
    origin = _origin(agent) or AgentOrigin(getattr(agent, "name", None), "")
    if origin.explicit_name:
        return origin.explicit_name
    if is_harness_module(origin.module):
        parts = [p.lstrip("_") for p in origin.module.split(".")[1:] if p.lstrip("_")]
        return parts[0] if parts else "harness"
    return "main"


def is_inner(agent: Any) -> bool:
    """Whether a harness capability built this agent (its requests are not the scenario's own)."""
    origin = _origin(agent)
    return origin is not None and is_harness_module(origin.module)


def _current_agent(run_context: Any = None) -> Any:
    if run_context is None:
        from pydantic_ai._run_context import get_current_run_context

        run_context = get_current_run_context()
    return getattr(run_context, "agent", None), run_context


@dataclass
class Call:
    """One intercepted model call, as the session sees it."""

    kind: Kind
    model: Any
    role: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    original: Callable[..., Any]

    def call_original(self) -> Any:
        return self.original(self.model, *self.args, **self.kwargs)


_SESSION: contextvars.ContextVar[SessionLike | None] = contextvars.ContextVar("replay_session", default=None)
_PROCESS_SESSION: SessionLike | None = None
"""The session of the one test pytest is running in this process (``session_scope(process_wide=True)``)."""


def _current() -> SessionLike | None:
    """The session of this context, else the test's.

    pytest runs one test at a time per process, but not always in the context its hooks set:
    anyio's plugin runs an async test (and its async fixtures) in a runner task started when the
    first async fixture was set up, whose context was copied before the test's call began, and
    so had no session — its model calls went unrecorded and, in CI mode, to the real model.
    """
    return _SESSION.get() or _PROCESS_SESSION
_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("replay_active_call", default=None)
_RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar("replay_agent_run", default=None)
_NO_CTX = object()


def _origin_module(call: Call) -> str:
    agent, _ = _current_agent(call.kwargs.get("run_context"))
    origin = _origin(agent) if agent is not None else None
    return origin.module if origin else ""


def _active_key(call: Call) -> Any:
    _, ctx = _current_agent(call.kwargs.get("run_context"))
    return id(ctx) if ctx is not None else _NO_CTX


# --------------------------------------------------------------------------- patching


class _Patcher:
    """Installs the wrappers on every Model subclass while at least one session needs them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved: list[tuple[type, str, Any]] = []

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._install()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._uninstall()

    def _patch_class(self, cls: type) -> None:
        for name in _METHODS:
            if name in cls.__dict__ and not getattr(cls.__dict__[name], "__replay_wrapped__", False):
                original = cls.__dict__[name]
                self._saved.append((cls, name, original))
                setattr(cls, name, _wrap(name, original))

    def _install(self) -> None:
        from pydantic_ai.agent import Agent
        from pydantic_ai.models import Model

        todo: list[type] = [Model]
        seen: set[type] = set()
        while todo:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            self._patch_class(cls)
            todo.extend(cls.__subclasses__())

        patcher = self
        original_init_subclass = Model.__dict__["__init_subclass__"]

        def init_subclass(cls: type, **kwargs: Any) -> None:
            original_init_subclass.__func__(cls, **kwargs)
            patcher._patch_class(cls)

        self._saved.append((Model, "__init_subclass__", original_init_subclass))
        Model.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment,arg-type]

        original_iter = Agent.__dict__["iter"]
        self._saved.append((Agent, "iter", original_iter))
        Agent.iter = _wrap_iter(original_iter)  # type: ignore[method-assign]
        original_agent_init = Agent.__dict__["__init__"]
        self._saved.append((Agent, "__init__", original_agent_init))
        Agent.__init__ = _wrap_agent_init(original_agent_init)  # type: ignore[method-assign]
        for cls in Agent.__mro__:  # AbstractAgent (older slims: Agent itself)
            original_infer = cls.__dict__.get("_infer_name")
            if original_infer is not None:
                self._saved.append((cls, "_infer_name", original_infer))
                cls._infer_name = _wrap_infer_name(original_infer)  # type: ignore[attr-defined]
                break

    def _uninstall(self) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()


_PATCHER = _Patcher()


def _wrap(kind: str, original: Any) -> Any:
    if kind == "request_stream":

        @functools.wraps(original)
        def stream_wrapper(self: Model, *args: Any, **kwargs: Any) -> Any:
            session = _current()
            if session is None:
                return original(self, *args, **kwargs)
            agent, ctx = _current_agent(kwargs.get("run_context") or (args[3] if len(args) > 3 else None))
            key = id(ctx) if ctx is not None else _NO_CTX
            if _ACTIVE.get() == key:
                return original(self, *args, **kwargs)
            call = Call("request_stream", self, role_for(agent), args, kwargs, original)
            return session.on_stream(call)

        stream_wrapper.__replay_wrapped__ = True  # type: ignore[attr-defined]
        return stream_wrapper

    @functools.wraps(original)
    async def wrapper(self: Model, *args: Any, **kwargs: Any) -> Any:
        session = _current()
        if session is None:
            return await original(self, *args, **kwargs)
        agent, ctx = _current_agent()
        key = id(ctx) if ctx is not None else _NO_CTX
        if _ACTIVE.get() == key:
            return await original(self, *args, **kwargs)
        call = Call(kind, self, role_for(agent), args, kwargs, original)  # type: ignore[arg-type]
        token = _ACTIVE.set(key)
        try:
            return await session.on_request(call)
        finally:
            _ACTIVE.reset(token)

    wrapper.__replay_wrapped__ = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_agent_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if _current() is not None:
            _remember(self)

    return __init__


_INFERRED_ATTR = "__replay_inferred_name__"


def _wrap_infer_name(original: Any) -> Any:
    """Mark a name pydantic-ai takes from the variable an agent is bound to (on its first run).

    An agent built before any session (at a test module's import, under the pytest plugin)
    has no recorded origin; without the mark its variable name would pass for a name given
    at construction, and renaming the variable would rename the role.
    """

    @functools.wraps(original)
    def _infer_name(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        name = getattr(self, "name", None)
        if name is not None:
            try:
                object.__setattr__(self, _INFERRED_ATTR, name)
            except (AttributeError, TypeError):
                pass

    return _infer_name


def _wrap_iter(original: Any) -> Any:
    @functools.wraps(original)
    @asynccontextmanager
    async def iter_(self: Any, user_prompt: Any = None, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        session = _current()
        if session is None:
            async with original(self, user_prompt, *args, **kwargs) as agent_run:
                yield agent_run
            return
        runner = _runner_origin(self, _remember(self))
        runner_token = _RUNNER.set((id(self), runner)) if runner is not None else None
        history = kwargs.get("message_history")
        agent_run = None
        error: BaseException | None = None
        slot = session.on_run_start(self, history)
        token = _RUN.set(slot)
        try:
            async with original(self, user_prompt, *args, **kwargs) as agent_run:
                yield agent_run
        except BaseException as exc:
            error = exc
            raise
        finally:
            _RUN.reset(token)
            session.on_run_end(slot, self, user_prompt, history, agent_run, error)
            if runner_token is not None:
                _RUNNER.reset(runner_token)

    return iter_


_S = TypeVar("_S", bound=SessionLike)


@contextmanager
def session_scope(session: _S, process_wide: bool = False) -> Iterator[_S]:
    """Activate ``session`` for model calls made in this context (and tasks it spawns).

    ``process_wide``: also for contexts that do not descend from this one (a pytest test;
    scenarios, which may run concurrently in one process, keep to their own context).
    """
    from ..wire.capture import patched

    global _PROCESS_SESSION
    _PATCHER.acquire()
    token = _SESSION.set(session)
    outer = _PROCESS_SESSION
    if process_wide:
        _PROCESS_SESSION = session
    try:
        with patched():  # provider models: their HTTP exchanges too (replay.wire)
            yield session
    finally:
        if process_wide:
            _PROCESS_SESSION = outer
        _SESSION.reset(token)
        _PATCHER.release()

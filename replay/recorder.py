"""Catch every model request of a run, tag it with a role and capture it into a cassette.

Harness capabilities (summarizer, reminder, judges, ...) build private ``Agent``s, so
wrapping the user's model sees a fraction of the traffic. Every request does pass
through the public ``Model`` methods, called on the outermost model object; while a
session is active those methods are wrapped on every ``Model`` subclass (including ones
defined meanwhile) and dispatched to the session of the current context, which records
or serves the call. Patching is reference-counted and undone when the last session ends.
"""

from __future__ import annotations

import asyncio
import os
import traceback
import contextvars
import datetime as _dt
import functools
import importlib.metadata
import platform
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from . import __version__
from .cassette import (
    AgentRunRecord,
    Cassette,
    CassetteBuilder,
    ErrorInfo,
    Exchange,
    Header,
    Kind,
    ObservationRecord,
    Outcome,
)
from ._determinism import deterministic_ids
from .scenario import Mode, Run, Scenario

if TYPE_CHECKING:
    from pydantic_ai.models import Model, StreamedResponse

_METHODS: tuple[Kind, ...] = ("request", "request_stream", "count_tokens", "compact_messages")


@functools.cache
def adapters() -> tuple[TypeAdapter[Any], TypeAdapter[Any]]:
    """(messages, stream events) adapters of the installed pydantic-ai, built once, on first use."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponseStreamEvent

    return ModelMessagesTypeAdapter, TypeAdapter(ModelResponseStreamEvent)


def dump_messages(messages: Any) -> list[dict[str, Any]]:
    return adapters()[0].dump_python(list(messages), mode="json")


def load_messages(data: list[dict[str, Any]]) -> list[Any]:
    return adapters()[0].validate_python(data)


@functools.cache
def _estimator() -> Callable[[Any], int] | None:
    try:
        from pydantic_ai_harness.compaction import estimate_token_count
    except ImportError:  # pragma: no cover - harness always installed with this tool
        return None
    return estimate_token_count


def estimate(messages: Any) -> int | None:
    """The harness's own token estimate, so figures match what its compaction decides on."""
    fn = _estimator()
    if fn is None or messages is None:
        return None
    try:
        return int(fn(list(messages)))
    except Exception:
        return None


def jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=lambda o: f"<{type(o).__qualname__}>", serialize_unknown=False)


def error_info(exc: BaseException) -> ErrorInfo:
    return ErrorInfo(type=f"{type(exc).__module__}.{type(exc).__qualname__}", message=str(exc))


# --------------------------------------------------------------------------- roles


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
            return module
        frame = frame.f_back  # type: ignore[assignment]
    return "__main__"


def _remember(agent: Any, depth: int = 3) -> AgentOrigin:
    origin = _origin(agent)
    if origin is None:
        origin = AgentOrigin(getattr(agent, "name", None), _caller_module(depth))
        try:
            object.__setattr__(agent, _ORIGIN_ATTR, origin)
        except (AttributeError, TypeError):  # slotted or frozen: answer without caching
            pass
    return origin


def _origin(agent: Any) -> AgentOrigin | None:
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
    if origin.module.startswith("pydantic_ai_harness"):
        parts = [p.lstrip("_") for p in origin.module.split(".")[1:] if p.lstrip("_")]
        return parts[0] if parts else "harness"
    return "main"


def _current_agent(run_context: Any = None) -> Any:
    if run_context is None:
        from pydantic_ai._run_context import get_current_run_context

        run_context = get_current_run_context()
    return getattr(run_context, "agent", None), run_context


# --------------------------------------------------------------------------- sources


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


class ResponseSource(Protocol):
    """Where a session's answers come from: the real model (record) or a cassette (replay)."""

    async def respond(self, call: Call, exchange: Exchange) -> Any: ...

    def stream(self, call: Call, exchange: Exchange) -> Any: ...


class LiveSource:
    """Calls the scenario's own model: recording."""

    async def respond(self, call: Call, exchange: Exchange) -> Any:
        return await call.call_original()

    def stream(self, call: Call, exchange: Exchange) -> Any:
        return call.call_original()


# --------------------------------------------------------------------------- session


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar("replay_session", default=None)
_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("replay_active_call", default=None)
_RUN: contextvars.ContextVar[int | None] = contextvars.ContextVar("replay_agent_run", default=None)
_NO_CTX = object()


class Session:
    """Captures every model call made in its context into a cassette."""

    def __init__(self, header: Header | None = None, source: ResponseSource | None = None) -> None:
        self.builder = CassetteBuilder(header or base_header())
        self.source: ResponseSource = source or LiveSource()
        self._counts: dict[str, int] = {}
        self._done = 0
        self._lock = threading.Lock()

    @property
    def cassette(self) -> Cassette:
        return self.builder.cassette

    def _new_exchange(self, call: Call, messages: Any, settings: Any, params: Any) -> Exchange:
        b = self.builder
        with self._lock:
            index = self._counts.get(call.role, 0)
            self._counts[call.role] = index + 1
            seq = len(b.cassette.exchanges)
            ex = Exchange.model_construct(  # our own data: validated when loaded, not while recording
                seq=seq,
                role=call.role,
                index=index,
                kind=call.kind,
                model_name=_safe_attr(call.model, "model_name"),
                model_system=_safe_attr(call.model, "system"),
                messages=b.messages(dump_messages(messages)) if messages is not None else [],
                settings=b.blob(jsonable(settings) if settings else None),
                parameters=b.blob(jsonable(params)) if params is not None else None,
                estimate=estimate(messages) if call.kind != "count_tokens" else None,
                run=_RUN.get(),
            )
            b.cassette.exchanges.append(ex)
            roles = b.cassette.header.roles
            if call.role not in roles:
                roles[call.role] = _origin_module(call)
        return ex

    def answered(self, ex: Exchange) -> None:
        """Note the order in which answers arrive (see :attr:`Exchange.done`)."""
        with self._lock:
            ex.done = self._done
            ex.after = len(self.builder.cassette.exchanges)
            self._done += 1

    def store_response(self, ex: Exchange, response: Any) -> None:
        ex.response = self.builder.message(dump_messages([response])[0])

    async def on_request(self, call: Call) -> Any:
        messages, settings, params = _split(call)
        ex = self._new_exchange(call, messages, settings, params)
        try:
            response = await self.source.respond(call, ex)
        except BaseException as exc:
            ex.error = error_info(exc)
            raise
        finally:
            self.answered(ex)
        if call.kind == "count_tokens":
            ex.usage = jsonable(response)
        else:
            self.store_response(ex, response)
        return response

    async def on_compact(self, call: Call) -> Any:
        request_context = call.args[0] if call.args else call.kwargs.get("request_context")
        messages = getattr(request_context, "messages", None)
        settings = getattr(request_context, "model_settings", None)
        params = getattr(request_context, "model_request_parameters", None)
        ex = self._new_exchange(call, messages, settings, params)
        ex.instructions = call.kwargs.get("instructions")
        try:
            response = await self.source.respond(call, ex)
        except BaseException as exc:
            ex.error = error_info(exc)
            raise
        finally:
            self.answered(ex)
        self.store_response(ex, response)
        return response

    @asynccontextmanager
    async def on_stream(self, call: Call) -> AsyncIterator[StreamedResponse]:
        messages, settings, params = _split(call)
        ex = self._new_exchange(call, messages, settings, params)
        events: list[Any] = []
        token = _ACTIVE.set(_active_key(call))
        try:
            cm = self.source.stream(call, ex)
            response = await cm.__aenter__()
        except BaseException as exc:
            ex.error = error_info(exc)
            raise
        finally:
            _ACTIVE.reset(token)
            self.answered(ex)
        _tap_events(response, events)
        exc_info: tuple[Any, Any, Any] = (None, None, None)
        try:
            yield response
        except BaseException as exc:
            exc_info = (type(exc), exc, exc.__traceback__)
            ex.error = error_info(exc)
            raise
        finally:
            try:
                await cm.__aexit__(*exc_info)
            finally:
                event_adapter = adapters()[1]
                ex.events = [event_adapter.dump_python(e, mode="json") for e in events]
                try:
                    self.store_response(ex, response.get())
                except Exception:  # a stream abandoned before its first part has no response
                    pass

    # ----------------------------------------------------------------- agent runs

    def on_run_start(self, agent: Any) -> int:
        """Reserve the run's slot now, so runs are listed in the order they started."""
        with self._lock:
            self.builder.cassette.runs.append(AgentRunRecord(role=role_for(agent)))
            return len(self.builder.cassette.runs) - 1

    def on_run_end(
        self, slot: int, agent: Any, prompt: Any, history: Any, agent_run: Any, exc: BaseException | None
    ) -> None:
        b = self.builder
        try:
            final = agent_run.all_messages() if agent_run is not None else []
        except Exception:
            final = []
        result = getattr(agent_run, "result", None) if agent_run is not None else None
        start = list(history or [])
        if isinstance(prompt, str):
            from pydantic_ai.messages import ModelRequest, UserPromptPart

            start.append(ModelRequest(parts=[UserPromptPart(prompt)]))
        record = AgentRunRecord(
            estimate=estimate(start),
            role=role_for(agent),
            prompt=jsonable(prompt),
            history=b.messages(dump_messages(history or [])),
            result=b.messages(dump_messages(final)),
            output=jsonable(result.output) if result is not None else None,
            error=error_info(exc) if exc is not None else None,
        )
        with self._lock:
            b.cassette.runs[slot] = record


def _safe_attr(obj: Any, name: str) -> str | None:
    try:
        value = getattr(obj, name)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _origin_module(call: Call) -> str:
    agent, _ = _current_agent(call.kwargs.get("run_context"))
    origin = _origin(agent) if agent is not None else None
    return origin.module if origin else ""


def _split(call: Call) -> tuple[Any, Any, Any]:
    names = ("messages", "model_settings", "model_request_parameters")
    values = list(call.args[:3]) + [None] * (3 - min(3, len(call.args)))
    for i, name in enumerate(names):
        if name in call.kwargs:
            values[i] = call.kwargs[name]
    return values[0], values[1], values[2]


def _tap_events(response: Any, sink: list[Any]) -> None:
    """Collect the raw events the stream produces, before pydantic-ai adds derived ones."""
    original = response._get_event_iterator

    async def tapped() -> AsyncIterator[Any]:
        async for event in original():
            sink.append(event)
            yield event

    response._get_event_iterator = tapped


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
        Model.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment]

        original_iter = Agent.__dict__["iter"]
        self._saved.append((Agent, "iter", original_iter))
        Agent.iter = _wrap_iter(original_iter)  # type: ignore[method-assign]
        original_agent_init = Agent.__dict__["__init__"]
        self._saved.append((Agent, "__init__", original_agent_init))
        Agent.__init__ = _wrap_agent_init(original_agent_init)  # type: ignore[method-assign]

    def _uninstall(self) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved.clear()


_PATCHER = _Patcher()


def _wrap(kind: str, original: Any) -> Any:
    if kind == "request_stream":

        @functools.wraps(original)
        def stream_wrapper(self: Model, *args: Any, **kwargs: Any) -> Any:
            session = _SESSION.get()
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
        session = _SESSION.get()
        if session is None:
            return await original(self, *args, **kwargs)
        agent, ctx = _current_agent()
        key = id(ctx) if ctx is not None else _NO_CTX
        if _ACTIVE.get() == key:
            return await original(self, *args, **kwargs)
        call = Call(kind, self, role_for(agent), args, kwargs, original)  # type: ignore[arg-type]
        token = _ACTIVE.set(key)
        try:
            if kind == "compact_messages":
                return await session.on_compact(call)
            return await session.on_request(call)
        finally:
            _ACTIVE.reset(token)

    wrapper.__replay_wrapped__ = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_agent_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if _SESSION.get() is not None:
            _remember(self)

    return __init__


def _wrap_iter(original: Any) -> Any:
    @functools.wraps(original)
    @asynccontextmanager
    async def iter_(self: Any, user_prompt: Any = None, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        session = _SESSION.get()
        if session is None:
            async with original(self, user_prompt, *args, **kwargs) as agent_run:
                yield agent_run
            return
        _remember(self)
        history = kwargs.get("message_history")
        agent_run = None
        error: BaseException | None = None
        slot = session.on_run_start(self)
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

    return iter_


# --------------------------------------------------------------------------- public API


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def _static_header() -> dict[str, Any]:
    return {
        "tool_version": __version__,
        "harness_version": _version("pydantic-ai-harness"),
        "slim_version": _version("pydantic-ai-slim"),
        "pydantic_version": _version("pydantic"),
        "python_version": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
    }


def base_header(**fields: Any) -> Header:
    return Header(**_static_header(), created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), **fields)


@contextmanager
def session_scope(session: Session) -> Iterator[Session]:
    """Activate ``session`` for model calls made in this context (and tasks it spawns)."""
    _PATCHER.acquire()
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)
        _PATCHER.release()


@contextmanager
def tracking_agents() -> Iterator[None]:
    """Remember where agents are built (e.g. while importing scenario files) for role tagging."""
    _PATCHER.acquire()
    token = _SESSION.set(Session())
    try:
        yield
    finally:
        _SESSION.reset(token)
        _PATCHER.release()


@contextmanager
def recording(path: str | Path | None = None, *, scenario_id: str | None = None) -> Iterator[Session]:
    """Record every model call made inside the block; write the cassette to ``path`` on exit.

    Usable around any code, not only scenarios::

        with replay.recording("cassettes/adhoc.cassette") as rec:
            await agent.run("hi")
    """
    from .cassette import save

    session = Session(base_header(scenario_id=scenario_id))
    error: BaseException | None = None
    with session_scope(session):
        try:
            yield session
        except BaseException as exc:
            error = exc
            raise
        finally:
            if error is not None:
                session.cassette.outcome = Outcome(status="error", error=error_info(error))
            if path is not None:
                save(finalize(session.cassette), path)


def finalize(cassette: Cassette) -> Cassette:
    """Last step before a cassette is written: scrub credentials out of every value."""
    from .config import load_config
    from .scrub import ScrubConfig, scrub_cassette

    config = load_config()
    return scrub_cassette(
        cassette, ScrubConfig(patterns=list(config.scrub_patterns), exempt_paths=list(config.scrub_exempt))
    )


async def execute_async(scenario: Scenario, session: Session, mode: Mode = "record") -> Cassette:
    """Run one scenario with ``session`` capturing its model calls; returns the finished cassette."""
    run = Run(scenario.id, mode)
    cassette = session.cassette
    cassette.header.scenario_id = scenario.id
    cassette.header.source_hash = scenario.source_hash
    cassette.header.mode = mode
    with session_scope(session):
        try:
            with deterministic_ids(scenario.id):  # uuid4/secrets ids in prompts repeat across runs
                output = await scenario.func(run)
            cassette.outcome = Outcome(status="ok", output=jsonable(output))
        except Exception as exc:
            if os.environ.get("REPLAY_DEBUG"):
                traceback.print_exc()
            cassette.outcome = Outcome(status="error", error=error_info(exc))
    cassette.observations = [ObservationRecord(name=o.name, value=o.value) for o in run.observations]
    cassette.expectations = dict(run.expectations)
    return cassette


def execute(scenario: Scenario, session: Session, mode: Mode = "record") -> Cassette:
    """Run a scenario in a fresh event loop, as the CLI does for each scenario."""
    return asyncio.run(execute_async(scenario, session, mode))


def record(scenario: Scenario) -> Cassette:
    return finalize(execute(scenario, Session()))

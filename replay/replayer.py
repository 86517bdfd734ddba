"""Re-run a scenario on the installed harness, answering every model call from a cassette.

Responses are served per role in that role's order: capability calls can run
concurrently (background tasks), so one global index would hand the summarizer's answer
to the reminder. What the scenario sends is captured into a new cassette, exactly as when
recording, so the differ compares like with like.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ._conversations import interleaved_roles, turns
from ._placeholders import placeholder_keys
from .cassette import Cassette, ErrorInfo, Exchange
from .recorder import Session, base_header, event_adapter, execute_async, finalize, load_messages
from .recorder._interception import Call
from .scenario import Scenario

OnExhausted = Literal["fail", "repeat", "fake"]
Level = Literal["model", "wire"]
"""Where a replay answers provider models: at the ``Model`` boundary, or at the HTTP transport."""



ORDER_TIMEOUT = 0.5
"""Seconds an answer waits for the answers recorded before it before the order is given up."""


class ReplayExhausted(Exception):
    """The scenario asked a role for more responses than the cassette holds."""


class ReplayedModelError(Exception):
    """Stands in for a recorded model exception whose class cannot be rebuilt here."""


@dataclass(frozen=True)
class Divergence:
    """Where a replay stopped following the recording: the report names role and ordinal."""

    role: str
    index: int
    kind: Literal["exhausted", "unused", "kind_mismatch", "network", "order", "unguarded"]
    detail: str

    def describe(self) -> str:
        return f"{self.role}[{self.index}]: {self.detail}"


@dataclass
class ReplayResult:
    scenario_id: str
    recorded: Cassette
    result: Cassette
    divergences: list[Divergence] = field(default_factory=list)


def _imported_class(dotted: str) -> type[BaseException] | None:
    from .scenario import scenario_module

    module_name, _, qualname = dotted.rpartition(".")
    module = sys.modules.get(module_name) or scenario_module(module_name)
    # what the module defines, read from its namespace: a module-level __getattr__ (pydantic's moved names,
    # concurrent.futures' lazy imports) would run code, or import, for a name a cassette chose
    namespace = getattr(module, "__dict__", None) if module is not None else None
    cls = namespace.get(qualname) if isinstance(namespace, dict) else None
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else None


def _http_error(info: ErrorInfo) -> BaseException | None:
    """A recorded provider HTTP error as the installed pydantic-ai raises one.

    Slim 2.60+ raises an HTTP error as a private class that is a ``ModelHTTPError`` *and* its
    category (``ModelServerError`` for a 500) and takes the category's name, which is what the
    cassette records; 2.59 and older raise a plain ``ModelHTTPError``. Rebuilt as the recorded
    name alone, ``except ModelHTTPError`` stopped catching it on replay, and on an older slim
    the category did not exist at all.
    """
    attributes = info.attributes or {}
    status, model_name = attributes.get("status_code"), attributes.get("model_name")
    exceptions = sys.modules.get("pydantic_ai.exceptions")
    http = getattr(exceptions, "ModelHTTPError", None)
    if type(status) is not int or not isinstance(model_name, str) or not isinstance(http, type):
        return None
    category = _imported_class(info.type)
    try:
        if category is not None and issubclass(category, http):
            return category(status, model_name, attributes.get("body"))
        for_category = getattr(http, "for_category", None)
        built: Any
        if category is not None and callable(for_category):
            built = for_category(category, status_code=status, model_name=model_name, body=attributes.get("body"))
        else:
            built = http(status, model_name, attributes.get("body"))
        return built if isinstance(built, BaseException) else None
    except Exception:  # a category no HTTP error belongs to, another constructor: the generic path
        return None


_SUB_EXCEPTIONS = re.compile(r" \(\d+ sub-exceptions?\)$")


def _group(cls: type[BaseException], info: ErrorInfo) -> BaseException | None:
    """A recorded exception group (``FallbackExceptionGroup``: every model of a ``FallbackModel`` failed) raised
    again from its recorded errors, each rebuilt as any recorded error is; ``None`` when they were not kept."""
    from .recorder import GROUPED

    grouped = (info.attributes or {}).get(GROUPED)
    if not isinstance(grouped, list) or not grouped:
        return None
    try:
        errors = [_rebuild_error(ErrorInfo.model_validate(e)) for e in grouped]
        built = cls(_SUB_EXCEPTIONS.sub("", info.message), errors)
    except Exception:
        return None
    return built


def _rebuild_error(info: ErrorInfo) -> BaseException:
    """Re-raise a recorded model error as its own class when that class is already imported.

    Only classes from modules already in ``sys.modules`` are used: a cassette never
    causes an import.
    """
    error: BaseException | None = _http_error(info)
    cls = _imported_class(info.type)
    if error is None and cls is not None and issubclass(cls, BaseExceptionGroup):
        error = _group(cls, info)
    if error is None and cls is not None:
        try:
            error = cls(info.message)
        except Exception:
            pass
        if error is None:
            try:  # constructors with more arguments: what handlers match on is the class
                error = cls.__new__(cls)
                Exception.__init__(error, info.message)
                error.message = info.message  # type: ignore[attr-defined]
            except Exception:
                error = None
    if error is not None:
        for name, value in (info.attributes or {}).items():  # status_code, body: what handlers branch on
            if name == "exceptions" and isinstance(error, BaseExceptionGroup):
                continue
            try:
                setattr(error, name, value)
            except Exception:  # a read-only property: the class computes it
                pass
        return error
    return ReplayedModelError(f"{info.type}: {info.message}")


def error_kinds(info: ErrorInfo) -> list[str]:
    """The dotted names of every class a replay of this error is an instance of (``except`` would catch it)."""
    rebuilt = _rebuild_error(info)
    if isinstance(rebuilt, ReplayedModelError):
        return [info.type]
    from .scenario import stable_name

    return [stable_name(f"{c.__module__}.{c.__qualname__}") for c in type(rebuilt).__mro__]


class CassetteSource:
    """Serves a cassette's responses per role, in order, under an exhaustion policy."""

    def __init__(self, recorded: Cassette, on_exhausted: OnExhausted = "fail") -> None:
        self.recorded = recorded
        self.on_exhausted = on_exhausted
        # Roles are agent names, scrubbed in the cassette: a live name is looked up by the same key.
        self._keys: dict[str, str] = {}
        self.queues: dict[str, deque[Exchange]] = {self._key(r): deque(xs) for r, xs in recorded.by_role().items()}
        self._held = {k: len(q) for k, q in self.queues.items()}
        self._several_models = {k for k, q in self.queues.items() if len({ex.model_name for ex in q}) > 1}
        """Roles two capability instances share (two TrajectoryJudges, two LLMReminders: one module, one role)
        with a model each: a call is answered from its own model's recording, not the role's next one."""
        self.last: dict[str, Exchange] = {}
        self.divergences: list[Divergence] = []
        # Answers are handed out at their recorded point (Exchange.done / .after): `_released`
        # counts recorded answers delivered as a contiguous prefix, `_calls` the calls made.
        self._ordered = bool(recorded.exchanges) and all(
            ex.done is not None and ex.after is not None for ex in recorded.exchanges
        )
        self._released = 0
        self._delivered: set[int] = set()
        self._calls = 0
        # Roles whose recorded requests alternate between conversations (concurrent runs): a call is
        # answered from its own conversation's recorded requests, not by arrival order (see bind).
        self._session: Any = None
        self._turns: dict[tuple[str, int, int], deque[Exchange]] = {}
        self._taken: set[int] = set()
        interleaved = interleaved_roles(recorded, of_runs := turns(recorded.runs))
        self._interleaved = {self._key(r) for r in interleaved}
        self._keys_of: dict[int, tuple[bytes, ...]] = {}
        """Content keys of recorded requests' messages, computed when first compared."""
        for ex in recorded.exchanges:
            if ex.role in interleaved and ex.run is not None and 0 <= ex.run < len(of_runs):
                self._turns.setdefault((self._key(ex.role), *of_runs[ex.run]), deque()).append(ex)

    def bind(self, session: Any) -> None:
        """The replay's session: the conversation and turn of each live agent run (``Session.turns``)."""
        self._session = session

    def _key(self, role: str) -> str:
        key = self._keys.get(role)
        if key is None:
            from .scrub import name_key

            key = self._keys[role] = name_key(role)
        return key

    def _ready(self, rec: Exchange) -> bool:
        return rec.done is None or (rec.done <= self._released and (rec.after or 0) <= self._calls)

    async def _wait_turn(self, rec: Exchange) -> None:
        """Hold an answer until the replay reaches the point where it arrived in the recording.

        Background capabilities (a judge, a reminder) then interleave with the main agent as
        they did when recorded. If the replay stops making the recorded calls, waiting could
        never end: after ``ORDER_TIMEOUT`` the order is given up for the rest of the run.
        """
        if not self._ordered or self._ready(rec):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ORDER_TIMEOUT
        spins = 0
        while not self._ready(rec):
            if loop.time() > deadline:
                self._ordered = False
                self.divergences.append(
                    Divergence(rec.role, rec.index, "order", "calls no longer follow the recorded order; answers served as asked")
                )
                return
            spins += 1
            await asyncio.sleep(0 if spins < 100 else 0.001)  # yield; back off if a thread is doing the work

    def _release(self, rec: Exchange) -> None:
        if rec.done is None:
            return
        self._delivered.add(rec.done)
        while self._released in self._delivered:
            self._released += 1

    def _in_conversation(self, role: str, exchange: Exchange) -> Exchange | None:
        """The next recorded request of the conversation and turn this call's agent run is in."""
        live = self._session.turns if self._session is not None else ()
        if exchange.run is None or not 0 <= exchange.run < len(live):
            return None
        found = self._turns.get((role, *live[exchange.run]))
        while found and id(found[0]) in self._taken:
            found.popleft()
        return found.popleft() if found else None

    def _same_request(self, queue: deque[Exchange], exchange: Exchange) -> Exchange | None:
        """Among the next pending recorded requests, the first that sent what this call sends.

        With concurrent conversations in the recording, a capability's calls (a summarizer
        compacting one of them) arrive in an order set by latency, and carry no conversation of
        their own; the request itself says which recorded call it is, while the harness sends
        the same. Otherwise (a request that changed) the arrival order decides, as for any role.
        """
        from ._facts import content_key

        table = self._session.builder.cassette.messages if self._session is not None else None
        if table is None:
            return None
        live = tuple(content_key(table[i]) for i in exchange.messages)
        recorded, keys_of = self.recorded.messages, self._keys_of
        for rec in itertools.islice(queue, self.MATCH_WINDOW):
            if id(rec) in self._taken or len(rec.messages) != len(live):
                continue
            keys = keys_of.get(id(rec))
            if keys is None:
                keys = keys_of[id(rec)] = tuple(content_key(recorded[i]) for i in rec.messages)
            if keys == live:
                return rec
        return None

    MATCH_WINDOW = 64
    """Pending recorded requests of a role a call is compared with (concurrent recordings only)."""

    def _next(self, call: Call, exchange: Exchange) -> Exchange | None:
        self._calls += 1
        role = self._key(call.role)
        queue = self.queues.get(role)
        rec = None
        if self._interleaved:
            if role in self._interleaved:
                rec = self._in_conversation(role, exchange)
            elif queue:
                rec = self._same_request(queue, exchange)
            while queue and id(queue[0]) in self._taken:
                queue.popleft()
            if rec is None and queue:
                rec = queue.popleft()
            if rec is not None:
                self._taken.add(id(rec))
        elif queue:
            rec = self._of_its_model(role, queue, call)
        if rec is not None:
            self.last[role] = rec
            if rec.kind != call.kind and {rec.kind, call.kind} != {"request", "request_stream"}:
                self.divergences.append(
                    Divergence(call.role, exchange.index, "kind_mismatch", f"recorded {rec.kind}, replay made {call.kind}")
                )
            return rec
        recorded = self._held.get(role, 0)
        detail = f"request #{exchange.index + 1} of role {call.role!r}, but the cassette holds {recorded}"
        if not recorded:  # an agent renamed or a capability added since: not a recording of that role run short
            held = ", ".join(f"{r} {len(xs)}" for r, xs in self.recorded.by_role().items()) or "no request at all"
            detail = (f"request #{exchange.index + 1} of role {call.role!r}, but the cassette has no request of "
                      f"that role (it holds {held})")
        if self.on_exhausted == "repeat" and role in self.last:
            self.divergences.append(Divergence(call.role, exchange.index, "exhausted", detail + " (repeated the last)"))
            return self.last[role]
        if self.on_exhausted == "fake":
            self.divergences.append(Divergence(call.role, exchange.index, "exhausted", detail + " (called the scenario's model)"))
            return None
        self.divergences.append(Divergence(call.role, exchange.index, "exhausted", detail))
        raise ReplayExhausted(f"harness-replay: {detail} (--on-exhausted={self.on_exhausted})")

    def _of_its_model(self, role: str, queue: deque[Exchange], call: Call) -> Exchange:
        """The role's next recorded call, or, for a role several models share, the next one of this call's model:
        by ordinal alone, a version calling two judges in another order got each other's verdicts."""
        if role in self._several_models:
            name = getattr(call.model, "model_name", None)
            for k, rec in enumerate(queue):
                if rec.model_name == name:
                    del queue[k]
                    return rec
        return queue.popleft()

    def _response(self, rec: Exchange, *, played: bool = False) -> Any:
        """``played``: a stream whose error is raised after its events (``_served_stream``), not here."""
        if rec.error is not None and not played:
            raise _rebuild_error(rec.error)
        if rec.kind == "count_tokens":
            from pydantic_ai.usage import RequestUsage

            return _validate(RequestUsage, rec.usage or {})
        if rec.response is None:
            raise ReplayedModelError(f"recorded {rec.role}[{rec.index}] has no response")
        return _older_slim_tolerant(lambda data: load_messages([data])[0], self.recorded.messages[rec.response])

    async def respond(self, call: Call, exchange: Exchange) -> Any:
        rec = self._next(call, exchange)
        if rec is None:
            return await call.call_original()
        return await self._serve(rec)

    async def _serve(self, rec: Exchange, *, played: bool = False) -> Any:
        """The recorded answer in its turn; a call the recording saw cancelled is held until it is cancelled again."""
        await self._wait_turn(rec)
        if _was_cancelled(rec):
            self._release(rec)
            await _until_cancelled(rec)
        try:
            return self._response(rec, played=played)
        finally:
            self._release(rec)

    def stream(self, call: Call, exchange: Exchange) -> Any:
        rec = self._next(call, exchange)
        if rec is None:
            return call.call_original()
        return _served_stream(self, rec, call)

    def unused(self) -> list[Divergence]:
        out = []
        for role, queue in self.queues.items():
            for rec in queue:
                if id(rec) in self._taken:
                    continue
                out.append(Divergence(role, rec.index, "unused", f"recorded request #{rec.index + 1} was never made"))
        return out


def _older_slim_tolerant(build: Any, data: Any) -> Any:
    """``build(data)``, or, when this pydantic-ai rejects it, ``build`` of it without the ``tool_kind`` the
    recording's agent graph stamped on its parts: slim 2.57 accepts only its core kinds there, so a 0.62
    streamed answer naming ``file_system.read_file`` failed the replay with a ValidationError, an environment's
    schema read as the harness's behaviour. The stamp is not sent to a model (``normaliser._unsent``)."""
    try:
        return build(data)
    except Exception:
        stripped = _without_part_kinds(data)
        if stripped is data:
            raise
        return build(stripped)


def _without_part_kinds(value: Any) -> Any:
    from .normaliser._unsent import core_kind

    if type(value) is dict:
        out = {k: _without_part_kinds(v) for k, v in value.items() if not (k == "tool_kind" and v is not None and not core_kind(v))}
        return value if out == value else out
    if type(value) is list:
        items = [_without_part_kinds(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def _validate(cls: type, data: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(cls).validate_python(data)


CANCEL_WAIT = 5.0
"""Seconds a call the recording saw cancelled is held for the replay to cancel it too."""


def _was_cancelled(rec: Exchange) -> bool:
    return rec.error is not None and rec.error.type in ("asyncio.exceptions.CancelledError", "asyncio.CancelledError")


async def _until_cancelled(rec: Exchange) -> None:
    """Wait as the cancelled call did, so the harness cancels it again (a guardrail that blocked the prompt
    while the main model was still answering). Raised at once, the cancellation was an error the harness
    saw before its guard's verdict: ``changed`` on the recording's own version, a crash on older ones."""
    await asyncio.sleep(CANCEL_WAIT)
    raise ReplayedModelError(
        f"{rec.role}[{rec.index}] was cancelled in the recording; this version left it running for {CANCEL_WAIT:.0f} s"
    )


def _opened(rec: Exchange) -> bool:
    """Whether a recorded stream failed after it opened: its events were kept (an error on opening keeps
    none), so the replay plays them before it raises, as the model did. A cancelled one is held instead."""
    return rec.error is not None and rec.events is not None and not _was_cancelled(rec)


_CLOSED_EARLY = "builtins.GeneratorExit"
"""What a stream whose reader stopped early was recorded with before that was no error."""


@asynccontextmanager
async def _served_stream(source: CassetteSource, rec: Exchange, call: Call) -> AsyncIterator[Any]:
    played = rec.error is not None and rec.response is not None and (rec.error.type == _CLOSED_EARLY or _opened(rec))
    response = await source._serve(rec, played=played)
    params = call.args[2] if len(call.args) > 2 else call.kwargs.get("model_request_parameters")
    if rec.events is not None:
        events_in = event_adapter()
        events = [_older_slim_tolerant(events_in.validate_python, e) for e in rec.events]
    else:
        events = _synthesize_events(response)
    stream = _make_stream(params, response, events)
    if played and rec.error is not None and rec.error.type != _CLOSED_EARLY:
        stream._replay_error = rec.error
    yield stream


def _synthesize_events(response: Any) -> list[Any]:
    from pydantic_ai.messages import PartStartEvent

    return [PartStartEvent(index=i, part=part) for i, part in enumerate(response.parts)]


def _make_stream(params: Any, response: Any, events: list[Any]) -> Any:
    from pydantic_ai.models import StreamedResponse

    cls = _stream_class(StreamedResponse)
    stream = cls(params)
    stream._replay_response = response
    stream._replay_events = events
    stream.provider_response_id = response.provider_response_id
    stream.finish_reason = response.finish_reason
    stream._usage = response.usage
    return stream


_STREAM_CLASSES: dict[type, type] = {}


def _stream_class(base: type) -> type:
    """A StreamedResponse that plays back recorded events (built lazily: the base differs per slim version)."""
    cls = _STREAM_CLASSES.get(base)
    if cls is None:

        class ReplayStreamedResponse(base):  # type: ignore[misc]
            _replay_response: Any
            _replay_events: list[Any]
            _replay_error: Any = None

            async def _get_event_iterator(self) -> AsyncIterator[Any]:
                # Live streams build their parts while producing events; a replayed one must too.
                manager = self._parts_manager
                for event in self._replay_events:
                    _apply(manager, event)
                    yield event
                if self._replay_error is not None:  # the model failed after these events
                    raise _rebuild_error(self._replay_error)

            @property
            def model_name(self) -> str:
                return self._replay_response.model_name or ""

            @property
            def provider_name(self) -> str | None:
                name: str | None = self._replay_response.provider_name
                return name

            @property
            def provider_url(self) -> str | None:
                return getattr(self._replay_response, "provider_url", None)

            @property
            def timestamp(self) -> datetime:
                stamp: datetime = self._replay_response.timestamp
                return stamp

        cls = _STREAM_CLASSES[base] = ReplayStreamedResponse
    return cls


def _apply(manager: Any, event: Any) -> None:
    apply_event = getattr(manager, "apply_event", None)
    if apply_event is not None:
        apply_event(event)
        return
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent

    if isinstance(event, PartStartEvent):
        manager.handle_part(vendor_part_id=event.index, part=event.part)
    elif isinstance(event, PartDeltaEvent):
        part = manager.get_part_by_vendor_id(event.index)
        manager.handle_part(vendor_part_id=event.index, part=event.delta.apply(part))


_offline_lock = threading.Lock()
_offline_depth = 0
_offline_saved: tuple[bool, ExitStack] | None = None


@contextmanager
def offline() -> Iterator[None]:
    """No real model request can happen: pydantic-ai's switch off, placeholder keys for constructors.

    The switch and the keys are process-wide while scenarios may replay in several threads
    (pytest-xdist workers do not share a process, threads do): the first to enter saves the
    state and the last to leave restores it, so one thread's exit never re-enables requests
    under another, and the state afterwards is what it was before.
    """
    global _offline_depth, _offline_saved
    from pydantic_ai import models

    with _offline_lock:
        if _offline_depth == 0:
            stack = ExitStack()
            stack.enter_context(placeholder_keys())
            _offline_saved = (models.ALLOW_MODEL_REQUESTS, stack)
        _offline_depth += 1
        models.ALLOW_MODEL_REQUESTS = False
    try:
        yield
    finally:
        with _offline_lock:
            _offline_depth -= 1
            if _offline_depth == 0 and _offline_saved is not None:
                previous, stack = _offline_saved
                _offline_saved = None
                models.ALLOW_MODEL_REQUESTS = previous
                stack.close()


async def replay_async(
    scenario: Scenario, recorded: Cassette, on_exhausted: OnExhausted = "fail", level: Level = "wire"
) -> ReplayResult:
    """Replay in the running loop; ``level="wire"`` lets provider models build their HTTP requests for real."""
    from .wire.serve import source_for

    source = source_for(level)(recorded, on_exhausted)
    session = Session(base_header(), source)
    result = await execute_async(scenario, session, "replay")
    return ReplayResult(scenario.id, recorded, finalize(result, recorded), source.divergences + source.unused())


def replay(
    scenario: Scenario,
    recorded: Cassette,
    on_exhausted: OnExhausted = "fail",
    *,
    allow_hosts: Iterable[str] = (),
    allow_loopback: bool = True,
    level: Level = "wire",
    timeout: float | None = None,
    give_up: Callable[[str], object] | None = None,
) -> ReplayResult:
    """Replay one scenario in a fresh event loop, with model requests and the network locked down.

    A blocked connection is reported as a divergence even when the library that tried it
    swallowed the error. ``timeout`` bounds the run (``replay._deadline``: raises
    ``ReplayTimeout``; with ``give_up``, a run that cannot be stopped ends the process).
    """
    from ._deadline import bounded
    from .guard import network_guard

    with offline(), network_guard(scenario.id, allow=allow_hosts, allow_loopback=allow_loopback) as guard:
        with bounded(timeout, scenario.id, give_up=give_up):
            result = asyncio.run(replay_async(scenario, recorded, on_exhausted, level))
    result.divergences += guard_divergences(guard)
    return result


WARNING_KINDS = frozenset({"order", "unguarded"})
"""Divergences worth a warning that do not by themselves mean the harness changed behaviour."""


def guard_divergences(guard: Any) -> list[Divergence]:
    """What the network guard saw: each refused attempt (a change, even if swallowed), each unguarded program."""
    out = [Divergence("network", i, "network", f"blocked connection to {t}") for i, t in enumerate(guard.blocked)]
    programs = list(dict.fromkeys(p.split(" (", 1)[0] for p in guard.unguarded))
    if programs:  # one line: a LocalWorkspace starts readlink, sh and mv in every run, three warnings a cell
        out.append(Divergence("network", 0, "unguarded", f"started {', '.join(programs)} (not Python "
                              f"interpreter{'s' * (len(programs) > 1)}: their network access is not guarded)"))
    return out

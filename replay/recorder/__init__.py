"""Capture every model call of a run, role-tagged, into a cassette: the ``Session``.

``replay.recorder._interception`` catches the calls (every ``Model`` subclass, every agent run) and
hands them to the session of the current context; the session records what was sent, asks
its source for the answer (the real model when recording, a cassette when replaying) and
records that too. ``recording()`` and ``record()`` are the public ways in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import decimal
import enum
import functools
import importlib.metadata
import json
import operator
import os
import platform
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter
from pydantic_core import to_json

from .. import __version__
from .._determinism import deterministic_ids
from ..cassette import (
    AgentRunRecord,
    Cassette,
    CassetteBuilder,
    ErrorInfo,
    Exchange,
    Header,
    HistoryRecord,
    ObservationRecord,
    Outcome,
)
from ..errors import ReplayError
from ..normaliser._schema import installed_schema
from ..scenario import Mode, Run, Scenario, json_value, stable_name
from ..wire.capture import WireSlot, call_scope
from ..wire.store import to_records
from ._interception import _ACTIVE, _RUN, Call, _active_key, _origin_module, is_inner, role_for, session_scope

if TYPE_CHECKING:
    from pydantic_ai.models import StreamedResponse


@functools.cache
def messages_adapter() -> TypeAdapter[Any]:
    """The installed pydantic-ai's adapter of a message list, imported on first use."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter


@functools.cache
def event_adapter() -> TypeAdapter[Any]:
    """The stream events' adapter, built when a stream is first recorded or replayed: building it is
    ≈ 16 ms of schema work that a process recording or replaying no stream never needs."""
    from pydantic_ai.messages import ModelResponseStreamEvent

    return TypeAdapter(ModelResponseStreamEvent)


@functools.cache
def _kind_adapters() -> dict[type, TypeAdapter[Any]]:
    """A list adapter per message class, with the message list adapter's own config (bytes as base64)."""
    from pydantic import ConfigDict
    from pydantic_ai.messages import ModelRequest, ModelResponse

    union_config = getattr(messages_adapter(), "_config", None)
    if not isinstance(union_config, dict):  # a pydantic that keeps it elsewhere: the union adapter for all
        return {}
    config = ConfigDict(**{k: v for k, v in union_config.items() if k != "defer_build"})  # type: ignore[typeddict-item]
    return {cls: TypeAdapter(list[cls], config=config) for cls in (ModelRequest, ModelResponse)}  # type: ignore[valid-type]


def dump_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages' JSON form, as ``ModelMessagesTypeAdapter`` writes it.

    Requests and responses are each dumped by their own class's adapter when every message is
    exactly one of the two: the same schema the union picks by ``kind``, without choosing a
    member for each message (a fifth of a recording's dumping). Anything else (a subclass, an
    object that is no message) takes the union adapter, warnings and errors as before."""
    items = list(messages)
    adapters = _kind_adapters()
    if not items or any(type(m) not in adapters for m in items):
        dumped: list[dict[str, Any]] = messages_adapter().dump_python(items, mode="json")
        return dumped
    groups: dict[type, list[Any]] = {}
    for m in items:
        groups.setdefault(type(m), []).append(m)
    if len(groups) == 1:
        ((cls, group),) = groups.items()
        one: list[dict[str, Any]] = adapters[cls].dump_python(group, mode="json")
        return one
    done = {cls: iter(adapters[cls].dump_python(group, mode="json")) for cls, group in groups.items()}
    return [next(done[type(m)]) for m in items]


def load_messages(data: list[dict[str, Any]]) -> list[Any]:
    loaded: list[Any] = messages_adapter().validate_python(data)
    return loaded


@functools.cache
def _estimator() -> Callable[..., int] | None:
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


def _message_chars(message: Any, data: dict[str, Any]) -> int | None:
    """Characters the harness estimate counts for ``message`` alone, its instructions left out;
    None when the message is not counted on its own (instruction deltas depend on their
    neighbours) or the estimator cannot take it. ``data`` is the message's dump."""
    fn = _estimator()
    if fn is None or any(str(p.get("part_kind", "")).startswith("instruction") for p in data.get("parts") or ()):
        return None
    try:
        found = int(fn([message], len))  # tokenizer=len: the exact character count, no floor
    except Exception:
        return None
    return found - _instructions_chars(data)


def _instructions_chars(data: dict[str, Any]) -> int:
    text = data.get("instructions")
    return len(text) if data.get("kind") == "request" and isinstance(text, str) and text else 0


class Estimates:
    """The harness token estimate of each request, at the cost of one count per distinct message.

    ``estimate_token_count`` is ``(characters of every message + the last instructions) // 4``
    for messages without instruction deltas, so a request's figure is a sum of per-message
    counts taken when each message is first interned. Estimating the whole history again on
    every request made recording quadratic in the conversation's length. Whether this holds for
    the installed harness is checked against the real estimator on the first requests and then
    every ``VERIFY_EVERY``-th; one disagreement switches the session to the real estimator.
    """

    VERIFY_FIRST = 4
    VERIFY_EVERY = 64

    def __init__(self) -> None:
        self.chars: dict[int, int | None] = {}
        self.instructions: dict[int, int] = {}
        self.exact_only = False
        self._seen = 0

    def note(self, index: int, message: Any, data: dict[str, Any]) -> None:
        if index not in self.chars:
            self.chars[index] = _message_chars(message, data)
            self.instructions[index] = _instructions_chars(data)

    def of(self, messages: list[Any], indices: list[int], prompt: str | None = None) -> int | None:
        """The estimate of ``messages``, interned as ``indices``; a run's start may end in its
        ``prompt``, a request of that one user prompt that was never sent on its own."""
        self._seen += 1
        if self.exact_only or len(indices) + (prompt is not None) != len(messages):
            return estimate(messages)
        chars, instructions, total, last = self.chars, self.instructions, 0 if prompt is None else len(prompt), 0
        for i in indices:
            n = chars.get(i)
            if n is None:
                return estimate(messages)
            total += n
            last = instructions[i] or last
        found = (total + last) // 4
        if self._seen <= self.VERIFY_FIRST or self._seen % self.VERIFY_EVERY == 0:
            exact = estimate(messages)
            if exact != found:
                self.exact_only = True
                return exact
        return found


def _unknown(o: Any) -> Any:
    """What a value JSON has no form for is written as: its class, or the plain mapping it gives of itself.

    ``ModelSettings(timeout=httpx.Timeout(60, connect=5))``: written as ``"<Timeout>"``, a timeout a release
    changed (or the scenario did) was no change in the settings compared. An ``httpx.Timeout`` (any object
    with an ``as_dict()`` of plain values) is written as that mapping, under its class's name."""
    as_dict = getattr(type(o), "as_dict", None)
    if callable(as_dict):
        try:
            values = as_dict(o)
        except Exception:
            values = None
        if isinstance(values, dict) and all(
            isinstance(k, str) and (v is None or isinstance(v, (bool, int, float, str))) for k, v in values.items()
        ):
            return {f"<{type(o).__qualname__}>": values}
    return f"<{type(o).__qualname__}>"


def jsonable(value: Any) -> Any:
    """``value`` as JSON, its sets listed in a fixed order, its bytes as text (``replay.scenario.json_value``)."""
    return json_value(value, fallback=_unknown, serialize_unknown=False)


GROUPED = "exceptions"
"""The attribute an exception group's own errors are kept under (see :func:`error_info`)."""
_ERROR_SKIPPED = frozenset({"message", "args", "headers"})
"""Not kept: the message is kept already; ``headers`` of a provider's error response can carry
cookies and account ids, and what code reads of them pydantic-ai copies out (``retry_after``)."""


def parameters_json(params: Any) -> Any:
    """``ModelRequestParameters`` as JSON, its set-typed fields sorted (``deferred_capability_ids``…):
    a set lists in the order of the process's string hashing, so two recordings of one scenario, or a
    replay and its recording, listed the same skills in different orders (``PYTHONHASHSEED``)."""
    out = jsonable(params)
    if isinstance(out, dict) and dataclasses.is_dataclass(params):
        for f in dataclasses.fields(params):
            value = getattr(params, f.name, None)
            if isinstance(value, (set, frozenset)) and isinstance(out.get(f.name), list):
                out[f.name] = sorted(out[f.name], key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return out


def error_info(exc: BaseException, depth: int = 0) -> ErrorInfo:
    attributes: dict[str, Any] = {}
    for name, value in getattr(exc, "__dict__", {}).items():
        if name.startswith("_") or name in _ERROR_SKIPPED or not name.isidentifier():
            continue
        if value is None or isinstance(value, (bool, int, float, str)) or _plain(value):
            attributes[name] = value
    if isinstance(exc, BaseExceptionGroup) and depth < 8:
        # What the group holds (a FallbackModel's every model failing: one error per model), so a replay
        # can raise the group again: an ExceptionGroup is built from its errors, and without them it came
        # back as a ReplayedModelError that no `except FallbackExceptionGroup` caught.
        attributes[GROUPED] = [error_info(e, depth + 1).model_dump(exclude_none=True) for e in exc.exceptions]
    return ErrorInfo(
        type=stable_name(f"{type(exc).__module__}.{type(exc).__qualname__}"), message=str(exc), attributes=attributes or None
    )


def _plain(value: Any, depth: int = 0) -> bool:
    """JSON data as it stands (an error body): lists and maps of text keys, scalars, not too deep."""
    if depth > 16:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


# --------------------------------------------------------------------------- message cache


class _Opaque(Exception):
    """A value whose changes cannot be watched cheaply: its message is dumped every time."""


_LEAVES: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), bytes, _dt.datetime, _dt.date, _dt.time, _dt.timedelta, decimal.Decimal, uuid.UUID}
)


class _Watched:
    """What must be compared later to know that a message is unchanged since it was dumped.

    ``objects`` are the message and every object reachable from it (parts, usage, ...), each
    compared by its ``__dict__`` against a shallow copy taken at dump time (``object_copies``);
    ``containers`` are the dicts and lists among their fields, each against a deep copy when
    it holds only immutable leaves, else a shallow one with its items watched in turn. Both
    checks are one list comparison each, done by CPython's C code.
    """

    __slots__ = ("containers", "container_copies", "object_copies", "objects")

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.object_copies: list[dict[str, Any]] = []
        self.containers: list[Any] = []
        self.container_copies: list[Any] = []

    def add(self, value: Any) -> None:
        """Watch ``value``; raises :class:`_Opaque` for what cannot be watched cheaply."""
        cls = type(value)
        if cls in _LEAVES or isinstance(value, enum.Enum):
            return
        if cls is dict or cls is list or cls is tuple:
            plain = _plain_copy(value)
            self.containers.append(value)
            if plain is not None:
                self.container_copies.append(plain)
                return
            self.container_copies.append(dict(value) if cls is dict else cls(value))
            for item in value.values() if cls is dict else value:
                if type(item) not in _LEAVES:
                    self.add(item)
            return
        fields = getattr(value, "__dict__", None)
        if type(fields) is not dict or _slotted(cls):
            raise _Opaque
        self.objects.append(value)
        self.object_copies.append(dict(fields))
        for item in fields.values():
            if type(item) not in _LEAVES:  # most fields: no call for them
                self.add(item)

    def unchanged(self) -> bool:
        return list(map(_fields_of, self.objects)) == self.object_copies and self.containers == self.container_copies

    def only_stamped(self) -> bool:
        """Whether the only change is pydantic-ai stamping ``run_id``/``conversation_id`` on the
        message after its request (the interned form leaves them out, see
        ``CassetteBuilder.message``): then the copy is brought up to date and the index kept."""
        message, copy = self.objects[0], self.object_copies[0]
        fields = message.__dict__
        if fields.keys() != copy.keys() or self.containers != self.container_copies:
            return False
        if [o.__dict__ for o in self.objects[1:]] != self.object_copies[1:]:
            return False
        if any(fields[k] is not v and fields[k] != v for k, v in copy.items() if k not in _RUN_STAMPS):
            return False
        self.object_copies[0] = dict(fields)
        return True

    def still_valid(self) -> bool:
        """Whether the dump taken earlier still describes the message; any doubt means dump again."""
        try:
            return self.unchanged() or self.only_stamped()
        except Exception:  # a field's __eq__ raising, a RecursionError on absurd nesting: not worth a recording
            return False


_fields_of = operator.attrgetter("__dict__")
"""``o.__dict__`` in C: :meth:`_Watched.unchanged` runs for every message of every request."""

_SLOTTED: dict[type, bool] = {}


def _slotted(cls: type) -> bool:
    """Whether ``cls`` declares ``__slots__`` (not every field is in ``__dict__``), remembered per class:
    asked for every object a new message reaches, and a class without them made ``getattr`` build and
    drop an AttributeError each time."""
    found = _SLOTTED.get(cls)
    if found is None:
        if len(_SLOTTED) >= 4096:  # classes made on the fly (one per run): keep the table bounded
            _SLOTTED.clear()
        found = _SLOTTED[cls] = bool(getattr(cls, "__slots__", None))
    return found


def _plain_copy(value: Any) -> Any:
    """A deep copy of a container of immutable leaves, or None if it holds anything else."""
    cls = type(value)
    if cls is dict:
        copied: dict[Any, Any] = {}
        for k, v in value.items():
            if type(v) in _LEAVES:
                copied[k] = v
            else:
                inner = _plain_copy(v)
                if inner is None:
                    return None
                copied[k] = inner
        return copied
    if cls is list or cls is tuple:
        items = []
        for v in value:
            if type(v) in _LEAVES:
                items.append(v)
            else:
                inner = _plain_copy(v)
                if inner is None:
                    return None
                items.append(inner)
        return cls(items)
    return None


_RUN_STAMPS = ("run_id", "conversation_id")

_address = object.__hash__
"""A live object's own number, as ``id()`` gives but without its audit event: ``builtins.id`` is
audited, and once the network guard's hook is installed (any replay in the process) every
``id()`` calls that Python hook, ~14 M instructions of a 60-turn recording's cache look-ups.
CPython derives it from the address, so it is unique among live objects; the cache confirms
each entry with ``is`` anyway, so a number shared elsewhere would only be a miss."""


class MessageCache:
    """Message objects already dumped and interned, so a history re-sent on every request costs
    a comparison per message, not a serialisation and a digest.

    pydantic-ai re-sends most message objects as they are, but does change some after a
    request (it stamps ``run_id`` onto a response, sets a request's ``timestamp`` and
    ``instructions``, reassigns ``parts``, updates ``metadata`` dicts in place; capabilities
    rewrite a part's ``content``). So an object is reused only if nothing reachable from it
    changed since it was dumped: every field of the message, of its parts and of any nested
    object or container is compared with a copy taken at dump time. An object holding
    something that cannot be copied cheaply is dumped again every time.
    """

    def __init__(self, builder: CassetteBuilder) -> None:
        self.builder = builder
        self.estimates = Estimates()
        self._entries: dict[int, tuple[Any, _Watched, int]] = {}
        self.hits = 0
        self.misses = 0

    def indices(self, messages: Iterable[Any]) -> list[int]:
        out: list[int] = []
        missing: list[tuple[int, Any]] = []
        entries = self._entries
        for message in messages:
            entry = entries.get(_address(message))
            if entry is not None and entry[0] is message and entry[1].still_valid():
                out.append(entry[2])
                continue
            missing.append((len(out), message))
            out.append(-1)
        if missing:
            self.misses += len(missing)
            dumped = dump_messages([m for _, m in missing])
            for (slot, message), data in zip(missing, dumped, strict=True):
                index = self.builder.message(data)
                out[slot] = index
                self.estimates.note(index, message, data)
                watched = _Watched()
                try:
                    watched.add(message)
                except (_Opaque, RecursionError):
                    continue
                entries[_address(message)] = (message, watched, index)
        self.hits += len(out) - len(missing)
        return out


# --------------------------------------------------------------------------- sources


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


class UnrecordableValue(ReplayError):
    """A value the agent sent or got that a cassette cannot hold (text with a lone surrogate, which
    UTF-8 cannot encode): the recording is refused with what it was, not reported as the
    scenario raising the encoder's exception (``declare it with expect_error``), which it did not."""


_ENCODING_FAILURES = (TypeError, ValueError, OverflowError)
"""What interning a value raises when msgpack cannot encode it (``UnicodeEncodeError`` is a ValueError)."""


class Session:
    """Captures every model call made in its context into a cassette."""

    def __init__(self, header: Header | None = None, source: ResponseSource | None = None) -> None:
        self.builder = CassetteBuilder(header or base_header())
        self.cache = MessageCache(self.builder)
        self.source: ResponseSource = source or LiveSource()
        self._counts: dict[str, int] = {}
        self._done = 0
        self._lock = threading.Lock()
        self.turns: list[tuple[int, int]] = []
        """Each agent run's (conversation, turn) as the run started, by slot (see ``replay._conversations``)."""
        self._started: dict[str, int] = {}
        self._ended: dict[tuple[int, int], tuple[int, Any]] = {}
        self._parameters: dict[bytes, int] = {}
        """Blob index of each request-parameters JSON text seen (see :meth:`_parameters_blob`)."""
        self.fault: str | None = None
        """The first value this session could not record; :func:`execute_async` then refuses the run."""
        bind = getattr(self.source, "bind", None)
        if callable(bind):
            bind(self)

    @property
    def cassette(self) -> Cassette:
        return self.builder.cassette

    def unrecordable(self, what: str, exc: BaseException) -> UnrecordableValue:
        """The error for a value the cassette cannot encode, the first one kept in :attr:`fault`
        (a capability may catch the exception and go on: the run is refused anyway)."""
        problem = f"{what} holds a value a cassette cannot hold ({type(exc).__name__}: {exc})"
        if self.fault is None:
            self.fault = problem
        return UnrecordableValue(problem)

    @contextmanager
    def holding(self, what: str) -> Iterator[None]:
        """:meth:`unrecordable` around a block (the per-request paths catch inline: no generator per call)."""
        try:
            yield
        except _ENCODING_FAILURES as exc:
            raise self.unrecordable(what, exc) from None

    def _new_exchange(self, call: Call, messages: Any, settings: Any, params: Any) -> Exchange:
        b = self.builder
        with self._lock:
            index = self._counts.get(call.role, 0)
            self._counts[call.role] = index + 1
            seq = len(b.cassette.exchanges)
            if messages is not None:
                messages = list(messages)
            indices = self.cache.indices(messages) if messages is not None else []
            ex = Exchange.model_construct(  # our own data: validated when loaded, not while recording
                seq=seq,
                role=call.role,
                index=index,
                kind=call.kind,
                model_name=_safe_attr(call.model, "model_name"),
                model_system=_safe_attr(call.model, "system"),
                messages=indices,
                settings=b.blob(jsonable(settings) if settings else None),
                parameters=self._parameters_blob(params) if params is not None else None,
                estimate=self.cache.estimates.of(messages, indices) if messages is not None and call.kind != "count_tokens" else None,
                run=_RUN.get(),
            )
            b.cassette.exchanges.append(ex)
            roles = b.cassette.header.roles
            if call.role not in roles:  # a scenario file's module by its place, not its path-and-bytes hash
                roles[call.role] = stable_name(_origin_module(call))
        return ex

    def _parameters_blob(self, params: Any) -> int | None:
        """The blob of ``parameters_json(params)``, built once per distinct parameters.

        pydantic-ai builds new request parameters for every request (tool definitions and their
        schemas included) that are nearly always the ones before: converting, sorting and
        interning them each time was a tenth of the capture's overhead. Their JSON text, written
        in C, is the key: the same text is the same ``jsonable`` value, so the same blob (a set
        listed in another order only misses, and is interned to the same blob as before)."""
        try:
            key = to_json(params, fallback=_unknown, serialize_unknown=False)
        except Exception:  # whatever the converter makes of it, as before
            return self.builder.blob(parameters_json(params))
        found = self._parameters.get(key)
        if found is None:
            found = self.builder.blob(parameters_json(params))
            if found is not None:
                self._parameters[key] = found
        return found

    def answered(self, ex: Exchange) -> None:
        """Note the order in which answers arrive (see :attr:`Exchange.done`)."""
        with self._lock:
            ex.done = self._done
            ex.after = len(self.builder.cassette.exchanges)
            self._done += 1

    def store_response(self, ex: Exchange, response: Any) -> None:
        with self._lock:
            ex.response = self.cache.indices([response])[0]

    def store_wire(self, ex: Exchange, slot: WireSlot) -> None:
        """Keep the HTTP exchanges a provider model made for this call (none for in-process models)."""
        if slot.captured:
            ex.wire = to_records(self.builder, slot.captured)

    async def on_request(self, call: Call) -> Any:
        """``request``, ``count_tokens`` and ``compact_messages``: one answer, recorded after the call."""
        messages, settings, params = _split(call)
        try:
            ex = self._new_exchange(call, messages, settings, params)
        except _ENCODING_FAILURES as exc:
            raise self.unrecordable(f"a {call.kind} of {call.role}", exc) from None
        if call.kind == "compact_messages":
            ex.instructions = call.kwargs.get("instructions")
        slot = WireSlot(label=f"{call.role}[{ex.index}]")
        try:
            with call_scope(slot):
                response = await self.source.respond(call, ex)
        except BaseException as exc:
            ex.error = error_info(exc)
            raise
        finally:
            self.answered(ex)
            self.store_wire(ex, slot)
        try:
            if call.kind == "count_tokens":
                ex.usage = jsonable(response)
            else:
                self.store_response(ex, response)
        except _ENCODING_FAILURES as exc:
            raise self.unrecordable(f"the response to {call.role}[{ex.index}]", exc) from None
        return response

    @asynccontextmanager
    async def on_stream(self, call: Call) -> AsyncIterator[StreamedResponse]:
        messages, settings, params = _split(call)
        try:
            ex = self._new_exchange(call, messages, settings, params)
        except _ENCODING_FAILURES as exc:
            raise self.unrecordable(f"a {call.kind} of {call.role}", exc) from None
        events: list[Any] = []
        slot = WireSlot(label=f"{call.role}[{ex.index}]")
        token = _ACTIVE.set(_active_key(call))
        try:
            with call_scope(slot):
                cm = self.source.stream(call, ex)
                response = await cm.__aenter__()
        except BaseException as exc:
            ex.error = error_info(exc)
            self.store_wire(ex, slot)
            raise
        finally:
            _ACTIVE.reset(token)
            self.answered(ex)
        _tap_events(response, events)
        exc_info: tuple[Any, Any, Any] = (None, None, None)
        try:
            yield response
        except GeneratorExit:  # the reader stopped early (left `run_stream`, broke out of its events): no error
            exc_info = (GeneratorExit, None, None)
            raise
        except BaseException as exc:
            exc_info = (type(exc), exc, exc.__traceback__)
            ex.error = error_info(exc)
            raise
        finally:
            try:
                await cm.__aexit__(*exc_info)
            finally:
                self.store_wire(ex, slot)
                events_out = event_adapter()
                ex.events = [events_out.dump_python(e, mode="json") for e in events]
                try:
                    with self.holding(f"the streamed response to {call.role}[{ex.index}]"):
                        self.store_response(ex, response.get())
                except Exception:  # a stream abandoned before its first part has no response (a fault is kept)
                    pass

    # ----------------------------------------------------------------- agent runs

    def on_run_start(self, agent: Any, history: Any = None) -> int:
        """Reserve the run's slot now, so runs are listed in the order they started; note which
        conversation it belongs to (``replay._conversations``) while its history is the very
        list of objects an earlier run ended with."""
        role = role_for(agent)
        parent = _RUN.get()  # the enclosing run (this run's own slot is set after this returns)
        with self._lock:
            self.builder.cassette.runs.append(AgentRunRecord(role=role, parent=parent))
            slot = len(self.builder.cassette.runs) - 1
            ended = self._ended.get((id(history[-1]), len(history))) if history else None
            # A run continues an earlier run of its own role only, as ``_conversations.links`` reads the
            # cassette: a writer handed the planner's result starts a writer conversation. Counted as the
            # planner's next turn here but as a conversation of its own there, a replay looked its calls up
            # under another conversation than the recording's and answered them crossed (a handoff run
            # concurrently was ``changed`` on every replay of an unchanged harness).
            if ended is not None and ended[1] is history[-1] and self.builder.cassette.runs[ended[0]].role == role:
                root, turn = self.turns[ended[0]]
                self.turns.append((root, turn + 1))
            else:
                self.turns.append((self._started.get(role, 0), 0))
                self._started[role] = self._started.get(role, 0) + 1
            return slot

    def on_run_end(
        self, slot: int, agent: Any, prompt: Any, history: Any, agent_run: Any, exc: BaseException | None
    ) -> None:
        b = self.builder
        result = getattr(agent_run, "result", None) if agent_run is not None else None
        parent = b.cassette.runs[slot].parent
        if is_inner(agent):  # a capability's own run: its calls (prompt included) are recorded; how it ended is enough
            record = AgentRunRecord(
                role=role_for(agent),
                parent=parent,
                output=jsonable(result.output) if result is not None else None,
                error=error_info(exc) if exc is not None else None,
            )
            with self._lock:
                b.cassette.runs[slot] = record
            return
        try:
            final = agent_run.all_messages() if agent_run is not None else []
        except Exception:
            final = []
        if final:
            with self._lock:
                self._ended[(id(final[-1]), len(final))] = (slot, final[-1])  # the object kept: ids are reused
        start = list(history or [])
        if isinstance(prompt, str):
            from pydantic_ai.messages import ModelRequest, UserPromptPart

            start.append(ModelRequest(parts=[UserPromptPart(prompt)]))
        try:
            with self.holding(f"the messages of a {role_for(agent)} run"):
                self._store_run(slot, agent, prompt, history, result, exc, final, start, parent)
        except UnrecordableValue:
            pass  # the run is over and its own outcome stands; the session's fault refuses the recording

    def _store_run(
        self, slot: int, agent: Any, prompt: Any, history: Any, result: Any, exc: BaseException | None,
        final: list[Any], start: list[Any], parent: int | None,
    ) -> None:
        b = self.builder
        with self._lock:
            final_ids = self.cache.indices(final)
            given = start[: len(history or [])]
            if len(given) <= len(final) and all(a is b for a, b in zip(given, final)):
                history_ids = final_ids[: len(given)]  # the run's messages start with the history it was given
            else:
                history_ids = self.cache.indices(given)
            b.cassette.runs[slot] = AgentRunRecord(
                estimate=self.cache.estimates.of(start, history_ids, prompt if isinstance(prompt, str) else None),
                role=role_for(agent),
                parent=parent,
                prompt=jsonable(prompt),
                history=history_ids,
                result=final_ids,
                output=jsonable(result.output) if result is not None else None,
                error=error_info(exc) if exc is not None else None,
            )


def _safe_attr(obj: Any, name: str) -> str | None:
    try:
        value = getattr(obj, name)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _split(call: Call) -> tuple[Any, Any, Any]:
    """(messages, settings, request parameters) of a call, wherever the method takes them from."""
    if call.kind == "compact_messages":
        context = call.args[0] if call.args else call.kwargs.get("request_context")
        return (
            getattr(context, "messages", None),
            getattr(context, "model_settings", None),
            getattr(context, "model_request_parameters", None),
        )
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
        "schema_defaults": installed_schema(),
    }


def env_paths() -> dict[str, list[str]]:
    """This environment's folders (see ``Header.paths``), each as given and resolved (``/var/folders/…`` is
    ``/private/var/…``)."""
    from ..config import find_pyproject

    pyproject = find_pyproject()
    found = {"tempdir": tempfile.gettempdir(), "project": str(pyproject.parent if pyproject is not None else Path.cwd()),
             "prefix": sys.prefix, "home": os.path.expanduser("~")}
    out = {}
    for key, given in found.items():
        try:
            resolved = os.path.realpath(given)
        except OSError:
            resolved = given
        out[key] = list(dict.fromkeys((given, resolved)))
    return out


_SDKS = {"openai": "openai", "anthropic": "anthropic", "groq": "groq", "mistralai": "mistralai", "google.genai": "google-genai",
         "cohere": "cohere", "botocore": "botocore", "huggingface_hub": "huggingface-hub", "httpx": "httpx", "httpx2": "httpx2"}
"""Module → distribution of the provider SDKs and HTTP clients that build what a provider is sent."""


def sdk_versions() -> dict[str, str]:
    """The versions of the provider SDKs and HTTP clients loaded in this process."""
    out = {}
    for module, dist in _SDKS.items():
        if module in sys.modules and (version := _version(dist)) is not None:
            out[dist] = version
    return out


def base_header(**fields: Any) -> Header:
    return Header(**_static_header(), created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                  paths=env_paths(), **fields)


@contextmanager
def tracking_agents() -> Iterator[None]:
    """Remember where agents are built (e.g. while importing scenario files) for role tagging."""
    with session_scope(Session()):
        yield


@contextmanager
def recording(path: str | Path | None = None, *, scenario_id: str | None = None) -> Iterator[Session]:
    """Record every model call made inside the block; write the cassette to ``path`` on exit.

    Usable around any code, not only scenarios::

        with replay.recording("cassettes/adhoc.cassette") as rec:
            await agent.run("hi")
    """
    from ..cassette import save_readable

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
            if session.fault is not None:  # a call is missing from what was captured: nothing written
                if error is None:
                    raise UnrecordableValue(session.fault)
            elif path is not None:
                from ..config import limits, load_config

                save_readable(finalize(session.cassette), path, limits(load_config()))


def _named_folders(cassette: Cassette) -> dict[str, list[str]]:
    """The header's folders that the recording itself names somewhere (a message, a wire body, an
    observation, an error), each as the text would hold it: raw or JSON-escaped.

    Only those are the normaliser's business, and a cassette goes into a pull request: one whose
    content names no folder should not carry the machine's home folder (its user name), checkout
    and venv paths, nor change in ``git diff`` when a colleague records it elsewhere."""
    from ..cassette import dumps
    from ..errors import CassetteError

    folders = cassette.header.paths
    if not folders:
        return folders
    cassette.header.paths = {}
    try:
        body = dumps(cassette)
    except CassetteError:  # a value no cassette can hold: writing it fails, and says so, as before
        return folders
    finally:
        cassette.header.paths = folders

    def named(folder: str) -> bool:
        forms = {folder, json.dumps(folder)[1:-1], json.dumps(folder, ensure_ascii=False)[1:-1]}
        return any(f.encode("utf-8", "surrogatepass") in body for f in forms if f)

    return {key: dirs for key, dirs in folders.items() if any(named(d) for d in dirs)}


def finalize(cassette: Cassette, known: Cassette | None = None) -> Cassette:
    """Last step before a cassette is written: scrub credentials out of every value.

    ``known``: the recording a replay re-ran; what it already holds is not screened again."""
    from ..config import load_config
    from ..scrub import ScrubConfig, scrub_cassette

    config = load_config()
    cassette.header.paths = _named_folders(cassette)
    if any(ex.wire for ex in cassette.exchanges) and not cassette.header.sdk_versions:
        cassette.header.sdk_versions = sdk_versions()  # loaded by now: a provider model imports its SDK when built
    return scrub_cassette(
        cassette, ScrubConfig(patterns=list(config.scrub_patterns), exempt_paths=list(config.scrub_exempt)), known
    )


async def execute_async(scenario: Scenario, session: Session, mode: Mode = "record") -> Cassette:
    """Run one scenario with ``session`` capturing its model calls; returns the finished cassette."""
    cassette = session.cassette
    run = Run(scenario.id, mode, calls=lambda: len(cassette.exchanges))
    cassette.header.scenario_id = scenario.id
    cassette.header.source_hash = scenario.source_hash
    cassette.header.mode = mode
    with session_scope(session):
        try:
            with deterministic_ids(scenario.id):  # uuid4/secrets ids in prompts repeat across runs
                output = await scenario.func(run)
            cassette.outcome = Outcome(status="ok", output=jsonable(output))
        except (Exception, SystemExit) as exc:  # sys.exit() in a scenario ended `record` silently, with its code
            if os.environ.get("REPLAY_DEBUG"):
                traceback.print_exc()
            cassette.outcome = Outcome(status="error", error=error_info(exc))
    cassette.observations = [ObservationRecord(name=o.name, value=o.value) for o in run.observations]
    cassette.expectations = dict(run.expectations)
    with session.holding("an observed history"):
        cassette.histories = [
            HistoryRecord(
                name=h.name,
                messages=session.builder.messages(h.messages),
                source=session.builder.messages(h.source),
                after=h.after,
                predicate=h.predicate,
                verdict=h.verdict,
            )
            for h in run.histories
        ]
    if session.fault is not None:
        raise UnrecordableValue(session.fault)
    return cassette


def execute(scenario: Scenario, session: Session, mode: Mode = "record") -> Cassette:
    """Run a scenario in a fresh event loop, as the CLI does for each scenario."""
    return asyncio.run(execute_async(scenario, session, mode))


def record(scenario: Scenario) -> Cassette:
    return finalize(execute(scenario, Session()))

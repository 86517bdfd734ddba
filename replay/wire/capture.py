"""Capture and serve the HTTP exchanges a provider model makes, below pydantic-ai.

Model-level replay answers at the ``Model`` boundary, so the provider mapping of the
installed pydantic-ai-slim (roles, ``cache_control``, tool schemas, ``max_tokens`` naming…)
never runs. At the transport it does: while a session is active, ``send`` of the httpx
clients the provider SDKs use (``httpx2`` and ``httpx``) is wrapped. Recording keeps each
request (method, URL, the headers that matter, the JSON body) and the raw answer (JSON, or
the SSE text) beside the model-level exchange that caused it; replaying lets the provider
model build its request for real and answers it from the cassette without a socket.

The wrappers act only where a model call of this tool's session is in progress (a context
variable the recorder sets around each call), so other HTTP traffic is left alone when
recording and refused when replaying.
"""

from __future__ import annotations

import contextvars
import functools
import json
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# The headers that change what a provider does; auth, SDK telemetry and transport headers are
# left out (they hold secrets or differ on every machine).
REQUEST_HEADERS = frozenset(
    {"content-type", "anthropic-version", "anthropic-beta", "openai-beta", "x-goog-api-client-beta", "prefer"}
)
RESPONSE_HEADERS = frozenset({"content-type", "x-should-retry", "retry-after", "retry-after-ms"})
"""What the SDK reads of an answer to decide what it does next: whether and when to retry an error
(a 500 with ``x-should-retry: false`` is not retried; without the header a replay retried and found no
second answer in the cassette)."""
_CLIENT_MODULES = ("httpx2", "httpx")


class WireExhausted(Exception):
    """A provider model made an HTTP request that the cassette has no answer for."""


@dataclass
class HttpExchange:
    """One HTTP request as sent, and its answer, in memory while a session runs."""

    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""
    stream: bool = False
    complete: bool = False

    def request_json(self) -> Any:
        return parse_body(self.request_body)


def parse_body(body: bytes) -> Any:
    """The body as JSON when it is JSON, else as text (never raises)."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")


def clean_url(url: str) -> str:
    """Scheme, host and path of a URL: no userinfo; the query is kept for the scrubber to screen."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


@dataclass
class WireSlot:
    """The model call in progress: where its HTTP exchanges go, and (replaying) what answers them."""

    captured: list[HttpExchange] = field(default_factory=list)
    answers: deque[HttpExchange] | None = None
    """None when recording (the real transport answers); the recorded answers when replaying."""
    label: str = ""

    @property
    def replaying(self) -> bool:
        return self.answers is not None


_SLOT: contextvars.ContextVar[WireSlot | None] = contextvars.ContextVar("replay_wire_slot", default=None)


def current_slot() -> WireSlot | None:
    """The model call whose HTTP traffic is being captured here, if any."""
    return _SLOT.get()


@contextmanager
def call_scope(slot: WireSlot) -> Iterator[WireSlot]:
    """Route the HTTP traffic of the model call made inside this block to ``slot``."""
    _PATCHER.refresh()
    token = _SLOT.set(slot)
    try:
        yield slot
    finally:
        _SLOT.reset(token)


def _headers(headers: Any, keep: frozenset[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in headers.items():
        name = key.lower() if isinstance(key, str) else bytes(key).decode("latin-1").lower()
        if name in keep:
            out[name] = value if isinstance(value, str) else bytes(value).decode("latin-1")
    return out


def _begin(request: Any) -> HttpExchange:
    try:
        body = bytes(request.content)
    except Exception:  # a streamed upload: not something a chat request does
        body = b""
    return HttpExchange(
        method=str(request.method),
        url=clean_url(str(request.url)),
        request_headers=_headers(request.headers, REQUEST_HEADERS),
        request_body=body,
    )


BROKEN = "x-harness-replay-broken"
"""A response header the recorder adds (never a provider's) when the body broke off mid-stream: the
transport error that ended it, ``RemoteProtocolError: peer closed connection…``. An exchange with
status 0 got no answer at all: its body is the transport error (``ConnectError: …``)."""


def transport_error(module: Any, text: str, request: Any) -> Exception:
    """The recorded transport error as httpx raises it: its own class when that is one of httpx's transport
    errors (a recorded name is untrusted text: anything else is a ``ConnectError``), with its message."""
    name, _, message = text.partition(": ")
    base: Any = getattr(module, "TransportError", None)
    cls: Any = getattr(module, name, None) if name.isidentifier() else None
    if not (isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)):
        cls = getattr(module, "ConnectError", None) or base or ConnectionError
    try:
        error: Exception = cls(message or text, request=request)
    except TypeError:
        error = cls(message or text)
    return error


RETRY_DELAY_HEADERS = ("retry-after", "retry-after-ms")
SERVED_RETRY_DELAY = {"retry-after-ms": "1"}
"""What an error answer the recording retried after says to wait, when served: one millisecond.

The SDKs sleep what ``retry-after`` says (or back off from 0.5 s without it) before asking again, so
a recorded 429 with ``retry-after: 4`` cost every replay 4 s, an Anthropic one with 600 ten minutes.
How long it waited is not behaviour; *whether* it asked again is, and the SDKs decide that by status,
``x-should-retry`` and (openai: above 120 s) the delay. So the delay is shortened only where the
recording shows the SDK did ask again (another answer follows in the same call); a last answer is
served as recorded, and a replaying SDK that decides differently about it still diverges."""


def _answer(module: Any, request: Any, recorded: HttpExchange, stream: bool, retried: bool = False) -> Any:
    if recorded.status == 0:  # the recording got no answer: the transport failed
        raise transport_error(module, recorded.response_body.decode("utf-8", "replace"), request)
    status, headers, body = recorded.status, dict(recorded.response_headers), recorded.response_body
    broken = headers.pop(BROKEN, None)
    if retried and status >= 400:
        headers = {k: v for k, v in headers.items() if k not in RETRY_DELAY_HEADERS} | SERVED_RETRY_DELAY
    if stream:  # read as the caller iterates, like a live stream
        source = module.ByteStream(body) if broken is None else _broken_stream(module, body, broken, request)
        return module.Response(status, headers=headers, stream=source, request=request)
    if broken is not None:
        raise transport_error(module, broken, request)
    return module.Response(status, headers=headers, content=body, request=request)


def _broken_stream(module: Any, body: bytes, error: str, request: Any) -> Any:
    """The part of a body the recording read, then the error that broke it off."""

    class Broken(module.AsyncByteStream, module.SyncByteStream):  # type: ignore[misc]
        def __iter__(self) -> Iterator[bytes]:
            if body:
                yield body
            raise transport_error(module, error, request)

        async def __aiter__(self) -> Any:
            if body:
                yield body
            raise transport_error(module, error, request)

    return Broken()


def _tee(module: Any, response: Any, ex: HttpExchange) -> None:
    """Copy a streamed body as the caller reads it; the exchange is complete when the stream closes."""
    inner = response.stream
    chunks: list[bytes] = []

    def finish() -> None:
        if not ex.complete:
            ex.response_body = b"".join(chunks)
            ex.complete = True

    def broke(exc: Exception) -> None:
        ex.response_headers[BROKEN] = f"{type(exc).__name__}: {exc}"[:2000]
        finish()

    class Tee(module.AsyncByteStream, module.SyncByteStream):  # type: ignore[misc]
        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in inner:
                    chunks.append(chunk)
                    yield chunk
            except Exception as exc:  # the connection broke off mid-answer: a replay breaks there too
                broke(exc)
                raise
            finish()

        async def __aiter__(self) -> Any:
            try:
                async for chunk in inner:
                    chunks.append(chunk)
                    yield chunk
            except Exception as exc:
                broke(exc)
                raise
            finish()

        def close(self) -> None:
            finish()
            inner.close()

        async def aclose(self) -> None:
            finish()
            await inner.aclose()

    response.stream = Tee()


def _prepare(request: Any) -> None:
    # Recorded bodies are kept decoded; asking for identity saves decoding compressed SSE by hand.
    request.headers["accept-encoding"] = "identity"


def _record_result(module: Any, ex: HttpExchange, response: Any, stream: bool) -> None:
    ex.status = int(response.status_code)
    ex.response_headers = _headers(response.headers, RESPONSE_HEADERS)
    if stream and not getattr(response, "is_stream_consumed", False) and not _has_content(response):
        ex.stream = True
        _tee(module, response, ex)
    else:
        ex.response_body = bytes(response.content)
        ex.complete = True


def _has_content(response: Any) -> bool:
    try:
        response.content  # noqa: B018 - raises ResponseNotRead until read
    except Exception:
        return False
    return True


def _serve(module: Any, slot: WireSlot, request: Any, stream: bool) -> Any:
    ex = _begin(request)
    slot.captured.append(ex)
    assert slot.answers is not None
    if not slot.answers:
        raise WireExhausted(
            f"harness-replay: {slot.label} made HTTP request #{len(slot.captured)} ({ex.method} {ex.url}), "
            "but the cassette recorded fewer for this call"
        )
    recorded = slot.answers.popleft()
    ex.status, ex.response_headers, ex.response_body = recorded.status, dict(recorded.response_headers), recorded.response_body
    ex.stream, ex.complete = recorded.stream, True
    return _answer(module, request, recorded, stream, retried=bool(slot.answers))


def _before(module: Any, request: Any, kwargs: dict[str, Any]) -> tuple[Any, HttpExchange | None]:
    """(the served answer when replaying, or the exchange to fill once the real transport answered)."""
    slot = _SLOT.get()
    if slot is None:  # not a model call of ours: the socket guard decides when replaying
        return None, None
    if slot.replaying:
        return _serve(module, slot, request, bool(kwargs.get("stream", False))), None
    _prepare(request)
    ex = _begin(request)
    slot.captured.append(ex)
    return None, ex


def _no_answer(ex: HttpExchange | None, exc: Exception) -> None:
    """The transport failed before any answer (a refused or dropped connection, a timeout): kept as status 0
    with the error for a body, so the replay raises it and the SDK retries or gives up as it did."""
    if ex is not None:
        ex.status, ex.response_body, ex.complete = 0, f"{type(exc).__name__}: {exc}"[:2000].encode(), True


def _wrap_async(module: Any, original: Any) -> Any:
    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        served, ex = _before(module, request, kwargs)
        if served is not None:
            return served
        try:
            response = await original(self, request, *args, **kwargs)
        except Exception as exc:
            _no_answer(ex, exc)
            raise
        if ex is not None:
            _record_result(module, ex, response, bool(kwargs.get("stream", False)))
        return response

    send.__replay_wrapped__ = True  # type: ignore[attr-defined]
    return send


def _wrap_sync(module: Any, original: Any) -> Any:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        served, ex = _before(module, request, kwargs)
        if served is not None:
            return served
        try:
            response = original(self, request, *args, **kwargs)
        except Exception as exc:
            _no_answer(ex, exc)
            raise
        if ex is not None:
            _record_result(module, ex, response, bool(kwargs.get("stream", False)))
        return response

    send.__replay_wrapped__ = True  # type: ignore[attr-defined]
    return send


class _Patcher:
    """Wraps ``send`` on the installed httpx clients while at least one session needs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved: list[tuple[type, str, Any]] = []
        self._modules: set[str] = set()

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._wrap_new()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for cls, name, original in reversed(self._saved):
                    setattr(cls, name, original)
                self._saved.clear()
                self._modules.clear()

    def refresh(self) -> None:
        """Wrap the clients of an httpx module imported since (a provider SDK loaded inside a scenario)."""
        if all(sys.modules.get(n) is None or n in self._modules for n in _CLIENT_MODULES):
            return
        with self._lock:
            if self._users:
                self._wrap_new()

    def _wrap_new(self) -> None:
        for name in _CLIENT_MODULES:
            module = sys.modules.get(name)
            if module is None or name in self._modules:
                continue
            self._modules.add(name)
            for cls_name, wrap in (("AsyncClient", _wrap_async), ("Client", _wrap_sync)):
                cls = getattr(module, cls_name, None)
                if not isinstance(cls, type):
                    continue
                original = cls.__dict__.get("send")
                if original is None or getattr(original, "__replay_wrapped__", False):
                    continue
                self._saved.append((cls, "send", original))
                setattr(cls, "send", wrap(module, original))  # noqa: B010


_PATCHER = _Patcher()


@contextmanager
def patched() -> Iterator[None]:
    """Wrap the httpx clients for the duration of a session (reference-counted across sessions)."""
    _PATCHER.acquire()
    try:
        yield
    finally:
        _PATCHER.release()

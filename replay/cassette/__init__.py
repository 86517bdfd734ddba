"""The cassette: what one scenario run sent to and got from every model, and how it ended.

A cassette is one msgpack map behind an 8-byte magic. Messages are stored once each in a
content-addressed table and requests refer to them by index, as ``[start, count]`` runs:
each request re-sends the whole history, so storing messages per request would grow with
the square of the conversation length, while runs of indices stay O(1) per request.
Settings and request parameters (tool definitions) are interned the same way. Format 2 adds
one thing, stream events as rows under shared key layouts (``_events``), and is written only
for a cassette that has them.
"""

import contextlib
import gc
import math
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgpack
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._untrusted import check_id, confined
from ..errors import CassetteError
from . import _events, _schema

MAGIC = b"\xc1replay\n"  # 0xc1 is never valid msgpack, so no stray file matches by accident
FORMAT_VERSION = 2
"""The newest format this version reads and writes. A cassette is written in the oldest format that
holds it: 1, unless a streamed call's events are there (2: events as rows, see ``_events``), so a
recording without streams reads with every earlier harness-replay and is written byte for byte as before."""
_STREAM_EVENTS_FORMAT = 2
SUFFIX = ".cassette"

Kind = Literal["request", "request_stream", "count_tokens", "compact_messages"]


def is_harness_module(module: str) -> bool:
    """Whether an agent was built by pydantic-ai-harness (one of its capabilities' own agents)."""
    return module.startswith("pydantic_ai_harness")


class _Model(BaseModel):
    # Unknown fields are kept (a newer tool version may add optional ones); the loader has
    # already checked that they are JSON-shaped (replay.cassette._schema).
    # Start-up cost (every `replay show` builds these classes): empty lists and dicts are plain
    # defaults, which pydantic copies for each instance, because `Field(default_factory=list)`
    # makes it read the builtin's signature through `tokenize` (a quarter of this module's
    # import); and this module has no `from __future__ import annotations`, so pydantic does
    # not compile and evaluate each field's annotation from a string.
    model_config = ConfigDict(extra="allow", strict=True, frozen=False)


class ErrorInfo(_Model):
    type: str
    message: str
    attributes: dict[str, Any] | None = None
    """The exception's own public values that are plain data (``ModelHTTPError.status_code``,
    ``body``, ``model_name``…), so a replayed error is one code can branch on: retry on a 429,
    fall back on a 503. Not compared (the replay serves the recorded error: only a cassette
    written before they were kept would differ)."""


class Header(_Model):
    format_version: int = 1
    """The format the file was written in (set on writing: see :data:`FORMAT_VERSION`)."""
    tool_version: str = ""
    scenario_id: str | None = None
    source_hash: str | None = None
    mode: Literal["record", "replay"] = "record"
    harness_version: str | None = None
    slim_version: str | None = None
    pydantic_version: str | None = None
    python_version: str = ""
    platform: str = ""
    created_at: str = ""
    roles: dict[str, str] = {}
    """Role → where its agent was built (module), so a renamed inner agent is explainable."""
    schema_defaults: dict[str, Any] | None = None
    """Declared defaults of the recording version's message/part/parameter classes
    (``replay.normaliser._schema``): a field at its default equals the field missing. None in
    cassettes recorded before this existed; the normaliser then uses the installed version's."""
    sdk_versions: dict[str, str] = {}
    """The provider SDKs and HTTP clients loaded when a cassette with HTTP exchanges was recorded, by distribution
    (``{"openai": "3.60.0", "httpx2": "2.16.2"}``): they build the request the provider is sent, so a wire
    difference between two environments of one harness may be theirs. Empty for in-process models (not written)."""
    paths: dict[str, list[str]] = {}
    """The environment's folders where this was recorded, each as given and resolved: ``tempdir``
    (``tempfile.gettempdir()``, ``$TMPDIR``), ``project`` (the folder of the pyproject.toml the run read, else the
    working directory), ``prefix`` (``sys.prefix``, the environment's packages) and ``home``. A path a tool quotes
    below one (a workspace's ``../outside.txt`` refused as ``/tmp/outside.txt``, a traceback's ``File "/repo/…"``)
    names another folder in another environment; the normaliser reads each as ``<tempdir>``, ``<project>``…
    Empty in cassettes recorded before this existed (then not written)."""


class WireRecord(_Model):
    """One HTTP exchange a provider model made for a model call: what went on the wire, and the raw answer.

    The JSON body is interned like messages are: its top-level lists (``messages``, ``input``,
    ``tools``…) element by element in the blob table, the rest as one blob, so a conversation
    that re-sends its whole history on every request still grows linearly on disk.
    """

    method: str
    url: str
    request_headers: dict[str, str] = {}
    body: int | None = None
    """Blob: the JSON object body without its top-level lists."""
    body_lists: dict[str, list[int]] = {}
    """Top-level list fields of the body, as blob indices of their elements."""
    body_text: str | None = None
    """A body that is not a JSON object, as text."""
    status: int = 0
    response_headers: dict[str, str] = {}
    response: str = ""
    """The raw answer: JSON text, or the SSE event stream as sent."""
    stream: bool = False


class Exchange(_Model):
    """One outgoing model call and what came back."""

    seq: int
    role: str
    index: int
    """Ordinal of this call within its role: replay serves responses per role in this order (by
    conversation where the role's runs interleave: ``replay._conversations``)."""
    kind: Kind
    model_name: str | None = None
    model_system: str | None = None
    messages: list[int] = []
    """Indices into :attr:`Cassette.messages`, expanded from ``[start, count]`` runs on disk."""
    settings: int | None = None
    parameters: int | None = None
    instructions: str | None = None
    response: int | None = None
    """Index of the response message (a ModelResponse) in the message table."""
    usage: dict[str, Any] | None = None
    """count_tokens result."""
    events: list[dict[str, Any]] | None = None
    """Stream events as the model produced them (request_stream only)."""
    error: ErrorInfo | None = None
    estimate: int | None = None
    """Token estimate of the messages sent, by the recording version's harness (see README)."""
    run: int | None = None
    """Index into :attr:`Cassette.runs` of the agent run that made this call."""
    done: int | None = None
    """Order in which this call's answer arrived, across all roles."""
    carried_over: bool | None = None
    """Set by ``replay run --accept`` on a provider recording: the request changed since the call
    was really made, and this answer is the one recorded for the old request (not an answer the
    provider gave to this request). None (left out on disk) for a real answer."""
    after: int | None = None
    """How many calls had been made when this answer arrived. With :attr:`done`, replay hands
    out answers at the same point, so a background capability's verdict lands between the same
    main requests as when recorded."""
    wire: list[WireRecord] | None = None
    """The HTTP exchanges of this call, for provider models (see ``replay.wire``)."""


class AgentRunRecord(_Model):
    """One run of an agent: what it started with and what it ended with."""

    role: str
    prompt: Any = None
    history: list[int] = []
    result: list[int] = []
    output: Any = None
    error: ErrorInfo | None = None
    estimate: int | None = None
    """Token estimate of the starting history plus the prompt: what a compaction replaces."""
    parent: int | None = None
    """The run this one was started inside (a capability's run: the agent run it serves), if any.
    Tells concurrent conversations' summarizer calls apart (``replay._conversations``); left out
    on disk when None."""


class Outcome(_Model):
    status: Literal["ok", "error"] = "ok"
    output: Any = None
    error: ErrorInfo | None = None


class ObservationRecord(_Model):
    name: str
    value: Any = None


class HistoryRecord(_Model):
    """A message history the scenario handed to the checks without sending it to a model.

    ``run.observe_messages`` stores one so every invariant runs on it as on a sent request;
    ``run.judge`` stores one with a library predicate's verdict about it, which ``replay
    check`` compares with the tool's own rules. Messages live in the cassette's message
    table like a request's (``[start, count]`` runs on disk), so a history costs a few
    integers on top of messages the cassette usually holds already.
    """

    name: str
    messages: list[int] = []
    source: list[int] = []
    """The history it was derived from (e.g. what a direct ``compact()`` call got), if given."""
    after: int = 0
    """How many model calls had been made when it was observed: where it sits among the exchanges."""
    predicate: str | None = None
    """The predicate that judged it (``run.judge``); None for a plain observed history."""
    verdict: Any = None


class Cassette(_Model):
    header: Header = Field(default_factory=Header)
    messages: list[dict[str, Any]] = []
    blobs: list[Any] = []
    exchanges: list[Exchange] = []
    runs: list[AgentRunRecord] = []
    outcome: Outcome = Field(default_factory=Outcome)
    observations: list[ObservationRecord] = []
    expectations: dict[str, Any] = {}
    histories: list[HistoryRecord] = []

    def __repr__(self) -> str:
        """A summary: asyncio puts a finished task's result in the task's repr, and restoring the
        SIGINT handler at the end of ``asyncio.run`` formats that repr twice, so a repr of every
        message cost each recording and replay 3 % of its time (and it was megabytes long)."""
        return (
            f"Cassette(scenario_id={self.header.scenario_id!r}, {len(self.exchanges)} requests, "
            f"{len(self.messages)} messages, outcome={self.outcome.status!r})"
        )

    def blob(self, index: int | None) -> Any:
        return None if index is None else self.blobs[index]

    def expand(self, indices: Iterable[int]) -> list[dict[str, Any]]:
        table = self.messages
        return [table[i] for i in indices]

    def user_roles(self) -> set[str]:
        """Roles of the agents the scenario built, as opposed to harness capabilities' own agents."""
        roles = {r for r, module in self.header.roles.items() if not is_harness_module(module) and r != "direct"}
        return roles or {"main"}

    def by_role(self) -> dict[str, list[Exchange]]:
        roles: dict[str, list[Exchange]] = {}
        for ex in self.exchanges:
            roles.setdefault(ex.role, []).append(ex)
        return roles


# --------------------------------------------------------------------------- building


_RUN_STAMPS = ("run_id", "conversation_id")


def _digest(value: Any) -> bytes:
    """The interning key of a value: its msgpack bytes themselves.

    Equal bytes are equal content, as with a digest of them, but a dict hashes the bytes in C
    for less than building a blake2b object per message and blob (≈ 15 M of a 60-turn
    recording's 270 M capture overhead); the price is holding each distinct value's bytes
    while recording, at most the size of the cassette being built."""
    packed: bytes = msgpack.packb(value, use_bin_type=True, default=encode_big_int)
    return packed


class CassetteBuilder:
    """Interns messages and blobs while a run is captured, so identical ones are stored once."""

    def __init__(self, header: Header | None = None) -> None:
        self.cassette = Cassette(header=header or Header())
        self._message_ids: dict[bytes, int] = {}
        self._blob_ids: dict[bytes, int] = {}

    def message(self, message: dict[str, Any]) -> int:
        # pydantic-ai stamps run_id / conversation_id onto a response after the model returned
        # it; without this the response and its later copy in the history would be two
        # entries, breaking every request's index runs into pairs (quadratic size again).
        key = _digest({k: v for k, v in message.items() if k not in _RUN_STAMPS})
        found = self._message_ids.get(key)
        if found is None:
            found = self._message_ids[key] = len(self.cassette.messages)
            self.cassette.messages.append(message)
        return found

    def messages(self, messages: Iterable[dict[str, Any]]) -> list[int]:
        return [self.message(m) for m in messages]

    def blob(self, value: Any) -> int | None:
        if value is None:
            return None
        key = _digest(value)
        found = self._blob_ids.get(key)
        if found is None:
            found = self._blob_ids[key] = len(self.cassette.blobs)
            self.cassette.blobs.append(value)
        return found


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class Limits:
    """Bounds on what the loader accepts, so a hostile file costs bounded time and memory."""

    max_bytes: int = 64 * 1024 * 1024
    """Largest file accepted; decoded size can reach ~70x the file for hostile input, so keep it modest."""
    max_items: int = 1_000_000
    """Largest array or map inside the file."""
    max_string: int = 64 * 1024 * 1024
    max_depth: int = 200
    """Deepest nesting of a message or value (msgpack itself stops at 1024)."""
    max_references: int = 5_000_000
    """Message references after expanding all ``[start, count]`` runs: a run is two integers
    on disk, so without this a 1 MB file can declare billions of references (quadratic blow-up)."""
    max_expanded: int = 2 * 1024 * 1024 * 1024
    """Characters of message text (plus one per value) once every request's references are
    expanded: what a naive walk of each request's messages would cost. The stages work on the
    table and digests, so a file at this ceiling and at ``max_references`` (1 MB, 5 M
    references) costs check 1.6 s, diff 2.4 s, show 2.0 s of CPU and 512 MB; a real
    10,000-request recording of bench/_scenario.py expands to 419 M."""


DEFAULT_LIMITS = Limits()


# --------------------------------------------------------------------------- encoding


def _runs(indices: list[int]) -> list[int]:
    """Encode indices as flat ``[start, count, start, count, ...]`` runs of consecutive ids."""
    out: list[int] = []
    if not indices:
        return out
    start = prev = indices[0]
    for i in indices[1:]:
        if i == prev + 1:
            prev = i
            continue
        out += (start, prev - start + 1)
        start = prev = i
    out += (start, prev - start + 1)
    return out


def _unruns(runs: Any, table_size: int, limit: int) -> list[int]:
    """Expand runs into indices, refusing to produce more than ``limit`` of them."""
    if not isinstance(runs, list) or len(runs) % 2:
        raise ValueError("message references must be a flat list of [start, count] pairs")
    out: list[int] = []
    for k in range(0, len(runs), 2):
        start, count = runs[k], runs[k + 1]
        if type(start) is not int or type(count) is not int or start < 0 or count < 1:
            raise ValueError(f"bad message reference run {start!r}, {count!r}")
        if start + count > table_size:
            raise ValueError(f"message reference {start + count - 1} outside the table of {table_size}")
        if count > limit - len(out):
            raise ValueError("too many message references once expanded (over Limits.max_references)")
        out.extend(range(start, start + count))
    return out


def _text_of(message: Any) -> str | None:
    """The text parts of a stored message, joined: what a text-output agent run returns."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return None
    texts: list[str] = []
    for p in parts:
        if isinstance(p, dict) and p.get("part_kind") == "text":
            content = p.get("content")
            if not isinstance(content, str):
                return None
            texts.append(content)
    return "".join(texts) if texts else None


def _last_prompt(messages: list[dict[str, Any]], indices: list[int]) -> tuple[int, int] | None:
    """(message, part) of the last user prompt among ``indices``: where a run's own prompt sits."""
    for i in reversed(indices):
        parts = messages[i].get("parts")
        if messages[i].get("kind") != "request" or not isinstance(parts, list):
            continue
        for k in range(len(parts) - 1, -1, -1):
            if isinstance(parts[k], dict) and parts[k].get("part_kind") == "user-prompt":
                return i, k
    return None


def _share_run_texts(data: dict[str, Any]) -> None:
    """Store a run's prompt and text output as references to the message that already holds them.

    A scenario's agent run returns the text of its last response and starts from its prompt,
    both already in the message table; stored again they were ~15% of a long conversation's
    cassette. ``output_text_of`` names the message whose text parts, joined, are the output;
    ``prompt_in`` the ``[message, part]`` whose content is the prompt. Only exact matches are
    shared: anything else is stored as it is.
    """
    messages = data["messages"]
    last_response: dict[int, int] = {}
    for ex in data["exchanges"]:
        if ex.get("run") is not None and ex.get("response") is not None:
            last_response[ex["run"]] = ex["response"]
    for slot, run in enumerate(data["runs"]):
        output = run.get("output")
        source = run["result"][-1] if run["result"] else last_response.get(slot)
        if isinstance(output, str) and source is not None and _text_of(messages[source]) == output:
            run["output_text_of"] = source
            del run["output"]
        prompt = run.get("prompt")
        if isinstance(prompt, str) and run["result"]:
            where = _last_prompt(messages, run["result"])
            if where is not None and messages[where[0]]["parts"][where[1]].get("content") == prompt:
                run["prompt_in"] = list(where)
                del run["prompt"]


def _unshare_run_texts(raw: dict[str, Any]) -> None:
    """Undo :func:`_share_run_texts` on load; a reference into the table yields that very string
    (no copy), so a file cannot multiply its size by referring to one text many times."""
    messages = raw.get("messages") or []
    texts: dict[int, str] = {}
    for run in raw.get("runs") or ():
        if not isinstance(run, dict):
            continue
        if "output_text_of" in run:
            ref = run.pop("output_text_of")
            if "output" in run or type(ref) is not int or not 0 <= ref < len(messages):
                raise ValueError(f"run output reference {ref!r} outside the message table (or beside an output)")
            if ref not in texts:
                text = _text_of(messages[ref])
                if text is None:
                    raise ValueError(f"run output reference {ref}: that message has no text parts")
                texts[ref] = text
            run["output"] = texts[ref]
        if "prompt_in" in run:
            ref = run.pop("prompt_in")
            ok = "prompt" not in run and isinstance(ref, list) and len(ref) == 2 and all(type(i) is int for i in ref)
            parts = messages[ref[0]].get("parts") if ok and 0 <= ref[0] < len(messages) and isinstance(messages[ref[0]], dict) else None
            part = parts[ref[1]] if isinstance(parts, list) and 0 <= ref[1] < len(parts) else None
            content = part.get("content") if isinstance(part, dict) else None
            if not isinstance(content, str):
                raise ValueError(f"run prompt reference {ref!r} does not name a text part of the message table")
            run["prompt"] = content


def _bare_error(record: dict[str, Any]) -> None:
    error = record.get("error")
    if isinstance(error, dict) and error.get("attributes") is None:
        error.pop("attributes", None)  # an error without values of its own is written exactly as before


def to_wire(cassette: Cassette, *, share_messages: bool = False) -> dict[str, Any]:
    """The cassette as the plain data written to disk.

    ``share_messages``: the message table goes in as the very list of dicts the cassette holds
    instead of a deep copy (``model_dump`` copies every map of every message, a third of a long
    recording's save); the caller must only read the result. The table is JSON data already
    (dumped in ``json`` mode, or read from a file), which a copy would give back unchanged; a
    value that is not (a dataclass somebody put there) makes msgpack refuse it, and ``dumps``
    then writes the copy, as before."""
    if share_messages:
        rest = cassette.model_dump(mode="python", exclude_none=False, exclude={"messages"})
        data = {"header": rest.pop("header"), "messages": cassette.messages, **rest}
    else:
        data = cassette.model_dump(mode="python", exclude_none=False)
    _share_run_texts(data)
    version = 1
    for ex in data["exchanges"]:
        ex["messages"] = _runs(ex["messages"])
        if ex.get("events") is not None:
            packed = _events.pack(ex["events"])
            if packed is not ex["events"]:
                ex["events"] = packed
                version = _STREAM_EVENTS_FORMAT
        if ex.get("carried_over") is None:
            ex.pop("carried_over", None)  # only accepted cassettes carry the key
        _bare_error(ex)
    _bare_error(data["outcome"])
    for run in data["runs"]:
        run["history"] = _runs(run["history"])
        run["result"] = _runs(run["result"])
        _bare_error(run)
        if run.get("parent") is None:
            run.pop("parent", None)  # a cassette without nested runs is written exactly as before
    if data["histories"]:
        for history in data["histories"]:
            history["messages"] = _runs(history["messages"])
            history["source"] = _runs(history["source"])
    else:  # a cassette without histories is written exactly as before they existed
        del data["histories"]
    data["header"]["format_version"] = version
    for key in ("paths", "sdk_versions"):
        if not data["header"].get(key):
            data["header"].pop(key, None)  # a cassette without it (in-process, by hand) is written exactly as before
    return {"format": "harness-replay", "version": version, **data}


def dumps(cassette: Cassette) -> bytes:
    try:
        try:
            packed: bytes = msgpack.packb(to_wire(cassette, share_messages=True), use_bin_type=True, default=encode_big_int)
        except TypeError:  # an object in the table that only the copy turns into data (see to_wire)
            packed = msgpack.packb(to_wire(cassette), use_bin_type=True, default=encode_big_int)
        return MAGIC + packed
    except (TypeError, ValueError) as exc:
        raise CassetteError(cassette.header.scenario_id or "<cassette>", f"cannot encode: {exc}") from exc


BIG_INT = 0
"""The one msgpack extension type a cassette holds: an integer outside msgpack's 64 bits, as its
decimal digits. JSON has no integer bound (a tool argument, a tool's return, a structured output
can be 2**70); msgpack stops at 64 bits and, without this, the recorder failed inside the
agent's run and the scenario was reported as having raised the OverflowError itself."""
MAX_BIG_INT_DIGITS = 4300
"""Python's own bound on converting between ``int`` and decimal text (``sys.int_info.default_max_str_digits``)."""
_INT_RANGE = (-(2**63), 2**64 - 1)
_TOO_BIG = 10**MAX_BIG_INT_DIGITS


def encode_big_int(value: Any) -> msgpack.ExtType:
    """``default`` of every packer: msgpack calls it for an int it cannot hold (and any other type it cannot)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -_TOO_BIG < value < _TOO_BIG:
            above = abs(value) // _TOO_BIG  # its own decimal text is past Python's conversion bound from 8,601 digits
            count = f"{len(str(above)) + MAX_BIG_INT_DIGITS}" if above < _TOO_BIG else f"about {int(math.log10(above)) + 1 + MAX_BIG_INT_DIGITS}"
            raise ValueError(f"an integer of {count} digits is over the {MAX_BIG_INT_DIGITS} a cassette holds")
        digits = int.__repr__(value)  # an IntEnum's value, not its name
        return msgpack.ExtType(BIG_INT, digits.encode("ascii"))
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def _ext(code: int, data: bytes) -> Any:
    """Decode a big integer, strictly (one encoding per value); refuse every other extension type."""
    if code != BIG_INT:
        raise ValueError(f"msgpack extension type {code} is not allowed in a cassette")
    digits = data[1:] if data[:1] == b"-" else data
    if not digits.isdigit() or not digits.isascii() or digits[:1] == b"0" or len(digits) > MAX_BIG_INT_DIGITS:
        raise ValueError(f"msgpack extension type {BIG_INT} (a big integer) holds {len(data)} bytes that are not one")
    value = int(data)
    if _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise ValueError(f"msgpack extension type {BIG_INT} (a big integer) holds {value}, which msgpack holds itself")
    return value


_PROMOTE_AFTER = 50_000
"""Young objects (``gc.get_count()[0]``) past which :func:`paused_gc` collects the young generations on its way out."""


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while a stage builds its (acyclic) tables.

    Decoding or normalising allocates a dict per message and part; each allocation burst triggers
    collections that traverse every object alive, the loaded cassettes included (millions at
    10,000 requests): that doubled normalise and diff time, and made loading 4x the data cost
    6-7x the time. Nothing built here has cycles, so pausing loses nothing.

    Filing what a stage built as old on the way out (``gc.freeze`` then ``gc.unfreeze``) was tried
    and taken back: it spared the 0.1-0.2 s collections after each stage of a 10,000-request diff,
    but filed the stage's garbage cycles with it (a hostile cassette's errors) uncounted, so no full
    collection came for them: a process running 6,000 hostile commands grew 126 -> 234 MB.

    What a large stage left young (over ``_PROMOTE_AFTER`` objects) is collected on the way out
    instead, both young generations at once (``gc.collect(1)``): the first allocation after the
    pause walks it in a generation-0 collection anyway, and re-enabling alone left the survivors
    in generation 1, where the next collection of it walked them again, with the stages after
    (the checks' own ``gc.collect(1)``: 0.5 s at 10,000 requests, for the loaded cassettes and the
    normalised tables). Collected, the stage's garbage cycles go at once; the rest moves to the
    oldest generation counted, as any collection files it, so full collections come as they would.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            if gc.get_count()[0] > _PROMOTE_AFTER:
                gc.collect(1)


def loads(data: bytes, source: object = "<bytes>", limits: Limits = DEFAULT_LIMITS) -> Cassette:
    """Parse cassette bytes; every problem becomes one :class:`CassetteError`.

    The cyclic garbage collector is paused meanwhile (:func:`paused_gc`): decoding and
    validating plain data make no reference cycles.
    """
    with paused_gc():
        return _loads(data, source, limits)


def _unpack_events(raw: dict[str, Any], limits: Limits) -> None:
    """Format 2's stream events (rows under shared layouts) back into the maps format 1 holds."""
    exchanges = raw.get("exchanges")
    if type(exchanges) is not list:
        return  # the schema names the problem
    for i, ex in enumerate(exchanges):
        if type(ex) is dict and type(ex.get("events")) is dict:
            ex["events"] = _events.unpack(ex["events"], f"exchanges[{i}].events", limits.max_depth)


def _foreign(data: bytes) -> str | None:
    """Why bytes that do not start with the magic are no cassette (None when they do)."""
    if data.startswith(MAGIC):
        return None
    if data.startswith(b"<<<<<<< "):  # a merge that wrote both sides as text: no cassette loads either
        return "git merge conflict markers, not a cassette: take one side (git checkout --ours/--theirs) or record the scenario again"
    if data.startswith(b"version https://git-lfs."):
        return "a Git LFS pointer, not the cassette (run git lfs pull)"
    return "not a harness-replay cassette (wrong magic bytes)"


def head_problem(path: Path) -> str | None:
    """What makes the file at ``path`` no cassette at a glance (its kind, its first bytes), or None.

    For ``record`` without ``--force``: a cassette there is kept, but one that cannot be a cassette
    (a merge's conflict markers, an LFS pointer, an empty file) was skipped as if it were one."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            return "is a directory, not a cassette"
        if not stat.S_ISREG(st.st_mode):
            return f"is {_file_kind(st.st_mode)}, not a regular file"
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 64)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if not head:
        return "empty file, not a cassette"
    return _foreign(head)


_OVER_LIMIT = re.compile(r"(\d+) exceeds max_(str|bin|array|map)_len\((\d+)\)")
"""msgpack's refusal of a length past :class:`Limits` (``max_items``, ``max_string``)."""
_MSGPACK_LIMITS = {
    "str": ("a string", "bytes", "max-string"),
    "bin": ("a binary value", "bytes", "max-string"),
    "array": ("an array", "items", "max-items"),
    "map": ("a map", "entries", "max-items"),
}


def _loads(data: bytes, source: object, limits: Limits) -> Cassette:
    if not data:
        raise CassetteError(source, "empty file, not a cassette")
    if len(data) > limits.max_bytes:
        raise CassetteError(source, f"file is {len(data)} bytes, over the {limits.max_bytes}-byte limit")
    foreign = _foreign(data)
    if foreign is not None:
        raise CassetteError(source, foreign)
    try:
        raw = msgpack.unpackb(
            data[len(MAGIC) :],
            raw=False,
            strict_map_key=True,
            ext_hook=_ext,
            max_str_len=limits.max_string,
            max_bin_len=limits.max_string,
            max_array_len=limits.max_items,
            max_map_len=limits.max_items,
            max_ext_len=MAX_BIG_INT_DIGITS + 2,  # a sign and one digit too many still reach _ext, which names the problem
            use_list=True,
        )
    except msgpack.ExtraData:
        raise CassetteError(source, "trailing bytes after the cassette (corrupted)") from None
    except (ValueError, msgpack.UnpackException, TypeError, OverflowError) as exc:
        problem = str(exc) or type(exc).__name__
        if len(exc.args) > 1 and isinstance(exc.args[0], str) and "%s" in exc.args[0]:
            try:  # msgpack 1.0 raises ValueError("%s exceeds max_map_len(%s)", 10, 5), its arguments unformatted
                problem = exc.args[0] % exc.args[1:]
            except (TypeError, ValueError):
                pass
        over = _OVER_LIMIT.fullmatch(problem)
        if over is not None:  # a configured limit, not damage: "corrupted: 10 exceeds max_map_len(5)" named neither
            size, kind, limit = int(over[1]), _MSGPACK_LIMITS[over[2]], int(over[3])
            raise CassetteError(source, f"{kind[0]} of {size:,} {kind[1]}, over the {kind[2]} limit ({limit:,})") from None
        if "incomplete" in problem.lower() or isinstance(exc, msgpack.OutOfData):
            problem = "truncated"
        raise CassetteError(source, f"corrupted cassette: {problem}") from None
    except RecursionError:
        raise CassetteError(source, "corrupted cassette: nesting too deep") from None
    if not isinstance(raw, dict) or raw.get("format") != "harness-replay":
        raise CassetteError(source, "not a harness-replay cassette (no format marker)")
    version = raw.pop("version", None)
    raw.pop("format")
    if type(version) is not int:
        raise CassetteError(source, "corrupted cassette: format version missing")
    if version > FORMAT_VERSION:
        raise CassetteError(
            source, f"written in cassette format {version}; this harness-replay reads format {FORMAT_VERSION} (upgrade it)"
        )
    if version < 1:
        raise CassetteError(source, f"unknown cassette format {version}")
    try:
        if version >= _STREAM_EVENTS_FORMAT:
            _unpack_events(raw, limits)
        _schema.validate(raw, limits)
        table = len(raw.get("messages") or ())
        budget = limits.max_references
        for ex in raw.get("exchanges") or ():
            if isinstance(ex, dict):
                ex["messages"] = _unruns(ex.get("messages", []), table, budget)
                budget -= len(ex["messages"])
        for run in raw.get("runs") or ():
            if isinstance(run, dict):
                for key in ("history", "result"):
                    run[key] = _unruns(run.get(key, []), table, budget)
                    budget -= len(run[key])
        for history in raw.get("histories") or ():
            if isinstance(history, dict):
                for key in ("messages", "source"):
                    history[key] = _unruns(history.get(key, []), table, budget)
                    budget -= len(history[key])
        _unshare_run_texts(raw)
        # The schema has checked each message (a map of text keys to JSON values: all that
        # `list[dict[str, Any]]` asks); pydantic would copy every message map again (a third of
        # its time here), so the table joins the validated cassette as it is.
        messages = raw.get("messages")
        if type(messages) is list:
            raw["messages"] = []
        cassette = Cassette.model_validate(raw)
        if type(messages) is list:
            cassette.messages.extend(messages)
        return cassette
    except _schema.SchemaError as exc:
        raise CassetteError(source, f"invalid cassette: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CassetteError(source, f"invalid cassette: {where}: {first['msg']}") from None
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise CassetteError(source, f"invalid cassette: {exc}") from None


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or one :class:`CassetteError`.

    A committed symlink to ``/dev/zero`` would be read forever and a FIFO would block, so
    the file is checked before opening (a device open can have side effects), opened
    non-blocking, checked again on the descriptor (it may have been swapped in between)
    and read with a bound (it may grow while read).
    """
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise CassetteError(path, "is a directory, not a cassette")
        if not stat.S_ISREG(st.st_mode):
            raise CassetteError(path, f"is {_file_kind(st.st_mode)}, not a regular file: refused")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise CassetteError(path, "no such cassette") from None
    except OSError as exc:
        raise CassetteError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CassetteError(path, f"is {_file_kind(st.st_mode)}, not a regular file: refused")
        if st.st_size > limit:
            raise CassetteError(path, f"file is {st.st_size} bytes, over the {limit}-byte limit")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise CassetteError(path, f"file is over the {limit}-byte limit (it grew while read)")
        return b"".join(chunks)
    except OSError as exc:
        raise CassetteError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def load(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> Cassette:
    p = Path(path)
    return loads(read_bounded(p, limits.max_bytes), p, limits)


def save(cassette: Cassette, path: str | os.PathLike[str]) -> Path:
    """Write atomically: a crash leaves either the old cassette or the new one, never a torn file."""
    data = dumps(cassette)
    return write_atomic(Path(path), data)


RAISE_LIMIT = "raise that limit in [tool.replay] (max-depth, max-expanded, ...) to keep it"
"""What a baseline the loader would refuse is told: the writers and ``run --accept`` say it alike."""


def encode_readable(cassette: Cassette, path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> tuple[bytes, Cassette]:
    """A baseline's bytes, and the cassette as read back from them, refusing what the loader would refuse.

    A recording can hold what every later command refuses to load (a tool's result nested past
    ``max-depth``, a long conversation past ``max-expanded``): written, it was a baseline no
    ``run`` could read. Reading it back: 42 ms of a 200-turn recording's 2.6 s."""
    data = dumps(cassette)
    try:
        again = loads(data, path, limits)
    except CassetteError as exc:
        raise CassetteError(path, f"the loader would refuse this recording ({exc.problem}); {RAISE_LIMIT}") from None
    return data, again


def save_readable(cassette: Cassette, path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> Path:
    """:func:`save` of a baseline: what the loader would refuse is not written (:func:`encode_readable`)."""
    data, _ = encode_readable(cassette, path, limits)
    return write_atomic(Path(path), data)


def _umask() -> int:
    """The process umask (only readable by setting it; put straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same folder; an unwritable
    place is one :class:`CassetteError` naming it, with no temp file left behind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The writer's pid is in the name, so clean_stale_temps can tell a live write from a dead one.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise CassetteError(path, f"cannot write: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a cassette is a project file like any other
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise CassetteError(path, f"cannot write: {exc.strerror or exc}") from None
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return path


def _writer_alive(tmp: Path) -> bool:
    """Whether the process that is writing ``tmp`` still runs: its temp file is not stale.

    Another ``replay record`` writing into the same directory must keep its temp file,
    or its ``os.replace`` fails and the cassette it recorded is lost.
    """
    parts = tmp.name[: -len(".tmp")].rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False  # not one of ours (or an older naming): nobody will finish it
    pid = int(parts[1])
    if pid == os.getpid():
        return True
    if os.name != "posix":  # no signal-0 probe: trust recent files to a live writer
        try:
            return time.time() - tmp.stat().st_mtime < 600
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, owned by someone else
        return True
    return True


def clean_stale_temps(directory: Path) -> int:
    """Remove temp files a killed writer left behind (not those of live writers); returns how many."""
    removed = 0
    for tmp in directory.rglob(f".*{SUFFIX}.*.tmp"):
        if _writer_alive(tmp):
            continue
        try:
            tmp.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def iter_cassettes(directory: Path) -> Iterator[Path]:
    yield from sorted(directory.rglob(f"*{SUFFIX}"))


def cassette_path(directory: Path, scenario_id: str) -> Path:
    """Where a scenario's cassette lives under ``directory``: every read and write goes through
    here, so an id like ``../../x`` or ``/etc/x`` (from a scenario or a header) is refused
    (:class:`ReplayUsageError`) and so is a path that resolves outside ``directory``."""
    check_id(scenario_id)
    return confined(directory, f"{scenario_id}{SUFFIX}")

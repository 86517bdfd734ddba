"""Turn a cassette into the form two versions can be compared in.

Removes what changes on every run (timestamps, run and conversation ids, generated
tool-call ids, harness ``*created_at`` metadata, provider response ids), what the model is
never sent (``_unsent``: metadata, which capability contributed a tool) and what only
changes by schema growth: a field equal to an empty default (None, ``[]``, ``0``...) or to
the default its class declares in the version that wrote the cassette (see ``_schema``)
compares equal to the field missing. Generated ids are aliased to ordinals rather than
dropped, so a tool call and its return still have to pair up.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import re
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .._conversations import in_conversations, interleaved_roles, turns_of
from .._untrusted import finite
from ..cassette import Cassette, Exchange, encode_big_int, paused_gc
from ..scenario import stable_name, stable_names_in
from ..scrub import PLACEHOLDER_RE
from ._schema import EMPTY, Choice, Schema, compile_schema, installed_schema, merge
from ._unsent import as_auto, kept_modes, sent_message, sent_parameters, sent_part

VOLATILE_KEYS = frozenset(
    {
        "timestamp",
        "run_id",
        "conversation_id",
        "provider_response_id",
        "provider_details",
        "provider_url",
        "history_digest",
        "duration",
        "created_at",
        "model_id",
    }
)
"""Keys dropped wherever they occur."""

_MEASURED = re.compile(r"(?:duration|elapsed|latency)(?:_(?:s|ms|us|ns|secs?|seconds|millis|milliseconds))?")
"""A key naming a span of time the run measured (``duration``, SubAgents' ``duration_seconds`` on its
``delegation_end`` event, code mode's ``elapsed_ms``): a clock reading, different on every run. In
pydantic-ai's own values only (a stream event observed whole is one); a tool argument or a returned
mapping named so is the user's and kept. Not a limit named after one (``max_duration_secs``)."""


def measured(key: str) -> bool:
    """Whether ``key`` names a measured span of time (see ``_MEASURED``)."""
    return _MEASURED.fullmatch(key) is not None

_GENERATED_ID = re.compile(
    r"^(pyd_ai_[0-9a-f]{8,}|call_[A-Za-z0-9]{8,}|toolu_[A-Za-z0-9]{8,}|fc_[0-9a-f]{8,}|(msg|rs|resp)_[0-9a-f]{16,})$"
)
"""Ids a model or pydantic-ai makes fresh on every call: tool calls', and the Responses API's output items
(``msg_…``, ``fc_…``, ``rs_…``: a part's ``id``, sent back in the next request), as the wire compares them
(``replay.wire.compare._WIRE_ID``): OpenAI's ``call_`` ids have 24 characters, Ollama's 8."""
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_UUID_MIDDLE = re.compile(r"-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-")
"""What every uuid contains; a search that starts with a literal skips through long texts ~70x
faster than ``_UUID``, which tries its leading word boundary and 8 hex digits at every position."""
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{4,16}(?=>)")
"""Where a Python object lives in memory, as its default repr quotes it (``<app.Widget object at 0x7f3a…>``,
``<function f at 0x…>``): a tool returning ``repr(error)`` to the model, or an error the scenario raised,
named another address in every process, and a replay on the recording's own version read ``changed``.
Replaced by one placeholder, not aliased: an address is reused for another object at any time."""
_ADDRESS_MARK = " at 0x"


_TEMP_NAME = re.compile(r"(?<=[/\\])tmp[a-z0-9_]{8}(?![A-Za-z0-9_])")
"""A name ``tempfile`` made up (``mkdtemp``, ``TemporaryDirectory``, ``NamedTemporaryFile``: ``tmp`` and eight
random letters, digits or ``_``) as a path component: a tool quoting the temporary folder it works in
("No such file: /tmp/tmpwajeavgh/notes.txt") named another folder in every run. Aliased to ordinals
(``<tmp#1>``), as uuids are, so one folder quoted twice is still one folder."""
_TEMP_MARK = "tmp"
_PROCESS_ID = re.compile(r"(?<=PID: )\d+\b|(?<=kill -- -)\d+\b|(?<=\"pid\": )\d+\b")
"""A process id as the harness's ``Shell`` tool hands it to the model (``PID: 30177 (supervisor; use `kill --
-30177` to stop …)``, ``{"pid": 30177, "exit_code": 0}`` in the job's status): new in every run, so a coding
agent that ran one command was ``changed`` on every replay. Aliased to ordinals (``<pid#1>``), so one process
quoted three times is still one process."""
_PID_MARKS = ("PID: ", '"pid": ')


def has_process_id(text: str) -> bool:
    return any(mark in text for mark in _PID_MARKS)


_MODULE_MARK = "replay_scenarios."
"""A scenario file's module named in text (a default repr of the scenario's own class): its hash is dropped."""


_PYDANTIC_DOCS = re.compile(r"(?<=https://errors\.pydantic\.dev/)\d+\.\d+(?=/)")
"""The installed pydantic's minor in the link its errors end with ("For further information visit
https://errors.pydantic.dev/2.14/v/int_parsing"): a tool returning ``str(validation_error)`` to the model sent
``2.13`` under pydantic 2.13 and ``2.14`` under 2.14, and one behaviour on one harness read ``changed``."""
_PYDANTIC_DOCS_MARK = "errors.pydantic.dev/"


def without_pydantic_versions(text: str) -> str:
    """``text`` with the pydantic version in its error links left out (see ``_PYDANTIC_DOCS``)."""
    return _PYDANTIC_DOCS.sub("<version>", text) if _PYDANTIC_DOCS_MARK in text else text


_CARETS = re.compile(r"^[ \t]*[~^]*\^[~^]*[ \t]*(?:\n|\Z)", re.M)
"""A line of a Python traceback that only points at a span of the line above (``           ^^^^^^^^^``): 3.11 draws
one under a call that is the whole line, 3.13 leaves it out, so one tool returning ``traceback.format_exc()`` sent
another text under each Python. Left out; the lines it points into are still compared. A line of ``~`` alone is
kept: Python's marks always hold a ``^`` (``~~~~^^^^~~``), a Markdown fence (``~~~``) in a text quoting a traceback does not."""
_TRACEBACK_MARK = 'File "'


def without_carets(text: str) -> str:
    """``text`` without the position lines of a Python traceback it holds (see ``_CARETS``)."""
    return _CARETS.sub("", text) if _TRACEBACK_MARK in text and "^" in text else text


def without_addresses(text: str) -> str:
    """``text`` with every object address replaced (see ``_ADDRESS``)."""
    return _ADDRESS.sub(" at 0x<address>", text) if _ADDRESS_MARK in text else text


_ID_KEYS = frozenset({"tool_call_id", "id"})
SECRET_PLACEHOLDER = PLACEHOLDER_RE
"""A scrubbed secret (``replay.scrub``). Its label is the scrubber's guess at the kind, from the value's
shape or the words around it, and the ordinal counts per label: the replay's placeholder key where the
recording had a real one (``<secret:api-key:1>`` for ``<secret:openai:1>``) is the same secret in the same
place. Aliased like generated ids, in order of appearance."""


@dataclass(frozen=True)
class Rules:
    """What to ignore on top of the built-in volatile fields.

    ``ignore`` holds key names (``usage``) or glob paths in the differ's notation
    (``main[*].settings.temperature``, ``*.parts[*].metadata``).
    """

    ignore: tuple[str, ...] = ()

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Rules:
        return cls(tuple(p for p in patterns if p))

    @property
    def keys(self) -> frozenset[str]:
        """Bare key names: dropped by the normaliser wherever they occur."""
        return frozenset(p for p in self.ignore if not any(c in p for c in ".[*?"))

    @property
    def paths(self) -> tuple[str, ...]:
        """Path globs in the differ's notation, translated for fnmatch (``[*]`` = any index)."""
        return tuple(p.replace("[*]", "[[]*[]]") for p in self.ignore if p not in self.keys)

    def ignores(self, path: str) -> bool:
        """Whether a change at ``path`` (or under an ignored path) is to be left out."""
        return any(
            fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, p + ".*") or fnmatch.fnmatchcase(path, p + "[[]*")
            for p in self.paths
        )


@dataclass
class Aliases:
    """Consistent ordinals for generated ids and uuids within one cassette."""

    ids: dict[str, str] = field(default_factory=dict)
    uuids: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    temps: dict[str, str] = field(default_factory=dict)
    pids: dict[str, str] = field(default_factory=dict)
    workspaces: tuple[str, ...] = ()
    """Absolute roots of the workspaces the cassette's runs worked in (``ModelResponse.workspace_ref``): a
    tool quoting one ("outside the project root /tmp/ws-9djk8cbp") names a new temp dir in every run."""
    env_paths: tuple[tuple[str, str], ...] = ()
    """The environment's folders the compared cassettes were recorded in, each with its name, longest first
    (:func:`env_paths`): a path a tool quotes below one ("`/tmp/outside.txt` is outside the project root", the
    parent of a workspace made with ``mkdtemp``; a traceback's ``File "/repo/app/tools.py"``) names another folder
    in another environment. Read as ``<tempdir>``, ``<project>``…, as a whole path component (``/var/tmp`` and
    ``/tmpfs`` are not ``/tmp``), after the workspace roots inside them."""
    used: int = 0
    """How many values were aliased so far: a value normalised without any is a function of its
    content alone, whatever came before it in the cassette (``replay._facts`` shares those)."""

    def tool_id(self, value: str) -> str:
        self.used += 1
        alias = self.ids.get(value)
        if alias is None:
            alias = self.ids[value] = f"<id#{len(self.ids) + 1}>"
        return alias

    def _ordinal(self, table: dict[str, str], value: str, kind: str) -> str:
        """``value``'s alias in ``table``: ``<kind#n>`` in order of first appearance."""
        self.used += 1
        alias = table.get(value)
        if alias is None:
            alias = table[value] = f"<{kind}#{len(table) + 1}>"
        return alias

    def _secret(self, m: re.Match[str]) -> str:
        return self._ordinal(self.secrets, m.group(0), "secret")

    def _temp(self, m: re.Match[str]) -> str:
        return self._ordinal(self.temps, m.group(0), "tmp")

    def _pid(self, m: re.Match[str]) -> str:
        return self._ordinal(self.pids, m.group(0), "pid")

    def __post_init__(self) -> None:
        self._names = dict(self.env_paths)
        # a plain search first: the sub's lookarounds cost ~30x a search on a text that names no folder
        self._named = re.compile("|".join(re.escape(p) for p, _ in self.env_paths)).search if self.env_paths else None
        self._temp_dir = (re.compile(r"(?<![\w.~-])(?:%s)(?![\w.-])" % "|".join(re.escape(p) for p, _ in self.env_paths))
                          if self.env_paths else None)

    def _paths(self, value: str) -> str:
        """The workspace roots (longest first), then the environment's folders (longest first), as placeholders."""
        for k, root in enumerate(self.workspaces):
            if root in value:
                self.used += 1
                value = value.replace(root, f"<workspace#{k + 1}>")
        if self._temp_dir is not None and self._named is not None and self._named(value) and (
                found := self._temp_dir.sub(lambda m: f"<{self._names[m.group(0)]}>", value)) != value:
            self.used += 1
            value = found
        return value

    def text(self, value: str) -> str:
        if self.workspaces or self._temp_dir is not None:  # first: a folder named as tempfile names one is the path's
            value = self._paths(value)
        if has_process_id(value):
            value = _PROCESS_ID.sub(self._pid, value)
        if _ADDRESS_MARK in value:
            value = without_addresses(value)
        if _PYDANTIC_DOCS_MARK in value:
            value = without_pydantic_versions(value)
        if _TRACEBACK_MARK in value:
            value = without_carets(value)
        if _MODULE_MARK in value:
            value = stable_names_in(value)
        if _TEMP_MARK in value:
            value = _TEMP_NAME.sub(self._temp, value)
        if "<secret:" in value:
            value = SECRET_PLACEHOLDER.sub(self._secret, value)
        if value.count("-") < 4 or not _UUID_MIDDLE.search(value) or not _UUID.search(value):
            return value

        def sub(m: re.Match[str]) -> str:
            self.used += 1
            alias = self.uuids.get(m.group(0))
            if alias is None:
                alias = self.uuids[m.group(0)] = f"<uuid#{len(self.uuids) + 1}>"
            return alias

        return _UUID.sub(sub, value)


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {} or value == "" or value is False or (
        type(value) is int and value == 0
    ) or (type(value) is float and value == 0.0)


ANY_CLASS = Choice()
"""The kind of a pydantic-ai value whose class the schema does not describe: a field at its empty value
(``None``, ``False``, ``0``, ``""``) is taken for its default, and the volatile keys are dropped."""

_USAGE_FIELDS = frozenset({"input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens",
                           "input_audio_tokens", "cache_audio_read_tokens", "output_audio_tokens", "details"})
"""The fields every slim's ``RunUsage`` and ``RequestUsage`` dump (``result.usage``, a response's ``usage``) holds:
a mapping with all of them that the scenario observed or returned is pydantic-ai's usage, read as pydantic-ai's. Slims
add counters with a zero default (``cache_write_1h_tokens`` and ``output_reasoning_tokens``, new after 2.56), and kept
as the user's value, ``null → 0`` made every scenario observing its usage ``changed`` across them."""

_ACCOUNTING = frozenset({"cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens", "cache_audio_read_tokens", "cost"})
"""A usage's figures that the provider's prompt cache and the installed price table decide, not the request or the
answer: the same request re-sent reads ``cache_read_tokens: 8`` once the provider's cache is warm, and ``cost``
follows both (and ``genai-prices``' release). Left out of a usage (a response's, one observed), where the same
conversation recorded twice read ``changed`` on every request after the first. What the harness makes cacheable
is compared by the prompt-cache figures (``replay.wire.cache``), request by request."""


def _without_accounting(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in usage.items() if k not in _ACCOUNTING} if any(k in _ACCOUNTING for k in usage) else usage


_DATA_FIELDS = frozenset({"args", "args_delta", "parameters_json_schema", "outer_typed_dict_key"})
"""Fields of pydantic-ai's classes that hold the user's own values: a tool call's arguments (whole, or a streamed
delta of them), a tool's JSON schema."""
_DATA_CONTENT = frozenset({"tool-return", "builtin-tool-return", "retry-prompt"})
"""Part kinds whose ``content`` is the user's: what the tool returned, the validation errors a retry sends
back (with the ``input`` the model gave, ``0`` and ``None`` included)."""


def _args_object(text: str) -> Any:
    """A tool call's arguments held as JSON text, as the object they spell.

    pydantic-ai keeps a streamed call's arguments as the text that arrived and a whole response's
    as a dict (``ToolCallPart.args_as_dict()`` reads both alike), so one call recorded both ways
    differed only in how it was held: a ``changed`` that printed the same value on both sides.
    Text that is not one JSON object (a stream cut mid-way) stays text. What a provider is sent
    is compared byte for byte at the wire level, not here.
    """
    if text[:1] != "{":
        return text
    try:
        parsed = json.loads(text, parse_constant=_no_constant)  # NaN would differ from itself
    except (ValueError, RecursionError):  # and an integer past Python's 4,300 digits
        return text
    return parsed if type(parsed) is dict and _shallow(parsed) else text


def _no_constant(name: str) -> Any:
    raise ValueError(name)


_ARGS_DEPTH = 32
"""Deepest arguments read as an object: the loader bounded this text as one string, and the stages after
the normaliser walk values recursively (see ``max_depth``); deeper arguments are compared as text."""


def _shallow(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > _ARGS_DEPTH:
            return False
        children = item.values() if type(item) is dict else item if type(item) is list else ()
        stack.extend((child, depth + 1) for child in children if type(child) in (dict, list))
    return True


def _never(text: str) -> None:
    return None


class Normaliser:
    """Normalises the values of one cassette (one instance per cassette: aliases are per cassette).

    Two regimes: pydantic-ai's own classes (a missing field equals its default, stamps dropped by
    name) and the user's values (tool arguments and returns, JSON schemas, outcome, observations),
    which are compared as they are — ``0``, ``False``, ``None`` and a key named ``duration`` there are
    what the model or the run saw. A value of no known kind is the user's (``kind=None``).
    """

    def __init__(
        self,
        rules: Rules = Rules(),
        schema: Schema = EMPTY,
        workspaces: tuple[str, ...] = (),
        paths: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.rules = rules
        self._ignore_keys = rules.keys
        self.aliases = Aliases(workspaces=workspaces, env_paths=paths)
        # A text naming a workspace root or an environment folder may hold no other mark (a TMPDIR of /scratch):
        # one search for all of them, where testing for a "/" sent every path-like text through the aliases.
        roots = [*workspaces, *(p for p, _ in paths)]
        self._rooted = re.compile("|".join(map(re.escape, roots))).search if roots else _never
        self.schema = schema
        self._dropped: dict[str, bool] = {}

    def value(self, value: Any, kind: Choice | None = None) -> Any:
        """``value`` normalised; ``kind`` says which classes it may be an instance of (for defaults)."""
        t = type(value)
        if t is dict:
            return self._dict(value, kind)
        if t is list:
            return [self.value(item, kind) for item in value]
        if t is str:
            return self.aliases.text(value) if "-" in value or "<secret:" in value or _ADDRESS_MARK in value or _TEMP_MARK in value or _MODULE_MARK in value or _PYDANTIC_DOCS_MARK in value or _TRACEBACK_MARK in value or has_process_id(value) or (
                self._rooted(value)) else value
        if isinstance(value, dict):
            return self._dict(value, kind)
        if isinstance(value, list):
            return [self.value(item, kind) for item in value]
        if isinstance(value, str):
            return self.aliases.text(value)
        return value

    def _data(self, value: dict[str, Any]) -> dict[str, Any]:
        """The user's own mapping: every key and value kept (ids and texts aliased as everywhere).
        A dumped pydantic-ai message or part inside it (``all_messages()`` returned) is read as one,
        and so are a usage (``result.usage`` observed, see :data:`_USAGE_FIELDS`) and a stream event."""
        if value.get("kind") in ("request", "response") and "parts" in value:
            return self._dict(sent_message(value), self.schema.root("message") or ANY_CLASS)
        if "part_kind" in value:
            return self._dict(sent_part(value), ANY_CLASS)
        if _USAGE_FIELDS.issubset(value):
            return self._dict(_without_accounting(value), ANY_CLASS)
        if "event_kind" in value or "part_delta_kind" in value:
            # a streamed run's event or part delta (``run_stream_events`` observed): pydantic-ai's classes, which
            # slims grow with empty fields (2.62's ``TextPartDelta.citations_delta``: ``null → null``, changed)
            if value.get("event_kind") == "capability" and "capability_id" in value:
                # which capability instance emitted it: for one without an explicit id a run-local handle
                # (``<ask_user:30aee7>`` on 0.54-0.59, ``ask_user`` once 0.62 named it), as on a tool definition
                value = {k: v for k, v in value.items() if k != "capability_id"}
            return self._dict(value, ANY_CLASS)
        out: dict[str, Any] = {}
        private = False
        for key, item in value.items():
            if key in self._ignore_keys:
                continue
            if type(key) is str and key[:1] == "_":
                private = True
            elif type(item) is str and key in _ID_KEYS and _GENERATED_ID.match(item):
                out[key] = self.aliases.tool_id(item)
            else:
                out[key] = self.value(item)
        if private:  # an object's private state (an `AgentRunResult` returned: `_state`) is pydantic-ai's, not the user's
            out.update(self._dict({k: v for k, v in value.items() if type(k) is str and k[:1] == "_"}, ANY_CLASS))
        return out

    def _dict(self, value: dict[str, Any], kind: Choice | None) -> dict[str, Any]:
        # The hot loop of every diff (each distinct message once): scalars are handled inline.
        if kind is None:
            return self._data(value)
        cls = kind.pick(value)
        defaults = cls.defaults if cls is not None else None
        nested = cls.nested if cls is not None else None
        undeclared = cls.undeclared if cls is not None else None
        dropped = self._dropped
        out: dict[str, Any] = {}
        for key, item in value.items():
            drop = dropped.get(key)
            if drop is None:
                drop = dropped[key] = key in VOLATILE_KEYS or key.endswith("created_at") or measured(key) or key in self._ignore_keys
            if drop or (undeclared and key in undeclared):
                continue
            if key in _DATA_FIELDS or (key == "content" and type(kind_of := value.get("part_kind")) is str and kind_of in _DATA_CONTENT):
                if key == "args" and type(item) is str:
                    item = _args_object(item)
                out[key] = self.value(item)  # the user's own value, whole: its 0, False and None are values
                continue
            if item is None or item is False:
                # Empty is the default unless the class declares another (its defaults are non-empty):
                # allow_text_output=False against a declared True is a value set on purpose.
                if defaults and key in defaults:
                    out[key] = item
                continue
            t = type(item)
            if key == "usage" and t is dict:
                item = _without_accounting(item)
            if t is str:
                if not item:
                    if defaults and key in defaults:
                        out[key] = item
                    continue
                if key in _ID_KEYS and _GENERATED_ID.match(item):
                    out[key] = self.aliases.tool_id(item)
                    continue
                if defaults and defaults.get(key) == item:
                    continue
                if key == "error" and item[:5] == "Model":  # a FallbackModel's failed attempt: 'Class: message'
                    item = _attempt_error(item)
                out[key] = self.aliases.text(item) if "-" in item or "<secret:" in item or _ADDRESS_MARK in item or _TEMP_MARK in item or _MODULE_MARK in item or _PYDANTIC_DOCS_MARK in item or _TRACEBACK_MARK in item or has_process_id(item) or (
                    self._rooted(item)) else item
                continue
            if t is int or t is float or t is bool:
                if item == 0 and t is not bool and not (defaults and key in defaults):
                    continue
                if defaults and key in defaults and defaults[key] == item and type(defaults[key]) is t:
                    continue
                out[key] = item
                continue
            norm = self.value(item, (nested.get(key) if nested else None) or ANY_CLASS)
            if not _empty(norm):
                out[key] = norm
        return out

    def settings(self, value: Any) -> Any:
        """Model settings: a key is there because someone set it, so ``0``/``False``/``""`` are values
        (temperature 0 is not the provider's default temperature); only ``None`` means unset."""
        if isinstance(value, dict):
            return {k: self.settings(v) for k, v in value.items() if v is not None and k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [self.settings(v) for v in value]
        if isinstance(value, str):
            return self.aliases.text(value)
        return value

    def root(self, value: Any, name: str) -> Any:
        """Normalise a value of a known root kind (``message``, ``parameters``, ``usage``)."""
        return self.value(value, self.schema.root(name) or ANY_CLASS)


def schema_for(cassette: Cassette, other: Cassette | None = None) -> Schema:
    """The defaults to strip from ``cassette``: its recording version's, plus ``other``'s for fields it never knew.

    A cassette recorded before headers carried defaults is read with the installed version's.
    """
    own = cassette.header.schema_defaults
    theirs = other.header.schema_defaults if other is not None else None
    if own is None or (other is not None and theirs is None):
        installed = _without_fields(installed_schema())  # not the fields of the version that recorded it
        own = own if own is not None else installed
        theirs = theirs if theirs is not None or other is None else installed
    merged = merge(own, theirs)
    schema = compile_schema(merged)
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        schema.token = digest(merged)
    return schema


def _without_fields(schema: dict[str, Any]) -> dict[str, Any]:
    classes = {n: {k: v for k, v in spec.items() if k != "fields"} for n, spec in schema.get("classes", {}).items()}
    return {**schema, "classes": classes}


def digest(value: Any) -> bytes:
    return hashlib.blake2b(pack(value), digest_size=16).digest()


_PACKERS = threading.local()


def pack(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)`` with one packer per thread (building one per call
    costs more than packing a message; a packer resets itself when a value cannot be packed)."""
    packer = getattr(_PACKERS, "packer", None)
    if packer is None:
        packer = _PACKERS.packer = msgpack.Packer(use_bin_type=True, default=encode_big_int)
    packed: bytes = packer.pack(value)
    return packed


@dataclass
class NormalRequest:
    """One exchange in comparable form, with a digest so identical requests are skipped cheaply."""

    role: str
    index: int
    kind: str
    body: dict[str, Any]
    digest: bytes
    message_ids: list[int] = field(default_factory=list)
    """Indices of ``body["messages"]`` in the normalised message table (for their digests)."""


@dataclass
class NormalCassette:
    scenario_id: str | None
    header: dict[str, Any]
    requests: dict[str, list[NormalRequest]]
    outcome: dict[str, Any]
    observations: list[dict[str, Any]]
    expectations: dict[str, Any]
    source: Cassette
    messages: list[Any] = field(default_factory=list, repr=False)
    """The normalised message table (requests and runs refer into it)."""
    message_digests: list[bytes] = field(default_factory=list, repr=False)
    normaliser: Normaliser | None = field(default=None, repr=False)
    histories: list[dict[str, Any]] = field(default_factory=list)
    """Histories handed to the checks (``run.observe_messages`` / ``run.judge``), messages normalised."""

    @functools.cached_property
    def runs(self) -> list[dict[str, Any]]:
        """Agent runs with their histories expanded: built on first use only.

        The differ never reads them; expanding every run's full history costs most of a large
        cassette's normalisation, so ``show``/determinism pay for it and ``diff`` does not.
        """
        n = self.normaliser or Normaliser()
        out = []
        for run in self.source.runs:
            head = n.value({"role": run.role, "prompt": run.prompt, "output": run.output,
                            "error": _error(run.error) if run.error else None})
            entry = {"role": head.get("role"), "prompt": head.get("prompt"),
                     "history": [self.messages[i] for i in run.history],
                     "result": [self.messages[i] for i in run.result],
                     "output": head.get("output"), "error": head.get("error")}
            out.append({k: v for k, v in entry.items() if not _empty(v)})
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "header": self.header,
            "requests": {role: [r.body for r in reqs] for role, reqs in self.requests.items()},
            "runs": self.runs,
            "outcome": self.outcome,
            "observations": self.observations,
            "expectations": self.expectations,
            **({"histories": self.histories} if self.histories else {}),
        }


def workspace_roots(cassette: Cassette) -> tuple[str, ...]:
    """The absolute paths of the workspaces the cassette's runs worked in, longest first (a root inside another)."""
    roots: dict[str, None] = {}
    for m in cassette.messages:
        ref = m.get("workspace_ref") if type(m) is dict else None
        root = ref.get("id") if type(ref) is dict else None
        if isinstance(root, str) and len(root) > 1 and root.startswith("/"):
            roots.setdefault(root.rstrip("/"), None)
    return tuple(sorted(roots, key=len, reverse=True))


_PATH_NAMES = ("prefix", "project", "home", "tempdir")
"""The environment's folders a header names (``Header.paths``), in the order a folder named twice takes its name
(a checkout that is the home folder is ``<project>``)."""


def env_paths(*cassettes: Cassette) -> tuple[tuple[str, str], ...]:
    """The environment's folders the cassettes were recorded in (``header.paths``) with their names, longest first.
    The differ gives both sides both sides' (a scenario's own ``/tmp/notes.txt`` is read alike on both when one
    side's ``TMPDIR`` was ``/tmp`` and the other's not); a path of no component (``/``) is none."""
    dirs: dict[str, str] = {}
    for name in _PATH_NAMES:
        for c in cassettes:
            for d in c.header.paths.get(name, ()):
                if isinstance(d, str) and d.startswith("/") and len(d := d.rstrip("/")) > 1:
                    dirs.setdefault(d, name)
    return tuple(sorted(dirs.items(), key=lambda item: len(item[0]), reverse=True))


_COMPARED_HEADER = ("scenario_id", "harness_version", "slim_version", "mode")


def _error(info: Any) -> dict[str, Any]:
    """An error as compared: its type by the scenario file's stable module name (cassettes recorded before
    the recorder wrote that name hold the hashed one, which moved with every edit and checkout)."""
    out: dict[str, Any] = info.model_dump(exclude={"attributes"})
    out["type"] = stable_name(str(out.get("type")))
    if out["type"] in _HTTP_ERRORS and type((info.attributes or {}).get("status_code")) is int:
        out["type"] = _HTTP_ERROR
    if out["type"] in _CANCELLED:  # anyio names its cancel scope and task by id there: new in every run
        out.pop("message", None)
    elif type(message := out.get("message")) is str:
        if "req_" in message:
            message = _REQUEST_ID.sub("req_<id>", message)
        if _TEMP_MARK in message:  # numbered within the message: the error is compared on its own
            temps: dict[str, str] = {}
            message = _TEMP_NAME.sub(lambda m: temps.setdefault(m.group(0), f"<tmp#{len(temps) + 1}>"), message)
        out["message"] = stable_names_in(without_addresses(without_pydantic_versions(message)))
    return out


_CANCELLED = frozenset({"asyncio.exceptions.CancelledError", "asyncio.CancelledError"})
_REQUEST_ID = re.compile(r"\breq_[A-Za-z0-9]{16,}\b")
"""The provider's id of one HTTP request, which its error messages quote (OpenAI's 500: "Please include the
request ID req_<32 hex> in your message"; Anthropic's bodies: ``req_011C…``): new on every call."""
_HTTP_ERROR = "pydantic_ai.exceptions.ModelHTTPError"
_HTTP_ERRORS = frozenset(
    f"pydantic_ai.exceptions.{name}"
    for name in (
        "ModelHTTPError", "ModelAPIError", "ModelRateLimitError", "ModelQuotaExceededError", "ModelUnavailableError",
        "ModelOverloadedError", "ModelServerError", "ModelRequestRejectedError", "ModelAuthenticationError",
        "ModelNotFoundError", "ModelContextWindowExceededError", "ModelRequestTimeout",
    )
)
"""A provider's answer with an HTTP status, as each slim names it: 2.60+ raises it as its category
(``ModelServerError`` for a 500, also a ``ModelHTTPError``), older slims as a plain ``ModelHTTPError``.
Compared as one class: the status, body and model name are in the message either way."""


_ATTEMPT_HTTP_ERROR = re.compile(r"^(?:%s)(?=: status_code: \d+)" % "|".join(n.rsplit(".", 1)[1] for n in sorted(_HTTP_ERRORS)))


def _attempt_error(text: str) -> str:
    """A ``FallbackModel`` attempt's error (``failed_attempts[].error``, ``'ModelServerError: status_code: 500, …'``)
    as :func:`_error` compares a raised one: a provider's answer with an HTTP status is one class whatever slim
    names it by (2.60+: its category), and the provider's request id in the message is new on every call."""
    text = _ATTEMPT_HTTP_ERROR.sub("ModelHTTPError", text, count=1)
    return _REQUEST_ID.sub("req_<id>", text) if "req_" in text else text


def _outcome(cassette: Cassette) -> dict[str, Any]:
    """The run's outcome as compared: its status, the output the scenario returned (the user's value,
    ``None`` included when the run ended well) or the error it raised."""
    outcome = cassette.outcome
    out: dict[str, Any] = {"status": outcome.status}
    if outcome.status == "ok" or outcome.output is not None:
        out["output"] = outcome.output
    if outcome.error is not None:
        out["error"] = _error(outcome.error)
    return out


def normalise(
    cassette: Cassette,
    rules: Rules = Rules(),
    schema: Schema | None = None,
    conversations: Collection[str] | None = None,
    paths: tuple[tuple[str, str], ...] | None = None,
) -> NormalCassette:
    """Normalise every table entry once, then assemble requests from them.

    Requests share most of their messages, so normalising the table (not each request's
    expanded history) keeps this linear in the cassette's size. ``schema`` defaults to the
    cassette's own recorded defaults (:func:`schema_for`); the differ passes both sides' merged.
    ``conversations``: roles listed conversation by conversation (``replay._conversations``), by
    default those whose requests alternate between concurrent conversations in this cassette;
    the differ passes the roles either side interleaves, so both list them alike. Generated ids
    are then aliased in that order too, not in the order concurrent answers happened to arrive.
    ``paths``: the environment's folders read as ``<tempdir>``, ``<project>``…, by default the cassette's own
    (:func:`env_paths`); the differ passes both sides'.
    """
    with paused_gc():
        return _normalise(cassette, rules, schema, conversations, env_paths(cassette) if paths is None else paths)


def _normalise(
    cassette: Cassette,
    rules: Rules,
    schema: Schema | None,
    conversations: Collection[str] | None,
    paths: tuple[tuple[str, str], ...],
) -> NormalCassette:
    n = Normaliser(rules, schema if schema is not None else schema_for(cassette), workspace_roots(cassette), paths)
    exchanges: list[Exchange] = cassette.exchanges
    order = None
    if conversations is None or conversations:
        of_runs = turns_of(cassette)
        roles = interleaved_roles(cassette) if conversations is None else set(conversations)
        if roles:
            by_role = cassette.by_role()
            exchanges = [ex for r in sorted(roles) for ex in in_conversations(by_role.get(r, []), of_runs)]
            exchanges += [ex for ex in cassette.exchanges if ex.role not in roles]
            order = _visit_order(cassette, exchanges)
    messages, message_digests = _messages(cassette, n, order)
    params = {ex.parameters for ex in cassette.exchanges if ex.parameters is not None}
    settings = {ex.settings for ex in cassette.exchanges if ex.settings is not None} - params
    parameters_kind = n.schema.root("parameters") or ANY_CLASS
    blobs = [
        n.value(sent_parameters(b), parameters_kind) if i in params else n.settings(b) if i in settings else n.value(b, ANY_CLASS)
        for i, b in enumerate(cassette.blobs)
    ]
    # A run's kept output mode stated as the ``auto`` it was kept from (``_unsent.kept_modes``).
    seqs = kept_modes(cassette.exchanges, blobs.__getitem__, blobs.__getitem__)
    kept = {ex.seq: as_auto(blobs[ex.parameters]) for ex in cassette.exchanges if ex.seq in seqs and ex.parameters is not None}
    requests: dict[str, list[NormalRequest]] = {}
    for ex in exchanges:
        body, key = _request(ex, cassette, messages, message_digests, blobs, n, kept.get(ex.seq))
        requests.setdefault(ex.role, []).append(NormalRequest(ex.role, ex.index, ex.kind, body, key, ex.messages))
    return NormalCassette(
        scenario_id=cassette.header.scenario_id,
        header={k: getattr(cassette.header, k) for k in _COMPARED_HEADER},
        requests=requests,
        outcome=n.value(finite(_outcome(cassette))) or {"status": "ok"},
        observations=[{"name": o.name, "value": n.value(finite(o.value))} for o in cassette.observations],
        expectations=n.value(cassette.expectations),
        source=cassette,
        messages=messages,
        message_digests=message_digests,
        normaliser=n,
        histories=[
            {"name": h.name, "predicate": h.predicate, "verdict": n.value(h.verdict),
             "messages": [messages[i] for i in h.messages], "source": [messages[i] for i in h.source]}
            for h in cassette.histories
        ],
    )


def _visit_order(cassette: Cassette, exchanges: list[Exchange]) -> list[int]:
    """Message indices in the order ``exchanges`` first send or receive them, then the rest of the table."""
    seen = bytearray(len(cassette.messages))
    order: list[int] = []
    for ex in exchanges:
        for i in ex.messages if ex.response is None else [*ex.messages, ex.response]:
            if not seen[i]:
                seen[i] = 1
                order.append(i)
    order += [i for i in range(len(seen)) if not seen[i]]
    return order


def _messages(cassette: Cassette, n: Normaliser, order: list[int] | None = None) -> tuple[list[Any], list[bytes]]:
    """The normalised message table and its digests.

    In a comparison (``replay._facts``) a message is normalised once for both sides when its
    content is the same and no alias was needed (a rerun's messages differ only in stamps, which
    normalisation drops): same content, same schema, same rules give the same value. The schema
    must be the same one (its ``token``) and pick no class by a stamp's value (``Schema.stamp_free``).
    """
    from .. import _facts

    kind = n.schema.root("message") or ANY_CLASS
    facts = _facts.active()
    token = n.schema.token
    table = cassette.messages
    if facts is None or facts.private or token is None or not n.schema.stamp_free(_facts.volatile):
        if order is None:
            messages = [n.value(sent_message(m), kind) for m in table]
        else:  # aliases numbered in visiting order
            messages = [None] * len(table)
            for i in order:
                messages[i] = n.value(sent_message(table[i]), kind)
        return messages, [digest(m) for m in messages]
    aliases = n.aliases

    def compute(m: Any) -> tuple[tuple[Any, bytes], bool]:
        used = aliases.used
        value = n.value(sent_message(m), kind)
        return (value, digest(value)), aliases.used == used

    slot = ("normalised", token, n.rules)
    if order is None:
        pairs = [facts.shareable(slot, cassette, i, compute) for i in range(len(table))]
    else:
        pairs = [None] * len(table)  # type: ignore[list-item]
        for i in order:
            pairs[i] = facts.shareable(slot, cassette, i, compute)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _request(
    ex: Exchange,
    cassette: Cassette,
    messages: list[Any],
    message_digests: list[bytes],
    blobs: list[Any],
    n: Normaliser,
    parameters: Any = None,
) -> tuple[dict[str, Any], bytes]:
    body: dict[str, Any] = {"kind": ex.kind}
    if ex.model_name:
        body["model"] = ex.model_name
    body["messages"] = [messages[i] for i in ex.messages]
    if ex.settings is not None and blobs[ex.settings]:
        body["settings"] = blobs[ex.settings]
    if parameters is not None:
        body["parameters"] = parameters
    elif ex.parameters is not None and blobs[ex.parameters]:
        body["parameters"] = blobs[ex.parameters]
    if ex.instructions:
        body["instructions"] = ex.instructions
    if ex.response is not None:
        body["response"] = messages[ex.response]
    if ex.usage:
        body["usage"] = n.root(ex.usage, "usage")
    if ex.error is not None:
        body["error"] = _error(ex.error)
    key = digest(
        [
            ex.kind,
            ex.model_name,
            [message_digests[i] for i in ex.messages],
            body.get("settings"),
            body.get("parameters"),
            ex.instructions,
            message_digests[ex.response] if ex.response is not None else None,
            body.get("usage"),
            body.get("error"),
        ]
    )
    return body, key

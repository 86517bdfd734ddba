"""Compare what two cassettes put on the wire: the HTTP request bodies of each role's calls.

Requests are paired as the model-level differ pairs them (role, then ordinal), and the
HTTP exchanges within a call by position. Bodies are normalised first (generated ids
aliased in order of appearance, volatile keys and ignored paths dropped) and top-level
lists (``messages``, ``input``, ``tools``) are aligned element by element on their digests,
so an inserted message is one entry rather than a cascade, and unchanged elements cost a
hash, not a DeepDiff.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import msgpack

from ..cassette import Cassette, Exchange
from ..normaliser import _GENERATED_ID, VOLATILE_KEYS, Aliases, Rules, env_paths, workspace_roots
from .store import request_body

_WIRE_ID = _GENERATED_ID  # one shape for both levels: they drifted apart (the message level missed Ollama's ids)
_WIRE_VOLATILE = VOLATILE_KEYS | {"prompt_cache_key", "user", "safety_identifier"}
"""Keys that only carry ids or per-run values on the wire."""

Kind = Literal["changed", "added", "removed", "request"]


@dataclass(frozen=True)
class WireChange:
    """One difference between two wire bodies, with a path in the body's own terms."""

    role: str
    index: int
    path: str
    kind: Kind
    before: Any = None
    after: Any = None

    def describe(self, width: int = 80) -> str:
        where = f"{self.role}[{self.index}] wire"
        before, after = _sent(self.before), _sent(self.after)
        if self.kind == "changed":  # around the first difference, as the message lines show long values
            from .._untrusted import _pair

            return "{}: {}: {} → {}".format(where, self.path, *_pair(before, after, width))
        if self.kind == "request":
            return f"{where}: {self.path}"
        sign = "+" if self.kind == "added" else "-"
        value = after if self.kind == "added" else before
        return f"{where}: {sign} {self.path}: {_short(value, width)}"

    def as_json(self) -> dict[str, Any]:
        return {"role": self.role, "index": self.index, "path": self.path, "kind": self.kind,
                "before": _sent(self.before), "after": _sent(self.after)}


def _sent(value: Any) -> Any:
    """A value as it was sent: JSON text compared in its canonical form shows as written."""
    return getattr(value, "original", value) if isinstance(value, str) else value


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Aliases:
    """One side's aliases. A text sent is aliased by the message-level normaliser's own :class:`Aliases`
    (secrets, object addresses, scenario module hashes, process ids, temp names, the workspace roots the
    cassette's runs worked in, uuids), so the wire never tells apart what the messages hold alike: it kept
    its own copy of that list, without the workspace roots and uuids, and a coder agent in a fresh
    ``LocalWorkspace`` (a refused path quoted back with the root) read ``changed`` at the wire on every
    replay, on the recording's own version, where the messages read the same."""

    def __init__(self, workspaces: tuple[str, ...] = (), paths: tuple[tuple[str, str], ...] = ()) -> None:
        self.ids: dict[str, str] = {}
        self.texts = Aliases(workspaces=workspaces, env_paths=paths)

    def value(self, value: Any, ignore: frozenset[str]) -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, ignore) for k, v in value.items() if k not in _WIRE_VOLATILE and k not in ignore}
        if isinstance(value, list):
            return [self.value(v, ignore) for v in value]
        if isinstance(value, str):
            if _WIRE_ID.match(value):
                return self.ids.setdefault(value, f"<id#{len(self.ids) + 1}>")
            value = self.texts.text(value)
            if value[:1] in ("{", "[") and value[-1:] in ("}", "]"):
                return _canonical_json(value)
        return value


def _canonical_json(text: str) -> str:
    """JSON sent as a string (a tool call's ``arguments``) without the serialiser's spacing: slim 2.56
    writes ``{"city": "Paris"}`` and 2.62 ``{"city":"Paris"}``, the same arguments. Only the spacing:
    keys keep their order and repeats, numbers their digits (``1e400`` is not ``1e999999``). Not JSON,
    or nested past what the parser takes: as is."""
    try:
        parsed = json.loads(text, object_pairs_hook=_Pairs, parse_float=_Number, parse_int=_Number, parse_constant=_Number)
        canonical = _emit(parsed)
    except (ValueError, RecursionError):
        return text
    if canonical == text:
        return text
    out = _Canonical(canonical)
    out.original = text
    return out


class _Pairs(list):  # type: ignore[type-arg]
    """An object's members in order, repeats kept (``{"k": 1, "k": 2}`` is not ``{"k": 2}``)."""


class _Number(str):
    """A number (or NaN, Infinity) as written."""


def _emit(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _emit(v) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_emit(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=False)


class _Canonical(str):
    """Compared in its canonical form, shown as it was sent."""

    original: str


def _digest(value: Any) -> bytes:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, default=str).encode(), digest_size=16).digest()


def _path(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _deep(prefix: list[Any], a: Any, b: Any) -> list[tuple[str, Kind, Any, Any]]:
    """Field-level differences of two small values (one list element, or the non-list fields)."""
    from deepdiff import DeepDiff

    out: list[tuple[str, Kind, Any, Any]] = []
    # ignore_private_variables: DeepDiff's default leaves out dict keys that start with ``__`` (a tool_use
    # block's ``input`` of ``{"__typename": …}``), which made a body that differs there read the same.
    tree = DeepDiff(a, b, view="tree", verbose_level=2, ignore_private_variables=False)
    for kind, items in tree.items():
        for item in items:
            path = _path(prefix + list(item.path(output_format="list")))
            if kind in ("dictionary_item_added", "iterable_item_added"):
                out.append((path, "added", None, item.t2))
            elif kind in ("dictionary_item_removed", "iterable_item_removed"):
                out.append((path, "removed", item.t1, None))
            else:
                out.append((path, "changed", item.t1, item.t2))
    if not out and not _same(a, b):  # a difference DeepDiff does not report: the whole value changed
        out.append((_path(prefix), "changed", a, b))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types: ``==`` has ``True == 1 == 1.0``, so ``"stream": 1`` sent where the
    recording sent ``true`` read the same. Decided in C (equal bodies are the common case: digesting every
    list element of them was most of a wire diff); a walk only when the keys come in another order."""
    if a != b:
        return False
    try:
        if msgpack.packb(a) == msgpack.packb(b):  # keeps bool, int and float apart
            return True
    except (TypeError, ValueError, OverflowError):
        pass
    from ..differ import same_value

    return same_value(a, b)


def _body_changes(a: Any, b: Any) -> list[tuple[str, Kind, Any, Any]]:
    if _same(a, b):
        return []
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return _deep([], a, b)
    out: list[tuple[str, Kind, Any, Any]] = []
    scalars_a = {k: v for k, v in a.items() if not isinstance(v, list)}
    scalars_b = {k: v for k, v in b.items() if not isinstance(v, list)}
    lists = [k for k in dict.fromkeys([*a, *b]) if isinstance(a.get(k), list) or isinstance(b.get(k), list)]
    for k in lists:
        la, lb = a.get(k), b.get(k)
        if not isinstance(la, list) or not isinstance(lb, list):
            scalars_a[k], scalars_b[k] = la, lb
            continue
        out += _align(k, la, lb)
    if not _same(scalars_a, scalars_b):
        out += _deep([], {k: v for k, v in scalars_a.items() if v is not None}, {k: v for k, v in scalars_b.items() if v is not None})
    return out


_ALIGN_CELLS = 4_000_000
"""Past this many element pairs the middle is paired by position: ``SequenceMatcher`` without
autojunk is quadratic when elements repeat (16,000 references to one message: 32 s)."""


def _align(key: str, a: list[Any], b: list[Any]) -> list[tuple[str, Kind, Any, Any]]:
    da, db = [_digest(x) for x in a], [_digest(x) for x in b]
    if da == db:
        return []
    lo = 0  # the common head and tail need no matching: what a conversation re-sends
    while lo < len(da) and lo < len(db) and da[lo] == db[lo]:
        lo += 1
    hi = 0
    while hi < len(da) - lo and hi < len(db) - lo and da[-1 - hi] == db[-1 - hi]:
        hi += 1
    out: list[tuple[str, Kind, Any, Any]] = []
    ma, mb = da[lo : len(da) - hi], db[lo : len(db) - hi]
    if len(ma) * len(mb) > _ALIGN_CELLS:
        opcodes = [("replace", lo, lo + len(ma), lo, lo + len(mb))]
    else:
        matcher = difflib.SequenceMatcher(a=ma, b=mb, autojunk=False)
        opcodes = [(op, lo + i1, lo + i2, lo + j1, lo + j2) for op, i1, i2, j1, j2 in matcher.get_opcodes()]
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for n in range(pairs):
            if da[i1 + n] != db[j1 + n]:  # paired by position past the cap: equal ones say nothing
                out += _deep([key, j1 + n], a[i1 + n], b[j1 + n])
        for i in range(i1 + pairs, i2):
            out.append((_path([key, i]), "removed", a[i], None))
        for j in range(j1 + pairs, j2):
            out.append((_path([key, j]), "added", None, b[j]))
    return out


def bodies(cassette: Cassette, ex: Exchange) -> list[tuple[str, str, Any]]:
    """(method, path, body) of each HTTP request of a call; the host is left out (ports differ per run)."""
    return [(w.method, _path_of(w.url), request_body(cassette, w)) for w in ex.wire or ()]


def _path_of(url: str) -> str:
    """The path and query the request went to: the query is sent (Azure's ``api-version``, the Anthropic
    SDK's ``?beta=true``), only host and port are the machine's."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        return f"{parts.path}?{parts.query}" if parts.query else parts.path
    except ValueError:  # not a URL a client could have sent (a cassette is untrusted): compared whole
        return url


class NormalBodies:
    """Each call's HTTP requests as :func:`compare` sees them (ids and secrets aliased in order of use,
    volatile and ignored keys dropped): what ``replay show --normalized`` prints for the wire. Built
    call by call as they are printed, so a bounded output stops the work with it."""

    def __init__(self, cassette: Cassette, rules: Rules = Rules()) -> None:
        self.cassette, self.ignore = cassette, rules.keys
        self.aliases = _Aliases(workspace_roots(cassette), env_paths(cassette))
        self.calls = {(ex.role, ex.index): ex for ex in cassette.exchanges if ex.wire}

    def of(self, role: str, index: int) -> list[tuple[str, str, Any]]:
        ex = self.calls.get((role, index))
        if ex is None:
            return []
        return [(m, self.aliases.value(path, self.ignore), self.aliases.value(body, self.ignore))
                for m, path, body in bodies(self.cassette, ex)]


def _header_changes(role: str, index: int, a: Any, b: Any, rules: Rules) -> list[WireChange]:
    """The request headers kept because they change what the provider does (``anthropic-beta`` turns a
    feature on), compared by name; a record that kept none (hand-made) is not compared."""
    if not isinstance(a, dict) or not isinstance(b, dict) or not a or not b:
        return []
    out = []
    for name in sorted(set(a) | set(b), key=str):
        before, after = a.get(name), b.get(name)
        if before == after or rules.ignores(f"{role}[{index}].wire.headers.{name}") or name in rules.keys:
            continue
        kind: Kind = "changed" if before is not None and after is not None else "added" if after is not None else "removed"
        out.append(WireChange(role, index, f"headers.{name}", kind, before, after))
    return out


def compare(
    a: Cassette, b: Cassette, rules: Rules = Rules(), paired: dict[tuple[str, int], int] | None = None
) -> list[WireChange]:
    """Wire-body differences, per role and ordinal, for calls that have HTTP exchanges on both sides.

    ``paired``: A's call (role, index) → B's index, as the message-level diff paired them where a role
    holds concurrent conversations (each side's calls in its own arrival order); else by ordinal."""
    changes: list[WireChange] = []
    paths = env_paths(a, b)  # both sides' environment folders, as the message-level diff reads them
    alias_a, alias_b = _Aliases(workspace_roots(a), paths), _Aliases(workspace_roots(b), paths)
    ignore = rules.keys
    roles_b = b.by_role()
    for role, xs in a.by_role().items():
        ys = roles_b.get(role, [])
        if paired:
            at = {e.index: e for e in ys}
            pairs = [(ea, at[j]) for ea in xs if (j := paired.get((role, ea.index))) is not None and j in at]
        else:
            pairs = list(zip(xs, ys))
        for ea, eb in pairs:
            if not ea.wire or not eb.wire:
                continue
            wa, wb = bodies(a, ea), bodies(b, eb)
            if len(wa) != len(wb):
                changes.append(WireChange(role, ea.index, f"{len(wa)} HTTP requests → {len(wb)}", "request"))
            for (ma, pa, ba), (mb, pb, bb), ra, rb in zip(wa, wb, ea.wire or (), eb.wire or ()):
                pa, pb = alias_a.value(pa, ignore), alias_b.value(pb, ignore)  # a key in the query: scrubbed, aliased
                if (ma, pa) != (mb, pb):
                    changes.append(WireChange(role, ea.index, "endpoint", "changed", f"{ma} {pa}", f"{mb} {pb}"))
                changes += _header_changes(role, ea.index, ra.request_headers, rb.request_headers, rules)
                na, nb = alias_a.value(ba, ignore), alias_b.value(bb, ignore)
                for path, kind, before, after in _body_changes(na, nb):
                    full = f"{role}[{ea.index}].wire.{path}"
                    if not rules.ignores(full):
                        changes.append(WireChange(role, ea.index, path, kind, before, after))
    return changes

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
import re
from dataclasses import dataclass
from typing import Any, Literal

from ..cassette import Cassette, Exchange
from ..normaliser import SECRET_PLACEHOLDER, VOLATILE_KEYS, Rules
from .store import request_body

_WIRE_ID = re.compile(r"^(pyd_ai_[0-9a-f]{8,}|call_[A-Za-z0-9]{8,}|toolu_[A-Za-z0-9]{8,}|fc_[0-9a-f]{8,}|(msg|rs|resp)_[0-9a-f]{16,})$")
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
        if self.kind == "changed":
            return f"{where}: {self.path}: {_short(self.before, width)} → {_short(self.after, width)}"
        if self.kind == "request":
            return f"{where}: {self.path}"
        sign = "+" if self.kind == "added" else "-"
        value = self.after if self.kind == "added" else self.before
        return f"{where}: {sign} {self.path}: {_short(value, width)}"

    def as_json(self) -> dict[str, Any]:
        return {"role": self.role, "index": self.index, "path": self.path, "kind": self.kind,
                "before": self.before, "after": self.after}


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Aliases:
    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.secrets: dict[str, str] = {}

    def value(self, value: Any, ignore: frozenset[str]) -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, ignore) for k, v in value.items() if k not in _WIRE_VOLATILE and k not in ignore}
        if isinstance(value, list):
            return [self.value(v, ignore) for v in value]
        if isinstance(value, str):
            if _WIRE_ID.match(value):
                return self.ids.setdefault(value, f"<id#{len(self.ids) + 1}>")
            if "<secret:" in value:  # as the message-level normaliser: the scrubber's label is a guess
                value = SECRET_PLACEHOLDER.sub(lambda m: self.secrets.setdefault(m.group(0), f"<secret#{len(self.secrets) + 1}>"), value)
            if value[:1] in ("{", "[") and value[-1:] in ("}", "]"):
                return _canonical_json(value)
        return value


def _canonical_json(text: str) -> str:
    """JSON sent as a string (a tool call's ``arguments``) without the serialiser's spacing: slim 2.56
    writes ``{"city": "Paris"}`` and 2.62 ``{"city":"Paris"}``, the same arguments. Not JSON: as is."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text


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
    tree = DeepDiff(a, b, view="tree", verbose_level=2)
    for kind, items in tree.items():
        for item in items:
            path = _path(prefix + list(item.path(output_format="list")))
            if kind in ("dictionary_item_added", "iterable_item_added"):
                out.append((path, "added", None, item.t2))
            elif kind in ("dictionary_item_removed", "iterable_item_removed"):
                out.append((path, "removed", item.t1, None))
            else:
                out.append((path, "changed", item.t1, item.t2))
    return out


def _body_changes(a: Any, b: Any) -> list[tuple[str, Kind, Any, Any]]:
    if a == b:  # the common case, decided in C: digesting every list element of equal bodies was most of a wire diff
        return []
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [] if a == b else _deep([], a, b)
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
    if scalars_a != scalars_b:
        out += _deep([], {k: v for k, v in scalars_a.items() if v is not None}, {k: v for k, v in scalars_b.items() if v is not None})
    return out


def _align(key: str, a: list[Any], b: list[Any]) -> list[tuple[str, Kind, Any, Any]]:
    da, db = [_digest(x) for x in a], [_digest(x) for x in b]
    if da == db:
        return []
    out: list[tuple[str, Kind, Any, Any]] = []
    matcher = difflib.SequenceMatcher(a=da, b=db, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for n in range(pairs):
            out += _deep([key, j1 + n], a[i1 + n], b[j1 + n])
        for i in range(i1 + pairs, i2):
            out.append((_path([key, i]), "removed", a[i], None))
        for j in range(j1 + pairs, j2):
            out.append((_path([key, j]), "added", None, b[j]))
    return out


def bodies(cassette: Cassette, ex: Exchange) -> list[tuple[str, str, Any]]:
    """(method, path, body) of each HTTP request of a call; the host is left out (ports differ per run)."""
    from urllib.parse import urlsplit

    return [(w.method, urlsplit(w.url).path, request_body(cassette, w)) for w in ex.wire or ()]


def normal_bodies(cassette: Cassette, rules: Rules = Rules()) -> dict[tuple[str, int], list[tuple[str, str, Any]]]:
    """Each call's HTTP requests as :func:`compare` sees them (ids and secrets aliased in the same order,
    volatile and ignored keys dropped): what ``replay show --normalized`` prints for the wire."""
    aliases, ignore = _Aliases(), rules.keys
    return {
        (role, ex.index): [(m, path, aliases.value(body, ignore)) for m, path, body in bodies(cassette, ex)]
        for role, xs in cassette.by_role().items()
        for ex in xs
        if ex.wire
    }


def compare(a: Cassette, b: Cassette, rules: Rules = Rules()) -> list[WireChange]:
    """Wire-body differences, per role and ordinal, for calls that have HTTP exchanges on both sides."""
    changes: list[WireChange] = []
    alias_a, alias_b = _Aliases(), _Aliases()
    ignore = rules.keys
    roles_b = b.by_role()
    for role, xs in a.by_role().items():
        for ea, eb in zip(xs, roles_b.get(role, [])):
            if not ea.wire or not eb.wire:
                continue
            wa, wb = bodies(a, ea), bodies(b, eb)
            if len(wa) != len(wb):
                changes.append(WireChange(role, ea.index, f"{len(wa)} HTTP requests → {len(wb)}", "request"))
            for (ma, pa, ba), (mb, pb, bb) in zip(wa, wb):
                if (ma, pa) != (mb, pb):
                    changes.append(WireChange(role, ea.index, "endpoint", "changed", f"{ma} {pa}", f"{mb} {pb}"))
                na, nb = alias_a.value(ba, ignore), alias_b.value(bb, ignore)
                for path, kind, before, after in _body_changes(na, nb):
                    full = f"{role}[{ea.index}].wire.{path}"
                    if not rules.ignores(full):
                        changes.append(WireChange(role, ea.index, path, kind, before, after))
    return changes

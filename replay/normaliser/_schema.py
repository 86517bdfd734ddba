"""Declared defaults of pydantic-ai's message, part and request-parameter classes.

Schema growth is not a change: when slim 2.59 added ``InstructionPart.on_change`` with the
default ``'rewrite'``, a 2.58 request (field absent) and a 2.59 request (field at its default)
say the same thing. The normaliser therefore drops a field whose value equals the default the
*recording version* declares. Those defaults are read from the installed classes (their
dataclass or pydantic fields, no hand list of names) and stored in the cassette header at
record time, so a cassette keeps the defaults of the version that wrote it.

Serialised form (``Header.schema_defaults``), kept small and JSON-only::

    {"roots": {"message": ["ModelRequest", "ModelResponse"], "parameters": [...], ...},
     "classes": {"InstructionPart": {"tag": ["part_kind", "instruction"],
                                     "defaults": {"on_change": "rewrite"},
                                     "nested": {"id": ["InstructionId"]}}, ...}}

``tag`` is the class's discriminator (a field typed ``Literal[x]`` defaulting to ``x``): it
tells which member of a union a serialised dict is. Only non-empty scalar defaults are kept
(empty ones already equal "missing" in the normaliser) and only classes that lead to one.
A header comes from an untrusted file: :func:`compile_schema` ignores whatever is malformed.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

SCHEMA_VERSION = 1
_ROOTS = {
    "message": ("pydantic_ai.messages", "ModelMessage"),
    "parameters": ("pydantic_ai.models", "ModelRequestParameters"),
    "usage": ("pydantic_ai.usage", "RequestUsage"),
}
"""What each cassette value is an instance of: messages, the request parameters blob, count_tokens usage."""


# --------------------------------------------------------------------------- reading the installed classes


def _fields(cls: type) -> Iterator[tuple[str, Any, Any]]:
    """(name, default or MISSING, annotation) of a dataclass or pydantic model."""
    if dataclasses.is_dataclass(cls):
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an unresolvable forward reference: defaults still count, nesting does not
            hints = {}
        for f in dataclasses.fields(cls):
            yield f.name, f.default, hints.get(f.name)
        return
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict):
        for name, info in model_fields.items():
            default = getattr(info, "default", dataclasses.MISSING)
            if type(default).__name__ == "PydanticUndefinedType":
                default = dataclasses.MISSING
            yield (getattr(info, "alias", None) or name), default, getattr(info, "annotation", None)


def _is_class(tp: Any) -> bool:
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or isinstance(getattr(tp, "model_fields", None), dict))


def _classes_in(tp: Any, depth: int = 0) -> list[type]:
    """Dataclasses and models a value annotated ``tp`` can hold: through unions, containers, aliases."""
    if depth > 12 or tp is None:
        return []
    if _is_class(tp):
        return [tp]
    value = getattr(tp, "__value__", None)  # `type X = ...` aliases
    if value is not None and type(tp).__name__ == "TypeAliasType":
        return _classes_in(value, depth + 1)
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        args = args[:1]
    elif origin is typing.Literal:
        return []
    elif isinstance(origin, type) and issubclass(origin, Mapping):
        args = args[1:]  # dict values, not keys
    out: list[type] = []
    for arg in args:
        for cls in _classes_in(arg, depth + 1):
            if cls not in out:
                out.append(cls)
    return out


def _is_scalar_default(value: Any) -> bool:
    """A default worth recording: JSON scalar and not already 'empty' to the normaliser."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return isinstance(value, str) and value != ""


def _tag(name: str, default: Any, annotation: Any) -> bool:
    return (
        isinstance(default, str)
        and typing.get_origin(annotation) is typing.Literal
        and typing.get_args(annotation) == (default,)
    )


def describe(roots: Mapping[str, list[type]]) -> dict[str, Any]:
    """The serialised schema of the classes reachable from ``roots`` (see the module docstring)."""
    classes: dict[str, dict[str, Any]] = {}
    todo = [cls for members in roots.values() for cls in members]
    seen: dict[str, type] = {}
    while todo:
        cls = todo.pop()
        name = cls.__name__
        if name in seen:
            continue
        seen[name] = cls
        spec: dict[str, Any] = {"defaults": {}, "nested": {}, "fields": []}
        for field_name, default, annotation in _fields(cls):
            spec["fields"].append(field_name)
            if _tag(field_name, default, annotation):
                spec["tag"] = [field_name, default]
                continue
            if default is not dataclasses.MISSING and _is_scalar_default(default):
                spec["defaults"][field_name] = default
            inner = _classes_in(annotation)
            if inner:
                spec["nested"][field_name] = [c.__name__ for c in inner]
                todo += inner
        classes[name] = spec
    _prune(classes, {c.__name__ for members in roots.values() for c in members})
    return {
        "version": SCHEMA_VERSION,
        "roots": {k: [c.__name__ for c in v if c.__name__ in classes] for k, v in roots.items()},
        "classes": classes,
    }


def _prune(classes: dict[str, dict[str, Any]], roots: frozenset[str] | set[str] = frozenset()) -> None:
    """Keep only classes with a default or leading to one; keep a tag only where a union needs it."""
    useful = {n for n, s in classes.items() if s["defaults"]}
    grew = True
    while grew:
        grew = False
        for name, spec in classes.items():
            if name not in useful and any(c in useful for cs in spec["nested"].values() for c in cs):
                useful.add(name)
                grew = True
    for name in list(classes):
        if name not in useful:
            del classes[name]
            continue
        spec = classes[name]
        spec["nested"] = {f: [c for c in cs if c in useful] for f, cs in spec["nested"].items()}
        spec["nested"] = {f: cs for f, cs in spec["nested"].items() if cs}
        if not spec["nested"]:
            del spec["nested"]
        if not spec["defaults"]:
            del spec["defaults"]
        if name not in roots:  # the declared fields only of the roots (a message): what a header can afford
            del spec["fields"]


def _root_classes(module: str, name: str) -> list[type]:
    import importlib

    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return []
    return _classes_in(obj)


@functools.cache
def installed_schema() -> dict[str, Any]:
    """Defaults of the installed pydantic-ai (read once per process; recorded in every header)."""
    return describe({key: _root_classes(*where) for key, where in _ROOTS.items()})


# --------------------------------------------------------------------------- applying


class ClassSpec:
    """One class: its defaults and which fields hold nested classes."""

    __slots__ = ("defaults", "nested", "undeclared")

    def __init__(self) -> None:
        self.defaults: dict[str, Any] = {}
        self.nested: dict[str, Choice] = {}
        self.undeclared: frozenset[str] = frozenset()
        """Fields only one of the two compared versions declares (:func:`merge`): left out of the comparison."""


class Choice:
    """The classes a value can be: tagged ones picked by discriminator, else the only untagged one."""

    __slots__ = ("tagged", "untagged")

    def __init__(self) -> None:
        self.tagged: dict[str, dict[Any, ClassSpec]] = {}
        self.untagged: ClassSpec | None = None

    def pick(self, value: dict[str, Any]) -> ClassSpec | None:
        for key, members in self.tagged.items():
            tag = value.get(key)
            if tag is not None:
                if isinstance(tag, (str, int)):
                    found = members.get(tag)
                    if found is not None:
                        return found
        return self.untagged


class Schema:
    """A compiled schema: one :class:`Choice` per root."""

    def __init__(self, roots: dict[str, Choice]) -> None:
        self.roots = roots
        self.token: bytes | None = None
        """A digest of the data compiled (set by ``schema_for``): two schemas with one token are the same."""

    def stamp_free(self, stamp: Callable[[str], bool]) -> bool:
        """Whether no class is picked by the value of a key ``stamp`` names (so a stamp's value never
        decides which defaults a value is normalised with)."""
        seen: set[int] = set()
        todo = list(self.roots.values())
        while todo:
            choice = todo.pop()
            if id(choice) in seen:
                continue
            seen.add(id(choice))
            if any(stamp(key) for key in choice.tagged):
                return False
            specs = [s for members in choice.tagged.values() for s in members.values()]
            specs += [choice.untagged] if choice.untagged is not None else []
            todo += [c for s in specs for c in s.nested.values()]
        return True

    def root(self, name: str) -> Choice | None:
        return self.roots.get(name)


EMPTY = Schema({})


def merge(own: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> dict[str, Any]:
    """``own`` with ``other``'s knowledge added where ``own`` has none (own defaults win).

    A cassette strips fields at the defaults of the version that wrote it; the other side's
    schema covers fields its own version never declared (e.g. an old cassette without a schema).
    A default the two versions declare differently is stripped on neither side: a request that
    left the field alone sends one value on one version and another on the other, a change.
    A field of a message class that only one of the two versions declares (``ModelResponse.failed_attempts``,
    new in slim 2.5x) is compared on neither side: the older version cannot hold it, so it read as a change
    in every cell across its introduction (``undeclared``; only where both sides list their fields).
    """
    own = own if isinstance(own, Mapping) else {}
    other = other if isinstance(other, Mapping) else {}
    classes: dict[str, Any] = {}
    declared: dict[str, Mapping[str, Any]] = {}
    fields: dict[str, list[set[str]]] = {}
    for src in (other, own):
        for name, spec in _mapping(src.get("classes")).items():
            if not isinstance(spec, Mapping):
                continue
            cur = classes.setdefault(name, {"defaults": {}, "nested": {}})
            if isinstance(spec.get("fields"), list):
                fields.setdefault(name, []).append({f for f in spec["fields"] if isinstance(f, str)})
            defaults = _mapping(spec.get("defaults"))
            theirs = declared.get(name)
            cur["defaults"].update(defaults)
            if theirs is not None:  # own's, after other's: drop what they declare differently
                for key, value in defaults.items():
                    if key in theirs and (type(theirs[key]), theirs[key]) != (type(value), value):
                        del cur["defaults"][key]
            declared[name] = defaults
            for f, cs in _mapping(spec.get("nested")).items():
                if isinstance(cs, list):
                    cur["nested"][f] = list(dict.fromkeys([*cur["nested"].get(f, []), *cs]))
            if isinstance(spec.get("tag"), list):
                cur["tag"] = spec["tag"]
    for name, (a, b) in ((n, f) for n, f in fields.items() if len(f) == 2 and own is not other):
        if a ^ b:  # a field one version never declared: schema growth, compared on neither side
            classes[name]["undeclared"] = sorted(a ^ b)
    roots: dict[str, list[Any]] = {}
    for src in (other, own):
        for key, members in _mapping(src.get("roots")).items():
            if isinstance(members, list):
                roots[key] = list(dict.fromkeys([*roots.get(key, []), *members]))
    return {"version": SCHEMA_VERSION, "roots": roots, "classes": classes}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def compile_schema(data: Mapping[str, Any] | None) -> Schema:
    """Turn a serialised schema into lookup structures; malformed entries are skipped, not fatal."""
    if not isinstance(data, Mapping):
        return EMPTY
    raw = _mapping(data.get("classes"))
    specs = {name: ClassSpec() for name, spec in raw.items() if isinstance(name, str) and isinstance(spec, Mapping)}
    for name, spec in specs.items():
        for key, value in _mapping(raw[name].get("defaults")).items():
            if isinstance(key, str) and _is_scalar_default(value):
                spec.defaults[key] = value
        undeclared = raw[name].get("undeclared")
        if isinstance(undeclared, list):
            spec.undeclared = frozenset(f for f in undeclared if isinstance(f, str))
    choices: dict[tuple[str, ...], Choice] = {}
    shared: list[tuple[ClassSpec, list[ClassSpec]]] = []

    def choice(names: Any) -> Choice | None:
        if not isinstance(names, list):
            return None
        members = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n in specs))
        if not members:
            return None
        found = choices.get(members)
        if found is not None:
            return found
        found = choices[members] = Choice()
        by_tag: dict[tuple[str, str | int], list[ClassSpec]] = {}
        untagged = []
        for n in members:
            tag = raw[n].get("tag")
            if isinstance(tag, list) and len(tag) == 2 and isinstance(tag[0], str) and isinstance(tag[1], (str, int)):
                by_tag.setdefault((tag[0], tag[1]), []).append(specs[n])
            else:
                untagged.append(specs[n])
        for (key, value), group in by_tag.items():
            if len(group) > 1:
                # Classes sharing a tag (ToolCallPart, LoadCapabilityCallPart): only what all declare counts.
                merged = ClassSpec()
                merged.defaults = {
                    k: v for k, v in group[0].defaults.items() if all(g.defaults.get(k, _NO) == v for g in group[1:])
                }
                shared.append((merged, group))
                group = [merged]
            found.tagged.setdefault(key, {})[value] = group[0]
        found.untagged = untagged[0] if len(untagged) == 1 else None
        return found

    for name, spec in specs.items():
        for key, names in _mapping(raw[name].get("nested")).items():
            c = choice(names)
            if isinstance(key, str) and c is not None:
                spec.nested[key] = c
    roots = {k: c for k, names in _mapping(data.get("roots")).items() if isinstance(k, str) and (c := choice(names)) is not None}
    for merged, group in shared:
        for g in group:
            for key, c in g.nested.items():
                merged.nested.setdefault(key, c)
    return Schema(roots)


_NO = object()


__all__ = ["EMPTY", "Schema", "compile_schema", "describe", "installed_schema", "merge"]

"""Fields pydantic-ai keeps in a request but never sends to a model.

A verdict compares what the model is sent. pydantic-ai documents these as never sent:

* ``metadata`` of a message, of a part, of a user prompt's ``TextContent`` and of a tool
  definition ("accessible by the application but not sent to the LLM"; ``ModelResponse.history_digest``
  leaves them out for the same reason: "changing them doesn't count as a change"). Harness
  capabilities put timings there (``prompt_injection.latency_ms``), so comparing them made every
  replay of such a scenario ``changed``.
* a tool definition's ``capability_id`` and an instruction part's ``id``: which capability
  contributed the tool or text. For a capability without an explicit ``id`` it is a run-local
  handle with a random suffix (``<repo_context:ec9382>``, new in every run), and a release that
  gives a capability an explicit id changes nothing the model sees.
* a tool definition's ``toolset_id``, ``unless_tool_kind`` and ``tool_kind``: which toolset a tool
  came from, and the typed-part bookkeeping pydantic-ai resolves before the request ("the tool left
  out is neither sent to the model nor callable"); the provider mappings send a tool's name,
  description, schema and strictness. Harness 0.60 stamped ``ToolOutputLimits``' reader tool with
  both kinds, which made every request of every older recording ``changed``. pydantic-ai's own
  kinds (:data:`CORE_KINDS`: OpenAI's mapping reads ``tool-search`` to decide where the tool goes)
  are kept, on definitions and parts alike.
* a response's ``workspace_ref`` ("Not sent to the model"): the workspace a run worked in, an absolute
  path that is a new temp directory in every run of a scenario using ``LocalWorkspace``.
* a tool call's or return's ``tool_kind`` other than a core kind: the agent graph stamps it on after
  the request from the tool definition's kind (above).

They are removed by position (message, part, content item, tool definition, instruction part),
never by key name alone, so a tool argument or a JSON-schema property called ``metadata`` or
``id`` is still compared. Each function returns its argument itself when there is nothing to
remove (the common case costs a few lookups).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def _without(value: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


_META = ("metadata",)
_MESSAGE = ("metadata", "workspace_ref")
_TOOL = ("metadata", "capability_id", "toolset_id", "unless_tool_kind", "tool_kind")
_INSTRUCTION = ("id",)

CORE_KINDS = frozenset({"tool-search", "capability-load"})
"""``tool_kind`` values pydantic-ai itself defines and maps (typed parts; a client-side tool search in
``models/openai.py``); any other kind is a capability's label."""


def core_kind(kind: Any) -> bool:
    return type(kind) is str and kind in CORE_KINDS  # any type: a cassette is untrusted input


def sent_part(part: Any) -> Any:
    """A message part as the model is sent it."""
    if type(part) is not dict:
        return part
    out = part
    if "metadata" in part:
        out = _without(part, _META)
    if part.get("tool_kind") is not None and not core_kind(part["tool_kind"]):
        out = _without(out, ("tool_kind",))
    kind = part.get("part_kind")
    if kind == "user-prompt":
        content = part.get("content")
        if type(content) is list and any(type(c) is dict and "metadata" in c and "kind" in c for c in content):
            content = [_without(c, _META) if type(c) is dict and "kind" in c else c for c in content]
            out = {**out, "content": content}
        if type(content) is list and len(content) == 1 and _plain_text(content[0]):
            out = {**out, "content": content[0]["content"]}
    elif kind == "instruction-baseline":
        blocks = part.get("instructions")
        if type(blocks) is list and any(type(b) is dict and "id" in b for b in blocks):
            out = {**out, "instructions": [_without(b, _INSTRUCTION) if type(b) is dict else b for b in blocks]}
    return out


_TEXT_KINDS = frozenset({"text", "text-content"})
"""``TextContent``'s kind: ``text-content`` in the slims that have the class (2.60 on)."""


def _plain_text(item: Any) -> bool:
    """A ``TextContent`` with nothing but its text: as the only item of a prompt, the model is sent what a
    plain string prompt sends. Harness 0.60 wraps a kept user message so (``[TextContent("U6",
    metadata=<its marker>)]``, "which the model reads the same way"), which read as ``rewrapped``."""
    return type(item) is dict and type(item.get("kind")) is str and item["kind"] in _TEXT_KINDS and type(item.get("content")) is str and \
        item.keys() <= {"kind", "content", "metadata"} and item.get("metadata") is None


def sent_message(message: Any) -> Any:
    """A serialised ``ModelRequest``/``ModelResponse`` without what the model is never sent."""
    if type(message) is not dict:
        return message
    parts = message.get("parts")
    new_parts = [sent_part(p) for p in parts] if type(parts) is list else []
    changed = type(parts) is list and any(a is not b for a, b in zip(new_parts, parts))
    if not changed and "metadata" not in message and "workspace_ref" not in message:
        return message
    out = _without(message, _MESSAGE) if "metadata" in message or "workspace_ref" in message else dict(message)
    if changed:
        out["parts"] = new_parts
    return out


_SETS = ("deferred_capability_ids", "revealed_tool_names", "introduced_tool_names")
"""``ModelRequestParameters`` fields declared ``set[str]`` (slim 2.62): a cassette recorded before the
recorder sorted them lists them in hash order, which a replay in another process does not repeat."""


def sent_parameters(parameters: Any) -> Any:
    """Serialised ``ModelRequestParameters`` without tool definitions' and instruction parts' bookkeeping,
    set-typed fields in one order."""
    if type(parameters) is not dict:
        return parameters
    out = parameters
    for key in _SETS:
        items = parameters.get(key)
        if type(items) is list and len(items) > 1 and all(type(x) is str for x in items) and items != sorted(items):
            if out is parameters:
                out = dict(parameters)
            out[key] = sorted(items)
    for key, drop in (("function_tools", _TOOL), ("output_tools", _TOOL), ("instruction_parts", _INSTRUCTION)):
        items = parameters.get(key)
        if type(items) is list and any(type(t) is dict and any(k in t for k in drop) for t in items):
            if out is parameters:
                out = dict(parameters)
            out[key] = [_sent_tool(t, drop) if type(t) is dict else t for t in items]
    return out


def _sent_tool(tool: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    out = _without(tool, drop)
    if core_kind(tool.get("tool_kind")):
        out["tool_kind"] = tool["tool_kind"]
    return out


_RESOLVED_MODES = frozenset({"tool", "native", "prompted"})


def thinks(settings: Any) -> bool:
    """Whether model settings ask the model to think (``thinking``, ``anthropic_thinking``,
    ``openai_reasoning_effort``…): there the mode an ``auto`` request resolves to can follow the request."""
    return type(settings) is dict and any(
        type(k) is str and ("thinking" in k or "reasoning" in k) and v not in (None, False) for k, v in settings.items()
    )


def as_auto(parameters: Any) -> Any:
    """Parameters whose output mode a run kept from its first request, as that ``auto`` request stated them.

    A structured ``output_type`` that picks no mode is sent as ``output_mode='auto'``; the model resolves
    it in ``prepare_request`` (``with_default_output_mode``: ``tool`` with ``allow_text_output=False`` for
    most profiles) before anything goes to the provider. Slim 2.58 resolves it once per run instead
    (``_keep_default_output_mode``) and hands every later request the first one's resolution, already
    applied: the same request, stated resolved. Returns None when ``parameters`` are no such resolution
    (another mode, or an ``allow_text_output`` that ``with_default_output_mode`` would not have set)."""
    if type(parameters) is not dict:
        return None
    mode = parameters.get("output_mode")
    if type(mode) is not str or mode not in _RESOLVED_MODES:
        return None
    if parameters.get("allow_text_output", True) is not (mode != "tool"):
        return None
    out = {k: v for k, v in parameters.items() if k != "allow_text_output"}
    out["output_mode"] = "auto"
    return out


def auto_stated(parameters: Any) -> Any:
    """Parameters as one ``auto`` request states them: a run's kept resolution (:func:`as_auto`) as the
    ``auto`` it was kept from, an ``auto`` request's ``allow_text_output=True`` (its default) left out."""
    resolved = as_auto(parameters)
    if resolved is not None:
        return resolved
    if type(parameters) is dict and parameters.get("output_mode") == "auto" and parameters.get("allow_text_output") is True:
        return {k: v for k, v in parameters.items() if k != "allow_text_output"}
    return parameters


def kept_modes(exchanges: Iterable[Any], parameters: Callable[[int], Any], settings: Callable[[int], Any]) -> set[int]:
    """The ``seq`` of each request whose parameters state the output mode its run kept (slim 2.58+).

    Slim 2.58 resolves a structured ``output_type``'s ``auto`` mode on a run's first request and hands the
    later requests of that run (same model) the resolution already applied (``tool``, ``allow_text_output=False``),
    where older slims sent ``auto`` and the model resolved it the same way in ``prepare_request`` before
    anything reached the provider: every tool-then-output run across 2.58 read ``changed``. A request of a run
    that never stated ``auto``, and one that thinks (there ``auto`` can resolve to another mode than the run's
    first request did), are not among them. ``parameters``/``settings``: a blob index to its value.
    """
    out: set[int] = set()
    auto: set[tuple[int, Any]] = set()
    for ex in exchanges:
        if ex.run is None or ex.parameters is None:
            continue
        params = parameters(ex.parameters)
        if type(params) is not dict:
            continue
        key = (ex.run, ex.model_name)
        if params.get("output_mode") == "auto":
            auto.add(key)
        elif key in auto and as_auto(params) is not None and not thinks(settings(ex.settings) if ex.settings is not None else None):
            out.add(ex.seq)
    return out

"""Normaliser: volatile fields and schema growth vanish, real content and pairing stay."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

from replay.cassette import Cassette, CassetteBuilder, Exchange, Header
from replay.normaliser import ANY_CLASS, Normaliser, Rules, normalise
from replay.normaliser._schema import compile_schema, describe, installed_schema, merge


def test_volatile_keys_are_dropped_from_pydantic_ais_values() -> None:
    n = Normaliser()
    got = n.value(
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "run_id": "abc",
            "conversation_id": "0190",
            "parts": [{"content": "hi", "timestamp": "x", "metadata": {"harness.created_at": "t", "keep": 1}}],
            "provider_response_id": "resp_1",
        },
        ANY_CLASS,
    )
    assert got == {"parts": [{"content": "hi", "metadata": {"keep": 1}}]}


def test_missing_field_equals_empty_default() -> None:
    n = Normaliser()
    old = {"parts": [{"content": "hi"}], "usage": {"input_tokens": 3}}
    new = {"parts": [{"content": "hi", "citations": None, "id": None}], "usage": {"input_tokens": 3, "cache_read_tokens": 0},
           "failed_attempts": [], "metadata": {}}
    assert n.value(old, ANY_CLASS) == Normaliser().value(new, ANY_CLASS)


def test_generated_tool_ids_are_aliased_consistently() -> None:
    n = Normaliser()
    call = {"part_kind": "tool-call", "tool_call_id": "pyd_ai_0123456789abcdef"}
    ret = {"part_kind": "tool-return", "tool_call_id": "pyd_ai_0123456789abcdef"}
    other = {"part_kind": "tool-call", "tool_call_id": "pyd_ai_fedcba9876543210"}
    assert n.value(call)["tool_call_id"] == n.value(ret)["tool_call_id"] == "<id#1>"
    assert n.value(other)["tool_call_id"] == "<id#2>"
    assert n.value({"tool_call_id": "tick-1"})["tool_call_id"] == "tick-1"  # user ids stay readable


def test_uuids_in_text_are_aliased() -> None:
    n = Normaliser()
    text = "id 123e4567-e89b-12d3-a456-426614174000 and again 123e4567-e89b-12d3-a456-426614174000"
    assert n.value(text) == "id <uuid#1> and again <uuid#1>"


def test_ignore_rules_by_key_and_by_path() -> None:
    rules = Rules.of(["usage", "*.parts[*].metadata", "main[*].settings"])
    n = Normaliser(rules)
    got = n.value({"usage": {"x": 1}, "parts": [{"content": "a", "metadata": {"m": 1}}]})
    assert got == {"parts": [{"content": "a", "metadata": {"m": 1}}]}  # paths are the differ's job
    assert rules.ignores("main[0].messages[2].parts[0].metadata")
    assert rules.ignores("main[3].settings.temperature")
    assert not rules.ignores("main[0].messages[2].parts[0].content")
    assert not rules.ignores("summarizing_compaction[0].settings")


# --------------------------------------------------------------------------- declared defaults (schema growth)




def _params(instruction: dict[str, object], schema: dict[str, object] | None) -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/s", schema_defaults=schema))
    params = {"function_tools": [], "output_mode": "text", "allow_text_output": True, "instruction_parts": [instruction]}
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", parameters=b.blob(params)))
    return b.cassette


def test_installed_schema_is_read_from_the_classes_not_a_list() -> None:
    schema = installed_schema()
    classes = schema["classes"]
    assert classes["InstructionPart"] == {"defaults": {"on_change": "rewrite"}, "tag": ["part_kind", "instruction"]}
    assert classes["ModelRequestParameters"]["defaults"] == {"output_mode": "text", "allow_text_output": True}
    assert classes["ModelRequestParameters"]["nested"]["instruction_parts"] == ["InstructionPart"]
    assert schema["roots"]["message"] == ["ModelRequest", "ModelResponse"]


def test_field_at_its_declared_default_equals_the_field_missing() -> None:
    old = _params({"content": "be brief", "part_kind": "instruction"}, None)  # a version before on_change
    new = _params({"content": "be brief", "on_change": "rewrite", "part_kind": "instruction"}, installed_schema())
    assert normalise(old).requests == normalise(new).requests
    changed = _params({"content": "be brief", "on_change": "append", "part_kind": "instruction"}, installed_schema())
    assert normalise(changed).requests["main"][0].body["parameters"]["instruction_parts"][0]["on_change"] == "append"


def test_an_empty_value_against_a_declared_non_empty_default_is_kept() -> None:
    """``allow_text_output`` defaults to True: False is a request that forbids text output, not a
    missing field (dropping every False made True vs False invisible once True was a default)."""
    n = Normaliser(schema=compile_schema(installed_schema()))
    forbids = {"function_tools": [], "output_mode": "tool", "allow_text_output": False}
    allows = {"function_tools": [], "output_mode": "tool", "allow_text_output": True}
    assert n.root(forbids, "parameters") == {"output_mode": "tool", "allow_text_output": False}
    assert n.root(allows, "parameters") == {"output_mode": "tool"}
    # Empty values of a field declaring another default are kept too; of one declaring none, dropped.
    schema = {"roots": {"message": ["_Part"]},
              "classes": {"_Part": {"defaults": {"mode": "old", "n": 3}, "tag": ["part_kind", "p"]}}}
    n = Normaliser(schema=compile_schema(schema))
    got = n.root({"part_kind": "p", "mode": "", "n": 0, "other": 0, "flag": False, "none": None}, "message")
    assert got == {"part_kind": "p", "mode": "", "n": 0}
    assert Normaliser().value(forbids, ANY_CLASS) == {"output_mode": "tool"}  # no schema known: False is the empty default


def test_defaults_apply_only_where_the_class_is() -> None:
    # a tool's arguments that happen to hold on_change='rewrite' are the user's data, not a default
    n = Normaliser(schema=compile_schema(installed_schema()))
    message = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"on_change": "rewrite"}}]}
    assert n.root(message, "message")["parts"][0]["args"] == {"on_change": "rewrite"}
    request = {"kind": "request", "state": "complete", "parts": [{"part_kind": "system-prompt", "content": "x", "scope": "conversation"}]}
    assert n.root(request, "message") == {"kind": "request", "parts": [{"part_kind": "system-prompt", "content": "x"}]}


@dataclasses.dataclass
class _Part:
    content: str
    mode: str = "old"
    part_kind: Literal["p"] = "p"


def test_each_side_keeps_its_own_defaults_and_borrows_the_others() -> None:
    old = describe({"message": [_Part]})
    # a root class also lists its declared fields (see test_a_response_field_the_other_version_never_declared…)
    assert old["classes"]["_Part"] == {"defaults": {"mode": "old"}, "tag": ["part_kind", "p"], "fields": ["content", "mode", "part_kind"]}
    new = {"roots": {"message": ["_Part"]}, "classes": {"_Part": {"defaults": {"mode": "new", "extra": "x"}, "tag": ["part_kind", "p"]}}}
    mine = merge(old, new)
    # the other's fields added; a default declared differently is neither's (see the next test)
    assert mine["classes"]["_Part"]["defaults"] == {"extra": "x"}
    n = Normaliser(schema=compile_schema(mine))
    assert n.root({"part_kind": "p", "content": "c", "extra": "x"}, "message") == {"part_kind": "p", "content": "c"}
    assert n.root({"part_kind": "p", "content": "c", "mode": "new"}, "message")["mode"] == "new"
    assert n.root({"part_kind": "q", "content": "c", "extra": "x"}, "message")["extra"] == "x"  # another class


def test_a_default_the_two_versions_declare_differently_is_a_change() -> None:
    """A request that leaves ``mode`` alone sends 'old' on one version and 'new' on the other."""
    a = {"roots": {"message": ["_Part"]}, "classes": {"_Part": {"defaults": {"mode": "old", "same": 1}, "tag": ["part_kind", "p"]}}}
    b = {"roots": {"message": ["_Part"]}, "classes": {"_Part": {"defaults": {"mode": "new", "same": 1}, "tag": ["part_kind", "p"]}}}
    for own, other in ((a, b), (b, a)):
        assert merge(own, other)["classes"]["_Part"]["defaults"] == {"same": 1}
    side_a = Normaliser(schema=compile_schema(merge(a, b))).root({"part_kind": "p", "mode": "old", "same": 1}, "message")
    side_b = Normaliser(schema=compile_schema(merge(b, a))).root({"part_kind": "p", "mode": "new", "same": 1}, "message")
    assert (side_a, side_b) == ({"part_kind": "p", "mode": "old"}, {"part_kind": "p", "mode": "new"})
    flag = {"roots": {"message": ["_Part"]}, "classes": {"_Part": {"defaults": {"on": True}, "tag": ["part_kind", "p"]}}}
    one = {"roots": {"message": ["_Part"]}, "classes": {"_Part": {"defaults": {"on": 1}, "tag": ["part_kind", "p"]}}}
    assert merge(flag, one)["classes"]["_Part"]["defaults"] == {}  # True and 1 are not the same default
    assert merge(a, a)["classes"]["_Part"]["defaults"] == {"mode": "old", "same": 1}


def test_a_malformed_schema_in_a_header_is_ignored_not_fatal() -> None:
    for junk in (None, [], {"classes": 3}, {"classes": {"X": {"defaults": [1], "nested": {"f": "Y"}, "tag": 5}}, "roots": {"message": "X"}},
                 {"classes": {"A": {"nested": {"f": ["A"]}, "defaults": {"d": "v"}}}, "roots": {"message": ["A", 7]}},
                 {"classes": {"A": {"fields": 5, "undeclared": {"x": 1}}}, "roots": {"message": ["A"]}}):
        n = Normaliser(schema=compile_schema(junk))  # type: ignore[arg-type]
        assert n.root({"f": {"f": {"d": "v"}}, "d": "w"}, "message") is not None


def test_uuid_prefilter_finds_every_uuid_the_full_pattern_finds() -> None:
    """The cheap checks before the uuid regex never hide one (random texts dense in hyphens and hex)."""
    import random

    from replay.normaliser import _UUID, Aliases

    rng = random.Random(7)
    alphabet = "0123456789abcdef-- xg\n"
    found = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        if rng.random() < 0.3:
            at = rng.randint(0, len(text))
            text = text[:at] + "01a23008-f6b0-7361-839e-013b054dfe42" + text[at:]
        expected = _UUID.sub(lambda m: "<uuid>", text)
        got = Aliases().text(text)
        assert (got == text) == (expected == text), text
        found += expected != text
    assert found > 40  # a uuid glued to hex digits is no word-bounded uuid: most insertions are not found


def test_what_the_model_is_never_sent_is_dropped_by_position_only() -> None:
    """``metadata`` of messages, parts, prompt content and tools, a tool's ``capability_id`` and an instruction
    part's ``id`` go; a tool argument, a tool return's content or a JSON-schema property of those names stays."""
    from replay.normaliser._unsent import sent_message, sent_parameters

    message = {
        "kind": "request", "metadata": {"pydantic_ai": {"pin": 1}},
        "parts": [
            {"part_kind": "tool-return", "tool_name": "t", "content": {"metadata": "kept", "id": 3},
             "metadata": {"latency_ms": 0.1}},
            {"part_kind": "user-prompt", "content": ["plain", {"kind": "text-content", "content": "hi", "metadata": {"origin": "x"}}]},
            {"part_kind": "instruction-baseline", "instructions": [{"content": "be brief", "id": {"source": {"id": "<c:ab12cd>"}}}]},
        ],
    }
    response = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "save", "args": {"metadata": {"a": 1}, "id": 2}}]}
    assert sent_message(message) == {
        "kind": "request",
        "parts": [
            {"part_kind": "tool-return", "tool_name": "t", "content": {"metadata": "kept", "id": 3}},
            {"part_kind": "user-prompt", "content": ["plain", {"kind": "text-content", "content": "hi"}]},
            {"part_kind": "instruction-baseline", "instructions": [{"content": "be brief"}]},
        ],
    }
    assert sent_message(response) is response  # nothing to drop: the same object, no copy
    schema = {"type": "object", "properties": {"metadata": {"type": "object"}, "capability_id": {"type": "string"}}}
    parameters = {
        "function_tools": [{"name": "save", "parameters_json_schema": schema, "capability_id": "<clock:9f3a1b>", "metadata": {"k": 1}}],
        "output_tools": [{"name": "final_result", "capability_id": None}],
        "instruction_parts": [{"content": "Use save.", "id": {"source": {"id": "<clock:9f3a1b>"}}, "name": "usage"}],
        "allow_text_output": True,
    }
    assert sent_parameters(parameters) == {
        "function_tools": [{"name": "save", "parameters_json_schema": schema}],
        "output_tools": [{"name": "final_result"}],
        "instruction_parts": [{"content": "Use save.", "name": "usage"}],
        "allow_text_output": True,
    }
    assert parameters["function_tools"][0]["capability_id"] == "<clock:9f3a1b>"  # the cassette's own data untouched


def test_a_tools_kinds_and_toolset_are_bookkeeping_but_tool_search_is_sent() -> None:
    """pydantic-ai resolves ``unless_tool_kind`` before the request and promotes parts by ``tool_kind``;
    the one kind a provider mapping reads (OpenAI's client-side ``tool-search``) stays."""
    from replay.normaliser._unsent import sent_parameters

    parameters = {"function_tools": [
        {"name": "read", "toolset_id": "<agent>", "tool_kind": "limits.read", "unless_tool_kind": "fs.read_file"},
        {"name": "search", "toolset_id": "search", "tool_kind": "tool-search", "unless_tool_kind": None},
    ]}
    assert sent_parameters(parameters) == {"function_tools": [{"name": "read"}, {"name": "search", "tool_kind": "tool-search"}]}


def test_normalise_drops_unsent_fields_of_messages_and_parameters() -> None:
    b = CassetteBuilder(Header(scenario_id="unit/s"))
    req = {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": "5", "metadata": {"ms": 1.5}}]}
    params = {"function_tools": [{"name": "t", "capability_id": "<c:123abc>"}]}
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([req]),
                                         parameters=b.blob(params)))
    body = normalise(b.cassette).requests["main"][0].body
    assert body["messages"][0]["parts"][0] == {"part_kind": "tool-return", "tool_name": "t", "content": "5"}
    assert body["parameters"]["function_tools"] == [{"name": "t"}]


def test_a_setting_of_zero_or_false_is_a_value_not_unset() -> None:
    """temperature=0 and parallel_tool_calls=False were dropped as "empty": a run that stopped setting them
    (the provider's defaults: temperature 1, parallel calls on) replayed SAME."""
    from replay.differ import diff

    def with_settings(settings: dict) -> Cassette:
        b = CassetteBuilder(Header(scenario_id="unit/s"))
        req = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
        b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([req]),
                                             settings=b.blob(settings)))
        return b.cassette

    chosen = with_settings({"temperature": 0.0, "parallel_tool_calls": False, "seed": 0, "stop_sequences": []})
    assert normalise(chosen).requests["main"][0].body["settings"] == {
        "temperature": 0.0, "parallel_tool_calls": False, "seed": 0, "stop_sequences": []}
    d = diff(chosen, with_settings({}))
    assert d.changed and "temperature" in str(d.requests[0].changes)
    assert not diff(with_settings({"temperature": None}), with_settings({})).changed  # None is unset


def test_stamps_the_agent_graph_adds_after_the_request_are_not_sent() -> None:
    """A response's ``workspace_ref`` (a temp dir's absolute path, new in every run) and a part's ``tool_kind``
    from a capability's tool definition: neither reaches the model; a core kind selects a typed part and stays."""
    from replay.normaliser._unsent import sent_message

    response = {"kind": "response", "workspace_ref": {"id": "/tmp/ws-abc123"}, "parts": [
        {"part_kind": "tool-call", "tool_name": "read_tool_result", "args": {}, "tool_kind": "tool_output_limits.read_tool_result"},
        {"part_kind": "tool-call", "tool_name": "search_tools", "args": {}, "tool_kind": "tool-search"},
    ]}
    assert sent_message(response) == {"kind": "response", "parts": [
        {"part_kind": "tool-call", "tool_name": "read_tool_result", "args": {}},
        {"part_kind": "tool-call", "tool_name": "search_tools", "args": {}, "tool_kind": "tool-search"},
    ]}


def test_a_hostile_tool_kind_of_any_type_is_dropped_not_a_crash() -> None:
    """`make reliability` put a list and a dict where a kind is text: set membership raised TypeError
    (`show --normalized`, `diff` and `run` tracebacks)."""
    from replay.normaliser._unsent import sent_message, sent_parameters
    from replay.replayer import _without_part_kinds

    for kind in ([1], {"a": 1}, 3, "tool-search"):
        part = {"part_kind": "tool-call", "tool_name": "t", "tool_kind": kind}
        sent = sent_message({"kind": "response", "parts": [part]})["parts"][0]
        assert ("tool_kind" in sent) == (kind == "tool-search")
        params = sent_parameters({"function_tools": [{"name": "t", "tool_kind": kind}]})
        assert ("tool_kind" in params["function_tools"][0]) == (kind == "tool-search")
        assert ("tool_kind" in _without_part_kinds(part)) == (kind == "tool-search")


def test_the_users_values_are_compared_as_they_are() -> None:
    """Tool arguments, a tool's JSON schema, what a tool returned, the outcome and observations are the user's:
    ``0``, ``False``, ``None`` and keys named like pydantic-ai's stamps (``duration``, ``model_id``) there are what
    the model or the run saw. Dropped as "empty defaults" and "volatile keys", a tool returning ``0`` instead
    of ``None``, ``seconds`` becoming ``milliseconds`` in a parameter's description and an outcome
    ``{"is_valid": False}`` becoming ``None`` all replayed SAME."""
    n = Normaliser(schema=compile_schema(installed_schema()))
    call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "wait", "tool_call_id": "c1",
                                          "args": {"duration": 30, "model_id": "m", "recursive": False, "offset": 0, "note": None}}]}
    assert n.root(call, "message")["parts"][0]["args"] == {"duration": 30, "model_id": "m", "recursive": False, "offset": 0, "note": None}
    ret = {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "count", "tool_call_id": "c1", "content": 0}]}
    none = {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "count", "tool_call_id": "c1", "content": None}]}
    assert n.root(ret, "message") != n.root(none, "message")
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"duration": {"type": "integer", "minimum": 0, "default": 0, "description": "seconds"}}}
    params = {"function_tools": [{"name": "wait", "parameters_json_schema": schema}], "output_mode": "text"}
    assert n.root(params, "parameters")["function_tools"][0]["parameters_json_schema"] == schema
    assert n.value({"is_valid": False}) == {"is_valid": False} != n.value({"is_valid": None})
    # a pydantic-ai message the scenario returned (``all_messages()``) still loses its stamps
    returned = [{"kind": "response", "timestamp": "2026-12-01T00:00:00Z", "run_id": "r",
                 "parts": [{"part_kind": "text", "content": "hi", "id": None}]}]
    assert n.value(returned) == [{"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]}]


def test_what_the_users_values_hold_of_pydantic_ais_own_is_normalised_as_pydantic_ais() -> None:
    """An `AgentRunResult` returned (its private `_state` gained empty fields between slims: `changed`
    across versions), a message observed with a part's `metadata` (a timing, never sent), a retry's
    validation errors (their `input` of 0 or None is what the model is sent back)."""
    n = Normaliser(schema=compile_schema(installed_schema()))
    old = {"output": "done", "_state": {"run_step": 2, "default_output_modes": {}}, "_output_tool_name": None}
    new = {"output": "done", "_state": {"run_step": 2, "default_output_modes": None}}
    assert n.value(old) == Normaliser().value(new) == {"output": "done", "_state": {"run_step": 2}}
    timed = [{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": "v",
                                            "metadata": {"latency_ms": 202}}]}]
    other = [{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": "v",
                                            "metadata": {"latency_ms": 844}}]}]
    assert n.value(timed) == Normaliser().value(other)

    def retry(value: object) -> object:
        part = {"part_kind": "retry-prompt", "tool_name": "get", "tool_call_id": "c1",
                "content": [{"type": "greater_than_equal", "loc": ["n"], "msg": "Input should be >= 1", "input": value}]}
        return Normaliser().root({"kind": "request", "parts": [part]}, "message")

    assert retry(0) != retry(None) != retry("")


def test_a_hostile_content_item_kind_is_no_crash() -> None:
    """`make reliability`: a user-prompt item whose `kind` is a list reached a set membership (TypeError)."""
    from replay.normaliser._unsent import sent_part

    part = {"part_kind": "user-prompt", "content": [{"kind": ["text"], "content": "x"}]}
    assert sent_part(part) is part


def test_a_hostile_part_kind_is_no_crash() -> None:
    """`make reliability`: a part whose `part_kind` is a mapping reached a set membership (TypeError)."""
    n = Normaliser(schema=compile_schema(installed_schema()))
    got = n.root({"kind": "request", "parts": [{"part_kind": {"x": 1}, "content": 0}]}, "message")
    assert got == {"kind": "request", "parts": [{"part_kind": {"x": 1}}]}
    assert n.value({1: "a", "_p": None, "b": 0}) == {1: "a", "b": 0}


def test_tool_arguments_held_as_json_text_are_the_object_they_spell() -> None:
    """Regression: a streamed call keeps its arguments as the text that arrived, a whole response's as a
    dict; one call recorded both ways was `changed`, printed `{"a": 1, "b": 2} → {"a": 1, "b": 2}`."""
    call = {"part_kind": "tool-call", "tool_name": "add", "tool_call_id": "c1"}
    as_text = Normaliser().value({**call, "args": '{"b": 2,  "a": 1}'}, ANY_CLASS)
    assert as_text == Normaliser().value({**call, "args": {"a": 1, "b": 2}}, ANY_CLASS)
    assert as_text["args"] == {"a": 1, "b": 2}


def test_tool_arguments_that_are_not_one_json_object_stay_text() -> None:
    deep = "{" + '"a":{' * 40 + "}" * 41
    for text in ['{"a": 1', "[1, 2]", "", '{"a": NaN}', '{"a": ' + "9" * 5000 + "}", deep, "plain words"]:
        got = Normaliser().value({"part_kind": "tool-call", "tool_name": "t", "args": text}, ANY_CLASS)
        assert got.get("args", "") == text, text



def _http_error_cassette(type_: str, attributes: dict[str, object], said: str = "boom") -> Cassette:
    from replay.cassette import ErrorInfo, Outcome

    message = f"status_code: 500, model_name: gpt-4o-mini, body: {{'message': '{said}'}}"
    b = CassetteBuilder(Header(scenario_id="unit/s"))
    error = ErrorInfo(type=type_, message=message, attributes={"status_code": 500, "model_name": "gpt-4o-mini", **attributes})
    req = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([req]), error=error))
    b.cassette.outcome = Outcome(status="error", error=error)
    return b.cassette


def test_a_provider_http_error_is_one_error_whatever_slims_class_for_it() -> None:
    """Slim 2.60+ raises a 500 as ``ModelServerError`` (also a ``ModelHTTPError``), older slims as a plain
    ``ModelHTTPError``: the same answer to the same request, which made every matrix cell across 2.60 of a
    scenario that met a provider error ``changed``. The status is still compared (the message holds it)."""
    from replay.differ import diff

    new = _http_error_cassette("pydantic_ai.exceptions.ModelServerError", {"provider_error_code": None})
    old = _http_error_cassette("pydantic_ai.exceptions.ModelHTTPError", {})
    d = diff(new, old)
    assert not d.changed, d
    assert diff(new, _http_error_cassette("pydantic_ai.exceptions.UnexpectedModelBehavior", {})).changed


def test_a_request_id_in_a_providers_error_message_is_not_a_change() -> None:
    """OpenAI's 500 says "(Please include the request ID req_<32 hex> in your message.)", Anthropic's error
    bodies carry ``req_011C…``: new on every call, so two recordings of one unchanged scenario that met the
    error were ``changed`` (and ``--check-determinism`` blamed the scenario)."""
    from replay.differ import diff

    def said(request_id: str) -> Cassette:
        text = f"The server had an error. (Please include the request ID {request_id} in your message.)"
        return _http_error_cassette("pydantic_ai.exceptions.ModelServerError", {}, text)

    assert not diff(said("req_c1f6ab4c9d57ec054b1d9a3422d55f13"), said("req_b58479ff9f51529300ec2fca7572f093")).changed
    assert not diff(said("req_011CSHoEeqs5C35K2UUqR7Fy"), said("req_011CV9x2Lm7QpRtYz3AbCdEf")).changed
    assert diff(said("req_c1f6ab4c9d57ec054b1d9a3422d55f13"), _http_error_cassette(
        "pydantic_ai.exceptions.ModelServerError", {}, "Another error.")).changed


def test_an_objects_address_in_text_or_an_error_message_is_not_a_change() -> None:
    """A default repr quotes where the object lives (``<app.Widget object at 0x7f3a…>``): a tool returning
    ``repr(error)`` to the model, or an error the scenario declared, named another address in every process,
    so a replay on the recording's own version read ``changed`` (and ``--check-determinism`` blamed the
    scenario). What is around the address is still compared."""
    from replay.differ import diff

    n = Normaliser()
    assert n.value("error: KeyError(<app.Widget object at 0x7f59f914f550>)") == n.value(
        "error: KeyError(<app.Widget object at 0x7f612cacf590>)")
    assert n.value({"part_kind": "tool-return", "content": "<function f at 0x10a2b3c4d>"})["content"] == "<function f at 0x<address>>"
    assert n.value("one at 0xface of the die") == "one at 0xface of the die"  # not closed by ">": no repr
    assert n.value("<app.Widget object at 0x7f59f914f550>") != n.value("<app.Gadget object at 0x7f59f914f550>")

    def raised(message: str) -> Cassette:
        return _http_error_cassette("builtins.ValueError", {}, message)

    assert not diff(raised("cannot handle <app.Widget object at 0x7fae6e95e1d0>"),
                    raised("cannot handle <app.Widget object at 0x7f090d519d10>")).changed
    assert diff(raised("cannot handle <app.Widget object at 0x7fae6e95e1d0>"),
                raised("cannot handle <app.Gadget object at 0x7fae6e95e1d0>")).changed


def test_a_folder_tempfile_named_is_aliased_like_a_uuid() -> None:
    """``TemporaryDirectory()`` names its folder ``tmp`` and eight random characters: an agent told to work
    there ("You work in /tmp/tmpwajeavgh.") or a tool quoting a file in it was ``changed`` on every replay.
    One folder quoted twice is one alias, two folders two."""
    from replay.differ import diff

    n = Normaliser()
    assert n.value("You work in /tmp/tmpwajeavgh.") == "You work in /tmp/<tmp#1>."
    assert n.value({"part_kind": "tool-return", "content": "/tmp/tmpwajeavgh/notes.txt /tmp/tmpvjeq_gq_/a"})[
        "content"] == "/tmp/<tmp#1>/notes.txt /tmp/<tmp#2>/a"
    assert n.value("/srv/tmpfiles/x and tmpwajeavgh") == "/srv/tmpfiles/x and tmpwajeavgh"  # no tempfile name there

    def raised(message: str) -> Cassette:
        return _http_error_cassette("builtins.FileNotFoundError", {}, message)

    assert not diff(raised("No such file: '/tmp/tmpwajeavgh/missing.txt'"), raised("No such file: '/tmp/tmpvjeq_gq_/missing.txt'")).changed
    assert diff(raised("No such file: '/tmp/tmpwajeavgh/missing.txt'"), raised("No such file: '/tmp/tmpvjeq_gq_/other.txt'")).changed


def test_a_scenario_modules_hash_named_in_text_is_not_a_change() -> None:
    """The scenario file's module is named ``replay_scenarios.<place>_<hash of its path and bytes>``: a default
    repr of the scenario's own class (a tool returning ``repr(error)``, an error message) sent that hash, so
    editing another scenario of the file, or a checkout in another folder, made a replay of the unchanged
    scenario on its own version ``changed``. The module's place and the class are still compared."""
    from replay.differ import diff

    n = Normaliser()
    before = "KeyError(<replay_scenarios.errs_87e4f9d034cfe3ea.Widget object at 0x7f59f914f550>)"
    after = "KeyError(<replay_scenarios.errs_60d1657cfc90c40b.Widget object at 0x7f612cacf590>)"
    assert n.value(before) == n.value(after) == "KeyError(<replay_scenarios.errs.Widget object at 0x<address>>)"
    assert n.value("replay_scenarios.grp.tools_0123456789abcdef.Gadget") == "replay_scenarios.grp.tools.Gadget"
    assert n.value(before) != n.value(after.replace("Widget", "Gadget"))
    assert n.value(before) != n.value(after.replace("errs_", "other_"))

    def raised(message: str) -> Cassette:
        return _http_error_cassette("builtins.ValueError", {}, message)

    assert not diff(raised("cannot handle replay_scenarios.errs_87e4f9d034cfe3ea.Widget"),
                    raised("cannot handle replay_scenarios.errs_60d1657cfc90c40b.Widget")).changed


def test_a_process_id_the_shell_tool_quotes_is_aliased() -> None:
    """The harness's ``Shell`` tool answers every command with its supervisor's PID (in the text, in the kill
    command, in the job's status JSON): a coding agent that ran one command was ``changed`` on every replay.
    One process quoted three times is one alias; other numbers stay."""
    n = Normaliser()

    def shell(pid: int) -> str:
        return (f"5\nPID: {pid} (supervisor; use `kill -- -{pid}` to stop the whole process tree)\n"
                f"Output: /x/output.log\n{{\"pid\": {pid}, \"exit_code\": 0}}")

    assert n.value({"part_kind": "tool-return", "content": shell(30177)})["content"] == (
        "5\nPID: <pid#1> (supervisor; use `kill -- -<pid#1>` to stop the whole process tree)\n"
        "Output: /x/output.log\n{\"pid\": <pid#1>, \"exit_code\": 0}")
    assert Normaliser().value(shell(30177)) == Normaliser().value(shell(30490))
    assert n.value("exit code 30177, 2 files") == "exit code 30177, 2 files"


# --------------------------------------------------------------------------- a run's kept output mode (slim 2.58)


def _run_of_two(first: dict[str, object], later: dict[str, object], *, settings: dict[str, object] | None = None,
                runs: tuple[int, int] = (0, 0)) -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/s", schema_defaults=installed_schema()))
    s = b.blob(settings) if settings is not None else None
    for seq, (params, run) in enumerate(zip((first, later), runs)):
        b.cassette.exchanges.append(Exchange(seq=seq, role="main", index=seq, kind="request", model_name="function:m:",
                                             parameters=b.blob(params), settings=s, run=run))
    return b.cassette


_OUT = {"function_tools": [{"name": "lookup"}], "output_tools": [{"name": "final_result"}]}
_AUTO = {**_OUT, "output_mode": "auto", "allow_text_output": True}
_KEPT = {**_OUT, "output_mode": "tool", "allow_text_output": False}


def test_a_runs_kept_output_mode_is_the_auto_its_model_resolved_alike() -> None:
    """Slim 2.58 hands a run's later requests the mode its first ``auto`` request resolved to (``tool``,
    ``allow_text_output=False``); older slims sent ``auto`` and the model's ``prepare_request`` resolved it
    to the same before anything was sent. Every tool-then-output run across 2.58 read ``changed``."""
    old, new = normalise(_run_of_two(_AUTO, _AUTO)), normalise(_run_of_two(_AUTO, _KEPT))
    assert [r.body for r in old.requests["main"]] == [r.body for r in new.requests["main"]]
    assert [r.digest for r in old.requests["main"]] == [r.digest for r in new.requests["main"]]


def test_an_output_mode_not_kept_from_an_auto_request_is_still_compared() -> None:
    """Only a resolution of the same run's ``auto``: a run that states ``tool`` from its first request
    (``ToolOutput``), another run's, a request that thinks, or a mode with the wrong ``allow_text_output``."""
    auto = [r.body for r in normalise(_run_of_two(_AUTO, _AUTO)).requests["main"]]
    for cassette in (
        _run_of_two(_KEPT, _KEPT),
        _run_of_two(_AUTO, _KEPT, runs=(0, 1)),
        _run_of_two(_AUTO, {**_OUT, "output_mode": "tool", "allow_text_output": True}),
        _run_of_two(_AUTO, {**_OUT, "output_mode": "native", "allow_text_output": False}),
    ):
        assert [r.body for r in normalise(cassette).requests["main"]] != auto
    thinking = {"thinking": "high"}
    assert [r.body for r in normalise(_run_of_two(_AUTO, _KEPT, settings=thinking)).requests["main"]] != \
        [r.body for r in normalise(_run_of_two(_AUTO, _AUTO, settings=thinking)).requests["main"]]


def _fallback_cassette(error: str) -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/fallback"))
    req = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
    attempt = {"model_name": "gpt-bad", "provider_name": "openai", "outcome": "error", "error": error,
               "timestamp": "2026-12-02T13:08:43.180470Z", "duration": "PT0.04587S", "usage": None}
    resp = {"kind": "response", "parts": [{"part_kind": "text", "content": "recovered"}], "model_name": "gpt-4o-mini",
            "failed_attempts": [attempt]}
    b.cassette.exchanges.append(
        Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([req]), response=b.message(resp)))
    return b.cassette


def test_a_fallback_attempts_http_error_is_one_error_whatever_slims_class_for_it() -> None:
    """A ``FallbackModel`` notes the error each model it moved on from raised, as ``'Class: message'`` on the
    response (``failed_attempts[].error``): slim 2.60+ names a provider's 500 ``ModelServerError``, older slims
    ``ModelHTTPError``, so every matrix cell across 2.60 of a scenario whose fallback met a 500 read
    ``changed`` (``main[0].response.failed_attempts[0].error``). The status and body are still compared, and so
    is an error of another kind."""
    from replay.differ import diff

    said = "status_code: 500, model_name: gpt-bad, body: {'message': 'internal error'}"
    new = _fallback_cassette(f"ModelServerError: {said}")
    assert not diff(new, _fallback_cassette(f"ModelHTTPError: {said}")).changed
    assert not diff(_fallback_cassette(f"ModelRateLimitError: {said}"), _fallback_cassette(f"ModelHTTPError: {said}")).changed
    assert diff(new, _fallback_cassette(f"ModelHTTPError: {said.replace('500', '503')}")).changed
    assert diff(new, _fallback_cassette("ModelConnectionError: Connection error.")).changed
    req_a = "The server had an error. (Please include the request ID req_c1f6ab4c9d57ec054b1d9a3422d55f13 in your message.)"
    req_b = req_a.replace("c1f6ab4c9d57ec054b1d9a3422d55f13", "b58479ff9f51529300ec2fca7572f093")
    assert not diff(_fallback_cassette(f"ModelServerError: {said} {req_a}"), _fallback_cassette(f"ModelServerError: {said} {req_b}")).changed


def _tool_call_cassette(call_id: str) -> Cassette:
    b = CassetteBuilder(Header(scenario_id="unit/ids"))
    req = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Weather?"}]}
    call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "get_weather", "args": {"city": "Paris"},
                                           "tool_call_id": call_id}]}
    ret = {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "get_weather", "content": "sunny",
                                         "tool_call_id": call_id}]}
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([req]), response=b.message(call)))
    b.cassette.exchanges.append(Exchange(seq=1, role="main", index=1, kind="request", messages=b.messages([req, call, ret])))
    return b.cassette


def test_short_provider_tool_call_ids_are_generated_ids_as_on_the_wire() -> None:
    """Ollama's OpenAI-compatible API names a tool call ``call_`` and eight random letters and digits
    (``call_k3j9x2ab``): the wire comparison aliased them, the message level only from twenty on, so two
    recordings of one deterministic scenario against it were ``DIFFERENT`` (``--check-determinism`` blamed
    the scenario: main[0] differs at response.parts[0].tool_call_id). Which call answers which is still compared."""
    from replay.differ import diff

    assert not diff(_tool_call_cassette("call_k3j9x2ab"), _tool_call_cassette("call_p0q7z1mn")).changed
    assert not diff(_tool_call_cassette("toolu_k3j9x2ab"), _tool_call_cassette("toolu_p0q7z1mn")).changed
    crossed = _tool_call_cassette("call_k3j9x2ab")
    other = crossed.messages[-1]["parts"][0]
    crossed.messages[-1] = {**crossed.messages[-1], "parts": [{**other, "tool_call_id": "call_zzzz9999"}]}
    assert diff(_tool_call_cassette("call_k3j9x2ab"), crossed).changed


def test_a_response_field_the_other_version_never_declared_is_not_a_change() -> None:
    """Slim 2.56+ notes on a ``FallbackModel``'s response the models it moved on from (``failed_attempts``);
    2.54's ``ModelResponse`` has no such field, so the same fallback, served the same answers, read
    ``changed`` (``- main[0].response.failed_attempts: [...]``) in every matrix cell across it. A field only one
    side's version declares is left out; where both declare it, it is compared, and a header that does not
    list its fields (an older cassette) compares as before."""
    import copy

    from replay.differ import diff

    said = "ModelServerError: status_code: 500, model_name: gpt-bad, body: {'message': 'internal error'}"
    new = _fallback_cassette(said)
    new.header.schema_defaults = installed_schema()

    def older(fields: bool = True) -> Cassette:
        old = _fallback_cassette(said)
        response = old.messages[old.exchanges[0].response]  # type: ignore[index]
        del response["failed_attempts"]
        schema = copy.deepcopy(installed_schema())
        spec = schema["classes"]["ModelResponse"]
        spec["fields"] = [f for f in spec.get("fields", []) if f != "failed_attempts"]
        if not fields:
            del spec["fields"]
        old.header.schema_defaults = schema
        return old

    assert not diff(new, older()).changed
    assert not diff(older(), new).changed
    declared = older()
    declared.header.schema_defaults = installed_schema()  # the same version: the fallback did not happen
    assert diff(new, declared).changed
    assert diff(new, older(fields=False)).changed


def test_an_observed_usage_is_pydantic_ais_and_grows_like_it() -> None:
    """`run.observe("usage", result.usage)`: slims after 2.56 add counters with a zero default
    (`cache_write_1h_tokens`, `output_reasoning_tokens`). Kept as the user's value, `null → 0` read `changed`
    across them; a usage is pydantic-ai's, where a missing counter and its zero are one."""
    old = {"input_tokens": 53, "cache_write_tokens": 0, "cache_read_tokens": 0, "output_tokens": 1, "input_audio_tokens": 0,
           "cache_audio_read_tokens": 0, "output_audio_tokens": 0, "audio_seconds": 0.0, "details": {}, "cost": None,
           "requests": 1, "tool_calls": 0}
    new = {**old, "cache_write_1h_tokens": 0, "output_reasoning_tokens": 0}
    assert Normaliser().value({"usage": old}) == Normaliser().value({"usage": new})
    assert Normaliser().value([old]) == Normaliser().value([new])  # observed in a list of turns too
    # control: a counter that moved is a change, and a mapping of the user's own keeps its zeros
    assert Normaliser().value({"usage": old}) != Normaliser().value({"usage": {**new, "input_tokens": 60}})
    assert Normaliser().value({"usage": old}) != Normaliser().value({"usage": {**new, "output_reasoning_tokens": 12}})
    mine = {"input_tokens": 0, "output_tokens": 0}
    assert Normaliser().value(mine) == mine


def test_an_observed_stream_event_is_pydantic_ais_and_grows_like_it() -> None:
    """`run.observe("events", events)` of `run_stream_events`: slim 2.62's `TextPartDelta` has a `citations_delta`
    (None) that 2.60's lacks, which read `changed` as `null → null`. An event or a part delta is pydantic-ai's; the
    arguments a tool call's delta carries are the model's, every `0` and `None` of them kept."""
    old = {"index": 0, "delta": {"content_delta": "sunny.", "provider_name": None, "part_delta_kind": "text"}, "event_kind": "part_delta"}
    new = {**old, "delta": {**old["delta"], "citations_delta": None}}  # type: ignore[dict-item]
    assert Normaliser().value([old]) == Normaliser().value([new])
    # control: what the delta says is still compared, and a tool call delta's arguments keep their zeros
    assert Normaliser().value([old]) != Normaliser().value([{**new, "delta": {"content_delta": "rainy.", "part_delta_kind": "text"}}])

    def args(value: object) -> object:
        return Normaliser().value({"index": 0, "event_kind": "part_delta",
                                   "delta": {"tool_name_delta": None, "args_delta": {"n": value}, "part_delta_kind": "tool_call"}})

    assert args(0) != args(None) != args(False)


def test_a_usages_cache_accounting_is_the_providers_not_the_runs() -> None:
    """The same request re-sent to a provider whose prompt cache is warm reports `cache_read_tokens` (and the lower
    `cost` they bring): every request after the first read `changed` between two recordings of one conversation.
    A response's usage, or one observed, leaves them out; the tokens the request and the answer took stay."""
    n = Normaliser(schema=compile_schema(installed_schema()))
    cold = {"kind": "response", "parts": [{"part_kind": "text", "content": "It is sunny."}],
            "usage": {"input_tokens": 10, "output_tokens": 3, "cost": 0.0000045}}
    warm = {**cold, "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_tokens": 8, "cost": 0.0000039}}
    assert n.root(cold, "message") == Normaliser(schema=compile_schema(installed_schema())).root(warm, "message")
    observed = {"input_tokens": 10, "cache_write_tokens": 0, "cache_read_tokens": 0, "output_tokens": 3, "input_audio_tokens": 0,
                "cache_audio_read_tokens": 0, "output_audio_tokens": 0, "details": {}, "cost": 0.0000045}
    assert Normaliser().value({"usage": observed}) == Normaliser().value({"usage": {**observed, "cache_read_tokens": 8, "cost": 0.0000039}})
    # controls: the tokens a request or an answer took are still compared, and a user's own `cost` is the user's
    more = {**warm, "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_tokens": 8}}
    assert n.root(cold, "message") != Normaliser(schema=compile_schema(installed_schema())).root(more, "message")
    assert Normaliser().value({"cost": 1.5}) != Normaliser().value({"cost": 2.5})


def test_a_measured_span_is_dropped_from_pydantic_ais_values_only() -> None:
    """A stream event observed whole is pydantic-ai's: SubAgents' ``duration_seconds`` (and code mode's
    ``elapsed_ms``) are clock readings, and a capability event's ``capability_id`` is which instance emitted it
    (a run-local handle for one without an explicit id). The user's own mappings, tool arguments included, keep
    keys of those names, and a limit named after a span (``max_duration_secs``) is a value."""
    n = Normaliser(schema=compile_schema(installed_schema()))

    def event(**fields: object) -> dict[str, object]:
        return {"event_kind": "capability", "kind": "sub_agents.delegation_end", "outcome": "ok", "output": "1999", **fields}

    assert n.value(event(duration_seconds=0.07, capability_id="<sub_agents:a1b2c3>")) == n.value(
        event(duration_seconds=0.01, capability_id="sub_agents")) == n.value(event())
    assert n.value(event(elapsed_ms=12.5)) == n.value(event(elapsed_ms=3.0))
    assert n.value(event(output="2001")) != n.value(event())  # what the event says is compared
    assert n.value(event(max_duration_secs=30)) != n.value(event(max_duration_secs=60))
    for key in ("duration_seconds", "elapsed_ms", "latency", "capability_id"):
        assert n.value({key: 1}) != n.value({key: 2}), key  # the user's own mapping
    call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "wait", "tool_call_id": "c1",
                                          "args": {"duration_seconds": 30, "elapsed_ms": 5}}]}
    assert n.root(call, "message")["parts"][0]["args"] == {"duration_seconds": 30, "elapsed_ms": 5}


def _tool_result_cassette(text: str, temp_dirs: list[str], **paths: list[str]) -> Cassette:
    """One request re-sending a tool's result ``text``, recorded where ``tempfile.gettempdir()`` was ``temp_dirs``."""
    b = CassetteBuilder(Header(scenario_id="unit/tmp", paths={"tempdir": temp_dirs, **paths}))
    call = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "read", "tool_call_id": "c1", "args": {}}]}
    ret = {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "read", "tool_call_id": "c1", "content": text}]}
    first = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "read ../outside.txt"}]}
    b.cassette.exchanges.append(Exchange(seq=0, role="main", index=0, kind="request", messages=b.messages([first, call, ret])))
    return b.cassette


def test_a_path_below_the_temporary_directory_is_read_alike_under_another_tmpdir() -> None:
    """A LocalWorkspace made with ``mkdtemp`` refuses ``../outside.txt`` as ``/tmp/outside.txt``: under another
    ``TMPDIR`` the same refusal names ``/tmp/tmpB/outside.txt``, and the same behaviour read ``changed``. The header
    names each side's temporary directory; both sides' are read as ``<tempdir>`` on both, as a whole path component."""
    from replay.differ import diff

    refused = "`{}/outside.txt` is outside the project root"
    here, there = _tool_result_cassette(refused.format("/tmp"), ["/tmp"]), _tool_result_cassette(refused.format("/tmp/tmpB"), ["/tmp/tmpB"])
    assert not diff(here, there).changed
    assert normalise(there).requests["main"][0].body == normalise(here).requests["main"][0].body
    assert "`<tempdir>/outside.txt`" in json.dumps(normalise(there).requests["main"][0].body)
    # controls: another file below it is a change; so is the same text where neither header names a directory
    assert diff(here, _tool_result_cassette(refused.format("/tmp/tmpB").replace("outside", "other"), ["/tmp/tmpB"])).changed
    assert diff(_tool_result_cassette(refused.format("/tmp"), []), _tool_result_cassette(refused.format("/tmp/tmpB"), [])).changed
    # a scenario's own /tmp path reads alike where only one side's TMPDIR was /tmp (both sides' directories on both)
    fixed = "saved to /tmp/notes.txt"
    assert not diff(_tool_result_cassette(fixed, ["/tmp"]), _tool_result_cassette(fixed, ["/tmp/tmpB"])).changed


def test_the_temporary_directory_is_replaced_only_as_a_whole_path_component() -> None:
    n = Normaliser(paths=(("/tmp/tmpB", "tempdir"), ("/tmp", "tempdir")))
    assert n.value("/tmp/outside.txt, /tmp/tmpB/x, file:///tmp/y, '/tmp'") == (
        "<tempdir>/outside.txt, <tempdir>/x, file://<tempdir>/y, '<tempdir>'")
    untouched = "/var/tmp/x /tmpfs/y /tmp.txt ~/tmp/z /tmp-old/w /srv/tmp"
    assert n.value(untouched) == untouched
    # a header naming no folder (``/``, a relative path) names none
    from replay.normaliser import env_paths

    assert env_paths(_tool_result_cassette("x", ["/", "tmp", "/tmp/", "/tmp"])) == (("/tmp", "tempdir"),)


def test_the_project_checkout_venv_and_home_are_read_by_name() -> None:
    """A tool returning a traceback names the scenario's file by its absolute path (``File "/repo/app/tools.py"``),
    and a library's by the environment's (``/repo/.venv/lib/…``): a checkout in another folder read ``changed``. The
    header names the project (its pyproject.toml's folder), ``sys.prefix`` and the home folder too; the longest
    folder a path is under names it."""
    from replay.differ import diff
    from replay.normaliser import env_paths

    tb = 'File "{0}/app/tools.py", line 54, in lookup\nFile "{0}/.venv/lib/python3.11/site-packages/x.py", line 3'
    a = _tool_result_cassette(tb.format("/home/ci/repo"), ["/tmp"], project=["/home/ci/repo"],
                              prefix=["/home/ci/repo/.venv"], home=["/home/ci"])
    b = _tool_result_cassette(tb.format("/srv/checkout"), ["/tmp"], project=["/srv/checkout"],
                              prefix=["/srv/checkout/.venv"], home=["/root"])
    assert not diff(a, b).changed
    assert env_paths(a)[:2] == (("/home/ci/repo/.venv", "prefix"), ("/home/ci/repo", "project"))
    body = json.dumps(normalise(a, paths=env_paths(a, b)).requests["main"][0].body)
    assert 'File \\"<project>/app/tools.py\\"' in body and "<prefix>/lib/python3.11" in body
    # controls: another file of the project is a change; so is the same text where the headers name no project
    assert diff(a, _tool_result_cassette(tb.format("/srv/checkout").replace("tools", "views"), ["/tmp"],
                                         project=["/srv/checkout"], prefix=["/srv/checkout/.venv"])).changed
    assert diff(_tool_result_cassette(tb.format("/home/ci/repo"), []), _tool_result_cassette(tb.format("/srv/checkout"), [])).changed


def test_a_temporary_directory_without_tmp_in_its_name_is_read_too() -> None:
    """``TMPDIR=/scratch/job7`` (a cluster's scratch, macOS's ``/var/folders/…/T``): a text naming it holds none of
    the marks that send a text to the aliases (``tmp``, ``-``), and stayed as it was."""
    from replay.differ import diff

    refused = "`{}/outside.txt` is outside the project root"
    a = _tool_result_cassette(refused.format("/scratch/job7"), ["/scratch/job7"])
    b = _tool_result_cassette(refused.format("/scratch/job9"), ["/scratch/job9"])
    assert not diff(a, b).changed
    assert diff(a, _tool_result_cassette(refused.format("/scratch/job9").replace("outside", "inside"), ["/scratch/job9"])).changed


def test_the_pydantic_version_in_a_validation_errors_link_is_not_a_change() -> None:
    """A tool returning ``str(validation_error)`` sends the link pydantic ends it with, which names the installed
    pydantic's minor (``https://errors.pydantic.dev/2.14/v/int_parsing``): the same run under pydantic 2.13 and
    2.14 (one harness, one slim) read ``changed``. The error's type in the link is still compared."""
    from replay.differ import diff

    said = "invalid: 1 validation error for Order\nqty\n  Input should be a valid integer [type=int_parsing]\n" \
           "    For further information visit https://errors.pydantic.dev/{}/v/{}"
    a = _tool_result_cassette(said.format("2.14", "int_parsing"), [])
    assert not diff(a, _tool_result_cassette(said.format("2.13", "int_parsing"), [])).changed
    assert diff(a, _tool_result_cassette(said.format("2.13", "missing"), [])).changed  # control: another error
    assert Normaliser().value("see https://errors.pydantic.dev/2.13/v/missing") == "see https://errors.pydantic.dev/<version>/v/missing"


def test_a_tracebacks_position_lines_are_not_compared() -> None:
    """Python 3.11 draws ``^^^^^^^^^^`` under a frame's line that is one call, 3.13 nothing: a tool returning
    ``traceback.format_exc()`` sent another text under each. The lines themselves are still compared."""
    from replay.differ import diff

    tb = ('Traceback (most recent call last):\n  File "/app/tools.py", line 9, in lookup\n    return _fail(key)\n{}'
          '  File "/app/tools.py", line 4, in _fail\n    raise KeyError(key)\nKeyError: \'plan\'\n')
    py311, py313 = tb.format("           ^^^^^^^^^^\n"), tb.format("")
    assert Normaliser().value(py311) == Normaliser().value(py313) == py313
    assert not diff(_tool_result_cassette(py311, []), _tool_result_cassette(py313, [])).changed
    assert diff(_tool_result_cassette(py311, []), _tool_result_cassette(py313.replace("line 9", "line 10"), [])).changed
    assert Normaliser().value("score: ^^^ high") == "score: ^^^ high"  # no traceback: kept
    mixed = tb.format("           ~~~~~^^^^^\n")  # 3.11's marks under a subscript: '~' and '^' together
    assert Normaliser().value(mixed) == py313
    fenced = "~~~\n" + py313 + "~~~\n"  # a Markdown fence around a quoted traceback is the text's own
    assert Normaliser().value(fenced) == fenced

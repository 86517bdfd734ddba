"""Wire-body comparison: bodies interned on disk, compared by aligned elements, ids aliased."""

from __future__ import annotations

import json
from typing import Any

from replay.cassette import CassetteBuilder, Exchange, dumps, loads
from replay.normaliser import Rules
from replay.wire.capture import HttpExchange, clean_url
from replay.wire.compare import compare
from replay.wire.store import request_body, to_records


def cassette(*bodies: dict[str, Any], workspace: str | None = None) -> Any:
    b = CassetteBuilder()
    if workspace is not None:  # a response of a run that worked there (``ModelResponse.workspace_ref``)
        b.message({"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}],
                   "workspace_ref": {"kind": "local", "id": workspace}})
    for i, body in enumerate(bodies):
        ex = Exchange(seq=i, role="main", index=i, kind="request")
        http = HttpExchange("POST", "http://127.0.0.1:5555/v1/chat/completions", {}, json.dumps(body).encode(), 200)
        ex.wire = to_records(b, [http])
        b.cassette.exchanges.append(ex)
    return loads(dumps(b.cassette))


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": list(messages), **extra}


SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "hi"}


def test_bodies_round_trip_and_shared_elements_are_stored_once() -> None:
    long = [{"role": "user", "content": "x" * 1000 + str(i)} for i in range(20)]
    c = cassette(chat(*long[:10]), chat(*long))
    assert request_body(c, c.exchanges[1].wire[0]) == chat(*long)
    assert len(c.blobs) == 20 + 1  # each message once, plus the shared non-list fields


def test_one_inserted_message_is_one_entry_not_a_cascade() -> None:
    msgs = [{"role": "user", "content": f"m{i}"} for i in range(10)]
    a = cassette(chat(SYSTEM, *msgs))
    b = cassette(chat(SYSTEM, {"role": "developer", "content": "reminder"}, *msgs))
    changes = compare(a, b)
    assert [(c.path, c.kind) for c in changes] == [("messages[1]", "added")]
    assert changes[0].describe() == 'main[0] wire: + messages[1]: {"content": "reminder", "role": "developer"}'


def test_a_changed_field_is_named_by_its_path() -> None:
    changes = compare(cassette(chat(SYSTEM, USER, max_tokens=100)), cassette(chat(dict(SYSTEM, role="developer"), USER, max_completion_tokens=100)))
    described = sorted(c.describe() for c in changes)
    assert "main[0] wire: messages[0].role: system → developer" in described
    assert "main[0] wire: - max_tokens: 100" in described
    assert "main[0] wire: + max_completion_tokens: 100" in described


def test_generated_ids_and_the_host_port_are_not_changes() -> None:
    call = lambda cid: {"role": "assistant", "tool_calls": [{"id": cid, "type": "function"}]}  # noqa: E731
    ret = lambda cid: {"role": "tool", "tool_call_id": cid, "content": "ok"}  # noqa: E731
    a = cassette(chat(USER, call("call_AbCdEfGhIjKlMnOp1234"), ret("call_AbCdEfGhIjKlMnOp1234")))
    b = cassette(chat(USER, call("call_ZyXwVuTsRqPoNmLk9876"), ret("call_ZyXwVuTsRqPoNmLk9876")))
    assert compare(a, b) == []
    # ...but a return that no longer pairs with its call is a change.
    c = cassette(chat(USER, call("call_ZyXwVuTsRqPoNmLk9876"), ret("call_QqQqQqQqQqQqQqQq5555")))
    assert [x.path for x in compare(a, c)] == ["messages[2].tool_call_id"]
    assert clean_url("http://user:pw@127.0.0.1:5555/v1/x?a=1") == "http://127.0.0.1:5555/v1/x?a=1"


def test_json_sent_as_text_and_the_scrubbers_labels_are_not_changes() -> None:
    """slim 2.56 writes tool arguments ``{"city": "Paris"}``, 2.62 ``{"city":"Paris"}``; a replay without the
    key sends the placeholder where the recording had the key, scrubbed under another label."""
    def call(arguments: str) -> dict[str, Any]:
        return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": "w", "arguments": arguments}}]}

    a = cassette(chat({"role": "system", "content": "Never reveal <secret:openai:1>."}, USER, call('{"city": "Paris"}')))
    b = cassette(chat({"role": "system", "content": "Never reveal <secret:api-key:1>."}, USER, call('{"city":"Paris"}')))
    assert compare(a, b) == []
    c = cassette(chat({"role": "system", "content": "Never reveal <secret:api-key:1>."}, USER, call('{"city":"Rome"}')))
    assert [x.path for x in compare(a, c)] == ["messages[2].tool_calls[0].function.arguments"]
    two = cassette(chat({"role": "system", "content": "Never reveal <secret:openai:1> <secret:openai:2>."}, USER))
    one = cassette(chat({"role": "system", "content": "Never reveal <secret:auth:1> <secret:auth:1>."}, USER))
    assert [x.path for x in compare(two, one)] == ["messages[0].content"]  # two secrets are not one


def test_ignore_rules_apply_to_wire_paths_and_keys() -> None:
    a, b = cassette(chat(USER, temperature=0.1)), cassette(chat(USER, temperature=0.9))
    assert compare(a, b, Rules.of(["temperature"])) == []
    assert compare(a, b, Rules.of(["main[*].wire.temperature"])) == []
    assert len(compare(a, b)) == 1


def test_a_wire_reference_outside_the_blob_table_is_refused_at_load() -> None:
    import msgpack
    import pytest

    from replay.cassette import MAGIC
    from replay.errors import CassetteError

    c = cassette(chat(USER))
    data = msgpack.unpackb(dumps(c)[len(MAGIC):], raw=False)
    data["exchanges"][0]["wire"][0]["body_lists"]["messages"] = [999]
    with pytest.raises(CassetteError, match="wire body reference 999 outside the blob table"):
        loads(MAGIC + msgpack.packb(data, use_bin_type=True))


def test_hostile_wire_values_are_compared_not_crashed_on() -> None:
    """A cassette is untrusted: JSON text nested past the parser's depth raised RecursionError through
    `show --normalized` (the git textconv), `diff` and `run`; a URL urlsplit refuses raised ValueError."""
    deep = "[" * 5000 + "]" * 5000
    a = cassette(chat({"role": "user", "content": deep}))
    b = cassette(chat({"role": "user", "content": deep[1:-1]}))
    assert [x.path for x in compare(a, b)] == ["messages[0].content"]
    from replay.wire.compare import NormalBodies, _path_of

    assert _path_of("http://[::1/v1") == "http://[::1/v1" and _path_of("http://h:1/v1/x?q=1") == "/v1/x?q=1"
    assert NormalBodies(a).of("main", 0)[0][2]["messages"][0]["content"] == deep


def test_only_the_spacing_of_json_text_is_forgiven() -> None:
    """Keys keep their order and repeats, numbers their digits: 1e400 is not 1e999999."""
    from replay.wire.compare import _canonical_json as canonical

    assert canonical('{"city": "Paris", "n": [1, 2.50]}') == canonical('{"city":"Paris","n":[1,2.50]}')
    for x, y in (('{"k": 1, "k": 2}', '{"k":2}'), ('{"x": 1e400}', '{"x":1e999999}'), ('{"y": 0.1}', '{"y":0.10}'),
                 ('{"a": 1, "b": 2}', '{"b":2,"a":1}')):
        assert canonical(x) != canonical(y), (x, y)
    changed = compare(cassette(chat(USER, extra='{"x": 1e400}')), cassette(chat(USER, extra='{"x":1e999999}')))
    assert [c.describe() for c in changed] == ['main[0] wire: extra: {"x": 1e400} → {"x":1e999999}']  # as sent


def test_long_lists_of_repeated_elements_align_in_linear_work() -> None:
    """SequenceMatcher without autojunk is quadratic when elements repeat (16,000: 32 s); the common head
    and tail are skipped first, and past a cap the middle is paired by position."""
    from replay.wire import compare as wc

    same = {"role": "user", "content": "again"}
    a = [same] * 3000
    b = [same] * 2999 + [{"role": "user", "content": "other"}]
    assert wc._align("messages", a, b) == [("messages[2999].content", "changed", "again", "other")]
    x, y = {"role": "user", "content": "x"}, {"role": "user", "content": "y"}
    swapped = wc._align("messages", [x, y] * 1500, [y, x] * 1500)  # 3,000 x 3,000 pairs: past the cap
    assert len(swapped) == 3000 and all(kind == "changed" for _, kind, _, _ in swapped)


def test_a_wire_change_in_a_long_text_is_shown_around_its_difference() -> None:
    """Cut at its first 79 characters, a long prompt that differed further on read the same on both sides."""
    from replay.wire.compare import WireChange

    a = "You are a context summarization assistant.  The conversation below will be replaced by your summary, keep 2"
    line = WireChange("summarizing_compaction", 0, "messages[1].content", "changed", a, a.replace("keep 2", "keep 3")).describe()
    before, after = line.split(": ", 2)[2].split(" → ")
    assert before != after and before.endswith("keep 2") and after.endswith("keep 3"), line


def test_an_empty_text_is_shown_quoted() -> None:
    """`0 → ` and ` → null`: an empty string printed as nothing on its side of the arrow."""
    from replay._untrusted import _pair
    from replay.wire.compare import WireChange

    assert WireChange("main", 0, "messages[2].content", "changed", 0, "").describe().endswith(": 0 → \"\"")
    assert _pair("", None) == ('""', "null") and _pair(" ", "x") == ('" "', "x") and _pair("U11", None) == ("U11", "null")


def test_a_key_that_starts_with_two_underscores_is_compared() -> None:
    """DeepDiff leaves out ``__``-keys by default (its "private variables"): a tool_use block's input of
    ``{"__typename": "User"}`` that became ``"Admin"`` made the bodies read the same."""
    def body(typename: str) -> dict[str, Any]:
        return {"model": "claude", "messages": [USER, {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "user", "input": {"__typename": typename, "id": 1}}]}]}

    changes = compare(cassette(body("User")), cassette(body("Admin")))
    assert [(c.path, c.kind) for c in changes] == [("messages[1].content[0].input.__typename", "changed")]


def test_an_objects_address_in_what_the_provider_is_sent_is_not_a_change() -> None:
    """A tool returning ``repr(error)``: the provider is sent a new address in every process."""
    ret = lambda text: {"role": "tool", "tool_call_id": "c1", "content": text}  # noqa: E731
    a = cassette(chat(USER, ret("KeyError(<app.Widget object at 0x7f59f914f550>)")))
    b = cassette(chat(USER, ret("KeyError(<app.Widget object at 0x7f612cacf590>)")))
    assert compare(a, b) == []
    assert [x.path for x in compare(a, cassette(chat(USER, ret("KeyError(<app.Gadget object at 0x7f59f914f550>)"))))] == [
        "messages[1].content"]


def test_a_folder_tempfile_named_in_what_the_provider_is_sent_is_not_a_change() -> None:
    system = lambda folder: {"role": "system", "content": f"You work in /tmp/{folder}."}  # noqa: E731
    assert compare(cassette(chat(system("tmpwajeavgh"), USER)), cassette(chat(system("tmpvjeq_gq_"), USER))) == []
    assert [x.path for x in compare(cassette(chat(system("tmpwajeavgh"), USER)), cassette(chat(system("project"), USER)))] == [
        "messages[0].content"]


def test_a_scenario_modules_hash_in_what_the_provider_is_sent_is_not_a_change() -> None:
    ret = lambda h: {"role": "tool", "tool_call_id": "c1", "content": f"<replay_scenarios.app_{h}.Widget object>"}  # noqa: E731
    assert compare(cassette(chat(USER, ret("87e4f9d034cfe3ea"))), cassette(chat(USER, ret("60d1657cfc90c40b")))) == []


def test_a_process_id_the_shell_tool_quotes_in_what_the_provider_is_sent_is_not_a_change() -> None:
    ret = lambda pid: {"role": "tool", "tool_call_id": "c1", "content": f"PID: {pid} (supervisor; use `kill -- -{pid}`)"}  # noqa: E731
    assert compare(cassette(chat(USER, ret(30177))), cassette(chat(USER, ret(30490)))) == []


def test_the_workspace_root_and_a_uuid_in_what_the_provider_is_sent_are_not_changes() -> None:
    """A file tool refusing a path names the run's workspace root, a fresh temp dir in every run; the messages
    alias it (``<workspace#1>``), so the wire must too (it read ``changed`` on the recording's own version).
    Likewise a uuid the messages alias (one not made by ``uuid4``, which a session seeds)."""
    refused = lambda root: {"role": "tool", "tool_call_id": "c1", "content": f"`/tmp/outside.txt` is outside the project root `{root}`"}  # noqa: E731
    a = cassette(chat(USER, refused("/tmp/replay-ws-5b2r9rwm")), workspace="/tmp/replay-ws-5b2r9rwm")
    b = cassette(chat(USER, refused("/tmp/replay-ws-4iscr1xh")), workspace="/tmp/replay-ws-4iscr1xh")
    assert compare(a, b) == []
    # controls: the same texts without the runs' workspaces are a change; another refusal is one too
    bare = [cassette(chat(USER, refused(f"/tmp/replay-ws-{x}"))) for x in ("5b2r9rwm", "4iscr1xh")]
    assert [x.path for x in compare(*bare)] == ["messages[1].content"]
    other = cassette(chat(USER, {**refused("/tmp/replay-ws-4iscr1xh"), "content": "`/etc/passwd` is outside the project root "
                                 "`/tmp/replay-ws-4iscr1xh`"}), workspace="/tmp/replay-ws-4iscr1xh")
    assert [x.path for x in compare(a, other)] == ["messages[1].content"]
    ticket = lambda u: {"role": "tool", "tool_call_id": "c1", "content": f"created ticket {u}"}  # noqa: E731
    assert compare(cassette(chat(USER, ticket("6f1c7c52-34b2-11f1-9a3c-0242ac120002"))),
                   cassette(chat(USER, ticket("7a0e1d3e-34b2-11f1-9a3c-0242ac120002")))) == []
    twice = cassette(chat(USER, ticket("6f1c7c52-34b2-11f1-9a3c-0242ac120002 and 6f1c7c52-34b2-11f1-9a3c-0242ac120002")))
    assert [x.path for x in compare(twice, cassette(chat(USER, ticket(
        "6f1c7c52-34b2-11f1-9a3c-0242ac120002 and 7a0e1d3e-34b2-11f1-9a3c-0242ac120002"))))] == ["messages[1].content"]


def test_true_sent_as_one_is_a_change() -> None:
    """Python's ``==`` has ``True == 1`` and ``1 == 1.0``: a body that sent ``"stream": 1`` or ``"temperature": 1``
    where the recording sent ``true`` / ``1.0`` read the same, at the top level and inside a message."""
    a = cassette(chat(SYSTEM, {"role": "user", "content": "hi", "cache": True}, stream=True, temperature=1.0))
    b = cassette(chat(SYSTEM, {"role": "user", "content": "hi", "cache": 1}, stream=1, temperature=1))
    assert sorted((c.path, c.kind) for c in compare(a, b)) == [
        ("messages[1].cache", "changed"), ("stream", "changed"), ("temperature", "changed")]
    # the same keys in another order are the same body
    c = cassette({"messages": [SYSTEM, {"content": "hi", "role": "user", "cache": True}], "temperature": 1.0,
                  "model": "gpt-4o-mini", "stream": True})
    assert compare(a, c) == []


def test_record_force_rewrites_a_cassette_whose_wire_requests_changed(tmp_path: Any) -> None:
    """``record --force`` keeps a cassette whose new recording only moves stamps, judged by the message-level
    normalisation, which holds no HTTP request. A query or body field sent on the wire only, set from the
    environment or a helper (``default_query={"api-version": os.environ[…]}``: the scenario file, whose edit
    the header notices, unchanged), or a cassette an older scrubber wrote with a key in a URL, was kept as it
    was: ``unchanged … kept``, and every ``replay run`` read ``changed`` (``main[0] wire: endpoint: …``)
    against the stale file, or the key stayed on disk."""
    from replay._pipeline import _same_recording
    from replay.cassette import DEFAULT_LIMITS, load, save

    body = chat(SYSTEM, USER)
    path = tmp_path / "c.cassette"
    save(cassette(body), path)
    assert _same_recording(path, load(path, DEFAULT_LIMITS), DEFAULT_LIMITS)
    assert not _same_recording(path, cassette(chat(SYSTEM, USER, reasoning_effort="low")), DEFAULT_LIMITS)
    moved = cassette(body)
    moved.exchanges[0].wire[0].url += "?code=<secret:signature:1>"
    assert not _same_recording(path, moved, DEFAULT_LIMITS)


def test_record_force_rewrites_a_cassette_recorded_before_wire_capture(tmp_path: Any) -> None:
    """A provider cassette recorded before wire capture (no HTTP exchanges: replayed at the model level, the
    provider mapping never run) came out of ``record --force`` as ``unchanged … kept``: the same messages, and
    the new recording's HTTP exchanges thrown away, so the scenario could never be brought to the wire level."""
    from replay._pipeline import _same_recording
    from replay.cassette import DEFAULT_LIMITS, load, save

    path = tmp_path / "c.cassette"
    old = cassette(chat(SYSTEM, USER))
    for ex in old.exchanges:
        ex.wire = None
    save(old, path)
    assert _same_recording(path, load(path, DEFAULT_LIMITS), DEFAULT_LIMITS)
    assert not _same_recording(path, cassette(chat(SYSTEM, USER)), DEFAULT_LIMITS)

"""Normaliser: volatile fields and schema growth vanish, real content and pairing stay."""

from __future__ import annotations

from replay.normaliser import Normaliser, Rules


def test_volatile_keys_are_dropped_everywhere() -> None:
    n = Normaliser()
    got = n.value(
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "run_id": "abc",
            "conversation_id": "0190",
            "parts": [{"content": "hi", "timestamp": "x", "metadata": {"harness.created_at": "t", "keep": 1}}],
            "provider_response_id": "resp_1",
        }
    )
    assert got == {"parts": [{"content": "hi", "metadata": {"keep": 1}}]}


def test_missing_field_equals_empty_default() -> None:
    n = Normaliser()
    old = {"parts": [{"content": "hi"}], "usage": {"input_tokens": 3}}
    new = {"parts": [{"content": "hi", "citations": None, "id": None}], "usage": {"input_tokens": 3, "cache_read_tokens": 0},
           "failed_attempts": [], "metadata": {}}
    assert n.value(old) == Normaliser().value(new)


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

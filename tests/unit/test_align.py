"""Message alignment: by content, not index — one insertion is one entry, a new wrapper is not a loss."""

from __future__ import annotations

from typing import Any

from test_differ import cassette

from replay.differ import diff, natural_key
from replay.differ._align import align, rewrapped, similarity
from replay.normaliser import digest


def _user(text: str) -> dict[str, Any]:
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": text}]}


def _kinds(a: list[Any], b: list[Any]) -> list[tuple[str, int | None, int | None]]:
    return [(p.kind, p.a, p.b) for p in align(a, b, [digest(x) for x in a], [digest(x) for x in b])]


def test_equal_lists_have_nothing_to_say() -> None:
    a = [_user(f"U{i}") for i in range(5)]
    assert _kinds(a, list(a)) == []


def test_one_inserted_message_is_one_entry_not_a_cascade() -> None:
    a = [_user(f"U{i}") for i in range(30)]
    b = a[:3] + [_user("reminder: stay on task")] + a[3:]
    assert _kinds(a, b) == [("inserted", None, 3)]
    assert _kinds(b, a) == [("removed", 3, None)]


def test_a_message_in_another_place_is_moved() -> None:
    a = [_user("U0"), _user("U1"), _user("U2"), _user("U3")]
    b = [_user("U0"), _user("U2"), _user("U3"), _user("U1")]
    assert _kinds(a, b) == [("moved", 1, 3)]


def test_same_text_in_another_wrapper_is_rewrapped() -> None:
    a = [{"part_kind": "system-prompt", "content": "Summary of previous conversation:\n\nthe user wants a haiku"}]
    b = [{"part_kind": "compaction", "content": "the user wants a haiku", "metadata": {"summary": True}}]
    assert _kinds(a, b) == [("rewrapped", 0, 0)]
    # a string become a list of text parts
    a = [{"part_kind": "user-prompt", "content": "hello there"}]
    b = [{"part_kind": "user-prompt", "content": [{"kind": "text-content", "content": "hello there"}]}]
    assert _kinds(a, b) == [("rewrapped", 0, 0)]


def test_framing_is_bounded_and_content_must_match() -> None:
    assert rewrapped("Summary of previous conversation:\n\nnotes", "notes kept") is False
    assert rewrapped("x" * 10, "y" * 100 + "x" * 10) is False  # too much around it to be a frame
    assert rewrapped("", "") is False


def test_an_edited_message_is_changed_a_different_one_is_removed_and_inserted() -> None:
    a = [_user("U0"), _user("please add two and three"), _user("U2")]
    assert _kinds(a, [_user("U0"), _user("please add two and four"), _user("U2")]) == [("changed", 1, 1)]
    assert _kinds(a, [_user("U0"), _user("U9"), _user("U2")]) == [("removed", 1, None), ("inserted", None, 1)]
    # a request never becomes a response, however alike
    response = {"kind": "response", "parts": [{"part_kind": "text", "content": "please add two and three"}]}
    assert _kinds(a, [_user("U0"), response, _user("U2")]) == [("removed", 1, None), ("inserted", None, 1)]
    assert similarity("U10", "U11") == 0.0 and similarity("a b c", "c b a") == 1.0


def test_natural_sort_of_paths() -> None:
    paths = ["m[10].parts[0]", "m[2].parts[1]", "m[2].parts[10]", "m[1]"]
    assert sorted(paths, key=natural_key) == ["m[1]", "m[2].parts[1]", "m[2].parts[10]", "m[10].parts[0]"]


def test_differ_reports_one_insertion_and_changes_in_natural_order() -> None:
    history = [f"turn {i}" for i in range(12)]
    a = cassette([history])
    b = cassette([history[:2] + ["an inserted reminder"] + history[2:]])
    (req,) = diff(a, b).requests
    assert [(e.kind, e.path, e.label) for e in req.entries] == [("inserted", "messages[2]", "an inserted reminder")]
    assert req.changes == [] and req.lost == [] and req.gained == ["an inserted reminder"]
    c = cassette([[f"{t} edited" if i in (2, 10) else t for i, t in enumerate(history)]])
    (req,) = diff(a, c).requests
    assert [ch.path for ch in req.changes] == ["main[0].messages[2].parts[0].content", "main[0].messages[10].parts[0].content"]


def test_a_short_text_is_rewrapped_only_behind_a_framing_line() -> None:
    """seed000/short on 0.54: the one-word summary "brief" in a compaction part became "Summary of previous
    conversation:\\n\\nbrief" in a system prompt, and read as lost (texts under 8 characters never paired)."""
    from replay.differ._align import rewrapped

    assert rewrapped("brief", "Summary of previous conversation:\n\nbrief")
    assert rewrapped("Summary of previous conversation: brief", "brief")
    assert not rewrapped("brief", "a brief note")  # inside other words: not the same content
    assert not rewrapped("U1", "Summary:\n\nU10") and not rewrapped("U1", "Summary:U1")
    assert not rewrapped("brief", "Summary of previous conversation:\n\nbrief, then more")


_SKILL = "# Skill: brew\n\nSkill directory: `<workspace#1>/skills/brew`. Relative paths in this skill resolve against it.\n\nBoil water, steep 3 minutes."


def test_a_text_moved_into_a_tool_returns_mapping_is_rewrapped_not_lost() -> None:
    """Harness 0.59 returned a loaded skill's body inside ``load_capability``'s result
    (``{"instructions": body}``); 0.62 sends it as a ``<system><context …>`` user part beside a short
    notice. The body is sent either way: framed on both sides, and its newlines escaped in the JSON."""
    loaded = {"part_kind": "tool-return", "tool_name": "load_capability", "tool_call_id": "l1",
              "content": {"message": "Capability 'brew' loaded. Its instructions, if any, follow."}}
    framed = {"part_kind": "user-prompt", "content": f'<system><context id="capability:brew">\n{_SKILL}\n</context></system>'}
    inside = {"part_kind": "tool-return", "tool_name": "load_capability", "tool_call_id": "l1",
              "content": {"instructions": _SKILL}}
    assert _kinds([loaded, framed], [inside]) == [("removed", 0, None), ("rewrapped", 1, 0)]
    assert _kinds([inside], [loaded, framed]) == [("inserted", None, 0), ("rewrapped", 0, 1)]


def test_framing_on_both_sides_must_be_short_and_the_shared_text_most_of_it() -> None:
    body = "Boil water, steep three minutes, then pour it into the warmed pot slowly."
    assert rewrapped(f"<system>{body}</system>", f'load_capability {{"instructions": "{body}"}}')
    assert not rewrapped("Summary of previous conversation:\n\nnotes", "notes kept")
    assert not rewrapped(f"<a>{body}</a>", "x" * 90 + body)  # one frame too long
    assert not rewrapped("the user asked for tea " + "x" * 40, "the user asked for tea " + "y" * 40)  # shared part too small

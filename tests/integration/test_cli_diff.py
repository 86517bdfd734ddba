"""`replay diff`: structural comparison of two cassettes, across harness versions without noise."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import ROOT

from replay.cassette import load
from replay.normaliser import normalise

OLD = ROOT / "tests" / "fixtures" / "harness-0.54.0"
NEW = ROOT / "cassettes"
NOISE = ("timestamp", "run_id", "conversation_id", "created_at", "provider_response_id", "pyd_ai_", "history_digest")


def test_identical_cassettes_exit_0(cli) -> None:
    r = cli("diff", NEW / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette")
    assert r.code == 0 and "SAME" in r.out


def test_versions_differ_for_real_without_noise(cli) -> None:
    r = cli("diff", OLD / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette", "--format", "json")
    assert r.code == 1
    doc = json.loads(r.out)
    assert doc["changed"] and doc["requests"]
    paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
    assert paths and not [p for p in paths if any(n in p for n in NOISE)]
    assert [m["estimate"][0] for m in doc["main_requests"]] != [m["estimate"][1] for m in doc["main_requests"]]


def test_schema_growth_and_ids_are_not_reported(cli) -> None:
    """Tool-calling and streamed runs change nothing semantic between 0.54 and 0.62."""
    for sid in ("coverage/tool_call", "coverage/stream"):
        r = cli("diff", OLD / f"{sid}.cassette", NEW / f"{sid}.cassette", "--format", "json")
        doc = json.loads(r.out)
        paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
        assert not [p for p in paths if any(n in p for n in NOISE)], paths


def test_ignore_rules_from_flag(cli) -> None:
    r = cli(
        "diff", OLD / "coverage/tool_call.cassette", NEW / "coverage/tool_call.cassette",
        "--ignore", "usage", "--ignore", "parameters", "--ignore", "model", "--format", "json",
    )
    doc = json.loads(r.out)
    paths = [c["path"] for req in doc["requests"] for c in req["changes"]]
    assert not [p for p in paths if ".usage" in p or ".parameters" in p]


def test_markdown_is_pasteable(cli) -> None:
    r = cli("diff", OLD / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette", "--format", "markdown")
    assert r.out.startswith("### harness-replay diff") and "| `seed000/long` | ⚠️ changed |" in r.out


def test_bad_cassette_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.cassette"
    bad.write_bytes(b"\xc1replay\n\x00garbage")
    r = cli("diff", bad, NEW / "seed000" / "long.cassette")
    assert r.code == 2 and r.err.count("\n") == 1 and str(bad) in r.err and "Traceback" not in r.err


def test_a_missing_side_beside_a_directory_is_named(cli, tmp_path: Path) -> None:
    """`replay diff cassettes typo` said `cassettes: compare a directory with a directory, a cassette with
    a cassette`, blaming the folder that exists for the one that does not."""
    for a, b in ((NEW, tmp_path / "typo"), (tmp_path / "typo", NEW)):
        r = cli("diff", a, b)
        assert r.code == 2 and r.out == ""
        assert r.err.strip().splitlines() == [f"replay: error: {tmp_path / 'typo'}: no such cassette or directory"]


def test_directories_are_paired_by_scenario(cli, tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "other"
    shutil.copytree(OLD, other)
    (other / "seed000" / "long.cassette").unlink()
    r = cli("diff", OLD, other, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 2  # a cassette missing on one side is an error (README: exit 2), the others still compared
    assert doc["scenarios"]["seed000/long"]["status"] == "error"
    assert doc["scenarios"]["coverage/tool_call"]["status"] == "same"
    assert cli("diff", OLD, OLD).code == 0
    mixed = cli("diff", OLD, NEW / "seed000" / "long.cassette")
    assert mixed.code == 2 and "directory" in mixed.err


def test_a_cassette_without_counterpart_is_named_by_its_scenario_id(cli, tmp_path: Path) -> None:
    """`diff cassettes/seed000 other/seed000` (directories below the top, as the README suggests for a
    subset) named the one-sided row `long` beside compared rows named `seed000/short`: the path below
    the folders, not the scenario id, in the text and as the JSON key."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(OLD / "seed000", other / "seed000")
    (other / "seed000" / "long.cassette").unlink()
    r = cli("diff", OLD / "seed000", other / "seed000", "--format", "json")
    assert r.code == 2
    doc = json.loads(r.out)
    assert doc["scenarios"]["seed000/long"]["status"] == "error", sorted(doc["scenarios"])
    assert "long" not in doc["scenarios"]


def test_another_python_minor_is_a_warning_not_a_change(cli, tmp_path: Path) -> None:
    from replay.cassette import load, save

    c = load(NEW / "seed000" / "long.cassette")
    c.header.python_version = "3.12.1"
    other = save(c, tmp_path / "py312.cassette")
    r = cli("diff", NEW / "seed000" / "long.cassette", other)
    assert r.code == 0 and "SAME" in r.out
    assert "replayed on Python 3.12.1: a difference may come from the Python version" in r.out
    c.header.python_version = "3.11.99"  # same minor: nothing to say
    assert "Python" not in cli("diff", NEW / "seed000" / "long.cassette", save(c, tmp_path / "p.cassette")).out


# --------------------------------------------------------------------------- real recordings from four versions

FIXTURES = ROOT / "tests" / "fixtures"
VERSIONS = ("0.54.0", "0.56.0", "0.59.0", "0.62.0")


def _diff_json(cli, a: Path, b: Path) -> dict:
    r = cli("diff", a, b, "--format", "json")
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def test_instructions_agent_is_same_on_every_version(cli) -> None:
    """`instructions=` + a tool: slim 2.59 added InstructionPart.on_change='rewrite', a declared default, not a change."""
    for old in VERSIONS:
        for new in VERSIONS:
            doc = _diff_json(cli, FIXTURES / f"harness-{old}/trust/instructions.cassette", FIXTURES / f"harness-{new}/trust/instructions.cassette")
            assert not doc["changed"], (old, new, doc["requests"])


def test_summary_moved_to_a_compaction_part_is_rewrapped_not_lost(cli) -> None:
    """Up to 0.59 the summary is a SystemPromptPart 'Summary of previous conversation: …'; 0.62 writes a CompactionPart."""
    for old in ("0.54.0", "0.56.0", "0.59.0"):
        doc = _diff_json(cli, FIXTURES / f"harness-{old}/trust/summary.cassette", FIXTURES / "harness-0.62.0/trust/summary.cassette")
        (main,) = [r for r in doc["requests"] if r["role"] == "main"]
        kinds = [(e["kind"], e["path"], e["detail"]) for e in main["entries"] if e["kind"] != "changed"]
        assert kinds == [("rewrapped", "messages[0].parts[0→1]", "system-prompt → compaction")], kinds
        assert main["lost"] == [] and main["gained"] == []
        assert "The user asked six questions" in main["entries"][-1]["label"]
        assert not [c for c in main["changes"] if ".parts[" in c["path"]]  # no field diffs of the rewrapped part


def test_structured_output_mode_a_run_keeps_is_the_auto_the_model_resolved(cli) -> None:
    """Slim 2.58 hands a structured-output run's later requests ``output_mode='tool'`` and
    ``allow_text_output=False``, the mode its first ``auto`` request resolved to; 2.57 and older sent
    ``auto``, which the model's ``prepare_request`` resolved to the very same before the request went out
    (``with_default_output_mode``). Real recordings of 0.54 and 0.56 against 0.62: not a change, and no
    prompt-cache bust at main[1] (the tools sent did not move)."""
    for old in ("0.54.0", "0.56.0", "0.59.0", "0.62.0"):
        doc = _diff_json(cli, FIXTURES / f"harness-{old}/trust/structured.cassette", FIXTURES / "harness-0.62.0/trust/structured.cassette")
        assert not doc["changed"] and doc["requests"] == [], (old, doc["requests"])
        assert doc["cache"] == [] and doc["tokens"][0] == doc["tokens"][1], (old, doc["tokens"])


def test_structured_output_turns_are_no_change_and_no_cache_bust(cli) -> None:
    """Two structured-output turns, each calling a tool first, recorded on 0.54, 0.56, 0.59 and 0.62: slim
    2.58+ states the first run's kept mode (``tool``) on its second request and ``auto`` on the next run's first,
    which the model resolves alike. Read as a move of the tools sent, the second turn of every 2.58+ recording
    was a ``cache_prefix_broken`` of its own (``replay check``), and new against every older recording."""
    for old in VERSIONS:
        assert _check_json(cli, FIXTURES / f"harness-{old}/trust/structured_turns.cassette") == [], old
        for new in VERSIONS:
            doc = _diff_json(cli, FIXTURES / f"harness-{old}/trust/structured_turns.cassette",
                             FIXTURES / f"harness-{new}/trust/structured_turns.cassette")
            assert not doc["changed"] and doc["requests"] == [] and doc["cache"] == [], (old, new, doc["requests"], doc["cache"])
            assert doc["tokens"][0] == doc["tokens"][1], (old, new, doc["tokens"])


def test_kept_output_mode_is_what_the_provider_was_sent_alike(cli) -> None:
    """A real OpenAIChatModel (tests/fake_openai.py) recorded on 0.57 and 0.62: 0.62 states ``tool`` with
    ``allow_text_output=False`` on each run's second request where 0.57 states ``auto``, and both put the same
    body on the wire (``tool_choice: required``, the same tools). The model-level verdict agrees with the wire."""
    from replay.wire.store import request_body

    old, new = (FIXTURES / f"harness-{v}/wire_trust/structured_turns.cassette" for v in ("0.57.0", "0.62.0"))
    modes = [[load(c).blobs[ex.parameters]["output_mode"] for ex in load(c).exchanges] for c in (old, new)]
    assert modes == [["auto"] * 4, ["auto", "tool", "auto", "tool"]]  # the fixtures hold the two statements
    bodies = [[request_body(cas, ex.wire[0]) for ex in cas.exchanges] for cas in (load(old), load(new))]
    assert [b["tool_choice"] for b in bodies[0]] == [b["tool_choice"] for b in bodies[1]] == ["required"] * 4
    doc = _diff_json(cli, old, new)
    assert doc["status"] == "same" and doc["wire"] == [] and doc["requests"] == [] and doc["cache"] == [], doc["requests"]
    assert _check_json(cli, new) == [] and _check_json(cli, old) == []


def test_the_workspace_root_a_provider_is_sent_is_not_a_wire_change(cli) -> None:
    """A real OpenAIChatModel in a fresh LocalWorkspace (tests/fake_openai.py), recorded on 0.54, 0.56, 0.59, 0.60
    and 0.62: the refusal of ``../outside.txt`` sends the provider the root's absolute path, a new temp dir in
    every run. The wire read it as ``messages[2].content`` changed on requests 1-3 where the messages read the
    same: 0.60 against 0.62 was ``changed`` by it alone, and every replay on the recording's own version too."""
    from replay.wire.store import request_body

    wire = lambda v: FIXTURES / f"harness-{v}/wire_trust/workspace.cassette"  # noqa: E731
    roots = {json.dumps(request_body(load(wire(v)), load(wire(v)).exchanges[1].wire[0])).split("project root `")[1][:30]
             for v in (*VERSIONS, "0.60.0")}
    assert len(roots) == 5  # the fixtures do name five different roots
    for v in (*VERSIONS, "0.60.0"):
        doc = _diff_json(cli, wire(v), wire("0.62.0"))
        assert "replay-wire-ws-" not in json.dumps(doc["wire"]), (v, doc["wire"])
        assert _check_json(cli, wire(v)) == [], v
    assert _diff_json(cli, wire("0.60.0"), wire("0.62.0"))["status"] == "same"
    # control: what did change between the versions is still read (0.59's refusal was a retry prompt, and
    # FileSystem's tool descriptions were rewritten)
    paths = {w["path"] for w in _diff_json(cli, wire("0.59.0"), wire("0.62.0"))["wire"]}
    assert "messages[2].content" in paths and "tools[7].function.description" in paths
    r = cli("run", FIXTURES / "scenarios" / "wire_trust.py", "--cassettes", FIXTURES / "harness-0.62.0", "--format", "json")
    assert {sid: cell["status"] for sid, cell in json.loads(r.out)["scenarios"].items()} == {
        "wire_trust/structured_turns": "same", "wire_trust/workspace": "same"}, r.out


def test_sub_agents_are_roles_of_their_own_and_the_same_on_every_version(cli) -> None:
    """SubAgents: each delegate's requests are tagged with its agent's name, on every version."""
    for old in VERSIONS:
        doc = _diff_json(cli, FIXTURES / f"harness-{old}/trust/delegation.cassette", FIXTURES / "harness-0.62.0/trust/delegation.cassette")
        assert not doc["changed"], (old, doc["requests"])
        assert doc["roles"] == {"main": [3, 3], "researcher": [1, 1], "writer": [1, 1]}


def test_concurrent_runs_of_one_agent_are_checked_as_separate_conversations(cli) -> None:
    """asyncio.gather over four prompts: the runs' second requests interleave (q3's first). Each continues its
    own run's first request; against the role's previous request each looked like a history edited from the start."""
    for v in VERSIONS:
        cassette = FIXTURES / f"harness-{v}/trust/concurrent.cassette"
        r = cli("check", cassette)
        assert r.code == 0 and "cache_prefix_broken" not in r.out, (v, r.out)
        assert not _diff_json(cli, cassette, FIXTURES / "harness-0.62.0/trust/concurrent.cassette")["changed"]


def test_concurrent_conversations_arriving_in_order_each_find_their_own_summarizer(cli) -> None:
    """Three conversations compacted at once, every summarizer asked before the first main request and the main
    requests arriving in the order the runs started (s0 s1 s2 m0 m1 m2): the role does not interleave, and each
    request's window since the role's previous request held none of its own summarizer calls. Only x's loss was
    found on every version (0.54: x's whole loss, y's and z's U11 alone); whether y's and z's were found hung
    on the order the answers took (trust/concurrent_compaction, interleaved, found all three)."""
    for v in (*VERSIONS, "0.60.0"):
        cassette = FIXTURES / f"harness-{v}/trust/concurrent_compaction_in_order.cassette"
        c = load(cassette)
        assert [(ex.role, ex.index) for ex in sorted(c.exchanges, key=lambda e: e.seq)] == [
            ("summarizing_compaction", 0), ("summarizing_compaction", 1), ("summarizing_compaction", 2),
            ("main", 0), ("main", 1), ("main", 2)], v  # the fixtures hold the order that hid two losses
        found = {(x["index"], tuple(x["evidence"]["lost"])) for x in _check_json(cli, cassette) if x["invariant"] == "content_lost"}
        tail = ("U11",) if v == "0.54.0" else ()  # 0.54 loses the run's own prompt too (seed 001)
        assert found == {(i, tuple(f"{n}{m}" for m in ("A9", "U10", "A10", *tail))) for i, n in enumerate("xyz")}, (v, found)
        # control: the interleaved recording of the same case finds the same three losses
        if v == "0.60.0":
            continue  # trust/concurrent_compaction was not recorded on 0.60
        interleaved = _check_json(cli, FIXTURES / f"harness-{v}/trust/concurrent_compaction.cassette")
        assert sorted(x["evidence"]["lost"][0] for x in interleaved if x["invariant"] == "content_lost") == ["xA9", "yA9", "zA9"], v


def test_parallel_delegations_pair_by_conversation(cli) -> None:
    """Three delegations to one SubAgents delegate at once, two of them answering together: each version
    recorded them in another interleaving; the diff pairs requests by conversation and turn, not by arrival."""
    orders = set()
    for v in VERSIONS:
        cassette = FIXTURES / f"harness-{v}/trust/parallel.cassette"
        c = load(cassette)
        orders.add(tuple(str(c.messages[ex.messages[0]]["parts"][0]["content"]) for ex in c.exchanges if ex.role == "researcher"))
        assert not _diff_json(cli, cassette, FIXTURES / "harness-0.62.0/trust/parallel.cassette")["changed"], v
    assert len(orders) > 1  # the fixtures do hold different interleavings


def test_every_trust_scenario_replays_same_on_the_installed_version_three_times(cli) -> None:
    """Concurrent ones included: trust/parallel (two answers arriving together: by arrival the replay
    crossed the research results), concurrent_turns and concurrent_compaction (another conversation's
    summarizer taken for this one's moved the verdict with the interleaving)."""
    for _ in range(3):
        r = cli("run", FIXTURES / "scenarios" / "trust.py", "--cassettes", FIXTURES / "harness-0.62.0", "--format", "json")
        statuses = {sid: cell["status"] for sid, cell in json.loads(r.out)["scenarios"].items()}
        assert len(statuses) == 37 and set(statuses.values()) == {"same"}, statuses


def test_what_the_model_is_never_sent_is_not_a_change(cli) -> None:
    """An anonymous capability's tool carries a run-local ``capability_id`` (random in every run) and its tool
    return times itself in ``metadata``; neither reaches the model, nor do the ``tool_kind``/``unless_tool_kind``
    harness 0.60 stamps on ToolOutputLimits' reader tool (before: every request changed). A sliding window compacts without calling
    a model. A run id the model quotes back must be drawn again as recorded. On four versions: no diff, no
    violation (before: ``cache_prefix_broken`` on every one of these recordings and a changed diff)."""
    for name in ("anonymous_capability", "sliding_window", "run_id_quoted", "tool_output_limits"):
        for v in VERSIONS:
            cassette = FIXTURES / f"harness-{v}/trust/{name}.cassette"
            assert _check_json(cli, cassette) == [], (name, v)
            doc = _diff_json(cli, cassette, FIXTURES / f"harness-0.62.0/trust/{name}.cassette")
            assert not doc["changed"] and not doc["violations"], (name, v, doc["requests"])
    # what was dropped was there to drop: run-local ids that differ between runs, and timings
    c = load(FIXTURES / "harness-0.62.0/trust/anonymous_capability.cassette")
    ids = {t["capability_id"] for b in c.blobs if isinstance(b, dict) for t in b.get("function_tools") or ()}
    assert len(ids) == 3 and all(i.startswith("<_clock:") for i in ids), ids
    assert sum("latency_ms" in json.dumps(m) for m in c.messages) >= 3
    kinds = {v: {t.get("tool_kind") for b in load(FIXTURES / f"harness-{v}/trust/tool_output_limits.cassette").blobs
                 if isinstance(b, dict) for t in b.get("function_tools") or ()} for v in VERSIONS}
    assert kinds["0.59.0"] == {None} and "tool_output_limits.read_tool_result" in kinds["0.62.0"], kinds


def test_a_second_compaction_in_one_run_starts_from_the_first(cli) -> None:
    """Four tool calls compacted twice in one run: the second summarizer is given the first's summary.
    content_lost took the run's starting history as the second's input and flagged what the first had
    summarized, plus the run's final answer (on every version); what stays is 0.54-0.59's real growth."""
    for v in VERSIONS:
        found = {x["invariant"]: x for x in _check_json(cli, FIXTURES / f"harness-{v}/trust/two_compactions.cassette")}
        assert "content_lost" not in found, (v, found)
        assert ("compaction_grew_request" in found) == (v != "0.62.0"), (v, found)


def test_a_reminder_in_a_compacted_tool_loop_is_neither_lost_nor_growth(cli) -> None:
    """Five tool calls in one run, a reminder on every second request, compacted twice. The reminder rides
    on one request only (0.62 marks it request-scoped; 0.56 marks nothing), and the run's compacted result
    holds fewer answers than it made requests: content_lost took the reminder for lost, and
    compaction_grew_request measured requests that only gained it against a history missing turns."""
    for v in VERSIONS:
        assert _check_json(cli, FIXTURES / f"harness-{v}/trust/reminder_tool_loop.cassette") == [], v
        doc = _diff_json(cli, FIXTURES / f"harness-{v}/trust/reminder_tool_loop.cassette",
                         FIXTURES / "harness-0.62.0/trust/reminder_tool_loop.cassette")
        assert not [x for x in doc["violations"] if x["invariant"] in ("content_lost", "compaction_grew_request")], (v, doc["violations"])


def test_a_generated_reminder_kept_in_history_is_system_text_not_lost(cli) -> None:
    """An LLMReminder every third request, summarized twice. 0.62 keeps the generated reminder's system note in
    the history, sent to this FunctionModel as ``<system>…</system>`` user text and given to the summarizer as
    ``<message role="system">``: content_lost read the note as a user's words found nowhere (VIOLATED on a
    healthy 0.62 recording, and a new violation on every upgrade to it). 0.59 and 0.60 send it with one request."""
    versions = ("0.59.0", "0.60.0", "0.62.0")
    for v in versions:
        _clean_on(cli, v, "llm_reminder_kept")
    # the note is there to be read as lost: kept in 0.62's history, sent voiced, summarized in system voice
    c = load(FIXTURES / "harness-0.62.0/trust/llm_reminder_kept.cassette")
    voiced = [p["content"] for m in c.messages for p in m.get("parts", [])
              if p.get("part_kind") == "user-prompt" and str(p.get("content")).startswith("<system>A reminder model")]
    assert voiced
    mains = [ex for ex in c.exchanges if ex.role == "main"]
    assert any(voiced[0] == p.get("content") for ex in mains for i in ex.messages[:-1] for p in c.messages[i].get("parts", [])), \
        "the note is never re-sent with a later request: not kept"
    summarized = [p["content"] for ex in c.exchanges if ex.role == "summarizing_compaction" for i in ex.messages
                  for p in c.messages[i].get("parts", []) if isinstance(p.get("content"), str)]
    body = voiced[0].removeprefix("<system>").removesuffix("</system>")
    assert any(f'<message role="system">\n{body}\n</message>' in t for t in summarized)


def test_a_memory_snapshot_marked_by_a_string_is_not_a_users_loss(cli) -> None:
    """Memory with a store from an earlier session, summarized twice. Up to 0.60 the snapshot rides on each
    request alone, marked by a bare string (``pydantic-ai-harness.memory.v1:<scope>``), not an ``origin``:
    content_lost read the store's text as a user's words found nowhere (VIOLATED on 0.54-0.60, ``gone`` on
    every upgrade to 0.62, which keeps the snapshot in history with an origin)."""
    versions = ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0")
    for v in versions:
        _clean_on(cli, v, "memory_snapshot")
    # the snapshot is there to be read as lost: string-marked, sent with a request, in no summarizer input
    for v in versions[:-1]:
        c = load(FIXTURES / f"harness-{v}/trust/memory_snapshot.cassette")
        marked = [item["content"] for m in c.messages for p in m.get("parts", []) if isinstance(p.get("content"), list)
                  for item in p["content"] if isinstance(item, dict) and str(item.get("metadata")).startswith("pydantic-ai-harness.memory.v1:")]
        assert marked and all("a sign-off from Priya" in text for text in marked), v
        summarized = " ".join(str(p.get("content")) for ex in c.exchanges if ex.role == "summarizing_compaction"
                              for i in ex.messages for p in c.messages[i].get("parts", []))
        assert "a sign-off from Priya" not in summarized, v


def test_a_reminder_sent_alone_counts_on_both_sides_of_a_compaction(cli) -> None:
    """A long static reminder on every request, six turns summarized twice. Up to 0.60 the reminder rides on
    its one request (a user prompt opening with a cache point) and is in no history: compaction_grew_request
    measured the compacted request with it against the uncompacted history without it, and read a compaction
    that halved the history as grown (VIOLATED on 0.54-0.60, ``gone`` on every upgrade to 0.62)."""
    versions = ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0")
    for v in versions:
        _clean_on(cli, v, "reminder_outweighs_compaction")
    for v in versions[:-1]:  # the reminder is there to be counted: sent with a cache point ahead along with a summary
        c = load(FIXTURES / f"harness-{v}/trust/reminder_outweighs_compaction.cassette")
        compacted = [ex for ex in c.exchanges if ex.role == "main" and any(
            p.get("part_kind") == "system-prompt" and str(p.get("content")).startswith("Summary of previous conversation")
            for i in ex.messages for p in c.messages[i].get("parts", []))]
        assert any(any(isinstance(p.get("content"), list) and p["content"][0] == {"kind": "cache-point", "ttl": "5m"}
                       for p in c.messages[ex.messages[-1]].get("parts", [])) for ex in compacted), v


def test_a_tool_loop_cleared_in_place_is_measured_by_what_the_model_was_sent(cli) -> None:
    """TieredCompaction(ClearToolResults, SummarizingCompaction), one streamed loop of six greps: the summary comes
    once, on top of everything (a real growth at main[2]), then the clearing tier blanks one more result per request
    in the run's history too. compaction_grew_request measured against that history ("[tool result cleared]" where
    the model had been sent the results) and listed every later request as grown: uncompacted 34, 45, 56, 164, 271."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        cassette = FIXTURES / f"harness-{v}/trust/tiered_clear_then_summary.cassette"
        grew = [x for x in _check_json(cli, cassette) if x["invariant"] == "compaction_grew_request"]
        assert [x["evidence"]["requests"] for x in grew] == [[2]], (v, grew)
        assert grew[0]["evidence"]["uncompacted"] == [226], (v, grew)  # the prompt and two whole results
        c = load(cassette)
        assert any("[tool result cleared]" in str(p.get("content")) for run in c.runs for i in run.result
                   for p in c.messages[i].get("parts", [])), v  # the run's history holds the blanks
        doc = _diff_json(cli, cassette, FIXTURES / "harness-0.62.0/trust/tiered_clear_then_summary.cassette")
        assert not doc["new_violations"], (v, doc["violations"])


def test_steering_enqueued_into_a_trimmed_tool_loop_is_history(cli) -> None:
    """A TrajectoryJudge steers a tool loop that a SlidingWindowCompaction trims. The steering lands after a tool
    result, where the harness also puts what one request carries alone; the uncompacted history, rebuilt from the
    requests, left it out, and the trimmed request read as grown by it (34 tokens before, 190 after on 0.59+)."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        cassette = _clean_on(cli, v, "steer_in_window")
        c = load(cassette)  # the steering is there, re-sent after the request it came with: history
        mains = [ex for ex in c.exchanges if ex.role == "main"]
        steered = [k for k, ex in enumerate(mains) if "open the failing test" in json.dumps(c.messages[ex.messages[-1]])]
        assert steered and any("open the failing test" in json.dumps([c.messages[i] for i in ex.messages[:-1]])
                               for ex in mains[steered[0] + 1 :]), v


def test_an_earlier_prompt_alike_is_not_the_runs_own(cli) -> None:
    """Six turns of "Read page N of the invoice." under a SummarizingCompaction with receipts. On 0.62 a compaction
    inside a turn summarizes that turn's prompt away, and the run's result holds only the first turn's prompt:
    content_lost took it (one word apart: a redaction) for the run's own, the receipt after it for the request
    being answered, and read it as left out (VIOLATED on a healthy 0.62 recording, new on every upgrade to it)."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        _clean_on(cli, v, "repeated_prompt_receipts")
    c = load(FIXTURES / "harness-0.62.0/trust/repeated_prompt_receipts.cassette")  # the shape: a turn's result without its prompt
    texts = [[json.dumps(c.messages[i]) for i in run.result] for run in c.runs if run.role == "main"]
    prompts = [run.prompt for run in c.runs if run.role == "main"]
    assert any(not any(p in t for t in ts) and any("Read page 1 of the invoice." in t for t in ts) for p, ts in zip(prompts, texts, strict=True))


def test_a_request_sent_whole_while_a_summary_is_written_in_the_background_is_not_compacted(cli) -> None:
    """An LLMReminder every second request and FallbackCompaction(background_start=0.5), 0.62. The reminder's
    note is kept in the history as a system prompt and sent to this FunctionModel as ``<system>…</system>`` user
    text; a request sent whole while its summarizer ran in the background read as compacted (the note, wrapped
    otherwise, "not re-sent") and as grown by the tags: VIOLATED on a healthy recording."""
    cassette = FIXTURES / "harness-0.62.0/trust/background_summary_llm_reminder.cassette"
    assert _check_json(cli, cassette) == []
    c = load(cassette)  # the shape: a summarizer ran, the next request was sent whole with a voiced note
    seq = [ex.role for ex in sorted(c.exchanges, key=lambda e: e.seq)]
    first = seq.index("summarizing_compaction")
    after = next(ex for ex in sorted(c.exchanges, key=lambda e: e.seq) if ex.seq > first and ex.role == "main")
    before = max((ex for ex in c.exchanges if ex.role == "main" and ex.seq < after.seq), key=lambda e: e.seq)
    assert len(after.messages) > len(before.messages)  # nothing dropped: the summary is applied turns later
    assert any(str(p.get("content")).startswith("<system>A reminder model") for i in after.messages for p in c.messages[i]["parts"])


def test_a_resumed_runs_deferred_results_are_in_the_uncompacted_history(cli) -> None:
    """Five CI jobs run by an external (deferred) tool: each run stops at the call and is resumed without a
    prompt (``deferred_tool_results``) with the job's long log. The resumed run's own messages open with the
    request carrying the log; read from its first answer on, no log was in the uncompacted history, and every
    compaction that halved a resumed request read as grown (30 tokens before, 229-280 after, on every version)."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        _clean_on(cli, v, "deferred_resume_compacted")
    c = load(FIXTURES / "harness-0.62.0/trust/deferred_resume_compacted.cassette")  # the shape: resumed runs, compacted
    resumed = [r for r in c.runs if r.role == "main" and r.prompt is None]
    assert len(resumed) == 5 and any(any(p.get("part_kind") == "compaction" for i in r.result for p in c.messages[i]["parts"]) for r in resumed)


def test_an_observed_usage_grows_like_pydantic_ais_own(cli) -> None:
    """Two turns with a tool, the run's usage observed after each: slims after 2.56 dump it with two more counters
    at zero (``cache_write_1h_tokens``, ``output_reasoning_tokens``). Kept as the user's value, ``null → 0`` read
    ``changed`` between 0.54/0.56 and 0.59+ for the very same requests and answers."""
    new = load(FIXTURES / "harness-0.62.0/trust/usage_observed.cassette")
    (seen,) = [o.value for o in new.observations if o.name == "usage"]
    assert seen[0]["cache_write_1h_tokens"] == 0 and seen[0]["input_tokens"] > 0  # the shape: a counter the old slims lack
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0"):
        doc = _diff_json(cli, _clean_on(cli, v, "usage_observed"), FIXTURES / "harness-0.62.0/trust/usage_observed.cassette")
        assert not doc["changed"] and not doc["observations"], (v, doc["observations"])


def test_observed_stream_events_grow_like_pydantic_ais_own(cli) -> None:
    """A streamed run's events observed whole: slim 2.62's text delta carries ``citations_delta`` (None), 2.60's and
    older lack it, and the same stream read ``changed`` (``events[7].delta.citations_delta: null → null``)."""
    new = load(FIXTURES / "harness-0.62.0/trust/events_observed.cassette")
    (events,) = [o.value for o in new.observations if o.name == "events"]
    assert any("citations_delta" in (e.get("delta") or {}) for e in events)  # the shape: a field the older slims lack
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0"):
        doc = _diff_json(cli, _clean_on(cli, v, "events_observed"), FIXTURES / "harness-0.62.0/trust/events_observed.cassette")
        assert not doc["changed"] and not doc["observations"], (v, doc["observations"])


def _observed_events(cassette: Path) -> list[dict]:
    (events,) = [o.value for o in load(cassette).observations if o.name == "events"]
    return list(events)


def test_a_measured_duration_in_an_observed_event_is_no_change(cli) -> None:
    """SubAgents' ``delegation_end`` event, observed from ``run_stream_events``, times the delegation
    (``duration_seconds``: a clock reading). Read as the event's value, every replay was ``changed``, on the
    recording's own version too, and so was every pair of versions (0.54.0-0.62.0)."""
    ends = {v: _observed_events(FIXTURES / f"harness-{v}/trust/delegation_events.cassette")[-1] for v in (*VERSIONS, "0.60.0")}
    assert len({e["duration_seconds"] for e in ends.values()}) == 5  # the shape: five recordings, five durations
    assert {e["kind"] for e in ends.values()} == {"sub_agents.delegation_end"}
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0"):
        doc = _diff_json(cli, _clean_on(cli, v, "delegation_events"), FIXTURES / "harness-0.62.0/trust/delegation_events.cassette")
        assert not doc["changed"] and not doc["observations"], (v, doc["observations"])


def test_an_events_capability_handle_is_no_change(cli) -> None:
    """AskUser has no explicit id up to 0.59, so its events carry a run-local handle (``capability_id:
    <ask_user:18066e>``) where 0.60+ stamp ``ask_user``: the same requested and answered events read ``changed``
    between 0.54/0.56/0.59 and 0.60+, as a tool definition's ``capability_id`` did before it was left out."""
    ids = {v: {e["capability_id"] for e in _observed_events(FIXTURES / f"harness-{v}/trust/ask_user_events.cassette")}
           for v in (*VERSIONS, "0.60.0")}
    assert ids["0.62.0"] == ids["0.60.0"] == {"ask_user"}  # the shape: a handle up to 0.59, the name after
    assert all(len(ids[v]) == 1 and next(iter(ids[v])).startswith("<ask_user:") for v in ("0.54.0", "0.56.0", "0.59.0")), ids
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0"):
        doc = _diff_json(cli, _clean_on(cli, v, "ask_user_events"), FIXTURES / "harness-0.62.0/trust/ask_user_events.cassette")
        assert not doc["changed"] and not doc["observations"], (v, doc["observations"])


def test_what_an_observed_event_says_is_still_compared(cli, tmp_path: Path) -> None:
    """Control for the two above: the delegate's answer in the end event, or the answer the user picked, is what
    the run saw; an edit of either in 0.54.0's real recording reads ``changed`` against 0.62.0's."""
    from replay.cassette import save

    for name, edit in (("delegation_events", lambda e: e[-1].update(output="TLS 1.0: 2001")),
                       ("ask_user_events", lambda e: e[-1]["response"]["answers"][0].update(selected=["SQLite"]))):
        c = load(FIXTURES / f"harness-0.54.0/trust/{name}.cassette")
        (obs,) = [o for o in c.observations if o.name == "events"]
        edit(obs.value)
        doc = _diff_json(cli, save(c, tmp_path / f"{name}.cassette"), FIXTURES / f"harness-0.62.0/trust/{name}.cassette")
        assert doc["changed"] and doc["observations"], (name, doc)


def test_the_agents_own_growing_instructions_are_no_harness_cache_bust(cli) -> None:
    """``@agent.instructions`` listing the facts learned so far, one long line more each turn, eight turns summarized:
    nothing is cached from turn to turn (instructions lead the prompt), but the history is re-sent as it was and
    it is the scenario's own agent that changed. cache_prefix_broken read it as the harness editing messages in
    place on every turn no summarizer ran before (``main[2] 0/317, main[4] 0/530, main[6] 0/743``), on every version."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        _clean_on(cli, v, "growing_instructions")
    c = load(FIXTURES / "harness-0.62.0/trust/growing_instructions.cassette")  # the shape: the agent's own parts grew
    own = [[p["content"] for p in c.blobs[ex.parameters]["instruction_parts"] if p.get("id") is None]
           for ex in c.exchanges if ex.role == "main" and ex.parameters is not None]
    assert len({len(x[0]) for x in own}) >= 8


def test_the_agents_own_tool_offered_later_is_no_harness_cache_bust(cli) -> None:
    """A checkout tool the agent's own ``prepare`` offers from the third turn on: that turn caches nothing (the tools
    lead the prompt), but the scenario changed its own agent; cache_prefix_broken read it as the harness editing
    messages in place (``main[2] 0/26``) on every version."""
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        _clean_on(cli, v, "gated_tool")
    c = load(FIXTURES / "harness-0.62.0/trust/gated_tool.cassette")  # the shape: the agent's own tool appears
    offered = [[t["name"] for t in c.blobs[ex.parameters]["function_tools"] if t.get("capability_id") is None]
               for ex in c.exchanges if ex.role == "main" and ex.parameters is not None]
    assert offered[:3] == [[], [], ["checkout"]]


def test_a_warm_provider_cache_is_no_change(cli) -> None:
    """One conversation against a real OpenAIChatModel recorded cold on each version and warm (the provider reports
    ``cached_tokens``) on 0.62.0: the same requests and answers, but each response's ``cache_read_tokens`` and the
    ``cost`` they lower read ``changed`` on every request after the first, also on the recording's own version."""
    warm = FIXTURES / "warm-cache/trust/provider_cache_warm.cassette"
    c = load(warm)  # the shape: the provider reported a cache hit on every answer
    assert all(c.messages[ex.response]["usage"].get("cache_read_tokens") == 8 for ex in c.exchanges if ex.response is not None)
    for v in ("0.54.0", "0.56.0", "0.59.0", "0.60.0", "0.62.0"):
        doc = _diff_json(cli, _clean_on(cli, v, "provider_cache_warm"), warm)
        assert not doc["changed"] and not doc["requests"], (v, doc["requests"])


def _clean_on(cli, version: str, name: str) -> Path:
    """``trust/<name>`` recorded on ``version``: no violation checked alone, none diffed against 0.62.0's."""
    cassette = FIXTURES / f"harness-{version}/trust/{name}.cassette"
    assert _check_json(cli, cassette) == [], version
    doc = _diff_json(cli, cassette, FIXTURES / f"harness-0.62.0/trust/{name}.cassette")
    assert not doc["violations"], (version, doc["violations"])
    return cassette


def _check_json(cli, cassette: Path) -> list[dict]:
    r = cli("check", cassette, "--format", "json")
    assert r.code in (0, 1), r.err
    return list(json.loads(r.out)["violations"])


def test_concurrent_compactions_are_each_checked_with_their_own_summarizer(cli) -> None:
    """Seed 001's loss in three conversations at once: one content_lost each, naming that conversation's
    messages and its own summarizer call (the run it was made in), as the single conversation has it."""
    for v in VERSIONS:
        cassette = FIXTURES / f"harness-{v}/trust/concurrent_compaction.cassette"
        c = load(cassette)
        owner = {ex.index: [n for n in "xyz" if f"{n}U1" in json.dumps(c.expand(ex.messages))]  # whose messages it summarized
                 for ex in c.exchanges if ex.role == "summarizing_compaction"}
        found = [x for x in _check_json(cli, cassette) if x["invariant"] == "content_lost"]
        assert len(found) == 3, (v, found)
        for x in found:
            name = x["evidence"]["lost"][0][0]
            assert {m[0] for m in x["evidence"]["lost"]} == {name}, (v, x)
            assert [m[1:] for m in x["evidence"]["lost"]][:3] == ["A9", "U10", "A10"], (v, x)
            (summarizer,) = x["evidence"]["summarizer"]
            assert owner[int(summarizer.split("[")[1].rstrip("]"))] == [name], (v, x)


def test_concurrent_compacted_conversations_check_alike(cli) -> None:
    """Three six-turn conversations at once, compacted as they go: no conversation's check sees another's
    summarizer (0.54-0.59 grow the same requests in each: the figures of one conversation, three times)."""
    from replay._conversations import turns

    for v in VERSIONS:
        cassette = FIXTURES / f"harness-{v}/trust/concurrent_turns.cassette"
        found = _check_json(cli, cassette)
        assert not [x for x in found if x["invariant"] != "compaction_grew_request"], (v, found)
        c = load(cassette)
        of_runs = turns(c.runs)
        conversation = {ex.index: of_runs[ex.run][0] for ex in c.exchanges if ex.role == "main"}
        for x in found:
            grown: dict[int, list[tuple[int, int]]] = {}
            for i, before, after in zip(x["evidence"]["requests"], x["evidence"]["uncompacted"], x["evidence"]["after"]):
                grown.setdefault(conversation[i], []).append((before, after))
            assert len(grown) == 3 and len({tuple(g) for g in grown.values()}) == 1, (v, grown)


def test_concurrent_conversations_recorded_in_another_interleaving_grow_alike(cli) -> None:
    """trust/concurrent_turns recorded twice on harness 0.54.0: the same three conversations, their requests
    interleaved in another order (asyncio's, not the harness's). The requests compared `same`, but
    `compaction_grew_request` graded each growth by the role's request ordinal, which names another
    conversation's turn in the other interleaving: `violation (worse)` and `changed` on one version."""
    a = FIXTURES / "harness-0.54.0/trust/concurrent_turns.cassette"
    b = FIXTURES / "interleaved/harness-0.54.0/trust/concurrent_turns.cassette"
    runs = [[ex.run for ex in load(p).exchanges if ex.role == "main"] for p in (a, b)]
    assert runs[0] != runs[1] and {load(p).header.harness_version for p in (a, b)} == {"0.54.0"}
    for old, new in ((a, b), (b, a)):
        doc = _diff_json(cli, old, new)
        assert not doc["changed"], (doc["requests"], doc["violations"])
        assert [(v["invariant"], v["status"]) for v in doc["violations"]] == [("compaction_grew_request", "unchanged")]


def test_one_extra_turn_is_inserted_entries_not_a_cascade(cli) -> None:
    doc = _diff_json(cli, FIXTURES / "harness-0.62.0/trust/inserted.cassette", FIXTURES / "extra-turn/trust/inserted.cassette")
    for req in doc["requests"]:
        assert [(e["kind"], e["path"], e["label"]) for e in req["entries"] if e["kind"] != "changed"] == [
            ("inserted", "messages[6]", "one more thing: keep it short"),
            ("inserted", "messages[7]", "sure"),
        ]
        # later messages are not "changed" by the shift; only FunctionModel's usage figures (it counts the request) moved
        assert [c["path"] for c in req["changes"] if ".usage." not in c["path"]] == [], req["changes"]
    assert doc["requests"][1]["gained"] == ["one more thing: keep it short", "sure"]
    for v in VERSIONS:  # and without the extra turn, every version sends the same history
        assert not _diff_json(cli, FIXTURES / f"harness-{v}/trust/inserted.cassette", FIXTURES / "harness-0.62.0/trust/inserted.cassette")["changed"]


def test_a_dropped_prompt_is_the_only_loss_when_the_rest_is_rewrapped(cli) -> None:
    """seed001 on 0.54 drops the current prompt U11; the summary moved from a compaction part to a system prompt.
    The kept prompts, a one-item text list on 0.62 and a plain string on 0.54, are the same prompt (not rewrapped)."""
    doc = _diff_json(cli, NEW / "seed001" / "keep_user_messages_true.cassette", OLD / "seed001" / "keep_user_messages_true.cassette")
    (main,) = [r for r in doc["requests"] if r["role"] == "main"]
    assert main["lost"] == ["U11"]
    rewrapped = [e["label"] for e in main["entries"] if e["kind"] == "rewrapped"]
    assert rewrapped == ["Summary."]


def test_paths_sort_naturally(cli) -> None:
    doc = _diff_json(cli, OLD / "seed000" / "reminders_default.cassette", NEW / "seed000" / "reminders_default.cassette")
    labels = [f"{r['role']}[{r['index']}]" for r in doc["requests"]]
    assert labels.index("main[2]") < labels.index("main[10]")
    for r in doc["requests"]:
        paths = [c["path"] for c in r["changes"]]
        assert paths == sorted(paths, key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p)])


def test_header_says_each_version_once(cli) -> None:
    r = cli("diff", ROOT / "tests/fixtures/harness-0.54.0/seed000/long.cassette", ROOT / "cassettes/seed000/long.cassette")
    assert r.code == 1, r.err
    assert "harness 0.54.0, slim 2.54.0; harness 0.62.0, slim 2.62.0" in r.out
    assert "harness 0.54.0: harness 0.54.0" not in r.out


def test_clearing_tool_results_on_every_request_is_the_worse_cache_bust(cli) -> None:
    """ClearToolResults(max_messages=6, keep_pairs=1) up to 0.57 blanks one more result on every request:
    the previous request's own tool return, which passed as a reminder left out (no violation counted for
    it), so 0.58's batched clearing read as a regression. Now every bust counts and the role's total grades."""
    busts = {v: [x["evidence"]["requests"] for x in _check_json(cli, FIXTURES / f"harness-{v}/trust/clear_tool_results.cassette")
                 if x["invariant"] == "cache_prefix_broken"] for v in VERSIONS}
    assert busts == {"0.54.0": [[3, 4, 5, 6, 7, 8]], "0.56.0": [[3, 4, 5, 6, 7, 8]], "0.59.0": [[3, 6]], "0.62.0": [[3, 6]]}
    old, new = (FIXTURES / f"harness-{v}/trust/clear_tool_results.cassette" for v in ("0.56.0", "0.62.0"))
    forward, backward = _diff_json(cli, old, new), _diff_json(cli, new, old)
    assert [x["status"] for x in forward["violations"]] == ["better"] and not forward["new_violations"]
    assert [x["status"] for x in backward["violations"]] == ["worse"] and backward["new_violations"]


def test_directories_at_different_levels_are_one_clear_error(cli) -> None:
    """`diff cassettes/seed001 fixtures/harness-0.54.0` paired nothing and printed an error cell per cassette."""
    r = cli("diff", ROOT / "cassettes" / "seed001", FIXTURES / "harness-0.54.0")
    assert r.code == 2 and r.out == ""
    assert "no cassette has a counterpart at the same path" in r.err and len(r.err.strip().splitlines()) == 1
    ok = cli("diff", ROOT / "cassettes" / "seed001", FIXTURES / "harness-0.54.0" / "seed001")
    assert "keep_user_messages_true" in ok.out


def test_a_relevance_judge_is_no_summarizer(cli) -> None:
    """RelevanceCompaction's judge (a harness compaction module's agent) scores steps with a structured answer:
    it was taken for a summarizer whose empty summary had been accepted, on every judge call."""
    assert _check_json(cli, FIXTURES / "harness-0.62.0/trust/relevance.cassette") == []


def test_harness_data_capped_for_the_summarizer_is_not_a_users_loss(cli) -> None:
    """A BackgroundTools result (harness data on the user channel) that 0.60+ caps for the summarizer like a
    tool return: content_lost on 0.62 only, so diffing a 0.59 recording against 0.62 said "new" loss."""
    for v in VERSIONS:
        assert _check_json(cli, FIXTURES / f"harness-{v}/trust/harness_data.cassette") == [], v
    doc = _diff_json(cli, FIXTURES / "harness-0.59.0/trust/harness_data.cassette", FIXTURES / "harness-0.62.0/trust/harness_data.cassette")
    assert doc["new_violations"] == [] and doc["violations"] == []
    assert doc["changed"]  # what the summarizer is given did change: the report is capped on 0.62


def test_a_cache_point_placed_on_text_already_sent_is_no_cache_bust(cli) -> None:
    """Planning on 0.52-0.56 marks the first prompt with a CachePoint from the second request on: a directive
    to the provider's cache, not an edit of the prefix it matches. It read as a bust of the whole prefix."""
    recorded = FIXTURES / "harness-0.54.0/harness_tests/planning/write_then_read_plan.cassette"
    assert any("cache-point" in json.dumps(m) for m in load(recorded).messages)  # the marker is there to ignore
    assert _check_json(cli, recorded) == []
    doc = _diff_json(cli, ROOT / "cassettes/harness_tests/planning/write_then_read_plan.cassette", recorded)
    assert not doc["violations"] and not doc["new_violations"]


def test_the_workspace_a_run_worked_in_is_not_a_change(cli) -> None:
    """LocalWorkspace on a fresh temp dir: every response carries its absolute path (`workspace_ref`, not sent
    to the model). Replayed on the version it was recorded on, the scenario read `changed`."""
    paths = {json.dumps(m.get("workspace_ref")) for v in VERSIONS
             for m in load(FIXTURES / f"harness-{v}/trust/workspace.cassette").messages if m.get("workspace_ref")}
    assert len(paths) == len(VERSIONS)  # a new temp dir in every recording
    r = cli("run", FIXTURES / "scenarios" / "trust.py", "--cassettes", FIXTURES / "harness-0.62.0", "--format", "json")
    assert json.loads(r.out)["scenarios"]["trust/workspace"]["status"] == "same"
    for v in VERSIONS:
        doc = _diff_json(cli, FIXTURES / f"harness-{v}/trust/workspace.cassette", FIXTURES / "harness-0.62.0/trust/workspace.cassette")
        assert "workspace_ref" not in json.dumps(doc["requests"]), v
        assert "replay-trust-ws-" not in json.dumps(doc["requests"]), v  # the root a tool quoted: <workspace#1> on both sides
    quoted = [m for m in load(FIXTURES / "harness-0.62.0/trust/workspace.cassette").messages if "replay-trust-ws-" in json.dumps(m.get("parts"))]
    assert quoted  # the refusal of ../outside.txt names the root in what the model is sent


def test_a_call_the_harness_cancelled_is_cancelled_again_on_replay(cli) -> None:
    """A parallel InputGuardrail blocks a prompt while the main model is answering; the harness cancels that
    call (recorded as a CancelledError). Replayed, it was raised at once: `changed` on the version itself."""
    recorded = load(FIXTURES / "harness-0.62.0/trust/guardrail_cancel.cassette")
    assert [ex.error.type for ex in recorded.exchanges if ex.error] == ["asyncio.exceptions.CancelledError"]
    for _ in range(2):
        r = cli("run", FIXTURES / "scenarios" / "trust.py", "--cassettes", FIXTURES / "harness-0.62.0", "--format", "json")
        assert json.loads(r.out)["scenarios"]["trust/guardrail_cancel"]["status"] == "same"
    for v in VERSIONS:  # and every version's recording agrees with 0.62's
        assert not _diff_json(cli, FIXTURES / f"harness-{v}/trust/guardrail_cancel.cassette",
                              FIXTURES / "harness-0.62.0/trust/guardrail_cancel.cassette")["changed"], v


def test_a_kept_user_message_wrapped_in_one_text_item_is_the_same_prompt(cli) -> None:
    """Harness 0.60 keeps a user message as ``[TextContent("U6", metadata=<marker>)]`` ("which the model reads
    the same way"); with the marker left out as never sent, the one-item list still read ``rewrapped`` and
    every keep_user_messages scenario was `changed` between 0.59 and 0.60. Real recordings on both."""
    old, new = FIXTURES / "harness-0.59.0" / "seed001", FIXTURES / "harness-0.60.0" / "seed001"
    wrapped = load(new / "compact_direct_keep_user_messages_true.cassette")
    assert any(type(p.get("content")) is list for m in wrapped.messages for p in m.get("parts", [])
               if p.get("part_kind") == "user-prompt")  # the wrapping is there to see through
    r = cli("diff", old, new, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 0 and {s["status"] for s in doc["scenarios"].values()} == {"same"}, r.out


def test_two_different_scenarios_are_said_to_be_so(cli) -> None:
    """`diff` of the cassettes of two scenarios printed `SAME seed000/long` with `warning the scenario's source
    changed since the recording`, as if one scenario had been edited."""
    r = cli("diff", NEW / "seed000" / "long.cassette", NEW / "seed000" / "short.cassette")
    assert "the cassettes hold two different scenarios ('seed000/long', 'seed000/short'): not one scenario on two versions" in r.out
    assert "the scenario's source changed" not in r.out


def test_a_two_file_json_diff_names_its_scenario_as_every_other_format_does(cli) -> None:
    """Text, Markdown and JUnit of `replay diff A.cassette B.cassette` name the scenario; its JSON did not."""
    a, b = OLD / "seed000" / "long.cassette", NEW / "seed000" / "long.cassette"
    doc = json.loads(cli("diff", a, b, "--format", "json").out)
    assert doc["scenario_id"] == "seed000/long"
    assert "`seed000/long`" in cli("diff", a, b, "--format", "markdown").out


def test_an_instructions_edit_is_one_line_though_slim_sends_it_twice(cli) -> None:
    """0.62 rewords Memory's instructions; slim 2.62 sends them joined on the message and part by part in the
    parameters. The text says the edit once per request, under the message; the JSON keeps both changes."""
    a, b = (FIXTURES / f"harness-{v}/trust/memory_snapshot.cassette" for v in ("0.59.0", "0.62.0"))
    r = cli("diff", a, b)
    assert r.code == 1 and "main[0].messages[0].instructions: " in r.out, r.out
    assert "instruction_parts" not in r.out
    paths = [c["path"] for q in _diff_json(cli, a, b)["requests"] for c in q["changes"]]
    assert "main[0].parameters.instruction_parts[0].content" in paths and "main[0].messages[0].instructions" in paths



ENV = FIXTURES / "env"
"""One harness (0.62.0), several environments (tests/fixtures/env/README.md): ``here`` is this repository's."""


def test_the_same_run_in_another_environment_is_the_same(cli) -> None:
    """trust/workspace and wire_trust/workspace (a LocalWorkspace made with mkdtemp, in process and over HTTP) and
    env/traceback_text (a tool returning its traceback) recorded here and ``elsewhere``: Python 3.13,
    TMPDIR=/tmp/replay-tmpdir-b, another checkout path, venv, HOME, TZ, LANG, PYTHONHASHSEED, user and hostname. The
    refusal of ``../outside.txt`` names the workspace's parent, ``$TMPDIR/outside.txt``, and the traceback this
    checkout's file: every request after the first read ``changed``, in the messages and on the wire."""
    for sid in ("trust/workspace", "wire_trust/workspace", "env/traceback_text"):
        a, b = load(ENV / f"here/{sid}.cassette"), load(ENV / f"elsewhere/{sid}.cassette")
        assert (a.header.paths["tempdir"], b.header.paths["tempdir"]) == (["/tmp"], ["/tmp/replay-tmpdir-b"])
        assert a.header.paths["project"] != b.header.paths["project"]
        # the shape: the texts do differ
        assert json.dumps(a.messages).count(a.header.paths["tempdir"][0] + "/") > 0
        assert b.header.paths["tempdir"][0] in json.dumps(b.messages) or b.header.paths["project"][0] in json.dumps(b.messages)
        doc = _diff_json(cli, ENV / f"here/{sid}.cassette", ENV / f"elsewhere/{sid}.cassette")
        assert doc["status"] == "same" and not doc["requests"] and not doc.get("wire"), (sid, doc["requests"], doc.get("wire"))
    # control: what a harness version changed is still read against the other environment's recording
    for sid in ("trust/workspace", "wire_trust/workspace"):
        assert _diff_json(cli, FIXTURES / f"harness-0.59.0/{sid}.cassette", ENV / f"elsewhere/{sid}.cassette")["status"] == "changed"
    # across versions too: 0.60.0 sends what 0.62.0 sends (recorded here), and the other environment's recording reads so
    assert _diff_json(cli, FIXTURES / "harness-0.60.0/wire_trust/workspace.cassette",
                      ENV / "elsewhere/wire_trust/workspace.cassette")["status"] == "same"
    # replayed here, on the installed harness, the other environment's recordings are its behaviour
    for scenarios in ("trust.py", "wire_trust.py", "env_trust.py"):
        r = cli("run", FIXTURES / "scenarios" / scenarios, "--cassettes", ENV / "elsewhere", "--format", "json")
        cells = {sid: c["status"] for sid, c in json.loads(r.out)["scenarios"].items() if (ENV / f"elsewhere/{sid}.cassette").exists()}
        assert cells and set(cells.values()) == {"same"}, r.out[-2000:]


def test_a_checkout_in_another_folder_is_the_same(cli) -> None:
    """env/traceback_text recorded here and from a clone at another path (same Python, venv, TMPDIR): the traceback
    names the scenario file by its absolute path, so the checkout's place read ``changed``. Control: the file's line
    and the error are still compared (the traceback's text)."""
    a, b = ENV / "here/env/traceback_text.cassette", ENV / "checkout/env/traceback_text.cassette"
    assert load(a).header.paths["project"] != load(b).header.paths["project"]
    doc = _diff_json(cli, a, b)
    assert doc["status"] == "same" and not doc["requests"], doc["requests"]
    assert 'File \\"<project>/tests/fixtures/scenarios/env_trust.py\\", line' in json.dumps(
        normalise(load(b)).requests["main"][1].body)


def test_the_same_run_under_another_pydantic_is_the_same(cli) -> None:
    """env/validation_text recorded on 0.62.0 under pydantic 2.14.4 (here) and 2.13.0 (both allowed by slim 2.62): the
    tool's ``str(validation_error)`` ends with pydantic's link naming its own minor, and the same behaviour read
    ``changed`` (``…errors.pydantic.dev/2.14/v/int_parsing → …/2.13/v/int_parsing``)."""
    new, old = ENV / "here/env/validation_text.cassette", ENV / "pydantic-2.13.0/env/validation_text.cassette"
    assert "errors.pydantic.dev/2.13/" in json.dumps(load(old).messages)  # the shape: the link does differ
    assert "errors.pydantic.dev/2.14/" in json.dumps(load(new).messages)
    doc = _diff_json(cli, new, old)
    assert doc["status"] == "same" and not doc["requests"], doc["requests"]
    r = cli("run", FIXTURES / "scenarios" / "env_trust.py", "--cassettes", ENV / "pydantic-2.13.0", "--format", "json")
    cells = json.loads(r.out)["scenarios"]
    assert {sid: cells[sid]["status"] for sid in ("env/validation_text", "env/traceback_text")} == {
        "env/validation_text": "same", "env/traceback_text": "same"}, r.out[-2000:]


def test_a_wire_change_between_provider_sdks_is_not_blamed_on_the_scenario(cli) -> None:
    """wire_env/anthropic_tool recorded on harness 0.62.0 with anthropic 2.16.0 and with anthropic 1.15.0 (all else
    equal): the SDK sends another path and ``anthropic-version``, a real difference in what the provider is sent, so
    ``changed``. The report said both sides ran one harness and slim, so "the change comes from the scenario (…)
    not the harness; `replay record --check-determinism 3` tells the two apart" — which finds nothing: the header now
    names the provider SDKs a wire cassette was recorded with, and the report names the one that moved."""
    new, old = ENV / "here/wire_env/anthropic_tool.cassette", ENV / "anthropic-1.15.0/wire_env/anthropic_tool.cassette"
    assert (load(new).header.sdk_versions["anthropic"], load(old).header.sdk_versions["anthropic"]) == ("2.16.0", "1.15.0")
    doc = _diff_json(cli, new, old)
    assert doc["status"] == "changed" and {w["path"] for w in doc["wire"]} == {"endpoint", "headers.anthropic-version"}
    warnings = " ".join(doc["warnings"])
    assert "anthropic 2.16.0 → 1.15.0" in warnings and "comes from the scenario" not in warnings, doc["warnings"]
    # control: one recording against itself is the same, and names nothing
    same = _diff_json(cli, new, new)
    assert same["status"] == "same" and not same["warnings"]


def test_a_traceback_drawn_by_another_python_is_the_same(cli) -> None:
    """env/traceback_call recorded on Python 3.13 (``elsewhere``) and replayed here on 3.11: the tool's traceback has
    a frame whose line is one call, under which 3.11 draws ``^^^^^^^^^^`` and 3.13 nothing, so the replay on the
    recording's own harness read ``changed``. Control: another line in the traceback is still a change (unit test);
    and the report no longer says the change came from the scenario where the Python differs."""
    recorded = load(ENV / "elsewhere/env/traceback_call.cassette")
    assert recorded.header.python_version.startswith("3.13") and "^^^" not in json.dumps(recorded.messages)
    r = cli("run", FIXTURES / "scenarios" / "env_trust.py", "--cassettes", ENV / "elsewhere", "--format", "json")
    cell = json.loads(r.out)["scenarios"]["env/traceback_call"]
    assert cell["status"] == "same", cell

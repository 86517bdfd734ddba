"""Reporter: long strings shown around their first difference; formats parse; JUnit one case per scenario."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from replay._untrusted import _pair
from replay.differ import Change, Diff, MainRequest, RequestDiff, RoleCount
from replay.reporter import ScenarioReport, diff_lines, junit, markdown, reports_json


def test_long_strings_show_the_first_difference() -> None:
    head = "You are a context summarization assistant. " * 3
    old, new = _pair(head + "<message role='user'>U1", head + "User: U1")
    assert "<message" in old and "User: U1" in new
    assert old.startswith("…") and new.startswith("…")
    assert _pair("a", "b") == ("a", "b")


def _report(status: str) -> ScenarioReport:
    d = Diff("s/one", "recorded", "replayed", [RoleCount("main", 1, 1)], [], [], None, [])
    if status == "changed":
        d.requests.append(RequestDiff("main", 0, "changed", [Change("main[0].messages[0].parts[0].content", "changed", "a", "b")]))
    return ScenarioReport(f"s/{status}", status, diff=d)  # type: ignore[arg-type]


def test_formats() -> None:
    reports = [_report("same"), _report("changed"), ScenarioReport("s/error", "error", error="boom")]
    doc = reports_json(reports)
    assert doc["changed"] and doc["summary"] == {"same": 1, "changed": 1, "error": 1}
    assert json.dumps(doc)
    suite = ET.fromstring(junit(reports)).find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    md = markdown(reports)
    assert "| `s/changed` | ⚠️ changed |" in md and "| `s/error` | ❌ error | `boom` |" in md  # cassette text in code spans


def test_request_estimates_are_one_line_per_agent_of_the_scenario() -> None:
    """An orchestrator and its sub-agents are separate conversations; only the agents whose figures moved are listed."""
    mains = [MainRequest("main", 0, 1, 1, 76, 76), MainRequest("main", 1, 3, 3, 101, 140),
             MainRequest("researcher", 0, 1, 1, 6, 6), MainRequest("writer", 0, 1, 1, 3, 9)]
    d = Diff("s/d", "recorded", "replayed", [RoleCount(r, 1, 1) for r in ("main", "researcher", "writer")], [], mains, None, [])
    lines = [line for line in diff_lines(d) if "request estimates" in line]
    assert lines == ["main request estimates: recorded [76, 101] → replayed [76, 140]",
                     "writer request estimates: recorded [3] → replayed [9]"]


def test_long_observations_and_outcomes_show_where_they_differ() -> None:
    """A search result quoting a run id differs at character 90: both sides printed the same prefix."""
    from replay.differ import Change, Diff
    from replay.reporter import diff_lines

    head = "Found 1 match(es) for 'deploy key' in 8 persisted messages:\n\n[score: 2.5 | run sp-aGlzdDAx"
    d = Diff(
        scenario_id="s", a_label="recorded", b_label="replayed", roles=[], requests=[], main_requests=[],
        outcome=({"output": head + "A", "status": "ok"}, {"output": head + "B", "status": "ok"}),
        observations=[Change("observations.tool_returns[0]", "changed", head + "LTA3Mm tail", head + "LTM3YjI tail")],
    )
    lines = diff_lines(d)
    (obs,) = [line for line in lines if line.startswith("observation")]
    old, new = obs.split(": ", 1)[1].split(" → ")
    assert old != new and "LTA3Mm" in old and "LTM3YjI" in new, obs
    (out,) = [line for line in lines if line.startswith("outcome")]
    assert out.split(" → ")[0] != "outcome: " + out.split(" → ")[1], out


def test_a_run_without_model_calls_says_so_instead_of_an_empty_count() -> None:
    """seed003's probes call no model: the line read ``requests per role: `` with nothing after it."""
    from replay.cassette import Cassette, Outcome
    from replay.differ import diff
    from replay.reporter import diff_lines

    lines = diff_lines(diff(Cassette(outcome=Outcome(output=1)), Cassette(outcome=Outcome(output=2))))
    assert "requests per role: none (no model was called)" in lines


def test_estimates_of_two_conversations_of_one_role_say_whose_figure_is_where() -> None:
    """Two unnamed agents (both `main`), run A, B, A: the list is in conversation order, [3, 6, 3] → [3, 6, 4],
    next to "main[1] changed, estimate 3→4", which is the third figure, not the second."""
    mains = [MainRequest("main", 0, 1, 1, 3, 3), MainRequest("main", 2, 3, 3, 6, 6), MainRequest("main", 1, 1, 1, 3, 4)]
    d = Diff("s/two", "recorded", "replayed", [RoleCount("main", 3, 3)], [], mains, None, [])
    (line,) = [ln for ln in diff_lines(d) if "request estimates" in ln]
    assert line == "main request estimates (in conversation order: main[0], main[2], main[1]): recorded [3, 6, 3] → replayed [3, 6, 4]"
    d.main_requests = sorted(mains, key=lambda m: m.index)
    (line,) = [ln for ln in diff_lines(d) if "request estimates" in ln]
    assert line == "main request estimates: recorded [3, 3, 6] → replayed [3, 4, 6]"


def test_an_annotation_keeps_a_cassette_line_break_inside_its_line() -> None:
    """A role name with a raw CRLF (hand-edited cassette) started a forged line of the annotation's
    message, where text, Markdown and JUnit show it as ``\\r\\n`` inside its one line."""
    from replay.reporter import github_annotations

    d = Diff("s/x", "recorded", "replayed", [RoleCount("main\r\nviolation: forged", 1, 2)], [], [], None, [])
    (line,) = github_annotations([ScenarioReport("s/x", "changed", diff=d)])
    message = line.split("::", 2)[2]
    assert message.split("%0A")[0] == "requests per role: main\\r\\nviolation: forged 1→2"
    assert not any(part.startswith("violation") for part in message.split("%0A"))


def test_a_same_verdicts_warning_is_in_markdown_as_in_text() -> None:
    """An edited scenario's warning on a `same` verdict: text printed it, the step summary's row did not."""
    import io

    from rich.console import Console

    from replay.reporter import print_text

    d = Diff("s/w", "recorded", "replayed", [RoleCount("main", 1, 1)], [], [], None, [])
    d.warnings.append("the scenario was edited since the recording")
    reports = [ScenarioReport("s/w", "same", diff=d)]
    out = io.StringIO()
    print_text(reports, Console(file=out, width=200))
    assert "the scenario was edited since the recording" in out.getvalue()
    assert "warning: the scenario was edited since the recording" in markdown(reports)


def test_a_warning_many_same_verdicts_share_is_said_once() -> None:
    """Replayed on another Python, each of 55 same verdicts printed "recorded on Python 3.11.7, replayed on Python
    3.13.0 ..." under it. Shared by same verdicts: once, with their count; a scenario's own warning and a changed
    verdict's stay under it; JSON keeps every one."""
    import io

    from rich.console import Console

    from replay.reporter import print_text, reports_json

    python = "recorded on Python 3.11.7, replayed on Python 3.13.0: a difference may come from the Python version"

    def report(sid: str, status: str, *warnings: str) -> ScenarioReport:
        d = Diff(sid, "recorded", "replayed", [RoleCount("main", 1, 1 if status == "same" else 2)], [], [], None, [])
        d.warnings += warnings
        return ScenarioReport(sid, status, diff=d)  # type: ignore[arg-type]

    reports = [report(f"s/{i}", "same", python) for i in range(3)]
    reports += [report("s/edited", "same", python, "the scenario was edited since the recording"), report("s/c", "changed", python)]
    out = io.StringIO()
    print_text(reports, Console(file=out, width=300))
    text = out.getvalue()
    assert text.count(python) == 2, text  # once for the four same verdicts, once under the changed one
    assert f"warning (4 same verdicts) {python}" in text
    assert text.index("s/edited") < text.index("the scenario was edited since the recording") < text.index("(4 same verdicts)")
    assert reports_json(reports)["scenarios"]["s/0"]["warnings"] == [python]
    one = io.StringIO()
    print_text(reports[:1], Console(file=one, width=300))  # alone: under its scenario, as before
    assert one.getvalue().count(python) == 1 and "same verdicts" not in one.getvalue()


def test_an_annotation_names_the_lost_messages_as_the_markdown_row_does() -> None:
    """A request that lost U11: the step summary's row said `(lost U11)`, the annotation on the PR nothing."""
    from replay.reporter import github_annotations

    d = Diff("s/l", "recorded", "replayed", [RoleCount("main", 1, 1)], [], [], None, [])
    from replay.differ import Entry

    rd = RequestDiff("main", 0, "changed", entries=[Entry("removed", "messages[5]", "U11")])
    d.requests.append(rd)
    reports = [ScenarioReport("s/l", "changed", diff=d)]
    assert "main[0] changed (lost U11)" in markdown(reports)
    (line,) = github_annotations(reports)
    assert "main[0] changed (lost U11)" in line.split("::", 2)[2].split("%0A")


def test_the_markdown_row_counts_the_changed_requests_it_does_not_list() -> None:
    """Eight changed requests: the row listed five and said nothing of three (the text lists all eight)."""
    d = Diff("s/m", "recorded", "replayed", [RoleCount("main", 8, 8)], [], [], None, [])
    d.requests += [RequestDiff("main", i, "changed") for i in range(8)]
    md = markdown([ScenarioReport("s/m", "changed", diff=d)])
    assert "`main[4] changed`<br>`… 3 more requests that differ`" in md


def test_one_id_in_two_cassettes_keeps_both_verdicts_in_the_json() -> None:
    """`replay diff A B` where two cassettes of a folder hold one scenario id (a copy): text listed CHANGED and
    SAME, with `1 changed` in the summary; the JSON, keyed by id, kept the last (same) alone."""
    d = Diff("s/a", "recorded", "replayed", [RoleCount("main", 1, 2)], [], [], None, [])
    reports = [ScenarioReport("s/a", "changed", diff=d, cassette="a/one.cassette"),
               ScenarioReport("s/a", "same", cassette="a/two.cassette")]
    doc = reports_json(reports)
    assert doc["summary"] == {"same": 1, "changed": 1, "error": 0}
    assert sorted(s["status"] for s in doc["scenarios"].values()) == ["changed", "same"]
    assert {s["scenario_id"] for s in doc["scenarios"].values()} == {"s/a"}


def test_one_id_in_two_cassettes_is_told_apart_in_markdown_as_in_text() -> None:
    """Two rows `s/a`, one changed and one same, and no way to tell which cassette was which (the text names them)."""
    reports = [ScenarioReport("s/a", "error", error="boom", cassette="a/one.cassette"),
               ScenarioReport("s/a", "same", cassette="a/two.cassette")]
    md = markdown(reports)
    assert "| `s/a  a/one.cassette` | ❌ error |" in md and "| `s/a  a/two.cassette` | ✅ same |" in md
    assert "| `s/b` |" in markdown([ScenarioReport("s/b", "same", cassette="a/b.cassette")])  # one of each: as before


def test_an_outcome_that_became_an_error_names_the_error_first() -> None:
    """A scenario given one more turn: the line read `outcome: {"output": "ok 5", "status": "ok"} → {"error":
    {"message": "harness-replay: request #4 of role 'main', but the cas...`, the error's class cut off."""
    from replay.differ import Diff
    from replay.reporter import diff_lines

    message = "harness-replay: request #4 of role 'main', but the cassette holds 3 (--on-exhausted=fail)"
    ok = {"output": "ok 5", "status": "ok"}
    err = {"error": {"message": message, "type": "replay.replayer.ReplayExhausted"}, "status": "error"}
    d = Diff("s", "recorded", "replayed", [], [], [], (ok, err), [])
    (line,) = [ln for ln in diff_lines(d) if ln.startswith("outcome")]
    assert line.startswith('outcome: ok "ok 5" → error ReplayExhausted: harness-replay: request #4 of role'), line
    attribute = {"error": {"message": "'AgentRunResult' object has no attribute 'outptu'", "type": "builtins.AttributeError"},
                 "status": "error"}
    d.outcome = (ok, attribute)
    (line,) = [ln for ln in diff_lines(d) if ln.startswith("outcome")]
    assert line == """outcome: ok "ok 5" → error AttributeError: 'AgentRunResult' object has no attribute 'outptu'""", line
    # two classes of one name: the whole names, else both sides read alike
    d.outcome = ({**err, "error": {**err["error"], "type": "a.Boom"}}, {**err, "error": {**err["error"], "type": "b.Boom"}})
    (line,) = [ln for ln in diff_lines(d) if ln.startswith("outcome")]
    old, new = line.removeprefix("outcome: ").split(" → ")
    assert old.startswith("error a.Boom: ") and new.startswith("error b.Boom: "), line
    # a difference the words leave out is still shown
    d.outcome = ({"output": None, "status": "ok"}, {"status": "ok"})
    (line,) = [ln for ln in diff_lines(d) if ln.startswith("outcome")]
    old, new = line.removeprefix("outcome: ").split(" → ")
    assert old != new, line


def test_the_step_summary_stays_within_what_github_shows(tmp_path, monkeypatch) -> None:
    """GitHub drops a step's whole summary past 1 MiB ("upload aborted"): a cassette of 80,000 expectations made
    `replay diff` append 13.8 MB, and the step showed no summary at all, nor the summaries before it in that step.
    The summary is cut at a line to fit, its open code block and <details> closed, and says so."""
    from replay import reporter

    path = tmp_path / "summary.md"
    path.write_text("earlier command's summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    body = ["### harness-replay diff", "", "<details><summary>x</summary>", "", "```"]
    body += [f"line {i} " + "é" * 40 for i in range(40_000)]
    body += ["```", "</details>", "", "| after | table |"]
    reporter.write_step_summary("\n".join(body) + "\n")
    data = path.read_bytes()
    assert len(data) <= reporter.STEP_SUMMARY_BYTES and data.startswith(b"earlier command's summary\n")
    text = data.decode("utf-8")  # cut at a line, never inside a character
    tail = [ln for ln in text.splitlines() if ln][-4:]
    assert tail[0].startswith("line ") and tail[1:3] == ["```", "</details>"] and "truncated" in tail[3], tail
    small = "### small\n"
    reporter.write_step_summary(small)  # nothing fits any more: the rest is said on stderr, the file stays in bounds
    assert len(path.read_bytes()) <= reporter.STEP_SUMMARY_BYTES


def _instructions_request(part_old: str, part_new: str) -> RequestDiff:
    joined_old, joined_new = "Be brief.\n\nCall `read_memory` first.", "Be brief.\n\nRead the file first."
    return RequestDiff("main", 0, "changed", [
        Change("main[0].messages[0].instructions", "changed", joined_old, joined_new),
        Change("main[0].parameters.instruction_parts[1].content", "changed", part_old, part_new),
    ])


def test_an_instruction_part_edit_the_joined_instructions_show_is_one_line() -> None:
    """Slim 2.62 sends instructions joined on the message and part by part: one edit, one line; the JSON keeps both."""
    r = _instructions_request("Call `read_memory` first.", "Read the file first.")
    d = Diff("s/i", "recorded", "replayed", [RoleCount("main", 1, 1)], [r], [], None, [])
    lines = [line for line in diff_lines(d) if "instruction" in line]
    assert len(lines) == 1 and "messages[0].instructions" in lines[0]
    assert len(reports_json([ScenarioReport("s/i", "changed", diff=d)])["scenarios"]["s/i"]["requests"][0]["changes"]) == 2


def test_an_instruction_part_edit_the_joined_text_does_not_show_stays() -> None:
    """Control: a part whose new text is not in the new joined instructions (a split, another edit) is its own line."""
    r = _instructions_request("Call `read_memory` first.", "Something else entirely.")
    d = Diff("s/i", "recorded", "replayed", [RoleCount("main", 1, 1)], [r], [], None, [])
    lines = [line for line in diff_lines(d) if "instruction" in line]
    assert len(lines) == 2 and any("instruction_parts[1].content" in line for line in lines)

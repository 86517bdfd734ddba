"""Reporter: long strings shown around their first difference; formats parse; JUnit one case per scenario."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from replay.differ import Change, Diff, RequestDiff, RoleCount
from replay.reporter import ScenarioReport, _pair, junit, markdown, reports_json


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

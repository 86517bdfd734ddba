"""`replay report`'s building blocks: facts from a cassette, the freeze digest, locating controls, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from replay import reproduction as rp
from replay.cassette import load
from replay.errors import ReplayUsageError

CAS = ROOT / "cassettes"


def test_facts_of_a_recording() -> None:
    f = rp.facts(load(CAS / "seed000" / "long.cassette"))
    assert f["requests"] == {"main": 3, "summarizing_compaction": 3}
    assert f["estimates"] == {"main": [889, 887, 889]}
    assert f["outcome"] == {"status": "ok", "output": "ready"}
    assert f["header"]["harness"] == "0.62.0"
    err = rp.facts(load(CAS / "seed002" / "whitespace.cassette"))["outcome"]
    assert err == {"status": "error", "type": "UnexpectedModelBehavior", "message": "Exceeded maximum output retries (1)"}
    judged = rp.facts(load(CAS / "seed003" / "reused_id_one_return.cassette"))
    assert judged["verdicts"] == [{"predicate": "is_provider_valid", "verdict": True}] and judged["requests"] == {}


def test_an_orchestrators_and_its_sub_agents_estimates_stay_apart() -> None:
    """A real SubAgents recording (harness 0.54.0): one list would read 76, 6, 101, 3, 123 as 'main'."""
    f = rp.facts(load(ROOT / "tests" / "fixtures" / "harness-0.54.0" / "trust" / "delegation.cassette"))
    assert f["estimates"] == {"main": [76, 101, 123], "researcher": [6], "writer": [3]}
    version = dict(_version("0.54.0", [], None), scenarios={"a/b": dict(_version("0.54.0", [], None)["scenarios"]["a/b"], **f)})
    md = rp.render_markdown(_report(versions=[version], controls=[]))
    for row in ("| main request estimates | 76, 101, 123 |", "| researcher request estimates | 6 |", "| writer request estimates | 3 |"):
        assert row in md, md


def test_concurrent_conversations_estimates_do_not_depend_on_their_interleaving() -> None:
    """trust/parallel: three delegations at once, recorded in other interleavings by 0.54.0 and 0.56.0."""
    fixtures = ROOT / "tests" / "fixtures"
    found = [rp.facts(load(fixtures / f"harness-{v}" / "trust" / "parallel.cassette"))["estimates"] for v in ("0.54.0", "0.56.0")]
    assert found[0] == found[1]
    assert found[0]["researcher"][:3] == [2, 13, 23]  # one delegate's conversation, then the next


def test_freeze_digest_ignores_where_the_tool_is_checked_out() -> None:
    a = ["harness-replay @ file:///work/a", "pydantic==2.14.4"]
    b = ["pydantic==2.14.4", "harness-replay @ file:///home/me/b"]
    assert rp.freeze_digest(a) == rp.freeze_digest(b) != rp.freeze_digest(["pydantic==2.14.5", a[0]])


def test_the_commands_redo_it_from_a_user_project_with_its_cassettes(tmp_path: Path) -> None:
    """They said `uv pip install -e .   # harness-replay from this checkout`: in a user's project that
    installs the project, not the tool; and a report made with --cassettes X was redone without them."""
    from replay.matrix import _envs

    subject = rp.locate("seed002/whitespace", ROOT / "scenarios")
    req = rp.Request(subject=subject, targets={"seed002/whitespace": "seed002/whitespace"},
                     versions=_envs.parse_versions(["0.54.0"]), trials=2, cassettes=tmp_path / "tapes", cwd=tmp_path)
    text = "\n".join(rp.commands(req))
    assert "-e ." not in text and '"$HARNESS_REPLAY"' in text
    assert "replay report seed002/whitespace --harness 0.54.0 --cassettes tapes --trials 2" in text
    assert "replay run seed002/whitespace --cassettes tapes --out" in text
    default = rp.Request(subject=subject, targets=req.targets, versions=req.versions, cassettes=tmp_path / "cassettes", cwd=tmp_path)
    assert "--cassettes" not in "\n".join(rp.commands(default))
    assert rp._portable("harness-replay @ file:///home/me/src") == "harness-replay @ <local checkout>"


def test_locate_finds_the_controls_of_the_file() -> None:
    s = rp.locate("seed003/reused_id_one_return", ROOT / "scenarios")
    assert s.file == (ROOT / "scenarios" / "seed003_is_provider_valid.py").resolve()
    assert s.controls == ["seed003/distinct_ids_both_returned", "seed003/distinct_ids_one_return", "seed003/reused_id_two_returns"]
    assert s.doc.startswith("[call c1, call c1, return c1]")


def test_locate_needs_exactly_one_scenario() -> None:
    with pytest.raises(ReplayUsageError, match=r"seed003: matches 4 scenarios .*name one"):
        rp.locate("seed003", ROOT / "scenarios")
    with pytest.raises(ReplayUsageError, match="nope/x"):
        rp.locate("nope/x", ROOT / "scenarios")


def _version(spec: str, estimates: list[int], violation: str | None, identical: bool = True) -> dict:
    entry = {
        "status": "same",
        "vs_recording": [],
        "requests": {"main": len(estimates)},
        "estimates": {"main": estimates},
        "outcome": {"status": "ok", "output": "a|b <i>"},
        "observations": [{"name": "n", "value": 1}],
        "violations": [{"invariant": "x", "role": "main", "index": 0, "message": violation}] if violation else [],
    }
    return {
        "spec": spec, "harness": spec, "slim": "2." + spec[2:], "pydantic": "2.14.4", "python": "3.11.7",
        "platform": "linux-x86_64", "freeze": ["harness-replay @ file:///secret/place", "pydantic==2.14.4"],
        "freeze_sha256": "abc", "trials": [{"trial": 1, "verdict": "v1"}, {"trial": 2, "verdict": "v1" if identical else "v2"}],
        "identical": identical, "first_difference": None if identical else "a/b: main.0", "env_error": None,
        "scenarios": {"a/b": entry, "a/control": dict(entry, violations=[])},
    }


def _report(**over: object) -> dict:
    report = {
        "report": 1, "tool_version": "0.1.0", "scenario": "a/b", "doc": "What it shows.\n\nMore.",
        "controls": ["a/control"], "file": "scenarios/a.py", "source": "print('```')\n",
        "recording": {"cassette": "cassettes/a/b.cassette", "sha256": "f00", "harness": "0.62.0", "slim": "2.62.0",
                      "pydantic": "2.14.4", "python": "3.11.7", "platform": "linux-x86_64"},
        "trials": 2, "versions": [_version("0.54.0", [897, 1793], "grew <b>|"), _version("0.62.0", [889], None)],
        "commands": ["replay report a/b --harness 0.54.0 --harness 0.62.0 --trials 2"],
    }
    report.update(over)
    return report


def test_markdown_has_every_section_and_escapes_cells() -> None:
    md = rp.render_markdown(_report())
    assert md.startswith("## Reproduction: `a/b` on pydantic-ai-harness 0.54.0, 0.62.0\n\n> What it shows.\n")
    assert "| main request estimates | 897, 1793 | 889 |" in md
    assert "| `0.54.0` | 0.54.0 | 2.54.0 | 2.14.4 | 3.11.7 | linux-x86_64 | `abc` (2 packages) | 2 of 2 byte-identical (`v1`) |" in md
    assert "x main[0]: grew &lt;b&gt;\\|" in md and "<b>" not in md  # table cells cannot break out
    assert 'ok: "a\\|b &lt;i&gt;"' in md
    assert "### Controls: the other scenarios of `scenarios/a.py`" in md and "| `a/control` |" in md
    assert "````python\nprint('```')\n````" in md  # a fence inside the source does not end the block
    assert "/secret/place" not in md and "harness-replay @ <local checkout>" in md
    assert "```sh\nreplay report a/b --harness 0.54.0 --harness 0.62.0 --trials 2\n```" in md


def test_an_observation_name_cannot_break_the_table() -> None:
    version = _version("0.54.0", [1], None)
    version["scenarios"]["a/b"]["observations"] = [{"name": "x`|<b>y</b>\n| evil | row |", "value": 1}]
    md = rp.render_markdown(_report(versions=[version], controls=[]))
    (row,) = [line for line in md.splitlines() if line.startswith("| observation ")]
    assert row.endswith("| 1 |") and row.count(" | ") == 1, row  # one label cell, one value cell
    assert "| evil | row |" not in md


def test_differing_trials_are_said_and_fail_the_exit_code() -> None:
    report = _report(versions=[_version("0.54.0", [1], None, identical=False)])
    assert "DIFFERENT: 1 of 2 match trial 1; first difference a/b: main.0" in rp.render_markdown(report)
    assert rp.exit_code(report) == 1 and rp.exit_code(_report()) == 0


def test_emit_writes_json_or_markdown(tmp_path: Path) -> None:
    out = tmp_path / "r" / "report.json"
    text = rp.emit(_report(), "json", out)
    assert json.loads(out.read_text()) == json.loads(text) == _report()
    assert rp.emit(_report(), "markdown", None).startswith("## Reproduction")


def test_build_refuses_a_scenario_without_cassette(tmp_path: Path) -> None:
    from replay.matrix._envs import parse_versions

    subject = rp.Subject("a/b", tmp_path / "a.py", [])
    req = rp.Request(subject=subject, targets={"a/b": "a/b"}, versions=parse_versions(["0.62.0"]), cassettes=tmp_path)
    with pytest.raises(ReplayUsageError, match=r"a/b.cassette: no cassette \(record it with: replay record a/b\)"):
        rp.build(req)


def test_a_version_that_could_not_replay_says_why_once() -> None:
    broken = dict(_version("9.9.9", [], None), env_error="install: no such release", harness=None, freeze=[], freeze_sha256=None)
    broken["scenarios"] = {"a/b": {"status": "error", "error": "install: no such release"}, "a/control": {"status": "error", "error": "install: no such release"}}
    report = _report(versions=[broken, _version("0.62.0", [889], None)])
    md = rp.render_markdown(report)
    assert "environment error: install: no such release" in md
    assert "| outcome | not replayed: install: no such release | ok:" in md
    assert "| requests per role | - | main 1 |" in md
    assert rp.exit_code(report) == 1


def test_unwritable_out_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(ReplayUsageError, match=r"dir: cannot write the report"):
        rp.emit(_report(), "markdown", tmp_path / "dir")
    assert [p.name for p in (tmp_path / "dir").iterdir()] == []  # nothing half-written left behind


def test_what_each_version_sent_is_in_a_collapsed_block() -> None:
    text = rp.sent_text(load(CAS / "seed002" / "whitespace.cassette"))
    assert text.startswith("== main[0] request model function:ack: estimate 10\n") and "# recorded" not in text
    report = _report()
    report["versions"][0]["scenarios"]["a/b"]["sent"] = "== main[0] request\n  ``` odd\n"
    md = rp.render_markdown(report)
    assert "### What each version sent (`a/b`, trial 1)" in md
    assert "<details><summary><code>0.54.0</code>: every request and answer</summary>\n\n````text\n== main[0] request\n  ``` odd\n````" in md
    assert "<code>0.62.0</code>: every request" not in md


def test_trials_that_differ_name_the_call(tmp_path: Path) -> None:
    from replay._determinism import normalised_bytes
    from replay.cassette import save

    one = CAS / "seed000" / "long.cassette"
    c = load(one)
    (second,) = [ex for ex in c.exchanges if ex.role == "main" and ex.index == 1]
    second.messages = second.messages[:-1]  # as if a trial had sent one message less
    two = save(c, tmp_path / "long.cassette")
    entry = lambda p: {"normalised": normalised_bytes(p).decode(), "path": str(p)}  # noqa: E731
    where = rp._trial_difference({"seed000/long": entry(one)}, {"seed000/long": entry(two)})
    assert where.startswith("seed000/long: main[1]")


def test_commands_repeat_the_python_axis() -> None:
    from replay.matrix._envs import parse_versions, with_pythons

    versions = with_pythons(parse_versions(["0.54.0", "0.62.0"]), ["3.12"])
    req = rp.Request(subject=rp.Subject("a/b", Path("a.py"), []), targets={"a/b": "a/b"}, versions=versions, pythons=("3.12",))
    lines = rp.commands(req)
    assert lines[2] == "replay report a/b --harness 0.54.0 --harness 0.62.0 --python 3.12 --trials 3"
    assert lines[4].startswith("uv venv --python 3.12 /tmp/h-0.54.0-py3.12 && ")


def test_every_trial_is_checked_in_one_process_per_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One `replay check` per version over all trials' results (a check process is mostly pydantic-ai's import),
    and each violation shown on the trial and scenario whose file it was found in."""
    import shutil

    from replay.matrix._envs import parse_versions

    ids = ["seed000/long", "seed000/short"]

    def run_matrix(targets: dict[str, str], versions: list, *, opts: rp.mx.RunOptions, **_: object) -> dict:
        for v in versions:
            for sid in targets:
                (opts.out / v.label / sid).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(CAS / f"{sid}.cassette", (opts.out / v.label / sid).with_suffix(".cassette"))
        return {
            "versions": [{"spec": v.spec, "path": str(tmp_path / "envs" / v.label)} for v in versions],
            "scenarios": {sid: {v.spec: {"status": "same", "result": "r"} for v in versions} for sid in targets},
        }

    calls: list[tuple[Path, list[Path]]] = []
    found = {"invariant": "content_lost", "role": "main", "index": 0, "message": "lost A1", "evidence": {}}

    def check(python: Path, paths: list[Path], cwd: Path) -> dict:
        calls.append((python, list(paths)))
        flagged = [p for p in paths if "trial-2" in str(p) and p.name == "long.cassette"]
        return {str(p): [dict(found)] for p in flagged if "0.62.0" in str(p)}

    monkeypatch.setattr(rp.mx, "run_matrix", run_matrix)
    monkeypatch.setattr(rp, "_check_in_env", check)
    subject = rp.Subject("seed000/long", CAS.parent / "scenarios" / "seed000.py", ["seed000/short"])
    req = rp.Request(subject=subject, targets={i: i for i in ids}, versions=parse_versions(["0.54.0", "0.62.0"]),
                     trials=3, cassettes=CAS, work=tmp_path / "work", cwd=ROOT)
    report = rp.build(req)
    assert sorted(python.parent.parent.name for python, _ in calls) == ["0.54.0", "0.62.0"]
    assert all(len(paths) == 6 for _, paths in calls)  # 3 trials x 2 scenarios, in one process
    old, new = report["versions"]
    assert old["identical"] and old["scenarios"]["seed000/long"]["violations"] == []
    assert not new["identical"] and new["first_difference"] == "seed000/long: violations"
    assert new["scenarios"]["seed000/long"]["violations"] == [] and new["trials"][0]["verdict"] == new["trials"][2]["verdict"]


def test_a_version_whose_env_failed_is_not_installed_again_each_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An uninstallable version was tried in every trial: an install each (slow on an unreachable index),
    for the same error three times."""
    from replay.matrix._envs import parse_versions

    asked: list[list[str]] = []

    def run_matrix(targets: dict[str, str], versions: list, *, opts: rp.mx.RunOptions, **_: object) -> dict:
        asked.append([v.spec for v in versions])
        rows = [{"spec": v.spec, "status": "error", "error": "no such version"} if v.spec == "9.9.9"
                else {"spec": v.spec, "path": str(tmp_path / "envs" / v.label)} for v in versions]
        cell = {"9.9.9": {"status": "error", "error": "no such version"}}
        return {"versions": rows,
                "scenarios": {sid: {v.spec: cell.get(v.spec, {"status": "same"}) for v in versions} for sid in targets}}

    monkeypatch.setattr(rp.mx, "run_matrix", run_matrix)
    monkeypatch.setattr(rp, "_check_in_env", lambda python, paths, cwd: {})
    subject = rp.Subject("seed000/long", CAS.parent / "scenarios" / "seed000.py", [])
    req = rp.Request(subject=subject, targets={"seed000/long": "seed000/long"}, versions=parse_versions(["9.9.9", "0.62.0"]),
                     trials=3, cassettes=CAS, work=tmp_path / "work", cwd=ROOT)
    report = rp.build(req)
    assert asked == [["9.9.9", "0.62.0"], ["0.62.0"], ["0.62.0"]]
    bad, good = report["versions"]
    assert bad["spec"] == "9.9.9" and bad["identical"] and len(bad["trials"]) == 3
    assert bad["scenarios"]["seed000/long"]["status"] == "error"
    assert good["identical"] and len(good["trials"]) == 3


def test_the_report_shows_no_terminal_escape_from_a_cassette(tmp_path: Path) -> None:
    """`replay report` printed header fields and recorded error messages raw: an OSC or CSI in a cassette from a pull
    request reached the terminal; a 4-backtick run in what a version sent closed its 4-backtick fence early."""
    report = _report()
    report["recording"]["platform"] = "linux\x1b]0;pwned\x07"
    report["versions"][0]["scenarios"]["a/b"]["sent"] = "== main[0]\n  ````\n  user-prompt 'x\u202e'\n"
    md = rp.emit(report, "markdown", None)
    assert "\x1b" not in md and "\x07" not in md and "\u202e" not in md
    assert "linux\\x1b]0;pwned\\x07" in md
    assert "`````text\n== main[0]\n  ````\n" in md  # the fence is longer than any run inside
    js = rp.emit(report, "json", None)
    assert "\x1b" not in js and "\u202e" not in js and json.loads(js)["recording"]["platform"] == "linux\x1b]0;pwned\x07"


def test_cassette_text_cannot_add_markdown_to_the_report() -> None:
    """The recording's header fields (from the cassette: a pull request's) went into the report's prose raw, so a
    newline in ``platform`` added headings and paragraphs of its own, and table cells escaped only ``| < > &``: an
    observation or output ``![x](https://…)`` was an image in the issue it was pasted into, ``[fix](…)`` a link."""
    import re

    report = _report()
    report["recording"]["platform"] = "linux\n\n## Forged heading\n[click](https://evil.example)"
    report["recording"]["harness"] = "0.62.0 ![p](https://evil.example/p.png)"
    entry = report["versions"][0]["scenarios"]["a/b"]
    entry["outcome"] = {"status": "ok", "output": "![p](https://evil.example/p.png) \\[x](https://evil.example)"}
    entry["observations"] = [{"name": "n", "value": "[fix](https://evil.example)"}]
    entry["violations"] = [{"invariant": "x", "role": "main", "index": 0, "message": "[a][b] <img src=x>"}]
    report["versions"][0]["scenarios"]["a/control"] = dict(entry)
    md = rp.emit(report, "markdown", None)
    assert "\n## Forged" not in md and "linux\\n\\n## Forged heading" in md  # shown, on its line
    links = re.findall(r"(?<!\\)\[[^\]\n]*(?<!\\)\][(\[]", md)
    assert not links, links
    assert "evil.example" in md and "x main[0]: [a\\][b] &lt;img src=x&gt;" in md  # still shown, as text


TRIALS = ROOT / "tests" / "fixtures" / "report-trials"


def _concurrent_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict | None = None) -> dict:
    """Two real trials per version of trust/concurrent_compaction (three conversations compacted at once), whose
    requests arrived in another order, each version's violations found by this tool's own ``replay check``."""
    import shutil
    import sys

    from replay.matrix._envs import parse_versions

    sid = "trust/concurrent_compaction"

    def run_matrix(targets: dict[str, str], versions: list, *, opts: rp.mx.RunOptions, **_: object) -> dict:
        trial = opts.out.name  # trial-K
        for v in versions:
            (opts.out / v.label / sid).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(TRIALS / v.label / trial / f"{sid}.cassette", (opts.out / v.label / sid).with_suffix(".cassette"))
        return {"versions": [{"spec": v.spec, "path": str(tmp_path / "envs" / v.label)} for v in versions],
                "scenarios": {sid: {v.spec: {"status": "same", "result": "r"} for v in versions}}}

    real_check = rp._check_in_env

    def check(python: Path, paths: list[Path], cwd: Path) -> dict:
        found = real_check(Path(sys.executable), paths, cwd)
        for p in paths:
            if extra and "trial-2" in str(p):
                found.setdefault(str(p), []).append(dict(extra))
        return found

    monkeypatch.setattr(rp.mx, "run_matrix", run_matrix)
    monkeypatch.setattr(rp, "_check_in_env", check)
    subject = rp.Subject(sid, ROOT / "tests" / "fixtures" / "scenarios" / "trust.py", [])
    req = rp.Request(subject=subject, targets={sid: sid}, versions=parse_versions(["0.60.0", "0.62.0"]), trials=2,
                     cassettes=ROOT / "tests" / "fixtures" / "harness-0.62.0", work=tmp_path / "work", cwd=ROOT)
    return rp.build(req)


def test_trials_of_concurrent_conversations_that_arrived_in_another_order_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three conversations losing the same messages: trial 1 names y's request main[0], trial 2 x's (0.62.0) or
    z's second (0.60.0); the normalised cassettes are byte-identical. The report said 'DIFFERENT: 1 of 2 match
    trial 1; first difference trust/concurrent_compaction: violations' and exited 1."""
    sid = "trust/concurrent_compaction"
    from replay.invariants import run_checks

    lost = {v: [[x.evidence["lost"][0] for x in run_checks(load(TRIALS / v / t / f"{sid}.cassette"))]
                for t in ("trial-1", "trial-2")] for v in ("0.60.0", "0.62.0")}
    assert lost == {"0.60.0": [["yA9", "xA9", "zA9"], ["yA9", "zA9", "xA9"]], "0.62.0": [["yA9", "xA9", "zA9"], ["xA9", "zA9", "yA9"]]}
    report = _concurrent_report(tmp_path, monkeypatch)
    for v in report["versions"]:
        assert v["identical"] and v["first_difference"] is None, (v["spec"], v["first_difference"])
        assert [x["evidence"]["lost"][0] for x in v["scenarios"][sid]["violations"]] == ["yA9", "xA9", "zA9"]  # trial 1's, as found
    assert rp.render_markdown(report).count("2 of 2 byte-identical") == 2


def test_trials_of_concurrent_conversations_with_another_violation_still_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the same two trials, the second with one more violation than the first, are DIFFERENT."""
    extra = {"invariant": "empty_summary", "role": "summarizing_compaction", "index": 1, "message": "empty", "evidence": {}}
    report = _concurrent_report(tmp_path, monkeypatch, extra)
    for v in report["versions"]:
        assert not v["identical"] and v["first_difference"] == "trust/concurrent_compaction: violations", v["spec"]

"""`replay record`: targets, overwrite protection, and one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import DEEP_SCENARIO

from replay.cassette import load


def test_records_a_scenario_file(cli, write_scenario, project: Path) -> None:
    path = write_scenario()
    r = cli("record", path)
    assert r.code == 0, r.err
    c = load(project / "cassettes" / "simple" / "compact.cassette")
    roles = {ex.role for ex in c.exchanges}
    assert roles == {"main", "summarizing_compaction"}
    assert c.header.scenario_id == "simple/compact" and c.header.harness_version
    assert c.observations[0].name == "final_messages"


def test_default_target_is_the_scenarios_directory_and_ids_work(cli, write_scenario, project: Path) -> None:
    write_scenario()
    assert cli("record").code == 0
    assert (project / "cassettes" / "simple" / "compact.cassette").exists()
    r = cli("record", "simple/compact", "--cassettes", "other")
    assert r.code == 0 and (project / "other" / "simple" / "compact.cassette").exists()


def test_refuses_to_overwrite_without_force(cli, write_scenario, project: Path) -> None:
    write_scenario()
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    before = target.read_bytes()
    r = cli("record")
    assert "skipped" in r.out and "--force" in r.out
    assert target.read_bytes() == before
    write_scenario(keep=3)
    r = cli("record", "--force")
    assert "recorded" in r.out and target.read_bytes() != before


def test_unknown_target_is_one_line_exit_2(cli, project: Path) -> None:
    r = cli("record", "no/such/scenario")
    assert r.code == 2
    assert r.err.strip().count("\n") == 0 and "no/such/scenario" in r.err and "Traceback" not in r.err


def test_broken_scenario_file_names_the_file(cli, project: Path) -> None:
    bad = project / "scenarios" / "broken.py"
    bad.write_text("def oops(:\n")
    r = cli("record", bad)
    assert r.code == 2 and "broken.py" in r.err and "SyntaxError" in r.err
    assert not (project / "cassettes").exists() or not any((project / "cassettes").rglob("*.cassette"))


ERRORING = '''
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def answer(messages, info):
    return ModelResponse(parts=[TextPart("ok")])


@scenario("errs/mistake")
async def mistake(run: Run) -> str:
    """A plain function where a model belongs: a mistake, not a baseline."""
    return (await Agent(answer).run("hi")).output


@scenario("errs/declared", expect_error="UnexpectedModelBehavior")
async def declared(run: Run) -> str:
    await Agent(FunctionModel(answer)).run("hi")
    raise UnexpectedModelBehavior("the summarizer answered nothing")


@scenario("errs/never_raises", expect_error=UnexpectedModelBehavior)
async def never_raises(run: Run) -> str:
    return (await Agent(FunctionModel(answer)).run("hi")).output
'''


def test_an_undeclared_error_exits_2_and_leaves_no_baseline(cli, project: Path) -> None:
    (project / "scenarios" / "errs.py").write_text(ERRORING)
    r = cli("record")
    assert r.code == 2
    cassettes = project / "cassettes" / "errs"
    assert (cassettes / "declared.cassette").is_file()  # the declared error is the outcome it records
    assert load(cassettes / "declared.cassette").outcome.error.type.endswith("UnexpectedModelBehavior")
    assert not (cassettes / "mistake.cassette").exists() and not (cassettes / "never_raises.cassette").exists()
    assert "recorded  errs/declared -> cassettes/errs/declared.cassette (1 request, outcome error UnexpectedModelBehavior: the summarizer answered nothing)" in r.out
    assert "error     errs/mistake -> cassettes/errs/mistake.cassette: raised " in r.err
    assert "declare it with @scenario(expect_error=...) if intended; nothing written" in r.err
    assert "error     errs/never_raises -> cassettes/errs/never_raises.cassette: returned normally; expected UnexpectedModelBehavior; nothing written" in r.err
    # the next record tries the broken ones again instead of skipping them
    again = cli("record")
    assert again.code == 2 and "skipped   errs/declared" in again.out and "errs/mistake" in again.err


def test_plural_and_no_nested_parentheses(cli, write_scenario, project: Path) -> None:
    write_scenario()
    first = cli("record")
    assert "(4 requests, outcome ok)" in first.out or "requests, outcome ok)" in first.out
    assert "1 requests" not in first.out
    again = cli("record")
    assert "skipped   simple/compact -> cassettes/simple/compact.cassette: exists; use --force to overwrite" in again.out
    assert "((" not in again.out and "))" not in again.out


def test_format_json(cli, write_scenario, project: Path) -> None:
    write_scenario()
    r = cli("record", "--format", "json")
    assert r.code == 0
    assert json.loads(r.out) == {
        "simple/compact": {"status": "recorded", "path": "cassettes/simple/compact.cassette", "detail": json.loads(r.out)["simple/compact"]["detail"]}
    }
    assert json.loads(cli("record", "-f", "json").out)["simple/compact"]["status"] == "skipped"


def test_a_file_that_fails_to_import_is_an_error_and_the_others_are_recorded(cli, write_scenario, project: Path) -> None:
    """Recording on an older harness from a folder holding one file of a newer capability: that file's
    scenarios are errors (exit 2, nothing written for them), the rest are recorded; it used to abort them all."""
    write_scenario()
    (project / "scenarios" / "newer.py").write_text(
        "from pydantic_ai_harness.not_in_this_version import Thing\n"
        "from replay import Run, scenario\n\n"
        "@scenario('newer/one')\nasync def one(run: Run) -> None: ...\n"
    )
    r = cli("record")
    assert r.code == 2
    assert "recorded  simple/compact" in r.out
    (line,) = [ln for ln in r.err.splitlines() if "newer/one" in ln]
    assert line.startswith("error     newer/one -> ") and "failed to import: ModuleNotFoundError" in line and "nothing written" in line
    assert (project / "cassettes" / "simple" / "compact.cassette").exists()
    assert not (project / "cassettes" / "newer").exists()
    doc = json.loads(cli("record", "--force", "--format", "json").out)
    assert doc["newer/one"]["status"] == "error" and doc["simple/compact"]["status"] == "unchanged"  # recorded again, kept


def test_force_keeps_a_cassette_whose_recording_did_not_change(cli, write_scenario, project: Path) -> None:
    """`record --force` over a whole project rewrote every cassette (new stamps), so each one was in the
    pull request as a changed binary file; an unchanged recording now keeps its file."""
    write_scenario()
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    before = target.read_bytes()
    r = cli("record", "--force", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["simple/compact"]["status"] == "unchanged"
    assert target.read_bytes() == before
    r = cli("record", "--force")
    assert r.code == 0 and r.out.startswith("unchanged ") and "kept" in r.out
    # anything else in the header is not a stamp: a scenario source edit is written (its hash moves)
    path = write_scenario()
    path.write_text(path.read_text().replace('"""Two turns', '"""Two short turns'))
    r = cli("record", "--force")
    assert r.out.startswith("recorded ") and target.read_bytes() != before
    assert load(target).header.source_hash != load_bytes_hash(before)


def load_bytes_hash(data: bytes) -> str | None:
    from replay.cassette import loads

    return loads(data).header.source_hash


LONG_ERROR = '''
from replay import Run, scenario


@scenario("errs/long", expect_error="ValueError")
async def long(run: Run) -> None:
    raise ValueError("Exceeded the total_tokens_limit of 20 (total_tokens=101). Consider raising the limit, "
                     "or see the docs on usage limits for budgeting the tokens of a long run of an agent")
'''


def test_a_long_error_message_is_cut_between_words(cli, project: Path) -> None:
    """The record line cut the message at 120 characters, mid-word ("… usage limits fo)")."""
    (project / "scenarios" / "errs.py").write_text(LONG_ERROR)
    r = cli("record")
    (line,) = [ln for ln in r.out.splitlines() if "errs/long" in ln]
    assert line.endswith("Consider raising the limit, or see the docs on usage limits …)"), line


def test_force_rewrites_a_cassette_whose_values_differ_only_in_type(cli, write_scenario, project: Path) -> None:
    """`_same_recording` compared with `==` (True == 1, 2 == 2.0): a cassette whose observation was edited to `1`
    was kept by `record --force`, and the next `run` reported the change and advised `record --force` again."""
    from replay.cassette import save

    write_scenario()
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    c = load(target)
    c.observations[0].value = float(c.observations[0].value)  # 6 → 6.0
    save(c, target)
    r = cli("record", "--force", "--format", "json")
    assert json.loads(r.out)["simple/compact"]["status"] == "recorded", r.out
    assert type(load(target).observations[0].value) is int


def test_force_keeps_an_unchanged_cassette_after_an_edit_elsewhere_or_in_another_checkout(
    cli, write_scenario, project: Path, tmp_path: Path, monkeypatch
) -> None:
    """The header's roles named the scenario file's module with a hash of its absolute path and bytes: a comment
    added to the file, or a fresh clone, made every `record --force` rewrite every cassette."""
    import shutil

    path = write_scenario()
    cli("record")
    target = project / "cassettes" / "simple" / "compact.cassette"
    assert load(target).header.roles["main"] == "replay_scenarios.simple"
    before = target.read_bytes()
    path.write_text(path.read_text() + "\n# a comment after the scenarios\n")
    assert json.loads(cli("record", "--force", "--format", "json").out)["simple/compact"]["status"] == "unchanged"
    clone = tmp_path / "clone"
    shutil.copytree(project, clone)
    monkeypatch.chdir(clone)
    assert json.loads(cli("record", "--force", "--format", "json").out)["simple/compact"]["status"] == "unchanged"
    assert (clone / "cassettes" / "simple" / "compact.cassette").read_bytes() == before


BIG_INT_SCENARIO = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario


def answer(messages, info):
    returned = [p.content for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("double", {"n": 2**70}, tool_call_id="d-1")])
    return ModelResponse(parts=[TextPart(f"doubled: {returned[0]}")])


@scenario("big/int")
async def big(run: Run) -> int:
    agent = Agent(FunctionModel(answer))

    @agent.tool_plain
    def double(n: int) -> int:
        return 2 * n

    result = await agent.run("double it")
    run.observe("floor", -(2**63) - 1)
    return int(result.output.split()[-1])
'''


def test_integers_past_64_bits_are_recorded_and_replay_same(cli, project: Path) -> None:
    """Regression: msgpack stops at 64 bits; recording failed inside the agent's run and reported the
    scenario as having raised ``OverflowError: Integer value out of range`` itself."""
    (project / "scenarios" / "big.py").write_text(BIG_INT_SCENARIO)
    r = cli("record")
    assert r.code == 0, r.out + r.err
    c = load(project / "cassettes" / "big" / "int.cassette")
    assert c.outcome.status == "ok" and c.outcome.output == 2**71
    assert c.observations[0].value == -(2**63) - 1
    args = [p["args"] for m in c.messages for p in m["parts"] if p["part_kind"] == "tool-call"]
    assert args and all(a in ({"n": 2**70}, '{"n":1180591620717411303424}') for a in args), args
    r = cli("run")
    assert r.code == 0 and "SAME" in r.out, r.out + r.err
    r = cli("show", project / "cassettes" / "big" / "int.cassette")
    assert r.code == 0 and "1180591620717411303424" in r.out and "2361183241434822606848" in r.out, r.out


UNENCODABLE_SCENARIOS = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from replay import Run, scenario

BROKEN = "half an emoji: \\ud83d"


@scenario("odd/answer")
async def answer(run: Run) -> str:
    return (await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart(BROKEN)]))).run("go")).output


@scenario("odd/observed")
async def observed(run: Run) -> str:
    run.observe("text", BROKEN)
    return (await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("fine")]))).run("go")).output


@scenario("odd/fine")
async def fine(run: Run) -> str:
    return (await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("fine")]))).run("go")).output
'''


def test_a_value_no_cassette_can_hold_is_that_scenarios_error_not_an_exception_it_raised(cli, project: Path) -> None:
    """Regression: a lone surrogate in an answer was reported as the scenario raising UnicodeEncodeError
    ('declare it with @scenario(expect_error=...)'); one in an observation ended the whole command."""
    (project / "scenarios" / "odd.py").write_text(UNENCODABLE_SCENARIOS)
    r = cli("record")
    assert r.code == 2, r.out + r.err
    lines = {line.split()[1]: line for line in (r.out + r.err).splitlines() if line.split()[:1] in (["error"], ["recorded"])}
    assert lines["odd/fine"].startswith("recorded"), lines
    assert "the response to main[0] holds a value a cassette cannot hold (UnicodeEncodeError" in lines["odd/answer"]
    assert "cannot encode" in lines["odd/observed"] and "surrogates not allowed" in lines["odd/observed"]
    for sid in ("odd/answer", "odd/observed"):
        assert "expect_error" not in lines[sid] and lines[sid].endswith("nothing written"), lines[sid]
    assert sorted(p.name for p in (project / "cassettes" / "odd").iterdir()) == ["fine.cassette"]




def test_a_recording_the_loader_would_refuse_is_not_written_until_the_limit_is_raised(cli, project: Path) -> None:
    """Regression: a tool's result nested past max-depth was recorded, and every `run` then refused the
    baseline ('nesting deeper than 200')."""
    (project / "scenarios" / "deep.py").write_text(DEEP_SCENARIO)
    r = cli("record")
    assert r.code == 2, r.out + r.err
    assert "the loader would refuse this recording (invalid cassette: messages[2]: nesting deeper than 200); raise " \
           "that limit in [tool.replay]" in r.err and r.err.rstrip().endswith("nothing written"), r.err
    assert not (project / "cassettes").exists() or not list((project / "cassettes").rglob("*.cassette"))
    (project / "pyproject.toml").write_text("[tool.replay]\nmax-depth = 300\n")
    assert cli("record").code == 0
    r = cli("run")
    assert r.code == 0 and "SAME" in r.out, r.out + r.err


def test_check_determinism_reads_the_recordings_with_the_projects_limits(cli, project: Path) -> None:
    """Regression: with max-depth raised for a deep tool result, `record` and `run` worked but
    `record --check-determinism` read its recordings with the default limits and failed on the first
    ('nesting deeper than 200'), and compared nothing with the committed cassette."""
    (project / "scenarios" / "deep.py").write_text(DEEP_SCENARIO)
    (project / "pyproject.toml").write_text("[tool.replay]\nmax-depth = 300\n")
    assert cli("record").code == 0
    r = cli("record", "deep/tree", "--check-determinism", "2")
    assert r.code == 0, r.out + r.err
    assert "nesting deeper" not in r.out + r.err and "1 identical" in r.out + r.err, r.out + r.err


def test_a_file_that_cannot_be_parsed_is_named_once(cli, write_scenario, project: Path) -> None:
    """A scenario file with a syntax error (no ids known) was printed as
    `error     /p/bad.py -> /p/bad.py: /p/bad.py: failed to import: …`: the file three times, as if a cassette."""
    write_scenario()
    bad = project / "scenarios" / "bad.py"
    bad.write_text("x = (\n")
    r = cli("record")
    assert r.code == 2 and "recorded  simple/compact" in r.out
    (line,) = [ln for ln in r.err.splitlines() if "bad.py" in ln]
    assert line == f"error     {bad.resolve()}: failed to import: SyntaxError: '(' was never closed (bad.py, line 1); nothing written"


def test_a_file_declaring_an_id_no_cassette_can_have_errors_alone(cli, write_scenario, project: Path) -> None:
    """`@scenario("../../escape")` in one file ended `record` for every file with
    `replay: error: scenario id '../../escape' has a '..' segment`, naming no file; `run` errored that file alone."""
    write_scenario()
    bad = project / "scenarios" / "bad.py"
    bad.write_text("from replay import Run, scenario\n\n@scenario('../../escape')\nasync def f(run: Run) -> str:\n    return 'x'\n")
    r = cli("record")
    assert r.code == 2 and "recorded  simple/compact" in r.out
    assert r.err.strip().splitlines() == [
        f"error     {bad.resolve()}: failed to import: ReplayUsageError: scenario id '../../escape' has a '..' segment; "
        "nothing written"]
    assert not (project.parent / "escape.cassette").exists()


def test_an_existing_file_that_is_no_cassette_is_not_skipped_as_one(cli, write_scenario, project: Path) -> None:
    """`record` without --force skipped a cassette left with git's conflict markers (or emptied, or an LFS pointer)
    as `skipped … exists`, exit 0, leaving a file every later `run` refuses."""
    write_scenario()
    assert cli("record").code == 0
    cassette = project / "cassettes" / "simple" / "compact.cassette"
    good = cassette.read_bytes()
    for data, problem in ((b"<<<<<<< HEAD\n" + good, "git merge conflict markers, not a cassette"),
                          (b"", "empty file, not a cassette"),
                          (b"version https://git-lfs.github.com/spec/v1\n", "a Git LFS pointer, not the cassette")):
        cassette.write_bytes(data)
        r = cli("record")
        assert r.code == 2, r.err
        (line,) = r.err.strip().splitlines()
        assert line.startswith("error     simple/compact -> cassettes/simple/compact.cassette: " + problem)
        assert line.endswith("; not recorded over it: use --force")
        assert cassette.read_bytes() == data  # nothing written without --force
    assert cli("record", "--force").code == 0 and cassette.read_bytes()[:8] == good[:8]
    assert "skipped   simple/compact" in cli("record").out  # a cassette is still skipped


def test_an_observation_named_by_no_string_is_that_scenarios_error(cli, write_scenario, project: Path) -> None:
    """`run.observe(123, 1)` ended `replay record` in a pydantic ValidationError traceback after the run: the
    scenarios before it had been written, those after it were never recorded."""
    (project / "scenarios" / "obs.py").write_text(
        "from replay import Run, scenario\n\n"
        "@scenario('obs/a_named')\nasync def a(run: Run) -> str:\n    run.observe(123, 1)\n    return 'x'\n\n"
        "@scenario('obs/b_expect')\nasync def b(run: Run) -> str:\n    run.expect('x', object)\n    return 'x'\n\n"
        "@scenario('obs/c_fine')\nasync def c(run: Run) -> str:\n    run.observe('n', 1)\n    return 'x'\n"
    )
    r = cli("record")
    assert r.code == 2 and "Traceback" not in r.err
    assert "recorded  obs/c_fine" in r.out
    errors = [line for line in r.err.splitlines() if line.startswith("error")]
    assert errors[0].startswith("error     obs/a_named -> cassettes/obs/a_named.cassette: raised ReplayUsageError: "
                                "run.observe: the name is a non-empty string, got 123;")
    assert "run.expect('x', ...): value is not JSON-able" in errors[1]
    # a misuse of replay's own API is no error to declare as the outcome (it was told to: expect_error=...)
    assert not [line for line in errors if "expect_error" in line], errors
    assert errors[0].endswith("got 123; a mistake in the scenario's use of harness-replay, not an outcome; nothing written")
    assert not (project / "cassettes" / "obs" / "a_named.cassette").exists()


def test_a_scenario_calling_sys_exit_is_its_error_not_the_commands_end(cli, project: Path) -> None:
    """`sys.exit(3)` in a scenario ended `replay record` (and `run`) with exit 3 and no word: the scenarios after it
    were never recorded or replayed."""
    (project / "scenarios" / "ex.py").write_text(
        "import sys\nfrom replay import Run, scenario\n\n"
        "@scenario('ex/a_exits')\nasync def a(run: Run) -> str:\n    sys.exit(3)\n\n"
        "@scenario('ex/b_fine')\nasync def b(run: Run) -> str:\n    return 'ok'\n"
    )
    r = cli("record")
    assert r.code == 2 and "recorded  ex/b_fine" in r.out
    assert r.err.strip().splitlines() == [
        "error     ex/a_exits -> cassettes/ex/a_exits.cassette: raised SystemExit: 3; declare it with "
        "@scenario(expect_error=...) if intended; nothing written"]
    r = cli("run", "ex/b_fine", "ex/a_exits")
    assert r.code == 2 and "SAME     ex/b_fine" in r.out


def test_an_id_two_files_declare_is_neither_recorded_nor_replayed_as_same(cli, project: Path) -> None:
    """A scenario copied into another file, its id not renamed: `record` wrote the first file's and said
    "nothing written" for the same id; `run` reported it SAME, the other file's error dropped."""
    body = "from replay import Run, scenario\n\n@scenario('dupid/x')\nasync def {0}(run: Run) -> int:\n    return {1}\n"
    (project / "scenarios" / "one.py").write_text(body.format("first", 1))
    assert cli("record").code == 0
    (project / "scenarios" / "two.py").write_text(body.format("copy", 2))
    before = (project / "cassettes" / "dupid" / "x.cassette").read_bytes()
    for args in (("record", "--force"), ("record", "dupid/x", "--force"), ("run",), ("run", "dupid/x")):
        r = cli(*args)
        assert r.code == 2, (args, r.out, r.err)
        said = r.out + r.err
        assert "recorded " not in said and "SAME" not in said and "unchanged" not in said, (args, said)
        assert "declared twice: by first in" in said and "by copy in" in said, (args, said)
    assert (project / "cassettes" / "dupid" / "x.cassette").read_bytes() == before


def test_a_cassette_that_cannot_be_written_is_one_error_and_the_others_are_still_recorded(
    write_scenario: Callable[..., Path], cli: Callable[..., Any], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a cassette that could not be written (a full disk, a read-only sub-folder) raised out of
    `record`: one 'replay: error' line, the scenarios recorded before it never listed, those after never tried."""
    from replay import _pipeline
    from replay.cassette import write_atomic
    from replay.errors import CassetteError

    write_scenario()
    (project / "scenarios" / "zeta.py").write_text(
        (project / "scenarios" / "simple.py").read_text().replace("simple/compact", "zeta/compact")
    )
    full = project / "cassettes" / "simple" / "compact.cassette"

    def on_a_full_disk(path: Path, data: bytes) -> Path:
        if path.resolve() == full.resolve():
            raise CassetteError(path, "cannot write: No space left on device")
        return write_atomic(path, data)

    monkeypatch.setattr(_pipeline, "write_atomic", on_a_full_disk)
    result = cli("record")
    assert result.code == 2, result.err
    assert f"error     simple/compact -> {Path('cassettes/simple/compact.cassette')}: cannot write: No space left on device" in result.err
    assert "recorded  zeta/compact -> " in result.out
    assert not full.exists() and (project / "cassettes" / "zeta" / "compact.cassette").is_file()

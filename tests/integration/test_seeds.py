"""Seeds 002 and 003 as bundled scenarios: what `replay check`, `run` and `matrix` say about them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, CliResult, MatrixEnvs

from replay.cassette import cassette_path, load, save


def test_check_seed003_names_the_predicate_and_controls_are_clean(cli) -> None:
    r = cli("check", "seed003")
    assert r.code == 1, r.err
    assert "VIOLATED seed003/reused_id_one_return" in r.out
    assert "is_provider_valid True, but 1 tool call (add, c1) has no result" in r.out
    assert "4 cassettes: 3 ok, 1 with violations" in r.out
    found = json.loads(cli("check", "seed003", "--format", "json").out)["violations"]
    assert [(v["scenario_id"], v["invariant"], v["role"]) for v in found] == [
        ("seed003/reused_id_one_return", "predicate_verdict", "is_provider_valid")
    ]


def test_seed002_recorded_on_0_62_raises_after_two_summarizer_calls() -> None:
    c = load(ROOT / "cassettes" / "seed002" / "whitespace.cassette")
    assert c.header.harness_version == "0.62.0"
    roles = {r: len(xs) for r, xs in c.by_role().items()}
    assert roles == {"main": 2, "summarizing_compaction": 2}
    assert c.outcome.error is not None and c.outcome.error.type.endswith("UnexpectedModelBehavior")
    obs = {o.name: o.value for o in c.observations}
    assert obs["note_alpha_in_history"] is True
    assert obs["turns"][2] == {
        "prompt": "Idle turn: acknowledge only.",
        "error": "UnexpectedModelBehavior",
        "message": "Exceeded maximum output retries (1)",
    }


def test_seed002_controls_as_the_seed_reports_them() -> None:
    def roles(name: str) -> dict[str, int]:
        return {r: len(xs) for r, xs in load(ROOT / "cassettes" / "seed002" / f"{name}.cassette").by_role().items()}

    assert roles("empty_string") == {"main": 2, "summarizing_compaction": 2}
    assert roles("padded_summary") == {"main": 4, "summarizing_compaction": 1}
    assert roles("no_compaction") == {"main": 4}


def test_bundled_seed_scenarios_replay_same_on_the_installed_harness(cli, tmp_path: Path) -> None:
    r = cli("run", "seed002", "seed003", "seed001/compact_direct_keep_user_messages_true", "--format", "json",
            "--out", str(tmp_path))
    assert r.code == 0, r.out
    assert {s["status"] for s in json.loads(r.out)["scenarios"].values()} == {"same"}


def test_scenario_on_exhausted_and_the_flag_wins(cli, project: Path) -> None:
    """A scenario's own policy applies when no flag is given; --on-exhausted overrides it."""
    (project / "scenarios" / "more.py").write_text(
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.messages import ModelResponse, TextPart\n"
        "from pydantic_ai.models.function import FunctionModel\n"
        "from replay import Run, scenario\n"
        "async def ack(messages, info):\n"
        "    return ModelResponse(parts=[TextPart('ACK')])\n"
        "@scenario('more/two', on_exhausted='fake')\n"
        "async def two(run: Run) -> str:\n"
        "    agent = Agent(FunctionModel(ack))\n"
        "    first = await agent.run('one')\n"
        "    return (await agent.run('two', message_history=first.all_messages())).output\n"
    )
    assert cli("record", "more/two").code == 0
    path = cassette_path(project / "cassettes", "more/two")
    c = load(path)
    c.exchanges = c.exchanges[:1]  # as if recorded on a version that made one call
    save(c, path)
    own = json.loads(cli("run", "more/two", "--format", "json").out)["scenarios"]["more/two"]
    assert own["outcome"] is None and "called the scenario's model" in own["notes"][0]
    flag = json.loads(cli("run", "more/two", "--on-exhausted", "fail", "--format", "json").out)["scenarios"]["more/two"]
    assert flag["outcome"] is not None and "--on-exhausted=fail" in json.dumps(flag["outcome"])


def test_bad_on_exhausted_is_a_usage_error() -> None:
    from replay import scenario
    from replay.errors import ReplayUsageError

    with pytest.raises(ReplayUsageError, match="on_exhausted='later'"):
        scenario("x/y", on_exhausted="later")  # type: ignore[call-overload]


@pytest.mark.slow
def test_matrix_seed002_accepted_on_0_54_raised_on_0_62(
    tmp_path: Path, matrix_envs: MatrixEnvs, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process command (the versions' replay processes are what runs the seed), the session's environments."""
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("REPLAY_ENV_DIR", str(matrix_envs.env_dir))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    proc = cli("matrix", "--harness", "0.54.0", "--harness", "0.62.0", "seed002", "--format", "json",
               "--out", str(tmp_path), cwd=ROOT)
    doc = json.loads(proc.out)
    old, new = doc["scenarios"]["seed002/whitespace"]["0.54.0"], doc["scenarios"]["seed002/whitespace"]["0.62.0"]
    assert new["status"] == "same"
    assert old["status"] == "changed" and old["roles"] == {"main": [2, 4], "summarizing_compaction": [2, 1]}
    assert any(v["invariant"] == "empty_summary" for v in old["new_violations"])
    assert "observations.note_alpha_in_history" in old["observations"]
    result = load(tmp_path / "0.54.0" / "seed002" / "whitespace.cassette")
    assert result.outcome.status == "ok"
    last_main = [ex for ex in result.exchanges if ex.role == "main"][-1]
    assert "NOTE=alpha" not in json.dumps(result.expand(last_main.messages))
    assert doc["scenarios"]["seed002/no_compaction"]["0.54.0"]["status"] == "same"

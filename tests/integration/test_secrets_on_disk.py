"""No seeded secret reaches disk or any output, and the verdict does not depend on the environment.

A real scenario (FunctionModel) carries every shape in tests/secret_shapes.py (60+) in each of
22 places — prompt, instructions, headers, tool args/results, retry prompt, thinking, provider
details, output, observation names and values, expectations, model/agent/tool names, files sent
as BinaryContent (.env, JSON, YAML) and document URLs — each place with secrets of its own.
It is recorded with credential-named environment variables holding the prompt's secrets, then
replayed in every format with and without them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import secret_shapes

from replay.cassette import load


def test_secrets_never_written_and_verdict_independent_of_env(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def runner(args: list[str], env: dict[str, str | None]) -> tuple[int, str, str]:
        for name, value in env.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        result = cli(*args)
        return result.code, result.out, result.err

    fig = secret_shapes.check(project, runner)
    assert fig.shapes >= 45 and fig.places >= 20
    cassette = load(project / "cassettes" / "secrets" / "leaky.cassette")
    assert cassette.outcome.status == "ok", cassette.outcome
    assert len(cassette.exchanges) == 3  # retry, tool call, answer: every carrier was exercised
    assert {k: v for k, v in fig.leaks.items() if v} == {}
    assert fig.files >= 2 and fig.outputs == 10  # the cassette and the replay result, at least
    assert set(fig.verdicts.values()) == {"same"}, fig.verdicts
    data = (project / "cassettes" / "secrets" / "leaky.cassette").read_bytes()
    assert data.count(b"<secret:") >= fig.shapes
    settings = cassette.blobs[cassette.exchanges[0].settings or 0]
    assert settings["temperature"] == 0.0
    assert all("<secret:" in v for v in settings["extra_headers"].values())
    assert not any(k.startswith("SHAPE_") for k in os.environ)  # the last runs really had no variables


def test_recordings_with_and_without_env_are_the_same(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = secret_shapes.prepare(project)
    monkeypatch.setenv("REPLAY_TEST_PAYLOAD", env.pop("REPLAY_TEST_PAYLOAD"))
    assert cli("record", "secrets/leaky").code == 0
    bare = project / "bare.cassette"
    (project / "cassettes" / "secrets" / "leaky.cassette").rename(bare)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli("record", "secrets/leaky").code == 0
    result = cli("diff", str(bare), "cassettes/secrets/leaky.cassette")
    assert result.code == 0, result.out

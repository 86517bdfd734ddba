"""No seeded secret reaches the bytes of a cassette written by ``replay record``.

A real scenario (FunctionModel) carries every shape in tests/secret_shapes.py through
its prompt, its model settings (``extra_headers``), a tool result, the model's answer,
the run output and an observation; one more is the value of ``MY_SERVICE_TOKEN``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import secret_shapes

from replay.cassette import load


def test_no_seeded_secret_is_written(
    project: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in secret_shapes.prepare(project).items():
        monkeypatch.setenv(name, value)

    result = cli("record", "secrets/leaky")
    assert result.code == 0, result.err
    path = project / "cassettes" / "secrets" / "leaky.cassette"
    cassette = load(path)
    assert cassette.outcome.status == "ok", cassette.outcome
    assert len(cassette.exchanges) == 2  # the tool call and the answer: every carrier was exercised

    seeded = secret_shapes.seeded()
    assert len({s.name for s in secret_shapes.shapes()}) >= 20
    data = path.read_bytes()
    assert secret_shapes.leaks(data, seeded) == []
    assert data.count(b"<secret:") >= len(seeded)
    settings = cassette.blobs[cassette.exchanges[0].settings or 0]
    assert settings["temperature"] == 0.0
    assert all(v.startswith(("<secret:", "Bearer <secret:")) for v in settings["extra_headers"].values())

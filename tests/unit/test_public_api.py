"""The public API is re-exported from `replay`, and importing the pytest plugin stays light."""

from __future__ import annotations

import subprocess
import sys

import replay


def test_every_public_name_resolves() -> None:
    for name in replay.__all__:
        assert getattr(replay, name) is not None
    assert callable(replay.scenario) and not isinstance(replay.scenario, type(replay))


def test_plugin_import_pulls_in_nothing_heavy() -> None:
    """Every pytest run of a project with harness-replay installed loads the plugin."""
    code = "import replay.plugin, sys; print(sorted(m for m in ('deepdiff', 'pydantic_ai', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

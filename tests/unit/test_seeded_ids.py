"""The seeded ids and the run's own temporary directory, in one process that imports the module twice."""

from __future__ import annotations

import importlib
import sys
import tempfile

from replay import _determinism as first


def _harness_asks() -> str:
    """``tempfile.gettempdir()`` called from a harness module, as ToolOutputLimits' LocalFileStore does."""
    namespace = {"__name__": "pydantic_ai_harness.tool_output_limits._probe"}
    exec("import tempfile\ndef ask():\n    return tempfile.gettempdir()\n", namespace)
    return namespace["ask"]()  # type: ignore[no-any-return, operator]


def test_a_second_copy_of_the_module_takes_the_real_functions_as_the_originals() -> None:
    """pytester's inline runs drop the modules first imported during them, so the plugin's copy of this module
    was imported again while an earlier copy had `tempfile.gettempdir` replaced: the new copy took that
    replacement for the real function, never replaced it itself, and a ToolOutputLimits test's spills went
    to the system's temporary folder (test_a_tests_ids_repeat_and_its_harness_files_are_its_own failed
    whenever its file ran whole)."""
    real = tempfile.gettempdir
    try:
        with first.deterministic_ids("first"):
            assert tempfile.gettempdir is not real
            del sys.modules["replay._determinism"]
            second = importlib.import_module("replay._determinism")
        assert tempfile.gettempdir is real
        assert second._ORIGINALS["gettempdir"] is real and second._ORIGINALS["uuid4"] is first._ORIGINALS["uuid4"]
        with second.deterministic_ids("second"):
            inside = _harness_asks()
        assert "replay-scenario-" in inside and inside.startswith(real())
        assert tempfile.gettempdir is real
    finally:
        sys.modules["replay._determinism"] = first

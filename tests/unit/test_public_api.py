"""The public API is re-exported from `replay`, and importing the pytest plugin stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import replay


def test_every_public_name_resolves() -> None:
    for name in replay.__all__:
        assert getattr(replay, name) is not None
    assert callable(replay.scenario) and not isinstance(replay.scenario, type(replay))


def test_plugin_import_pulls_in_nothing_heavy() -> None:
    """Every pytest run of a project with harness-replay installed loads the plugin."""
    assert _heavy_after("import replay.plugin") == "[]"


HEAVY = ("deepdiff", "pydantic_ai", "rich", "pydantic", "pydantic_core", "msgpack")


def _heavy_after(code: str) -> str:
    probe = f"{code}\nimport sys; print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return done.stderr.strip().splitlines()[-1]


def test_cli_help_pulls_in_nothing_heavy() -> None:
    """`replay --help` (and typing a command wrong) should be instant, not wait for pydantic-ai."""
    code = "import sys; sys.argv = ['replay', '--help']\nfrom replay.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    assert _heavy_after(code) == "[]"


def test_cli_show_does_not_import_pydantic_ai() -> None:
    from pathlib import Path

    cassette = Path(__file__).resolve().parents[2] / "cassettes" / "coverage" / "tool_call.cassette"
    code = f"import sys; sys.argv = ['replay', 'show', {str(cassette)!r}]\nfrom replay.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    heavy = _heavy_after(code)
    assert "pydantic_ai" not in heavy and "deepdiff" not in heavy and "rich" not in heavy, heavy


def test_scenario_is_the_decorator_whichever_import_comes_first() -> None:
    """`replay` imports its scenario module lazily; the submodule's import must not shadow the decorator."""
    code = (
        "import sys, replay\nassert 'replay.scenario' not in sys.modules\n"
        "from replay.scenario import discover\nfrom replay import Run, scenario\nimport replay.scenario as again\n"
        "assert callable(scenario) and scenario is replay.scenario is again and Run.__module__ == 'replay.scenario'\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_cli_show_imports_only_what_it_prints_with() -> None:
    """The plain view needs neither the scenario machinery nor the normaliser (start-up, bench line 7b)."""
    from pathlib import Path

    cassette = Path(__file__).resolve().parents[2] / "cassettes" / "coverage" / "tool_call.cassette"
    code = (
        f"import sys; sys.argv = ['replay', 'show', {str(cassette)!r}]\nfrom replay.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('replay.scenario', 'replay.normaliser', 'replay.differ') if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_the_console_script_exits_without_tearing_down_its_heap() -> None:
    """`replay` (``cli.script``) ends with ``os._exit`` once its output is flushed and the exit handlers
    ran: the interpreter's own exit freed the whole heap object by object (0.25 s after a
    10,000-request diff). The exit status is main's."""
    code = (
        "import atexit, sys\n"
        "class Heap:\n    def __del__(self):\n        print('torn down', flush=True)\n"
        "kept = Heap()\n"
        "atexit.register(print, 'exit handlers ran')\n"
        "sys.argv = ['replay', 'diff', 'no-such-a.cassette', 'no-such-b.cassette']\n"
        "from replay.cli import script\nscript()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "no such cassette" in done.stderr
    assert done.stdout.splitlines() == ["exit handlers ran"]


def test_the_console_script_under_a_profiler_exits_normally(tmp_path: Path) -> None:
    """``python -m cProfile -o out $(which replay) …`` writes its results at the normal exit."""
    entry = tmp_path / "replay_script.py"
    entry.write_text("from replay.cli import script\nscript()\n")
    out = tmp_path / "profile.out"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(entry), "--help"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.is_file()

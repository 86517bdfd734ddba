"""`replay show` and `replay ls`: readable and machine views of a cassette."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT

LONG = ROOT / "cassettes" / "seed000" / "long.cassette"


def test_show_json_has_the_documented_shape(cli) -> None:
    doc = json.loads(cli("show", LONG, "--format", "json").out)
    assert {"header", "requests", "outcome", "observations"} <= set(doc)
    req = doc["requests"][0]
    assert {"role", "kind", "messages", "response"} <= set(req)
    assert isinstance(req["messages"], list) and req["messages"][0]["kind"] == "request"


def test_readable_view_is_one_line_per_message(cli) -> None:
    out = cli("show", ROOT / "cassettes" / "coverage" / "tool_call.cassette").out
    assert "  [0] request: user-prompt 'What is 2 + 3?'" in out
    assert "  [2] request: tool-return add #add-1 '5'" in out
    assert "  => response: text 'sum is 5'" in out


def test_normalized_view_drops_volatile_fields(cli) -> None:
    raw = cli("show", LONG, "--format", "json").out
    norm = cli("show", LONG, "--normalized").out
    assert "timestamp" in raw and "timestamp" not in norm
    assert "== main[0] request" in norm
    doc = json.loads(cli("show", LONG, "--normalized", "--format", "json").out)
    assert "main" in doc["requests"]


def test_ls_lists_cassettes(cli) -> None:
    out = cli("ls", ROOT / "cassettes").out
    assert "seed000/long" in out and "harness 0.62.0" in out


def test_show_bad_file_exit_2(cli, tmp_path: Path) -> None:
    p = tmp_path / "empty.cassette"
    p.write_bytes(b"")
    r = cli("show", p)
    assert r.code == 2 and "empty file" in r.err


def test_normalized_view_is_one_field_per_line_and_stable(cli) -> None:
    """The textconv layout: nested fields indented, a multi-line string one line per line behind a gutter."""
    target = ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette"
    out = cli("show", "--normalized", target).out
    assert out == cli("show", "--normalized", target).out
    lines = out.splitlines()
    assert "            | Write the summary under these exact section headings, omitting a section only if it has no content:" in lines
    assert any(line.strip() == 'part_kind: "user-prompt"' for line in lines)
    assert max(map(len, lines)) < 400  # no message squeezed onto one line


SPY_PLUGIN_SCAN = (
    "real, real_dists = m.entry_points, m.distributions\n"
    "def spy(**kw):\n"
    "    if kw.get('group') == 'pydantic': sys.stderr.write('SCANNED\\n')\n"
    "    return real(**kw)\n"
    "def spy_dists(**kw):  # pydantic before 2.14 looks through every distribution's entry points\n"
    "    sys.stderr.write('SCANNED\\n')\n"
    "    return real_dists(**kw)\n"
    "m.entry_points, m.distributions = spy, spy_dists\n"
)
"""Probe code (``importlib.metadata as m`` and ``sys`` imported) writing SCANNED when pydantic looks for plugins."""


def test_show_does_not_look_for_pydantic_plugins() -> None:
    """The cassette models are the tool's own: `replay show` skips pydantic's entry-point scan for
    them, and leaves PYDANTIC_DISABLE_PLUGINS as it found it (unset) for anything after."""
    import subprocess
    import sys

    probe = (
        "import importlib.metadata as m, os, sys\n"
        + SPY_PLUGIN_SCAN
        + "from replay.cli import main\n"
        "try:\n"
        f"    main(['show', {str(LONG)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stderr.write('LEFT ' + str(os.environ.get('PYDANTIC_DISABLE_PLUGINS')) + '\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "SCANNED" not in done.stderr and "LEFT None" in done.stderr


def test_show_does_not_import_the_plugin_loaders_metadata_reader() -> None:
    """pydantic's plugin loader imports ``importlib.metadata`` (a twentieth of `replay show`, the git textconv)
    even with plugins disabled; `show` builds only the tool's own models, so it never needs it. A user's
    model, built with plugins enabled, still has its plugins looked for."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from replay.cli import main\n"
        "try:\n"
        f"    main(['show', {str(LONG)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stderr.write('METADATA ' + str('importlib.metadata' in sys.modules) + '\\n')\n"
        "import importlib.metadata as m\n"
        + SPY_PLUGIN_SCAN
        + "import pydantic\n"
        "from replay.cli import _plugin_loader_on_demand\n"
        "with _plugin_loader_on_demand():  # as `record` imports a scenario's models\n"
        "    class User(pydantic.BaseModel):\n"
        "        x: int = 0\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "METADATA False" in done.stderr and "SCANNED" in done.stderr, done.stderr


def test_show_json_is_strict_json_with_a_nan_observation(cli, tmp_path: Path) -> None:
    """`show -f json` wrote a NaN observation as bare ``NaN`` (jq refuses it); every other JSON output writes text."""
    from replay.cassette import ObservationRecord, load, save

    c = load(ROOT / "cassettes" / "coverage" / "tool_call.cassette")
    c.observations = [ObservationRecord(name="score", value=float("nan")), ObservationRecord(name="xs", value=[float("inf")])]
    path = save(c, tmp_path / "nan.cassette")
    for args in ((), ("--normalized",)):
        out = cli("show", path, "--format", "json", *args).out
        doc = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        assert doc["observations"] == [{"name": "score", "value": "NaN"}, {"name": "xs", "value": ["Infinity"]}], args


def test_readable_view_shows_instructions_tools_output_mode_and_settings(cli, tmp_path: Path) -> None:
    """Two cassettes differing only in an instruction, an output mode (NativeOutput vs PromptedOutput) or a
    temperature read the same in `show`: only the messages' parts were printed."""
    out = cli("show", ROOT / "cassettes" / "coverage" / "tool_call.cassette").out
    assert "== main[0] request model function:_add_then_answer: estimate 3\n  tools add\n  [0] request:" in out
    out = cli("show", LONG).out
    assert "\n  instructions 'You are a context summarization assistant. Extract the most important" in out
    from replay.cassette import load, save

    c = load(ROOT / "cassettes" / "coverage" / "tool_call.cassette")
    c.blobs.append({"temperature": 0.0})
    c.exchanges[0].settings = len(c.blobs) - 1
    out = cli("show", save(c, tmp_path / "t.cassette")).out
    assert "  tools add\n  settings {\"temperature\": 0.0}\n" in out


def test_hostile_request_parameters_are_shown_not_a_crash(cli, tmp_path: Path) -> None:
    """`make reliability`: a cassette whose `function_tools` is `true` crashed the readable view."""
    from replay.cassette import load, save

    c = load(ROOT / "cassettes" / "coverage" / "tool_call.cassette")
    params = c.blobs[c.exchanges[0].parameters]
    params["function_tools"], params["output_tools"], params["output_mode"] = True, [1, None], ["tool"]
    r = cli("show", save(c, tmp_path / "hostile.cassette"))
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "estimate 3\n  output mode ['tool']\n  [0] request:" in r.out, r.out


def test_show_json_scrubs_a_text_the_requests_share_once(cli, tmp_path: Path, monkeypatch) -> None:
    """Each part of `show --format json` was scrubbed by a scrubber of its own, so a text every request re-sends
    was scrubbed again for each: 1.8 MB of `password=…` in one prompt cost 13.8 s of CPU (5.3 s now)."""
    from replay import scrub
    from replay.cassette import load, save

    made: list[int] = []
    real = scrub.Scrubber.__init__

    def counted(self: object, *args: object, **kwargs: object) -> None:
        made.append(1)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    c = load(ROOT / "cassettes" / "coverage" / "tool_call.cassette")
    c.messages[0]["parts"][0]["content"] = " ".join(f"password=Secret{n:04d}Value" for n in range(50))
    path = save(c, tmp_path / "pw.cassette")
    monkeypatch.setattr(scrub.Scrubber, "__init__", counted)
    out = cli("show", path, "--format", "json").out
    assert "Secret0001Value" not in out and "<secret:password:50>" in out
    assert len(made) == 1


def test_show_json_of_several_cassettes_is_one_array(cli, tmp_path: Path) -> None:
    """The README promises strict JSON from every --format json; `show -f json A B` printed two documents
    one after the other, which no JSON reader takes."""
    a, b = LONG, ROOT / "cassettes" / "seed000" / "short.cassette"
    r = cli("show", "--format", "json", a, b)
    assert r.code == 0, r.err
    docs = json.loads(r.out)
    assert [d["header"]["scenario_id"] for d in docs] == ["seed000/long", "seed000/short"]
    assert docs[0] == json.loads(cli("show", "--format", "json", a).out)  # one cassette: its object, as before
    r = cli("show", "--format", "json", a, tmp_path / "missing.cassette")
    assert r.code == 2 and len(json.loads(r.out)) == 1 and "missing.cassette: no such cassette" in r.err

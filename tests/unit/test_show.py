"""`replay show`'s one-line-per-message view."""

from __future__ import annotations

from replay.show import _message


def test_whitespace_reads_as_python_spells_it() -> None:
    """Seed 002 is about a summary of ' \\t\\n ': a newline was escaped twice (``\\\\n``) beside a tab shown once."""
    line = _message({"kind": "response", "parts": [{"part_kind": "text", "content": " \t\n "}]})
    assert line == "response: text ' \\t\\n '"
    line = _message({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "a\nb\x1b[2J"}]})
    assert line == "request: user-prompt 'a\\nb\\x1b[2J'"  # escapes stay visible, never raw


def test_json_output_scrubs_and_serialises_only_what_it_writes(monkeypatch) -> None:
    """``show -f json`` scrubbed the whole expanded view before its output budget applied: 6.5 GB for a 1.7 MB
    cassette of 3,500 requests re-sending 1,000 messages. Items are now scrubbed as they are written."""
    import io

    from replay import scrub
    from replay._untrusted import json_chunks
    from replay.show import scrubbed_lazily, write_bounded

    seen: list[object] = []
    real = scrub.redactor

    def counting(*a: object, **k: object) -> object:  # the one scrubber of the document, each item it is given counted
        inner = real(*a, **k)  # type: ignore[arg-type]
        return lambda value: (seen.append(value), inner(value))[1]

    monkeypatch.setattr(scrub, "redactor", counting)
    doc = {"header": {"scenario_id": "s"}, "requests": [{"n": i, "text": "x" * 1000} for i in range(1000)]}
    out = io.StringIO()
    assert write_bounded(json_chunks(scrubbed_lazily(doc), indent=2), out.write, 10_000) == 10_000
    assert 5 < len(seen) < 20  # the header and the first few requests, not all 1,000
    whole = io.StringIO()
    write_bounded(json_chunks(scrubbed_lazily({"requests": [{"k": "ghp_" + "a1B2" * 9}]}), indent=2), whole.write, None)
    assert "ghp_" not in whole.getvalue() and "<secret:" in whole.getvalue()  # each item is still scrubbed


def test_normalized_view_never_starts_a_line_with_cassette_text() -> None:
    """A map key of a cassette (tool arguments, metadata, a JSON schema) started a line of the normalised view,
    the git textconv: GitHub Actions reads any log line whose first non-blank characters are ``::`` or ``##[`` as a
    workflow command, so a key ``::stop-commands::x`` in a pull request's cassette silenced the job's annotations
    (``::add-mask::…`` hid text, ``::error …`` forged one) wherever `git diff` or `replay show` ran in CI."""
    import hostile as h
    from conftest import ROOT

    from replay.cassette import loads
    from replay.show import render_text

    w = h.wire((ROOT / "cassettes" / "coverage" / "tool_call.cassette").read_bytes())
    commands = ["::stop-commands::x", "##[add-mask]y", " ::error title=T::forged", "", "a: b", "- c"]
    w["messages"][1]["parts"][0]["args"] = {c: {c: 1} for c in commands}
    w["observations"] = [{"name": "n", "value": {c: [c] for c in commands}}]
    text = render_text(loads(h.pack(w)), normalized=True)
    starts = [ln for ln in text.splitlines() if ln.lstrip().startswith(("::", "##["))]
    assert not starts, starts[:3]
    assert '"::stop-commands::x": 1' in text and '"a: b":' in text and '"":' in text  # quoted, still shown
    assert "b: 3" not in text and "a: 2" not in text  # (the args were replaced) plain keys stay plain:
    plain = render_text(loads((ROOT / "cassettes" / "coverage" / "tool_call.cassette").read_bytes()), normalized=True)
    assert "          a: 2" in plain and "additionalProperties: false" in plain


def test_json_header_role_map_is_not_read_as_credentials() -> None:
    """Harness 0.62's session namer runs as role ``session_namer``; ``show -f json`` printed the module
    that built it as ``<secret:session:1>``, taking the role name for a credential's key name (as it
    would ``session_id``). The role map is scrubbed as text, as the cassette's own scrubbing does."""
    import io

    from replay._untrusted import json_chunks
    from replay.show import scrubbed_lazily, write_bounded

    token = "ghp_" + "a1B2" * 9
    doc = {"header": {"scenario_id": "s", "roles": {"session_namer": "pydantic_ai_harness.step_persistence.naming",
                                                    "auth_helper": f"scenarios.x {token}"}}}
    out = io.StringIO()
    write_bounded(json_chunks(scrubbed_lazily(doc), indent=2), out.write, None)
    text = out.getvalue()
    assert '"session_namer": "pydantic_ai_harness.step_persistence.naming"' in text
    assert token not in text and "<secret:" in text  # a credential's own shape is still found

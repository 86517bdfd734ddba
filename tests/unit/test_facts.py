"""Per-message facts shared by both sides of a comparison, and the shortcut for equivalent cassettes.

Every shortcut is checked against the full computation on real recordings (the bundled 0.62.0
cassettes and the fixtures of 0.54.0, 0.56.0, 0.59.0 and 0.62.0): a re-run of each (new
timestamps, run ids, conversation ids and summary stamps, as a replay gives) must get exactly
the verdicts, violations and diff figures the full computation gives, and so must pairs of
recordings from different versions, which share some messages but are not equivalent.
"""

from __future__ import annotations

import contextlib
import copy
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay import _facts, invariants
from replay._pipeline import compare_files
from replay.cassette import Cassette, iter_cassettes, load
from replay.differ import diff
from replay.invariants import _history, _messages
from replay.reporter import report_json

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = sorted([*iter_cassettes(ROOT / "cassettes"), *iter_cassettes(ROOT / "tests" / "fixtures")])
_SECONDS = re.compile(r"(T\d{2}:\d{2}:)(\d{2})")


def _restamp(value: Any, ids: dict[str, str], collapse: bool = False) -> None:
    """What a second run gives the same conversation: every stamp and run id new, in the same format.

    ``collapse``: every stamp the same and every id the same, so stamps that differed within the
    recording are equal in the copy (a check comparing them within one cassette would notice).
    """
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and (key == "timestamp" or key.endswith("created_at")):
                stamp = "2030-01-02T03:04:05" + item[19:] if collapse else item
                value[key] = _SECONDS.sub(lambda m: m.group(1) + f"{(int(m.group(2)) + 17) % 60:02d}", stamp)
            elif isinstance(item, str) and key in ("run_id", "conversation_id"):
                value[key] = "0" * len(item) if collapse else ids.setdefault(item, str(uuid.uuid4()))
            else:
                _restamp(item, ids, collapse)
    elif isinstance(value, list):
        for item in value:
            _restamp(item, ids, collapse)


def rerun(c: Cassette, collapse: bool = False) -> Cassette:
    """``c`` as a replay on another harness version that sends the same requests would record it."""
    header = c.header.model_copy(update={"harness_version": "0.61.0", "slim_version": "2.61.0", "mode": "replay",
                                         "source_hash": "edited", "scenario_id": c.header.scenario_id or "s"})
    out = c.model_copy(update={"messages": copy.deepcopy(c.messages), "header": header})
    _restamp(out.messages, {}, collapse)
    return out


def _graded_json(comparison: invariants.Comparison) -> list[Any]:
    return [
        (g.as_json(), g.replay and g.replay.measure, g.recording and g.recording.measure) for g in comparison.violations
    ] + [comparison.failures]


def _full(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cassette is ever equivalent: every side computed in full."""
    monkeypatch.setattr(_facts.Facts, "equivalent", lambda self, a, b: False)


def _alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing shared: each side and stage in a scope of its own (what the code did before the sharing)."""
    @contextlib.contextmanager
    def fresh(private: bool = False) -> Iterator[_facts.Facts]:
        yield _facts.Facts(private)

    monkeypatch.setattr(_facts, "shared", fresh)
    _full(monkeypatch)


def test_content_key_ignores_well_formed_stamps_only() -> None:
    m = {"kind": "request", "timestamp": "2026-12-01T05:17:03.729807Z", "run_id": "01a23008-f6b0-7361-839e-013b054dfe42", "parts": [
        {"part_kind": "user-prompt", "content": "hi", "timestamp": "2026-12-01T05:17:03.729807Z"},
        {"part_kind": "compaction", "content": "s", "metadata": {"h.summary.created_at": "2026-12-01T05:17:03+00:00"}},
    ]}
    other = copy.deepcopy(m)
    _restamp(other, {})
    key = _facts.content_key
    assert other != m and key(other) == key(m)
    assert key({**m, "parts": m["parts"][:1]}) != key(m)  # content still counts
    for bad in ("2026-13-01T05:17:03Z", "yesterday", "2026-12-01T05:17:03.7298Z"):  # invalid, or another length
        assert key({**m, "timestamp": bad}) != key(m)
    assert key({**m, "run_id": "run-1"}) == key({**m, "run_id": "run-2"})  # plain ids of one length
    assert key({**m, "run_id": "ünïcode-1"}) != key({**m, "run_id": "ünïcode-2"})  # anything else as is
    assert key({**m, "run_id": None}) != key(m)


_CASES = [(p, False) for p in RECORDINGS] + [(p, True) for p in RECORDINGS if "fixtures" in p.parts]
"""Every recording re-run with fresh stamps; the fixtures of every version also with all stamps made equal."""


@pytest.mark.parametrize(("path", "collapse"), _CASES, ids=lambda x: str(x.relative_to(ROOT)) if isinstance(x, Path) else "collapsed" if x else "fresh")
def test_a_rerun_is_equivalent_and_every_shortcut_gives_the_full_answer(
    path: Path, collapse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = load(path)
    b = rerun(a, collapse)
    assert _facts.Facts().equivalent(a, b)
    shortcut = (_graded_json(invariants.compare_cassettes(a, b)), diff(a, b))
    with monkeypatch.context() as m:
        _alone(m)
        full = (_graded_json(invariants.compare_cassettes(a, b)), diff(a, b))
        once = [n for n in invariants.checks() if invariants._once(n)]
        alone_a, alone_b = invariants.evaluate(a, once), invariants.evaluate(b, once)
    assert shortcut == full
    # what the shortcut rests on: the checks see the same thing on both sides
    assert [v.as_json() for v in alone_a.violations] == [v.as_json() for v in alone_b.violations]
    assert [f.describe() for f in alone_a.failures] == [f.describe() for f in alone_b.failures]


def test_the_bundled_recordings_have_violations_for_the_shortcut_to_carry() -> None:
    """The property test above is only as good as its cases: some recordings must break invariants."""
    broken = [p for p in RECORDINGS if invariants.evaluate(load(p)).violations]
    assert len(broken) >= 5


def _pairs() -> list[tuple[Path, Path]]:
    """The same scenario recorded on two harness versions: some messages shared, not equivalent."""
    fixtures = ROOT / "tests" / "fixtures"
    new = {p.relative_to(fixtures / "harness-0.62.0"): p for p in iter_cassettes(fixtures / "harness-0.62.0")}
    new.update({p.relative_to(ROOT / "cassettes"): p for p in iter_cassettes(ROOT / "cassettes")})
    out = []
    for old in ("harness-0.54.0", "harness-0.56.0", "harness-0.59.0", "extra-turn"):
        for p in iter_cassettes(fixtures / old):
            rel = p.relative_to(fixtures / old)
            if rel in new:
                out.append((p, new[rel]))
    return out


@pytest.mark.parametrize("pair", _pairs(), ids=lambda pair: f"{pair[0].parent.parent.name}/{pair[0].name}")
def test_versions_share_facts_and_still_get_the_full_answer(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = load(pair[0]), load(pair[1])
    with _facts.shared() as facts:
        shared = (_graded_json(invariants.compare_cassettes(a, b)), diff(a, b))
    assert not facts.equivalent(a, b)
    with monkeypatch.context() as m:
        _alone(m)
        full = (_graded_json(invariants.compare_cassettes(a, b)), diff(a, b))
    assert shared == full


def test_pairs_cover_every_version() -> None:
    assert {a.parent.parent.name for a, _ in _pairs()} >= {"harness-0.54.0", "harness-0.56.0", "harness-0.59.0"}


def test_one_comparison_estimates_each_distinct_message_once(tmp_path: Path) -> None:
    """A rerun's messages are found by content: the second side and the checks reuse the diff's estimates."""
    a = load(ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette")
    b = rerun(a)
    b.messages[-1] = {**b.messages[-1], "parts": []}  # one message really differs: no shortcut
    with _facts.shared() as facts:
        diff(a, b)
        before = facts.hits
        invariants.compare_cassettes(a, b)
    assert not facts.equivalent(a, b)
    assert before > 0 and facts.hits > before


def test_a_malformed_stamp_on_one_side_is_not_equivalent() -> None:
    """A timestamp pydantic-ai cannot read makes the message unloadable on that side only: computed apart."""
    a = load(ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette")
    b = rerun(a)
    i = next(i for i, m in enumerate(b.messages) if "timestamp" in m)
    b.messages[i] = {**b.messages[i], "timestamp": "2026-02-30T10:00:00Z"}
    assert not _facts.Facts().equivalent(a, b)


def test_compare_files_reports_the_same_with_and_without_the_shortcut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replay.cassette import save

    a_path = ROOT / "cassettes" / "seed000" / "long.cassette"
    b_path = save(rerun(load(a_path)), tmp_path / "b.cassette")
    fast = report_json(compare_files(a_path, b_path))
    with monkeypatch.context() as m:
        _alone(m)
        full = report_json(compare_files(a_path, b_path))
    for r in (fast, full):
        r.pop("seconds", None)
    assert fast == full and fast["status"] == "same"
    assert fast["violations"], "the recording breaks invariants: the report must still list them"


def test_users_checks_and_the_raw_part_check_run_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's check may read the stamps, and cache_prefix_broken compares raw parts (stamps
    included) within one cassette: neither is run once for both sides."""
    seen: list[Cassette] = []

    def mine(c: Cassette) -> list[invariants.Violation]:
        seen.append(c)
        return []

    monkeypatch.setitem(invariants._REGISTRY, "mine", mine)
    a = load(ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette")
    b = rerun(a)
    invariants.compare_cassettes(a, b)
    assert [c.messages for c in seen] == [b.messages, a.messages]
    assert not invariants._once("cache_prefix_broken") and not invariants._once("mine")
    assert invariants._once("content_lost") and invariants._once("predicate_verdict")
    builtin = [n for n in invariants.checks() if n != "mine"]
    assert all(invariants._once(n) for n in builtin if n != "cache_prefix_broken"), builtin  # every module of the package


def test_built_in_checks_run_in_a_fixed_order() -> None:
    """The order findings are listed in (text, JSON, matrix cells): the checks' modules import in this order."""
    assert list(invariants.checks())[:7] == ["compaction_grew_request", "content_lost", "empty_summary", "dangling_tool_call",
                                             "expectation", "cache_prefix_broken", "predicate_verdict"]


# --------------------------------------------------------------------------- shortcuts, as properties

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from replay.normaliser import Normaliser, digest, normalise, schema_for  # noqa: E402

_TEXT = st.text(st.sampled_from("ab_1 \t\n\u00a0\u2028.,!-é😀ٴ"), max_size=12)
_KIND = st.sampled_from(["user-prompt", "text", "tool-return", "system-prompt", "tool-call", None])
_CONTENT = st.one_of(_TEXT, st.lists(st.one_of(_TEXT, st.fixed_dictionaries({"content": _TEXT}), st.integers()), max_size=3),
                     st.none(), st.integers())
_PART = st.fixed_dictionaries({"part_kind": _KIND, "content": _CONTENT})
_MESSAGE = st.fixed_dictionaries({"kind": st.sampled_from(["request", "response"]),
                                  "parts": st.lists(st.one_of(_PART, _TEXT), max_size=4)})


@settings(max_examples=300, deadline=None)
@given(_MESSAGE)
def test_words_are_the_tokens_and_needles_of_a_message(message: dict[str, Any]) -> None:
    """``_words`` tokenises each part once for both: it must give exactly what the two functions give."""
    assert _messages._words(message) == (_messages._tokens(message), _messages._needles(message))


_STAMP = st.sampled_from(["2026-12-01T05:17:03.729807Z", "2026-12-02T06:18:04.123456Z", "not a stamp"])
_ID = st.one_of(st.sampled_from(["call-1", "call-2"]), st.sampled_from([f"call_{c * 24}" for c in "AB"]),
                st.sampled_from([f"pyd_ai_{c * 16}" for c in "0f"]))
_UUID_TEXT = st.sampled_from(["plain", "see 01a23008-f6b0-7361-839e-013b054dfe42 here", "02b23008-f6b0-7361-839e-013b054dfe42"])
_NPART = st.fixed_dictionaries(
    {"part_kind": st.sampled_from(["user-prompt", "tool-call", "tool-return", "text"]), "content": _UUID_TEXT},
    optional={"tool_call_id": _ID, "id": _ID, "timestamp": _STAMP, "args": st.none() | st.just({}), "retry": st.just(0)},
)
_NMESSAGE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["request", "response"]), "parts": st.lists(_NPART, max_size=3)},
    optional={"timestamp": _STAMP, "run_id": st.sampled_from(["run-1", "run-2"]), "instructions": _UUID_TEXT},
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_NMESSAGE, max_size=8), st.lists(_NMESSAGE, max_size=8), st.randoms(use_true_random=False))
def test_normalised_messages_shared_by_content_are_what_each_side_gives_alone(
    a_messages: list[dict[str, Any]], b_extra: list[dict[str, Any]], rnd: Any
) -> None:
    """A message is normalised once for both sides only when no alias was needed: the shared tables
    (the diff's and the checks') must be exactly those each cassette gives on its own, whatever the
    order, the generated ids and uuids (aliased per cassette, in order) and the stamps."""
    b_messages = copy.deepcopy(a_messages) + b_extra
    _restamp(b_messages, {})
    rnd.shuffle(b_messages)
    a, b = Cassette(messages=a_messages), Cassette(messages=b_messages)
    with _facts.shared() as facts:
        shared = [normalise(a, schema=schema_for(a, b)), normalise(b, schema=schema_for(b, a))]
        norms = [_history._Index(a).norm, _history._Index(b).norm]
    alone = [normalise(a, schema=schema_for(a, b)), normalise(b, schema=schema_for(b, a))]
    assert [(n.messages, n.message_digests) for n in shared] == [(n.messages, n.message_digests) for n in alone]
    for c, norm in zip((a, b), norms, strict=True):
        n = Normaliser()
        assert norm == [digest(n.value(m)) for m in c.messages]
    # The re-run gives each run id a new uuid: a message stamped with a short made-up one ("run-1")
    # changes shape (a content key keeps a stamp's length), so it is rightly computed on each side.
    kept = [m for m in a_messages if "run_id" not in m]
    if kept and not any(g in str(m) for m in a_messages for g in ("call_", "pyd_ai_", "-f6b0-")):
        assert facts.hits  # nothing aliased: the second side reused the first's


def test_a_schema_that_picks_classes_by_a_stamp_is_not_shared() -> None:
    from replay.normaliser._schema import compile_schema

    picked = compile_schema({"roots": {"message": ["A", "B"]}, "classes": {
        "A": {"tag": ["timestamp", "x"], "defaults": {"k": 1}}, "B": {"tag": ["kind", "request"]}}})
    assert not picked.stamp_free(_facts.volatile)
    assert compile_schema({"roots": {"message": ["B"]}, "classes": {"B": {"tag": ["kind", "request"]}}}).stamp_free(_facts.volatile)


# --------------------------------------------------------------------------- facts computed from one load


def _bare_facts(m: dict[str, Any]) -> dict[str, Any]:
    """Each derived fact of a message computed on its own, from a load of its own."""
    from replay.recorder import load_messages
    from replay.wire.cache import _SIZE, _estimate_one

    try:
        loaded = load_messages([m])
    except Exception:
        loaded = None
    chars = _messages._full_chars(m, loaded) if _messages._additive(m) else None  # the full computation, no one pass
    return {"chars": chars, _SIZE: _estimate_one(m), "loadable": loaded is not None}


@pytest.mark.parametrize("private", [False, True])
def test_facts_from_one_load_equal_each_computed_alone(private: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Facts.from_loaded`` loads a message once for every derived fact and keeps no load: each fact is
    what its own computation from a load of its own gives, whichever kind is asked first."""
    from replay.wire.cache import _SIZE

    loads: list[int] = []
    real = _facts._load
    monkeypatch.setattr(_facts, "_load", lambda m: loads.append(1) or real(m))
    for path in RECORDINGS:
        c = load(path)
        expected = [_bare_facts(m) for m in c.messages]
        loads.clear()
        with _facts.shared(private=private) as facts:
            kinds = ["chars", _SIZE, "loadable"]
            for i in range(len(c.messages)):
                first = kinds[i % 3]  # each kind asked first for some messages
                for kind in [first, *(k for k in kinds if k != first)]:
                    assert facts.from_loaded(kind, c, i) == expected[i][kind], (path, i, kind)
            assert not any(isinstance(v, list) for v in facts._memo.values())  # no load kept
        assert len(loads) == (len(c.messages) if private else len({facts.key(c, i) for i in range(len(c.messages))}))


def test_a_derived_fact_that_raises_raises_only_where_it_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Computed eagerly beside another kind, a failing fact must not fail that kind's caller (the diff's
    estimates) but still raise where it is asked (the check that asks it fails, as it did)."""
    def broken(message: Any, loaded: Any) -> Any:
        raise RuntimeError("broken fact")

    monkeypatch.setitem(_facts.DERIVED, "broken", broken)
    c = load(ROOT / "cassettes" / "seed001" / "keep_user_messages_true.cassette")
    with _facts.shared() as facts:
        assert facts.from_loaded("loadable", c, 0) is True
        with pytest.raises(RuntimeError, match="broken fact"):
            facts.from_loaded("broken", c, 0)


@pytest.mark.parametrize("private", [False, True])
def test_preloaded_facts_equal_each_computed_alone(private: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Facts.preload`` validates many messages in one call: each derived fact is still what its own
    load gives, also for the messages of a chunk that one unloadable message made fail as a whole."""
    monkeypatch.setattr(_facts, "_CHUNK", 3)
    broken = {"kind": "request", "parts": [{"part_kind": "no-such-part", "content": "x"}]}
    for path in RECORDINGS[:6]:
        c = load(path)
        c = c.model_copy(update={"messages": [*c.messages[:4], broken, *c.messages[4:]]})
        expected = [_bare_facts(m) for m in c.messages]
        assert expected[4]["loadable"] is False
        with _facts.shared(private=private) as facts:
            facts.preload(c, range(len(c.messages)))
            def unexpected(message: Any) -> None:
                raise AssertionError("a message loaded again")

            with monkeypatch.context() as m:  # every fact is there already
                m.setattr(_facts, "_load", unexpected)
                for i, want in enumerate(expected):
                    for kind, value in want.items():
                        assert facts.from_loaded(kind, c, i) == value, (path, i, kind)


def test_one_pass_facts_equal_the_full_computation_on_every_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message's size and characters from one pass of the estimator (``_facts.counted``) are what
    the full computations give, on every bundled recording and fixture (several harness versions),
    with the process's self-check spent (so nothing falls back behind the test's back)."""
    from replay.recorder import load_messages
    from replay.wire import cache

    for one in (_messages._ONE_PASS, cache._ONE_PASS):
        monkeypatch.setattr(one, "checked", one.VERIFY)
        monkeypatch.setattr(one, "ok", True)
    seen = 0
    for path in RECORDINGS:
        for m in load(path).messages:
            try:
                loaded = load_messages([m])
            except Exception:
                continue
            assert cache._size(m, loaded) == cache._estimate_one(m), (path, m)
            if _messages._additive(m):
                assert _messages._message_chars(m, loaded) == _messages._full_chars(m, loaded), (path, m)
            seen += 1
    assert _messages._ONE_PASS.ok and cache._ONE_PASS.ok and seen > 500


def test_one_pass_that_disagrees_falls_back_for_good() -> None:
    """A harness that counted otherwise: the first disagreement switches to the full computation."""
    one = _facts.OnePass()
    assert one.use(lambda: 7, lambda: 7) == 7
    assert one.use(lambda: 8, lambda: 9) == 9 and not one.ok
    assert one.use(lambda: 1, lambda: 2) == 2
    assert one.use(lambda: None, lambda: 5) == 5

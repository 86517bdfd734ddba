"""Scenarios: the unit harness-replay records, replays and diffs.

A scenario is an ``async def`` taking a :class:`Run` handle, decorated with
:func:`scenario`. It builds ordinary pydantic-ai agents and drives them with plain
pydantic-ai code; harness-replay only watches the model traffic around it.
"""

from __future__ import annotations

import importlib.machinery
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any, Literal, overload

from .errors import ReplayUsageError

if TYPE_CHECKING:
    import ast

Mode = Literal["record", "replay"]
ScenarioFunc = Callable[["Run"], Awaitable[Any]]


@dataclass(frozen=True)
class Scenario:
    """A registered scenario function and what identifies it across versions."""

    id: str
    func: ScenarioFunc
    path: Path | None
    doc: str
    source_hash: str
    on_exhausted: str | None = None
    """The scenario's own ``--on-exhausted`` policy (a command-line flag still wins over it)."""
    expect_error: str | None = None
    """Exception type the recording must end with (``UnexpectedModelBehavior`` or a dotted name)."""

    def error_expected(self, error_type: str | None, kinds: Sequence[str] = ()) -> bool:
        """Whether a recording ending with ``error_type`` (None: no error) is the outcome this scenario declared.

        ``kinds``: the dotted names of the classes the error is an instance of, so a declared base
        class matches as ``except`` would (``ModelHTTPError`` for slim 2.60's ``ModelServerError``).
        Any other outcome is a scenario mistake, not a baseline: ``replay record`` refuses to save it.
        """
        if self.expect_error is None or error_type is None:
            return self.expect_error is None and error_type is None
        return any(name == self.expect_error or name.endswith("." + self.expect_error) for name in (error_type, *kinds))


@dataclass
class Observation:
    name: str
    value: Any


@dataclass
class ObservedHistory:
    """A message history handed to the checks (``run.observe_messages`` / ``run.judge``), dumped to JSON."""

    name: str
    messages: list[dict[str, Any]]
    source: list[dict[str, Any]]
    after: int
    predicate: str | None = None
    verdict: Any = None


def _dump(call: str, messages: Any) -> list[dict[str, Any]]:
    from pydantic_ai.messages import ModelRequest, ModelResponse

    from .recorder import dump_messages

    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise ReplayUsageError(f"{call}: messages must be a list of pydantic-ai messages, got {type(messages).__name__}")
    messages = list(messages)
    odd = next((m for m in messages if not isinstance(m, (ModelRequest, ModelResponse))), None)
    if odd is not None:
        raise ReplayUsageError(f"{call}: not a list of pydantic-ai messages (found a {type(odd).__name__})")
    try:
        return dump_messages(messages)
    except Exception as exc:  # pydantic_core raises PydanticSerializationError
        raise ReplayUsageError(f"{call}: not a list of pydantic-ai messages: {exc}") from None


@dataclass
class Run:
    """Handle passed to a scenario: where it reports what it saw and what it expects.

    Observations end up in the cassette, so a predicate's answer (for example
    ``is_provider_valid(history)``) is compared across versions like the payloads are.
    """

    scenario_id: str
    mode: Mode = "record"
    observations: list[Observation] = field(default_factory=list)
    expectations: dict[str, Any] = field(default_factory=dict)
    histories: list[ObservedHistory] = field(default_factory=list)
    calls: Callable[[], int] = field(default=lambda: 0, repr=False)
    """How many model calls the run has made so far (the session's count), to place histories among them."""

    def observe(self, name: str, value: Any) -> None:
        """Record a JSON-able value under ``name``; repeated names are kept in order."""
        _check_name("run.observe", name)
        try:
            jsonable = json_value(value)
        except Exception as exc:  # pydantic_core raises PydanticSerializationError
            raise ReplayUsageError(f"run.observe({name!r}, ...): value is not JSON-able: {exc}") from exc
        self.observations.append(Observation(name, jsonable))

    def expect(self, name: str, value: Any) -> None:
        """Declare the value the observation ``name`` must have; ``replay check`` enforces it."""
        _check_name("run.expect", name)
        try:
            self.expectations[name] = json_value(value)
        except Exception as exc:  # as observe says it
            raise ReplayUsageError(f"run.expect({name!r}, ...): value is not JSON-able: {exc}") from exc

    def observe_messages(self, name: str, messages: Any, *, source: Any = None) -> None:
        """Hand a message history that never reaches a model to the checks.

        Every invariant runs on it as on a request sent at this point of the run: a probe
        that calls a capability directly (``compact()``) gets ``content_lost`` and
        ``compaction_grew_request`` without writing the expected answer. ``source`` is the
        history it was made from, when there is one (the input of that ``compact()``).
        """
        _check_name("run.observe_messages", name)
        call = f"run.observe_messages({name!r}, ...)"
        self.histories.append(
            ObservedHistory(
                name,
                _dump(call, messages),
                _dump(call, source) if source is not None else [],
                self.calls(),
            )
        )

    def judge(self, predicate: str, verdict: Any, messages: Any) -> None:
        """Record a library predicate's ``verdict`` about ``messages``, e.g. ``is_provider_valid``.

        ``replay check`` judges the same history by the tool's own rules and reports a
        disagreement, naming both verdicts and the evidence. The verdict is also observed
        under the predicate's name, so a release that changes it shows in ``replay run``.
        """
        if not isinstance(predicate, str) or not predicate:
            raise ReplayUsageError(f"run.judge: the predicate is named by a non-empty string, got {predicate!r}")
        self.observe(predicate, verdict)
        history = _dump(f"run.judge({predicate!r}, ...)", messages)
        self.histories.append(
            ObservedHistory(predicate, history, [], self.calls(), predicate=predicate, verdict=self.observations[-1].value)
        )

    @property
    def recording(self) -> bool:
        return self.mode == "record"


def json_value(value: Any, **options: Any) -> Any:
    """``value`` as JSON: its sets in a fixed order (:func:`sets_in_order`), its bytes as text.

    Bytes are UTF-8 text when they are (as pydantic writes them), else base64 (as pydantic writes
    them when asked): a scenario returning a file it made (``b"\\x89PNG…"``) was refused as having
    raised ``UnicodeDecodeError`` — which it had not — and told to declare it with ``expect_error``.
    """
    from pydantic_core import to_jsonable_python  # here, not at import: the pytest plugin imports this package

    value = sets_in_order(value)
    try:
        return to_jsonable_python(value, **options)
    except UnicodeDecodeError:
        return to_jsonable_python(value, bytes_mode="base64", **options)


def sets_in_order(value: Any, depth: int = 0) -> Any:
    """``value`` with every set in it (in a list, a map, a model, a dataclass) a list in a fixed order.

    JSON has no set: pydantic lists one in iteration order, which for text follows the process's
    hash seed, so ``run.observe("tools", {"search", "fetch"})`` (or a returned set, a structured
    output with a ``set[str]`` field) came out in another order in the next process, and a replay
    on the recording's own version read ``changed``. Anything holding no set is returned as it is.
    """
    import dataclasses
    import json

    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    if depth > 100 or value is None or isinstance(value, (str, bytes, int, float)):
        return value
    if isinstance(value, (set, frozenset)):
        items = [sets_in_order(v, depth + 1) for v in value]
        return sorted(items, key=lambda v: json.dumps(to_jsonable_python(v, serialize_unknown=True), sort_keys=True))
    if isinstance(value, dict):
        mapped = {k: sets_in_order(v, depth + 1) for k, v in value.items()}
        return mapped if any(mapped[k] is not v for k, v in value.items()) else value
    if isinstance(value, (list, tuple)):
        listed = [sets_in_order(v, depth + 1) for v in value]
        return listed if any(a is not b for a, b in zip(listed, value)) else value
    try:
        if isinstance(value, BaseModel):
            dumped: Any = value.model_dump(mode="python")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            dumped = dataclasses.asdict(value)
        else:
            return value
    except Exception:
        return value
    ordered = sets_in_order(dumped, depth + 1)
    return ordered if ordered is not dumped else value


_REGISTRY: dict[str, Scenario] = {}
_BY_PATH: dict[Path, dict[str, Scenario]] = {}
"""What each file registered: two files of one id both keep theirs here (the registry holds one)."""


def _source_hash(func: Callable[..., Any], scenario_id: str) -> str:
    """Hash of the scenario function's own source, decorator line included, and its id.

    Only what defines *this* scenario: editing a sibling scenario, a comment elsewhere or
    the file's docstring must not make every cassette of the file look stale. Helpers
    the function calls are not covered (a responder edit may or may not change the
    traffic; the replay itself says whether it did).
    """
    import hashlib
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        source = func.__qualname__
    payload = f"{scenario_id}\0{source}".encode()
    return hashlib.blake2b(payload, digest_size=8).hexdigest()


def _module_stem(func: Callable[..., Any]) -> str:
    file = inspect.getsourcefile(func)
    if file:
        return Path(file).stem
    return func.__module__.rsplit(".", 1)[-1]


ON_EXHAUSTED = ("fail", "repeat", "fake")


@overload
def scenario(func: ScenarioFunc, /) -> ScenarioFunc: ...
@overload
def scenario(
    id: str | None = None,
    /,
    *,
    on_exhausted: Literal["fail", "repeat", "fake"] | None = None,
    expect_error: str | type[BaseException] | None = None,
) -> Callable[[ScenarioFunc], ScenarioFunc]: ...


def scenario(
    arg: ScenarioFunc | str | None = None,
    /,
    *,
    on_exhausted: str | None = None,
    expect_error: str | type[BaseException] | None = None,
) -> Any:
    """Register an ``async def f(run)`` as a scenario.

    Use bare (``@scenario``: id ``<module>/<function>``) or with an id
    (``@scenario("seed000/long")``): an explicit id keeps cassettes attached when a
    file is renamed. ``on_exhausted`` is the scenario's own answer to a version that makes
    more calls than were recorded: ``"fake"`` suits a scenario whose models are all code
    (``FunctionModel``), so another version's extra calls get the answers they would get live.
    ``expect_error`` declares that the run ends with that exception (a class or its name, e.g.
    ``"UnexpectedModelBehavior"``); without it, a scenario that raises is a mistake and
    ``replay record`` saves no cassette for it.
    """
    if not (
        expect_error is None
        or (isinstance(expect_error, str) and expect_error.strip())
        or (isinstance(expect_error, type) and issubclass(expect_error, BaseException))
    ):  # an instance (`expect_error=ValueError("x")`) was an AttributeError on `__qualname__`; "" matched nothing
        raise ReplayUsageError(f"@scenario(expect_error={expect_error!r}): expected an exception class or its name")
    expected = expect_error if isinstance(expect_error, str) or expect_error is None else expect_error.__qualname__
    if on_exhausted is not None and on_exhausted not in ON_EXHAUSTED:
        raise ReplayUsageError(f"@scenario(on_exhausted={on_exhausted!r}): expected one of {', '.join(ON_EXHAUSTED)}")

    def register(func: ScenarioFunc, scenario_id: str | None) -> ScenarioFunc:
        if not inspect.iscoroutinefunction(func):
            raise ReplayUsageError(f"@scenario needs an async def, got {func.__qualname__}")
        from ._untrusted import check_id  # here: the pytest plugin imports this module in every pytest run

        sid = check_id(scenario_id or f"{_module_stem(func)}/{func.__name__}")  # it names a file: safe path only
        file = inspect.getsourcefile(func)
        path = Path(file).resolve() if file else None
        known = _REGISTRY.get(sid)
        if (
            known is not None
            and known.func.__module__.startswith("replay_scenarios.")
            and func.__module__.startswith("replay_scenarios.")
            and known.func.__module__ == func.__module__
            and known.func is not func
        ):
            # Two scenarios of one id in one file (a copied scenario whose id was not renamed): the later one
            # silently replaced the other, which was then never recorded nor replayed. Across files: discover().
            # A copy whose function name was kept too (bare `@scenario`, a second `def one`) is told by its line.
            first, second = known.func.__qualname__, func.__qualname__
            if first == second:
                first, second = (f"{f.__qualname__} (line {f.__code__.co_firstlineno})" for f in (known.func, func))
            raise ReplayUsageError(f"@scenario id {sid!r} is declared twice: by {first} and by {second}")
        _REGISTRY[sid] = registered = Scenario(
            id=sid,
            func=func,
            path=path,
            doc=inspect.getdoc(func) or inspect.getdoc(sys.modules.get(func.__module__)) or "",
            source_hash=_source_hash(func, sid),
            on_exhausted=on_exhausted,
            expect_error=expected,
        )
        if path is not None:
            _BY_PATH.setdefault(path, {})[sid] = registered
        func.__replay_scenario_id__ = sid  # type: ignore[attr-defined]
        return func

    if callable(arg):
        return register(arg, None)
    if arg is not None and (not isinstance(arg, str) or not arg):
        # `@scenario("")` became `<file>/<function>` when imported but `""` to the static scan that plans
        # `run ID` and `matrix`, so neither found it by either name
        raise ReplayUsageError(f"@scenario({arg!r}): the id is a non-empty 'group/name' string (or leave it out)")
    return lambda func: register(func, arg)


_HASHED_MODULE = r"^(replay_scenarios\..+)_[0-9a-f]{16}(?=\.|$)"


def stable_name(dotted: str) -> str:
    """A dotted name in a scenario file's module without the hash that makes the module's name unique
    (``replay_scenarios.group.custom_3f…e1.BadAnswer`` → ``replay_scenarios.group.custom.BadAnswer`` for
    ``scenarios/group/custom.py``): what a
    cassette records, since the hash covers the file's absolute path and bytes, so an edit anywhere in the
    file or a CI checkout elsewhere named the scenario's own exception class differently."""
    import re

    return re.sub(_HASHED_MODULE, r"\1", dotted, count=1) if dotted.startswith("replay_scenarios.") else dotted


_HASHED_MODULE_IN_TEXT = None


def stable_names_in(text: str) -> str:
    """``text`` with every scenario module's name in it stable (:func:`stable_name`).

    A default repr names an object's class by its module: a tool returning ``repr(error)``
    (``KeyError(<replay_scenarios.errs_87e4….Widget object at 0x…>)``) sent the model the hash of the
    scenario file's path and bytes, so an edit elsewhere in the file, or a checkout in another folder,
    made a replay on the recording's own version ``changed``.
    """
    global _HASHED_MODULE_IN_TEXT
    if "replay_scenarios." not in text:
        return text
    if _HASHED_MODULE_IN_TEXT is None:
        import re

        _HASHED_MODULE_IN_TEXT = re.compile(r"\b(replay_scenarios(?:\.\w+?)+)_[0-9a-f]{16}(?![0-9A-Za-z_])")
    return _HASHED_MODULE_IN_TEXT.sub(r"\1", text)


def scenario_module(name: str) -> Any:
    """The scenario file's module a recorded (stable or hashed) module name means: the latest imported."""
    import re

    stable = stable_name(name)
    if not stable.startswith("replay_scenarios."):
        return None
    pattern = re.compile(re.escape(stable) + r"_[0-9a-f]{16}")
    return next((m for n, m in reversed(list(sys.modules.items())) if pattern.fullmatch(n)), None)


def _module_path(path: Path, root: Path | None) -> str:
    """The file's place as a dotted name: below the scenarios folder (or the working directory), so two
    files of one name in different folders stay apart and a checkout elsewhere names them alike."""
    for base in (root, Path.cwd()):
        if base is None:
            continue
        try:
            rel = path.relative_to(base.resolve())
        except ValueError:
            continue
        return ".".join(rel.with_suffix("").parts)
    return path.stem


def _source_bytes(path: Path, given: Path | None = None) -> bytes:
    """A scenario file's bytes; anything but a regular file is refused before it is opened: a FIFO named
    ``x.py`` (or a link to one) hung ``replay run`` for good, a link to ``/dev/zero`` read until memory ran out."""
    import stat

    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        from .cassette import _file_kind

        kind = "a directory" if stat.S_ISDIR(mode) else _file_kind(mode)
        where = path if given is None else given.absolute()  # the file as found, not the device a link names
        raise ReplayUsageError(f"{where}: is {kind}, not a regular file: refused")
    return path.read_bytes()


def _check_name(call: str, name: object) -> None:
    """An observation's name is text: `run.observe(123, …)` ended `replay record` in a pydantic traceback
    after the run, with the cassettes of the scenarios before it written and those after it not recorded."""
    if not isinstance(name, str) or not name:
        raise ReplayUsageError(f"{call}: the name is a non-empty string, got {name!r}")


def _import_file(path: Path, root: Path | None = None) -> list[Scenario]:
    """Import a scenario file under a private module name and return what it registered.

    The module name hashes the file's path and content, so an edited file is imported
    afresh (its old registrations dropped) while an unchanged one is imported once; without
    the hash (:func:`stable_name`) it is the file's place below ``root``, the scenarios folder.
    """
    import hashlib
    import importlib.util

    given, path = path, path.resolve()
    try:
        source = _source_bytes(path, given)
    except OSError as exc:
        raise ReplayUsageError(f"{path}: cannot read: {exc.strerror}") from None
    digest = hashlib.blake2b(str(path).encode() + b"\0" + source, digest_size=8).hexdigest()
    name = f"replay_scenarios.{_module_path(path, root)}_{digest}"
    if name not in sys.modules:
        _forget(path)
        spec = importlib.util.spec_from_file_location(name, path, loader=_SourceOnly(name, str(path), source))
        if spec is None or spec.loader is None:
            raise ReplayUsageError(f"{path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            _forget(path)  # what registered before the failure: the file's scenarios are all errors
            raise ReplayUsageError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
    return sorted(_BY_PATH.get(path, {}).values(), key=lambda s: s.id)


def _forget(path: Path) -> None:
    """Drop what the file at ``path`` registered (an edited file is imported afresh)."""
    for sid in [sid for sid, s in _REGISTRY.items() if s.path == path]:
        del _REGISTRY[sid]
    _BY_PATH.pop(path, None)


class _SourceOnly(importlib.machinery.SourceFileLoader):
    """Runs the bytes the module name was hashed from, never a ``.pyc``: bytecode is checked against
    the file's mtime in whole seconds and its size, so a scenario rewritten within a second to the
    same length (generated variants, a test) would run its old code; and none is written beside it."""

    def __init__(self, fullname: str, path: str, source: bytes) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_code(self, fullname: str) -> CodeType:
        return self.source_to_code(self.source, self.path)


def _scenario_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if not p.name.startswith("_"))


def _decorator_id(node: ast.expr, stem: str, name: str) -> str | None | bool:
    """The id an ``@scenario`` decorator gives, False for another decorator, None if not literal."""
    import ast

    func = node.func if isinstance(node, ast.Call) else node
    is_scenario = (isinstance(func, ast.Name) and func.id == "scenario") or (
        isinstance(func, ast.Attribute) and func.attr == "scenario"
    )
    if not is_scenario:
        return False
    # the id is the one positional argument; keywords (on_exhausted=, expect_error=) never change it
    if not isinstance(node, ast.Call) or not node.args:
        return f"{stem}/{name}"
    if len(node.args) == 1:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value or None  # "" is refused at import: let the import say so
        if isinstance(arg, ast.Constant) and arg.value is None:
            return f"{stem}/{name}"
    return None


def declared_ids(path: Path, lines: dict[str, int] | None = None) -> list[str] | None:
    """The scenario ids a file declares, read from its syntax without importing it.

    Lets a TARGET id import only the file that holds it: importing every file would run
    (and fail on) imports a version lacks in files nobody asked for. None when the ids
    cannot be read statically (``scenario`` used other than as a plain decorator with a
    literal id, or a syntax error), so the caller imports the file to find out. ``lines``
    gets each id's ``@scenario`` line (where CI points at a file that failed to import).
    """
    import ast  # here, not at the top: `replay --help` need not pay for it

    try:
        tree = ast.parse(_source_bytes(path), filename=str(path))
    except (OSError, SyntaxError, ValueError, ReplayUsageError):
        return None
    ids: list[str] = []
    decorators: set[int] = set()
    for node in tree.body:
        if not isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)):
            continue
        for dec in node.decorator_list:
            sid = _decorator_id(dec, path.stem, node.name)
            if sid is None:
                return None
            if sid is not False:
                ids.append(str(sid))
                if lines is not None:
                    lines.setdefault(str(sid), dec.lineno)
                decorators.add(id(dec.func if isinstance(dec, ast.Call) else dec))
    for sub in ast.walk(tree):
        named = (isinstance(sub, ast.Name) and sub.id == "scenario") or (
            isinstance(sub, ast.Attribute) and sub.attr == "scenario"
        )
        if named and id(sub) not in decorators:
            return None
    return ids


def _matches(sid: str, target: str) -> bool:
    return sid == target or sid.startswith(target.rstrip("/") + "/")


@dataclass(frozen=True)
class ImportFailure:
    """A scenario file that could not be imported, and the targeted scenario ids it declares.

    On an older harness a file importing a capability that version lacks fails; only its
    own scenarios should error (with this reason), not every scenario of the run.
    """

    path: Path
    reason: str
    ids: tuple[str, ...]


def _check_scenario_file(path: Path, target: str) -> None:
    """A TARGET file is Python source: `replay run cassettes/x.cassette` (a cassette, as vcrpy users name
    what to replay) or `replay run notes.txt` executed the file as Python and reported its SyntaxError."""
    if path.suffix == ".py":
        return
    if path.suffix == ".cassette":
        raise ReplayUsageError(f"{target}: a cassette, not a scenario file: give the scenario's id, file or folder "
                               "(`replay ls` names each cassette's scenario)")
    raise ReplayUsageError(f"{target}: not a scenario file (a .py file), a directory or a scenario id")


def discover(
    targets: Iterable[str],
    default_dir: Path = Path("scenarios"),
    failures: list[ImportFailure] | None = None,
) -> list[Scenario]:
    """Resolve command-line TARGETs: scenario files, directories, or scenario ids.

    An id is looked up among the scenarios of ``default_dir`` (ids may also be
    prefixes ending in ``/``, selecting a whole module); only files that declare a
    matching id (or whose ids cannot be read without importing) are imported. A file
    that fails to import raises, unless ``failures`` is given: then it is appended there
    and the other targets are still resolved.
    """
    targets = list(targets) or [str(default_dir)]
    chosen: dict[str, Scenario] = {}
    failed: dict[Path, str] = {}

    seen: dict[str, Scenario] = {}

    def load(file: Path, target: str | None) -> list[Scenario]:
        original, file = file, file.resolve()
        if file not in failed:
            try:
                found = _import_file(original, default_dir)
                for s in found:
                    other = seen.get(s.id)
                    if other is not None and other.path != s.path:
                        # the later file's registration replaced the earlier one's: one of them never ran
                        _REGISTRY[s.id] = other
                        raise ReplayUsageError(
                            f"{file}: @scenario id {s.id!r} is declared twice: by {other.func.__qualname__} in "
                            f"{other.path} and by {s.func.__qualname__} in {s.path}"
                        )
                seen.update((s.id, s) for s in found)
                return found
            except ReplayUsageError as exc:
                if failures is None:
                    raise
                failed[file] = str(exc)
        ids = tuple(i for i in declared_ids(file) or () if target is None or _matches(i, target))
        assert failures is not None
        failures.append(ImportFailure(file, failed[file], ids))
        return []

    for target in targets:
        path = Path(target)
        if path.is_dir():
            for file in _scenario_files(path):
                chosen.update((s.id, s) for s in load(file, None))
        elif path.is_file():
            _check_scenario_file(path, target)
            chosen.update((s.id, s) for s in load(path, None))
        else:
            before = len(failures or ())
            if default_dir.is_dir():
                for file in _scenario_files(default_dir):
                    ids = declared_ids(file)
                    if ids is None or any(_matches(i, target) for i in ids):
                        load(file, target)
            matches = [s for sid, s in _REGISTRY.items() if _matches(sid, target)]
            if not matches and not any(f.ids for f in (failures or ())[before:]):
                raise ReplayUsageError(f"{target}: no such scenario file, directory or scenario id")
            chosen.update((s.id, s) for s in matches)
    # An id a file that failed declares too (a scenario copied into another file, its id not renamed) is
    # ambiguous: recording or replaying the other file's under it read `recorded`/`SAME` while that file's
    # error went unreported (its id had a result). Neither runs; the failure is the id's error.
    ambiguous = {i for f in failures or () for i in f.ids}
    return sorted((s for s in chosen.values() if s.id not in ambiguous), key=lambda s: s.id)


def declared(targets: Iterable[str], default_dir: Path = Path("scenarios")) -> dict[str, Path]:
    """Scenario id → file for TARGETs, importing only files whose ids cannot be read statically.

    What ``replay matrix`` plans its cells from: the calling process need not import
    pydantic-ai or any scenario to know which scenarios exist and where.
    """
    targets = list(targets) or [str(default_dir)]
    out: dict[str, Path] = {}

    def add(file: Path, target: str | None) -> bool:
        ids = declared_ids(file)
        if ids is None:
            found = [(s.id, s.path or file) for s in _import_file(file, default_dir)]
        else:
            found = [(i, file.resolve()) for i in ids]
        hits = [(i, f) for i, f in found if target is None or _matches(i, target)]
        out.update(hits)
        return bool(hits)

    for target in targets:
        path = Path(target)
        if path.is_dir():
            for file in _scenario_files(path):
                add(file, None)
        elif path.is_file():
            _check_scenario_file(path, target)
            add(path, None)
        else:
            files = _scenario_files(default_dir) if default_dir.is_dir() else []
            if not [f for f in files if add(f, target)]:
                raise ReplayUsageError(f"{target}: no such scenario file, directory or scenario id")
    return dict(sorted(out.items()))


def get(scenario_id: str) -> Scenario | None:
    return _REGISTRY.get(scenario_id)

"""The ``replay`` command: a thin front over the pipeline.

Exit codes fit CI: 0 nothing changed, 1 a change or violation was found, 2 bad input
(usage, configuration or an unreadable cassette), always as one line without a traceback.
"""


import contextlib
import copy
import functools
import importlib
import io
import os
import sys
import time
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from ._untrusted import dumps_json, visible
from .config import Config, limits, load_config
from .errors import ReplayError, ReplayUsageError

if TYPE_CHECKING:
    from .reporter import ScenarioReport

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: rich's help renderer costs more to import than all of `replay --help` may
    help="Record, replay and diff the model traffic of pydantic-ai agents and harness capabilities.",
)


class Fmt(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    junit = "junit"


class ShowFmt(str, Enum):
    text = "text"
    json = "json"


class Level(str, Enum):
    wire = "wire"
    model = "model"


class Exhausted(str, Enum):
    fail = "fail"
    repeat = "repeat"
    fake = "fake"


def version_line() -> str:
    """This tool's version and the versions it records against: what a bug report needs."""
    from importlib.metadata import PackageNotFoundError, version

    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"harness-replay {v('harness-replay')} (pydantic-ai-harness {v('pydantic-ai-harness')}, "
        f"pydantic-ai-slim {v('pydantic-ai-slim')}, python {python})"
    )


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Record, replay and diff the model traffic of pydantic-ai agents and harness capabilities."""


_METAVARS = {
    "targets": "TARGET",
    "target": "TARGET",
    "paths": "PATH",
    "cassette": "CASSETTE",
    "results": "RESULT",
    "cassettes": "DIR",
    "out": "DIR",
    "env_dir": "DIR",
    "ignore": "RULE",
    "allow_host": "HOST",
    "harness": "VERSION",
    "python": "VERSION",
    "with_": "REQ",
    "shard": "K/N",
    "jobs": "N",
    "trials": "N",
    "html": "FILE",
    "textconv": "COMMAND",
    "title": "TEXT",
    "timeout": "SECONDS",
}
_OUT_IS_A_FILE = frozenset({"html", "report"})


def build_command() -> Any:
    """The click command behind ``app``: its subcommands are built when first looked up (see :class:`_Commands`)."""
    shell = copy.copy(app)  # the group itself (callback, --version, completion) without the subcommands
    shell.registered_commands = []
    cmd = typer.main.get_command(shell)
    cmd.commands = _Commands(app.registered_commands)  # type: ignore[attr-defined]
    return cmd


class _Commands(Mapping[str, Any]):
    """``replay``'s subcommands by name, each built by typer on first lookup.

    Building one reads its function's signature and type hints and makes its click
    parameters; building all eleven for every run of one was a sixth of ``replay show``'s
    own start-up. ``--help`` and shell completion still look every one up.
    """

    def __init__(self, infos: Sequence[Any]) -> None:
        self._infos = {info.name or typer.main.get_command_name(info.callback.__name__): info for info in infos}
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        built = self._built.get(name)
        if built is None:
            info = self._infos[name]
            built = typer.main.get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
            )
            self._built[name] = built = _readable(name, built)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)


def _readable(name: str, sub: Any) -> Any:
    """Value names people read (``--ignore RULE``, not ``<list[str]>``); a choice keeps typer's
    own display of its values (``[text|json]``, or ``<text|json>`` from typer 0.29)."""
    for param in sub.params:
        if param.metavar is not None or getattr(param, "is_flag", False) or _has_choices(param):
            continue
        if param.name == "out" and name in _OUT_IS_A_FILE:
            param.metavar = "FILE"
        elif name == "check" and param.name == "ignore":
            param.metavar = "INVARIANT"
        else:
            param.metavar = _METAVARS.get(param.name or "", (param.name or "value").upper())
        if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
            # newer typer appends "<list[str]>" to an argument's name; an option shows its metavar there
            param.display_type_rich = lambda ctx: None
    return sub


def _has_choices(param: Any) -> bool:
    """click's ``Choice`` type, or (typer 0.29, its own parameter types) a descriptor's choices."""
    descriptor = getattr(param, "type_descriptor", None)
    return hasattr(getattr(param, "type", None), "choices") or bool(getattr(descriptor, "is_choice", False))


@contextmanager
def _own_models() -> Iterator[None]:
    """Import the cassette's pydantic models without pydantic's plugins (as typer builds its own):
    they are this tool's records, not the user's, and finding plugins scans every installed
    distribution's entry points, a fortieth of ``replay show``. Only commands that run no
    scenario use it, so a user's models still get their plugins in ``record`` and ``run``."""
    previous = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
        else:
            os.environ["PYDANTIC_DISABLE_PLUGINS"] = previous


_PLUGIN_LOADER = "pydantic.plugin._loader"


class _PluginLoaderOnDemand(types.ModuleType):
    """Stands in for pydantic's plugin loader until a model is built with plugins enabled.

    pydantic imports its loader for the first model built, plugins disabled or not, and the
    loader imports ``importlib.metadata``: a twentieth of ``replay show`` (git's textconv), whose
    models (typer's parameters, the cassette's records) are all built with plugins disabled.
    Disabled, there are none, as the loader itself answers; anything else is the real loader's.
    """

    def get_plugins(self) -> Iterable[Any]:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in ("__all__", "1", "true"):
            return ()
        return self._real().get_plugins()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (``__path__``) need not load it
            raise AttributeError(name)
        return getattr(self._real(), name)

    def _real(self) -> types.ModuleType:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return importlib.import_module(self.__name__)


@contextmanager
def _plugin_loader_on_demand() -> Iterator[None]:
    """One command's run with :class:`_PluginLoaderOnDemand` in place of a loader not yet imported."""
    if _PLUGIN_LOADER in sys.modules:
        yield
        return
    stand_in = sys.modules[_PLUGIN_LOADER] = _PluginLoaderOnDemand(_PLUGIN_LOADER)
    try:
        yield
    finally:
        if sys.modules.get(_PLUGIN_LOADER) is stand_in:
            del sys.modules[_PLUGIN_LOADER]


def _config() -> Config:
    return load_config()


def _project_on_path(config: Config) -> None:
    """Scenario files import the project's own code, as tests do under pytest's rootdir."""
    root = str((config.source.parent if config.source else Path.cwd()).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)


def _default_target(targets: list[str] | None, config: Config) -> None:
    """No TARGET and no scenarios folder: said as that, naming where the folder is set. `[tool.replay]
    scenarios = "scenario"` (a typo) was `scenario: no such scenario file, directory or scenario id`."""
    if targets or config.scenarios.is_dir():
        return
    if config.source is None:
        raise ReplayUsageError(f"{config.scenarios}: no scenarios folder here (give a TARGET, or create it)")
    raise ReplayUsageError(f"{config.scenarios}: no such scenarios folder, the default TARGET "
                           f"([tool.replay] scenarios in {config.source}, default 'scenarios')")


def _discover(targets: list[str] | None, config: Config, failures: list[Any] | None = None) -> list[Any]:
    """Import the targeted scenarios; with ``failures``, a file that fails to import is collected there."""
    from .recorder import tracking_agents
    from .scenario import discover

    _default_target(targets, config)
    _project_on_path(config)
    with tracking_agents():
        found = discover(targets or [], default_dir=config.scenarios, failures=failures)
    if not found and not failures:
        raise ReplayUsageError(f"{', '.join(targets or [str(config.scenarios)])}: no scenarios found")
    return found


def _import_errors(failures: list[Any], found: list[Any]) -> "list[ScenarioReport]":
    """One error report per scenario of a file that failed to import (the file itself if its ids are unknown)."""
    from .reporter import ScenarioReport
    from .scenario import declared_ids
    have = {sc.id for sc in found}
    out: dict[str, ScenarioReport] = {}
    for f in failures:
        lines: dict[str, int] = {}  # its @scenario lines, for JUnit and annotations, as a scenario that imports has
        declared_ids(Path(f.path), lines)
        for sid in f.ids or (str(f.path),):
            if sid not in have and sid not in out:
                out[sid] = ScenarioReport(sid, "error", error=f.reason, file=str(f.path), line=lines.get(sid))
    return list(out.values())


Targets = Annotated[list[str] | None, typer.Argument(help="Scenario files, directories or ids (default: scenarios/).")]
CassettesOpt = Annotated[Path | None, typer.Option("--cassettes", help="Cassette directory (default: cassettes/).")]
FormatOpt = Annotated[Fmt, typer.Option("--format", "-f", help="Output format.")]
IgnoreOpt = Annotated[
    list[str] | None, typer.Option("--ignore", help="Extra key or path glob to ignore when comparing (repeatable).")
]

ExhaustedOpt = Annotated[
    Exhausted | None, typer.Option(
        "--on-exhausted",
        help="When a role asks for more responses than recorded (default: the scenario's on_exhausted, "
        "else [tool.replay] on-exhausted, else fail).",
    )
]
AllowHostOpt = Annotated[list[str] | None, typer.Option("--allow-host", help="Host a replay may connect to (repeatable).")]
TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", min=0, help="Seconds one scenario's replay may take, then it is an error (default 300, "
                 "[tool.replay] timeout; 0: no bound)."),
]


def _import_checks(config: Config) -> None:
    """Import the modules named in ``[tool.replay] checks`` so their ``@register`` runs."""
    import importlib

    modules = config.extra.get("checks", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ReplayUsageError(f"{config.source}: [tool.replay] checks must be a list of module names")
    if modules:  # the project's own modules, from its root wherever in it the command runs (as scenarios import them)
        _project_on_path(config)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise ReplayUsageError(f"{config.source}: cannot import check module {name!r}: {exc}") from None


def _exit_for(reports: "list[ScenarioReport]") -> NoReturn:
    """2 when a cassette could not be judged (unreadable, or a check crashed on it), else 1 for any change."""
    if any(r.status == "error" for r in reports):
        raise typer.Exit(2)
    raise typer.Exit(1 if any(r.status != "same" for r in reports) else 0)


@app.command()
def record(
    targets: Targets = None,
    cassettes: CassettesOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Record existing cassettes again; one that comes out the same but for its stamps is kept.")] = False,
    check_determinism: Annotated[
        int | None,
        typer.Option(
            "--check-determinism",
            min=2,
            metavar="N",
            help="Instead of writing cassettes, record each scenario N times in fresh processes "
            "and report whether the normalised cassettes are byte-identical (exit 1 if not).",
        ),
    ] = None,
    fmt: Annotated[ShowFmt, typer.Option("--format", "-f", help="Output format.")] = ShowFmt.text,
) -> None:
    """Run scenarios against their models and write one cassette per scenario.

    Exit 0 when every scenario was recorded (or skipped), 2 when one raised an error it did
    not declare with ``@scenario(expect_error=...)`` (no cassette is written for it).
    """
    from . import _pipeline
    if force and check_determinism is not None:  # which one did the user mean? Both at once did the second alone
        raise ReplayUsageError("--force and --check-determinism do not go together: --check-determinism writes no "
                               "cassette (run `replay record --force` to record again)")
    config = _config()
    failures: list[Any] = []  # a file that fails to import (a capability this version lacks) errors alone
    with _scenario_prints():
        scenarios = _discover(targets, config, failures)
    directory = cassettes or config.cassettes
    unimported = _unimported(failures, directory)
    if check_determinism is not None:
        _determinism_verdict(scenarios, check_determinism, config, directory, fmt, unimported)
    with _scenario_prints():
        outcomes = _pipeline.record_scenarios(scenarios, directory, force=force, limits=limits(config)) + unimported
    if fmt is ShowFmt.json:
        typer.echo(dumps_json({o.scenario_id: {"status": o.status, "path": str(o.path), "detail": o.detail} for o in outcomes}))
    for o in outcomes if fmt is ShowFmt.text else ():
        if o.status == "recorded":
            typer.echo(visible(f"{o.status:9} {o.scenario_id} -> {o.path} ({o.detail})"))
        elif o.scenario_id == str(o.path):  # a file whose ids are unknown: its reason starts with its path
            typer.echo(visible(f"{o.status:9} {o.detail}"), err=True)
        else:
            typer.echo(visible(f"{o.status:9} {o.scenario_id} -> {o.path}: {o.detail}"), err=o.status == "error")
    raise typer.Exit(2 if any(o.status == "error" for o in outcomes) else 0)


def _unimported(failures: list[Any], directory: Path) -> list[Any]:
    """``record``'s outcome for each scenario of a file that failed to import, under each id it declares (the
    file itself if none): an id no cassette can have (`@scenario("../x")`, the very reason it failed) ended
    the whole command naming no file."""
    from . import _pipeline
    from .cassette import cassette_path

    def unimported_at(f: Any, sid: str) -> Any:
        try:
            path = cassette_path(directory, sid) if f.ids else None
        except ReplayUsageError:
            path = None
        if path is None:
            return _pipeline.RecordOutcome(str(f.path), f.path, "error", f"{f.reason}; nothing written")
        return _pipeline.RecordOutcome(sid, path, "error", f"{f.reason}; nothing written")

    return list({o.scenario_id: o for o in (unimported_at(f, sid) for f in failures for sid in (f.ids or (str(f.path),)))}.values())


def _determinism_verdict(
    scenarios: list[Any], runs: int, config: Config, directory: Path, fmt: ShowFmt, unimported: list[Any]
) -> NoReturn:
    """``record --check-determinism N``: record each scenario N times in fresh processes, say which differ, exit."""
    from . import _determinism

    results = _determinism.check(scenarios, runs, config.scenarios, committed=directory, limits=limits(config))
    same = sum(r.identical for r in results)
    errors = sum(r.error for r in results)
    if fmt is ShowFmt.json:
        typer.echo(dumps_json({r.scenario_id: {"identical": r.identical, "recordings": r.runs, "detail": r.detail,
                                               **({"error": True} if r.error else {})}
                               for r in results}))
    else:
        for r in results:
            typer.echo(visible(r.line()))  # the detail quotes what the recordings sent
        typer.echo(f"{len(results)} scenarios, {runs} recordings each: {same} identical, "
                   f"{len(results) - same - errors} differ" + (f", {errors} error" if errors else ""))
        if same + errors != len(results):  # what makes a scenario's own code differ between processes
            typer.echo("a scenario must send the same requests on every run: seed `random`, sort what comes from "
                       "a set (its order changes with each process's hash seed), keep the clock and fresh ids out "
                       "of what the model is sent")
    for o in unimported:
        typer.echo(visible(f"error     {o.detail}" if o.scenario_id == str(o.path) else f"error     {o.scenario_id}: {o.detail}"), err=True)
    raise typer.Exit(2 if unimported or errors else 0 if same == len(results) else 1)


@app.command()
def run(
    targets: Targets = None,
    cassettes: CassettesOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where result cassettes go (default: .replay/results/, [tool.replay] results).")] = None,
    fmt: FormatOpt = Fmt.text,
    on_exhausted: ExhaustedOpt = None,
    ignore: IgnoreOpt = None,
    allow_host: AllowHostOpt = None,
    timeout: TimeoutOpt = None,
    accept: Annotated[
        bool,
        typer.Option(
            "--accept",
            help="Make each changed replay the new baseline: recordings of in-process models are "
            "re-recorded; provider recordings keep the recorded answers, marked where the request changed.",
        ),
    ] = False,
    accept_violations: Annotated[
        bool,
        typer.Option(
            "--accept-violations", help="Accept, as --accept does (implied), also replays that have new invariant violations."
        ),
    ] = False,
    level: Annotated[
        Level,
        typer.Option(
            "--level",
            help="Where provider models are answered: wire (their HTTP requests are built for real and "
            "compared; the default where the cassette has them) or model (at the Model boundary).",
        ),
    ] = Level.wire,
) -> None:
    """Replay scenarios on the installed harness from their cassettes and diff what they send now."""
    from . import _pipeline
    from .reporter import emit
    _check_allow_hosts(allow_host)
    _check_timeout(timeout)
    config = _config()
    _results_apart(out, cassettes, config)
    _output_dir(out or config.results, "--out" if out is not None or "results" not in _configured(config) else "[tool.replay] results")
    _import_checks(config)  # a replay's own violations include the project's checks, as `check` reports them
    _pipeline.prices(), _pipeline.tokenizer()  # a bad one is one line now, not every scenario's error after its replay
    from .replayer import offline

    failures: list[Any] = []
    stdout = sys.stdout  # the report's; a scenario's own prints go to stderr (see _scenario_prints)
    with offline(), _scenario_prints():  # a module-level provider model must import without its key
        scenarios = _discover(targets, config, failures)
    rules = _pipeline.rules_from(config, ignore or ())
    flag = on_exhausted.value if on_exhausted else None  # the flag, else the scenario's own, else [tool.replay]
    _pipeline.clean_results(out or config.results)
    reports: list[Any] = []

    def give_up(stuck: Any, message: str) -> None:
        """The report of what is done, from the watchdog's thread: the main one is stuck in ``stuck``'s replay."""
        from .cassette import cassette_path
        from .reporter import ScenarioReport

        path = cassette_path(cassettes or config.cassettes, stuck.id)
        rest = [sc for sc in scenarios if sc.id not in {r.scenario_id for r in reports} | {stuck.id}]
        ended = [
            ScenarioReport(stuck.id, "error", error=f"{path}: the replay is {message}", cassette=str(path)),
            *(ScenarioReport(sc.id, "error", error=f"not replayed: the run ended at {stuck.id}, which could not be stopped")
              for sc in rest),
        ]
        with contextlib.redirect_stdout(stdout):  # from the watchdog, while the stuck scenario's redirect holds
            emit(sorted([*reports, *ended, *_import_errors(failures, scenarios)], key=lambda r: r.scenario_id),
                 fmt.value, title="harness-replay run")

    for sc in scenarios:
        started = time.perf_counter()
        with _scenario_prints():
            report = _pipeline.isolated(
                sc.id,
                _pipeline.replay_scenario,
                sc,
                cassettes or config.cassettes,
                out or config.results,
                rules=rules,
                on_exhausted=flag or sc.on_exhausted or config.on_exhausted,  # type: ignore[arg-type]
                allow_hosts=[*config.allow_hosts, *(allow_host or [])],
                limits=limits(config),
                level=level.value,
                timeout=config.timeout if timeout is None else timeout,
                give_up=functools.partial(give_up, sc),
            )
        reports.append(_pipeline.located(report, sc, time.perf_counter() - started))
    reports = sorted([*reports, *_import_errors(failures, scenarios)], key=lambda r: r.scenario_id)
    emit(reports, fmt.value, title="harness-replay run")
    if not targets:
        _warn_orphans(cassettes or config.cassettes, {sc.id for sc in scenarios} | {i for f in failures for i in f.ids})
    if accept or accept_violations:
        _pipeline.clean_results(cassettes or config.cassettes)  # an accept killed earlier left its temps there
        outcomes = _pipeline.accept(
            reports, {sc.id: sc for sc in scenarios}, violations=accept_violations, limits=limits(config)
        )
        for o in outcomes:
            typer.echo(visible(o.line()), err=True)
        if any(r.status == "error" for r in reports):
            raise typer.Exit(2)
        raise typer.Exit(0 if all(o.status != "not accepted" for o in outcomes) else 1)
    if fmt is Fmt.text and any(r.status == "changed" for r in reports):  # pytest says it too: --replay-accept
        typer.echo("if a change is intended: `replay run --accept` makes the replay the new baseline "
                   "(or `replay record --force` records it again)", err=True)
    _exit_for(reports)


def _warn_orphans(directory: Path, ids: set[str]) -> None:
    """Cassettes no scenario claims any more (renamed or deleted): said on stderr, not a failure."""
    from .cassette import iter_cassettes
    if not directory.is_dir():
        return
    orphans = [p for p in iter_cassettes(directory) if str(p.relative_to(directory).with_suffix("")) not in ids]
    if orphans:
        typer.echo(f"replay: {len(orphans)} cassette(s) in {directory} belong to no scenario:", err=True)
        for p in orphans:
            typer.echo(f"  {visible(str(p))}", err=True)


@app.command(name="diff")
def diff_cmd(
    a: Annotated[Path, typer.Argument(help="Baseline cassette, or a directory of them (e.g. cassettes/).")],
    b: Annotated[Path, typer.Argument(help="Cassette to compare, or a directory (e.g. .replay/matrix/0.54.0).")],
    fmt: FormatOpt = Fmt.text,
    ignore: IgnoreOpt = None,
) -> None:
    """Compare two cassettes (or two directories of them, paired by path) and summarise what changed."""
    from . import _pipeline
    from .reporter import emit
    config = _config()
    _import_checks(config)
    rules = _pipeline.rules_from(config, ignore or ())
    if a.is_dir() and b.is_dir():
        reports = _pipeline.compare_dirs(a, b, rules, limits(config))
        emit(reports, fmt.value, title="harness-replay diff")
        _exit_for(reports)
    if a.is_dir() or b.is_dir():
        missing = next((p for p in (a, b) if not p.exists()), None)
        if missing is not None:  # `diff cassettes typo`: said "cassettes: compare a directory with a directory"
            raise ReplayUsageError(f"{missing}: no such cassette or directory")
        raise ReplayUsageError(f"{a if a.is_dir() else b}: compare a directory with a directory, a cassette with a cassette")
    started = time.perf_counter()
    report = _pipeline.compare_files(a, b, rules, limits(config))
    report.seconds, report.file = time.perf_counter() - started, report.file or str(b)  # JUnit's time and file
    if fmt is Fmt.json:
        from .reporter import ci_extras, report_json
        from .scrub import redact

        report = redact(report)
        # the scenario named, as text, Markdown and JUnit name it (a directory diff keys its scenarios by id)
        typer.echo(dumps_json({"scenario_id": report.scenario_id, **report_json(report)}, indent=2))
        ci_extras([report], "json", "harness-replay diff")  # annotations and step summary, as every format has
    else:
        emit([report], fmt.value, title="harness-replay diff")
    _exit_for([report])


@app.command()
def check(
    targets: Annotated[list[str] | None, typer.Argument(help="Cassettes, cassette directories, or scenario ids.")] = None,
    cassettes: CassettesOpt = None,
    fmt: FormatOpt = Fmt.text,
    ignore: Annotated[
        list[str] | None,
        typer.Option("--ignore", help="Invariant to leave out, by name or glob (repeatable), e.g. content_lost."),
    ] = None,
) -> None:
    """Check recordings for invariant violations (no second version needed)."""
    from . import _pipeline
    from .reporter import emit
    config = _config()
    _import_checks(config)
    if ignore:  # `--ignore content_lsot` left content_lost on and said nothing of the typo
        from fnmatch import fnmatchcase

        from .invariants import checks

        known = sorted(checks())
        for rule in ignore:
            if not any(fnmatchcase(name, rule) for name in known):
                raise ReplayUsageError(f"--ignore {rule!r}: no such check (known: {', '.join(known)})")
    base = cassettes or config.cassettes
    paths = _cassettes_of(targets or [str(base)], base)
    lim = limits(config)
    reports = []
    for p in paths:
        started = time.perf_counter()
        report = _without(_pipeline.isolated(str(p), _pipeline.check_cassette, p, limits=lim), ignore or ())
        report.seconds, report.file = time.perf_counter() - started, str(p)
        reports.append(report)
    emit(reports, fmt.value, title="harness-replay check", checks_only=True)
    _exit_for(reports)


def _cassettes_of(targets: Sequence[str], base: Path) -> list[Path]:
    """``check``'s TARGETs as cassette files: a cassette, a folder of them, or a recorded scenario id (or id
    prefix) below ``base``. A TARGET that names none is the error, before any check runs."""
    from .cassette import cassette_path, iter_cassettes

    paths: list[Path] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            found = list(iter_cassettes(p))
            if not found:  # `0 cassettes … 0 error`, exit 0: a CI job with the wrong folder checked nothing and passed
                raise ReplayUsageError(f"{t}: no cassettes in this directory")
            paths += found
        elif p.is_file():
            paths.append(p)
        else:
            try:
                candidate: Path | None = cassette_path(base, t)
            except ReplayUsageError:  # not an id at all: reported as not found below
                candidate = None
            if candidate is not None and candidate.exists():
                matches = [candidate]
            else:
                matches = list(iter_cassettes(base / t)) if candidate is not None and (base / t).is_dir() else []
            if not matches:
                raise ReplayUsageError(f"{t}: no such cassette, directory or recorded scenario id")
            paths += matches
    return paths


def _without(report: "ScenarioReport", ignored: Sequence[str]) -> "ScenarioReport":
    """``check --ignore``: drop the violations of the named invariants (fnmatch globs)."""
    from fnmatch import fnmatchcase

    if not ignored or report.status == "error":
        return report
    report.violations = [v for v in report.violations if not any(fnmatchcase(v.invariant, g) for g in ignored)]
    report.status = "changed" if report.violations else "same"
    return report


@app.command()
def show(
    cassette: Annotated[list[Path], typer.Argument(help="Cassette file(s).")],
    fmt: Annotated[ShowFmt, typer.Option("--format", "-f")] = ShowFmt.text,
    normalized: Annotated[bool, typer.Option("--normalized", "--normalised", help="Show the normalised form.")] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Print everything (by default output stops at 1 MiB + 16x the cassette's size).")
    ] = False,
    textconv: Annotated[
        bool,
        typer.Option("--textconv", help="As git's textconv: a cassette (or a [tool.replay]) that cannot be read is shown "
                     "as that error, exit 0 (git aborts the whole diff when a textconv fails)."),
    ] = False,
) -> None:
    """Print cassettes readably (also usable as a git textconv); a bad file is one error line, exit 2."""
    from ._untrusted import json_chunks

    with _own_models():
        from .cassette import loads, read_bounded
        from .show import line_chunks, output_budget, render_json, scrubbed_lazily, text_lines, write_bounded
    from .scrub import redact

    try:
        lim = limits(_config())
    except ReplayError as exc:  # pyproject.toml with a rebase's conflict markers: git's diff must still run
        if not textconv:
            raise
        for _ in cassette:
            typer.echo(f"# harness-replay: cannot show this cassette: {visible(_scrubbed(str(exc)))}")
        return
    failed = False
    # Several cassettes as JSON are one array: one document after another was no JSON at all.
    array = fmt is ShowFmt.json and len(cassette) > 1
    opened = False
    for path in cassette:
        try:
            data = read_bounded(path, lim.max_bytes)
            c = loads(data, path, lim)
        except ReplayError as exc:
            if textconv:  # the diff shows the problem where the cassette's text would be, and goes on
                typer.echo(f"# harness-replay: cannot show this cassette: {visible(_scrubbed(str(exc)))}")
                continue
            typer.echo(f"replay: error: {visible(_scrubbed(str(exc)))}", err=True)
            failed = True
            continue
        budget = None if full else output_budget(len(data))
        out = sys.stdout
        if fmt is ShowFmt.json:
            if array:
                out.write(",\n" if opened else "[\n")
                opened = True
            chunks = json_chunks(scrubbed_lazily(render_json(c, normalized=normalized)), indent=2)
            cut = write_bounded(chunks, out.write, budget)
            if not array:
                out.write("\n")
            if cut is not None:
                typer.echo(f"replay: error: {visible(str(path))}: JSON output truncated after {cut:,} characters (--full for all of it)", err=True)
                failed = True
        else:
            chunks = (redact(chunk) for chunk in line_chunks(text_lines(c, normalized=normalized)))
            cut = write_bounded(chunks, out.write, budget)
            if cut is not None:
                out.write(f"\n… output truncated after {cut:,} characters (the cassette is {len(data):,} bytes); replay show --full prints all of it\n")
    if opened:
        sys.stdout.write("\n]\n")
    if failed:
        raise typer.Exit(2)


@app.command(name="ls")
def ls_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(help="Cassette files or directories (default: cassettes/).")] = None,
    cassettes: CassettesOpt = None,
    fmt: Annotated[ShowFmt, typer.Option("--format", "-f", help="Output format.")] = ShowFmt.text,
) -> None:
    """List cassettes with their scenario, versions and request counts."""
    from .cassette import iter_cassettes, load

    config = _config()
    found: list[Path] = []
    for base in paths or [cassettes or config.cassettes]:
        if base.is_dir():
            found += iter_cassettes(base)
        elif base.is_file():
            found.append(base)
        else:
            raise ReplayUsageError(f"{base}: no such cassette or directory")
    lim = limits(config)
    rows: list[dict[str, Any]] = []
    for path in found:
        try:
            c = load(path, lim)
        except ReplayError as exc:
            rows.append({"path": str(path), "error": str(exc)})
            continue
        h = c.header
        roles = {r: len(xs) for r, xs in sorted(c.by_role().items())}
        rows.append({"path": str(path), "scenario_id": h.scenario_id, "harness": h.harness_version, "roles": roles, "outcome": c.outcome.status})
    from .scrub import redact

    rows = redact(rows)  # a header field or role name holding a key is printed as everywhere else: scrubbed
    if fmt is ShowFmt.json:
        typer.echo(dumps_json(rows))
    for row in rows if fmt is ShowFmt.text else ():
        if "error" in row:
            typer.echo(visible(f"{row['path']}  ERROR {row['error']}"))
            continue
        roles_text = ", ".join(f"{r} {n}" for r, n in row["roles"].items())
        typer.echo(visible(f"{row['path']}  {row['scenario_id']}  harness {row['harness']}  [{roles_text}]  {row['outcome']}"))
    if any("error" in row for row in rows):
        raise typer.Exit(2)


# --------------------------------------------------------------------------- matrix (issue 5)


def _matrix_targets(targets: list[str] | None, config: Config) -> dict[str, str]:
    """Scenario id → what to pass ``replay run`` in each env: the id, or the file outside scenarios/."""
    from .scenario import declared

    _default_target(targets, config)
    home = config.scenarios.resolve()
    _project_on_path(config)
    found = declared(targets or [], default_dir=config.scenarios)
    if not found:
        raise ReplayUsageError(f"{', '.join(targets or [str(config.scenarios)])}: no scenarios found")
    return {sid: sid if path.resolve().is_relative_to(home) else str(path) for sid, path in found.items()}


@app.command()
def matrix(
    harness: Annotated[
        list[str],
        typer.Option(
            "--harness", help="Harness version: a release (0.54.0), a comma list, or a wheel / source checkout path (repeatable)."
        ),
    ],
    targets: Targets = None,
    cassettes: CassettesOpt = None,
    fmt: FormatOpt = Fmt.text,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Parallel installs/replays (default: cores).")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Result cassettes go to OUT/<version>/ (default: .replay/matrix).")
    ] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="Run only slice K of N of the cells (e.g. 2/4).")] = None,
    env_dir: Annotated[
        Path | None,
        typer.Option("--env-dir", envvar="REPLAY_ENV_DIR", help="Environment cache (default: .replay/envs)."),
    ] = None,
    ignore: IgnoreOpt = None,
    on_exhausted: ExhaustedOpt = None,
    allow_host: AllowHostOpt = None,
    timeout: TimeoutOpt = None,
    python: Annotated[
        list[str] | None,
        typer.Option(
            "--python",
            help="Python to replay under (a version such as 3.12, or an interpreter path; repeatable): "
            "each cell is then (python, harness).",
        ),
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write an HTML page: table + token-estimate charts.")
    ] = None,
    with_: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            help="Extra requirement for every env, e.g. '.' (the project your scenarios import) or "
            "'pydantic-ai-slim[openai]' (repeatable; also [tool.replay] matrix-with).",
        ),
    ] = None,
) -> None:
    """Replay the cassettes on several harness versions, each in its own cached environment."""
    from . import matrix as mx
    from .matrix import _envs

    versions = _envs.with_pythons(_envs.parse_versions(harness), python or ())
    shard_k_n = mx.parse_shard(shard)
    _output_file(html, "--html")
    _check_allow_hosts(allow_host)
    _check_timeout(timeout)
    _output_dir(_envs.env_cache_dir(env_dir), "--env-dir")
    if out is not None:
        _output_dir(out, "--out")
    config = _config()
    if out is not None:  # results go to OUT/<version>/: among the recordings they were cassettes of no scenario
        _results_apart(out, cassettes, config)
    ids = _matrix_targets(targets, config)
    # Same options as `run`; [tool.replay] is read by each env's `replay run` from the same project.
    extra = tuple(arg for rule in ignore or () for arg in ("--ignore", rule))
    extra += tuple(arg for host in allow_host or () for arg in ("--allow-host", host))
    if on_exhausted is not None:
        extra += ("--on-exhausted", on_exhausted.value)
    if timeout is not None:
        extra += ("--timeout", f"{timeout:g}")
    opts = mx.RunOptions(
        cassettes=cassettes,
        out=mx.results_dir(out),
        extra_args=extra,
        cwd=Path.cwd(),
        with_=(*config.matrix_with, *(with_ or ())),
    )
    result = mx.run_matrix(ids, versions, opts=opts, jobs=jobs, shard=shard_k_n, env_dir=env_dir)
    mx.emit(result, fmt.value)
    if html is not None:
        from .cassette import write_atomic
        from .reporter.html import fill_from_results, render_html

        write_atomic(html, render_html(fill_from_results(result, limits(config))).encode("utf-8"))  # never a torn page
    raise typer.Exit(mx.exit_code(result))


@app.command()
def merge(
    results: Annotated[list[Path], typer.Argument(help="JSON results of `replay matrix --shard K/N --format json`.")],
    fmt: FormatOpt = Fmt.text,
) -> None:
    """Combine the JSON results of matrix shards into one table and one exit code."""
    from . import matrix as mx

    empty = [p for p in results if p.is_file() and p.stat().st_size == 0]
    for p in empty:  # `replay matrix … > shard-K.json || true` of a shard that failed: its cells are missing
        typer.echo(visible(f"replay: warning: {p}: empty (its shard wrote no results: did the command fail?); "
                           "its cells show as missing"), err=True)
    if empty and len(empty) == len(results):
        raise ReplayUsageError(f"{', '.join(map(str, results))}: every results file is empty")
    docs = mx.load_results([p for p in results if p not in empty])
    merged = mx.merge_results(docs)  # every file checked first: a malformed one is one error line, no warning
    seen: dict[str, str] = {}
    for name, doc in docs:  # a shard given twice (a re-run's file beside the first): only the first's cells count
        shard = doc.get("shard") if isinstance(doc, dict) else None
        if isinstance(shard, str) and shard in seen:
            typer.echo(visible(f"replay: warning: {name}: shard {shard} again (first in {seen[shard]}); "
                               "its cells are not used"), err=True)
        elif isinstance(shard, str):
            seen[shard] = name
    mx.emit(merged, fmt.value)
    raise typer.Exit(mx.exit_code(merged))


# --------------------------------------------------------------------------- git & html (issue 6)


def _output_file(path: Path | None, option: str) -> None:
    """Before any work: ``path`` can become the file ``option`` writes. A directory there, or a file where
    a folder of its path belongs, was found only after every environment and trial had run."""
    if path is None:
        return
    if path.is_dir():
        raise ReplayUsageError(f"{path}: is a directory; {option} takes the file to write")
    _below_a_folder(path, "cannot write")


def _configured(config: Config) -> set[str]:
    """The [tool.replay] keys the project's pyproject.toml sets (folder settings have defaults in Config too)."""
    import tomllib

    try:
        table = tomllib.loads(config.source.read_text(encoding="utf-8")).get("tool", {}).get("replay", {}) if config.source else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return set()
    return set(table) if isinstance(table, dict) else set()


def _results_apart(out: Path | None, cassettes: Path | None, config: Config) -> None:
    """Before any work: replay results go beside the recordings, never among them. `run --out cassettes`
    (or `[tool.replay] results` naming that folder) wrote each result over its baseline, a silent accept."""
    results, base = out or config.results, cassettes or config.cassettes
    if out is not None:
        named = "--out"
    elif config.source is not None and "results" in _configured(config):
        named = f"{config.source}: [tool.replay] results"
    else:  # `run --cassettes .replay/results`: the default results folder, set nowhere
        named = "the results folder"
    if results.resolve() == base.resolve():
        raise ReplayUsageError(f"{named} {results}: the cassettes folder; replay results would be written over the "
                               "recordings, give another folder" + (" with --out" if named == "the results folder" else ""))
    if base.resolve() in results.resolve().parents:
        raise ReplayUsageError(f"{named} {results}: inside the cassettes folder {base}; replay results would be "
                               "written among the recordings, give another folder" + (" with --out" if named == "the results folder" else ""))


def _check_allow_hosts(hosts: Sequence[str] | None) -> None:
    from .config import allow_host_problem

    for host in hosts or ():
        problem = allow_host_problem(host)
        if problem is not None:
            raise ReplayUsageError(f"--allow-host {host!r}: {problem}")


def _output_dir(path: Path, option: str) -> None:
    """Before any work: ``path`` is, or can be made, the folder ``option`` names. A file there was a
    FileExistsError traceback from the environment cache's lock (``--env-dir pyproject.toml``)."""
    if path.exists() and not path.is_dir():
        raise ReplayUsageError(f"{path}: not a directory; {option} takes a folder")
    _below_a_folder(path, "cannot be created")


def _below_a_folder(path: Path, what: str) -> None:
    """The nearest existing parent of ``path`` is a folder (not a file, such as ``/dev/null``)."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ReplayUsageError(f"{path}: {what}: {parent} is not a directory")
            break


def _check_timeout(timeout: float | None) -> None:
    """`--timeout 1e10` (or `inf`) was an `internal error … OverflowError` on every scenario's replay."""
    from .config import MAX_TIMEOUT

    if timeout is not None and not 0 <= timeout < MAX_TIMEOUT:
        raise ReplayUsageError(f"--timeout {timeout:g}: give fewer than {MAX_TIMEOUT:,} seconds (0 for no bound)")


@contextmanager
def _scenario_prints() -> Iterator[None]:
    """What a scenario (or its agents, tools, imports) prints goes to stderr: on stdout it came before the
    report, and `run --format json` / `junit` (each matrix cell's JSON too) was no longer parseable.

    Escaped, line by line: on replay a scenario that prints its agent's answer prints the cassette's text,
    which a pull request may have edited alone (a terminal escape, a line GitHub reads as a workflow command).
    """
    shown = _EscapedLines(sys.stderr)
    try:
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
            yield
    finally:
        shown.flush()


class _EscapedLines(io.TextIOBase):
    """A text stream that writes each whole line to ``target`` through ``visible`` (a line is judged whole:
    ``print(':', end='')`` then ``print(':warning::x')`` starts one workflow command)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.pending = ""

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.target, "encoding", None) or "utf-8")

    def write(self, text: str) -> int:
        self.pending += text
        if "\n" in self.pending:
            done, _, self.pending = self.pending.rpartition("\n")
            self.target.write(visible(done, multiline=True) + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.target.write(visible(self.pending, multiline=True))
            self.pending = ""
        self.target.flush()


def _shown(path: Path) -> str:
    """``path`` as the user would type it from here: relative to the working directory when below or beside it."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


@app.command()
def init(
    git_config: Annotated[
        bool, typer.Option("--git-config", help="Also run the git config command (this clone only).")
    ] = False,
    textconv: Annotated[
        str | None, typer.Option("--textconv", help="Command git runs on a cassette (default: replay show --normalized --textconv).")
    ] = None,
) -> None:
    """Set up a project: `git diff` shows cassettes as text (.gitattributes + textconv), .replay/ is git-ignored."""
    from . import _git
    from .config import find_pyproject

    # The project's folder, as for every other command: from `tests/`, a `tests/.gitattributes` covered
    # no cassette under `../cassettes` and a `tests/.gitignore` left `../.replay/` to be committed.
    pyproject = find_pyproject()
    here = pyproject.parent if pyproject is not None else Path.cwd()
    if textconv is not None and (not textconv.strip() or any(ord(ch) < 32 or ord(ch) == 127 for ch in textconv)):
        # "" fell back to the default unsaid; a newline was set in git config, where the shell runs two commands
        raise ReplayUsageError(f"--textconv {textconv!r}: give one command line")
    command = textconv or _git.default_textconv()
    if git_config:
        _git.check_repository(here, command)
    _git.check_files(here)
    changed = _git.ensure_gitattributes(here)
    typer.echo(visible(f"{'added to' if changed else 'already in'} {_shown(here / '.gitattributes')}: {_git.ATTRIBUTE_LINE}"))
    changed = _git.ensure_gitignore(here)
    typer.echo(visible(f"{'added to' if changed else 'already in'} {_shown(here / '.gitignore')}: {_git.IGNORE_LINE}"))
    if git_config:
        _git.set_git_config(here, command)
        typer.echo(f"set git config {_git.CONFIG_KEY} = {command}")
    else:
        typer.echo("run once per clone (or use `replay init --git-config`):")
        typer.echo(f"  {_git.config_command(command)}")


@app.command()
def html(
    results: Annotated[
        list[Path], typer.Argument(help="JSON of `replay matrix`/`merge`/`run --format json` (several: merged shards).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Write the standalone HTML page (table + charts) here.")],
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "harness-replay matrix",
) -> None:
    """Render saved matrix results as an HTML page: the table and a token-estimate chart per scenario."""
    from . import matrix as mx
    from .reporter.html import fill_from_results, render_html

    _output_file(out, "--out")
    if out.exists() and any(out.resolve() == r.resolve() for r in results if r.exists()):
        raise ReplayUsageError(f"{out}: --out names one of the results files read; the page would replace it")
    docs = mx.load_results(results)
    if len(docs) > 1:
        for name, d in docs:  # each file alone is a page; together they are shards to merge
            if isinstance(d, dict) and "matrix" not in d and isinstance(d.get("scenarios"), dict):
                raise ReplayUsageError(f"{name}: the JSON of `replay run` is one page on its own, not a matrix "
                                       "shard to merge with others: give it alone")
    doc = mx.merge_results(docs) if len(docs) > 1 else docs[0][1]
    if not isinstance(doc, dict) or not isinstance(doc.get("scenarios"), dict):  # `{}`, a `replay report`: no page
        raise ReplayUsageError(f"{results[0]}: not the JSON of `replay matrix`, `merge` or `run --format json`")
    page = render_html(fill_from_results(doc, limits(_config())), title=title)
    from .cassette import write_atomic

    write_atomic(out, page.encode("utf-8"))
    n = len(doc.get("scenarios") or {})
    typer.echo(f"wrote {out} ({n} scenarios)")


class ReportFmt(str, Enum):
    markdown = "markdown"
    json = "json"


@app.command()
def report(
    target: Annotated[str, typer.Argument(help="One scenario id (or a file holding one scenario); the other scenarios of its file are its controls.")],
    harness: Annotated[
        list[str], typer.Option("--harness", help="Harness version to reproduce on: a release, a comma list, or a wheel / checkout path (repeatable).")
    ],
    trials: Annotated[int, typer.Option("--trials", help="Fresh-process replays per version; the report says whether they are byte-identical.")] = 3,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the report here (default: stdout).")] = None,
    fmt: Annotated[ReportFmt, typer.Option("--format", "-f", help="markdown (for an issue) or json.")] = ReportFmt.markdown,
    cassettes: CassettesOpt = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Parallel installs/replays (default: cores).")] = None,
    env_dir: Annotated[
        Path | None,
        typer.Option("--env-dir", envvar="REPLAY_ENV_DIR", help="Environment cache (default: .replay/envs)."),
    ] = None,
    with_: Annotated[
        list[str] | None, typer.Option("--with", help="Extra requirement for every env, as for `replay matrix` (repeatable).")
    ] = None,
    python: Annotated[
        list[str] | None,
        typer.Option("--python", help="Python to replay under, as for `replay matrix` (repeatable): one column per (python, harness)."),
    ] = None,
    timeout: TimeoutOpt = None,
) -> None:
    """A reproduction report for one scenario on several harness versions, ready to paste into an issue."""
    from . import reproduction as rp
    from .matrix import _envs

    versions = _envs.with_pythons(_envs.parse_versions(harness), python or ())
    _output_file(out, "--out")
    _output_dir(_envs.env_cache_dir(env_dir), "--env-dir")
    _check_timeout(timeout)
    config = _config()
    _project_on_path(config)
    subject = rp.locate(target, config.scenarios)
    request = rp.Request(
        subject=subject,
        targets=_matrix_targets([subject.id, *subject.controls], config),
        versions=versions,
        trials=trials,
        cassettes=cassettes or config.cassettes,
        cwd=Path.cwd(),
        with_=(*config.matrix_with, *(with_ or ())),
        jobs=jobs,
        env_dir=env_dir,
        pythons=tuple(python or ()),
        limits=limits(config),
        extra_args=() if timeout is None else ("--timeout", f"{timeout:g}"),
    )
    data = rp.build(request)
    text = rp.emit(data, fmt.value, out)
    if out is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"wrote {out} ({subject.id}, {len(subject.controls)} controls, {len(versions)} versions x {trials} trials)", err=True)
    raise typer.Exit(rp.exit_code(data))


def _scrubbed(text: str) -> str:
    """An error can quote a cassette or a scenario's exception: it passes the output scrubber too."""
    from .scrub import Scrubber, ScrubConfig

    try:
        return Scrubber(ScrubConfig()).scrub_text(text)
    except ReplayError:
        return text


def main(argv: list[str] | None = None, command: Any = None) -> None:
    """Entry point: user-facing errors become one line and exit code 2.

    ``command`` is :func:`build_command`'s result, built once by a caller that runs many
    commands in one process (each subcommand is then built once, not per call).
    """
    try:
        _main(argv, command)
    except SystemExit as exc:
        from ._deadline import exit_unless_stuck

        exit_unless_stuck(0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1)
        raise


def _observed() -> bool:
    """A profiler or tracer is attached: cProfile and coverage write their results at the normal exit.
    On Python 3.12+ cProfile (and coverage's ``sysmon`` core) attach through ``sys.monitoring``, which
    ``sys.getprofile()`` does not show."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(tool) is not None for tool in range(6))


def script() -> NoReturn:
    """The ``replay`` console script: :func:`main` in a process of its own, ended without tearing down its heap.

    Python's own exit frees every object one by one and collects them all once more: 0.25 s of
    the 6 s a 10,000-request ``replay diff`` took, for a heap the operating system drops at once.
    Exit handlers still run and the standard streams are flushed first; with another thread still
    running (which a normal exit waits for), a profiler or tracer attached, or a stream that cannot
    be flushed, the normal exit.
    """
    import atexit
    import threading

    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):  # sys.exit("text"): printed, exit status 1
        raise SystemExit(code)
    if threading.active_count() > 1 or _observed():
        raise SystemExit(code)  # cProfile and coverage write their results at the normal exit
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the normal exit reports it as it always did
        raise SystemExit(code) from None
    os._exit(code or 0)


_PATH_OPTIONS = frozenset({"--cassettes", "--out", "-o", "--env-dir", "--html"})


def _no_empty_paths(args: Sequence[str]) -> None:
    """An empty folder or file name (`--cassettes "$DIR"` with DIR unset) was the working directory: `record`
    wrote cassettes beside pyproject.toml, `run --out ""` its results over the project's files."""
    previous = ""
    for arg in args:
        option, eq, value = arg.partition("=")
        if eq and option in _PATH_OPTIONS and not value:
            raise ReplayUsageError(f"{option} '': an empty path (an unset variable?)")
        if arg == "" and (previous in _PATH_OPTIONS or not previous.startswith("-")):
            if previous in _PATH_OPTIONS:
                raise ReplayUsageError(f"{previous} '': an empty path (an unset variable?)")
            raise ReplayUsageError("'': an empty argument where a file, folder or scenario id belongs (an unset variable?)")
        previous = arg


def _main(argv: list[str] | None, command: Any) -> None:
    try:
        _no_empty_paths(sys.argv[1:] if argv is None else argv)
        with _plugin_loader_on_demand():
            code = (command if command is not None else build_command()).main(args=argv, prog_name="replay", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except ReplayError as exc:
        typer.echo(f"replay: error: {visible(_scrubbed(str(exc)))}", err=True)
        sys.exit(2)
    except (typer.BadParameter, typer.Abort) as exc:  # a value typer refused: say which option, as click does
        format_message = getattr(exc, "format_message", None)
        text = format_message() if callable(format_message) else str(exc)
        text = text.replace(": Value error, ", ": ")  # typer 0.29 validates with pydantic, which prefixes its own kind
        typer.echo(f"replay: error: {visible(text)}", err=True)
        sys.exit(2)
    except Exception as exc:  # click's usage errors (typer vendors click, so match by shape)
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            format_message = getattr(exc, "format_message", None)
            if type(exc).__name__ == "NoArgsIsHelpError" or not callable(format_message):
                show()  # `replay` alone: the help is the answer
                sys.exit(2)
            # One line, as every other bad input: click's own form was three (usage, hint, error) for an
            # unknown option or command or an extra argument, one unprefixed line for a missing value.
            ctx = getattr(exc, "ctx", None)
            hint = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
            typer.echo(f"replay: error: {visible(format_message())}{hint}", err=True)
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()

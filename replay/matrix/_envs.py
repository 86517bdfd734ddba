"""Isolated, cached environments, one per harness version, for ``replay matrix``.

Each environment holds this tool (installed from its own source) and one harness
version with the slim that harness pins, so versions never share site-packages.
They live under ``.replay/envs/<label>-<key>``: the key hashes the version spec, the
Python version and this tool's source, so editing the tool or switching Python builds
a fresh one while a plain re-run reuses it. A stamp file written last marks an env as
complete; a directory without it (an install killed half-way) is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

from ..errors import ReplayUsageError

HARNESS = "pydantic-ai-harness"
SLIM = "pydantic-ai-slim"
STAMP = ".replay-env.json"
LAYOUT = 2
"""Bumped when the env layout or stamp format changes, so old caches are not trusted."""

SpecKind = Literal["release", "wheel", "source"]
EnvStatus = Literal["created", "reused", "error", "skipped"]

_RELEASE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox", ".replay"}


@dataclass(frozen=True)
class VersionSpec:
    """One column of the matrix: what the user typed and what gets installed for it."""

    spec: str
    kind: SpecKind
    requirement: str
    label: str
    """Directory-safe name used for the env and the result cassettes (``.replay/matrix/<label>``)."""
    python: str | None = None
    """``--python`` as given (a version or an interpreter path); None: the Python running the matrix."""


def parse_versions(values: Iterable[str]) -> list[VersionSpec]:
    """Expand ``--harness`` values (releases, comma lists, wheel or checkout paths), keeping order.

    Ranges like ``0.60.0..0.62.0`` are refused: expanding them needs the registry's list of
    releases, and a silently-guessed list is worse than asking for an explicit one.
    """
    out: list[VersionSpec] = []
    seen: set[str] = set()
    for value in values:
        for raw in value.split(","):
            item = _padded(raw.strip())
            if not item or item in seen:
                continue
            seen.add(item)
            out.append(_parse_one(item))
    if not out:
        raise ReplayUsageError("--harness: give at least one version")
    labels = [v.label for v in out]
    dupes = {x for x in labels if labels.count(x) > 1}
    if dupes:
        raise ReplayUsageError(f"--harness: two specs map to the same name {min(dupes)!r}")
    return out


def _padded(item: str) -> str:
    """One spelling per release: ``0.54``, ``v0.54.0``, ``0.54.0.0`` and ``==0.54.0`` are ``0.54.0``
    (pip installs the same release for each): one env and one column, not two (or a refusal)."""
    if Path(item).exists():
        return item
    bare = item[2:].strip() if item.startswith("==") and not item.startswith("===") else item
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)(.*)", bare)
    if m is None or not _RELEASE.match(m.group(1) + m.group(2)):
        return item
    parts = m.group(1).split(".")
    while len(parts) > 3 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts + ["0"] * (3 - len(parts))) + m.group(2)


def with_pythons(versions: Sequence[VersionSpec], pythons: Iterable[str]) -> list[VersionSpec]:
    """One column per (python, harness) when ``--python`` is given; keys and labels name both.

    Ordered by Python first, so a shard or a reader walks one interpreter's columns together.
    """
    pythons = list(pythons)
    if any(not p.strip() for p in pythons):  # was dropped unsaid: the matrix ran on the default Python only
        raise ReplayUsageError("--python '': give a version (e.g. 3.12) or an interpreter path")
    chosen = list(dict.fromkeys(p.strip() for p in pythons))
    if not chosen:
        return list(versions)
    out = []
    tags = _python_tags(chosen)
    for py in chosen:
        tag = tags[py]
        out += [replace(v, spec=f"{v.spec}@{tag}", label=f"{v.label}-{tag}", python=py) for v in versions]
    return out


def _python_tags(chosen: Sequence[str]) -> dict[str, str]:
    """Each ``--python``'s name in a column and a folder: a version as given (``py3.12``), an interpreter path by
    its file name, or by as many of its last path components as tell it from the others. By its file name alone,
    ``~/.pyenv/versions/3.12.1/bin/python`` and ``…/3.13.0/bin/python`` were both ``pypython``: one env, one results
    folder and one column's figures for two interpreters (both columns read ``replayed on Python 3.12.1``)."""
    parts = {py: Path(py).parts if os.sep in py else (py,) for py in chosen}
    for k in range(1, max((len(p) for p in parts.values()), default=1) + 1):
        tags = {py: "py" + _safe("_".join(p[-k:]))[-78:] for py, p in parts.items()}
        if len(set(tags.values())) == len(tags):
            return tags
    raise ReplayUsageError(f"--python: two interpreters map to the same name {sorted(tags.values())[0]!r}")


_SPECIFIER = re.compile(r"^\s*(~=|===?|!=|<=?|>=?)|\*")


def _parse_one(item: str) -> VersionSpec:
    if ".." in item and not ("/" in item or item.startswith(".")):
        raise ReplayUsageError(
            f"--harness {item}: ranges are not supported; list versions with commas (e.g. 0.60.0,0.61.0)"
        )
    if _SPECIFIER.search(item) and not Path(item).exists():  # `~=0.60.0` was a traceback (read as `~user`)
        raise ReplayUsageError(
            f"--harness {item}: version specifiers are not supported (expanding them needs the registry's "
            "release list); list releases with commas (e.g. 0.60.0,0.61.0)"
        )
    version = item.removeprefix("v") if _RELEASE.match(item.removeprefix("v")) else None
    if version is not None and not Path(item).exists():
        return VersionSpec(item, "release", f"{HARNESS}=={version}", version)
    try:
        path = Path(item).expanduser()
    except RuntimeError:  # `~someone/…` of no such user
        raise ReplayUsageError(f"--harness {item}: no such file or directory") from None
    if path.is_file() and path.suffix == ".whl":
        return VersionSpec(item, "wheel", str(path.resolve()), _safe(path.name.removesuffix(".whl")))
    if path.is_dir() and ((path / "pyproject.toml").is_file() or (path / "setup.py").is_file()):
        return VersionSpec(item, "source", str(path.resolve()), _safe(f"src-{path.resolve().name}"))
    if path.exists():
        raise ReplayUsageError(f"--harness {item}: not a wheel (.whl) or a source checkout with pyproject.toml")
    if "/" in item or item.endswith(".whl"):
        raise ReplayUsageError(f"--harness {item}: no such file or directory")
    raise ReplayUsageError(f"--harness {item}: not a release number (e.g. 0.62.0), a wheel or a source checkout")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", name)[:80]


# --------------------------------------------------------------------------- cache keys


def _hash_files(h: Any, root: Path, files: Iterable[Path]) -> None:
    for f in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())


def tool_root() -> Path:
    """This tool's source checkout (where its pyproject.toml is): the folder holding the ``replay`` package."""
    import replay

    return Path(replay.__file__).resolve().parent.parent


def tool_source_hash(root: Path | None = None) -> str:
    """Hash of ``replay/**/*.py`` and ``pyproject.toml``: what ends up installed in each env."""
    root = root or tool_root()
    h = hashlib.sha256()
    files = [p for p in (root / "replay").rglob("*.py") if "__pycache__" not in p.parts]
    if (root / "pyproject.toml").is_file():
        files.append(root / "pyproject.toml")
    _hash_files(h, root, files)
    return h.hexdigest()


def _source_tree_files(root: Path) -> Iterator[Path]:
    """The source files of a project folder whose bytes key its env: regular files only (a dangling link
    was a FileNotFoundError traceback, a FIFO named ``x.py`` hung the matrix)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith((".py", ".toml", ".cfg", ".pyi", ".typed")) and path.is_file():
                yield path


def extras_fingerprint(extras: Sequence[str]) -> str:
    """Part of the env key for ``--with`` requirements; a local path counts by its content."""
    if not extras:
        return ""
    h = hashlib.blake2b(digest_size=8)
    for item in extras:
        h.update(item.encode() + b"\0")
        path = Path(item)
        if path.is_dir():
            _hash_files(h, path, _source_tree_files(path))
        elif path.is_file():
            h.update(path.read_bytes())
    return "+" + h.hexdigest()


def spec_fingerprint(spec: VersionSpec) -> str:
    """What identifies the installed harness: the version, or the bytes of a local wheel or checkout."""
    if spec.kind == "release":
        return spec.requirement
    h = hashlib.sha256()
    path = Path(spec.requirement)
    if spec.kind == "wheel":
        h.update(path.read_bytes())
    else:
        _hash_files(h, path, _source_tree_files(path))
    return f"{spec.kind}:{h.hexdigest()}"


def python_tag() -> str:
    impl = sys.implementation.name
    return f"{impl}-{'.'.join(map(str, sys.version_info[:3]))}"


def env_key(spec: VersionSpec, tool_hash: str, python: str | None = None, pins: Sequence[str] = ()) -> str:
    """Stable key for one env: same spec, Python, tool source and caller's pins give the same key.

    The pins are part of it so that upgrading a dependency where the matrix runs builds envs
    holding the new version instead of replaying on the old one (a stale env is a false verdict).
    """
    payload = json.dumps(
        {"layout": LAYOUT, "harness": spec_fingerprint(spec), "python": python or python_tag(), "tool": tool_hash}
        | ({"pins": hashlib.sha256("\n".join(pins).encode()).hexdigest()} if pins else {}),
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


_OWN_FAMILY = re.compile(r"pydantic-ai(-.+)?|pydantic-graph|pydantic-evals|fasta2a|harness-replay")
"""What each column installs at its own version: the harness pins its slim (and slim its graph and
evals) exactly, so pinning the caller's would refuse every other harness release."""


def caller_pins(extras: Sequence[str] = ()) -> list[str]:
    """``name==version`` of every distribution where the matrix runs, as constraints for each env.

    A column should differ from the recording machine by the harness alone: left to resolve
    afresh, an env takes the newest pydantic, httpx or provider SDK its index offers, and a
    dependency's release reads as the harness having changed. Left out: the harness's own
    family (pinned per column), what ``--with`` names (the user asked for it), and anything
    not installed from an index (an editable checkout, a local wheel: no version to ask for).
    """
    import importlib.metadata as md

    asked = {_canonical(m.group(0)) for e in extras if not Path(e).exists() and (m := re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", e.strip()))}
    pins: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if not name or not dist.version:
            continue
        key = _canonical(name)
        if _OWN_FAMILY.fullmatch(key) or key in asked or dist.read_text("direct_url.json") is not None:
            continue
        pins.setdefault(key, f"{key}=={dist.version}")
    return sorted(pins.values())


def env_cache_dir(option: Path | None = None) -> Path:
    """``--env-dir``, else ``$REPLAY_ENV_DIR``, else ``.replay/envs`` in the project: beside the nearest
    ``pyproject.toml`` (from a subdirectory, every folder built and kept its own envs), else here."""
    if option is not None:
        return option
    if os.environ.get("REPLAY_ENV_DIR"):
        return Path(os.environ["REPLAY_ENV_DIR"])
    from ..config import _relative, find_pyproject

    project = find_pyproject()
    return _relative(project.parent / ".replay" / "envs") if project is not None else Path(".replay/envs")


# --------------------------------------------------------------------------- installers


@dataclass(frozen=True)
class Installer:
    """How envs are made: ``uv`` (about a second each) or the slower ``venv`` + pip fallback."""

    name: Literal["uv", "pip"]
    uv: tuple[str, ...] = ()


def find_installer() -> Installer:
    """uv from PATH, else ``python -m uv``, else venv + pip."""
    exe = shutil.which("uv")
    if exe:
        return Installer("uv", (exe,))
    if importlib.util.find_spec("uv") is not None:
        return Installer("uv", (sys.executable, "-m", "uv"))
    return Installer("pip")


def fallback_notice(installer: Installer) -> str | None:
    if installer.name == "pip":
        return (
            "replay: uv not found; building environments with python -m venv + pip (slower; pip install uv to speed up)"
        )
    return None


@dataclass
class EnvInfo:
    """One env as the matrix reports it (also the stamp's content)."""

    spec: str
    label: str
    kind: SpecKind
    key: str
    path: str
    status: EnvStatus
    error: str | None = None
    installer: str = ""
    harness: str | None = None
    slim: str | None = None
    python: str | None = None
    freeze: list[str] = field(default_factory=list)
    setup_seconds: float = 0.0
    interpreter: str = ""
    """The base interpreter the env was made from (``--python`` resolved), empty for the caller's own."""
    pinned: int = 0
    """How many of the caller's dependency versions the env was held to (see :func:`caller_pins`)."""
    unpinned: str | None = None
    """The installer's refusals of the pins: those they name resolve afresh (all of them when
    ``pinned`` is 0)."""

    @property
    def reused(self) -> bool:
        return self.status == "reused"

    @property
    def python_exe(self) -> Path:
        return env_python(Path(self.path))

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["reused"] = self.reused
        return out


def env_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


PYCACHE = ".pycache"
"""Where an env's processes keep their bytecode (``PYTHONPYCACHEPREFIX``), inside the env."""


def cell_environ(python: Path) -> dict[str, str]:
    """The environment of a process run with an env's ``python`` (a matrix cell, a version's check).

    Its bytecode goes to the env's own :data:`PYCACHE`, whatever the user's
    ``PYTHONDONTWRITEBYTECODE`` says: the first process compiles the modules it imports (≈ 1.3 s
    of CPU; the standard library's, and the running environment's of the same files, are linked there
    when the env is built, see :func:`_seed_stdlib_bytecode` and :func:`_seed_site_bytecode`) and every
    later one reads them, nothing is written
    outside the env, and nothing is compiled that no replay imports. Compiling every module of
    every dependency at install time (``uv pip install --compile-bytecode``) cost ≈ 6 s of CPU
    per env; without either, every process under ``PYTHONDONTWRITEBYTECODE`` (common in CI
    images) compiled again. Scenario files are never read from bytecode (``replay.scenario``).
    """
    env = dict(os.environ, NO_COLOR="1", PYTHONPYCACHEPREFIX=str(python.parent.parent / PYCACHE))
    # One set order in every cell: a scenario that iterates a set (a tool joining tags) would otherwise
    # read as changed on one version and same on the next by the luck of each process's hash seed.
    env.setdefault("PYTHONHASHSEED", "0")
    for var in ("GITHUB_STEP_SUMMARY", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
        env.pop(var, None)
    return env


def one_line(text: str, limit: int = 240) -> str:
    """The most telling line of an installer's or command's stderr, for a table cell.

    uv explains a failed resolution in a ``Because ...`` line and other failures in a chain
    of ``cause:`` lines (the last is the root); pip's last ``ERROR:`` line names the
    requirement; otherwise the first two meaningful lines.
    """
    lines: list[str] = []
    errors: list[str] = []
    causes: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"^[\s×╰─▶│]+", "", raw).strip()
        if not line or line.startswith(_NOISE):
            continue
        bare = re.sub(r"^(error|cause|ERROR|Caused by):\s*", "", line)
        if bare:
            lines.append(bare)
            if line.startswith("ERROR:"):
                errors.append(bare)
            elif line.startswith(("cause:", "Caused by:")):
                causes.append(bare)
    if not lines:
        return "failed (no message)"
    because = next((ln for ln in lines if ln.startswith("Because ")), None)
    if because:
        text = because
    elif errors:
        text = errors[-1]
    elif causes:
        text = f"{lines[0]}: {causes[-1]}" if lines[0] != causes[-1] else lines[0]
    else:
        text = ": ".join(lines[:2])
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NOISE = (
    "Using Python",
    "hint:",
    "help:",
    "Resolved ",
    "Prepared ",
    "Installed ",
    "WARNING",
    "DEPRECATION",
    "[notice]",
)


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", UV_NO_PROGRESS="1", PIP_NO_INPUT="1")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False
    )


def _tool_requirement(root: Path, cache: Path) -> str:
    """Install this tool from source when run from a checkout, else a wheel of the very files running.

    Not ``harness-replay==<version>`` from the index: the running build may not be there
    (a private wheel, a pre-release), and it should be this one in any case.
    """
    if (root / "pyproject.toml").is_file():
        return str(root)
    from ._selfwheel import self_wheel

    return str(self_wheel(cache / "_self"))


class _InstallError(Exception):
    pass


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        raise _InstallError(f"{what}: {one_line(proc.stderr or proc.stdout)}")


_PROBE = (
    "import importlib.metadata as m, json, platform\n"
    "def v(n):\n"
    "    try: return m.version(n)\n"
    "    except m.PackageNotFoundError: return None\n"
    "import sys, sysconfig\n"
    f"print(json.dumps({{'harness': v({HARNESS!r}), 'slim': v({SLIM!r}), 'python': platform.python_version(),\n"
    "                  'stdlib': sysconfig.get_paths()['stdlib'], 'purelib': sysconfig.get_paths()['purelib'],\n"
    "                  'cache_tag': sys.implementation.cache_tag}))\n"
)

_STDLIB_SKIP = frozenset({"site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3"})


def _link(source: str, target: Path) -> int:
    """1 when ``source`` is now linked at ``target``, 0 when a file is there already; OSError where no link can be made."""
    try:
        os.link(source, target)
    except FileExistsError:
        return 0
    return 1


def _seed_stdlib_bytecode(env: Path, stdlib: str, cache_tag: str | None) -> int:
    """Hard-link the base interpreter's compiled standard library into the env's :data:`PYCACHE`.

    A cell's ``PYTHONPYCACHEPREFIX`` hides the ``__pycache__`` the interpreter was installed with, so
    an env's first process compiled every standard-library module it imported again (≈ 0.5 s of CPU
    per env). Those files are the same for every env of one interpreter: each is linked to where the
    prefix looks for it. Python still checks each against its source (a stale one is compiled again
    and replaced, never written through the link). Nothing is linked where links cannot be made
    (another file system): the first process compiles them, as before. Returns how many were linked.
    """
    if not cache_tag or not stdlib or not os.path.isabs(stdlib):
        return 0
    suffix = f".{cache_tag}.pyc"
    prefix = env / PYCACHE
    linked = 0
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = [d for d in dirnames if d not in _STDLIB_SKIP]
        if os.path.basename(dirpath) != "__pycache__":
            continue
        names = [f for f in filenames if f.endswith(suffix) and f.count(".") == 2]  # not .opt-1/.opt-2
        if not names:
            continue
        target = prefix / os.path.dirname(dirpath).lstrip(os.sep)
        try:
            target.mkdir(parents=True, exist_ok=True)
            for name in names:
                linked += _link(os.path.join(dirpath, name), target / name)
        except OSError:
            return linked  # no links here (another file system, read-only): compiled on first use instead
    return linked


def _seed_site_bytecode(env: Path, site: str, ours: str, cache_tag: str | None) -> int:
    """Hard-link this process's compiled modules into the env's :data:`PYCACHE` where the env holds the same source.

    uv installs a dependency at the version running here from one cache (on one file system, the very
    file), yet the env's first process compiled every such module again (≈ 1 s of CPU per env: pydantic,
    pydantic-ai, the harness at this version). A ``.pyc`` of ``ours`` (this interpreter's site-packages) is
    linked only where Python would take it for the env's source: its header names that file's mtime and
    size, or a hash Python checks itself (never an unchecked hash). Anything else is compiled on first
    use, as before; a link is replaced when compiled again, never written through. Returns how many.
    """
    if not cache_tag or cache_tag != sys.implementation.cache_tag or not site or not ours:
        return 0
    if not (os.path.isabs(site) and os.path.isdir(ours)) or os.path.realpath(site) == os.path.realpath(ours):
        return 0
    magic = importlib.util.MAGIC_NUMBER
    prefix = env / PYCACHE
    linked = 0
    for dirpath, dirnames, filenames in os.walk(site):
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.endswith(".dist-info")]
        rel = os.path.relpath(dirpath, site)
        target = prefix / os.path.splitdrive(dirpath)[1].lstrip(os.sep + (os.altsep or ""))  # as cache_from_source maps it
        for name in filenames:
            if not name.endswith(".py"):
                continue
            theirs = os.path.join(dirpath, name)
            mine = os.path.normpath(os.path.join(ours, rel, name))
            try:
                st = os.stat(theirs)
                with open(importlib.util.cache_from_source(mine), "rb") as f:
                    header = f.read(16)
            except OSError:
                continue
            if len(header) < 16 or header[:4] != magic:
                continue
            flags = int.from_bytes(header[4:8], "little")
            stamped = flags == 0 and header[8:16] == (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (
                st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
            if not (stamped or flags == 0b11):  # 0b11: a hash Python checks against the source before use
                continue
            try:
                target.mkdir(parents=True, exist_ok=True)
                linked += _link(importlib.util.cache_from_source(mine), target / f"{name[:-3]}.{cache_tag}.pyc")
            except OSError:
                return linked  # no links here (another file system, read-only): compiled on first use instead
    return linked


def _build(
    info: EnvInfo, spec: VersionSpec, installer: Installer, root: Path, extras: Sequence[str] = (), pins: Sequence[str] = ()
) -> None:
    path = Path(info.path)
    py = env_python(path)
    reqs = [_tool_requirement(root, path.parent), spec.requirement, *extras]
    if installer.name == "uv":
        base = info.interpreter or sys.executable
        _check(_run([*installer.uv, "venv", "-q", "--python", base, str(path)]), "uv venv")
        # No bytecode compiled here: the env's processes compile what they import (see cell_environ).
        install = [*installer.uv, "pip", "install", "-q", "--python", str(py)]
        freeze_cmd = [*installer.uv, "pip", "freeze", "--python", str(py)]
    else:
        _check(_run([info.interpreter or sys.executable, "-m", "venv", str(path)]), "venv")
        install = [str(py), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
        freeze_cmd = [str(py), "-m", "pip", "freeze", "--disable-pip-version-check"]
    held, refused = list(pins), list[str]()
    while held and len(refused) < 3:
        constraints = path / "replay-constraints.txt"
        constraints.write_text("\n".join(held) + "\n", encoding="utf-8")
        done = _run([*install, "--constraint", str(constraints), *reqs])
        if done.returncode == 0:
            info.pinned = len(held)
            break
        # this harness needs another version of some of them: let go of those the refusal names, keep the rest
        reason = one_line(done.stderr or done.stdout)
        refused.append(reason)
        named = [pin for pin in held if re.search(rf"(?<![\w.-]){re.escape(pin.split('==')[0])}(?![\w-])", reason, re.I)]
        held = [pin for pin in held if pin not in named] if named else []
    if refused:
        info.unpinned = "; ".join(refused)
    if not info.pinned:
        _check(_run([*install, *reqs]), "install")
    freeze = _run(freeze_cmd)
    info.freeze = [ln for ln in freeze.stdout.splitlines() if ln.strip()]
    probe = _run([str(py), "-c", _PROBE])
    _check(probe, "probe")
    versions = json.loads(probe.stdout)
    info.harness, info.slim, info.python = versions["harness"], versions["slim"], versions["python"]
    if not info.harness:
        raise _InstallError(f"{spec.spec}: installed, but {HARNESS} is not in the environment")
    _seed_stdlib_bytecode(path, versions.get("stdlib") or "", versions.get("cache_tag"))
    _seed_site_bytecode(path, versions.get("purelib") or "", sysconfig.get_paths()["purelib"], versions.get("cache_tag"))


# --------------------------------------------------------------------------- interpreters

_VERSION_PROBE = "import sys; print(sys.implementation.name + '-' + '.'.join(map(str, sys.version_info[:3])))"


def _probe_python(exe: str) -> str | None:
    """``cpython-3.12.1`` for a working interpreter, None for anything else (a pyenv shim that fails)."""
    try:
        proc = subprocess.run(
            [exe, "-I", "-c", _VERSION_PROBE], capture_output=True, text=True, timeout=30, check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and re.fullmatch(r"\w+-\d+\.\d+\.\d+", out) else None


def _version_matches(tag: str, request: str) -> bool:
    return tag.split("-", 1)[1].split(".")[: len(request.split("."))] == request.split(".")


def _pyenv_candidates(request: str) -> list[str]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if not root.is_dir():
        return []
    found = [d for d in root.iterdir() if re.fullmatch(r"\d+\.\d+\.\d+", d.name) and _version_matches(f"x-{d.name}", request)]
    found.sort(key=lambda d: tuple(int(x) for x in d.name.split(".")), reverse=True)
    return [str(d / "bin" / "python") for d in found]


def find_python(request: str | None, installer: Installer) -> tuple[str, str]:
    """(interpreter path, ``cpython-X.Y.Z``) for ``--python``; the caller's own when None.

    Looked for as a path, then among pyenv's versions, then ``pythonX.Y`` on PATH, then
    by uv (which installs a managed one when none is found). pyenv's shims are tried
    but skipped when they fail, as they do for a version that is installed but not
    selected, which is why uv's own search is not the first resort.
    """
    if request is None:
        return sys.executable, python_tag()
    if not re.fullmatch(r"\d+(\.\d+){0,2}", request):
        path = Path(request).expanduser()
        tag = _probe_python(str(path)) if path.exists() else None
        if tag is None:
            raise _InstallError(f"--python {request}: not a Python version (e.g. 3.12) or a working interpreter")
        return str(path.resolve()), tag
    candidates = [*_pyenv_candidates(request), *filter(None, [shutil.which(f"python{request}")])]
    for exe in candidates:
        tag = _probe_python(exe)
        if tag and _version_matches(tag, request):
            return exe, tag
    if installer.name == "uv":
        proc = _run([*installer.uv, "python", "find", request])
        if proc.returncode != 0:  # none found: let uv install a managed one
            _run([*installer.uv, "python", "install", "-q", request])
            proc = _run([*installer.uv, "python", "find", "--python-preference", "only-managed", request])
        lines = proc.stdout.strip().splitlines() if proc.returncode == 0 else []
        tag = _probe_python(lines[-1]) if lines else None
        if tag and _version_matches(tag, request):
            return lines[-1], tag
    raise _InstallError(f"--python {request}: no such interpreter found (pyenv, PATH{', uv' if installer.name == 'uv' else ''})")


# --------------------------------------------------------------------------- locks


def _lock_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _open_locked(path: Path, mode: int) -> IO[str]:
    """Open and ``flock`` the env's lock file, retrying if a prune replaced it meanwhile.

    A prune unlinks the lock file of the env it removes, so a lock taken on an open
    handle of that old file would guard nothing: check it is still the file at the path.
    """
    lock = _lock_file(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(lock, "a+")
        try:
            fcntl.flock(fh, mode)
            if os.fstat(fh.fileno()).st_ino == os.stat(lock).st_ino:
                return fh
        except FileNotFoundError:
            pass
        except BaseException:
            fh.close()
            raise
        fh.close()


def _still_locked(fh: IO[str], path: Path) -> bool:
    try:
        return os.fstat(fh.fileno()).st_ino == os.stat(_lock_file(path)).st_ino
    except FileNotFoundError:
        return False


def _release(fh: IO[str]) -> None:
    try:
        fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        fh.close()


def _prune(path: Path, label: str) -> None:
    """Drop envs of the same label built for an older tool source or Python: they are never reused.

    Only envs nobody holds: a matrix run keeps a shared lock on each env it uses from the
    moment it is ready until its replays end, so another run's prune skips it.
    """
    pattern = re.compile(re.escape(label) + r"-[0-9a-f]{16}")
    for other in path.parent.iterdir():
        if other == path or not other.is_dir() or not pattern.fullmatch(other.name):
            continue
        try:
            fh = _open_locked(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # in use (or being built) by another run
        try:
            shutil.rmtree(other, ignore_errors=True)
            _lock_file(other).unlink(missing_ok=True)
        finally:
            _release(fh)


def _reuse(path: Path, started: float) -> EnvInfo | None:
    stamp = path / STAMP
    if not (stamp.is_file() and env_python(path).exists()):
        return None
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
        # where it is now: a cache moved with its project ran the Python its stamp named, elsewhere or nowhere
        reused = EnvInfo(**{**data, "path": str(path), "status": "reused", "setup_seconds": 0.0})
    except (OSError, ValueError, TypeError):
        return None  # unreadable stamp: rebuild
    reused.setup_seconds = round(time.perf_counter() - started, 3)
    return reused


def _create(
    info: EnvInfo, spec: VersionSpec, installer: Installer, root: Path, extras: Sequence[str], pins: Sequence[str],
    started: float,
) -> None:
    path = Path(info.path)
    shutil.rmtree(path, ignore_errors=True)
    try:
        _build(info, spec, installer, root, extras, pins)
    except _InstallError as exc:
        shutil.rmtree(path, ignore_errors=True)
        info.status, info.error = "error", str(exc)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        shutil.rmtree(path, ignore_errors=True)
        info.status, info.error = "error", f"{spec.spec}: {one_line(str(exc))}"
    info.setup_seconds = round(time.perf_counter() - started, 3)
    if info.status == "created":
        stamp = path / STAMP
        tmp = stamp.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(asdict(info), indent=1), encoding="utf-8")
            os.replace(tmp, stamp)
        except OSError as exc:  # a full disk after the install: an env without its stamp is never reused
            shutil.rmtree(path, ignore_errors=True)
            info.status, info.error = "error", f"{spec.spec}: cannot stamp the environment: {one_line(str(exc))}"


def ensure_env(
    spec: VersionSpec,
    cache: Path,
    installer: Installer,
    tool_hash: str,
    root: Path | None = None,
    extras: Sequence[str] = (),
    hold: ExitStack | None = None,
) -> EnvInfo:
    """Return a ready env for ``spec``, reusing a stamped one; failures come back as ``status='error'``.

    With ``hold``, a shared lock on the env stays taken until that stack closes, so no
    other matrix run's prune removes it while replays still run in it (without, it is
    released on return). Builders take the lock exclusively, so two runs never build
    the same env at once.
    """
    root = root or tool_root()
    started = time.perf_counter()
    try:
        interpreter, tag = find_python(spec.python, installer)
        pins = caller_pins(extras)
        key = env_key(spec, tool_hash, tag, pins)
    except _InstallError as exc:
        return EnvInfo(spec.spec, spec.label, spec.kind, "", "", "error", error=str(exc))
    except OSError as exc:
        return EnvInfo(spec.spec, spec.label, spec.kind, "", "", "error", error=f"{spec.spec}: {exc}")
    path = (cache / f"{spec.label}-{key}").resolve()
    while True:
        try:
            fh = _open_locked(path, fcntl.LOCK_SH)
        except OSError as exc:  # a cache that cannot be made (below a file, a read-only disk): that version's error
            return EnvInfo(spec.spec, spec.label, spec.kind, key, str(path), "error", error=f"{spec.spec}: {exc}")
        try:
            info = _reuse(path, started)
            if info is None:
                fcntl.flock(fh, fcntl.LOCK_EX)  # converting drops the shared lock first: look again
                if not _still_locked(fh, path):
                    _release(fh)
                    continue
                info = _reuse(path, started)
                if info is None:
                    info = EnvInfo(
                        spec.spec, spec.label, spec.kind, key, str(path), "created", installer=installer.name,
                        interpreter="" if spec.python is None else interpreter,
                    )
                    _create(info, spec, installer, root, extras, pins, started)
                    if info.status == "created":
                        _prune(path, spec.label)
                fcntl.flock(fh, fcntl.LOCK_SH)
                if info.status != "error" and not (_still_locked(fh, path) and (path / STAMP).is_file()):
                    _release(fh)  # pruned by another run in the instant between the two locks
                    continue
        except BaseException:
            _release(fh)
            raise
        if hold is not None and info.status != "error":
            hold.callback(_release, fh)
        else:
            _release(fh)
        return info

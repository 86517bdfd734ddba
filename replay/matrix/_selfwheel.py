"""A wheel of the running harness-replay, rebuilt from its installed files.

``replay matrix`` installs this tool into every environment it makes. From a source checkout
that is the checkout; from a wheel install there is no source to point at, and the release
may not be on the package index at all (a private build, a pre-release, an air-gapped
mirror). The installed files *are* the package, so they are zipped back into a wheel — the
very version that is running, byte for byte — and cached beside the environments.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path, PurePosixPath

from ..errors import ReplayUsageError

DIST = "harness-replay"
_WHEEL = "Wheel-Version: 1.0\nGenerator: harness-replay (rebuilt from its installed files)\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
_DIST_INFO_KEEP = ("METADATA", "entry_points.txt")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _package_files(dist: Distribution) -> list[tuple[str, bytes]]:
    """The installed ``replay`` package (no bytecode) and the metadata pip/uv need to install it again."""
    out: list[tuple[str, bytes]] = []
    for f in dist.files or ():
        parts = PurePosixPath(str(f)).parts
        if not parts or "__pycache__" in parts or str(f).endswith(".pyc"):
            continue
        if parts[0] == "replay" or (parts[0].endswith(".dist-info") and parts[-1] in _DIST_INFO_KEEP) or (
            parts[0].endswith(".dist-info") and "licenses" in parts
        ):
            out.append((str(f), Path(str(dist.locate_file(f))).read_bytes()))
    if not any(name.startswith("replay/") for name, _ in out):
        raise ReplayUsageError(
            f"{DIST} is installed without its files listed (an editable or unusual install): run replay matrix from "
            "a source checkout, or install it from a wheel"
        )
    return out


def self_wheel(directory: Path) -> Path:
    """Write (once per version and content) a wheel of the installed harness-replay into ``directory``."""
    dist = distribution(DIST)
    files = _package_files(dist)
    content = hashlib.sha256(b"".join(name.encode() + b"\0" + data for name, data in sorted(files))).hexdigest()[:16]
    version = dist.version
    info = f"harness_replay-{version}.dist-info"
    target = directory / content / f"harness_replay-{version}-py3-none-any.whl"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    entries = [(name if not name.split("/", 1)[0].endswith(".dist-info") else f"{info}/{name.split('/', 1)[1]}", data) for name, data in files]
    entries.append((f"{info}/WHEEL", _WHEEL.encode()))
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    fd, tmp = tempfile.mkstemp(suffix=".whl.tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(entries):
                zf.writestr(name, data)
            zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
        os.replace(tmp, target)  # concurrent builds of the same content write the same bytes
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

"""What `shoal --version` prints: the package version and the git commit the code was built from.

An image built by `scripts/build-image` carries the commit in `shoal/_build.json` (written into the
installed package, never into the source tree). A source checkout asks git. Anything else (a wheel
installed elsewhere) says `unknown` rather than guessing.
"""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

import shoal

BUILD_INFO = "_build.json"


def package_version() -> str:
    """The installed distribution's version, or the package's own `__version__` when not installed."""
    try:
        return metadata.version("shoal")
    except metadata.PackageNotFoundError:
        return shoal.__version__


def build_commit(package_dir: Path | None = None) -> str:
    """The commit recorded at build time, else the checkout's `HEAD` (`+dirty` with local edits), else
    `unknown`."""
    pkg = package_dir or Path(shoal.__file__).resolve().parent
    info = pkg / BUILD_INFO
    if info.is_file():
        try:
            return str(json.loads(info.read_text())["commit"])
        except (ValueError, KeyError, TypeError):
            return "unknown"
    return _git_commit(pkg) or "unknown"


def _git_commit(pkg: Path) -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(pkg), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(pkg), "status", "--porcelain", "--untracked-files=no", "."],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def version_text() -> str:
    """One line: `shoal 0.1.0 (commit 1a2b3c...)`."""
    return f"shoal {package_version()} (commit {build_commit()})"

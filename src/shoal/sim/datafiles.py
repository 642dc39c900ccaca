"""Data files: the traces shipped with shoal, and text files stored plain or gzip-compressed.

shoal carries, as package data under ``shoal/data/traces/`` (gzip-compressed; sources and licences in
``THIRD_PARTY.md``), every trace its commands read by default: the openb node and pod lists and the FGD
authors' result table (``shoal fgd``) and the Pollux-preprocessed Philly job table (``${traces}`` in the
example scenarios). The layout is the public traces collection's: ``<traces>/alibaba-gpu-v2023-openb/``,
``<traces>/results/fgd-atc23/``, ``<traces>/philly-pollux/``, so ``--traces DIR`` / ``$SHOAL_TRACES`` can
point at a full, uncompressed copy instead.

Every trace loader opens its file through :func:`open_text`: ``X`` if it exists, else ``X.gz``, so a
user's own plain copy and the shipped compressed one read the same. A file that is neither raises
:class:`DataFileMissing`, whose message is one line naming the file and how to get it.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import TextIO

#: The traces shipped inside the package (absent only from a broken install or checkout).
PACKAGE_TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


class DataFileMissing(FileNotFoundError):
    """Neither ``X`` nor ``X.gz`` exists. ``str(err)`` is a one-line message for the user."""


def default_traces_dir() -> Path:
    """``$SHOAL_TRACES`` if set (a user's traces directory, same layout), else the shipped traces."""
    env = os.environ.get("SHOAL_TRACES")
    return Path(env) if env else PACKAGE_TRACES


def locate(path: Path) -> Path | None:
    """``path`` if it is a file, else its gzip twin (``X.gz`` for ``X``, ``X`` for ``X.gz``) if that is
    a file, else None."""
    if path.is_file():
        return path
    twin = path.with_name(path.name[:-3]) if path.name.endswith(".gz") else path.with_name(path.name + ".gz")
    return twin if twin.is_file() else None


def missing_message(path: Path, what: str = "data") -> str:
    """One line: the missing file (both names tried) and how to get it."""
    tried = f"{path} (nor {path.name}.gz)" if not path.name.endswith(".gz") else str(path)
    try:
        rel = path.resolve().relative_to(PACKAGE_TRACES)
    except ValueError:
        rel = None
    if rel is not None:
        shipped = rel.as_posix() if rel.name.endswith(".gz") else f"{rel.as_posix()}.gz"
        hint = f"it ships with shoal as src/shoal/data/traces/{shipped}: restore it (git checkout) or reinstall shoal"
    elif os.environ.get("SHOAL_TRACES") and _under(path, Path(os.environ["SHOAL_TRACES"])):
        hint = "$SHOAL_TRACES points at a traces directory without it: unset it to use the traces shipped with shoal"
    else:
        hint = "check the path (traces shipped with shoal: src/shoal/data/traces, sources in THIRD_PARTY.md)"
    return f"{tried}: no such {what} file; {hint}"


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def open_text(path: Path, what: str = "data") -> TextIO:
    """Open ``path`` (or its gzip twin, see :func:`locate`) as UTF-8 text ready for :mod:`csv`
    (``newline=""``); ``.gz`` files are decompressed on the fly. Raises :class:`DataFileMissing`
    (message: :func:`missing_message`) if neither exists. The caller closes the returned file."""
    found = locate(path)
    if found is None:
        raise DataFileMissing(missing_message(path, what))
    if found.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(found, "rb"), encoding="utf-8", newline="")
    return found.open(encoding="utf-8", newline="")

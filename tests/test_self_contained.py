"""The repository stands on its own: no code, test, benchmark or script reads a path outside it
(reference material is copied in by a commit, see THIRD_PARTY.md), and every file it carries from
elsewhere is listed there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("src", "tests", "bench", "scripts", ".ci", "Makefile")
# A sibling reference checkout (dot-dot/shared) or a machine's absolute path (/<dir>/shared).
OUTSIDE = re.compile(r"\.\.[/\\]shared|/[A-Za-z0-9_.-]+/shared\b|parent\s*/\s*['\"]shared['\"]")


def _files() -> list[Path]:
    out: list[Path] = []
    for name in CHECKED:
        root = REPO / name
        candidates = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out.extend(p for p in candidates if p.suffix not in (".gz", ".pyc")
                   and not any(part == "__pycache__" or part.endswith(".egg-info") for part in p.parts))
    return out


def test_nothing_reads_a_path_outside_the_repository() -> None:
    hits = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        hits += [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                 for m in OUTSIDE.finditer(text)]
    assert hits == []


def test_every_copied_folder_is_listed_in_third_party() -> None:
    listed = (REPO / "THIRD_PARTY.md").read_text()
    copied = [p.relative_to(REPO).as_posix() for p in (REPO / "data").iterdir() if p.is_dir()]
    copied += [p.relative_to(REPO).as_posix()
               for p in (REPO / "src" / "shoal" / "data" / "traces").iterdir() if p.is_dir()]
    assert [c for c in copied if f"`{c}/" not in listed] == []

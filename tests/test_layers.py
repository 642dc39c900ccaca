"""Import rules that import-linter cannot express: inside shoal.kube only client.py imports lightkube."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "shoal"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_only_kube_client_imports_lightkube() -> None:
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if "lightkube" in _imports(p) and p.relative_to(SRC).as_posix() != "kube/client.py"]
    assert offenders == []


def test_core_never_imports_io_libraries() -> None:
    core = ["model", "policy", "framework", "plugins", "actions"]
    banned = {"lightkube", "requests", "socket", "subprocess", "random", "time"}
    offenders = []
    for layer in core:
        for p in (SRC / layer).rglob("*.py"):
            bad = _imports(p) & banned
            if bad:
                offenders.append(f"{p.relative_to(SRC)}: {sorted(bad)}")
    assert offenders == []

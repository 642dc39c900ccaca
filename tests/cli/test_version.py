"""`shoal --version`: the package version and the commit the code was built from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shoal.cli.main import main
from shoal.cli.version import BUILD_INFO, build_commit


def test_version_prints_version_and_commit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    # In a checkout the commit is git's HEAD (40 hex digits, maybe +dirty).
    assert re.fullmatch(r"shoal \d+\.\d+\.\d+\S* \(commit [0-9a-f]{40}(\+dirty)?\)", out), out


def test_build_info_file_wins_over_git(tmp_path: Path) -> None:
    pkg = tmp_path / "shoal"
    pkg.mkdir()
    (pkg / BUILD_INFO).write_text(json.dumps({"commit": "abc123"}))
    assert build_commit(pkg) == "abc123"


def test_outside_a_checkout_is_unknown(tmp_path: Path) -> None:
    assert build_commit(tmp_path) == "unknown"

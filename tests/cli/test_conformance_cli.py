"""`shoal conformance --json`: results carry each scenario's decision time (`seconds`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.cli.main import main
from shoal.conformance import runner

CORPUS = Path(__file__).resolve().parents[2] / "data" / "conformance" / "kai"
ONE_SESSION = CORPUS / ("allocate.allocate--1-job-running-on-node0-3-pending-jobs-allocate-them-"
                        "according-to-e0f3daa.yaml")
# full cycle, rounds until_match 1 + after_match 1: two deciding sessions (and one check-only session)
FULL_CYCLE = CORPUS / "it.allocate.allocate_dra--exactly-at-claim-max-consumers-limit.yaml"


def _json(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, dict[str, object]]:
    code = main(["conformance", "--json", "-", *map(str, paths)])
    out = capsys.readouterr().out
    assert code == 0
    return {r["id"]: r for r in json.loads(out)["results"]}


@pytest.fixture
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """process_time advances one second per reading: a timed session then takes exactly 1 s."""
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(runner.time, "process_time", lambda: float(next(ticks)))
    yield


def test_seconds_count_the_deciding_sessions_only(capsys: pytest.CaptureFixture[str], ticking_clock: None) -> None:
    results = _json(capsys, ONE_SESSION, FULL_CYCLE)
    assert results[ONE_SESSION.stem]["seconds"] == 1.0
    assert results[FULL_CYCLE.stem]["seconds"] == 2.0


def test_seconds_are_real_process_time(capsys: pytest.CaptureFixture[str]) -> None:
    (result,) = _json(capsys, ONE_SESSION).values()
    assert result["outcome"] == "passed"
    assert isinstance(result["seconds"], float) and 0.0 < result["seconds"] < 30.0


def test_help_says_what_is_timed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["conformance", "--help"])
    assert "process (CPU) time" in " ".join(capsys.readouterr().out.split())

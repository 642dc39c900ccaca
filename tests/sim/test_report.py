"""Report directories: the default run's index.html shows plots that exist; files are well-formed."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from shoal.cli.main import main

DATA = Path(__file__).parent / "data"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def default_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("default")
    assert main(["simulate", "--out", str(out), "--no-progress"]) == 0
    return out


def referenced(index: Path) -> list[str]:
    return re.findall(r"<img src='([^']+)'", index.read_text())


def test_default_index_references_only_existing_plots(default_report: Path) -> None:
    images = referenced(default_report / "index.html")
    assert {"allocation.png", "queue_share.png", "wait_cdf.png"} <= set(images)
    for name in images:
        data = (default_report / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name


def test_default_metrics_are_complete(default_report: Path) -> None:
    m = json.loads((default_report / "metrics.json").read_text())
    assert m["scenario"] == "default" and m["total_gpus"] == 256
    assert set(m["summary"]) == {"research", "production", "exploration", "ALL"}
    assert m["summary"]["ALL"]["jobs"] == 1205
    for q in ("research", "production", "exploration"):
        s = m["summary"][q]
        assert s["started"] > 0 and s["wait"]["p50"] <= s["wait"]["p90"] <= s["wait"]["p99"]
    series = m["series"]
    assert len(series["t"]) == len(series["allocated_gpus"]) > 100
    assert max(series["allocated_gpus"]) <= m["total_gpus"]


def test_csv_time_series_has_a_column_per_queue(default_report: Path) -> None:
    with (default_report / "timeseries.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {"research_allocated", "research_fair_share", "exploration_pending"} <= set(rows[0])
    with (default_report / "jobs.csv").open() as fh:
        jobs = list(csv.DictReader(fh))
    assert len(jobs) == 1205


def test_compare_report_has_one_column_per_config(tmp_path: Path) -> None:
    ex = Path(__file__).parents[2] / "examples" / "sim"
    rc = main(
        [
            "simulate",
            "compare",
            str(ex / "binpack.yaml"),
            str(ex / "static-quota.yaml"),
            str(ex / "time-fairshare.yaml"),
            "--scenario",
            str(DATA / "small.yaml"),
            "--out",
            str(tmp_path),
            "--no-progress",
            "--jobs",
            "2",
        ]
    )
    assert rc == 0
    data = json.loads((tmp_path / "compare.json").read_text())
    assert [r["config"] for r in data["runs"]] == ["binpack", "static-quota", "time-fairshare"]
    for name in referenced(tmp_path / "index.html"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    static = data["runs"][1]
    assert static["counters"].get("evicted_gangs", {}).get("reclaim", 0) == 0
    table = (tmp_path / "queue_waits.md").read_text().splitlines()
    assert table[0].count("mean / p50 / p90") == 3
    rows = {line.split(" | ")[0].lstrip("| ") for line in table[2:]}
    assert {"alpha", "beta", "ALL", "*gangs reclaimed*"} <= rows
    assert all(line.count("|") == table[0].count("|") for line in table)


@pytest.mark.parametrize(
    ("config", "over_quota"),
    [
        pytest.param("static-quota.yaml", False, id="static partitioning never exceeds the quota"),
        pytest.param("allocate-only.yaml", True, id="borrowing lends idle GPUs beyond the quota"),
    ],
)
def test_static_partitioning_keeps_queues_within_quota(config: str, over_quota: bool) -> None:
    from shoal.sim.scenario import load_scenario
    from shoal.sim.schedconf import load_config
    from shoal.sim.simulation import Simulation

    cfg = load_config(Path(__file__).parents[2] / "examples" / "sim" / config)
    r = Simulation(load_scenario(DATA / "small.yaml", config=cfg)).run()
    peak = max(max(r.series.queue_allocated[q]) for q in r.queues)
    assert (peak > 8) == over_quota, peak

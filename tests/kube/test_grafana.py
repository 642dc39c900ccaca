"""The Grafana dashboard in deploy/grafana queries only metrics the scheduler exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from shoal.kube.cache import ClusterCache
from shoal.kube.metrics import SchedulerMetrics
from shoal.kube.visibility import VisibilityOptions, VisibilityService

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "shoal-dashboard.json"


def exported_names() -> set[str]:
    metrics = SchedulerMetrics()
    VisibilityService(None, ClusterCache("s", lambda: 0.0), "s", VisibilityOptions(), metrics)  # type: ignore[arg-type]
    text = metrics.render().decode()
    names = set()
    for base, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(base)
        if kind == "histogram":
            names.update({f"{base}_bucket", f"{base}_sum", f"{base}_count"})
        if kind == "counter":
            names.add(f"{base}_total")
    return names


def test_every_query_names_an_exported_metric() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 12
    used = {m for e in exprs for m in re.findall(r"\bshoal_[a-z_]+", e)}
    missing = used - exported_names()
    assert not missing, f"the dashboard queries metrics nobody exports: {sorted(missing)}"
    for needed in ("shoal_time_to_bind_seconds_bucket", "shoal_action_latency_seconds_bucket",
                   "shoal_queue_quota", "shoal_queue_fair_share", "shoal_queue_usage", "shoal_pending_gangs_by_reason"):
        assert needed in used


def test_panels_have_unique_ids_and_a_datasource_input() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert dash["__inputs"][0]["name"] == "DS_PROMETHEUS"

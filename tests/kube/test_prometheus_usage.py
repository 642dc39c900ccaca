"""Queue usage from Prometheus (KAI's `clientType: prometheus`) against a fake Prometheus on loopback.

The fake (tests/kube/fake_prometheus.py: `http.server` in a thread, 127.0.0.1 only) answers
`/api/v1/query` from canned vectors chosen by the metric named in the query, and records every
query it was asked.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from core.reclaim_world import World
from kube.fake_prometheus import FakePrometheus, vector
from shoal.history.usage import UsageParams
from shoal.kube.prometheus_usage import PromConfig, PrometheusUsage, promql_duration, window_query
from shoal.kube.usage_feed import usage_settings

CAPACITY = {"nvidia_com_gpu": 160.0, '"cpu"': 6400.0, '"memory"': 1000.0}
ALLOCATED = {"kai_queue_allocated_gpus": {"team-a": 120.0, "team-b": 40.0},
             "kai_queue_allocated_cpu_cores": {"team-a": 640.0},
             "kai_queue_allocated_memory_bytes": {}}


def canned(query: str) -> tuple[int, dict[str, Any]]:
    """KAI's default metrics: capacity 160 GPU-samples etc., team-a 3/4 of the GPUs, 1/10 of the CPU."""
    for key, value in CAPACITY.items():
        if "kube_node_status_capacity" in query and key in query:
            return 200, vector([({}, value)])
    for metric, rows in ALLOCATED.items():
        if metric in query:
            return 200, vector([({"queue_name": q}, v) for q, v in rows.items()])
    return 400, {"status": "error", "errorType": "bad_data", "error": f"unknown metric in {query}"}


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    p = FakePrometheus(canned)
    yield p
    p.close()


def config(url: str, **usage_params: Any) -> PromConfig:
    db = {"clientType": "prometheus", "connectionString": url,
          "usageParams": {"windowSize": "32s", "halfLifePeriod": "16s", "fetchInterval": "10s",
                          "stalenessPeriod": "30s", "extraParams": {"queryResolution": "1s"}, **usage_params}}
    cfg = usage_settings(db)
    assert isinstance(cfg, PromConfig)
    return cfg


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def snapshot(now: float):  # type: ignore[no-untyped-def]
    w = World().node("n0", 8).queue("team-a", quota=0).queue("team-b", quota=0)
    w.snapshot.now = now
    return w.snapshot


def test_kai_queries_and_usage_over_capacity(prom: FakePrometheus) -> None:
    source = PrometheusUsage(config(prom.url))
    assert asyncio.run(source.refresh(1000.5))
    assert source.usage == {"team-a": {"gpu": 0.75, "cpu": 0.1, "memory": 0.0},
                            "team-b": {"gpu": 0.25, "cpu": 0.0, "memory": 0.0}}
    assert len(prom.asked) == 6 and {a["path"] for a in prom.asked} == {"/api/v1/query"}
    assert {a["time"] for a in prom.asked} == {"1000.500"}
    queries = [a["query"] for a in prom.asked]
    assert queries[0] == ('sum_over_time((((sum(kube_node_status_capacity{resource="nvidia_com_gpu"})) * '
                          '(0.5^((1000 - time()) / 16.000000))))[32s:1s])')
    assert "sum_over_time((((kai_queue_allocated_gpus) * (0.5^((1000 - time()) / 16.000000))))[32s:1s])" in queries


def test_without_half_life_no_decay_and_a_tumbling_window_spans_since_its_reset() -> None:
    plain = config("http://127.0.0.1:1", halfLifePeriod="0s")
    assert window_query("m", plain, 100.0) == "sum_over_time((m)[32s:1s])"
    tumbling = config("http://127.0.0.1:1", windowType="tumbling", tumblingWindowStartTime="1970-01-01T00:00:10Z")
    assert tumbling.span(100.0) == pytest.approx(26.0)  # resets at 10, 42, 74: 26 s into the window
    assert "[26s:1s]" in window_query("m", tumbling, 100.0)
    assert promql_duration(0.25) == "250ms" and promql_duration(604800) == "604800s"


def test_extra_params_name_other_metrics(prom: FakePrometheus) -> None:
    cfg = config(prom.url, extraParams={"gpuAllocationMetric": "kai_queue_allocated_cpu_cores",
                                        "queryResolution": "30s"})
    assert dict(cfg.allocation)["gpu"] == "kai_queue_allocated_cpu_cores" and cfg.resolution == 30.0
    source = PrometheusUsage(cfg)
    assert asyncio.run(source.refresh(10.0))
    assert source.usage is not None and source.usage["team-a"]["gpu"] == pytest.approx(4.0)  # 640 / 160


def test_connection_string_from_kai_fields() -> None:
    base: dict[str, Any] = {"clientType": "prometheus", "usageParams": {"windowSize": "1h"}}
    for db in (base, {**base, "connectionString": "http://a:9090", "connectionStringEnvVar": "PROM"}):
        with pytest.raises(ValueError, match="exactly one"):
            usage_settings(db)
    with pytest.raises(ValueError, match="not an http"):
        PromConfig.from_kai({**base, "connectionStringEnvVar": "PROM"}, UsageParams(3600.0), {})
    cfg = PromConfig.from_kai({**base, "connectionStringEnvVar": "PROM"}, UsageParams(3600.0),
                              {"PROM": "http://prom.monitoring:9090/"})
    assert cfg.url == "http://prom.monitoring:9090" and cfg.fetch_interval == 60.0 and cfg.staleness == 300.0
    assert isinstance(usage_settings({**base, "clientType": "fake"}), UsageParams)  # shoal's own view


def test_an_endpoint_down_is_logged_once_and_never_breaks_a_cycle(caplog: pytest.LogCaptureFixture) -> None:
    source = PrometheusUsage(config(closed_port()), clock=lambda: 100.0)

    async def cycles() -> list[dict[str, Any]]:
        seen = []
        assert not await source.load()
        for now in (100.0, 105.0, 111.0, 125.0):
            snap = snapshot(now)
            source.fill(snap)
            seen.append(snap.usage)
            if source._task is not None:
                await source._task
        return seen

    with caplog.at_level(logging.DEBUG, logger="shoal.kube.prometheus_usage"):
        assert asyncio.run(cycles()) == [{}, {}, {}, {}]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "ConnectError" in errors[0].getMessage(), caplog.text
    assert source.failures == 3  # load, then 111 and 125 (a fetch every 10 s)


def test_a_stale_answer_is_dropped_and_a_recovery_logged(prom: FakePrometheus,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    source = PrometheusUsage(config(prom.url))
    assert asyncio.run(source.refresh(100.0))
    answer = prom.answer
    prom.answer = lambda q: (503, {"status": "error", "error": "overloaded"})

    async def at(now: float) -> dict[str, Any]:
        snap = snapshot(now)
        source.fill(snap)
        if source._task is not None:
            await source._task
        return snap.usage

    with caplog.at_level(logging.INFO, logger="shoal.kube.prometheus_usage"):
        assert asyncio.run(at(120.0))["team-a"]["gpu"] == 0.75  # failed fetch, last answer still fresh
        assert asyncio.run(at(131.0)) == {}  # 31 s old: stale
        prom.answer = answer
        asyncio.run(at(141.0))
        assert asyncio.run(at(142.0))["team-b"]["gpu"] == 0.25
    text = caplog.text
    assert "HTTP 503: overloaded" in text and "31s old" in text and "answered again after 2 failed" in text

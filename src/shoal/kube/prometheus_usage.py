"""Queue usage read from Prometheus: KAI's `usageDBConfig.clientType: prometheus`.

Contract: with `clientType: prometheus` and `connectionString` (or `connectionStringEnvVar`, the
name of an environment variable holding the URL; exactly one of the two, as KAI) the live
service takes `ClusterSnapshot.usage` from Prometheus instead of its own view. The queries are
KAI's (`pkg/scheduler/cache/usagedb/prometheus`): per resource, one instant query for the queues'
allocation and one for the cluster capacity, each

    sum_over_time((METRIC * 0.5^((NOW - time()) / HALF_LIFE))[SPAN:RESOLUTION])

(the decay factor only with a half-life; NOW is the query time in whole Unix seconds), and a
queue's usage is its value (label `queue_name`) divided by the capacity's first value. SPAN is
the window for a `sliding` window and the time since the last reset for a `tumbling` one (resets
every `windowSize` from `tumblingWindowStartTime`, default the Unix epoch; KAI sends a range
query there and then expects a vector, which a real Prometheus does not answer, so shoal asks the
instant subquery KAI means). Metrics and timing follow KAI's `extraParams` and `usageParams`:
`gpuAllocationMetric` (default `kai_queue_allocated_gpus`), `cpuAllocationMetric`,
`memoryAllocationMetric`, `gpuCapacityMetric` (default
`sum(kube_node_status_capacity{resource="nvidia_com_gpu"})`), `cpuCapacityMetric`,
`memoryCapacityMetric`, `queryResolution` (1m), `usageQueryTimeout` (10s); `fetchInterval` (1m)
and `stalenessPeriod` (5m).

Fetching never blocks or fails a cycle: `fill` starts a fetch in the background when one is due
and hands the core the last answer. While the endpoint is down (refused, timed out, an HTTP or
PromQL error, no capacity data) the error is logged once per outage (at ERROR, then quietly
until an answer comes back, which is logged too) and the last answer stays in use until it is
older than `stalenessPeriod`; after that the snapshot gets no usage (time-based fair share
falls back to plain fair share) until Prometheus answers again. Nothing is persisted: Prometheus
is the durable store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx2 as httpx

from shoal.history.usage import RESOURCES, UsageParams
from shoal.model.durations import parse_duration
from shoal.model.snapshot import ClusterSnapshot

logger = logging.getLogger(__name__)

QUEUE_LABEL = "queue_name"
#: KAI's default metrics, per usage resource (what kai-scheduler and kube-state-metrics export).
ALLOCATION = {"gpu": "kai_queue_allocated_gpus", "cpu": "kai_queue_allocated_cpu_cores",
              "memory": "kai_queue_allocated_memory_bytes"}
CAPACITY = {"gpu": 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})',
            "cpu": 'sum(kube_node_status_capacity{resource="cpu"})',
            "memory": 'sum(kube_node_status_capacity{resource="memory"})'}

Usage = dict[str, dict[str, float]]


class PrometheusError(RuntimeError):
    """Prometheus could not be asked or gave no usable answer; the message says which query."""


@dataclass(frozen=True, slots=True)
class PromConfig:
    """Where to ask and what (see the module docstring); equal configs mean the same source."""

    url: str
    params: UsageParams
    timeout: float = 10.0
    resolution: float = 60.0
    fetch_interval: float = 60.0
    staleness: float = 300.0
    window_start: float = 0.0
    allocation: tuple[tuple[str, str], ...] = tuple(ALLOCATION.items())
    capacity: tuple[tuple[str, str], ...] = tuple(CAPACITY.items())

    @classmethod
    def from_kai(cls, usage_db: Mapping[str, Any], params: UsageParams,
                 environ: Mapping[str, str] | None = None) -> PromConfig:
        """KAI's `usageDBConfig` -> config. Raises ValueError naming the field."""
        env = os.environ if environ is None else environ
        url, var = str(usage_db.get("connectionString") or ""), str(usage_db.get("connectionStringEnvVar") or "")
        if bool(url) == bool(var):
            raise ValueError("prometheus: set exactly one of connectionString and connectionStringEnvVar")
        url = url or env.get(var, "")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"prometheus: connection string {url!r} (from {var or 'connectionString'}) "
                             "is not an http(s) URL")
        if not math.isfinite(params.window):
            raise ValueError("prometheus: usageParams.windowSize must be finite")
        raw = usage_db.get("usageParams") or {}
        extra = {str(k): str(v) for k, v in (raw.get("extraParams") or {}).items()}

        def seconds(value: object, name: str) -> float:
            try:
                s = parse_duration(value)
            except ValueError as err:
                raise ValueError(f"prometheus: {name}: {err}") from None
            if not s > 0:
                raise ValueError(f"prometheus: {name} must be > 0")
            return s

        start = raw.get("tumblingWindowStartTime")
        try:
            window_start = datetime.fromisoformat(str(start)).timestamp() if start else 0.0
        except ValueError:
            raise ValueError(f"prometheus: tumblingWindowStartTime {start!r} is not a time") from None
        return cls(
            url=url.rstrip("/"), params=params, window_start=window_start,
            timeout=seconds(extra.get("usageQueryTimeout", "10s"), "extraParams.usageQueryTimeout"),
            resolution=seconds(extra.get("queryResolution", "1m"), "extraParams.queryResolution"),
            fetch_interval=seconds(raw.get("fetchInterval", "1m"), "usageParams.fetchInterval"),
            staleness=seconds(raw.get("stalenessPeriod", "5m"), "usageParams.stalenessPeriod"),
            allocation=tuple((r, extra.get(f"{r}AllocationMetric", m)) for r, m in ALLOCATION.items()),
            capacity=tuple((r, extra.get(f"{r}CapacityMetric", m)) for r, m in CAPACITY.items()),
        )

    def span(self, now: float) -> float:
        """Seconds the window covers at `now` (a tumbling window: since its last reset)."""
        if self.params.window_type != "tumbling":
            return self.params.window
        if now < self.window_start:
            return 0.0
        return now - (self.window_start + math.floor((now - self.window_start) / self.params.window)
                      * self.params.window)


def promql_duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as `90s`, anything finer in milliseconds."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def window_query(metric: str, cfg: PromConfig, now: float) -> str:
    """KAI's query of `metric` over the window at `now` (the decay only with a half-life)."""
    h = cfg.params.half_life
    decayed = metric if h is None else f"(({metric}) * (0.5^(({int(now)} - time()) / {h:f})))"
    return f"sum_over_time(({decayed})[{promql_duration(cfg.span(now))}:{promql_duration(cfg.resolution)}])"


async def query_usage(client: httpx.AsyncClient, cfg: PromConfig, now: float) -> Usage:
    """Per queue and resource, its decayed allocation over the decayed capacity. Raises
    PrometheusError (an unreachable endpoint, an error answer, no capacity data)."""
    if cfg.span(now) <= 0:
        return {}  # a tumbling window that just started: nothing used yet
    capacity: dict[str, float] = {}
    for resource, metric in cfg.capacity:
        rows = await _instant(client, cfg, window_query(metric, cfg, now), now)
        if not rows or not rows[0][1] > 0:
            raise PrometheusError(f"no capacity data for {resource} from {metric!r}")
        capacity[resource] = rows[0][1]
    usage: Usage = {}
    for resource, metric in cfg.allocation:
        for labels, value in await _instant(client, cfg, window_query(metric, cfg, now), now):
            queue = labels.get(QUEUE_LABEL)
            if queue:
                usage.setdefault(queue, dict.fromkeys(RESOURCES, 0.0))[resource] = value / capacity[resource]
    return usage


async def _instant(client: httpx.AsyncClient, cfg: PromConfig, query: str,
                   now: float) -> list[tuple[dict[str, str], float]]:
    """The rows (labels, value) of an instant vector query."""
    try:
        resp = await client.get(f"{cfg.url}/api/v1/query", params={"query": query, "time": f"{now:.3f}"},
                                timeout=cfg.timeout)
        body = resp.json()
    except (httpx.HTTPError, ValueError) as err:
        raise PrometheusError(f"{cfg.url}: {type(err).__name__}: {err} (query {query})") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        what = body.get("error") if isinstance(body, dict) else None
        raise PrometheusError(f"{cfg.url}: HTTP {resp.status_code}: {what or 'no answer'} (query {query})")
    for warning in body.get("warnings") or []:
        logger.debug("prometheus warning for %s: %s", query, warning)
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusError(f"{cfg.url}: expected a vector, got {data.get('resultType')!r} (query {query})")
    try:
        return [({str(k): str(v) for k, v in (row.get("metric") or {}).items()}, float(row["value"][1]))
                for row in data.get("result") or []]
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise PrometheusError(f"{cfg.url}: malformed sample ({err}) (query {query})") from None


@dataclass
class PrometheusUsage:
    """The usage source of the live service when Prometheus holds the usage (same methods as
    `UsageFeed`: `fill` each cycle, `load` on taking the lead, `persist` a no-op)."""

    cfg: PromConfig
    #: The snapshots' clock (wall time in the service), for the fetch `load` starts.
    clock: Callable[[], float] = time.time
    usage: Usage | None = None
    fetched_at: float = -math.inf
    failures: int = 0
    _next: float = -math.inf
    _task: asyncio.Task[bool] | None = field(default=None, repr=False)
    _stale_logged: bool = False

    @property
    def settings(self) -> PromConfig:
        return self.cfg

    async def refresh(self, now: float) -> bool:
        """Ask Prometheus now; True if it answered (the answer is then in use)."""
        self._next = now + self.cfg.fetch_interval
        try:
            async with asyncio.timeout(self.cfg.timeout), httpx.AsyncClient() as client:
                usage = await query_usage(client, self.cfg, now)
        except TimeoutError:
            return self._failed(PrometheusError(f"{self.cfg.url}: no answer within usageQueryTimeout "
                                                f"{self.cfg.timeout:g}s"))
        except PrometheusError as err:
            return self._failed(err)
        if self.failures:
            logger.info("usage from Prometheus answered again after %d failed fetches", self.failures)
        self.usage, self.fetched_at, self.failures, self._stale_logged = usage, now, 0, False
        return True

    def _failed(self, err: PrometheusError) -> bool:
        self.failures += 1
        if self.failures == 1:
            logger.error("usage from Prometheus failed (retrying every %gs; the last answer is used for %gs, "
                         "then none): %s", self.cfg.fetch_interval, self.cfg.staleness, err)
        else:
            logger.debug("usage from Prometheus failed again: %s", err)
        return False

    def fill(self, snapshot: ClusterSnapshot) -> None:
        """Set `snapshot.usage` from the last fresh answer (none if stale) and start a fetch if one
        is due (never waits for it)."""
        now = snapshot.now
        if now >= self._next and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self.refresh(now), name="prometheus-usage")
        if self.usage is not None and now - self.fetched_at <= self.cfg.staleness:
            snapshot.usage = self.usage
            return
        if self.usage is not None and not self._stale_logged:
            logger.error("usage from Prometheus is %.0fs old (stalenessPeriod %gs): scheduling without usage",
                         now - self.fetched_at, self.cfg.staleness)
            self._stale_logged = True
        snapshot.usage = {}

    async def load(self) -> bool:
        """A first fetch before the first cycle (as KAI waits for its usage cache), waited for at
        most `usageQueryTimeout`; True if it answered."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.refresh(self.clock()), name="prometheus-usage")
        await asyncio.wait([self._task], timeout=self.cfg.timeout)
        return self.usage is not None

    async def persist(self, now: float, *, force: bool = False) -> None:
        """Nothing to write: Prometheus keeps the history."""

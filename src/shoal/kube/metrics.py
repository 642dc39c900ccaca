"""Prometheus metrics of the scheduler service, and its /healthz, /readyz and /metrics endpoint.

The registry is built per service instance (no global metric state); the HTTP endpoint is a tiny
asyncio server so it shares the scheduler's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from shoal.framework.decisions import Bind
from shoal.framework.session import Session
from shoal.model.pod import Pod

logger = logging.getLogger(__name__)

QUEUE_RESOURCES = ("gpu", "cpu", "memory")
#: Core units -> exported units: GPU devices, CPU cores, memory bytes.
_SCALE = (1000.0, 1000.0, 1.0)


class SchedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.cycle_latency = Histogram("shoal_cycle_latency_seconds", "Scheduling cycle latency (snapshot to "
                                       "decisions)", registry=r,
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.snapshot_latency = Histogram("shoal_snapshot_latency_seconds", "Time to build a cycle's snapshot "
                                          "from the cache (part of the cycle latency)", registry=r,
                                          buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.apply_latency = Histogram("shoal_apply_latency_seconds", "Time to apply one cycle's decisions",
                                       registry=r, buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30))
        self.cycles = Counter("shoal_cycles", "Scheduling cycles run", registry=r)
        self.scheduled = Counter("shoal_pods_scheduled", "Pods bound", registry=r)
        self.evicted = Counter("shoal_pods_evicted", "Pods evicted", ["action"], registry=r)
        self.pending_gangs = Gauge("shoal_pending_gangs", "Gangs with pending pods", ["queue"], registry=r)
        self.fair_share = Gauge("shoal_queue_fair_share", "Queue fair share (gpu devices, cpu cores, "
                                "memory bytes)", ["queue", "resource"], registry=r)
        self.allocated = Gauge("shoal_queue_allocated", "Queue allocation (gpu devices, cpu cores, "
                               "memory bytes)", ["queue", "resource"], registry=r)
        self.requested = Gauge("shoal_queue_requested", "Queue request", ["queue", "resource"], registry=r)
        self.pod_gpu_devices = Gauge("shoal_pod_gpu_devices", "GPU devices given to a pod",
                                     ["namespace", "pod"], registry=r)
        self.pod_gpu_fraction = Gauge("shoal_pod_gpu_fraction", "Fraction of each device given to a pod",
                                      ["namespace", "pod"], registry=r)
        self.pod_gpu_memory = Gauge("shoal_pod_gpu_memory_mib", "GPU memory (MiB) asked by a pod",
                                    ["namespace", "pod"], registry=r)
        self.object_errors = Counter("shoal_object_errors", "Objects refused (reported once per distinct "
                                     "problem), by kind", ["kind"], registry=r)
        self.job_faults = Counter("shoal_job_faults", "Jobs skipped for a cycle because handling them raised, "
                                  "by stage (action)", ["stage"], registry=r)
        self.cycle_failures = Counter("shoal_cycle_failures", "Cycles that failed as a whole", registry=r)
        self.leader = Gauge("shoal_leader", "1 while this instance holds the leader lease", registry=r)
        self._pods: set[tuple[str, str]] = set()
        self._queues: set[str] = set()

    def pod_bound(self, namespace: str, name: str, pod: Pod | None, b: Bind) -> None:
        self.scheduled.inc()
        if pod is None or not pod.gpu.any:
            return
        key = (namespace, name)
        self._pods.add(key)
        if pod.gpu.is_shared:
            self.pod_gpu_devices.labels(*key).set(len(b.gpu_groups) or pod.gpu.devices)
            self.pod_gpu_fraction.labels(*key).set(b.gpu_portion_milli / 1000)
            self.pod_gpu_memory.labels(*key).set(pod.gpu.memory_mib)
        else:
            self.pod_gpu_devices.labels(*key).set(pod.gpu.whole)
            self.pod_gpu_fraction.labels(*key).set(1.0)
            self.pod_gpu_memory.labels(*key).set(0)

    def pod_gone(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        if key in self._pods:
            self._pods.discard(key)
            for g in (self.pod_gpu_devices, self.pod_gpu_fraction, self.pod_gpu_memory):
                with contextlib.suppress(KeyError):
                    g.remove(*key)

    def pod_evicted(self, action: str) -> None:
        self.evicted.labels(action).inc()

    def observe_session(self, ssn: Session, pending_by_queue: dict[str, int]) -> None:
        """Queue gauges from a finished session (fair share, allocation, request) and pending gangs."""
        seen = set()
        for name, q in ssn.queues.items():
            seen.add(name)
            for r, res in enumerate(QUEUE_RESOURCES):
                self.fair_share.labels(name, res).set(float(q.fair_share[r]) / _SCALE[r])
                self.allocated.labels(name, res).set(float(q.allocated[r]) / _SCALE[r])
                self.requested.labels(name, res).set(float(q.request[r]) / _SCALE[r])
            self.pending_gangs.labels(name).set(pending_by_queue.get(name, 0))
        for gone in self._queues - seen:
            for g in (self.fair_share, self.allocated, self.requested):
                for res in QUEUE_RESOURCES:
                    with contextlib.suppress(KeyError):
                        g.remove(gone, res)
            with contextlib.suppress(KeyError):
                self.pending_gangs.remove(gone)
        self._queues = seen

    def render(self) -> bytes:
        return generate_latest(self.registry)


async def serve_http(port: int, metrics: SchedulerMetrics, ready: Callable[[], bool],
                     host: str = "127.0.0.1") -> asyncio.Server:
    """Serve GET /healthz (alive), /readyz (caches synced) and /metrics on host:port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode(errors="replace").split()
            path = parts[1] if len(parts) > 1 else "/"
            if path == "/healthz":
                status, body, ctype = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ok = ready()
                status = "200 OK" if ok else "503 Service Unavailable"
                body, ctype = (b"ok\n" if ok else b"not ready\n"), "text/plain"
            elif path == "/metrics":
                status, body, ctype = "200 OK", metrics.render(), CONTENT_TYPE_LATEST
            else:
                status, body, ctype = "404 Not Found", b"not found\n", "text/plain"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)

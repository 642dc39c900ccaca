"""Helpers for the scheduler e2e tests: run `shoal run` as a subprocess, build pods, read state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Event, Pod

from .cluster import Cluster, KEnv

QueueRes = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
PodGroupRes = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")


@dataclass
class ShoalProcess:
    """One `shoal run` subprocess with the scheduler's own (least-privilege) kubeconfig."""

    cluster: Cluster
    scheduler_name: str
    log: Path
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    #: Extra environment (e.g. SHOAL_FAILPOINT for the restart tests).
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> ShoalProcess:
        cmd = [sys.executable, "-m", "shoal.cli.main", "-v", "run",
               "--kubeconfig", str(self.cluster.scheduler_kubeconfig),
               "--scheduler-name", self.scheduler_name, "--period", "0.5s", *self.extra]
        out = self.log.open("ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **self.env})
        return self

    def kill(self) -> None:
        """SIGKILL: no lease release, no cleanup (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


@pytest.fixture
def shoal_runner(cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    """A factory `start(scheduler_name=None, *extra_args, env=None) -> ShoalProcess`; all stopped afterwards."""
    procs: list[ShoalProcess] = []

    def start(scheduler_name: str | None = None, *extra: str, env: dict[str, str] | None = None) -> ShoalProcess:
        name = scheduler_name or f"shoal-{uuid.uuid4().hex[:6]}"
        p = ShoalProcess(cluster, name, tmp_path / f"shoal-{len(procs)}.log", list(extra), env=env or {})
        procs.append(p.start())
        return p

    yield start
    for p in procs:
        p.stop()


def pod_manifest(name: str, scheduler: str, *, gpus: int = 0, queue: str = "default-queue",
                 annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                 node: str | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "100Mi"}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "main", "image": "busybox", "resources": res}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue, **(labels or {})},
                         "annotations": annotations or {}},
            "spec": spec}


CLUSTER_KINDS = ("Queue", "Node", "Namespace", "PriorityClass", "Topology")


def create(kenv: KEnv, manifest: dict[str, Any], namespace: str | None = None) -> Any:
    """Create an object from a manifest dict in the test namespace (unless cluster-scoped)."""
    obj = codecs.from_dict(manifest)
    if manifest["kind"] in CLUSTER_KINDS:
        return kenv.client.create(obj)
    return kenv.client.create(obj, namespace=namespace or kenv.namespace)


def ensure_queue(client: Client, name: str, parent: str = "", gpu_quota: float = -1,
                 spec: dict[str, Any] | None = None) -> None:
    body = spec or {"resources": {r: {"quota": gpu_quota if r == "gpu" else -1, "limit": -1,
                                      "overQuotaWeight": 1} for r in ("cpu", "memory", "gpu")}}
    if parent:
        body = {**body, "parentQueue": parent}
    try:
        client.create(QueueRes(metadata={"name": name}, spec=body))
    except ApiError as e:
        if e.status.code != 409:
            raise


def pod_state(client: Client, name: str, namespace: str) -> tuple[str | None, str | None, Any]:
    """(nodeName, phase, PodScheduled condition or None)."""
    pod = client.get(Pod, name, namespace=namespace)
    cond = next((c for c in (pod.status.conditions or []) if c.type == "PodScheduled"), None) \
        if pod.status else None
    return pod.spec.nodeName, (pod.status.phase if pod.status else None), cond


def events_for(client: Client, name: str, namespace: str, reason: str | None = None) -> list[Any]:
    evs = client.list(Event, namespace=namespace, fields={"involvedObject.name": name})
    return [e for e in evs if reason is None or e.reason == reason]


def wait_until(probe: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

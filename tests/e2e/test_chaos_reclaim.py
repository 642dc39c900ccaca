"""Kills during a reclaim and GPU-sharing reservations (#19), watched by the invariant Monitor.

Two `shoal run` instances (leader election, `--gpu-sharing reservation` with the fake device plugin)
on 2 kwok nodes x 8 GPUs. A greedy queue (quota 8 GPUs) fills all 16: 3 gangs of 4 one-GPU pods and
8 half-GPU pods (4 shared GPUs, each with its reservation pod). Then a starved queue (quota 8) asks
for 2 gangs of 4: shoal must reclaim 8 GPUs from the greedy queue. The leader crashes right after
the reclaim's first eviction (SHOAL_FAILPOINT=evicted: its victim set evicted in part); the standby
must take over within 15 s and finish the reclaim, and is itself SIGKILLed at a seeded random moment
of it; each dead instance is restarted under a new identity. The Monitor (tests/e2e/invariants.py)
polls throughout: no GPU or GPU group over-committed, no pod on a missing node, every evicted pod
with its `Evicting` reason event, no gang partly bound for more than 30 s. At the end both starved
gangs are bound, each live shared GPU has exactly one reservation pod, and the device plugin never
had to serve a second reservation of one GPU. The control test shows the Monitor reports each of its
own findings.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Pod

from .cluster import KEnv
from .invariants import EVICTION_REASON, Monitor
from .scheduler_fixtures import (
    create,
    ensure_queue,
    pod_manifest,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)
from .sharing_fixtures import FakeDevicePlugin, device_plugin, reservation_devices  # noqa: F401

pytestmark = pytest.mark.e2e

SHARING = ("--gpu-sharing", "reservation", "--gpu-sharing-timeout", "20s")


def _gang(kenv: KEnv, scheduler: str, queue: str, gang: str, size: int) -> list[str]:
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": gang},
                  "spec": {"minMember": size, "queue": queue}})
    return [create(kenv, pod_manifest(f"{gang}-{i}", scheduler, gpus=1, queue=queue,
                                      annotations={"pod-group-name": gang})).metadata.name for i in range(size)]


def _running(kenv: KEnv, names: list[str]) -> bool:
    phase = {p.metadata.name: (p.status.phase if p.status else None) for p in kenv.client.list(
        Pod, namespace=kenv.namespace) if not p.metadata.deletionTimestamp}
    return all(phase.get(n) == "Running" for n in names)


def _evicting_events(kenv: KEnv) -> int:
    return sum(1 for e in kenv.client.list(Event, namespace=kenv.namespace) if e.reason == EVICTION_REASON)


def test_kills_during_a_reclaim_leave_every_eviction_explained(
        kenv: KEnv, shoal_runner: Any, device_plugin: FakeDevicePlugin) -> None:
    rng = random.Random(int(os.environ.get("SHOAL_CHAOS_SEED", "19")))
    nodes = kenv.add_gpu_nodes(2, gpus=8)
    kenv.wait_nodes_ready(nodes)
    suffix = kenv.node_prefix[-6:]
    greedy, starved = f"greedy-{suffix}", f"starved-{suffix}"
    for q in (greedy, starved):
        ensure_queue(kenv.client, q, gpu_quota=8)
    name, lease = f"shoal-{suffix}", f"lease-{suffix}"
    procs: dict[str, Any] = {}

    def start(ident: str, env: dict[str, str] | None = None) -> None:
        procs[ident] = shoal_runner(name, "--leader-elect", "--lease-name", lease, "--identity", ident, *SHARING,
                                    env=env)

    def kill_leader(step: int) -> None:
        holder = wait_until(lambda: _leader(kenv, lease, procs), 30, "a leader")
        procs.pop(holder).kill()
        start(f"{holder[0]}-{step}")

    start("a-0", {"SHOAL_FAILPOINT": "evicted"})  # a crashes right after the reclaim's first eviction
    wait_until(lambda: _leader(kenv, lease, procs) == "a-0", 30, "a-0 leading")
    start("b-0")
    gangs = {f"g{i}": 4 for i in range(3)} | {f"s{i}": 4 for i in range(2)}
    monitor = Monitor(kenv.cluster.client, kenv.namespace, gangs, grace=30.0).start()
    hogs = [p for g in ("g0", "g1", "g2") for p in _gang(kenv, name, greedy, g, 4)]
    hogs += [create(kenv, pod_manifest(f"half-{i}", name, queue=greedy, annotations={"gpu-fraction": "0.5"}))
             .metadata.name for i in range(8)]
    wait_until(lambda: _running(kenv, hogs), 90, "the greedy queue holding all 16 GPUs")
    wait_until(lambda: all("caches synced" in p.tail(10**6) for p in procs.values()), 60, "b-0 synced")
    wanted = [p for g in ("s0", "s1") for p in _gang(kenv, name, starved, g, 4)]
    crashed = wait_until(lambda: procs["a-0"].proc.poll() is not None and time.monotonic(), 60,
                         "a-0 crashed after its first eviction")
    assert procs.pop("a-0").proc.returncode == 17 and _evicting_events(kenv) >= 1
    start("a-1")
    took = wait_until(lambda: _leader(kenv, lease, procs) and time.monotonic() - crashed, 30, "a new leader")
    assert took <= 15, f"the reclaim's leader was replaced only {took:.1f}s after its crash"
    time.sleep(rng.uniform(0.0, 1.5))  # then a SIGKILL at a random moment of the new leader's reclaim
    kill_leader(2)
    wait_until(lambda: _running(kenv, wanted), 90, "both starved gangs Running after the reclaim")
    time.sleep(2)  # a late over-commit or eviction would show now
    found = monitor.stop()
    assert found == [], found
    assert monitor.evicted, "the reclaim evicted nothing"
    assert monitor.polls > 20
    devices = reservation_devices(kenv)
    assert all(len(d) == 1 for d in devices.values()), devices
    assert device_plugin.errors == [], device_plugin.errors


def _leader(kenv: KEnv, lease: str, procs: dict[str, Any]) -> str | None:
    try:
        holder = kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity
    except Exception:
        return None
    return holder if holder in procs else None


def test_the_monitor_sees_unexplained_evictions_and_lingering_partial_gangs(kenv: KEnv) -> None:
    """The control: pods placed by hand; one deleted with no event, one with its reason event, one
    the test says it deletes itself; a gang of 3 left with 1 pod bound past a 1 s grace."""
    node = kenv.add_gpu_nodes(1, gpus=4)[0]
    kenv.wait_nodes_ready([node])
    uids = {n: create(kenv, pod_manifest(n, "none", gpus=1, node=node,
                                         annotations={"pod-group-name": "g" if n == "lonely" else n}))
            .metadata.uid for n in ("silent", "told", "mine", "lonely")}
    monitor = Monitor(kenv.cluster.client, kenv.namespace, {"g": 3}, grace=1.0, interval=0.2).start()
    wait_until(lambda: monitor.polls >= 2, 10, "the monitor's first looks")
    kenv.client.create(Event(
        metadata=ObjectMeta(generateName="told.", namespace=kenv.namespace), reason=EVICTION_REASON,
        message="reclaim: test", type="Normal", source=EventSource(component="test"),
        involvedObject=ObjectReference(kind="Pod", name="told", namespace=kenv.namespace, uid=uids["told"])))
    monitor.expect_deleted(["mine"])
    for n in ("silent", "told", "mine"):
        kenv.client.delete(Pod, n, namespace=kenv.namespace, grace_period=0)
    time.sleep(1.5)
    found = monitor.stop()
    assert "pod silent was evicted with no reason event" in found
    assert any(v.startswith("gang g partly bound (1 of 3) for more than 1s") for v in found), found
    assert len(found) == 2, found
    assert set(monitor.evicted.values()) == {"silent", "told"}

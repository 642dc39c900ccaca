"""The short chaos run (#19): faults at random points while gangs and GPU-fraction pods are bound.

Two `shoal run` instances share one leader lease. While 5 gangs of 12 one-GPU pods and 12 half-GPU
pods are being placed on 56 GPUs (room for 4 gangs and the halves packed on 6 shared GPUs), at
random moments (seeded; SHOAL_CHAOS_SEED overrides): the leader is SIGKILLed (twice) and restarted
under a new identity, the lease is taken away (another holder written into it), the standby is
SIGKILLed. After every fault the checker (tests/e2e/invariants.py, API reads only) finds no GPU or
GPU-fraction group over-committed and no pod on a missing node, and a live instance holds the lease
within 15 s. At the end: every pod bound or told why it waits, no gang partly bound, 4 gangs and
every half-GPU pod bound, and a new pod is bound. API server and etcd restarts and forced watch
expiry: test_chaos_control_plane.py; kills during a reclaim with the eviction-reason Monitor:
test_chaos_reclaim.py; the long run of 20 kills: bench/chaos.py (docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube.resources.coordination_v1 import Lease

from .cluster import KEnv
from .invariants import partial_gangs, violations
from .scheduler_fixtures import (
    create,
    ensure_queue,
    pod_manifest,
    pod_state,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)

pytestmark = pytest.mark.e2e

GANGS, GANG_SIZE, FRACTIONS = 5, 12, 12
FAULTS = ("kill-leader", "steal-lease", "kill-leader", "kill-standby")


def _workload(kenv: KEnv, scheduler: str, queue: str) -> tuple[list[str], dict[str, int]]:
    names, gangs = [], {}
    for g in range(GANGS):
        gang = f"gang-{g}"
        create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": gang},
                      "spec": {"minMember": GANG_SIZE, "queue": queue}})
        gangs[gang] = GANG_SIZE
        for i in range(GANG_SIZE):
            names.append(create(kenv, pod_manifest(f"{gang}-{i}", scheduler, gpus=1, queue=queue,
                                                   annotations={"pod-group-name": gang})).metadata.name)
    for i in range(FRACTIONS):
        names.append(create(kenv, pod_manifest(f"half-{i}", scheduler, queue=queue,
                                               annotations={"gpu-fraction": "0.5"})).metadata.name)
    return names, gangs


def _holder(kenv: KEnv, lease: str) -> str | None:
    try:
        return kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity
    except Exception:
        return None


def _steal(kenv: KEnv, lease: str) -> None:
    """Write another holder into the lease, as a competing instance that then dies would."""
    obj = kenv.client.get(Lease, lease, namespace="shoal-system")
    obj.spec.holderIdentity = "intruder"
    obj.spec.renewTime = datetime.now(UTC)
    kenv.client.replace(obj)


def test_faults_at_random_points_break_no_invariant(kenv: KEnv, shoal_runner: Any) -> None:
    rng = random.Random(int(os.environ.get("SHOAL_CHAOS_SEED", "19")))
    nodes = kenv.add_gpu_nodes(7, gpus=8)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    name = f"shoal-{kenv.node_prefix[-6:]}"
    lease = f"lease-{name}"
    procs: dict[str, Any] = {}

    def start(ident: str) -> None:
        procs[ident] = shoal_runner(name, "--leader-elect", "--lease-name", lease, "--identity", ident)

    start("a-0")
    start("b-0")
    pods, gangs = _workload(kenv, name, queue)
    for step, fault in enumerate(FAULTS):
        # A fault strikes a running system: every instance has listed (a restart under load takes a while).
        wait_until(lambda: all("caches synced" in p.tail(10**6) for p in procs.values()), 120,
                   "every instance synced")
        holder = wait_until(lambda: _holder(kenv, lease) in procs and _holder(kenv, lease), 30, "a leader")
        time.sleep(rng.uniform(0.0, 1.5))  # a random point of the binds in flight
        struck = time.monotonic()
        if fault == "steal-lease":
            _steal(kenv, lease)
        else:
            victim = holder if fault == "kill-leader" else next(i for i in procs if i != holder)
            procs.pop(victim).kill()
            start(f"{victim[0]}-{step + 1}")
        assert violations(kenv.client, kenv.namespace) == [], f"after {fault} (step {step})"
        if fault != "kill-standby":
            took = wait_until(lambda s=struck: _holder(kenv, lease) in procs and time.monotonic() - s, 30,
                              f"a live leader after {fault}")
            assert took <= 15, f"{fault}: a leader took over only {took:.1f}s later"

    def settled() -> bool:
        states = [pod_state(kenv.client, p, kenv.namespace) for p in pods]
        return all(n is not None or (c is not None and c.status == "False") for n, _, c in states)

    wait_until(settled, 90, "every pod bound or told why it waits")
    time.sleep(2)
    assert violations(kenv.client, kenv.namespace) == []
    assert partial_gangs(kenv.client, kenv.namespace, gangs) == {}
    placed = {p for p in pods if pod_state(kenv.client, p, kenv.namespace)[0]}
    assert sum(f"{g}-0" in placed for g in gangs) == GANGS - 1, sorted(placed)
    assert all(f"half-{i}" in placed for i in range(FRACTIONS)), sorted(placed)
    create(kenv, pod_manifest("after", name, queue=queue))
    wait_until(lambda: pod_state(kenv.client, "after", kenv.namespace)[0], 30, "scheduling resumed")


def test_the_checker_sees_each_broken_invariant(kenv: KEnv) -> None:
    """The control: pods placed by hand (nodeName set) over-commit a node's GPUs and a shared GPU
    group and sit on a missing node; a gang of 3 has 1 pod bound."""
    node = kenv.add_gpu_nodes(1, gpus=2)[0]
    kenv.wait_nodes_ready([node])
    assert violations(kenv.client, kenv.namespace) == []
    create(kenv, pod_manifest("whole", "none", gpus=2, node=node, annotations={"pod-group-name": "g"}))
    for i in range(3):
        create(kenv, pod_manifest(f"third-{i}", "none", node=node, labels={"runai-gpu-group": "grp"},
                                  annotations={"gpu-fraction": "0.4"}))
    create(kenv, pod_manifest("lost", "none", node=f"{node}-missing"))
    found = violations(kenv.client, kenv.namespace)
    assert len(found) == 3, found
    assert any("missing node" in v for v in found) and any("holds 1.20" in v for v in found)
    assert any(f"node {node}: 2 whole GPUs + 1 shared devices > 2" in v for v in found)
    assert partial_gangs(kenv.client, kenv.namespace, {"g": 3}) == {"g": 1}

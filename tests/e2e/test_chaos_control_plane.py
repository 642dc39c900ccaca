"""Control-plane faults while shoal binds (#19): kube-apiserver restart, etcd restart, 410 Gone.

Two `shoal run` instances share a leader lease. For each fault a wave (a gang of 6 one-GPU pods and
4 half-GPU pods) is created, and at a seeded random moment of its binds (SHOAL_CHAOS_SEED) the
fault strikes: kube-apiserver SIGKILLed and started again (same port, same etcd), etcd SIGKILLed
and started again (same data dir), or every watch forced into 410 Gone (etcd compacted to its
current revision, then restarted: the API server's watch cache re-lists and answers every client
watch resumed from an older resourceVersion with 410). After each: the checker
(tests/e2e/invariants.py, API reads only) finds nothing broken, a live instance holds the lease
within 15 s, the wave is bound whole, every pod bound before the fault is
still there on the same node (nothing accepted was lost), and a pod created after the fault is
bound (scheduling resumed). After the 410 fault the leader's log shows its informers (pods, nodes,
PodGroups, Queues) re-listing.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .invariants import partial_gangs, violations
from .scheduler_fixtures import (
    create,
    ensure_queue,
    pod_manifest,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)

pytestmark = pytest.mark.e2e

FAULTS = ("restart-apiserver", "restart-etcd", "expire-watches")
GANG, HALVES = 6, 4


def _wave(kenv: KEnv, scheduler: str, queue: str, w: int) -> tuple[list[str], dict[str, int]]:
    gang = f"w{w}"
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": gang},
                  "spec": {"minMember": GANG, "queue": queue}})
    names = [create(kenv, pod_manifest(f"{gang}-{i}", scheduler, gpus=1, queue=queue,
                                       annotations={"pod-group-name": gang})).metadata.name for i in range(GANG)]
    names += [create(kenv, pod_manifest(f"{gang}-half-{i}", scheduler, queue=queue,
                                        annotations={"gpu-fraction": "0.5"})).metadata.name for i in range(HALVES)]
    return names, {gang: GANG}


def _placements(kenv: KEnv) -> dict[str, str | None]:
    return {p.metadata.name: p.spec.nodeName for p in kenv.client.list(Pod, namespace=kenv.namespace)}


def _holder(kenv: KEnv, lease: str) -> str | None:
    try:
        return kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity
    except Exception:  # the API server may still be coming back
        return None


def test_control_plane_faults_break_nothing_and_scheduling_resumes(kenv: KEnv, shoal_runner: Any) -> None:
    rng = random.Random(int(os.environ.get("SHOAL_CHAOS_SEED", "19")))
    nodes = kenv.add_gpu_nodes(4, gpus=8)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    name = f"shoal-{kenv.node_prefix[-6:]}"
    lease = f"lease-{name}"
    procs = {ident: shoal_runner(name, "--leader-elect", "--lease-name", lease, "--identity", ident)
             for ident in ("a", "b")}
    cluster, gangs, created = kenv.cluster, {}, []
    wait_until(lambda: all("caches synced" in p.tail(10**6) for p in procs.values()), 120, "every instance synced")
    for w, fault in enumerate(FAULTS):
        before = {n: node for n, node in _placements(kenv).items() if node}
        leader = wait_until(lambda: _holder(kenv, lease) in procs and _holder(kenv, lease), 30, "a leader")
        log_mark = len(procs[leader].tail(10**7))
        names, wave_gangs = _wave(kenv, name, queue, w)
        created += names
        gangs.update(wave_gangs)
        time.sleep(rng.uniform(0.0, 1.0))  # a random point of the wave's binds
        struck = time.monotonic()
        if fault == "restart-apiserver":
            cluster.restart("kube-apiserver")
        elif fault == "restart-etcd":
            cluster.restart("etcd")
        else:
            cluster.expire_watches([p.proc.pid for p in procs.values() if p.proc is not None])
        assert violations(kenv.client, kenv.namespace) == [], f"after {fault}"
        took = wait_until(lambda s=struck: _holder(kenv, lease) in procs and time.monotonic() - s, 30,
                          f"a live leader after {fault}")
        assert took <= 15, f"{fault}: a leader held the lease only {took:.1f}s after the fault"
        names.append(create(kenv, pod_manifest(f"w{w}-after", name, gpus=1, queue=queue)).metadata.name)
        created.append(names[-1])
        wait_until(lambda ns=names: all(_placements(kenv).get(n) for n in ns), 60,
                   f"wave {w} and a pod created after {fault} bound")
        after = _placements(kenv)
        assert set(created) <= set(after), f"{fault}: pods lost: {sorted(set(created) - set(after))}"
        moved = {n: (node, after[n]) for n, node in before.items() if after.get(n) != node}
        assert moved == {}, f"{fault}: bound pods lost or moved: {moved}"
        assert violations(kenv.client, kenv.namespace) == [], f"after {fault}, wave {w} bound"
        assert partial_gangs(kenv.client, kenv.namespace, gangs) == {}
        if fault == "expire-watches":
            def relisted(p: Any = procs[leader], mark: int = log_mark) -> bool:
                kinds = {line.split(": ")[1] for line in p.tail(10**7)[mark:].splitlines()
                         if "expired; re-listing" in line}
                return {"pods", "nodes", "podgroups", "queues"} <= kinds

            wait_until(relisted, 30, "the leader's informers re-listing after 410 Gone")

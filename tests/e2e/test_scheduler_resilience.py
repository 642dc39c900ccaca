"""`shoal run` crash and failover: kill mid-gang, leader election takeover, PDB-refused eviction."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from shoal.framework.decisions import Decisions, Evict
from shoal.kube.applier import Applier
from shoal.kube.cache import ClusterCache
from shoal.kube.client import PODS, KubeClient
from shoal.kube.informer import Informer

from .cluster import KEnv
from .scheduler_fixtures import (
    create,
    ensure_queue,
    pod_manifest,
    pod_state,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)

pytestmark = pytest.mark.e2e


def _gang(kenv: KEnv, scheduler: str, queue: str, name: str, size: int) -> list[str]:
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": name}, "spec": {"minMember": size, "queue": queue}})
    names = []
    for i in range(size):
        m = pod_manifest(f"{name}-{i}", scheduler, gpus=1, queue=queue, annotations={"pod-group-name": name})
        create(kenv, m)
        names.append(m["metadata"]["name"])
    return names


def _gpu_use(kenv: KEnv) -> Counter[str]:
    use: Counter[str] = Counter()
    for p in kenv.client.list(Pod, namespace=kenv.namespace):
        if p.spec.nodeName:
            use[p.spec.nodeName] += int((p.spec.containers[0].resources.limits or {}).get("nvidia.com/gpu", 0))
    return use


def test_kill_while_binding_a_large_gang_never_double_books(kenv: KEnv, shoal_runner: Any) -> None:
    nodes = kenv.add_gpu_nodes(8, gpus=8)
    kenv.wait_nodes_ready(nodes)
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    name = f"shoal-{kenv.node_prefix[-6:]}"
    big = _gang(kenv, name, queue, "big", 48)
    rival = _gang(kenv, name, queue, "rival", 48)  # 96 GPUs asked, 64 exist: one gang must wait
    first = shoal_runner(name)
    wait_until(lambda: any(n for n in _gpu_use(kenv).values()), 30, "the first binds", interval=0.02)
    first.kill()
    bound_at_kill = sum(_gpu_use(kenv).values())
    shoal_runner(name)

    def settled() -> bool:
        states = [pod_state(kenv.client, p, kenv.namespace) for p in big + rival]
        return all(n is not None or (c is not None and c.status == "False" and c.reason == "Unschedulable")
                   for n, _, c in states)

    wait_until(settled, 60, "every pod bound or pending with a reason")
    time.sleep(2)  # any late double-booking would show now
    use = _gpu_use(kenv)
    assert all(v <= 8 for v in use.values()), f"a GPU was promised twice: {use} (bound at kill {bound_at_kill})"
    bound = {g: sum(1 for p in pods if pod_state(kenv.client, p, kenv.namespace)[0]) for g, pods in
             (("big", big), ("rival", rival))}
    assert sorted(bound.values()) == [0, 48], f"a gang is partly bound: {bound}"


def test_leader_failover_within_15s(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=8)
    kenv.wait_nodes_ready([node])
    queue = f"q-{kenv.node_prefix[-6:]}"
    ensure_queue(kenv.client, queue)
    name = f"shoal-{kenv.node_prefix[-6:]}"
    lease = f"lease-{name}"
    procs = {ident: shoal_runner(name, "--leader-elect", "--lease-name", lease, "--identity", ident)
             for ident in ("a", "b")}
    create(kenv, pod_manifest("before", name, gpus=1, queue=queue))
    wait_until(lambda: pod_state(kenv.client, "before", kenv.namespace)[0], 30, "first pod bound")
    holder = kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity
    assert holder in procs
    procs[holder].kill()
    killed = time.monotonic()
    create(kenv, pod_manifest("after", name, gpus=1, queue=queue))
    wait_until(lambda: pod_state(kenv.client, "after", kenv.namespace)[0], 20, "pod bound by the standby")
    took = time.monotonic() - killed
    assert took <= 15, f"failover took {took:.1f}s"
    survivor = next(i for i in procs if i != holder)
    assert kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity == survivor


def test_eviction_refused_by_pdb_fails_the_victim_set_not_the_scheduler(kenv: KEnv) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=2)
    kenv.wait_nodes_ready([node])
    for i in range(2):
        create(kenv, pod_manifest(f"victim-{i}", "nobody", gpus=1, node=node, labels={"app": "guarded"}))
    create(kenv, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                  "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})
    wait_until(lambda: all(pod_state(kenv.client, f"victim-{i}", kenv.namespace)[1] == "Running"
                           for i in range(2)), 30, "victims Running")
    # minAvailable 2 of 2 allows no disruption whether or not a disruption controller has observed the
    # PDB yet (an unobserved PDB also refuses evictions), so the first eviction must be refused.
    stats = asyncio.run(_evict_both(kenv))
    assert stats.evict_refused == 1 and stats.evicted == 0, stats
    for i in range(2):
        assert pod_state(kenv.client, f"victim-{i}", kenv.namespace)[0] == node


async def _evict_both(kenv: KEnv) -> Any:
    client = KubeClient(str(kenv.cluster.scheduler_kubeconfig))
    try:
        cache = ClusterCache("nobody", time.time)
        inf = Informer(client, PODS, cache.on_pod)
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(inf.synced.wait(), 30)
        task.cancel()
        # The victims carry our scheduler name, so the cache holds them as ours.
        victims = sorted(uid for uid, p in cache.pods.items() if p.namespace == kenv.namespace)
        assert len(victims) == 2
        d = Decisions(evictions=[Evict(uid, cache.pods[uid].name, kenv.namespace, "victims", cache.pods[uid].node or "",
                                       "reclaim", "test", preemptor="ns/preemptor") for uid in victims])
        return await Applier(client, cache, "nobody").apply(d)
    finally:
        await client.close()


def test_reclaim_gives_a_queue_under_its_share_gpus_back(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=4)
    kenv.wait_nodes_ready([node])
    suffix = kenv.node_prefix[-6:]
    greedy, starved = f"greedy-{suffix}", f"starved-{suffix}"
    for q in (greedy, starved):
        ensure_queue(kenv.client, q, gpu_quota=2)
    sched = shoal_runner()
    hogs = [f"hog-{i}" for i in range(4)]
    for name in hogs:
        create(kenv, pod_manifest(name, sched.scheduler_name, gpus=1, queue=greedy))
    wait_until(lambda: all(pod_state(kenv.client, n, kenv.namespace)[1] == "Running" for n in hogs), 30,
               "the greedy queue holding all 4 GPUs")
    for i in range(2):
        create(kenv, pod_manifest(f"fair-{i}", sched.scheduler_name, gpus=1, queue=starved))
    wait_until(lambda: all(pod_state(kenv.client, f"fair-{i}", kenv.namespace)[1] == "Running"
                           for i in range(2)), 60, "the starved queue's pods Running after reclaim")
    left = [p for p in kenv.client.list(Pod, namespace=kenv.namespace) if p.metadata.name.startswith("hog-")]
    assert len(left) == 2, [p.metadata.name for p in left]  # the greedy queue keeps its quota
    assert sum(_gpu_use(kenv).values()) <= 4

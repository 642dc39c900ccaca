"""Two scheduling shards (`shoal run --node-pool`) on one cluster: each binds only its pool's pods
onto its pool's nodes, holds its own lease, and never touches the other pool's pods."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv
from .scheduler_fixtures import (
    PodGroupRes,
    QueueRes,
    create,
    events_for,
    pod_manifest,
    pod_state,
    shoal_runner,  # noqa: F401  (fixture)
    wait_until,
)

pytestmark = pytest.mark.e2e

KEY = "kai.scheduler/node-pool"


def _queue(kenv: KEnv, name: str, pool: str) -> None:
    body = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "memory", "gpu")}
    kenv.client.create(QueueRes(metadata={"name": name, "labels": {KEY: pool}}, spec={"resources": body}))


def _gang(kenv: KEnv, scheduler: str, queue: str, pool: str, name: str, size: int) -> list[str]:
    create(kenv, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": name, "labels": {KEY: pool}}, "spec": {"minMember": size, "queue": queue}})
    for i in range(size):
        create(kenv, pod_manifest(f"{name}-{i}", scheduler, gpus=1, queue=queue,
                                  annotations={"pod-group-name": name}, labels={KEY: pool}))
    return [f"{name}-{i}" for i in range(size)]


def _holder(kenv: KEnv, name: str) -> str | None:
    try:
        return kenv.client.get(Lease, name, namespace="shoal-system").spec.holderIdentity
    except ApiError:
        return None


def _unschedulable(kenv: KEnv, name: str) -> bool:
    node, _, cond = pod_state(kenv.client, name, kenv.namespace)
    return node is None and cond is not None and cond.status == "False"


def test_two_shards_split_the_cluster(kenv: KEnv, shoal_runner: Any) -> None:
    tag = uuid.uuid4().hex[:6]
    pool_a, pool_b = f"a-{tag}", f"b-{tag}"
    nodes_a = kenv.add_gpu_nodes(1, gpus=2, labels={KEY: pool_a})
    nodes_b = kenv.add_gpu_nodes(2, gpus=2, labels={KEY: pool_b})
    kenv.wait_nodes_ready(nodes_a + nodes_b)
    qa, qb = f"qa-{tag}", f"qb-{tag}"
    _queue(kenv, qa, pool_a)
    _queue(kenv, qb, pool_b)
    name = f"shoal-{tag}"
    shoal_runner(name, "--node-pool", pool_a, "--identity", "shard-a")
    shoal_runner(name, "--node-pool", pool_b, "--identity", "shard-b")

    ga = _gang(kenv, name, qa, pool_a, "ga", 2)
    gb = _gang(kenv, name, qb, pool_b, "gb", 2)
    # Three GPUs in pool a, which has two (taken by ga): it must wait, though pool b has two free.
    big = _gang(kenv, name, qa, pool_a, "big", 3)
    # No PodGroup: shard b's pod grouper makes one for it (labelled with its pool), shard a's does not.
    create(kenv, pod_manifest("solo-b", name, gpus=1, queue=qb, labels={KEY: pool_b}))

    def placed(pods: list[str]) -> dict[str, str] | None:
        nodes = {p: pod_state(kenv.client, p, kenv.namespace)[0] for p in pods}
        return nodes if all(nodes.values()) else None  # type: ignore[return-value]

    on_a = wait_until(lambda: placed(ga), 60, "gang ga bound")
    on_b = wait_until(lambda: placed([*gb, "solo-b"]), 60, "gang gb and solo-b bound")
    assert set(on_a.values()) <= set(nodes_a)
    assert set(on_b.values()) <= set(nodes_b)
    for p in big:
        wait_until(lambda p=p: _unschedulable(kenv, p), 60, f"{p} unschedulable in pool a")
    assert placed(big) is None and not any(pod_state(kenv.client, p, kenv.namespace)[0] for p in big)

    solo = kenv.client.get(Pod, "solo-b", namespace=kenv.namespace)
    group = kenv.client.get(PodGroupRes, solo.metadata.annotations["pod-group-name"], namespace=kenv.namespace)
    assert group.metadata.labels[KEY] == pool_b

    # Each shard leads its own lease, named for its pool.
    assert wait_until(lambda: _holder(kenv, f"{name}-{pool_a}"), 15, "shard a's lease") == "shard-a"
    assert wait_until(lambda: _holder(kenv, f"{name}-{pool_b}"), 15, "shard b's lease") == "shard-b"
    assert _holder(kenv, name) is None

    # Only shard a speaks about pool a's pods, only shard b about pool b's.
    for pods, mine in ((big, f"{name}-{pool_a}"), ([*gb, "solo-b"], f"{name}-{pool_b}")):
        for p in pods:
            sources = {e.reportingInstance or (e.source.component if e.source else "")
                       for e in events_for(kenv.client, p, kenv.namespace)}
            assert {s for s in sources if s and s.startswith(name)} <= {mine}, (p, sources)
    assert any(events_for(kenv.client, p, kenv.namespace, "FailedScheduling") for p in big)

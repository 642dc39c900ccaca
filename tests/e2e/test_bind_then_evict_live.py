"""A pod bound and evicted in one cycle, live (docs/kubernetes.md, "Binds and evictions of one cycle").

One kwok node of 4 GPUs holds `run-a` (2 GPUs, priority `train`). Two gangs wait in the same queue:
`pend-h` (4 GPUs, priority `build`) and `pend-l` (1 GPU, `train`). In shoal's first cycle, as in
KAI's session (the kai-oracle decides this layout the same way): allocate cannot fit `pend-h` and
binds `pend-l` into the free GPUs; preempt then evicts `run-a` *and the just-bound `pend-l`* for
`pend-h`. The service must evict `pend-l` in that same cycle, after its bind: the cycle's log line
shows one bind and two evictions (not `1 unbound skipped`), `pend-l` is deleted by its eviction and
`pend-h` runs on the node. On loopback the watch reports the bind before the evictions are sent, so
this does not reproduce the lagging watch under which `ClusterCache.node_of` once dropped such an
eviction; tests/kube/test_applier.py pins that race with the watch held back.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from .cluster import KEnv, eventually
from .invariants import EVICTION_REASON
from .scheduler_fixtures import PodGroupRes, create, ensure_queue, events_for, pod_manifest, shoal_runner  # noqa: F401

pytestmark = pytest.mark.e2e


def _gang(kenv: KEnv, name: str, scheduler: str, queue: str, gpus: int, priority: str,
          node: str | None = None) -> None:
    kenv.client.create(PodGroupRes(metadata={"name": name, "namespace": kenv.namespace},
                                   spec={"minMember": 1, "queue": queue, "priorityClassName": priority}))
    m = pod_manifest(f"{name}-0", scheduler, gpus=gpus, queue=queue, annotations={"pod-group-name": name},
                     node=node)
    m["spec"]["priorityClassName"] = priority
    create(kenv, m)


def _pod(kenv: KEnv, name: str) -> Any:
    return next((p for p in kenv.client.list(Pod, namespace=kenv.namespace) if p.metadata.name == name), None)


def _running_on(kenv: KEnv, name: str, node: str) -> bool:
    p = _pod(kenv, name)
    return bool(p is not None and not p.metadata.deletionTimestamp and p.spec.nodeName == node
                and p.status is not None and p.status.phase == "Running")


def test_a_pod_bound_by_allocate_is_evicted_by_preempt_in_the_same_cycle(kenv: KEnv, shoal_runner: Any) -> None:
    (node,) = kenv.add_gpu_nodes(1, gpus=4)
    kenv.wait_nodes_ready([node])
    sfx = kenv.node_prefix[-6:]
    scheduler, queue = f"be-{sfx}", f"be-{sfx}"
    ensure_queue(kenv.client, queue, gpu_quota=4)
    _gang(kenv, "run-a", scheduler, queue, 2, "train", node=node)
    eventually(lambda: _running_on(kenv, "run-a-0", node), 30, what="run-a running on its node")
    # Both waiting gangs exist before shoal starts, so its first cycle sees them together.
    _gang(kenv, "pend-h", scheduler, queue, 4, "build")
    _gang(kenv, "pend-l", scheduler, queue, 1, "train")
    proc = shoal_runner(scheduler, "--no-leader-elect")

    try:
        eventually(lambda: _running_on(kenv, "pend-h-0", node), 60, what=f"pend-h running on {node}")
    except AssertionError as e:
        raise AssertionError(f"{e}\nshoal's log:\n{proc.tail()}") from None
    log = proc.tail(200_000)
    # The first cycle that binds binds pend-l and evicts two pods: run-a and pend-l itself.
    applied = re.findall(r"cycle (\d+) applied .*?: bound (\d+) \(failed (\d+)\), evicted (\d+) \(refused (\d+), "
                         r"(\d+) unbound skipped\)", log)
    assert applied, log[-4000:]
    first = applied[0]
    assert first[1:] == ("1", "0", "2", "0", "0"), f"first applied cycle: {first}\n{log[-4000:]}"
    for victim in ("run-a-0", "pend-l-0"):
        assert events_for(kenv.client, victim, kenv.namespace, EVICTION_REASON), f"{victim}: no Evicting event"
    # The one bind of that cycle can only be pend-l's (pend-h cannot fit before the evictions),
    # and its eviction deleted it.
    eventually(lambda: _pod(kenv, "pend-l-0") is None or bool(_pod(kenv, "pend-l-0").metadata.deletionTimestamp),
               30, what="pend-l-0 deleted by its eviction")
    assert "bind" not in " ".join(line for line in log.splitlines() if "WARNING" in line).lower(), log[-4000:]

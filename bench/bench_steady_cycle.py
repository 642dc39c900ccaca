"""The live scheduler's steady cycle at scale, without an API server (#19).

    python bench/bench_steady_cycle.py [--nodes 5000] [--pods 50000] [--cycles 3]

The cluster of `bench_scale.py`'s last step (NODES kwok-like nodes x 8 GPUs holding PODS - 2,000
running pods: gangs of 8 one-GPU pods and half-GPU pods with their GPU groups, 10 queues) is fed as
informer events through the live cache (`ClusterCache`, the same decoding as `shoal run`); then
the cycle `shoal run` runs when nothing changed is timed, part by part, in CPU seconds of this
process (`time.process_time`, so a busy machine inflates it less than wall time): the snapshot
from the cache, session open (and its parts), each default action, session close.
`bench_scale.py` measures the same cycle in a live service, where its wall time also counts
waiting for a CPU.

With `--pools K` the nodes are split into K node pools (`kai.scheduler/node-pool` = p0..pK-1, by
node index modulo K; each gang's PodGroup and each half-GPU pod labelled with its node's pool, the queues
with p0) and the cycle of the shard serving p0 (`--node-pool p0`) is timed: its cache fed through
the shard's filters as `shoal run --node-pool p0` feeds it (all pods, its pool's nodes, queues and
PodGroups), its snapshot narrowed to the pool.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import shoal.framework.session as session_mod
from bench_scale import GPUS, N_QUEUES, SCHED, layout, node, pod, podgroup
from shoal.cycle import close_session, open_session, paused_gc, run_actions
from shoal.framework.config import SchedulerConfig
from shoal.kube.cache import ClusterCache
from shoal.kube.shard import DEFAULT_NODE_POOL_LABEL, Shard

PARTS = ("_build_jobs", "_place_running_tasks", "_account_queues", "sort_tasks")


def fill(nodes: int, pods: int, arrivals: int = 2000, pools: int = 1) -> tuple[ClusterCache, Shard]:
    """The cache of `shoal run` (of `--node-pool p0` when `pools` > 1) and its shard."""
    shard = Shard(DEFAULT_NODE_POOL_LABEL, "p0") if pools > 1 else Shard()
    cache = ClusterCache(SCHED, lambda: 1000.0)
    on_queue, on_node, on_podgroup = (shard.guard(h) for h in (cache.on_queue, cache.on_node, cache.on_podgroup))

    def pooled(obj: dict[str, Any], i: int) -> dict[str, Any]:
        if pools > 1:
            obj["metadata"].setdefault("labels", {})[DEFAULT_NODE_POOL_LABEL] = f"p{i % pools}"
        return obj

    res = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "memory", "gpu")}
    on_queue("ADDED", None, pooled({"metadata": {"name": "scale-root", "uid": "root"}, "spec": {"resources": res}}, 0))
    for q in range(N_QUEUES):
        on_queue("ADDED", None, pooled({"metadata": {"name": f"q-{q}", "uid": f"q{q}"},
                                        "spec": {"resources": res, "parentQueue": "scale-root"}}, 0))
    for i in range(nodes):
        obj = pooled(node(i), i)
        obj["metadata"]["uid"] = f"n{i}"
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        on_node("ADDED", None, obj)

    def running(obj: dict[str, Any], i: int) -> dict[str, Any]:
        obj["metadata"].update(namespace="scale", uid=obj["metadata"]["name"], resourceVersion="1")
        obj["status"] = {"phase": "Running"}
        return pooled(obj, i)

    gangs, halves, _ = layout(nodes, pods - arrivals, arrivals)
    for k in range(gangs):
        name, q = f"g-{k}", k % N_QUEUES
        group = pooled(podgroup(name, q, GPUS), k)
        group["metadata"].update(namespace="scale", uid=name)
        on_podgroup("ADDED", None, group)
        for j in range(GPUS):
            cache.on_pod("ADDED", None, running(pod(f"{name}-{j}", q, node_name=f"scale-{k:05d}", group=name), k))
    for k in range(halves):
        i = gangs + k
        for j in range(2 * GPUS):
            cache.on_pod("ADDED", None, running(pod(f"h-{k}-{j}", (k + j) % N_QUEUES, node_name=f"scale-{i:05d}",
                                                    half=True, gpu_group=f"pre-{i}-{j // 2}"), i))
    return cache, shard


def timed(times: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            times[name] = times.get(name, 0.0) + time.process_time() - t
    return wrapper


def cycle(cache: ClusterCache, shard: Shard, config: SchedulerConfig, times: dict[str, float]) -> None:
    t = time.process_time()
    snapshot = shard.narrow(cache.snapshot())
    times["snapshot"] = times.get("snapshot", 0.0) + time.process_time() - t
    with paused_gc():
        ssn = timed(times, "session open", open_session)(snapshot, config)
        for action in config.actions:
            timed(times, action, run_actions)(ssn, [action])
        timed(times, "session close", close_session)(ssn)
    ssn.release()
    times["total"] = times.get("total", 0.0) + time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--pools", type=int, default=1, help="split into this many node pools; time pool p0's shard")
    args = ap.parse_args()
    t = time.process_time()
    cache, shard = fill(args.nodes, args.pods, pools=args.pools)
    print(f"{len(cache.nodes)} nodes, {len(cache.pods)} running pods, {len(cache.podgroups)} PodGroups in the "
          f"cache{' of shard ' + shard.pool if shard.active else ''}, filled in {time.process_time() - t:.1f} CPU s")
    times: dict[str, float] = {}
    for part in PARTS:  # session open's parts, as methods of the session
        setattr(session_mod.Session, part, timed(times, f"  {part}", getattr(session_mod.Session, part)))
    config = SchedulerConfig()
    for _ in range(args.cycles):
        cycle(cache, shard, config, times)
    print(f"steady cycle, CPU seconds per cycle (mean of {args.cycles}):")
    order = ["total", "snapshot", "session open", *(f"  {p}" for p in PARTS), *config.actions, "session close"]
    for name in order:
        print(f"  {name:<28}{times.get(name, 0.0) / args.cycles:8.3f}")


if __name__ == "__main__":
    main()

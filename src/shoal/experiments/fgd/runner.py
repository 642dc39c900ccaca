"""One FGD-experiment run: schedule the arrival sequence pod by pod, record after every pod.

Scores are cached per pod kind; before a pod is scored, only the nodes placed on since the last
pod of the same kind are recomputed (a node's score depends only on its own state). Memory is not
part of the kind: it is checked when the winner is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, IntArray, PodKind
from shoal.experiments.fgd.policies import Policy, policy_registry
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import Arrivals, build_arrivals, typical_pods
from shoal.policy.fragmentation import TypicalPods
from shoal.sim.loaders.openb import NODE_FILE, OPENB_DIR, OpenbNode, OpenbPod, load_nodes, load_pods, pod_file


@dataclass(frozen=True, slots=True)
class RunTrace:
    """Per pod event (success or failure): cumulative arrived and allocated milli-GPU."""

    arrived_milli: IntArray
    allocated_milli: IntArray
    total_gpu_milli: int
    failed: int
    #: Node (index into `node_names`, the cluster's priority order) of each successful placement, in order.
    placed: list[int] = field(default_factory=list)
    node_names: list[str] = field(default_factory=list)

    def placed_names(self) -> list[str]:
        """Name of the node of each successful placement, in arrival order."""
        return [self.node_names[i] for i in self.placed]


@dataclass(slots=True)
class _KindScores:
    scores: IntArray  # -1 = CPU or GPU filter fails
    device: IntArray
    seen: int = 0  # length of the placement log when last brought up to date


def _refresh(cache: _KindScores, cluster: Cluster, policy: Policy, kind: PodKind, idx: IntArray) -> None:
    ok = cluster.feasible(idx, kind)
    cache.scores[idx] = -1
    feasible = idx[ok]
    if len(feasible):
        s, d = policy.score(cluster, feasible, kind)
        cache.scores[feasible] = s
        cache.device[feasible] = d


def _choose(cluster: Cluster, policy: Policy, cache: _KindScores, kind: PodKind, memory: int) -> tuple[int, int]:
    """(node, device) for the pod, or (-1, -1) if no node passes the filters (memory included)."""
    scores = cache.scores
    if policy.picks:
        feasible = np.flatnonzero((scores >= 0) & (cluster.mem_left >= memory))
        picked = policy.pick(cluster, feasible, kind) if len(feasible) else None
        return picked if picked is not None else (-1, -1)
    best = int(np.argmax(scores))  # first maximum = the tie rule
    if scores[best] >= 0 and cluster.mem_left[best] < memory:
        scores = np.where(cluster.mem_left >= memory, scores, -1)
        best = int(np.argmax(scores))
    if scores[best] < 0:
        return -1, -1
    return best, int(cache.device[best])


def simulate(arrivals: Arrivals, policy: Policy) -> RunTrace:
    """Schedule ``arrivals.pods`` in order on a fresh cluster; failed pods are dropped."""
    cluster = Cluster(arrivals)
    n = len(cluster)
    all_nodes = np.arange(n, dtype=np.int64)
    caches: dict[PodKind, _KindScores] = {}
    kinds: dict[tuple[int, int, int, int, tuple[str, ...]], PodKind] = {}
    log: list[int] = []
    arrived = np.empty(len(arrivals.pods), dtype=np.int64)
    allocated = np.empty(len(arrivals.pods), dtype=np.int64)
    total = failed = 0
    for e, pod in enumerate(arrivals.pods):
        key = (pod.cpu_milli, pod.num_gpu, pod.gpu_milli, 0, pod.gpu_spec)
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = PodKind.of(pod)
        cache = caches.get(kind)
        if cache is None:
            cache = caches[kind] = _KindScores(np.full(n, -1, np.int64), np.full(n, -1, np.int64))
            _refresh(cache, cluster, policy, kind, all_nodes)
        elif cache.seen < len(log):
            changed = sorted(set(log[cache.seen :]))
            _refresh(cache, cluster, policy, kind, np.array(changed, dtype=np.int64))
        cache.seen = len(log)
        node, device = _choose(cluster, policy, cache, kind, pod.memory_mib)
        if node >= 0:
            cluster.place(node, kind, pod.memory_mib, device)
            log.append(node)
        else:
            failed += 1
        total += kind.gpu_request
        arrived[e] = total
        allocated[e] = cluster.allocated_milli
    return RunTrace(arrived, allocated, cluster.total_gpu_milli, failed, log, cluster.names)


@dataclass(frozen=True, slots=True)
class Workload:
    """A loaded workload: the cluster's nodes, the pod list and its typical pods."""

    name: str
    nodes: list[OpenbNode]
    pods: list[OpenbPod]
    typical: TypicalPods


def load_workload(traces: Path, name: str) -> Workload:
    """Read the GPU node list and ``openb_pod_list_<name>.csv`` from the traces directory."""
    nodes = load_nodes(traces / OPENB_DIR / NODE_FILE)
    pods = load_pods(pod_file(traces, name))
    return Workload(name, nodes, pods, typical_pods(pods))


def run_once(workload: Workload, policy_name: str, seed: int, rng_kind: str = "go") -> RunTrace:
    """One seed of one policy on one workload (the stream also feeds Random's draws)."""
    rng = make_stream(rng_kind, seed)
    arrivals = build_arrivals(workload.pods, workload.nodes, rng)
    factory = policy_registry()[policy_name]
    return simulate(arrivals, factory(workload.typical, rng))

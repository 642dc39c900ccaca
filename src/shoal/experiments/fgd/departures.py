"""The FGD replay with departures: openb pods arrive as a Poisson stream and leave after their
trace duration (``deletion_time - creation_time``, capped at its 95th percentile), so placement
quality shows in steady state.

The arrival order, tuning and node tie-break order are the FGD experiment's (Go stream, seed s);
inter-arrival gaps are exponential (numpy, seed s) with a rate that offers ``load`` x the
cluster's GPU capacity on average. A pod that fits nowhere is dropped (no retry), as in the FGD
experiment. The sequence is replayed a few times in a row (``passes``). Reported after a
warm-up (the first ``warmup`` of arrivals): the share of arrived
GPU milli that was rejected, and the time-averaged allocated GPU %.

    python -m shoal.experiments.fgd.departures [--workloads default,...] [--policies ...] [--seeds 42-44]
"""

from __future__ import annotations

import argparse
import csv
import heapq
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from shoal.experiments.fgd.cluster import Cluster, PodKind
from shoal.experiments.fgd.fragaware_policy import FragAwarePolicy
from shoal.experiments.fgd.policies import Policy, PolicyFactory, policy_registry
from shoal.experiments.fgd.runner import Workload, load_workload
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import build_arrivals
from shoal.sim.datafiles import open_text
from shoal.sim.loaders.openb import OPENB_DIR, default_traces_dir, pod_file

DURATION_CAP_PERCENTILE = 95
DEFAULT_LOAD = 1.3  # offered GPU work per unit of time, x the cluster's GPU capacity


def departure_policies() -> dict[str, PolicyFactory]:
    """The registry plus ``fragaware-static``: fragaware that keeps its arrival-only weights when
    pods leave (no switch to the churn weights), for comparison."""
    out = policy_registry()
    out["fragaware-static"] = lambda typical, rng: FragAwarePolicy(typical, churn_weights=None)
    return out


@dataclass(frozen=True, slots=True)
class DepartureResult:
    workload: str
    policy: str
    seed: int
    rejected_gpu_pct: float  # of the GPU milli that arrived after the warm-up
    allocated_gpu_pct: float  # time average after the warm-up


def trace_durations(traces: Path, workload: str) -> dict[str, float]:
    """Pod name -> seconds it ran in the trace (pods without a deletion time are left out)."""
    out: dict[str, float] = {}
    with open_text(pod_file(traces, workload), "trace") as fh:
        for row in csv.DictReader(fh):
            created, deleted = int(row["creation_time"] or 0), int(row["deletion_time"] or 0)
            if deleted > created:
                out[row["name"]] = float(deleted - created)
    return out


class _Cache:
    """Per pod kind: node scores (-1 = infeasible) and the device, refreshed for changed nodes."""

    def __init__(self, n: int) -> None:
        self.scores = np.full(n, -1, dtype=np.int64)
        self.device = np.full(n, -1, dtype=np.int64)
        self.seen = -1


def _choose(cluster: Cluster, policy: Policy, cache: _Cache, kind: PodKind, memory: int,
            changed: list[int], stamp: int) -> tuple[int, int]:
    idx = np.arange(len(cluster), dtype=np.int64) if cache.seen < 0 else np.array(
        sorted(set(changed[cache.seen:])), dtype=np.int64)
    cache.seen = stamp
    if len(idx):
        ok = cluster.feasible(idx, kind)
        cache.scores[idx] = -1
        if ok.any():
            s, d = policy.score(cluster, idx[ok], kind)
            cache.scores[idx[ok]], cache.device[idx[ok]] = s, d
    scores = np.where(cluster.mem_left >= memory, cache.scores, -1)
    best = int(np.argmax(scores))
    return (best, int(cache.device[best])) if scores[best] >= 0 else (-1, -1)


def _release(cluster: Cluster, node: int, kind: PodKind, memory: int, devices: list[int]) -> None:
    cluster.cpu_left[node] += kind.cpu_milli
    cluster.mem_left[node] += memory
    if devices:
        cluster.free[node, devices] += kind.gpu_milli
        cluster.gpu_left[node] += kind.gpu_request
        cluster.allocated_milli -= kind.gpu_request


def run_departures(workload: Workload, durations: dict[str, float], policy_name: str, seed: int,
                   load: float = DEFAULT_LOAD, warmup: float = 0.4, passes: int = 4) -> DepartureResult:
    """One seed of one policy with departures (see the module docstring); the arrival sequence
    is replayed ``passes`` times in a row so that the run reaches a steady state."""
    rng = make_stream("go", seed)
    once = build_arrivals(workload.pods, workload.nodes, rng)
    arrivals = replace(once, pods=once.pods * passes)
    policy = departure_policies()[policy_name](workload.typical, rng)
    cluster = Cluster(arrivals)
    gaps_rng = np.random.default_rng(seed)
    fallback = np.array(sorted(durations.values()) or [600.0])
    # The trace's durations are heavy-tailed (up to months): capped at their 95th percentile, so
    # that a run of ~1.3x the cluster's worth of pods reaches a steady state.
    cap = float(np.percentile(fallback, DURATION_CAP_PERCENTILE))
    dur = [min(cap, durations.get(p.name) or float(gaps_rng.choice(fallback))) for p in arrivals.pods]
    work = sum(p.gpu_request_milli * d for p, d in zip(arrivals.pods, dur)) / len(dur)
    rate = load * cluster.total_gpu_milli / work  # arrivals per second
    times = np.cumsum(gaps_rng.exponential(1.0 / rate, size=len(dur)))
    start = int(warmup * len(dur))
    caches: dict[PodKind, _Cache] = {}
    changed: list[int] = []
    leaving: list[tuple[float, int, int, tuple[int, ...]]] = []  # (time, pod index, node, GPU devices)
    arrived = rejected = 0
    area = 0.0
    last = float(times[start])
    for e, pod in enumerate(arrivals.pods):
        now = float(times[e])
        while leaving and leaving[0][0] <= now:
            t, j, node, devices = heapq.heappop(leaving)
            if e > start:
                area += cluster.allocated_milli * (t - last)
                last = t
            _release(cluster, node, PodKind.of(arrivals.pods[j]), arrivals.pods[j].memory_mib, list(devices))
            changed.append(node)
            # A policy that adapts to churn (fragaware) may change its scores on the first departure.
            notify = getattr(policy, "on_departure", None)
            if notify is not None and notify():
                caches.clear()
        if e > start:
            area += cluster.allocated_milli * (now - last)
            last = now
        kind = PodKind.of(pod)
        cache = caches.setdefault(kind, _Cache(len(cluster)))
        node, device = _choose(cluster, policy, cache, kind, pod.memory_mib, changed, len(changed))
        if e >= start:
            arrived += kind.gpu_request
        if node < 0:
            rejected += kind.gpu_request if e >= start else 0
            continue
        taken = (device,) if kind.num_gpu == 1 else tuple(cluster.whole_devices(node, kind.num_gpu))
        cluster.place(node, kind, pod.memory_mib, device)
        changed.append(node)
        heapq.heappush(leaving, (now + dur[e], e, node, taken))
    span = last - float(times[start])
    return DepartureResult(workload.name, policy_name, seed, round(100.0 * rejected / max(arrived, 1), 2),
                           round(100.0 * area / max(span, 1e-9) / cluster.total_gpu_milli, 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="default,gpushare100,gpuspec33")
    ap.add_argument("--policies", default="bestfit,fgd,kai-binpack,fragaware-static,fragaware")
    ap.add_argument("--seeds", default="42-44", help="first-last")
    ap.add_argument("--load", type=float, default=DEFAULT_LOAD)
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    traces = default_traces_dir()
    assert (traces / OPENB_DIR).is_dir(), f"no openb traces under {traces}"
    print(f"load {a.load} x GPU capacity; mean over seeds {seeds[0]}..{seeds[-1]}")
    print(f"{'workload':12s} {'policy':16s} {'rejected GPU %':>15s} {'allocated GPU %':>16s}")
    for name in a.workloads.split(","):
        workload = load_workload(traces, name)
        durations = trace_durations(traces, name)
        for policy in a.policies.split(","):
            runs = [run_departures(workload, durations, policy, s, a.load) for s in seeds]
            print(f"{name:12s} {policy:16s} {statistics.fmean(r.rejected_gpu_pct for r in runs):15.2f} "
                  f"{statistics.fmean(r.allocated_gpu_pct for r in runs):16.2f}", flush=True)


if __name__ == "__main__":
    main()

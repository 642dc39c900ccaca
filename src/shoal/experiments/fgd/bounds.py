"""Lower bounds on the unallocated GPU % any placement policy must leave at 100% arrival.

A bound holds for *every* policy, online or offline, on one arrival sequence (one workload, one
seed): it relaxes the problem (CPU, memory and "all GPUs of a pod on one node" are ignored), so
whatever a real policy does is feasible in the relaxation. Two sound arguments, the larger wins:

* **slivers**: a fractional pod of ``s > 500`` milli occupies a GPU no other such pod can join,
  and its gap ``g = 1000 - s`` can only take pods of at most ``g`` milli. For a threshold
  ``t < 500``, the GPUs holding placed big pods with ``g <= t`` keep at least
  ``sum(g) - T_t`` milli empty, ``T_t`` = total milli of all arrived fractional pods of at most
  ``t``. A policy may drop big pods instead, but at 100% arrival every dropped milli is
  unallocated too (unallocated = capacity - arrived + dropped). The best trade (drop the pods
  with the largest g/s first, fractionally: an LP relaxation, hence still a lower bound) gives
  ``min_x max(sum(g) - T_t - sum(x g), slack + sum(x s))``.
* **models**: pods allowed only on a set S of GPU models cannot use more than S's GPUs, so at
  least ``demand(S) - capacity(S)`` milli of them are dropped, for every S.

The experiment's statistic averages the events whose arrival rounds to 100% (metrics.py), so the
bound is averaged over the same events. ``python -m shoal.experiments.fgd.bounds`` prints the table of
docs/fragaware.md.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shoal.experiments.fgd.metrics import REPORT_ARRIVAL
from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import WORKLOADS, build_arrivals
from shoal.sim.loaders.openb import (
    MILLI_PER_GPU,
    NODE_FILE,
    OPENB_DIR,
    OpenbNode,
    OpenbPod,
    default_traces_dir,
    load_nodes,
    load_pods,
    pod_file,
)

FloatArray = npt.NDArray[np.float64]
HALF = MILLI_PER_GPU // 2


@dataclass(frozen=True, slots=True)
class Bound:
    """Milli-GPU that must stay unallocated after a prefix of arrivals, by argument."""

    slivers: float
    models: float

    @property
    def value(self) -> float:
        return max(self.slivers, self.models)


def sliver_bound(pods: list[OpenbPod], capacity: int) -> float:
    """The slivers argument (module docstring) for the arrived ``pods``, in milli-GPU."""
    arrived = sum(p.gpu_request_milli for p in pods)
    slack = float(max(0, capacity - arrived))
    frac = np.array([p.gpu_milli for p in pods if p.num_gpu == 1 and p.gpu_milli < MILLI_PER_GPU], dtype=np.int64)
    big = frac[frac > HALF]
    best = slack
    for t in np.unique(MILLI_PER_GPU - big).tolist():
        sizes = big[MILLI_PER_GPU - big <= t].astype(np.float64)
        small = float(frac[frac <= t].sum())
        best = max(best, _trade(MILLI_PER_GPU - sizes, sizes, small, slack))
    return best


def _trade(gaps: FloatArray, sizes: FloatArray, small: float, slack: float) -> float:
    """min over fractional drops x in [0,1] of max(sum(g) - small - x.g, slack + x.s)."""
    waste, dropped = float(gaps.sum()) - small, slack
    if waste <= dropped:
        return dropped
    for i in np.argsort(-gaps / sizes, kind="stable").tolist():  # most waste removed per milli dropped
        g, s = float(gaps[i]), float(sizes[i])
        if waste - g <= dropped + s:  # the two meet inside this pod's drop
            x = (waste - dropped) / (g + s)
            return dropped + x * s
        waste, dropped = waste - g, dropped + s
    return max(waste, dropped)


def model_bound(pods: list[OpenbPod], nodes: list[OpenbNode]) -> float:
    """The models argument: ``slack + max_S (demand of pods allowed only on S - capacity of S)``."""
    capacity = sum(n.gpu for n in nodes) * MILLI_PER_GPU
    slack = float(max(0, capacity - sum(p.gpu_request_milli for p in pods)))
    models = sorted({n.model for n in nodes})
    cap = {m: sum(n.gpu for n in nodes if n.model == m) * MILLI_PER_GPU for m in models}
    worst = 0.0
    for k in range(1, len(models) + 1):
        for subset in itertools.combinations(models, k):
            s = set(subset)
            demand = sum(p.gpu_request_milli for p in pods if p.num_gpu and p.gpu_spec and set(p.gpu_spec) <= s)
            if k == len(models):
                demand = sum(p.gpu_request_milli for p in pods)
            worst = max(worst, demand - sum(cap[m] for m in subset))
    return slack + worst


def bound_at_100(pods: list[OpenbPod], nodes: list[OpenbNode]) -> Bound:
    """Mean bound (milli-GPU) over the arrival events whose arrival % rounds to 100."""
    gpus = sum(n.gpu for n in nodes)
    capacity = gpus * MILLI_PER_GPU
    arrived = np.cumsum([p.gpu_request_milli for p in pods])
    events = [e for e, a in enumerate(arrived.tolist()) if round(a / gpus / 10) == REPORT_ARRIVAL]
    if not events:
        raise ValueError("no arrival event at 100%")
    # The bound only changes at a few events; computing each is cheap enough for a table.
    sliv = [sliver_bound(pods[: e + 1], capacity) for e in events]
    mods = [model_bound(pods[: e + 1], nodes) for e in events]
    return Bound(float(np.mean(sliv)), float(np.mean(mods)))


def workload_bound(name: str, seed: int) -> tuple[float, float, float]:
    """(slivers %, models %, bound %) of one workload and seed (Go random stream)."""
    traces = default_traces_dir()
    nodes = load_nodes(traces / OPENB_DIR / NODE_FILE)
    arrivals = build_arrivals(load_pods(pod_file(traces, name)), nodes, make_stream("go", seed))
    b = bound_at_100(arrivals.pods, nodes)
    capacity = sum(n.gpu for n in nodes) * MILLI_PER_GPU / 100.0
    return b.slivers / capacity, b.models / capacity, b.value / capacity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args(argv)
    print("| workload | slivers | models | bound |")
    print("|---|---:|---:|---:|")
    for name in args.workloads.split(","):
        s, m, b = workload_bound(name, args.seed)
        print(f"| {name} | {s:.2f} | {m:.2f} | **{b:.2f}** |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Turn an openb pod list into the FGD experiment's arrival sequence and typical-pod table.

Follows reference/traces.md §3.1 item 3 (draw order on the run's single random stream) and
§3.3 (typical pods). Pods only arrive; the time columns of the trace are not used.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from shoal.experiments.fgd.streams import RandomStream
from shoal.policy.fragmentation import TypicalPods
from shoal.sim.loaders.openb import GPU_MODELS, OpenbNode, OpenbPod

TUNE_RATIO = 1.3
TYPICAL_POPULARITY_PCT = 95
# kube-scheduler's non-zero request: a pod without a CPU request is scored as 100 milli-CPU.
DEFAULT_CPU_MILLI = 100
# Float64 draws the authors' binary makes while its informers start (found empirically, §3.1 d).
INFORMER_FLOAT_DRAWS = 10

WORKLOADS = (
    "default",
    "cpu050", "cpu100", "cpu200", "cpu250",
    "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33",
    "multigpu20", "multigpu30", "multigpu40", "multigpu50",
)  # fmt: skip


def nonzero_cpu(pod: OpenbPod) -> int:
    """CPU milli as the scorers see it (Kubernetes' non-zero request)."""
    return pod.cpu_milli if pod.cpu_milli > 0 else DEFAULT_CPU_MILLI


def spec_mask(spec: tuple[str, ...]) -> int:
    """Bit mask over :data:`GPU_MODELS` of the models a pod may use (all bits if unconstrained)."""
    if not spec:
        return (1 << len(GPU_MODELS)) - 1
    return sum(1 << GPU_MODELS.index(m) for m in set(spec))


def typical_pods(pods: list[OpenbPod]) -> TypicalPods:
    """The typical-pod distribution of the *original* (untuned) pod list, §3.3.

    Groups by (non-zero CPU, milli per GPU, GPU count, model constraint), most popular first
    (ties by the key, descending), until the groups cover 95% of the pods; frequencies are
    renormalised over the groups taken.
    """
    groups = Counter((nonzero_cpu(p), p.gpu_milli, p.num_gpu, "|".join(p.gpu_spec)) for p in pods)
    ordered = sorted(groups.items(), key=lambda kv: (kv[1], *kv[0]), reverse=True)
    total = float(len(pods))
    # Float arithmetic exactly as the authors' GetTypicalPods: the frequencies feed the FGD
    # scores, where a last-bit difference can turn a tie (score 50) into 49.
    expected = TYPICAL_POPULARITY_PCT * total / 100.0
    taken: list[tuple[tuple[int, int, int, str], int]] = []
    covered = 0.0
    for key, count in ordered:
        if covered >= expected:
            break
        taken.append((key, count))
        covered += count
    allowed = np.zeros((len(taken), len(GPU_MODELS)), dtype=np.bool_)
    for i, ((_, _, _, spec), _) in enumerate(taken):
        mask = spec_mask(tuple(s for s in spec.split("|") if s))
        allowed[i] = [(mask >> k) & 1 == 1 for k in range(len(GPU_MODELS))]
    return TypicalPods(
        cpu_milli=np.array([k[0] for k, _ in taken], dtype=np.int64),
        milli=np.array([k[1] for k, _ in taken], dtype=np.int64),
        count=np.array([k[2] for k, _ in taken], dtype=np.int64),
        allowed=allowed,
        freq=np.array([(c / total) / (covered / total) for _, c in taken], dtype=np.float64),
    )


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The run's input: pods in arrival order and each node's tie-break priority.

    ``node_priority[i]`` is the rank of ``nodes_by_name[i]`` (0 = wins every tie): the random
    ``%04d-`` prefix the authors' simulator gives node i (nodes sorted by name).
    """

    pods: list[OpenbPod]
    nodes_by_name: list[OpenbNode]
    node_priority: list[int]


def _tune(
    by_name: list[OpenbPod], shuffled: list[OpenbPod], rng: RandomStream, target: float
) -> list[OpenbPod]:
    """Resample (up) or drop (down) pods until the GPU request reaches ``target`` milli, §3.1 c."""
    total = sum(p.gpu_request_milli for p in by_name)
    out = list(shuffled)
    if total < target:
        while True:
            pod = by_name[rng.intn(len(by_name))]
            # The authors' stop test uses the per-GPU milli, while the total adds num_gpu * milli.
            if total + pod.gpu_milli > target:
                break
            out.append(pod)
            total += pod.gpu_request_milli
    else:
        while total > target:
            j = rng.intn(len(out))
            total -= out[j].gpu_request_milli
            del out[j]
    return out


def build_arrivals(pods: list[OpenbPod], nodes: list[OpenbNode], rng: RandomStream) -> Arrivals:
    """Consume ``rng`` exactly as the authors' simulator does and return the arrival sequence."""
    rng.int_()  # a debug-log argument right after seeding
    by_name = sorted(pods, key=lambda p: p.name)
    shuffled = list(by_name)
    rng.shuffle_list(shuffled)
    capacity = sum(n.gpu for n in nodes) * 1000
    arrivals = _tune(by_name, shuffled, rng, TUNE_RATIO * capacity)
    for _ in range(INFORMER_FLOAT_DRAWS):
        rng.float64()
    nodes_by_name = sorted(nodes, key=lambda n: n.name)
    priority = rng.perm(len(nodes_by_name))
    return Arrivals(arrivals, nodes_by_name, priority)

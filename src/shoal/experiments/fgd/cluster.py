"""Mutable cluster state of one FGD run: nodes in tie-break order, free GPU milli per device.

Node index 0 is the node that wins every tie (the authors' ``selectHost`` picks the smallest
name among equal scores, and names carry a random ``%04d-`` prefix), so ``argmax`` over a score
array already applies the tie rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shoal.experiments.fgd.workload import Arrivals, nonzero_cpu, spec_mask
from shoal.sim.loaders.openb import GPU_MODELS, MAX_GPUS_PER_NODE, MILLI_PER_GPU, OpenbPod

IntArray = npt.NDArray[np.int64]

SHARE_TAG = 0  # GpuClustering tag bit of a fractional 1-GPU pod; bit n = an n-GPU whole pod


@dataclass(frozen=True, slots=True)
class PodKind:
    """Everything about a pod that node scores and GPU-side feasibility depend on.

    Memory is left out on purpose (it only filters, and is checked at selection time), so that
    more pods share one cached score array.
    """

    cpu_milli: int  # raw request (fit check)
    cpu_score: int  # non-zero request (scorers)
    num_gpu: int
    gpu_milli: int  # per GPU
    model_mask: int  # bit k = GPU_MODELS[k] allowed

    @property
    def gpu_request(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def fractional(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def tag(self) -> int:
        """GpuClustering tag bit; -1 for CPU-only pods."""
        if self.num_gpu == 0:
            return -1
        return SHARE_TAG if self.fractional else self.num_gpu

    @staticmethod
    def of(pod: OpenbPod) -> PodKind:
        return PodKind(pod.cpu_milli, nonzero_cpu(pod), pod.num_gpu, pod.gpu_milli, spec_mask(pod.gpu_spec))


class Cluster:
    """Node arrays in priority order; ``place`` is the only mutator."""

    def __init__(self, arrivals: Arrivals) -> None:
        order = sorted(range(len(arrivals.nodes_by_name)), key=lambda i: arrivals.node_priority[i])
        nodes = [arrivals.nodes_by_name[i] for i in order]
        self.names = [n.name for n in nodes]
        n = len(nodes)
        self.gpu_count: IntArray = np.array([x.gpu for x in nodes], dtype=np.int64)
        self.model: IntArray = np.array([GPU_MODELS.index(x.model) for x in nodes], dtype=np.int64)
        self.cpu_total: IntArray = np.array([x.cpu_milli for x in nodes], dtype=np.int64)
        self.cpu_left: IntArray = self.cpu_total.copy()
        self.mem_left: IntArray = np.array([x.memory_mib for x in nodes], dtype=np.int64)
        dev = np.arange(MAX_GPUS_PER_NODE)[None, :]
        self.free: IntArray = np.where(dev < self.gpu_count[:, None], MILLI_PER_GPU, 0).astype(np.int64)
        self.gpu_left: IntArray = self.free.sum(axis=1)
        self.tags: IntArray = np.zeros(n, dtype=np.int64)  # bit mask of PodKind.tag values
        self.total_gpu_milli = int(self.gpu_left.sum())
        self.allocated_milli = 0

    def __len__(self) -> int:
        return len(self.names)

    def feasible(self, idx: IntArray, kind: PodKind) -> npt.NDArray[np.bool_]:
        """CPU and GPU filters for nodes ``idx`` (memory is checked by the caller)."""
        ok = self.cpu_left[idx] >= kind.cpu_milli
        if kind.num_gpu > 0:
            ok &= ((kind.model_mask >> self.model[idx]) & 1) == 1
            ok &= (self.free[idx] >= kind.gpu_milli).sum(axis=1) >= kind.num_gpu
        return ok

    def whole_devices(self, node: int, count: int) -> list[int]:
        """The ``count`` lowest-index completely free GPUs of ``node`` (all policies use these)."""
        free = self.free[node]
        return [d for d in range(MAX_GPUS_PER_NODE) if free[d] == MILLI_PER_GPU][:count]

    def place(self, node: int, kind: PodKind, memory_mib: int, device: int) -> None:
        """Bind a pod: ``device`` is the GPU of a 1-GPU pod; multi-GPU pods take whole free GPUs."""
        self.cpu_left[node] -= kind.cpu_milli
        self.mem_left[node] -= memory_mib
        if kind.num_gpu == 0:
            return
        devices = [device] if kind.num_gpu == 1 else self.whole_devices(node, kind.num_gpu)
        if len(devices) != kind.num_gpu or min(self.free[node, devices]) < kind.gpu_milli:
            raise AssertionError(f"infeasible GPU placement on {self.names[node]}: {devices}")
        self.free[node, devices] -= kind.gpu_milli
        self.gpu_left[node] -= kind.gpu_request
        self.tags[node] |= 1 << kind.tag
        self.allocated_milli += kind.gpu_request

"""Pods (tasks): what one pod asks for and where it stands."""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.model.constraints import HostPort, NodeAffinity, PodAffinity, SpreadConstraint
from shoal.model.resources import MILLI
from shoal.model.status import PodStatus


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """A pod's GPU ask: whole devices, or a share of `devices` devices (fraction or GPU memory).

    `portion_milli` is the fraction of one device in milli-GPU, rounded to 0.01 GPU like KAI
    (`gpu-fraction`); `memory_mib` is a `gpu-memory` request, turned into a node-specific portion
    when placed. Exactly one of `whole`, `portion_milli`, `memory_mib` is non-zero (or none).
    """

    whole: int = 0
    portion_milli: int = 0
    devices: int = 1
    memory_mib: int = 0
    #: Derived once (the request is frozen; the scheduler reads these per placement):
    #: fraction or GPU-memory request, placed on shared GPU groups.
    is_shared: bool = field(init=False, repr=False, compare=False)
    #: KAI's `GPUs()` in milli-GPU: whole devices, or portion x devices (GPU memory: 0).
    milli: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_shared", self.portion_milli > 0 or self.memory_mib > 0)
        object.__setattr__(self, "milli", self.whole * MILLI if self.whole else self.portion_milli * self.devices)

    @property
    def is_gpu_memory(self) -> bool:
        return self.memory_mib > 0 and self.portion_milli == 0

    @property
    def any(self) -> bool:
        return self.whole > 0 or self.is_shared


def portion_for_memory(memory_mib: int, device_memory_mib: int) -> int:
    """KAI's memory -> portion on a node: ceil(m / M * 100) / 100, in milli-GPU."""
    if device_memory_mib <= 0:
        return MILLI
    return -(-memory_mib * 100 // device_memory_mib) * 10


@dataclass(frozen=True, slots=True)
class Toleration:
    """A toleration. `seconds` (tolerationSeconds) only bounds how long a NoExecute taint is
    tolerated once running; like kube-scheduler, placement ignores it."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """v1.Toleration.ToleratesTaint (Gt/Lt are alpha in Kubernetes and off: they never match)."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == value
        return self.operator == "Exists"


@dataclass(slots=True)
class Pod:
    """One pod as the scheduler sees it. `status`, `node` and `gpu_groups` are the current state."""

    uid: str
    name: str
    namespace: str
    job: str
    status: PodStatus
    cpu_milli: int = 0
    memory: int = 0
    gpu: GpuRequest = field(default_factory=GpuRequest)
    mig: dict[str, int] = field(default_factory=dict)
    extended: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    gpu_groups: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    subgroup: str = ""
    #: `kai.scheduler/task-priority` label: None = unlabelled, "bad" values are kept as None + flag.
    task_priority: int | None = None
    task_priority_invalid: bool = False
    creation: float = 0.0
    node_selector: dict[str, str] = field(default_factory=dict)
    #: Node affinity (required terms and weighted preferences); None = none.
    node_affinity: NodeAffinity | None = None
    #: Inter-pod affinity and anti-affinity terms (namespaces already resolved for the pod).
    pod_affinity: PodAffinity | None = None
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    tolerations: list[Toleration] = field(default_factory=list)
    legacy_mig: bool = False
    nominated_node: str | None = None
    best_effort: bool = False
    #: The last time this pod (re)started running, for min-runtime; None if never.
    start_time: float | None = None
    #: PersistentVolumeClaims the pod mounts (names in its namespace; generic ephemeral volumes
    #: as `<pod>-<volume>`), see shoal.model.volumes.
    volume_claims: tuple[str, ...] = ()
    #: DRA ResourceClaims the pod references (names in its namespace), see shoal.model.dra.
    resource_claims: tuple[str, ...] = ()
    #: GPUs its DRA claims ask for (GPU device classes); they count as whole GPUs for quota and fit.
    dra_gpus: int = 0

    def __post_init__(self) -> None:
        if self.best_effort:
            return
        # KAI treats a request below 10m CPU / 10 MiB and no GPU/MIG as best effort (always fits).
        if (self.cpu_milli < 10 and self.memory < 10 * 1024 * 1024 and not self.gpu.any
                and not self.mig and all(v < 10 for v in self.extended.values())):
            self.best_effort = True

    @property
    def gpu_quota_milli(self) -> int:
        """KAI's `GetGpusQuota`: GPUs() + MIG slices (g x count); GPU memory counts 0 here."""
        if not self.mig:
            return self.gpu.milli + self.dra_gpus * MILLI
        from shoal.model.resources import mig_gpu_slices

        return (self.gpu.milli + self.dra_gpus * MILLI
                + sum((mig_gpu_slices(r) or 0) * n * MILLI for r, n in self.mig.items()))

    @property
    def has_task_priority(self) -> bool:
        """Carries a task priority (`kai.scheduler/task-priority`), readable or not."""
        return self.task_priority is not None or self.task_priority_invalid

    @property
    def is_cpu_only(self) -> bool:
        return not self.gpu.any and not self.mig and not self.dra_gpus

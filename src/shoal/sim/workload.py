"""The simulator's job model: one `JobSpec` per gang, whatever trace or file it came from."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.kai.units import PRIORITY_CLASSES, default_preemptible, gpu_fraction_milli
from shoal.model.resources import MILLI
from shoal.sim.errors import SimInputError

#: KAI's GPU fractions have a 0.01-GPU resolution.
_FRACTION_STEP = MILLI // 100


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job (a gang of `pods` identical pods) of a simulated workload.

    `arrival` and `duration` are seconds on the simulation clock (0 = start); `duration` is the
    run time once the whole gang runs (an evicted gang restarts from scratch: no checkpoints).
    `gpu_milli` is per pod: a multiple of 1000 for whole GPUs, or a fraction of one device at
    KAI's 0.01-GPU resolution (10..990). `cpu_milli` and `memory` (bytes) are per pod.
    `topology`/`required_level` ask the core for a topology constraint (empty = none).
    """

    name: str
    arrival: float
    duration: float
    queue: str
    pods: int = 1
    gpu_milli: int = MILLI
    cpu_milli: int = 1000
    memory: int = 4 * 1024**3
    priority_class: str = "train"
    topology: str = ""
    required_level: str = ""
    preferred_level: str = ""

    @property
    def priority(self) -> int:
        return PRIORITY_CLASSES[self.priority_class]

    @property
    def preemptible(self) -> bool:
        """KAI derives it from the priority class's value (< 100: preemptible)."""
        return default_preemptible(self.priority)

    @property
    def total_gpu_milli(self) -> int:
        return self.gpu_milli * self.pods


def check_job(job: JobSpec, where: str) -> None:
    """Raise `SimInputError` naming `where` (``file:line``) if the job cannot be simulated."""
    problems = []
    if job.arrival < 0:
        problems.append(f"arrival: negative ({job.arrival})")
    if job.duration <= 0:
        problems.append(f"duration: must be > 0 (got {job.duration})")
    if job.pods < 1:
        problems.append(f"pods: must be >= 1 (got {job.pods})")
    if job.gpu_milli < 0 or (job.gpu_milli > MILLI and job.gpu_milli % MILLI):
        problems.append(
            f"gpus: a pod asks for whole GPUs or a fraction below 1 (got {job.gpu_milli / MILLI:g})"
        )
    elif job.gpu_milli % _FRACTION_STEP:
        problems.append(f"gpus: KAI counts a fraction in 0.01 GPU (got {job.gpu_milli / MILLI:g})")
    if job.priority_class not in PRIORITY_CLASSES:
        problems.append(
            f"priority_class: unknown {job.priority_class!r} (known: {', '.join(PRIORITY_CLASSES)})"
        )
    if not job.queue:
        problems.append("queue: empty")
    if problems:
        raise SimInputError(f"{where}: {problems[0]}")


def split_gpus(total_gpus: float, max_per_pod: int) -> tuple[int, int]:
    """(pods, milli-GPU per pod) for a job of `total_gpus` on nodes of `max_per_pod` GPUs.

    A job larger than one node becomes a gang of ceil(total / max) equal pods; a non-integral
    per-pod share is rounded up to whole GPUs (the scheduler cannot place 1.5 GPUs).
    """
    if total_gpus <= 0:
        return 1, 0
    if total_gpus < 1:
        return 1, max(_FRACTION_STEP, gpu_fraction_milli(total_gpus))
    pods = -(-int(total_gpus) // max_per_pod) if max_per_pod > 0 else 1
    per_pod = -(-int(total_gpus) // pods)
    return pods, per_pod * MILLI

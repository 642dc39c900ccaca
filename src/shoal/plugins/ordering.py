"""Job and task order plugins: priority, elastic, kubeflow, ray, taskorder (kai-spec §3.6)."""

from __future__ import annotations

from shoal.framework.jobs import Task
from shoal.framework.session import Session

KUBEFLOW_ROLE = "training.kubeflow.org/job-role"
RAY_NODE_TYPE = "ray.io/node-type"


def open_priority(ssn: Session, args: dict[str, str]) -> None:
    """Higher job priority first."""
    ssn.hooks.job_keys.append(lambda job: (-job.priority,))


def open_elastic(ssn: Session, args: dict[str, str]) -> None:
    """Jobs below their minimum first, then jobs exactly at it, then jobs above it."""
    ssn.hooks.job_keys.append(lambda job: (job.elastic_state(),))


def open_kubeflow(ssn: Session, args: dict[str, str]) -> None:
    """Kubeflow masters and launchers before workers."""
    def key(task: Task) -> tuple[int]:
        return (0 if task.pod.labels.get(KUBEFLOW_ROLE) in ("master", "launcher") else 1,)
    ssn.hooks.task_keys.append(key)
    ssn.hooks.task_key_labels.add(KUBEFLOW_ROLE)


def open_ray(ssn: Session, args: dict[str, str]) -> None:
    """The Ray head before the workers."""
    ssn.hooks.task_keys.append(lambda task: (0 if task.pod.labels.get(RAY_NODE_TYPE) == "head" else 1,))
    ssn.hooks.task_key_labels.add(RAY_NODE_TYPE)


def open_taskorder(ssn: Session, args: dict[str, str]) -> None:
    """`kai.scheduler/task-priority`: labelled pods first, higher first, unparsable last."""
    def key(task: Task) -> tuple[int, int]:
        p = task.pod
        if p.task_priority_invalid:
            return (2, 0)
        if p.task_priority is None:
            return (1, 0)
        return (0, -p.task_priority)
    ssn.hooks.task_keys.append(key)


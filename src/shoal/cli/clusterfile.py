"""The cluster file read by `shoal cycle`: nodes, queues, jobs (and optional scheduler config).

A file written by `shoal snapshot` (`kind: ClusterSnapshot`) is read instead as the live objects
it holds (`shoal.kube.export`), with the exported scheduler config.

Schema (YAML):

    nodes:                      # required
      - name: gpu-a             # required, unique
        gpus: 8                 # whole GPUs (default 0)
        cpu: 64                 # cores or a quantity like "500m" (default 64)
        memory: 512Gi           # quantity (default 512Gi)
        gpu_memory: 81920       # MiB per GPU (default 81920)
        pods: 110               # max pods (default 110)
        labels: {zone: a}
    queues:                     # required; `parent` builds the tree (departments = parents)
      - name: team-a
        parent: ""              # default: top level
        priority: 100
        gpu: {quota: 8, limit: -1, weight: 1}   # devices; -1 = unlimited
        cpu: {quota: -1}        # cores
        memory: {quota: -1}     # quantity
    jobs:
      - name: train-1           # required, unique
        queue: team-a           # required
        priority: train         # a priority class (train 50, build-preemptible 75, build 100,
                                # inference 125) or a number; default train
        preemptible: true       # default: priority < 100
        pods: 4                 # number of pods (default 1)
        min_member: 4           # gang size (default: all pods)
        gpus: 1                 # whole GPUs per pod, or a fraction < 1 (gpu-fraction)
        gpu_devices: 1          # devices for a fraction
        gpu_memory: 20000       # MiB per pod (gpu-memory) instead of gpus
        cpu: 4                  # cores per pod (default 1)
        memory: 16Gi            # per pod (default 1Gi)
        running_on: [gpu-a]     # optional: the first pods already run on these nodes
        age_minutes: 10         # optional: created this long ago (default: file order)
    config:                     # optional: KAI-style scheduler config (actions, tiers)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shoal.cycle import check_config
from shoal.framework.config import SchedulerConfig, config_from_dict
from shoal.kai.units import (
    PRIORITY_CLASSES,
    ConvertError,
    default_preemptible,
    gpus_request,
    node_gpu_memory_mib,
    queue_amount,
)
from shoal.model import ClusterSnapshot, GpuRequest, Node, Pod, PodGroup, PodStatus, Queue, QueueResource
from shoal.model.resources import parse_cpu, parse_memory

NOW = 1_700_000_000.0


class ClusterFileError(ValueError):
    """A cluster file that cannot be used; the message names the file, the object and the field."""


def load_cluster_file(path: str | Path) -> tuple[ClusterSnapshot, SchedulerConfig | None]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise ClusterFileError(f"{p}: no such file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ClusterFileError(f"{p}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    if not isinstance(data, dict):
        raise ClusterFileError(f"{p}: expected a mapping with nodes, queues and jobs")
    from shoal.kube.export import ExportError, is_snapshot_document, read_snapshot_document

    if is_snapshot_document(data):  # written by `shoal snapshot`: decoded as the live scheduler decodes
        try:
            snap, config = read_snapshot_document(data, str(p))
            return snap, config_from_dict(config, source=f"{p}: config") if config else None
        except (ExportError, ValueError) as err:
            raise ClusterFileError(str(err)) from None
    return _Reader(str(p)).read(data)


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, msg: str) -> ClusterFileError:
        return ClusterFileError(f"{self.source}: {where}: {msg}")

    def _list(self, data: dict[str, Any], key: str, required: bool) -> list[dict[str, Any]]:
        items = data.get(key)
        if items is None:
            if required:
                raise self.fail(key, "missing (a list is required)")
            return []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise self.fail(key, "expected a list of mappings")
        return items

    def read(self, data: dict[str, Any]) -> tuple[ClusterSnapshot, SchedulerConfig | None]:
        snap = ClusterSnapshot(now=NOW)
        names: set[str] = set()
        for i, raw in enumerate(self._list(data, "nodes", True)):
            node = self.node(i, raw)
            if node.name in names:
                raise self.fail(f"nodes[{i}] {node.name}", "duplicate node name")
            names.add(node.name)
            snap.nodes.append(node)
        for i, raw in enumerate(self._list(data, "queues", True)):
            snap.queues.append(self.queue(i, raw))
        jobs = self._list(data, "jobs", False)
        seen: set[str] = set()
        for i, raw in enumerate(jobs):
            pg, pods = self.job(i, raw, len(jobs), names)
            if pg.uid in seen:
                raise self.fail(f"jobs[{i}] {pg.uid}", "duplicate job name")
            seen.add(pg.uid)
            snap.podgroups.append(pg)
            snap.pods.extend(pods)
        config = None
        if data.get("config") is not None:
            try:
                config = config_from_dict(data["config"], source=f"{self.source}: config")
                check_config(config, f"{self.source}: config")
            except ValueError as err:
                raise ClusterFileError(str(err)) from None
        return snap, config

    def _get(self, where: str, raw: dict[str, Any], key: str, conv: Any, default: Any) -> Any:
        if key not in raw or raw[key] is None:
            return default
        try:
            return conv(raw[key])
        except (TypeError, ValueError) as err:
            raise self.fail(where, f"{key}: {err}") from None

    def node(self, i: int, raw: dict[str, Any]) -> Node:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(f"nodes[{i}]", "name: missing")
        where = f"node {name}"
        gpus = self._get(where, raw, "gpus", _nonneg_int, 0)
        labels = {str(k): str(v) for k, v in (raw.get("labels") or {}).items()}
        labels.setdefault("nvidia.com/gpu.count", str(gpus))
        return Node(
            name=name,
            allocatable={"cpu": self._get(where, raw, "cpu", parse_cpu, 64_000),
                         "memory": self._get(where, raw, "memory", parse_memory, 512 * 1024**3),
                         "nvidia.com/gpu": gpus,
                         "pods": self._get(where, raw, "pods", _nonneg_int, 110)},
            labels=labels,
            gpu_memory_mib=node_gpu_memory_mib(self._get(where, raw, "gpu_memory", _nonneg_int, 81920)),
        )

    def queue(self, i: int, raw: dict[str, Any]) -> Queue:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(f"queues[{i}]", "name: missing")
        where = f"queue {name}"

        def res(key: str, scale: Any) -> QueueResource:
            r = raw.get(key) or {}
            if not isinstance(r, dict):
                raise self.fail(where, f"{key}: expected a mapping with quota, limit, weight")

            def amount(field: str) -> int:
                v = r.get(field, -1)
                if v == -1 or v == "-1":
                    return -1
                try:
                    out = int(scale(v))
                except (TypeError, ValueError) as err:
                    raise self.fail(where, f"{key}.{field}: {err}") from None
                if out < 0:
                    raise self.fail(where, f"{key}.{field}: must be >= 0 or -1 (unlimited), got {v}")
                return out
            weight = self._get(where, r, "weight", float, 1.0)
            return QueueResource(amount("quota"), amount("limit"), weight)

        return Queue(name=name, parent=str(raw.get("parent") or ""),
                     priority=self._get(where, raw, "priority", int, 100), creation=NOW + i,
                     gpu=res("gpu", lambda v: queue_amount(float(v), "gpu")), cpu=res("cpu", parse_cpu),
                     memory=res("memory", parse_memory))

    def job(self, i: int, raw: dict[str, Any], n_jobs: int, nodes: set[str]) -> tuple[PodGroup, list[Pod]]:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(f"jobs[{i}]", "name: missing")
        where = f"job {name}"
        queue = raw.get("queue")
        if not isinstance(queue, str) or not queue:
            raise self.fail(where, "queue: missing")
        prio_raw = raw.get("priority", "train")
        if isinstance(prio_raw, str) and prio_raw in PRIORITY_CLASSES:
            priority = PRIORITY_CLASSES[prio_raw]
        else:
            priority = self._get(where, raw, "priority", int, 50)
        n = self._get(where, raw, "pods", _pos_int, 1)
        min_member = self._get(where, raw, "min_member", _pos_int, n)
        if min_member > n:
            raise self.fail(where, f"min_member: {min_member} is more than the {n} pods")
        preemptible = bool(raw.get("preemptible", default_preemptible(priority)))
        age = self._get(where, raw, "age_minutes", float, float(n_jobs - i))
        pg = PodGroup(uid=name, name=name, namespace="default", queue=queue, priority=priority,
                      preemptible=preemptible, creation=NOW - age * 60, min_member=min_member)
        gpu = self.gpu(where, raw)
        running = raw.get("running_on") or []
        if not isinstance(running, list):
            raise self.fail(where, "running_on: expected a list of node names")
        for node in running:
            if node not in nodes:
                raise self.fail(where, f"running_on: unknown node {node!r}")
        pods = []
        for k in range(n):
            node = running[k] if k < len(running) else None
            pods.append(Pod(uid=f"{name}-{k}", name=f"{name}-{k}", namespace="default", job=name,
                            status=PodStatus.RUNNING if node else PodStatus.PENDING, node=node,
                            cpu_milli=self._get(where, raw, "cpu", parse_cpu, 1000),
                            memory=self._get(where, raw, "memory", parse_memory, 1024**3), gpu=gpu))
        if running:
            pg.last_start_time = NOW - 60
        return pg, pods

    def gpu(self, where: str, raw: dict[str, Any]) -> GpuRequest:
        mem = self._get(where, raw, "gpu_memory", _nonneg_int, 0)
        devices = self._get(where, raw, "gpu_devices", _pos_int, 1)
        gpus = self._get(where, raw, "gpus", float, 0.0)
        if mem and gpus:
            raise self.fail(where, "gpus and gpu_memory: give one of them, not both")
        if mem:
            return GpuRequest(memory_mib=mem, devices=devices)
        try:
            return gpus_request(gpus, devices=devices)
        except ConvertError as err:
            raise self.fail(where, str(err)) from None


def _nonneg_int(v: Any) -> int:
    out = int(v)
    if out < 0 or (isinstance(v, float) and v != out):
        raise ValueError(f"expected a non-negative integer, got {v!r}")
    return out


def _pos_int(v: Any) -> int:
    out = _nonneg_int(v)
    if out == 0:
        raise ValueError("expected a positive integer, got 0")
    return out

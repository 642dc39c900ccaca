"""Scenario files: the cluster, queues, workload, clock settings and scheduler of one simulation.

Schema (all sections documented in docs/simulator.md):

    name: default
    seed: 1
    cluster: {nodes: [...node entries...] | file: nodes.csv|yaml, topologies: [{name, levels}]}
    queues: [...Queue objects or short form...] | {file: queues.yaml}
    workload: {source: jobs|philly|pollux|sia|openb, file: PATH, sample: {fraction|count}, ...}
              (source jobs may list them inline instead: `jobs: [{name, arrival, duration, ...}]`)
    simulation: {cycle_interval: 10s, duration: 2d, eviction_grace: 30s, sample_interval: 5m,
                 full_cycle_every: 0}
    scheduler: {...KAI config...} | PATH

Paths are relative to the scenario file; `${traces}` is the traces directory (`$SHOAL_TRACES`,
else the traces shipped with shoal, `shoal/data/traces`). Trace files are read plain or `.gz`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from shoal.model import Node, Queue, Topology
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.jobs import check_names, job_from_mapping
from shoal.sim.loaders.nodes import check_unique, load_nodes, node_from_mapping
from shoal.sim.loaders.openb import default_traces_dir
from shoal.sim.loaders.queues import leaf_names, load_queues, queues_from_list
from shoal.sim.loaders.registry import trace_loaders
from shoal.sim.loaders.traces import TraceOptions
from shoal.sim.loaders.yamlio import duration, load_docs, mapping, number, where
from shoal.sim.schedconf import SimSchedulerConfig, config_from_mapping, load_config
from shoal.sim.workload import JobSpec

TOP_KEYS = {"name", "seed", "cluster", "queues", "workload", "simulation", "scheduler", "description"}


@dataclass(slots=True)
class SimSettings:
    cycle_interval: float = 10.0
    duration: float = 0.0  # 0 = until every job finished (capped at 60 days)
    eviction_grace: float = 30.0
    sample_interval: float = 300.0
    full_cycle_every: float = 0.0


@dataclass(slots=True)
class Scenario:
    name: str
    seed: int
    nodes: list[Node]
    queues: list[Queue]
    jobs: list[JobSpec]
    settings: SimSettings
    scheduler: SimSchedulerConfig
    topologies: list[Topology] = field(default_factory=list)
    source: str = ""

    @property
    def leaf_queues(self) -> list[str]:
        return leaf_names(self.queues)


def default_scenario_path() -> Path:
    return Path(str(resources.files("shoal.sim") / "scenarios" / "default.yaml"))


def _path(raw: object, base: Path, at: str, field_name: str) -> Path:
    if not isinstance(raw, str) or not raw:
        raise SimInputError(f"{at}: {field_name}: expected a file path")
    text = raw.replace("${traces}", str(default_traces_dir()))
    p = Path(text)
    return p if p.is_absolute() else (base / p)


def _cluster(raw: dict[str, Any], base: Path, at: str) -> tuple[list[Node], list[Topology]]:
    topologies = []
    for t in raw.get("topologies") or []:
        if not isinstance(t, dict) or not t.get("name") or not isinstance(t.get("levels"), list):
            raise SimInputError(f"{where(at, t)}: cluster.topologies: expected {{name, levels: [...]}}")
        topologies.append(Topology(str(t["name"]), tuple(str(x) for x in t["levels"])))
    if "file" in raw:
        return load_nodes(_path(raw["file"], base, at, "cluster.file")), topologies
    entries = raw.get("nodes")
    if not isinstance(entries, list) or not entries:
        raise SimInputError(f"{at}: cluster: give `file:` or a non-empty `nodes:` list")
    nodes: list[Node] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise SimInputError(f"{at}: cluster.nodes[{i}]: expected a mapping")
        nodes.extend(node_from_mapping(e, where(at.split(":")[0], e), i))
    return check_unique(nodes, at), topologies


def _queues(raw: object, base: Path, at: str) -> list[Queue]:
    if isinstance(raw, dict) and "file" in raw:
        return load_queues(_path(raw["file"], base, at, "queues.file"))
    if not isinstance(raw, list) or not raw:
        raise SimInputError(f"{at}: queues: give `file:` or a non-empty list")
    return queues_from_list(raw, at.split(":")[0])


def _trace_options(w: dict[str, Any], at: str) -> TraceOptions:
    opts = TraceOptions()
    if "max_gpus_per_pod" in w:
        opts.max_gpus_per_pod = int(number(w["max_gpus_per_pod"], at, "workload.max_gpus_per_pod", minimum=1))
    if "cpu_per_gpu" in w:
        opts.cpu_per_gpu = int(number(w["cpu_per_gpu"], at, "workload.cpu_per_gpu", minimum=0) * 1000)
    if "memory_per_gpu_gib" in w:
        opts.memory_per_gpu = int(
            number(w["memory_per_gpu_gib"], at, "workload.memory_per_gpu_gib", minimum=0) * 1024**3
        )
    opts.priority_class = str(w.get("priority_class", opts.priority_class))
    opts.queue_map = {
        str(k): str(v) for k, v in mapping(w.get("queue_map"), at, "workload.queue_map").items()
    }
    opts.vcs = [str(v) for v in w.get("vcs") or []]
    opts.start, opts.end = str(w.get("start") or ""), str(w.get("end") or "")
    opts.durations = {
        str(k): duration(v, at, f"workload.durations.{k}")
        for k, v in mapping(w.get("durations"), at, "workload.durations").items()
    }
    return opts


def _workload(w: dict[str, Any], base: Path, at: str, rng: random.Random, leaves: list[str]) -> list[JobSpec]:
    source = w.get("source", "jobs")
    loaders = trace_loaders()
    if source not in loaders:
        raise SimInputError(f"{at}: workload.source: expected one of {', '.join(loaders)}, got {source!r}")
    if source == "jobs" and isinstance(w.get("jobs"), list):  # inline, as `shoal snapshot` writes them
        jobs = _inline_jobs(w["jobs"], at)
    else:
        path = _path(w.get("file"), base, at, "workload.file")
        opts = _trace_options(w, at)
        queue = str(w.get("queue") or (leaves[0] if leaves else "default"))
        jobs = loaders[source](path, opts, queue)
    scale = number(w.get("time_scale", 1.0), at, "workload.time_scale", minimum=0)
    if scale <= 0:
        raise SimInputError(f"{at}: workload.time_scale: must be > 0")
    if scale != 1.0:
        jobs = [replace(j, arrival=j.arrival * scale, duration=max(j.duration * scale, 1.0)) for j in jobs]
    jobs = _sample(jobs, mapping(w.get("sample"), at, "workload.sample"), at, rng)
    unknown = sorted({j.queue for j in jobs} - set(leaves))
    if unknown:
        raise SimInputError(
            f"{at}: workload: job queue(s) {', '.join(unknown)} are not leaf queues "
            f"(leaves: {', '.join(leaves)}; map them with workload.queue_map)"
        )
    if not jobs:
        raise SimInputError(f"{at}: workload: no jobs")
    return jobs


def _inline_jobs(raw: list[Any], at: str) -> list[JobSpec]:
    jobs = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise SimInputError(f"{at}: workload.jobs[{i}]: expected a mapping")
        jobs.append(job_from_mapping(entry, f"{at}: workload.jobs[{i}]"))
    return check_names(jobs, Path(at))


def _sample(jobs: list[JobSpec], s: dict[str, Any], at: str, rng: random.Random) -> list[JobSpec]:
    """Keep a seeded random subset (order of arrival preserved)."""
    if not s:
        return jobs
    if "fraction" in s:
        f = number(s["fraction"], at, "workload.sample.fraction", minimum=0)
        return [j for j in jobs if rng.random() < f]
    if "count" in s:
        n = int(number(s["count"], at, "workload.sample.count", minimum=0))
        keep = set(rng.sample(range(len(jobs)), min(n, len(jobs))))
        return [j for i, j in enumerate(jobs) if i in keep]
    raise SimInputError(f"{at}: workload.sample: expected `fraction` or `count`")


def _settings(raw: dict[str, Any], at: str) -> SimSettings:
    s = SimSettings()
    unknown = set(raw) - set(SimSettings.__dataclass_fields__)
    if unknown:
        raise SimInputError(f"{at}: simulation: unknown field(s) {', '.join(sorted(unknown))}")
    for key in SimSettings.__dataclass_fields__:
        if key in raw:
            setattr(s, key, duration(raw[key], at, f"simulation.{key}"))
    if s.cycle_interval <= 0 or s.sample_interval <= 0:
        raise SimInputError(f"{at}: simulation: cycle_interval and sample_interval must be > 0")
    return s


def load_scenario(
    path: Path | None = None, *, seed: int | None = None, config: SimSchedulerConfig | None = None
) -> Scenario:
    """Read and validate a scenario (the built-in default when `path` is None). `seed` and
    `config` override the file's."""
    path = path or default_scenario_path()
    if not path.is_file():
        raise SimInputError(f"{path}: no such scenario file")
    docs = load_docs(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise SimInputError(f"{path}: expected one YAML mapping (a scenario)")
    data = docs[0]
    if data.get("kind") == "ClusterSnapshot" and isinstance(data.get("scenario"), dict):
        data = data["scenario"]  # `shoal snapshot` output: its scenario section
    at = where(path, data)
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SimInputError(f"{at}: unknown top-level field(s) {', '.join(sorted(unknown))}")
    base = path.parent
    run_seed = int(number(data.get("seed", 0), at, "seed")) if seed is None else seed
    nodes, topologies = _cluster(
        mapping(data.get("cluster"), at, "cluster"), base, where(path, data.get("cluster"))
    )
    queues = _queues(data.get("queues"), base, at)
    rng = random.Random(run_seed)
    jobs = _workload(
        mapping(data.get("workload"), at, "workload"),
        base,
        where(path, data.get("workload")),
        rng,
        leaf_names(queues),
    )
    if config is None:
        sched = data.get("scheduler")
        if isinstance(sched, str):
            config = load_config(_path(sched, base, at, "scheduler"))
        else:
            config = config_from_mapping(mapping(sched, at, "scheduler"), f"{at}: scheduler", "default")
    return Scenario(
        name=str(data.get("name") or path.stem),
        seed=run_seed,
        nodes=nodes,
        queues=queues,
        jobs=jobs,
        settings=_settings(
            mapping(data.get("simulation"), at, "simulation"), where(path, data.get("simulation"))
        ),
        scheduler=config,
        topologies=topologies,
        source=str(path),
    )

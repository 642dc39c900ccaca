"""Public trace loaders (columns: shoal/data/traces/README.md) into `JobSpec`s.

Every trace file is read plain or gzip-compressed (`X` or `X.gz`, see `shoal.sim.datafiles`).

* Philly (`philly.csv`, Pollux preprocessing): `timestamp,duration,num_gpus,gpu_time,cluster`;
  the virtual cluster (VC) becomes the queue (or `queue_map[vc]`), a job larger than a node
  becomes a gang of node-sized pods.
* Pollux / Sia workloads (Philly and Helios-Saturn samples): `name,time,application,
  num_replicas,batch_size`. They carry no duration; the run time is `durations[application]`
  (seconds; a rough per-application default is used when not given, see `POLLUX_DURATIONS`).
* openb pod lists (Alibaba GPU 2023): resources validated by `shoal.sim.loaders.openb.load_pods`;
  arrival = `creation_time`, duration = `deletion_time - creation_time` (pods without a deletion
  time run `default_duration`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from shoal.sim import datafiles
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.openb import OpenbFormatError, load_pods
from shoal.sim.workload import MILLI, JobSpec, check_job, split_gpus

GIB = 1024**3
#: Placeholder run times (s) of Pollux/Sia applications for rigid jobs. NOT the Pollux model
#: (which needs step-time profiles); order of magnitude only: small/medium/large GPU-time classes.
POLLUX_DURATIONS = {
    "cifar10": 1800.0,
    "ncf": 900.0,
    "deepspeech2": 7200.0,
    "yolov3": 10800.0,
    "bert": 3600.0,
    "imagenet": 36000.0,
}


@dataclass(slots=True)
class TraceOptions:
    """How trace rows become jobs (scenario `workload:` keys)."""

    max_gpus_per_pod: int = 8
    cpu_per_gpu: int = 4000
    memory_per_gpu: int = 32 * GIB
    priority_class: str = "train"
    queue_map: dict[str, str] = field(default_factory=dict)
    vcs: list[str] = field(default_factory=list)
    start: str = ""
    end: str = ""
    durations: dict[str, float] = field(default_factory=dict)
    default_duration: float = 3600.0


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
    try:
        fh = datafiles.open_text(path, "trace")
    except datafiles.DataFileMissing as err:
        raise SimInputError(str(err)) from None
    path = datafiles.locate(path) or path
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise SimInputError(f"{path}:1: missing column(s) {', '.join(missing)}")
        out = []
        for row in reader:
            at = f"{path}:{reader.line_num}"
            if None in row:
                raise SimInputError(f"{at}: more fields than the header")
            out.append((at, row))
    return out


def _float(row: dict[str, str], key: str, at: str) -> float:
    try:
        return float(row[key])
    except (TypeError, ValueError):
        raise SimInputError(f"{at}: {key}: expected a number, got {row.get(key)!r}") from None


def _time(value: str, at: str, field: str) -> datetime:
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise SimInputError(f"{at}: {field}: expected YYYY-MM-DD[ HH:MM:SS], got {value!r}") from None


def _sized(opts: TraceOptions, name: str, arrival: float, dur: float, queue: str, gpus: float) -> JobSpec:
    pods, milli = split_gpus(gpus, opts.max_gpus_per_pod)
    per_pod_gpus = max(milli / MILLI, 0.25)
    return JobSpec(
        name=name,
        arrival=arrival,
        duration=dur,
        queue=queue,
        pods=pods,
        gpu_milli=milli,
        cpu_milli=int(opts.cpu_per_gpu * per_pod_gpus),
        memory=int(opts.memory_per_gpu * per_pod_gpus),
        priority_class=opts.priority_class,
    )


def load_philly(path: Path, opts: TraceOptions) -> list[JobSpec]:
    """Philly jobs submitted in [start, end) of the chosen VCs, arrival relative to `start` (or to
    the first kept submission), sorted by (submission, line)."""
    start = _time(opts.start, "workload", "start") if opts.start else None
    end = _time(opts.end, "workload", "end") if opts.end else None
    kept: list[tuple[datetime, int, str, dict[str, str]]] = []
    for n, (at, row) in enumerate(_rows(path, ("timestamp", "duration", "num_gpus", "cluster"))):
        ts = _time(row["timestamp"], at, "timestamp")
        if (start and ts < start) or (end and ts >= end):
            continue
        vc = row["cluster"].strip()
        if opts.vcs and vc not in opts.vcs:
            continue
        kept.append((ts, n, at, row))
    kept.sort(key=lambda k: (k[0], k[1]))
    if not kept:
        raise SimInputError(f"{path}: no job matches the workload filter (vcs, start, end)")
    origin = start or kept[0][0]
    jobs = []
    for ts, _n, at, row in kept:
        dur, gpus = _float(row, "duration", at), _float(row, "num_gpus", at)
        if gpus < 0 or gpus != int(gpus):
            raise SimInputError(f"{at}: num_gpus: expected a whole number >= 0, got {row['num_gpus']!r}")
        vc = row["cluster"].strip()
        queue = opts.queue_map.get(vc, opts.queue_map.get("*", vc))
        job = _sized(
            opts, f"philly-{at.rsplit(':', 1)[1]}", (ts - origin).total_seconds(), max(dur, 1.0), queue, gpus
        )
        check_job(job, at)
        jobs.append(job)
    return jobs


def load_pollux(path: Path, opts: TraceOptions, queue: str) -> list[JobSpec]:
    """A Pollux/Sia workload file; every job goes to `queue` unless `queue_map[application]`."""
    durations = {**POLLUX_DURATIONS, **opts.durations}
    jobs = []
    for at, row in _rows(path, ("name", "time", "application", "num_replicas")):
        app = row["application"].strip()
        if app not in durations:
            raise SimInputError(f"{at}: application: no duration for {app!r} (set workload.durations)")
        job = _sized(
            opts,
            row["name"].strip(),
            _float(row, "time", at),
            durations[app],
            opts.queue_map.get(app, queue),
            _float(row, "num_replicas", at),
        )
        check_job(job, at)
        jobs.append(job)
    return sorted(jobs, key=lambda j: j.arrival)


def load_openb(path: Path, opts: TraceOptions, queue: str) -> list[JobSpec]:
    """openb pods as one-pod jobs (fractions kept); queue = `queue_map[qos]` or `queue`."""
    try:
        pods = {p.name: p for p in load_pods(path)}
    except OpenbFormatError as err:
        raise SimInputError(str(err)) from None
    jobs = []
    for at, row in _rows(path, ("name",)):
        p = pods[row["name"].strip()]
        created = float(row.get("creation_time") or 0.0)
        deleted = row.get("deletion_time") or ""
        dur = float(deleted) - created if deleted else opts.default_duration
        milli = p.gpu_milli if p.num_gpu == 1 else p.num_gpu * MILLI
        job = JobSpec(
            name=p.name,
            arrival=created,
            duration=max(dur, 1.0),
            queue=opts.queue_map.get(row.get("qos", ""), queue),
            pods=1,
            gpu_milli=milli,
            cpu_milli=p.cpu_milli,
            memory=p.memory_mib * 1024 * 1024,
            priority_class=opts.priority_class,
        )
        check_job(job, at)
        jobs.append(job)
    return sorted(jobs, key=lambda j: (j.arrival, j.name))

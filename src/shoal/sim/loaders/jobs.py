"""shoal's own job format, as CSV or YAML, into `JobSpec`s.

CSV columns (header required; order free): `name,arrival,duration,queue,gpus` and optionally
`pods` (gang size, default 1), `cpu` (per pod, cores or `500m`), `memory` (per pod, `8Gi`),
`priority_class` (train, build-preemptible, build, inference), `topology`, `required_level`,
`preferred_level`. `gpus` is per pod: whole GPUs (`2`) or a fraction of one GPU (`0.5`; KAI counts fractions in
0.01 GPU, so `0.333` is 0.33).
`arrival` and `duration` are seconds (or `1h30m`-style strings). YAML: a list (or `jobs:`) of
mappings with the same keys.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from shoal.kai.units import ConvertError, gpus_request
from shoal.model.resources import parse_cpu, parse_memory
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.yamlio import duration, load_docs, number, where
from shoal.sim.workload import JobSpec, check_job

REQUIRED = ("name", "arrival", "duration", "queue", "gpus")
OPTIONAL = ("pods", "cpu", "memory", "priority_class", "topology", "required_level", "preferred_level")


def job_from_mapping(raw: dict[str, Any], at: str) -> JobSpec:
    """One job; the error names `at` (file:line) and the field."""
    missing = [k for k in REQUIRED if raw.get(k) in (None, "")]
    if missing:
        raise SimInputError(f"{at}: {missing[0]}: missing")
    unknown = set(raw) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        raise SimInputError(f"{at}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        # KAI's rule (0.01-GPU resolution), so a job simulated is the job the live scheduler sees.
        gpu = gpus_request(number(raw["gpus"], at, "gpus", minimum=0))
    except ConvertError as err:
        raise SimInputError(f"{at}: {err}") from None
    try:
        cpu = parse_cpu(raw.get("cpu", 1))
    except ValueError as err:
        raise SimInputError(f"{at}: cpu: {err}") from None
    try:
        mem = parse_memory(raw.get("memory", "4Gi"))
    except ValueError as err:
        raise SimInputError(f"{at}: memory: {err}") from None
    pods = number(raw.get("pods", 1), at, "pods", minimum=1)
    if pods != int(pods):
        raise SimInputError(f"{at}: pods: expected an integer, got {raw.get('pods')!r}")
    job = JobSpec(
        name=str(raw["name"]),
        arrival=duration(raw["arrival"], at, "arrival"),
        duration=duration(raw["duration"], at, "duration"),
        queue=str(raw["queue"]),
        pods=int(pods),
        gpu_milli=gpu.milli,
        cpu_milli=cpu,
        memory=mem,
        priority_class=str(raw.get("priority_class") or "train"),
        topology=str(raw.get("topology") or ""),
        required_level=str(raw.get("required_level") or ""),
        preferred_level=str(raw.get("preferred_level") or ""),
    )
    check_job(job, at)
    return job


def load_jobs_csv(path: Path) -> list[JobSpec]:
    jobs = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise SimInputError(f"{path}:1: missing column(s) {', '.join(missing)}")
        for row in reader:
            at = f"{path}:{reader.line_num}"
            if None in row:
                raise SimInputError(f"{at}: more fields than the header")
            jobs.append(job_from_mapping({k: v for k, v in row.items() if v not in (None, "")}, at))
    return check_names(jobs, path)


def load_jobs_yaml(path: Path) -> list[JobSpec]:
    entries: list[Any] = []
    for doc in load_docs(path):
        if isinstance(doc, dict) and "jobs" in doc:
            doc = doc["jobs"]
        entries.extend(doc if isinstance(doc, list) else [doc])
    jobs = []
    for i, raw in enumerate(entries):
        at = where(path, raw)
        if not isinstance(raw, dict):
            raise SimInputError(f"{at}: job {i}: expected a mapping")
        jobs.append(job_from_mapping(raw, at))
    return check_names(jobs, path)


def check_names(jobs: list[JobSpec], path: Path) -> list[JobSpec]:
    seen: set[str] = set()
    for j in jobs:
        if j.name in seen:
            raise SimInputError(f"{path}: duplicate job name {j.name!r}")
        seen.add(j.name)
    return jobs


def load_jobs(path: Path) -> list[JobSpec]:
    if not path.is_file():
        raise SimInputError(f"{path}: no such file")
    return load_jobs_csv(path) if path.suffix.lower() == ".csv" else load_jobs_yaml(path)

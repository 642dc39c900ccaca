"""Loaders for the Alibaba GPU trace 2023 ("openb") node and pod lists, with row validation.

Column meanings: ``shoal/data/traces/README.md``. Files are read plain or gzip-compressed
(:mod:`shoal.sim.datafiles`). A missing file or a malformed row raises :class:`OpenbFormatError`
naming the file (and the 1-based line number), so a bad trace is never silently half-read.
Only the columns the FGD experiment uses are kept; the time columns are ignored on purpose
(reference/traces.md §3.1 item 2: pods arrive in a shuffled order and never leave).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from shoal.sim import datafiles

GPU_MODELS = ("P100", "T4", "V100M16", "V100M32", "A10", "G2", "G3")
MILLI_PER_GPU = 1000
MAX_GPUS_PER_NODE = 8

OPENB_DIR = "alibaba-gpu-v2023-openb"
NODE_FILE = "openb_node_list_gpu_node.csv"


class OpenbFormatError(ValueError):
    """A trace file is missing, has the wrong columns, or a row fails validation."""


@dataclass(frozen=True, slots=True)
class OpenbNode:
    """One GPU node: capacities in milli-CPU, MiB, whole GPUs; ``model`` is the GPU model label."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One pod request. ``gpu_milli`` is per GPU (1000 = whole GPU); ``gpu_spec`` lists allowed models."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]

    @property
    def gpu_request_milli(self) -> int:
        """Total GPU request in milli-GPU (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli


def default_traces_dir() -> Path:
    """``$SHOAL_TRACES`` if set, else the traces shipped with shoal (``shoal/data/traces``)."""
    return datafiles.default_traces_dir()


def pod_file(traces: Path, workload: str) -> Path:
    """Path of the pod list of ``workload`` (e.g. ``default``, ``gpuspec33``); the file itself may be
    stored as this path + ``.gz`` (the loaders read both)."""
    return traces / OPENB_DIR / f"openb_pod_list_{workload}.csv"


def _int_field(row: dict[str, str], key: str, where: str, lo: int, hi: int) -> int:
    raw = row.get(key)
    if raw is None or raw.strip() == "":
        raise OpenbFormatError(f"{where}: column {key!r} is empty")
    try:
        value = int(raw)
    except ValueError:
        raise OpenbFormatError(f"{where}: column {key!r} is not an integer: {raw!r}") from None
    if not lo <= value <= hi:
        raise OpenbFormatError(f"{where}: column {key!r}={value} outside [{lo}, {hi}]")
    return value


def _read_rows(path: Path, required: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
    """Rows of a CSV file (plain or ``.gz``) as (``file:line`` location, row dict); checks the header first."""
    try:
        fh = datafiles.open_text(path, "trace")
    except datafiles.DataFileMissing as err:
        raise OpenbFormatError(str(err)) from None
    path = datafiles.locate(path) or path
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise OpenbFormatError(f"{path}:1: missing column(s) {', '.join(missing)}")
        rows = []
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                raise OpenbFormatError(f"{where}: more fields than the header")
            rows.append((where, row))
    return rows


def load_nodes(path: Path) -> list[OpenbNode]:
    """Read an openb node list. Node names must be unique; GPU nodes need a known model."""
    nodes: list[OpenbNode] = []
    seen: set[str] = set()
    for where, row in _read_rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        name = row["sn"].strip()
        if not name or name in seen:
            raise OpenbFormatError(f"{where}: node name {name!r} is empty or duplicated")
        seen.add(name)
        gpu = _int_field(row, "gpu", where, 0, MAX_GPUS_PER_NODE)
        model = (row["model"] or "").strip()
        if gpu > 0 and model not in GPU_MODELS:
            raise OpenbFormatError(f"{where}: unknown GPU model {model!r}")
        cpu = _int_field(row, "cpu_milli", where, 0, 10**9)
        mem = _int_field(row, "memory_mib", where, 0, 10**12)
        nodes.append(OpenbNode(name, cpu, mem, gpu, model))
    return nodes


def load_pods(path: Path) -> list[OpenbPod]:
    """Read an openb pod list (5-column multigpu lists have no ``gpu_spec``: any model allowed).

    Validation: 0 <= num_gpu <= 8, 0 <= gpu_milli <= 1000, GPU pods have gpu_milli > 0, a
    fractional pod asks for exactly one GPU, and every model in ``gpu_spec`` is known.
    """
    pods: list[OpenbPod] = []
    seen: set[str] = set()
    for where, row in _read_rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        name = row["name"].strip()
        if not name or name in seen:
            raise OpenbFormatError(f"{where}: pod name {name!r} is empty or duplicated")
        seen.add(name)
        num_gpu = _int_field(row, "num_gpu", where, 0, MAX_GPUS_PER_NODE)
        milli = _int_field(row, "gpu_milli", where, 0, MILLI_PER_GPU)
        if (num_gpu > 0) != (milli > 0):
            raise OpenbFormatError(f"{where}: num_gpu={num_gpu} but gpu_milli={milli}")
        if num_gpu > 1 and milli != MILLI_PER_GPU:
            raise OpenbFormatError(f"{where}: a {num_gpu}-GPU pod must request whole GPUs")
        spec = tuple(p for p in (row.get("gpu_spec") or "").split("|") if p)
        unknown = [m for m in spec if m not in GPU_MODELS]
        if unknown:
            raise OpenbFormatError(f"{where}: unknown GPU model(s) in gpu_spec: {unknown}")
        cpu = _int_field(row, "cpu_milli", where, 0, 10**9)
        mem = _int_field(row, "memory_mib", where, 0, 10**12)
        pods.append(OpenbPod(name, cpu, mem, num_gpu, milli, spec))
    return pods

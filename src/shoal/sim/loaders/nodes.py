"""Cluster loaders: node lists as CSV (shoal's columns or the openb node list) or YAML, and node
templates (`count` copies of one shape), into `shoal.model.Node`s.

shoal CSV columns: `name,cpu,memory,gpus[,gpu_model][,gpu_memory_mib][,labels]` with `cpu` in
cores or `500m`, `memory` a quantity (`512Gi`), `labels` as `k=v;k=v`. YAML: a list of nodes
(or `nodes:` list) with the same keys, `labels` a mapping, and optional `count` (the node is
repeated `count` times as `<name>-<i>`; a label value may contain `{i}` and `{rack}` with
`rack = i // nodes_per_rack`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from shoal.kai.names import GPU_COUNT_NODE_LABEL, GPU_MEMORY_NODE_LABEL, GPU_PRODUCT_NODE_LABEL
from shoal.kai.units import node_gpu_memory_mib
from shoal.model import Node
from shoal.model.resources import parse_cpu, parse_memory
from shoal.sim.errors import SimInputError
from shoal.sim.loaders.yamlio import load_docs, mapping, number, where

MIB = 1024 * 1024
GPU_MEMORY_MIB = {
    "P100": 16384,
    "T4": 16384,
    "V100": 16384,
    "V100M16": 16384,
    "V100M32": 32768,
    "A10": 24576,
    "A100": 40960,
    "A100-80GB": 81920,
    "H100": 81920,
    "H800": 81920,
}


def build_node(
    name: str,
    cpu_milli: int,
    memory: int,
    gpus: int,
    model: str = "",
    gpu_memory_mib: int = 0,
    labels: dict[str, str] | None = None,
) -> Node:
    """A node with KAI's GPU labels set (`nvidia.com/gpu.product`, `.count`, `.memory`)."""
    labels = dict(labels or {})
    mem_mib = gpu_memory_mib or GPU_MEMORY_MIB.get(model, 16384)
    if gpus:
        labels.setdefault(GPU_COUNT_NODE_LABEL, str(gpus))
        labels.setdefault(GPU_MEMORY_NODE_LABEL, str(mem_mib))
        if model:
            labels.setdefault(GPU_PRODUCT_NODE_LABEL, model)
    alloc = {"cpu": cpu_milli, "memory": memory, "nvidia.com/gpu": gpus, "pods": 110}
    return Node(name=name, allocatable=alloc, labels=labels, gpu_memory_mib=node_gpu_memory_mib(mem_mib))


def _quantity(value: object, at: str, field: str, parse: Any) -> int:
    try:
        return int(parse(value))
    except ValueError as err:
        raise SimInputError(f"{at}: {field}: {err}") from None


def node_from_mapping(raw: dict[str, Any], at: str, index: int = 0) -> list[Node]:
    """One node entry (maybe with `count`) -> nodes. Errors name `at` and the field."""
    unknown = set(raw) - {
        "name",
        "cpu",
        "memory",
        "gpus",
        "gpu_model",
        "gpu_memory_mib",
        "labels",
        "count",
        "nodes_per_rack",
    }
    if unknown:
        raise SimInputError(f"{at}: unknown field(s) {', '.join(sorted(unknown))}")
    name = str(raw.get("name") or f"node{index}")
    cpu = _quantity(raw.get("cpu", 0), at, "cpu", parse_cpu)
    mem = _quantity(raw.get("memory", 0), at, "memory", parse_memory)
    gpus = int(number(raw.get("gpus", 0), at, "gpus", minimum=0))
    model = str(raw.get("gpu_model") or "")
    gmem = int(number(raw.get("gpu_memory_mib", 0), at, "gpu_memory_mib", minimum=0))
    labels = {str(k): str(v) for k, v in mapping(raw.get("labels"), at, "labels").items()}
    count = raw.get("count")
    if count is None:
        return [build_node(name, cpu, mem, gpus, model, gmem, labels)]
    n = int(number(count, at, "count", minimum=1))
    per_rack = int(number(raw.get("nodes_per_rack", 1), at, "nodes_per_rack", minimum=1))
    width = len(str(n - 1))
    out = []
    for i in range(n):
        lab = {k: v.replace("{i}", str(i)).replace("{rack}", str(i // per_rack)) for k, v in labels.items()}
        out.append(build_node(f"{name}-{i:0{width}d}", cpu, mem, gpus, model, gmem, lab))
    return out


def load_nodes_yaml(path: Path) -> list[Node]:
    docs = load_docs(path)
    entries: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and "nodes" in doc:
            doc = doc["nodes"]
        if isinstance(doc, list):
            entries.extend(doc)
        else:
            entries.append(doc)
    nodes: list[Node] = []
    for i, raw in enumerate(entries):
        at = where(path, raw)
        if not isinstance(raw, dict):
            raise SimInputError(f"{at}: node {i}: expected a mapping")
        nodes.extend(node_from_mapping(raw, at, i))
    return check_unique(nodes, str(path))


def load_nodes_csv(path: Path) -> list[Node]:
    """shoal's node CSV, or the openb node list (`sn,cpu_milli,memory_mib,gpu,model`)."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        openb = "sn" in header and "cpu_milli" in header
        required = (
            ("sn", "cpu_milli", "memory_mib", "gpu", "model") if openb else ("name", "cpu", "memory", "gpus")
        )
        missing = [c for c in required if c not in header]
        if missing:
            raise SimInputError(f"{path}:1: missing column(s) {', '.join(missing)}")
        nodes = []
        for row in reader:
            at = f"{path}:{reader.line_num}"
            if None in row:
                raise SimInputError(f"{at}: more fields than the header")
            if openb:
                raw: dict[str, Any] = {
                    "name": row["sn"],
                    "cpu": f"{row['cpu_milli']}m",
                    "memory": f"{row['memory_mib']}Mi",
                    "gpus": row["gpu"],
                    "gpu_model": row["model"],
                }
            else:
                raw = {k: v for k, v in row.items() if v not in (None, "")}
                raw["labels"] = dict(
                    kv.split("=", 1) for kv in (row.get("labels") or "").split(";") if "=" in kv
                )
            if not str(raw.get("name") or "").strip():
                raise SimInputError(f"{at}: name: empty")
            nodes.extend(node_from_mapping(raw, at))
    return check_unique(nodes, str(path))


def check_unique(nodes: list[Node], source: str) -> list[Node]:
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise SimInputError(f"{source}: duplicate node name {n.name!r}")
        seen.add(n.name)
    if not nodes:
        raise SimInputError(f"{source}: no nodes")
    return nodes


def load_nodes(path: Path) -> list[Node]:
    if not path.is_file():
        raise SimInputError(f"{path}: no such file")
    if path.suffix.lower() == ".csv":
        return load_nodes_csv(path)
    return load_nodes_yaml(path)

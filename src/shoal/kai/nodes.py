"""Node objects -> model Nodes: allocatable in core units, GPU memory by KAI's rule, readiness.

Every allocatable resource is kept, ephemeral storage and huge pages included: kube-scheduler's
NodeResourcesFit checks them, so a scheduler replacing it must too."""

from __future__ import annotations

from shoal.kai.names import GPU_MEMORY_NODE_LABEL, MIG_ENABLED_NODE_LABEL, MIG_STRATEGY_NODE_LABEL
from shoal.kai.objects import JSON, meta
from shoal.kai.pods import MAX_QUANTITY
from shoal.kai.units import gpu_memory_label
from shoal.model.node import Node, Taint
from shoal.model.resources import CPU, GPU, MEMORY, PODS, parse_cpu, parse_memory

_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


def node_from(obj: JSON) -> Node:
    """A Node object -> model Node (resources in core units; GPU memory from its label).

    Never raises: a resource quantity that cannot be read is left out."""
    m = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = dict(m.get("labels") or {})
    alloc: dict[str, int] = {}
    for name, qty in (status.get("allocatable") or {}).items():
        try:
            value = parse_cpu(qty) if name == CPU else parse_memory(qty)
        except (ValueError, TypeError):
            continue  # a resource we cannot read is one we never place against
        if 0 <= value < MAX_QUANTITY:  # beyond that: no real node, and no int64 matrix, holds it
            alloc[str(name)] = value
    for base in (CPU, MEMORY, GPU, PODS):
        alloc.setdefault(base, 0)
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)}
    gpu_mem, synced = gpu_memory_label(labels.get(GPU_MEMORY_NODE_LABEL))
    return Node(
        name=str(m.get("name")),
        allocatable=alloc,
        labels=labels,
        taints=[Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
                for t in spec.get("taints") or [] if isinstance(t, dict)],
        ready=conds.get("Ready") == "True" and not any(conds.get(c) == "True" for c in _PRESSURE),
        unschedulable=bool(spec.get("unschedulable")),
        gpu_memory_mib=gpu_mem,
        gpu_memory_synced=synced,
        mig_strategy=labels.get(MIG_STRATEGY_NODE_LABEL, "none"),
        mig_enabled=labels.get(MIG_ENABLED_NODE_LABEL) == "true",
    )

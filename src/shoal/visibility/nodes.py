"""The node x GPU grid of a finished session: who holds which GPU, whole or by fraction.

Whole-GPU pods hold a number of a node's devices (Kubernetes' device plugin picks which, so the
grid shows them as the first devices in pod order); shared pods hold a portion of a named GPU
group (KAI's `runai-gpu-group`), one cell per group with every pod's portion.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from shoal.framework.session import Session
from shoal.model.status import ACTIVE_USED, PodStatus
from shoal.visibility.quantities import MILLI


def node_grid(ssn: Session, limit: int = 2000) -> list[dict[str, Any]]:
    """Per node (first `limit` by name): GPU count, readiness and its cells (see the module doc).

    Cell: `{"pods": [{"pod", "namespace", "queue", "portion", "releasing"}], "shared": bool}`;
    free devices are cells with no pods. Never mutates the session."""
    whole: dict[int, list[dict[str, Any]]] = defaultdict(list)
    shared: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for t in ssn.tasks.values():
        if t.node < 0 or not t.status & ACTIVE_USED or not t.pod.gpu.any:
            continue
        who = {"pod": t.pod.name, "namespace": t.pod.namespace, "queue": t.job.pg.queue if t.job else "",
               "releasing": t.status == PodStatus.RELEASING}
        if t.pod.gpu.is_shared:
            portion = (t.portion or t.pod.gpu.portion_milli) / MILLI
            for g in t.groups:
                shared[t.node][g].append({**who, "portion": round(portion, 2)})
        else:
            whole[t.node].extend({**who, "portion": 1.0} for _ in range(t.pod.gpu.whole))
    out = []
    nodes = ssn.nodes
    for i, node in enumerate(nodes.nodes[:limit]):
        cells: list[dict[str, Any]] = [{"pods": [p], "shared": False} for p in whole.get(i, [])]
        cells += [{"pods": pods, "shared": True, "group": g} for g, pods in sorted(shared.get(i, {}).items())]
        total = int(nodes.gpu_count[i])
        cells += [{"pods": [], "shared": False} for _ in range(max(total - len(cells), 0))]
        out.append({"name": node.name, "gpus": total, "ready": node.ready and not node.unschedulable,
                    "gpuMemoryMiB": int(nodes.gpu_memory[i]), "cells": cells})
    return out

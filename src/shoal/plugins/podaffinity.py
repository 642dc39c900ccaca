"""The podaffinity plugin: kube-scheduler's preferences of a pod spec, scored as kube-scheduler does.

KAI's `podaffinity` plugin bridges kube-scheduler's InterPodAffinity score into KAI's node order
at weight `scores.K8sPlugins` (100,000). shoal's scores every preference a pod spec can state,
with kube-scheduler's plugins, normalisations and default weights over the candidate nodes:

    3 x TaintToleration (PreferNoSchedule)  +  2 x NodeAffinity (preferred terms)
  + 2 x InterPodAffinity (preferred terms, both ways)  +  2 x PodTopologySpread (ScheduleAnyway)

and adds it x 100,000 to the node-local scores, so a pod's stated preferences order nodes first
and KAI's scores (availability, GPU sharing, binpack...) break the ties. The resource-balance
scores of kube-scheduler (NodeResourcesFit, BalancedAllocation, ImageLocality) are not used:
KAI's placement strategy decides instead. Not node-local, so it is a pick-time score adjuster.
"""

from __future__ import annotations

import numpy as np

from shoal.framework.interpod import affinity_raw_score, normalise_affinity
from shoal.framework.jobs import Task
from shoal.framework.nodefilters import node_index
from shoal.framework.session import Session
from shoal.framework.spread import spread_score

K8S_PLUGINS = 100_000.0
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "InterPodAffinity": 2, "PodTopologySpread": 2}


def kube_scores(ssn: Session, task: Task, rows: np.ndarray) -> dict[str, np.ndarray]:
    """kube-scheduler's normalised (0..100) score per plugin for the candidate `rows`. Pure."""
    pod = task.pod
    nidx = node_index(ssn)
    out: dict[str, np.ndarray] = {}
    taints = nidx.intolerable_prefer_count(pod.tolerations)[rows]
    top = int(taints.max(initial=0))
    out["TaintToleration"] = (np.full(len(rows), 100, dtype=np.int64) if top == 0
                              else 100 - 100 * taints // top)
    weights = nidx.preferred_weight(pod)[rows]
    top = int(weights.max(initial=0))
    out["NodeAffinity"] = np.zeros(len(rows), dtype=np.int64) if top <= 0 else 100 * weights // top
    raw = affinity_raw_score(ssn, task)
    out["InterPodAffinity"] = (np.zeros(len(rows), dtype=np.int64) if raw is None
                               else normalise_affinity(raw[rows]))
    spread = spread_score(ssn, task, rows)
    out["PodTopologySpread"] = np.zeros(len(rows), dtype=np.int64) if spread is None else spread
    return out


def kube_total(ssn: Session, task: Task, rows: np.ndarray) -> np.ndarray:
    """kube-scheduler's weighted total of the four preference plugins for `rows`."""
    total = np.zeros(len(rows), dtype=np.int64)
    for name, score in kube_scores(ssn, task, rows).items():
        total += WEIGHTS[name] * score
    return total


def open_podaffinity(ssn: Session, args: dict[str, str]) -> None:
    """Register the kube-scheduler preference score as a pick-time adjuster."""
    prefer_taints = any(t.effect == "PreferNoSchedule" for n in ssn.nodes.nodes for t in n.taints)
    # Terms that score other pods (kube-scheduler's symmetric InterPodAffinity terms).
    scoring_terms = any(pa is not None and (pa.required or pa.preferred or pa.preferred_anti)
                        for pa in (t.pod.pod_affinity for t in ssn.task_list))

    def adjust(s: Session, task: Task, rows: np.ndarray, scores: np.ndarray) -> np.ndarray | None:
        pod = task.pod
        soft_spread = any(not c.hard for c in pod.spread)
        preferred = pod.node_affinity is not None and bool(pod.node_affinity.preferred)
        if not (prefer_taints or scoring_terms or soft_spread or preferred):
            return None  # nothing any task of this signature could prefer in this session
        total = kube_total(s, task, rows)
        if total.size and total.min() == total.max():
            return scores
        return scores + K8S_PLUGINS * total

    ssn.hooks.score_adjusters.append(adjust)

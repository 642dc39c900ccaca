"""`shoal explain`'s what-if: what a pending gang would preempt if its priority were higher.

One cycle of the same core runs locally on the live cluster (listed read-only, decoded as the
scheduler decodes it) with the gang's priority raised above every other gang of its queue; the
evictions whose preemptor is the gang are its victims. Nothing is written to the cluster.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from shoal.cycle import run_cycle
from shoal.framework.config import ConfigError, config_from_dict
from shoal.kube.export import list_objects, snapshot_from_objects


async def preempt_if_higher(client: Any, scheduler_name: str, report: dict[str, Any],
                            gang: dict[str, Any]) -> dict[str, Any] | None:
    """`{priority, starts, victims: [{pod, namespace, node, action, job}], summary}`; None if the gang
    is not in the live cluster any more."""
    objects = await list_objects(client)
    snap = snapshot_from_objects(objects, scheduler_name, time.time())
    return what_if_priority(snap, report.get("config") or {}, gang["uid"])


def what_if_priority(snap: Any, config_dict: dict[str, Any], uid: str) -> dict[str, Any] | None:
    """The what-if on a snapshot (pure: the snapshot is not mutated)."""
    try:
        config = config_from_dict(config_dict, source="the scheduler's config")
    except ConfigError:
        config = config_from_dict({})
    target = next((g for g in snap.podgroups if g.uid == uid), None)
    if target is None:
        return None
    top = max((g.priority for g in snap.podgroups if g.queue == target.queue and g.uid != uid), default=0)
    priority = max(top + 1, target.priority + 1)
    raised = dataclasses.replace(target, priority=priority)
    snap2 = dataclasses.replace(snap, podgroups=[raised if g.uid == uid else g for g in snap.podgroups])
    result = run_cycle(snap2, config)
    d = result.decisions
    names = {p.uid: p.name for p in snap.pods}
    victims = [{"pod": names.get(e.pod, e.pod), "namespace": e.namespace, "node": e.node, "action": e.action,
                "job": e.job} for e in d.evictions if e.preemptor == uid]
    bound = sum(1 for b in d.binds if b.job == uid)
    piped = sum(1 for p in d.pipelines if p.job == uid)
    result.release()
    jobs = len({v["job"] for v in victims})
    if victims:
        summary = (f"it would preempt {len(victims)} pod(s) of {jobs} gang(s) and "
                   + ("start at once" if bound and not piped else "start once they have left"))
    elif bound or piped:
        summary = "it would start without preempting anything"
    else:
        ex = d.explanations.get(uid)
        why = "; ".join(ex.messages[:2]) if ex else "no lower-priority preemptible pods to take"
        summary = f"it would still wait: nothing it may preempt frees enough ({why})"
    return {"priority": priority, "starts": bool(bound or piped), "victims": victims, "summary": summary}

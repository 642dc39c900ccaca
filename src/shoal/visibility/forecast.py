"""Predicted start times: the same scheduling core run forward on a copy of a snapshot.

`forecast(snapshot, config, runtime)` plays the cluster forward on a virtual clock: running jobs
end when `runtime` says, each event is followed by one cycle of the real core (`run_cycle`, the
configured actions and plugins), its binds start jobs at once, its evictions take gangs down for
`eviction_grace` seconds, and the first time a pending gang runs whole is its predicted start.
Nothing new arrives (the forecast knows only the jobs in the snapshot), so a later high-priority
arrival can make a prediction optimistic.

`runtime(job_uid, elapsed)` is the adapter's runtime model (`shoal.visibility.runtimes`): the
expected *remaining* run time of a job that has run `elapsed` seconds (0 for a job that starts in
the forecast).

Contract: pure (no clock, no I/O); never mutates the snapshot's objects (pods and pod groups are
copied before they change); same inputs, same predictions. Cost: at most `max_cycles` cycles;
events closer than `resolution` seconds share one cycle; the caller's `stop()`, asked before every
cycle but the first, ends it early (the live service's time budget), gangs not started by then
without a prediction and `complete` False.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.cycle import paused_gc, run_cycle
from shoal.framework.config import SchedulerConfig
from shoal.framework.decisions import Bind, Evict
from shoal.model.pod import Pod
from shoal.model.podgroup import PodGroup
from shoal.model.snapshot import ClusterSnapshot
from shoal.model.status import ACTIVE_USED, PodStatus

#: (job uid, seconds it has run) -> expected remaining seconds (math.inf = never ends).
RuntimeModel = Callable[[str, float], float]


@dataclass(slots=True)
class Forecast:
    """Predicted start (snapshot clock) per pending gang uid; None = not within the horizon."""

    starts: dict[str, float | None] = field(default_factory=dict)
    cycles: int = 0
    #: Virtual time the forecast reached (the last event it played).
    reached: float = 0.0
    complete: bool = True


@dataclass(slots=True)
class _State:
    pods: dict[str, Pod]
    groups: dict[str, PodGroup]
    members: dict[str, list[str]]
    ends: dict[str, float] = field(default_factory=dict)
    releases: dict[str, float] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)


def forecast(snapshot: ClusterSnapshot, config: SchedulerConfig, runtime: RuntimeModel, *,
             horizon: float = 7 * 86400.0, max_cycles: int = 200, resolution: float = 60.0,
             eviction_grace: float = 30.0, stop: Callable[[], bool] | None = None) -> Forecast:
    """Predict when each gang with pending pods starts (see the module doc)."""
    st = _initial_state(snapshot, runtime)
    targets = {uid for uid, members in st.members.items()
               if any(st.pods[p].status == PodStatus.PENDING for p in members) and uid in st.groups}
    out = Forecast(starts=dict.fromkeys(sorted(targets)), reached=snapshot.now)
    t, end = snapshot.now, snapshot.now + horizon
    while out.cycles < max_cycles:
        if out.cycles and stop is not None and stop():
            out.complete = False
            break
        snap = dataclasses.replace(snapshot, now=t, pods=list(st.pods.values()), podgroups=list(st.groups.values()))
        with paused_gc():
            result = run_cycle(snap, config)
            d = result.decisions
            result.release()
        out.cycles += 1
        _apply(st, d.binds, d.evictions, t, eviction_grace)
        for uid in targets:
            if out.starts[uid] is None and _runs_whole(st, uid):
                out.starts[uid] = t
                st.ends[uid] = t + runtime(uid, 0.0)
        for uid, t_start in list(st.started_at.items()):
            if uid not in st.ends:
                st.ends[uid] = t_start + runtime(uid, 0.0)
        if all(v is not None for v in out.starts.values()):
            break
        nxt = _next_event(st, t, bool(d.binds or d.evictions or d.pipelines))
        if nxt is None or nxt > end:
            break
        t = _advance(st, nxt, nxt + resolution)
        out.reached = t
    else:
        out.complete = False
    return out


def _initial_state(snapshot: ClusterSnapshot, runtime: RuntimeModel) -> _State:
    pods = {p.uid: p for p in snapshot.pods}
    members: dict[str, list[str]] = {}
    for p in snapshot.pods:
        members.setdefault(p.job, []).append(p.uid)
    st = _State(pods, {g.uid: g for g in snapshot.podgroups}, members)
    for uid, uids in members.items():
        running = [pods[u] for u in uids if pods[u].status & ACTIVE_USED and pods[u].status != PodStatus.RELEASING]
        if running:
            began = min((p.start_time for p in running if p.start_time is not None), default=snapshot.now)
            st.ends[uid] = snapshot.now + runtime(uid, max(snapshot.now - began, 0.0))
        if any(pods[u].status == PodStatus.RELEASING for u in uids):
            st.releases[uid] = snapshot.now
    return st


def _apply(st: _State, binds: list[Bind], evictions: list[Evict], t: float, grace: float) -> None:
    for b in binds:
        p = st.pods.get(b.pod)
        if p is not None:
            st.pods[b.pod] = dataclasses.replace(p, status=PodStatus.RUNNING, node=b.node,
                                                 gpu_groups=list(b.gpu_groups), start_time=t, nominated_node=None)
            st.started_at.setdefault(p.job, t)
    for e in evictions:
        job = e.job
        if job in st.releases and st.releases[job] > t:
            continue
        for u in st.members.get(job, []):
            p = st.pods[u]
            if p.status & ACTIVE_USED:
                st.pods[u] = dataclasses.replace(p, status=PodStatus.RELEASING)
        st.releases[job] = t + grace
        st.ends.pop(job, None)
        st.started_at.pop(job, None)


def _runs_whole(st: _State, uid: str) -> bool:
    g = st.groups.get(uid)
    if g is None:
        return False
    need = sum(ps.min_available for ps in g.pod_sets)
    active = sum(1 for u in st.members.get(uid, []) if st.pods[u].status & ACTIVE_USED
                 and st.pods[u].status != PodStatus.RELEASING and st.pods[u].node is not None)
    return active >= max(need, 1)


def _next_event(st: _State, t: float, decided: bool) -> float | None:
    times = [v for v in st.ends.values() if v > t and math.isfinite(v)]
    times += [v for v in st.releases.values() if v > t]
    if decided:
        times.append(t + 1.0)  # pipelined or just-evicted work: decide again shortly
    return min(times) if times else None


def _advance(st: _State, t: float, until: float) -> float:
    """Play every end and release up to `until`; returns the time the next cycle runs at."""
    last = t
    for uid, when in sorted(st.ends.items(), key=lambda kv: kv[1]):
        if when <= until:
            last = max(last, when)
            for u in st.members.pop(uid, []):
                st.pods.pop(u, None)
            st.groups.pop(uid, None)
            del st.ends[uid]
            st.started_at.pop(uid, None)
    for uid, when in list(st.releases.items()):
        if when <= until:
            last = max(last, when)
            for u in st.members.get(uid, []):
                p = st.pods[u]
                if p.status == PodStatus.RELEASING:
                    st.pods[u] = dataclasses.replace(p, status=PodStatus.PENDING, node=None, gpu_groups=[],
                                                     start_time=None)
            del st.releases[uid]
    return last

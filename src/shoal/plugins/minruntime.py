"""The minruntime plugin (kai-spec §9.1): a job that started recently is protected from being
preempted or reclaimed until it has run for its queue's minimum runtime.

Arguments: `defaultPreemptMinRuntime`, `defaultReclaimMinRuntime` (Go durations, default `0s`),
`reclaimResolveMethod` (`lca`, the default, or `queue`). A queue's `preempt_min_runtime` /
`reclaim_min_runtime` (None = not set) is inherited down the queue tree: the first value set on
the queue or an ancestor wins.

* preempt: the victim's leaf queue and its ancestors.
* reclaim, `queue`: the same walk from the victim's leaf queue.
* reclaim, `lca`: the walk starts at the child of the reclaimer/victim lowest common ancestor on
  the victim's side (the victim's top-level queue when the two share no ancestor).

A non-elastic protected job is never a victim. An elastic job is not filtered out (it may lose
pods above its minimum), but a scenario that takes a protected elastic job below its minimum is
rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from shoal.framework.jobs import Job, QueueInfo, Task
from shoal.framework.scenario_victims import KeptPerBase, RecordedJobs, ScenarioVictims
from shoal.framework.session import Session
from shoal.model.durations import parse_duration

_Runtime = Callable[[Job, Job], float]
_Filter = Callable[[Session, Job, Job], bool]
_Validator = Callable[[Session, Job, list[Task], dict[str, list[Task]]], bool]

def _seconds(args: dict[str, str], key: str) -> float:
    """A duration argument (unset or empty = 0); ValueError naming the plugin and the argument."""
    text = args.get(key, "").strip()
    try:
        return parse_duration(text) if text else 0.0
    except ValueError as err:
        raise ValueError(f"minruntime: {key}: {err}") from None


def _first_set(q: QueueInfo | None, attr: str) -> float | None:
    while q is not None:
        value: float | None = getattr(q.spec, attr)
        if value is not None:
            return value
        q = q.parent
    return None


def reclaim_start(reclaimer: QueueInfo, victim: QueueInfo) -> QueueInfo:
    """The queue the `lca` walk starts from: the victim-side child of the lowest common ancestor."""
    mine = {id(q) for q in reclaimer.ancestors()}
    chain = victim.ancestors()  # leaf first
    for i, q in enumerate(chain):
        if id(q) in mine:
            return chain[i - 1] if i > 0 else q
    return chain[-1]


def is_elastic(job: Job) -> bool:
    return any(len(ps.tasks) > ps.min_available for ps in job.pod_sets.values())


def started(job: Job) -> float | None:
    """The job's last start time, else the latest start time of its pods (None = unknown)."""
    if job.last_start_time is not None:
        return job.last_start_time
    times = [t.pod.start_time for t in job.tasks if t.pod.start_time is not None]
    return max(times) if times else None


def protected(now: float, job: Job, min_runtime: float) -> bool:
    """Inside its protection window: `now < start + min_runtime` (never when the start is unknown)."""
    start = started(job)
    return start is not None and min_runtime > 0 and now < start + min_runtime


def scenario_validator(runtime: _Runtime) -> _Validator:
    """The scenario validator for victims protected by `runtime`: a protected victim job left
    below a pod set's minimum refuses the scenario."""
    # Whether a victim is protected depends on the two jobs' queues, the victim's start time
    # and `now`, all fixed for the session: answered once per (reclaimer's queue, victim).
    memo: dict[str | None, dict[str, bool]] = {}
    # The recorded victims' verdicts (`ScenarioVictims.base`), per reclaimer's queue.
    kept: KeptPerBase[bool] = KeptPerBase()

    def refused(ssn: Session, preemptor: Job, side: dict[str, bool], uid: str) -> bool:
        """A protected victim job left below a pod set's minimum refuses the scenario."""
        v = ssn.jobs[uid]
        hit = side.get(uid)
        if hit is None:
            hit = side[uid] = protected(ssn.now, v, runtime(preemptor, v))
        return hit and any(ps.active_allocated < ps.min_available for ps in v.pod_sets.values())

    def base_refused(ssn: Session, preemptor: Job, side: dict[str, bool], base: RecordedJobs,
                     name: str | None) -> bool:
        def any_of(uids: Iterable[str]) -> bool:
            return any(refused(ssn, preemptor, side, uid) for uid in uids)
        return kept.get(base, name, lambda: any_of(base.by_job), lambda parent: parent or any_of(base.added))

    def valid(ssn: Session, preemptor: Job, partial: list[Task], victims: dict[str, list[Task]]) -> bool:
        name = preemptor.queue.name if preemptor.queue is not None else None
        side = memo.setdefault(name, {})
        if isinstance(victims, ScenarioVictims) and victims.base is not None:
            if base_refused(ssn, preemptor, side, victims.base, name):
                return False
            return not any(refused(ssn, preemptor, side, uid) for uid in victims.extra)
        return not any(refused(ssn, preemptor, side, uid) for uid in victims)
    return valid


def open_minruntime(ssn: Session, args: dict[str, str]) -> None:
    preempt_default = _seconds(args, "defaultPreemptMinRuntime")
    reclaim_default = _seconds(args, "defaultReclaimMinRuntime")
    method = args.get("reclaimResolveMethod", "lca")
    if method not in ("lca", "queue"):
        raise ValueError(f"minruntime: reclaimResolveMethod {method!r}: expected lca or queue")

    def preempt_runtime(preemptor: Job, victim: Job) -> float:
        value = _first_set(victim.queue, "preempt_min_runtime")
        return preempt_default if value is None else value

    def reclaim_runtime(reclaimer: Job, victim: Job) -> float:
        if victim.queue is None:
            return reclaim_default
        start = victim.queue
        if method == "lca" and reclaimer.queue is not None:
            start = reclaim_start(reclaimer.queue, victim.queue)
        value = _first_set(start, "reclaim_min_runtime")
        return reclaim_default if value is None else value

    def make_filter(runtime: _Runtime) -> _Filter:
        def keep(ssn: Session, preemptor: Job, victim: Job) -> bool:
            return is_elastic(victim) or not protected(ssn.now, victim, runtime(preemptor, victim))
        return keep


    ssn.hooks.preempt_victim_filters.append(make_filter(preempt_runtime))
    ssn.hooks.reclaim_victim_filters.append(make_filter(reclaim_runtime))
    ssn.hooks.preempt_validators.append(scenario_validator(preempt_runtime))
    ssn.hooks.reclaim_validators.append(scenario_validator(reclaim_runtime))



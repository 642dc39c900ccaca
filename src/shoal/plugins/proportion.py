"""The proportion plugin: fair shares, queue order and queue capacity checks (kai-spec §4)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from shoal.framework.jobs import QUEUE_COLUMNS, Job, QueueInfo, Task, capacity_request, request_total
from shoal.framework.scenario_victims import KeptPerBase, RecordedJobs, ScenarioVictims
from shoal.framework.session import Session
from shoal.model.resources import MILLI
from shoal.model.status import PodStatus
from shoal.policy.fairshare import ShareInput, divide
from shoal.policy.queue_order import QueueView, RankKey, compare_ranked, rank_key
from shoal.policy.reclaim import QueueState, QueueSums, can_reclaim, chunk_sums, reclaimable_sums

#: Whole unit each resource's over-quota share is floored to (GPU milli -> devices).
UNITS = (float(MILLI), 1.0, 1.0)
_NO_LIMIT = [-1.0, -1.0, -1.0]
UNIT_NAMES = {"gpu": ("GPU", 1000.0), "cpu": ("CPU", 1000.0), "memory": ("memory", 1e6)}


def open_proportion(ssn: Session, args: dict[str, str]) -> None:
    k_value = max(float(args.get("kValue", "1.0")), 0.0)
    multiplier = max(float(args.get("relcaimerSaturationMultiplier",
                                    args.get("reclaimerSaturationMultiplier", "1.0"))), 1.0)
    total = ssn.cluster_total()
    for name, q in ssn.queues.items():
        usage = ssn.snapshot.usage.get(name, {})
        q.usage = np.array([usage.get(r, 0.0) for r in QUEUE_COLUMNS])
    compute_fair_shares(ssn, total, k_value)

    ssn.hooks.queue_order = _queue_order(ssn, total)
    ssn.hooks.job_capacity.append(job_over_capacity)
    ssn.hooks.task_capacity.append(task_over_capacity)
    register_reclaim(ssn, multiplier)


def _queue_order(ssn: Session, total: np.ndarray) -> Callable[..., int]:
    """The session's queue comparator (`Hooks.queue_order`): `compare` over views of the queues,
    with what it reads kept between calls (fair shares are computed before this is called)."""
    total_t = tuple(total.tolist())
    # Fair share, quota and allocatable share are fixed for the session: read them once.
    static = {name: (q.spec.priority, q.spec.creation, tuple(q.fair_share.tolist()), tuple(q.deserved.tolist()),
                     tuple(q.allocatable_share().tolist())) for name, q in ssn.queues.items()}

    # The comparator runs hundreds of thousands of times in a large consolidation (every pop of
    # every simulated scenario's job queue), mostly on the same queues and requests: a queue's
    # view is kept until its allocation moves, a request's tuple while its array lives (requests
    # are cached per job version and never changed in place; the memo holds them, so an id is
    # never reused while it is in the memo).
    views: dict[str, tuple[int, QueueView]] = {}
    tuples: dict[int, tuple[np.ndarray, tuple[float, ...]]] = {}

    def view_of(q: QueueInfo) -> QueueView:
        hit = views.get(q.name)
        if hit is not None and hit[0] == q.alloc_version:
            return hit[1]
        p, c, f, d, a = static[q.name]
        v = QueueView(q.name, p, c, tuple(q.allocated.tolist()), f, d, a)
        views[q.name] = (q.alloc_version, v)
        return v

    def as_tuple(v: np.ndarray | None) -> tuple[float, ...] | None:
        if v is None:
            return None
        hit = tuples.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        if len(tuples) >= 4096:
            tuples.clear()
        t = tuple(v.tolist())
        tuples[id(v)] = (v, t)
        return t

    # A queue's rank key (rules 1-6) depends on its allocation, its best job's request and, in
    # victim mode, its victims: kept per such combination, so each pairwise comparison reads two
    # keys instead of recomputing both queues' shares.
    ranks: dict[tuple[str, int, tuple[float, ...] | None, tuple[float, ...] | None], tuple[QueueView, RankKey]] = {}

    def rank_of(q: QueueInfo, req: tuple[float, ...] | None,
                vic: tuple[float, ...] | None) -> tuple[QueueView, RankKey]:
        k = (q.name, q.alloc_version, req, vic)
        hit = ranks.get(k)
        if hit is None:
            if len(ranks) >= 8192:
                ranks.clear()
            v = view_of(q)
            hit = ranks[k] = (v, rank_key(v, req, total_t, vic))
        return hit

    def queue_order(l: QueueInfo, r: QueueInfo, l_req: np.ndarray | None, r_req: np.ndarray | None,
                    l_vic: np.ndarray | None = None, r_vic: np.ndarray | None = None) -> int:
        lv, lk = rank_of(l, as_tuple(l_req), as_tuple(l_vic))
        rv, rk = rank_of(r, as_tuple(r_req), as_tuple(r_vic))
        return compare_ranked(lv, rv, lk, rk)

    return queue_order


def view(q: QueueInfo) -> QueueView:
    return QueueView(q.name, q.spec.priority, q.spec.creation, tuple(q.allocated.tolist()),
                     tuple(q.fair_share.tolist()), tuple(q.deserved.tolist()),
                     tuple(q.allocatable_share().tolist()))


def compute_fair_shares(ssn: Session, total: np.ndarray, k_value: float) -> None:
    """Divide `total` top-down over the queue tree, per resource. Writes `fair_share`."""
    tops = [q for q in ssn.queues.values() if q.parent is None]
    _divide_level(tops, total, k_value)


def _divide_level(siblings: list[QueueInfo], amount: np.ndarray, k_value: float) -> None:
    if not siblings:
        return
    ordered = sorted(siblings, key=lambda q: (q.spec.creation, q.name))
    for r in range(3):
        inputs = [ShareInput(q.name, float(q.deserved[r]), float(q.limit[r]), float(q.weight[r]),
                             q.spec.priority, float(q.request[r]), q.spec.creation, float(q.usage[r]))
                  for q in ordered]
        shares = divide(float(amount[r]), inputs, UNITS[r], k_value)
        for q in ordered:
            q.fair_share[r] = shares[q.name]
    for q in ordered:
        _divide_level(q.children, q.fair_share.copy(), k_value)


def _fmt(r: int, value: float) -> str:
    name = QUEUE_COLUMNS[r]
    label, div = UNIT_NAMES[name]
    return f"{value / div:g} {label}" if name != "memory" else f"{value / 1e6:g} MB {label}"


def job_over_capacity(ssn: Session, job: Job, tasks: list[Task]) -> str | None:
    """OverLimit / NonPreemptibleOverQuota for the tasks about to be placed, or None."""
    if job.queue is None:
        return None
    return _check(job, capacity_request(tasks).tolist())


def task_over_capacity(ssn: Session, task: Task, node: int) -> str | None:
    job = task.job
    if job.queue is None:
        return None
    gpu = float(task.pod.gpu_quota_milli)
    if task.pod.gpu.is_shared:
        gpu = float(ssn.node_portion(task, node)) if ssn.nodes.names else gpu
    req = (gpu, float(task.pod.cpu_milli), float(task.pod.memory))
    # Only job-level refusals feed allocate's pruning (a per-node refusal is not universal).
    saved = job.capacity_block
    msg = _check(job, req)
    job.capacity_block = saved
    return msg


def _check(job: Job, req: Sequence[float]) -> str | None:
    """`req`: GPU milli, CPU milli, memory bytes as plain floats - this runs once per task placed,
    and numpy scalar reads cost more than the sums."""
    assert job.queue is not None
    for q in job.queue.ancestors():
        limit = q.limit.tolist()
        if limit == _NO_LIMIT:
            continue
        allocated = q.allocated.tolist()
        for r in range(3):
            lim = limit[r]
            if lim != -1 and req[r] != 0 and lim < allocated[r] + req[r]:
                job.capacity_block = (q.name, r, "limit", float(req[r]))
                return (f"OverLimit: queue {q.name} would exceed its {QUEUE_COLUMNS[r]} limit "
                        f"({_fmt(r, allocated[r] + req[r])} > {_fmt(r, lim)})")
    if not job.preemptible:
        over = job.queue.over_nonpreemptible_quota(np.asarray(req, dtype=np.float64))
        if over is not None:
            q, r = over
            job.capacity_block = (q.name, r, "quota", float(req[r]))
            return (f"NonPreemptibleOverQuota: non-preemptible job would take queue {q.name} over "
                    f"its {QUEUE_COLUMNS[r]} quota ({_fmt(r, q.allocated_np[r] + req[r])} > "
                    f"{_fmt(r, q.deserved[r])})")
    return None


# -- reclaim (kai-spec §4.5) --------------------------------------------------------------------
def queue_states(ssn: Session) -> dict[str, QueueState]:
    """The queues as the reclaim rules read them, copied (frozen for one reclaimer's attempt)."""
    return {name: QueueState(name, q.parent.name if q.parent else None, q.allocated.copy(),
                             q.allocated_np.copy(), q.deserved.copy(), q.fair_share.copy(),
                             q.allocatable_share())
            for name, q in ssn.queues.items()}


#: Per victim job: (job version, its victim task uids, its chunks) - see `victim_chunks`.
ChunkMemo = dict[str, tuple[int, tuple[str, ...], list[np.ndarray]]]


def victim_chunks(ssn: Session, victims: dict[str, list[Task]],
                  memo: ChunkMemo | None = None) -> dict[str, list[np.ndarray]]:
    """Per reclaimee leaf queue, the resources taken: per victim job, the first `min` evicted
    pods of every pod set together are one (core) chunk, every further pod its own (elastic)
    chunk. Victims that were moved (pipelined elsewhere or back) are not taken, and a queue whose
    victims all moved has no entry (KAI's `reclaimableFn` skips victims without resources: such a
    queue is neither checked nor counted as a touched sibling).

    `memo` keeps each job's chunks with its version and victim tasks: a job's chunks read only
    its tasks' statuses (which move its version), order keys, minimums and quotas, so a victim job
    unchanged since an earlier scenario gets the same chunks without recounting them."""
    out: dict[str, list[np.ndarray]] = {}
    jobs = ssn.jobs
    for uid in sorted(victims):
        job = jobs[uid]
        if job.queue is None:
            continue
        mine = _memo_chunks(job, victims[uid], memo)
        if mine:
            chunks = out.get(job.queue.name)
            if chunks is None:
                out[job.queue.name] = list(mine)
            else:
                chunks.extend(mine)
    return out


def _memo_chunks(job: Job, vt: list[Task], memo: ChunkMemo | None) -> list[np.ndarray]:
    """`_job_chunks`, through `memo` (see `victim_chunks`). The list returned is never to be changed."""
    tasks_key = (vt[0].uid,) if len(vt) == 1 else tuple([t.uid for t in vt])
    hit = memo.get(job.uid) if memo is not None else None
    if hit is not None and hit[0] == job.version and hit[1] == tasks_key:
        return hit[2]
    mine = _job_chunks(job, vt)
    if memo is not None:
        memo[job.uid] = (job.version, tasks_key, mine)
    return mine


#: Per reclaimee leaf queue: [GPU, CPU, memory sums of the chunks, uid of the last victim job
#: (uid order) with chunks, that job's last chunk] - what `chunk_sums` gives, kept as whole numbers.
_Sums = dict[str, list[Any]]

#: Sums of whole numbers below this are exact in float64, whatever the order they are added in.
_EXACT = float(2**53)


def _add_job(acc: _Sums, ssn: Session, uid: str, vt: list[Task], memo: ChunkMemo) -> bool:
    """Add one victim job's chunks to `acc`; False if a value is not a whole number (then the sums
    would depend on the order of the additions, which `chunk_sums` fixes)."""
    job = ssn.jobs[uid]
    if job.queue is None:
        return True
    chunks = _memo_chunks(job, vt, memo)
    if not chunks:
        return True
    g = c = m = 0.0
    for chunk in chunks:
        a, b, d = chunk.tolist()
        if not (a.is_integer() and b.is_integer() and d.is_integer() and min(a, b, d) >= 0):
            return False
        g, c, m = g + a, c + b, m + d
    cur = acc.get(job.queue.name)
    if cur is None:
        acc[job.queue.name] = [g, c, m, uid, chunks[-1]]
        return True
    cur[0], cur[1], cur[2] = cur[0] + g, cur[1] + c, cur[2] + m
    if uid > cur[3]:
        cur[3], cur[4] = uid, chunks[-1]
    return True


def _base_sums(ssn: Session, base: RecordedJobs, memo: ChunkMemo, kept: KeptPerBase[_Sums | None]) -> _Sums | None:
    """The `_Sums` of the recorded victims' jobs (None: not all whole numbers), kept per
    `RecordedJobs` and extended from the parent's (a parent with a fractional value: None too)."""
    def adding(acc: _Sums, uids: Iterable[str]) -> _Sums | None:
        return acc if all(_add_job(acc, ssn, uid, base.by_job[uid], memo) for uid in uids) else None

    def extend(parent: _Sums | None) -> _Sums | None:
        return None if parent is None else adding({q: list(v) for q, v in parent.items()}, base.added)

    return kept.get(base, None, lambda: adding({}, base.by_job), extend)


def _scenario_sums(ssn: Session, victims: ScenarioVictims, memo: ChunkMemo,
                   kept: KeptPerBase[_Sums | None]) -> QueueSums | None:
    """`chunk_sums(victim_chunks(...))` from the recorded victims' kept sums plus the scenario's
    other victim jobs, when every value is a whole number and every sum stays exact (the same
    floats, whatever the order); None otherwise (or without a recorded part)."""
    if victims.base is None:
        return None
    base = _base_sums(ssn, victims.base, memo, kept)
    if base is None:
        return None
    acc = {q: list(v) for q, v in base.items()}
    for uid in victims.extra:
        if not _add_job(acc, ssn, uid, victims[uid], memo):
            return None
    out: QueueSums = {}
    for qname, (g, c, m, _uid, last) in acc.items():
        if max(g, c, m) >= _EXACT:
            return None
        total = np.array([g, c, m])
        out[qname] = (total - last, total)
    return out


def _job_chunks(job: Job, victims: list[Task]) -> list[np.ndarray]:
    """One victim job's chunks: the core chunk, then one per further evicted pod ([] if none)."""
    by_set: dict[str, list[Task]] = {}
    for t in victims:
        if t.status == PodStatus.RELEASING:
            by_set.setdefault(t.pod_set.name, []).append(t)
    if not by_set:
        return []  # KAI skips a victim job that lost nothing (every pod moved)
    # Summed in plain floats in the same order as float64 vectors would be: the same values.
    gpu = cpu = mem = 0.0
    extra: list[np.ndarray] = []
    for name in sorted(by_set):
        tasks = by_set[name]
        if len(tasks) > 1:
            tasks.sort(key=lambda t: t.order_key)
        m = max(job.pod_sets[name].min_available, 1)
        for t in tasks[:m]:
            g, c, b = t.quota()
            gpu, cpu, mem = gpu + g, cpu + c, mem + b
        extra.extend(t.quota_vector() for t in tasks[m:])
    return [np.array([gpu, cpu, mem]), *extra]


def partial_request(partial: list[Task]) -> np.ndarray:
    """What the scenario's preemptor asks for in `Reclaimable`: the queue-share request of the
    partial job's tasks. KAI's validator reads the scenario's preemptor, which is the partial job
    (the first k tasks to allocate), so a gang's early partial jobs ask for less than the whole
    job does - the whole job's request is for `can_reclaim` alone."""
    return request_total(partial)


def register_reclaim(ssn: Session, multiplier: float) -> None:
    """`CanReclaimResources` (current state, the whole job's request) and the `Reclaimable`
    scenario validator (queue state frozen when the reclaimer's attempt starts, i.e. at its
    `can_reclaim` call; the request of the scenario's partial job, `partial_request`)."""
    frozen: dict[str, dict[str, QueueState]] = {}
    memo: ChunkMemo = {}
    kept: KeptPerBase[_Sums | None] = KeptPerBase()

    def gate(ssn: Session, job: Job, req: np.ndarray) -> bool:
        if job.queue is None:
            return False
        states = frozen[job.uid] = queue_states(ssn)
        return can_reclaim(states[job.queue.name], req, job.preemptible)

    def validate(ssn: Session, job: Job, partial: list[Task], victims: dict[str, list[Task]]) -> bool:
        if job.queue is None or job.uid not in frozen:
            return False
        sums = _scenario_sums(ssn, victims, memo, kept) if isinstance(victims, ScenarioVictims) else None
        if sums is None:
            sums = chunk_sums(victim_chunks(ssn, victims, memo))
        return reclaimable_sums(frozen[job.uid], job.queue.name, partial_request(partial), job.preemptible,
                                sums, multiplier)

    ssn.hooks.can_reclaim.append(gate)
    ssn.hooks.reclaim_validators.append(validate)

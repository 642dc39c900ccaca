"""Properties of reclaim on random flat clusters of 1-GPU preemptible / non-preemptible jobs:

* non-preemptible jobs are never victims;
* a reclaimee queue never ends below its deserved quota (GuaranteeDeservedQuota), nor below its
  allocatable share when the reclaimer is over its own quota (MaintainFairShare is the only way);
* no ping-pong: on the state the reclaim leads to (victims recreated pending, the reclaimer
  running), the next cycle never reclaims from the reclaimer's queue;
* victim sets are minimal: on a full cluster, without any single killed victim job the
  preemptor does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shoal.cycle import CycleResult
from shoal.model import PodStatus

from .reclaim_world import World

GPUS = 4


@dataclass
class Case:
    n_nodes: int
    quotas: list[int]
    weights: list[float]
    running: list[tuple[int, bool]]  # (queue, preemptible), placed node by node
    reclaimer: int
    gpus: int
    tasks: int


@st.composite
def cases(draw: st.DrawFn, full: bool = False) -> Case:
    n_nodes = draw(st.integers(1, 3))
    n_queues = draw(st.integers(2, 3))
    quotas = draw(st.lists(st.integers(0, 4), min_size=n_queues, max_size=n_queues))
    weights = draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n_queues, max_size=n_queues))
    cap = n_nodes * GPUS
    count = cap if full else draw(st.integers(0, cap))
    running = draw(st.lists(st.tuples(st.integers(0, n_queues - 1), st.booleans()), min_size=count,
                            max_size=count))
    return Case(n_nodes, quotas, weights, running, draw(st.integers(0, n_queues - 1)), draw(st.integers(1, GPUS)),
                draw(st.integers(1, 2)))


def world(case: Case) -> World:
    w = World()
    for i in range(case.n_nodes):
        w.node(f"n{i}", GPUS)
    for k, (quota, weight) in enumerate(zip(case.quotas, case.weights, strict=True)):
        w.queue(f"q{k}", quota=quota, weight=weight)
    for j, (queue, preemptible) in enumerate(case.running):
        w.job(f"r{j:02d}", f"q{queue}", nodes=[f"n{j // GPUS}"], priority=50 if preemptible else 100)
    w.job("p", f"q{case.reclaimer}", gpus=case.gpus, tasks=case.tasks)
    return w


def gpus_of(case: Case, queue: int) -> int:
    return sum(1 for q, _ in case.running if q == queue)


def evicted(result: CycleResult) -> set[str]:
    return {e.job for e in result.decisions.evictions}


@settings(max_examples=80, deadline=None)
@given(cases())
def test_never_non_preemptible_never_below_quota(case: Case) -> None:
    result = world(case).run("reclaim")
    ssn = result.session
    for job in evicted(result):
        assert ssn.jobs[job].preemptible, f"non-preemptible {job} evicted"
    # Killed victims (moved ones keep their resources, only elsewhere).
    killed = [e for e in result.decisions.evictions if ssn.tasks[e.pod].status == PodStatus.RELEASING]
    lost = {ssn.jobs[e.job].pg.queue for e in killed}
    req = case.gpus * case.tasks * 1000
    reclaimer = ssn.queues[f"q{case.reclaimer}"]
    over_own_quota = gpus_of(case, case.reclaimer) * 1000 + req > reclaimer.deserved[0]
    for name in lost:
        q = ssn.queues[name]
        after = 1000 * (gpus_of(case, int(name[1:])) - sum(1 for e in killed if ssn.jobs[e.job].pg.queue == name))
        assert after >= q.deserved[0], f"{name} taken below its quota"
        if over_own_quota:
            assert after >= q.allocatable_share()[0], f"{name} taken below its fair share"


def next_state(w: World, result: CycleResult) -> World:
    """Victims deleted and recreated pending; the pipelined reclaimer bound where it was pipelined."""
    victims = {e.pod for e in result.decisions.evictions}
    where = {p.pod: p.node for p in result.decisions.pipelines}
    for pod in w.snapshot.pods:
        if pod.uid in victims:
            pod.status, pod.node = PodStatus.PENDING, None
        elif pod.uid in where and pod.job == "p":
            pod.status, pod.node = PodStatus.RUNNING, where[pod.uid]
    return w


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases())
def test_no_ping_pong(case: Case) -> None:
    w = world(case)
    first = w.run("allocate", "reclaim")
    assume(any(e.action == "reclaim" for e in first.decisions.evictions))
    second = next_state(w, first).run("allocate", "reclaim")
    # Killed, not moved: a consolidating reclaim may move a pod without taking its resources.
    back = {e.pod for e in second.decisions.evictions
            if second.session.tasks[e.pod].job.pg.queue == f"q{case.reclaimer}"
            and second.session.tasks[e.pod].status == PodStatus.RELEASING}
    assert not back, f"reclaimed back from the reclaimer's queue: {sorted(back)}"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cases(full=True))
def test_victim_sets_are_minimal(case: Case) -> None:
    result = world(case).run("reclaim")
    ssn = result.session
    killed = {e.job for e in result.decisions.evictions}
    assume(killed)
    # Only when every victim was killed (none moved): the freed GPUs are exactly the victims'.
    assume(all(ssn.tasks[e.pod].status == PodStatus.RELEASING for e in result.decisions.evictions))
    node_of = {f"r{j:02d}": j // GPUS for j in range(len(case.running))}
    for left_out in killed:
        free = [0] * case.n_nodes
        for job in killed - {left_out}:
            free[node_of[job]] += 1
        fits = sum(f // case.gpus for f in free) >= case.tasks
        assert not fits, f"{left_out} was not needed"

"""A failure while handling one job skips that job; the cycle and every other job go on (#19).

A "poison" plugin raises from inside the core for one chosen job only (a predicate halfway
through its gang, a reclaim victim filter, a job-order key), or for no job in particular (the
queue order): the poisoned job gets no decision, one `JobFault` and a SchedulingError
explanation, its half-made statement is rolled back, and everything else is decided as without
the poison.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from shoal.cycle import CycleResult, run_cycle
from shoal.defaults import builtins
from shoal.framework.config import DEFAULT_PLUGINS, PluginConfig, SchedulerConfig
from shoal.framework.jobs import Job, Task
from shoal.framework.registry import Registry
from shoal.framework.session import Session
from shoal.model.resources import GPU_COL, MILLI

from .reclaim_world import World


class Poison(RuntimeError):
    pass


def _registry(install: Callable[[Session], None]) -> Registry:
    base = builtins()
    return Registry({**base.plugins, "poison": lambda ssn, _args: install(ssn)}, base.actions)


def _run(world: World, install: Callable[[Session], None], *actions: str) -> CycleResult:
    plugins = (*(PluginConfig(n, dict(a)) for n, a in DEFAULT_PLUGINS), PluginConfig("poison", {}))
    config = SchedulerConfig(actions=actions, plugins=plugins)
    return run_cycle(world.snapshot, config, _registry(install))


def _second_task_of_bad(ssn: Session) -> None:
    """A pick-time filter that raises on the bad gang's second task: its first is already allocated."""
    def flt(_ssn: Session, task: Task) -> tuple[np.ndarray, str] | None:
        if task.job.uid == "bad" and task.pod.name == "bad-1":
            raise Poison("filter exploded")
        return None
    ssn.hooks.dynamic_filters.append(flt)


def _allocate_world() -> World:
    w = World().node("n1", gpus=8).node("n2", gpus=8).queue("q")
    return w.job("a", "q", gpus=2, tasks=2).job("bad", "q", gpus=2, tasks=2).job("c", "q", gpus=2, tasks=2)


def test_a_job_raising_mid_gang_is_rolled_back_and_the_others_are_placed() -> None:
    result = _run(_allocate_world(), _second_task_of_bad, "allocate")
    d = result.decisions
    assert {b.job for b in d.binds} == {"a", "c"}
    assert [(f.job, f.stage) for f in d.faults] == [("bad", "allocate")]
    assert "Poison: filter exploded" in d.faults[0].message
    assert "SchedulingError" in d.explanations["bad"].reasons
    nodes = result.session.nodes
    # The half-placed first task was taken back: only the 4 bound pods' 8 GPUs are used.
    assert float(nodes.used[:, GPU_COL].sum()) == 8 * MILLI
    assert all(t.node < 0 for t in result.session.jobs["bad"].tasks)


def test_without_the_poison_the_same_world_binds_all_three() -> None:
    result = _run(_allocate_world(), lambda ssn: None, "allocate")
    assert {b.job for b in result.decisions.binds} == {"a", "bad", "c"}
    assert result.decisions.faults == []


def _bad_order_key(ssn: Session) -> None:
    def key(job: Job) -> tuple[int]:
        if job.uid == "bad":
            raise Poison("order key")
        return (0,)
    ssn.hooks.job_keys.insert(0, key)


def test_a_job_whose_order_key_raises_is_left_out() -> None:
    result = _run(_allocate_world(), _bad_order_key, "allocate")
    assert {b.job for b in result.decisions.binds} == {"a", "c"}
    assert [(f.job, f.stage) for f in result.decisions.faults] == [("bad", "job order")]


def _reclaim_world() -> World:
    """Queue `greedy` runs 8 GPUs on the only node; `starved` and `bad` (both guaranteed 4) wait."""
    w = World().node("n1", gpus=8).queue("greedy", quota=0).queue("starved", quota=4).queue("other", quota=4)
    w.job("hog1", "greedy", gpus=4, nodes=["n1"]).job("hog2", "greedy", gpus=4, nodes=["n1"])
    return w.job("bad", "other", gpus=4).job("ok", "starved", gpus=4)


def _bad_victim_filter(ssn: Session) -> None:
    def keep(_ssn: Session, preemptor: Job, _victim: Job) -> bool:
        if preemptor.uid == "bad":
            raise Poison("victim filter")
        return True
    ssn.hooks.reclaim_victim_filters.append(keep)


def test_a_reclaimer_raising_is_skipped_and_another_reclaims() -> None:
    result = _run(_reclaim_world(), _bad_victim_filter, "reclaim")
    d = result.decisions
    assert [(f.job, f.stage) for f in d.faults] == [("bad", "reclaim")]
    assert len(d.evictions) == 1 and d.evictions[0].preemptor == "ok"


def _broken_queue_order(ssn: Session) -> None:
    def order(*_args: object) -> int:
        raise Poison("queue order")
    ssn.hooks.queue_order = order


def test_an_action_failing_outside_any_job_ends_that_action_only() -> None:
    w = _allocate_world().queue("q2").job("d", "q2", gpus=1)
    w.job("stale", "q", tasks=2, nodes=["n1", "n1"], min_member=3, started=0.0)
    w.snapshot.podgroups[-1] = dataclasses.replace(w.snapshot.podgroups[-1], staleness_grace_seconds=0)
    result = _run(w, _broken_queue_order, "allocate", "stalegangeviction")
    d = result.decisions
    assert [(f.job, f.stage) for f in d.faults] == [("", "allocate")]
    assert {e.job for e in d.evictions} == {"stale"}  # the next action ran


@pytest.mark.parametrize("error", [pytest.param(KeyboardInterrupt, id="an interrupt is never contained")])
def test_only_exceptions_are_contained(error: type[BaseException]) -> None:
    def install(ssn: Session) -> None:
        def flt(*_args: object) -> None:
            raise error()
        ssn.hooks.dynamic_filters.append(flt)
    with pytest.raises(error):
        _run(_allocate_world(), install, "allocate")

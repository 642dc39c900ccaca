"""Predicted start times from the core run forward."""

from __future__ import annotations

import copy
import math

from shoal.framework.config import SchedulerConfig
from shoal.model import ClusterSnapshot
from shoal.visibility.forecast import forecast

from . import scenarios as sc


def hour_jobs(uid: str, elapsed: float) -> float:
    return max(3600.0 - elapsed, 60.0)


def test_a_gang_behind_a_queue_limit_starts_when_the_running_job_ends() -> None:
    snap = sc.limit_blocked()  # "big" has run 600 s of its hour
    fc = forecast(snap, SchedulerConfig(), hour_jobs)
    assert fc.starts == {"ns/waits": snap.now + 3000.0}
    assert fc.complete


def test_gangs_queue_up_one_after_another() -> None:
    snap = ClusterSnapshot(now=sc.NOW, nodes=[sc.node("n0")], queues=[sc.queue("q")])
    sc.gang(snap, "running", "q", 1, 8, running_on=["n0"], age=0)
    sc.gang(snap, "second", "q", 1, 8, age=20)
    sc.gang(snap, "third", "q", 1, 8, age=10)
    fc = forecast(snap, SchedulerConfig(), lambda uid, el: 1000.0 - el)
    assert fc.starts == {"ns/second": sc.NOW + 1000.0, "ns/third": sc.NOW + 2000.0}


def test_never_ending_blockers_give_no_prediction_and_the_snapshot_is_untouched() -> None:
    snap = sc.limit_blocked()
    before = copy.deepcopy((snap.pods, snap.podgroups))
    fc = forecast(snap, SchedulerConfig(), lambda uid, el: math.inf)
    assert fc.starts == {"ns/waits": None}
    assert (snap.pods, snap.podgroups) == before


def test_the_horizon_bounds_the_prediction() -> None:
    fc = forecast(sc.limit_blocked(), SchedulerConfig(), hour_jobs, horizon=1000.0)
    assert fc.starts == {"ns/waits": None}


def test_stop_ends_the_forecast_early_without_predictions_for_the_rest() -> None:
    snap = ClusterSnapshot(now=sc.NOW, nodes=[sc.node("n0")], queues=[sc.queue("q")])
    sc.gang(snap, "running", "q", 1, 8, running_on=["n0"], age=0)
    sc.gang(snap, "second", "q", 1, 8, age=20)
    sc.gang(snap, "third", "q", 1, 8, age=10)
    asked = []

    def stop() -> bool:  # the service's time budget runs out after two cycles
        asked.append(1)
        return len(asked) >= 2

    fc = forecast(snap, SchedulerConfig(), lambda uid, el: 1000.0 - el, stop=stop)
    assert fc.starts == {"ns/second": sc.NOW + 1000.0, "ns/third": None}
    assert fc.cycles == 2 and not fc.complete
    assert forecast(snap, SchedulerConfig(), lambda uid, el: 1000.0 - el, stop=lambda: False).complete

"""How good are predicted start times? Replay a scenario, predict, and compare with what happened.

Every `every` simulated seconds the check takes the simulated cluster's snapshot, as the live
service takes its last cycle's, and predicts the start of every gang that has never started:

* `forecast (learned)` — `shoal.visibility.forecast` with the live service's runtime model
  (`RuntimeEstimator`): learned from the jobs of the same queue that finished so far in the
  replay (the simulator's owner kind is one: `job`), the 1 h default until 3 have finished;
* `forecast (true run times)` — the same forecast told each job's real duration: what is left is
  the error of not knowing future arrivals (and of evictions the forecast did not foresee);
* `position x mean run time` — the naive baseline of the issue: the gang's position in the
  scheduling order times the mean run time of the jobs finished so far;
* `position x mean / running` — the same divided by the number of running jobs (jobs leave at a
  rate of running / mean run time).

At the end each prediction is compared with the job's actual first start: the absolute errors'
median and p90 per method (predictions of jobs that never started are left out and counted).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.cycle import run_cycle
from shoal.sim.engine import SAMPLE
from shoal.sim.scenario import Scenario
from shoal.sim.simulation import Simulation
from shoal.visibility.forecast import forecast
from shoal.visibility.report import pending_order
from shoal.visibility.runtimes import JobFacts, RuntimeEstimator

METHODS = ("forecast (learned)", "forecast (true run times)", "position x mean run time",
           "position x mean / running")


@dataclass(slots=True)
class Prediction:
    job: str
    made_at: float
    predicted: dict[str, float | None]


@dataclass(slots=True)
class EtaCheckResult:
    predictions: list[Prediction] = field(default_factory=list)
    actual: dict[str, float | None] = field(default_factory=dict)
    forecast_cycles: int = 0

    def errors(self, method: str) -> tuple[list[float], int]:
        """(absolute errors in seconds, predictions left out: no prediction or never started)."""
        out, left = [], 0
        for p in self.predictions:
            pred, real = p.predicted.get(method), self.actual.get(p.job)
            if pred is None or real is None:
                left += 1
                continue
            out.append(abs(pred - real))
        return out, left

    def table(self) -> list[dict[str, Any]]:
        waits = [self.actual[p.job] - p.made_at for p in self.predictions  # type: ignore[operator]
                 if self.actual.get(p.job) is not None]
        rows = []
        for m in METHODS:
            errs, left = self.errors(m)
            rows.append({"method": m, "predictions": len(errs), "left_out": left,
                         "median_abs_error_s": _quantile(errs, 0.5), "p90_abs_error_s": _quantile(errs, 0.9),
                         "median_wait_s": _quantile(waits, 0.5)})
        return rows


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(int(q * len(s)), len(s) - 1)] if q != 0.5 else statistics.median(s)


def run_eta_check(scenario: Scenario, every: float = 3600.0, *, max_cycles: int = 300,
                  progress: Callable[[str], None] | None = None) -> EtaCheckResult:
    """Replay `scenario`, predicting every `every` simulated seconds (see the module doc)."""
    sim = Simulation(scenario)
    result = EtaCheckResult()
    estimator = RuntimeEstimator()
    learned: set[str] = set()
    durations = {f"{j.name}": j.duration for j in scenario.jobs}

    def predict(now: float, _: object) -> None:
        sim.engine.schedule(now + every, SAMPLE, "eta")
        cluster = sim.cluster
        for job in cluster.finished:
            if job.uid not in learned:
                learned.add(job.uid)
                estimator.observe(("job", job.spec.queue), job.spec.duration)
        waiting = [j for j in cluster.jobs.values() if j.first_start is None]
        if not waiting:
            return
        snap = cluster.snapshot(now, getattr(sim, "_usage_snapshot", None))
        running = {uid: j for uid, j in cluster.jobs.items() if j.state == "running" and j.start is not None}
        queues = {uid: j.spec.queue for uid, j in cluster.jobs.items()}

        def learned_model(uid: str, elapsed: float) -> float:
            return estimator.estimate(JobFacts(("job", queues.get(uid, "")), None), elapsed)[0]

        def true_model(uid: str, elapsed: float) -> float:
            return max(durations.get(uid, 3600.0) - elapsed, 0.0) if uid in durations else math.inf

        learned_fc = forecast(snap, scenario.scheduler.core, learned_model, max_cycles=max_cycles)
        true_fc = forecast(snap, scenario.scheduler.core, true_model, max_cycles=max_cycles)
        result.forecast_cycles += learned_fc.cycles + true_fc.cycles
        cyc = run_cycle(snap, scenario.scheduler.core)
        order = {j.uid: i for i, j in enumerate(pending_order(cyc.session), 1)}
        cyc.release()
        done = [j.spec.duration for j in cluster.finished]
        mean = statistics.fmean(done) if done else 3600.0
        for job in waiting:
            pos = order.get(job.uid)
            result.predictions.append(Prediction(job.uid, now, {
                METHODS[0]: learned_fc.starts.get(job.uid),
                METHODS[1]: true_fc.starts.get(job.uid),
                METHODS[2]: now + pos * mean if pos else None,
                METHODS[3]: now + pos * mean / max(len(running), 1) if pos else None,
            }))
        if progress:
            progress(f"t={now / 3600:.1f}h waiting={len(waiting)} running={len(running)} "
                     f"cycles={learned_fc.cycles}+{true_fc.cycles}")

    sim.engine.on("eta", predict)
    first = min((j.arrival for j in scenario.jobs), default=0.0)
    sim.engine.schedule(first + every, SAMPLE, "eta")
    sim.run()
    for job in sim.cluster.finished + list(sim.cluster.jobs.values()):
        result.actual[job.uid] = job.first_start
    return result


def markdown(rows: list[dict[str, Any]]) -> str:
    """The result table as Markdown (durations in minutes)."""

    def mins(v: float | None) -> str:
        return "-" if v is None else f"{v / 60:.1f}"

    out = ["| method | predictions | median abs error (min) | p90 abs error (min) | left out |",
           "|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['method']} | {r['predictions']} | {mins(r['median_abs_error_s'])} | "
                   f"{mins(r['p90_abs_error_s'])} | {r['left_out']} |")
    return "\n".join(out)

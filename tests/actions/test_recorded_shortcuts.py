"""The victim solver's two shortcuts over the recorded victims decide exactly as the general path:

* `ScenarioSimulation._preemptor_first` (the preemptor pops first and nothing else can act: no
  queue of thousands of victim jobs is built; what is read of the recorded victims' jobs is kept
  across scenarios and partial jobs);
* the validators' sums over `ScenarioVictims.base` (proportion's reclaim sums, minruntime's
  verdicts kept per recorded-victims object and extended from the previous partial job's).

Both are switched off by making `_preemptor_first` decline every scenario (then no scenario has a
`base`), and every decision of the session - each task's status and node, the evictions,
pipelines and binds in order, the preemptors tried - must come out the same, on a sample of the
KAI differential set (random queue trees, gangs, fractions, priorities) and KAI's reclaim-large
shape at 200 and 500 nodes. The sample must take both paths, so the comparison is not empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shoal.actions import preempt, reclaim
from shoal.actions.common import preemption, simulation
from shoal.conformance import runner
from shoal.framework.jobs import Job, Task
from shoal.framework.scenario_victims import ScenarioVictims
from shoal.framework.session import ScenarioValidator, Session
from shoal.plugins import proportion
from shoal.policy.reclaim import QueueSums, chunk_sums

SET = Path(__file__).resolve().parents[1] / "data" / "kai-oracle"
#: Every fifth random scenario below 500 nodes (the whole set is checked against KAI elsewhere),
#: and the 200- and 500-node reclaim-large shapes.
SAMPLE = [p for p in sorted((SET / "random").glob("*.yaml.gz")) if not p.name.startswith("r500-")][::5]
SAMPLE += [SET / "large" / f"reclaim-large-spread-n{n}.yaml.gz" for n in (200, 500)]


def _decisions(ssn: Session) -> dict[str, Any]:
    d = ssn.decisions
    return {
        "tasks": sorted((t.uid, t.status.title, t.node) for t in ssn.tasks.values()),
        "binds": [repr(b) for b in d.binds],
        "pipelines": [repr(p) for p in d.pipelines],
        "evictions": [repr(e) for e in d.evictions],
        "attempts": list(d.attempts),
        "faults": [repr(f) for f in d.faults],
    }


def test_shortcuts_decide_as_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = {"fast": 0, "general": 0, "sums": 0, "verdicts": 0}
    first = simulation.ScenarioSimulation._preemptor_first
    sums = proportion._scenario_sums
    combine = preemption.combine

    def counting(self: simulation.ScenarioSimulation, *args: Any) -> bool | None:
        got = first(self, *args)
        taken["fast" if got is not None else "general"] += 1
        return got

    def checked_sums(ssn: Session, victims: ScenarioVictims, *args: Any) -> QueueSums | None:
        """The kept sums are exactly what the chunks of every victim give."""
        got = sums(ssn, victims, *args)
        if got is not None:
            want = chunk_sums(proportion.victim_chunks(ssn, dict(victims)))
            assert got.keys() == want.keys()
            for q, (before_last, total) in got.items():
                assert np.array_equal(before_last, want[q][0]) and np.array_equal(total, want[q][1]), q
            taken["sums"] += 1
        return got

    def checked_combine(ssn: Session, validators: list[ScenarioValidator], extra: Any = None) -> Any:
        """Every plugin validator answers a scenario with a recorded part as without one."""
        def checked(v: ScenarioValidator) -> ScenarioValidator:
            def run(ssn: Session, job: Job, partial: list[Task], victims: dict[str, list[Task]]) -> bool:
                got = v(ssn, job, partial, victims)
                if isinstance(victims, ScenarioVictims) and victims.base is not None:
                    assert got == v(ssn, job, partial, dict(victims)), (v, job.uid)
                    taken["verdicts"] += 1
                return got
            return run
        return combine(ssn, [checked(v) for v in validators], extra)

    differ = []
    for path in SAMPLE:
        sc = runner.load(path)
        with monkeypatch.context() as m:
            m.setattr(simulation.ScenarioSimulation, "_preemptor_first", counting)
            m.setattr(proportion, "_scenario_sums", checked_sums)
            m.setattr(reclaim, "combine", checked_combine)
            m.setattr(preempt, "combine", checked_combine)
            with_shortcuts = _decisions(runner.decide(sc))
        with monkeypatch.context() as m:
            m.setattr(simulation.ScenarioSimulation, "_preemptor_first", lambda self, *a: None)
            without = _decisions(runner.decide(sc))
        if with_shortcuts != without:
            differ.append(path.name)
    assert not differ, f"the shortcuts change the decisions of {differ}"
    # Random scenarios mostly take the general path (victims that fit elsewhere, gangs touching
    # recorded jobs); reclaim-large takes the shortcuts on every scenario.
    assert taken["fast"] > 200 and taken["general"] > 1000 and taken["sums"] > 60 and taken["verdicts"] > 120, taken

"""`Potential.of_jobs_on` against a plain reading of its contract, over any mix of victims added
one batch at a time (`add`) and as ranges of the victim log (`add_log_range`), below and above the
size where it switches from Python loops to numpy."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.actions.common.victim_scan import _FEW_POTENTIAL, Potential


class _Log:
    """The part of `VictimLog` that `Potential` reads: tasks in pop order, their node and job
    columns as arrays, and job ids."""

    def __init__(self, tasks: list[Any]) -> None:
        self.tasks = tasks
        self._ids: dict[str, int] = {}
        jobs = [self.job_id(t.job.uid) for t in tasks]
        self._cols = (np.array([t.node for t in tasks], dtype=np.int64),
                      np.zeros(len(tasks), dtype=np.int64), np.array(jobs, dtype=np.int64))

    def job_id(self, uid: str) -> int:
        return self._ids.setdefault(uid, len(self._ids))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._cols


def _task(i: int, node: int, job: int) -> Any:
    return SimpleNamespace(uid=f"t{i}", node=node, job=SimpleNamespace(uid=f"j{job}"))


#: One step: ("log", n) adds the log's next n tasks as a range, ("one", n) the next n one batch.
_steps = st.lists(st.tuples(st.sampled_from(["log", "one"]), st.integers(1, 40)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(placement=st.lists(st.tuples(st.integers(-1, 6), st.integers(0, 9)), min_size=2 * _FEW_POTENTIAL,
                          max_size=3 * _FEW_POTENTIAL),
       steps=_steps, asked=st.lists(st.integers(-1, 6), min_size=1, max_size=4))
def test_of_jobs_on_is_every_victim_of_the_jobs_on_the_node(
        placement: list[tuple[int, int]], steps: list[tuple[str, int]], asked: list[int]) -> None:
    tasks = [_task(i, node, job) for i, (node, job) in enumerate(placement)]
    log = _Log(tasks)
    pot = Potential(log)  # type: ignore[arg-type]
    added: list[Any] = []
    at = 0
    for kind, n in steps:
        b = min(at + n, len(tasks))
        if kind == "log":
            pot.add_log_range(at, b)
        else:
            pot.add(tasks[at:b])
        added += tasks[at:b]
        at = b
        for node in asked:
            jobs = {t.job.uid for t in added if t.node == node} if node >= 0 else set()
            want = [t.uid for t in added if t.job.uid in jobs]
            assert [t.uid for t in pot.of_jobs_on(node)] == want, (kind, n, node, len(added))
    assert pot.tasks == added

"""The event engine, the simulated cluster's reaction to decisions, and run determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoal.framework.decisions import Bind, Decisions, Evict
from shoal.model import PodStatus
from shoal.sim.cluster import PENDING, RELEASING, RUNNING, SimCluster, make_job
from shoal.sim.engine import ARRIVAL, CYCLE, FINISH, Engine
from shoal.sim.loaders.nodes import build_node
from shoal.sim.report import result_json
from shoal.sim.scenario import load_scenario
from shoal.sim.simulation import Simulation
from shoal.sim.workload import JobSpec

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        pytest.param([(5, CYCLE, "a"), (1, CYCLE, "b")], ["b", "a"], id="earlier time first"),
        pytest.param(
            [(5, CYCLE, "cycle"), (5, FINISH, "finish"), (5, ARRIVAL, "arrival")],
            ["finish", "arrival", "cycle"],
            id="same time: priority order",
        ),
        pytest.param(
            [(2, ARRIVAL, "x"), (2, ARRIVAL, "y"), (2, ARRIVAL, "z")],
            ["x", "y", "z"],
            id="same time and priority: scheduling order",
        ),
    ],
)
def test_engine_orders_events(events: list[tuple[float, int, str]], expected: list[str]) -> None:
    e = Engine()
    seen: list[str] = []
    e.on("ev", lambda t, p: seen.append(p))
    for t, prio, name in events:
        e.schedule(t, prio, "ev", name)
    e.run()
    assert seen == expected


def test_engine_rejects_events_in_the_past_and_stops_at_until() -> None:
    e = Engine()
    seen: list[float] = []
    e.on("ev", lambda t, p: seen.append(t))
    for t in (1.0, 2.0, 9.0):
        e.schedule(t, 0, "ev")
    e.run(until=5.0)
    assert seen == [1.0, 2.0] and e.now == 5.0
    with pytest.raises(ValueError, match="before now"):
        e.schedule(4.0, 0, "ev")


def _cluster_with_gang() -> tuple[SimCluster, object]:
    nodes = [build_node(f"n{i}", 8000, 64 * 1024**3, 4, "A100") for i in range(2)]
    c = SimCluster(nodes, [])
    job = make_job(JobSpec("g", arrival=0, duration=100, queue="q", pods=2, gpu_milli=2000), 0)
    c.add(job)
    return c, job


def test_gang_runs_only_when_every_pod_is_bound() -> None:
    c, job = _cluster_with_gang()
    started, _ = c.apply(Decisions(binds=[Bind("g-0", "g-0", "q", "g", "n0")]), now=10)
    assert started == [] and job.state == PENDING and c.allocated_gpu_milli() == 2000
    started, _ = c.apply(Decisions(binds=[Bind("g-1", "g-1", "q", "g", "n1")]), now=10)
    assert started == [job] and job.state == RUNNING and job.first_start == 10


def test_eviction_releases_the_whole_gang_then_restarts_it() -> None:
    c, job = _cluster_with_gang()
    c.apply(Decisions(binds=[Bind("g-0", "g-0", "q", "g", "n0"), Bind("g-1", "g-1", "q", "g", "n1")]), now=10)
    epoch = job.epoch
    _, evicted = c.apply(Decisions(evictions=[Evict("g-0", "g-0", "q", "g", "n0", "reclaim", "r")]), now=20)
    assert evicted == [job] and job.state == RELEASING and job.epoch == epoch + 1
    assert {p.status for p in job.pods} == {PodStatus.RELEASING}
    assert c.allocated_gpu_milli() == 4000  # releasing pods still hold their GPUs
    c.release(job)
    assert job.state == PENDING and all(p.node is None for p in job.pods) and c.allocated_gpu_milli() == 0
    assert c.evicted_gangs["reclaim"] == 1 and job.first_start == 10


def _run(seed: int | None) -> str:
    sc = load_scenario(DATA / "small.yaml", seed=seed)
    r = Simulation(sc).run()
    data = result_json(r)
    for k in ("wall_seconds", "cpu_seconds", "core_seconds"):
        data["counters"].pop(k)
    return json.dumps(data, sort_keys=True)


def test_same_seed_same_result_bit_for_bit() -> None:
    assert _run(7) == _run(7)


def test_seed_changes_a_sampled_workload(tmp_path: Path) -> None:
    text = (
        (DATA / "small.yaml")
        .read_text()
        .replace("file: small-jobs.csv", "file: small-jobs.csv\n  sample: {fraction: 0.6}")
    )
    (tmp_path / "s.yaml").write_text(text)
    (tmp_path / "small-jobs.csv").write_text((DATA / "small-jobs.csv").read_text())
    names = [sorted(j.name for j in load_scenario(tmp_path / "s.yaml", seed=s).jobs) for s in (1, 2)]
    assert names[0] != names[1]
    assert names[0] == sorted(j.name for j in load_scenario(tmp_path / "s.yaml", seed=1).jobs)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param("binpack.yaml", id="borrowing with reclaim"),
        pytest.param("static-quota.yaml", id="static partitioning"),
        pytest.param("philly-fairshare.yaml", id="time-based fair share"),
    ],
)
def test_skipped_cycles_would_have_decided_nothing(config: str) -> None:
    """Cycle skipping is an optimisation only: forcing every cycle to run gives the same jobs,
    waits and evictions (the core is deterministic and its input did not change)."""
    from shoal.sim.schedconf import load_config

    cfg = load_config(Path(__file__).parents[2] / "examples" / "sim" / config)
    outcomes = []
    for every in (0.0, 10.0):  # 10 s = the scenario's cycle interval: no cycle is skipped
        sc = load_scenario(DATA / "small.yaml", config=cfg)
        sc.settings.full_cycle_every = every
        r = Simulation(sc).run()
        outcomes.append((r.jobs, r.summary, r.counters["evicted_gangs"], r.counters.get("cycles_skipped", 0)))
    (jobs0, summary0, evicted0, skipped0), (jobs1, summary1, evicted1, skipped1) = outcomes
    assert skipped0 > 0 and skipped1 == 0
    assert json.dumps(jobs0) == json.dumps(jobs1)
    assert json.dumps(summary0, sort_keys=True) == json.dumps(summary1, sort_keys=True)
    assert evicted0 == evicted1

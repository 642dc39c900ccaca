"""The ETA check replays a scenario and scores each method against the actual starts."""

from __future__ import annotations

from pathlib import Path

import yaml

from shoal.sim.eta_check import METHODS, markdown, run_eta_check
from shoal.sim.scenario import load_scenario


def test_true_run_times_predict_a_fifo_cluster_exactly(tmp_path: Path) -> None:
    # One 8-GPU node, three 8-GPU jobs of 1000 s arriving together: they run one after another.
    scenario = {
        "name": "fifo", "cluster": {"nodes": [{"name": "n", "gpus": 8, "cpu": 64, "memory": "512Gi"}]},
        "queues": [{"name": "q", "gpu": {"quota": -1}}],
        "workload": {"source": "jobs", "jobs": [
            {"name": f"j{i}", "arrival": i, "duration": 1000, "queue": "q", "gpus": 8} for i in range(3)]},
        "simulation": {"cycle_interval": 10},
        "scheduler": {"actions": "allocate"},
    }
    path = tmp_path / "fifo.yaml"
    path.write_text(yaml.safe_dump(scenario))
    res = run_eta_check(load_scenario(path), every=500.0)
    assert res.actual == {"j0": 0.0, "j1": 1000.0, "j2": 2000.0}
    rows = {r["method"]: r for r in res.table()}
    # Predicted at t=500 (j1, j2), 1000 and 1500 (j2; j1 started in the cycle just before).
    assert rows[METHODS[1]]["predictions"] == 4
    assert rows[METHODS[1]]["p90_abs_error_s"] <= 10.0  # the simulator starts jobs on its 10 s cycle tick
    assert rows[METHODS[0]]["median_abs_error_s"] >= 1000.0  # learned nothing yet: the 1 h default
    assert rows[METHODS[2]]["predictions"] == 4
    assert "| forecast (true run times) | 4 |" in markdown(res.table())

"""`shoal cycle` on the shipped examples and on broken cluster files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoal.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_example_places_the_gang_and_explains_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cycle", str(REPO / "examples/gang-and-fractions.yaml"), "--json")
    assert code == 0
    d = json.loads(out)
    placed = {b["job"] for b in d["binds"]}
    assert {"llm-pretrain", "notebook-1", "notebook-2", "inference-mem"} <= placed
    assert sum(1 for b in d["binds"] if b["job"] == "llm-pretrain") == 4
    pending = {p["job"]: p for p in d["pending"]}
    assert set(pending) == {"too-big"}
    assert "Unschedulable" in pending["too-big"]["reasons"]
    # gpupack: the first half-GPU notebook joins the device the 20 GB pod already uses; the second
    # no longer fits there (20000 + 40950 + 40950 > 81900 MiB) and opens the next device.
    by_job = {b["job"]: b for b in d["binds"]}
    mem, nb1, nb2 = by_job["inference-mem"], by_job["notebook-1"], by_job["notebook-2"]
    assert mem["node"] == nb1["node"] == nb2["node"]
    assert nb1["gpu_groups"] == mem["gpu_groups"] != nb2["gpu_groups"]
    assert nb1["gpu_portion_milli"] == 500 and mem["resource_type"] == "Fraction"


def test_over_quota_example_reports_kai_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cycle", str(REPO / "examples/over-quota.yaml"), "--json")
    assert code == 0
    pending = {p["job"]: p["reasons"] for p in json.loads(out)["pending"]}
    assert pending == {"x-build": ["NonPreemptibleOverQuota"], "y-train": ["OverLimit"]}


def test_table_output_names_pending_gangs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cycle", str(REPO / "examples/gang-and-fractions.yaml"))
    assert code == 0
    assert "Pending gangs" in out and "too-big" in out


def test_cluster_without_nodes_explains_every_gang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text("nodes: []\nqueues: [{name: q}]\n"
                 "jobs: [{name: g, queue: q, gpus: 1, pods: 2}, {name: f, queue: q, gpus: 0.5}]\n")
    code, out, err = run(capsys, "cycle", str(f), "--json")
    assert code == 0 and "Traceback" not in err
    d = json.loads(out)
    assert d["binds"] == [] and d["evictions"] == []
    pending = {p["job"]: p["messages"] for p in d["pending"]}
    assert set(pending) == {"g", "f"}
    assert all(any("no nodes in the cluster" in m for m in msgs) for msgs in pending.values())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("nodes: [\n", "not valid YAML", id="broken yaml"),
        pytest.param("queues: []\n", "nodes: missing", id="no nodes"),
        pytest.param("nodes: [{name: a, gpus: -2}]\nqueues: []\n", "node a: gpus", id="negative gpus"),
        pytest.param("nodes: [{name: a}]\nqueues: [{name: q, gpu: {quota: -5}}]\n", "queue q: gpu.quota",
                     id="negative quota"),
        pytest.param("nodes: [{name: a}]\nqueues: [{name: q}]\njobs: [{name: j, queue: q, gpus: 1.7}]\n",
                     "job j: gpus", id="fraction above one"),
        pytest.param("nodes: [{name: a}]\nqueues: [{name: q}]\njobs: [{name: j, queue: q, gpus: abc}]\n",
                     "job j: gpus", id="gpus not a number"),
        pytest.param("nodes: [{name: a}]\nqueues: [{name: q}]\njobs: [{name: j, queue: q, pods: 2, min_member: 3}]\n",
                     "job j: min_member", id="min above pods"),
        pytest.param("nodes: [{name: a}]\nqueues: [{name: q}]\njobs: [{name: j, queue: q, running_on: [zz]}]\n",
                     "unknown node 'zz'", id="running on unknown node"),
    ],
)
def test_bad_files_give_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                       message: str) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(content)
    code, _out, err = run(capsys, "cycle", str(f))
    assert code == 2
    assert message in err and str(f) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_missing_queue_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("nodes: [{name: a, gpus: 1}]\nqueues: [{name: q}]\njobs: [{name: j, queue: nope, gpus: 1}]\n")
    code, out, _ = run(capsys, "cycle", str(f), "--json")
    assert code == 0
    assert json.loads(out)["pending"][0]["reasons"] == ["QueueDoesNotExist"]

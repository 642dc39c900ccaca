"""Loaders: good files parse into the right units; bad rows fail with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.sim.errors import SimInputError
from shoal.sim.loaders.jobs import load_jobs
from shoal.sim.loaders.nodes import load_nodes
from shoal.sim.loaders.queues import load_queues
from shoal.sim.loaders.traces import TraceOptions, load_philly, load_pollux
from shoal.sim.scenario import load_scenario
from shoal.sim.schedconf import load_config

DATA = Path(__file__).parent / "data"
JOBS_HEADER = "name,arrival,duration,queue,gpus,pods\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        pytest.param(
            "j.csv",
            JOBS_HEADER + "a,0,10,q,1,1\nb,5,-3,q,1,1\n",
            r"j\.csv:3: duration",
            id="jobs csv: negative duration names line 3",
        ),
        pytest.param(
            "j.csv",
            JOBS_HEADER + "a,0,10,q,1.5,1\n",
            r"j\.csv:2: gpus: a pod asks for whole",
            id="jobs csv: 1.5 GPUs per pod",
        ),
        pytest.param(
            "j.csv",
            JOBS_HEADER + "a,zero,10,q,1,1\n",
            r"j\.csv:2: arrival: expected a number",
            id="jobs csv: arrival not a number",
        ),
        pytest.param(
            "j.csv",
            "name,arrival,duration,queue\n",
            r"j\.csv:1: missing column\(s\) gpus",
            id="jobs csv: missing column",
        ),
        pytest.param(
            "j.csv",
            JOBS_HEADER + "a,0,10,q,1,1\na,1,10,q,1,1\n",
            r"duplicate job name 'a'",
            id="jobs csv: duplicate name",
        ),
        pytest.param(
            "j.yaml",
            "jobs:\n- {name: a, arrival: 0, duration: 5, queue: q, gpus: 1}\n"
            "- {name: b, arrival: 0, duration: 5, queue: q, gpus: 1, priority_class: gold}\n",
            r"j\.yaml:3: priority_class: unknown 'gold'",
            id="jobs yaml: unknown priority class, line 3",
        ),
        pytest.param(
            "j.yaml",
            "jobs:\n- {name: a, arrival: 0, duration: 5, queue: q, gpus: 1, colour: red}\n",
            r"j\.yaml:2: unknown field\(s\) colour",
            id="jobs yaml: unknown field",
        ),
        pytest.param("j.yaml", "jobs: [\n", r"j\.yaml:\d+: invalid YAML", id="jobs yaml: syntax error"),
    ],
)
def test_bad_job_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(SimInputError, match=message):
        load_jobs(_write(tmp_path, name, text))


def test_job_files_parse_units(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "j.csv",
        "name,arrival,duration,queue,gpus,pods,cpu,memory,priority_class\n"
        "a,1h,30m,q,0.5,1,500m,2Gi,build\nb,10,60,q,4,3,8,64Gi,train\n",
    )
    a, b = load_jobs(p)
    assert (a.arrival, a.duration, a.gpu_milli, a.cpu_milli, a.memory, a.preemptible) == (
        3600.0,
        1800.0,
        500,
        500,
        2 * 1024**3,
        False,
    )
    assert (b.pods, b.gpu_milli, b.total_gpu_milli, b.preemptible) == (3, 4000, 12000, True)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        pytest.param(
            "n.csv",
            "name,cpu,memory,gpus\nn1,8,64Gi,4\nn2,8,lots,4\n",
            r"n\.csv:3: memory",
            id="nodes csv: bad memory quantity on line 3",
        ),
        pytest.param(
            "n.csv",
            "name,cpu,memory,gpus\nn1,8,64Gi,4\nn1,8,64Gi,4\n",
            r"duplicate node name 'n1'",
            id="nodes csv: duplicate name",
        ),
        pytest.param(
            "n.yaml",
            "- {name: a, cpu: 8, memory: 1Gi, gpus: 2}\n- {name: b, cpu: 8, gpus: -1}\n",
            r"n\.yaml:2: gpus: must be >= 0",
            id="nodes yaml: negative GPUs on line 2",
        ),
        pytest.param(
            "n.yaml", "- {name: a, cpu: 8, count: 0}\n", r"n\.yaml:1: count", id="nodes yaml: count 0"
        ),
    ],
)
def test_bad_node_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(SimInputError, match=message):
        load_nodes(_write(tmp_path, name, text))


def test_node_templates_and_openb_node_list(tmp_path: Path) -> None:
    y = _write(
        tmp_path,
        "n.yaml",
        "nodes:\n- {name: g, count: 3, cpu: 16, memory: 128Gi, gpus: 8, "
        "gpu_model: A100, labels: {rack: 'r{rack}'}, nodes_per_rack: 2}\n",
    )
    nodes = load_nodes(y)
    assert [n.name for n in nodes] == ["g-0", "g-1", "g-2"]
    assert [n.labels["rack"] for n in nodes] == ["r0", "r0", "r1"]
    assert (
        nodes[0].allocatable["cpu"] == 16000 and nodes[0].gpu_count == 8 and nodes[0].gpu_memory_mib == 40900
    )
    c = _write(tmp_path, "o.csv", "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0001,96000,786432,8,G2\n")
    (o,) = load_nodes(c)
    assert (o.allocatable["cpu"], o.allocatable["memory"], o.gpu_count) == (96000, 786432 * 1024**2, 8)


def test_queue_crd_units(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "q.yaml",
        """\
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: dept}
spec:
  resources: {gpu: {quota: 10, limit: -1, overQuotaWeight: 2}, cpu: {quota: 4000}, memory: {quota: 1000}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team}
spec: {parentQueue: dept, priority: 150, reclaimMinRuntime: 10m,
       resources: {gpu: {quota: 2.5, limit: 4}}}
""",
    )
    dept, team = load_queues(p)
    assert (dept.gpu.quota, dept.gpu.over_quota_weight, dept.cpu.quota, dept.memory.quota) == (
        10000,
        2,
        4000,
        10**9,
    )
    assert (team.parent, team.priority, team.gpu.quota, team.gpu.limit, team.reclaim_min_runtime) == (
        "dept",
        150,
        2500,
        4000,
        600.0,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "kind: Queue\nmetadata: {name: a}\nspec: {resources: {gpu: {quota: -2}}}\n",
            r"q\.yaml:1: spec\.resources\.gpu\.quota: -2 is negative \(use -1 for unlimited\)",
            id="quota -2",
        ),
        pytest.param(
            "kind: Queue\nmetadata: {name: a}\nspec: {parentQueue: nope, resources: {}}\n",
            r"parentQueue 'nope' does not exist",
            id="missing parent",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Queue\nmetadata: {name: a}\nspec: {}\n",
            r"apiVersion: expected",
            id="wrong apiVersion",
        ),
        pytest.param("kind: Queue\nmetadata: {}\nspec: {}\n", r"metadata\.name: missing", id="no name"),
    ],
)
def test_bad_queue_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SimInputError, match=message):
        load_queues(_write(tmp_path, "q.yaml", text))


def test_philly_rows_become_gangs_in_their_vc_queue(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "philly.csv",
        PHILLY_HEADER + "2017-10-01 00:10:00,100.0,16,1600.0,vcA\n"
        "2017-10-01 00:00:00,50.0,1,50.0,vcB\n2017-10-02 00:00:00,50.0,1,50.0,vcB\n",
    )
    jobs = load_philly(
        p,
        TraceOptions(max_gpus_per_pod=8, start="2017-10-01", end="2017-10-02", queue_map={"vcA": "research"}),
    )
    assert [(j.queue, j.arrival, j.pods, j.gpu_milli) for j in jobs] == [
        ("vcB", 0.0, 1, 1000),
        ("research", 600.0, 2, 8000),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        pytest.param("2017-13-01 00:00:00,5,1,5,vc", r"philly\.csv:2: timestamp", id="bad timestamp"),
        pytest.param("2017-10-01 00:00:00,5,1.5,5,vc", r"philly\.csv:2: num_gpus", id="fractional GPUs"),
        pytest.param("2017-10-01 00:00:00,x,1,5,vc", r"philly\.csv:2: duration", id="duration not a number"),
    ],
)
def test_bad_philly_rows(tmp_path: Path, row: str, message: str) -> None:
    with pytest.raises(SimInputError, match=message):
        load_philly(_write(tmp_path, "philly.csv", PHILLY_HEADER + row + "\n"), TraceOptions())


def test_pollux_workload_needs_a_duration_per_application(tmp_path: Path) -> None:
    text = "name,time,application,num_replicas,batch_size\nj0,10,cifar10,4,128\nj1,20,gpt9,2,64\n"
    p = _write(tmp_path, "w.csv", text)
    with pytest.raises(SimInputError, match=r"w\.csv:3: application: no duration for 'gpt9'"):
        load_pollux(p, TraceOptions(), "q")
    jobs = load_pollux(p, TraceOptions(durations={"gpt9": 60.0}), "q")
    assert [(j.name, j.duration, j.gpu_milli) for j in jobs] == [("j0", 1800.0, 4000), ("j1", 60.0, 2000)]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(
            ("source: jobs", "source: kafka"),
            r"s\.yaml:14: workload\.source: expected one of",
            id="unknown source",
        ),
        pytest.param(
            ("cycle_interval: 10s", "cycle_interval: soon"),
            r"s\.yaml:17: simulation\.cycle_interval: expected a number",
            id="bad duration",
        ),
        pytest.param(
            ("name: small", "name: small\nflavour: x"),
            r"unknown top-level field\(s\) flavour",
            id="unknown key",
        ),
        pytest.param(
            ("{name: beta,", "{name: gamma,"),
            r"job queue\(s\) beta are not leaf queues",
            id="jobs name a queue that does not exist",
        ),
    ],
)
def test_bad_scenarios(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    text = (DATA / "small.yaml").read_text()
    assert edit[0] in text
    _write(tmp_path, "small-jobs.csv", (DATA / "small-jobs.csv").read_text())
    with pytest.raises(SimInputError, match=message):
        load_scenario(_write(tmp_path, "s.yaml", text.replace(edit[0], edit[1])))


def test_scheduler_config_shortcuts(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "c.yaml",
        "placementStrategy: {gpu: spread}\nkValue: 0.5\n"
        "usageDBConfig: {usageParams: {halfLifePeriod: 2h, windowSize: 1w}}\n"
        "simulator: {queueLimitsFromQuota: true}\n",
    )
    c = load_config(p)
    names = [pl.name for pl in c.core.plugins]
    assert "gpuspread" in names and "gpupack" not in names and "consolidation" not in c.core.actions
    assert "gpusharingorder" not in names  # KAI's operator keeps it only under GPU binpack
    cpu_only = load_config(_write(tmp_path, "cpu.yaml", "placementStrategy: {cpu: spread}\n"))
    cpu_names = [pl.name for pl in cpu_only.core.plugins]
    assert "gpupack" in cpu_names and "gpusharingorder" in cpu_names and "consolidation" not in cpu_only.core.actions
    assert c.core.plugin("nodeplacement").arguments["gpu"] == "spread"  # type: ignore[union-attr]
    assert c.core.plugin("proportion").arguments["kValue"] == "0.5"  # type: ignore[union-attr]
    assert c.usage is not None
    assert (c.usage.half_life, c.usage.window, c.usage.window_type, c.limits_from_quota, c.name) == (
        7200.0, 604800.0, "sliding", True, "c")
    bad = _write(tmp_path, "b.yaml", "actions: allocate, teleport\n")
    with pytest.raises(SimInputError, match=r"b\.yaml: actions: unknown action\(s\) teleport"):
        load_config(bad)


def test_openb_pods_become_one_pod_jobs_with_fractions(tmp_path: Path) -> None:
    from shoal.sim.loaders.traces import load_openb

    header = (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
    )
    p = _write(
        tmp_path,
        "openb_pod_list_x.csv",
        header
        + "openb-pod-0001,4000,8192,1,470,,LS,Running,100,700,101\n"
        + "openb-pod-0002,8000,16384,2,1000,,BE,Pending,50,,\n",
    )
    jobs = load_openb(p, TraceOptions(queue_map={"BE": "batch"}, default_duration=900.0), "online")
    assert [(j.name, j.arrival, j.duration, j.gpu_milli, j.queue) for j in jobs] == [
        ("openb-pod-0002", 50.0, 900.0, 2000, "batch"),
        ("openb-pod-0001", 100.0, 600.0, 470, "online"),
    ]
    bad = _write(tmp_path, "bad.csv", header + "openb-pod-0001,4000,8192,2,470,,LS,Running,1,2,1\n")
    with pytest.raises(SimInputError, match=r"bad\.csv:2: a 2-GPU pod must request whole GPUs"):
        load_openb(bad, TraceOptions(), "q")
